"""The fast paths of the converter give exactly the bytes of the slow paths they replace.

- KV block: ``gguffile.header.pack_kv_value`` / ``write_kv_data`` against gguf-py's ``GGUFWriter`` (every value type,
  bounds, unicode, floats that round, values gguf-py refuses).
- Q8_0: ``transforms.quantize_q8_0`` against ``gguf.quants.quantize`` (random data, zero and -0 blocks, exact
  ties, subnormals, huge values, NaN/Inf, BF16 input).
- BF16 -> F16 table, the bit-level NaN/Inf check, chunked row transforms and ``Checkpoint.read_rows``.

The Q8_0, BF16 -> F16 and NVFP4 repack tests run twice: with the compiled kernels (``formats/_native.c``, which the installed
package must carry) and with their numpy forms (``DSPARK_CONVERT_KERNELS=0``).
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf import GGUFWriter, quants
from gguf.gguf_writer import WriterState

from dspark_convert.errors import ConvertError
from dspark_convert.formats import native
from dspark_convert.formats.quant import nvfp4_repack
from dspark_convert.formats.transforms import (
    TRANSFORMS,
    convert_chunk,
    quantize_q8_0,
    to_float32,
)
from dspark_convert.gguffile import header
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.hf2gguf import writer
from dspark_convert.plan import TensorSpec
from dspark_convert.variants.dflash.transforms import DeinterleaveRope, deinterleave_rope
from dspark_convert.variants.eagle3.transforms import Eagle3Permute, eagle3_permute

# gguf-py warns about its own inf/NaN arithmetic on the extreme blocks below
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(params=["compiled", "numpy"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each Q8_0 / BF16 -> F16 / NVFP4 repack test with the compiled kernels, then with their numpy forms."""
    if request.param == "compiled":
        assert native.built(), "the compiled kernels (dspark_convert/formats/_native.c) are not built: pip install -e ."
        monkeypatch.delenv(native.ENV, raising=False)
        assert native.kernels() is not None
    else:
        monkeypatch.setenv(native.ENV, "0")
        assert native.kernels() is None
    return str(request.param)
F32_MAX = float(np.finfo(np.float32).max)
INT_BOUNDS = {VT.UINT8: (0, 255), VT.INT8: (-128, 127), VT.UINT16: (0, 65535), VT.INT16: (-32768, 32767),
              VT.UINT32: (0, 2**32 - 1), VT.INT32: (-2**31, 2**31 - 1), VT.UINT64: (0, 2**64 - 1),
              VT.INT64: (-2**63, 2**63 - 1)}


def _gguf(value: object, vtype: VT, sub: VT | None = None) -> bytes | type:
    try:
        return GGUFWriter(None, "x")._pack_val(value, vtype, add_vtype=True, sub_type=sub)
    except Exception as e:  # noqa: BLE001 - the exception type is what we compare
        return type(e)


def _fast(value: object, vtype: VT, sub: VT | None = None) -> bytes | type:
    try:
        return header.pack_kv_value(GGUFWriter(None, "x"), value, vtype, sub)
    except Exception as e:  # noqa: BLE001
        return type(e)


# ============================================================================================== KV block
ARRAYS = [
    (VT.STRING, ["a", "", "Ġhello", "日本語", "\x00", "🙂" * 3, "x" * 300]),
    (VT.STRING, ("tuple", "of", "strings")),
    (VT.STRING, [b"raw bytes", "mixed"]),
    (VT.STRING, [b"\xff\xfe"]),
    (VT.FLOAT32, [0.0, -0.0, 1.5, -2.25, 1e-45, 1e-40, 3.4e38, F32_MAX, float("inf"), float("-inf"),
                  1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24, 0.1, -1e-30]),
    (VT.FLOAT32, [1.0, float("nan")]),           # NaN: gguf-py packs it
    (VT.FLOAT32, [1.0, 1e300]),                  # float32 overflow: gguf-py raises
    (VT.FLOAT32, [1, 2.5]),                      # an int among floats
    (VT.FLOAT64, [0.0, -0.0, 1e300, 5e-324, float("nan"), float("-inf"), 0.1]),
    (VT.BOOL, [True, False, True]),
    (VT.BOOL, [1, 0]),                           # ints as bools
    (VT.INT32, [1, True, -5]),                   # a bool among ints
    (VT.INT32, [np.int32(3), 4]),                # numpy scalars
    (VT.INT32, [1.0]),                           # a float where an int is expected: gguf-py raises
    (VT.UINT8, [0, 256]),                        # out of range: gguf-py raises
    (VT.INT64, [-1, 2**63]),
    (VT.UINT64, [2**64]),
    (VT.UINT32, [-1]),
]


