"""Byte-level BPE targets in a fraction of the time and memory of loading them whole (same bytes out).

:mod:`~dspark_convert.tokenizer.bpe` loads tokenizer.json with ``json`` and the ``tokenizers`` library: for a
150k-token vocabulary that is ~1-2 s and ~250 MB, yet the GGUF needs only the token strings, the merges, the
added tokens and one hash. Here:

- the vocabulary and merges are read as bytes, with numpy by :mod:`~dspark_convert.tokenizer.tokscan` when the
  file has the usual shape (else by :mod:`~dspark_convert.tokenizer.tokjson`), checked against each other and
  packed as they are (:class:`~dspark_convert.gguffile.packed.PackedStrings`);
- the ``tokenizers`` library gets a *reduced* tokenizer: the same normalizer, pre-tokenizer, post-processor,
  decoder and added tokens, with only the model tokens and merges that can occur in the text it must encode
  (llama.cpp's check text, for ``chkhsh``). BPE applies a merge only to two adjacent symbols of a word, so every
  symbol is a substring of the word's initial symbols (its characters, byte-fallback or unknown tokens); a first
  tokenizer without merges gives those symbols, and the tokens and merges that are substrings of them (kept in
  their order: only the order of the merges' ranks matters) encode the text exactly as the whole vocabulary does.
  Model ids are renumbered ``0..R-1`` in their order, so the ids the library gives added tokens (``R, R+1, ...``
  for the whole vocabulary's ``V, V+1, ...``) map back one to one; post-processor ids are swapped for
  placeholders and back.

Anything outside what this covers exactly (BPE dropout, subword prefixes or suffixes, ``ignore_merges`` on a
non-byte-level vocabulary, an unknown post-processor, ids that are not ``0..n-1``, split special tokens that a
token's decode round trip would tokenize) raises :class:`NotFast`, and the caller uses the whole tokenizer.
``tests/conversion/test_tokenizer_fast.py`` compares both paths on every tokenizer the tests build.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import mmap
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConvertError
from ..gguffile.packed import PackedStrings
from ..hf.checkpoint import load_json_if_present
from ..schema import TokenType
from .bpe import apply_transformers_rules, check_text, cleaned
from .class_defaults import resolve_tokenizer_class, special_token_entries
from .special import looks_special, token_content
from .tokjson import Layout, NotFast, Raw, check_tokenizer_sizes, locate, merge_chunks, vocab_tokens
from .tokscan import Tokens, VocabIndex, byte_token_ids, joined, merge_pairs, pack_spans, span_list, vocab_spans

if TYPE_CHECKING:
    from tokenizers import AddedToken, Tokenizer


_PLACEHOLDER = 1 << 31  # post-processor ids become _PLACEHOLDER + k in the reduced tokenizer
_BYTE_TOKENS = [f"<0x{b:02X}>".encode() for b in range(256)]  # BPE byte_fallback pieces
_NAMED = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
_G_SPACE = "\u0120".encode()
#: length of the UTF-8 sequence a lead byte starts (0: not a lead byte)
_UTF8_LEN = [1] * 0x80 + [0] * 0x42 + [2] * 0x1E + [3] * 0x10 + [4] * 0x05 + [0] * 0x0B


@dataclass
class FastBPE:
    """A tokenizer.json read for the GGUF: model tokens and merges as bytes, a reduced ``tokenizers`` object.

    ``data`` is the parsed tokenizer.json without ``model.vocab`` / ``model.merges``; ``config`` its
    tokenizer_config.json (``{}`` when absent).
    """

    path: Path
    data: dict[str, Any]
    config: dict[str, Any]
    tokens: Sequence[bytes]  # model vocabulary, id order
    merges: PackedStrings  # tokenizer.ggml.merges as gguf-py writes them
    reduced: Tokenizer  # the reduced tokenizer (transformers' rules applied)
    full_ids: list[int]  # reduced model id -> target id
    specials: list[Any] = field(default_factory=list)  # special-token entries, class defaults included
    _added: dict[int, AddedToken] | None = field(default=None, repr=False)

    @property
    def n_model(self) -> int:
        return len(self.tokens)

    def to_full(self, i: int) -> int:
        """A reduced tokenizer id as the target's id."""
        r = len(self.full_ids)
        if i < r:
            return self.full_ids[i]
        if i >= _PLACEHOLDER:
            return self._placeholders[i - _PLACEHOLDER]
        return i - r + self.n_model

    _placeholders: list[int] = field(default_factory=list, repr=False)
    _reduced_decoder: dict[int, AddedToken] | None = field(default=None, repr=False)
    index: VocabIndex | None = field(default=None, repr=False)  # the model tokens indexed, when they could be

    def ids_of(self, wanted: Iterable[bytes]) -> list[int]:
        """The model ids of the ``wanted`` tokens, ascending (items that are no model token are ignored)."""
        wanted = set(wanted)
        if self.index is None:
            return list(itertools.compress(range(self.n_model), map(wanted.__contains__, self.tokens)))
        ids = self.index.ids(list(wanted))
        return sorted(ids[ids >= 0].tolist())

    def _reduced_added(self) -> dict[int, AddedToken]:
        if self._reduced_decoder is None:
            self._reduced_decoder = self.reduced.get_added_tokens_decoder()
        return self._reduced_decoder

    def added(self) -> dict[int, AddedToken]:
        """``get_added_tokens_decoder()`` of the whole tokenizer, in target ids."""
        if self._added is None:
            self._added = {self.to_full(i): at for i, at in self._reduced_added().items()}
        return self._added

    def chkhsh(self) -> str:
        """sha256 of ``str(encode(CHECK_TEXT))`` (see :func:`~dspark_convert.tokenizer.bpe.chkhsh`)."""
        ids = [self.to_full(i) for i in self.reduced.encode(check_text()).ids]
        return hashlib.sha256(str(ids).encode()).hexdigest()

    def decode_roundtrips(self, tokens: list[tuple[str, int]]) -> list[str]:
        """transformers' ``decode(encode(text))`` for added tokens ``(text, reduced id)``, in one batch."""
        if not tokens:
            return []
        ids = [e.ids for e in self.reduced.encode_batch([t for t, _ in tokens], add_special_tokens=False)]
        if any(got != [want] for got, (_, want) in zip(ids, tokens, strict=True)):
            raise NotFast  # a text not matched as its added token: the (reduced) model tokens would decide
        return [cleaned(d, self.config) for d in self.reduced.decode_batch(ids, skip_special_tokens=False)]

    def token_list(self, n_vocab: int | None) -> tuple[PackedStrings, list[int]]:
        """Tokens and token types of upstream ``get_vocab_base``, padded to ``n_vocab`` (as
        :func:`~dspark_convert.tokenizer.bpe.bpe_token_list`)."""
        v = self.n_model
        added = self.added()
        n_new = sum(1 for i in added if i >= v)
        n = v + n_new if n_vocab is None else n_vocab
        top_id = max(v - 1, max(added, default=-1))
        if top_id >= n:
            top_tok = added[top_id].content if top_id in added else self.tokens[top_id].decode("utf-8")
            raise ConvertError(f"{self.path}: token id {top_id} ({top_tok!r}) does not fit the draft vocab_size {n}")
        tokens: list[bytes | None] = [*self.tokens, *itertools.repeat(None, n - v)]
        types = [TokenType.NORMAL] * n
        for i in added:
            tokens[i] = b""  # filled below; keeps it from padding
        for i in range(v, n):
            if tokens[i] is None:
                tokens[i] = f"[PAD{i}]".encode()
                types[i] = TokenType.UNUSED
        reduced_ids = {at.content: i for i, at in self._reduced_added().items()}
        raw = [i for i, at in added.items() if not at.normalized]
        decoded = dict(zip(raw, self.decode_roundtrips([(added[i].content, reduced_ids[added[i].content])
                                                        for i in raw]), strict=True))
        for i, at in added.items():
            text = decoded.get(i, at.content)
            if at.special or looks_special(text):
                types[i] = TokenType.CONTROL
            else:
                text = text.replace("\u2581", " ")
                types[i] = TokenType.USER_DEFINED
            tokens[i] = text.encode("utf-8")
        return PackedStrings.pack(tokens), types  # type: ignore[arg-type]  # every slot is bytes now


    def llama_hf_list(self) -> tuple[PackedStrings, list[float], list[int]]:
        """Tokens, scores and types of upstream ``LlamaHfVocab`` (as
        :func:`~dspark_convert.tokenizer.bpe.llama_hf_token_list`: the tokenizer's own size, no padding).

        Raises NotFast where the whole tokenizer's ``get_vocab`` would be ambiguous (an added token whose content
        is a model token of another id, or whose id is a model token of other content).
        """
        v, added = self.n_model, self.added()
        contents = {at.content.encode("utf-8", "surrogatepass"): i for i, at in added.items()}
        names: list[str] = []  # transformers' all_special_tokens: first occurrence wins
        for entry in self.specials:
            content = token_content(entry)
            if content is not None and content not in names:
                names.append(content)
        wanted = {n.encode("utf-8", "surrogatepass") for n in names} | set(contents)
        model_ids = {self.tokens[i]: i for i in self.ids_of(wanted)}
        for c, i in contents.items():
            if model_ids.get(c, i) != i or (i < v and self.tokens[i] != c):
                raise NotFast
        vocab = {**model_ids, **contents}  # get_vocab(with_added_tokens=True), for the names asked here
        special_ids = {vocab[b] for b in (n.encode("utf-8", "surrogatepass") for n in names) if b in vocab}
        types = [TokenType.NORMAL] * v
        if self.index is not None:
            byte_ids: Iterable[int] = byte_token_ids(self.index).tolist()
        else:
            six = list(itertools.compress(range(v), map(operator.eq, map(len, self.tokens), itertools.repeat(6))))
            byte_ids = itertools.compress(six, map(_is_byte_token, map(self.tokens.__getitem__, six)))
        for i in byte_ids:
            types[i] = TokenType.BYTE
        for i in special_ids:
            if i < v and types[i] != TokenType.BYTE:
                types[i] = TokenType.CONTROL
        extra = sorted((i, at.content) for i, at in added.items() if i >= v)
        for _i, text in extra:
            types.append(TokenType.CONTROL if text.encode("utf-8", "surrogatepass") in vocab
                         and text in names else TokenType.USER_DEFINED)
        more = [text.encode("utf-8") for _, text in extra]
        if self.index is not None:
            ix = self.index
            tokens = PackedStrings(pack_spans(ix.data, ix.lens, PackedStrings.pack(more).blob), v + len(more))
        else:
            tokens = PackedStrings.pack([*self.tokens, *more])
        return tokens, [-1000.0] * len(types), types


