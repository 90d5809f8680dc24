"""The row transforms' contract, the transforms several variants write, and the dtype conversions of contract §6.

Every function here is pure numpy on one array (or one row chunk of an array), so each can be tested alone.

A **row transform** is an object (a :class:`Transform` subclass, registered in :data:`TRANSFORMS`) that a
family puts on a :class:`~dspark_convert.plan.TensorSpec`. It knows everything the streaming writer needs:
which whole number of rows a chunk must hold (:meth:`Transform.row_group`), which rows of each source tensor
a chunk of output rows reads (:meth:`Transform.source_rows`, for transforms of several sources such as a
weight and its block scales), how to rewrite those rows (:meth:`Transform.apply`) and the dtype of what it
returns (:meth:`Transform.out_dtype`). The writer calls these and knows no transform by name.

A transform only one variant writes lives in that variant's ``transforms.py`` (``variants/<variant>/transforms.py``)
and is registered when that module is imported; this module keeps the base class, the registry and the transforms
shared by several variants or lineages.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

from ..errors import ConvertError
from .native import kernels
from .quant import FP8_TILE, fp8_block_dequant, fp8_scaled, nvfp4_bad_scales, nvfp4_repack, tiles

Q8_0_BLOCK = 32
Shapes = tuple[tuple[int, ...], ...]


# ---------------------------------------------------------------------------------------------- row transforms
@dataclass(frozen=True)
class Transform:
    """Base of the row transforms: rewrite rows of ``n_sources`` source tensors into rows of one GGUF tensor.

    The writer streams the output by chunks of output rows ``[start, stop)`` (rows: the first axis, or for a
    stack the first axes flattened; :meth:`out_rows`), ``stop - start`` a multiple of :meth:`row_group`, and
    reads for each chunk the rows of each source that :meth:`source_rows` names. By default the output has
    the rows of the first source and every source is read at the same rows. A subclass is a frozen dataclass
    whose fields are its arguments (so it compares, hashes and prints like data) and overrides :meth:`apply`;
    one of several sources overrides :meth:`source_rows` (a weight and its block scales) and maybe
    :meth:`out_rows` (a stack of experts: one source per expert, output rows = experts x rows).
    """

    name: ClassVar[str] = ""
    n_sources: ClassVar[int] = 1
    #: the safetensors dtype every output has (None: the first source's)
    output_dtype: ClassVar[str | None] = None

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments, in field order."""
        return tuple(getattr(self, f.name) for f in fields(self))

    def describe(self) -> str:
        """``name(arg, ...)``, for messages."""
        return f"{self.name}({', '.join(map(str, self.args))})"

    def sources_ok(self, n: int) -> bool:
        """Whether ``n`` source tensors are what this transform takes (a stack of experts takes a variable number)."""
        return n == self.n_sources

    def out_rows(self, shapes: Shapes) -> int:
        """How many output rows the sources make (default: the first source's rows)."""
        return shapes[0][0] if shapes[0] else 1

    def row_group(self, rows: int) -> int | None:
        """Output rows a chunk must hold a multiple of, for ``rows`` output rows; None when the rows do not
        split evenly: the writer then calls :meth:`apply_whole` once (which normally raises)."""
        return 1

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        """The row range of each source (``shapes`` in source order) that output rows ``[start, stop)`` need;
        an empty range ``(0, 0)`` for a source the chunk does not read.

        The default reads the same rows of every source.
        """
        return tuple((start, stop) for _ in shapes)

    def out_dtype(self, dtypes: tuple[str, ...]) -> str:
        """The safetensors dtype of what :meth:`apply` returns: :attr:`output_dtype` when the subclass fixes one,
        else the first source's (a reordering)."""
        return self.output_dtype or dtypes[0]

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        """The output rows made from one chunk of each source; ``rows`` is the output row count. A subclass that
        overrides only :meth:`apply_at` gets this as its chunk at row 0."""
        if type(self).apply_at is Transform.apply_at:
            raise NotImplementedError
        return self.apply_at(chunks, rows, 0)

    def apply_at(self, chunks: Sequence[np.ndarray], rows: int, start: int) -> np.ndarray:
        """:meth:`apply` for the chunk of output rows starting at row ``start`` (what the writer calls); a
        transform that must know where its chunk lies (one that patches a single row) overrides this."""
        return self.apply(chunks, rows)

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """The whole output from whole sources (used when :meth:`row_group` is None)."""
        return self.apply(arrays, self.out_rows(tuple(a.shape for a in arrays)))


