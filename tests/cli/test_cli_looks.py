"""How the output reads: at 80 columns on a terminal (nothing cut, numbers whole, least useful columns dropped
first) and in a pipe (plain aligned lines, nothing cut or wrapped); labelled notes, also in --json findings;
the summary wording; inspect --full-arrays and --filter; the diff legend."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, TARGET
from gguf import GGUFValueType as VT
from gguf_samples import write_gguf
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from dspark_convert import convert, diff_gguf, inspect_gguf
from dspark_convert.cli import app
from dspark_convert.findings import Finding
from dspark_convert.reference.compare import MetadataCheck, OutputCheck
from dspark_convert.render import render_conversion, render_diff, render_findings, render_inspect, render_verify
from dspark_convert.verify import VerifyReport

DRAFT = FIXTURES / "dspark-qwen3"
PRE_NOTE = (f"note: {TARGET}/tokenizer.json: chkhsh 27c1fcc4d8091313069c2f7da54dc51b17feaf3433471c62ee48ee22d0a172ca "
            "is not in llama.cpp's table (a vocabulary it has not seen); the pre-tokenizer regex is the 'qwen2' "
            "family's, so tokenizer.ggml.pre = 'qwen2'")


def invoke(*args: object, columns: int = 80):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)}, catch_exceptions=False)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("looks") / "draft.gguf"
    convert(DRAFT, TARGET, out)
    return out


@pytest.fixture(scope="module")
def reduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("looks") / "reduced.gguf"
    convert(FIXTURES / "dspark-reduced", TARGET, out)
    return out


def terminal(fn, *args, width: int = 80, **kw) -> list[str]:
    """What ``fn(*args, console)`` shows on a terminal ``width`` columns wide."""
    con = Console(force_terminal=True, width=width, record=True, markup=False, highlight=False, color_system=None)
    fn(*args, con, **kw)
    return con.export_text().splitlines()


def fits(lines: list[str], width: int = 80) -> None:
    too_long = [ln for ln in lines if cell_len(ln) > width]
    assert not too_long, too_long
    assert not any("…" in ln for ln in lines), [ln for ln in lines if "…" in ln]


# ------------------------------------------------------------------------------------------- 80-column terminal
def test_inspect_at_80_columns(gguf: Path) -> None:
    lines = terminal(render_inspect, inspect_gguf(gguf, stats=True))
    fits(lines)
    head = next(ln for ln in lines if ln.split()[:2] == ["name", "type"])
    assert head.split() == ["name", "type", "shape", "(numpy)", "ne", "(ggml)", "elements", "bytes"]  # offset dropped
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.strip().endswith("KiB")}
    assert rows["fc.weight"] == ["fc.weight", "BF16", "(64,", "192)", "[192,", "64]", "12.29K", "24.0", "KiB"]
    assert rows["ffn_down.weight"][-2:] == ["16.0", "KiB"]                        # grouped under blk.0 / blk.1
    assert sum(ln.strip() in ("blk.0", "blk.1") for ln in lines) == 2
    text = "\n".join(lines)
    for name in ("enc.output_norm.weight", "markov_w1.weight", "output_norm.weight", "attn_output.weight"):
        assert name in text, name
    assert "dflash.attention.layer_norm_rms_epsilon" in text          # long keys whole, values fold instead


def test_offset_column_kept_when_there_is_room(gguf: Path) -> None:
    lines = terminal(render_inspect, inspect_gguf(gguf), width=120)
    fits(lines, 120)
    assert next(ln for ln in lines if ln.split()[:2] == ["name", "type"]).split()[-1] == "offset"


def test_dry_run_at_80_columns() -> None:
    r = convert(FIXTURES / "dspark-qwen3-interleaved", TARGET, "x.gguf", dry_run=True)
    lines = terminal(render_conversion, r)
    fits(lines)
    assert next(ln for ln in lines if ln.split()[:2] == ["name", "type"]).split() == [
        "name", "type", "ne", "(ggml)", "bytes", "source"]                 # transform dropped first (it is in --json)
    wide = terminal(render_conversion, r, width=160)
    assert next(ln for ln in wide if ln.split()[:2] == ["name", "type"]).split()[-1] == "transform"
    assert any("deinterleave_rope" in ln for ln in wide)
    text = "\n".join(lines)
    assert "Metadata (34 KVs)" in text and "Tensors (31)" in text           # titled like inspect
    assert "[2, 3, 5] (3 items)" in text and "{'first'" not in text       # values like inspect, no dict reprs


def test_check_and_verify_at_80_columns(tmp_path: Path) -> None:
    findings = [Finding("error", "blk.0.attn_q.weight", "shape", "has ggml shape [64, 48], expected [64, 64] "
                        "(ne[1] = n_head 4 x head_dim 16); llama.cpp fails with \"wrong shape\""),
                Finding("warning", "dflash.attention.layer_norm_rms_epsilon", "range", "is 0.5, expected < 0.01")]
    lines = terminal(render_findings, Path("some/folder/draft.gguf"), "dflash", findings)
    fits(lines)
    assert lines[-1] == "1 error, 1 warning"
    assert any("dflash.attention.layer_norm_rms_epsilon" in ln for ln in lines)
    report = VerifyReport("draft.gguf", "hf", "t", "dflash", "dspark", "flat", 16, 0, 3,
                          outputs=[OutputCheck("draft logits (block positions)", [7, 1024], 1.2e-7, -69.2, 1e-3,
                                               "essentially identical", 7, 7)],
                          metadata=[MetadataCheck("dflash.attention.layer_norm_rms_epsilon", 1e-5, 1e-6, False)])
    lines = terminal(render_verify, report)
    fits(lines)
    assert lines[-1] == "FAIL"


def test_diff_at_80_columns_keeps_keys_whole(gguf: Path, reduced: Path) -> None:
    lines = terminal(render_diff, diff_gguf(gguf, reduced))
    fits(lines)
    assert "  ~ general.name" in lines and "      A: STRING 'Dspark Qwen3'" in lines
    # a long entry wraps between words on a terminal, never inside the name
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  ~ blk.0.attn_output.weight: BF16 (64, 64) -> "))
    assert " ".join(x.strip() for x in lines[at:at + 2]).startswith(
        "~ blk.0.attn_output.weight: BF16 (64, 64) -> BF16 (64, 64); max |a-b| 0.578125, NMSE 1.99021")


# ------------------------------------------------------------------------------------------- pipes
def test_inspect_in_a_pipe_is_plain_and_whole(gguf: Path) -> None:
    r = invoke("inspect", gguf)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert not any(ch in r.stdout for ch in "│┃━─…")
    assert lines[0] == "Metadata (34 KVs)"
    assert lines[1].split() == ["key", "type", "value"]
    # every tensor on one line with its full name, the offset column included
    rows = [ln.split() for ln in lines if ln.startswith("blk.")]
    assert len(rows) == 22 and rows[0] == ["blk.0.attn_norm.weight", "F32", "(64,)", "[64]", "64", "256", "B", "185152"]  # after token_embd (b11434 keeps it)
    assert "tensor data   457.9 KiB (468,884 bytes)" in lines


def test_check_in_a_pipe(tmp_path: Path) -> None:
    write_gguf(tmp_path / "e.gguf", [("eagle3.block_count", 2, VT.UINT32)], [("t", np.zeros(4, np.float32), None)],
               arch="eagle3")
    r = invoke("check", tmp_path / "e.gguf")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0] == f"{tmp_path / 'e.gguf'} (eagle3)" and lines[1].split() == ["level", "key", "/", "tensor",
                                                                                   "rule", "message"]
    # a file that fails a loader rule gets no --spec-type advice (llama-server would not load it): the count is last
    assert all(ln.startswith(("error  ", "warning  ")) for ln in lines[2:-2]) and lines[-1].endswith("warnings")
    assert "llama-server" not in r.stdout


# ------------------------------------------------------------------------------------------- notes and summary
def test_pre_tokenizer_note_is_labelled_and_in_json(tmp_path: Path) -> None:
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "dspark-d.gguf")
    assert r.exit_code == 0 and r.stderr == ""                      # a note, not a warning on stderr
    lines = r.stdout.splitlines()
    assert lines[0] == PRE_NOTE
    assert re.fullmatch(rf"wrote {re.escape(str(tmp_path / 'dspark-d.gguf'))}: dflash, 34 keys, 31 tensors, 486\.3 KiB "
                        r"\(497,984 bytes\), converted in \d+\.\d\d s \(start-up not counted\); writing took \d+\.\d\d s \(\d+\.\d MiB/s\)", lines[1]), lines[1]
    assert lines[2:] == ["  outtype bf16", "  Markov head: yes; confidence head: yes",
                         "  output.weight kept from the draft's lm_head: untied target; without it llama.cpp b11434 "
                         "drafts with token_embd as the head (see --match-upstream)",
                         "  draft dspark-qwen3; target target-qwen3",
                         "  matches llama.cpp b11434 (2026-10-06) convert_hf_to_gguf.py except output.weight (written on purpose, see "
                         "above; --match-upstream writes upstream's bytes)"]
    j = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "dspark-e.gguf", "--json")
    doc = json.loads(j.stdout)
    assert doc["findings"] == [{"level": "note", "subject": "tokenizer.ggml.pre", "rule": "pre-tokenizer-by-regex",
                                "message": PRE_NOTE.removeprefix("note: ")}]
    assert 0 < doc["write_seconds"] <= doc["seconds"]
    assert doc["reference"] == {"converter": "llama.cpp convert_hf_to_gguf.py", "revision": "b11434",
                                "date": "2026-10-06", "differs": ["output.weight"]}


def test_a_chosen_name_llama_server_cannot_find_gets_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hf2gguf says, as check and inspect do, when the name given with -o hides the draft from llama-server's -hf;
    the default name and a name with the keyword get no such note."""
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "d.gguf")
    assert r.exit_code == 0 and r.stderr == ""
    assert ("note: the file name 'd.gguf' lacks 'dspark-', the keyword llama-server's -hf finds a draft-dspark draft "
            "by: it does not find this file beside its target (and may take it for the main model); name it e.g. "
            "dspark-d.gguf") in r.stdout.splitlines()
    j = json.loads(invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "e.gguf", "--json").stdout)
    assert [(f["level"], f["subject"]) for f in j["findings"] if f["rule"] == "hf-name"] == [
        ("note", str(tmp_path / "e.gguf"))]
    with_keyword = json.loads(invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "dspark-f.gguf", "--json").stdout)
    monkeypatch.chdir(tmp_path)  # the default name, in the current folder
    default = json.loads(invoke("hf2gguf", DRAFT, "-t", TARGET, "--json").stdout)
    assert Path(default["output"]).name.startswith("dspark-"), default["output"]
    for doc in (with_keyword, default):
        assert [f for f in doc["findings"] if f["rule"] == "hf-name"] == [], doc["findings"]