def _is_byte_token(t: bytes) -> bool:
    """``<0xHH>`` (upstream's byte-token pattern, either case)."""
    return len(t) == 6 and t[:3] == b"<0x" and t[5:] == b">" and all(c in _HEX for c in t[3:5])


_HEX = b"0123456789abcdefABCDEF"


def load_fast_bpe(tokenizer_json: Path, *, for_hash: bool = True) -> FastBPE:
    """Read ``tokenizer_json`` (and its sibling tokenizer_config.json) for :class:`FastBPE`.

    With ``for_hash`` false the reduced tokenizer holds only the tokens every added-token rule needs, not those
    that encode llama.cpp's check text: enough for :meth:`FastBPE.added` and :meth:`FastBPE.llama_hf_list`, not
    for :meth:`FastBPE.chkhsh`. Raises NotFast when the file is not one this reader reproduces exactly,
    ConvertError for bad sibling files.
    """
    tokenizer_json = Path(tokenizer_json)
    try:
        with open(tokenizer_json, "rb") as f:
            try:  # mapped, so that only the chunk being read is resident (tokjson.release)
                raw: Raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # an empty file, or one that cannot be mapped
                raw = f.read()
    except OSError:
        raise NotFast from None
    try:
        return _load(tokenizer_json, raw, for_hash)
    finally:
        if isinstance(raw, mmap.mmap):
            with contextlib.suppress(BufferError):  # still exported: closed when collected
                raw.close()


