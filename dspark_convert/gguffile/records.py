"""Low-level GGUF records: value types, KV and tensor-info records, and the bounds-checked parser.

Used by :mod:`dspark_convert.gguffile.reader` (the public API). Every read is checked against the bytes left in the
file before anything is allocated or looped over; failures are :class:`GGUFFormatError` lines naming the
file, the field or tensor, and the byte offset.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import GGUFFormatError
from ..gguf_constants import GGML_QUANT_SIZES, QT, VT
from ..units import size_text

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 8  # arrays of arrays deeper than this are refused: bounds the recursion
INT64_MAX = 2**63 - 1
HEADER_SIZE = 24  # magic, version u32, tensor count u64, kv count u64

#: what a GGUF header may claim before anything is looped over or allocated: far above any real draft or target
#: (a draft has tens of KVs and hundreds of tensors; the largest array is a vocabulary of at most ~300k entries),
#: far below what makes memory explode (1M tiny KVs took 1.5 GB, 300k tensors 885 MB, a 300M-element array 5 GB).
#: Budgets for the whole header too: ``items``, the array elements of every KV together (nested arrays count
#: their own elements and themselves; a 262k-vocabulary target holds about 1.3M), and ``bytes``, the header's
#: size up to the end of the tensor infos (real ones are tens of MB): 18 arrays each under the per-array cap
#: used 2.6 GiB, and so did a 510 MiB string. Overridable through the environment variables of LIMIT_ENV.
HEADER_LIMITS = {"kvs": 65_536, "tensors": 100_000, "array": 1 << 24, "items": 1 << 24, "bytes": 256 << 20}
#: what one element counts in the ``items`` budget when it is itself an array (walking an array header costs
#: about 16 times a number's): 16777216 nested empty arrays took 50 s to walk, 1048576 take 3 s
ARRAY_ITEM_WEIGHT = 16
LIMIT_ENV = {"kvs": "DSPARK_CONVERT_GGUF_MAX_KVS", "tensors": "DSPARK_CONVERT_GGUF_MAX_TENSORS",
             "array": "DSPARK_CONVERT_GGUF_MAX_ARRAY", "items": "DSPARK_CONVERT_GGUF_MAX_ITEMS",
             "bytes": "DSPARK_CONVERT_GGUF_MAX_HEADER_BYTES"}


def header_limit(what: str) -> int:
    """The limit ``what`` (``kvs``, ``tensors``, ``array``): its environment variable when set to a positive
    integer, else :data:`HEADER_LIMITS`."""
    import os

    raw = os.environ.get(LIMIT_ENV[what], "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else HEADER_LIMITS[what]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: struct code of each fixed-size GGUF value type (BOOL as a byte: any non-zero byte is true).
_NUMERIC: dict[VT, str] = {VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
                           VT.FLOAT32: "f", VT.BOOL: "B", VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT64: "d"}
_SCALAR_STRUCT = {vt: struct.Struct("<" + c) for vt, c in _NUMERIC.items()}
_ITEM_SIZE = {vt: s.size for vt, s in _SCALAR_STRUCT.items()}
#: Smallest encoding of one value of each type: the floor used to check counts against the bytes left.
_MIN_SIZE = {**_ITEM_SIZE, VT.STRING: 8, VT.ARRAY: 12}
_UNSET: Any = object()  # ReaderKV value not decoded yet


def safe_text(s: str, limit: int = 80) -> str:
    """``s`` made printable on one line (control characters escaped) and cut to ``limit`` characters.

    Example:
        >>> safe_text("a\\nb")
        'a\\\\nb'
    """
    out = s.encode("unicode_escape", "backslashreplace").decode("ascii") if not s.isprintable() else s
    return out if len(out) <= limit else out[: limit - 3] + "..."


def header_limit_text(n: int) -> str:
    """``536870912`` -> ``'512 MiB'`` (whole MiB), else the byte count."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else size_text(n)


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

    @property
    def loaded(self) -> bool:
        """Whether :attr:`value` is decoded already (scalars always are)."""
        return self._value is not _UNSET

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
        return math.prod(self.ne)

    @property
    def qtype(self) -> QT | None:
        return known_type(self.ggml_type)


#: The bytes of a file read so far (a local file's mapping holds all of them; a remote file's buffer grows).
Buffer = mmap.mmap | bytes | bytearray
#: ``grow(end)`` makes the buffer hold at least bytes ``[0, end)`` (``end <= limit``) and returns it.
Grow = Callable[[int], Buffer]