def test_dry_run_summary_line(tmp_path: Path) -> None:
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "d.gguf", "--dry-run")
    assert r.exit_code == 0 and list(tmp_path.iterdir()) == []
    assert (f"dry run: would write {tmp_path / 'd.gguf'}: dflash, 34 keys, 31 tensors, 457.9 KiB (468,884 bytes) "
            "of tensor data") in r.stdout.splitlines()


def test_sizes_read_the_same_in_every_verb(tmp_path: Path) -> None:
    """Trial 3 friction re-checked: ``upgrade`` wrote ``(497984 bytes)`` where hf2gguf and inspect say ``486.3 KiB
    (497,984 bytes)``, the write rate was in MB/s beside KiB sizes, and the dry run's tensor table gave bytes where
    inspect gives KiB. One form everywhere: KiB/MiB (binary) with the exact count grouped by thousands."""
    out = tmp_path / "d.gguf"
    r = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", out)
    assert ", 486.3 KiB (497,984 bytes)," in r.stdout and re.search(r"\(\d+\.\d MiB/s\)", r.stdout), r.stdout
    assert "size          486.3 KiB (497,984 bytes)" in invoke("inspect", out).stdout.splitlines()
    up = invoke("upgrade", out, "-o", tmp_path / "u.gguf", "--match-upstream")
    assert f"wrote {tmp_path / 'u.gguf'}: 358.2 KiB (366,848 bytes)" in up.stdout.splitlines(), up.stdout
    plan = invoke("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "p.gguf", "--dry-run").stdout.splitlines()
    inspected = invoke("inspect", out).stdout.splitlines()
    for name in ("token_embd.weight", "fc.weight", "output_norm.weight"):
        planned = next(ln.split() for ln in plan if ln.startswith(name + " "))
        shown = next(ln.split() for ln in inspected if ln.startswith(name + " "))
        size = next(" ".join(planned[i - 1:i + 1]) for i, w in enumerate(planned) if w in ("B", "KiB", "MiB"))
        assert f" {size} " in " ".join(shown) + " ", (planned, shown)


def test_error_texts_give_sizes_and_positions_in_the_one_number_format(gguf: Path, tmp_path: Path) -> None:
    """Review of trial 3: the readers' errors still said ``needs 8192 bytes, only 1914 left`` and ``at byte 28825``
    where every verb says ``486.3 KiB (497,984 bytes)``. Sizes as KiB with the exact count grouped, positions and
    counts grouped, in the GGUF reader (truncated header, data past the end) and the safetensors reader."""
    data = gguf.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:3000])
    (tmp_path / "short.gguf").write_bytes(data[:400000])
    r = invoke("check", tmp_path / "cut.gguf")
    assert (r.exit_code, r.stderr) == (2, (
        f"error: {tmp_path / 'cut.gguf'}: KV #24 'tokenizer.ggml.tokens' at byte 1,086: array of 1,024 STRING needs at "
        "least 8.0 KiB (8,192 bytes), only 1.9 KiB (1,914 bytes) left\n")), r.stderr
    r = invoke("inspect", tmp_path / "short.gguf")
    assert (r.exit_code, r.stderr) == (2, (
        f"error: {tmp_path / 'short.gguf'}: tensor 'output.weight' at byte 28,825: data [333,888, 464,960) lies past "
        "the end of the file, which has 390.6 KiB (400,000 bytes)\n")), r.stderr
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_bytes((DRAFT / "config.json").read_bytes())
    (draft / "model.safetensors").write_bytes((5_000_000).to_bytes(8, "little") + b"{}")
    r = invoke("hf2gguf", draft, "-t", TARGET, "-o", tmp_path / "x.gguf")
    assert r.exit_code == 2 and r.stderr.endswith(
        "truncated safetensors file: header claims 4.8 MiB (5,000,000 bytes), the file has 2 bytes after its length "
        "field\n"), r.stderr
    for text in (r.stderr, *(invoke(c, tmp_path / f).stderr for c in ("check", "inspect") for f in ("cut.gguf",
                                                                                                    "short.gguf"))):
        assert not re.search(r"\d{4,}", text.replace(str(tmp_path), "")), text


