"""Where hf2gguf writes, as a new user meets it: ``-o`` naming a folder, ``""`` or ``-``; a missing or read-only
folder reported before any work; a mistyped template placeholder answered with the outtype this draft resolves
to; ``.partial`` files of killed conversions cleaned up; a draft passed as the target named as such; and verify's
messages about its folders and numbers. Each: exact line, exit code, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_inputs_kit import listing
from cli_kit import refused, run
from conftest import FIXTURES, TARGET

from dspark_convert.hf2gguf.destination import stale_partials

DRAFT = FIXTURES / "dspark-qwen3"


# ------------------------------------------------------------------------------------------- -o
@pytest.mark.parametrize("name", ["adir", "adir/"])
@pytest.mark.parametrize("force", [False, True])
def test_existing_folder_as_outfile(tmp_path: Path, name: str, force: bool) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "keep.txt").write_text("x")
    r = run("hf2gguf", DRAFT, "-t", TARGET, "-o", name, *(["--force"] if force else []), cwd=tmp_path)
    refused(r, "adir: is a folder, expected a file name (e.g. adir/draft.gguf)")
    assert listing(tmp_path) == ["adir"] and listing(tmp_path / "adir") == ["keep.txt"]


def test_empty_outfile(tmp_path: Path) -> None:
    refused(run("hf2gguf", DRAFT, "-t", TARGET, "-o", "", cwd=tmp_path),
            "-o '': the output file name is empty; give a file name, e.g. -o draft.gguf")
    assert listing(tmp_path) == []


def test_dash_outfile_is_not_stdout(tmp_path: Path) -> None:
    refused(run("hf2gguf", DRAFT, "-t", TARGET, "-o", "-", cwd=tmp_path),
            "-o -: a GGUF file is not streamed to stdout; give a file name, e.g. -o draft.gguf")
    assert listing(tmp_path) == []


def test_missing_folder_is_reported_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub repo that is not in the (empty) cache, offline: the folder is the one line, not the download."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    refused(run("hf2gguf", "someorg/never-downloaded", "-t", "someorg/target", "-o", "nope/x.gguf", cwd=tmp_path),
            "nope: output folder does not exist")
    assert listing(tmp_path) == []


def _read_only_mount() -> Path | None:
    for line in Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").is_file() else []:
        mount, options = line.split()[1], line.split()[3].split(",")
        if "ro" in options and Path(mount).is_dir() and not os.access(mount, os.W_OK):
            return Path(mount)
    return None


ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0
RO_MOUNT = _read_only_mount() if ROOT_USER else None


@pytest.mark.skipif(ROOT_USER and RO_MOUNT is None, reason="running as root (permissions do not apply) and no "
                                                           "read-only mount to write to")
def test_read_only_folder_is_reported_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real folder this process cannot write: chmod 555 for a normal user; a read-only mount for root."""
    if RO_MOUNT is not None:
        folder = RO_MOUNT
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = f"{folder}: output folder is not writable (no write permission, or a read-only file system)"
    refused(run("hf2gguf", "someorg/never-downloaded", "-t", "someorg/target", "-o", folder / "x.gguf"), line)
    # the default name goes to the current folder: checked the same way
    refused(run("hf2gguf", "someorg/never-downloaded", "-t", "someorg/target", cwd=folder), line)
    if RO_MOUNT is None:
        folder.chmod(0o755)


@pytest.mark.parametrize("draft, outtype, ftype", [("dspark-qwen3", "auto", "BF16"), ("dspark-qwen3-f32", "auto", "F16"),
                                                    ("dspark-qwen3", "q8_0", "Q8_0")])
def test_template_typo_suggests_the_resolved_outtype(tmp_path: Path, draft: str, outtype: str, ftype: str) -> None:
    refused(run("hf2gguf", FIXTURES / draft, "-t", TARGET, "-o", "d-{ftpye}.gguf", "--outtype", outtype, cwd=tmp_path),
            f"-o d-{{ftpye}}.gguf: unknown placeholder {{ftpye}}; use {{ftype}} ({ftype}) or {{outtype}} "
            f"({ftype.lower()})")
    assert listing(tmp_path) == []


# ------------------------------------------------------------------------------------------- stale .partial files
def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(p.stdout)


