"""A GGUF v2/v3 reader that survives hostile files and opens multi-GB files in milliseconds.

Why not ``gguf.GGUFReader``: it builds numpy objects for every field and string (slow for 130k-token
vocabularies), trusts counts and lengths from the file, and crashes on unknown GGML type ids. This reader:

* checks every count and length against the bytes left in the file *before* allocating or looping, so each
  loop is bounded by the file size and a 2^60-element array is refused at once;
* walks big arrays (tokens, merges) without decoding them and decodes them on first access to
  :attr:`ReaderKV.value`;
* never reads tensor data while parsing: :meth:`GGUFFile.tensor_data` returns a lazily created
  ``np.memmap`` view;
* parses remote files with the same code: :func:`parse_gguf` takes a :class:`RecordParser` whose buffer may
  hold only a prefix of the file and grows on demand (see :mod:`dspark_convert.gguffile.remote`);
* raises :class:`~dspark_convert.errors.GGUFFormatError` with one line naming the file, the field or tensor,
  and the byte offset for anything malformed (truncation, wrong magic or version, unknown value types, bad
  dims, data past EOF, overlapping or misaligned tensors, duplicate names, ...).

Tensors whose GGML type id is unknown to ``gguf`` are kept (``type_name == "UNKNOWN(156)"``,
``nbytes is None``); reading their data raises.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConvertError, GGUFFormatError
from ..gguf_constants import GGML_QUANT_SIZES, QT, VT
from ..plan import KV, Plan, TensorSpec
from ..safeio import open_regular
from ..schema import GENERAL_ALIGNMENT, GENERAL_ARCHITECTURE
from ..units import size_text
from .packed import PackedStrings
from .records import (
    DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    HEADER_SIZE,
    LIMIT_ENV,
    SUPPORTED_VERSIONS,
    ReaderKV,
    ReaderTensor,
    RecordParser,
    header_limit,
    safe_text,
    type_name,
)

if TYPE_CHECKING:
    import numpy as np

#: GGML types whose raw data has a numpy dtype (others are returned as uint8 blocks). numpy is imported only
#: when tensor data is read: header views (inspect, check) never load it.
_TYPED = {QT.F32: "float32", QT.F16: "float16", QT.F64: "float64", QT.I8: "int8", QT.I16: "int16",
          QT.I32: "int32", QT.I64: "int64"}
_EXACT = {QT.F64, QT.I8, QT.I16, QT.I32, QT.I64}  # streamed as float64 so that values stay exact



@dataclass(eq=False)
class GGUFFile:
    """A parsed GGUF file: header, KVs (in file order), tensor infos; tensor data stays on disk until asked.

    ``path`` names the file in messages and output: a local path, or for a file read over HTTP the reference as
    given (``hf://org/repo/file.gguf``, a URL). ``source`` describes a remote read (None for local files); a
    header-only remote file has no tensor data to read.
    """

    path: Path | str
    version: int
    alignment: int
    kvs: dict[str, ReaderKV]
    tensors: list[ReaderTensor]
    data_offset: int
    file_size: int
    header_end: int = 0  # the byte after the last tensor info: what a remote read must fetch at least
    source: Any = field(default=None)  # a remote.SourceInfo for files read over HTTP
    _ps: Any = field(default=None, repr=False)  # the RecordParser over the header mapping (lazy array decoding)
    _data: np.memmap | None = field(default=None, repr=False)
    _index: dict[str, ReaderTensor] | None = field(default=None, repr=False)

    @property
    def header_only(self) -> bool:
        """True for a file read over HTTP: its header is here, its tensor data is not read (not fetched, or, for a
        file smaller than the first window, fetched with the header but not kept: ``source.header_only`` is then
        false, and tensor data is still not read from it)."""
        return bool(self.source is not None and self.source.kind in ("url", "hub"))

    @property
    def arch(self) -> str | None:
        """``general.architecture``, or None when absent or not a string."""
        v = self.value(GENERAL_ARCHITECTURE)
        return v if isinstance(v, str) else None

    def value(self, key: str, default: Any = None) -> Any:
        """The decoded value of ``key``, or ``default`` when absent."""
        kv = self.kvs.get(key)
        return default if kv is None else kv.value

    def raw_value(self, key: str) -> memoryview:
        """The bytes of ``key``'s value as stored (arrays: the elements without type and count), not copied."""
        kv = self.kvs[key]
        return memoryview(self._ps.buf)[kv.value_offset : kv.end]

    def record_bytes(self, key: str) -> bytes:
        """The whole record of ``key`` as stored (key name, type, value): what a writer copies to keep it."""
        kv = self.kvs[key]
        return bytes(memoryview(self._ps.buf)[kv.offset : kv.end])

    def array_head(self, key: str, n: int) -> list[Any]:
        """The first ``n`` elements of array ``key`` (nested arrays: the first ``n`` at every level), decoding
        nothing after them."""
        kv = self.kvs[key]
        assert kv.sub_type is not None and kv.count is not None
        return self._ps.decode_array(kv.sub_type, kv.count, kv.value_offset, limit=n, need_end=False)[0]

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
            raise GGUFFormatError(f"{self.path}: tensor '{safe_text(t.name)}' at byte {t.info_offset:,}: "
                                  f"type {t.type_name} is unknown, its data cannot be read")
        if self.header_only:
            raise ConvertError(f"{self.path}: tensor '{safe_text(t.name)}': tensor data is not read from remote "
                               f"files (only the header is fetched); download the file to read its data")
        if self._data is None:
            import numpy as np

            try:
                self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
            except (OSError, ValueError) as e:
                raise GGUFFormatError(f"{self.path}: tensor data at byte {self.data_offset:,}: {e}") from None
        if t.offset + t.nbytes > len(self._data):  # the file shrank since it was parsed
            raise GGUFFormatError(f"{self.path}: tensor '{safe_text(t.name)}' at byte {t.offset:,}: data past EOF")
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
            import numpy as np

            return np.asarray(raw)
        if qt in (QT.F16, QT.F64):
            return raw.astype("float32")
        return self._dequantize(t, raw).reshape(t.shape)

    def _dequantize(self, t: ReaderTensor, raw: np.ndarray) -> np.ndarray:
        qt = t.qtype  # None (an unknown type id) is refused by _raw_bytes first; it gets the same error here
        if qt is not None:
            from gguf.quants import dequantize

            try:
                return dequantize(raw, qt)
            except NotImplementedError:
                pass
        raise ConvertError(f"{self.path}: tensor '{safe_text(t.name)}': the gguf package cannot dequantize "
                           f"{t.type_name}")

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
                yield vals.astype("float64" if qt in _EXACT else "float32")
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
        with open_regular(p) as fh:  # a FIFO or a device: one line, never a hang (mmap needs a regular file)
            size = os.fstat(fh.fileno()).st_size
            if size < HEADER_SIZE:
                raise GGUFFormatError(f"{p}: header at byte 0: truncated: file has {size_text(size)}, "
                                      f"a GGUF header needs {size_text(HEADER_SIZE)}")
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise GGUFFormatError(f"{p}: cannot open: {e.strerror or e}") from None
    try:
        return parse_gguf(RecordParser(buf, size, str(p)), p)
    except BaseException:
        buf.close()
        raise


def parse_gguf(ps: RecordParser, path: Path | str, source: Any = None) -> GGUFFile:
    """Parse the header, KVs and tensor infos through ``ps`` (local mapping or growing remote buffer).

    Every count is checked against ``ps.limit`` before it is looped over; on return ``ps.buf`` holds the whole
    header (up to the end of the tensor infos), so KV arrays decode later without further reads.
    """
    ps.need(0, HEADER_SIZE, "header")
    if ps.buf[:4] != GGUF_MAGIC:
        raise ps.fail("magic", 0, f"expected b'GGUF', found {bytes(ps.buf[:4])!r}: not a GGUF file")
    version = ps.u32(4, "version")
    if version and not version & 0xFFFF:
        raise ps.fail("version", 4, f"big-endian GGUF (version field {version:#010x}) is not supported")
    if version not in SUPPORTED_VERSIONS:
        raise ps.fail("version", 4, f"GGUF version {version} is not supported (only 2 and 3)")
    tensor_count, kv_count = ps.u64(8, "tensor count"), ps.u64(16, "KV count")
    smallest = kv_count * 13 + tensor_count * 24  # smallest KV: 13 bytes; tensor info: 24
    if smallest > ps.limit - HEADER_SIZE:
        if smallest <= ps.size - HEADER_SIZE:
            raise ps.short(f"header ({tensor_count:,} tensors and {kv_count:,} KVs)", HEADER_SIZE, smallest)
        raise ps.fail("header", 8, f"{tensor_count:,} tensors and {kv_count:,} KVs cannot fit in "
                                   f"{size_text(ps.size - HEADER_SIZE)}")
    for what, count, pos in (("kvs", kv_count, 16), ("tensors", tensor_count, 8)):
        if count > header_limit(what):
            noun = "KVs" if what == "kvs" else "tensors"
            raise ps.fail("header", pos, f"claims {count:,} {noun}, over the limit of {header_limit(what):,} (a real "
                                         f"GGUF has far fewer; set {LIMIT_ENV[what]} to raise it)")
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
            shown = f"{akv.count} items" if akv.type == VT.ARRAY else safe_text(repr(akv.value))
            raise ps.fail(GENERAL_ALIGNMENT, akv.offset, f"must be a UINT32 power of two, got {akv.describe()} "
                                                         f"{shown}")
        alignment = akv.value
    infos = []
    for i in range(tensor_count):
        info, pos = ps.read_tensor_info(pos, i, alignment)
        infos.append(info)
    ps.ensure(pos)  # the tail of the last KV array may not be fetched yet: its items decode lazily
    data_offset = pos + (-pos) % alignment
    tensors, names = [], set()
    for name, ne, type_id, rel, nbytes, info_offset in infos:
        where = f"tensor '{safe_text(name)}'"
        if name in names:
            raise ps.fail(where, info_offset, "duplicate tensor name")
        names.add(name)
        offset = data_offset + rel
        if offset + (nbytes or 0) > ps.size:
            raise ps.fail(where, info_offset, f"data [{offset:,}, {offset + (nbytes or 0):,}) lies past the end "
                                              f"of the file, which has {size_text(ps.size)}")
        tensors.append(ReaderTensor(name, ne, type_id, type_name(type_id), offset, nbytes, info_offset))
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes is not None)
    for (_, end_a, name_a), (start_b, _, name_b) in zip(spans, spans[1:], strict=False):
        if start_b < end_a:
            raise ps.fail(f"tensor '{safe_text(name_b)}'", start_b, f"data overlaps tensor '{safe_text(name_a)}'")
    return GGUFFile(path, version, alignment, kvs, tensors, data_offset, ps.size, header_end=pos, source=source,
                    _ps=ps)


