"""tokenizer.json targets: loading as transformers would, ``tokenizer.ggml.pre`` identification, token lists.

Upstream builds these lists from ``transformers.AutoTokenizer``; we use the ``tokenizers`` library (the engine
under transformers' fast tokenizers) and replay the few things transformers 5 does on top of tokenizer.json
that change the result: named special tokens (with the defaults of the tokenizer class AutoTokenizer picks,
class_defaults.py) and ``added_tokens_decoder`` entries of tokenizer_config.json become added tokens, and
truncation/padding are off when encoding. tokenizer_config's ``add_bos_token`` / ``add_eos_token`` are ignored
(transformers 5.24.0 drops them when a tokenizer.json exists: its post-processor decides). Tokenizer classes that rebuild their backend from vocab/merges are
assumed to rebuild it equal to tokenizer.json.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConvertError
from ..hf.checkpoint import load_json_if_present
from ..notes import note
from ..schema import TokenType
from .class_defaults import resolve_tokenizer_class, special_token_entries
from .special import looks_special, token_content
from .tokjson import check_merge_cuts, check_tokenizer_sizes

if TYPE_CHECKING:  # the tokenizers library is imported when a tokenizer is read (not for a cached block)
    from tokenizers import AddedToken, Tokenizer

_DATA = Path(__file__).parent / "data"

# Split regexes of known pre-tokenizers (as written in tokenizer.json), for targets whose hash is not in the table.
# Facts from llama.cpp src/llama-vocab.cpp ("original regex from tokenizer.json") and tokenizers' ByteLevel.
_GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_DSV3_RES = (r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
             "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
             "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
#: pre-tokenizer regex signature -> tokenizer.ggml.pre (a ByteLevel with use_regex adds the GPT-2 regex).
REGEX_FAMILIES: dict[tuple[str, ...], str] = {
    (_GPT2_RE,): "gpt-2",
    (_LLAMA3_RE,): "llama-bpe",  # Llama 3, and LFM2 (llama.cpp treats lfm2 as the Llama-3 pre-tokenizer)
    (_QWEN2_RE,): "qwen2",
    (_QWEN35_RE,): "qwen35",
    _DSV3_RES: "deepseek-v3",  # also JoyAI / Hunyuan-dense, which llama.cpp splits the same way
}


@lru_cache(maxsize=1)
def check_text() -> str:
    """The text upstream encodes to fingerprint a BPE pre-tokenizer."""
    return json.loads((_DATA / "pre-tokenizer-check-text.json").read_text(encoding="utf-8"))["CHECK_TEXT"]


@lru_cache(maxsize=1)
def pre_table() -> tuple[tuple[str, str], ...]:
    """(chkhsh, pre) rows of the upstream table, in file order."""
    rows = []
    for line in (_DATA / "pre-tokenizer-hashes.tsv").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#") or line.startswith("chkhsh\t"):
            continue
        fields = line.split("\t")
        rows.append((fields[0], fields[1]))
    return tuple(rows)


@dataclass
class HFTokenizer:
    """A target tokenizer.json loaded the way transformers' AutoTokenizer would see it."""

    path: Path  # the tokenizer.json
    data: dict[str, Any]  # its parsed JSON
    config: dict[str, Any]  # tokenizer_config.json ({} when absent)
    tok: Tokenizer
    specials: list[Any]  # its special-token entries, class defaults included (class_defaults.py)

    def decode_roundtrip(self, text: str) -> str:
        """transformers' ``decode(encode(text, add_special_tokens=False))``."""
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return cleaned(self.tok.decode(ids, skip_special_tokens=False), self.config)


def cleaned(decoded: str, config: dict[str, Any]) -> str:
    """transformers' ``clean_up_tokenization`` of decoded text, when tokenizer_config.json asks for it."""
    return _clean_up_tokenization(decoded) if config.get("clean_up_tokenization_spaces") is True else decoded


def _clean_up_tokenization(s: str) -> str:
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


def _config_token(entry: Any, special: bool) -> AddedToken | None:
    """A tokenizer_config token entry (string or AddedToken dict) as an AddedToken."""
    from tokenizers import AddedToken

    if isinstance(entry, str):
        return AddedToken(entry, special=special) if special else AddedToken(entry)
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        flags = {k: bool(entry[k]) for k in ("single_word", "lstrip", "rstrip", "normalized", "special") if k in entry}
        if special:
            flags["special"] = True
        return AddedToken(entry["content"], **flags)
    return None


