"""Command-line conventions: ``--version``, ``-h``, help that renders plainly (no ``--force <bool>``, no ``{draft}``,
brackets in help text kept), and ``--outtype`` choices listed and matched in any case."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import click
import pytest
from conftest import FIXTURES, TARGET
from typer.testing import CliRunner

from dspark_convert import convert
from dspark_convert.cli import app

SUBCOMMANDS = ["hf2gguf", "check", "inspect", "diff", "verify", "upgrade", "mtp-extract", "mtp-strip", "mtp-graft",
               "bench"]


def invoke(*args: object, columns: int = 120):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)}, prog_name="dspark-convert")


def test_version(monkeypatch: pytest.MonkeyPatch) -> None:
    r = invoke("--version")
    version = f"dspark-convert {importlib.metadata.version('dspark-convert')}\n"
    assert (r.exit_code, r.stdout) == (0, version + "kernels: compiled (Q8_0, BF16 -> F16, NVFP4 repack, tokenizer reader)\n")
    monkeypatch.setenv("DSPARK_CONVERT_KERNELS", "0")
    r = invoke("--version")
    assert (r.exit_code, r.stdout) == (0, version + "kernels: numpy forms (DSPARK_CONVERT_KERNELS=0)\n")


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


def test_a_mistyped_target_path_is_the_same_line_for_every_verb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    """Trial 3, bug 13 re-checked: ``upgrade --target fixtures/target-qwe`` said "not a Hub repo id" while hf2gguf and
    check say "no such folder (read as a local path ...)"; every verb now gives that line, and nothing is looked up."""
    import shutil

    gguf = tmp_path / "d.gguf"
    assert convert(FIXTURES / "dspark-qwen3", TARGET, gguf).path == gguf
    (tmp_path / "fixtures").mkdir()
    shutil.copytree(TARGET, tmp_path / "fixtures" / "target-qwen3")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a Hub lookup would fail with a connection error
    monkeypatch.chdir(tmp_path)
    line = ("fixtures/target-qwen: no such folder (read as a local path, since the folder fixtures exists here; for "
            "the Hub repo of that name, run from another folder)")
    for args, prefix in ((["check", gguf, "-t"], ""), (["upgrade", gguf, "--dry-run", "-t"], "--target "),
                         (["upgrade", gguf, "-o", tmp_path / "new.gguf", "-t"], "--target ")):
        r = invoke(*args, "fixtures/target-qwen", columns=300)
        assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"error: {prefix}{line}\n"), args
    assert invoke("upgrade", gguf, "--dry-run", "-t", "nonexist").stderr == "error: --target nonexist: no such folder\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.gguf", "fixtures"]


@pytest.mark.parametrize("width", [40, 60, 80])
@pytest.mark.parametrize("sub", [None, *SUBCOMMANDS])
def test_help_cuts_nothing_on_a_narrow_terminal(sub: str | None, width: int) -> None:
    """Trial 3 friction re-checked: the framed help cut option names with '…' (``--with-target-embeddi…`` even at
    80 columns, ``--targe…`` at 40). Where the frame would cut, the plain help wraps at spaces instead: every
    option name whole, no line wider than the terminal, every command's summary whole."""
    cmd = [sub] if sub else []
    r = invoke(*cmd, "--help", columns=width)
    assert r.exit_code == 0 and "\u2026" not in r.stdout, r.stdout
    assert all(len(ln) <= width for ln in r.stdout.splitlines()), [ln for ln in r.stdout.splitlines() if len(ln) > width]
    words = set(r.stdout.split())
    import typer.main

    group = typer.main.get_command(app)
    command = group.commands[sub] if sub else group  # type: ignore[attr-defined]
    names = [o for p in command.params for o in p.opts if o.startswith("-")]
    assert all(any(n in w for w in words) for n in names), names
    if sub is None:
        assert {"mtp-NAME.gguf.", "--no-mtp", "TRUNK-grafted.gguf."} <= words  # whole summaries, unbroken names
    # as readable as the wide help (review of trial 3): the same framed panels, never Click's plain "Options:" list;
    # each option's names open a line of their own and its help follows whole, wrapped between words
    assert "Options:" not in r.stdout and "\u256d\u2500 Options" in r.stdout
    inside = [ln.strip().strip("\u2502").strip() for ln in r.stdout.splitlines() if ln.startswith("\u2502")]
    flow = " ".join(inside)
    for p in command.params:
        if isinstance(p, click.Option) and p.help and not p.hidden:
            names = sorted(p.opts, key=lambda o: not o.startswith("--"))
            assert any(ln.removeprefix("* ").split(" ")[0].rstrip(",") == names[0] for ln in inside), names
            assert " ".join(p.help.replace("\\[", "[").split()) in flow, p.help


