"""Issue 22, Nemotron-3.5 NVFP4 DSpark (ModelOpt NVFP4 W4A16 drafts): byte parity with upstream b11434 on the
public sample (make_inputs_b11434.py n-dspark-nvfp4 / n-dspark-nvfp4-mixed) and on variants of other dimensions
(tests/nvfp4_drafts.py, manifests made by upstream b11434 in tests/data/oracle-b11434/), the lossless repack, the
one-line refusals, ``check``'s companion / tensor_extra rules, ``inspect``, and ``verify`` with its mutations.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bad_inputs_kit import assert_refused, run_convert
from golden_manifest import compare
from nvfp4_drafts import ORACLE, OUTTYPES, VARIANTS, make, read_raw

from dspark_convert import convert
from dspark_convert.check import check_file, check_plan, errors
from dspark_convert.gguffile.reader import read_gguf

CASES = ("n-dspark-nvfp4", "n-dspark-nvfp4-mixed")


def _convert(draft: Path, target: Path, out: Path, outtype: str, *, match_upstream: bool = False) -> Path:
    r = convert(draft, target, out, outtype=outtype, force=True, match_upstream=match_upstream)
    assert [str(f) for f in r.findings if f.level == "error" and not f.subject.endswith("input_scale")] == []
    return out


def _error_subjects(path: Path) -> list[str]:
    return sorted(f"{f.subject} [{f.rule}]" for f in errors(check_file(path)))


# ---------------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("case", CASES)
def test_public_sample_equals_upstream_at_every_outtype(b11434_qwen3: Path, golden_dir: Path, tmp_path: Path,
                                                       case: str) -> None:
    """--match-upstream: every KV and tensor (sha256) and their order equal upstream b11434's manifest; NVFP4
    tensors stay NVFP4 (and their scales F32) at every outtype, file type 39 except q8_0 (7)."""
    for outtype in OUTTYPES:
        out = _convert(b11434_qwen3 / case, b11434_qwen3 / "target", tmp_path / f"{outtype}.gguf", outtype,
                       match_upstream=True)
        manifest = json.loads((golden_dir / "manifests-b11434" / f"{case}.{outtype}.json").read_text())
        assert compare(out, manifest) == [], outtype
        f = read_gguf(out)
        types = {t.name: t.type_name for t in f.tensors}
        ft = f.value("general.file_type")
        f.close()
        assert types["fc.weight"] == types["markov_w2.weight"] == "NVFP4" and types["fc.scale"] == "F32"
        assert ft == (7 if outtype == "q8_0" else 39)
        # upstream's own mixed file holds fc.input_scale, which llama-server b11434 refuses ("wrong number of
        # tensors; expected 34, got 33"): check says so
        want = ["fc.input_scale [extra-tensor]"] if case.endswith("mixed") else []
        assert _error_subjects(out) == want


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_equal_upstream_at_every_outtype(b11434_qwen3: Path, tmp_path: Path, variant: str) -> None:
    draft, target = make(tmp_path, variant, b11434_qwen3 / "target")
    failures = {}
    for outtype in OUTTYPES:
        out = _convert(draft, target, tmp_path / f"{outtype}.gguf", outtype, match_upstream=True)
        diffs = compare(out, json.loads((ORACLE / f"{variant}.{outtype}.json").read_text()))
        if diffs:
            failures[outtype] = diffs[:5]
        assert _error_subjects(out) == [], outtype
    assert failures == {}


def test_variant_facts(b11434_qwen3: Path, tmp_path: Path) -> None:
    """What the variants exercise, read back: scales of exactly 1.0 not written, W4A4 input scales written for
    layer linears, the whole-layer entry tags layer 1, MIXED tensors without an entry are not tagged, KV-cache scales
    dropped, excluded modules plain."""
    draft, target = make(tmp_path, "v-nvfp4-h128-mixed", b11434_qwen3 / "target")
    out = _convert(draft, target, tmp_path / "m.gguf", "bf16")
    f = read_gguf(out)
    types = {t.name: t.type_name for t in f.tensors}
    extra = f.value("general.tensor_extra.name")
    f.close()
    assert extra == ["blk.0.attn_k.weight", "blk.1.attn_k.weight", "blk.1.attn_output.weight", "blk.1.attn_q.weight",
                     "blk.1.attn_v.weight", "blk.1.ffn_down.weight", "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight",
                     "blk.2.ffn_up.weight", "fc.weight"]
    assert types["blk.0.attn_output.weight"] == "NVFP4" and "blk.0.attn_output.input_scale" in types
    assert "blk.0.attn_q.input_scale" not in types and "blk.0.ffn_down.input_scale" in types  # 1.0 vs 0.0x
    assert "blk.1.ffn_up.scale" not in types and "blk.1.ffn_down.scale" in types              # scale_2 1.0
    assert "markov_w2.input_scale" not in types and types["blk.3.ffn_up.weight"] == "BF16"
    draft, target = make(tmp_path, "v-nvfp4-h64", b11434_qwen3 / "target")
    out = _convert(draft, target, tmp_path / "h.gguf", "f16")
    f = read_gguf(out)
    types = {t.name: t.type_name for t in f.tensors}
    f.close()
    assert types["blk.0.attn_k.weight"] == "F16" and types["blk.2.ffn_gate.weight"] == "F16"
    assert types["blk.2.ffn_up.weight"] == "NVFP4" and types["blk.0.attn_sinks.weight"] == "F32"
    assert "fc.scale" not in types and "blk.0.attn_q.scale" not in types and "blk.0.attn_output.scale" in types
    assert not any("k_scale" in n or "v_scale" in n for n in types)


def test_mixed_default_drops_the_root_input_scale(b11434_qwen3: Path, tmp_path: Path) -> None:
    """By default fc.input_scale (which llama.cpp cannot load) is left out with a warning; everything else of
    upstream's layout is kept (plus output.weight for the untied target), and check finds nothing."""
    case = b11434_qwen3 / "n-dspark-nvfp4-mixed"
    r = convert(case, b11434_qwen3 / "target", tmp_path / "d.gguf", outtype="bf16")
    assert any(f.subject == "fc.input_scale" and f.level == "warning" for f in r.findings)
    up = _convert(case, b11434_qwen3 / "target", tmp_path / "u.gguf", "bf16", match_upstream=True)
    a, b = read_gguf(tmp_path / "d.gguf"), read_gguf(up)
    ours = {t.name: bytes(a.tensor_bytes(t.name)) for t in a.tensors}
    theirs = {t.name: bytes(b.tensor_bytes(t.name)) for t in b.tensors}
    a.close()
    b.close()
    assert set(theirs) - set(ours) == {"fc.input_scale"} and set(ours) - set(theirs) == {"output.weight"}
    assert all(ours[n] == theirs[n] for n in ours if n in theirs)
    assert _error_subjects(tmp_path / "d.gguf") == []


