"""The MTP sidecars' row transform: MLA's ``kv_b_proj`` split per head (upstream's ``DeepseekV2Model``, which
``GlmMoeDsaModel`` inherits; spec/drafts-beyond-dflash.md §1).

:class:`MlaKvBSplit` is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under ``mla_kv_b_split``,
the name a dry run prints) when this module is imported, which the glm-dsa family module does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...formats.transforms import Shapes, Transform, register


@register
@dataclass(frozen=True)
class MlaKvBSplit(Transform):
    """``kv_b_proj`` ``[heads x (nope + v), kv_lora_rank]`` viewed as ``[heads, nope + v, kv_lora_rank]``; ``part``
    ``"k"``: the first ``nope`` rows of each head, transposed -> ``attn_k_b`` ``[heads, kv_lora_rank, nope]``;
    ``"v"``: the last ``v`` rows of each head -> ``attn_v_b`` ``[heads, v, kv_lora_rank]`` (upstream: ``view``,
    ``torch.split(..., [nope, v], dim=1)``, ``k_b.transpose(1, 2)``). Output rows are the first two axes flattened;
    a chunk holds whole heads.

    Example:
        >>> w = np.arange(12).reshape(6, 2)  # 2 heads x (nope 2 + v 1) rows, kv_lora_rank 2
        >>> MlaKvBSplit("k", 2, 2, 1).apply([w], 4).tolist(), MlaKvBSplit("v", 2, 2, 1).apply([w], 2).tolist()
        ([[0, 2], [1, 3], [6, 8], [7, 9]], [[4, 5], [10, 11]])
    """

    name: ClassVar[str] = "mla_kv_b_split"
    part: str
    heads: int
    nope: int
    v: int

    def _per_head(self, shapes: Shapes) -> int:
        """Output rows per head: kv_lora_rank for ``k`` (transposed), ``v`` for ``v``."""
        return shapes[0][1] if self.part == "k" else self.v

    def out_rows(self, shapes: Shapes) -> int:
        return self.heads * self._per_head(shapes)

    def row_group(self, rows: int) -> int | None:
        return rows // self.heads if self.heads > 0 and rows % self.heads == 0 else None

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        per, width = self._per_head(shapes), self.nope + self.v
        return ((start // per * width, -(-stop // per) * width),)

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        w = chunks[0]
        heads = w.shape[0] // (self.nope + self.v)
        kv = w.reshape(heads, self.nope + self.v, w.shape[1])
        if self.part == "k":
            return np.ascontiguousarray(kv[:, :self.nope, :].transpose(0, 2, 1)).reshape(-1, self.nope)
        return np.ascontiguousarray(kv[:, self.nope:, :]).reshape(-1, w.shape[1])

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        from ...errors import ConvertError

        raise ConvertError(f"internal: kv_b_proj of shape {tuple(arrays[0].shape)} does not split into {self.heads} "
                           f"heads of nope {self.nope} + v {self.v} rows")
