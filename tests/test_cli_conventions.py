"""Command-line conventions: ``--version``, ``-h``, help that renders plainly (no ``--force <bool>``, no ``{draft}``,
brackets in help text kept), and ``--outtype`` choices listed and matched in any case."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, TARGET
from typer.testing import CliRunner

from dspark_convert import convert
from dspark_convert.cli import app

SUBCOMMANDS = ["hf2gguf", "check", "inspect", "diff", "verify", "upgrade", "mtp-extract", "mtp-strip", "mtp-graft",
               "bench"]


def invoke(*args: object, columns: int = 120):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)}, prog_name="dspark-convert")


def test_version() -> None:
    r = invoke("--version")
    assert (r.exit_code, r.stdout) == (0, f"dspark-convert {importlib.metadata.version('dspark-convert')}\n")


@pytest.mark.parametrize("sub", [None, *SUBCOMMANDS])
def test_short_help_is_help(sub: str | None) -> None:
    args = [sub] if sub else []
    short, long = invoke(*args, "-h"), invoke(*args, "--help")
    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout and "Usage: dspark-convert" in short.stdout


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_renders_flags_and_arguments_plainly(sub: str) -> None:
    out = invoke(sub, "--help").stdout
    assert not re.search(r"<(bool|str|int|path)>|\{[a-z_]+\}", out.replace("{ftype}", "").replace("{outtype}", "")), out
    assert "-h" in out and "--help" in out


def test_hf2gguf_help_shows_usage_argument_help_and_outtype_choices() -> None:
    out = invoke("hf2gguf", "--help", columns=200).stdout
    assert "Usage: dspark-convert hf2gguf [OPTIONS] DRAFT" in out
    assert "Draft checkpoint: a local folder or a Hub repo id (org/name[@rev])." in out   # brackets not eaten
    assert "[f32|f16|bf16|q8_0|auto]" in out and "[default: auto]" in out
    force = next(ln for ln in out.splitlines() if "--force" in ln)
    assert re.search(r"--force\s+Overwrite an existing output file\.", force), force


@pytest.mark.parametrize("sub", ["check", "inspect", "diff"])
def test_remote_file_help_keeps_the_revision_brackets(sub: str) -> None:
    out = invoke(sub, "--help", columns=300).stdout
    assert "hf://ORG/REPO/file.gguf[@REV], ORG/REPO/file.gguf or an https:// URL" in out


@pytest.mark.parametrize("given, resolved", [("BF16", "bf16"), ("Q8_0", "q8_0"), ("F32", "f32"), ("Auto", "bf16")])
def test_outtype_any_case(tmp_path: Path, given: str, resolved: str) -> None:
    r = invoke("hf2gguf", FIXTURES / "dspark-qwen3", "-t", TARGET, "-o", tmp_path / "x.gguf", "--outtype", given,
               "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["outtype"] == resolved
    assert list(tmp_path.iterdir()) == []
    assert convert(FIXTURES / "dspark-qwen3", TARGET, tmp_path / "x.gguf", outtype=given, dry_run=True).outtype == resolved


def test_outtype_unknown_lists_the_choices(tmp_path: Path) -> None:
    r = invoke("hf2gguf", FIXTURES / "dspark-qwen3", "-t", TARGET, "-o", tmp_path / "x.gguf", "--outtype", "f8")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr == ("error: Invalid value for '--outtype': 'f8' is not one of 'f32', 'f16', 'bf16', 'q8_0', 'auto'; "
                        "see 'dspark-convert hf2gguf -h'\n")  # one line (issue 24)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------- issue 24 frictions
def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """The real entry (the console script's), not CliRunner: what a shell user sees."""
    import sys

    from dspark_convert.cli import main

    monkeypatch.setattr(sys, "argv", ["dspark-convert", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as e:
        main()
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.mark.parametrize("args, line", [
    (["inspect"], "error: Missing argument 'FILE'; see 'dspark-convert inspect -h'"),
    (["inspect", "--nope", "x.gguf"], "error: No such option '--nope'; see 'dspark-convert inspect -h'"),
    (["hf2gguf", "d", "--outtype", "f8"], "error: Invalid value for '--outtype': 'f8' is not one of 'f32', 'f16', "
                                          "'bf16', 'q8_0', 'auto'; see 'dspark-convert hf2gguf -h'"),
    (["nosuch"], "error: No such command 'nosuch'; see 'dspark-convert -h'"),
])
def test_usage_errors_are_one_error_line(args: list[str], line: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24: usage errors were a Rich box (and a Usage/Try block); now one ``error:`` line like every other."""
    code, out, err = run_main(monkeypatch, capsys, *args)
    assert (code, out, err.splitlines()) == (2, "", [line])


def test_no_arguments_prints_the_help_and_no_error_line(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(monkeypatch, capsys)
    assert code == 0 and "Usage: dspark-convert" in out + err and "error:" not in out + err


def test_command_summaries_do_not_break_mid_sentence() -> None:
    """Issue 24: the command list broke ``hf2gguf``'s and ``check``'s summaries where their docstrings had line
    breaks, at any width. At 300 columns each summary is one line."""
    out = invoke("--help", columns=300).stdout
    rows = [ln.strip("│ ").rstrip() for ln in out.splitlines() if ln.startswith("│ ") and "Commands" not in ln]
    commands = {r.split()[0]: r for r in rows if r.split() and r.split()[0] in SUBCOMMANDS}
    assert sorted(commands) == sorted(SUBCOMMANDS)
    continuation = [r for r in rows[rows.index(commands["hf2gguf"]):] if r and r.split()[0] not in SUBCOMMANDS]
    assert continuation == []
    assert commands["hf2gguf"].endswith("draft checkpoint to a GGUF file llama.cpp loads (no --target-model-dir "
                                        "needed for the DSpark draft inside a DeepSeek-V4 checkpoint, a Gemma 4 "
                                        "assistant, the MTP head inside a target checkpoint (--mtp)).")


def test_output_name_without_gguf_is_warned(tmp_path: Path) -> None:
    r = invoke("hf2gguf", FIXTURES / "dspark-qwen3", "-t", TARGET, "-o", tmp_path / "x.bin", "--dry-run")
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines()[0] == (f"warning: -o {tmp_path / 'x.bin'}: the name does not end in .gguf (llama.cpp "
                                        "loads it anyway; tools and people look for .gguf)")
    r = invoke("hf2gguf", FIXTURES / "dspark-qwen3", "-t", TARGET, "-o", tmp_path / "x.GGUF", "--dry-run")
    assert "warning:" not in r.stderr