@pytest.mark.parametrize(("sub", "values"), ARRAYS, ids=[f"{s.name}-{i}" for i, (s, _) in enumerate(ARRAYS)])
def test_array_packing_matches_gguf(sub: VT, values: list) -> None:
    assert _fast(values, VT.ARRAY, sub) == _gguf(values, VT.ARRAY, sub)


@pytest.mark.parametrize("sub", list(INT_BOUNDS))
def test_integer_arrays_at_their_bounds_match_gguf(sub: VT) -> None:
    lo, hi = INT_BOUNDS[sub]
    values = [lo, hi, lo + 1, hi - 1, (lo + hi) // 2] * 3
    got = _fast(values, VT.ARRAY, sub)
    assert isinstance(got, bytes) and got == _gguf(values, VT.ARRAY, sub)
    assert _fast([lo - 1], VT.ARRAY, sub) == _gguf([lo - 1], VT.ARRAY, sub) == struct.error
    assert _fast([hi + 1], VT.ARRAY, sub) == _gguf([hi + 1], VT.ARRAY, sub) == struct.error


def test_random_float32_arrays_round_like_struct() -> None:
    rng = np.random.default_rng(7)
    values = [float(v) for v in np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-45, 39, 5000),
                                                rng.standard_normal(1000)])]
    values = [v for v in values if abs(v) < 3.4e38]
    assert _fast(values, VT.ARRAY, VT.FLOAT32) == _gguf(values, VT.ARRAY, VT.FLOAT32)


@pytest.mark.parametrize(("vtype", "value"), [
    (VT.UINT8, 7), (VT.INT8, -7), (VT.UINT16, 65535), (VT.INT16, -3), (VT.UINT32, 4000000000), (VT.INT32, -1),
    (VT.UINT64, 2**64 - 1), (VT.INT64, -2**63), (VT.FLOAT32, 0.1), (VT.FLOAT64, 0.1), (VT.BOOL, True),
    (VT.STRING, "qwen2"), (VT.STRING, "日本"), (VT.ARRAY, []), (VT.ARRAY, "abc"), (VT.ARRAY, [[1, 2], [3]])])
def test_scalars_and_odd_values_match_gguf(vtype: VT, value: object) -> None:
    sub = VT.INT32 if value == [[1, 2], [3]] else None
    assert _fast(value, vtype, sub) == _gguf(value, vtype, sub)