def test_forcing_dspark_on_a_zlab_dflash_writes_a_file_that_says_how_it_predicts(tmp_path: Path) -> None:
    """Trial 3 friction, and its review: ``--architecture Qwen3DSparkModel`` on a z-lab layout wrote a file that says
    ``sample_from_anchor = true`` (the DSpark class's key), so ``check`` and ``inspect`` on that file alone advised
    ``--spec-type draft-dspark``, under which every drafted token of these weights (trained on block rows 1..n) is
    one position late. The forced file now says ``false`` (the weights' convention; upstream's bytes otherwise), so
    that the file itself advises draft-dflash; ``--match-upstream`` keeps the class's ``true`` and the warning says
    the file cannot tell it later. Default conversions are untouched."""
    from dspark_convert import read_gguf

    out = tmp_path / "forced.gguf"
    r = invoke("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "--architecture", "Qwen3DSparkModel", "-o", out,
               columns=400)
    assert r.exit_code == 0, r.output
    warnings = [ln for ln in r.stdout.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: --architecture Qwen3DSparkModel on a checkpoint that declares DFlashDraftModel (a z-lab DFlash "
        "draft, trained to predict from block rows 1..n): the file says dflash.sample_from_anchor = false, not the "
        "Qwen3DSparkModel class's true (the DSpark convention, predictions from the anchor row), so that it says how "
        "its weights predict: llama-server reads block rows 1..n under draft-dflash (auto-detected) and draft-dspark "
        "alike, and check and inspect advise draft-dflash for the file; --match-upstream writes the class's true "
        "(--architecture, rule architecture)"], r.stdout
    assert ("  matches llama.cpp b11434 (2026-10-06) convert_hf_to_gguf.py except dflash.sample_from_anchor (written "
            "on purpose, see above; --match-upstream writes upstream's bytes)") in r.stdout.splitlines()
    assert read_gguf(out).value("dflash.sample_from_anchor") is False
    checked = invoke("check", out, columns=400)
    assert (checked.exit_code, checked.stdout.splitlines()[-1]) == (
        0, "llama-server: auto-detected; or pass --spec-type draft-dflash (no markov_w1.weight; block rows 1..n)")
    assert json.loads(invoke("check", out, "--json").stdout)["spec_type"]["spec_type"] == "draft-dflash"
    assert json.loads(invoke("inspect", out, "--json").stdout)["spec_type"]["spec_type"] == "draft-dflash"
    doc = json.loads(invoke("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "--architecture", "Qwen3DSparkModel",
                            "-o", out, "--force", "--json").stdout)
    assert doc["spec_type"]["spec_type"] == "draft-dflash" and doc["reference"]["differs"] == [
        "dflash.sample_from_anchor"]
    assert [f["rule"] for f in doc["findings"] if f["level"] == "warning"] == ["architecture"]
    upstream = json.loads(invoke("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "--architecture",
                                 "Qwen3DSparkModel", "--match-upstream", "-o", tmp_path / "u.gguf", "--json").stdout)
    assert read_gguf(tmp_path / "u.gguf").value("dflash.sample_from_anchor") is True
    assert upstream["spec_type"]["spec_type"] == "draft-dflash" and upstream["reference"]["differs"] == []
    [said] = [f["message"] for f in upstream["findings"] if f["rule"] == "architecture"]
    assert "nothing in the file tells this later (check and inspect on it alone advise draft-dspark)" in said
    plain = json.loads(invoke("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "-o", tmp_path / "z.gguf",
                              "--json").stdout)
    assert plain["spec_type"]["spec_type"] == "draft-dflash" and not [f for f in plain["findings"]
                                                                       if f["level"] == "warning"]
    assert read_gguf(tmp_path / "z.gguf").value("dflash.sample_from_anchor") is None
    deepspec = json.loads(invoke("hf2gguf", FIXTURES / "dflash-deepspec", "-t", TARGET, "--architecture",
                                 "Qwen3DSparkModel", "-o", tmp_path / "d.gguf", "--json").stdout)
    assert deepspec["spec_type"]["spec_type"] == "draft-dspark" and deepspec["reference"]["differs"] == ["output.weight"]
    assert read_gguf(tmp_path / "d.gguf").value("dflash.sample_from_anchor") is True
    assert [f["rule"] for f in deepspec["findings"] if f["level"] == "warning"] == ["spec-type"]


def test_verify_of_a_non_draft_or_another_familys_file_is_wrong_input(tmp_path: Path) -> None:
    """Trial 3 friction re-checked: ``verify`` of a target model's GGUF, or of an EAGLE-3 file against a DSpark
    checkpoint, printed a FAIL verdict and exited 1 (a wrong conversion); the input is wrong: one line, exit 2."""
    from fit_pairs import write_target_gguf

    target = write_target_gguf(tmp_path / "Qwen3-8B-Q8_0.gguf", [], big_tensor_bytes=4096)
    eagle = convert(FIXTURES / "eagle3-specforge", TARGET, tmp_path / "eagle3-x.gguf").path
    dspark = FIXTURES / "dspark-qwen3"
    r = invoke("verify", target, "--hf", dspark, "-t", TARGET, columns=400)
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", (
        f"error: {target}: is not a draft GGUF (general.architecture 'qwen3', no draft variant loads it); verify "
        "compares a draft GGUF with the checkpoint it was converted from\n"))
    r = invoke("verify", eagle, "--hf", dspark, "-t", TARGET, columns=400)
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", (
        f"error: {eagle}: general.architecture 'eagle3', but --hf {dspark} is a checkpoint of variant 'dflash', whose "
        "files are 'dflash'; verify compares a file with the checkpoint it was converted from\n"))


