"""The strings of a tokenizer.json's vocabulary and merges found, checked, looked up and packed with numpy.

:mod:`~dspark_convert.tokenizer.tokjson` cuts the vocabulary and merges into ``bytes`` objects; for Gemma 3's
262k tokens and 515k merges that is 1.5M objects, each hashed and looked up in a set. Here the same work runs on
arrays over the file's bytes, a few MiB at a time:

- :func:`scan` finds the strings of a span (quotes, escaped quotes, backslashes), refuses raw control characters,
  bad UTF-8 and backslashes outside strings as :mod:`~dspark_convert.tokenizer.tokjson` does, decodes the few
  escaped strings with ``json`` and returns the strings' bytes joined, their lengths and what lies between them
  without whitespace (the grammar, which the caller compares with the one it expects);
- :class:`VocabIndex` answers "is this span a token" for many spans at once: 64-bit hashes of the spans, looked
  up in the sorted hashes of the vocabulary, and every hit confirmed 8 bytes at a time against the token, so a
  hash collision cannot make a non-token pass;
- :func:`pack_pairs` writes the GGUF items ``left + " " + right`` (u64 length, bytes) of the merges in one go.

Whatever these functions do not take with certainty returns None (the caller takes the ``bytes`` path) or
raises :class:`~dspark_convert.tokenizer.tokjson.NotFast` where the ``bytes`` path would.
"""

from __future__ import annotations

import array
import io
import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import overload

import numpy as np
import numpy.typing as npt

from ..formats.native import kernels
from .tokjson import Layout, NotFast, Raw, cut_chunks, unescape_all

_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_MUL = np.uint64(0x9E3779B97F4A7C15)
_SEED = np.uint64(0xC2B2AE3D27D4EB4F)
_SHIFT = np.uint64(31)

Ints = npt.NDArray[np.int64]
CHUNK = 1 << 20  # bytes of the file scanned at a time
_PAIR = b'["",""],'  # the grammar of one merge pair


@dataclass
class Strings:
    """The strings of a span: ``data`` their decoded UTF-8 joined (8 zero bytes after), ``lens`` their lengths,
    ``starts`` where each begins in ``data``, ``grammar`` the bytes outside them minus JSON whitespace (each
    string's two quotes included), ``outside`` the same with whitespace."""

    data: npt.NDArray[np.uint8]
    lens: Ints
    starts: Ints
    grammar: bytes
    outside: bytes  # the bytes outside them, whitespace included

    def __len__(self) -> int:
        return len(self.lens)


def scan(raw: Raw, a: int, b: int) -> Strings | None:
    """The strings of ``raw[a:b]`` (which must begin outside a string); None when ``b`` lies inside one."""
    c = np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a)
    q, backslash = _quotes(raw, a, b, c)
    if len(q) % 2:
        return None
    opens, closes = q[0::2] + 1, q[1::2]
    bounds = np.empty(len(q) + 2, dtype=np.int64)
    bounds[0], bounds[1:-1:2], bounds[2:-1:2], bounds[-1] = 0, opens, closes, len(c)
    runs = np.diff(bounds)  # outside, inside, outside, ..., outside
    pattern = np.zeros(len(runs), dtype=bool)
    pattern[1::2] = True
    inside = np.repeat(pattern, runs)
    body = c[inside]
    if len(body) and body.min() < 32:
        raise NotFast  # JSON strings hold control characters only escaped
    outside = c[~inside].tobytes()
    grammar = outside.translate(None, b" \t\n\r")
    del inside
    lens = (closes - opens).astype(np.int64)
    if backslash:
        bs = np.flatnonzero(c == 92)
        k = np.searchsorted(opens, bs, side="right") - 1
        if len(bs) and (k.min() < 0 or np.any(bs >= closes[k])):
            raise NotFast  # a backslash outside a string
        body, lens = _unescaped(body, lens, np.unique(k))
    data = np.zeros(len(body) + 8, dtype=np.uint8)
    data[: len(body)] = body
    starts = np.cumsum(lens) - lens
    return Strings(data, lens, starts, grammar, outside)


