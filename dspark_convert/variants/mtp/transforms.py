"""The MTP sidecars' row transforms: the norms stored as offsets from one (:class:`AddOne`, the Qwen families), the
halves of a fused ``gate_up_proj`` expert stack (:class:`GateUpHalf`, the Qwen families), the per-expert weights
stacked (:class:`ExpertStack`), MLA's ``kv_b_proj`` split per head (:class:`MlaKvBSplit`:
upstream's ``DeepseekV2Model``, which ``GlmMoeDsaModel`` inherits), DeepSeek-V4's ``e_proj`` / ``h_proj`` side by
side (:class:`ColumnConcat`), MiMo-V2's FP8 weights with float block scales dequantized (:class:`Fp8ScaleInvDequant`),
MiMo-V2.5's tensor-parallel FP8 ``qkv_proj`` dequantized and regrouped (:class:`TpQkvDequant`: upstream's
``MimoV2Model._tp_aware_qkv_dequant``; spec/drafts-beyond-dflash.md §1), and separate q / k / v projections written
as one ``attn_qkv`` (:class:`QkvConcat`: MiMo-V2-Flash's MTP layers, whose llama.cpp graph needs the fused tensor).

Each is registered in :data:`dspark_convert.formats.transforms.TRANSFORMS` (under its ``name``, the one a dry run
prints) when this module is imported, which the family modules that use them do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...errors import ConvertError
from ...formats.quant import float_values, fp8_scale_inv_dequant
from ...formats.transforms import Fp8BlockDequant, PerExpert, Shapes, Transform, register

#: the dequantization of one FP8 part of a :class:`ColumnConcat` (weight and its F8_E8M0 tile scales)
_FP8_PART = Fp8BlockDequant()


@register
@dataclass(frozen=True)
class AddOne(Transform):
    """``w + 1``, for RMS norms stored as offsets from one (Qwen3.5 / Qwen3-Next: upstream adds 1 to every
    ``*norm.weight`` but ``linear_attn.norm``), written F32. ``dtype`` is the source's safetensors dtype; the sum is
    taken where upstream takes it: a BF16 source is widened to float32 first (upstream converts every dtype but F16 /
    F32 to float32 before its modify_tensors), so the sum is float32; an F16 source stays float16, so the sum is
    float16 (rounded to half) and only then widened for the F32 write.

    Example:
        >>> AddOne("F32").apply([np.array([0.5, -1.0], np.float32)], 2).tolist()
        [1.5, 0.0]
        >>> AddOne("BF16").apply([np.array([0x3F01], np.uint16)], 1).tolist()  # 0.50390625 + 1, not rounded to BF16
        [1.50390625]
        >>> AddOne("F16").apply([np.array([-0.00514221], np.float16)], 1).tolist()  # rounded to half, not 0.99485779
        [0.99462890625]
    """

    name: ClassVar[str] = "add_one"
    dtype: str

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        if self.dtype not in ("BF16", "F16", "F32"):
            raise ConvertError(f"internal: add_one on a {self.dtype} tensor (expected BF16, F16 or F32)")
        if self.dtype == "F16":
            return (np.asarray(chunks[0]).view(np.float16) + np.float16(1)).astype(np.float32)
        return float_values(chunks[0], self.dtype) + np.float32(1)


@register
@dataclass(frozen=True)
class GateUpHalf(Transform):
    """Source: a fused expert stack ``gate_up_proj`` ``[experts, 2 x ff, hidden]`` (transformers' layout) -> one of
    its halves ``[experts, ff, hidden]``: each expert's first ``ff`` rows for ``part`` ``gate``, its last ``ff`` for
    ``up`` (upstream's ``Qwen2MoeModel.modify_tensors``: ``data[..., :n_ff, :]`` / ``data[..., n_ff:, :]``). The rows
    are the experts, so a chunk holds whole experts.

    Example:
        >>> w = np.arange(8).reshape(1, 4, 2)  # 1 expert, ff 2, hidden 2
        >>> GateUpHalf("gate").apply([w], 1).tolist(), GateUpHalf("up").apply([w], 1).tolist()
        ([[[0, 1], [2, 3]]], [[[4, 5], [6, 7]]])
    """

    name: ClassVar[str] = "gate_up_half"
    part: str

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        w = chunks[0]
        ff = w.shape[1] // 2
        return np.ascontiguousarray(w[:, :ff] if self.part == "gate" else w[:, ff:])


@register
@dataclass(frozen=True)
class ExpertStack(PerExpert):
    """Sources: one 2-D weight per expert, ``[rows, cols]`` each -> the 3-D stack ``[experts, rows, cols]`` (upstream
    ``torch.stack`` of per-expert tensors). A chunk holds whole experts, so memory stays one expert per chunk.

    Example:
        >>> t = ExpertStack(2)
        >>> t.out_rows(((3, 4), (3, 4))), t.source_rows(3, 6, ((3, 4), (3, 4)))
        (6, ((0, 0), (0, 3)))
    """

    name: ClassVar[str] = "expert_stack"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        parts = [c for c in chunks if len(c)]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        shapes = sorted({tuple(a.shape) for a in arrays})
        raise ConvertError(f"internal: an expert stack needs experts of one shape, found {shapes}")


@register
@dataclass(frozen=True)
class ColumnConcat(Transform):
    """Parts side by side along their columns (``torch.cat(parts, dim=1)``) -> float32 rows. ``dtypes`` gives each
    part's source dtype: an ``F8_E4M3`` part is two sources (the weight and its F8_E8M0 scale per 128x128 tile, read
    and dequantized as :class:`~dspark_convert.formats.transforms.Fp8BlockDequant` does), any other part one float
    source (BF16 bits widened). Every part has the rows of the output; chunks hold whole 128-row tiles when a part
    is FP8.

    Example:
        >>> t = ColumnConcat(("F32", "F8_E4M3"))
        >>> w = np.full((1, 2), 0x38, np.uint8)                     # e4m3 0x38 = 1.0
        >>> t.sources_ok(3), t.apply([np.array([[5.0]], np.float32), w, np.array([[128]], np.uint8)], 1).tolist()
        (True, [[5.0, 2.0, 2.0]])
    """

    name: ClassVar[str] = "column_concat"
    dtypes: tuple[str, ...]

    def _fp8(self) -> list[bool]:
        return [d == "F8_E4M3" for d in self.dtypes]

    def sources_ok(self, n: int) -> bool:
        return n == sum(2 if f else 1 for f in self._fp8())

    def row_group(self, rows: int) -> int | None:
        return _FP8_PART.row_group(rows) if any(self._fp8()) else 1

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        out: list[tuple[int, int]] = []
        i = 0
        for fp8 in self._fp8():
            if fp8:
                out += _FP8_PART.source_rows(start, stop, shapes[i:i + 2])
                i += 2
            else:
                out.append((start, stop))
                i += 1
        return tuple(out)

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        parts: list[np.ndarray] = []
        i = 0
        for dtype in self.dtypes:
            if dtype == "F8_E4M3":
                parts.append(_FP8_PART.apply(chunks[i:i + 2], rows))
                i += 2
            else:
                parts.append(float_values(chunks[i], dtype))
                i += 1
        return np.concatenate(parts, axis=1)


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
        raise ConvertError(f"internal: kv_b_proj of shape {tuple(arrays[0].shape)} does not split into {self.heads} "
                           f"heads of nope {self.nope} + v {self.v} rows")


@register
@dataclass(frozen=True)
class Fp8ScaleInvDequant(Transform):
    """Sources (F8_E4M3 weight ``[out, in]``, float ``weight_scale_inv`` ``[ceil(out / rows), ceil(in / cols)]``
    of dtype ``scale_dtype``) -> float32 rows: ``e4m3(w[i, j]) * float32(s[i // rows, j // cols])``, one float32
    product as upstream's ``dequant_simple`` (``weight.float() * scale.repeat_interleave(...)``, quant_method
    ``fp8`` with ``weight_block_size [rows, cols]``). Chunks hold whole ``rows``-row blocks.

    Example:
        >>> w, s = np.full((3, 2), 0x38, np.uint8), np.array([[0.5], [2.0]], np.float32)  # e4m3 0x38 = 1.0
        >>> Fp8ScaleInvDequant(2, 2, "F32").apply([w, s], 3).tolist()
        [[0.5, 0.5], [0.5, 0.5], [2.0, 2.0]]
    """

    name: ClassVar[str] = "fp8_scale_inv_dequant"
    n_sources: ClassVar[int] = 2
    rows: int
    cols: int
    scale_dtype: str

    def row_group(self, rows: int) -> int | None:
        return self.rows

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        return (start, stop), (start // self.rows, -(-stop // self.rows))

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return fp8_scale_inv_dequant(chunks[0], chunks[1], self.rows, self.cols, self.scale_dtype)


@register
@dataclass(frozen=True)
class TpQkvDequant(Transform):
    """Sources: the F8_E4M3 ``qkv_proj`` ``[tp x (q + k + v), in]`` and its ``weight_scale_inv`` (dtype
    ``scale_dtype``), as a pair given once per output segment (``3 x tp`` pairs) -> float32 ``[Q | K | V]``: the weight
    holds ``tp`` ranks of ``q + k + v`` rows, each rank's rows scaled by its own ``ceil((q + k + v) / block)`` scale
    rows (columns in blocks of ``block``); the output is the ranks' Q rows, then their K rows, then their V rows
    (upstream's ``_tp_aware_qkv_dequant``). Segment ``j`` (region ``j // tp``, rank ``j % tp``) reads its pair's rows,
    so a chunk reads only the weight and scale rows it writes.

    Example:
        >>> w = np.full((4, 2), 0x38, np.uint8)  # 2 ranks of q 1, k 1 rows (v 0); e4m3 0x38 = 1.0
        >>> t, s = TpQkvDequant(2, 1, 1, 0, "F32"), np.array([[2.0], [3.0]], np.float32)
        >>> t.source_rows(1, 3, ((4, 2), (2, 1)) * 6)[:8]  # output rows 1..2: rank 1's q row, rank 0's k row
        ((0, 0), (0, 0), (2, 3), (1, 2), (1, 2), (0, 1), (0, 0), (0, 0))
        >>> t.apply_at([w[:0], s[:0], w[2:3], s[1:2], w[1:2], s[:1]] + [w[:0], s[:0]] * 3, 4, 1)[:, 0].tolist()
        [3.0, 2.0]
    """

    name: ClassVar[str] = "tp_qkv_dequant"
    tp: int
    q: int
    k: int
    v: int
    scale_dtype: str
    block: int = 128

    def sources_ok(self, n: int) -> bool:
        return n == 6 * self.tp

    def out_rows(self, shapes: Shapes) -> int:
        return self.tp * (self.q + self.k + self.v)

    def _segments(self) -> list[tuple[int, int, int, int]]:
        """Per output segment, in output order: (its first output row, rows, first weight row, first scale row)."""
        per, blocks = self.q + self.k + self.v, -(-(self.q + self.k + self.v) // self.block)
        out, at = [], 0
        for off, n in ((0, self.q), (self.q, self.k), (self.q + self.k, self.v)):
            for rank in range(self.tp):
                out.append((at, n, rank * per + off, rank * blocks))
                at += n
        return out

    def _local(self, start: int, stop: int) -> list[tuple[int, int]]:
        """Each segment's rows ``[a, b)`` (from its first) inside output rows ``[start, stop)``; ``(0, 0)``: none."""
        return [(max(start, o) - o, min(stop, o + n) - o) if min(stop, o + n) > max(start, o) else (0, 0)
                for o, n, _, _ in self._segments()]

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        per = self.q + self.k + self.v
        spans: list[tuple[int, int]] = []
        for (a, b), (_, _, w0, s0) in zip(self._local(start, stop), self._segments(), strict=True):
            if b <= a:
                spans += [(0, 0), (0, 0)]
                continue
            r0 = w0 % per  # the segment's first row inside its rank
            spans += [(w0 + a, w0 + b), (s0 + (r0 + a) // self.block, s0 + (r0 + b - 1) // self.block + 1)]
        return tuple(spans)

    output_dtype: ClassVar[str | None] = "F32"


    def apply_at(self, chunks: Sequence[np.ndarray], rows: int, start: int) -> np.ndarray:
        per = self.q + self.k + self.v
        stop = start + sum(len(chunks[2 * j]) for j in range(3 * self.tp))
        parts = []
        for j, ((a, b), (_, _, w0, _)) in enumerate(zip(self._local(start, stop), self._segments(), strict=True)):
            if b <= a:
                continue
            parts.append(fp8_scale_inv_dequant(chunks[2 * j], chunks[2 * j + 1], self.block, self.block,
                                               self.scale_dtype, row0=w0 % per + a))
        return np.ascontiguousarray(np.concatenate(parts)) if len(parts) > 1 else parts[0]


@register
@dataclass(frozen=True)
class QkvConcat(Transform):
    """Sources q, k, v (each a float weight, or with ``block`` an F8_E4M3 weight followed by its float
    ``weight_scale_inv`` of dtype ``scale_dtype``, one per ``block`` rows x columns) -> their float32 rows one after
    the other, ``[Q | K | V]`` (``rows``: each one's row count). A chunk reads the rows of each source it overlaps.

    Example:
        >>> t = QkvConcat((2, 2, 2), (2, 2), "F32", ("F32",) * 3)
        >>> t.source_rows(1, 3, ((2, 2), (1, 1)) * 3)  # output rows 1..2: q's row 1, k's row 0
        ((1, 2), (0, 1), (0, 1), (0, 1), (0, 0), (0, 0))
        >>> w, s = np.full((2, 2), 0x38, np.uint8), np.array([[3.0]], np.float32)  # e4m3 0x38 = 1.0
        >>> t.apply_at([w[1:], s, w[:1], s, w[:0], s[:0]], 6, 1)[:, 0].tolist()
        [3.0, 3.0]
    """

    name: ClassVar[str] = "qkv_concat"
    rows: tuple[int, int, int]
    block: tuple[int, int] | None
    scale_dtype: str | None
    dtypes: tuple[str, str, str]

    @property
    def per(self) -> int:
        """Sources per part: the weight, and its scale when FP8."""
        return 2 if self.block is not None else 1

    def sources_ok(self, n: int) -> bool:
        return n == 3 * self.per

    def out_rows(self, shapes: Shapes) -> int:
        return sum(self.rows)

    def _spans(self, start: int, stop: int) -> list[tuple[int, int]]:
        """Each part's local rows ``[a, b)`` inside output rows ``[start, stop)`` (``(0, 0)``: none)."""
        out, off = [], 0
        for n in self.rows:
            a, b = max(start, off), min(stop, off + n)
            out.append((a - off, b - off) if b > a else (0, 0))
            off += n
        return out

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        spans: list[tuple[int, int]] = []
        for a, b in self._spans(start, stop):
            spans.append((a, b))
            if self.block is not None:
                spans.append((a // self.block[0], -(-b // self.block[0])) if b > a else (0, 0))
        return tuple(spans)

    output_dtype: ClassVar[str | None] = "F32"


    def apply_at(self, chunks: Sequence[np.ndarray], rows: int, start: int) -> np.ndarray:
        stop = start + sum(len(chunks[i * self.per]) for i in range(3))
        parts = []
        for i, (a, b) in enumerate(self._spans(start, stop)):
            if b <= a:
                continue
            w = chunks[i * self.per]
            if self.block is None:
                parts.append(float_values(w, self.dtypes[i]))
                continue
            br, bc = self.block
            parts.append(fp8_scale_inv_dequant(w, chunks[i * self.per + 1], br, bc, self.scale_dtype or "F32", row0=a))
        return np.ascontiguousarray(np.concatenate(parts)) if len(parts) > 1 else parts[0]
