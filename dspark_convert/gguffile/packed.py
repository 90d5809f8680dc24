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

_U64 = struct.Struct("<Q")
_LENGTHS = [_U64.pack(n) for n in range(1024)]  # the u64 length prefix of short items


def _join(pieces: Iterable[bytes], batch: int = 1 << 14) -> bytes:
    """``b"".join(pieces)`` in batches: a join holds an 80-byte buffer record per piece, 24 MB for the 300k
    pieces of a 150k-token vocabulary."""
    it = iter(pieces)
    out = []
    while chunk := list(itertools.islice(it, batch)):
        out.append(b"".join(chunk))
    return b"".join(out)


def _utf8(v: object) -> bytes:
    if not isinstance(v, str):
        raise TypeError(f"PackedStrings holds str or bytes, not {type(v).__name__}")
    return v.encode("utf-8")


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
        lens = list(map(len, items))
        if lens and max(lens) < len(_LENGTHS):  # the usual case: length prefixes from a table
            prefixes: Iterable[bytes] = map(_LENGTHS.__getitem__, lens)
        else:
            prefixes = map(_U64.pack, lens)
        return cls(_join(itertools.chain.from_iterable(zip(prefixes, items, strict=True))), len(items))

    @classmethod
    def pack_pairs(cls, left: list[bytes], right: list[bytes]) -> PackedStrings:
        """Pack the items ``left[i] + b" " + right[i]`` without making them (BPE merges)."""
        lens = list(map(len, left))
        lens = list(map(int.__add__, lens, map(len, right)))
        if lens and max(lens) < len(_LENGTHS) - 1:
            prefixes: Iterable[bytes] = map(_LENGTHS[1:].__getitem__, lens)
        else:
            prefixes = map(_U64.pack, map((1).__add__, lens))
        space = itertools.repeat(b" ", len(left))
        return cls(_join(itertools.chain.from_iterable(zip(prefixes, left, space, right, strict=True))), len(left))

    def __len__(self) -> int:
        return self._count

    def _item_offsets(self) -> array.array[int]:
        if self._offsets is None:  # an array, not a list: 8 bytes an item instead of ~40 (262k tokens: 2 MB)
            out, pos, unpack, blob = array.array("q"), 0, _U64.unpack_from, self.blob
            for _ in range(self._count):
                out.append(pos)
                pos += 8 + unpack(blob, pos)[0]
            if pos != len(blob):
                raise ValueError(f"PackedStrings: {len(blob):,} bytes do not hold exactly {self._count} items")
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
