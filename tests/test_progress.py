"""The conversion progress bar is for terminals only: nothing on a pipe or a file, nothing with --json.

(On a terminal ``hf2gguf`` shows bytes, throughput and ETA on stderr; checked by hand with ``script -qc``, see
docs/performance.md. A test of the positive case would depend on Rich's refresh timing.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
CLI = [sys.executable, "-c", "from dspark_convert.cli import main; main()"]


def _args(out: Path, *extra: str) -> list[str]:
    return [*CLI, "hf2gguf", str(FIX / "dspark-qwen3"), "-t", str(FIX / "target-qwen3"), "-o", str(out),
            "--outtype", "q8_0", *extra]


@pytest.mark.parametrize("as_json", [False, True])
def test_no_progress_output_when_stderr_is_not_a_terminal(tmp_path: Path, as_json: bool) -> None:
    out = tmp_path / "draft.gguf"
    p = subprocess.run(_args(out, *(["--json"] if as_json else [])), capture_output=True, text=True, cwd=ROOT,
                       timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    if as_json:
        assert json.loads(p.stdout)["bytes_written"] == out.stat().st_size
    else:
        assert "wrote" in p.stdout and "converting" not in p.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_no_progress_with_json_even_on_a_terminal(tmp_path: Path) -> None:
    import pty

    out = tmp_path / "draft.gguf"
    master, slave = pty.openpty()
    try:
        p = subprocess.run(_args(out, "--json"), stdout=subprocess.PIPE, stderr=slave, text=True, cwd=ROOT,
                           timeout=300, env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
        os.close(slave)
        slave = -1
        seen = b""
        os.set_blocking(master, False)
        try:
            while chunk := os.read(master, 65536):
                seen += chunk
        except (BlockingIOError, OSError):  # nothing (more) to read; Linux raises EIO once the slave is closed
            pass
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert json.loads(p.stdout)["bytes_written"] == out.stat().st_size
    assert seen == b""