def load_hf_tokenizer(tokenizer_json: Path) -> HFTokenizer:
    """Load ``tokenizer_json`` (and its sibling tokenizer_config.json) as transformers 5 would.

    Example:
        >>> hf = load_hf_tokenizer(Path("target/tokenizer.json"))  # doctest: +SKIP
        >>> hf.tok.get_vocab_size()  # doctest: +SKIP
        129280
    """
    tokenizer_json = Path(tokenizer_json)
    if not tokenizer_json.is_file():
        raise ConvertError(f"{tokenizer_json}: file not found (a byte-level BPE target needs tokenizer.json)")
    try:
        text = tokenizer_json.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConvertError(f"{tokenizer_json}: malformed tokenizer.json (not UTF-8: {e.reason} at byte {e.start:,})") from None
    from tokenizers import Tokenizer

    try:
        data = json.loads(text)
        if isinstance(data, dict):
            check_tokenizer_sizes(data, tokenizer_json)  # before the library sees it: it aborts the process
            check_merge_cuts(data, tokenizer_json)
        tok = Tokenizer.from_str(text)
    except ConvertError:
        raise
    except BaseException as e:  # tokenizers raises a bare Exception for bad files, or panics (a BaseException)
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ConvertError(f"{tokenizer_json}: malformed tokenizer.json ({reason})") from None
    if not isinstance(data, dict):
        raise ConvertError(f"{tokenizer_json}: malformed tokenizer.json (top level is not an object)")
    config = load_json_if_present(tokenizer_json.parent / "tokenizer_config.json") or {}
    target_config = load_json_if_present(tokenizer_json.parent / "config.json") or {}
    specials = special_token_entries(config, resolve_tokenizer_class(config, target_config, text))
    tok.no_truncation()
    tok.no_padding()
    apply_transformers_rules(tok, config, specials)
    return HFTokenizer(tokenizer_json, data, config, tok, specials)


def apply_transformers_rules(tok: Tokenizer, config: dict[str, Any], specials: list[Any],
                             tok_id: Callable[[int], int] = lambda i: i) -> None:
    """Replay on ``tok`` what transformers 5 does on top of tokenizer.json (see the module docstring);
    ``specials`` are the special-token entries of :func:`~.class_defaults.special_token_entries`.

    ``tok_id`` maps a token id of the target (the ids tokenizer_config.json names) to ``tok``'s own, for a
    tokenizer built with fewer tokens (:mod:`~dspark_convert.tokenizer.fastbpe`).
    """
    # 1. added_tokens_decoder entries that differ from what tokenizer.json holds are (re-)added.
    current = tok.get_added_tokens_decoder()
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        todo = []
        for key, entry in sorted(decoder.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else -1):
            at = _config_token(entry, special=False)
            old = current.get(tok_id(int(key))) if str(key).isdigit() else None
            if at is not None and (old is None or repr(old) != repr(at)):
                todo.append(at)
        if todo:
            tok.add_tokens(todo)
            current = tok.get_added_tokens_decoder()
    # 2. Special tokens (class defaults included) that are not added tokens yet become special added tokens.
    have = {at.content for at in current.values()}
    todo = []
    for entry in specials:
        at = _config_token(entry, special=True)
        if at is not None and at.content and at.content not in have:
            have.add(at.content)
            todo.append(at)
    if todo:
        tok.add_special_tokens(todo)
    tok.encode_special_tokens = bool(config.get("split_special_tokens", False))
    # 3. tokenizer_config's add_bos_token / add_eos_token do nothing here: with a tokenizer.json, transformers
    #    5.24.0 drops both before the class is built (tokenization_utils_base.py, _from_pretrained) and keeps
    #    tokenizer.json's post-processor (a DeepSeek-V3 target with add_bos_token true hashes without BOS).


# ---------------------------------------------------------------------------------------------- tokenizer.ggml.pre
def chkhsh(hf: HFTokenizer) -> str:
    """sha256 of ``str(encode(CHECK_TEXT))`` with the tokenizer's default special tokens."""
    ids = hf.tok.encode(check_text()).ids
    return hashlib.sha256(str(ids).encode()).hexdigest()


