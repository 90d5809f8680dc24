"""Read a ``tokenizer.json`` without building Python objects for its vocabulary and merges.

``json.loads`` of a 150k-token BPE file makes ~600k Python objects (~80 MB for Qwen3; ~290 MB for Gemma 3's 262k
tokens and 515k merges), and the ``tokenizers`` library needs ~150 MB and ~0.6 s more. This module reads the
layout every ``tokenizers``-written file has (``"model"`` last, ``"vocab"`` then ``"merges"`` last in it): the
small rest is parsed by ``json``; the vocabulary and merges are cut into their strings with ``bytes.split`` on
the quote character, a few MiB at a time, and their items are kept as the UTF-8 bytes a GGUF file stores.

Everything between the strings is checked (``:``, ids, commas, brackets and whitespace, as JSON allows them), and
so is UTF-8. Anything this reader does not take with certainty (another layout, duplicate or escaped-differently
keys, ids that are not exactly ``0..n-1``, lone surrogates) makes it raise :class:`NotFast`; the caller then uses
``json`` and the ``tokenizers`` library, which accept or reject the file as before.

Example:
    >>> lay = locate(b'{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}')
    >>> lay.meta, vocab_tokens(lay)
    ({'model': {'type': 'BPE'}}, [b'a', b'b', b'ab'])
    >>> [chunk for chunk in merge_chunks(lay)]
    [([b'a'], [b'b'])]
"""

from __future__ import annotations

import array
import codecs
import contextlib
import itertools
import json
import mmap
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ConvertError, clip_value

T = TypeVar("T")

CHUNK = 1 << 19  # bytes of the vocabulary or merges handled at a time: bounds the transient pieces (~5x)

_W = rb"[ \t\n\r]*"
_MODEL = re.compile(b'"model"' + _W + b":" + _W + rb"\{")
_VOCAB = re.compile(b'"vocab"' + _W + b":" + _W + rb"\{")
_VOCAB_END = re.compile(rb"\}" + _W + b"," + _W + b'"merges"' + _W + b":" + _W + rb"\[")
_DOC_END = re.compile(rb"\]" + _W + rb"\}" + _W + rb"\}" + _W + rb"\Z")
#: what may stand between two strings (role by position; each distinct piece is checked once)
_ENTRY_SEP = re.compile(_W + b":" + _W + b"(0|[1-9][0-9]*)" + _W + b"," + _W)  # after a vocab key, more follow
_ENTRY_LAST = re.compile(_W + b":" + _W + b"(0|[1-9][0-9]*)" + _W)  # after the last key, before the brace
_IN = re.compile(_W + b"," + _W)  # between the two parts of a merge pair, and between legacy merges
_PAIR_SEP = re.compile(_W + rb"\]" + _W + b"," + _W + rb"\[" + _W)  # between two merge pairs
_PAIR_OPEN = re.compile(_W + rb"\[" + _W)  # before the first pair's left part
_PAIR_CLOSE = re.compile(_W + rb"\]" + _W)  # after the last pair's right part
_SPACE = re.compile(_W)
_CONTROLS = [bytes([c]) for c in range(32)]


Raw = bytes | mmap.mmap  # the file's bytes, or a read-only map of them (its pages are dropped once read)


