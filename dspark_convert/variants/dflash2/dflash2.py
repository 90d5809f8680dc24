"""DFlash2 drafts (z-lab ``DFlash2DraftModel``): arch ``dflash`` plus per-layer dynamic convolutions around the
attention and the MLP, and a low-rank candidate selector (spec/upstream-b11434.md §2.1, §2.2).

Upstream b11434 converts these with the same class as DFlash; this module keeps the b11434 rules a DFlash2 file
needs (``dflash_config.block_size`` first, the four conv / selector keys, ``logit_scale``,
``final_logit_softcapping``, ``embedding_scale``, ``attention.causal``, M-RoPE sections, SWA from
``dflash_config.use_swa``) inside its own code path, on the DFlash-lineage base (``lineage.py``).

llama.cpp's loader constraints are checked here, before anything is written (one line each): the four
keys present and positive, ``hidden_size % conv_group_size == 0``, ``hidden_size >= top_k * (top_k + 1)``, a
full vocabulary (no ``d2t``), and every conv / selector tensor with the shape the loader creates.
"""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...formats import modelopt
from ...formats.modelopt import QuantConfig
from ...kit.common import NameTable, base_kvs, finish_plan, is_skipped
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import Context
from ..dflash import lineage

# the lineage's Family members, as they are
from ..dflash.lineage import (
    DSPARK_FLAG,
    TARGET_TENSORS,
    TOKENIZER_IN_CHECKPOINT,
    b11434_kvs,
    target_facts,
)

#: llama.cpp's ``-hf`` finds the file beside its target by this file-name keyword (``common/download.cpp``)
FILE_PREFIX = "dflash-"
ARCHITECTURES: tuple[str, ...] = ("DFlash2DraftModel",)
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "NAMES", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT", "build_plan",
           "hf_names", "target_facts"]

#: the lineage's table plus the DFlash2 conv and selector tensors (upstream appends ``.weight`` to the bare
#: codebook names; the base kernels keep none and so stay F32)
NAMES = NameTable(
    layer={
        **lineage.NAMES.layer,
        "attention_conv.base_kernel": S.L_ATTN_CONV_BASE,
        "attention_conv.kernel_projection.weight": S.L_ATTN_CONV_PROJ,
        "mlp_conv.base_kernel": S.L_FFN_CONV_BASE,
        "mlp_conv.kernel_projection.weight": S.L_FFN_CONV_PROJ,
    },
    globals={
        **lineage.NAMES.globals,
        "candidate_selector.predecessor_codebook": S.T_SELECTOR_PREV,
        "candidate_selector.successor_codebook": S.T_SELECTOR_NEXT,
        "candidate_selector.hidden_projection.weight": S.T_SELECTOR_HIDDEN,
    },
    mask_embedding=lineage.NAMES.mask_embedding,
)
#: dflash_config key -> GGUF key, in upstream's writing order (right after block_size)
CONV_KEYS: tuple[tuple[str, str], ...] = (
    ("conv_kernel_size", S.DFLASH_CONV_KERNEL_SIZE), ("conv_group_size", S.DFLASH_CONV_GROUP_SIZE),
    ("selector_rank", S.DFLASH_SELECTOR_RANK), ("selector_top_k", S.DFLASH_SELECTOR_TOP_K),
)


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return NAMES.hf_names(gguf_name)


# ---------------------------------------------------------------------------------------------- keys
def conv_settings(dc: dict[str, Any], hidden: int, where: str) -> dict[str, int]:
    """The four conv / selector settings, refused unless llama.cpp's DFlash2 loader accepts them."""
    missing = [k for k, _ in CONV_KEYS if k not in dc]
    if missing:
        raise ConvertError(f"{where}: dflash_config has no '{missing[0]}'; a DFlash2DraftModel needs conv_kernel_size, "
                           "conv_group_size, selector_rank and selector_top_k (llama.cpp: \"DFlash2 model is missing "
                           "conv/selector metadata\")")
    view = HParams(dc, where)
    got = {k: view.positive(f"dflash_config.{k}", dc[k]) for k, _ in CONV_KEYS}
    group, top_k = got["conv_group_size"], got["selector_top_k"]
    if hidden % group:
        raise ConvertError(f"{where}: hidden_size {hidden} is not a multiple of dflash_config.conv_group_size {group} "
                           "(llama.cpp: \"DFlash2 hidden size must be divisible by conv_group_size\")")
    if hidden < top_k * (top_k + 1):
        raise ConvertError(f"{where}: hidden_size {hidden} is below selector_top_k x (selector_top_k + 1) = "
                           f"{top_k * (top_k + 1)} (llama.cpp: \"DFlash2 hidden size is too small for the selector "
                           "lattice\")")
    return got


def dflash2_kvs(ctx: Context, hp: HParams, dc: dict[str, Any], taps: list[int],
                conv: dict[str, int]) -> list[KV]:
    """The keys upstream b11434 writes after the generic ones, in its order (§2.1, §2.2): the DFlash-class keys
    (:func:`..dflash.lineage.b11434_kvs`) with the four conv / selector keys right after ``block_size``."""
    return b11434_kvs(ctx, hp, dc, taps, [KV(key, VT.UINT32, conv[name]) for name, key in CONV_KEYS])


