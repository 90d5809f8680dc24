"""dspark_convert.gguffile.reader: exact parsing of valid files (checked against gguf.GGUFReader) and hostile files."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFEndian, GGUFReader
from gguf import GGUFValueType as VT
from gguf.quants import dequantize
from gguf_samples import (
    BF16_SRC,
    F16_MAT,
    F32_3D,
    F32_VEC,
    I64_VEC,
    Q8_SRC,
    SAMPLE_KVS,
    gstr,
    kv_raw,
    kv_u32,
    raw_gguf,
    tinfo,
    u32,
    u64,
    write_sample,
)

from dspark_convert.errors import GGUFFormatError
from dspark_convert.gguffile.reader import plan_from_gguf, read_gguf


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "sample.gguf")


def test_kvs_match_values_types_and_offsets(sample: Path) -> None:
    f = read_gguf(sample)
    assert f.version == 3 and f.alignment == 32 and f.arch == "dflash"
    assert list(f.kvs)[0] == "general.architecture"
    for key, value, vt, sub in SAMPLE_KVS:
        kv = f.kvs[key]
        assert (kv.type, kv.sub_type) == (vt, sub), key
        assert kv.value == (pytest.approx(value) if vt in (VT.FLOAT32, VT.FLOAT64) else value), key
    assert f.value("t.nested") == [[1, 2], [3, 4, 5]]
    assert f.value("tokenizer.ggml.tokens") == [f"tok{i}" for i in range(50)]
    assert f.kvs["tokenizer.ggml.tokens"].count == 50
    ref = GGUFReader(sample)
    fields = [n for n in ref.fields if not n.startswith("GGUF.")]
    assert list(f.kvs) == fields
    for name in fields:
        assert f.kvs[name].offset == ref.fields[name].offset, name
        assert f.kvs[name].type == ref.fields[name].types[0]


def test_tensors_match_gguf_reader(sample: Path) -> None:
    f = read_gguf(sample)
    ref = GGUFReader(sample)
    assert f.data_offset == ref.data_offset
    assert [t.name for t in f.tensors] == [t.name for t in ref.tensors]
    for t, r in zip(f.tensors, ref.tensors, strict=True):
        assert t.ne == tuple(int(x) for x in r.shape)
        assert t.ggml_type == r.tensor_type.value and t.type_name == r.tensor_type.name
        assert (t.offset, t.nbytes) == (r.data_offset, r.n_bytes)
        assert f.tensor_bytes(t.name).tobytes() == np.ascontiguousarray(r.data).tobytes()
    assert f.tensor("blk.1.cube").shape == (2, 3, 4) and f.tensor("blk.1.cube").ne == (4, 3, 2)


def test_tensor_data_and_arrays(sample: Path) -> None:
    f = read_gguf(sample)
    np.testing.assert_array_equal(f.tensor_array("output_norm.weight"), F32_VEC)
    np.testing.assert_array_equal(f.tensor_array("blk.1.cube"), F32_3D)
    assert f.tensor_data("blk.0.attn_q.weight").dtype == np.float16
    np.testing.assert_array_equal(f.tensor_array("blk.0.attn_q.weight"), F16_MAT.astype(np.float32))
    assert f.tensor_array("d2t").dtype == np.int64
    np.testing.assert_array_equal(f.tensor_array("d2t"), I64_VEC)
    bf16 = f.tensor_data("blk.0.attn_k.weight")
    assert (bf16.dtype, bf16.shape) == (np.uint8, (2, 64))
    np.testing.assert_allclose(f.tensor_array("blk.0.attn_k.weight"), BF16_SRC, rtol=2**-7)
    q8 = f.tensor_data("blk.1.ffn_up.weight")
    assert q8.shape == (3, 68)
    np.testing.assert_array_equal(f.tensor_array("blk.1.ffn_up.weight"), dequantize(np.asarray(q8), QT.Q8_0))
    np.testing.assert_allclose(f.tensor_array("blk.1.ffn_up.weight"), Q8_SRC, atol=0.02)


@pytest.mark.parametrize("name", ["output_norm.weight", "blk.0.attn_k.weight", "blk.1.ffn_up.weight", "d2t"])
def test_iter_chunks_concatenate_to_the_tensor(sample: Path, name: str) -> None:
    f = read_gguf(sample)
    chunks = list(f.iter_chunks(name, max_elements=32))
    assert len(chunks) > 1 or f.tensor(name).n_elements <= 32
    np.testing.assert_array_equal(np.concatenate(chunks), f.tensor_array(name).reshape(-1).astype(chunks[0].dtype))


def test_custom_alignment_and_v2(tmp_path: Path) -> None:
    p = write_sample(tmp_path / "a.gguf", alignment=64)
    f = read_gguf(p)
    assert f.alignment == 64 and f.data_offset % 64 == 0
    assert all((t.offset - f.data_offset) % 64 == 0 for t in f.tensors)
    data = bytearray(p.read_bytes())
    data[4:8] = u32(2)
    p.write_bytes(bytes(data))
    assert read_gguf(p).version == 2


def test_plan_from_gguf(sample: Path) -> None:
    plan = plan_from_gguf(sample)
    assert plan.arch == "dflash"
    kv = plan.kv("t.arr_str")
    assert (kv.type, kv.sub_type, kv.value) == (VT.ARRAY, VT.STRING, ["a", "", "ü"])
    assert plan.kv("t.u64").type == VT.UINT64
    t = plan.tensor("blk.1.ffn_up.weight")
    assert (t.shape, t.ggml_type, t.origin, t.nbytes) == ((3, 64), QT.Q8_0, "file", 204)
    assert [x.name for x in plan.tensors][:2] == ["output_norm.weight", "blk.0.attn_q.weight"]


def test_unknown_ggml_type_is_kept_but_unreadable(tmp_path: Path) -> None:
    p = tmp_path / "u.gguf"
    p.write_bytes(raw_gguf([kv_u32("a", 1)], [tinfo("x.weight", [32, 2], ggml_type=156)], b"\0" * 64))
    f = read_gguf(p)
    t = f.tensors[0]
    assert (t.type_name, t.nbytes, t.qtype, t.shape) == ("UNKNOWN(156)", None, None, (2, 32))
    with pytest.raises(GGUFFormatError, match=r"UNKNOWN\(156\) is unknown"):
        f.tensor_data("x.weight")
    with pytest.raises(GGUFFormatError, match="unknown GGML type"):
        plan_from_gguf(p)


# ------------------------------------------------------------------------------------------------ hostile files
def _expect(tmp_path: Path, data: bytes, match: str) -> str:
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(GGUFFormatError, match=match) as info:
            read_gguf(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"parsing a {len(data)}-byte file allocated {peak} bytes"
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(p)) and " at byte " in msg
    return msg


HUGE = 2**60
GOOD_T = tinfo("t", [8])


@pytest.mark.parametrize(("data", "match"), [
    (b"", "truncated: file has 0 bytes"),
    (b"GGUF" + u32(3) + u64(0), "truncated"),
    (b"GGML" + u32(3) + u64(0) + u64(0), "magic at byte 0: expected b'GGUF'"),
    (raw_gguf(version=1), "GGUF version 1 is not supported"),
    (raw_gguf(version=4), "GGUF version 4 is not supported"),
    (raw_gguf(version=0x03000000), "big-endian"),
    (raw_gguf(n_kv=HUGE), "KVs cannot fit"),
    (raw_gguf(n_tensors=HUGE), "tensors and 0 KVs cannot fit"),
    (raw_gguf([u64(HUGE) + b"abc"]), r"KV #0 name \(string length 1152921504606846976\)"),
    (raw_gguf([kv_raw("s", VT.STRING, u64(HUGE) + b"abc")]), "KV #0 's'.*needs .*\\(1,152,921,504,606,846,976 bytes\\)"),
    (raw_gguf([kv_raw("a", VT.ARRAY, u32(VT.INT32) + u64(HUGE))]), "array of 1,152,921,504,606,846,976 INT32"),
    (raw_gguf([kv_raw("a", VT.ARRAY, u32(VT.STRING) + u64(HUGE))]), "array of 1,152,921,504,606,846,976 STRING"),
    (raw_gguf([kv_raw("a", VT.ARRAY, u32(VT.STRING) + u64(2) + gstr("ok") + u64(HUGE))]),
     "KV #0 'a' element 1 at byte .*string length 1152921504606846976"),
    (raw_gguf([kv_raw("a", VT.ARRAY, u32(VT.ARRAY) + u64(1) + u32(VT.UINT8) + u64(HUGE))]),
     r"'a'\[0\].*array of 1,152,921,504,606,846,976 UINT8"),
    (raw_gguf([kv_raw("a", VT.ARRAY, (u32(VT.ARRAY) + u64(1)) * 10 + u32(VT.UINT8) + u64(0))]), "nested deeper"),
    (raw_gguf([kv_raw("k", 13, u32(0))]), "KV #0 'k' type at byte .*unknown GGUF value type 13"),
    (raw_gguf([kv_raw("k", VT.ARRAY, u32(99) + u64(0))]), "unknown GGUF value type 99"),
    (raw_gguf([kv_u32(b"\xff\xfe", 1)]), "KV #0 name.*not valid UTF-8"),
    (raw_gguf([kv_u32("k", 1), kv_u32("k", 2)]), "KV #1 'k'.*duplicate key"),
    (raw_gguf([kv_u32("general.alignment", 48)]), "general.alignment .*power of two"),
    (raw_gguf([kv_raw("general.alignment", VT.UINT64, u64(32))]), "general.alignment .*got UINT64"),
    (raw_gguf([kv_raw("general.alignment", VT.ARRAY, u32(VT.UINT32) + u64(2) + u32(32) * 2)]),
     r"got ARRAY\[UINT32\] 2 items"),
    (raw_gguf([], [tinfo("t", [1, 1, 1, 1, 1])]), "tensor #0 't'.*n_dims is 5"),
    (raw_gguf([], [tinfo("t", [4, 0])], b"\0" * 64), r"ne\[1\] is 0, dims must be positive"),
    (raw_gguf([], [tinfo("t", [2**64 - 1])], b"\0" * 64), r"ne\[0\] is -1, dims must be positive"),
    (raw_gguf([], [tinfo("t", [2**32, 2**32])], b"\0" * 64), "overflows int64"),
    (raw_gguf([], [tinfo("t", [33, 1], ggml_type=QT.Q8_0)], b"\0" * 64), "not a multiple of the Q8_0 block size 32"),
    (raw_gguf([], [GOOD_T], b"\0" * 16), r"tensor 't'.*data \[.*\) lies past the end of the file"),
    (raw_gguf([], [tinfo("t", [8], offset=2**63)], b"\0" * 32), "lies past the end of the file"),
    (raw_gguf([], [tinfo("t", [8], offset=4)], b"\0" * 64), "offset 4 is not a multiple of the alignment 32"),
    (raw_gguf([], [tinfo("a", [16]), tinfo("b", [8], offset=32)], b"\0" * 64), "tensor 'b'.*overlaps tensor 'a'"),
    (raw_gguf([], [GOOD_T, tinfo("t", [8], offset=32)], b"\0" * 64), "duplicate tensor name"),
    (raw_gguf([], [tinfo(b"\xc3", [8])], b"\0" * 64), "tensor #0 name.*not valid UTF-8"),
    (raw_gguf([], [GOOD_T[:-3]], alignment=1), "tensor #0 't' offset at byte .*truncated"),
])
def test_hostile_files_raise_one_line(tmp_path: Path, data: bytes, match: str) -> None:
    _expect(tmp_path, data, match)


def test_every_truncation_raises(tmp_path: Path, sample: Path) -> None:
    data = sample.read_bytes()
    f = read_gguf(sample)
    end_of_data = max(t.offset + t.nbytes for t in f.tensors)
    p = tmp_path / "cut.gguf"
    for n in list(range(0, f.data_offset, 11)) + list(range(f.data_offset, end_of_data, 9)):
        p.write_bytes(data[:n])
        with pytest.raises(GGUFFormatError):
            read_gguf(p)


def test_big_endian_file_is_refused(tmp_path: Path) -> None:
    p = write_sample(tmp_path / "be.gguf", endianess=GGUFEndian.BIG, with_tokenizer=False)
    _expect(tmp_path, p.read_bytes(), "big-endian GGUF .* is not supported")


def test_file_shrunk_after_parse(tmp_path: Path, sample: Path) -> None:
    f = read_gguf(sample)
    os.truncate(sample, f.data_offset + 8)
    with pytest.raises(GGUFFormatError, match="past EOF"):
        f.tensor_data("blk.1.cube")
