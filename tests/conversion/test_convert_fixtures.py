"""Every shipped fixture converts with every outtype; the file is read back with gguf's own GGUFReader and every
key (value and GGUF type) and every tensor (name, order, type, ggml shape, bytes) is checked against the source
checkpoint and the contract. Expectations are written out here, independently of the converter's code."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, quants
from gguf import GGUFValueType as VT

from dspark_convert import check_file, convert

FIX = Path(__file__).resolve().parents[2] / "fixtures"
TARGET = FIX / "target-qwen3"
OUTTYPES = {"f32": (QT.F32, 0), "f16": (QT.F16, 1), "bf16": (QT.BF16, 32), "q8_0": (QT.Q8_0, 7)}
U32, I32, F32, BOOL, STR = VT.UINT32, VT.INT32, VT.FLOAT32, VT.BOOL, VT.STRING
EPS6 = float(np.float32(1e-6))

# --- expected arch keys per fixture: (key, GGUF type, value). general.file_type is checked separately.
DFLASH_BASE = [("dflash.block_count", U32, 2), ("dflash.context_length", U32, 40960), ("dflash.embedding_length", U32, 64),
               ("dflash.feed_forward_length", U32, 128), ("dflash.attention.head_count", U32, 4),
               ("dflash.attention.head_count_kv", U32, 2), ("dflash.rope.freq_base", F32, 1e6),
               ("dflash.attention.layer_norm_rms_epsilon", F32, EPS6), ("dflash.attention.key_length", U32, 16),
               ("dflash.attention.value_length", U32, 16)]
EAGLE_BASE = [(k.replace("dflash.", "eagle3.").replace("block_count", "block_count"), t, v) for k, t, v in DFLASH_BASE]
EAGLE_BASE[0] = ("eagle3.block_count", U32, 1)
TAPS = [2, 3, 5]  # fixtures' target_layer_ids [1, 2, 4] + 1; speculators ids [2, 3, 5] unchanged
CASES: dict[str, dict[str, Any]] = {
    "dspark-qwen3": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                            ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash"},
    "dspark-qwen3-interleaved": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                                        ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash", "deinterleave": True},
    "dspark-qwen3-f32": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                                ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash"},
    "dflash-deepspec": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                               ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash"},
    "dflash-zlab": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 16), ("dflash.target_layers", I32, TAPS)],
                    "absent": ["dflash.sample_from_anchor", "dflash.attention.sliding_window"], "arch": "dflash"},
    "dflash-zlab-swa": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 16), ("dflash.target_layers", I32, TAPS),
                                               ("dflash.attention.sliding_window", U32, 32),
                                               ("dflash.attention.sliding_window_pattern", BOOL, [True, False])],
                        "absent": ["dflash.sample_from_anchor"], "arch": "dflash"},
    # SpecForge nested config: neither speculators key is present, so the fallback of §3.3 gives True
    "dspark-specforge": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                                ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash"},
    "dspark-speculators": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                                  ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash"},
    "dspark-reduced": {"keys": DFLASH_BASE + [("dflash.block_size", U32, 7), ("dflash.target_layers", I32, TAPS),
                                              ("dflash.sample_from_anchor", BOOL, True)], "arch": "dflash", "d2t_limit": 1024},
    # SpecForge/AngelSlim nested eagle_config ids are ignored (§2.4): default [2, 6//2, 6-3] for a 6-layer target
    "eagle3-specforge": {"head": [("eagle3.target_layers", I32, [2, 3, 3]), ("eagle3.target_hidden_size", U32, 64),
                                  ("eagle3.norm_before_residual", BOOL, False), ("eagle3.norm_before_fc", BOOL, False)],
                         "keys": EAGLE_BASE + [("eagle3.vocab_size", U32, 1024), ("eagle3.rope.dimension_count", U32, 16)],
                         "arch": "eagle3", "d2t_limit": 1024},
    "eagle3-angelslim": {"head": [("eagle3.target_layers", I32, [2, 3, 3]), ("eagle3.target_hidden_size", U32, 64),
                                  ("eagle3.norm_before_residual", BOOL, False), ("eagle3.norm_before_fc", BOOL, False)],
                         "keys": EAGLE_BASE + [("eagle3.vocab_size", U32, 1024), ("eagle3.rope.dimension_count", U32, 16)],
                         "arch": "eagle3", "d2t_limit": 1024},
    "eagle3-speculators": {"head": [("eagle3.target_layers", I32, [2, 3, 5]), ("eagle3.target_hidden_size", U32, 64),
                                    ("eagle3.norm_before_residual", BOOL, True), ("eagle3.norm_before_fc", BOOL, False)],
                           "keys": EAGLE_BASE + [("eagle3.vocab_size", U32, 1024), ("eagle3.rope.dimension_count", U32, 16)],
                           "arch": "eagle3", "d2t_limit": 1024},
    "eagle3-normfc": {"head": [("eagle3.target_layers", I32, [2, 3, 5]), ("eagle3.target_hidden_size", U32, 64),
                               ("eagle3.norm_before_residual", BOOL, False), ("eagle3.norm_before_fc", BOOL, True)],
                      "keys": EAGLE_BASE + [("eagle3.vocab_size", U32, 1024), ("eagle3.rope.dimension_count", U32, 16)],
                      "arch": "eagle3", "d2t_limit": 1024},
    # plain Llama config: LlamaConfig defaults fill head_dim = 64/4; context 2048, eps 1e-5, theta 5e5
    "eagle3-llama": {"head": [("eagle3.target_layers", I32, [2, 3, 3]), ("eagle3.target_hidden_size", U32, 64),
                              ("eagle3.norm_before_residual", BOOL, False), ("eagle3.norm_before_fc", BOOL, False)],
                     "keys": [("eagle3.block_count", U32, 1), ("eagle3.context_length", U32, 2048), ("eagle3.embedding_length", U32, 64),
                              ("eagle3.feed_forward_length", U32, 128), ("eagle3.attention.head_count", U32, 4),
                              ("eagle3.attention.head_count_kv", U32, 2), ("eagle3.rope.freq_base", F32, 5e5),
                              ("eagle3.attention.layer_norm_rms_epsilon", F32, float(np.float32(1e-5))),
                              ("eagle3.attention.key_length", U32, 16), ("eagle3.attention.value_length", U32, 16),
                              ("eagle3.vocab_size", U32, 1024), ("eagle3.rope.dimension_count", U32, 16)],
                     "arch": "eagle3", "d2t_limit": 1024, "rope_freqs": True},
}

LAYER_MAP = {"input_layernorm.weight": "attn_norm.weight", "hidden_norm.weight": "attn_norm_2.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
GLOBAL_MAP = {"norm.weight": "output_norm.weight", "fc.weight": "fc.weight", "embed_tokens.weight": "token_embd.weight",
              "lm_head.weight": "output.weight", "markov_head.markov_w1.weight": "markov_w1.weight",
              "markov_head.markov_w2.weight": "markov_w2.weight", "confidence_head.proj.weight": "conf_proj.weight",
              "confidence_head.proj.bias": "conf_proj.bias"}


def load_safetensors(folder: Path) -> dict[str, tuple[str, np.ndarray]]:
    """Independent minimal safetensors reader: name -> (dtype, float32 values or int64)."""
    out = {}
    for f in sorted(folder.glob("model*.safetensors")):
        data = f.read_bytes()
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = data[8 + n + a:8 + n + b]
            dt = info["dtype"]
            if dt == "BF16":
                arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif dt in ("F16", "F32"):
                arr = np.frombuffer(raw, {"F16": np.float16, "F32": np.float32}[dt]).astype(np.float32)
            elif dt == "I64":
                arr = np.frombuffer(raw, np.int64)
            else:
                arr = np.frombuffer(raw, np.bool_)
            out[name] = (dt, arr.reshape(info["shape"]))
    return out


def expected_order(folder: Path) -> list[str]:
    """Sorted shard files (from the index when present), code-point-sorted names per file (§4.5)."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else \
        sorted(p.name for p in folder.glob("model*.safetensors"))
    names = []
    for fn in files:
        data = (folder / fn).read_bytes()
        header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
        names += sorted(k for k in header if k != "__metadata__")
    return names


