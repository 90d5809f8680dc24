"""Deterministic ModelOpt NVFP4 drafts with other dimensions than the public sample (issue 22, Nemotron-3.5 NVFP4
DSpark): hidden 64 and 128, 2-4 layers, every linear NVFP4 where its in-features allow, per-tensor scales of exactly
1.0 next to others, excluded modules, MIXED_PRECISION with per-module and per-layer algos, W4A4 input scales, a
DFlash (not DSpark) draft, KV-cache scales, ``model.``-prefixed names, ModelOpt FP8 layers in a MIXED_PRECISION
draft (per-tensor or per-channel scales), a ModelOpt FP8 draft, compressed-tensors NVFP4 drafts (``nvfp4-pack-quantized`` and ``mixed-precision``).

Each variant comes with its own target folder (``<variant>-target``: the shared qwen3 golden target's tokenizer and
its config with the variant's hidden size and heads; no weights: upstream reads only the config and tokenizer of a
target). ``tests/data/oracle-b11434/<variant>.<outtype>.json`` are upstream b11434's output for each variant,
described by ``tests/golden_manifest.describe`` (made with ``python tests/nvfp4_drafts.py OUT BASE_TARGET --oracle
UPSTREAM_TREE``).

Example:
    >>> sorted(VARIANTS)
    ['v-ct-mixed-dflash', 'v-ct-nvfp4', 'v-fp8-channel', 'v-modelopt-fp8', 'v-nvfp4-dflash', 'v-nvfp4-fp8-mixed', 'v-nvfp4-h128-mixed', 'v-nvfp4-h64']
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import draft_kit
import numpy as np
from draft_kit import Tensor, save_safetensors

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")
V, MASK = 129280, 128799



@dataclass
class Dims:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ff: int
    layers: int
    taps: list[int]
    rank: int = 64


class Maker(draft_kit.Maker):
    """:class:`draft_kit.Maker` plus ModelOpt NVFP4 linears."""

    def nvfp4(self, base: str, out: int, inp: int, scale2: float, input_scale: float | None) -> dict[str, Tensor]:
        """ModelOpt NVFP4 tensors of linear ``base`` [out, inp]: U8 codes, E4M3 scales (exponents 4..9), scalars."""
        e = self.rng.integers(4, 10, size=(out, inp // 16), dtype=np.uint8)
        m = self.rng.integers(0, 8, size=(out, inp // 16), dtype=np.uint8)
        t: dict[str, Tensor] = {f"{base}.weight": ("U8", self.rng.integers(0, 256, size=(out, inp // 2), dtype=np.uint8)),
                                f"{base}.weight_scale": ("F8_E4M3", ((e << 3) | m).astype(np.uint8)),
                                f"{base}.weight_scale_2": ("F32", np.array(scale2, np.float32))}
        if input_scale is not None:
            t[f"{base}.input_scale"] = ("F32", np.array(input_scale, np.float32))
        return t


    def fp8(self, base: str, out: int, inp: int, channel: str | None = None) -> dict[str, Tensor]:
        """ModelOpt FP8 tensors of linear ``base`` [out, inp]: F8_E4M3 codes (no NaN), a scalar F32 weight scale (or
        with ``channel`` one per output row, of that dtype: F32 / BF16) and a scalar input scale."""
        codes = self.rng.integers(0, 0x7F, size=(out, inp), dtype=np.uint8)
        codes |= self.rng.integers(0, 2, size=(out, inp), dtype=np.uint8) << 7
        if channel is None:
            scale: Tensor = ("F32", np.array(self.rng.uniform(0.001, 0.01), np.float32))
        else:
            v = self.rng.uniform(0.001, 0.01, size=out).astype(np.float32)
            scale = (channel, (v.view(np.uint32) >> 16).astype(np.uint16) if channel == "BF16" else v)
        return {f"{base}.weight": ("F8_E4M3", codes), f"{base}.weight_scale": scale,
                f"{base}.input_scale": ("F32", np.array(self.rng.uniform(0.01, 0.1), np.float32))}


def linears(d: Dims, dflash: bool = False) -> dict[str, tuple[int, int]]:
    """Every linear of the draft (module path -> [out, in]), in a fixed order."""
    lin = {"fc": (d.hidden, len(d.taps) * d.hidden)}
    for i in range(d.layers):
        p = f"layers.{i}."
        q, kv = d.heads * d.head_dim, d.kv_heads * d.head_dim
        lin.update({p + "self_attn.q_proj": (q, d.hidden), p + "self_attn.k_proj": (kv, d.hidden),
                    p + "self_attn.v_proj": (kv, d.hidden), p + "self_attn.o_proj": (d.hidden, q),
                    p + "mlp.gate_proj": (d.ff, d.hidden), p + "mlp.up_proj": (d.ff, d.hidden),
                    p + "mlp.down_proj": (d.hidden, d.ff)})
    if not dflash:
        lin["markov_head.markov_w2"] = (V, d.rank)
    return lin


@dataclass
class Spec:
    """A variant: dims, which linears are NVFP4 with which algo / scales, extras."""

    dims: Dims
    seed: int
    dtype: str
    algo: Callable[[str], str | None]            # module -> "NVFP4" / "W4A16_NVFP4" / "FP8" / None (plain)
    scale2: Callable[[str], float]
    input_scale: Callable[[str], float | None]   # for NVFP4 (W4A4) modules
    quant_config: dict[str, Any]                 # written into config.json (may be empty)
    hf_quant: dict[str, Any] | None              # hf_quant_config.json "quantization", or None
    prefix: str = ""
    sinks: bool = False
    embed: bool = True
    kv_cache_scales: bool = False
    dflash: bool = False
    compressed: bool = False                     # NVFP4 linears stored as compressed-tensors names them
    fp8_channel: str | None = None               # FP8 linears' weight scales per output row, of this dtype


def compressed_tensors(t: dict[str, Tensor]) -> dict[str, Tensor]:
    """ModelOpt NVFP4 tensors ``t`` as compressed-tensors stores them: ``X.weight_packed`` (the same codes),
    ``X.weight_global_scale`` / ``X.input_global_scale`` (F32, 1 / ModelOpt's per-tensor scales); others as they are."""
    base = next(n.removesuffix(".weight_scale_2") for n in t if n.endswith(".weight_scale_2"))
    out: dict[str, Tensor] = {}
    for n, (dtype, a) in t.items():
        if n == base + ".weight":
            out[base + ".weight_packed"] = (dtype, a)
        elif n in (base + ".weight_scale_2", base + ".input_scale"):
            name = base + (".weight_global_scale" if n.endswith("_2") else ".input_global_scale")
            out[name] = ("F32", (np.float32(1.0) / a.astype(np.float32)).astype(np.float32).reshape(1))
        else:
            out[n] = (dtype, a)
    return out


def _tensors(s: Spec) -> dict[str, Tensor]:
    d, m, p = s.dims, Maker(s.seed, s.dtype), s.prefix
    t: dict[str, Tensor] = {}
    if not s.dflash:
        t[p + "markov_head.markov_w1.weight"] = m.t(V, d.rank)
        t[p + "confidence_head.proj.weight"] = m.t(1, d.hidden + d.rank)
        t[p + "confidence_head.proj.bias"] = m.t(1)
    if s.embed:
        t[p + "embed_tokens.weight"] = m.t(V, d.hidden)
        t["lm_head.weight"] = m.t(V, d.hidden)
    t[p + "hidden_norm.weight"] = m.t(d.hidden, scale=0.1, mean=1.0)
    t[p + "norm.weight"] = m.t(d.hidden, scale=0.1, mean=1.0)
    for i in range(d.layers):
        q = f"{p}layers.{i}."
        t[q + "input_layernorm.weight"] = m.t(d.hidden, scale=0.1, mean=1.0)
        t[q + "post_attention_layernorm.weight"] = m.t(d.hidden, scale=0.1, mean=1.0)
        t[q + "self_attn.q_norm.weight"] = m.t(d.head_dim, scale=0.1, mean=1.0)
        t[q + "self_attn.k_norm.weight"] = m.t(d.head_dim, scale=0.1, mean=1.0)
        if s.sinks:
            t[q + "self_attn.sinks"] = ("F32", (m.rng.standard_normal(d.heads) * 0.5).astype(np.float32))
        if s.kv_cache_scales:
            t[q + "self_attn.k_proj.k_scale"] = ("F32", np.array(0.02, np.float32))
            t[q + "self_attn.v_proj.v_scale"] = ("F32", np.array(0.03, np.float32))
    for k, (o, n) in linears(d, s.dflash).items():
        algo = s.algo(k)
        if algo is None:
            t[p + k + ".weight"] = m.t(o, n)
        elif algo == "FP8":
            t.update(m.fp8(p + k, o, n, s.fp8_channel))
        else:
            nv = m.nvfp4(p + k, o, n, s.scale2(k), s.input_scale(k) if algo == "NVFP4" else None)
            t.update(compressed_tensors(nv) if s.compressed else nv)
    return t


def _config(s: Spec) -> dict[str, Any]:
    d = s.dims
    c: dict[str, Any] = {
        "model_type": "qwen3", "hidden_size": d.hidden, "intermediate_size": d.ff, "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim, "num_hidden_layers": d.layers, "rms_norm_eps": 1e-6,
        "vocab_size": V, "max_position_embeddings": 4096, "attention_bias": False, "hidden_act": "silu",
        "torch_dtype": "bfloat16" if s.dtype == "BF16" else "float32", "tie_word_embeddings": False,
        "rope_theta": 1000000.0, "num_target_layers": 5, "layer_types": ["full_attention"] * d.layers}
    if s.dflash:
        c.update({"architectures": ["DFlashDraftModel"], "block_size": 16,
                  "dflash_config": {"mask_token_id": MASK, "target_layer_ids": d.taps},
                  "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}})
    else:
        c.update({"architectures": ["Qwen3DSparkModel"], "block_size": 3, "target_layer_ids": d.taps,
                  "mask_token_id": MASK, "num_anchors": 512, "markov_rank": d.rank, "markov_head_type": "vanilla",
                  "enable_confidence_head": True, "confidence_head_with_markov": True})
    if s.quant_config:
        c["quantization_config"] = s.quant_config
    return c


def _layers_of(keys: dict[str, str]) -> dict[str, Any]:
    return {k: {"quant_algo": a, "group_size": 16} for k, a in keys.items()}


# ---------------------------------------------------------------------------------------------- the variants
H64 = Dims(hidden=64, heads=4, kv_heads=2, head_dim=16, ff=128, layers=3, taps=[0, 2, 4])
H128 = Dims(hidden=128, heads=4, kv_heads=2, head_dim=32, ff=256, layers=4, taps=[0, 1, 3])
DF64 = Dims(hidden=64, heads=2, kv_heads=1, head_dim=32, ff=192, layers=2, taps=[1, 3])
_EXCL64 = ["lm_head", "embed_tokens", "markov_head.markov_w1", "confidence_head*", "*k_proj", "*v_proj",
           "layers.2.mlp.gate_proj"]


def _v_h64() -> Spec:
    """Hidden 64, 3 layers, W4A16_NVFP4 (config + hf_quant_config.json), k/v projections and one gate excluded,
    scale_2 exactly 1.0 on fc and layer 0's q_proj, model.-prefixed names, sinks, KV-cache scales."""
    rng = np.random.default_rng(2231)
    vals = {k: float(rng.uniform(0.001, 0.01)) for k in linears(H64)}
    vals["fc"] = vals["layers.0.self_attn.q_proj"] = 1.0
    excluded = ("k_proj", "v_proj", "layers.2.mlp.gate_proj")
    qc = {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16, "exclude_modules": _EXCL64}
    return Spec(H64, 2201, "BF16", lambda k: None if k.endswith(excluded) else "W4A16_NVFP4", vals.__getitem__,
                lambda k: None, qc, {"quant_algo": "W4A16_NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                     "exclude_modules": _EXCL64},
                prefix="model.", sinks=True, kv_cache_scales=True)


_MIXED128 = {"fc": "W4A16_NVFP4", "layers.0.self_attn.q_proj": "NVFP4", "layers.0.self_attn.k_proj": "W4A16_NVFP4",
             "layers.0.mlp.down_proj": "NVFP4", "layers.1": "W4A16_NVFP4", "layers.2.mlp.gate_proj": "NVFP4",
             "layers.2.mlp.up_proj": "W4A16_NVFP4", "markov_head.markov_w2": "NVFP4"}


def _v_h128_mixed() -> Spec:
    """Hidden 128, 4 layers, F32 plain tensors, MIXED_PRECISION in config.json only: per-module W4A4 / W4A16 algos,
    a whole-layer entry (layers.1), NVFP4 tensors with no entry (layers.0 o_proj: algo MIXED, no prec_a4),
    input_scale 1.0 (not written) next to others, layer 3 and the rest of layer 2 plain, no embeddings."""
    rng = np.random.default_rng(2232)
    lin = linears(H128)
    nv = {k for k in lin if k in _MIXED128 or k.startswith("layers.1.") or k == "layers.0.self_attn.o_proj"}
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    s2["layers.1.mlp.up_proj"] = 1.0
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}
    inp["layers.0.self_attn.q_proj"] = inp["markov_head.markov_w2"] = 1.0

    def algo(k: str) -> str | None:
        if k not in nv:
            return None
        return _MIXED128.get(k) or ("W4A16_NVFP4" if k.startswith("layers.1.") else "NVFP4")

    qc = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
          "quantized_layers": _layers_of(_MIXED128)}
    return Spec(H128, 2202, "F32", algo, s2.__getitem__, inp.__getitem__, qc, None, embed=False)


def _v_dflash() -> Spec:
    """A z-lab DFlash draft (no Markov head), hidden 64, 2 layers, NVFP4 W4A4 everywhere (hf_quant_config.json only),
    input scales on every linear (fc's exactly 1.0), one scale_2 of 1.0."""
    rng = np.random.default_rng(2233)
    lin = linears(DF64, dflash=True)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    s2["layers.1.mlp.down_proj"] = 1.0
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}
    inp["fc"] = 1.0
    return Spec(DF64, 2203, "BF16", lambda k: "NVFP4", s2.__getitem__, inp.__getitem__, {},
                {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]},
                embed=False, dflash=True)


