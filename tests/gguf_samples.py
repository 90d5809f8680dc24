"""Small GGUF files for the reader/inspect/diff tests: valid ones via gguf.GGUFWriter, hostile ones by hand."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFEndian, GGUFWriter
from gguf import GGUFValueType as VT
from gguf.quants import quantize

RNG = np.random.default_rng(1234)
F32_VEC = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
F16_MAT = RNG.standard_normal((4, 32)).astype(np.float16)
BF16_SRC = RNG.standard_normal((2, 32)).astype(np.float32)
Q8_SRC = RNG.standard_normal((3, 64)).astype(np.float32)
I64_VEC = np.array([0, -1, 2**40, 7], dtype=np.int64)
F32_3D = RNG.standard_normal((2, 3, 4)).astype(np.float32)

#: (key, value, GGUF type, element type) written by :func:`write_sample`, in order (after general.architecture).
SAMPLE_KVS: list[tuple[str, Any, VT, VT | None]] = [
    ("t.u8", 200, VT.UINT8, None), ("t.i8", -5, VT.INT8, None), ("t.u16", 60000, VT.UINT16, None),
    ("t.i16", -300, VT.INT16, None), ("t.u32", 4_000_000_000, VT.UINT32, None), ("t.i32", -7, VT.INT32, None),
    ("t.f32", 0.5, VT.FLOAT32, None), ("t.bool", True, VT.BOOL, None), ("t.str", "héllo ✓", VT.STRING, None),
    ("t.u64", 2**63 + 5, VT.UINT64, None), ("t.i64", -(2**40), VT.INT64, None), ("t.f64", 1e-300, VT.FLOAT64, None),
    ("t.arr_i32", [1, -2, 3], VT.ARRAY, VT.INT32), ("t.arr_bool", [True, False, True], VT.ARRAY, VT.BOOL),
    ("t.arr_f32", [0.25, -1.5], VT.ARRAY, VT.FLOAT32), ("t.arr_str", ["a", "", "ü"], VT.ARRAY, VT.STRING),
    ("t.nested", [[1, 2], [3, 4, 5]], VT.ARRAY, VT.ARRAY), ("t.nested_str", [["x"], ["y", "z"]], VT.ARRAY, VT.ARRAY),
    ("t.long", list(range(40)), VT.ARRAY, VT.INT32),
]


def write_sample(path: Path, *, alignment: int | None = None, with_tokenizer: bool = True,
                 arch: str = "dflash", endianess: GGUFEndian = GGUFEndian.LITTLE) -> Path:
    """A small valid file: every scalar type, arrays (nested, string, bool), tokenizer keys, and tensors
    F32, F16, BF16, Q8_0, I64 and a 3-D F32."""
    w = GGUFWriter(path, arch, endianess=endianess)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vt, sub in SAMPLE_KVS:
        w.add_key_value(key, value, vt, sub_type=sub if sub != VT.ARRAY else None)
    if with_tokenizer:
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", "qwen2")
        w.add_token_list([f"tok{i}" for i in range(50)])
        w.add_token_types([1] * 50)
        w.add_token_merges(["t o", "k 1"])
        w.add_bos_token_id(3)
        w.add_eos_token_id(7)
        w.add_add_bos_token(False)
    w.add_tensor("output_norm.weight", F32_VEC)
    w.add_tensor("blk.0.attn_q.weight", F16_MAT)
    w.add_tensor("blk.0.attn_k.weight", quantize(BF16_SRC, QT.BF16), raw_dtype=QT.BF16)
    w.add_tensor("blk.1.ffn_up.weight", quantize(Q8_SRC, QT.Q8_0), raw_dtype=QT.Q8_0)
    w.add_tensor("d2t", I64_VEC)
    w.add_tensor("blk.1.cube", F32_3D)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_gguf(path: Path, kvs: list[tuple[str, Any, VT]] = (), tensors: list[tuple[str, np.ndarray, QT | None]] = (),
               arch: str = "dflash") -> Path:
    """A file with the given ``(key, value, type)`` KVs (arrays: element type inferred) and
    ``(name, data, raw_dtype)`` tensors, in order."""
    w = GGUFWriter(path, arch)
    for key, value, vt in kvs:
        w.add_key_value(key, value, vt)
    for name, data, raw_dtype in tensors:
        w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ------------------------------------------------------------------------------- raw building blocks (hostile files)
def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def gstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def kv_u32(name: str | bytes, v: int) -> bytes:
    return gstr(name) + u32(VT.UINT32) + u32(v)


def kv_raw(name: str | bytes, vtype: int, payload: bytes) -> bytes:
    return gstr(name) + u32(vtype) + payload


def tinfo(name: str | bytes, ne: list[int], ggml_type: int = 0, offset: int = 0) -> bytes:
    return gstr(name) + u32(len(ne)) + b"".join(u64(d) for d in ne) + u32(ggml_type) + u64(offset)


def raw_gguf(kvs: list[bytes] = (), tensors: list[bytes] = (), data: bytes = b"", *, version: int = 3,
             n_kv: int | None = None, n_tensors: int | None = None, alignment: int = 32) -> bytes:
    """Assemble a GGUF file from raw KV and tensor-info records (counts overridable), padding to ``alignment``."""
    head = b"GGUF" + u32(version) + u64(len(tensors) if n_tensors is None else n_tensors)
    head += u64(len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tensors)
    body += b"\0" * ((-len(body)) % alignment)
    return body + data
