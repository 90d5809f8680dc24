"""The header side of writing a GGUF file: magic, KV block and tensor infos, serialised by gguf-py itself.

Why gguf-py: upstream writes with ``GGUFWriter``, so serialising through it gives the same bytes by
construction. Why not its public API alone: ``GGUFWriter.add_tensor`` keeps every tensor in memory until the
file is written, and its KV packer packs arrays item by item (seconds for a 150k-token vocabulary). So this
module hands ``GGUFWriter`` our own file object and writes the KV block with :func:`pack_kv_value`.

This is the ONLY module of the package that touches ``GGUFWriter`` private members (``_pack_val``,
``kv_data``, ``fout``, ``state``, ``gguf.gguf_writer.WriterState``). They are not a stable API, so the ``gguf``
version is pinned (:data:`GGUF_PINNED`, pyproject.toml) and ``tests/check/test_gguf_header.py`` checks that every
member used here still exists and behaves as assumed: after a ``gguf`` upgrade, that test is the one place to
look, and this module the one place to change.
"""

from __future__ import annotations

import io
import itertools
import struct
from collections.abc import Sequence
from typing import BinaryIO, cast

import numpy as np
from gguf import GGUFValueType as VT
from gguf import GGUFWriter
from gguf.gguf_writer import WriterState

from ..plan import KV, TensorSpec
from .packed import PackedStrings

#: the gguf-py release whose private members this module relies on (pyproject.toml pins the same)
GGUF_PINNED = "0.19.0"
ALIGNMENT = 32

_INT_DTYPES = {VT.UINT8: "<u1", VT.INT8: "<i1", VT.UINT16: "<u2", VT.INT16: "<i2", VT.UINT32: "<u4",
               VT.INT32: "<i4", VT.UINT64: "<u8", VT.INT64: "<i8"}
_U64 = struct.Struct("<Q")


def pad(n: int) -> int:
    """Bytes of zero padding after ``n`` bytes to reach the next :data:`ALIGNMENT` boundary.

    Example:
        >>> pad(33), pad(64)
        (31, 0)
    """
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def _pack_array_items(items: list | tuple, sub: VT) -> bytes | None:
    """The packed items of a GGUF array in bulk, or None where only gguf-py's per-item packer is sure to agree.

    Bulk paths take exactly the Python types gguf-py packs the obvious way (str/bytes, int, float, bool); any
    other item type, an out-of-range integer, a NaN or a float32 overflow goes back to gguf-py, which packs or
    raises as it always does.
    """
    if sub == VT.STRING:
        enc = []
        for v in items:
            if type(v) is str:
                enc.append(v.encode("utf-8"))
            elif type(v) is bytes:
                enc.append(v)
            else:
                return None
        return b"".join(itertools.chain.from_iterable(zip(map(_U64.pack, map(len, enc)), enc, strict=True)))
    if sub in _INT_DTYPES:
        if set(map(type, items)) != {int}:
            return None
        try:
            return np.array(items, dtype=_INT_DTYPES[sub]).tobytes()
        except OverflowError:  # numpy refuses out-of-range Python ints; struct.error is gguf-py's answer
            return None
    if sub in (VT.FLOAT32, VT.FLOAT64):
        if set(map(type, items)) != {float}:
            return None
        a = np.array(items, dtype=np.float64)
        if sub == VT.FLOAT64:
            return a.astype("<f8").tobytes()
        b = a.astype("<f4")  # the same C double -> float rounding as struct.pack("<f")
        if np.isnan(a).any() or np.any(np.isinf(b) & ~np.isinf(a)):
            return None
        return b.tobytes()
    if sub == VT.BOOL and set(map(type, items)) == {bool}:
        return np.array(items, dtype=np.bool_).tobytes()
    return None


def pack_kv_value(w: GGUFWriter, value: object, vtype: VT, sub_type: VT | None = None) -> bytes:
    """The bytes ``w._pack_val(value, vtype, add_vtype=True, sub_type=sub_type)`` gives, with arrays in bulk.

    gguf-py packs arrays item by item (a 150k-token vocabulary is ~0.5M ``struct.pack`` calls, seconds);
    lists and tuples of plain str/int/float/bool are packed here in a few vectorised steps, everything else by
    gguf-py itself. tests/conversion/test_perf_equivalence.py compares the two byte for byte.

    Example:
        >>> pack_kv_value(GGUFWriter(None, "x"), ["a", "bc"], VT.ARRAY, VT.STRING).hex()
        '0900000008000000020000000000000001000000000000006102000000000000006263'
    """
    if isinstance(value, PackedStrings) and vtype == VT.ARRAY and sub_type == VT.STRING:
        return struct.pack("<IIQ", VT.ARRAY, VT.STRING, len(value)) + value.blob  # already in file encoding
    # exactly list or tuple (not a subclass); the isinstance only tells the type checker so
    if (vtype == VT.ARRAY and sub_type is not None and type(value) in (list, tuple) and isinstance(value, (list, tuple))
            and len(value) > 0):
        items = _pack_array_items(value, sub_type)
        if items is not None:
            return struct.pack("<IIQ", VT.ARRAY, sub_type, len(value)) + items
    return w._pack_val(value, vtype, add_vtype=True, sub_type=sub_type)


def write_kv_data(w: GGUFWriter, f: BinaryIO) -> None:
    """``w.write_kv_data_to_file()``, byte for byte, with arrays packed by :func:`pack_kv_value`."""
    for key, val in w.kv_data[0].items():
        f.write(w._pack_val(key, VT.STRING, add_vtype=False))
        if isinstance(val.value, PackedStrings) and val.type == VT.ARRAY and val.sub_type == VT.STRING:
            f.write(struct.pack("<IIQ", VT.ARRAY, VT.STRING, len(val.value)))
            f.write(val.value.blob)  # (written as is: no copy of a vocabulary-sized block)
        else:
            f.write(pack_kv_value(w, val.value, val.type, val.sub_type))
    w.state = WriterState.KV_DATA


def header_writer(arch: str, kvs: Sequence[KV], tensors: Sequence[TensorSpec]) -> GGUFWriter:
    """A ``GGUFWriter`` holding the KVs (after ``general.architecture``, which it adds itself) and tensor infos."""
    w = GGUFWriter(path=None, arch=arch)
    for kv in kvs:
        w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
    for t in tensors:
        w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.ggml_type)
    return w


def write_header(f: BinaryIO, arch: str, kvs: Sequence[KV], tensors: Sequence[TensorSpec]) -> None:
    """Write everything before the tensor data to ``f``: header, KV block, tensor infos, alignment padding.

    ``kvs`` excludes ``general.architecture`` (gguf-py writes it first from ``arch``). The tensor data that
    follows must be written in the order of ``tensors``, each padded with :func:`pad`.
    """
    w = header_writer(arch, kvs, tensors)
    # hand gguf-py our file object. os.fdopen with a buffer size returns an io.BufferedWriter, but typeshed
    # says so only for buffering -1 or 1.
    w.fout = [cast(io.BufferedWriter, f)]
    w.state = WriterState.EMPTY
    try:
        w.write_header_to_file()
        write_kv_data(w, f)
        w.write_ti_data_to_file()
    finally:
        w.fout = None  # the file is ours: gguf-py must never close it
    f.write(b"\0" * pad(f.tell()))