# ---------------------------------------------------------------------------------------------- tensors
def expected_shapes(hp: HParams, conv: dict[str, int], vocab: int, n_layers: int) -> dict[str, tuple[int, ...]]:
    """HF (numpy) shapes of the DFlash2 tensors the loader creates in layers ``0 .. n_layers - 1``: GGUF name ->
    shape."""
    h, k, rank = hp.positive("hidden_size"), conv["conv_kernel_size"], conv["selector_rank"]
    projected = 2 * k * h // conv["conv_group_size"]
    shapes: dict[str, tuple[int, ...]] = {S.T_SELECTOR_PREV: (vocab, rank), S.T_SELECTOR_NEXT: (vocab, rank),
                                          S.T_SELECTOR_HIDDEN: (rank, h)}
    for i in range(n_layers):
        p = S.LAYER_PREFIX.format(bid=i)
        shapes.update({p + S.L_ATTN_CONV_BASE: (2, k, h), p + S.L_FFN_CONV_BASE: (2, k, h),
                       p + S.L_ATTN_CONV_PROJ: (projected, h), p + S.L_FFN_CONV_PROJ: (projected, h)})
    return shapes


def map_tensors(ctx: Context, hp: HParams, conv: dict[str, int], vocab: int,
                quant: QuantConfig | None = None) -> list[TensorSpec]:
    """Every checkpoint tensor in checkpoint order, mapped; DFlash2 tensors shape-checked; none missing. With a
    ModelOpt NVFP4 ``quant``, the lineage's NVFP4 linears and their scales come first."""
    drop = {"embed_tokens.weight"} if hp.get("has_embed_tokens") is False else set()
    # the layers num_hidden_layers declares, up to one past the last the checkpoint names: the first missing one is
    # among them, and a hostile count sizes nothing
    blocks = [NAMES.gguf_name(lineage.bare_name(hf)) or "" for hf in ctx.draft.names]
    last = max((int(b.split(".")[1]) for b in blocks if b.startswith("blk.")), default=-1)
    want = expected_shapes(hp, conv, vocab, min(hp.u32("num_hidden_layers"), last + 2))
    specs, consumed, fp8 = lineage.nvfp4_specs(ctx, quant, drop) if quant is not None else ([], set(), {})
    for hf in ctx.draft.names:
        bare = lineage.bare_name(hf)
        if hf in consumed or (quant is not None and bare.endswith(modelopt.DROPPED_SUFFIXES)):
            continue
        if bare in ("d2t", "t2d"):
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is not allowed in a DFlash2DraftModel "
                               "checkpoint (the selector scores the full vocabulary; llama.cpp has no reduced-vocabulary "
                               "DFlash2)")
        if is_skipped("model." + bare) or bare in drop or bare in NAMES.mask_embedding:
            continue
        name = NAMES.gguf_name(bare)
        if name is None:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the DFlash2 layout "
                               "(upstream fails with \"Can not map tensor\")")
        spec = lineage.plain_spec(ctx, hf, name, ctx.out_type, fp8)
        if name in want and tuple(spec.shape) != want[name]:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has shape {list(spec.shape)}, expected "
                               f"{list(want[name])} (from hidden_size, vocab_size and the dflash_config conv / selector "
                               "settings)")
        specs.append(spec)
    have = {s.name for s in specs}
    missing = [n for n in want if n not in have]
    if missing:
        raise ConvertError(f"{ctx.draft.path}: tensor '{NAMES.hf_names(missing[0])[0]}' is missing; llama.cpp's DFlash2 "
                           f"loader requires {missing[0]}")
    return specs


def build_plan(ctx: Context) -> Plan:
    """Plan for a DFlash2 draft: keys and tensors as upstream b11434 writes them, loader constraints first."""
    where = ctx.where
    hp = HParams.of(ctx.draft.config, where)
    dc = lineage.dflash_config(hp, where)
    hidden = hp.positive("hidden_size")
    vocab_size = hp.vocab_size("vocab_size", required=True)
    draft_vocab = hp.get("draft_vocab_size")
    if draft_vocab not in (None, vocab_size):
        raise ConvertError(f"{where}: draft_vocab_size is {draft_vocab!r}, expected vocab_size {vocab_size} (DFlash2 "
                           "supports the full vocabulary only)")
    conv = conv_settings(dc, hidden, where)
    ids = dc.get("target_layer_ids", hp.get("target_layer_ids"))
    taps = lineage.target_taps(ctx, ids, "dflash_config.target_layer_ids")
    notes = [f"DFlash2: conv kernel {conv['conv_kernel_size']}, group {conv['conv_group_size']}, selector rank "
             f"{conv['selector_rank']}, top-k {conv['selector_top_k']}"]
    # a draft that stores embed_tokens keeps it as token_embd; with no output.weight llama.cpp's loader then scores
    # the block (and the selector) with that matrix instead of the target's head: on an untied target the default
    # adds the target's head, as for the other drafts of the lineage (--match-upstream: upstream's layout)
    names = {lineage.bare_name(n) for n in ctx.draft.names}
    kept = "embed_tokens.weight" in names and hp.get("has_embed_tokens") is not False
    head = "lm_head.weight" in names
    layout = lineage.choose_head_layout(ctx, keeps_embedding=kept, head_in_draft=head, upstream_drops_head=False)
    lineage.apply_head_layout(ctx, layout, lineage.upstream_head_layout(head_in_draft=head, upstream_drops_head=False),
                              notes)
    quant = lineage.quant_config(ctx)
    tensors = map_tensors(ctx, hp, conv, vocab_size, quant)
    vocab, tail = lineage.vocab_kvs(ctx, vocab_size, dc.get("mask_token_id"))
    plan = finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, where),
                       dflash2_kvs(ctx, hp, dc, taps, conv), vocab, tail, tensors, notes)
    lineage.nvfp4_metadata(plan, quant, ctx.file_type)  # ModelOpt NVFP4: file type 39, prec_a4 arrays
    return plan