def test_kv_block_matches_gguf_writer_byte_for_byte() -> None:
    """A writer holding every KV type, written by gguf-py and by ``header.write_kv_data``."""
    vocab = [f"tok{i}" for i in range(3000)] + ["Ġ", "日本", ""]
    kvs = [("general.name", VT.STRING, "draft", None), ("a.u8", VT.UINT8, 255, None), ("a.i8", VT.INT8, -128, None),
           ("a.u16", VT.UINT16, 1, None), ("a.i16", VT.INT16, -1, None), ("a.u32", VT.UINT32, 2**32 - 1, None),
           ("a.i32", VT.INT32, -(2**31), None), ("a.u64", VT.UINT64, 2**64 - 1, None), ("a.i64", VT.INT64, -1, None),
           ("a.f32", VT.FLOAT32, 1e-6, None), ("a.f64", VT.FLOAT64, 1e-300, None), ("a.bool", VT.BOOL, False, None),
           ("tokenizer.ggml.tokens", VT.ARRAY, vocab, VT.STRING),
           ("tokenizer.ggml.scores", VT.ARRAY, [float(-i) for i in range(len(vocab))], VT.FLOAT32),
           ("tokenizer.ggml.token_type", VT.ARRAY, [1 + i % 6 for i in range(len(vocab))], VT.INT32),
           ("tokenizer.ggml.merges", VT.ARRAY, ["a b", "Ġ t"] * 500, VT.STRING),
           ("a.layers", VT.ARRAY, [1, 2, 3], VT.UINT32), ("a.flags", VT.ARRAY, [True, False], VT.BOOL),
           ("a.u64s", VT.ARRAY, [2**64 - 1, 0], VT.UINT64), ("a.f64s", VT.ARRAY, [0.5, -0.0], VT.FLOAT64)]
    blocks = []
    for fast in (False, True):
        w = GGUFWriter(path=None, arch="dflash")
        for name, vtype, value, sub in kvs:
            w.add_key_value(name, value, vtype, sub_type=sub)
        f = io.BytesIO()
        w.fout = [f]  # type: ignore[list-item]
        w.state = WriterState.EMPTY
        w.write_header_to_file()
        if fast:
            header.write_kv_data(w, f)
        else:
            w.write_kv_data_to_file()
        assert w.state == WriterState.KV_DATA
        blocks.append(f.getvalue())
    assert len(blocks[0]) > 40000 and blocks[0] == blocks[1]


# ============================================================================================== Q8_0
def _blocks_for_q8() -> np.ndarray:
    rng = np.random.default_rng(11)
    parts = [rng.standard_normal(32 * 4000).astype(np.float32) * 0.02,
             np.zeros(64, np.float32), np.full(32, -0.0, np.float32),
             rng.standard_normal(32 * 50).astype(np.float32) * 1e30,
             (rng.standard_normal(32 * 50) * 1e-41).astype(np.float32),      # subnormal blocks
             np.full(32, 2.0**-140, np.float32), np.array([F32_MAX, -F32_MAX] * 16, np.float32)]
    # exact ties: max 127 makes d = 1 and 1/d = 1, so k + 0.5 is quantized as is (half away from zero)
    ties = np.concatenate([[127.0], np.arange(-63, 62) + 0.5, [-126.5, 126.5]])
    parts.append(np.resize(ties, 32 * 4).astype(np.float32))
    # neighbours of the ties (one ulp either side) under the same scale
    near = np.array([np.nextafter(np.float32(k + 0.5), np.float32(s * 1000)) for k in range(-60, 60) for s in (-1, 1)],
                    np.float32)
    parts.append(np.concatenate([np.resize(np.concatenate([[127.0], near[i:i + 31]]), 32)
                                 for i in range(0, near.size, 31)]).astype(np.float32))
    # scales whose reciprocal rounds: maxima 1..300 by odd steps
    parts.append(np.concatenate([np.linspace(-m, m, 32, dtype=np.float32) for m in np.arange(1, 300, 7) * 0.37]))
    return np.concatenate(parts).astype(np.float32)


