"""Special tokens that transformers' tokenizer classes declare by default, and which class upstream gets.

Upstream reads a ``tokenizer.json`` target through ``transformers.AutoTokenizer`` (byte-level BPE:
``get_vocab_base``; ``LlamaHfVocab``: the Llama handler's step 3 and Gemma 4). The class AutoTokenizer picks
brings its ``__init__`` defaults (``GemmaTokenizer``: ``mask_token="<mask>"``, ...): a default whose key is
absent from ``tokenizer_config.json`` is a special token all the same. transformers then makes every special
token that is not an added token yet a special added token (new id at the end when the vocabulary lacks it),
and ``all_special_ids`` lists them. Both upstream paths see that, the first through the added token's
``special`` flag, the second through ``all_special_ids`` (contract §2.5, docs/tokenizer.md).

Facts from transformers 5.24.0 (the version upstream's golden files were made with); file paths are relative to
its ``src/transformers/``.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

BACKEND = "TokenizersBackend"


@dataclass(frozen=True)
class ClassDefaults:
    """The special tokens a tokenizer class's ``__init__`` declares by default, in transformers' order."""

    tokens: tuple[tuple[str, str], ...]  # (attribute, token); attributes beyond the 7 named ones are model-specific
    source: str


#: tokenizer class -> its default special tokens (``None`` defaults are left out). The order is the order of
#: transformers' special-tokens map: bos, eos, unk, sep, pad, cls, mask, then model-specific attributes.
CLASS_DEFAULT_SPECIALS: dict[str, ClassDefaults] = {
    "GemmaTokenizer": ClassDefaults(
        (("bos_token", "<bos>"), ("eos_token", "<eos>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"),
         ("mask_token", "<mask>")),
        "models/gemma/tokenization_gemma.py (GemmaTokenizer.__init__)"),
    "LlamaTokenizer": ClassDefaults(
        (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>")),
        "models/llama/tokenization_llama.py (LlamaTokenizer.__init__)"),
    "CodeLlamaTokenizer": ClassDefaults(
        (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>"), ("prefix_token", "\u2581<PRE>"),
         ("middle_token", "\u2581<MID>"), ("suffix_token", "\u2581<SUF>"), ("eot_token", "\u2581<EOT>"),
         ("fill_token", "<FILL_ME>")),
        "models/code_llama/tokenization_code_llama.py (CodeLlamaTokenizer.__init__)"),
    "Qwen2Tokenizer": ClassDefaults(  # bos_token=None
        (("eos_token", "<|endoftext|>"), ("unk_token", "<|endoftext|>"), ("pad_token", "<|endoftext|>")),
        "models/qwen2/tokenization_qwen2.py (Qwen2Tokenizer.__init__)"),
    "GPT2Tokenizer": ClassDefaults(  # pad_token=None
        (("bos_token", "<|endoftext|>"), ("eos_token", "<|endoftext|>"), ("unk_token", "<|endoftext|>")),
        "models/gpt2/tokenization_gpt2.py (GPT2Tokenizer.__init__)"),
    # PreTrainedTokenizerFast is an alias; its <s> / </s> defaults apply only without a tokenizer.json.
    BACKEND: ClassDefaults((), "tokenization_utils_tokenizers.py (TokenizersBackend.__init__)"),
}

#: config.json ``model_type`` -> the tokenizer class transformers registers for it (models/auto/
#: tokenization_auto.py TOKENIZER_MAPPING_NAMES), for the model types of the supported targets. Model types not
#: listed (llama, gemma4, deepseek_v2/v3/v4, lfm2, gpt_oss, nemotron_h, ...) have none. mistral / ministral /
#: mixtral map to MistralCommonBackend when mistral-common is installed; without a tekken.json that also ends in
#: TokenizersBackend.
MODEL_TYPE_TOKENIZER: dict[str, str] = {
    **dict.fromkeys(("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_next"), "Qwen2Tokenizer"),
    **dict.fromkeys(("gemma", "gemma2", "gemma3", "gemma3_text"), "GemmaTokenizer"),
    **dict.fromkeys(("mistral", "ministral", "mixtral", "phi3", "phimoe", "granite"), BACKEND),
}
#: The model types above that are in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS: their registered class wins.
HUB_CLASS_IS_WRONG = frozenset({"qwen2", "phi3", "phimoe"})
#: Names AutoTokenizer turns into TokenizersBackend (PythonBackend is replaced by it).
_BACKEND_NAMES = frozenset({BACKEND, "PreTrainedTokenizerFast", "PythonBackend", "PreTrainedTokenizer",
                            "MistralCommonBackend"})
_NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _class_from_name(name: str) -> str | None:
    """``tokenizer_class_from_name``: a class of the table (``Fast`` suffix optional), a backend, or None."""
    if name in _BACKEND_NAMES:
        return BACKEND
    base = name.removesuffix("Fast")
    return base if base in CLASS_DEFAULT_SPECIALS else None


def _mentions(text: str | bytes | mmap.mmap, word: str) -> bool:
    """``word in text`` for the tokenizer.json text, its bytes or a map of them (the fast reader's); ``in`` on a
    map would compare single bytes, so bytes are searched with ``find``."""
    return word in text if isinstance(text, str) else text.find(word.encode("utf-8")) >= 0


def resolve_tokenizer_class(tokenizer_config: dict[str, Any], target_config: dict[str, Any],
                            tokenizer_json_text: str | bytes | mmap.mmap) -> str:
    """The tokenizer class ``AutoTokenizer.from_pretrained(target_dir)`` instantiates (transformers 5.24.0,
    models/auto/tokenization_auto.py), as a key of :data:`CLASS_DEFAULT_SPECIALS`.

    Unknown names (``Qwen3Tokenizer``, ``FooTokenizer``) fall back to TokenizersBackend, as transformers does.

    Example:
        >>> resolve_tokenizer_class({"tokenizer_class": "GemmaTokenizerFast"}, {}, "{}")
        'GemmaTokenizer'
        >>> resolve_tokenizer_class({"tokenizer_class": "LlamaTokenizerFast"}, {}, '{"type": "ByteLevel"}')
        'TokenizersBackend'
    """
    config_class = tokenizer_config.get("tokenizer_class")
    config_class = config_class if isinstance(config_class, str) and config_class else None
    model_class = target_config.get("tokenizer_class")
    hub = config_class or (model_class if isinstance(model_class, str) and model_class else None)
    model_type = target_config.get("model_type")
    model_type = model_type if isinstance(model_type, str) else ""
    registered = MODEL_TYPE_TOKENIZER.get(model_type)
    auto_map = tokenizer_config.get("auto_map")
    remote = isinstance(auto_map, (list, tuple)) or (isinstance(auto_map, dict) and "AutoTokenizer" in auto_map)
    if not remote and hub is not None:
        # A LlamaTokenizer declared over a byte-level tokenizer.json would get Metaspace: the backend instead.
        if hub.removesuffix("Fast") == "LlamaTokenizer" and model_type not in HUB_CLASS_IS_WRONG and \
                _mentions(tokenizer_json_text, '"ByteLevel"'):
            return BACKEND
        if registered is not None and registered.removesuffix("Fast") != hub.removesuffix("Fast"):
            if registered in _BACKEND_NAMES:
                return BACKEND
            return _class_from_name(registered if model_type in HUB_CLASS_IS_WRONG else hub) or BACKEND
    if hub is not None:
        return _class_from_name(hub) or BACKEND
    return registered if registered is not None else BACKEND


def special_token_entries(tokenizer_config: dict[str, Any], tokenizer_class: str) -> list[Any]:
    """The special-token entries transformers holds for this ``tokenizer_config.json`` (strings or AddedToken
    dicts), in ``all_special_tokens`` order: the 7 named ones, model-specific ``*_token`` ones, then extras.

    A key present in the config wins over the class default, also when it is null (no such token).

    Example:
        >>> special_token_entries({"bos_token": "<s>", "pad_token": None}, "GemmaTokenizer")
        ['<s>', '<eos>', '<unk>', '<mask>']
    """
    defaults = dict(CLASS_DEFAULT_SPECIALS.get(tokenizer_class, CLASS_DEFAULT_SPECIALS[BACKEND]).tokens)
    entries = {key: tokenizer_config.get(key, defaults.get(key)) for key in _NAMED}
    # Model-specific tokens: the class's own, then every other "*_token" key of the config with a token value.
    for key, value in defaults.items():
        if key not in _NAMED:
            entries[key] = tokenizer_config.get(key, value)
    for key, value in tokenizer_config.items():
        if key.endswith("_token") and key not in _NAMED and (isinstance(value, str) or (
                isinstance(value, dict) and value.get("__type") == "AddedToken")):
            entries[key] = value
    out = [value for value in entries.values() if value is not None]
    for key in ("additional_special_tokens", "extra_special_tokens"):  # a list, or (extra) a dict of named ones
        extra = tokenizer_config.get(key)
        out += list(extra.values()) if isinstance(extra, dict) else list(extra) if isinstance(extra, list) else []
    return out