def _quotes(raw: Raw, a: int, b: int, c: npt.NDArray[np.uint8]) -> tuple[Ints, bool]:
    """The positions (in ``c``, the bytes ``raw[a:b]``) of the quotes that are not escaped, and whether the span
    holds a backslash."""
    q = np.flatnonzero(c == 34)
    backslash = raw.find(b"\\", a, b) >= 0
    if backslash:  # drop the escaped quotes (an odd run of backslashes before them)
        after = np.flatnonzero(c[q - 1] == 92) if len(q) else q
        after = after[q[after] > 0]
        odd = np.zeros(len(after), dtype=bool)  # whether the run of backslashes before each is odd
        pos, live, k = q[after], np.arange(len(after)), 1
        while len(live):  # every run is at least k long: does it go on?
            odd[live] = ~odd[live]
            k += 1
            at = pos[live] - k
            live = live[at >= 0]
            live = live[c[pos[live] - k] == 92]
        if odd.any():
            q = np.delete(q, after[odd])
    return q, backslash


def _ranges(c: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> npt.NDArray[np.uint8]:
    """The spans ``c[starts[i] : starts[i] + lens[i]]`` joined."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.uint8)
    offsets = np.cumsum(lens) - lens
    return c[np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lens)]


_WHITESPACE = b" \t\n\r"


def scan_pairs(raw: Raw, a: int, b: int, end: int) -> Strings | None:
    """:func:`scan` of ``raw[a:b]`` (a piece of the merges array ``[a, end)``), for pretty-printed pair-form
    merges, whose bytes are mostly whitespace outside the strings: the strings are gathered from their quotes, and
    the text between them is read from the span with its whitespace deleted (``bytes.translate``), so no per-byte
    mask of the span is made. When that text is exactly ``["",""],`` per pair (the last comma absent at ``end``)
    the result equals :func:`scan`'s except ``outside``, which holds the grammar (no whitespace); any other span,
    and one with a space in a string (where deleting whitespace would change a string), is read by :func:`scan`.
    The compiled kernel (:mod:`~dspark_convert.formats.native`) reads the plain pieces in one pass; whatever it
    does not take goes the way described."""
    native = kernels()
    if native is not None and (got := _plain_pairs(native, raw, a, b, b >= end)) is not None:
        return got
    c = np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a)
    q, backslash = _quotes(raw, a, b, c)
    if len(q) % 2:
        return None
    opens, closes = q[0::2] + 1, q[1::2]
    lens = (closes - opens).astype(np.int64)
    body = _ranges(c, opens, lens)
    if len(body) and body.min() < 32:
        raise NotFast  # JSON strings hold control characters only escaped
    escaped = np.zeros(0, dtype=np.int64)
    if backslash:
        inner = np.flatnonzero(body == 92)
        if len(inner) != np.count_nonzero(c == 92):
            raise NotFast  # a backslash outside a string
        escaped = np.unique(np.searchsorted(np.cumsum(lens), inner, side="right"))
    if len(lens) % 2 or not len(lens) or np.any(body == 32):
        return scan(raw, a, b)
    # no whitespace lies in a string and no backslash outside one: deleting the whitespace keeps every string,
    # and the unescaped quotes of the compact text are those of the span, in order
    compact = raw[a:b].translate(None, _WHITESPACE)
    cc = np.frombuffer(compact, dtype=np.uint8)
    qc, _ = _quotes(compact, 0, len(compact), cc)
    last = b >= end
    tail = b'"]' if last else b'"],'
    if len(qc) != len(q) or qc[0] != 1 or cc[0] != 91 or compact[int(qc[-1]):] != tail:
        return scan(raw, a, b)
    left_close, right_open = qc[1::4], qc[2::4]  # '","' inside a pair
    right_close, next_open = qc[3::4][:-1], qc[4::4]  # '"],["' between pairs
    if (np.any(right_open - left_close != 2) or np.any(cc[left_close + 1] != 44)
            or np.any(next_open - right_close != 4) or np.any(cc[right_close + 1] != 93)
            or np.any(cc[right_close + 2] != 44) or np.any(cc[right_close + 3] != 91)):
        return scan(raw, a, b)
    grammar = _PAIR * (len(lens) // 2) if not last else (_PAIR * (len(lens) // 2))[:-1]
    if backslash:
        body, lens = _unescaped(body, lens, escaped)
    data = np.zeros(len(body) + 8, dtype=np.uint8)
    data[: len(body)] = body
    starts = np.cumsum(lens) - lens
    return Strings(data, lens, starts, grammar, grammar)


def _plain_pairs(native: ModuleType, raw: Raw, a: int, b: int, last: bool) -> Strings | None:
    """:func:`scan_pairs`'s result for a piece of plain pair merges, read by the compiled kernel; None when the
    piece is not plain (a space or control byte in a string, any other grammar)."""
    body = np.empty(b - a + 8, np.uint8)
    lens = np.empty((b - a) // 4 + 2, np.int64)  # a pair takes at least 8 bytes: ["",""],
    got = native.scan_pairs(np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a), body, lens, last)
    if got is None:
        return None
    n, size = got
    text, lens = _kernel_strings(body, size, lens[:n])
    data = np.zeros(len(text) + 8, dtype=np.uint8)
    data[: len(text)] = text
    grammar = _PAIR * (n // 2) if not last else (_PAIR * (n // 2))[:-1]
    return Strings(data, lens, np.cumsum(lens) - lens, grammar, grammar)


def _kernel_strings(body: npt.NDArray[np.uint8], size: int, lens: Ints) -> tuple[npt.NDArray[np.uint8], Ints]:
    """The strings a compiled reader left in ``body[:size]`` (raw JSON bodies; ``lens`` negated minus one for
    those holding a backslash), those JSON-unescaped: (bytes joined, lengths)."""
    lens = lens.copy()
    escaped = np.flatnonzero(lens < 0)
    if not len(escaped):
        return body[:size], lens
    lens[escaped] = -lens[escaped] - 1
    return _unescaped(body[:size], lens, escaped)


def _unescaped(body: npt.NDArray[np.uint8], lens: Ints, which: Ints) -> tuple[npt.NDArray[np.uint8], Ints]:
    """``body`` (strings joined) with the strings ``which`` JSON-unescaped."""
    starts = np.cumsum(lens) - lens
    raw = body.tobytes()
    values = unescape_all([raw[s : s + n] for s, n in zip(starts[which].tolist(), lens[which].tolist(), strict=True)])
    parts: list[bytes] = []
    prev = 0
    for s, n, v in zip(starts[which].tolist(), lens[which].tolist(), values, strict=True):
        parts += (raw[prev:s], v)
        prev = s + n
    parts.append(raw[prev:])
    lens = lens.copy()
    lens[which] = [len(v) for v in values]
    return np.frombuffer(b"".join(parts), dtype=np.uint8), lens


def _words(data: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """The little-endian u64 starting at every byte of ``data`` (which ends in 8 padding bytes)."""
    return np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))


def span_hash(data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each span ``data[starts[i] : starts[i] + lens[i]]`` (``data`` ends in 8 padding bytes).

    Spans of one length and at most 8 bytes never share a hash: their one masked word goes through an xor, an
    odd multiply and a xorshift, each one-to-one. The compiled kernel (:mod:`~dspark_convert.formats.native`)
    computes the same hashes."""
    native = kernels()
    if native is not None:
        out = np.empty(len(lens), np.uint64)
        native.span_hash(data, _int64(starts), _int64(lens), out)
        return out
    words = _words(data)
    x = ((lens.astype(np.uint64) * _MUL + _SEED) ^ (words[starts] & _MASKS[np.minimum(lens, 8)])) * _MUL
    h = x ^ (x >> _SHIFT)
    idx = np.flatnonzero(lens > 8)
    k = 8
    while len(idx):
        rem = lens[idx] - k
        w = words[starts[idx] + k] & _MASKS[np.minimum(rem, 8)]
        x = (h[idx] ^ w) * _MUL
        h[idx] = x ^ (x >> _SHIFT)
        idx = idx[rem > 8]
        k += 8
    return h


def _int64(a: npt.NDArray[np.integer]) -> Ints:
    return np.ascontiguousarray(a, dtype=np.int64)


def equal_spans(a: npt.NDArray[np.uint8], a_starts: Ints, b: npt.NDArray[np.uint8], b_starts: Ints,
                lens: Ints) -> npt.NDArray[np.bool_]:
    """Whether each span of ``a`` equals the span of ``b`` of the same index (both of length ``lens[i]``)."""
    wa, wb = _words(a), _words(b)
    same = np.ones(len(lens), dtype=bool)
    idx = np.flatnonzero(lens > 0)
    k = 0
    while len(idx):
        rem = lens[idx] - k
        diff = (wa[a_starts[idx] + k] ^ wb[b_starts[idx] + k]) & _MASKS[np.minimum(rem, 8)]
        same[idx[diff != 0]] = False
        idx = idx[rem > 8]
        k += 8
    return same


def joined(items: list[bytes]) -> tuple[npt.NDArray[np.uint8], Ints, Ints]:
    """``items`` as the spans of one padded buffer: (data, starts, lens)."""
    blob = b"".join(items)
    data = np.zeros(len(blob) + 8, dtype=np.uint8)
    data[: len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    lens = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    return data, np.cumsum(lens) - lens, lens


class VocabIndex:
    """The tokens of a vocabulary in id order (spans of ``data``, which ends in 8 padding bytes), for looking many
    spans up at once: an open-addressing table of their hashes (a quarter full at most, linear probing).

    Raises ValueError when two tokens hash alike (a repeated token, or a collision): the caller takes another
    path. Built, it proves the tokens distinct.
    """

    def __init__(self, data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> None:
        self.data, self.starts, self.lens = data, starts, lens
        h = span_hash(self.data, self.starts, self.lens)
        self.hashes = np.append(h, np.uint64(0))  # (the last item answers the table's -1)
        bits = max(4, (4 * len(lens) - 1).bit_length())
        self.shift = np.uint64(64 - bits)
        self.mask = (1 << bits) - 1
        self.table = np.full(1 << bits, -1, dtype=np.int32)
        todo = np.arange(len(lens), dtype=np.int64)
        slots = (h >> self.shift).astype(np.int64)
        while len(todo):
            free = self.table[slots] < 0
            self.table[slots[free]] = todo[free]  # of several wanting one slot, one wins
            placed = self.table[slots] == todo
            clash = ~placed & (h[self.table[slots]] == h[todo])
            if clash.any():
                raise ValueError("tokens hash alike")
            todo, slots = todo[~placed], (slots[~placed] + 1) & self.mask

    def lookup(self, data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> Ints:
        """The token id of each span of ``data`` (padded with 8 bytes), -1 where it is not a token."""
        cand, ok = self._find(data, starts, lens)
        return np.where(ok, cand, -1)

    def all_tokens(self, data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> bool:
        """Whether every span of ``data`` (padded with 8 bytes) is a token."""
        return bool(self._find(data, starts, lens)[1].all())

    def _find(self, data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> tuple[Ints, npt.NDArray[np.bool_]]:
        native = kernels()
        if native is not None:  # the same probe and confirmation, compiled, span by span
            ids = np.empty(len(lens), np.int64)
            native.find_spans(self.table, self.hashes, int(self.shift), self.data, _int64(self.starts),
                              _int64(self.lens), data, _int64(starts), _int64(lens), ids)
            return ids, ids >= 0
        h = span_hash(data, starts, lens)
        if not len(self.lens):
            return np.zeros(len(h), dtype=np.int64), np.zeros(len(h), dtype=bool)
        slots = (h >> self.shift).astype(np.int64)
        cand = self.table[slots].astype(np.int64)
        ok = self.hashes[cand] == h  # (-1, an empty slot, reads the extra item)
        todo = np.flatnonzero(~ok & (cand >= 0))  # another token in that slot: probe on
        while len(todo):
            slots[todo] = (slots[todo] + 1) & self.mask
            cand[todo] = c = self.table[slots[todo]]
            hit = self.hashes[c] == h[todo]
            ok[todo] = hit
            todo = todo[~hit & (c >= 0)]
        ok &= cand >= 0
        # spans of at most 8 bytes: an equal hash and length is an equal span (span_hash); longer ones are
        # compared with their token
        ok &= self.lens[cand] == lens
        long = np.flatnonzero(ok & (lens > 8))
        ok[long] = equal_spans(data, starts[long], self.data, self.starts[cand[long]], lens[long])
        return cand, ok

    def ids(self, items: list[bytes]) -> Ints:
        """The token id of each item, -1 where it is not a token."""
        return self.lookup(*joined(items))


def pack_pairs(s: Strings) -> memoryview:
    """The GGUF items ``left + b" " + right`` (u64 length, bytes) of the strings taken two by two."""
    n = len(s) // 2
    native = kernels()
    if native is not None:  # the same items, written in one compiled pass
        packed = np.empty(len(s.data) - 8 + 9 * n, np.uint8)
        native.pack_pairs(s.data, _int64(s.lens[: 2 * n]), packed)
        return packed.data
    left, right = s.lens[0::2], s.lens[1::2]
    runs = np.empty(4 * n, dtype=np.int64)  # length prefix, left, space, right
    runs[0::4], runs[1::4], runs[2::4], runs[3::4] = 8, left, 1, right
    pattern = np.zeros(4 * n, dtype=bool)
    pattern[0::2] = True
    meta = np.repeat(pattern, runs)
    marks = np.empty((n, 9), dtype=np.uint8)
    marks[:, :8] = (left + right + 1).astype("<u8").view(np.uint8).reshape(n, 8)
    marks[:, 8] = 32
    out = np.empty(len(meta), dtype=np.uint8)
    out[meta] = marks.reshape(-1)
    out[~meta] = s.data[: len(s.data) - 8]
    return out.data


def chunks(raw: Raw, a: int, b: int, after: bytes) -> Iterator[tuple[Strings, bool]]:
    """:func:`scan` of ``[a, b)`` in pieces of about CHUNK bytes (:func:`.tokjson.cut_chunks`), with whether each is the last."""
    return cut_chunks(raw, a, b, after, scan, CHUNK)


def pair_chunks(raw: Raw, a: int, b: int) -> Iterator[tuple[Strings, bool]]:
    """:func:`chunks` of pair-form merges (cut after ``],``), read by :func:`scan_pairs`."""
    return cut_chunks(raw, a, b, b"],", lambda r, x, y: scan_pairs(r, x, y, b), CHUNK)


def merge_pairs(lay: Layout, index: VocabIndex, kept: Ints) -> tuple[bytes, int, list[list[str]]] | None:
    """The merges of a pair-form file as GGUF items (``left + " " + right``), their count, and the pairs whose
    result is one of the token ids ``kept`` (as str, in file order). Every part and result must be a token
    (NotFast otherwise, as the tokenizers library refuses the file); None when a part holds a space (GGUF
    stores it as U+0120: the caller's path) or the file has no pairs."""
    if not lay.pairs:
        return None
    raw, (a, b) = lay.raw, lay.merges
    parts = io.BytesIO()  # (its value is taken without a copy)
    count = 0
    reduced: list[list[str]] = []
    if a + 1 >= b - 1:  # "[]"
        return b"", 0, reduced
    for s, last in pair_chunks(raw, a + 1, b - 1):
        if len(s) % 2:
            raise NotFast
        n = len(s) // 2
        want = _PAIR * n if not last else _PAIR * (n - 1) + _PAIR[:-1] if n else b""
        if s.grammar != want or (last and not n and count):
            raise NotFast
        if np.any(s.data[: len(s.data) - 8] == 32):
            return None
        left_starts, left, right = s.starts[0::2], s.lens[0::2], s.lens[1::2]
        if not index.all_tokens(s.data, np.concatenate([left_starts, s.starts]), np.concatenate([left + right, s.lens])):
            raise NotFast  # every part and result must be a token, or the tokenizers library refuses the file
        if len(kept):
            result = index.lookup(s.data, left_starts, left + right)
            for i in np.flatnonzero(np.isin(result, kept)).tolist():
                st, nl, nr = int(left_starts[i]), int(left[i]), int(right[i])
                reduced.append([s.data[st : st + nl].tobytes().decode("utf-8"),
                                s.data[st + nl : st + nl + nr].tobytes().decode("utf-8")])
        parts.write(pack_pairs(s))
        count += n
    return parts.getvalue(), count, reduced


def _digits(first: int, n: int) -> tuple[bytes, Ints]:
    """The decimal digits of ``first .. first + n - 1`` joined, and the number of digits of each."""
    pieces: list[bytes] = []
    counts: list[Ints] = []
    lo, end = first, first + n
    while lo < end:
        k = len(str(lo))
        hi = min(end, 10**k)
        block = np.arange(lo, hi, dtype=np.int64)
        d = np.empty((hi - lo, k), dtype=np.uint8)
        for j in range(k - 1, -1, -1):
            d[:, j] = block % 10 + 48
            block //= 10
        pieces.append(d.tobytes())
        counts.append(np.full(hi - lo, k, dtype=np.int64))
        lo = hi
    return b"".join(pieces), np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)


def vocab_spans(lay: Layout) -> tuple[npt.NDArray[np.uint8], Ints, Ints] | None:
    """The vocabulary's tokens as spans (data padded with 8 bytes, starts, lens) when its ids are exactly
    ``0, 1, ..., n-1`` in file order, written plainly; None for any other vocabulary (the caller's path decides);
    NotFast for bad JSON strings or UTF-8."""
    raw, (a, b) = lay.raw, lay.vocab
    datas: list[npt.NDArray[np.uint8]] = []
    lens: list[Ints] = []
    count = 0
    if a + 1 >= b - 1:
        return None
    native = kernels()
    if native is not None:
        try:
            return _plain_vocab(native, raw, a + 1, b - 1)
        except _NotPlain:
            pass  # the numpy form decides
    for s, last in chunks(raw, a + 1, b - 1, b","):
        n = len(s)
        if not n:
            return None
        digits, nd = _digits(count, n)
        g = np.frombuffer(s.grammar, dtype=np.uint8)
        isd = (g >= 48) & (g <= 57)
        want = b'"":,' * n if not last else b'"":,' * (n - 1) + b'"":'
        if g[~isd].tobytes() != want or g[isd].tobytes() != digits:
            return None
        starts = np.flatnonzero(isd[1:] & ~isd[:-1]) + 1  # (a grammar starts with a quote)
        ends = np.flatnonzero(g == 44)
        if last:
            ends = np.append(ends, len(g))
        o = np.frombuffer(s.outside, dtype=np.uint8)
        od = (o >= 48) & (o <= 57)
        runs = int(np.count_nonzero(od[1:] & ~od[:-1])) + bool(len(od) and od[0])
        if (len(starts) != n or runs != n or not np.all(g[starts - 1] == 58)
                or not np.array_equal(ends - starts, nd)):
            return None  # a number split by whitespace, or digits elsewhere than after the colon
        body = s.data[: len(s.data) - 8]
        try:
            body.tobytes().decode("utf-8")
        except UnicodeDecodeError:
            raise NotFast from None
        datas.append(body)
        lens.append(s.lens)
        count += n
    all_lens = np.concatenate(lens)
    data = np.zeros(int(all_lens.sum()) + 8, dtype=np.uint8)
    np.concatenate(datas, out=data[: len(data) - 8])
    return data, np.cumsum(all_lens) - all_lens, all_lens


class _NotPlain(Exception):
    """A piece of the vocabulary the compiled reader does not take (the numpy form reads the vocabulary)."""


def _plain_vocab(native: ModuleType, raw: Raw, a: int, b: int) -> tuple[npt.NDArray[np.uint8], Ints, Ints]:
    """:func:`vocab_spans` of the entries in ``raw[a:b]`` read by the compiled kernel, piece by piece; _NotPlain
    for any piece it does not take (another grammar, ids out of order, a control byte in a string), NotFast for
    bad escapes or UTF-8."""
    datas: list[npt.NDArray[np.uint8]] = []
    lens: list[Ints] = []
    count = 0

    def read(r: Raw, x: int, y: int) -> tuple[npt.NDArray[np.uint8], Ints]:
        body = np.empty(y - x + 8, np.uint8)
        piece_lens = np.empty((y - x) // 5 + 2, np.int64)  # an entry takes at least 5 bytes: "":0,
        got = native.scan_vocab(np.frombuffer(r, dtype=np.uint8, count=y - x, offset=x), body, piece_lens, count,
                                y >= b)
        if got is None:
            raise _NotPlain
        n, size = got
        return _kernel_strings(body, size, piece_lens[:n])

    for (body, piece_lens), _ in cut_chunks(raw, a, b, b",", read, CHUNK):
        try:
            str(body.data, "utf-8")
        except UnicodeDecodeError:
            raise NotFast from None
        datas.append(body)
        lens.append(piece_lens)
        count += len(piece_lens)
    all_lens = np.concatenate(lens)
    data = np.zeros(int(all_lens.sum()) + 8, dtype=np.uint8)
    np.concatenate(datas, out=data[: len(data) - 8])
    return data, np.cumsum(all_lens) - all_lens, all_lens


class Tokens(Sequence[bytes]):
    """The tokens of a :class:`VocabIndex` as a sequence of ``bytes``: items are cut from one ``bytes`` copy on
    demand, the whole list made only when iterated (and then kept)."""

    def __init__(self, vocab: VocabIndex) -> None:
        self.vocab = vocab
        n = int(vocab.lens.sum())
        self._blob = vocab.data[:n].tobytes()
        self._ends = array.array("q", [0])
        self._ends.frombytes((vocab.starts + vocab.lens).astype("=i8").tobytes())
        self._n = len(vocab.lens)
        self._list: list[bytes] | None = None

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if type(i) is int and 0 <= i < self._n:
            return self._blob[self._ends[i] : self._ends[i + 1]]
        if isinstance(i, slice):
            return self.as_list()[i]
        k = operator.index(i)
        k += self._n if k < 0 else 0
        if not 0 <= k < self._n:
            raise IndexError("token id out of range")
        return self._blob[self._ends[k] : self._ends[k + 1]]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.as_list())

    def as_list(self) -> list[bytes]:
        if self._list is None:
            ends, blob = self._ends, self._blob
            self._list = list(map(blob.__getitem__, map(slice, ends, itertools.islice(ends, 1, None))))
        return self._list


def span_list(data: npt.NDArray[np.uint8], starts: Ints, lens: Ints) -> list[bytes]:
    """The spans of ``data`` (following each other from 0) as ``bytes``."""
    blob = data[: int(lens.sum())].tobytes()
    ends = array.array("q")
    ends.frombytes((starts + lens).astype("=i8").tobytes())
    return list(map(blob.__getitem__, map(slice, itertools.chain((0,), ends), ends)))


def pack_spans(data: npt.NDArray[np.uint8], lens: Ints, tail: bytes = b"", batch: int = 1 << 16) -> bytes:
    """The GGUF items (u64 length, bytes) of the spans of ``data`` of lengths ``lens`` (following each other
    from 0), then ``tail``; ``batch`` spans at a time (the transient arrays stay small)."""
    out = io.BytesIO()
    pos = 0
    for i in range(0, len(lens), batch):
        part = lens[i : i + batch]
        n = len(part)
        runs = np.empty(2 * n, dtype=np.int64)  # length prefix, bytes
        runs[0::2], runs[1::2] = 8, part
        pattern = np.zeros(2 * n, dtype=bool)
        pattern[0::2] = True
        meta = np.repeat(pattern, runs)
        items = np.empty(len(meta), dtype=np.uint8)
        items[meta] = part.astype("<u8").view(np.uint8)
        size = len(meta) - 8 * n
        items[~meta] = data[pos : pos + size]
        pos += size
        out.write(items.data)
    out.write(tail)
    return out.getvalue()


_HEX = np.zeros(256, dtype=bool)
_HEX[list(b"0123456789abcdefABCDEF")] = True


def byte_token_ids(index: VocabIndex) -> Ints:
    """The ids of the tokens ``<0xHH>`` (either case), ascending."""
    six = np.flatnonzero(index.lens == 6)
    d = index.data[index.starts[six][:, None] + np.arange(6)]
    ok = (d[:, 0] == 60) & (d[:, 1] == 48) & (d[:, 2] == 120) & (d[:, 5] == 62) & _HEX[d[:, 3]] & _HEX[d[:, 4]]
    return six[ok]