# ---------------------------------------------------------------------------------------------- the repack
def test_repack_is_lossless_against_two_decoders(b11434_qwen3: Path, tmp_path: Path) -> None:
    """Each NVFP4 tensor of the file decodes (gguf-py's decoder) to exactly the ModelOpt values (the torch side's
    own decoder) divided by weight_scale_2, which the F32 .scale holds bit for bit."""
    import torch
    from gguf import GGMLQuantizationType as QT
    from gguf.quants import dequantize
    from safetensors import safe_open

    from dspark_convert.reference.nvfp4_torch import dequant_modelopt_nvfp4

    draft = b11434_qwen3 / "n-dspark-nvfp4"
    out = _convert(draft, b11434_qwen3 / "target", tmp_path / "x.gguf", "bf16")
    f = read_gguf(out)
    pairs = {"fc.weight": "fc", "blk.0.ffn_down.weight": "layers.0.mlp.down_proj",
             "blk.1.ffn_down.weight": "layers.1.mlp.down_proj", "markov_w2.weight": "markov_head.markov_w2"}
    with safe_open(str(draft / "model.safetensors"), framework="pt") as h:
        for name, base in pairs.items():
            t = f.tensor(name)
            raw = np.frombuffer(bytes(f.tensor_bytes(name)), np.uint8).reshape(t.shape[0], -1)
            ours = dequantize(raw, QT.NVFP4).reshape(t.shape[0], t.shape[1])
            ref = dequant_modelopt_nvfp4(h.get_tensor(base + ".weight"), h.get_tensor(base + ".weight_scale"),
                                         torch.tensor(1.0)).numpy()
            assert np.array_equal(ours, ref), name
            s2 = float(h.get_tensor(base + ".weight_scale_2"))
            scale = name.replace(".weight", ".scale")
            if s2 == 1.0:
                assert scale not in {x.name for x in f.tensors}
            else:
                assert np.frombuffer(bytes(f.tensor_bytes(scale)), np.float32).tolist() == [np.float32(s2)]
    f.close()


# ---------------------------------------------------------------------------------------------- refusals
def _tensors(path: Path) -> tuple[list[str], dict[str, tuple[str, list[int], bytes]]]:
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return list(header), {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                          for k, v in header.items()}


def _write(path: Path, order: list[str], t: dict[str, tuple[str, list[int], bytes]]) -> None:
    header: dict[str, Any] = {}
    off, blobs = 0, []
    for k in order:
        if k not in t:
            continue
        dtype, shape, data = t[k]
        header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def _edit_tensors(draft: Path, fn: Callable[[dict[str, tuple[str, list[int], bytes]]], None]) -> None:
    order, t = _tensors(draft / "model.safetensors")
    fn(t)
    order += [k for k in t if k not in order]
    _write(draft / "model.safetensors", order, t)