def plan_value(f: GGUFFile, kv: ReaderKV) -> Any:
    """A KV's value for a plan: string arrays (vocabularies) stay in their file encoding, undecoded."""
    if kv.type == VT.ARRAY and kv.sub_type == VT.STRING and kv.count is not None and not kv.loaded:
        return PackedStrings(bytes(f.raw_value(kv.name)), kv.count)
    return kv.value


def plan_from_gguf(path: str | os.PathLike[str]) -> Plan:
    """Describe an existing GGUF file as a :class:`~dspark_convert.plan.Plan` (``origin="file"``).

    KV values are Python values; tensor shapes are in numpy order. Unknown tensor types raise.

    Example:
        >>> plan = plan_from_gguf("draft.gguf")  # doctest: +SKIP
        >>> plan.value("general.architecture")  # doctest: +SKIP
        'dflash'
    """
    with read_gguf(path) as f:
        return plan_from_file(f)


def plan_from_file(f: GGUFFile) -> Plan:
    """:func:`plan_from_gguf` of an already opened file (local, or a remote header)."""
    kvs = [KV(kv.name, kv.type, plan_value(f, kv), kv.sub_type) for kv in f.kvs.values()]
    tensors = []
    for t in f.tensors:
        if t.qtype is None:
            raise GGUFFormatError(f"{f.path}: tensor '{safe_text(t.name)}' at byte {t.info_offset:,}: "
                                  f"unknown GGML type {t.type_name}")
        tensors.append(TensorSpec(t.name, t.shape, t.qtype, origin="file"))
    return Plan(arch=f.arch or "", kvs=kvs, tensors=tensors)
