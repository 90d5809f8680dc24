"""``verify`` for DFlash2 files: the numpy forward of the GGUF (:mod:`.numpy_forward`) against the independent torch
forward of the checkpoint (:mod:`.torch_forward`), component by component, plus the conv / selector metadata; the
driver's tensor accounting (``verify.accounting``) accounts for every tensor.

Exact mode: the torch side reads every checkpoint tensor rounded as the GGUF stores it, so every row must agree to
float32 round-off (:data:`dspark_convert.reference.compare.EXACT_NMSE`). The numpy selector scores the torch side's
candidate sets (so that a near-tie cannot make the score rows incomparable); a separate row checks that the
GGUF's own top-k candidates are the same sets. Quality mode: the scaled, capped logits against the unrounded
checkpoint (information).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...hf.values import as_float
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights, TargetWeights
from ...roles.proof import Forwards, Inputs, Pair
from .numpy_forward import DFlash2HParams, top_k
from .numpy_forward import dflash2_forward as numpy_forward

#: dflash_config key -> GGUF key of the conv / selector settings (verify's own spelling)
_CONV_KEYS = (("conv_kernel_size", "dflash.conv_kernel_size"), ("conv_group_size", "dflash.conv_group_size"),
              ("selector_rank", "dflash.selector_rank"), ("selector_top_k", "dflash.selector_top_k"))


def metadata(g: GGUFWeights, ck: Any) -> list[MetadataCheck]:
    """The conv / selector and scale keys against the checkpoint's config."""
    cfg, dc = ck.cfg, ck.dc
    rows = []
    for key, gkey in _CONV_KEYS:
        rows.append(MetadataCheck(gkey, g.value(gkey), dc.get(key), g.value(gkey) == dc.get(key)))
    for key, gkey in (("output_multiplier", "dflash.logit_scale"), ("input_embedding_scale", "dflash.embedding_scale"),
                      ("final_logit_softcapping", "dflash.final_logit_softcapping")):
        want = dc.get(key, cfg.get(key))
        if key == "final_logit_softcapping" and want is not None and as_float(want, key, ck.where) <= 0:
            want = None
        got = g.value(gkey)
        ok = (got is None and want is None) or (got is not None and want is not None
                                                  and abs(float(got) - float(want)) <= 1e-6 * max(1.0, abs(float(want))))
        rows.append(MetadataCheck(gkey, got, want, ok))
    return rows


def _candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, anchors: list[int],
               refs: list[Any]) -> list[Any]:
    """The GGUF's forward, scoring the torch side's candidate sets."""
    return numpy_forward(g, target, inputs.feats, anchors, [r.candidates for r in refs])


def _hparams(g: GGUFWeights, outs: list[Any], anchors: list[int]) -> dict[str, Any]:
    hp = DFlash2HParams.from_gguf(g)
    return {"block_size": hp.base.block_size, "conv_kernel_size": hp.kernel, "conv_group_size": hp.group,
            "selector_rank": hp.rank, "selector_top_k": hp.top_k, "logit_scale": hp.logit_scale,
            "final_logit_softcapping": hp.softcap, "embedding_scale": hp.embedding_scale, "anchors": anchors}


def rows(p: Pair) -> list[OutputCheck]:
    """One row per compared quantity, in forward order; the GGUF's own top-k sets against the torch side's."""
    k = p.hparams["selector_top_k"]
    o = [*p.block_trunk(), p.cases("block logits (scaled, capped)", "logits", argmax=True)]
    own = [np.stack([top_k(x.logits[q], k) for q in range(1, x.logits.shape[0])]) for x in p.outs]
    agree = [bool(set(a[q].tolist()) == set(r.candidates[q].tolist())) for a, r in zip(own, p.refs, strict=True)
             for q in range(a.shape[0])]
    o.append(OutputCheck("selector candidates (top-k sets)", [len(agree)], grade="tokens", agree=sum(agree),
                         total=len(agree), agree_by_position=agree, passed=all(agree)))
    o.append(p.cases("selector scores", "scores"))
    return o


def quality_rows(p: Pair) -> list[OutputCheck]:
    """The logits against the unrounded checkpoint (information)."""
    return [p.cases("block logits (scaled, capped)", "logits", bound=None, argmax=True)]


def _n_vocab(g: GGUFWeights, ck: Any) -> int:
    return int(g.shape("selector_successor.weight")[0])


#: verify's role: one random anchor per case, the two DFlash2 forwards (the torch side: :mod:`.torch_forward`)
PROOF = Forwards(draw=Inputs.anchors, candidate=_candidate, hparams=_hparams, rows=rows, quality_rows=quality_rows,
                 metadata=metadata, n_vocab=_n_vocab, steps=False)
