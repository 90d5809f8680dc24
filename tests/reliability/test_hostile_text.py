"""Text from files, folders and the user's own arguments is printed literally, never parsed as Rich markup.

The three cases found in review (a GGUF whose ``general.architecture`` is ``[/]oops`` under ``check``, a dry run
with ``--model-name "[/]x"``, and ``-o "[bold]x.gguf"``) with their exact output; the ``error:`` and ``warning:``
lines; then every renderer of dspark_convert.render, fed hostile strings everywhere and printed on a console that
DOES parse markup, so the renderers are safe whatever console they are given.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from bad_inputs_kit import listing
from conftest import FIXTURES, TARGET
from gguf import GGUFValueType as VT
from gguf_samples import write_gguf
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from dspark_convert import render
from dspark_convert.cli import _OneLineWarnings, app
from dspark_convert.diff import diff_gguf
from dspark_convert.findings import Finding
from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.hf2gguf.results import ConvertResult
from dspark_convert.inspect import inspect_gguf
from dspark_convert.plan import KV
from dspark_convert.reference.compare import MetadataCheck, OutputCheck
from dspark_convert.verify import VerifyReport

DRAFT = FIXTURES / "dspark-qwen3"


def invoke(*args: object, columns: int = 80):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)}, catch_exceptions=False)


# ------------------------------------------------------------------------------------------- the review's three
def test_check_on_a_hostile_architecture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_gguf(tmp_path / "hostile.gguf", [], [("t", np.zeros(4, np.float32), None)], arch="[/]oops")
    r = invoke("check", "hostile.gguf")
    assert (r.exit_code, r.stderr) == (1, "")
    assert r.stdout == ("hostile.gguf ([/]oops)\n"
                        "level  key / tensor          rule  message\n"
                        "error  general.architecture  arch  '[/]oops' is not a draft architecture llama.cpp loads; "
                        "expected one of dflash, eagle3, gemma4-assistant, qwen35, qwen35moe, qwen3next, glm4moe, glm-dsa, deepseek2, "
                        "nemotron_h_moe, "
                        "deepseek4, mimo2, deepseek32\n"
                        "\n"
                        "1 error, 0 warnings\n")


def test_dry_run_with_a_hostile_model_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "--dry-run", "--model-name", "[/]x", "-o", "x.gguf", columns=200)
    assert r.exit_code == 0 and listing(tmp_path) == []
    rows = [ln.split() for ln in r.stdout.splitlines() if "general.name" in ln]
    assert rows == [["general.name", "STRING", "'[/]x'"]]
    assert "dry run: would write x.gguf: dflash, 34 keys, 31 tensors, 457.9 KiB (468,884 bytes) of tensor data\n" in r.stdout


def test_hostile_output_name_is_printed_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", "[bold]x.gguf")
    assert r.exit_code == 0
    assert listing(tmp_path) == ["[bold]x.gguf"]
    wrote = [ln for ln in r.stdout.splitlines() if ln.startswith("wrote")]
    assert len(wrote) == 1 and re.fullmatch(r"wrote \[bold\]x\.gguf: dflash, 34 keys, 31 tensors, 486\.3 KiB "
                                            r"\(497,984 bytes\), converted in \d+\.\d\d s \(start-up not counted\); writing took \d+\.\d\d s "
                                            r"\(\d+\.\d MiB/s\)", wrote[0]), wrote


# ------------------------------------------------------------------------------------------- error and warning lines
def test_error_line_quotes_a_hostile_path(tmp_path: Path) -> None:
    missing = tmp_path / "[bold]nope"
    r = invoke("hf2gguf", DRAFT, "-t", missing, "-o", tmp_path / "x.gguf")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == f"error: {missing}: no such folder\n"
    assert listing(tmp_path) == []


def test_inspect_error_names_a_hostile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = invoke("inspect", "[/]nofile.gguf")
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", "error: [/]nofile.gguf: cannot open: No such file or directory\n")


def test_warning_line_is_literal(capsys: pytest.CaptureFixture[str]) -> None:
    record = logging.LogRecord("dspark_convert.x", logging.WARNING, __file__, 1, "tokenizer '%s' [/] odd", ("[red]t",),
                               None)
    _OneLineWarnings().emit(record)
    assert capsys.readouterr().err == "warning: tokenizer '[red]t' [/] odd\n"


# ------------------------------------------------------------------------------------------- every renderer
#: markup-like text; kept a valid path as written (no trailing or doubled "/", which Path would normalise)
HOSTILE = (st.text(alphabet="[]/\\ab=#@:", min_size=1, max_size=12).map(lambda s: "[" + s)
           .filter(lambda s: not s.endswith("/") and "//" not in s))


@pytest.fixture(scope="module")
def dry_run() -> ConvertResult:
    return convert(DRAFT, TARGET, "x.gguf", dry_run=True)


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


def _rendered(fn, *args) -> str:
    """What ``fn(*args, console)`` prints on a console that parses markup (Rich's default); it must be exactly
    what it prints on the CLI's markup-off console, so no renderer depends on the console to stay literal."""
    seen = {}
    for terminal in (False, True):  # plain text (pipes) and Rich tables (terminals)
        for markup in (True, False):
            con = Console(width=1000, record=True, markup=markup, highlight=markup, color_system=None,
                          force_terminal=terminal)
            fn(*args, con)
            seen[terminal, markup] = con.export_text()
        assert seen[terminal, True] == seen[terminal, False]
    return seen[False, True]


@settings(max_examples=25, deadline=None)
@given(h=HOSTILE)
def test_every_renderer_prints_hostile_text_literally(h: str, dry_run: ConvertResult, hostile_files: Path) -> None:
    """``h`` appears as it is, or as its Python repr where a value is shown quoted."""
    # hf2gguf (dry run and written), with the hostile text as a KV name and value, a tensor name, a note, a path
    plan = dataclasses.replace(dry_run.plan, kvs=[*dry_run.plan.kvs, KV(h, VT.STRING, h)],
                               tensors=[dataclasses.replace(dry_run.plan.tensors[0], name=h), *dry_run.plan.tensors[1:]],
                               notes=[h])
    finding = Finding("warning", h, h, h)
    for dry in (True, False):
        result = dataclasses.replace(dry_run, plan=plan, path=Path(h), findings=[finding], notes=[h], dry_run=dry)
        out = _rendered(render.render_conversion, result)
        assert out.count(h) >= (7 if dry else 4), out
    # check
    assert _rendered(render.render_findings, Path(h), h, [finding]).count(h) >= 5
    assert _rendered(render.render_findings, Path(h), h, []).count(h) == 2
    # inspect and diff of files whose arch, key, string values and tensor name are hostile
    a = write_gguf(hostile_files / "a.gguf", [(h, h, VT.STRING), ("k", [h, h], VT.ARRAY)],
                   [(h, np.zeros(4, np.float32), None)], arch=h)
    b = write_gguf(hostile_files / "b.gguf", [(h, h + "x", VT.STRING)], [(h, np.ones(4, np.float32), None)], arch=h)
    out = _rendered(render.render_inspect, inspect_gguf(a))
    assert out.count(h) >= 3 and out.count(repr(h)) >= 4, out
    out = _rendered(render.render_diff, diff_gguf(a, b))
    assert out.count(h) >= 2 and repr(h + "x") in out, out  # the changed KV and tensor
    # verify
    report = VerifyReport(gguf=h, hf_dir=h, target_dir=h, arch=h, family="dspark", layout="flat", contexts=[1], seed=0,
                          steps=1, outputs=[OutputCheck(name=h, shape=[1], passed=False, detail=h)],
                          metadata=[MetadataCheck(key=h, gguf=h, expected=h, passed=False)], notes=[h])
    out = _rendered(render.render_verify, report)
    assert out.count(h) >= 5 and out.count(repr(h)) == 2, out
    # error and warning lines
    for fn in (render.print_error, render.print_warning):
        assert _rendered(fn, h).split(" ", 1)[1] == h + "\n"
