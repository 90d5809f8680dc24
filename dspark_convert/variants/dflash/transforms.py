"""The ``dflash`` variant's row transforms: the NEOX reordering of interleaved-RoPE q/k rows (contract §5.2) and the
mask row MiMo-style drafts patch into the embedding table.

Each is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under its ``name``, the one a dry run
prints) when this module is imported, which the DFlash lineage (:mod:`.lineage`) and :mod:`.dflash_mimo` do.
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
class DeinterleaveRope(Transform):
    """:func:`deinterleave_rope` per head of ``head_dim`` rows (a draft with ``rope_is_neox_style: false``, §5.2).

    Example:
        >>> DeinterleaveRope(4).apply([np.arange(8)], 8).tolist()
        [0, 2, 1, 3, 4, 6, 5, 7]
    """

    name: ClassVar[str] = "deinterleave_rope"
    head_dim: int

    def row_group(self, rows: int) -> int | None:  # a permutation inside each head of head_dim rows
        hd = self.head_dim
        return hd if hd > 0 and hd % 2 == 0 and rows % hd == 0 else None

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return deinterleave_rope(chunks[0], self.head_dim)


def deinterleave_rope(w: np.ndarray, head_dim: int) -> np.ndarray:
    """Interleaved (GPT-J) rows -> NEOX order, per head: ``new[j] = old[2j]``, ``new[hd/2 + j] = old[2j + 1]``.

    Used for checkpoints with ``rope_is_neox_style: false`` on q/k projections and q/k norms (§5.2).

    Example:
        >>> deinterleave_rope(np.arange(4), 4).tolist()
        [0, 2, 1, 3]
    """
    rows = w.shape[0]
    if rows % head_dim or head_dim % 2:
        raise ConvertError(f"cannot de-interleave {rows} rows with head_dim {head_dim}")
    r = w.reshape(rows // head_dim, head_dim // 2, 2, *w.shape[1:])
    return np.ascontiguousarray(r.swapaxes(1, 2)).reshape(w.shape)


@register
@dataclass(frozen=True)
class PatchRow(Transform):
    """Replace row ``row`` of the source with ``values``, cast to the source dtype ``dtype`` first (BF16: round to
    nearest even), as upstream patches MiMo's mask vector into the embedding table.

    Streamed like any other tensor: the writer hands each chunk with the output row it starts at
    (:meth:`apply_at`), and only the chunk holding ``row`` is copied and patched; every other chunk passes as it
    was read. A chunk boundary falls between rows, so the row lands whole in one chunk whatever the outtype
    (a Q8_0 block never spans two rows).

    Example:
        >>> PatchRow(3, (9.0, 9.0), "F32").apply_at([np.zeros((2, 2), np.float32)], 4, 2).tolist()
        [[0.0, 0.0], [9.0, 9.0]]
    """

    name: ClassVar[str] = "patch_row"
    row: int
    values: tuple[float, ...]
    dtype: str

    def apply_at(self, chunks: Sequence[np.ndarray], rows: int, start: int) -> np.ndarray:
        chunk = chunks[0]
        if not start <= self.row < start + chunk.shape[0]:
            return chunk
        out = np.array(chunk, copy=True)
        v = np.asarray(self.values, dtype=np.float32)
        out[self.row - start] = _bf16_bits(v) if self.dtype == "BF16" else v.astype(out.dtype)
        return out


def _bf16_bits(v: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, rounded to nearest even (NaN not quieted: callers pass finite values)."""
    u = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
