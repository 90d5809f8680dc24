"""A GGUF string array kept in its file encoding, for vocabularies of 100k+ tokens.

A tokenizer block holds two arrays of ~150k-500k strings (tokens, merges). As Python lists they cost ~60 bytes of
object overhead per item and a ``struct.pack`` per item when written; :class:`PackedStrings` keeps the array as the
bytes GGUF stores (``u64 length + UTF-8`` per item), so building it, caching it and writing it are each one bulk
copy, and items are decoded only when something asks for them (a preview, a test).

Example:
    >>> a = PackedStrings.pack([b"hello", "w\\u00f6rld"])
    >>> len(a), a[1], list(a) == ["hello", "w\\u00f6rld"], a.blob[:8]
    (2, 'wörld', True, b'\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00')
"""

from __future__ import annotations

import array
import itertools
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

_U64 = struct.Struct("<Q")
def _utf8(v: object) -> bytes:
    if not isinstance(v, str):
        raise TypeError(f"PackedStrings holds str or bytes, not {type(v).__name__}")
    return v.encode("utf-8")


def _interleave(fields: list[list[bytes]], batch: int = 1 << 14) -> bytes:
    """The GGUF items ``fields[0][i] + fields[1][i] + ...`` (a one-item field repeats), each after its u64
    length, for every ``i``; built in bulk (numpy), ``batch`` items at a time to bound the index arrays."""
    n = max(map(len, fields), default=0)
    out: list[bytes] = []
    for a in range(0, n, batch):
        b = min(n, a + batch)
        parts = [f if len(f) == 1 and n != 1 else f[a:b] for f in fields]
        lens = [np.fromiter(map(len, p), np.int64, len(p)) for p in parts]
        lens = [np.broadcast_to(x, (b - a,)) for x in lens]
        total = np.sum(lens, axis=0, dtype=np.int64)
        counts = np.empty((b - a, 1 + len(parts)), np.int64)
        counts[:, 0] = 8
        for k, x in enumerate(lens):
            counts[:, k + 1] = x
        role = np.repeat(np.tile(np.arange(1 + len(parts), dtype=np.uint8), b - a), counts.ravel())
        buf = np.empty(len(role), np.uint8)
        buf[role == 0] = total.astype("<u8").view(np.uint8)
        for k, p in enumerate(parts):
            joined = b"".join(p) * ((b - a) if len(p) == 1 and n != 1 else 1)
            buf[role == k + 1] = np.frombuffer(joined, np.uint8)
        out.append(buf.tobytes())
    return b"".join(out)


class PackedStrings(Sequence[str]):
    """An immutable sequence of strings stored as GGUF array items (``u64 length`` + UTF-8 bytes each).

    ``blob`` is exactly what follows the array's type and count in a GGUF file. Items decode as UTF-8 on access;
    equality with a list or tuple compares items.
    """

    __slots__ = ("blob", "_count", "_offsets")

    def __init__(self, blob: bytes, count: int) -> None:
        self.blob = blob
        self._count = count
        self._offsets: array.array[int] | None = None

    @classmethod
    def pack(cls, items: Iterable[bytes | str]) -> PackedStrings:
        """Pack ``items`` (UTF-8 bytes, or str encoded as UTF-8) in one pass; TypeError for anything else."""
        return cls.pack_bytes([v if type(v) is bytes else _utf8(v) for v in items])

    @classmethod
    def pack_bytes(cls, items: list[bytes]) -> PackedStrings:
        """Pack a list of UTF-8 ``bytes`` (the caller vouches for the type and the encoding)."""
        return cls(_interleave([items]), len(items))

    @classmethod
    def pack_pairs(cls, left: list[bytes], right: list[bytes]) -> PackedStrings:
        """Pack the items ``left[i] + b" " + right[i]`` without making them (BPE merges)."""
        if len(left) != len(right):
            raise ValueError(f"pack_pairs: {len(left)} left parts, {len(right)} right parts")
        return cls(_interleave([left, [b" "], right]), len(left))

    def __len__(self) -> int:
        return self._count

    def _item_offsets(self) -> array.array[int]:
        if self._offsets is None:  # an array, not a list: 8 bytes an item instead of ~40 (262k tokens: 2 MB)
            out, pos, unpack, blob = array.array("q"), 0, _U64.unpack_from, self.blob
            for _ in range(self._count):
                out.append(pos)
                pos += 8 + unpack(blob, pos)[0]
            if pos != len(blob):
                raise ValueError(f"PackedStrings: {len(blob)} bytes do not hold exactly {self._count} items")
            self._offsets = out
        return self._offsets

    def _item(self, pos: int) -> str:
        n = _U64.unpack_from(self.blob, pos)[0]
        return self.blob[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape")

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._count)
            if step == 1 and start == 0 and self._offsets is None:  # a preview: walk only the first items
                return list(itertools.islice(self, stop))
            return [self[k] for k in range(start, stop, step)]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("PackedStrings index out of range")
        return self._item(self._item_offsets()[i])

    def __iter__(self) -> Iterator[str]:
        pos, blob, unpack = 0, self.blob, _U64.unpack_from
        for _ in range(self._count):
            n = unpack(blob, pos)[0]
            yield blob[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape")
            pos += 8 + n

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedStrings):
            return self._count == other._count and self.blob == other.blob
        if isinstance(other, (list, tuple)):
            return len(other) == self._count and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head: list[Any] = self[:3]
        return f"PackedStrings({head!r}{' ...' if self._count > 3 else ''}, {self._count} items)"
