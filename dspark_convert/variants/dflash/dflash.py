"""DFlash drafts (z-lab ``DFlashDraftModel``): arch ``dflash``, contract §2.2, §3.2, §4.1.

Built on the DFlash-lineage base (``lineage.py``), which ``dspark.py`` extends too.
"""

from __future__ import annotations

import dataclasses

from ... import schema as S
from ...errors import ConvertError
from ...kit.common import base_kvs, finish_plan
from ...kit.hparams import HParams
from ...plan import Plan
from ...roles.convert import Context, TargetFacts
from . import lineage

# the lineage's Family members, as they are (upstream's DSparkModel extends DFlashModel)
from .lineage import DSPARK_FLAG, TARGET_TENSORS, TOKENIZER_IN_CHECKPOINT, hf_names

METHOD_WORD, FILE_PREFIX = lineage.DFLASH_NAMING
ARCHITECTURES: tuple[str, ...] = ("DFlashDraftModel",)
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT", "build_plan",
           "hf_names", "target_facts"]


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """The lineage's fit facts; a MiMo-style draft's ``mask_embedding.pt`` is written (its own code path)."""
    facts = lineage.target_facts(ctx, plan)
    if (ctx.draft.path / "mask_embedding.pt").is_file():
        return dataclasses.replace(facts, mask_file_written=True)
    return facts


def build_plan(ctx: Context) -> Plan:
    """Plan for a z-lab DFlash draft: ``dflash_config`` (target layers also top-level), no d2t (§3.2, §4.1);
    q/k de-interleaved once for ``rope_is_neox_style: false`` (upstream b11223+)."""
    if (ctx.draft.path / "mask_embedding.pt").is_file():  # MiMo-style: its own code path
        from . import dflash_mimo

        return dflash_mimo.build_plan(ctx)
    hp = HParams.of(ctx.draft.config, ctx.where)
    dc = lineage.dflash_config(hp, ctx.where)
    key = "dflash_config.target_layer_ids" if "target_layer_ids" in dc else "target_layer_ids"
    taps = lineage.target_taps(ctx, dc.get("target_layer_ids", hp.get("target_layer_ids")), key)
    drop = {"embed_tokens.weight"} if hp.get("has_embed_tokens") is False else set()
    for hf in ctx.draft.names:
        if lineage.bare_name(hf) in ("d2t", "t2d"):
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is not part of a DFlashDraftModel checkpoint "
                               "(reduced vocabularies are a DSpark/speculators feature)")
    names = {lineage.bare_name(n) for n in ctx.draft.names}
    notes: list[str] = []
    head = "lm_head.weight" in names
    layout = lineage.choose_head_layout(ctx, keeps_embedding="embed_tokens.weight" in names - drop,
                                        head_in_draft=head, upstream_drops_head=False)
    lineage.apply_head_layout(ctx, layout, lineage.upstream_head_layout(head_in_draft=head, upstream_drops_head=False),
                              notes)
    transforms = lineage.rope_transforms(hp, names, ctx.where)
    if transforms:
        notes.append("q/k rows and norms de-interleaved to NEOX order (rope_is_neox_style: false)")
    quant = lineage.quant_config(ctx)
    tensors, _ = lineage.map_tensors(ctx, ctx.out_type, drop=drop, transforms=transforms, quant=quant)
    vocab, tail = lineage.vocab_kvs(ctx, hp.vocab_size("vocab_size"), dc.get("mask_token_id"))
    plan = finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, ctx.where),
                       lineage.dflash_kvs(ctx, hp, dc, taps), vocab, tail, tensors, notes)
    lineage.nvfp4_metadata(plan, quant, ctx.file_type)  # ModelOpt NVFP4: file type 39, prec_a4 arrays
    return plan
