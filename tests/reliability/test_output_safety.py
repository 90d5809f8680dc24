"""No output is ever half-written: an existing file survives without --force, and an interrupted (SIGINT,
SIGTERM), failed (full disk, file size limit) or refused conversion leaves the destination folder exactly as it
was, with no ``*.partial`` temporary file. The signal tests run both in-process and against a real process, in
every phase of a conversion (start-up, planning, writing, printing), with the one-line, 130/143 rule.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_inputs_kit import FIX, TARGET, run_cli, run_convert

from dspark_convert import convert
from dspark_convert.errors import ConvertError, Interrupted
from dspark_convert.hf2gguf import writer as writer_mod

DRAFT = FIX / "dspark-qwen3"
OLD = b"GGUF-an-older-conversion-the-user-wants-to-keep"
ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry of ``folder`` (hidden ones too) with its bytes and mtime in ns."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def old_output(folder: Path, name: str = "draft.gguf") -> Path:
    """An existing output file with a fixed, distinctive mtime."""
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(OLD)
    os.utime(p, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    return p


@pytest.fixture(scope="module")
def reference_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The GGUF an uninterrupted conversion writes (what --force must put in place)."""
    out = tmp_path_factory.mktemp("ref") / "draft.gguf"
    convert(DRAFT, TARGET, out)
    return out.read_bytes()


def interrupt_after(folder: Path, calls: int, action: Callable[[], None]) -> tuple[Callable[[int, int], None], list[list[str]]]:
    """A progress callback that runs ``action`` on its ``calls``-th call, recording ``folder``'s listing then."""
    seen: list[list[str]] = []
    count = 0

    def progress(done: int, total: int) -> None:
        nonlocal count
        count += 1
        if count == calls:
            seen.append(sorted(p.name for p in folder.iterdir()))
            action()

    return progress, seen


# ------------------------------------------------------------------------------------------- no clobbering
def test_existing_output_is_kept_without_force(tmp_path: Path) -> None:
    old = old_output(tmp_path)
    before = snapshot(tmp_path)
    r = run_convert(DRAFT, TARGET, tmp_path)
    assert r.exit_code == 2 and r.error_lines == [f"error: {old}: already exists (pass --force to overwrite it)"]
    assert snapshot(tmp_path) == before
    with pytest.raises(ConvertError, match="already exists"):
        convert(DRAFT, TARGET, old)
    assert snapshot(tmp_path) == before


def test_existing_output_is_kept_with_a_name_template(tmp_path: Path) -> None:
    # the early check cannot expand {ftype} before the plan is known; the writer still refuses
    old = old_output(tmp_path, "draft-BF16.gguf")
    before = snapshot(tmp_path)
    r = run_cli(["hf2gguf", str(DRAFT), "-t", str(TARGET), "-o", str(tmp_path / "draft-{ftype}.gguf")], tmp_path)
    assert r.exit_code == 2 and r.error_lines == [f"error: {old}: already exists (pass --force to overwrite it)"]
    assert snapshot(tmp_path) == before


def test_force_replaces_the_file_completely(tmp_path: Path, reference_bytes: bytes) -> None:
    old_output(tmp_path)
    r = run_convert(DRAFT, TARGET, tmp_path, "--force")
    assert r.exit_code == 0, r.stderr
    assert snapshot(tmp_path).keys() == {"draft.gguf"}
    assert (tmp_path / "draft.gguf").read_bytes() == reference_bytes