def test_stale_items_say_how_upgrade_fixes_them_in_words(tmp_path: Path) -> None:
    """Trial 3 re-check: ``upgrade --from-revision b10900 --rope-interleaved`` on a file listed ``... fixed by upgrade
    with user`` (and ``with file`` elsewhere): the item says what upgrade needs in words a user can act on."""
    from dspark_convert.roles.upgrade import Stale

    said = {n: str(Stale("k", "c", "b10705", n)) for n in ("file", "target", "checkpoint", "user")}
    assert said == {"file": "k: c (upstream b10705+; upgrade fixes it from the file alone)",
                    "target": "k: c (upstream b10705+; upgrade fixes it given --target)",
                    "checkpoint": "k: c (upstream b10705+; upgrade fixes it given --hf CHECKPOINT)",
                    "user": "k: c (upstream b10705+; upgrade fixes it given --from-revision bNNNN --rope-interleaved)"}
    gguf = convert(FIXTURES / "dspark-qwen3", TARGET, tmp_path / "d.gguf").path
    r = invoke("upgrade", gguf, "--from-revision", "b10900", "--rope-interleaved", "-o", tmp_path / "n.gguf",
               columns=400)
    assert r.exit_code == 0 and "with user" not in r.stdout and "check the result with 'dspark-convert verify" in r.stdout