def _edit_json(path: Path, fn: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _set_byte(t: dict[str, tuple[str, list[int], bytes]], name: str, value: int) -> None:
    dtype, shape, data = t[name]
    t[name] = (dtype, shape, bytes([value]) + data[1:])


def _zero_global_scale(t: dict[str, tuple[str, list[int], bytes]]) -> None:
    """fc as compressed-tensors stores it, with a global scale of 0 (its reciprocal, the per-tensor scale, is inf)."""
    t["fc.weight_packed"] = t.pop("fc.weight")
    t.pop("fc.weight_scale_2")
    t["fc.weight_global_scale"] = ("F32", [1], bytes(4))


def _in96(t: dict[str, tuple[str, list[int], bytes]]) -> None:
    t["layers.0.mlp.down_proj.weight"] = ("U8", [32, 48], bytes(32 * 48))
    t["layers.0.mlp.down_proj.weight_scale"] = ("F8_E4M3", [32, 6], bytes([0x38]) * (32 * 6))


def _quant(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def fn(c: dict[str, Any]) -> None:
        (c.get("quantization") or c["quantization_config"])[key] = value
    return fn


def _layer(name: str, algo: str) -> Callable[[dict[str, Any]], None]:
    def fn(c: dict[str, Any]) -> None:
        c["quantization"]["quantized_layers"][name] = {"quant_algo": algo, "group_size": 16}
    return fn


#: (case, sample, edit of the copy, fragments of the one error line)
REFUSALS: list[tuple[str, str, Callable[[Path], None], tuple[str, ...]]] = [
    ("in-features-not-64", "n-dspark-nvfp4", lambda d: _edit_tensors(d, _in96),
     ("tensor 'layers.0.mlp.down_proj.weight' has 96 in-features, not a multiple of 64",)),
    ("missing-weight-scale", "n-dspark-nvfp4", lambda d: _edit_tensors(d, lambda t: t.pop("fc.weight_scale")),
     ("tensor 'fc.weight' is U8 (NVFP4 codes?) but the checkpoint has no 'fc.weight_scale'",)),
    ("missing-weight-scale-2", "n-dspark-nvfp4", lambda d: _edit_tensors(d, lambda t: t.pop("fc.weight_scale_2")),
     ("tensor 'fc.weight' is NVFP4 but the checkpoint has no 'fc.weight_scale_2'",)),
    ("scale-dtype", "n-dspark-nvfp4",
     lambda d: _edit_tensors(d, lambda t: t.update({"fc.weight_scale": ("U8", *t["fc.weight_scale"][1:])})),
     ("tensor 'fc.weight_scale' is U8 [32, 4], expected F8_E4M3 [32, 4]",)),
    ("scale-shape", "n-dspark-nvfp4",
     lambda d: _edit_tensors(d, lambda t: t.update({"fc.weight_scale": ("F8_E4M3", [32, 2], t["fc.weight_scale"][2][:64])})),
     ("tensor 'fc.weight_scale' is F8_E4M3 [32, 2], expected F8_E4M3 [32, 4]",)),
    ("scale-2-not-scalar", "n-dspark-nvfp4",
     lambda d: _edit_tensors(d, lambda t: t.update({"fc.weight_scale_2": ("F32", [2], bytes(8))})),
     ("tensor 'fc.weight_scale_2' has shape [2], expected a scalar",)),
    ("unknown-quant-algo", "n-dspark-nvfp4",
     lambda d: (_edit_json(d / "config.json", _quant("quant_algo", "INT4_AWQ")),
                _edit_json(d / "hf_quant_config.json", _quant("quant_algo", "INT4_AWQ"))),
     ("hf_quant_config.json: quant_algo is 'INT4_AWQ'; expected NVFP4, W4A16_NVFP4, FP8 or MIXED_PRECISION",)),
    ("layer-names-missing-module", "n-dspark-nvfp4-mixed",
     lambda d: _edit_json(d / "hf_quant_config.json", _layer("layers.9.mlp.down_proj", "NVFP4")),
     ("quantized_layers entry 'layers.9.mlp.down_proj' names no module of the checkpoint",)),
    ("layer-awq", "n-dspark-nvfp4-mixed",
     lambda d: _edit_json(d / "hf_quant_config.json", _layer("fc", "W4A16_AWQ")),
     ("quantized_layers entry 'fc' has quant_algo 'W4A16_AWQ'; expected NVFP4, W4A16_NVFP4 or FP8",)),
    ("compressed-tensors-mixed", "n-dspark-nvfp4",
     lambda d: ((d / "hf_quant_config.json").unlink(), _edit_json(d / "config.json", lambda c: c.update(
         {"quantization_config": {"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": {
             "group_0": {"format": "nvfp4-pack-quantized"}, "group_1": {"format": "float-quantized"}}}}))),
     ("compressed-tensors config group 'group_1' has format 'float-quantized'; expected 'nvfp4-pack-quantized'",)),
    ("compressed-tensors-zero-scale", "n-dspark-nvfp4",
     lambda d: ((d / "hf_quant_config.json").unlink(), _edit_json(d / "config.json", lambda c: c.update(
         {"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}})),
                _edit_tensors(d, _zero_global_scale)),
     ("tensor 'fc.weight_global_scale' is 0.0, expected a finite non-zero global scale",)),
    ("negative-block-scale", "n-dspark-nvfp4", lambda d: _edit_tensors(d, lambda t: _set_byte(t, "fc.weight_scale", 0xB8)),
     ("tensor 'fc.weight_scale' holds negative E4M3 block scales",)),
    ("nan-block-scale", "n-dspark-nvfp4",
     lambda d: _edit_tensors(d, lambda t: _set_byte(t, "layers.1.mlp.down_proj.weight_scale", 0x7F)),
     ("tensor 'layers.1.mlp.down_proj.weight_scale' holds NaN E4M3 block scales",)),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals_are_one_line_and_leave_nothing(b11434_qwen3: Path, tmp_path: Path,
                                                 case: tuple[str, str, Callable[[Path], None], tuple[str, ...]]) -> None:
    _, sample, edit, fragments = case
    draft = tmp_path / "draft"
    shutil.copytree(b11434_qwen3 / sample, draft)
    edit(draft)
    assert_refused(run_convert(draft, b11434_qwen3 / "target", tmp_path / "out"), *fragments)


# ---------------------------------------------------------------------------------------------- check / inspect
@pytest.fixture(scope="module")
def files(b11434_qwen3: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Default conversions of both public-sample cases at every outtype."""
    out = tmp_path_factory.mktemp("nvfp4")
    return {f"{c}.{t}": _convert(b11434_qwen3 / c, b11434_qwen3 / "target", out / f"{c}.{t}.gguf", t)
            for c in CASES for t in OUTTYPES}


def _plan_findings(path: Path, edit: Callable[[Any], None]) -> list[str]:
    from dspark_convert.gguffile.source import plan_from_source

    plan = plan_from_source(path)[0]
    edit(plan)
    return sorted(f"{f.level} {f.subject} [{f.rule}]" for f in check_plan(plan) if f.rule in ("tensor-extra", "shape",
                                                                                             "extra-tensor", "dtype"))


def test_check_tensor_extra_and_companion_rules(files: dict[str, Path]) -> None:
    import dataclasses

    from dspark_convert.gguf_constants import QT, VT
    from dspark_convert.plan import KV

    f = files["n-dspark-nvfp4.bf16"]
    assert _plan_findings(f, lambda p: None) == []

    def drop(*keys: str) -> Callable[[Any], None]:
        return lambda p: p.kvs.__setitem__(slice(None), [k for k in p.kvs if k.name not in keys])

    def setkv(key: str, value: Any, sub: VT) -> Callable[[Any], None]:
        return lambda p: p.kvs.__setitem__(slice(None), [KV(key, VT.ARRAY, value, sub) if k.name == key else k
                                                         for k in p.kvs])

    def retype(name: str, shape: tuple[int, ...], qt: QT) -> Callable[[Any], None]:
        return lambda p: p.tensors.__setitem__(slice(None), [dataclasses.replace(t, shape=shape, ggml_type=qt)
                                                             if t.name == name else t for t in p.tensors])

    names = ["blk.0.ffn_down.weight", "blk.1.ffn_down.weight", "fc.weight", "markov_w2.weight"]
    assert _plan_findings(f, drop("general.tensor_extra.prec_a4")) == ["error general.tensor_extra.prec_a4 [tensor-extra]"]
    assert _plan_findings(f, drop("general.tensor_extra.name", "general.tensor_extra.prec_a4")) == [
        "warning general.tensor_extra.name [tensor-extra]"]
    assert _plan_findings(f, setkv("general.tensor_extra.prec_a4", [False] * 3, VT.BOOL)) == [
        "error general.tensor_extra.prec_a4 [tensor-extra]"]
    assert _plan_findings(f, setkv("general.tensor_extra.prec_a4", [0] * 4, VT.UINT8)) == [
        "error general.tensor_extra.prec_a4 [tensor-extra]"]
    assert _plan_findings(f, setkv("general.tensor_extra.name", names[::-1], VT.STRING)) == [
        "warning general.tensor_extra.name [tensor-extra]"]
    assert _plan_findings(f, setkv("general.tensor_extra.name", names[:3] + ["markov_w9.weight"], VT.STRING)) == [
        "warning general.tensor_extra.name [tensor-extra]"]
    assert _plan_findings(f, retype("fc.scale", (2,), QT.F32)) == ["error fc.scale [shape]"]
    assert _plan_findings(f, retype("fc.scale", (1,), QT.F16)) == ["error fc.scale [dtype]"]
    assert _plan_findings(f, retype("markov_w2.scale", (1,), QT.BF16)) == ["error markov_w2.scale [dtype]"]
    add = [("blk.0.attn_norm.scale", "extra-tensor"), ("markov_w2.input_scale", "extra-tensor")]
    for name, rule in add:
        def extra(p: Any, name: str = name) -> None:
            p.tensors.append(dataclasses.replace(p.tensor("fc.scale"), name=name))
        assert _plan_findings(f, extra) == [f"error {name} [{rule}]"]

    def layer_input_scale(p: Any) -> None:
        p.tensors.append(dataclasses.replace(p.tensor("fc.scale"), name="blk.1.attn_q.input_scale"))
    assert _plan_findings(f, layer_input_scale) == []


def test_check_target_fits(files: dict[str, Path], b11434_qwen3: Path) -> None:
    from dspark_convert.fit.rules import check_fit

    for f in files.values():
        r = check_fit(f, b11434_qwen3 / "target")
        assert [x.id for x in r.results if x.status == "fail"] == [], f.name


def test_inspect_shows_nvfp4_and_prec_a4(files: dict[str, Path]) -> None:
    from bad_inputs_kit import run_cli

    out = run_cli(["inspect", str(files["n-dspark-nvfp4-mixed.q8_0"])], files["n-dspark-nvfp4-mixed.q8_0"].parent)
    assert out.exit_code == 0, out.stderr
    text = out.stdout
    assert "general.tensor_extra.name" in text and "['blk.1.ffn_down.weight', 'markov_w2.weight']" in text
    assert "general.tensor_extra.prec_a4" in text and "[False, False]" in text
    assert any(line.split()[:2] == ["markov_w2.weight", "NVFP4"] for line in text.splitlines())
    assert any(line.split()[:2] == ["fc.scale", "F32"] for line in text.splitlines())


# ---------------------------------------------------------------------------------------------- verify
def _verify_rows(gguf: Path, hf: Path, target: Path) -> tuple[bool, dict[str, bool]]:
    from dspark_convert.verify import verify

    r = verify(gguf, hf, target, context=8, quality=False)
    rows = {o.name: o.passed for o in r.outputs} | {f"metadata {m.key}": m.passed for m in r.metadata}
    if r.accounting is not None:
        rows["tensor accounting"] = r.accounting.passed
    return r.passed, rows


@pytest.mark.parametrize("key", [f"{c}.{t}" for c in CASES for t in OUTTYPES])
def test_verify_passes(files: dict[str, Path], b11434_qwen3: Path, key: str) -> None:
    case = key.split(".")[0]
    passed, rows = _verify_rows(files[key], b11434_qwen3 / case, b11434_qwen3 / "target")
    assert passed, rows
    assert rows["NVFP4 input scales"] and rows["metadata general.tensor_extra.prec_a4"] and rows["tensor accounting"]


@pytest.mark.parametrize(("variant", "outtype"), [("v-nvfp4-h64", "f16"), ("v-nvfp4-h128-mixed", "q8_0"),
                                                   ("v-nvfp4-dflash", "bf16"), ("v-nvfp4-fp8-mixed", "bf16"),
                                                   ("v-modelopt-fp8", "f16"), ("v-ct-nvfp4", "bf16"),
                                                   ("v-ct-mixed-dflash", "q8_0"), ("v-fp8-channel", "f32")])
def test_variants_verify(b11434_qwen3: Path, tmp_path: Path, variant: str, outtype: str) -> None:
    """The variants verify (their targets get a random embedding and head): W4A4 input scales on every DFlash
    linear, MIXED tables, F32 plain tensors, sinks and model.-prefixed names, KV-cache scales dropped by rule, FP8
    linears read by the torch side as codes times their scale, per tensor or per row (their input scales dropped by
    rule), compressed-tensors
    names and reciprocal global scales read by the torch side's own renaming; a draft without NVFP4 tensors has no
    NVFP4 rows."""
    draft, target = make(tmp_path, variant, b11434_qwen3 / "target", target_weights=True)
    out = _convert(draft, target, tmp_path / "v.gguf", outtype)
    passed, rows = _verify_rows(out, draft, target)
    assert passed, rows
    assert rows["tensor accounting"]
    if variant == "v-modelopt-fp8":
        assert "NVFP4 input scales" not in rows and rows["block logits"]
    else:
        assert rows["NVFP4 input scales"] and rows["metadata general.tensor_extra.name"]


def _swap_nibbles(path: Path, dst: Path, name: str) -> Path:
    shutil.copyfile(path, dst)
    f = read_gguf(dst)
    t = f.tensor(name)
    raw = np.frombuffer(bytes(f.tensor_bytes(name)), np.uint8).reshape(-1, 36).copy()
    f.close()
    qs = raw[:, 4:]
    raw[:, 4:] = (qs >> 4) | (qs << 4)
    with open(dst, "r+b") as fh:
        fh.seek(t.offset)
        fh.write(raw.tobytes())
    return dst


@pytest.mark.parametrize("mutation", ["dropped-prec-a4", "prec-a4-true", "wrong-fc-scale", "wrong-ffn-down-scale",
                                      "swapped-nibbles-ffn-down", "swapped-nibbles-markov-w2"])
def test_verify_fails_mutations(files: dict[str, Path], b11434_qwen3: Path, tmp_path: Path,
                                mutation: str) -> None:
    from test_mutations import mutate

    case = "n-dspark-nvfp4"
    good = files[f"{case}.bf16"]
    bad = tmp_path / "bad.gguf"
    if mutation == "dropped-prec-a4":   # renamed out of the way (same length): the arrays are gone for llama.cpp
        mutate(good, bad, renames={"general.tensor_extra.name": "general.tensor_extra.nam_",
                                   "general.tensor_extra.prec_a4": "general.tensor_extra.prec_a_"})
        failing = ["metadata general.tensor_extra.name", "metadata general.tensor_extra.prec_a4"]
    elif mutation == "prec-a4-true":
        shutil.copyfile(good, bad)
        f = read_gguf(bad)
        kv = f.kvs["general.tensor_extra.prec_a4"]
        f.close()
        assert kv.end - kv.value_offset == 4
        with open(bad, "r+b") as fh:       # the 4 BOOL bytes of the array: true (4-bit activations)
            fh.seek(kv.value_offset)
            fh.write(bytes([1] * 4))
        failing = ["metadata general.tensor_extra.prec_a4"]
    elif mutation == "wrong-fc-scale":
        mutate(good, bad, tensors={"fc.scale": lambda w: w * 2})
        failing = ["context projection"]
    elif mutation == "wrong-ffn-down-scale":
        mutate(good, bad, tensors={"blk.0.ffn_down.scale": lambda w: w * 1.5})
        failing = ["layer 0 output"]
    elif mutation == "swapped-nibbles-ffn-down":
        _swap_nibbles(good, bad, "blk.1.ffn_down.weight")
        failing = ["layer 1 output"]
    else:
        _swap_nibbles(good, bad, "markov_w2.weight")
        failing = ["Markov bias W2 W1[prev]"]
    passed, rows = _verify_rows(bad, b11434_qwen3 / case, b11434_qwen3 / "target")
    assert not passed
    assert [r for r in failing if rows.get(r) is not False] == [], rows
    if mutation.startswith(("dropped", "prec")):   # metadata only: every forward row still agrees
        assert rows["layer 1 output"] and rows["Markov-biased logits"]
    if mutation == "swapped-nibbles-ffn-down":
        assert rows["layer 0 output"]


#: the linears each block variant's NVFP4 copy quantizes (checkpoint module -> ModelOpt algo), on inputs the
#: golden set does not need: fixtures/dflash2-zlab and tests/gemma4_drafts.py's v-gemma4-tied
_OWN_NVFP4 = {"dflash2": {"layers.0.self_attn.q_proj": "W4A16_NVFP4", "layers.0.mlp.down_proj": "NVFP4",
                          "layers.1.self_attn.o_proj": "NVFP4"},
              "gemma4": {"layers.0.self_attn.q_proj": "W4A16_NVFP4", "layers.0.mlp.gate_proj": "NVFP4"}}


def _own_nvfp4(tmp_path: Path, variant: str) -> tuple[Path, Path, Path]:
    """(GGUF at bf16, NVFP4 draft, target) of a DFlash2 or Gemma4 DSpark draft with ModelOpt NVFP4 linears."""
    from conftest import FIXTURES
    from gemma4_drafts import make as make_gemma4
    from nvfp4_drafts import with_nvfp4

    if variant == "dflash2":
        src, target = FIXTURES / "dflash2-zlab", FIXTURES / "target-qwen3"
    else:
        src, target = make_gemma4(tmp_path, "v-gemma4-tied")
    draft = with_nvfp4(src, tmp_path / f"{variant}-nvfp4", _OWN_NVFP4[variant], 7)
    return _convert(draft, target, tmp_path / f"{variant}.gguf", "bf16"), draft, target


@pytest.mark.parametrize("variant", sorted(_OWN_NVFP4))
def test_dflash2_and_gemma4_files_hold_nvfp4_and_verify_proves_them(tmp_path: Path, variant: str) -> None:
    """DFlash2 and Gemma4 DSpark drafts with ModelOpt NVFP4 linears convert as the DSpark ones do (NVFP4 blocks,
    ``.scale`` / ``.input_scale``, the prec_a4 arrays) and verify proves them through the same path: the NVFP4 rows
    with the file's values, the forwards on the decoded weights to round-off, every tensor accounted for."""
    from dspark_convert.verify import verify

    gguf, draft, target = _own_nvfp4(tmp_path, variant)
    assert check_file(gguf) == [f for f in check_file(gguf) if f.level != "error"]
    r = verify(gguf, draft, target, context=8, quality=False)
    assert r.passed, r.first_divergence
    meta = {m.key: (m.gguf, m.expected, m.passed) for m in r.metadata}
    assert meta["general.tensor_extra.name"] == (["blk.0.attn_q.weight"], ["blk.0.attn_q.weight"], True)
    assert meta["general.tensor_extra.prec_a4"] == ([False], [False], True)
    assert meta["NVFP4 tensor types"] == ("all NVFP4", "all NVFP4", True)
    w4a4 = sum(a == "NVFP4" for a in _OWN_NVFP4[variant].values())
    scales = next(o for o in r.outputs if o.name == "NVFP4 input scales")
    assert (scales.passed, scales.grade, scales.detail) == (
        True, "exact", f"{w4a4} in the GGUF, {w4a4} in the checkpoint, all equal or trivial")
    assert r.storage["NVFP4"] == {"tensors": len(_OWN_NVFP4[variant]), "values": r.storage["NVFP4"]["values"],
                                  "changed": 0, "max_change": 0.0} and r.storage["NVFP4"]["values"] >= 8192
    layer0 = next(o for o in r.outputs if o.name == "layer 0 output")
    assert layer0.passed and layer0.nmse is not None and layer0.nmse < 1e-10
    assert r.tensors["counts"]["gguf"]["compared"] == w4a4 and r.tensors["unaccounted"] == {"gguf": [], "checkpoint": []}


_MODULE_NAMES = {"self_attn.q_proj": "attn_q", "mlp.down_proj": "ffn_down", "mlp.gate_proj": "ffn_gate"}


def _gguf_module(name: str) -> str:
    """``layers.N.<module>.<scale>`` -> ``blk.N.<gguf module>`` for the linears these tests quantize."""
    parts = name.split(".")
    i = parts.index("layers")
    return f"blk.{parts[i + 1]}.{_MODULE_NAMES['.'.join(parts[i + 2:i + 4])]}"


@pytest.mark.parametrize("variant", ["dspark", *sorted(_OWN_NVFP4)])
def test_compressed_tensors_converts_as_its_modelopt_form(tmp_path: Path, variant: str) -> None:
    """A compressed-tensors NVFP4 draft (``weight_packed``, reciprocal global scales) and the ModelOpt draft it was
    made from give the same file for DSpark, DFlash2 and Gemma4 DSpark: every KV and tensor byte for byte, but the
    per-tensor scales, which are 1 / the stored global scales (within an ulp of ModelOpt's); ``verify`` proves the
    compressed one through its own torch-side renaming, and fails a file whose ``.scale`` is the stored global
    scale (not inverted)."""
    from conftest import FIXTURES
    from gemma4_drafts import make as make_gemma4
    from nvfp4_drafts import to_compressed_tensors, with_nvfp4
    from test_mutations import mutate

    from dspark_convert.verify import verify

    if variant == "dspark":
        src, target = FIXTURES / "dspark-qwen3", FIXTURES / "target-qwen3"
        modules = {"layers.0.self_attn.q_proj": "NVFP4", "layers.0.mlp.down_proj": "NVFP4"}
    elif variant == "dflash2":
        src, target = FIXTURES / "dflash2-zlab", FIXTURES / "target-qwen3"
        modules = {"layers.0.self_attn.q_proj": "NVFP4", "layers.0.mlp.down_proj": "NVFP4"}
    else:
        src, target = make_gemma4(tmp_path, "v-gemma4-tied")
        modules = {"layers.0.self_attn.q_proj": "NVFP4", "layers.0.mlp.gate_proj": "NVFP4"}
    modelopt = with_nvfp4(src, tmp_path / "modelopt" / "draft", modules, 11)
    compressed = tmp_path / "ct" / "draft"
    shutil.copytree(modelopt, compressed)
    to_compressed_tensors(compressed)
    names = json.loads((compressed / "model.safetensors").read_bytes()[8:8 + struct.unpack("<Q", (
        compressed / "model.safetensors").read_bytes()[:8])[0]])
    assert any(n.endswith(".weight_packed") for n in names) and not any(n.endswith(".weight_scale_2") for n in names)
    a, b = tmp_path / "modelopt.gguf", tmp_path / "ct.gguf"
    convert(modelopt, target, a, outtype="bf16", force=True)
    convert(compressed, target, b, outtype="bf16", force=True)
    from gguf import GGUFReader

    ra, rb = GGUFReader(a), GGUFReader(b)
    assert [b"".join(bytes(x) for x in f.parts) for f in ra.fields.values()] == \
        [b"".join(bytes(x) for x in f.parts) for f in rb.fields.values()]
    ta, tb = {t.name: t for t in ra.tensors}, {t.name: t for t in rb.tensors}
    assert list(ta) == list(tb)
    stored = read_raw(compressed / "model.safetensors")
    scales = 0
    for name, t in tb.items():
        assert (t.tensor_type, list(t.shape)) == (ta[name].tensor_type, list(ta[name].shape)), name
        if not name.endswith(("scale", "input_scale")):
            assert t.data.tobytes() == ta[name].data.tobytes(), name
            continue
        # the per-tensor scales: 1 / the stored global scale, in float32 (1 / (1 / x) may differ from x by an ulp)
        src = next(k for k in stored if k.endswith(".weight_global_scale" if name.endswith(".scale") else
                                                   ".input_global_scale") and _gguf_module(k) == name.rpartition(".")[0])
        assert t.data.tolist() == [float(np.float32(1.0) / stored[src][1].reshape(-1)[0])], name
        assert abs(float(t.data[0]) - float(ta[name].data[0])) <= float(np.spacing(np.float32(ta[name].data[0]))), name
        scales += 1
    assert scales >= len(modules)
    assert sum(t.tensor_type.name == "NVFP4" for t in tb.values()) == len(modules)
    r = verify(b, compressed, target, context=8, quality=False)
    assert r.passed, r.first_divergence
    assert r.tensors["unaccounted"] == {"gguf": [], "checkpoint": []}
    scale = "blk.0.ffn_down.scale" if variant != "gemma4" else "blk.0.ffn_gate.scale"
    bad = tmp_path / "bad.gguf"
    mutate(b, bad, tensors={scale: lambda w: 1 / w})  # the global scale as stored, not its reciprocal
    r = verify(bad, compressed, target, context=8, quality=False)
    assert not r.passed and {o.name: o.passed for o in r.outputs}["layer 0 output"] is False


@pytest.mark.parametrize("variant", sorted(_OWN_NVFP4))
def test_dflash2_and_gemma4_nvfp4_rows_fail_on_a_wrong_file(tmp_path: Path, variant: str) -> None:
    """Teeth: a wrong input scale fails the input-scale row, the arrays renamed away fail their metadata rows; the
    forward rows still agree (neither is read by a forward)."""
    from test_mutations import mutate

    from dspark_convert.verify import verify

    gguf, draft, target = _own_nvfp4(tmp_path, variant)
    scale = "blk.0.ffn_down.input_scale" if variant == "dflash2" else "blk.0.ffn_gate.input_scale"
    bad = tmp_path / "bad.gguf"
    mutate(gguf, bad, tensors={scale: lambda w: w * 2},
           renames={"general.tensor_extra.name": "general.tensor_extra.nam_"})
    r = verify(bad, draft, target, context=8, quality=False)
    rows = {o.name: o for o in r.outputs}
    assert not r.passed and not rows["NVFP4 input scales"].passed and rows["NVFP4 input scales"].grade == "wrong"
    assert rows["NVFP4 input scales"].detail.startswith(f"{scale} = ")
    assert [m.key for m in r.metadata if not m.passed] == ["general.tensor_extra.name"]
    assert rows["layer 0 output"].passed and rows["block hidden (post-norm)"].passed


# ---------------------------------------------------------------------------------------------- llama-server
@pytest.mark.llama
def test_llama_server_runs_the_default_files_and_refuses_upstreams_mixed(llama_bin: tuple[Path, Path],
                                                                          b11434_qwen3: Path,
                                                                          tmp_path: Path) -> None:
    """llama-server b11434 loads both default conversions and the compressed-tensors form of the first and drafts
    with them (greedy output unchanged by the draft); upstream's own mixed layout (fc.input_scale,
    --match-upstream) fails to load."""
    from llama.target import convert_target
    from llama_support import run
    from nvfp4_drafts import to_compressed_tensors

    from dspark_convert.errors import ConvertError

    target = convert_target(llama_bin[1], b11434_qwen3 / "target", tmp_path / "target.bf16.gguf", outtype="bf16")
    plain = run(llama_bin[0], target)
    for case in CASES:
        f = _convert(b11434_qwen3 / case, b11434_qwen3 / "target", tmp_path / f"{case}.gguf", "bf16")
        r = run(llama_bin[0], target, f)
        assert r.completion.tokens == plain.completion.tokens and len(r.blocks) > 0, case
    ct = to_compressed_tensors(shutil.copytree(b11434_qwen3 / CASES[0], tmp_path / "ct"))  # llm-compressor's names
    r = run(llama_bin[0], target, _convert(ct, b11434_qwen3 / "target", tmp_path / "ct.gguf", "bf16"))
    assert r.completion.tokens == plain.completion.tokens and len(r.blocks) > 0, "compressed-tensors"
    up = _convert(b11434_qwen3 / CASES[1], b11434_qwen3 / "target", tmp_path / "up.gguf", "bf16", match_upstream=True)
    with pytest.raises(ConvertError, match="wrong number of tensors"):
        run(llama_bin[0], target, up)


def test_sinks_sample_verifies(b11434_qwen3: Path, tmp_path: Path) -> None:
    """n-dspark-sinks (per-layer attention sinks, model.-prefixed names as Nemotron's): both forwards read the sinks
    and agree; negated sinks fail layer 0."""
    from test_mutations import mutate

    case, target = b11434_qwen3 / "n-dspark-sinks", b11434_qwen3 / "target"
    good = _convert(case, target, tmp_path / "s.gguf", "bf16")
    passed, rows = _verify_rows(good, case, target)
    assert passed and rows["tensor accounting"], rows
    bad = mutate(good, tmp_path / "bad.gguf", tensors={"blk.0.attn_sinks.weight": lambda w: -w})
    passed, rows = _verify_rows(bad, case, target)
    assert not passed and rows["layer 0 output"] is False, rows


def test_every_refusal_is_in_the_troubleshooting_catalogue() -> None:
    """Each refusal has a section in docs/troubleshooting.md quoting one error line with its fragments."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    for cid, _, _, fragments in REFUSALS:
        head = f"### `{cid}`\n```\n"
        assert head in text, cid
        quoted = text.split(head, 1)[1].split("\n```", 1)[0]
        assert quoted.startswith("error: ") and "\n" not in quoted and all(f in quoted for f in fragments), cid


def _e4m3(codes: np.ndarray) -> np.ndarray:
    """F8_E4M3 bytes -> float64 from the bit layout (sign, 4 exponent bits of bias 7, 3 mantissa bits)."""
    s, e, m = codes >> 7, (codes >> 3) & 0xF, codes & 7
    mag = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))
    return np.where(s == 1, -mag, mag)


def test_fp8_layers_are_dequantized_in_place(b11434_qwen3: Path, tmp_path: Path) -> None:
    """A MIXED_PRECISION draft's ModelOpt FP8 layers: codes times the scalar weight_scale, stored at the outtype in
    their checkpoint place (after the NVFP4 tensors, as upstream b11434), none of their scales written."""
    draft, target = make(tmp_path, "v-nvfp4-fp8-mixed", b11434_qwen3 / "target")
    out = _convert(draft, target, tmp_path / "f.gguf", "f32")
    raw = read_raw(draft / "model.safetensors")
    f = read_gguf(out)
    names = [t.name for t in f.tensors]
    types = {t.name: t.type_name for t in f.tensors}
    got = np.frombuffer(bytes(f.tensor_bytes("blk.1.ffn_down.weight")), np.float32).reshape(128, 256)
    f.close()
    want = _e4m3(raw["layers.1.mlp.down_proj.weight"][1]) * float(raw["layers.1.mlp.down_proj.weight_scale"][1])
    assert np.array_equal(got, want.astype(np.float32))
    assert types["blk.1.ffn_down.weight"] == types["blk.1.attn_output.weight"] == "F32"
    assert types["blk.0.ffn_down.weight"] == types["fc.weight"] == "NVFP4" and "blk.0.ffn_down.input_scale" in types
    assert not any(n.startswith(("blk.1.ffn_down.", "blk.1.attn_output.")) and not n.endswith(".weight")
                   for n in names)
    assert names.index("blk.1.ffn_down.weight") > max(i for i, n in enumerate(names) if types[n] == "NVFP4")


def test_fp8_per_channel_scales_multiply_rows(b11434_qwen3: Path, tmp_path: Path) -> None:
    """ModelOpt FP8 linears with one BF16 weight scale per output row: row i is the codes times scale[i] (the square
    o_proj tells rows from columns), the scale not written; verify proves the file and fails one whose rows were
    scaled by the wrong entries."""
    from test_mutations import mutate

    from dspark_convert.verify import verify

    draft, target = make(tmp_path, "v-fp8-channel", b11434_qwen3 / "target", target_weights=True)
    out = _convert(draft, target, tmp_path / "f.gguf", "f32")
    raw = read_raw(draft / "model.safetensors")
    f = read_gguf(out)
    got = np.frombuffer(bytes(f.tensor_bytes("blk.1.attn_output.weight")), np.float32).reshape(128, 128)
    names = [t.name for t in f.tensors]
    f.close()
    codes, bits = raw["layers.1.self_attn.o_proj.weight"][1], raw["layers.1.self_attn.o_proj.weight_scale"][1]
    scale = (bits.astype(np.uint32) << 16).view(np.float32)
    assert bits.shape == (128,) and len(set(scale.tolist())) > 100
    assert np.array_equal(got, (_e4m3(codes) * scale.astype(np.float64)[:, None]).astype(np.float32))
    assert not any(n.startswith("blk.1.attn_output.") and n != "blk.1.attn_output.weight" for n in names)
    r = verify(out, draft, target, context=8, quality=False)
    assert r.passed, r.first_divergence
    bad = tmp_path / "bad.gguf"
    mutate(out, bad, tensors={"blk.1.attn_output.weight": lambda w: w / scale[:, None] * scale[None, :]})
    r = verify(bad, draft, target, context=8, quality=False)
    assert not r.passed and {o.name: o.passed for o in r.outputs}["layer 1 output"] is False
