"""DSpark drafts (DeepSpec ``Qwen3DSparkModel``, SpecForge ``DSparkDraftModel``, speculators ``DSparkSpeculator``,
``Lfm2DSparkDraftModel``): arch ``dflash`` with Markov / confidence heads detected by tensor presence.

Contract §2.3, §3.2, §3.3, §3.5, §4.2, §5.2 (de-interleave), §5.3 (d2t). Built on the DFlash-lineage base
(``lineage.py``).
"""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...kit.common import base_kvs, finish_plan
from ...kit.hparams import HParams
from ...plan import KV, Plan
from ...roles.convert import Context
from . import lineage
from .d2t import d2t_spec

# the lineage's Family members, as they are (upstream's DSparkModel extends DFlashModel)
from .lineage import DSPARK_FLAG, TARGET_TENSORS, TOKENIZER_IN_CHECKPOINT, hf_names, target_facts

METHOD_WORD, FILE_PREFIX = lineage.DSPARK_NAMING
ARCHITECTURES: tuple[str, ...] = ("Qwen3DSparkModel", "DSparkDraftModel", "DSparkSpeculator", "Lfm2DSparkDraftModel")
#: ``architectures`` values upstream's converter maps to one of ours, after the commit the contract pins
#: (``archnames.resolve_architecture``). LingDSparkModel: inclusionAI/Ling-3.0-flash-dspark, a Qwen3-shaped
#: DeepSpec DSpark draft for Bailing-MoE targets (llama.cpp #27508 converts it with DSparkModel; vLLM and SGLang
#: register it as their Qwen3 DSpark model).
ALIASES: dict[str, str] = {"LingDSparkModel": "Qwen3DSparkModel"}
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT", "build_plan",
           "hf_names", "target_facts"]


def normalize_schema(raw: dict[str, Any], where: str = "config.json") -> tuple[HParams, bool]:
    """Flat DeepSpec, nested SpecForge and speculators configs -> hparams with ``dflash_config`` (§3.2).

    A config without ``dflash_config`` gets one (speculators: from ``aux_hidden_state_layer_ids`` and the
    top-level mask id; flat DeepSpec: its top-level ``target_layer_ids`` / ``mask_token_id``); one with it keeps
    it as is, as upstream does. Returns (hparams, speculators-style) where the flag selects the
    ``sample_from_anchor`` fallback of §3.3.
    """
    bonus_anchor = "transformer_layer_config" in raw or "aux_hidden_state_layer_ids" in raw
    cfg = HParams.draft(raw, where)
    dc = dict(lineage.dflash_config(cfg, where))
    if "dflash_config" not in cfg:
        if "aux_hidden_state_layer_ids" in cfg:
            aux = cfg["aux_hidden_state_layer_ids"]
            if not isinstance(aux, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in aux):
                raise ConvertError(f"{where}: 'aux_hidden_state_layer_ids' is {aux!r}, expected a list of integers")
            # speculators ids are already input-of-layer ids: -1 here, +1 by the shared rule = unchanged
            dc = {"mask_token_id": cfg.get("mask_token_id"), "target_layer_ids": [i - 1 for i in aux]}
        else:
            dc = {k: cfg[k] for k in ("target_layer_ids", "mask_token_id") if k in cfg}
    cfg["dflash_config"] = dc
    return cfg, bonus_anchor


def _setting(hp: HParams, key: str, default: Any = None) -> Any:
    """A DSpark setting from the top level or from ``dflash_config`` (SpecForge nests them there)."""
    if key in hp:
        return hp[key]
    return (hp.get("dflash_config") or {}).get(key, default)


def build_plan(ctx: Context) -> Plan:
    """Plan for a DSpark draft (also DeepSpec's ``markov_rank: 0`` "dflash" releases)."""
    where = ctx.where
    hp, bonus_anchor = normalize_schema(ctx.draft.config, where)
    dc = hp["dflash_config"]
    taps = lineage.target_taps(ctx, dc.get("target_layer_ids", hp.get("target_layer_ids")), "target_layer_ids")

    head_type = _setting(hp, "markov_head_type", "vanilla")
    if head_type not in (None, "vanilla"):
        raise ConvertError(f"{where}: markov_head_type is {head_type!r}; llama.cpp implements only 'vanilla'")
    vocab_size = hp.vocab_size("vocab_size", required=True)
    vd = hp.vocab_size("draft_vocab_size", required=True) if hp.get("draft_vocab_size") else vocab_size
    if vd > vocab_size:
        raise ConvertError(f"{where}: draft_vocab_size {vd} is larger than vocab_size {vocab_size}")
    reduced = vd < vocab_size
    names = {lineage.bare_name(n) for n in ctx.draft.names}
    if reduced and "d2t" not in names:
        raise ConvertError(f"{where}: draft_vocab_size {vd} < vocab_size {vocab_size} but the checkpoint has no 'd2t' tensor")

    notes: list[str] = []
    no_embed = {"embed_tokens.weight"} if hp.get("has_embed_tokens", True) is False else set()
    upstream = lineage.upstream_head_layout(head_in_draft="lm_head.weight" in names, upstream_drops_head=not reduced)
    layout = lineage.choose_head_layout(ctx, keeps_embedding="embed_tokens.weight" in names - no_embed,
                                        head_in_draft="lm_head.weight" in names, upstream_drops_head=not reduced)
    lineage.apply_head_layout(ctx, layout, upstream, notes)
    drop = {"t2d"} | no_embed | ({"lm_head.weight"} if layout == "drop" else set())
    transforms = lineage.rope_transforms(hp, names, where)
    quant = lineage.quant_config(ctx)
    tensors, d2t = lineage.map_tensors(ctx, ctx.out_type, drop=drop, transforms=transforms, quant=quant)
    has_markov = any(t.name == S.T_MARKOV_W1 for t in tensors)
    # upstream b10705+: any checkpoint tensor of a confidence head (the loader makes conf_proj optional)
    has_conf = any("confidence_head.proj" in n for n in ctx.draft.names)
    notes.insert(0, "Markov head: " + ("yes" if has_markov else "no") + "; confidence head: "
                 + ("yes" if has_conf else "no"))
    if transforms:
        notes.append("q/k rows and norms de-interleaved to NEOX order (rope_is_neox_style: false)")
    if d2t is not None:
        tensors.append(d2t_spec(ctx.draft, d2t, vocab_size, entries=vd))
        notes.append(f"reduced vocabulary: {vd} of {vocab_size} tokens")

    sample = hp["sample_from_anchor"] if "sample_from_anchor" in hp else not bonus_anchor
    family = lineage.dflash_kvs(ctx, hp, dc, taps) + [KV(S.DFLASH_SAMPLE_FROM_ANCHOR, VT.BOOL, bool(sample)),
                                                       KV(S.DFLASH_HAS_CONFIDENCE_HEAD, VT.BOOL, has_conf)]
    vocab, tail = lineage.vocab_kvs(ctx, vocab_size, dc.get("mask_token_id"))
    plan = finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, where), family, vocab, tail,
                       tensors, notes)
    lineage.nvfp4_metadata(plan, quant, ctx.file_type)  # ModelOpt NVFP4: file type 39, prec_a4 arrays
    return plan