def test_partial_of_a_killed_conversion_is_removed_by_the_next(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getppid()
    stale = tmp_path / f".draft.gguf.{dead}.0badc0de.partial"
    kept = [tmp_path / f".draft.gguf.{live}.0123abcd.partial",      # its writer may still be running
            tmp_path / f".other.gguf.{dead}.0badc0de.partial",      # another destination
            tmp_path / f".draft.gguf.{dead}.nothex00.partial"]      # not a name the writer makes
    for p in [stale, *kept]:
        p.write_bytes(b"GGUF partial")
    assert stale_partials(tmp_path / "draft.gguf") == [stale]
    r = run("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "draft.gguf", "--json")
    assert r.exit_code == 0, r.output
    assert listing(tmp_path) == sorted(["draft.gguf", *(p.name for p in kept)])
    notes = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "stale-partial-removed"]
    assert notes == [{"level": "note", "subject": str(tmp_path / "draft.gguf"), "rule": "stale-partial-removed",
                      "message": f"{stale}: removed, a temporary file left by an earlier conversion to the same "
                                 f"destination that was killed (process {dead})"}]


def test_own_pid_partial_is_stale_unless_being_written(tmp_path: Path) -> None:
    """A container restart reuses pids: a partial file with this process's pid that this process is not writing
    is stale too."""
    mine = tmp_path / f".draft.gguf.{os.getpid()}.00000000.partial"
    mine.write_bytes(b"x")
    assert stale_partials(tmp_path / "draft.gguf") == [mine]


def test_sigkilled_conversion_leaves_a_partial_the_next_one_removes(tmp_path: Path) -> None:
    """The real thing: a conversion process killed with SIGKILL mid-write, then a normal conversion."""
    out = tmp_path / "draft.gguf"
    proc = _held_conversion(out)
    try:
        left = [p for p in listing(tmp_path) if p.endswith(".partial")]
        assert left and left[0].startswith(f".draft.gguf.{proc.pid}.")
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert listing(tmp_path) == left
    r = run("hf2gguf", DRAFT, "-t", TARGET, "-o", out)
    assert r.exit_code == 0, r.output
    assert listing(tmp_path) == ["draft.gguf"]
    assert f"note: {tmp_path / left[0]}: removed, a temporary file left by an earlier conversion" in r.stdout


def _held_conversion(out: Path) -> subprocess.Popen:
    """A conversion process to ``out`` held inside its write (its partial file exists)."""
    child = ("import sys, time, dspark_convert.render as r\n"
             "from contextlib import contextmanager\n"
             "@contextmanager\n"
             "def hold(enabled, description):\n"
             "    def update(done, total):\n"
             "        print('writing', flush=True); time.sleep(60)\n"
             "    yield update\n"
             "r.byte_progress = hold\n"
             "from dspark_convert.cli import main\n"
             "sys.argv = ['dspark-convert', *sys.argv[1:]]\n"
             "main()\n")
    proc = subprocess.Popen([sys.executable, "-c", child, "hf2gguf", str(DRAFT), "-t", str(TARGET), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    return proc


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="zombie and start-time checks read Linux's /proc")
def test_every_stale_partial_goes_in_one_run_killed_unreaped_and_reused_pids(tmp_path: Path) -> None:
    """Issue 37, bug 16: two conversions SIGKILLed by a supervisor that has not reaped them yet (zombies: their
    pids still answer ``kill(pid, 0)``) and a partial file whose pid now belongs to a process started after the
    file was written: the next conversion removes all three, each with its note; a live writer's file stays."""
    out = tmp_path / "draft.gguf"
    killed = [_held_conversion(out) for _ in range(2)]
    live = _held_conversion(out)
    reused = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for proc in killed:
            proc.kill()
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
        for _ in range(200):  # until both are zombies (killed, not reaped: no wait() yet)
            states = [Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] for p in killed]
            if states == ["Z", "Z"]:
                break
            time.sleep(0.05)
        assert states == ["Z", "Z"]
        old = tmp_path / f".draft.gguf.{reused.pid}.5eed5eed.partial"
        old.write_bytes(b"left by a process whose pid was reused")
        os.utime(old, (time.time() - 3600, time.time() - 3600))
        partials = {p: tmp_path / n for p in (*killed, live) for n in listing(tmp_path) if f".{p.pid}." in n}
        stale = sorted([partials[killed[0]], partials[killed[1]], old])
        assert stale_partials(out) == stale
        r = run("hf2gguf", DRAFT, "-t", TARGET, "-o", out, "--force")
        assert r.exit_code == 0, r.output
        assert listing(tmp_path) == sorted(["draft.gguf", partials[live].name])
        removed = [line for line in r.stdout.splitlines() if "removed, a temporary file left by" in line]
        assert len(removed) == 3 and all(any(str(s) in line for line in removed) for s in stale)
    finally:
        for proc in (*killed, live, reused):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------------------- wrong folders
@pytest.mark.parametrize("draft_as_target, arch", [("dflash-zlab", "DFlashDraftModel"), ("dspark-qwen3", "Qwen3DSparkModel")])
def test_draft_folder_as_target_is_named_a_draft(tmp_path: Path, draft_as_target: str, arch: str) -> None:
    refused(run("hf2gguf", DRAFT, "-t", FIXTURES / draft_as_target, "-o", tmp_path / "x.gguf"),
            f"{FIXTURES / draft_as_target}: is a draft checkpoint ({arch}), not a target model; pass the target "
            "model the draft was trained for as --target-model-dir")
    assert listing(tmp_path) == []


def test_eagle3_llama_class_is_still_a_valid_target(tmp_path: Path) -> None:
    """LlamaForCausalLM names some EAGLE-3 drafts and also real targets: it is accepted as a target (its 512-token
    vocabulary is not the draft's, a fit error that --ignore-target-mismatch lifts; tests/check/test_fit_conversion.py)."""
    r = run("hf2gguf", FIXTURES / "dflash-zlab", "-t", FIXTURES / "target-llama2-spm", "-o", tmp_path / "x.gguf",
            "--ignore-target-mismatch")
    assert r.exit_code == 0, r.output


VERIFY_TARGET = "the target model's folder, whose token embeddings and lm_head verify reads"


@pytest.mark.parametrize("flag, value, line", [
    ("--context", "0", "--context 0: expected at least 1"),
    ("--steps", "0", "--steps 0: expected at least 1"),
    ("--context", "100000000", "--context 100000000: expected at most 1024 (the longest case has 4 x context "
                               "positions, and the attention memory grows with its square)"),
    ("--steps", "1000", "--steps 1000: expected at most 64"),
    ("--seed", "-1", "--seed -1: expected an integer in [0, 4294967295] (numpy's seed range)"),
    ("-t", "{tmp}", "{tmp}: no safetensors files; --target-model-dir must be " + VERIFY_TARGET),
    ("-t", "{tmp}/nope", "{tmp}/nope: no such folder; --target-model-dir must be " + VERIFY_TARGET),
    ("-t", str(DRAFT), f"{DRAFT}: is a draft checkpoint (Qwen3DSparkModel), not a target model; pass the target model "
                       "the draft was trained for as --target-model-dir"),
    ("--hf", "{tmp}", "{tmp}: no safetensors files; --hf must be the draft's Hugging Face folder, with config.json and "
                      "safetensors"),
])
def test_verify_names_the_folder_and_the_number_at_fault(tmp_path: Path, flag: str, value: str, line: str) -> None:
    args = {"--hf": str(DRAFT), "-t": str(TARGET), flag: value.format(tmp=tmp_path)}
    r = run("verify", tmp_path / "x.gguf", *[x for kv in args.items() for x in kv])
    refused(r, line.format(tmp=tmp_path))
    assert listing(tmp_path) == []


# ------------------------------------------------------------------------------------------- issue 24.10 / 24.11
def test_missing_folder_with_trailing_slash(tmp_path: Path) -> None:
    """24.10: ``-o nosuch/`` is a missing folder, not "is a folder"."""
    for extra in ([], ["--dry-run"]):
        refused(run("hf2gguf", DRAFT, "-t", TARGET, "-o", "nosuch/", *extra, cwd=tmp_path),
                "nosuch/: no such folder (and -o takes a file name, e.g. nosuch/draft.gguf)")
    assert listing(tmp_path) == []


@pytest.mark.parametrize(("setup", "name", "line"), [
    ("exists", "d.gguf", "d.gguf: already exists (pass --force to overwrite it)"),
    ("exists", "d-{ftype}.gguf", "d-BF16.gguf: already exists (pass --force to overwrite it)"),
    ("none", "missing/d.gguf", "missing: output folder does not exist"),
], ids=["existing-file", "existing-file-from-template", "missing-folder"])
def test_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, setup: str, name: str, line: str) -> None:
    """24.11: the dry run makes the real run's destination checks (it used to say `would write ...`)."""
    if setup == "exists":
        (tmp_path / name.replace("{ftype}", "BF16")).write_bytes(b"keep")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    for extra in (["--dry-run"], []):
        refused(run("hf2gguf", DRAFT, "-t", TARGET, "-o", name, *extra, cwd=tmp_path), line)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    forced = run("hf2gguf", DRAFT, "-t", TARGET, "-o", name, "--dry-run", "--force", cwd=tmp_path)
    assert (forced.exit_code == 0) == (setup == "exists"), forced.stderr
