"""Target tokenizer -> the GGUF ``tokenizer.*`` KVs upstream llama.cpp writes (contract §2.5).

Two public steps: :func:`vocab_handler_for_target` picks the handler from the target ``config.json``
(``architectures[0]``, the converter class upstream would use, §2.5.1), and :func:`target_vocab_kvs` runs it.
Handlers are named after the upstream path they replay:

=============  =================================================================================================
``qwen``        SentencePiece when the target has ``tokenizer.model``, else byte-level BPE (Qwen2Model)
``gpt2``        byte-level BPE (``TextModel.set_vocab``: LFM2, DeepSeek-V2/V3, Qwen MoE, gpt-oss, ...)
``llama``       LlamaModel: add_space_prefix, SentencePiece / LlamaHfVocab / byte-level BPE, CodeLlama/Granite
``gemma``       Gemma 1: SentencePiece, CodeGemma eot id 107, add_space_prefix false
``gemma2``      SentencePiece, add_space_prefix false
``gemma3``      SentencePiece + add_space_prefix false when ``tokenizer.model`` exists, else byte-level BPE
``gemma4``      LlamaHfVocab-style list, model ``gemma4``, add_space_prefix false, add_bos_token true
``nemotron_h``  byte-level BPE padded to a multiple of 8, add_bos_token true unless the target is MoE
``phi3``        Phi-3's own SentencePiece list (byte-level BPE when tokenizer_class is GPT2Tokenizer)
``muse``        byte-level BPE, then ``eot_token_id`` = the id of ``<|eot|>`` (MuseGlimmerModel)
=============  =================================================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..hf.checkpoint import TEXT_CONFIG_KEYS, load_json_if_present, read_json
from ..plan import KV, add_kv
from .bpe import (
    HFTokenizer,
    bpe_token_list,
    identify_bpe_pre,
    is_llama_hf,
    llama_hf_token_list,
    load_hf_tokenizer,
    pre_from_hash,
    pre_of,
)
from .fastbpe import NotFast, load_fast_bpe
from .special import SpecialVocab
from .spm import phi3_token_list, spm_token_list

__all__ = ["TARGET_HANDLERS", "HANDLERS", "vocab_handler_for_target", "target_vocab_kvs", "identify_bpe_pre"]

#: target ``architectures[0]`` -> handler. Source: upstream conversion/__init__.py + each class's set_vocab.
TARGET_HANDLERS: dict[str, str] = {
    # Qwen2Model / Qwen3Model: SentencePiece first
    "Qwen2ForCausalLM": "qwen", "Qwen2Model": "qwen", "Qwen3ForCausalLM": "qwen", "Qwen3Model": "qwen",
    "DeepseekForCausalLM": "qwen",  # DeepseekModel tries SentencePiece first too
    "Qwen3VLForConditionalGeneration": "qwen",  # b11434 Qwen3VLTextModel(Qwen3Model)
    # TextModel.set_vocab (byte-level BPE)
    "Qwen2MoeForCausalLM": "gpt2", "Qwen3MoeForCausalLM": "gpt2", "Qwen3NextForCausalLM": "gpt2",
    "Qwen3VLMoeForConditionalGeneration": "gpt2",  # b11434 Qwen3VLMoeTextModel(Qwen3MoeModel)
    "Lfm2ForCausalLM": "gpt2", "LFM2ForCausalLM": "gpt2", "Lfm2MoeForCausalLM": "gpt2",
    "DeepseekV2ForCausalLM": "gpt2", "DeepseekV3ForCausalLM": "gpt2",
    **S.DRAFT_CARRIER_TOKENIZERS,  # checkpoints that carry their draft, under either class: their own target
    "GptOssForCausalLM": "gpt2",
    # LlamaModel
    "LlamaForCausalLM": "llama", "LLaMAForCausalLM": "llama", "LlamaModel": "llama",
    "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",
    # Gemma family
    "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma4ForCausalLM": "gemma4", "Gemma4ForConditionalGeneration": "gemma4",
    "NemotronHForCausalLM": "nemotron_h",
    "Phi3ForCausalLM": "phi3",
    "MuseGlimmerForConditionalGeneration": "muse",
}

def _target_config(target_dir: Path) -> dict[str, Any]:
    path = target_dir / "config.json"
    config = load_json_if_present(path)
    if config is None:
        raise ConvertError(f"{path}: file not found (the target model directory needs its config.json)")
    return config


def vocab_handler_for_target(target_dir: Path) -> str:
    """The tokenizer handler upstream runs for this target (its ``config.json`` ``architectures[0]``).

    Example:
        >>> vocab_handler_for_target(Path("/tmp/golden_in/target"))  # doctest: +SKIP
        'qwen'
    """
    target_dir = Path(target_dir)
    config = _target_config(target_dir)
    archs = config.get("architectures")
    for key in TEXT_CONFIG_KEYS:  # a multimodal wrapper may name the text arch only in its text config
        if not archs and isinstance(config.get(key), dict):
            archs = config[key].get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConvertError(f"{target_dir / 'config.json'}: key 'architectures' is {archs!r}, "
                           "expected a list naming the target architecture")
    handler = TARGET_HANDLERS.get(archs[0])
    if handler is None:
        raise ConvertError(f"{target_dir / 'config.json'}: architecture '{archs[0]}' is not supported as a target "
                           f"(known: {', '.join(sorted(TARGET_HANDLERS))})")
    return handler


# ---------------------------------------------------------------------------------------------- KV helpers
def _str(name: str, value: str) -> KV:
    return KV(name, VT.STRING, value)


def _bool(name: str, value: bool) -> KV:
    return KV(name, VT.BOOL, bool(value))


def _token_kvs(kvs: list[KV], model: str, pre: str | None, tokens: Sequence[str], scores: list[float] | None,
               types: list[int]) -> None:
    add_kv(kvs, _str(S.TOKENIZER_MODEL, model))
    if pre is not None:
        add_kv(kvs, _str(S.TOKENIZER_PRE, pre))
    add_kv(kvs, KV(S.TOKENIZER_TOKENS, VT.ARRAY, tokens, VT.STRING))
    if scores is not None:
        add_kv(kvs, KV(S.TOKENIZER_SCORES, VT.ARRAY, scores, VT.FLOAT32))
    add_kv(kvs, KV(S.TOKENIZER_TOKEN_TYPE, VT.ARRAY, list(types), VT.INT32))


def _extend(kvs: list[KV], more: list[KV]) -> None:
    for kv in more:
        add_kv(kvs, kv)


# ---------------------------------------------------------------------------------------------- base paths
def _set_vocab_gpt2(target_dir: Path, n_vocab: int | None, kvs: list[KV], hf: HFTokenizer | None = None) -> None:
    """Byte-level BPE (contract §2.5.2): model gpt2, pre from the hash table, no scores, merges.

    Read by :mod:`~dspark_convert.tokenizer.fastbpe` when it reproduces the file exactly, else loaded whole.
    """
    if hf is None and _set_vocab_gpt2_fast(target_dir, n_vocab, kvs):
        return
    hf = hf or load_hf_tokenizer(target_dir / "tokenizer.json")
    tokens, types = bpe_token_list(hf, n_vocab)
    _token_kvs(kvs, "gpt2", pre_of(hf), tokens, None, types)
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=hf.data).kvs())


def _set_vocab_gpt2_fast(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> bool:
    try:
        fast = load_fast_bpe(target_dir / "tokenizer.json")
        tokens, types = fast.token_list(n_vocab)
        h = fast.chkhsh()
    except NotFast:
        return False
    _token_kvs(kvs, "gpt2", pre_from_hash(h, fast.data, fast.path), tokens, None, types)
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=fast.data, merges=fast.merges).kvs())
    return True


def _set_vocab_sentencepiece(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    """SentencePiece (contract §2.5.3): model llama, pre default, scores; ids range-checked, no merges."""
    tokens, scores, types = spm_token_list(target_dir, n_vocab)
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, n_vocab=len(tokens)).kvs())


def _set_vocab_llama_hf(target_dir: Path, kvs: list[KV], hf: HFTokenizer) -> None:
    tokens, scores, types = llama_hf_token_list(hf)
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, n_vocab=len(tokens), tokenizer_data=hf.data).kvs())


# ---------------------------------------------------------------------------------------------- handlers
def _h_qwen(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    else:
        _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_gpt2(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_llama(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    if config.get("add_prefix_space") is not None:
        add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, config["add_prefix_space"]))
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    elif _is_llama_hf_file(target_dir / "tokenizer.json"):
        _set_vocab_llama_hf(target_dir, kvs, load_hf_tokenizer(target_dir / "tokenizer.json"))
    else:  # Llama 3 and every other byte-level BPE
        _set_vocab_gpt2(target_dir, n_vocab, kvs)
    draft_vocab = 32000 if n_vocab is None else n_vocab  # upstream: hparams.get("vocab_size", 32000)
    if draft_vocab == 32016:  # CodeLlama FIM ids; only eot has a GGUF key in gguf-py
        sv = SpecialVocab(target_dir, types=("prefix", "suffix", "middle", "eot"))
        for typ, tid in (("prefix", 32007), ("suffix", 32008), ("middle", 32009), ("eot", 32010)):
            sv.set_special_token(typ, tid)
        _extend(kvs, sv.kvs())
    if draft_vocab == 49152:  # Granite small models
        add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], False))


def _is_llama_hf_file(tokenizer_json: Path) -> bool:
    """:func:`is_llama_hf` of a tokenizer.json, read without its vocabulary when the fast reader can."""
    from .tokjson import locate

    try:
        data = locate(tokenizer_json.read_bytes()).meta
    except (OSError, NotFast):
        data = read_json(tokenizer_json) if tokenizer_json.is_file() else {}
    return isinstance(data, dict) and is_llama_hf(data)


def _require_spm(target_dir: Path, handler: str) -> None:
    if not (target_dir / "tokenizer.model").is_file():
        raise ConvertError(f"{target_dir / 'tokenizer.model'}: file not found (the {handler} handler needs it)")


def _h_gemma(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    _require_spm(target_dir, "gemma")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    sv = SpecialVocab(target_dir, types=("prefix", "suffix", "middle", "fsep", "eot"))
    for typ, tid in (("prefix", 67), ("suffix", 69), ("middle", 68), ("fsep", 70), ("eot", 107)):
        sv.set_special_token(typ, tid)
    sv.chat_template = None  # upstream: "do not add it twice"
    _extend(kvs, sv.kvs())
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))


def _h_gemma2(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    _require_spm(target_dir, "gemma2")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))


def _h_gemma3(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
        add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))
    else:
        _set_vocab_gpt2(target_dir, n_vocab, kvs)


_GEMMA4_VISIBLE = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                   "<tool_response|>", '<|"|>'}


def _h_gemma4(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    if not is_llama_hf(hf.data):
        raise ConvertError(f"{hf.path}: the gemma4 handler needs a BPE tokenizer.json with byte_fallback and a "
                           "Sequence decoder")
    tokens, scores, types = llama_hf_token_list(hf)
    # These stay visible so that the chat parser can read them (upstream marks them USER_DEFINED).
    types = [S.TokenType.USER_DEFINED if t in _GEMMA4_VISIBLE else ty for t, ty in zip(tokens, types, strict=True)]
    _token_kvs(kvs, "gemma4", None, tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=hf.data).kvs())
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))
    add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], True))


def _h_nemotron_h(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    n = n_vocab if n_vocab is not None else hf.tok.get_vocab_size(with_added_tokens=True)
    n = -(n // -8) * 8  # upstream pads the vocab to a multiple of 8 (pad_vocab_size_multiple)
    tokens, types = bpe_token_list(hf, n)
    _token_kvs(kvs, "gpt2", pre_of(hf), tokens, None, types)
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=hf.data).kvs())
    config = _target_config(target_dir)
    sub = [c for c in (config.get(k) for k in TEXT_CONFIG_KEYS) if isinstance(c, dict)]
    is_moe = "num_experts_per_tok" in config or any("num_experts_per_tok" in c for c in sub)
    if not is_moe:  # the tokenizer adds BOS via its post-processor but says nothing in its config
        add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], True))


def _token_id(data: dict[str, Any], text: str) -> int | None:
    """The id ``AutoTokenizer.convert_tokens_to_ids`` gives ``text``: an added token's or the vocabulary's, else
    the unknown token's (None without one)."""
    for added in data.get("added_tokens") or []:
        if isinstance(added, dict) and added.get("content") == text and isinstance(added.get("id"), int):
            return int(added["id"])
    model = data.get("model") or {}
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict) and isinstance(vocab.get(text), int):
        return int(vocab[text])
    unk = model.get("unk_token") if isinstance(model, dict) else None
    return _token_id(data, unk) if isinstance(unk, str) and unk != text else None


