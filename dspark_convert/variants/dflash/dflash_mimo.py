"""MiMo-style DFlash drafts (a ``DFlashDraftModel`` with ``mask_embedding.pt`` beside the weights; spec
/upstream-b11434.md §2.2, upstream b11334+ ``generate_extra_tensors``).

The draft ships its own learned mask vector instead of a trained mask row in the target's embedding. Upstream
writes, before the draft's tensors: the target's head as ``output.weight`` (``lm_head.weight``, or the embedding
for a tied target) and the target's ``model.embed_tokens.weight`` with row ``mask_token_id`` replaced by the
vector (cast to the embedding's dtype first) as ``token_embd.weight``. The pickle is read with
``torch.load(weights_only=True)`` (:mod:`.mask_embedding`); its mask id must be ``dflash_config.mask_token_id``,
its vector ``[hidden_size]``, the id inside the vocabulary.

``dflash.py`` hands a ``DFlashDraftModel`` with that file to :func:`build_plan`; the b11434 DFlash keys are
shared with DFlash2 (:func:`.lineage.b11434_kvs`; DFlash2 adds its conv / selector keys).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import NameTable, base_kvs, finish_plan, is_skipped, tensor_spec
from ...kit.hparams import HParams
from ...plan import Plan, TensorSpec
from ...roles.convert import Context
from . import lineage
from .lineage import b11434_kvs
from .mask_embedding import MASK_FILE, read_mask_embedding
from .transforms import PatchRow

#: the lineage's names plus the per-layer sink aliases upstream maps to ``attn_sinks.weight``
NAMES = NameTable(
    layer={**lineage.NAMES.layer, "self_attn.attention_sink_bias": S.L_ATTN_SINKS,
           "self_attn.learnable_sink_param": S.L_ATTN_SINKS},
    globals=dict(lineage.NAMES.globals),
)
TARGET_EMBED = "model.embed_tokens.weight"


def mask_vector(ctx: Context, hp: HParams, dc: dict[str, Any], vocab: int) -> tuple[int, np.ndarray]:
    path = ctx.draft.path / MASK_FILE
    mask_id, vec = read_mask_embedding(path)
    want = dc.get("mask_token_id")
    if want is None or mask_id != want:
        raise ConvertError(f"{path}: mask_token_id is {mask_id}, but {ctx.where} has dflash_config.mask_token_id "
                           f"{want!r} (they must be equal)")
    hidden = hp.positive("hidden_size")
    if vec.shape != (hidden,):
        raise ConvertError(f"{path}: 'embedding' has shape {list(vec.shape)}, expected [{hidden}] (hidden_size)")
    if not 0 <= mask_id < vocab:
        raise ConvertError(f"{path}: mask_token_id {mask_id} is outside the vocabulary of {vocab} tokens")
    if not np.isfinite(vec).all():
        raise ConvertError(f"{path}: 'embedding' holds non-finite values")
    return mask_id, vec


def _target_ck(ctx: Context, names: set[str]) -> Checkpoint:
    return Checkpoint(ctx.target_dir, select=names.__contains__, config=ctx.target_config)


def extra_tensors(ctx: Context, hp: HParams, mask_id: int, vec: np.ndarray, vocab: int) -> list[TensorSpec]:
    """``output.weight`` (unless the draft has a head) then the patched ``token_embd.weight``, as upstream yields."""
    names = {lineage.bare_name(n): n for n in ctx.draft.names}
    text = ctx.target_config.get("text_config")
    tcfg = {**ctx.target_config, **text} if isinstance(text, dict) else ctx.target_config
    head = TARGET_EMBED if tcfg.get("tie_word_embeddings", False) else "lm_head.weight"
    want = {TARGET_EMBED} | (set() if "lm_head.weight" in names else {head})
    target = _target_ck(ctx, want)
    try:
        specs = []
        if "lm_head.weight" not in names:
            if head not in target:
                raise ConvertError(f"{ctx.target_dir}: no tensor '{head}'; {MASK_FILE} needs the target's output head")
            specs.append(tensor_spec(target, head, S.T_OUTPUT, ctx.out_type, origin="target"))
        own = names.get("embed_tokens.weight")
        src_ck, src, origin = (ctx.draft, own, "draft") if own else (target, TARGET_EMBED, "target")
        if src not in src_ck:
            raise ConvertError(f"{ctx.target_dir}: no tensor '{TARGET_EMBED}'; {MASK_FILE} needs the target's embedding")
        ref = src_ck.ref(src)
        if tuple(ref.shape) != (vocab, int(hp["hidden_size"])):
            raise ConvertError(f"{ref.file}: tensor '{src}' has shape {list(ref.shape)}, expected "
                               f"[{vocab}, {hp['hidden_size']}] (vocab_size, hidden_size of the draft)")
        patch = PatchRow(mask_id, tuple(float(x) for x in vec), ref.dtype)
        specs.append(tensor_spec(src_ck, src, S.T_TOKEN_EMBD, ctx.out_type, origin=origin,  # type: ignore[arg-type]
                                 transform=patch))
        return specs
    finally:
        target.close()


def build_plan(ctx: Context) -> Plan:
    where = ctx.where
    hp = HParams.of(ctx.draft.config, where)
    dc = lineage.dflash_config(hp, where)
    vocab_size = hp.vocab_size("vocab_size", required=True)
    mask_id, vec = mask_vector(ctx, hp, dc, vocab_size)
    ids = dc.get("target_layer_ids", hp.get("target_layer_ids"))
    taps = lineage.target_taps(ctx, ids, "dflash_config.target_layer_ids")
    specs = extra_tensors(ctx, hp, mask_id, vec, vocab_size)
    for hf in ctx.draft.names:
        bare = lineage.bare_name(hf)
        if bare in ("d2t", "t2d"):
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is not part of a DFlashDraftModel checkpoint "
                               "(reduced vocabularies are a DSpark/speculators feature)")
        if is_skipped("model." + bare) or bare == "embed_tokens.weight" or bare in lineage.NAMES.mask_embedding:
            continue
        name = NAMES.gguf_name(bare)
        if name is None:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the dflash layout "
                               "(upstream fails with \"Can not map tensor\")")
        specs.append(tensor_spec(ctx.draft, hf, name, ctx.out_type))
    vocab, tail = lineage.vocab_kvs(ctx, vocab_size, mask_id)
    notes = [f"{MASK_FILE}: token_embd is the target's embedding with row {mask_id} replaced by the draft's mask "
             "vector; output is the target's head"]
    return finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, where),
                       b11434_kvs(ctx, hp, dc, taps, []), vocab, tail, specs, notes)