def test_output_path_problems_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    r = run_cli(["hf2gguf", str(DRAFT), "-t", str(TARGET), "-o", str(tmp_path / "adir"), "--force"], tmp_path)
    assert r.exit_code == 2 and r.error_lines == [f"error: {tmp_path / 'adir'}: is a folder, expected a file name "
                                                  f"(e.g. {tmp_path / 'adir' / 'draft.gguf'})"]
    r = run_cli(["hf2gguf", str(DRAFT), "-t", str(TARGET), "-o", str(tmp_path / "nope" / "x.gguf")], tmp_path)
    assert r.exit_code == 2 and r.error_lines == [f"error: {tmp_path / 'nope'}: output folder does not exist"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_file_not_named_like_a_temp_file_is_left_alone(tmp_path: Path, reference_bytes: bytes) -> None:
    # a later run with the same pid (containers) must still work, and never deletes a file whose name the writer
    # does not make (stale temp files of killed runs: tests/cli/test_cli_destination.py)
    stale = tmp_path / f".draft.gguf.{os.getpid()}.partial"
    stale.write_bytes(b"left by a killed run")
    convert(DRAFT, TARGET, tmp_path / "draft.gguf")
    assert (tmp_path / "draft.gguf").read_bytes() == reference_bytes
    assert stale.read_bytes() == b"left by a killed run"


# ------------------------------------------------------------------------------------------- interrupts in-process
def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt


def _send_sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("force", [False, True], ids=["new-file", "force-over-old-file"])
@pytest.mark.parametrize(("action", "what"), [(_raise_keyboard_interrupt, "interrupted (SIGINT)"),
                                              (_send_sigterm, "terminated (SIGTERM)")], ids=["sigint", "sigterm"])
def test_interrupt_mid_write_leaves_destination_as_it_was(tmp_path: Path, force: bool, action: Callable[[], None],
                                                          what: str) -> None:
    if force:
        old_output(tmp_path)
    before = snapshot(tmp_path)
    progress, seen = interrupt_after(tmp_path, 10, action)
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info:  # a BaseException, like KeyboardInterrupt: never an input error
        convert(DRAFT, TARGET, tmp_path / "draft.gguf", force=force, progress=progress)
    assert str(info.value) == f"{tmp_path / 'draft.gguf'}: {what}; nothing was written (destination left as it was)"
    assert info.value.exit_code == (130 if "SIGINT" in what else 143)
    # the interrupt really came mid-write: the temp file existed then, next to the destination
    assert len(seen) == 1 and [n for n in seen[0] if n.endswith(".partial")] != []
    assert snapshot(tmp_path) == before
    assert signal.getsignal(signal.SIGTERM) is handler  # the writer's SIGTERM handler is uninstalled


# ------------------------------------------------------------------------------------------- full disk
class _Room:
    """Bytes the disk still takes: ``take(n)`` raises ``fail()`` once a write would exceed them (thread-safe)."""

    def __init__(self, room: int, fail: Callable[[], BaseException]) -> None:
        self._room, self._fail, self._lock = room, fail, threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            if n > self._room:
                raise self._fail()
            self._room -= n


class _FailingFile:
    """Wraps the writer's file object: its writes take from ``room`` (the header; the tensor data goes by pwrite)."""

    def __init__(self, f, room: _Room) -> None:  # type: ignore[no-untyped-def]
        self._f, self._room = f, room

    def write(self, b) -> int:  # type: ignore[no-untyped-def]
        self._room.take(memoryview(b).nbytes)
        return self._f.write(b)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._f, name)

    def __enter__(self) -> _FailingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def fail_writes_after(monkeypatch: pytest.MonkeyPatch, room: int, fail: Callable[[], BaseException]) -> None:
    """Make the writer's output file fail once ``room`` bytes are written: through the file object the writer opens
    with os.fdopen (header) or by os.pwrite (tensor data, on the conversion threads)."""
    real_fdopen, real_pwrite = os.fdopen, os.pwrite
    left = _Room(room, fail)

    def pwrite(fd: int, data, offset: int) -> int:  # type: ignore[no-untyped-def]
        left.take(memoryview(data).nbytes)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(writer_mod.os, "fdopen", lambda fd, *a, **k: _FailingFile(real_fdopen(fd, *a, **k), left))
    monkeypatch.setattr(writer_mod.os, "pwrite", pwrite)