H128_FP8 = Dims(hidden=128, heads=2, kv_heads=1, head_dim=64, ff=256, layers=2, taps=[0, 2, 4])
_FP8_LAYERS = {"fc": "W4A16_NVFP4", "layers.0": "NVFP4", "layers.1.self_attn.o_proj": "FP8",
               "layers.1.mlp.down_proj": "FP8"}


def _v_fp8_mixed() -> Spec:
    """Hidden 128, 2 layers, MIXED_PRECISION with FP8 layers: fc W4A16, layer 0 W4A4 (input scales), layer 1's
    o_proj and down_proj ModelOpt FP8 (F8_E4M3 codes, scalar weight / input scales: upstream dequantizes them and
    writes them at the outtype, in their place), the rest plain BF16."""
    rng = np.random.default_rng(2234)
    lin = linears(H128_FP8)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}

    def algo(k: str) -> str | None:
        return _FP8_LAYERS.get(k) or ("NVFP4" if k.startswith("layers.0.") else None)

    qc = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
          "quantized_layers": _layers_of(_FP8_LAYERS)}
    return Spec(H128_FP8, 2204, "BF16", algo, s2.__getitem__, inp.__getitem__, qc, None, embed=False)


def _v_fp8() -> Spec:
    """A DFlash draft, hidden 128, every linear ModelOpt FP8 (``quant_algo`` FP8 in config.json): no NVFP4 tensor, so
    upstream keeps the outtype's ``general.file_type``."""
    rng = np.random.default_rng(2235)
    lin = linears(H128_FP8, dflash=True)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    return Spec(H128_FP8, 2205, "BF16", lambda k: "FP8", s2.__getitem__, lambda k: None,
                {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": None}, None, embed=False,
                dflash=True)


def _v_fp8_channel() -> Spec:
    """Hidden 128, 2 layers, MIXED_PRECISION: layer 0 NVFP4 W4A4, layer 1's o_proj (square, 128 x 128) and MLP
    ModelOpt FP8 with per-channel BF16 weight scales (one per output row: upstream multiplies row i by scale[i]),
    the rest plain BF16."""
    rng = np.random.default_rng(2238)
    lin = linears(H128_FP8)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}
    inp["fc"] = 1.0
    fp8 = ("layers.1.self_attn.o_proj", "layers.1.mlp.gate_proj", "layers.1.mlp.up_proj", "layers.1.mlp.down_proj")

    def algo(k: str) -> str | None:
        return "FP8" if k in fp8 else "NVFP4" if k.startswith("layers.0.") else None

    qc = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
          "quantized_layers": _layers_of({"layers.0": "NVFP4", **dict.fromkeys(fp8, "FP8")})}
    return Spec(H128_FP8, 2208, "BF16", algo, s2.__getitem__, inp.__getitem__, qc, None, embed=False,
                fp8_channel="BF16")


