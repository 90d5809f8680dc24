"""The ``gemma4_assistant`` variant's row transform: the embedding table cut to the tokenizer's size.

:class:`FirstRows` is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under ``first_rows``, the
name a dry run prints) when this module is imported, which the family module :mod:`.gemma4_assistant` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...formats.transforms import Shapes, Transform, register


@register
@dataclass(frozen=True)
class FirstRows(Transform):
    """The first ``rows`` rows of the source (fewer when it has fewer): an embedding table cut to the tokenizer's
    size, as upstream's Gemma converters cut padding rows.

    Example:
        >>> t = FirstRows(3)
        >>> t.out_rows(((5, 2),)), t.apply([np.arange(6).reshape(3, 2)], 3).shape
        (3, (3, 2))
    """

    name: ClassVar[str] = "first_rows"
    rows: int

    def out_rows(self, shapes: Shapes) -> int:
        return min(self.rows, shapes[0][0]) if shapes[0] else 1

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return chunks[0]