def _load(tokenizer_json: Path, raw: Raw, for_hash: bool) -> FastBPE:
    lay = locate(raw)
    check_tokenizer_sizes(lay.meta, tokenizer_json)  # before the library sees any of it
    model = lay.meta["model"]
    if (model.get("type") != "BPE" or model.get("dropout") is not None
            or model.get("continuing_subword_prefix") not in (None, "") or model.get("end_of_word_suffix") not in (None, "")):
        raise NotFast  # ("" adds nothing: Qwen's files say so)
    config = load_json_if_present(tokenizer_json.parent / "tokenizer_config.json") or {}
    target_config = load_json_if_present(tokenizer_json.parent / "config.json") or {}
    specials = special_token_entries(config, resolve_tokenizer_class(config, target_config, raw))
    tokens, index = _vocab(lay)
    vocab = _Vocab(tokens, index)  # (a repeated key raises NotFast: json keeps the last, serde may not)
    if for_hash and model.get("ignore_merges") and not _byte_level_words(lay.meta, vocab):
        raise NotFast  # a whole-word lookup could hit a token the reduced vocabulary lacks
    always = _always_kept(lay.meta, config, specials, vocab)
    if not for_hash:
        merges, _ = _merges(lay, vocab, set())
        reduced = _Reduced(lay, tokens, vocab.ids_of(always))
        return FastBPE(tokenizer_json, lay.meta, config, tokens, merges, reduced.build(config, specials),
                       reduced.full_ids, specials, _placeholders=reduced.placeholders, index=index)
    # 1. the initial symbols of the check text's words: single characters, byte pieces, unk
    short = vocab.by_length(0, 4)
    singles = itertools.compress(short, map(operator.eq, map(len, short),  # one UTF-8 sequence, whole
                                            map(_UTF8_LEN.__getitem__, map(operator.itemgetter(0), short))))
    first = _Reduced(lay, tokens, vocab.ids_of({*singles, *_BYTE_TOKENS, *always}), ignore_merges=False)
    symbols = "".join(first.build(config, specials).encode(check_text()).tokens).encode("utf-8")
    # 2. every token and merge that is a substring of them; the merges are checked and packed on the way
    kept = _substring_tokens(symbols, vocab) | always
    merges, reduced_merges = _merges(lay, vocab, kept)
    reduced = _Reduced(lay, tokens, vocab.ids_of(kept), merges=reduced_merges)
    tok = reduced.build(config, specials)
    return FastBPE(tokenizer_json, lay.meta, config, tokens, merges, tok, reduced.full_ids, specials,
                   _placeholders=reduced.placeholders, index=index)