def release(raw: Raw, end: int) -> None:
    """Drop the pages of a mapped file before ``end`` from this process (they stay in the page cache): a map
    then costs resident memory only for the chunk being read, not for the whole file. Bytes: nothing to do."""
    if isinstance(raw, mmap.mmap) and end >= mmap.PAGESIZE:
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no madvise (not Linux), or a closed map
            raw.madvise(mmap.MADV_DONTNEED, 0, min(end, len(raw)) // mmap.PAGESIZE * mmap.PAGESIZE)


class NotFast(Exception):
    """The file is not in the shape the fast reader takes with certainty."""


@dataclass
class Layout:
    """Where the vocabulary and merges of a tokenizer.json are, and everything else parsed.

    ``vocab`` spans ``{...}``; ``merges`` spans ``[...]``; ``meta`` is the parsed document without those two
    keys; ``pairs`` tells the pair form ``[["a", "b"], ...]`` from the legacy ``["a b", ...]``.
    """

    raw: Raw
    meta: dict[str, Any]
    vocab: tuple[int, int]
    merges: tuple[int, int]
    pairs: bool


def _strings(raw: Raw, a: int, b: int) -> list[bytes] | None:
    """``raw[a:b]`` split on its unescaped quotes: outside, string, outside, ..., outside (odd length), the
    strings' escapes decoded; None when ``b`` lies inside a string. Raw control characters inside strings, and
    bad UTF-8, are refused."""
    chunk = raw[a:b]
    pieces = chunk.split(b'"')
    glue: list[int] = []  # numbers of the escaped quotes: each split a string in two
    escapes: list[int] = []  # (glued) indices of the strings holding a backslash
    q = prev = 0
    p = chunk.find(b"\\")
    while p != -1:
        e = p
        while e < len(chunk) and chunk[e] == 0x5C:
            e += 1
        q += chunk.count(b'"', prev, p)
        prev = p
        if not escapes or escapes[-1] != q - len(glue):
            escapes.append(q - len(glue))
        if (e - p) % 2 and chunk[e : e + 1] == b'"':
            glue.append(q)
        p = chunk.find(b"\\", e + 1)
    if glue:  # runs of escaped quotes q, q+1, ... join pieces q..q+k
        out: list[bytes] = []
        last = i = 0
        while i < len(glue):
            k = i
            while k + 1 < len(glue) and glue[k + 1] == glue[k] + 1:
                k += 1
            out += pieces[last : glue[i]]
            out.append(b'"'.join(pieces[glue[i] : glue[k] + 2]))
            last, i = glue[k] + 2, k + 1
        out += pieces[last:]
        pieces = out
    if len(pieces) % 2 == 0:
        return None
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        raise NotFast from None
    inside = b"".join(pieces[1::2])
    if any(c in inside for c in _CONTROLS):
        raise NotFast  # JSON strings hold control characters only escaped
    if any(i % 2 == 0 for i in escapes):
        raise NotFast  # a backslash outside a string
    if escapes:
        # one json.loads for the chunk's escaped strings: no piece ends in an odd run of backslashes (the quote
        # after it would be escaped, and the pieces glued above), so each stays one array item
        for i, v in zip(escapes, unescape_all([pieces[i] for i in escapes]), strict=True):
            pieces[i] = v
    return pieces


def unescape_all(bodies: list[bytes]) -> list[bytes]:
    """The UTF-8 of JSON string bodies (the bytes between their quotes) holding backslashes, decoded in one
    ``json.loads``; NotFast for a bad escape or a lone surrogate (tokenizers refuses it)."""
    try:
        values = json.loads(b'["' + b'","'.join(bodies) + b'"]')
        if len(values) != len(bodies):
            raise NotFast
        return [v.encode("utf-8") for v in values]
    except (ValueError, UnicodeEncodeError):  # a bad escape, or a lone surrogate (tokenizers refuses it)
        raise NotFast from None


def cut_chunks(raw: Raw, a: int, b: int, after: bytes, read: Callable[[Raw, int, int], T | None],
               size: int = CHUNK) -> Iterator[tuple[T, bool]]:
    """``read(raw, start, cut)`` over ``[a, b)`` in pieces of about ``size`` bytes, each cut right after an ``after``
    that lies outside every string (``a`` must too; ``read`` returns None for a cut inside a string), with whether
    it is the last; the pages of a mapped file are dropped behind each piece."""
    start = a
    while start < b:
        cut = b if b - start <= size else raw.find(after, start + size, b)
        while True:
            cut = b if cut < 0 or cut >= b else cut + len(after)
            got = read(raw, start, cut)
            if got is not None:
                break
            if cut >= b:
                raise NotFast  # an unterminated string
            cut = raw.find(after, cut, b)  # that "after" was inside a string: take the next one
        release(raw, cut)
        yield got, cut >= b
        start = cut


def _chunks(raw: Raw, a: int, b: int, after: bytes) -> Iterator[list[bytes]]:
    """:func:`_strings` of ``[a, b)`` in pieces (:func:`cut_chunks`)."""
    for pieces, _ in cut_chunks(raw, a, b, after, _strings):
        yield pieces


def locate(raw: Raw) -> Layout:
    """Find the vocabulary and merges and parse the rest (raises NotFast for any other layout)."""
    if raw[:3] == codecs.BOM_UTF8:
        raise NotFast
    m = _MODEL.search(raw)
    v = _VOCAB.search(raw, m.end()) if m else None
    e = _VOCAB_END.search(raw, v.end()) if v else None
    d = _DOC_END.search(raw, max(e.end(), len(raw) - 4096)) if e else None
    if not (v and e and d):
        raise NotFast
    vocab, merges = (v.end() - 1, e.start() + 1), (e.end() - 1, d.start() + 1)
    try:
        meta = json.loads(raw[: vocab[0]] + b"{}" + raw[vocab[1] : merges[0]] + b"[]" + raw[merges[1] :])
    except (ValueError, RecursionError):  # the slow path's reader names the file and the fault
        raise NotFast from None
    model = meta.get("model") if isinstance(meta, dict) else None
    if not isinstance(model, dict) or model.get("vocab") != {} or model.get("merges") != []:
        raise NotFast  # the spans were not the model's own (a duplicate key, a string that looked like one)
    del model["vocab"], model["merges"]
    release(raw, len(raw))  # the searches above walked the vocabulary: read again chunk by chunk
    inner = _SPACE.match(raw, merges[0] + 1)
    pairs = inner is None or raw[inner.end() : inner.end() + 1] != b'"'  # legacy strings, or pairs (or empty)
    return Layout(raw, meta, vocab, merges, pairs)


def _check(pieces: list[bytes], pattern: re.Pattern[bytes]) -> None:
    for p in set(pieces):
        if pattern.fullmatch(p) is None:
            raise NotFast


def vocab_tokens(lay: Layout) -> list[bytes]:
    """The vocabulary's tokens (UTF-8) in id order; the ids must be exactly ``0..n-1``. Keys are not checked
    for repeats (callers do: ``len(set(tokens))``)."""
    raw, (a, b) = lay.raw, lay.vocab
    parts: list[bytes] = []  # the keys of each chunk, concatenated: no small object outlives its chunk
    lens: list[int] = []
    ids: list[list[bytes] | range] = []
    carry = b""
    for pieces in _chunks(raw, a + 1, b - 1, b","):
        pieces[0] = carry + pieces[0]
        carry = pieces.pop()
        befores, keys = pieces[0::2], pieces[1::2]
        first_id = len(lens) - 1
        if not lens and befores:
            if _SPACE.fullmatch(befores[0]) is None:
                raise NotFast  # text before the first key
            befores, first_id = befores[1:], 0
        ids.append(_ids(befores, first_id, _ENTRY_SEP))
        parts.append(b"".join(keys))
        lens += map(len, keys)
    if not lens:
        if _SPACE.fullmatch(carry) is None:
            raise NotFast
        return []
    ids.append(_ids([carry], len(lens) - 1, _ENTRY_LAST))
    # the tokens are made only now, together (the chunks' garbage is gone: their memory goes back to the OS)
    blob = b"".join(parts)
    del parts
    ends = array.array("q", itertools.accumulate(lens))
    tokens = list(map(blob.__getitem__, map(slice, itertools.chain((0,), ends), ends)))
    if not all(isinstance(r, range) for r in ids):  # not 0..n-1 in file order: sort (still a permutation)
        tokens = _in_id_order(tokens, [i for r in ids for i in (map(b"%d".__mod__, r) if isinstance(r, range) else r)])
    return tokens


def _ids(seps: list[bytes], first: int, pattern: re.Pattern[bytes]) -> list[bytes] | range:
    """Check the separators holding ids ``first, first + 1, ...``: that range when they hold exactly those
    numbers (the common case, checked in one comparison), else the ids they hold."""
    if not seps:
        return range(0)
    m = pattern.fullmatch(seps[0])
    if m is None:
        raise NotFast
    pre, post = seps[0][: m.start(1)], seps[0][m.end(1) :]
    expected = range(first, first + len(seps))
    if b"".join(seps) == pre + (post + pre).join(map(b"%d".__mod__, expected)) + post:
        return expected
    found = [pattern.fullmatch(s) for s in seps]
    return [f.group(1) if f is not None else _fail() for f in found]


def _fail() -> bytes:
    raise NotFast


def _in_id_order(tokens: list[bytes], ids: list[bytes]) -> list[bytes]:
    """``tokens`` sorted by id; the ids must be exactly ``0..n-1`` in some order."""
    n = len(tokens)
    out: list[bytes | None] = [None] * n
    for tok, i in zip(tokens, map(int, ids), strict=True):
        if i >= n or out[i] is not None:
            raise NotFast
        out[i] = tok
    return out  # type: ignore[return-value]  # n distinct ids below n fill every slot


def merge_chunks(lay: Layout) -> Iterator[tuple[list[bytes], list[bytes]] | list[bytes]]:
    """The merges, a few MiB of file at a time: ``(lefts, rights)`` for the pair form, else the strings."""
    raw, (a, b) = lay.raw, lay.merges
    carry, g = b"", 0
    for pieces in _chunks(raw, a + 1, b - 1, b"]," if lay.pairs else b","):
        pieces[0] = carry + pieces[0]
        carry = pieces.pop()
        befores, strings = pieces[0::2], pieces[1::2]
        if lay.pairs:
            if len(strings) % 2:
                raise NotFast  # a cut inside a pair: the file does not write "]," between pairs
            lead = befores[0::2]
            if g == 0 and lead:
                _check(lead[:1], _PAIR_OPEN)
                lead = lead[1:]
            _check(lead, _PAIR_SEP)
            _check(befores[1::2], _IN)
        else:
            if g == 0 and befores:
                _check(befores[:1], _SPACE)
                befores = befores[1:]
            _check(befores, _IN)
        g += len(strings)
        yield (strings[0::2], strings[1::2]) if lay.pairs else strings
    if g == 0:
        _check([carry], _SPACE)
    else:
        _check([carry], _PAIR_CLOSE if lay.pairs else _SPACE)


#: bounds checked before a tokenizer.json reaches the ``tokenizers`` library (a 50 MB added token, or a normalizer
#: replacing " " with a million spaces, made it allocate gigabytes and abort the process from Rust)
MAX_ADDED_TOKEN_CHARS = 65536
MAX_RULE_STRING_CHARS = 1024  # any string of the normalizer, pre-tokenizer, post-processor or decoder


def check_tokenizer_sizes(meta: dict[str, Any], path: Any) -> None:
    """Refuse (one line) a tokenizer.json whose ``added_tokens`` is not a list (the library's own refusal) or whose
    added tokens or rule strings exceed the bounds above; ``meta`` is the file's JSON object (its model's vocab and
    merges are not needed)."""
    added = meta.get("added_tokens", [])
    if not isinstance(added, list):
        raise ConvertError(f"{path}: malformed tokenizer.json (added_tokens is {type(added).__name__}, expected a "
                           "list)")
    for i, a in enumerate(added):
        content = a.get("content") if isinstance(a, dict) else None
        if isinstance(content, str) and len(content) > MAX_ADDED_TOKEN_CHARS:
            raise ConvertError(f"{path}: added token {i} (id {a.get('id')}) is {len(content)} characters long, over "
                               f"the {MAX_ADDED_TOKEN_CHARS} character limit; expected a short special token")
    for section in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        stack = [meta.get(section)]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, str) and len(node) > MAX_RULE_STRING_CHARS:
                raise ConvertError(f"{path}: the {section} holds a string of {len(node)} characters, over the "
                                   f"{MAX_RULE_STRING_CHARS} character limit (a rule that long multiplies the text it "
                                   "is applied to); expected a real tokenizer")


