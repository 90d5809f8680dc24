"""In-process runs of the ``dspark-convert`` command for the CLI tests, and the check of a one-line refusal."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from dspark_convert.cli import app


def run(*args: object, cwd: Path | None = None) -> Result:
    """``dspark-convert ARGS`` in-process (in ``cwd`` when given)."""
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"}, catch_exceptions=False)
    finally:
        os.chdir(old)


def refused(r: Result, line: str) -> None:
    """Exit code 2, nothing on stdout and exactly ``error: LINE`` on stderr."""
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"error: {line}\n")
