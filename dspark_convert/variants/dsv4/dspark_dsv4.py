"""DeepSeek-V4 DSpark: the draft stored as ``mtp.{s}.*`` inside a DeepSeek-V4 checkpoint (upstream's
``DeepseekV4DSparkModel``, llama.cpp 749f688; spec/dsv4-dspark.md, gguf-contract.md Appendix A).

The file is arch ``dflash`` with DeepSeek-V4 blocks: one block per draft stage, FP8 weights dequantized (E8M0
scale per 128x128 tile) and written as Q8_0 (F16 when a row is not a multiple of 32), routed experts repacked
losslessly from FP4 e2m1 + E8M0 per 32 into MXFP4 stacks written first, ``general.file_type`` 38 whatever the
outtype, and upstream's own DeepSeek-V4 chat template (``chat_templates/`` beside :mod:`.blockscaled`) as the
second key. The three source formats (F8_E4M3, its F8_E8M0 tile scales, FP4 e2m1; spec/dsv4-dspark.md §1-§2) are
decoded by :mod:`dspark_convert.formats.quant`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint, Select
from ...kit.common import base_kvs, finish_plan, mapped_once
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import Context, TargetFacts, TargetTensor
from .blockscaled import dsv4_tensor_spec, mxfp4_stack_spec, packaged_template
from .names import (
    EXPERT_TENSORS,
    ROOT_TENSORS,
    STAGE_TENSORS,
    draft_names,
    gguf_name,
    group_draft,
    is_draft,
)

#: the method's name (hf2gguf/naming.method_name); default output names start with FILE_PREFIX instead
METHOD_WORD = "DSpark"
#: llama.cpp's ``-hf`` finds the file beside its target by this file-name keyword (``common/download.cpp``)
FILE_PREFIX = "dspark-"
#: the draft's class: a config naming it selects the family without --dspark
DSV4_ARCHITECTURE = "DeepseekV4DSparkModel"
#: the full checkpoint's own class, and its ``model_type``
DSV4_TARGET_ARCHITECTURE = "DeepseekV4ForCausalLM"
DSV4_MODEL_TYPE = "deepseek_v4"
ARCHITECTURES: tuple[str, ...] = (DSV4_ARCHITECTURE,)
#: no --with-target-embeddings: the loader uses the target's embedding and head (an output.weight is an extra tensor)
TARGET_TENSORS: tuple[TargetTensor, ...] = ()
#: a DeepSeek-V4 checkpoint carries its own tokenizer: without --target-model-dir it is read from there
TOKENIZER_IN_CHECKPOINT = True
#: upstream's ``--dspark`` selects this converter (it is accepted here, and not needed)
DSPARK_FLAG = True
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT", "build_plan", "claims",
           "draft_tensors", "hf_names", "target_facts"]

#: upstream's DeepSeek-V4 chat templates: the -Flash-0731 one when the checkpoint's name contains ``0731``
TEMPLATE_FILES = {"0731": "deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "": "deepseek-ai-DeepSeek-V4.jinja"}


# ---------------------------------------------------------------------------------------------- recognition
def is_deepseek_v4(config: dict[str, Any]) -> bool:
    """A DeepSeek-V4 checkpoint config (full model or the DSpark class)."""
    archs = config.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    return config.get("model_type") == DSV4_MODEL_TYPE or first in (DSV4_TARGET_ARCHITECTURE, DSV4_ARCHITECTURE)


def has_draft(config: dict[str, Any], names: list[str]) -> bool:
    """``mtp.*`` tensors, and ``dspark_*`` config keys or a config declaring ``DeepseekV4DSparkModel``."""
    archs = config.get("architectures")
    declared = isinstance(archs, list) and bool(archs) and archs[0] == DSV4_ARCHITECTURE
    return bool(draft_names(names)) and (declared or any(k in config for k in S.DSV4_CONFIG_KEYS))


def claims(config: dict[str, Any], tensor_names: list[str]) -> bool:
    """A DeepSeek-V4 checkpoint that carries a DSpark draft. One with an MTP head instead (:func:`has_mtp_head`) is
    left to the ``mtp`` variant; any other is refused here, saying what is missing (``families.family_for``
    prefixes the config file)."""
    if not is_deepseek_v4(config):
        return False
    if not has_draft(config, tensor_names):
        if has_mtp_head(config, tensor_names):
            return False
        raise ConvertError(no_draft_message(config, tensor_names))
    return True


def has_mtp_head(config: dict[str, Any], names: list[str]) -> bool:
    """No ``dspark_*`` key, and an MTP layer's ``mtp.{i}.e_proj.weight``: the checkpoint's MTP head, which
    ``hf2gguf --mtp`` writes as a sidecar (not a DSpark draft)."""
    return not any(k in config for k in S.DSV4_CONFIG_KEYS) and any(
        n.startswith(S.DSV4_DRAFT_PREFIX) and n.endswith(".e_proj.weight") for n in names)


def draft_tensors(config: dict[str, Any]) -> Select | None:
    """Only ``mtp.*``: the other shards of the checkpoint (the main model) are neither opened nor downloaded."""
    return is_draft


def hf_names(gguf_name: str) -> tuple[str, ...]:
    """The checkpoint names that become ``gguf_name`` (``*`` stands for any stage / expert)."""
    roots = tuple(f"mtp.*.{hf}" for hf, g in ROOT_TENSORS.items() if g == gguf_name)
    if roots or not gguf_name.startswith("blk."):
        return roots
    _, bid, short = gguf_name.split(".", 2)
    experts = tuple(f"mtp.{bid}.ffn.experts.*.{w}.weight" for w, g in EXPERT_TENSORS.items() if g == short)
    return experts + tuple(f"mtp.{bid}.{hf}" for hf, g in STAGE_TENSORS.items() if g == short)


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """The fit facts: ``fc`` (``main_proj``) takes one target hidden state per target layer. The rope check does not
    apply (the draft's rope keys come from the target's own config: the draft is part of the target checkpoint),
    and there is no learned mask embedding."""
    taps = plan.value(S.DFLASH_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None)


def no_draft_message(config: dict[str, Any], names: list[str]) -> str:
    """Why a DeepSeek-V4 checkpoint is not a convertible DSpark draft (one line, without the file name)."""
    keys = [k for k in S.DSV4_CONFIG_KEYS if k in config]
    has_mtp = bool(draft_names(names))
    what = ("no dspark_* config keys and no mtp.* tensors" if not keys and not has_mtp else
            "no mtp.* tensors" if not has_mtp else "no dspark_* config keys (dspark_block_size, ...)")
    return (f"a DeepSeek-V4 checkpoint without a DSpark draft ({what}); only such a draft is converted here "
            "(convert the main model with llama.cpp's convert_hf_to_gguf.py)")


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


#: the end of the refusal of a missing config key
NEEDS = "a DeepSeek-V4 DSpark draft needs it"


def dsv4_hparams(cfg: HParams, where: str) -> Dsv4HParams:
    """Validate the DeepSeek-V4 config keys the conversion reads (one line per problem, naming the key)."""
    scoring = cfg.require("scoring_func", NEEDS)
    if scoring != "sqrtsoftplus":
        raise ConvertError(f"{where}: key 'scoring_func' is {scoring!r}; the DeepSeek-V4 DSpark loader needs "
                           "'sqrtsoftplus' (expert_gating_func 4)")
    taps = cfg.require("dspark_target_layer_ids", NEEDS)
    if not isinstance(taps, list) or not taps or not all(isinstance(i, int) and not isinstance(i, bool) for i in taps):
        raise ConvertError(f"{where}: key 'dspark_target_layer_ids' is {taps!r}, expected a non-empty list of integers")
    for key in ("num_attention_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups",
                "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "n_shared_experts", "hc_mult",
                "hc_sinkhorn_iters", "index_n_heads", "index_head_dim", "index_topk", "sliding_window"):
        cfg.u32(key, cfg.require(key, NEEDS))
    for key in ("hc_eps", "compress_rope_theta", "swiglu_limit", "routed_scaling_factor", "rms_norm_eps"):
        cfg.number(key, cfg.require(key, NEEDS))
    if not isinstance(cfg.require("norm_topk_prob", NEEDS), bool):
        raise ConvertError(f"{where}: key 'norm_topk_prob' is {cfg['norm_topk_prob']!r}, expected true or false")
    noise = cfg.u32("dspark_noise_token_id", cfg.require("dspark_noise_token_id", NEEDS))
    rank = cfg.get("dspark_markov_rank")
    return Dsv4HParams(
        hidden=cfg.positive("hidden_size", cfg.require("hidden_size", NEEDS)),
        heads=cfg.positive("num_attention_heads"),
        head_dim=cfg.positive("head_dim"),
        experts=cfg.positive("n_routed_experts"),
        moe=cfg.positive("moe_intermediate_size"),
        hc=cfg.positive("hc_mult"),
        block_size=cfg.positive("dspark_block_size", cfg.require("dspark_block_size", NEEDS)),
        noise_token=noise, taps=list(taps),
        markov_rank=cfg.u32("dspark_markov_rank", rank) if rank is not None else None, raw=cfg)


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


# ---------------------------------------------------------------------------------------------- tensors
def _expert_spec(ck: Checkpoint, stage: int, w: str, per: dict[int, str], hp: Dsv4HParams) -> TensorSpec:
    """The stack of one projection of every routed expert of a stage -> one MXFP4 tensor."""
    rows, cols = (hp.hidden, hp.moe) if w == "w2" else (hp.moe, hp.hidden)
    name = S.LAYER_PREFIX.format(bid=stage) + EXPERT_TENSORS[w]
    return mxfp4_stack_spec(ck, per, hp.experts, rows, cols, name, f"mtp.{stage}.ffn.experts.*.{w}",
                            f"the config says {hp.experts} routed experts per stage")


def plan_tensors(ck: Checkpoint, hp: Dsv4HParams, out: QT) -> tuple[list[TensorSpec], int]:
    """The expert stacks (stage 0..n-1 x gate, down, up), then every other draft tensor in checkpoint order
    (shard order x sorted name), typed by :func:`.blockscaled.dsv4_tensor_spec` (``out``: the outtype's type, which
    only F16 sources take); returns (tensors, number of stages)."""
    groups = group_draft(ck.names)
    if groups.unnamed:
        src = groups.unnamed[0]
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' is not named mtp.<stage>.<name>")
    dense: list[TensorSpec] = []
    seen: dict[str, str] = {}
    for src, stage, rest in groups.dense:
        if src.endswith(S.DSV4_DROPPED_SUFFIXES):  # the vision variant's hash-routing bias: not in the draft (b10786+)
            continue
        name = mapped_once(ck, seen, src, gguf_name(stage, rest), "a DeepSeek-V4 DSpark draft")
        dense.append(dsv4_tensor_spec(ck, src, name, out, "a DeepSeek-V4 DSpark draft"))
    experts = groups.experts
    n = 1 + max(groups.stages) if groups.stages else 0
    stacks = []
    for stage in range(n):
        for w in EXPERT_TENSORS:
            if (stage, w) not in experts:
                raise ConvertError(f"{ck.path}: stage {stage} has no routed experts mtp.{stage}.ffn.experts.*.{w}.weight")
            stacks.append(_expert_spec(ck, stage, w, experts[(stage, w)], hp))
    return stacks + dense, n


def build_plan(ctx: Context) -> Plan:
    """Plan for the DSpark draft of a DeepSeek-V4 checkpoint."""
    where, ck = ctx.where, ctx.draft
    cfg = HParams(ck.config, where)
    if not has_draft(cfg, ck.names):
        raise ConvertError(f"{where}: {no_draft_message(cfg, ck.names)}")
    if ctx.options.embed_from_target:
        raise ConvertError("--with-target-embeddings: a DeepSeek-V4 DSpark draft uses the target's token embedding "
                           "and output head at run time; an output.weight in it makes llama.cpp fail with \"wrong "
                           "number of tensors\"")
    hp = dsv4_hparams(cfg, where)
    vocab_size = cfg.vocab_size("vocab_size", required=True)
    tensors, stages = plan_tensors(ck, hp, ctx.out_type)
    view = {k: v for k, v in cfg.items() if k not in ("n_layers", "n_layer", "num_layers")}
    view["num_hidden_layers"] = stages  # block_count: the draft's stages (upstream: 1 + max stage)
    base = base_kvs(S.ARCH_DFLASH, view, S.FILE_TYPE_MOSTLY_MXFP4_MOE, where)
    # upstream's DSV4 set_vocab: gpt2, any target
    vocab = ctx.target_vocab(vocab_size, "gpt2")
    n_tokens = len(next((kv.value for kv in vocab if kv.name == S.TOKENIZER_TOKENS), []))
    if not 0 <= hp.noise_token < n_tokens:
        raise ConvertError(f"{where}: dspark_noise_token_id is {hp.noise_token}, outside the vocabulary of {n_tokens} "
                           f"tokens (expected an id in [0, {n_tokens}))")
    tail = [KV(S.TOKENIZER_MASK_ID, VT.UINT32, hp.noise_token)]
    head = [KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING, packaged_template(ck.path, TEMPLATE_FILES))]
    f16 = [t.name for t in tensors if t.transform is not None and t.ggml_type == QT.F16]
    notes = [f"DeepSeek-V4 DSpark: {stages} stages, {hp.experts} routed experts per stage (MXFP4), FP8 weights "
             f"dequantized to Q8_0" + (f" ({len(f16)} to F16: rows not a multiple of 32)" if f16 else "")
             + "; general.file_type 38 (MOSTLY_MXFP4_MOE) whatever --outtype says"]
    return finish_plan(S.ARCH_DFLASH, head, base, dsv4_kvs(hp, stages), vocab, tail, tensors, notes)
