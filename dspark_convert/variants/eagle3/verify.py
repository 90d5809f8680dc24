"""verify's role for an ``eagle3`` file: the numpy forward of the GGUF (:mod:`.numpy_forward`) against the torch
forward of the checkpoint (:mod:`.torch_forward`): fc output, prefill,
each chained step, the chosen tokens; the ``rope_freqs`` and ``eagle3.*`` metadata rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import schema as S
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights, TargetWeights
from ...roles.proof import Forwards, Inputs, Pair
from .numpy_forward import Eagle3Case, eagle3_forward

if TYPE_CHECKING:
    from ...reference.hf_draft import HFDraft


def _candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, toks: list[np.ndarray],
               refs: list[Any]) -> list[Any]:
    return eagle3_forward(g, target, [Eagle3Case(f, t, inputs.steps, forced_tokens=r.tokens)
                                      for f, t, r in zip(inputs.feats, toks, refs, strict=True)])


def _hparams(g: GGUFWeights, outs: list[Any], toks: list[np.ndarray]) -> dict[str, Any]:
    hp = outs[0].hparams
    return {"target_layers": hp.target_layers, "target_hidden_size": hp.target_hidden_size,
            "norm_before_residual": hp.norm_before_residual, "norm_before_fc": hp.norm_before_fc,
            "rope_freqs": g.has("rope_freqs.weight"), "draft_vocab": int(outs[0].logits.shape[1])}


def rows(p: Pair) -> list[OutputCheck]:
    """The exact-mode rows of a chain draft: fc output, prefill, each of the ``steps`` chained steps, the tokens."""
    o = [p.cases("fc output", "fc"), p.cases("prefill output (layer 0, pre-norm)", "prefill_hidden", layer=0),
         p.cases("prefill logits", "prefill_logits", argmax=True)]
    for s in range(p.inputs.steps):
        if s > 0:
            o.append(p.cases(f"step {s} hidden (pre-norm)", _rows("step_hidden", s - 1), layer=0))
        o.append(p.cases(f"step {s} logits", _rows("logits", s), argmax=True))
    o.append(p.tokens("chosen tokens", "logits"))
    return o


def _rows(attr: str, i: int) -> Callable[[Any], Any]:
    """Row ``i`` (kept 2-D) of a case's ``attr``."""
    return lambda case: getattr(case, attr)[i:i + 1]


def quality_rows(p: Pair) -> list[OutputCheck]:
    """The logits against the unrounded checkpoint (information)."""
    return [p.cases("prefill logits", "prefill_logits", bound=None, argmax=True),
            p.cases("step logits", "logits", bound=None, argmax=True)]


def metadata(g: GGUFWeights, d: HFDraft) -> list[MetadataCheck]:
    """The ``rope_freqs`` row, the ``eagle3.*`` rows and the ``d2t`` row (after the architecture and common
    hyperparameter rows: the ``PROOF``'s ``arch``)."""
    hp = d.hp
    return [
        _rope_freqs_check(g, d),
        MetadataCheck.compare("eagle3.target_layers", g.value("eagle3.target_layers"), hp.target_layers),
        MetadataCheck.compare("eagle3.target_hidden_size", g.value("eagle3.target_hidden_size"), hp.target_hidden_size),
        MetadataCheck.compare("eagle3.norm_before_residual", bool(g.value("eagle3.norm_before_residual", False)), hp.norm_before_residual),
        MetadataCheck.compare("eagle3.norm_before_fc", bool(g.value("eagle3.norm_before_fc", False)), hp.norm_before_fc),
        # an EAGLE-3 file's d2t is compared whenever the checkpoint has one (the vocabulary is always the draft's)
        *d.d2t_rows(g, always=True),
    ]


def llama3_factors(d: HFDraft) -> np.ndarray:
    """The per-pair divisors llama3 rope scaling applies (``rope_freqs.weight``), from the torch side's frequencies."""
    from ...reference.layers_torch import inv_freq

    hd, theta = d.hp.head_dim, d.hp.rope.theta
    plain = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    return plain / inv_freq(d.hp).numpy()


def _rope_freqs_check(g: GGUFWeights, d: HFDraft) -> MetadataCheck:
    """llama3 rope scaling lives in ``rope_freqs.weight``: present, with the config's factors (to float32 accuracy)."""
    key = "rope_freqs.weight (llama3 scaling)"
    has = g.has("rope_freqs.weight")
    if d.hp.rope.type != "llama3":
        return MetadataCheck(key, "present" if has else "absent", "absent", not has)
    want = llama3_factors(d)
    if not has:
        return MetadataCheck(key, "absent", f"{want.size} factors", False)
    got = g.array("rope_freqs.weight").reshape(-1).astype(np.float64)
    same = got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-6, atol=0))
    return MetadataCheck(key, "equal" if same else f"different ({got.size} values)", f"{want.size} factors", same)


#: verify's role: random next tokens per position, ``steps`` chained draft tokens (the torch side:
#: :mod:`.torch_forward`, a checkpoint of the shared config reader); the features' width and the draws' vocabulary
#: as a block draft's
PROOF = Forwards(draw=Inputs.next_tokens, candidate=_candidate, hparams=_hparams, rows=rows, quality_rows=quality_rows,
                 metadata=metadata, arch=S.ARCH_EAGLE3)