#: every row transform by name (what a dry run prints); :func:`register` adds one
TRANSFORMS: dict[str, type[Transform]] = {}


def register(cls: type[Transform]) -> type[Transform]:
    """Class decorator: add a :class:`Transform` subclass to :data:`TRANSFORMS` under its ``name``."""
    if not cls.name or cls.name in TRANSFORMS:
        raise ValueError(f"transform {cls.__name__} needs a unique name, got {cls.name!r}")
    TRANSFORMS[cls.name] = cls
    return cls


@register
@dataclass(frozen=True)
class Fp8BlockDequant(Transform):
    """Sources (F8_E4M3 weight ``[out, in]``, F8_E8M0 scale ``[tiles(out), tiles(in)]``) -> float32 rows.

    Chunks hold whole 128-row tiles (the last one may be partial), so each reads exactly its rows of scales; the
    writer then quantizes the float32 rows to the tensor's type (Q8_0, or F16 for rows that are not a multiple
    of 32) and refuses NaN / Inf (NaN codes, or products beyond float32).

    Example:
        >>> Fp8BlockDequant().apply([np.full((1, 2), 0x38, np.uint8), np.array([[128]], np.uint8)], 1).tolist()
        [[2.0, 2.0]]
    """

    name: ClassVar[str] = "fp8_block_dequant"
    n_sources: ClassVar[int] = 2

    def row_group(self, rows: int) -> int | None:
        return FP8_TILE

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        return (start, stop), (start // FP8_TILE, tiles(stop))

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return fp8_block_dequant(chunks[0], chunks[1])


@register
@dataclass(frozen=True)
class Fp8TensorDequant(Transform):
    """Source (F8_E4M3 weight ``[out, in]``) -> float32 rows times ``scale``, the weight's per-tensor scale (ModelOpt
    FP8's scalar ``weight_scale``), as upstream's ``weight.float() * scale.float()``; the writer then stores them at
    the tensor's type and refuses NaN / Inf.

    Example:
        >>> Fp8TensorDequant(0.5).apply([np.array([[0x38, 0xC0]], np.uint8)], 1).tolist()
        [[0.5, -1.0]]
    """

    name: ClassVar[str] = "fp8_tensor_dequant"
    scale: float = 1.0

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return fp8_scaled(chunks[0], np.float32(self.scale))


@register
@dataclass(frozen=True)
class Fp8ChannelDequant(Transform):
    """Sources (F8_E4M3 weight ``[out, in]``, float scale ``[out]`` of safetensors dtype ``scale_dtype``) -> float32
    rows, row ``i`` times ``scale[i]`` (ModelOpt FP8 with per-channel scales), as upstream's ``weight.float() *
    scale.float().unsqueeze(-1)``; the writer then stores them at the tensor's type and refuses NaN / Inf.

    Example:
        >>> Fp8ChannelDequant("F32").apply([np.array([[0x38], [0xC0]], np.uint8), np.array([0.5, 3.0], np.float32)],
        ...                                2).tolist()
        [[0.5], [-6.0]]
    """

    name: ClassVar[str] = "fp8_channel_dequant"
    n_sources: ClassVar[int] = 2
    scale_dtype: str = "F32"

    output_dtype: ClassVar[str | None] = "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return fp8_scaled(chunks[0], to_float32(np.asarray(chunks[1]), self.scale_dtype).reshape(-1, 1))


@dataclass(frozen=True)
class PerExpert(Transform):
    """Base of the expert stacks: ``n_sources`` sources for each of ``experts`` experts (their rows alike), and
    output rows the experts' rows one after the other. A chunk holds whole experts, so the writer reads one expert
    (or a few small ones) at a time and the memory does not grow with the number of experts."""

    experts: int

    def sources_ok(self, n: int) -> bool:
        return n == self.n_sources * self.experts

    def out_rows(self, shapes: Shapes) -> int:
        return self.experts * shapes[0][0]

    def row_group(self, rows: int) -> int | None:
        return rows // self.experts if self.experts > 0 and rows % self.experts == 0 else None

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        rows = shapes[0][0]
        first, last = start // rows, -(-stop // rows)
        return tuple((0, rows) if first <= i // self.n_sources < last else (0, 0) for i in range(len(shapes)))


@register
@dataclass(frozen=True)
class Nvfp4Repack(Transform):
    """Sources (ModelOpt NVFP4 weight U8 ``[out, in/2]``, E4M3 ``weight_scale`` ``[out, in/16]``) -> the ggml NVFP4
    blocks of ``[out, in]``, written as they come (lossless; :func:`~dspark_convert.formats.quant.nvfp4_repack`).

    Both sources are read at the same rows; a chunk whose block scales are NaN or negative (which ggml's unsigned
    scales cannot hold) is refused, naming ``scale`` (the scale tensor, for the message).

    Example:
        >>> Nvfp4Repack("w.weight_scale").apply([np.zeros((1, 32), np.uint8), np.full((1, 4), 0x38, np.uint8)], 1).shape
        (1, 36)
    """

    name: ClassVar[str] = "nvfp4_repack"
    n_sources: ClassVar[int] = 2
    scale: str = ""

    output_dtype: ClassVar[str | None] = QT.NVFP4.name  # already encoded: the writer copies the blocks

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        bad = nvfp4_bad_scales(chunks[1])
        if bad is not None:
            raise ConvertError(f"tensor '{self.scale}' {bad}")
        return nvfp4_repack(chunks[0], chunks[1])


# ---------------------------------------------------------------------------------------------- dtypes
def to_float32(raw: np.ndarray, src_dtype: str) -> np.ndarray:
    """Source values -> float32 (BF16 bits widen exactly; F64 rounds to nearest even; ints become floats)."""
    if src_dtype == "BF16":
        # one pass into one new array (astype + shift would allocate and walk the data twice)
        return np.left_shift(raw, 16, dtype=np.uint32).view(np.float32)
    return raw.astype(np.float32)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, gguf-py's rule: quiet NaNs, then round to nearest even (§6)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        u = np.where(nan, (u & np.uint32(0xFFFF0000)) | np.uint32(0x00400000), u)
    return ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@functools.cache
def _bf16_to_f16_table() -> np.ndarray:
    """F16 bits of every BF16 value, made by the very conversion it replaces (float32 -> float16)."""
    with np.errstate(over="ignore"):  # BF16 values beyond the F16 range become inf, as in the conversion
        return to_float32(np.arange(1 << 16, dtype=np.uint16), "BF16").astype(np.float16).view(np.uint16)


_LOOKUP_STEP = 1 << 16  # elements per piece: the working set stays in the L2 cache
_F16_REBIAS = np.uint16(0x4000)  # (bits << 3) + this = F16 bits without sign, for BF16 of exponent 113..142
_BF16_LOW = np.uint16(113 << 8)  # (bits << 1) - this < _BF16_SPAN: exponent in 113..142 (F16 normal, exact)
_BF16_SPAN = np.uint16(30 << 8)
_F16_SIGN = np.uint16(0x8000)


def bf16_to_f16_bits(raw: np.ndarray) -> np.ndarray:
    """F16 bits of BF16 bits ``raw`` (same shape): the bytes of the float32 -> float16 cast of the BF16 values.

    A BF16 value whose exponent is 113..142 (magnitude in [2^-14, 2^16)) is an F16 normal number exactly: its
    F16 bits are the sign, the exponent rebiased (``e - 112``) and the 7 mantissa bits shifted left by 3, four
    integer operations on the 16-bit patterns. The others (zeros, F16 subnormals and underflows, overflows to inf,
    inf, NaN) are looked up in :func:`_bf16_to_f16_table`, made by the cast itself; the exponent range check is a
    shift, a wrapping subtraction and one maximum per piece. Pieces of ``_LOOKUP_STEP`` elements reuse buffers.
    The compiled kernel (:mod:`.native`) applies the same rule in one pass.
    """
    bits = np.ascontiguousarray(raw).view(np.uint16)
    out = np.empty(bits.shape, np.uint16)
    native = kernels()
    if native is not None:  # the same rule in one compiled pass
        native.bf16_to_f16(bits, _bf16_to_f16_table(), out)
        return out
    flat, dst = bits.reshape(-1), out.reshape(-1)
    m = min(_LOOKUP_STEP, flat.size)
    sign_buf, range_buf, bad_buf = np.empty(m, np.uint16), np.empty(m, np.uint16), np.empty(m, np.bool_)
    for i in range(0, flat.size, _LOOKUP_STEP):
        b = flat[i:i + _LOOKUP_STEP]
        k = b.size
        y, s, r = dst[i:i + k], sign_buf[:k], range_buf[:k]
        np.left_shift(b, 3, out=y)  # exponent (mod 64) and mantissa in place; the sign shifted out
        y += _F16_REBIAS
        y |= np.bitwise_and(b, _F16_SIGN, out=s)
        np.left_shift(b, 1, out=r)
        r -= _BF16_LOW  # wraps below 113
        if r.max() >= _BF16_SPAN:
            where = np.flatnonzero(np.greater_equal(r, _BF16_SPAN, out=bad_buf[:k]))
            y[where] = _bf16_to_f16_table()[b[where]]
    return out


def convert_chunk(raw: np.ndarray, src_dtype: str, out: QT) -> np.ndarray:
    """Convert a chunk of source values (rows of the tensor) to the bytes of GGML type ``out``.

    Same-type data is returned unchanged (byte copy), also blocks a transform already encoded (``src_dtype`` is
    the GGML type name, e.g. ``MXFP4``); BF16 -> BF16 passes through float32 upstream, which is the identity for
    every non-NaN value, so it is copied too. Returns an array whose ``tobytes()`` is the file data.
    """
    if src_dtype == out.name:
        return raw
    if out == QT.BF16 and src_dtype == "BF16":
        return raw
    if out == QT.F16 and src_dtype == "F16":
        return raw
    if out == QT.F32 and src_dtype == "F32":
        return raw
    if out == QT.F16 and src_dtype == "BF16":  # integer operations on the bits, ~2.5x faster than the cast
        return bf16_to_f16_bits(raw)
    if out == QT.Q8_0 and src_dtype == "BF16":  # widened piece by piece inside the quantizer
        return quantize_q8_0(raw, bf16_bits=True)
    if src_dtype in ("F16", "F32"):
        x = raw if out != QT.Q8_0 else raw.astype(np.float32)
    else:
        x = to_float32(raw, src_dtype)
    if out == QT.F32:
        return x.astype(np.float32, copy=False)
    if out == QT.F16:
        return x.astype(np.float16)
    if out == QT.BF16:
        return float32_to_bf16_bits(x.astype(np.float32, copy=False))
    if out == QT.Q8_0:
        return quantize_q8_0(np.ascontiguousarray(x, dtype=np.float32))
    raise ConvertError(f"unsupported output type {out.name}")


_Q8_STEP = 1 << 16           # elements per pass: the working set (3 arrays of 256 KiB) stays in the L2 cache
_HALF_DOWN = np.int32(0x3EFFFFFF)  # bits of 0.49999997, the largest float32 below 0.5
_SIGN = np.int32(-0x80000000)
_INF = np.float32(np.inf)


def quantize_q8_0(x: np.ndarray, *, bf16_bits: bool = False) -> np.ndarray:
    """Q8_0 blocks of float32 ``x``: the bytes ``gguf.quants.quantize(x, Q8_0)`` returns.

    The compiled kernel (:mod:`.native`) computes them in one pass; the numpy form below, about 3x faster than
    gguf-py, runs where it is not built, with ``DSPARK_CONVERT_KERNELS=0``, and for chunks with Inf/NaN blocks.

    With ``bf16_bits``, ``x`` holds BF16 bit patterns (uint16) and is widened to float32 piece by piece, which
    spares a float32 copy of the whole chunk. Same formula as gguf-py (and ggml-quants.c): ``d = max|x| / 127``
    per block of 32, ``q = round(x * (1/d))`` with halves away from zero, ``d`` stored as F16. Only the way the
    work is done differs: the data is walked in cache-sized pieces with reused buffers instead of whole-tensor
    temporaries; ``max|x|`` is taken on the bit patterns (monotone for non-negative floats), as a tree of
    pairwise maxima over the whole piece (:func:`_block_max`), and ``d`` is cast to F16 in place; round-half-away
    is ``trunc(y + copysign(c, y))`` with ``c = 0.49999997``, which equals gguf-py's ``np_roundf`` for every
    float32 of magnitude below 2^22 (checked exhaustively for |y| <= 128; here |y| <= 127.0001). Chunks
    holding NaN/Inf, or a block so tiny that 1/d overflows, go to gguf-py itself, piece by piece.

    Example:
        >>> quantize_q8_0(np.full(32, 2.0, np.float32))[:3].tolist()  # d = 2/127 as F16, then q = 127
        [8, 36, 127]
    """
    x = np.ascontiguousarray(x, dtype=np.uint16 if bf16_bits else np.float32)
    if x.ndim == 0 or x.shape[-1] % Q8_0_BLOCK:
        return _gguf_q8_0(x, bf16_bits)  # raises gguf-py's own error
    blocks = x.reshape(-1, Q8_0_BLOCK)
    n = blocks.shape[0]
    out = np.empty((n, 2 + Q8_0_BLOCK), np.uint8)
    native = kernels()
    if native is not None and native.q8_0(blocks, out, bf16_bits) == 0:  # else Inf/NaN blocks: the numpy form
        return out.reshape(*x.shape[:-1], x.shape[-1] // Q8_0_BLOCK * (2 + Q8_0_BLOCK))
    step = _Q8_STEP // Q8_0_BLOCK
    m = min(step, n)
    work, sign, wide = (np.empty((m, Q8_0_BLOCK), np.int32) for _ in range(3))
    amax = np.empty(m, np.int32)
    scale, inverse = np.empty(m, np.float32), np.empty(m, np.float32)
    halves = [np.empty(m * w, np.int32) for w in (16, 8, 4, 2)]  # the block maximum's tree, level by level
    for i in range(0, n, step):
        xb = blocks[i:i + step]
        k = xb.shape[0]
        a, s, mx, d, inv = work[:k], sign[:k], amax[:k], scale[:k], inverse[:k]
        if bf16_bits:
            xb = np.left_shift(xb, 16, out=wide[:k].view(np.uint32), dtype=np.uint32).view(np.float32)
        np.bitwise_and(xb.view(np.int32), 0x7FFFFFFF, out=a)  # |x| as bits
        _block_max(a.reshape(-1), [h[:k * h.size // m] for h in halves], mx)
        np.divide(mx.view(np.float32), np.float32(127), out=d)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            np.divide(np.float32(1), d, out=inv)
        o = out[i:i + k]
        # Inf/NaN in these blocks (max|x| bits >= inf's), or d below 2^-128 so that 1/d overflows: inf/NaN
        # arithmetic whose int8 cast is platform-defined; gguf-py quantizes these blocks itself (blocks are
        # independent, so a piece gives the same bytes as in a whole tensor). A zero block's 1/d is 0 there, as
        # in gguf-py; ``not max < inf`` is also true when the maximum is NaN.
        if not inv.max() < _INF or mx.max() >= 0x7F800000:
            inv[d == 0] = 0
            if not inv.max() < _INF or mx.max() >= 0x7F800000:
                o[:] = _gguf_q8_0(blocks[i:i + k], bf16_bits).reshape(k, 2 + Q8_0_BLOCK)
                continue
        y = a.view(np.float32)
        np.multiply(xb, inv[:, None], out=y)
        np.bitwise_or(np.bitwise_and(y.view(np.int32), _SIGN, out=s), _HALF_DOWN, out=s)
        y += s.view(np.float32)
        np.copyto(o[:, :2].view(np.float16)[:, 0], d, casting="same_kind")  # d as F16, cast in place
        np.copyto(o[:, 2:].view(np.int8), y, casting="unsafe")  # float -> int8 truncates toward zero
    return out.reshape(*x.shape[:-1], x.shape[-1] // Q8_0_BLOCK * (2 + Q8_0_BLOCK))


def _block_max(flat: np.ndarray, levels: list[np.ndarray], out: np.ndarray) -> None:
    """``out[j] = max(flat[32 j : 32 j + 32])``: pairwise maxima of neighbours, five times (32 -> 16 -> ... -> 1).

    Each level is one long strided loop over the whole piece; ``np.max(axis=1)`` on rows of 32 pays numpy's
    per-row set-up 2,048 times per piece and is 2-3x slower.
    """
    src = flat
    for dst in [*levels, out]:
        np.maximum(src[0::2], src[1::2], out=dst)
        src = dst


def _gguf_q8_0(x: np.ndarray, bf16_bits: bool) -> np.ndarray:
    return quants.quantize(to_float32(x, "BF16") if bf16_bits else x, QT.Q8_0)
