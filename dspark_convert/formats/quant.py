"""Block-scaled low-precision source formats, decoded or repacked exactly, in numpy.

Three storage formats of block-scaled FP8 / FP4 checkpoints (the family modules that read them cite their specs):

- **F8_E4M3** (``float8_e4m3fn``): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; ``0x7F`` / ``0xFF``
  are NaN. Dense linears store one byte per weight.
- **F8_E8M0** (``float8_e8m0fnu``): an unsigned power of two, byte ``b`` -> ``2^(b - 127)``; ``b = 0`` is
  ``2^-127`` (a float32 subnormal) and ``b = 255`` is NaN. Dense linears carry one per 128x128 tile
  (partial tiles at the edges included); routed experts one per 32 consecutive input values.
- **FP4 e2m1**: 1 sign, 2 exponent, 1 mantissa bit (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), two
  codes per byte, element ``2i`` in the low nibble and ``2i + 1`` in the high one.

Every decode is a table lookup (256 entries) plus, for the block-scaled forms, one float32 multiply by a
power of two, which is exact (a 4-bit significand times ``2^k`` stays representable down to ``2^-136``) except
where it overflows to infinity, exactly as upstream's ``weight.float() * scale.float()`` in torch.

On the GGUF side, dequantized FP8 tensors become Q8_0 (the writer quantizes them like any float32 rows, bit-identical
to gguf-py) or F16 when a row is not a multiple of 32 (the rule of the variant that reads them); FP4 experts are
repacked losslessly into ggml's MXFP4 blocks (:func:`mxfp4_repack`). Every function works on a row chunk, so a
caller can stream a tensor of any size; the row transforms that put them on a plan are ``Fp8BlockDequant`` (in
:mod:`.transforms`) and ``Mxfp4ExpertStack`` (in the ``transforms.py`` of the one variant that writes it).
"""

from __future__ import annotations

import numpy as np

from .native import kernels

FP8_TILE = 128  #: rows and columns per F8_E8M0 scale of a dense linear (``weight_block_size`` [128, 128])
MXFP4_BLOCK = 32  #: values per E8M0 scale of a routed expert (and per ggml MXFP4 block)
MXFP4_BLOCK_BYTES = 17  #: one ggml MXFP4 block: 1 scale byte + 16 bytes of packed codes
E4M3_NAN = 0x7F  #: ``code & 0x7F == 0x7F`` is NaN in F8_E4M3 (no infinities)
E8M0_NAN = 0xFF