def _regex_signature(pre: Any) -> tuple[str, ...]:
    items = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    sig: list[str] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "Split":
            pattern = item.get("pattern") or {}
            regex = pattern.get("Regex")
            sig.append(regex if isinstance(regex, str) else re.escape(str(pattern.get("String", ""))))
        elif item.get("type") == "ByteLevel" and item.get("use_regex", True):
            sig.append(_GPT2_RE)
    return tuple(sig)


def pre_from_regex(data: dict[str, Any]) -> str | None:
    """The pre-tokenizer family recognised from the Split regexes of a parsed tokenizer.json, or None."""
    return REGEX_FAMILIES.get(_regex_signature(data.get("pre_tokenizer")))


def pre_of(hf: HFTokenizer) -> str:
    """``tokenizer.ggml.pre`` of a loaded tokenizer: the hash table first (last match wins), then the regex."""
    return pre_from_hash(chkhsh(hf), hf.data, hf.path)


def pre_from_hash(h: str, data: dict[str, Any], path: Path) -> str:
    """``tokenizer.ggml.pre`` for the chkhsh ``h`` of the tokenizer.json at ``path`` (parsed: ``data``)."""
    res = None
    for row_hash, pre in pre_table():
        if row_hash == h:
            res = pre
    if res is not None:
        return res
    res = pre_from_regex(data)
    if res is not None:
        # Upstream refuses such tokenizers; we accept a known pre-tokenizer (the hash differs by vocabulary).
        note("tokenizer.ggml.pre", "pre-tokenizer-by-regex",
             f"{path}: chkhsh {h} is not in llama.cpp's table (a vocabulary it has not seen); the pre-tokenizer "
             f"regex is the {res!r} family's, so tokenizer.ggml.pre = {res!r}")
        return res
    raise ConvertError(f"{path}: BPE pre-tokenizer not recognized (chkhsh {h} is not in llama.cpp's table "
                       "and the pre_tokenizer regex matches no known family)")


# ---------------------------------------------------------------------------------------------- token lists
def model_vocab_of(hf: HFTokenizer) -> dict[str, int]:
    """The model vocabulary (no added tokens) from the parsed JSON: what the model holds, without paying for
    a Rust-to-Python copy of ``Tokenizer.get_vocab``."""
    vocab = hf.data.get("model", {}).get("vocab") if isinstance(hf.data.get("model"), dict) else None
    if isinstance(vocab, dict):  # tokenizers already rejected non-integer ids when it parsed the file
        return vocab
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...] in id order
        return {item[0] if isinstance(item, list) else item: i for i, item in enumerate(vocab)}
    return hf.tok.get_vocab(with_added_tokens=False)


def bpe_token_list(hf: HFTokenizer, n_vocab: int | None) -> tuple[list[str], list[int]]:
    """Tokens and token types of upstream ``get_vocab_base`` (contract §2.5.2), padded to ``n_vocab``."""
    model_vocab = model_vocab_of(hf)
    added = hf.tok.get_added_tokens_decoder()
    # transformers' tokenizer.vocab: the model vocab, then the added tokens (an added token wins its content)
    vocab = dict(model_vocab)
    vocab.update((at.content, i) for i, at in added.items())
    n = len(vocab) if n_vocab is None else n_vocab
    top_id = max(vocab.values(), default=-1)
    if top_id >= n:
        top_tok = next(t for t, i in vocab.items() if i == top_id)
        raise ConvertError(f"{hf.path}: token id {top_id} ({top_tok!r}) does not fit the draft vocab_size {n}")
    tokens: list[Any] = [None] * n
    for text, i in vocab.items():
        if i >= 0:
            tokens[i] = text
    for i, at in added.items():  # an added token wins over a model token with the same id
        tokens[i] = at.content
    types = [TokenType.NORMAL] * n
    for i, text in enumerate(tokens):
        if text is None:
            tokens[i] = f"[PAD{i}]"
            types[i] = TokenType.UNUSED
    for i, at in added.items():
        text = at.content
        if not at.normalized:
            # llama.cpp expects CONTROL/USER_DEFINED tokens pre-normalized, so upstream round-trips them.
            text = hf.decode_roundtrip(text)
        if at.special or looks_special(text):
            types[i] = TokenType.CONTROL
        else:
            text = text.replace("\u2581", " ")
            types[i] = TokenType.USER_DEFINED
        tokens[i] = text
    return tokens, types


