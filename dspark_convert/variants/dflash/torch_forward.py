"""The torch side of the ``dflash`` variant: how a DSpark / DFlash Hugging Face folder is read (the
:class:`~dspark_convert.reference.hf_draft.DraftReader` role; the block forward itself is
``reference.torch_forward.block_forward``). Written from ``spec/checkpoints.md``; the class lists are the torch
side's own (it never asks the converter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ConvertError
from ...reference.hf_draft import HFHParams, TorchCheckpoint

DSPARK_ARCHS = ("Qwen3DSparkModel", "DSparkDraftModel", "DSparkSpeculator", "Lfm2DSparkDraftModel")
DFLASH_ARCHS = ("DFlashDraftModel", "DFlashSpeculator")
ARCHITECTURES = DSPARK_ARCHS + DFLASH_ARCHS
#: the words that name these drafts in an error
WHAT = ("DSpark", "DFlash")


def claims(c: dict[str, Any], common: dict[str, Any]) -> bool:
    """No fallback: a block draft always names its class."""
    return False


def read_config(folder: Path, arch: str, raw: dict[str, Any], c: dict[str, Any], w: TorchCheckpoint,
                tcfg: dict[str, Any], common: dict[str, Any], notes: list[str]) -> tuple[str, str, str, HFHParams]:
    """A block draft's config in any layout (flat DeepSpec, nested ``dflash_config``, speculators)."""
    nested = raw.get("dflash_config") or {}
    speculators = "transformer_layer_config" in raw or "aux_hidden_state_layer_ids" in raw
    family = "dflash" if arch in DFLASH_ARCHS else "dspark"
    n_layer = common["n_layer"]
    taps: list[int]
    if speculators:                             # already input-of-layer ids
        taps = list(raw.get("aux_hidden_state_layer_ids") or [])
        target_layers, mask = list(taps), raw.get("mask_token_id")
    else:
        ids = nested.get("target_layer_ids", raw.get("target_layer_ids"))
        if ids is None and "num_target_layers" in raw:             # z-lab build_target_layer_ids
            lt = int(raw["num_target_layers"])
            ids = [round(1 + i * (lt - 4) / (n_layer - 1)) for i in range(n_layer)] if n_layer > 1 else [lt // 2]
        taps = list(ids or [])
        target_layers = [int(t) + 1 for t in taps]                 # output-of-layer -> input-of-layer
        mask = nested.get("mask_token_id", raw.get("mask_token_id"))
    head_type = nested.get("markov_head_type", raw.get("markov_head_type", "vanilla"))
    if w.has("markov_head.markov_w1.weight") and head_type != "vanilla":
        raise ConvertError(f"{folder}/config.json: markov_head_type {head_type!r}: only 'vanilla' is supported")
    if "sample_from_anchor" in raw:
        sfa = bool(raw["sample_from_anchor"])
    else:  # DFlash: same-position; DSpark anchor-as-first, except keyless speculators exports (gguf-contract §3.3)
        sfa = family == "dspark" and not speculators
    # rotate-half unless a DSpark config says otherwise; z-lab's DFlashDraftModel always uses rotate_half
    neox = True if arch == "DFlashDraftModel" else bool(c.get("rope_is_neox_style", c.get("is_neox_style", True)))
    window = c.get("sliding_window") if c.get("use_sliding_window") else None
    # Qwen3Config derives missing layer_types: sliding from layer max_window_layers (default 28) on
    layer_types = c.get("layer_types") or ["sliding_attention" if window and i >= int(c.get("max_window_layers", 28))
                                           else "full_attention" for i in range(n_layer)]
    draft_vocab = int(c.get("draft_vocab_size") or common["vocab_size"])
    reduced = draft_vocab < common["vocab_size"]
    # the draft runs with the embed_tokens / lm_head it stores (DeepSpec's copies of the target's); upstream b11434
    # keeps a full-vocab DSpark's embed_tokens, and our default keeps its lm_head too on an untied target
    own = True
    if family == "dspark" and not reduced and w.has("embed_tokens.weight") and not w.has("lm_head.weight"):
        notes.append("full-vocab DSpark without lm_head: the target's head scores the draft")
    hp = HFHParams(
        **common, draft_vocab_size=draft_vocab, target_layers=target_layers,
        own_embed=own and w.has("embed_tokens.weight") and raw.get("has_embed_tokens") is not False,
        own_lm_head=own and w.has("lm_head.weight"),
        block_size=int(raw.get("block_size") or nested.get("block_size") or 16), taps=taps,
        mask_token_id=None if mask is None else int(mask),
        markov_rank=w.shape("markov_head.markov_w1.weight")[1] if w.has("markov_head.markov_w1.weight") else 0,
        has_confidence=w.has("confidence_head.proj.weight"), sample_from_anchor=sfa, neox=neox,
        swa=[bool(window) and t == "sliding_attention" for t in layer_types] or [False] * n_layer,
        sliding_window=int(window or 0),
    )
    layout = "speculators" if speculators else ("nested" if nested else "flat")
    return family, layout, "", hp
