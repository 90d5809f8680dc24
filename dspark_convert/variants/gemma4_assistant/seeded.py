"""The seeded target-side inputs of a Gemma 4 assistant's ``verify`` cases, the same on both sides (numpy only: the
GGUF's forward and the checkpoint's each shape them by their own hyper-parameters).

Per case: the last accepted token and a seed (:func:`draw`); from the seed, the target's embedding rows
(:func:`embed_rows`) and the keys and values of its last sliding and last full-attention layers (:func:`cache`).

Example:
    >>> rows = embed_rows(7, 4)
    >>> rows([1, 2]).shape, bool((rows([1])[0] == rows([1, 2])[0]).all())
    ((2, 4), True)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...roles.proof import Inputs


def draw(inputs: Inputs, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Per case: the last accepted token and the seed of the case's target-side inputs."""
    return [(int(rng.integers(0, inputs.n_vocab)), int(rng.integers(0, 2**31 - 1))) for _ in inputs.feats]


def embed_rows(seed: int, width: int) -> Callable[[list[int]], np.ndarray]:
    """The target's embedding rows of a case (unscaled): row ``tok`` is ``N(0, 1/width)`` from ``(seed, tok)``."""
    def rows(tokens: list[int]) -> np.ndarray:
        return np.stack([np.random.default_rng([seed, 1, t]).standard_normal(width).astype(np.float32)
                         / np.float32(math.sqrt(width)) for t in tokens])
    return rows


def cache(seed: int, full: bool, positions: int, n_kv: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The keys and values of the target's cache layer (``full``: the full-attention one, else the sliding one) for
    a case (``[positions, n_kv, head_dim]``)."""
    rng = np.random.default_rng([seed, 2, 1 if full else 0])
    k = rng.standard_normal((positions, n_kv, head_dim)).astype(np.float32)
    return k, rng.standard_normal((positions, n_kv, head_dim)).astype(np.float32)