def gguf_name(hf: str, arch: str) -> str | None:
    bare = hf.removeprefix("model.")
    if bare.startswith("midlayer."):
        bare = "layers.0." + bare[len("midlayer."):]
    if bare.startswith("layers."):
        _, i, rest = bare.split(".", 2)
        return f"blk.{i}.{LAYER_MAP[rest]}"
    if bare == "hidden_norm.weight":
        return "enc.output_norm.weight"
    if bare == "input_norm.weight":
        return "enc.output_norm.weight"
    return GLOBAL_MAP.get(bare)


def neox_from_interleaved(w: np.ndarray, hd: int) -> np.ndarray:
    """Index rule of §5.2 written as loops: new[g*hd + j] = old[g*hd + 2j]; new[g*hd + hd/2 + j] = old[g*hd + 2j + 1]."""
    new = np.empty_like(w)
    for g in range(w.shape[0] // hd):
        for j in range(hd // 2):
            new[g * hd + j] = w[g * hd + 2 * j]
            new[g * hd + hd // 2 + j] = w[g * hd + 2 * j + 1]
    return new


def interleaved_from_rotate_half(w: np.ndarray, n: int) -> np.ndarray:
    """EAGLE-3 rule of §5.2: new[g*hd + 2i + c] = old[g*hd + c*hd/2 + i]."""
    hd = w.shape[0] // n
    new = np.empty_like(w)
    for g in range(n):
        for i in range(hd // 2):
            for c in (0, 1):
                new[g * hd + 2 * i + c] = w[g * hd + c * hd // 2 + i]
    return new


def reader_value(field: Any) -> Any:
    vt = field.types[0]
    if vt == VT.ARRAY:
        if field.types[1] == VT.STRING:
            return [bytes(field.parts[i]).decode() for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if vt == VT.STRING:
        return bytes(field.parts[field.data[0]]).decode()
    return field.parts[field.data[0]].tolist()[0]


def f32_bytes_as(x: np.ndarray, qt: QT) -> bytes:
    if qt == QT.F32:
        return x.astype(np.float32).tobytes()
    if qt == QT.F16:
        return x.astype(np.float16).tobytes()
    if qt == QT.BF16:
        u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
    return quants.quantize(x.astype(np.float32), QT.Q8_0).tobytes()


@pytest.mark.parametrize("outtype", list(OUTTYPES))
@pytest.mark.parametrize("fixture", list(CASES))
def test_fixture_converts_exactly(fixture: str, outtype: str, tmp_path: Path) -> None:
    case = CASES[fixture]
    folder = FIX / fixture
    out = tmp_path / "draft.gguf"
    result = convert(folder, TARGET, out, outtype=outtype)
    assert result.path == out and out.stat().st_size == result.bytes_written
    assert check_file(out) == [] or all(f.level == "warning" for f in check_file(out))
    r = GGUFReader(out)
    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    order = list(fields)
    arch = case["arch"]
    assert reader_value(fields["general.architecture"]) == arch and order[0] == "general.architecture"
    want_type, file_type = OUTTYPES[outtype]
    expected = [("general.file_type", U32, file_type), ("general.quantization_version", U32, 2)]
    expected += case.get("head", []) + case["keys"]
    for key, vt, value in expected:
        assert key in fields, f"missing {key}"
        f = fields[key]
        if isinstance(value, list):
            assert f.types[0] == VT.ARRAY and f.types[1] == vt, key
        else:
            assert f.types[0] == vt, (key, f.types)
        got = reader_value(f)
        assert (math.isclose(got, value, rel_tol=0, abs_tol=0) if vt == F32 else got == value), (key, got, value)
    for key in case.get("absent", []):
        assert key not in fields
    if "head" in case:  # the four eagle3 keys sit right after general.architecture (§2.1 row 2)
        assert order[1:5] == [k for k, _, _ in case["head"]]
    # tokenizer from the target, padded to the draft vocab_size, mask id from the draft last (§2.2, §2.5)
    tokens = reader_value(fields["tokenizer.ggml.tokens"])
    assert len(tokens) == 1024 and tokens[1017:] == [f"[PAD{i}]" for i in range(1017, 1024)]
    assert reader_value(fields["tokenizer.ggml.token_type"])[1017:] == [5] * 7
    assert reader_value(fields["tokenizer.ggml.model"]) == "gpt2"
    if arch == "dflash":
        assert order[-1] == "tokenizer.ggml.mask_token_id" and fields["tokenizer.ggml.mask_token_id"].types[0] == U32
        assert reader_value(fields["tokenizer.ggml.mask_token_id"]) == 1016
    else:
        assert "tokenizer.ggml.mask_token_id" not in fields

    # --- tensors: names, order, types, shapes, bytes
    src = load_safetensors(folder)
    vocab = 1024
    vd = json.loads((folder / "config.json").read_text()).get("draft_vocab_size", vocab)
    names = []
    for hf in expected_order(folder):
        bare = hf.removeprefix("model.")
        if bare in ("t2d", "d2t"):
            continue
        # dflash full vocabulary: upstream b11434 keeps embed_tokens and drops lm_head; on this untied target our
        # default keeps lm_head too (output.weight: variants.dflash.lineage.choose_head_layout), so nothing is dropped
        names.append((hf, gguf_name(hf, arch)))
    if case.get("rope_freqs"):
        names.insert(0, (None, "rope_freqs.weight"))
    if any(n.endswith("d2t") for n in src):
        names.append(("d2t", "d2t"))
    assert [t.name for t in r.tensors] == [g for _, g in names]
    n_head, n_kv = 4, 2
    for (hf, gname), t in zip(names, r.tensors, strict=True):
        if gname == "rope_freqs.weight":
            assert t.tensor_type == QT.F32 and list(t.shape) == [8]
            vals = np.asarray(t.data)
            assert vals[0] == 1.0 and vals[-1] == 8.0 and np.all(np.diff(vals) >= 0)
            continue
        dt, x = src[hf]
        if gname == "d2t":
            assert t.tensor_type == QT.I64 and list(t.shape) == [vd]
            assert np.array_equal(np.asarray(t.data), x + np.arange(vd)) and np.all(np.asarray(t.data) < case["d2t_limit"])
            continue
        if case.get("deinterleave") and hf.endswith(("q_proj.weight", "k_proj.weight", "q_norm.weight", "k_norm.weight")):
            x = neox_from_interleaved(x, 16)
        if arch == "eagle3" and hf.endswith("q_proj.weight"):
            x = interleaved_from_rotate_half(x, n_head)
        if arch == "eagle3" and hf.endswith("k_proj.weight"):
            x = interleaved_from_rotate_half(x, n_kv)
        assert list(t.shape) == list(reversed(x.shape)), gname
        one_d_or_norm = x.ndim <= 1 or gname.endswith("_norm.weight") or not gname.endswith(".weight")
        qt = QT.F32 if one_d_or_norm else (QT.F16 if want_type == QT.Q8_0 and x.shape[-1] % 32 else want_type)
        assert t.tensor_type == qt, (gname, t.tensor_type, qt)
        data = np.asarray(t.data).tobytes()
        assert data == f32_bytes_as(x, qt), gname
        if qt == QT.BF16 and dt == "BF16":  # unchanged dtype: the very bytes of the checkpoint
            raw_src = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            assert data == raw_src.tobytes()
        if qt == QT.Q8_0:  # within the rounding of Q8_0: half a step per block, plus the F16 rounding of the scale
            deq = quants.dequantize(np.frombuffer(data, np.uint8).reshape(x.shape[0], -1), QT.Q8_0)
            step = np.abs(x.reshape(-1, 32)).max(axis=1) / 127
            assert np.all(np.abs(deq.reshape(-1, 32) - x.reshape(-1, 32)) <= step[:, None] * (0.5 + 127 * 2.0**-11) + 1e-12)