def test_interrupt_in_the_chunk_writer_through_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_output(tmp_path)
    before = snapshot(tmp_path)
    fail_writes_after(monkeypatch, 60_000, KeyboardInterrupt)  # Ctrl-C while tensor data is being written
    r = run_convert(DRAFT, TARGET, tmp_path, "--force")
    assert r.exit_code == 130
    assert r.error_lines == [f"error: {tmp_path / 'draft.gguf'}: interrupted (SIGINT); nothing was written "
                             "(destination left as it was)"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("force", [False, True], ids=["new-file", "force-over-old-file"])
@pytest.mark.parametrize("room", [100, 60_000], ids=["in-header", "in-tensor-data"])
def test_full_disk_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: bool, room: int) -> None:
    if force:
        old_output(tmp_path)
    before = snapshot(tmp_path)
    fail_writes_after(monkeypatch, room, lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    r = run_convert(DRAFT, TARGET, tmp_path, *(["--force"] if force else []))
    assert r.exit_code == 2
    assert r.error_lines == [f"error: {tmp_path / 'draft.gguf'}: no space left on device while writing (No space left "
                             "on device); the partial file was removed and the destination left as it was"]
    assert snapshot(tmp_path) == before


def test_disk_full_at_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # delayed allocation: some file systems report ENOSPC only when the data is flushed
    before = snapshot(tmp_path)

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer_mod.os, "fsync", fsync)
    with pytest.raises(ConvertError, match="no space left on device"):
        convert(DRAFT, TARGET, tmp_path / "draft.gguf")
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------- real processes
# One interrupt rule everywhere (dspark_convert/entry.py): one line saying what was interrupted and that nothing
# was written, exit code 130 (SIGINT) or 143 (SIGTERM), never a traceback. The child runs the real console entry
# point with one hook (from outside the package) that announces a phase on stdout and then waits there, so the
# parent's signal always lands in that phase: while importing Typer (start-up), while planning, inside the write
# (the first written chunk), or while printing the summary after the file is complete.
CHILD = textwrap.dedent("""
    import importlib.abc, sys, time
    from contextlib import contextmanager

    def hold(phase):
        print(phase, flush=True)
        while True:
            time.sleep(0.05)

    phase = sys.argv[1]
    if phase == "start-up":
        class Hold(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "typer":
                    hold(phase)
        sys.meta_path.insert(0, Hold())
    elif phase == "planning":
        import dspark_convert.hf2gguf.conversion as conversion
        conversion.plan_conversion = lambda *a, **k: hold(phase)
    elif phase == "writing":
        import dspark_convert.render as render

        @contextmanager
        def waiting_progress(enabled, description):
            yield lambda done, total: hold(phase)
        render.byte_progress = waiting_progress
    elif phase == "printing":
        import dspark_convert.render as render
        render.render_conversion = lambda result, console: hold(phase)
    sys.argv = ["dspark-convert", "hf2gguf", *sys.argv[2:]]
    from dspark_convert.entry import main
    main()
""")


def _child(phase: str, out: Path, *extra: str, **kw: object) -> subprocess.Popen:
    args = [sys.executable, "-c", CHILD, phase, str(DRAFT), "-t", str(TARGET), "-o", str(out), *extra]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _signal_in(phase: str, out: Path, sig: signal.Signals, *extra: str) -> tuple[int, str]:
    """Run a conversion, send ``sig`` once it reaches ``phase``; return (exit code, stderr)."""
    proc = _child(phase, out, *extra)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the child is in the phase
        assert line == f"{phase}\n", proc.stderr.read() if proc.stderr else ""
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


SIGNALS = pytest.mark.parametrize(("sig", "what", "code"), [(signal.SIGINT, "interrupted (SIGINT)", 130),
                                                            (signal.SIGTERM, "terminated (SIGTERM)", 143)],
                                  ids=["sigint", "sigterm"])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@SIGNALS
@pytest.mark.parametrize("phase", ["start-up", "planning", "writing", "printing"])
def test_one_interrupt_rule_in_every_phase(tmp_path: Path, phase: str, sig: signal.Signals, what: str,
                                           code: int) -> None:
    old_output(tmp_path)
    before = snapshot(tmp_path)
    out = tmp_path / "draft.gguf"
    rc, err = _signal_in(phase, out, sig, "--force")
    expected = {
        "start-up": f"error: {what} while starting; nothing was written",
        "planning": f"error: {what} while converting {DRAFT}, before writing; nothing was written",
        "writing": f"error: {out}: {what}; nothing was written (destination left as it was)",
        "printing": f"error: {what} after {out} was written in full",
    }[phase]
    assert (rc, err) == (code, expected + "\n")
    if phase == "printing":  # the file is complete and in place; no temporary file is left
        assert sorted(snapshot(tmp_path)) == ["draft.gguf"] and out.read_bytes() != OLD
        assert out.read_bytes()[:4] == b"GGUF"
    else:
        assert snapshot(tmp_path) == before


POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and resource limits")


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))  # the GGUF is ~235 kB


