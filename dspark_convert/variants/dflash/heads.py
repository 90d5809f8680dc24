"""The DSpark heads of the numpy reference forwards, on a GGUF's tensors: the greedy Markov chain that picks a
block's tokens (``markov_w1`` / ``markov_w2``) and the confidence head (``conf_proj``), as ``spec/checkpoints.md``
§3.3 writes them. The DSpark / DFlash forward (``numpy_forward.py``) and the Gemma 4 DSpark forward
(``variants/gemma4/numpy_forward.py``) both run them after their decoder layers.
"""

from __future__ import annotations

import numpy as np

from ...reference.ops import F32
from ...reference.weights import GGUFWeights


def markov_chain(U: np.ndarray, w2: np.ndarray, g: GGUFWeights, anchor: int, d2t: np.ndarray | None,
                 prev_tokens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The greedy vanilla Markov chain seeded by the anchor: ``z_i = U_i + W2 W1[prev_i]``, ``x_i = argmax z_i``.

    ``w2`` is ``markov_w2`` [Vd, r]; rows of ``markov_w1`` are gathered as needed; ``d2t`` maps draft ids to target
    ids. ``prev_tokens`` forces the chain's inputs. Returns ``(bias, z, tokens, prev)`` with ``bias = W2 W1[prev]``.
    """
    P = U.shape[0]
    bias, tokens, prev = np.empty_like(U), np.empty(P, np.int64), np.empty(P, np.int64)
    p = anchor
    for i in range(P):
        prev[i] = p if prev_tokens is None or i >= len(prev_tokens) else prev_tokens[i]
        bias[i] = w2 @ g.rows("markov_w1.weight", [prev[i]])[0]
        d = int(np.argmax(U[i] + bias[i]))
        tokens[i] = d if d2t is None else d2t[d]
        p = tokens[i]
    return bias, U + bias, tokens, prev


def draft_tokens(U: np.ndarray, g: GGUFWeights, anchor: int, d2t: np.ndarray | None, w2: np.ndarray | None,
                 prev_tokens: np.ndarray | None = None
                 ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    """A block's chosen tokens: the Markov chain (:func:`markov_chain`, ``prev_tokens`` forcing its inputs) when
    ``w2`` (``markov_w2``) is given, else every row's argmax in parallel; draft ids map to target ids through ``d2t``.
    Returns ``(bias, z, tokens, prev)``: ``bias`` and ``z`` are None without the chain, ``prev`` is the anchor and
    then the chosen tokens but the last."""
    if w2 is not None:
        return markov_chain(U, w2, g, anchor, d2t, prev_tokens)
    d = np.argmax(U, axis=1)
    tokens = d if d2t is None else d2t[d]
    return None, None, tokens, np.concatenate([[anchor], tokens[:-1]]).astype(np.int64)


def confidence(g: GGUFWeights, hidden: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """``l_i = w . [Hout_i ; W1[prev_i]] + b`` (the W1 part only when the head was trained with the Markov chain)."""
    w = g.array("conf_proj.weight").reshape(-1)
    x = hidden
    if w.size > hidden.shape[1]:
        x = np.concatenate([hidden, g.rows("markov_w1.weight", prev)], axis=1)
    b = g.array("conf_proj.bias").reshape(-1)[0] if g.has("conf_proj.bias") else F32(0)
    return x @ w + b