def ct_group(targets: list[str], activations: bool) -> dict[str, Any]:
    """A compressed-tensors NVFP4 config group (``input_activations`` for W4A4, none for W4A16)."""
    fp4 = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16, "strategy": "tensor_group",
           "dynamic": False, "observer": "minmax"}
    return {"format": "nvfp4-pack-quantized", "targets": targets, "weights": fp4,
            "input_activations": {**fp4, "dynamic": "local"} if activations else None, "output_activations": None}


def ct_config(fmt: str, groups: dict[str, Any], ignore: list[str]) -> dict[str, Any]:
    """A compressed-tensors ``quantization_config`` (what llm-compressor writes into config.json)."""
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": groups, "ignore": ignore, "kv_cache_scheme": None, "version": "0.12.2"}


H128_CT = Dims(hidden=128, heads=2, kv_heads=1, head_dim=64, ff=320, layers=2, taps=[0, 2, 4])


def _v_ct() -> Spec:
    """compressed-tensors NVFP4 (``nvfp4-pack-quantized``, one W4A4 group), hidden 128, ``model.``-prefixed names:
    k / v projections and the Markov head ignored (plain BF16), one global scale and two input global scales of
    exactly 1.0, the rest seeded; upstream b11434 reads it as ModelOpt NVFP4 W4A4."""
    rng = np.random.default_rng(2236)
    lin = linears(H128_CT)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    s2["layers.1.mlp.up_proj"] = 1.0
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}
    inp["layers.0.self_attn.q_proj"] = inp["fc"] = 1.0  # (fc's would be a file llama.cpp refuses)
    plain = ("k_proj", "v_proj", "markov_w2")
    qc = ct_config("nvfp4-pack-quantized", {"group_0": ct_group(["Linear"], True)},
                   ["lm_head", "re:.*k_proj$", "re:.*v_proj$", "re:.*markov_head.*"])
    return Spec(H128_CT, 2206, "BF16", lambda k: None if k.endswith(plain) else "NVFP4", s2.__getitem__,
                inp.__getitem__, qc, None, prefix="model.", embed=False, compressed=True)


