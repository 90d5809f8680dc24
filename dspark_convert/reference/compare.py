"""The comparisons ``verify`` is made of: one row per compared quantity (:class:`OutputCheck`), one per metadata
value (:class:`MetadataCheck`).

- :func:`compare_values` grades one array against its reference by NMSE (``mse / var(ref)``) against a bound:
  the exact-mode bound :data:`EXACT_NMSE` for the verdict, or upstream's words (:func:`grade`) for information.
- :func:`compare_cases` does that over several input cases and keeps the worst; with ``argmax`` it also checks the
  choice of every row, where a differing choice is a near-tie only when the reference's own margin is within
  :data:`TIE_STD_FRACTION` of the row's std.
- :meth:`MetadataCheck.compare`: a metadata row (the checkpoint's ``d2t`` row: ``HFDraft.d2t_rows``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the exact-mode bound on sum(err^2) / sum(ref^2): both sides hold the same rounded weights, so only float32
#: round-off may remain (measured: below 1e-11 on every fixture and outtype and at 8B size, docs/verify.md).
EXACT_NMSE = 1e-9


#: (upper NMSE bound, grade) from llama.cpp examples/model-conversion/scripts/utils/check-nmse.py (quality mode)
GRADES = ((1e-6, "essentially identical"), (1e-4, "excellent"), (1e-3, "very good"), (1e-2, "good"))


#: a differing choice is a near-tie only if the reference margin is at most this fraction of the row's std
TIE_STD_FRACTION = 0.1


@dataclass
class OutputCheck:
    """One compared quantity: values graded by NMSE and/or choices checked position by position."""

    name: str
    shape: list[int]
    nmse: float | None = None
    nmse_db: float | None = None
    max_abs: float | None = None
    grade: str = ""
    agree: int | None = None          # positions whose argmax / chosen token agrees (all cases)
    total: int | None = None
    near_ties: int = 0                # disagreements within the error margin (not failures)
    agree_by_position: list[bool] | None = None
    passed: bool = True
    detail: str = ""
    layer: int | None = None          # the draft layer this quantity is the output of
    case: int | None = None           # the input case with the largest NMSE


@dataclass
class MetadataCheck:
    """One GGUF metadata value against what the HF config implies."""

    key: str
    gguf: Any
    expected: Any
    passed: bool

    @classmethod
    def compare(cls, key: str, got: Any, expected: Any) -> MetadataCheck:
        """One metadata row: ``got`` (the GGUF) against ``expected`` (the checkpoint); floats compare as float32.

        Example:
            >>> MetadataCheck.compare("eps", 1e-6, float(np.float32(1e-6))).passed
            True
        """
        if isinstance(expected, float) or isinstance(got, float):
            ok = got is not None and expected is not None and _f32(got) == _f32(expected)
        else:
            ok = got == expected
        return cls(key, got, expected, bool(ok))


# ============================================================================================== values
def grade(nmse: float) -> str:
    """Upstream's words for an NMSE value.

    Example:
        >>> grade(3e-5), grade(0.5)
        ('excellent', 'poor')
    """
    return next((g for bound, g in GRADES if nmse < bound), "poor")


def compare_values(name: str, ref: np.ndarray, got: np.ndarray, bound: float | None = EXACT_NMSE,
                   by_energy: bool | None = None) -> OutputCheck:
    """NMSE (in dB too) and max abs error of ``got`` against ``ref``.

    With a ``bound`` (exact mode) NMSE is ``sum(err^2) / sum(ref^2)``, the error relative to the quantity's own
    size (a common offset such as the confidence bias must not magnify round-off), and the row passes below the
    bound (grade ``round-off`` / ``differs``). With ``bound=None`` (quality mode) NMSE is upstream's
    ``mse / var(ref)`` with upstream's grade words, and the row always passes. ``by_energy`` overrides the
    normaliser (quality rows of a few offset values, such as the confidence logits, use the energy too).

    Example:
        >>> c = compare_values("x", np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.001]))
        >>> c.grade, c.passed
        ('differs', False)
        >>> compare_values("x", np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.01]), bound=None).grade
        'excellent'
    """
    ref64, got64 = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    if ref64.shape != got64.shape:
        return OutputCheck(name, list(ref64.shape), grade="shape mismatch", passed=False,
                           detail=f"reference shape {list(ref64.shape)}, GGUF forward shape {list(got64.shape)}")
    bad = _nonfinite_sides(ref64, got64)
    if bad:
        return OutputCheck(name, list(ref64.shape), grade="non-finite", passed=False, detail=bad)
    mse = float(np.mean((got64 - ref64) ** 2)) if ref64.size else 0.0
    energy = float(np.mean(ref64 ** 2)) if ref64.size else 0.0
    energy_only = bound is not None if by_energy is None else by_energy
    var = float(np.var(ref64)) if ref64.size and not energy_only else 0.0
    nmse = mse / (var if var > 0 else max(energy, 1e-30))
    db = 10 * math.log10(max(nmse, 1e-30))           # an exact match reads -300 dB (JSON has no -inf)
    max_abs = float(np.max(np.abs(got64 - ref64))) if ref64.size else 0.0
    if bound is None:
        return OutputCheck(name, list(ref64.shape), nmse=nmse, nmse_db=db, max_abs=max_abs, grade=grade(nmse))
    ok = nmse < bound
    return OutputCheck(name, list(ref64.shape), nmse=nmse, nmse_db=db, max_abs=max_abs,
                       grade="round-off" if ok else "differs", passed=ok)


def _nonfinite_sides(ref: np.ndarray, got: np.ndarray) -> str:
    """Which forward produced NaN/Inf ('' when neither): when the reference did too, the checkpoint itself holds
    non-finite values (a conversion with --allow-nonfinite names them), not the GGUF forward."""
    ref_bad, got_bad = not np.isfinite(ref).all(), not np.isfinite(got).all()
    if ref_bad:
        return (("both forwards produced" if got_bad else "the reference (HF checkpoint) forward produced") +
                " NaN/Inf: the checkpoint holds non-finite values")
    return "GGUF forward produced NaN/Inf" if got_bad else ""


def _near_tie(ref_row: np.ndarray, got_row: np.ndarray, a: int, b: int) -> bool:
    """Whether choosing ``b`` instead of ``a`` is a near-tie: the reference's own margin between the two is within
    twice the row's max abs error, and small in absolute terms (<= 0.1 x the row's std), so that a large error can
    never excuse a decisive disagreement."""
    ref64 = np.asarray(ref_row, np.float64)
    tol = min(2.0 * float(np.max(np.abs(np.asarray(got_row, np.float64) - ref64))), TIE_STD_FRACTION * float(np.std(ref64)))
    return float(ref64[a]) - float(ref64[b]) <= tol


def add_argmax(check: OutputCheck, ref: np.ndarray, got: np.ndarray, ties: bool = True) -> OutputCheck:
    """Per-row argmax agreement of two logit matrices, with near-ties separated from real disagreements
    (``ties=False``: plain agreement counts, for information)."""
    if ref.shape != got.shape or ref.ndim != 2:
        return check
    a, b = ref.argmax(1), got.argmax(1)
    hard = [int(i) for i in np.flatnonzero(a != b) if not (ties and _near_tie(ref[i], got[i], int(a[i]), int(b[i])))]
    check.agree, check.total, check.agree_by_position = int((a == b).sum()), int(a.size), (a == b).tolist()
    if ties:
        check.near_ties = int((a != b).sum()) - len(hard)
        if hard:
            check.passed = False
            check.detail = _join(check.detail, f"argmax differs at position(s) {_few(hard)}")
    return check


def compare_cases(name: str, refs: Sequence[np.ndarray], gots: Sequence[np.ndarray], *, bound: float | None = EXACT_NMSE,
                  argmax: bool = False, layer: int | None = None, by_energy: bool | None = None) -> OutputCheck:
    """:func:`compare_values` for each input case, keeping the worst (an incomparable case first, else the largest
    NMSE); with ``argmax`` the choices of every row of every case are checked too (positions run across cases)."""
    checks = [compare_values(name, r, g, bound, by_energy) for r, g in zip(refs, gots, strict=True)]
    worst = max(range(len(checks)), key=lambda i: math.inf if checks[i].nmse is None else float(checks[i].nmse or 0.0))
    c = checks[worst]
    c.layer, c.case = layer, worst
    if len(checks) > 1 and c.nmse is not None:
        c.detail = _join(c.detail, f"largest in case {worst}")
    if argmax and all(x.nmse is not None for x in checks):
        agree, total, ties, by_pos, bad = 0, 0, 0, [], []
        for i, (r, g) in enumerate(zip(refs, gots, strict=True)):
            one = add_argmax(OutputCheck(name, []), np.asarray(r), np.asarray(g), ties=bound is not None)
            if one.total is None:
                continue
            agree, total, ties = agree + (one.agree or 0), total + one.total, ties + one.near_ties
            by_pos += one.agree_by_position or []
            if not one.passed:
                bad.append(f"case {i}: {one.detail}")
        c.agree, c.total, c.near_ties, c.agree_by_position = agree, total, ties, by_pos
        if bad:
            c.passed = False
            c.detail = _join(c.detail, "; ".join(bad))
    return c


def compare_tokens(name: str, ref_tokens: np.ndarray, got_tokens: np.ndarray, ref_logits: np.ndarray,
                   got_logits: np.ndarray) -> OutputCheck:
    """Chosen tokens (target ids) position by position; a difference is a near-tie when the logits allow it."""
    ref_tokens, got_tokens = np.asarray(ref_tokens), np.asarray(got_tokens)
    c = OutputCheck(name, list(ref_tokens.shape), grade="tokens")
    if ref_tokens.shape != got_tokens.shape or np.shape(ref_logits) != np.shape(got_logits):
        c.passed, c.detail = False, f"{got_tokens.size} tokens, expected {ref_tokens.size}"
        c.grade = "shape mismatch"
        return c
    bad = _nonfinite_sides(np.asarray(ref_logits, np.float64), np.asarray(got_logits, np.float64))
    if bad:  # argmax of NaN logits is position 0 on both sides: agreement would mean nothing
        c.passed, c.grade, c.detail = False, "non-finite", f"logits: {bad}"
        c.agree, c.total = 0, int(ref_tokens.size)
        return c
    hard, ties = [], 0
    for i in np.flatnonzero(ref_tokens != got_tokens):
        ra, ga = int(ref_logits[i].argmax()), int(got_logits[i].argmax())
        if ra != ga and _near_tie(ref_logits[i], got_logits[i], ra, ga):
            ties += 1
        else:
            hard.append(int(i))
    c.agree, c.total, c.near_ties = int((ref_tokens == got_tokens).sum()), int(ref_tokens.size), ties
    c.agree_by_position = (ref_tokens == got_tokens).tolist()
    if hard:
        c.passed = False
        c.detail = (f"position(s) {_few(hard)}: reference {_few(ref_tokens[hard].tolist())}, "
                    f"GGUF {_few(got_tokens[hard].tolist())}")
    c.grade = "identical" if c.agree == c.total else ("near-ties only" if c.passed else "differ")
    return c


def compare_token_cases(name: str, ref_tokens: Sequence[np.ndarray], got_tokens: Sequence[np.ndarray],
                        ref_logits: Sequence[np.ndarray], got_logits: Sequence[np.ndarray]) -> OutputCheck:
    """:func:`compare_tokens` over several cases, positions running across cases."""
    parts = [compare_tokens(name, *x) for x in zip(ref_tokens, got_tokens, ref_logits, got_logits, strict=True)]
    c = OutputCheck(name, [sum(p.shape[0] if p.shape else 0 for p in parts)], grade="tokens")
    c.agree, c.total = sum(p.agree or 0 for p in parts), sum(p.total or 0 for p in parts)
    c.near_ties, c.agree_by_position = sum(p.near_ties for p in parts), sum((p.agree_by_position or [] for p in parts), [])
    bad = [(i, p) for i, p in enumerate(parts) if not p.passed]
    c.passed = not bad
    c.detail = "; ".join(f"case {i}: {p.detail}" for i, p in bad)
    c.grade = next((p.grade for _, p in bad), "identical" if c.agree == c.total else "near-ties only")
    c.case = bad[0][0] if bad else None
    return c


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _few(items: list[int], n: int = 8) -> str:
    """A list for a detail line: the first ``n`` items, then how many there are in all.

    Example:
        >>> _few([1, 2, 3]), _few(list(range(10)), 2)
        ('[1, 2, 3]', '[0, 1, ... (10 in all)]')
    """
    if len(items) <= n:
        return str(list(items))
    return "[" + ", ".join(str(i) for i in items[:n]) + f", ... ({len(items)} in all)]"


# ============================================================================================== metadata
def _f32(x: Any) -> float | None:
    return None if x is None else float(np.float32(x))