class RecordParser:
    """Bounds-checked cursor over a file's bytes; every failure names the file, field and byte offset.

    ``size`` is the file size: counts and lengths are checked against it (truncation) and, for a remote file,
    against ``limit``, the most bytes its header may take, *before* anything is fetched, allocated or looped
    over. ``buf`` may hold only a prefix of the file: reads past its end call ``grow`` (a local file's
    mapping is complete, so ``grow`` is None there). One parser serves both, so local and remote files are
    held to the same rules.
    """

    def __init__(self, buf: Buffer, size: int, path: str, *, grow: Grow | None = None, limit: int | None = None):
        self.buf, self.size, self.path = buf, size, path
        self.budget = header_limit("bytes")  # local and remote headers alike
        self.remote_limit = limit
        self.limit = min(size, self.budget, size if limit is None else limit)
        self.items = 0  # array elements seen so far in the whole header (the ``items`` budget)
        self._grow = grow

    def fail(self, where: str, offset: int, msg: str) -> GGUFFormatError:
        return GGUFFormatError(f"{self.path}: {where} at byte {offset:,}: {msg}")

    def short(self, where: str, pos: int, n: int) -> GGUFFormatError:
        """The error for ``n`` bytes at ``pos`` that do not fit: past the header limit, or past the end."""
        if n <= self.size - pos:
            if self.remote_limit is not None and self.remote_limit <= self.budget:
                return self.fail(where, pos, f"needs {size_text(n)}, which takes the header past the "
                                             f"{header_limit_text(self.limit)} limit for remote files "
                                             f"(max_header_bytes; --max-header-mib raises it)")
            return self.fail(where, pos, f"needs {size_text(n)}, which takes the header past the "
                                         f"{header_limit_text(self.budget)} budget for a whole GGUF header (set "
                                         f"{LIMIT_ENV['bytes']} to raise it)")
        return self.fail(where, pos, f"truncated: needs {size_text(n)}, only {size_text(max(self.size - pos, 0))} left")

    def need(self, pos: int, n: int, where: str) -> None:
        if n > self.limit - pos:
            raise self.short(where, pos, n)
        if pos + n > len(self.buf):
            self.ensure(pos + n)

    def ensure(self, end: int) -> None:
        """Make ``buf`` hold bytes ``[0, end)`` (``end`` already checked against ``limit``)."""
        if end > len(self.buf):
            assert self._grow is not None, "a local file's mapping holds every byte"
            self.buf = self._grow(end)

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

    def check_count(self, pos: int, count: int, sub: VT, where: str, tally: bool = True) -> None:
        # Before any loop or allocation: even the smallest encoding of `count` elements must fit.
        need = count * _MIN_SIZE[sub]
        if need > self.limit - pos:
            if need <= self.size - pos:
                raise self.short(f"{where} (array of {count:,} {sub.name})", pos, need)
            raise self.fail(where, pos, f"array of {count:,} {sub.name} needs at least {size_text(need)}, "
                                        f"only {size_text(max(self.size - pos, 0))} left")
        cap = header_limit("array")
        if count > cap:
            raise self.fail(where, pos, f"array of {count:,} {sub.name}, over the limit of {cap:,} elements (a real "
                                        f"GGUF's largest array is its vocabulary; set {LIMIT_ENV['array']} to raise it)")
        if not tally:
            return
        self.items += count * (ARRAY_ITEM_WEIGHT if sub == VT.ARRAY else 1)
        budget = header_limit("items")
        if self.items > budget:
            raise self.fail(where, pos, f"array of {count:,} {sub.name} takes the header to {self.items:,} array "
                                        f"elements, over the budget of {budget:,} for a whole GGUF header (set "
                                        f"{LIMIT_ENV['items']} to raise it)")

    def skip_array(self, sub: VT, count: int, pos: int, where: str, depth: int, tally: bool = True) -> int:
        """Validate an array body starting at ``pos`` without decoding it; return the offset after it. ``tally``:
        count its elements in :attr:`items` (the header's budget; false when walking a validated array again)."""
        self.check_count(pos, count, sub, where, tally)
        if sub in _NUMERIC:
            return pos + count * _ITEM_SIZE[sub]
        if sub == VT.STRING:
            # fast path: unchecked walk; positions only grow, so end <= limit proves every read was in range. A
            # remote buffer that ends inside the array is grown and the walk resumed where it stopped.
            end, done = pos, 0
            while True:
                end, n = self.walk_strings_until_short(end, count - done)
                done += n
                if end > self.limit:
                    break
                if done == count:
                    return end
                if self._grow is None or end + 8 > self.limit:  # the length at `end` is not in the file
                    break
                self.ensure(end + 8)
            return self.walk_strings_checked(pos, count, where)  # names the bad element
        if depth >= MAX_NESTING:
            raise self.fail(where, pos, f"arrays nested deeper than {MAX_NESTING} levels")
        for i in range(count):
            inner = self.vtype(pos, f"{where} element {i} type")
            n = self.u64(pos + 4, f"{where} element {i} count")
            pos = self.skip_array(inner, n, pos + 12, f"{where}[{i}]", depth + 1, tally)
        return pos

    def walk_strings(self, pos: int, count: int) -> int:
        """Offset after ``count`` strings starting at ``pos``, without bounds checks (the 130k-token hot loop)."""
        buf, unpack = self.buf, _U64.unpack_from
        for _ in range(count):
            pos += 8 + unpack(buf, pos)[0]
        return pos

    def walk_strings_until_short(self, pos: int, count: int) -> tuple[int, int]:
        """Walk up to ``count`` strings from ``pos`` like :meth:`walk_strings`; stop where a length lies past the
        buffer. Returns the offset reached and the number of strings walked."""
        buf, unpack = self.buf, _U64.unpack_from
        i = 0
        try:
            for i in range(count):  # noqa: B007 (i is read after the loop)
                pos += 8 + unpack(buf, pos)[0]
        except (struct.error, OverflowError):
            return pos, i
        return pos, count

    def walk_strings_checked(self, pos: int, count: int, where: str) -> int:
        """:meth:`walk_strings` with a check per element, to name the bad element and its offset (and to fetch
        more of a remote header as the walk goes)."""
        size, limit, unpack = self.size, self.limit, _U64.unpack_from
        for i in range(count):
            if pos + 8 > limit:
                if pos + 8 <= size:
                    raise self.short(f"{where} element {i}", pos, 8)
                raise self.fail(f"{where} element {i}", pos, "truncated string length")
            if pos + 8 > len(self.buf):
                self.ensure(pos + 8)
            n = unpack(self.buf, pos)[0]
            if n > limit - pos - 8:
                if n <= size - pos - 8:
                    raise self.short(f"{where} element {i}", pos, 8 + n)
                raise self.fail(f"{where} element {i}", pos, f"string length {n} exceeds the {size - pos - 8} "
                                                             f"bytes left")
            pos += 8 + n
        return pos

    def decode_array(self, sub: VT, count: int, pos: int, limit: int | None = None,
                     need_end: bool = True) -> tuple[list[Any], int]:
        """Decode an array body already validated by :meth:`skip_array`: all items, or the first ``limit`` at
        every nesting level (so a preview never decodes a huge inner array). Returns the items and the offset
        after the array (the offset where decoding stopped when ``need_end`` is false)."""
        take = count if limit is None else min(count, limit)
        if sub in _NUMERIC:
            values = list(struct.unpack_from(f"<{take}{_NUMERIC[sub]}", self.buf, pos))
            return [v != 0 for v in values] if sub == VT.BOOL else values, pos + count * _ITEM_SIZE[sub]
        out: list[Any] = []
        if sub == VT.STRING:
            buf, unpack = self.buf, _U64.unpack_from
            for _ in range(take):
                n = unpack(buf, pos)[0]
                out.append(buf[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape"))
                pos += 8 + n
            return out, self.walk_strings(pos, count - take) if need_end else pos
        for i in range(count if need_end else take):
            inner = VT(_U32.unpack_from(self.buf, pos)[0])
            n = _U64.unpack_from(self.buf, pos + 4)[0]
            if i < take:
                value, pos = self.decode_array(inner, n, pos + 12, limit)
                out.append(value)
            else:  # validated at parse time: cannot fail
                pos = self.skip_array(inner, n, pos + 12, "", depth=0, tally=False)
        return out, pos

    def string_items(self, body: int, count: int, wanted: set[int]) -> dict[int, str]:
        """Elements ``wanted`` of a validated string array, walking only up to the largest one."""
        out: dict[int, str] = {}
        pos, done = body, 0
        for i in sorted(i for i in wanted if 0 <= i < count):
            pos = self.walk_strings(pos, i - done)
            n = _U64.unpack_from(self.buf, pos)[0]
            out[i] = self.buf[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape")
            done = i
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