def _e4m3_table() -> np.ndarray:
    """float32 value of every F8_E4M3 byte, from the format definition."""
    code = np.arange(256, dtype=np.int64)
    sign = np.where(code & 0x80, -1.0, 1.0)
    exp, man = (code >> 3) & 0xF, code & 0x7
    mag = np.where(exp == 0, man / 8.0 * 2.0**-6, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    vals = (sign * mag).astype(np.float32)
    vals[(code & 0x7F) == E4M3_NAN] = np.nan
    return vals


def _e8m0_table() -> np.ndarray:
    """float32 value of every F8_E8M0 byte: ``2^(b - 127)``; 0 -> 2^-127 (subnormal); 255 -> NaN."""
    vals = np.full(256, np.nan, np.float32)
    vals[:E8M0_NAN] = np.exp2(np.arange(E8M0_NAN, dtype=np.float64) - 127.0)
    return vals


#: F8_E4M3 byte -> float32 (exact)
E4M3_VALUES: np.ndarray = _e4m3_table()
#: F8_E8M0 byte -> float32 (exact)
E8M0_VALUES: np.ndarray = _e8m0_table()


def tiles(n: int, tile: int = FP8_TILE) -> int:
    """Number of (possibly partial) tiles covering ``n``.

    Example:
        >>> tiles(256), tiles(257), tiles(96)
        (2, 3, 1)
    """
    return -(-n // tile)


def fp8_scale_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The F8_E8M0 scale shape a dense F8_E4M3 weight ``[out, in]`` must come with: one per 128x128 tile.

    Example:
        >>> fp8_scale_shape((4096, 12288)), fp8_scale_shape((96, 256))
        ((32, 96), (1, 2))
    """
    out_f, in_f = shape
    return tiles(out_f), tiles(in_f)


def fp4_shapes(rows: int, cols: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(packed weight shape, scale shape) of an FP4 expert matrix with ``cols`` input values per row.

    Example:
        >>> fp4_shapes(2048, 4096)
        ((2048, 2048), (2048, 128))
    """
    return (rows, cols // 2), (rows, cols // MXFP4_BLOCK)


# ---------------------------------------------------------------------------------------------- decoding
def e8m0_to_float32(codes: np.ndarray) -> np.ndarray:
    """F8_E8M0 bytes -> float32 powers of two (255 gives NaN)."""
    return np.take(E8M0_VALUES, np.asarray(codes).view(np.uint8))


def fp8_block_dequant(weight: np.ndarray, scale: np.ndarray, *, row0: int = 0, tile: int = FP8_TILE) -> np.ndarray:
    """Rows ``[row0, row0 + len(weight))`` of a block-scaled F8_E4M3 matrix, dequantized to float32.

    ``weight`` holds those rows' bytes ``[r, in]``; ``scale`` the F8_E8M0 scale rows that cover them, i.e.
    ``full_scale[row0 // tile : tiles(row0 + r)]``; ``row0`` is a multiple of ``tile``. Value ``(i, j)`` is
    ``e4m3(w[i, j]) * e8m0(scale[i // tile, j // tile])``, as upstream's
    ``weight.float() * scale.repeat_interleave(128, 0)[:out].repeat_interleave(128, 1)[:, :in]``.

    Example:
        >>> w = np.full((2, 3), 0x38, np.uint8)                     # e4m3 0x38 = 1.0
        >>> fp8_block_dequant(w, np.array([[126]], np.uint8)).tolist()  # scale 2^-1
        [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    """
    if row0 % tile:
        raise ValueError(f"row chunk starts at row {row0}, not a multiple of the {tile}-row scale tile")
    w = np.asarray(weight).view(np.uint8)
    rows, cols = w.shape
    s = e8m0_to_float32(scale)
    if s.shape != (tiles(rows, tile), tiles(cols, tile)):
        raise ValueError(f"scale rows {s.shape} do not cover a {rows}x{cols} chunk in {tile}x{tile} tiles")
    out = np.take(E4M3_VALUES, w)
    full_cols = cols // tile * tile
    # a scale up to 2^127 times 448 overflows float32 to inf: the caller's finiteness check names the tensor in
    # one line, so numpy's RuntimeWarning (two stderr lines) is not printed
    with np.errstate(over="ignore", invalid="ignore"):
        for g in range(s.shape[0]):
            block = out[g * tile:(g + 1) * tile]
            if full_cols:  # whole tiles: one broadcast multiply over [rows, n_tiles, tile]
                view = block[:, :full_cols].reshape(block.shape[0], full_cols // tile, tile)
                view *= s[g, :full_cols // tile, None]
            if full_cols < cols:  # the partial last tile
                block[:, full_cols:] *= s[g, -1]
    return out


def fp8_scaled(codes: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """F8_E4M3 ``codes`` ``[rows, cols]`` -> float32 values times ``scale``: one float (per tensor) or a ``[rows, 1]``
    column (per output row), one float32 product each, as upstream's ``weight.float() * scale.float()``. Overflow is
    left as Inf (the writer's finiteness check names the tensor).

    Example:
        >>> fp8_scaled(np.array([[0x38, 0xC0]], np.uint8), np.float32(0.5)).tolist()
        [[0.5, -1.0]]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return np.take(E4M3_VALUES, np.asarray(codes).view(np.uint8)) * np.asarray(scale, np.float32)


def float_values(raw: np.ndarray, dtype: str) -> np.ndarray:
    """A float tensor's raw values as a checkpoint reader returns them (BF16 as uint16 bits) -> float32 (exact)."""
    a = np.asarray(raw)
    if dtype == "BF16":
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def fp8_scale_inv_dequant(weight: np.ndarray, scale: np.ndarray, rows: int, cols: int, scale_dtype: str, *,
                          row0: int = 0) -> np.ndarray:
    """Rows of an F8_E4M3 matrix with float block scales (``weight_scale_inv``, one per ``rows x cols`` block, dtype
    ``scale_dtype``), dequantized to float32: ``e4m3(w[i, j]) * s[i // rows, j // cols]``, one float32 product as
    upstream's ``weight.float() * scale.repeat_interleave(...)``. ``weight`` holds the matrix's rows from ``row0``
    on; ``scale`` the scale rows from the block holding row ``row0`` on.

    Example:
        >>> fp8_scale_inv_dequant(np.full((1, 3), 0x38, np.uint8), np.array([[0.5, 4.0]], np.float32), 2, 2,
        ...                       "F32").tolist()
        [[0.5, 0.5, 4.0]]
        >>> w, s = np.full((2, 1), 0x38, np.uint8), np.array([[2.0], [3.0]], np.float32)  # rows 1..2, blocks of 2
        >>> fp8_scale_inv_dequant(w, s, 2, 2, "F32", row0=1)[:, 0].tolist()
        [2.0, 3.0]
    """
    w = np.asarray(weight).view(np.uint8)
    r, c = w.shape
    s = float_values(scale, scale_dtype)
    first = row0 % rows
    if s.ndim != 2 or s.shape[0] < -(-(first + r) // rows) or s.shape[1] < -(-c // cols):
        raise ValueError(f"scale rows {s.shape} do not cover a {r}x{c} chunk from row {row0} in {rows}x{cols} blocks")
    per_row = np.repeat(s[: -(-(first + r) // rows)], rows, axis=0)[first : first + r]  # each row's block scales
    values = np.take(E4M3_VALUES, w)
    with np.errstate(over="ignore", invalid="ignore"):  # inf / NaN are named by the caller's finiteness check
        if c % cols == 0:  # whole blocks: each scale broadcast over its ``cols`` values, no r x c scale array
            return (values.reshape(r, c // cols, cols) * per_row[:, : c // cols, None]).reshape(r, c)
        return values * np.repeat(per_row, cols, axis=1)[:, :c]


# ---------------------------------------------------------------------------------------------- MXFP4
def mxfp4_repack(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """FP4 expert rows (``packed`` ``[r, c/2]`` + E8M0 ``scale`` ``[r, c/32]``) -> ggml MXFP4 blocks ``[r, c/32*17]``.

    Per group of 32 values: the scale byte as is, then 16 bytes where byte ``j`` holds value ``j`` in its low
    nibble and value ``j + 16`` in its high nibble. The 4-bit codes are not changed (ggml's MXFP4 table is the
    e2m1 table doubled and its scale ``2^(e - 128)``, which gives the same values), so the repack is lossless.
    With the source bytes ``a = p[0:8]`` and ``b = p[8:16]`` of a group (value ``2m`` in ``p[m] & 15``, ``2m + 1`` in
    ``p[m] >> 4``), output byte ``2m`` is ``(a[m] & 15) | (b[m] << 4)`` and byte ``2m + 1`` is
    ``(a[m] >> 4) | (b[m] & 0xF0)``: computed eight bytes at a time on 64-bit words (nibble masks and shifts
    never cross a byte), then interleaved through little-endian 16-bit words.

    Example:
        >>> p = np.arange(16, dtype=np.uint8) * 17    # values 0,0,1,1,...,15,15
        >>> mxfp4_repack(p[None], np.array([[127]], np.uint8))[0, :5].tolist()
        [127, 128, 128, 145, 145]
    """
    p = np.ascontiguousarray(np.asarray(packed).view(np.uint8))
    rows, half = p.shape
    if half % (MXFP4_BLOCK // 2):
        raise ValueError(f"{half * 2} values per row is not a multiple of {MXFP4_BLOCK}")
    nb = half // (MXFP4_BLOCK // 2)
    sc = np.asarray(scale).view(np.uint8)
    if sc.shape != (rows, nb):
        raise ValueError(f"scale shape {sc.shape} does not match {(rows, nb)} for {rows}x{half * 2} values")
    g = p.reshape(rows, nb, 2, 8).view(np.uint64)[..., 0]  # [rows, nb, 2]: a and b as 64-bit words
    a, b = g[:, :, 0], g[:, :, 1]
    even = (a & _LOW) | ((b & _LOW) << _FOUR)              # bytes 2m: a_m low | b_m low << 4
    odd = ((a >> _FOUR) & _LOW) | (b & _HIGH)              # bytes 2m+1: a_m high >> 4 | b_m high
    words = even.view(np.uint8).reshape(rows, nb, 8).astype("<u2")
    words |= odd.view(np.uint8).reshape(rows, nb, 8).astype("<u2") << np.uint16(8)
    out = np.empty((rows, nb, MXFP4_BLOCK_BYTES), np.uint8)
    out[:, :, 0] = sc
    out[:, :, 1:] = words.view(np.uint8).reshape(rows, nb, 16)
    return out.reshape(rows, nb * MXFP4_BLOCK_BYTES)


_LOW, _HIGH, _FOUR = np.uint64(0x0F0F0F0F0F0F0F0F), np.uint64(0xF0F0F0F0F0F0F0F0), np.uint64(4)


# ---------------------------------------------------------------------------------------------- NVFP4
NVFP4_SUB = 16  #: values per E4M3 block scale (ModelOpt ``weight_scale``) and per ggml NVFP4 sub-block
NVFP4_BLOCK = 64  #: values per ggml NVFP4 super-block (4 sub-blocks)
NVFP4_BLOCK_BYTES = 36  #: one ggml NVFP4 super-block: 4 UE4M3 scale bytes + 32 bytes of packed codes


def nvfp4_repack(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """ModelOpt NVFP4 rows (``packed`` U8 ``[r, c/2]``, value ``2m`` of a row in the low nibble of byte ``m``; E4M3
    ``scale`` ``[r, c/16]``) -> ggml NVFP4 super-blocks ``[r, c/64*36]``, losslessly.

    Per 64 values: the 4 scale bytes of its sub-blocks (the E4M3 bits kept as UE4M3: ggml reads them unsigned, so
    a caller refuses a negative scale first, :func:`nvfp4_bad_scales`), then 4 x 8 bytes where byte ``j`` of a
    sub-block holds its value ``j`` in the low nibble and value ``j + 8`` in the high one. The 4-bit e2m1 codes are
    not changed (ggml's table is the e2m1 table doubled and its scale decode halves), so the values are the same.
    The codes of a sub-block are one 64-bit word, rearranged by three delta swaps (each six whole-array integer
    operations on cache-sized pieces) and written into the blocks as 32-bit words; the scales go in as one 32-bit
    word per super-block. The compiled kernel (:mod:`.native`) does the same in one pass.

    Example:
        >>> p = np.arange(32, dtype=np.uint8) % 16 * 17        # values 0,0,1,1,...: value i is code (i // 2) % 16
        >>> b = nvfp4_repack(p[None], np.full((1, 4), 0x38, np.uint8))
        >>> b.shape, b[0, :4].tolist(), b[0, 4:8].tolist()
        ((1, 36), [56, 56, 56, 56], [64, 64, 81, 81])
    """
    p = np.ascontiguousarray(np.asarray(packed).view(np.uint8))
    sc = np.ascontiguousarray(np.asarray(scale).view(np.uint8))
    rows, half = p.shape
    if (2 * half) % NVFP4_BLOCK:
        raise ValueError(f"{half * 2} values per row is not a multiple of {NVFP4_BLOCK}")
    n_sub = 2 * half // NVFP4_SUB
    if sc.shape != (rows, n_sub):
        raise ValueError(f"scale shape {sc.shape} does not match {(rows, n_sub)} for {rows}x{half * 2} values")
    nb = rows * n_sub // 4
    # a super-block is 9 little-endian 32-bit words: the 4 scale bytes, then the 8 words of packed codes
    out = np.empty((nb, NVFP4_BLOCK_BYTES // 4), np.uint32)
    native = kernels()
    if native is not None:  # the same swaps, compiled, in one pass
        native.nvfp4_repack(p, sc, out)
        return out.view(np.uint8).reshape(rows, n_sub // 4 * NVFP4_BLOCK_BYTES)
    np.bitwise_and(sc.reshape(-1).view(np.uint32), _SCALE_BITS, out=out[:, 0])
    qs = out[:, 1:]
    words = p.reshape(-1).view(np.uint64)  # one 64-bit word per sub-block of 16 values
    n = words.size
    m = min(_NVFP4_STEP, n)
    x, t, u = (np.empty(m, np.uint64) for _ in range(3))
    for i in range(0, n, _NVFP4_STEP):
        src = words[i:i + _NVFP4_STEP]
        k = src.size
        xk, tk, uk = x[:k], t[:k], u[:k]
        for shift, mask in _NVFP4_SWAPS:  # delta swaps: x ^= t ^ (t << shift), t = ((x >> shift) ^ x) & mask
            np.right_shift(src, shift, out=tk)
            np.bitwise_xor(tk, src, out=tk)
            np.bitwise_and(tk, mask, out=tk)
            np.left_shift(tk, shift, out=uk)
            np.bitwise_xor(uk, tk, out=uk)
            np.bitwise_xor(src, uk, out=xk)
            src = xk
        qs[i // 4:(i + k) // 4] = xk.view(np.uint32).reshape(-1, 8)
    return out.view(np.uint8).reshape(rows, n_sub // 4 * NVFP4_BLOCK_BYTES)


_SCALE_BITS = np.uint32(0x7F7F7F7F)  # UE4M3: the E4M3 bits without the sign, four scales at a time
_NVFP4_STEP = 1 << 14  # sub-blocks per pass: three 128 KiB work arrays, in the L2 cache
# On a sub-block's 8 bytes [a0 a1 a2 a3 b0 b1 b2 b3] (a = values 0..7, b = values 8..15, two per byte) as one
# little-endian word: swap bytes 2-3 with 4-5, then 1 with 2 and 5 with 6 (-> [a0 b0 a1 b1 a2 b2 a3 b3]), then in
# each 16-bit pair (a_k | b_k << 8) swap the middle nibbles: low byte (a_k & 15) | (b_k & 15) << 4 (values 2k and
# 2k + 8), high byte a_k >> 4 | (b_k & 0xF0) (values 2k + 1 and 2k + 9)
_NVFP4_SWAPS = ((np.uint64(16), np.uint64(0x00000000FFFF0000)), (np.uint64(8), np.uint64(0x0000FF000000FF00)),
                (np.uint64(4), np.uint64(0x00F000F000F000F0)))


def nvfp4_bad_scales(scale: np.ndarray) -> str | None:
    """Why E4M3 block scales cannot be repacked losslessly (NaN codes, negative scales), or None.

    One reduction when the scales are good: below ``0x80`` (no sign bit) the only NaN code is ``0x7F``, which is
    then the maximum.
    """
    s = np.asarray(scale).view(np.uint8)
    if s.size == 0:
        return None
    top = int(s.max())
    if top < 0x80:
        return "holds NaN E4M3 block scales" if top == E4M3_NAN else None
    if bool(np.any(np.bitwise_and(s, 0x7F) == E4M3_NAN)):
        return "holds NaN E4M3 block scales"
    return "holds negative E4M3 block scales (ggml NVFP4 scales are unsigned)"