@pytest.mark.parametrize("columns", [40, 50, 100])
def test_progress_bar_counts_in_the_one_number_format_and_cuts_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                      columns: int) -> None:
    """Review of trial 3, re-tried at 50 columns: the conversion's progress bar showed ``468.9/468… kB`` and
    ``79.4 MB/s`` (decimal units, a number cut) beside KiB everywhere else. KiB/MiB, whole numbers; the bar gives
    way on a narrow terminal."""
    import io
    import sys

    from dspark_convert.render import byte_progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.setenv("COLUMNS", str(columns))
    with byte_progress(True, "converting") as update:
        assert update is not None
        update(100_000, 468_884)
        update(468_884, 468_884)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", sys.stderr.getvalue()).replace("\r", "\n")
    lines = [ln for ln in shown.splitlines() if "converting" in ln]
    assert lines and all(cell_len(ln) <= columns for ln in lines), lines
    assert "457.9 KiB/457.9 KiB" in lines[-1] and "\u2026" not in shown and not re.search(r"\b[kMG]B\b", shown)
    assert ("\u2501" in lines[-1]) == (columns >= 100), lines[-1]


def test_wrapped_items_hang_under_their_entry_at_50_columns(gguf: Path, reduced: Path, tmp_path: Path) -> None:
    """Review of trial 3, ``diff`` and ``upgrade --dry-run`` re-tried at 50 columns: an item's second line started
    at the margin (``(64, 128); max |a-b| ...`` under ``  ~ blk.0.ffn_down.weight``), so entries ran together.
    Continuations hang two columns deeper than their entry; unindented lines (notes) wrap as before."""
    lines = terminal(render_diff, diff_gguf(gguf, reduced), width=50)
    fits(lines, 50)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  ~ blk.0.ffn_down.weight: "))
    assert lines[at + 1].startswith("    ") and not lines[at + 1].startswith("     "), lines[at:at + 2]
    end = next(i for i in range(at + 1, len(lines)) if not lines[i].startswith("    "))
    assert " ".join(x.strip() for x in lines[at:end]) == (
        "~ blk.0.ffn_down.weight: BF16 (64, 128) -> BF16 (64, 128); max |a-b| 0.503906, NMSE 2.03163")
    entries = [ln for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]
    assert all(ln.lstrip()[0] in "~+-" for ln in entries), entries          # each top-level row is an entry
    legend = next(i for i, ln in enumerate(lines) if ln.startswith("legend: "))
    assert lines[legend + 1] == "then B)"                                  # no indent: wraps at the margin
    r = CliRunner().invoke(app, ["upgrade", str(gguf), "--dry-run"], env={"COLUMNS": "50", "TTY_COMPATIBLE": "1",
                                                                          "TTY_INTERACTIVE": "0"})
    out = [ln.rstrip() for ln in r.stdout.splitlines()]
    first = next(i for i, ln in enumerate(out) if ln.startswith("  not checked: config keys"))
    assert all(ln.startswith("    ") for ln in out[first + 1:first + 3]), out