class _Vocab:
    """Membership in the model tokens: by their :class:`~dspark_convert.tokenizer.tokscan.VocabIndex` when there
    is one (which proves them distinct), else by a set (NotFast for a repeated token)."""

    def __init__(self, tokens: Sequence[bytes], index: VocabIndex | None) -> None:
        self.tokens, self.index = tokens, index
        self._set: set[bytes] | None = None
        if index is None and len(self.as_set()) != len(tokens):
            raise NotFast

    def as_set(self) -> set[bytes]:
        if self._set is None:
            self._set = set(self.tokens)
        return self._set

    def present(self, items: Iterable[bytes]) -> set[bytes]:
        """The items that are tokens."""
        items = list(items)
        if self.index is None:
            return self.as_set().intersection(items)
        return set(itertools.compress(items, (self.index.ids(items) >= 0).tolist()))

    def by_length(self, low: int, high: int) -> list[bytes]:
        """The tokens of ``low`` to ``high`` bytes, in id order."""
        if self.index is None:
            return [t for t in self.tokens if low <= len(t) <= high]
        lens = self.index.lens
        return [self.tokens[i] for i in np.flatnonzero((lens >= low) & (lens <= high)).tolist()]

    def ids_of(self, wanted: set[bytes]) -> list[int]:
        """The ids of the tokens in ``wanted``, ascending (absent ones are ignored)."""
        if self.index is None:
            return list(itertools.compress(range(len(self.tokens)), map(wanted.__contains__, self.tokens)))
        ids = self.index.ids(list(wanted))
        return sorted(ids[ids >= 0].tolist())


