"""dspark_convert.inspect and the ``inspect`` command: exact JSON values, Rich output, errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from gguf import GGUFValueType as VT
from gguf_samples import (
    F32_VEC,
    I64_VEC,
    SAMPLE_KVS,
    gstr,
    kv_raw,
    kv_u32,
    raw_gguf,
    tinfo,
    u32,
    u64,
    write_gguf,
    write_sample,
)
from rich.console import Console
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.inspect import ARRAY_PREVIEW, SCHEMA, RunningStats, inspect_gguf
from dspark_convert.render import dumps_json, jsonable, render_inspect

runner = CliRunner()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "sample.gguf")


def test_header_and_totals(sample: Path) -> None:
    info = inspect_gguf(sample)
    ref = GGUFReader(sample)
    assert info["schema"] == SCHEMA and info["file"] == str(sample)
    assert (info["size"], info["version"], info["alignment"]) == (sample.stat().st_size, 3, 32)
    assert info["data_offset"] == ref.data_offset
    assert (info["kv_count"], info["tensor_count"], info["arch"]) == (1 + len(SAMPLE_KVS) + 8, 6, "dflash")
    assert info["n_params"] == 64 + 128 + 64 + 192 + 4 + 24
    assert info["tensor_bytes"] == 256 + 256 + 128 + 204 + 32 + 96
    assert info["by_type"]["F32"] == {"tensors": 2, "n_elements": 88, "nbytes": 352}
    assert info["by_type"]["Q8_0"] == {"tensors": 1, "n_elements": 192, "nbytes": 204}
    assert list(info["kvs"])[:2] == ["general.architecture", "t.u8"]


def test_kv_entries(sample: Path) -> None:
    kvs = inspect_gguf(sample)["kvs"]
    assert kvs["t.u64"] == {"type": "UINT64", "offset": 259, "value": 2**63 + 5}
    assert kvs["t.str"]["value"] == "héllo ✓"
    assert kvs["t.nested"]["type"] == "ARRAY[ARRAY]" and kvs["t.nested"]["value"] == [[1, 2], [3, 4, 5]]
    long = kvs["t.long"]
    assert (long["type"], long["count"], long["truncated"]) == ("ARRAY[INT32]", 40, True)
    assert long["value"] == list(range(ARRAY_PREVIEW))
    assert long["sha256"] == hashlib.sha256(np.arange(40, dtype="<i4").tobytes()).hexdigest()
    toks = kvs["tokenizer.ggml.tokens"]
    assert toks["value"] == [f"tok{i}" for i in range(ARRAY_PREVIEW)]
    stored = b"".join(gstr(f"tok{i}") for i in range(50))
    assert toks["sha256"] == hashlib.sha256(stored).hexdigest()
    assert kvs["t.arr_bool"] == {"type": "ARRAY[BOOL]", "offset": 379, "count": 3,
                                 "sha256": hashlib.sha256(b"\1\0\1").hexdigest(), "value": [True, False, True],
                                 "truncated": False}
    full = inspect_gguf(sample, full_arrays=True)["kvs"]
    assert full["t.long"]["value"] == list(range(40)) and full["t.long"]["truncated"] is False
    assert full["tokenizer.ggml.tokens"]["value"][-1] == "tok49"


def test_nested_preview_is_truncated_at_every_level(tmp_path: Path) -> None:
    p = write_gguf(tmp_path / "n.gguf", [("n", [list(range(40))] * 20, VT.ARRAY), ("t", 1, VT.UINT32)])
    e = inspect_gguf(p)["kvs"]["n"]
    assert (e["count"], e["truncated"]) == (20, True)
    assert e["value"] == [list(range(ARRAY_PREVIEW))] * ARRAY_PREVIEW
    assert inspect_gguf(p, full_arrays=True)["kvs"]["n"]["value"] == [list(range(40))] * 20
    assert inspect_gguf(p)["kvs"]["t"]["value"] == 1  # the walk past the truncated array landed right


def test_tensor_rows(sample: Path) -> None:
    rows = {r["name"]: r for r in inspect_gguf(sample)["tensors"]}
    ref = {t.name: t for t in GGUFReader(sample).tensors}
    assert rows["blk.1.ffn_up.weight"] == {
        "name": "blk.1.ffn_up.weight", "type": "Q8_0", "type_id": 8, "ne": [64, 3], "shape": [3, 64],
        "n_elements": 192, "nbytes": 204, "offset": ref["blk.1.ffn_up.weight"].data_offset}
    assert rows["blk.1.cube"]["shape"] == [2, 3, 4] and rows["blk.1.cube"]["ne"] == [4, 3, 2]
    assert rows["blk.0.attn_k.weight"]["type"] == "BF16" and rows["blk.0.attn_k.weight"]["type_id"] == 30


def test_tokenizer_summary(sample: Path) -> None:
    tok = inspect_gguf(sample)["tokenizer"]
    assert tok == {"model": "gpt2", "pre": "qwen2", "n_tokens": 50, "n_merges": 2, "has_scores": False,
                   "has_token_type": True, "special": {"bos": {"id": 3, "token": "tok3"},
                                                       "eos": {"id": 7, "token": "tok7"}},
                   "add": {"bos": False}, "chat_template": False}
    assert inspect_gguf(write_sample(sample.with_name("nt.gguf"), with_tokenizer=False))["tokenizer"] is None


def test_filter_and_no_tensors(sample: Path) -> None:
    info = inspect_gguf(sample, filter="blk.0.*")
    assert [r["name"] for r in info["tensors"]] == ["blk.0.attn_q.weight", "blk.0.attn_k.weight"]
    assert info["kvs"] == {} and info["tensor_count"] == 6
    info = inspect_gguf(sample, filter="tokenizer.ggml.*_id", tensors=False)
    assert list(info["kvs"]) == ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]
    assert info["tensors"] is None


def test_stats(sample: Path, tmp_path: Path) -> None:
    rows = {r["name"]: r for r in inspect_gguf(sample, stats=True)["tensors"]}
    s = rows["output_norm.weight"]["stats"]
    assert (s["min"], s["max"], s["nan"], s["inf"]) == (-1.0, 1.0, 0, 0)
    assert s["mean"] == pytest.approx(float(F32_VEC.mean()), abs=1e-7)
    assert s["std"] == pytest.approx(float(F32_VEC.astype(np.float64).std()))
    d = rows["d2t"]["stats"]
    assert (d["min"], d["max"]) == (-1.0, float(2**40)) and d["mean"] == pytest.approx(I64_VEC.mean())
    p = write_gguf(tmp_path / "nan.gguf", [], [("x", np.array([1.0, np.nan, np.inf, -np.inf, 3.0], np.float32), None)])
    assert inspect_gguf(p, stats=True)["tensors"][0]["stats"] == {"min": 1.0, "max": 3.0, "mean": 2.0, "std": 1.0,
                                                                    "nan": 1, "inf": 2}


def test_running_stats_is_chunk_independent() -> None:
    x = np.random.default_rng(0).standard_normal(1000) * 5 + 3
    whole, parts = RunningStats(), RunningStats()
    whole.update(x)
    for i in range(0, 1000, 7):
        parts.update(x[i : i + 7])
    assert parts.result() == pytest.approx(whole.result())
    assert whole.result()["std"] == pytest.approx(float(x.std()))


def test_unknown_type_and_bad_utf8_value(tmp_path: Path) -> None:
    p = tmp_path / "odd.gguf"
    p.write_bytes(raw_gguf([kv_raw("s", VT.STRING, gstr(b"ok\xff")), kv_u32("n", 5)],
                           [tinfo("q.weight", [32, 2], ggml_type=156), tinfo("f", [8], offset=0)], b"\0" * 64))
    info = inspect_gguf(p, stats=True)
    assert info["kvs"]["s"]["value"] == "ok\ufffd"
    q = info["tensors"][0]
    assert (q["type"], q["type_id"], q["nbytes"], q["stats"], q["n_elements"]) == ("UNKNOWN(156)", 156, None, None, 64)
    assert info["by_type"]["UNKNOWN(156)"] == {"tensors": 1, "n_elements": 64, "nbytes": None}
    assert info["tensors"][1]["stats"]["max"] == 0.0
    json.loads(dumps_json(info))


def test_jsonable_non_finite() -> None:
    assert jsonable({"a": [float("nan"), float("-inf")], "b": 1.5}) == {"a": ["nan", "-inf"], "b": 1.5}


def test_render_shows_hostile_text_literally(tmp_path: Path) -> None:
    p = tmp_path / "markup.gguf"
    p.write_bytes(raw_gguf([kv_raw("k[bold]", VT.STRING, gstr("[red]x[/] \x1b[2J\nend"))],
                           [tinfo("blk.3.[/]w", [8])], b"\0" * 32))
    console = Console(record=True, width=200)
    render_inspect(inspect_gguf(p, stats=True), console)
    text = console.export_text()
    assert "k[bold]" in text and "'[red]x[/] \\x1b[2J\\nend'" in text
    assert "blk.3" in text and "[/]w" in text and "\x1b" not in text


# -------------------------------------------------------------------------------------------------- the command
def test_cli_inspect_json(sample: Path) -> None:
    r = runner.invoke(app, ["inspect", str(sample), "--json", "--filter", "blk.1.*", "--stats"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert [t["name"] for t in info["tensors"]] == ["blk.1.ffn_up.weight", "blk.1.cube"]
    assert info["tensors"][1]["stats"]["nan"] == 0


def test_cli_inspect_rich(sample: Path) -> None:
    r = runner.invoke(app, ["inspect", str(sample)])
    assert r.exit_code == 0, r.output
    for needle in ("Metadata", "tokenizer.ggml.pre", "'qwen2'", "blk.0", "attn_q.weight", "Summary", "(3, 64)",
                   "[64, 3]"):
        assert needle in r.stdout, needle
    r = runner.invoke(app, ["inspect", str(sample), "--no-tensors", "--full-arrays"])
    assert r.exit_code == 0 and "Tensors (" not in r.stdout


def test_cli_inspect_error_is_one_line_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw_gguf([kv_u32("[/x]", 1), kv_u32("[/x]", 2)]))
    r = runner.invoke(app, ["inspect", str(p)])
    assert r.exit_code == 2
    assert r.stdout == "" and "duplicate key" in r.stderr and "[/x]" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = runner.invoke(app, ["inspect", str(tmp_path / "missing.gguf")])
    assert r.exit_code == 2 and "cannot open" in r.stderr


def test_huge_count_file_is_rejected_by_cli(tmp_path: Path) -> None:
    p = tmp_path / "huge.gguf"
    p.write_bytes(raw_gguf([kv_raw("a", VT.ARRAY, u32(VT.STRING) + u64(2**60))]))
    r = runner.invoke(app, ["inspect", str(p), "--json"])
    assert r.exit_code == 2 and "array of 1,152,921,504,606,846,976 STRING" in r.stderr
