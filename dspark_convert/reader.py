"""A GGUF v2/v3 reader that survives hostile files and opens multi-GB files in milliseconds.

Why not ``gguf.GGUFReader``: it builds numpy objects for every field and string (slow for 130k-token
vocabularies), trusts counts and lengths from the file, and crashes on unknown GGML type ids. This reader:

* checks every count and length against the bytes left in the file *before* allocating or looping, so each
  loop is bounded by the file size and a 2^60-element array is refused at once;
* walks big arrays (tokens, merges) without decoding them and decodes them on first access to
  :attr:`ReaderKV.value`;
* never reads tensor data while parsing: :meth:`GGUFFile.tensor_data` returns a lazily created
  ``np.memmap`` view;
* raises :class:`~dspark_convert.errors.GGUFFormatError` with one line naming the file, the field or tensor,
  and the byte offset for anything malformed (truncation, wrong magic or version, unknown value types, bad
  dims, data past EOF, overlapping or misaligned tensors, duplicate names, ...).

Tensors whose GGML type id is unknown to ``gguf`` are kept (``type_name == "UNKNOWN(156)"``,
``nbytes is None``); reading their data raises.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf.quants import dequantize

from .errors import ConvertError, GGUFFormatError
from .plan import KV, Plan, TensorSpec
from .schema import GENERAL_ALIGNMENT, GENERAL_ARCHITECTURE

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 8  # arrays of arrays deeper than this are refused: bounds the recursion
INT64_MAX = 2**63 - 1
HEADER_SIZE = 24  # magic, version u32, tensor count u64, kv count u64

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: numpy dtype of each fixed-size GGUF value type (BOOL as u1: any non-zero byte is true).
_NUMERIC: dict[VT, np.dtype] = {
    VT.UINT8: np.dtype("<u1"), VT.INT8: np.dtype("<i1"), VT.UINT16: np.dtype("<u2"), VT.INT16: np.dtype("<i2"),
    VT.UINT32: np.dtype("<u4"), VT.INT32: np.dtype("<i4"), VT.FLOAT32: np.dtype("<f4"), VT.BOOL: np.dtype("<u1"),
    VT.UINT64: np.dtype("<u8"), VT.INT64: np.dtype("<i8"), VT.FLOAT64: np.dtype("<f8"),
}
_SCALAR_STRUCT = {vt: struct.Struct("<" + c) for vt, c in zip(_NUMERIC, "BbHhIifBQqd", strict=True)}
#: Smallest encoding of one value of each type: the floor used to check counts against the bytes left.
_MIN_SIZE = {**{vt: dt.itemsize for vt, dt in _NUMERIC.items()}, VT.STRING: 8, VT.ARRAY: 12}
#: GGML types whose raw data has a numpy dtype (others are returned as uint8 blocks).
_TYPED = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8, QT.I16: np.int16,
          QT.I32: np.int32, QT.I64: np.int64}
_EXACT = {QT.F64, QT.I8, QT.I16, QT.I32, QT.I64}  # streamed as float64 so that values stay exact
_UNSET: Any = object()


def safe_text(s: str, limit: int = 80) -> str:
    """``s`` made printable on one line (control characters escaped) and cut to ``limit`` characters.

    Example:
        >>> safe_text("a\\nb")
        'a\\\\nb'
    """
    out = s.encode("unicode_escape", "backslashreplace").decode("ascii") if not s.isprintable() else s
    return out if len(out) <= limit else out[: limit - 3] + "..."


def known_type(type_id: int) -> QT | None:
    """The ``GGMLQuantizationType`` of ``type_id``, or None when ``gguf`` does not know its block size."""
    try:
        qt = QT(type_id)
    except ValueError:
        return None
    return qt if qt in GGML_QUANT_SIZES else None


def type_name(type_id: int) -> str:
    """``"Q8_0"`` for a known GGML type id, ``"UNKNOWN(156)"`` otherwise."""
    qt = known_type(type_id)
    return qt.name if qt is not None else f"UNKNOWN({type_id})"


@dataclass(eq=False)
class ReaderKV:
    """One metadata key as stored in the file. Arrays are decoded on first access to :attr:`value`.

    ``offset`` is where the KV record (its key) starts; ``value_offset`` where its value bytes start (for
    arrays: the first element); ``end`` the byte after it. ``count`` is the element count of arrays.
    """

    name: str
    type: VT
    sub_type: VT | None
    offset: int
    value_offset: int
    end: int
    count: int | None = None
    _value: Any = field(default=_UNSET, repr=False)
    _loader: Callable[[], Any] | None = field(default=None, repr=False)

    @property
    def value(self) -> Any:
        """The Python value: int/float/bool/str, or a list (of lists, for nested arrays)."""
        if self._value is _UNSET:
            assert self._loader is not None
            self._value = self._loader()
        return self._value

    def describe(self) -> str:
        """Type as text: ``UINT32`` or ``ARRAY[STRING]``."""
        return f"ARRAY[{self.sub_type.name}]" if self.type == VT.ARRAY and self.sub_type else self.type.name


@dataclass(frozen=True)
class ReaderTensor:
    """One tensor-info record. ``ne`` is in ggml order; ``offset`` is absolute (data section start included)."""

    name: str
    ne: tuple[int, ...]
    ggml_type: int
    type_name: str
    offset: int
    nbytes: int | None  # None when the type id is unknown
    info_offset: int

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy (HF) order: ``ne`` reversed."""
        return tuple(reversed(self.ne))

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n

    @property
    def qtype(self) -> QT | None:
        return known_type(self.ggml_type)