@pytest.mark.parametrize("shape", [(-1,), (-1, 64), (-1, 2, 32)])
@pytest.mark.usefixtures("kernel")
def test_q8_0_matches_gguf(shape: tuple[int, ...]) -> None:
    x = _blocks_for_q8()
    x = x[: x.size // 64 * 64].reshape(shape)
    got = quantize_q8_0(x)
    assert got.dtype == np.uint8 and got.shape == quants.quantize(x, QT.Q8_0).shape
    assert got.tobytes() == quants.quantize(x, QT.Q8_0).tobytes()


@pytest.mark.usefixtures("kernel")
def test_q8_0_rounding_is_half_away_from_zero() -> None:
    x = np.array([127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5] + [0.0] * 24, np.float32)
    q = quantize_q8_0(x)[2:].view(np.int8)
    assert q[:8].tolist() == [127, 1, 2, 3, -1, -2, -3, 127]


@pytest.mark.usefixtures("kernel")
def test_q8_0_of_bf16_bits_matches_gguf() -> None:
    x = _blocks_for_q8()
    bits = (x.view(np.uint32) >> 16).astype(np.uint16).reshape(-1, 32)
    ref = quants.quantize(to_float32(bits, "BF16"), QT.Q8_0)
    assert quantize_q8_0(bits, bf16_bits=True).tobytes() == ref.tobytes()
    assert convert_chunk(bits, "BF16", QT.Q8_0).tobytes() == ref.tobytes()


@pytest.mark.usefixtures("kernel")
def test_q8_0_with_nan_and_inf_gives_gguf_bytes() -> None:
    x = _blocks_for_q8()[: 32 * 100].copy()
    x[5], x[40], x[77] = np.nan, np.inf, -np.inf
    assert quantize_q8_0(x).tobytes() == quants.quantize(x, QT.Q8_0).tobytes()


@pytest.mark.usefixtures("kernel")
def test_q8_0_refuses_rows_not_multiple_of_32_like_gguf() -> None:
    with pytest.raises(quants.QuantError):
        quantize_q8_0(np.zeros((2, 48), np.float32))


# ============================================================================================== dtypes
@pytest.mark.usefixtures("kernel")
def test_bf16_to_f16_equals_float_conversion_for_every_value() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)
    with np.errstate(over="ignore"):
        ref = to_float32(bits, "BF16").astype(np.float16)
    got = convert_chunk(bits, "BF16", QT.F16)
    assert got.shape == (256, 256) and got.tobytes() == ref.tobytes()


@pytest.mark.usefixtures("kernel")
def test_bf16_to_f16_in_pieces_equals_float_conversion_across_piece_boundaries() -> None:
    # three lookup pieces and a partial fourth, rows that straddle the piece boundaries
    bits = np.random.default_rng(7).integers(0, 1 << 16, (3 * (1 << 16) + 96) // 96 * 96, np.uint16).reshape(-1, 96)
    with np.errstate(over="ignore"):
        ref = to_float32(bits, "BF16").astype(np.float16)
    got = convert_chunk(bits, "BF16", QT.F16)
    assert got.shape == bits.shape and got.dtype == np.uint16 and got.tobytes() == ref.tobytes()
    assert convert_chunk(bits[:, :48], "BF16", QT.F16).tobytes() == ref[:, :48].tobytes()  # a strided view


@pytest.mark.usefixtures("kernel")
def test_bf16_to_f16_of_normal_values_only_and_of_every_value_at_each_offset() -> None:
    # a chunk of values that are all F16 normals (no table look-up), then every value shifted across a piece end
    normal = np.arange(113 << 7, 143 << 7, dtype=np.uint16)
    normal = np.concatenate([normal, normal | 0x8000])
    every = np.arange(1 << 16, dtype=np.uint16)
    for bits in [normal, *(np.concatenate([normal[:shift], every, normal[:(1 << 16) - shift]]) for shift in (1, 33, 977))]:
        with np.errstate(over="ignore"):
            ref = to_float32(bits, "BF16").astype(np.float16)
        got = convert_chunk(bits, "BF16", QT.F16)
        assert got.dtype == np.uint16 and got.tobytes() == ref.tobytes()
    assert convert_chunk(normal[:4], "BF16", QT.F16).tolist() == [0x0400, 0x0408, 0x0410, 0x0418]  # 2^-14 and up


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
def test_nonfinite_check_on_bits(dtype: str) -> None:
    np_dtype = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}[dtype]
    if dtype == "BF16":
        finite = np.array([0x0000, 0x8000, 0x7F7F, 0xFF7F, 0x0001], np.uint16)      # 0, -0, max, -max, subnormal
        specials = [0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF]
    else:
        finite = np.array([0.0, -0.0, np.finfo(np_dtype).max, -np.finfo(np_dtype).max, np.finfo(np_dtype).tiny], np_dtype)
        specials = [np.inf, -np.inf, np.nan]
    assert not writer._nonfinite(finite, dtype)
    assert not writer._nonfinite(finite[:0], dtype)
    for v in specials:
        bad = finite.copy()
        bad[2] = v
        assert writer._nonfinite(bad.reshape(5, 1), dtype)