def test_summary_wording_on_a_tiny_file(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "dflash-tiny.gguf", [("tokenizer.ggml.model", "gpt2", VT.STRING),
                                            ("tokenizer.ggml.tokens", ["a", "b"], VT.ARRAY)],
                   [("t", np.zeros(128, np.float32), None)])
    r = invoke("inspect", f)
    summary = r.stdout.split("Summary\n", 1)[1].splitlines()
    size = f.stat().st_size
    assert size < 1024
    assert summary == [f"file          {f}", f"size          {size} bytes", "GGUF version  3", "alignment     32",
                       "data offset   224", "KVs           3", "tensors       1", "arch          dflash",
                       "parameters    128", "tensor data   512 bytes", "  F32         1 tensor, 128 elements, 512 B",
                       "tokenizer     gpt2, no pre-tokenizer, 2 tokens, no chat template",
                       # issue 23: the --spec-type llama-server needs (no markov_w1.weight: draft-dflash)
                       "llama-server  --spec-type draft-dflash (auto-detected: no markov_w1.weight; block rows 1..n)",
                       "-hf name      found by llama-server -hf as a draft-dflash draft ('dflash-' in the name)", ""]


def test_metadata_title_counts_in_words(tmp_path: Path) -> None:
    """Issue 24: a one-KV file said ``Metadata (1 KVs)``."""
    one = write_gguf(tmp_path / "one.gguf", [("t.n", 7, VT.UINT32)], [])
    lines = invoke("inspect", one, "--filter", "t.*").stdout.splitlines()
    assert lines[0] == "Metadata (1 KV)"
    assert invoke("inspect", one).stdout.splitlines()[0] == "Metadata (2 KVs)"  # general.architecture too