def _substring_tokens(text: bytes, vocab: _Vocab, short: int = 40) -> set[bytes]:
    """The tokens that occur in ``text``: its substrings of up to ``short`` bytes looked up, then the few longer
    tokens searched."""
    found = vocab.present({text[i : i + n] for n in range(1, short + 1) for i in range(len(text) - n + 1)})
    found.update(t for t in vocab.by_length(short + 1, 1 << 62) if t in text)
    return found


def _byte_level_words(meta: dict[str, Any], vocab: _Vocab) -> bool:
    """True when every word the model sees is made of byte-level characters that are all tokens (so a word is
    always the concatenation of its initial symbols)."""
    pre = meta.get("pre_tokenizer")
    last = (pre.get("pretokenizers") or [None])[-1] if isinstance(pre, dict) and pre.get("type") == "Sequence" else pre
    if not isinstance(last, dict) or last.get("type") != "ByteLevel":
        return False
    from tokenizers import pre_tokenizers

    alphabet = {c.encode("utf-8") for c in pre_tokenizers.ByteLevel.alphabet()}
    return len(vocab.present(alphabet)) == len(alphabet)


def _always_kept(meta: dict[str, Any], config: dict[str, Any], specials: list[Any], vocab: _Vocab) -> set[bytes]:
    """Model tokens every reduced tokenizer keeps: added tokens, special tokens (class defaults included), the
    named ones of tokenizer_config.json and ``unk``."""
    texts: list[Any] = [a.get("content") for a in meta.get("added_tokens") or [] if isinstance(a, dict)]
    texts.append(meta["model"].get("unk_token"))
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        texts += [e.get("content") if isinstance(e, dict) else e for e in decoder.values()]
    texts += [config.get(f"{t}_token") for t in _NAMED] + list(specials)
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = config.get(key)
        texts += list(extra.values()) if isinstance(extra, dict) else list(extra) if isinstance(extra, list) else []
    out = set()
    for t in texts:
        t = t.get("content") if isinstance(t, dict) else t
        if isinstance(t, str):
            out.add(t.encode("utf-8", "surrogatepass"))
    return vocab.present(out)


def _vocab(lay: Layout) -> tuple[Sequence[bytes], VocabIndex | None]:
    """The model tokens in id order, and them indexed (:class:`~dspark_convert.tokenizer.tokscan.VocabIndex`;
    None when two hash alike, which a repeated token does)."""
    spans = vocab_spans(lay)
    listed = None
    if spans is None:
        listed = vocab_tokens(lay)
        spans = joined(listed)
    try:
        index = VocabIndex(*spans)
    except ValueError:
        return listed if listed is not None else span_list(*spans), None
    return listed if listed is not None else Tokens(index), index


def _merges(lay: Layout, vocabulary: _Vocab, kept: set[bytes]) -> tuple[PackedStrings, list[list[str]]]:
    """The merges as gguf-py writes them (checked against the vocabulary, as the tokenizers library does), and
    those whose result is a kept token (pair form, for the reduced tokenizer). With an index of the vocabulary
    a pair-form file is read by :func:`~dspark_convert.tokenizer.tokscan.merge_pairs`."""
    if vocabulary.index is not None:
        got = merge_pairs(lay, vocabulary.index, np.array(vocabulary.ids_of(kept), dtype=np.int64))
        if got is not None:
            blob, count, pairs = got
            return PackedStrings(blob, count), pairs
    vocab = vocabulary.as_set()
    parts: list[bytes] = []
    count = 0
    reduced: list[list[str]] = []
    within, spaced = vocab.issuperset, False
    for chunk in merge_chunks(lay):
        if lay.pairs:
            assert isinstance(chunk, tuple)
            left, right = chunk
            spaced = spaced or b" " in b"".join(left) or b" " in b"".join(right)
        else:
            assert isinstance(chunk, list)
            items = chunk
            joined = b"\0".join(items)  # (no item holds a NUL: JSON strings have no raw control characters)
            if set(map(bytes.count, items, itertools.repeat(b" "))) - {1} or (b"\0" + joined).find(b"\0#version") >= 0:
                raise NotFast  # the tokenizers library would refuse or skip such lines
            halves = joined.replace(b" ", b"\0").split(b"\0")
            left, right = halves[0::2], halves[1::2]
        if not (within(map(bytes.__add__, left, right)) and within(left) and within(right)):
            raise NotFast  # every part and result must be a token, or the tokenizers library refuses the file
        if kept:
            reduced += [[a.decode("utf-8"), b.decode("utf-8")]
                        for a, b in itertools.compress(zip(left, right, strict=True),
                                                       map(kept.__contains__, map(bytes.__add__, left, right)))]
        parts.append((PackedStrings.pack_pairs(left, right) if lay.pairs else PackedStrings.pack_bytes(items)).blob)
        count += len(left)
    if spaced:  # a part holds a space: gguf-py stores every part's spaces as U+0120
        parts = [PackedStrings.pack_bytes(_spaced_merges(lay)).blob]
    return PackedStrings(b"".join(parts), count), reduced