def test_nonfinite_check_every_16_bit_pattern() -> None:
    """Each of the 65,536 BF16 / F16 patterns, beside finite neighbours: NaN/Inf exactly when the bits without the
    sign reach the exponent mask (the signed and unsigned maxima cover the positive and the negative ones)."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    for dtype, mask in (("BF16", 0x7F80), ("F16", 0x7C00)):
        got = [writer._nonfinite(np.array([0x3C00, int(b), 0xBC00], np.uint16), dtype) for b in bits]
        assert got == ((bits & 0x7FFF) >= mask).tolist()
    for v in (0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF, 0x80000000):
        chunk = np.array([0x3F800000, v, 0xBF800000], np.uint32)
        assert writer._nonfinite(chunk, "F32") == ((v & 0x7FFFFFFF) >= 0x7F800000)


def _nvfp4_by_value(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """ggml NVFP4 blocks built value by value from the layout: per 64 values, 4 scale bytes (sign cleared), then
    per sub-block of 16 byte j = value j | value j + 8 << 4; value 2m of a row is the low nibble of byte m."""
    rows, half = packed.shape
    codes = np.empty((rows, 2 * half), np.uint8)
    codes[:, 0::2], codes[:, 1::2] = packed & 15, packed >> 4
    sub = codes.reshape(rows, -1, 4, 16)
    qs = (sub[..., :8] | (sub[..., 8:] << 4)).reshape(rows, -1, 32)
    return np.concatenate([(scale & 0x7F).reshape(rows, -1, 4), qs], axis=-1).reshape(rows, half // 32 * 36)


@pytest.mark.parametrize("shape", [(1, 32), (3, 96), (7, 64), (300, 512), (3, 1 << 16)])
@pytest.mark.usefixtures("kernel")
def test_nvfp4_repack_equals_the_layout_value_by_value(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    packed = rng.integers(0, 256, shape, dtype=np.uint8)
    scale = rng.integers(0, 256, (shape[0], shape[1] // 8), dtype=np.uint8)
    want = _nvfp4_by_value(packed, scale)
    got = nvfp4_repack(packed, scale)
    assert got.shape == want.shape == (shape[0], shape[1] // 32 * 36) and got.tobytes() == want.tobytes()
    strided = np.zeros((shape[0], scale.shape[1] * 2), np.uint8)
    strided[:, ::2] = scale  # non-contiguous inputs: a Fortran-ordered chunk, every other column of a wider array
    assert nvfp4_repack(np.asfortranarray(packed), strided[:, ::2]).tobytes() == want.tobytes()


@pytest.mark.usefixtures("kernel")
def test_nvfp4_repack_of_no_rows() -> None:
    assert nvfp4_repack(np.zeros((0, 64), np.uint8), np.zeros((0, 8), np.uint8)).shape == (0, 72)


# ============================================================================================== chunked reads
def _save(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        b = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


@pytest.fixture
def ckpt(tmp_path: Path) -> Checkpoint:
    rng = np.random.default_rng(3)
    bf = lambda *s: (rng.standard_normal(s).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
    _save(tmp_path / "model.safetensors", {"q": ("BF16", bf(8 * 16, 64)), "k": ("BF16", bf(2 * 16, 64)),
                                          "norm": ("BF16", bf(16)), "f32": ("F32", rng.standard_normal((50, 96)).astype(np.float32)),
                                          "odd": ("BF16", bf(24, 32)), "scalar": ("F32", np.array(1.5, np.float32))})
    return Checkpoint(tmp_path, need_config=False)


def test_read_rows_equals_memory_mapped_slices(ckpt: Checkpoint) -> None:
    for name in ("q", "f32", "norm"):
        whole = np.asarray(ckpt.read(name))
        for a, b in ((0, 1), (3, 9), (0, whole.shape[0]), (whole.shape[0] - 1, whole.shape[0])):
            got = ckpt.read_rows(name, a, b)
            assert got.dtype == whole.dtype and np.array_equal(got, whole[a:b])
    assert ckpt.read_rows("scalar", 0, 1).tolist() == 1.5


CASES = [("q", "deinterleave_rope", (16,)), ("k", "deinterleave_rope", (16,)), ("norm", "deinterleave_rope", (16,)),
         ("q", "eagle3_permute", (8, 8)), ("k", "eagle3_permute", (8, 2)), ("q", "eagle3_permute", (8, 4)),
         ("f32", None, ()), ("scalar", None, ())]
# every case with every output type, except Q8_0 for the two whose rows are not whole blocks of 32
CASES_OUT = [(*c, out) for c in CASES for out in (QT.BF16, QT.F16, QT.F32, QT.Q8_0)
             if not (out == QT.Q8_0 and c[0] in ("norm", "scalar"))]


@pytest.mark.parametrize(("name", "transform", "args", "out"), CASES_OUT)
def test_chunked_transform_and_conversion_equal_whole_tensor(ckpt: Checkpoint, monkeypatch: pytest.MonkeyPatch,
                                                             name: str, transform: str | None, args: tuple, out: QT) -> None:
    ref_ = ckpt.ref(name)
    whole = np.asarray(ckpt.read(name))
    if transform is not None:
        whole = {"deinterleave_rope": deinterleave_rope, "eagle3_permute": eagle3_permute}[transform](whole, *args)
    expected = convert_chunk(np.ascontiguousarray(whole), ref_.dtype, out).tobytes()
    rule = None if transform is None else TRANSFORMS[transform](*args)
    spec = TensorSpec("t", ref_.shape, out, sources=(name,), transform=rule)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1)  # the smallest chunks: one transform group each
    chunks = [job() for *_, job in writer.chunk_spans(spec, {"draft": ckpt})]
    assert b"".join(np.ascontiguousarray(c).tobytes() for c in chunks) == expected
    if transform is not None and ref_.shape[0] > 16:
        assert len(chunks) > 1


def test_uneven_rows_raise_the_transform_error(ckpt: Checkpoint) -> None:
    spec = TensorSpec("t", (24, 32), QT.BF16, sources=("odd",), transform=DeinterleaveRope(16))
    with pytest.raises(ConvertError, match="cannot de-interleave 24 rows"):
        [job() for *_, job in writer.chunk_spans(spec, {"draft": ckpt})]
    spec = TensorSpec("t", (24, 32), QT.BF16, sources=("odd",), transform=Eagle3Permute(8, 8))
    with pytest.raises(ConvertError, match="cannot permute 24 rows for 8 heads"):
        [job() for *_, job in writer.chunk_spans(spec, {"draft": ckpt})]


# ============================================================================================== NVFP4 scale check
@pytest.mark.parametrize(("rows_bad", "want"), [
    ({}, None),
    ({1: 0x80}, "holds negative E4M3 block scales"),
    ({1: 0x80, 6: 0x7F}, "holds NaN E4M3 block scales"),   # a NaN in a later chunk is named before a negative
    ({7: 0xFF}, "holds NaN E4M3 block scales"),
])
def test_nvfp4_scales_checked_a_few_rows_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    rows_bad: dict[int, int], want: str | None) -> None:
    from dspark_convert.formats import modelopt

    scale = np.full((8, 8), 0x38, np.uint8)
    for r, v in rows_bad.items():
        scale[r, 3] = v
    _save(tmp_path / "model.safetensors", {"w.weight": ("U8", np.zeros((8, 64), np.uint8)),
                                           "w.weight_scale": ("F8_E4M3", scale),
                                           "w.weight_scale_2": ("F32", np.array(0.5, np.float32))})
    (tmp_path / "config.json").write_text("{}")
    ck = Checkpoint(tmp_path)
    chunks: list[tuple[int, int]] = []
    read_rows = ck.read_rows
    monkeypatch.setattr(ck, "read_rows", lambda n, a, b: chunks.append((a, b)) or read_rows(n, a, b))
    monkeypatch.setattr(modelopt, "SCALE_CHECK_BYTES", 16)  # two rows of 8 scale bytes per read
    if want is None:
        lin = modelopt.nvfp4_linear(ck, "w.weight", ck.read)
        assert lin.shape == (8, 128) and lin.scale2_value == 0.5
        assert chunks == [(0, 2), (2, 4), (4, 6), (6, 8)]
    else:
        with pytest.raises(ConvertError, match=f"tensor 'w.weight_scale' {want}"):
            modelopt.nvfp4_linear(ck, "w.weight", ck.read)


# ============================================================================================== compiled kernels
def test_compiled_f16_of_float32_equals_numpy_cast_on_a_sample_of_every_pattern() -> None:
    # the F16 rounding of Q8_0's d: every 4099th float32 bit pattern (both signs, all exponents) plus the
    # neighbourhoods of the F16 boundaries (largest finite / overflow, smallest normal, subnormal ties, zero)
    assert native.built()
    edges = np.array([0x477FEFFF, 0x477FF000, 0x477FE000, 0x38800000, 0x387FFFFF, 0x33000000, 0x33000001,
                      0x32FFFFFF, 0x33C00000, 0x7F800000, 0x00000001, 0], np.int64)
    near = (edges[:, None] + np.arange(-64, 65)).reshape(-1) % (1 << 31)
    u = np.concatenate([np.arange(0, 1 << 32, 4099, dtype=np.int64), near, near | (1 << 31)]).astype(np.uint32)
    f = u.view(np.float32)
    finite = ~np.isnan(f)
    with np.errstate(over="ignore"):
        ref = f[finite].astype(np.float16).view(np.uint16)
    got = np.empty(f.size, np.uint16)
    native.kernels().f16_bits(f, got)  # type: ignore[union-attr]
    assert got[finite].tolist() == ref.tolist()
    assert (got[~finite] & 0x7E00).tolist() == [0x7E00] * int((~finite).sum())  # NaN stays a quiet NaN


@pytest.mark.usefixtures("kernel")
@pytest.mark.parametrize("scale", [2.0 ** -140, 2.0 ** -120, 2.0 ** -100, 2.0 ** -24, 2.0 ** -17, 1.0, 2.0 ** 20, 2.0 ** 120])
def test_q8_0_scales_from_underflow_to_overflow_match_gguf(scale: float) -> None:
    # d = max|x| / 127 as an F16 subnormal, normal or Inf, and 1/d overflowing (gguf-py's own bytes)
    x = (np.random.default_rng(3).standard_normal(32 * 64) * scale).astype(np.float32)
    x[:32] = 0.0
    x[32:64] = -0.0
    assert quantize_q8_0(x).tobytes() == quants.quantize(x, QT.Q8_0).tobytes()
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    ref = quants.quantize(to_float32(bits, "BF16"), QT.Q8_0)
    assert quantize_q8_0(bits, bf16_bits=True).tobytes() == ref.tobytes()


def test_compiled_kernels_refuse_mismatched_buffers() -> None:
    k = native.kernels()
    assert k is not None
    with pytest.raises(ValueError, match="not whole blocks of 32"):
        k.q8_0(np.zeros(40, np.float32), np.zeros(34, np.uint8), False)
    with pytest.raises(ValueError, match="destination of 33 bytes, expected 34"):
        k.q8_0(np.zeros(32, np.uint16), np.zeros(33, np.uint8), True)
    with pytest.raises(ValueError, match="65536-entry"):
        k.bf16_to_f16(np.zeros(8, np.uint16), np.zeros(10, np.uint16), np.zeros(8, np.uint16))
    with pytest.raises(TypeError):
        k.q8_0(np.zeros(32, np.float32), b"\0" * 34, False)  # a read-only destination
    with pytest.raises(ValueError, match="do not make whole super-blocks"):
        k.nvfp4_repack(np.zeros(32, np.uint8), np.zeros(4, np.uint8), np.zeros(32, np.uint8))