def _h_muse(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    eot = _token_id(read_json(target_dir / "tokenizer.json"), "<|eot|>")
    if eot is not None and eot >= 0:
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eot"], VT.UINT32, eot))


def _h_phi3(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    config = load_json_if_present(target_dir / "tokenizer_config.json")
    if config is not None and config.get("tokenizer_class") == "GPT2Tokenizer":  # Phi-4
        _set_vocab_gpt2(target_dir, n_vocab, kvs)
        return
    tokens, scores, types = phi3_token_list(target_dir, n_vocab)
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, n_vocab=len(tokens)).kvs())


HANDLERS: dict[str, Callable[[Path, int | None, list[KV]], None]] = {
    "qwen": _h_qwen, "gpt2": _h_gpt2, "llama": _h_llama, "gemma": _h_gemma, "gemma2": _h_gemma2,
    "gemma3": _h_gemma3, "gemma4": _h_gemma4, "nemotron_h": _h_nemotron_h, "phi3": _h_phi3,
    "muse": _h_muse,
}


def target_vocab_kvs(target_dir: Path, vocab_size: int | None, handler: str, *, cache: bool = False) -> list[KV]:
    """The target's tokenizer KVs in upstream order, padded to the draft ``vocab_size`` (contract §2.5).

    ``vocab_size`` is the **draft** config ``vocab_size`` (None: the tokenizer's own size). The draft's mask id
    is the caller's (``plan.add_kv`` replaces a target-defined ``tokenizer.ggml.mask_token_id`` in place).
    With ``cache`` the finished block is kept in (and taken from) the user's cache folder
    (:mod:`~dspark_convert.tokenizer.cache`).

    Example:
        >>> kvs = target_vocab_kvs(Path("/tmp/golden_in/target"), 129280, "qwen")  # doctest: +SKIP
        >>> [kv.name for kv in kvs][:3]  # doctest: +SKIP
        ['tokenizer.ggml.model', 'tokenizer.ggml.pre', 'tokenizer.ggml.tokens']
    """
    target_dir = Path(target_dir)
    from .cache import require_regular_tokenizer_files

    require_regular_tokenizer_files(target_dir)  # a FIFO or /dev/zero among them: one line, before any read
    fn = HANDLERS.get(handler)
    if fn is None:
        raise ConvertError(f"unknown tokenizer handler '{handler}' (known: {', '.join(sorted(HANDLERS))})")
    if not target_dir.is_dir():
        raise ConvertError(f"{target_dir}: target model directory not found")
    if not any((target_dir / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        raise ConvertError(f"{target_dir}: no tokenizer files (expected tokenizer.json or tokenizer.model)")
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int)
                                   or vocab_size <= 0):
        raise ConvertError(f"draft vocab_size is {vocab_size!r}, expected a positive integer")

    def compute() -> list[KV]:
        kvs: list[KV] = []
        fn(target_dir, vocab_size, kvs)
        return kvs

    if not cache:
        return compute()
    from .cache import cached_vocab_kvs

    return cached_vocab_kvs(target_dir, vocab_size, handler, compute)