def _spaced_merges(lay: Layout) -> list[bytes]:
    out: list[bytes] = []
    for chunk in merge_chunks(lay):
        assert isinstance(chunk, tuple)  # pair form
        left, right = chunk
        out += [a.replace(b" ", _G_SPACE) + b" " + b.replace(b" ", _G_SPACE) for a, b in zip(left, right, strict=True)]
    return out


class _Reduced:
    """tokenizer.json with only the model tokens ``keep`` (renumbered ``0..R-1``) and the given merges."""

    def __init__(self, lay: Layout, tokens: Sequence[bytes], keep: list[int], merges: list[list[str]] | None = None,
                 ignore_merges: bool | None = None) -> None:
        self.full_ids = keep
        self.n_model = len(tokens)
        self.compact = {full: i for i, full in enumerate(keep)}
        self.placeholders: list[int] = []
        data = dict(lay.meta)
        model = data["model"] = dict(data["model"])
        model["vocab"] = {tokens[i].decode("utf-8"): k for k, i in enumerate(keep)}
        model["merges"] = merges or []
        if ignore_merges is not None:
            model["ignore_merges"] = ignore_merges
        added = data.get("added_tokens")
        if isinstance(added, list):
            data["added_tokens"] = [
                {**e, "id": self.reduced_id(e["id"])}
                if isinstance(e, dict) and isinstance(e.get("id"), int) and not isinstance(e["id"], bool) else e
                for e in added]
        if data.get("post_processor") is not None:
            data["post_processor"] = self._placeholder_ids(data["post_processor"])
        self.json = json.dumps(data, ensure_ascii=False)

    def reduced_id(self, full: int) -> int:
        """A target id as this tokenizer's id (-1: a model token it does not have)."""
        if full < self.n_model:
            return self.compact.get(full, -1)
        return full - self.n_model + len(self.full_ids)

    def _placeholder_ids(self, proc: Any) -> Any:
        """The post-processor with its literal ids swapped for placeholders (they map back to themselves)."""
        if not isinstance(proc, dict):
            raise NotFast
        kind = proc.get("type")

        def ph(i: Any) -> int:
            if not isinstance(i, int) or isinstance(i, bool) or i < 0:
                raise NotFast
            self.placeholders.append(i)
            return _PLACEHOLDER + len(self.placeholders) - 1

        if kind == "ByteLevel":
            return proc
        if kind == "Sequence":
            return {**proc, "processors": [self._placeholder_ids(p) for p in proc.get("processors") or []]}
        if kind == "TemplateProcessing":
            specials = proc.get("special_tokens")
            if not isinstance(specials, dict):
                raise NotFast
            return {**proc, "special_tokens": {
                k: {**v, "ids": [ph(i) for i in v.get("ids") or []]} if isinstance(v, dict) else v
                for k, v in specials.items()}}
        if kind in ("RobertaProcessing", "BertProcessing"):
            out = dict(proc)
            for key in ("sep", "cls"):
                pair = proc.get(key)
                if isinstance(pair, list) and len(pair) == 2:
                    out[key] = [pair[0], ph(pair[1])]
            return out
        raise NotFast

    def build(self, config: dict[str, Any], specials: list[Any]) -> Tokenizer:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_str(self.json)
        except Exception:  # the whole file may still load (or fail with its own message): take the slow path
            raise NotFast from None
        tok.no_truncation()
        tok.no_padding()
        apply_transformers_rules(tok, config, specials, self.reduced_id)
        return tok
