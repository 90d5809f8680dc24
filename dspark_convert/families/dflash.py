"""DFlash drafts (z-lab ``DFlashDraftModel``): arch ``dflash``, contract §2.2, §3.2, §4.1.

Built on the DFlash-lineage base (``dflash_base.py``), which ``dspark.py`` extends too.
"""

from __future__ import annotations

from .. import schema as S
from ..errors import ConvertError
from ..plan import Plan
from . import dflash_base as lineage
from .base import Context
from .common import base_kvs, finish_plan

# the lineage's Family members, as they are (upstream's DSparkModel extends DFlashModel)
from .dflash_base import (
    DSPARK_FLAG,
    TARGET_TENSORS,
    TOKENIZER_IN_CHECKPOINT,
    claims,
    draft_tensors,
    hf_names,
    target_facts,
)
from .hparams import normalize_hparams, vocab_size_of

ARCHITECTURES: tuple[str, ...] = ("DFlashDraftModel",)
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT", "build_plan", "claims",
           "draft_tensors", "hf_names", "target_facts"]


def build_plan(ctx: Context) -> Plan:
    """Plan for a z-lab DFlash draft: ``dflash_config`` only, never permuted, no d2t (§3.2, §4.1)."""
    if (ctx.draft.path / "mask_embedding.pt").is_file():  # MiMo-style (issue 22): its own code path
        from . import dflash_mimo

        return dflash_mimo.build_plan(ctx)
    hp = normalize_hparams(ctx.draft.config, ctx.where)
    dc = lineage.dflash_config(hp, ctx.where)
    taps = lineage.target_taps(ctx, dc.get("target_layer_ids"), "dflash_config.target_layer_ids")
    drop = {"embed_tokens.weight"} if hp.get("has_embed_tokens") is False else set()
    for hf in ctx.draft.names:
        if lineage.bare_name(hf) in ("d2t", "t2d"):
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is not part of a DFlashDraftModel checkpoint "
                               "(reduced vocabularies are a DSpark/speculators feature)")
    tensors, _ = lineage.map_tensors(ctx, ctx.out_type, drop=drop)
    vocab, tail = lineage.vocab_kvs(ctx, vocab_size_of(hp, "vocab_size", ctx.where), dc.get("mask_token_id"))
    return finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, ctx.where),
                       lineage.dflash_kvs(hp, taps, ctx.where), vocab, tail, tensors, [])