def _v_ct_mixed() -> Spec:
    """compressed-tensors ``mixed-precision`` of two NVFP4 groups on a DFlash draft with F16 plain tensors: the
    attention W4A4 (input global scales), the MLP W4A16 (none; upstream still writes no prec_a4 arrays), fc
    ignored."""
    rng = np.random.default_rng(2237)
    lin = linears(DF64, dflash=True)
    s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
    inp = {k: float(rng.uniform(0.01, 0.1)) for k in lin}

    def algo(k: str) -> str | None:
        return None if k == "fc" else "NVFP4" if ".self_attn." in k else "W4A16_NVFP4"

    qc = ct_config("mixed-precision", {"group_0": ct_group(["re:.*self_attn.*"], True),
                                       "group_1": ct_group(["re:.*mlp.*"], False)}, ["lm_head", "fc"])
    return Spec(DF64, 2207, "F16", algo, s2.__getitem__, inp.__getitem__, qc, None, embed=False, dflash=True,
                compressed=True)


VARIANTS: dict[str, Callable[[], Spec]] = {"v-nvfp4-h64": _v_h64, "v-nvfp4-h128-mixed": _v_h128_mixed,
                                           "v-nvfp4-dflash": _v_dflash, "v-nvfp4-fp8-mixed": _v_fp8_mixed,
                                           "v-modelopt-fp8": _v_fp8, "v-ct-nvfp4": _v_ct,
                                           "v-ct-mixed-dflash": _v_ct_mixed, "v-fp8-channel": _v_fp8_channel}