# ------------------------------------------------------------------------------------------- inspect options
def test_full_arrays_shows_everything_and_the_chat_template(gguf: Path) -> None:
    short = invoke("inspect", gguf, "--no-tensors").stdout
    assert ("note: long values are shortened; --full-arrays shows them in full (--json also gives each array's "
            "sha256)") in short.splitlines()
    full = invoke("inspect", gguf, "--no-tensors", "--full-arrays").stdout
    tokens = next(ln for ln in full.splitlines() if ln.startswith("tokenizer.ggml.tokens"))
    assert "'<|mask|>', " in tokens and tokens.endswith("'[PAD1023]'] (1,024 items)")  # nothing cut
    template = json.loads(invoke("inspect", gguf, "--json").stdout)["kvs"]["tokenizer.chat_template"]["value"]
    assert f"tokenizer.chat_template (STRING, {len(template)} characters):\n{template}\n" in full
    assert "note: long values are shortened" not in full


def test_filter_without_a_match_says_so(gguf: Path) -> None:
    r = invoke("inspect", gguf, "--filter", "blk.9.*")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[:3] == ["note: no KV name matches --filter 'blk.9.*'",
                                         "note: no tensor name matches --filter 'blk.9.*'", "Summary"]
    r = invoke("inspect", gguf, "--filter", "blk.0.ffn_up*")
    assert "note: no KV name matches --filter 'blk.0.ffn_up*'" in r.stdout and "Tensors (1)" in r.stdout


