"""The ``dflash2`` variant in llama.cpp's loop: the three-way check's reference for a DFlash2 file.

DFlash2 (``selector_hidden.weight``) logs no draft candidates: llama.cpp walks its selector lattice
(``common/speculative.cpp``: per block position the argmax of the transition scores from the previous choice) and
sends the tokens straight to verification, so its drafted tokens are known only through verification (the
accepted prefix of the target's continuation, and that the next token is not the target's: the three-way check's
``UNKNOWN``). Contract: :mod:`llama.refs`. The lattice from the variant's numpy forward (``dflash2_forward``) on
each block's tap features and anchor, walked as llama.cpp walks it (:func:`dflash2_walk`, fed llama.cpp's known
choices: the accepted prefix), with the candidates and each position's logit std for the comparison. The
reference must be accepted for exactly as many tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dspark_convert.variants.dflash2.numpy_forward import dflash2_forward
from llama.refs import DraftInputs, RefBlock


def dflash2_walk(candidates: np.ndarray, scores: np.ndarray, forced: Sequence[int] = ()) -> tuple[list[int], np.ndarray]:
    """llama.cpp's greedy walk of a DFlash2 lattice (``common/speculative.cpp``, draft-dflash with a selector):
    ``pred = 0``; for each block position ``p >= 1``: ``j = argmax scores[p][pred]`` (first maximum), draft
    ``candidates[p][j]``, ``pred = j``. ``forced`` (llama.cpp's known choices) replaces ``j`` for the first
    positions when the forced token is a candidate, so that one near-tie does not shift the rest. Returns the
    walk's own choices and the score row each was chosen from.

    Example:
        >>> c = np.array([[5, 6], [7, 8]])
        >>> s = np.array([[[0., 1.], [0., 1.]], [[2., 0.], [0., 3.]]], dtype=np.float32)
        >>> dflash2_walk(c, s)[0]
        [6, 8]
    """
    pred, toks, rows = 0, [], []
    for p in range(candidates.shape[0]):
        row = scores[p][pred]
        j = int(np.argmax(row))
        toks.append(int(candidates[p][j]))
        rows.append(row)
        cands = [int(c) for c in candidates[p]]
        pred = cands.index(forced[p]) if p < len(forced) and forced[p] in cands else j
    return toks, np.stack(rows) if rows else np.empty((0, 0), np.float32)


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The DFlash2 lattice walk for each of ``d.blocks`` (see the module docstring)."""
    outs = dflash2_forward(d.g, d.target, [d.context(b) for b in d.blocks], [int(b.anchor or 0) for b in d.blocks])
    refs = []
    for b, o in zip(d.blocks, outs, strict=True):
        forced = d.continuation(b)[:int(b.n_accepted or 0)]
        toks, rows = dflash2_walk(o.candidates, o.scores, forced)
        refs.append(RefBlock(toks, rows, None, candidates=o.candidates, row_scales=np.std(o.logits[1:], axis=1)))
    return refs
