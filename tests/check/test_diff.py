"""dspark_convert.diff and the ``diff`` command: KV/tensor differences, value statistics, exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf.quants import dequantize, quantize
from gguf_samples import raw_gguf, tinfo, u32, write_gguf
from rich.console import Console
from typer.testing import CliRunner

from dspark_convert import diff as diff_module
from dspark_convert.cli import app
from dspark_convert.diff import diff_gguf, value_diff
from dspark_convert.render import render_diff

runner = CliRunner()
W = np.random.default_rng(7).standard_normal((4, 32)).astype(np.float32)
N = np.linspace(0, 1, 32, dtype=np.float32)
Q = quantize(W, QT.Q8_0)
KVS = [("a.u32", 7, VT.UINT32), ("a.str", "x", VT.STRING), ("a.arr", [1, 2, 3], VT.ARRAY),
       ("tok", ["a", "b", "c"], VT.ARRAY)]
TENSORS = [("w", W, None), ("n", N, None), ("q", Q, QT.Q8_0)]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "a.gguf", KVS, TENSORS)


def test_identical_files_are_equal(base: Path, tmp_path: Path) -> None:
    other = write_gguf(tmp_path / "b.gguf", KVS, TENSORS)
    r = diff_gguf(base, other)
    assert r["equal"] is True and r["header"] == {}
    assert r["kvs"] == {"added": [], "removed": [], "changed": [], "order_changed": False}
    assert r["tensors"] == {"added": [], "removed": [], "changed": [], "identical": 3, "order_changed": False}


def test_kv_differences(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kvs = [("a.u32", 7, VT.INT32), ("a.arr", [1, 2, 4], VT.ARRAY), ("tok", ["a", "b"], VT.ARRAY),
           ("b.new", 1.5, VT.FLOAT32)]
    r = diff_gguf(base, write_gguf(tmp_path / "b.gguf", kvs, TENSORS))
    assert r["equal"] is False
    k = r["kvs"]
    assert [e["name"] for e in k["removed"]] == ["a.str"] and k["removed"][0]["value"] == "x"
    assert [(e["name"], e["type"], e["value"]) for e in k["added"]] == [("b.new", "FLOAT32", 1.5)]
    changed = {e["name"]: e for e in k["changed"]}
    assert list(changed) == ["a.u32", "a.arr", "tok"]
    assert (changed["a.u32"]["a"]["type"], changed["a.u32"]["b"]["type"]) == ("UINT32", "INT32")
    assert changed["a.u32"]["a"]["value"] == changed["a.u32"]["b"]["value"] == 7
    assert changed["a.arr"]["first_difference"] == 2 and changed["a.arr"]["b"]["value"] == [1, 2, 4]
    assert changed["tok"]["first_difference"] == 2 and changed["tok"]["b"]["count"] == 2
    assert k["order_changed"] is False
    monkeypatch.setattr(diff_module, "MAX_DECODED", 2)
    capped = {e["name"]: e for e in diff_gguf(base, tmp_path / "b.gguf")["kvs"]["changed"]}
    assert "first_difference" not in capped["a.arr"] and capped["a.arr"]["b"]["count"] == 3
    ignored = diff_gguf(base, tmp_path / "b.gguf", ignore=["a.*", "tok", "b.*"])
    assert ignored["equal"] is True


def test_tensor_differences_with_stats(base: Path, tmp_path: Path) -> None:
    w16 = W.astype(np.float16)
    tensors = [("w", w16, None), ("n", N.reshape(2, 16), None), ("q", dequantize(Q, QT.Q8_0), None),
               ("extra", N, None)]
    r = diff_gguf(base, write_gguf(tmp_path / "b.gguf", KVS, tensors))
    t = r["tensors"]
    assert r["equal"] is False and t["identical"] == 0 and t["removed"] == []
    assert t["added"] == [{"name": "extra", "type": "F32", "shape": [32], "nbytes": 128}]
    changed = {e["name"]: e for e in t["changed"]}
    w = changed["w"]
    assert (w["a"]["type"], w["b"]["type"], w["bytes_equal"]) == ("F32", "F16", False)
    d = W.astype(np.float64) - w16.astype(np.float64)
    assert w["max_abs_diff"] == pytest.approx(float(np.abs(d).max()), rel=1e-12)
    assert w["nmse"] == pytest.approx(float((d**2).mean() / W.astype(np.float64).var()), rel=1e-9)
    assert w["nonfinite_mismatch"] == 0
    assert changed["n"]["a"]["shape"] == [32] and changed["n"]["b"]["shape"] == [2, 16]
    assert "nmse" not in changed["n"]  # shapes differ: values are not compared element-wise
    q = changed["q"]  # the same values stored as Q8_0 and as F32
    assert (q["a"]["type"], q["b"]["type"], q["max_abs_diff"], q["nmse"]) == ("Q8_0", "F32", 0.0, 0.0)
    nostats = diff_gguf(base, tmp_path / "b.gguf", tensor_stats=False)
    assert "max_abs_diff" not in {k for e in nostats["tensors"]["changed"] for k in e}


def test_order_and_header(base: Path, tmp_path: Path) -> None:
    swapped = write_gguf(tmp_path / "b.gguf", [KVS[1], KVS[0], *KVS[2:]], [TENSORS[1], TENSORS[0], TENSORS[2]])
    r = diff_gguf(base, swapped)
    assert r["equal"] is False and r["kvs"]["order_changed"] and r["tensors"]["order_changed"]
    assert r["tensors"]["identical"] == 3
    assert diff_gguf(base, swapped, ignore_order=True)["equal"] is True
    v2 = tmp_path / "v2.gguf"
    data = bytearray(base.read_bytes())
    data[4:8] = u32(2)
    v2.write_bytes(bytes(data))
    r = diff_gguf(base, v2)
    assert r["header"] == {"version": {"a": 3, "b": 2}} and r["equal"] is False


def test_unknown_types_are_never_equal(tmp_path: Path) -> None:
    p = tmp_path / "u.gguf"
    p.write_bytes(raw_gguf([], [tinfo("x", [32], ggml_type=156)], b"\0" * 64))
    r = diff_gguf(p, p)
    assert r["equal"] is False
    assert r["tensors"]["changed"][0]["note"] == "unknown GGML type: data not compared"


def test_value_diff_non_finite_and_chunking() -> None:
    a = np.array([1.0, np.nan, np.inf, 2.0])
    d = value_diff([a], [np.array([1.0, np.nan, np.inf, 3.0])])
    assert d == {"max_abs_diff": 1.0, "mse": 0.5, "nmse": 2.0, "nonfinite_mismatch": 0}
    assert value_diff([np.array([1.0, np.nan])], [np.array([1.0, 2.0])])["nonfinite_mismatch"] == 1
    assert value_diff([np.ones(3)], [np.array([1.0, 1.0, 2.0])])["nmse"] == math.inf
    x = np.random.default_rng(1).standard_normal(100)
    y = x + np.random.default_rng(2).standard_normal(100) * 1e-3
    whole = value_diff([x], [y])
    split = value_diff([x[:3], x[3:50], x[50:]], [y[:41], y[41:]])
    assert split == pytest.approx(whole)


def test_render_diff(base: Path, tmp_path: Path) -> None:
    other = write_gguf(tmp_path / "b.gguf", [("a.u32", 8, VT.UINT32)], [("w", W.astype(np.float16), None)])
    console = Console(record=True, width=200)
    render_diff(diff_gguf(base, other), console)
    text = console.export_text()
    for needle in ("KV differences", "a.u32", "UINT32 7", "UINT32 8", "Tensor differences", "F32 (4, 32)",
                   "F16 (4, 32)", "DIFFERENT"):
        assert needle in text, needle


def test_cli_exit_codes(base: Path, tmp_path: Path) -> None:
    same = write_gguf(tmp_path / "same.gguf", KVS, TENSORS)
    r = runner.invoke(app, ["diff", str(base), str(same)])
    assert r.exit_code == 0 and "EQUAL" in r.stdout
    other = write_gguf(tmp_path / "b.gguf", [*KVS, ("z", 1, VT.UINT32)], TENSORS)
    r = runner.invoke(app, ["diff", str(base), str(other), "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["equal"] is False and [e["name"] for e in out["kvs"]["added"]] == ["z"]
    r = runner.invoke(app, ["diff", str(base), str(other), "--ignore", "q", "--ignore", "z"])
    assert r.exit_code == 0
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF")
    r = runner.invoke(app, ["diff", str(base), str(bad)])
    assert r.exit_code == 2 and "truncated" in r.stderr
