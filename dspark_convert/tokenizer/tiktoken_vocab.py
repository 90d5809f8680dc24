"""tiktoken vocabularies read as data: Qwen-1 (``qwen.tiktoken``), HunYuan (``hy.tiktoken``), Kimi (``tiktoken.model``).

llama.cpp b11434 loads these targets through their remote tokenizer code (``AutoTokenizer(trust_remote_code=True)``)
and reads ``mergeable_ranks`` and ``special_tokens`` from it. dspark-convert never runs a checkpoint's code: it reads
the rank file (one ``base64-token rank`` pair a line) and builds the special tokens the way each family's tokenizer
module defines them (:data:`QWEN1`, :data:`HUNYUAN`, :func:`kimi_specials`), then replays upstream's method:

* the token list: every rank's bytes in GPT-2's byte alphabet at its id, special tokens at theirs (CONTROL), the
  rest of the draft's ``vocab_size`` as ``[PAD{i}]`` (UNUSED);
* the merges: for each multi-byte token, its bytes merged by rank below its own (upstream's ``QwenModel.bpe``) down
  to the last pair (:func:`merges_of`);
* ``tokenizer.ggml.pre``: the sha256 of the ids the tokenizer gives the check text (tiktoken's byte-pair encoding
  with the family's split pattern, :func:`chkhsh`), looked up in upstream's table.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ConvertError
from ..schema import TokenType

#: the split pattern of Qwen-1's and HunYuan's tokenizer modules (Qwen2's regex)
_QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: the split pattern of Kimi's ``tokenization_kimi.py`` (``TikTokenTokenizer.pat_str``)
KIMI_PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
KIMI_FILE = "tiktoken.model"
#: the split pattern transformers' ``TikTokenConverter`` gives a tiktoken file it converts itself (Llama 3's)
CONVERTER_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Kimi's tokenizer reserves this many special ids (plus two) after the ranks
KIMI_RESERVED = 256 + 2


@dataclass(frozen=True)
class TiktokenFamily:
    """A tokenizer module's fixed facts: its rank file, split pattern, special tokens and their first id."""

    module: str  # the remote tokenizer module these facts come from
    file: str
    pattern: str
    specials: tuple[str, ...]
    first_special: int
    by_line: bool  # ids are line numbers (duplicates skipped), not the file's rank field
    nfc: bool  # the text is NFC-normalised before encoding

    def special_tokens(self) -> dict[str, int]:
        return {t: self.first_special + i for i, t in enumerate(self.specials)}


_EXTRAS = tuple(f"<|extra_{i}|>" for i in range(205))
QWEN1 = TiktokenFamily("tokenization_qwen.py", "qwen.tiktoken", _QWEN_PATTERN,
                       ("<|endoftext|>", "<|im_start|>", "<|im_end|>") + _EXTRAS, 151643, by_line=False, nfc=True)
HUNYUAN = TiktokenFamily("tokenization_hy.py", "hy.tiktoken", _QWEN_PATTERN,
                         ("<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>") + _EXTRAS, 127957,
                         by_line=True, nfc=True)


def read_ranks(path: Path, *, by_line: bool = False) -> dict[bytes, int]:
    """The token bytes -> id of a tiktoken rank file, in file order.

    ``by_line``: the id is the count of distinct tokens before the line (HunYuan's loader), else the line's rank
    field (tiktoken's ``load_tiktoken_bpe``: a repeated token keeps its first position and its last rank)."""
    if not path.is_file():
        raise ConvertError(f"{path}: file not found (the target's tiktoken vocabulary)")
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line:
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            token = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except (ValueError, binascii.Error):
            raise ConvertError(f"{path}: line {number} is not 'BASE64-TOKEN RANK'") from None
        if by_line:
            if token not in ranks:
                ranks[token] = len(ranks)
        else:
            if rank < 0:
                raise ConvertError(f"{path}: line {number}: rank {rank} is negative")
            ranks[token] = rank
    if not ranks:
        raise ConvertError(f"{path}: no tokens")
    return ranks


