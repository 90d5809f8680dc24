"""An independent re-implementation of upstream's DeepSeek-V4 DSpark conversion, for tests only.

Written from spec/dsv4-dspark.md §2-§3 without using dspark_convert: its own safetensors reader, FP8/E8M0/FP4
decoding from the bit layouts, upstream's dequantization formula (``repeat_interleave`` of the tile scales), Q8_0
through gguf-py's reference quantizer (``gguf.quants.quantize``), the MXFP4 byte layout written from the element
definition, and the tensor order (experts first, then shard order x sorted source names). It is slow and keeps
whole tensors in memory: fine for test-sized checkpoints.

``expected_tensors(ckpt)`` -> ``[(gguf_name, ggml_type_name, ne, bytes)]`` in file order;
``expected_kvs(config, stages)`` -> ``{key: value}`` of the architecture keys.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, quants

STORAGE = {"F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "I8": np.uint8, "BF16": np.uint16, "F32": np.float32,
           "F16": np.float16}

STAGE_NAMES = {
    "attn.attn_sink": "attn_sinks.weight",
    "attn.wq_a.weight": "attn_q_a.weight",
    "attn.wq_b.weight": "attn_q_b.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight",
    "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight",
    "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight",
    "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight",
    "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight",
    "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
    **{f"hc_{k}_{p}": f"hc_{k}_{p}.weight" for k in ("attn", "ffn") for p in ("fn", "base", "scale")},
}
ROOT_NAMES = {
    "main_proj.weight": "fc.weight",
    "main_norm.weight": "enc.output_norm.weight",
    "norm.weight": "output_norm.weight",
    "hc_head_fn": "output_hc_fn.weight",
    "hc_head_base": "output_hc_base.weight",
    "hc_head_scale": "output_hc_scale.weight",
    "markov_head.markov_w1.weight": "markov_w1.weight",
    "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight",
}
EXPERT_NAMES = {"w1": "ffn_gate_exps.weight", "w2": "ffn_down_exps.weight", "w3": "ffn_up_exps.weight"}


# ---------------------------------------------------------------------------------------------- reading
def read_header(path: Path) -> tuple[int, dict[str, Any]]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return 8 + n, header


def load(path: Path, name: str) -> tuple[str, np.ndarray]:
    base, header = read_header(path)
    info = header[name]
    a, b = info["data_offsets"]
    with open(path, "rb") as f:
        f.seek(base + a)
        raw = f.read(b - a)
    return info["dtype"], np.frombuffer(raw, dtype=STORAGE[info["dtype"]]).reshape(info["shape"]).copy()


class Ckpt:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        index = json.loads((folder / "model.safetensors.index.json").read_text())
        self.where: dict[str, str] = index["weight_map"]
        self.files = sorted(set(self.where.values()))

    def get(self, name: str) -> tuple[str, np.ndarray]:
        return load(self.folder / self.where[name], name)

    def names_in_order(self) -> list[str]:
        out = []
        for fn in self.files:
            out += sorted(read_header(self.folder / fn)[1])
        return out


# ---------------------------------------------------------------------------------------------- decoding
def e4m3(codes: np.ndarray) -> np.ndarray:
    """F8_E4M3 (e4m3fn) from its fields: normal (8 + m) * 2^(e - 10), subnormal m * 2^-9; 0x7F/0xFF NaN."""
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), -9), np.ldexp((8 + m).astype(np.float64), e - 10))
    v = np.where(c >> 7, -mag, mag)
    v[(c & 0x7F) == 0x7F] = np.nan
    return v.astype(np.float32)


def e8m0(codes: np.ndarray) -> np.ndarray:
    v = np.ldexp(np.ones(codes.shape), codes.astype(np.int64) - 127)
    v[codes == 255] = np.nan
    return v.astype(np.float32)


def dequant_fp8(w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """upstream: weight.float() * scale.repeat_interleave(128, 0)[:out].repeat_interleave(128, 1)[:, :in]"""
    out_f, in_f = w.shape
    full = np.repeat(np.repeat(e8m0(s), 128, axis=0)[:out_f], 128, axis=1)[:, :in_f]
    return e4m3(w) * full


def fp4_codes(packed: np.ndarray) -> np.ndarray:
    """[rows, cols] e2m1 codes: element 2i is the low nibble of byte i, 2i+1 the high nibble."""
    rows, half = packed.shape
    codes = np.zeros((rows, half * 2), np.uint8)
    for i in range(half):
        codes[:, 2 * i] = packed[:, i] & 0x0F
        codes[:, 2 * i + 1] = packed[:, i] >> 4
    return codes


def mxfp4_blocks(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """ggml MXFP4: per 32 values, the E8M0 byte, then byte j = value j | value j+16 << 4 (codes unchanged)."""
    codes = fp4_codes(packed)
    rows, cols = codes.shape
    out = np.zeros((rows, cols // 32, 17), np.uint8)
    for b in range(cols // 32):
        out[:, b, 0] = scale[:, b]
        for j in range(16):
            out[:, b, 1 + j] = codes[:, 32 * b + j] | (codes[:, 32 * b + 16 + j] << 4)
    return out.reshape(rows, -1)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequant_fp4(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    codes = fp4_codes(packed)
    vals = np.array(E2M1, np.float32)[codes]
    return vals * np.repeat(e8m0(scale), 32, axis=1)


# ---------------------------------------------------------------------------------------------- expected file
def gguf_name(src: str) -> tuple[int, str] | None:
    """``mtp.{s}.X`` -> (stage, GGUF name); None for names that are not draft tensors of the file."""
    m = re.fullmatch(r"mtp\.(\d+)\.(.+)", src)
    if m is None:
        return None
    s, rest = int(m.group(1)), m.group(2)
    if rest in ROOT_NAMES:
        return s, ROOT_NAMES[rest]
    if rest in STAGE_NAMES:
        return s, f"blk.{s}.{STAGE_NAMES[rest]}"
    raise AssertionError(f"oracle: unknown draft tensor {src}")


def convert_one(dtype: str, arr: np.ndarray, scale: np.ndarray | None) -> tuple[str, bytes]:
    if scale is not None:  # FP8: dequantize, Q8_0 (F16 when a row is not a multiple of 32)
        w = dequant_fp8(arr, scale)
        if w.shape[-1] % 32 == 0:
            return "Q8_0", quants.quantize(w, GGMLQuantizationType.Q8_0).tobytes()
        with np.errstate(over="ignore"):
            return "F16", w.astype(np.float16).tobytes()
    if dtype == "F32":
        return "F32", arr.astype("<f4").tobytes()
    if dtype == "BF16" and arr.ndim >= 2:
        return "BF16", arr.tobytes()
    if dtype == "BF16":
        return "F32", (arr.astype(np.uint32) << 16).view(np.float32).tobytes()
    raise AssertionError(f"oracle: unexpected dtype {dtype}")


def expected_tensors(folder: Path) -> list[tuple[str, str, list[int], bytes]]:
    ck = Ckpt(folder)
    names = ck.names_in_order()
    stages = sorted({int(n.split(".")[1]) for n in names if n.startswith("mtp.")})
    n_exp = 1 + max(int(m.group(1)) for n in names if (m := re.fullmatch(r"mtp\.\d+\.ffn\.experts\.(\d+)\..*", n)))
    out = []
    for s in stages:
        for w, gname in EXPERT_NAMES.items():
            stack = []
            for e in range(n_exp):
                _, packed = ck.get(f"mtp.{s}.ffn.experts.{e}.{w}.weight")
                _, scale = ck.get(f"mtp.{s}.ffn.experts.{e}.{w}.scale")
                stack.append(mxfp4_blocks(packed, scale))
            data = np.stack(stack)
            rows, cols = data.shape[1], data.shape[2] // 17 * 32
            out.append((f"blk.{s}.{gname}", "MXFP4", [cols, rows, n_exp], data.tobytes()))
    for src in names:
        if src.endswith(".scale") or ".ffn.experts." in src:
            continue
        mapped = gguf_name(src)
        if mapped is None:
            continue
        dtype, arr = ck.get(src)
        scale = None
        if dtype == "F8_E4M3":
            _, scale = ck.get(src.removesuffix(".weight") + ".scale")
        kind, blob = convert_one(dtype, arr, scale)
        out.append((mapped[1], kind, list(reversed(arr.shape)), blob))
    return out


def expected_kvs(cfg: dict[str, Any], stages: int) -> dict[str, Any]:
    """The dflash.* keys of a DSV4 DSpark file (value as Python; floats compared after float32 rounding)."""
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    rs = cfg["rope_scaling"]
    return {
        "dflash.block_count": stages,
        "dflash.context_length": cfg["max_position_embeddings"],
        "dflash.embedding_length": cfg["hidden_size"],
        "dflash.attention.head_count": cfg["num_attention_heads"],
        "dflash.attention.head_count_kv": cfg["num_key_value_heads"],
        "dflash.rope.scaling.type": rs["type"],
        "dflash.rope.scaling.factor": f32(rs["factor"]),
        "dflash.rope.scaling.original_context_length": rs["original_max_position_embeddings"],
        "dflash.rope.scaling.yarn_beta_fast": f32(rs["beta_fast"]),
        "dflash.rope.scaling.yarn_beta_slow": f32(rs["beta_slow"]),
        "dflash.rope.freq_base": f32(cfg["rope_theta"]),
        "dflash.attention.layer_norm_rms_epsilon": f32(cfg["rms_norm_eps"]),
        "dflash.expert_count": cfg["n_routed_experts"],
        "dflash.expert_used_count": cfg["num_experts_per_tok"],
        "dflash.expert_gating_func": 4,
        "dflash.attention.key_length": cfg["head_dim"],
        "dflash.attention.value_length": cfg["head_dim"],
        "general.file_type": 38,
        "dflash.rope.dimension_count": cfg["qk_rope_head_dim"],
        "dflash.attention.q_lora_rank": cfg["q_lora_rank"],
        "dflash.attention.sliding_window": cfg["sliding_window"],
        "dflash.expert_feed_forward_length": cfg["moe_intermediate_size"],
        "dflash.expert_shared_count": cfg["n_shared_experts"],
        "dflash.expert_weights_scale": f32(cfg["routed_scaling_factor"]),
        "dflash.expert_weights_norm": cfg["norm_topk_prob"],
        "dflash.swiglu_clamp_exp": [f32(cfg["swiglu_limit"])] * stages,
        "dflash.swiglu_clamp_shexp": [f32(cfg["swiglu_limit"])] * stages,
        "dflash.attention.indexer.head_count": cfg["index_n_heads"],
        "dflash.attention.indexer.key_length": cfg["index_head_dim"],
        "dflash.attention.indexer.top_k": cfg["index_topk"],
        "dflash.attention.output_group_count": cfg["o_groups"],
        "dflash.attention.output_lora_rank": cfg["o_lora_rank"],
        "dflash.attention.compress_ratios": [0] * stages,
        "dflash.attention.compress_rope_freq_base": f32(cfg["compress_rope_theta"]),
        "dflash.hyper_connection.count": cfg["hc_mult"],
        "dflash.hyper_connection.sinkhorn_iterations": cfg["hc_sinkhorn_iters"],
        "dflash.hyper_connection.epsilon": f32(cfg["hc_eps"]),
        "dflash.hash_layer_count": 0,
        "dflash.block_size": cfg["dspark_block_size"],
        "dflash.target_layers": [i + 1 for i in cfg["dspark_target_layer_ids"]],
        "tokenizer.ggml.mask_token_id": cfg["dspark_noise_token_id"],
    }
