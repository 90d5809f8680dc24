"""The ``eagle3`` variant's row transform: llama.cpp's q/k permutation for Llama backbones (contract §5.2).

:class:`Eagle3Permute` is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under ``eagle3_permute``,
the name a dry run prints) when this module is imported, which the EAGLE-3 family module does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...errors import ConvertError
from ...formats.transforms import Transform, register


@register
@dataclass(frozen=True)
class Eagle3Permute(Transform):
    """:func:`eagle3_permute`: llama.cpp's q/k permutation for Llama backbones (§5.2).

    The permutation works inside each of ``n`` groups of ``rows / n`` rows (``n`` as in
    :func:`eagle3_permute`), so a chunk of whole groups is permuted as a tensor of that many heads.

    Example:
        >>> Eagle3Permute(2, 2).apply([np.arange(4)], 8).tolist()  # 4 of 8 rows: one group of 4
        [0, 2, 1, 3]
    """

    name: ClassVar[str] = "eagle3_permute"
    n_head: int
    n_head_kv: int

    @property
    def groups(self) -> int:
        return self.n_head_kv if self.n_head_kv != self.n_head else self.n_head

    def row_group(self, rows: int) -> int | None:
        n = self.groups
        return rows // n if n > 0 and rows % (2 * n) == 0 else None

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        heads = chunks[0].shape[0] // (rows // self.groups)  # the same per-group permutation, on this chunk's groups
        return eagle3_permute(chunks[0], heads, heads)

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        return eagle3_permute(arrays[0], self.n_head, self.n_head_kv)


def eagle3_permute(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """Rotate-half rows -> interleaved pairs, llama.cpp's q/k permutation for Llama backbones (§5.2).

    ``n = n_head_kv if it differs from n_head else n_head``; per head ``new[2i + c] = old[c*hd/2 + i]``.

    Example:
        >>> eagle3_permute(np.arange(4), 1, 1).tolist()
        [0, 2, 1, 3]
    """
    n = n_head_kv if n_head_kv != n_head else n_head
    rows = w.shape[0]
    if rows % (2 * n):
        raise ConvertError(f"cannot permute {rows} rows for {n} heads")
    r = w.reshape(n, 2, rows // n // 2, *w.shape[1:])
    return np.ascontiguousarray(r.swapaxes(1, 2)).reshape(w.shape)