@lru_cache(maxsize=1)
def _byte_chars() -> tuple[str, ...]:
    """GPT-2's byte -> printable character table (transformers' ``bytes_to_unicode``)."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) | set(range(ord("®"), 256))
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return tuple(out)


def byte_text(token: bytes) -> str:
    """``token`` in GPT-2's byte alphabet (upstream's ``QwenModel.token_bytes_to_string``)."""
    chars = _byte_chars()
    return "".join(chars[b] for b in token)


def _merge_parts(ranks: dict[bytes, int], token: bytes, max_rank: float) -> list[bytes]:
    """Upstream's ``QwenModel.bpe``: the token's bytes merged by the lowest-ranked adjacent pair (first on ties)
    while that rank is below ``max_rank`` (tiktoken's encoding: ``max_rank`` infinite)."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while True:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best_rank is None or best_rank >= max_rank:
            return parts
        parts[best:best + 2] = [parts[best] + parts[best + 1]]


def merges_of(ranks: dict[bytes, int], *, strict: bool, where: Path) -> list[str]:
    """The merges upstream derives from the ranks, in rank-file order: for each token of two or more bytes the two
    parts of :func:`_merge_parts`. A token that does not end in two parts is skipped, or with ``strict`` (Qwen-1's
    method asserts two) stops the conversion."""
    out: list[str] = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        parts = _merge_parts(ranks, token, rank)
        if len(parts) != 2:
            if strict:
                raise ConvertError(f"{where}: token {token!r} (rank {rank}) does not split into two lower-ranked "
                                   f"parts ({len(parts)}); llama.cpp's _set_vocab_qwen asserts that every token does")
            continue
        out.append(byte_text(parts[0]) + " " + byte_text(parts[1]))
    return out


def _pieces(text: str, pattern: str) -> list[str]:
    """The pattern's matches over ``text`` (tiktoken's ``find_iter``; unmatched text is dropped)."""
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import Split

    split = Split(Regex(pattern), behavior="removed", invert=True)
    return [p for p, _ in split.pre_tokenize_str(text)]


def _encode_piece(ranks: dict[bytes, int], piece: bytes, where: Path) -> list[int]:
    """tiktoken's byte-pair encoding of one piece: the whole piece when it is a token, else its bytes merged by the
    lowest rank of any adjacent pair (first on ties) until no pair is a token."""
    if piece in ranks:
        return [ranks[piece]]
    parts = _merge_parts(ranks, piece, float("inf"))
    missing = [p for p in parts if p not in ranks]
    if missing:
        raise ConvertError(f"{where}: byte {missing[0]!r} has no rank (the tokenizer cannot encode text with it)")
    return [ranks[p] for p in parts]


def encode(text: str, ranks: dict[bytes, int], specials: dict[str, int], pattern: str, *, nfc: bool,
           where: Path) -> list[int]:
    """The ids the family's tokenizer gives ``text`` with every special token allowed (tiktoken's
    ``encode(allowed_special="all")``), after NFC normalisation when the family applies it."""
    if nfc:
        text = unicodedata.normalize("NFC", text)
    ids: list[int] = []
    start = 0
    names = sorted(specials, key=len, reverse=True)
    while start <= len(text):
        hits = [(text.find(n, start), n) for n in names if n]
        hits = [(at, n) for at, n in hits if at >= 0]
        at, name = min(hits, key=lambda h: h[0]) if hits else (len(text), "")
        for piece in _pieces(text[start:at], pattern) if at > start else ():
            ids.extend(_encode_piece(ranks, piece.encode("utf-8"), where))
        if not name:
            break
        ids.append(specials[name])
        start = at + len(name)
    return ids


def chkhsh(text: str, ranks: dict[bytes, int], specials: dict[str, int], pattern: str, *, nfc: bool,
           where: Path) -> str:
    """sha256 of ``str(encode(text))``: upstream's pre-tokenizer fingerprint."""
    return hashlib.sha256(str(encode(text, ranks, specials, pattern, nfc=nfc, where=where)).encode()).hexdigest()


def token_list(ranks: dict[bytes, int], specials: dict[str, int], n_vocab: int,
               control: Iterable[int] | None = None) -> tuple[list[str], list[int]]:
    """Tokens and types for ids ``0..n_vocab-1``: upstream's ``{**vocab, **special_tokens}`` reversed (a later entry
    wins an id), CONTROL for the ids in ``control`` (default: the special tokens' texts), NORMAL else, and
    ``[PAD{i}]`` UNUSED where no token has the id."""
    vocab = {byte_text(t): r for t, r in ranks.items()}
    merged = {**vocab, **specials}
    reverse = {i: t for t, i in merged.items()}
    ctl = set(control) if control is not None else None
    tokens: list[str] = []
    types: list[int] = []
    for i in range(n_vocab):
        tok = reverse.get(i)
        if tok is None:
            tokens.append(f"[PAD{i}]")
            types.append(TokenType.UNUSED)
            continue
        tokens.append(tok)
        special = i in ctl if ctl is not None else tok in specials
        types.append(TokenType.CONTROL if special else TokenType.NORMAL)
    return tokens, types


def kimi_specials(n_base: int, decoder: dict[int, str]) -> dict[str, int]:
    """Kimi's special tokens: ids ``n_base .. n_base+257`` named by tokenizer_config.json's ``added_tokens_decoder``
    (``<|reserved_token_{id}|>`` where it names none); a name given twice keeps its last id."""
    return {decoder.get(i, f"<|reserved_token_{i}|>"): i for i in range(n_base, n_base + KIMI_RESERVED)}
