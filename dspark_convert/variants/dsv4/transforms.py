"""The ``dsv4`` variant's row transform: DeepSeek-V4's FP4 routed experts stacked losslessly into one MXFP4 tensor.

:class:`Mxfp4ExpertStack` is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under
``mxfp4_expert_stack``, the name a dry run prints) when this module is imported, which :mod:`.blockscaled` (the
specs shared by the DSpark draft and the MTP sidecar) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from gguf import GGMLQuantizationType as QT

from ...errors import ConvertError
from ...formats.quant import mxfp4_repack
from ...formats.transforms import PerExpert, register


@register
@dataclass(frozen=True)
class Mxfp4ExpertStack(PerExpert):
    """Sources (weight, scale) of experts 0..n-1 (FP4 packed ``[rows, cols/2]`` + E8M0 ``[rows, cols/32]``)
    -> the MXFP4 blocks of the 3-D stack ``[experts, rows, cols]``, written as they come (no further rounding).

    Output rows are the experts' rows one after the other; a chunk holds whole experts, so the writer reads one
    expert (or a few small ones) at a time and the memory does not grow with the number of experts.

    Example:
        >>> t = Mxfp4ExpertStack(2)
        >>> t.out_rows(((3, 16), (3, 1), (3, 16), (3, 1))), t.source_rows(3, 6, ((3, 16), (3, 1)) * 2)
        (6, ((0, 0), (0, 0), (0, 3), (0, 3)))
    """

    name: ClassVar[str] = "mxfp4_expert_stack"
    n_sources: ClassVar[int] = 2  # per expert

    output_dtype: ClassVar[str | None] = QT.MXFP4.name  # already encoded: the writer copies the blocks

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        blocks = [mxfp4_repack(chunks[i], chunks[i + 1]) for i in range(0, len(chunks), 2) if len(chunks[i])]
        return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        rows = {a.shape[0] for a in arrays}
        raise ConvertError(f"internal: an MXFP4 expert stack needs experts of equal rows, found {sorted(rows)}")
