"""verify's rows for a ``dflash`` file (DSpark / DFlash): the numpy forward of the GGUF (:mod:`.numpy_forward`)
against the torch forward of the checkpoint (:func:`.torch_forward.block_forward`), component by component:
context projection, block input, each layer, the post-norm hidden state, logits, the Markov head, the chosen
tokens, the confidence head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...reference.weights import GGUFWeights, TargetWeights
from ...verify_checks import (
    EXACT_NMSE,
    MetadataCheck,
    OutputCheck,
    _candidate,
    _meta,
    _quality_ref,
    _reference,
    compare_cases,
    compare_token_cases,
)
from .numpy_forward import BlockCase, dflash_forward

if TYPE_CHECKING:
    from ...reference.hf_draft import HFDraft


def rows(report: Any, tf: Any, d: HFDraft, exact: HFDraft, g: GGUFWeights, target: TargetWeights,
         feats: list[np.ndarray], rng: np.random.Generator, n_vocab: int, quality: bool) -> None:
    """verify's rows for a block draft: one random anchor per case (drawn after the features), both forwards, one
    row per component in forward order; then (``quality``) the rows against the unrounded checkpoint."""
    from .torch_forward import block_forward  # torch: imported when verify runs

    anchors = [int(a) for a in rng.integers(0, n_vocab, size=len(feats))]
    refs = _reference(report.hf_dir, lambda: block_forward(exact, feats, anchors))
    outs = _candidate(report, lambda: dflash_forward(
        g, target, [BlockCase(f, a, r.prev_tokens) for f, a, r in zip(feats, anchors, refs, strict=True)]))
    if outs is None:
        return
    hp = outs[0].hparams
    report.hparams = {"target_layers": hp.target_layers, "block_size": hp.block_size, "mask_token_id": hp.mask_token_id,
                      "sample_from_anchor": hp.sample_from_anchor, "markov_rank": hp.markov_rank,
                      "confidence_head": hp.has_confidence, "n_layer": hp.n_layer, "anchors": anchors,
                      "prediction_rows": hp.prediction_rows}
    o = report.outputs
    o.append(compare_cases("context projection", [r.context for r in refs], [x.context for x in outs]))
    o.append(compare_cases("block input (embeddings)", [r.block_input for r in refs], [x.block_input for x in outs]))
    for il in range(max(len(refs[0].layers), len(outs[0].layers))):
        if il >= len(refs[0].layers) or il >= len(outs[0].layers):
            o.append(OutputCheck(f"layer {il} output", [], grade="missing", passed=False, layer=il,
                                 detail=f"{len(refs[0].layers)} layers in the checkpoint, {len(outs[0].layers)} in the GGUF"))
            continue
        o.append(compare_cases(f"layer {il} output", [r.layers[il] for r in refs], [x.layers[il] for x in outs], layer=il))
    o.append(compare_cases("block hidden (post-norm)", [r.hidden for r in refs], [x.hidden for x in outs]))
    o.append(compare_cases("block logits", [r.logits for r in refs], [x.logits for x in outs], argmax=True))
    choice = ([r.logits for r in refs], [x.logits for x in outs])
    if _both(o, "Markov head", refs[0].markov_bias, outs[0].markov_bias):
        o.append(compare_cases("Markov bias W2 W1[prev]", [r.markov_bias for r in refs], [x.markov_bias for x in outs]))
        o.append(compare_cases("Markov-biased logits", [r.markov_logits for r in refs], [x.markov_logits for x in outs],
                               argmax=True))
        choice = ([r.markov_logits for r in refs], [x.markov_logits for x in outs])
    o.append(compare_token_cases("chosen tokens", [r.tokens for r in refs], [x.tokens for x in outs], *choice))
    if _both(o, "confidence head", refs[0].confidence_logits, outs[0].confidence_logits):
        o.append(_confidence_row(refs, outs, EXACT_NMSE))
    if not quality:
        report.quality_note = "quality mode skipped (--no-quality)"
        return
    if _quality_ref(report, exact):
        refs = _reference(report.hf_dir, lambda: block_forward(d, feats, anchors, [r.prev_tokens for r in refs]))
    q = report.quality
    q.append(compare_cases("block logits", [r.logits for r in refs], [x.logits for x in outs], bound=None, argmax=True))
    if refs[0].markov_logits is not None and outs[0].markov_logits is not None:
        q.append(compare_cases("Markov-biased logits", [r.markov_logits for r in refs], [x.markov_logits for x in outs],
                               bound=None, argmax=True))
    if refs[0].confidence_logits is not None and outs[0].confidence_logits is not None:
        q.append(_confidence_row(refs, outs, None))


def _both(rows: list[OutputCheck], what: str, ref: Any, got: Any) -> bool:
    """Whether both sides computed an optional head; a row that fails when only one side did."""
    if ref is None and got is None:
        return False
    if ref is None or got is None:
        rows.append(OutputCheck(what, [], passed=False, grade="missing",
                                detail=f"{what} present in the {'GGUF' if ref is None else 'checkpoint'} only"))
        return False
    return True


def _confidence_row(refs: list[Any], outs: list[Any], bound: float | None) -> OutputCheck:
    c = compare_cases("confidence (logit)", [r.confidence_logits for r in refs], [x.confidence_logits for x in outs],
                      bound=bound, by_energy=True)      # a few values around the bias: relative to their size
    if c.nmse is not None:
        diff = max(float(np.max(np.abs(1 / (1 + np.exp(-r.confidence_logits)) - 1 / (1 + np.exp(-x.confidence_logits)))))
                   for r, x in zip(refs, outs, strict=True))
        c.detail = f"{c.detail}; max |p diff| {diff:.3g}" if c.detail else f"max |p diff| {diff:.3g}"
    return c


def metadata(g: GGUFWeights, d: HFDraft) -> list[MetadataCheck]:
    """The ``dflash.*`` metadata rows (after the generic ones of ``verify_checks.metadata_checks``)."""
    hp = d.hp
    markov = g.has("markov_w1.weight")
    sfa = g.value("dflash.sample_from_anchor")
    out = [
        _meta("dflash.block_size", g.value("dflash.block_size", 16), hp.block_size),
        _meta("dflash.target_layers", g.value("dflash.target_layers"), hp.target_layers),
        _meta("tokenizer.ggml.mask_token_id", g.value("tokenizer.ggml.mask_token_id"), hp.mask_token_id),
        _meta("dflash.sample_from_anchor", bool(sfa) if sfa is not None else markov, hp.sample_from_anchor),
        _meta("markov rank (markov_w1.weight)", g.shape("markov_w1.weight")[1] if markov else 0, hp.markov_rank),
        _meta("confidence head (conf_proj.weight)", g.has("conf_proj.weight"), hp.has_confidence),
    ]
    if hp.sliding_window or g.value("dflash.attention.sliding_window"):
        out.append(_meta("dflash.attention.sliding_window", g.value("dflash.attention.sliding_window", 0), hp.sliding_window))
    return out