def is_llama_hf(data: dict[str, Any]) -> bool:
    """True when upstream's ``LlamaHfVocab`` accepts the tokenizer.json (BPE, byte_fallback, Sequence decoder)."""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        return False
    if model.get("ignore_merges", False) and not model.get("byte_fallback", True):
        return False  # Llama 3: upstream's TypeError path
    decoder = data.get("decoder")
    return bool(model.get("byte_fallback", False)) and isinstance(decoder, dict) and decoder.get("type") == "Sequence"


def _all_special_tokens(hf: HFTokenizer) -> list[str]:
    """transformers' ``all_special_tokens``: contents of the special-token entries, first occurrence wins."""
    out: list[str] = []
    for entry in hf.specials:
        content = token_content(entry)
        if content is not None and content not in out:
            out.append(content)
    return out


_BYTE_RE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def llama_hf_token_list(hf: HFTokenizer) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types of upstream ``LlamaHfVocab`` (no padding: the tokenizer's own size)."""
    vocab = hf.tok.get_vocab(with_added_tokens=True)
    base = hf.tok.get_vocab_size(with_added_tokens=False)
    special_ids = {vocab[t] for t in _all_special_tokens(hf) if t in vocab}
    reverse: dict[int, str] = {i: t for t, i in vocab.items()}
    added = sorted((i, at.content) for i, at in hf.tok.get_added_tokens_decoder().items() if i >= base)
    tokens: list[str] = []
    types: list[int] = []
    for i in range(base):
        text = reverse.get(i)
        if text is None:
            raise ConvertError(f"{hf.path}: base vocabulary has no token with id {i}")
        tokens.append(text)
        if _BYTE_RE.fullmatch(text):
            types.append(TokenType.BYTE)
        else:
            types.append(TokenType.CONTROL if i in special_ids else TokenType.NORMAL)
    specials = {t: vocab[t] for t in _all_special_tokens(hf) if t in vocab}
    for _i, text in added:
        tokens.append(text)
        types.append(TokenType.CONTROL if text in specials and specials[text] in special_ids
                     else TokenType.USER_DEFINED)
    return tokens, [-1000.0] * len(tokens), types


def xverse_token_list(hf: HFTokenizer, n_vocab: int | None) -> tuple[list[str], list[int]]:
    """Tokens and types of upstream ``XverseModel.set_vocab``: every id below ``n`` from transformers' vocabulary
    (added tokens included); ``\\x00`` becomes ``<b'\\x00'>`` (BYTE), ``<0xNN>`` pieces are BYTE, added tokens
    CONTROL when special else USER_DEFINED, the rest NORMAL. No scores."""
    vocab = hf.tok.get_vocab(with_added_tokens=True)
    n = n_vocab if n_vocab is not None else len(vocab)
    top = max(vocab.values(), default=-1)
    if top >= n:
        raise ConvertError(f"{hf.path}: token id {top} does not fit the draft vocab_size {n}")
    reverse = {i: t for t, i in vocab.items()}
    decoder = hf.tok.get_added_tokens_decoder()
    added = {at.content: i for i, at in sorted(decoder.items())}
    tokens: list[str] = []
    types: list[int] = []
    for i in range(n):
        text = reverse.get(i)
        if text is None:
            raise ConvertError(f"{hf.path}: no token with id {i} (llama.cpp's Xverse vocab method reads every id below "
                               f"the draft vocab_size {n})")
        if text == "\x00":
            kind, text = TokenType.BYTE, "<b'\\x00'>"
        elif _BYTE_RE.fullmatch(text):
            kind = TokenType.BYTE
        elif text in added:
            at = decoder.get(i)
            if at is None:
                raise ConvertError(f"{hf.path}: added token {text!r} has id {added[text]}, not {i}")
            kind = TokenType.CONTROL if at.special else TokenType.USER_DEFINED
        else:
            kind = TokenType.NORMAL
        tokens.append(text)
        types.append(kind)
    return tokens, types
