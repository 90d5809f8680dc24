"""verify's role for a ``dflash`` file (DSpark / DFlash): the numpy forward of the GGUF (:mod:`.numpy_forward`)
against the torch forward of the checkpoint (:mod:`.torch_forward`),
component by component: context projection, block input, each layer, the post-norm hidden state, logits, the
Markov head, the chosen tokens, the confidence head; and the ``dflash.*`` metadata rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import schema as S
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights, TargetWeights
from ...roles.proof import Forwards, Inputs, Pair
from .numpy_forward import BlockCase, dflash_forward

if TYPE_CHECKING:
    from ...reference.hf_draft import HFDraft


def _candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, anchors: list[int], refs: list[Any]) -> list[Any]:
    return dflash_forward(g, target, [BlockCase(f, a, r.prev_tokens) for f, a, r in zip(inputs.feats, anchors, refs,
                                                                                          strict=True)])


def _hparams(g: GGUFWeights, outs: list[Any], anchors: list[int]) -> dict[str, Any]:
    hp = outs[0].hparams
    return {"target_layers": hp.target_layers, "block_size": hp.block_size, "mask_token_id": hp.mask_token_id,
            "sample_from_anchor": hp.sample_from_anchor, "markov_rank": hp.markov_rank,
            "confidence_head": hp.has_confidence, "n_layer": hp.n_layer, "anchors": anchors,
            "prediction_rows": hp.prediction_rows}


def rows(p: Pair) -> list[OutputCheck]:
    """The exact-mode rows of a block draft, in forward order (the chosen tokens by the Markov-biased logits when
    the draft has a Markov head)."""
    refs, outs = p.refs, p.outs
    o = [*p.block_trunk(missing_fails=True), p.cases("block logits", "logits", argmax=True)]
    choice = "logits"
    if _both(o, "Markov head", refs[0].markov_bias, outs[0].markov_bias):
        o.append(p.cases("Markov bias W2 W1[prev]", "markov_bias"))
        o.append(p.cases("Markov-biased logits", "markov_logits", argmax=True))
        choice = "markov_logits"
    o.append(p.tokens("chosen tokens", choice))
    if _both(o, "confidence head", refs[0].confidence_logits, outs[0].confidence_logits):
        o.append(_confidence_row(p))
    return o


def quality_rows(p: Pair) -> list[OutputCheck]:
    """The logits against the unrounded checkpoint (information)."""
    refs, outs = p.refs, p.outs
    q = [p.cases("block logits", "logits", bound=None, argmax=True)]
    if refs[0].markov_logits is not None and outs[0].markov_logits is not None:
        q.append(p.cases("Markov-biased logits", "markov_logits", bound=None, argmax=True))
    if refs[0].confidence_logits is not None and outs[0].confidence_logits is not None:
        q.append(_confidence_row(p, bound=None))
    return q


def _both(rows: list[OutputCheck], what: str, ref: Any, got: Any) -> bool:
    """Whether both sides computed an optional head; a row that fails when only one side did."""
    if ref is None and got is None:
        return False
    if ref is None or got is None:
        rows.append(OutputCheck(what, [], passed=False, grade="missing",
                                detail=f"{what} present in the {'GGUF' if ref is None else 'checkpoint'} only"))
        return False
    return True


def _confidence_row(p: Pair, **bound: float | None) -> OutputCheck:
    """The confidence logits (exact mode; ``bound=None``: graded), and the largest difference of their
    probabilities."""
    c = p.cases("confidence (logit)", "confidence_logits", **bound, by_energy=True)  # a few values around the bias:
    refs, outs = p.refs, p.outs                                                       # relative to their size
    if c.nmse is not None:
        diff = max(float(np.max(np.abs(1 / (1 + np.exp(-r.confidence_logits)) - 1 / (1 + np.exp(-x.confidence_logits)))))
                   for r, x in zip(refs, outs, strict=True))
        c.detail = f"{c.detail}; max |p diff| {diff:.3g}" if c.detail else f"max |p diff| {diff:.3g}"
    return c


def metadata(g: GGUFWeights, d: HFDraft) -> list[MetadataCheck]:
    """The ``dflash.*`` rows and the ``d2t`` row (after the architecture and common hyperparameter rows: the
    ``PROOF``'s ``arch``)."""
    hp = d.hp
    markov = g.has("markov_w1.weight")
    sfa = g.value("dflash.sample_from_anchor")
    out = [
        MetadataCheck.compare("dflash.block_size", g.value("dflash.block_size", 16), hp.block_size),
        MetadataCheck.compare("dflash.target_layers", g.value("dflash.target_layers"), hp.target_layers),
        MetadataCheck.compare("tokenizer.ggml.mask_token_id", g.value("tokenizer.ggml.mask_token_id"), hp.mask_token_id),
        MetadataCheck.compare("dflash.sample_from_anchor", bool(sfa) if sfa is not None else markov, hp.sample_from_anchor),
        MetadataCheck.compare("markov rank (markov_w1.weight)", g.shape("markov_w1.weight")[1] if markov else 0, hp.markov_rank),
        MetadataCheck.compare("confidence head (conf_proj.weight)", g.has("conf_proj.weight"), hp.has_confidence),
    ]
    if hp.sliding_window or g.value("dflash.attention.sliding_window"):
        out.append(MetadataCheck.compare("dflash.attention.sliding_window", g.value("dflash.attention.sliding_window", 0), hp.sliding_window))
    return out + d.d2t_rows(g)


#: verify's role: one random anchor per case, the two block forwards (the torch side: :mod:`.torch_forward`, a
#: checkpoint of the shared config reader)
PROOF = Forwards(draw=Inputs.anchors, candidate=_candidate, hparams=_hparams, rows=rows, quality_rows=quality_rows,
                 metadata=metadata, arch=S.ARCH_DFLASH)
