"""The DeepSeek-V4 numeric kernels (dspark_convert.formats.quant) against the independent oracle (tests/dsv4_oracle.py),
gguf-py's own MXFP4 / Q8_0 code and, where installed, torch's float8 dtypes: bit for bit, chunked and whole."""

from __future__ import annotations

import numpy as np
import pytest
from dsv4_oracle import convert_one, dequant_fp4, dequant_fp8, e4m3, e8m0, mxfp4_blocks
from gguf import GGMLQuantizationType as QT
from gguf import quants

from dspark_convert.formats import quant as Q
from dspark_convert.formats.transforms import Fp8BlockDequant, convert_chunk
from dspark_convert.variants.dsv4.blockscaled import fp8_output_type

CODES = np.arange(256, dtype=np.uint8)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """bit-identical, NaNs included (any NaN payload matches any NaN)."""
    na, nb = np.isnan(a), np.isnan(b)
    return a.shape == b.shape and bool(np.array_equal(na, nb)) and bool(np.array_equal(bits(a)[~na], bits(b)[~nb]))


def fp8_inputs(rng: np.random.Generator, out_f: int, in_f: int, lo: int = 119, hi: int = 127,
               nan: bool = False) -> tuple[np.ndarray, np.ndarray]:
    w = rng.integers(0, 256, size=(out_f, in_f), dtype=np.uint8)
    if not nan:
        w[(w & 0x7F) == 0x7F] = 0x7E
    s = rng.integers(lo, hi + 1, size=(-(-out_f // 128), -(-in_f // 128)), dtype=np.uint8)
    return w, s


# ---------------------------------------------------------------------------------------------- tables
def test_decode_tables_match_the_oracle_for_every_byte() -> None:
    assert same_floats(Q.E4M3_VALUES[CODES], e4m3(CODES))
    assert same_floats(Q.e8m0_to_float32(CODES), e8m0(CODES))
    assert Q.E4M3_VALUES[0x7E] == 448.0 and Q.E4M3_VALUES[0x01] == 2.0**-9 and Q.E4M3_VALUES[0x38] == 1.0
    assert np.signbit(Q.E4M3_VALUES[0x80]) and Q.E4M3_VALUES[0x80] == 0.0
    assert Q.E8M0_VALUES[0] == np.float32(2.0**-127) and Q.E8M0_VALUES[127] == 1.0 and Q.E8M0_VALUES[254] == 2.0**127
    assert np.isnan(Q.E4M3_VALUES[[0x7F, 0xFF]]).all() and np.isnan(Q.E8M0_VALUES[255])
    assert np.isfinite(np.delete(Q.E4M3_VALUES, [0x7F, 0xFF])).all()


def test_decode_tables_match_torch_float8() -> None:
    torch = pytest.importorskip("torch", reason="torch (the test extra) cross-checks the float8 tables")
    t = torch.from_numpy(CODES.copy())
    assert same_floats(Q.E4M3_VALUES, t.view(torch.float8_e4m3fn).float().numpy())
    assert same_floats(Q.E8M0_VALUES, t.view(torch.float8_e8m0fnu).float().numpy())


# ---------------------------------------------------------------------------------------------- FP8
SHAPES = [(96, 256), (256, 96), (192, 192), (384, 192), (1, 7), (129, 130), (300, 200), (128, 33), (513, 1000)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fp8_dequant_equals_upstream_formula(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    w, s = fp8_inputs(rng, *shape, lo=0, hi=254)  # the whole scale range: subnormal 2^-127 up to 2^127 (inf)
    with np.errstate(over="ignore"):
        want = dequant_fp8(w, s)
        assert same_floats(Q.fp8_block_dequant(w, s), want)
        # 128-row chunks (the streaming unit) give the same rows
        chunks = [Q.fp8_block_dequant(w[r:r + 128], s[r // 128:r // 128 + 1], row0=r) for r in range(0, shape[0], 128)]
    assert same_floats(np.concatenate(chunks), want)


def test_fp8_dequant_nan_codes_and_overflow() -> None:
    w = np.array([[0x7F, 0xFF, 0x7E, 0xFE, 0x00, 0x80]], np.uint8)
    got = Q.fp8_block_dequant(w, np.array([[127]], np.uint8))
    assert np.isnan(got[0, :2]).all() and got[0, 2:4].tolist() == [448.0, -448.0] and got[0, 4] == 0.0
    with np.errstate(over="ignore"):
        big = Q.fp8_block_dequant(w[:, 2:4], np.array([[254]], np.uint8))  # 448 * 2^127 overflows, as in torch
    assert np.isinf(big).all()


def test_fp8_dequant_refuses_misaligned_chunks_and_wrong_scales() -> None:
    w, s = fp8_inputs(np.random.default_rng(0), 256, 64)
    with pytest.raises(ValueError, match="not a multiple of the 128-row scale tile"):
        Q.fp8_block_dequant(w[64:], s, row0=64)
    with pytest.raises(ValueError, match="do not cover"):
        Q.fp8_block_dequant(w, s[:1])


def fp8_through_the_writer(w: np.ndarray, s: np.ndarray, step: int) -> bytes:
    """The GGUF bytes the writer makes of an FP8 weight: Fp8BlockDequant on chunks of ``step`` rows (the rows of
    each source its ``source_rows`` names), then ``convert_chunk`` to the type ``fp8_output_type`` picks."""
    t, kind = Fp8BlockDequant(), fp8_output_type(w.shape[1])
    out = []
    for start in range(0, w.shape[0], step):
        stop = min(start + step, w.shape[0])
        (a, b), (c, d) = t.source_rows(start, stop, (w.shape, s.shape))
        x = t.apply([w[a:b], s[c:d]], stop - start)
        with np.errstate(over="ignore"):  # beyond the F16 range: inf, as upstream's astype(float16)
            out.append(convert_chunk(x, t.out_dtype(("F8_E4M3", "F8_E8M0")), kind).tobytes())
    return b"".join(out)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("scales", [(119, 127), (0, 12), (110, 140)], ids=["sample", "tiny", "wide"])
def test_fp8_through_the_writer_equals_gguf_py_q8_0_or_f16(shape: tuple[int, int], scales: tuple[int, int]) -> None:
    """Q8_0 bytes of the dequantized weight as gguf-py's reference quantizer makes them (F16 for odd rows);
    tiny scales give subnormal block maxima (gguf-py's own path); whole and in chunks of 128 rows alike."""
    rng = np.random.default_rng(shape[0] * 7 + scales[0])
    w, s = fp8_inputs(rng, *shape, *scales)
    kind, want = convert_one("F8_E4M3", w, s)
    assert fp8_output_type(shape[1]).name == kind
    assert fp8_through_the_writer(w, s, shape[0]) == want
    assert fp8_through_the_writer(w, s, 128) == want


# ---------------------------------------------------------------------------------------------- MXFP4
@pytest.mark.parametrize("shape", [(160, 256), (256, 160), (1, 32), (3, 64), (64, 4096), (37, 96)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_mxfp4_repack_byte_layout(shape: tuple[int, int]) -> None:
    rows, cols = shape
    rng = np.random.default_rng(rows + cols)
    packed = rng.integers(0, 256, size=(rows, cols // 2), dtype=np.uint8)
    scale = rng.integers(0, 255, size=(rows, cols // 32), dtype=np.uint8)
    got = Q.mxfp4_repack(packed.view(np.int8), scale)  # stored as I8 in the checkpoint
    assert got.dtype == np.uint8 and got.shape == (rows, cols // 32 * 17)
    assert np.array_equal(got, mxfp4_blocks(packed, scale))
    # row chunks are independent
    assert np.array_equal(np.concatenate([Q.mxfp4_repack(packed[r:r + 5], scale[r:r + 5]) for r in range(0, rows, 5)]), got)
    # lossless: gguf-py's MXFP4 decoder gives the checkpoint's FP4 values (ggml's zero code 8 reads +0)
    with np.errstate(over="ignore"):
        want = dequant_fp4(packed, scale)
        assert np.array_equal(quants.dequantize(got, QT.MXFP4).reshape(rows, cols), want)


def test_mxfp4_repack_known_block() -> None:
    """values v_k = k % 16 for k = 0..31: byte j = v_j | v_{j+16} << 4 = j * 17"""
    vals = np.arange(32) % 16
    packed = (vals[0::2] | (vals[1::2] << 4)).astype(np.uint8)[None]
    out = Q.mxfp4_repack(packed, np.array([[120]], np.uint8))
    assert out.tolist() == [[120] + [j * 17 for j in range(16)]]


def test_mxfp4_repack_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="not a multiple of 32"):
        Q.mxfp4_repack(np.zeros((2, 8), np.uint8), np.zeros((2, 1), np.uint8))
    with pytest.raises(ValueError, match="scale shape"):
        Q.mxfp4_repack(np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8))