def write_spec(s: Spec, draft: Path) -> Path:
    draft.mkdir(parents=True, exist_ok=True)
    (draft / "config.json").write_text(json.dumps(_config(s), indent=2))
    if s.hf_quant is not None:
        (draft / "hf_quant_config.json").write_text(json.dumps(
            {"producer": {"name": "modelopt", "version": "0.37.0"}, "quantization": s.hf_quant}, indent=4))
    save_safetensors(draft / "model.safetensors", _tensors(s))
    return draft


def make_target(base: Path, out: Path, d: Dims, weights: bool = False) -> Path:
    """A target folder: ``base``'s tokenizer files and its config with the hidden size / heads of ``d``; no weights
    (all upstream's converter reads), or with ``weights`` a random embedding and lm_head (what ``verify`` reads)."""
    out.mkdir(parents=True, exist_ok=True)
    if weights:
        m = Maker(2299, "BF16")
        save_safetensors(out / "model.safetensors", {"model.embed_tokens.weight": m.t(V, d.hidden),
                                                     "lm_head.weight": m.t(V, d.hidden)})
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(base / f, out / f)
    cfg = json.loads((base / "config.json").read_text())
    cfg.update({"hidden_size": d.hidden, "num_attention_heads": d.heads, "num_key_value_heads": d.kv_heads,
                "head_dim": d.head_dim, "intermediate_size": d.ff})
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