@POSIX_ONLY
def test_real_file_size_limit_leaves_nothing(tmp_path: Path) -> None:
    # a real write failure from the kernel (EFBIG: RLIMIT_FSIZE; Python ignores SIGXFSZ), no monkeypatching
    before = snapshot(tmp_path)
    proc = _child("plain", tmp_path / "draft.gguf", preexec_fn=_limit_file_size)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {tmp_path / 'draft.gguf'}: cannot write (File too large); the destination was left "
                      "as it was"]
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------- the commit step by step
def _trace_commit(at_step: Callable[[object], bool]) -> None:
    """Install a tracer that calls ``at_step(frame)`` on every line from the writer's fsync on: the commit
    (destination.commit and the renameat2 call), the rest of write_plan, and the conversion's lines up to its
    return. When ``at_step`` returns True, Interrupted(SIGINT) is raised at that line, as a signal handler would
    raise it there. Tracing stops at the first exception (the handlers are not a step of the commit)."""
    from dspark_convert.hf2gguf import atomic, conversion, destination

    write_plan = writer_mod.write_atomically.__code__  # the commit lives in write_atomically (write_plan's body)
    lines = Path(atomic.__file__).read_text().splitlines()
    start = next(i + 1 for i, ln in enumerate(lines) if "size, ours = " in ln)
    codes = {write_plan, writer_mod.write_plan.__code__, destination.commit.__code__, destination._renameat2_noreplace.__code__,
             conversion._convert.__code__, conversion.convert.__code__}
    state = {"on": True, "reached": False}

    def local(frame, event, arg):  # type: ignore[no-untyped-def]
        if not state["on"]:
            return None
        if event == "exception":
            state["on"] = False
        elif event == "line":
            if frame.f_code is write_plan and frame.f_lineno >= start:
                state["reached"] = True
            if state["reached"] and at_step(frame):
                state["on"] = False
                raise Interrupted(signal.SIGINT)
        return local

    def glob(frame, event, arg):  # type: ignore[no-untyped-def]
        return local if frame.f_code in codes else None

    sys.settrace(glob)


@pytest.mark.parametrize("mode", ["force-over-old", "no-force-renameat2", "no-force-link"])
def test_interrupt_at_every_step_of_the_commit_tells_the_truth(tmp_path: Path, mode: str, reference_bytes: bytes,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24.1: SIGINT injected at each line of the commit in turn (before, between and after the rename /
    link / unlink): the message says "written in full" exactly when the destination holds the new file, and
    "nothing was written" exactly when it holds what it held before; no temporary file is ever left."""
    from dspark_convert.hf2gguf import destination

    if mode == "no-force-link":
        monkeypatch.setattr(destination, "_renameat2_noreplace", lambda src, dst: None)
    force = mode.startswith("force")
    outcomes: list[str] = []
    k = 0
    while True:
        k += 1
        folder = tmp_path / f"run{k}"
        folder.mkdir()
        out = folder / "draft.gguf"
        before = old_output(folder).read_bytes() if force else None
        seen = [0]

        def at_step(frame: object, k: int = k, seen: list[int] = seen) -> bool:
            seen[0] += 1
            return seen[0] == k

        _trace_commit(at_step)
        try:
            convert(DRAFT, TARGET, out, force=force)
        except Interrupted as e:
            sys.settrace(None)
            assert e.message, k
            now = out.read_bytes() if out.exists() else None
            if now == reference_bytes:
                assert e.message == f"{out}: interrupted (SIGINT) after the file was complete; it was written in full"
                outcomes.append("new")
            else:
                assert now == before, f"step {k}: destination is neither old nor new"
                assert e.message == f"{out}: interrupted (SIGINT); nothing was written (destination left as it was)"
                outcomes.append("old")
            assert sorted(p.name for p in folder.iterdir()) == (["draft.gguf"] if now is not None else []), k
        else:
            sys.settrace(None)
            assert out.read_bytes() == reference_bytes
            break
        assert k < 200
    # the injection reached both sides of the commit, and the switch happens once
    assert outcomes[0] == "old" and outcomes[-1] == "new" and "old" not in outcomes[outcomes.index("new"):], outcomes


@pytest.mark.parametrize("link", [False, True], ids=["renameat2", "link"])
def test_file_appearing_during_conversion_is_not_clobbered(tmp_path: Path, link: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25.1: the existence check at the start is not the commit: a file created at the destination while
    converting (here: by the progress callback, as a second conversion would) survives, with one line."""
    from dspark_convert.hf2gguf import destination

    if link:
        monkeypatch.setattr(destination, "_renameat2_noreplace", lambda src, dst: None)
    out = tmp_path / "draft.gguf"

    def progress(done: int, total: int) -> None:
        if not out.exists():
            out.write_bytes(OLD)

    with pytest.raises(ConvertError) as info:
        convert(DRAFT, TARGET, out, progress=progress)
    assert str(info.value) == (f"{out}: a file appeared there while converting (another conversion to the same "
                               "destination?); it was not overwritten (pass --force to replace it) and the new file "
                               "was removed")
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft.gguf"]

