"""DeepSeek-V4 DSpark: the draft stored as ``mtp.{s}.*`` inside a DeepSeek-V4 checkpoint (upstream's
``DeepseekV4DSparkModel``, llama.cpp 749f688; spec/dsv4-dspark.md, gguf-contract.md Appendix A).

The file is arch ``dflash`` with DeepSeek-V4 blocks: one block per draft stage, FP8 weights dequantized (E8M0
scale per 128x128 tile) and written as Q8_0 (F16 when a row is not a multiple of 32), routed experts repacked
losslessly from FP4 e2m1 + E8M0 per 32 into MXFP4 stacks written first, ``general.file_type`` 38 whatever the
outtype, and upstream's own DeepSeek-V4 chat template as the second key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..plan import KV
from .hparams import as_float, as_positive, as_u32

ARCHITECTURES = (S.DSV4_ARCHITECTURE,)

#: HF name inside a stage (after ``mtp.{s}.``) -> GGUF name after ``blk.{s}.`` (spec/dsv4-dspark.md §3)
STAGE_TENSORS: dict[str, str] = {
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
    "hc_attn_fn": "hc_attn_fn.weight",
    "hc_attn_base": "hc_attn_base.weight",
    "hc_attn_scale": "hc_attn_scale.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight",
    "hc_ffn_base": "hc_ffn_base.weight",
    "hc_ffn_scale": "hc_ffn_scale.weight",
}
#: names lifted out of the stage namespace (the stage index is dropped; upstream's ``_rekey_mtp_tensor_name``)
ROOT_TENSORS: dict[str, str] = {
    "main_proj.weight": S.T_FC,
    "main_norm.weight": S.T_ENC_NORM,
    "norm.weight": S.T_OUTPUT_NORM,
    "hc_head_fn": S.T_OUTPUT_HC_FN,
    "hc_head_base": S.T_OUTPUT_HC_BASE,
    "hc_head_scale": S.T_OUTPUT_HC_SCALE,
    "markov_head.markov_w1.weight": S.T_MARKOV_W1,
    "markov_head.markov_w2.weight": S.T_MARKOV_W2,
    "confidence_head.proj.weight": S.T_CONF_W,
}
#: routed expert projection -> GGUF stack name after ``blk.{s}.``, in writing order (gate, down, up)
EXPERT_TENSORS: dict[str, str] = dict(zip(("w1", "w2", "w3"), S.DSV4_EXPERT_TENSORS, strict=True))

_STAGE = re.compile(r"mtp\.(\d+)\.(.+)")
_EXPERT = re.compile(r"ffn\.experts\.(\d+)\.(w[123])\.(weight|scale)")
TEMPLATE_FILES = {False: "deepseek-ai-DeepSeek-V4.jinja", True: "deepseek-ai-DeepSeek-V4-Flash-0731.jinja"}


# ---------------------------------------------------------------------------------------------- recognition
def is_deepseek_v4(config: dict[str, Any]) -> bool:
    """A DeepSeek-V4 checkpoint config (full model or the DSpark class)."""
    archs = config.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    return config.get("model_type") == S.DSV4_MODEL_TYPE or first in (S.DSV4_TARGET_ARCHITECTURE, S.DSV4_ARCHITECTURE)


def draft_names(names: list[str]) -> list[str]:
    """The checkpoint names that belong to the draft (``mtp.*``)."""
    return [n for n in names if n.startswith(S.DSV4_DRAFT_PREFIX)]


def claims(config: dict[str, Any], names: list[str]) -> bool:
    """This family converts the checkpoint: the config declares ``DeepseekV4DSparkModel``, or a DeepSeek-V4 config
    has ``dspark_*`` keys and the checkpoint has ``mtp.*`` tensors."""
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and archs[0] == S.DSV4_ARCHITECTURE:
        return True
    return is_deepseek_v4(config) and any(k in config for k in S.DSV4_CONFIG_KEYS) and bool(draft_names(names))


def no_draft_message(where: str, config: dict[str, Any], names: list[str]) -> str:
    """Why a DeepSeek-V4 checkpoint is not a convertible DSpark draft (one line)."""
    keys = [k for k in S.DSV4_CONFIG_KEYS if k in config]
    has_mtp = bool(draft_names(names))
    what = ("no dspark_* config keys and no mtp.* tensors" if not keys and not has_mtp else
            "no mtp.* tensors" if not has_mtp else "no dspark_* config keys (dspark_block_size, ...)")
    return (f"{where}: a DeepSeek-V4 checkpoint without a DSpark draft ({what}); only the draft is converted here "
            "(convert the main model with llama.cpp's convert_hf_to_gguf.py)")


# ---------------------------------------------------------------------------------------------- names
def split_stage(name: str) -> tuple[int, str]:
    """``mtp.{s}.rest`` -> (s, rest)."""
    m = _STAGE.fullmatch(name)
    if m is None:
        raise ValueError(name)
    return int(m.group(1)), m.group(2)


def expert_parts(rest: str) -> tuple[int, str, str] | None:
    """``ffn.experts.{e}.w{1,2,3}.{weight,scale}`` -> (e, "w1", "weight"), else None."""
    m = _EXPERT.fullmatch(rest)
    return None if m is None else (int(m.group(1)), m.group(2), m.group(3))


def gguf_name(stage: int, rest: str) -> str | None:
    """GGUF name of a non-expert draft tensor (``rest`` = name after ``mtp.{stage}.``), None if unknown."""
    if rest in ROOT_TENSORS:
        return ROOT_TENSORS[rest]
    if rest in STAGE_TENSORS:
        return S.LAYER_PREFIX.format(bid=stage) + STAGE_TENSORS[rest]
    return None


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class Dsv4HParams:
    """The config values the DSV4 DSpark file needs, validated."""

    hidden: int
    heads: int
    head_dim: int
    experts: int
    moe: int
    hc: int
    block_size: int
    noise_token: int
    taps: list[int]            # HF output-of-layer ids (dspark_target_layer_ids)
    markov_rank: int | None
    raw: dict[str, Any]


def _require(cfg: dict[str, Any], key: str, where: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ConvertError(f"{where}: key '{key}' is missing; a DeepSeek-V4 DSpark draft needs it")
    return cfg[key]


def dsv4_hparams(cfg: dict[str, Any], where: str) -> Dsv4HParams:
    """Validate the DeepSeek-V4 config keys the conversion reads (one line per problem, naming the key)."""
    scoring = _require(cfg, "scoring_func", where)
    if scoring != "sqrtsoftplus":
        raise ConvertError(f"{where}: key 'scoring_func' is {scoring!r}; the DeepSeek-V4 DSpark loader needs "
                           "'sqrtsoftplus' (expert_gating_func 4)")
    taps = _require(cfg, "dspark_target_layer_ids", where)
    if not isinstance(taps, list) or not taps or not all(isinstance(i, int) and not isinstance(i, bool) for i in taps):
        raise ConvertError(f"{where}: key 'dspark_target_layer_ids' is {taps!r}, expected a non-empty list of integers")
    for key in ("num_attention_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups",
                "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "n_shared_experts", "hc_mult",
                "hc_sinkhorn_iters", "index_n_heads", "index_head_dim", "index_topk", "sliding_window"):
        as_u32(_require(cfg, key, where), key, where)
    for key in ("hc_eps", "compress_rope_theta", "swiglu_limit", "routed_scaling_factor", "rms_norm_eps"):
        as_float(_require(cfg, key, where), key, where)
    if not isinstance(_require(cfg, "norm_topk_prob", where), bool):
        raise ConvertError(f"{where}: key 'norm_topk_prob' is {cfg['norm_topk_prob']!r}, expected true or false")
    noise = as_u32(_require(cfg, "dspark_noise_token_id", where), "dspark_noise_token_id", where)
    rank = cfg.get("dspark_markov_rank")
    return Dsv4HParams(
        hidden=as_positive(_require(cfg, "hidden_size", where), "hidden_size", where),
        heads=as_positive(cfg["num_attention_heads"], "num_attention_heads", where),
        head_dim=as_positive(cfg["head_dim"], "head_dim", where),
        experts=as_positive(cfg["n_routed_experts"], "n_routed_experts", where),
        moe=as_positive(cfg["moe_intermediate_size"], "moe_intermediate_size", where),
        hc=as_positive(cfg["hc_mult"], "hc_mult", where),
        block_size=as_positive(_require(cfg, "dspark_block_size", where), "dspark_block_size", where),
        noise_token=noise, taps=list(taps),
        markov_rank=as_u32(rank, "dspark_markov_rank", where) if rank is not None else None, raw=cfg)


def dsv4_kvs(hp: Dsv4HParams, stages: int) -> list[KV]:
    """The DeepSeek-V4 keys after the generic block, then the DSpark keys, in upstream's order."""
    c, a = hp.raw, {"arch": S.ARCH_DFLASH}

    def u32(tpl: str, v: int) -> KV:
        return KV(tpl.format(**a), VT.UINT32, v)

    def f32(tpl: str, v: Any) -> KV:
        return KV(tpl.format(**a), VT.FLOAT32, float(v))

    clamp = [float(c["swiglu_limit"])] * stages
    return [
        u32(S.ROPE_DIMENSION_COUNT, c["qk_rope_head_dim"]),
        u32(S.Q_LORA_RANK, c["q_lora_rank"]),
        u32(S.DFLASH_SLIDING_WINDOW, c["sliding_window"]),
        u32(S.EXPERT_FEED_FORWARD_LENGTH, c["moe_intermediate_size"]),
        u32(S.EXPERT_SHARED_COUNT, c["n_shared_experts"]),
        f32(S.EXPERT_WEIGHTS_SCALE, c["routed_scaling_factor"]),
        KV(S.EXPERT_WEIGHTS_NORM.format(**a), VT.BOOL, c["norm_topk_prob"]),
        KV(S.SWIGLU_CLAMP_EXP.format(**a), VT.ARRAY, clamp, VT.FLOAT32),
        KV(S.SWIGLU_CLAMP_SHEXP.format(**a), VT.ARRAY, list(clamp), VT.FLOAT32),
        u32(S.INDEXER_HEAD_COUNT, c["index_n_heads"]),
        u32(S.INDEXER_KEY_LENGTH, c["index_head_dim"]),
        u32(S.INDEXER_TOP_K, c["index_topk"]),
        u32(S.OUTPUT_GROUP_COUNT, c["o_groups"]),
        u32(S.OUTPUT_LORA_RANK, c["o_lora_rank"]),
        KV(S.COMPRESS_RATIOS.format(**a), VT.ARRAY, [0] * stages, VT.INT32),
        f32(S.COMPRESS_ROPE_FREQ_BASE, c["compress_rope_theta"]),
        u32(S.HC_COUNT, c["hc_mult"]),
        u32(S.HC_SINKHORN_ITERATIONS, c["hc_sinkhorn_iters"]),
        f32(S.HC_EPSILON, c["hc_eps"]),
        u32(S.HASH_LAYER_COUNT, 0),
        KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, hp.block_size),
        KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, [i + 1 for i in hp.taps], VT.INT32),
    ]


def chat_template(name_hint: str) -> str:
    """Upstream's DeepSeek-V4 chat template; the -Flash-0731 one when the checkpoint folder name or repo id
    contains ``0731``."""
    fn = TEMPLATE_FILES["0731" in name_hint]
    return resources.files("dspark_convert").joinpath("templates").joinpath(fn).read_text(encoding="utf-8")