class _Parser:
    """Bounds-checked cursor over the mapped file; every failure names the file, field and byte offset."""

    def __init__(self, buf: mmap.mmap | bytes, size: int, path: str):
        self.buf, self.size, self.path = buf, size, path

    def fail(self, where: str, offset: int, msg: str) -> GGUFFormatError:
        return GGUFFormatError(f"{self.path}: {where} at byte {offset}: {msg}")

    def need(self, pos: int, n: int, where: str) -> None:
        if n > self.size - pos:
            raise self.fail(where, pos, f"truncated: needs {n} bytes, only {max(self.size - pos, 0)} left")

    def u32(self, pos: int, where: str) -> int:
        self.need(pos, 4, where)
        return _U32.unpack_from(self.buf, pos)[0]

    def u64(self, pos: int, where: str) -> int:
        self.need(pos, 8, where)
        return _U64.unpack_from(self.buf, pos)[0]

    def string(self, pos: int, where: str, strict: bool = False) -> tuple[str, int]:
        n = self.u64(pos, where)
        self.need(pos + 8, n, where + " (string length " + str(n) + ")")
        raw = self.buf[pos + 8 : pos + 8 + n]
        try:
            text = raw.decode("utf-8", "strict" if strict else "surrogateescape")
        except UnicodeDecodeError as e:
            raise self.fail(where, pos, f"name is not valid UTF-8 ({e.reason})") from None
        return text, pos + 8 + n

    def vtype(self, pos: int, where: str) -> VT:
        tid = self.u32(pos, where)
        try:
            return VT(tid)
        except ValueError:
            raise self.fail(where, pos, f"unknown GGUF value type {tid}") from None

    def check_count(self, pos: int, count: int, sub: VT, where: str) -> None:
        # Before any loop or allocation: even the smallest encoding of `count` elements must fit.
        if count * _MIN_SIZE[sub] > self.size - pos:
            raise self.fail(where, pos, f"array of {count} {sub.name} needs at least {count * _MIN_SIZE[sub]} "
                                        f"bytes, only {max(self.size - pos, 0)} left")

    def skip_array(self, sub: VT, count: int, pos: int, where: str, depth: int) -> int:
        """Validate an array body starting at ``pos`` without decoding it; return the offset after it."""
        self.check_count(pos, count, sub, where)
        if sub in _NUMERIC:
            return pos + count * _NUMERIC[sub].itemsize
        if sub == VT.STRING:
            buf, size, unpack = self.buf, self.size, _U64.unpack_from
            for i in range(count):  # the hot loop for 130k-token vocabularies: keep it minimal
                if pos + 8 > size:
                    raise self.fail(f"{where} element {i}", pos, "truncated string length")
                n = unpack(buf, pos)[0]
                pos += 8
                if n > size - pos:
                    raise self.fail(f"{where} element {i}", pos - 8, f"string length {n} exceeds the "
                                                                     f"{size - pos} bytes left")
                pos += n
            return pos
        if depth >= MAX_NESTING:
            raise self.fail(where, pos, f"arrays nested deeper than {MAX_NESTING} levels")
        for i in range(count):
            inner = self.vtype(pos, f"{where} element {i} type")
            n = self.u64(pos + 4, f"{where} element {i} count")
            pos = self.skip_array(inner, n, pos + 12, f"{where}[{i}]", depth + 1)
        return pos

    def decode_array(self, sub: VT, count: int, pos: int, depth: int = 1) -> tuple[list[Any], int]:
        """Decode an array body already validated by :meth:`skip_array`."""
        if sub in _NUMERIC:
            end = pos + count * _NUMERIC[sub].itemsize
            arr = np.frombuffer(self.buf[pos:end], dtype=_NUMERIC[sub])
            return (arr != 0).tolist() if sub == VT.BOOL else arr.tolist(), end
        out: list[Any] = []
        if sub == VT.STRING:
            buf, unpack = self.buf, _U64.unpack_from
            for _ in range(count):
                n = unpack(buf, pos)[0]
                out.append(buf[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape"))
                pos += 8 + n
            return out, pos
        for _ in range(count):
            inner = VT(_U32.unpack_from(self.buf, pos)[0])
            n = _U64.unpack_from(self.buf, pos + 4)[0]
            value, pos = self.decode_array(inner, n, pos + 12, depth + 1)
            out.append(value)
        return out, pos

    def string_items(self, body: int, count: int, wanted: set[int]) -> dict[int, str]:
        """Elements ``wanted`` of a validated string array, walking only up to the largest one."""
        out: dict[int, str] = {}
        last = max((i for i in wanted if 0 <= i < count), default=-1)
        pos, buf, unpack = body, self.buf, _U64.unpack_from
        for i in range(last + 1):
            n = unpack(buf, pos)[0]
            if i in wanted:
                out[i] = buf[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape")
            pos += 8 + n
        return out

    def read_kv(self, pos: int, index: int) -> ReaderKV:
        start = pos
        name, pos = self.string(pos, f"KV #{index} name", strict=True)
        where = f"KV #{index} '{safe_text(name)}'"
        vt = self.vtype(pos, where + " type")
        pos += 4
        if vt == VT.ARRAY:
            sub = self.vtype(pos, where + " element type")
            count = self.u64(pos + 4, where + " count")
            body = pos + 12
            end = self.skip_array(sub, count, body, where, depth=1)
            return ReaderKV(name, vt, sub, start, body, end, count,
                            _loader=lambda: self.decode_array(sub, count, body)[0])
        if vt == VT.STRING:
            value, end = self.string(pos, where)
            return ReaderKV(name, vt, None, start, pos, end, _value=value)
        st = _SCALAR_STRUCT[vt]
        self.need(pos, st.size, where)
        value = st.unpack_from(self.buf, pos)[0]
        return ReaderKV(name, vt, None, start, pos, pos + st.size, _value=bool(value) if vt == VT.BOOL else value)

    def read_tensor_info(self, pos: int, index: int, alignment: int) -> tuple[tuple[Any, ...], int]:
        start = pos
        name, pos = self.string(pos, f"tensor #{index} name", strict=True)
        where = f"tensor #{index} '{safe_text(name)}'"
        n_dims = self.u32(pos, where + " n_dims")
        if n_dims > MAX_DIMS:
            raise self.fail(where, pos, f"n_dims is {n_dims}, at most {MAX_DIMS} allowed")
        pos += 4
        self.need(pos, 8 * n_dims, where + " dims")
        ne = struct.unpack_from(f"<{n_dims}Q", self.buf, pos)
        n = 1
        for j, d in enumerate(ne):
            if d == 0 or d > INT64_MAX:
                shown = d if d == 0 else d - 2**64
                raise self.fail(where, pos + 8 * j, f"ne[{j}] is {shown}, dims must be positive")
            n *= d
            if n > INT64_MAX:
                raise self.fail(where, pos, f"element count of ne={list(ne)} overflows int64")
        pos += 8 * n_dims
        type_id = self.u32(pos, where + " type")
        rel = self.u64(pos + 4, where + " offset")
        if rel % alignment:
            raise self.fail(where, pos + 4, f"data offset {rel} is not a multiple of the alignment {alignment}")
        qt = known_type(type_id)
        nbytes = None
        if qt is not None:
            block, type_size = GGML_QUANT_SIZES[qt]
            ne0 = ne[0] if ne else 1  # a 0-d tensor holds one element
            if ne0 % block:
                raise self.fail(where, start, f"ne[0]={ne0} is not a multiple of the {qt.name} block size {block}")
            nbytes = n // block * type_size
        return (name, tuple(ne), type_id, rel, nbytes, start), pos + 12


@dataclass(eq=False)
class GGUFFile:
    """A parsed GGUF file: header, KVs (in file order), tensor infos; tensor data stays on disk until asked."""

    path: Path
    version: int
    alignment: int
    kvs: dict[str, ReaderKV]
    tensors: list[ReaderTensor]
    data_offset: int
    file_size: int
    _ps: Any = field(default=None, repr=False)  # the _Parser over the header mapping (lazy array decoding)
    _data: np.memmap | None = field(default=None, repr=False)
    _index: dict[str, ReaderTensor] | None = field(default=None, repr=False)

    @property
    def kv_order(self) -> list[str]:
        return list(self.kvs)

    @property
    def arch(self) -> str | None:
        v = self.value(GENERAL_ARCHITECTURE)
        return v if isinstance(v, str) else None

    def value(self, key: str, default: Any = None) -> Any:
        """The decoded value of ``key``, or ``default`` when absent."""
        kv = self.kvs.get(key)
        return default if kv is None else kv.value

    def raw_value(self, key: str) -> bytes:
        """The bytes of ``key``'s value as stored (arrays: the elements without type and count)."""
        kv = self.kvs[key]
        return bytes(self._ps.buf[kv.value_offset : kv.end])

    def array_head(self, key: str, n: int) -> list[Any]:
        """The first ``n`` elements of array ``key``, decoding nothing after them."""
        kv = self.kvs[key]
        if kv._value is not _UNSET:
            return list(kv.value[:n])
        assert kv.sub_type is not None and kv.count is not None
        return self._ps.decode_array(kv.sub_type, min(n, kv.count), kv.value_offset)[0]

    def string_items(self, key: str, indices: set[int]) -> dict[int, str]:
        """Elements ``indices`` of string array ``key`` (e.g. special tokens); out-of-range ones are left out."""
        kv = self.kvs[key]
        if kv.sub_type != VT.STRING or kv.count is None:
            return {}
        return self._ps.string_items(kv.value_offset, kv.count, indices)

    def tensor(self, name: str) -> ReaderTensor:
        """The tensor info called ``name``; ConvertError when there is none."""
        if self._index is None:
            self._index = {t.name: t for t in self.tensors}
        if name in self._index:
            return self._index[name]
        raise ConvertError(f"{self.path}: no tensor named '{safe_text(name)}'")

    def _raw_bytes(self, t: ReaderTensor) -> np.ndarray:
        if t.nbytes is None:
            raise GGUFFormatError(f"{self.path}: tensor '{safe_text(t.name)}' at byte {t.info_offset}: "
                                  f"type {t.type_name} is unknown, its data cannot be read")
        if self._data is None:
            try:
                self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
            except (OSError, ValueError) as e:
                raise GGUFFormatError(f"{self.path}: tensor data at byte {self.data_offset}: {e}") from None
        if t.offset + t.nbytes > len(self._data):  # the file shrank since it was parsed
            raise GGUFFormatError(f"{self.path}: tensor '{safe_text(t.name)}' at byte {t.offset}: data past EOF")
        return self._data[t.offset : t.offset + t.nbytes]

    def tensor_bytes(self, name: str) -> np.ndarray:
        """The stored bytes of tensor ``name`` as a flat read-only uint8 memmap view."""
        return self._raw_bytes(self.tensor(name))

    def tensor_data(self, name: str) -> np.ndarray:
        """Raw data as a read-only memmap view in numpy order.

        F32/F16/F64/I8/I16/I32/I64 come typed with shape ``t.shape``; BF16 and quantized types come as uint8
        with shape ``t.shape[:-1] + (bytes per row,)`` (what ``gguf.quants.dequantize`` takes).

        Example:
            >>> read_gguf("model.gguf").tensor_data("output_norm.weight").dtype  # doctest: +SKIP
            dtype('float32')
        """
        t = self.tensor(name)
        raw = self._raw_bytes(t)
        qt = t.qtype
        if qt in _TYPED:
            return raw.view(_TYPED[qt]).reshape(t.shape)
        assert qt is not None and t.nbytes is not None
        rows = t.n_elements // (t.ne[0] if t.ne else 1)
        return raw.reshape(t.shape[:-1] + (t.nbytes // rows,))

    def tensor_array(self, name: str) -> np.ndarray:
        """Values in numpy order: float32 for float and quantized types (dequantized), native ints for I*."""
        t = self.tensor(name)
        raw = self.tensor_data(name)
        qt = t.qtype
        if qt == QT.F32 or qt in (QT.I8, QT.I16, QT.I32, QT.I64):
            return np.asarray(raw)
        if qt in (QT.F16, QT.F64):
            return raw.astype(np.float32)
        return self._dequantize(t, raw).reshape(t.shape)

    def _dequantize(self, t: ReaderTensor, raw: np.ndarray) -> np.ndarray:
        try:
            return dequantize(raw, t.qtype)
        except NotImplementedError:
            raise ConvertError(f"{self.path}: tensor '{safe_text(t.name)}': the gguf package cannot dequantize "
                               f"{t.type_name}") from None

    def iter_chunks(self, name: str, max_elements: int = 1 << 20) -> Iterator[np.ndarray]:
        """Stream the flattened values in 1-D chunks of about ``max_elements``.

        Chunks are float32, or float64 for F64 and integer types (exact). Blocks never straddle chunks, so a
        multi-GB tensor is read with bounded memory.
        """
        t = self.tensor(name)
        raw = self._raw_bytes(t)
        qt = t.qtype
        assert qt is not None and t.nbytes is not None
        block, type_size = GGML_QUANT_SIZES[qt]
        step = max(1, max_elements // block) * type_size
        for start in range(0, t.nbytes, step):
            part = raw[start : start + step]
            if qt in _TYPED:
                vals = part.view(_TYPED[qt])
                yield vals.astype(np.float64 if qt in _EXACT else np.float32)
            else:
                yield self._dequantize(t, part).reshape(-1)

    def close(self) -> None:
        """Drop the file mappings (views already handed out keep their own reference)."""
        self._data = None
        buf = self._ps.buf if self._ps is not None else None
        if isinstance(buf, mmap.mmap):
            try:
                buf.close()
            except BufferError:  # a view still exports it; the GC closes it later
                pass

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Parse the header, KVs and tensor infos of ``path`` (tensor data is not read).

    Raises GGUFFormatError (one line: file, field or tensor, byte offset) for any malformed file.

    Example:
        >>> f = read_gguf("draft.gguf")  # doctest: +SKIP
        >>> f.arch, f.value("dflash.block_size"), f.tensors[0].shape  # doctest: +SKIP
        ('dflash', 16, (4096, 12288))
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < HEADER_SIZE:
                raise GGUFFormatError(f"{p}: header at byte 0: truncated: file has {size} bytes, "
                                      f"a GGUF header needs {HEADER_SIZE}")
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise GGUFFormatError(f"{p}: cannot open: {e.strerror or e}") from None
    try:
        return _parse(_Parser(buf, size, str(p)), p, buf)
    except BaseException:
        buf.close()
        raise


def _parse(ps: _Parser, path: Path, buf: mmap.mmap) -> GGUFFile:
    if buf[:4] != GGUF_MAGIC:
        raise ps.fail("magic", 0, f"expected b'GGUF', found {bytes(buf[:4])!r}: not a GGUF file")
    version = ps.u32(4, "version")
    if version and not version & 0xFFFF:
        raise ps.fail("version", 4, f"big-endian GGUF (version field {version:#010x}) is not supported")
    if version not in SUPPORTED_VERSIONS:
        raise ps.fail("version", 4, f"GGUF version {version} is not supported (only 2 and 3)")
    tensor_count, kv_count = ps.u64(8, "tensor count"), ps.u64(16, "KV count")
    if kv_count * 13 + tensor_count * 24 > ps.size - HEADER_SIZE:  # smallest KV: 13 bytes; tensor info: 24
        raise ps.fail("header", 8, f"{tensor_count} tensors and {kv_count} KVs cannot fit in "
                                   f"{ps.size - HEADER_SIZE} bytes")
    pos, kvs = HEADER_SIZE, {}
    for i in range(kv_count):
        kv = ps.read_kv(pos, i)
        if kv.name in kvs:
            raise ps.fail(f"KV #{i} '{safe_text(kv.name)}'", pos, "duplicate key")
        kvs[kv.name] = kv
        pos = kv.end
    alignment = DEFAULT_ALIGNMENT
    if GENERAL_ALIGNMENT in kvs:
        akv = kvs[GENERAL_ALIGNMENT]
        if akv.type != VT.UINT32 or akv.value == 0 or akv.value & (akv.value - 1):
            raise ps.fail(GENERAL_ALIGNMENT, akv.offset, f"must be a UINT32 power of two, got {akv.describe()} "
                                                         f"{safe_text(repr(akv.value))}")
        alignment = akv.value
    infos = []
    for i in range(tensor_count):
        info, pos = ps.read_tensor_info(pos, i, alignment)
        infos.append(info)
    data_offset = pos + (-pos) % alignment
    tensors, names = [], set()
    for name, ne, type_id, rel, nbytes, info_offset in infos:
        where = f"tensor '{safe_text(name)}'"
        if name in names:
            raise ps.fail(where, info_offset, "duplicate tensor name")
        names.add(name)
        offset = data_offset + rel
        if offset + (nbytes or 0) > ps.size:
            raise ps.fail(where, info_offset, f"data [{offset}, {offset + (nbytes or 0)}) lies past EOF "
                                              f"({ps.size} bytes)")
        tensors.append(ReaderTensor(name, ne, type_id, type_name(type_id), offset, nbytes, info_offset))
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes is not None)
    for (_, end_a, name_a), (start_b, _, name_b) in zip(spans, spans[1:], strict=False):
        if start_b < end_a:
            raise ps.fail(f"tensor '{safe_text(name_b)}'", start_b, f"data overlaps tensor '{safe_text(name_a)}'")
    return GGUFFile(path, version, alignment, kvs, tensors, data_offset, ps.size, _ps=ps)


def plan_from_gguf(path: str | os.PathLike[str]) -> Plan:
    """Describe an existing GGUF file as a :class:`~dspark_convert.plan.Plan` (``origin="file"``).

    KV values are Python values; tensor shapes are in numpy order. Unknown tensor types raise.

    Example:
        >>> plan = plan_from_gguf("draft.gguf")  # doctest: +SKIP
        >>> plan.value("general.architecture")  # doctest: +SKIP
        'dflash'
    """
    with read_gguf(path) as f:
        kvs = [KV(kv.name, kv.type, kv.value, kv.sub_type) for kv in f.kvs.values()]
        tensors = []
        for t in f.tensors:
            if t.qtype is None:
                raise GGUFFormatError(f"{f.path}: tensor '{safe_text(t.name)}' at byte {t.info_offset}: "
                                      f"unknown GGML type {t.type_name}")
            tensors.append(TensorSpec(t.name, t.shape, t.qtype, origin="file"))
        return Plan(arch=f.arch or "", kvs=kvs, tensors=tensors)