def check_merge_cuts(data: dict[str, Any], path: Any) -> None:
    """Refuse (one line) a BPE model with a ``continuing_subword_prefix`` the ``tokenizers`` library would cut out of
    a merge's second part inside a character or past its end: the library strips the prefix's length in bytes from
    every merge's second part, and a cut inside a UTF-8 sequence makes it build an error message that is not UTF-8
    and abort the process. ``data`` is the whole tokenizer.json object (merges included)."""
    model = data.get("model")
    prefix = model.get("continuing_subword_prefix") if isinstance(model, dict) else None
    merges = model.get("merges") if isinstance(model, dict) else None
    if not isinstance(prefix, str) or not prefix or not isinstance(merges, list):
        return
    cut = len(prefix.encode("utf-8", "surrogatepass"))
    for i, merge in enumerate(merges):
        if isinstance(merge, list) and len(merge) == 2:
            second = merge[1]
        else:
            second = merge.split(" ", 1)[1] if isinstance(merge, str) and " " in merge else None
        if not isinstance(second, str):
            continue  # the library refuses it with its own message
        raw = second.encode("utf-8", "surrogatepass")
        if len(raw) < cut or (len(raw) > cut and raw[cut] & 0xC0 == 0x80):
            where = "past its end" if len(raw) < cut else "inside a character"
            raise ConvertError(f"{path}: merge {i} ({clip_value(merge)}) does not start with the model's "
                               f"continuing_subword_prefix {clip_value(prefix)}: the tokenizers library cuts the "
                               f"prefix's {cut} byte{'s' if cut > 1 else ''} from its second part, {where}, and "
                               "stops the process; expected merges whose second parts start with the prefix")
