"""verify's rows for an ``eagle3`` file: the numpy forward of the GGUF (:mod:`.numpy_forward`) against the torch
forward of the checkpoint (:func:`.torch_forward.eagle3_forward`): fc output, prefill, each chained step, the
chosen tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...reference.weights import GGUFWeights, TargetWeights
from ...verify_checks import (
    MetadataCheck,
    _candidate,
    _meta,
    _quality_ref,
    _reference,
    compare_cases,
    compare_token_cases,
)
from .numpy_forward import Eagle3Case, eagle3_forward

if TYPE_CHECKING:
    from ...reference.hf_draft import HFDraft


def rows(report: Any, tf: Any, d: HFDraft, exact: HFDraft, g: GGUFWeights, target: TargetWeights,
         feats: list[np.ndarray], rng: np.random.Generator, n_vocab: int, quality: bool) -> None:
    """verify's rows for an EAGLE-3 draft: random next tokens per case (drawn after the features), ``steps``
    chained draft tokens, both forwards; then (``quality``) the rows against the unrounded checkpoint."""
    from .torch_forward import eagle3_forward as torch_eagle3  # torch: imported when verify runs

    toks = [rng.integers(0, n_vocab, size=t) for t in report.contexts]
    K = report.steps
    refs = _reference(report.hf_dir, lambda: torch_eagle3(exact, feats, toks, K))
    outs = _candidate(report, lambda: eagle3_forward(
        g, target, [Eagle3Case(f, t, K, forced_tokens=r.tokens) for f, t, r in zip(feats, toks, refs, strict=True)]))
    if outs is None:
        return
    hp = outs[0].hparams
    report.hparams = {"target_layers": hp.target_layers, "target_hidden_size": hp.target_hidden_size,
                      "norm_before_residual": hp.norm_before_residual, "norm_before_fc": hp.norm_before_fc,
                      "rope_freqs": g.has("rope_freqs.weight"), "draft_vocab": int(outs[0].logits.shape[1])}
    o = report.outputs
    o.append(compare_cases("fc output", [r.fc for r in refs], [x.fc for x in outs]))
    o.append(compare_cases("prefill output (layer 0, pre-norm)", [r.prefill_hidden for r in refs],
                           [x.prefill_hidden for x in outs], layer=0))
    o.append(compare_cases("prefill logits", [r.prefill_logits for r in refs], [x.prefill_logits for x in outs], argmax=True))
    for s in range(K):
        if s > 0:
            o.append(compare_cases(f"step {s} hidden (pre-norm)", [r.step_hidden[s - 1:s] for r in refs],
                                   [x.step_hidden[s - 1:s] for x in outs], layer=0))
        o.append(compare_cases(f"step {s} logits", [r.logits[s:s + 1] for r in refs], [x.logits[s:s + 1] for x in outs],
                               argmax=True))
    o.append(compare_token_cases("chosen tokens", [r.tokens for r in refs], [x.tokens for x in outs],
                                 [r.logits for r in refs], [x.logits for x in outs]))
    if not quality:
        report.quality_note = "quality mode skipped (--no-quality)"
        return
    if _quality_ref(report, exact):
        refs = _reference(report.hf_dir, lambda: torch_eagle3(d, feats, toks, K, [r.tokens for r in refs]))
    report.quality += [
        compare_cases("prefill logits", [r.prefill_logits for r in refs], [x.prefill_logits for x in outs], bound=None,
                      argmax=True),
        compare_cases("step logits", [r.logits for r in refs], [x.logits for x in outs], bound=None, argmax=True),
    ]


#: an EAGLE-3 file's d2t is compared whenever the checkpoint has one (the vocabulary is always the draft's)
D2T_ALWAYS = True


def metadata(g: GGUFWeights, d: HFDraft) -> list[MetadataCheck]:
    """The ``rope_freqs`` row and the ``eagle3.*`` metadata rows (after the generic ones)."""
    hp = d.hp
    return [
        _rope_freqs_check(g, d),
        _meta("eagle3.target_layers", g.value("eagle3.target_layers"), hp.target_layers),
        _meta("eagle3.target_hidden_size", g.value("eagle3.target_hidden_size"), hp.target_hidden_size),
        _meta("eagle3.norm_before_residual", bool(g.value("eagle3.norm_before_residual", False)), hp.norm_before_residual),
        _meta("eagle3.norm_before_fc", bool(g.value("eagle3.norm_before_fc", False)), hp.norm_before_fc),
    ]


def llama3_factors(d: HFDraft) -> np.ndarray:
    """The per-pair divisors llama3 rope scaling applies (``rope_freqs.weight``), from the torch side's frequencies."""
    from ...reference.torch_forward import inv_freq

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