def test_diff_has_a_legend(gguf: Path, reduced: Path) -> None:
    r = invoke("diff", gguf, reduced, "--no-stats")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[:6] == [f"A: {gguf}", f"B: {reduced}",
                                         "legend: - only in A, + only in B, ~ changed (A, then B)",
                                         "KV differences (2)", "  ~ general.name", "      A: STRING 'Dspark Qwen3'"]
    assert "  + d2t: I64 (256,)" in r.stdout.splitlines()
    same = invoke("diff", gguf, gguf)
    assert same.exit_code == 0 and same.stdout == f"A: {gguf}\nB: {gguf}\nEQUAL (31 identical tensors)\n"


@pytest.mark.parametrize("width", [56, 60, 66, 70, 72, 79])
def test_metadata_table_on_a_narrow_terminal(gguf: Path, width: int) -> None:
    """Issue 24 bug 2: at 60 columns values printed one character per line, at 66-72 they split mid-word; where
    whole keys leave a value fewer than 20 columns the rows are stacked (key, then value): every value of up to 20
    characters stays on one line, every key whole."""
    info = inspect_gguf(gguf, tensors=False)
    lines = terminal(render_inspect, info, width=width)
    fits(lines, width)
    from dspark_convert.render import value_preview

    short = [value_preview(e) for e in info["kvs"].values() if len(value_preview(e)) <= 20]
    assert "'Dspark Qwen3'" in short and "[2, 3, 5] (3 items)" in short
    for v in short:
        assert any(v in ln for ln in lines), (width, v)
    keys = "".join(ln[1:ln.index(" ", 1)] if " " in ln[1:] else ln for ln in lines)  # folded keys joined again
    assert "dflash.attention.layer_norm_rms_epsilon" in keys


HEADERS = {"rule", "result", "draft", "target", "finding", "key", "type", "value", "name", "shape", "(numpy)", "ne",
           "(ggml)", "elements", "bytes", "offset"}


def _whole_words(render, arg, width: int) -> list[str]:
    """The words of ``render(arg)``'s pipe form that a ``width``-column terminal splits across lines (a word up to
    ``WORD`` characters long must stay on one line; a longer one, such as a path, may fold)."""
    from dspark_convert.render.base import WORD

    pipe = Console(force_terminal=False, width=width, record=True, markup=False, highlight=False, color_system=None)
    render(arg, pipe)
    words = {w for w in pipe.export_text().split() if len(w) <= WORD and w not in HEADERS}
    lines = terminal(render, arg, width=width)
    fits(lines, width)
    return sorted(w for w in words if not any(w in ln for ln in lines))


@pytest.mark.parametrize("width", [40, 50, 60])
def test_narrow_terminals_split_no_word(gguf: Path, width: int) -> None:
    """Trial 3 friction re-checked on a terminal: ``check --target`` at 50 columns split words ('findin g', 'neithe
    r'), ``inspect`` at 40 crushed the key column ('general.' / 'architec' / 'ture'). A table too narrow for whole
    words is printed stacked: every word of the pipe form is whole on one line."""
    from dspark_convert.fit import check_fit
    from dspark_convert.render import render_fit

    assert _whole_words(render_fit, check_fit(gguf, TARGET), width) == []
    assert _whole_words(render_inspect, inspect_gguf(gguf, tensors=False), width) == []  # tensors: columns drop
    lines = terminal(render_inspect, inspect_gguf(gguf), width=width)
    assert all(any(f" {n}" in ln for ln in lines) for n in ("fc.weight", "attn_q.weight", "enc.output_norm.weight"))
    assert any(ln.startswith(" dflash.attention.layer_norm_rms_epsilon") for ln in lines)  # the key whole
    fit = terminal(render_fit, check_fit(gguf, TARGET), width=width)
    assert fit[fit.index("Will this draft work with this target?") + 1:][:4] == [
        " vocab-type  pass", "   draft: gpt2 (BPE)", "   target: gpt2 (BPE)", "   finding: both BPE"]


