"""The conversion progress bar is for terminals only: nothing on a pipe or a file, nothing with --json.

On a terminal ``hf2gguf`` shows bytes, throughput and ETA on stderr (the last test is the control: it sees the
bar on a pseudo-terminal).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
CLI = [sys.executable, "-c", "from dspark_convert.cli import main; main()"]


def _no_progress(stderr: str) -> None:
    """Rich's bar would print its description, a carriage return per refresh and hide the cursor."""
    assert "converting" not in stderr and "\r" not in stderr and "\x1b[?25l" not in stderr, stderr
    # what may be there is one-line messages (e.g. the fixture tokenizer's pre-tokenizer warning)
    assert all(line.startswith(("warning:", "\x1b")) for line in stderr.splitlines()), stderr


def _args(out: Path, *extra: str) -> list[str]:
    return [*CLI, "hf2gguf", str(FIX / "dspark-qwen3"), "-t", str(FIX / "target-qwen3"), "-o", str(out),
            "--outtype", "q8_0", *extra]


@pytest.mark.parametrize("as_json", [False, True])
def test_no_progress_output_when_stderr_is_not_a_terminal(tmp_path: Path, as_json: bool) -> None:
    out = tmp_path / "draft.gguf"
    p = subprocess.run(_args(out, *(["--json"] if as_json else [])), capture_output=True, text=True, cwd=ROOT,
                       timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    _no_progress(p.stderr)
    if as_json:
        assert json.loads(p.stdout)["bytes_written"] == out.stat().st_size
    else:
        assert "wrote" in p.stdout and "converting" not in p.stdout


def _on_pty(args: list[str]) -> tuple[subprocess.CompletedProcess, str]:
    """Run with stderr on a pseudo-terminal; return the process and what it wrote there."""
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
        os.close(slave)
        slave = -1
        seen = b""
        os.set_blocking(master, False)
        try:
            while chunk := os.read(master, 65536):
                seen += chunk
        except OSError:  # nothing (more) to read; Linux raises EIO once the slave side is closed
            pass
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return p, seen.decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_no_progress_with_json_even_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "draft.gguf"
    p, seen = _on_pty(_args(out, "--json"))
    assert p.returncode == 0
    assert json.loads(p.stdout)["bytes_written"] == out.stat().st_size
    _no_progress(seen)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """The control for the two tests above: on a terminal the bar is drawn (Rich draws it when it starts)."""
    p, seen = _on_pty(_args(tmp_path / "draft.gguf"))
    assert p.returncode == 0
    assert "converting" in seen and "\x1b[?25l" in seen