#: safetensors dtype -> the numpy type that holds its bytes
_RAW = {"BF16": np.uint16, "F16": np.uint16, "F32": np.float32, "I64": np.int64, "I32": np.int32, "U8": np.uint8,
        "BOOL": np.bool_, "F8_E4M3": np.uint8}


def read_raw(path: Path) -> dict[str, Tensor]:
    """Every tensor of one safetensors file as (dtype, array of its bytes' numpy type)."""
    b = path.read_bytes()
    n = int.from_bytes(b[:8], "little")
    header = json.loads(b[8:8 + n])
    out: dict[str, Tensor] = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, z = h["data_offsets"]
        out[name] = (h["dtype"], np.frombuffer(b[8 + n + a:8 + n + z], _RAW[h["dtype"]]).reshape(h["shape"]).copy())
    return out


def with_nvfp4(src: Path, dst: Path, modules: dict[str, str], seed: int) -> Path:
    """A copy of the one-file draft folder ``src`` in ``dst`` whose linears ``modules`` (checkpoint module path ->
    ``NVFP4`` / ``W4A16_NVFP4``) are ModelOpt NVFP4 tensors (seeded codes and scales; a W4A4 one with an input
    scale), declared by a MIXED_PRECISION ``quantization_config``."""
    shutil.copytree(src, dst)
    t = read_raw(dst / "model.safetensors")
    m, rng = Maker(seed, "BF16"), np.random.default_rng(seed)
    for module, algo in modules.items():
        out, inp = t.pop(module + ".weight")[1].shape
        t.update(m.nvfp4(module, out, inp, float(rng.uniform(0.001, 0.01)),
                         float(rng.uniform(0.01, 0.1)) if algo == "NVFP4" else None))
    save_safetensors(dst / "model.safetensors", t)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                  "quantized_layers": _layers_of({k.removeprefix("model."): a for k, a in modules.items()})}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def to_compressed_tensors(draft: Path) -> Path:
    """Rewrite the ModelOpt NVFP4 draft folder ``draft`` (one safetensors file, every NVFP4 linear W4A4) in place
    as llm-compressor stores it: :func:`compressed_tensors` names and scales, an ``nvfp4-pack-quantized``
    ``quantization_config`` (no ``hf_quant_config.json``)."""
    t = read_raw(draft / "model.safetensors")
    bases = [n.removesuffix(".weight_scale_2") for n in t if n.endswith(".weight_scale_2")]
    for base in bases:
        part = {n: t.pop(n) for n in [n for n in t if n.rpartition(".")[0] == base]}
        t.update(compressed_tensors(part))
    save_safetensors(draft / "model.safetensors", t)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["quantization_config"] = ct_config("nvfp4-pack-quantized", {"group_0": ct_group(["Linear"], True)}, ["lm_head"])
    (draft / "config.json").write_text(json.dumps(cfg, indent=2))
    (draft / "hf_quant_config.json").unlink(missing_ok=True)
    return draft


def make(out: Path, name: str, base_target: Path, target_weights: bool = False) -> tuple[Path, Path]:
    """Write variant ``name`` to ``out/name`` and its target to ``out/name-target``; return (draft, target)."""
    s = VARIANTS[name]()
    return write_spec(s, out / name), make_target(base_target, out / f"{name}-target", s.dims, target_weights)


def main(argv: list[str]) -> int:
    """``nvfp4_drafts.py OUT BASE_TARGET --oracle TREE``: write every variant, convert with upstream, store manifests."""
    out, base, tree = Path(argv[0]), Path(argv[1]), Path(argv[argv.index("--oracle") + 1])
    sys.path.insert(0, str(HERE))
    from golden_manifest import write_upstream_manifest

    ORACLE.mkdir(parents=True, exist_ok=True)
    for name in VARIANTS:
        d, target = make(out, name, base)
        for t in OUTTYPES:
            write_upstream_manifest(tree, d, target, out, name, t, ORACLE)
            print(name, t, "ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