def test_array_previews_keep_their_item_count_in_a_pipe(gguf: Path) -> None:
    """Trial 3 friction re-checked: in a pipe, ``inspect`` cut a string array's preview inside an item and dropped
    its count (``'-', '...``). An array is cut between items, and its count always shows."""
    rows = {ln.split()[0]: ln for ln in invoke("inspect", gguf, columns=200).stdout.splitlines()
            if ln.startswith("tokenizer.ggml.")}
    assert rows["tokenizer.ggml.tokens"].endswith(", ...] (1,024 items)"), rows["tokenizer.ggml.tokens"]
    assert rows["tokenizer.ggml.merges"].endswith(", ...] (734 items)"), rows["tokenizer.ggml.merges"]
    from dspark_convert.render import value_preview

    long = {"value": ["x" * 100, "y"], "count": 2}
    assert value_preview(long) == "[...] (2 items)" and value_preview(long, None) == f"['{'x' * 100}', 'y'] (2 items)"


def test_verify_counts_are_grouped_like_every_other_count() -> None:
    """Trial 3 friction re-checked: verify printed ``0 of 161640 values changed`` where every other count is grouped
    by thousands (``1,024 items``)."""
    report = VerifyReport("draft.gguf", "hf", "t", "dflash", "dspark", "flat", 16, 0, 3, outputs=[], metadata=[])
    report.storage = {"BF16": {"tensors": 20, "changed": 0, "values": 161640}, "F32": {"tensors": 11, "changed": 0,
                                                                                    "values": 451}}
    text = " ".join(terminal(render_verify, report, width=200))
    assert "BF16 20 tensors (0 of 161,640 values changed), F32 11 tensors (0 of 451 values changed)" in text, text


def test_diff_names_an_order_change_in_words(tmp_path: Path) -> None:
    """Trial 3 friction re-checked: ``diff`` printed ``~ TENSOR order differs``."""
    a = write_gguf(tmp_path / "a.gguf", [("k1", 1, VT.UINT32), ("k2", 2, VT.UINT32)],
                   [("x", np.zeros(4, np.float32), None), ("y", np.ones(4, np.float32), None)])
    b = write_gguf(tmp_path / "b.gguf", [("k2", 2, VT.UINT32), ("k1", 1, VT.UINT32)],
                   [("y", np.ones(4, np.float32), None), ("x", np.zeros(4, np.float32), None)])
    r = invoke("diff", a, b)
    assert ["~ KV order differs", "~ tensor order differs"] == [ln for ln in r.stdout.splitlines()
                                                                 if ln.endswith("order differs")], r.stdout


@pytest.mark.parametrize("width", [40, 60])
def test_upgrade_and_check_lines_wrap_between_words_on_a_terminal(gguf: Path, tmp_path: Path, width: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 3 friction re-checked: ``upgrade`` wrote its listing with sys.stdout (a 40-column terminal cut words),
    as ``check`` did its ``llama-server:`` line. Both go through the console: whole words on a terminal, one line
    per item in a pipe."""
    import io

    from dspark_convert import render

    con = Console(file=io.StringIO(), force_terminal=True, width=width, record=True, markup=False, highlight=False,
                  color_system=None)
    monkeypatch.setattr(render, "make_console", lambda *a, **k: con)
    for args in (["upgrade", gguf, "--dry-run"], ["check", gguf]):
        r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert r.exit_code == 0 and r.stdout == "", r.stdout
    lines = con.export_text().splitlines()
    fits(lines, width)
    words = " ".join(lines).split()
    for phrase in ("rope.dimension_count,", "dflash.rope.dimension_sections", "llama-server:", "auto-detected;"):
        assert phrase in words, (phrase, lines)
