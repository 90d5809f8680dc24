"""Standard output that goes away (issue 24 bugs 5 and 6): a closed pipe (``| head -1``) does not change the
verdict, the command exits with its own code; a stdout that cannot be written (``>/dev/full``) is one ``error:``
line and exit 2, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, TARGET

from dspark_convert import convert
from dspark_convert.cli import main


@pytest.fixture(scope="module")
def draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("streams") / "dspark-draft.gguf"  # a name -hf finds: no name warning on stderr
    convert(FIXTURES / "dspark-qwen3", TARGET, out)
    return out


@pytest.fixture(scope="module")
def llama_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A draft that does not fit target-qwen3 (a Llama-2 vocabulary): ``check --target`` exits 1."""
    out = tmp_path_factory.mktemp("streams") / "llama.gguf"
    convert(FIXTURES / "dspark-qwen3", FIXTURES / "target-llama2-spm", out, ignore_target_mismatch=True)
    return out


class ClosedPipe(io.TextIOBase):
    """A stdout whose reader has gone: every write and flush fails with EPIPE, as after ``| head -1``."""

    def __init__(self) -> None:
        self.attempts = 0

    def write(self, s: str) -> int:
        self.attempts += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False


def run_main(monkeypatch: pytest.MonkeyPatch, stdout: object, *args: object) -> int:
    monkeypatch.setattr(sys, "argv", ["dspark-convert", *map(str, args)])
    monkeypatch.setattr(sys, "stdout", stdout)
    with pytest.raises(SystemExit) as e:
        main()
    return int(e.value.code or 0)


@pytest.mark.parametrize("which, args, code", [
    ("draft", ["check", "{f}", "--target", TARGET], 0),
    ("llama", ["check", "{f}", "--target", TARGET], 1),
    ("draft", ["check", "{f}", "--target", TARGET, "--json"], 0),
    ("draft", ["inspect", "{f}"], 0),
    ("draft", ["inspect", "{f}", "--json"], 0),
    ("draft", ["check", "{f}"], 0),
])
def test_a_closed_pipe_keeps_the_exit_code(which: str, args: list[object], code: int, draft: Path, llama_draft: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    f = draft if which == "draft" else llama_draft
    pipe = ClosedPipe()
    assert run_main(monkeypatch, pipe, *(f if a == "{f}" else a for a in args)) == code
    assert pipe.attempts >= 1 and capsys.readouterr().err == ""  # it tried to write once, then stayed quiet


class FullDisk(ClosedPipe):
    """A stdout on a full disk (``>/dev/full``): writes are buffered, the flush fails with ENOSPC."""

    def write(self, s: str) -> int:
        self.attempts += 1
        return len(s)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("args", [["inspect", "{f}"], ["check", "{f}", "--json"], ["check", "{f}", "--target", TARGET]])
@pytest.mark.parametrize("where", ["/dev/full", "buffered"])
def test_a_full_stdout_is_one_error_line(args: list[object], where: str, draft: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The real /dev/full (Linux, every CI machine here) and a stream failing only at its flush."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(where, "w")) if where == "/dev/full" else FullDisk()
        assert run_main(monkeypatch, out, *(draft if a == "{f}" else a for a in args)) == 2
    assert capsys.readouterr().err == f"error: cannot write to standard output: {os.strerror(errno.ENOSPC)}\n"


def test_head_closing_the_pipe_of_the_real_command(draft: Path) -> None:
    """The console script with its stdout's reader gone before it writes: exit 0, nothing on stderr."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone: the first write fails with EPIPE
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", "from dspark_convert.entry import main; main()", "check", str(draft),
                        "--target", str(TARGET)], stdout=w, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    os.close(w)
    assert (p.returncode, p.stderr) == (0, "")
