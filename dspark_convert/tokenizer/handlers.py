"""Target tokenizer -> the GGUF ``tokenizer.*`` KVs upstream llama.cpp writes (contract §2.5).

Two public steps: :func:`vocab_handler_for_target` picks the handler from the target ``config.json`` (its text
architecture, looked up in the target table of :mod:`~dspark_convert.tokenizer.targets`, which names the upstream
vocab method each architecture's class runs), and :func:`target_vocab_kvs` runs it. Handlers are named after the
upstream path they replay:

================  ==============================================================================================
``gpt2``          byte-level BPE (``_set_vocab_gpt2``: Qwen3.5/3.6, Ling, LFM2, gpt-oss, Qwen MoE, ...)
``spm``           SentencePiece only (``_set_vocab_sentencepiece``: MiniCPM, Baichuan, ...): needs tokenizer.model
``qwen``          SentencePiece when the target has ``tokenizer.model``, else byte-level BPE (Qwen2Model)
``glm``           byte-level BPE, bos ``[gMASK]``, eot ``<|user|>``, unk ``<|endoftext|>``, eom ``<|observation|>``
``glm4``          byte-level BPE, eos/eot/unk/bos from ``<|endoftext|>`` / ``<|user|>`` (GLM-4, GLM-4V, GLM-OCR)
``solar_open``    byte-level BPE, eos/eot/unk/bos from ``<|endoftext|>`` / ``<unk>`` / ``<|startoftext|>``
``dots3``         byte-level BPE + eot ``<|endofassistant|>``
``llada``         byte-level BPE + add_bos_token true
``qwen3_omni``    byte-level BPE + bos/eos = ``<|im_end|>`` (from tokenizer_config.json's added_tokens_decoder)
``spm_prefix``    SentencePiece + add_space_prefix from tokenizer_config.json (Ernie 4.5, Pangu)
``nemotron``      SentencePiece + padding id 0, unknown id 1 (Nemotron v1)
``stablelm``      byte-level BPE; the tiktoken branch (no tokenizer.json) is refused
``muse``          byte-level BPE + eot = the id of ``<|eot|>`` (Muse-Glimmer)
``laguna``        byte-level BPE + ``chat_template.jinja`` + eot from the **draft's** ``eos_token_id`` list
``gpt2_or_kimi``  byte-level BPE (DeepSeek-V2/V3, Kimi-K2.5, Kimi-Linear); else Kimi's ``tiktoken.model``
``gpt2_assert_bos``  byte-level BPE after upstream's ``add_bos_token`` assertion (DeepSeek-V3.2)
``llama``         LlamaModel: add_space_prefix, SentencePiece / LlamaHfVocab / byte-level BPE, CodeLlama/Granite
``gemma``         Gemma 1: SentencePiece, CodeGemma eot id 107, add_space_prefix false
``gemma2``        SentencePiece, add_space_prefix false
``gemma3``        SentencePiece + add_space_prefix false when ``tokenizer.model`` exists, else byte-level BPE
``gemma4``        LlamaHfVocab-style list, model ``gemma4``, add_space_prefix false, add_bos_token true
``nemotron_h``    byte-level BPE padded to a multiple of 8, add_bos_token true unless the target is MoE
``phi3``          Phi-3's own SentencePiece list (byte-level BPE when tokenizer_class is GPT2Tokenizer)
``grok``          SentencePiece, else byte-level BPE (needs chat_template.jinja beside tokenizer.json)
``jamba``         SentencePiece, else LlamaHfVocab + add_space_prefix false
``deci``          byte-level BPE when the draft's vocab_size is 128256, else LlamaHfVocab
``mpt``           byte-level BPE, else SentencePiece + add_bos false, pad 3, eos 1, unk 0
``openelm``       SentencePiece (the builtin llama-spm fallback is refused)
``mamba(2)``      the draft's vocab_size padded to pad_vocab_size_multiple; byte-level BPE / SentencePiece
``internlm2``     InternLM2's SentencePiece list + add_dummy_prefix + eos ``<|im_end|>``
``internlm3``     SentencePiece + add_prefix_space + eos ``<|im_end|>`` when a special added token
``arctic``        SentencePiece with added_tokens_decoder redefinitions (score 0 / -10000)
``xverse``        transformers' vocabulary as a ``llama`` list without scores
``chatglm``       byte-level BPE, eos/unk ``<|endoftext|>``, eot ``<|user|>`` (ChatGLM3 / remote code refused)
``hunyuan``       byte-level BPE, eos from eod_token_id, eot from generation_config.json (tiktoken refused)
``minimax01``     byte-level BPE + chat_template.jinja
``kimi_k3``       ``gpt2_or_kimi`` + eos = the **draft's** eos_token_id (needs a target chat template)
``qwen_tiktoken`` Qwen-1 ``qwen.tiktoken`` (:mod:`~dspark_convert.tokenizer.tiktoken_vocab`), ``_set_vocab_qwen``
``hunyuan_moe``   HunYuan-MoE ``hy.tiktoken`` (:mod:`~dspark_convert.tokenizer.tiktoken_vocab`), bos 127959
``plamo(3)``      PLaMo tokenizer.jsonl (:mod:`~dspark_convert.tokenizer.vocab_files`); plamo3 + the chat template
``rwkv_world``    the RWKV world list, eot 261, bos/eos 0 (needs a target chat template)
================  ==============================================================================================

Upstream runs the target class's ``set_vocab`` on the draft, so the draft's config answers some questions (its
``vocab_size`` sizes the list; Laguna's eot comes from its ``eos_token_id``): handlers get the draft hparams.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..hf.checkpoint import TEXT_CONFIG_KEYS, load_json_if_present, read_json
from ..notes import note
from ..plan import KV, add_kv
from . import bpe as bpe_module
from . import tiktoken_vocab as TT
from .bpe import (
    HFTokenizer,
    bpe_token_list,
    check_text,
    is_llama_hf,
    llama_hf_token_list,
    load_hf_tokenizer,
    pre_from_hash,
    pre_of,
    pre_table,
    xverse_token_list,
)
from .fastbpe import NotFast, load_fast_bpe
from .special import SpecialVocab, chat_template_kvs, token_content
from .spm import (
    arctic_token_list,
    int_key,
    internlm2_token_list,
    phi3_token_list,
    spm_add_dummy_prefix,
    spm_token_list,
)
from .targets import handler_for_architecture, text_architecture
from .vocab_files import PLAMO_FILE, RWKV_WORLD_FILE, plamo_vocab, rwkv_world_tokens

#: the draft hparams a handler reads (upstream runs the target's set_vocab on the draft instance)
Draft = Mapping[str, Any]


def _target_config(target_dir: Path) -> dict[str, Any]:
    path = target_dir / "config.json"
    config = load_json_if_present(path)
    if config is None:
        raise ConvertError(f"{path}: file not found (the target model directory needs its config.json)")
    return config


def vocab_handler_for_target(target_dir: Path) -> str:
    """The tokenizer handler upstream runs for this target: its text architecture (``text_config`` first, as
    upstream's ``get_model_architecture``) looked up in the target table.

    Example:
        >>> vocab_handler_for_target(Path("/tmp/golden_in/target"))  # doctest: +SKIP
        'qwen'
    """
    target_dir = Path(target_dir)
    config = _target_config(target_dir)
    where = str(target_dir / "config.json")
    arch = text_architecture(config)
    if arch is None:
        raise ConvertError(f"{where}: key 'architectures' is {config.get('architectures')!r}, expected a list naming "
                           "the target architecture")
    return handler_for_architecture(arch, where)


def _arch_of(target_dir: Path) -> str:
    """The target's text architecture as a refusal names it."""
    return repr(text_architecture(_target_config(target_dir)))


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


def _llama_block(kvs: list[KV], target_dir: Path, tokens: Sequence[str], scores: list[float] | None, types: list[int],
                 data: Any = None) -> None:
    """A ``llama`` / ``default`` token list, then the special vocab checked against its length (no merges)."""
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, n_vocab=len(tokens), tokenizer_data=data).kvs())


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
    _llama_block(kvs, target_dir, *spm_token_list(target_dir, n_vocab))


def _set_vocab_llama_hf(target_dir: Path, kvs: list[KV], hf: HFTokenizer) -> None:
    _llama_block(kvs, target_dir, *llama_hf_token_list(hf), hf.data)


# ---------------------------------------------------------------------------------------------- handlers
def _h_qwen(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    else:
        _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_gpt2(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_llama(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if (target_dir / "tekken.json").is_file() and not (target_dir / "tokenizer.json").is_file():
        raise ConvertError(f"{target_dir / 'tekken.json'}: a Mistral tekken tokenizer without tokenizer.json; "
                           "llama.cpp reads it through mistral-common (_set_vocab_mistral), which dspark-convert "
                           "does not reproduce")
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    if config.get("tokenizer_class") == "HybridDNATokenizer":
        raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: tokenizer_class HybridDNATokenizer "
                           "(llama.cpp's _set_vocab_hybriddna, remote code) is not reproduced by dspark-convert")
    if config.get("add_prefix_space") is not None:
        add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, config["add_prefix_space"]))
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    elif _is_llama_hf_file(target_dir / "tokenizer.json"):
        if not _llama_hf_fast(target_dir, kvs):
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


def _llama_hf_fast(target_dir: Path, kvs: list[KV]) -> bool:
    """:func:`_set_vocab_llama_hf` by :mod:`~dspark_convert.tokenizer.fastbpe` (the same bytes, without loading
    the whole tokenizer); False when that reader does not reproduce the file exactly."""
    try:
        fast = load_fast_bpe(target_dir / "tokenizer.json", for_hash=False)
        tokens, scores, types = fast.llama_hf_list()
    except NotFast:
        return False
    _llama_block(kvs, target_dir, tokens, scores, types, fast.data)
    return True


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


def _h_gemma(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _require_spm(target_dir, "gemma")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    sv = SpecialVocab(target_dir, types=("prefix", "suffix", "middle", "fsep", "eot"))
    for typ, tid in (("prefix", 67), ("suffix", 69), ("middle", 68), ("fsep", 70), ("eot", 107)):
        sv.set_special_token(typ, tid)
    sv.chat_template = None  # upstream: "do not add it twice"
    _extend(kvs, sv.kvs())
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))


def _h_gemma2(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _require_spm(target_dir, "gemma2")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))


def _h_gemma3(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
        add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))
    else:
        _set_vocab_gpt2(target_dir, n_vocab, kvs)


_GEMMA4_VISIBLE = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                   "<tool_response|>", '<|"|>'}


def _h_gemma4(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if not _gemma4_fast(target_dir, kvs):
        hf = load_hf_tokenizer(target_dir / "tokenizer.json")
        if not is_llama_hf(hf.data):
            raise ConvertError(f"{hf.path}: {_GEMMA4_NEEDS}")
        tokens, scores, types = llama_hf_token_list(hf)
        # These stay visible so that the chat parser can read them (upstream marks them USER_DEFINED).
        types = [S.TokenType.USER_DEFINED if t in _GEMMA4_VISIBLE else ty for t, ty in zip(tokens, types, strict=True)]
        _token_kvs(kvs, "gemma4", None, tokens, scores, types)
        _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=hf.data).kvs())
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))
    add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], True))


_GEMMA4_NEEDS = "the gemma4 handler needs a BPE tokenizer.json with byte_fallback and a Sequence decoder"


def _gemma4_fast(target_dir: Path, kvs: list[KV]) -> bool:
    """The gemma4 token list by :mod:`~dspark_convert.tokenizer.fastbpe` (the same bytes as the whole tokenizer,
    in bounded memory); False when that reader does not reproduce the file exactly."""
    try:
        fast = load_fast_bpe(target_dir / "tokenizer.json", for_hash=False)
        if not is_llama_hf(fast.data):
            raise ConvertError(f"{fast.path}: {_GEMMA4_NEEDS}")
        tokens, scores, types = fast.llama_hf_list()
    except NotFast:
        return False
    for i in fast.ids_of(t.encode("utf-8") for t in _GEMMA4_VISIBLE):
        types[i] = S.TokenType.USER_DEFINED
    for i, at in fast.added().items():  # the added tokens beyond the model's (their text is in the list)
        if i >= fast.n_model and at.content in _GEMMA4_VISIBLE:
            types[i] = S.TokenType.USER_DEFINED
    _token_kvs(kvs, "gemma4", None, tokens, scores, types)
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, tokenizer_data=fast.data, merges=fast.merges).kvs())
    return True


def _h_nemotron_h(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    n = n_vocab if n_vocab is not None else hf.tok.get_vocab_size(with_added_tokens=True)
    _set_vocab_gpt2(target_dir, -(n // -8) * 8, kvs, hf)  # upstream pads the vocab to a multiple of 8
    config = _target_config(target_dir)
    sub = [c for c in (config.get(k) for k in TEXT_CONFIG_KEYS) if isinstance(c, dict)]
    is_moe = "num_experts_per_tok" in config or any("num_experts_per_tok" in c for c in sub)
    if not is_moe:  # the tokenizer adds BOS via its post-processor but says nothing in its config
        add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], True))


def _h_phi3(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Byte-level BPE when tokenizer_config.json names ``GPT2Tokenizer`` (Phi-4), else Phi-3's SentencePiece list.
    A tokenizer_config.json without ``tokenizer_class`` (upstream b11434 stops on it with KeyError) takes the
    SentencePiece list, with an ``upstream-stops`` note."""
    config = load_json_if_present(target_dir / "tokenizer_config.json")
    if config is not None and config.get("tokenizer_class") == "GPT2Tokenizer":  # Phi-4
        _set_vocab_gpt2(target_dir, n_vocab, kvs)
        return
    if config is not None and "tokenizer_class" not in config:
        note(S.TOKENIZER_MODEL, "upstream-stops",
             f"{target_dir / 'tokenizer_config.json'}: no tokenizer_class; llama.cpp b11434's Phi-3 vocab method "
             "stops on this (KeyError); converted with the SentencePiece vocabulary it writes for any class but "
             "GPT2Tokenizer")
    _llama_block(kvs, target_dir, *phi3_token_list(target_dir, n_vocab))


def _h_spm(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _require_spm(target_dir, "sentencepiece")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)


def _added_ids(target_dir: Path) -> dict[str, int]:
    """content -> id of tokenizer.json's ``added_tokens`` (transformers' ``get_added_vocab()``)."""
    path = target_dir / "tokenizer.json"
    data = read_json(path) if path.is_file() else {}
    added = data.get("added_tokens") if isinstance(data, dict) else None
    return {a["content"]: a["id"] for a in added or [] if isinstance(a, dict) and isinstance(a.get("content"), str)
            and isinstance(a.get("id"), int) and not isinstance(a.get("id"), bool)}


def _gpt2_with_ids(target_dir: Path, n_vocab: int | None, kvs: list[KV], roles: tuple[tuple[str, str], ...],
                   method: str) -> None:
    """Byte-level BPE, then special ids from named added tokens (``SpecialVocab._set_special_token``: a type the
    config files already name keeps its id); a missing token stops upstream (KeyError): refused here."""
    added = _added_ids(target_dir)
    missing = [tok for _, tok in roles if tok not in added]
    if missing:
        names = ", ".join(dict.fromkeys(tok for _, tok in roles))
        raise ConvertError(f"{target_dir / 'tokenizer.json'}: added token {missing[0]!r} not found (the vocab method "
                           f"{method} takes special ids from {names})")
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    tokens, types = bpe_token_list(hf, n_vocab)
    _token_kvs(kvs, "gpt2", pre_of(hf), tokens, None, types)
    sv = SpecialVocab(target_dir, load_merges=True, tokenizer_data=hf.data)
    for typ, tok in roles:
        sv.set_special_token(typ, added[tok])
    _extend(kvs, sv.kvs())


#: the special ids each "byte-level BPE + named tokens" vocab method sets, in its order
_ID_ROLES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "glm": ("_set_vocab_glm", (("bos", "[gMASK]"), ("eot", "<|user|>"), ("unk", "<|endoftext|>"),
                               ("eom", "<|observation|>"))),
    "glm4": ("Glm4Model.set_vocab", (("eos", "<|endoftext|>"), ("eot", "<|user|>"), ("unk", "<|endoftext|>"),
                                     ("bos", "<|endoftext|>"))),
    "solar_open": ("SolarOpenModel.set_vocab", (("eos", "<|endoftext|>"), ("eot", "<|endoftext|>"), ("unk", "<unk>"),
                                               ("bos", "<|startoftext|>"))),
    "dots3": ("Dots3NoteModel.set_vocab", (("eot", "<|endofassistant|>"),)),
    "chatglm": ("ChatGLMModel.set_vocab", (("eos", "<|endoftext|>"), ("eot", "<|user|>"), ("unk", "<|endoftext|>"))),
}


def _ids_handler(name: str) -> Callable[[Path, int | None, list[KV], Draft], None]:
    """The handler of the :data:`_ID_ROLES` method ``name``."""
    method, roles = _ID_ROLES[name]

    def handler(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
        _gpt2_with_ids(target_dir, n_vocab, kvs, roles, method)
    return handler


def _h_llada(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], True))


def _h_qwen3_omni(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Qwen3-Omni MoE: byte-level BPE, then bos and eos = the id ``tokenizer_config.json``'s
    ``added_tokens_decoder`` gives ``<|im_end|>`` (first match)."""
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    decoder = config.get("added_tokens_decoder") or {}
    for tid, data in decoder.items() if isinstance(decoder, dict) else ():
        if isinstance(data, dict) and data.get("content") == "<|im_end|>":
            try:
                value = int(tid)
            except ValueError:
                raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: added_tokens_decoder key {tid!r} is not "
                                   "a token id") from None
            add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["bos"], VT.UINT32, value))
            add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eos"], VT.UINT32, value))
            break


def _h_spm_prefix(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Ernie 4.5, PaddleOCR-VL, Pangu: SentencePiece, then ``add_space_prefix`` = tokenizer_config.json's
    ``add_prefix_space`` when that key is there."""
    _require_spm(target_dir, "sentencepiece")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    path = target_dir / "tokenizer_config.json"
    _prefix_space_kv(kvs, path, load_json_if_present(path) or {})


def _prefix_space_kv(kvs: list[KV], path: Path, config: Mapping[str, Any]) -> None:
    """``add_space_prefix`` = ``add_prefix_space`` of tokenizer_config.json (at ``path``) when that key is there."""
    if "add_prefix_space" in config:
        value = config["add_prefix_space"]
        if not isinstance(value, bool):
            raise ConvertError(f"{path}: add_prefix_space is {value!r}, expected true or false")
        add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, value))


def _h_nemotron(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _require_spm(target_dir, "sentencepiece")
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
    add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["pad"], VT.UINT32, 0))
    add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["unk"], VT.UINT32, 1))


def _token_id(target_dir: Path, token: str) -> int | None:
    """transformers' ``convert_tokens_to_ids(token)``: the token's id (added tokens first, then the model vocab),
    else the unknown token's id, else None."""
    added = _added_ids(target_dir)
    if token in added:
        return added[token]
    data = read_json(target_dir / "tokenizer.json")
    vocab = (data.get("model") or {}).get("vocab") if isinstance(data, dict) else None
    if isinstance(vocab, dict) and isinstance(vocab.get(token), int):
        return int(vocab[token])
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    unk = token_content(config.get("unk_token"))
    if unk is not None:
        return added.get(unk, vocab.get(unk) if isinstance(vocab, dict) else None)
    return None


def _h_muse(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    eot = _token_id(target_dir, "<|eot|>")
    if eot is not None and eot >= 0:
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eot"], VT.UINT32, eot))


def _h_laguna(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Laguna: byte-level BPE; ``chat_template.jinja`` (when present) replaces the template; eot = the first id of
    the **draft's** ``eos_token_id`` list that is not its ``bos_token_id``."""
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    template = target_dir / "chat_template.jinja"
    if template.is_file():
        add_kv(kvs, KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING, template.read_text(encoding="utf-8")))
    eos = draft.get("eos_token_id")
    if isinstance(eos, list):
        extra = [e for e in eos if e != draft.get("bos_token_id")]
        if extra:
            if isinstance(extra[0], bool) or not isinstance(extra[0], int) or extra[0] < 0:
                raise ConvertError(f"draft config.json: eos_token_id entry {extra[0]!r} is not a token id")
            add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eot"], VT.UINT32, extra[0]))


def _h_gpt2_or_kimi(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """DeepSeek-V2/V3, Kimi-K2.5, Kimi-Linear: byte-level BPE from tokenizer.json; without one, the Kimi tiktoken
    vocabulary (``tiktoken.model``, :func:`_kimi_tiktoken`), as upstream's fallback reads it."""
    if not (target_dir / "tokenizer.json").is_file():
        if not (target_dir / TT.KIMI_FILE).is_file():
            raise ConvertError(f"{target_dir}: neither tokenizer.json nor {TT.KIMI_FILE} (llama.cpp's "
                               "DeepSeek-V2 / Kimi vocab method reads one of them)")
        _kimi_tiktoken(target_dir, n_vocab, kvs)
        return
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


# ---------------------------------------------------------------------------------------------- tiktoken targets
def _tiktoken_pre(h: str, where: Path, method: str) -> str:
    """``tokenizer.ggml.pre`` for chkhsh ``h`` (upstream's table, last match wins); upstream stops on an unknown one."""
    res = None
    for row_hash, pre in pre_table():
        if row_hash == h:
            res = pre
    if res is None:
        raise ConvertError(f"{where}: BPE pre-tokenizer not recognized (chkhsh {h} is not in llama.cpp's table; "
                           f"its {method} stops there)")
    return res


def _tiktoken_ids_complete(ranks: dict[bytes, int], specials: dict[str, int], where: Path, module: str) -> int:
    """The tokenizer's size (highest id + 1) when rank and special ids are each used once and leave no gap, as
    the remote tokenizer module requires (it asserts or fails otherwise); one line naming the file else."""
    ids = list(ranks.values()) + list(specials.values())
    n = max(ids) + 1
    if len(set(ids)) != len(ids) or len(ids) != n:
        raise ConvertError(f"{where}: {len(ranks)} ranks and {len(specials)} special tokens (from id "
                           f"{min(specials.values())}) do not fill ids 0..{n - 1} once each; the target's {module} "
                           "stops on such a vocabulary")
    return n


def _h_qwen_tiktoken(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Qwen-1 (``_set_vocab_qwen``): ``qwen.tiktoken`` read as data with tokenization_qwen.py's fixed special
    tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ``<|extra_0..204|>`` from id 151643); byte-level
    BPE with merges derived from the ranks; bos/eos = ``<|endoftext|>`` unless the config files name special ids,
    unk = ``<|endoftext|>``."""
    fam = TT.QWEN1
    path = target_dir / fam.file
    ranks = TT.read_ranks(path, by_line=fam.by_line)
    specials = fam.special_tokens()
    _tiktoken_ids_complete(ranks, specials, path, fam.module)
    if n_vocab is None:
        raise ConvertError("draft config.json: no vocab_size (llama.cpp's _set_vocab_qwen sizes the token list by it)")
    top = max(ranks.values())
    if top >= n_vocab:
        raise ConvertError(f"{path}: rank {top} does not fit the draft's vocab_size {n_vocab} (llama.cpp's "
                           "_set_vocab_qwen asserts it does)")
    pre = _tiktoken_pre(TT.chkhsh(check_text(), ranks, specials, fam.pattern, nfc=fam.nfc, where=path), path,
                        "_set_vocab_qwen")
    merges = TT.merges_of(ranks, strict=True, where=path)
    tokens, types = TT.token_list(ranks, specials, n_vocab)
    _token_kvs(kvs, "gpt2", pre, tokens, None, types)
    sv = SpecialVocab(target_dir)
    sv.merges = merges
    eot = specials["<|endoftext|>"]
    if not sv.special_ids:
        sv.set_special_token("bos", eot)
        sv.set_special_token("eos", eot)
    sv.set_special_token("unk", eot)
    _extend(kvs, sv.kvs())


def _h_hunyuan_moe(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """HunYuan-MoE (Hunyuan-A13B): ``hy.tiktoken`` read as tokenization_hy.py reads it (ids are line numbers,
    repeated tokens skipped; ``<|endoftext|>``, ``<|startoftext|>``, ``<|bos|>``, ``<|eos|>``, ``<|pad|>``,
    ``<|extra_0..204|>`` from id 127957); the draft's vocab_size must equal the tokenizer's; merges from the ranks
    (a token not ending in two parts is skipped); special ids from the config files, then bos = 127959."""
    fam = TT.HUNYUAN
    path = target_dir / fam.file
    ranks = TT.read_ranks(path, by_line=fam.by_line)
    specials = fam.special_tokens()
    size = _tiktoken_ids_complete(ranks, specials, path, fam.module)
    if n_vocab != size:
        raise ConvertError(f"draft config.json: vocab_size is {n_vocab!r}, expected {size} (the size of {path}'s "
                           "tokenizer; llama.cpp's HunYuan-MoE vocab method asserts they are equal)")
    pre = _tiktoken_pre(TT.chkhsh(check_text(), ranks, specials, fam.pattern, nfc=fam.nfc, where=path), path,
                        "HunYuan-MoE vocab method")
    _tiktoken_block(kvs, target_dir, path, pre, ranks, specials, n_vocab, "bos", specials["<|bos|>"])


def _tiktoken_block(kvs: list[KV], target_dir: Path, path: Path, pre: str, ranks: dict[bytes, int], specials: dict[str, int],
                    n_vocab: int, which: str, token_id: int) -> None:
    """A remote-code tiktoken vocabulary's block: ``gpt2`` tokens (the specials CONTROL) and merges, the target's
    special-token keys, then special ``which`` (``bos`` / ``eos``) set to ``token_id`` as the method does last."""
    merges = TT.merges_of(ranks, strict=False, where=path)
    tokens, types = TT.token_list(ranks, specials, n_vocab, control=specials.values())
    _token_kvs(kvs, "gpt2", pre, tokens, None, types)
    add_kv(kvs, KV(S.TOKENIZER_MERGES, VT.ARRAY, merges, VT.STRING))
    _extend(kvs, SpecialVocab(target_dir).kvs())
    add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS[which], VT.UINT32, token_id))


def _kimi_tiktoken(target_dir: Path, n_vocab: int | None, kvs: list[KV]) -> None:
    """Kimi's tiktoken vocabulary (``tiktoken.model``) as tokenization_kimi.py builds it: the ranks, then 258
    special ids named by tokenizer_config.json's ``added_tokens_decoder`` (``<|reserved_token_{id}|>`` otherwise),
    split by Kimi's pattern; the pre-tokenizer must hash to ``kimi-k2``; eos = the id of tokenizer_config.json's
    ``eos_token`` (``[EOS]`` by default).

    Upstream first tries byte-level BPE through transformers, which converts the file itself (Llama 3's split
    pattern, no merges kept); only when that tokenizer's hash is not in its table does it load the remote code.
    A file whose converted hash is in the table is refused (that path writes a vocabulary without merges)."""
    path = target_dir / TT.KIMI_FILE
    cpath = target_dir / "tokenizer_config.json"
    config = load_json_if_present(cpath)
    if config is None:
        raise ConvertError(f"{cpath}: file not found (the Kimi tiktoken tokenizer is configured by it)")
    decoder_raw = config.get("added_tokens_decoder")
    if not isinstance(decoder_raw, dict):
        raise ConvertError(f"{cpath}: added_tokens_decoder is {type(decoder_raw).__name__}, expected an object "
                           "(the Kimi tokenizer names its special ids from it)")
    decoder: dict[int, str] = {}
    for key, entry in decoder_raw.items():
        content = token_content(entry)
        if content is None:
            raise ConvertError(f"{cpath}: added_tokens_decoder entry {key!r} has no content")
        decoder[int_key(cpath, key)] = content
    ranks = TT.read_ranks(path)
    specials = TT.kimi_specials(len(ranks), decoder)
    _tiktoken_ids_complete(ranks, specials, path, "tokenization_kimi.py")
    named: dict[str, int] = {}
    for role, default in (("bos", "[BOS]"), ("eos", "[EOS]"), ("pad", None), ("unk", None)):
        name = token_content(config.get(f"{role}_token")) if config.get(f"{role}_token") is not None else str(default)
        if name not in specials:
            raise ConvertError(f"{cpath}: {role}_token {name!r} is not one of the Kimi tokenizer's special tokens "
                               "(tokenization_kimi.py stops on it)")
        named[role] = specials[name]
    converted = TT.chkhsh(check_text(), ranks, specials, TT.CONVERTER_PATTERN, nfc=False, where=path)
    known = [pre for row_hash, pre in bpe_module.pre_table() if row_hash == converted]
    if known:  # upstream's first attempt (transformers converts the file without remote code) then succeeds
        raise ConvertError(f"{path}: transformers converts this file itself (TikTokenConverter) to a tokenizer whose "
                           f"hash is llama.cpp's {known[-1]!r}, so llama.cpp's byte-level BPE attempt succeeds and "
                           "writes a vocabulary without merges, which dspark-convert does not reproduce")
    pre = _tiktoken_pre(TT.chkhsh(check_text(), ranks, specials, TT.KIMI_PATTERN, nfc=False, where=path), path,
                        "Kimi tiktoken fallback")
    if pre != "kimi-k2":
        raise ConvertError(f"{path}: the tokenizer's pre-tokenizer is {pre!r}; llama.cpp's Kimi tiktoken fallback "
                           "accepts only 'kimi-k2'")
    if n_vocab is None:
        raise ConvertError("draft config.json: no vocab_size (llama.cpp's Kimi tiktoken fallback sizes the token list "
                           "by it)")
    _tiktoken_block(kvs, target_dir, path, pre, ranks, specials, n_vocab, "eos", named["eos"])


#: tokenizer classes whose ``__init__`` makes ``add_bos_token`` true (transformers 5.24.0 drops the
#: tokenizer_config.json value when a tokenizer.json exists, so the class default decides)
_ADDS_BOS_BY_DEFAULT = frozenset({"LlamaTokenizer", "CodeLlamaTokenizer", "GemmaTokenizer"})


def _h_stablelm(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """StableLM: byte-level BPE from tokenizer.json; without one upstream reads a Qwen-1 style tiktoken vocabulary
    (``_set_vocab_qwen``, remote code), which is refused here."""
    if not (target_dir / "tokenizer.json").is_file():
        raise ConvertError(f"{target_dir}: no tokenizer.json; for a {_arch_of(target_dir)} target llama.cpp would "
                           "read a StableLM tiktoken vocabulary through remote code (_set_vocab_qwen), which "
                           "dspark-convert does not reproduce")
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_gpt2_assert_bos(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """DeepSeek-V3.2: byte-level BPE after upstream's assertion that ``AutoTokenizer(target).add_bos_token`` is true.

    Under transformers 5.24 that holds only for a tokenizer class whose ``__init__`` adds BOS (a ByteLevel
    tokenizer.json, as DeepSeek-V3's, gets the generic backend: false, and upstream stops). dspark-convert converts
    such a target anyway when its tokenizer_config.json says ``add_bos_token: true`` (the assertion's intent) and
    notes that upstream b11434 stops there; otherwise it refuses, as upstream does.
    """
    from .class_defaults import resolve_tokenizer_class

    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    tj = target_dir / "tokenizer.json"
    head = tj.read_bytes()[:1 << 20] if tj.is_file() else b""
    cls = resolve_tokenizer_class(config, _target_config(target_dir), head)
    if cls not in _ADDS_BOS_BY_DEFAULT or token_content(config.get("bos_token")) is None:
        if config.get("add_bos_token") is not True:
            raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: add_bos_token is "
                               f"{config.get('add_bos_token')!r}, expected true (llama.cpp's DeepSeek-V3.2 vocab "
                               "method asserts that the tokenizer adds BOS)")
        note(S.TOKENIZER_MODEL, "upstream-stops",
             f"{target_dir}: llama.cpp b11434 (transformers 5.24) stops on this DeepSeek-V3.2 target: its tokenizer "
             f"class ({cls}) reports add_bos_token false although tokenizer_config.json says true; converted with "
             "the byte-level BPE vocabulary upstream would write after that check")
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


# ---------------------------------------------------------------------------------------------- custom methods
def _require_llama_hf(target_dir: Path, method: str) -> HFTokenizer:
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    if not is_llama_hf(hf.data):
        raise ConvertError(f"{hf.path}: not a SentencePiece-style BPE tokenizer (byte_fallback, Sequence decoder); "
                           f"llama.cpp's {method} reads it with LlamaHfVocab, which stops on it")
    return hf


def _h_grok(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Grok: SentencePiece when ``tokenizer.model`` exists, else byte-level BPE, which upstream accepts only with
    ``chat_template.jinja`` beside ``tokenizer.json``."""
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
        return
    for name in ("tokenizer.json", "chat_template.jinja"):
        if not (target_dir / name).is_file():
            raise ConvertError(f"{target_dir / name}: file not found (llama.cpp's Grok vocab method needs "
                               "tokenizer.model, or tokenizer.json with chat_template.jinja)")
    _set_vocab_gpt2(target_dir, n_vocab, kvs)


def _h_jamba(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
        return
    _set_vocab_llama_hf(target_dir, kvs, _require_llama_hf(target_dir, "JambaModel.set_vocab"))
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))


def _h_deci(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    if (128256 if n_vocab is None else n_vocab) == 128256:
        _set_vocab_gpt2(target_dir, n_vocab, kvs)
    else:
        _set_vocab_llama_hf(target_dir, kvs, _require_llama_hf(target_dir, "DeciModel.set_vocab"))


def _h_mpt(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """MPT: byte-level BPE; when that fails upstream (a file it cannot read, or a pre-tokenizer hash it does not
    know), SentencePiece with add_bos false, padding 3, eos 1, unknown 0 (upstream's SEA-LION fallback). Without
    ``tokenizer.model`` for that fallback, upstream stops: an unknown hash is then accepted by its regex family (as
    for every byte-level BPE target, with a note), anything else refused."""
    from ..notes import collecting

    spm = (target_dir / "tokenizer.model").is_file()
    more: list[KV] = []
    failed = False
    with collecting() as inner:
        try:
            _set_vocab_gpt2(target_dir, n_vocab, more)
        except ConvertError as e:
            if not spm:
                raise ConvertError(f"{e} (and no tokenizer.model for llama.cpp's MPT SentencePiece fallback)") from None
            failed = True
    if failed or (spm and any(n.rule == "pre-tokenizer-by-regex" for n in inner)):
        _set_vocab_sentencepiece(target_dir, n_vocab, kvs)
        add_kv(kvs, _bool(S.ADD_TOKEN_KEYS["bos"], False))
        for typ, tid in (("pad", 3), ("eos", 1), ("unk", 0)):
            add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS[typ], VT.UINT32, tid))
        return
    for n in inner:
        note(n.subject, n.rule, n.message)
    _extend(kvs, more)


def _h_openelm(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """OpenELM: SentencePiece (without ``tokenizer.model`` upstream reads its builtin Llama vocabulary: refused
    before this runs)."""
    _set_vocab_sentencepiece(target_dir, n_vocab, kvs)


def _padded(n_vocab: int | None, draft: Draft, default: int, method: str) -> int:
    if n_vocab is None:
        raise ConvertError(f"draft config.json: no vocab_size (llama.cpp's {method} pads the draft's vocab_size)")
    mult = draft.get("pad_vocab_size_multiple", default)
    if isinstance(mult, bool) or not isinstance(mult, int) or mult <= 0:
        raise ConvertError(f"draft config.json: pad_vocab_size_multiple is {mult!r}, expected a positive integer")
    return -(n_vocab // -mult) * mult


def _h_mamba(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Mamba: the draft's vocab_size rounded up to its ``pad_vocab_size_multiple`` (8); byte-level BPE from
    ``tokenizer.json``, else SentencePiece."""
    n = _padded(n_vocab, draft, 8, "MambaModel.set_vocab")
    if (target_dir / "tokenizer.json").is_file():
        _set_vocab_gpt2(target_dir, n, kvs)
    else:
        _set_vocab_sentencepiece(target_dir, n, kvs)


def _h_mamba2(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Mamba-2: the draft's vocab_size rounded up to its ``pad_vocab_size_multiple`` (16); SentencePiece from
    ``tokenizer.model``, else byte-level BPE."""
    n = _padded(n_vocab, draft, 16, "Mamba2Model.set_vocab")
    if (target_dir / "tokenizer.model").is_file():
        _set_vocab_sentencepiece(target_dir, n, kvs)
    elif (target_dir / "tokenizer.model.v3").is_file():
        raise ConvertError(f"{target_dir / 'tokenizer.model.v3'}: llama.cpp's Mamba-2 vocab method stops on a "
                           "Mistral v3 tokenizer file (it asks for it to be renamed tokenizer.model)")
    else:
        _set_vocab_gpt2(target_dir, n, kvs)


def _h_internlm2(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """InternLM2: its own SentencePiece list (:func:`~.spm.internlm2_token_list`), ``add_space_prefix`` from the
    model's ``add_dummy_prefix``, eos replaced by ``<|im_end|>`` when an added token names it."""
    tokens, scores, types, chat_eos = internlm2_token_list(target_dir, n_vocab)
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, spm_add_dummy_prefix(target_dir / "tokenizer.model")))
    sv = SpecialVocab(target_dir, n_vocab=len(tokens))
    if "eos" not in sv.special_ids:
        raise ConvertError(f"{target_dir}: no eos token id in config.json or tokenizer_config.json (llama.cpp's "
                           "InternLM2 vocab method reads it and stops)")
    if chat_eos is not None:
        sv.special_ids["eos"] = chat_eos
    _extend(kvs, sv.kvs())


def _h_internlm3(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """InternLM3: SentencePiece; ``add_space_prefix`` from tokenizer_config.json's ``add_prefix_space``; eos
    becomes the special added token ``<|im_end|>`` when one is listed."""
    _require_spm(target_dir, "InternLM3")
    tokens, scores, types = spm_token_list(target_dir, n_vocab)
    _token_kvs(kvs, "llama", "default", tokens, scores, types)
    sv = SpecialVocab(target_dir, n_vocab=len(tokens))
    path = target_dir / "tokenizer_config.json"
    config = load_json_if_present(path) or {}
    _prefix_space_kv(kvs, path, config)
    decoder = config.get("added_tokens_decoder")
    for key, data in (decoder.items() if isinstance(decoder, dict) else ()):
        if isinstance(data, dict) and data.get("special"):
            tid = int_key(path, key)
            content = data.get("content")
            if isinstance(content, str):
                sv.set_special_token(content, tid)  # a type named by the content: no GGUF key, as upstream
                if content == "<|im_end|>" and "eos" in sv.special_ids:
                    sv.special_ids["eos"] = tid
    _extend(kvs, sv.kvs())


def _h_arctic(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _llama_block(kvs, target_dir, *arctic_token_list(target_dir, n_vocab))


def _h_xverse(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Xverse: transformers' vocabulary of ``tokenizer.json`` as a SentencePiece-model list without scores."""
    if not (target_dir / "tokenizer.json").is_file():
        raise ConvertError(f"{target_dir / 'tokenizer.json'}: file not found (llama.cpp's Xverse vocab method asserts "
                           "it exists)")
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    tokens, types = xverse_token_list(hf, n_vocab)
    _llama_block(kvs, target_dir, tokens, None, types, hf.data)


def _h_chatglm(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """ChatGLM / GLM-4 (``GlmForCausalLM``): byte-level BPE; eos and unk ``<|endoftext|>``, eot ``<|user|>``.

    Upstream takes its ChatGLM3 path (a remote-code SentencePiece tokenizer) when the **draft's**
    ``_name_or_path`` names ``THUDM/chatglm3-6b``, and loads the tokenizer with remote code when the target
    declares it: both refused."""
    if "THUDM/chatglm3-6b" in str(draft.get("_name_or_path", "")):
        raise ConvertError("draft config.json: _name_or_path names THUDM/chatglm3-6b, so llama.cpp would read the "
                           "ChatGLM3 remote-code tokenizer, which dspark-convert does not reproduce")
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    if "auto_map" in config:
        raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: auto_map names a remote-code tokenizer, which "
                           "llama.cpp's ChatGLM vocab method loads and dspark-convert does not reproduce")
    limit = draft.get("padded_vocab_size", n_vocab)
    if limit is None:
        raise ConvertError("draft config.json: no vocab_size (llama.cpp's ChatGLM vocab method checks the target's "
                           "ids against it)")
    if isinstance(limit, int) and not isinstance(limit, bool) and (target_dir / "tokenizer.json").is_file():
        data = read_json(target_dir / "tokenizer.json")
        vocab = (data.get("model") or {}).get("vocab") if isinstance(data, dict) else None
        ids = list(_added_ids(target_dir).values())
        ids += [i for i in vocab.values() if isinstance(i, int)] if isinstance(vocab, dict) else []
        top = max(ids, default=-1)
        if top >= limit:
            raise ConvertError(f"{target_dir / 'tokenizer.json'}: token id {top} does not fit the draft's "
                               f"padded_vocab_size / vocab_size {limit}")
    _ids_handler("chatglm")(target_dir, n_vocab, kvs, draft)


def _h_hunyuan(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """HunYuan (dense, VL): byte-level BPE from ``tokenizer.json`` (no padding id when the target's
    ``pad_token_id`` is negative); eos = the target's ``eod_token_id``; eot = the first id of
    ``generation_config.json``'s ``eos_token_id`` list when it has two or more. Without tokenizer.json upstream
    loads a tiktoken tokenizer through remote code: refused."""
    config = _target_config(target_dir)
    text = config.get("text_config")
    merged = {**config, **text} if isinstance(text, dict) else config
    if not (target_dir / "tokenizer.json").is_file():
        raise ConvertError(f"{target_dir}: no tokenizer.json; for a {_arch_of(target_dir)} target llama.cpp would "
                           "read a tiktoken vocabulary through remote code (HunYuanModel.set_vocab), which "
                           "dspark-convert does not reproduce")
    hf = load_hf_tokenizer(target_dir / "tokenizer.json")
    tokens, types = bpe_token_list(hf, n_vocab)
    _token_kvs(kvs, "gpt2", pre_of(hf), tokens, None, types)
    pad = merged.get("pad_token_id")
    no_pad = ("bos", "eos", "unk", "sep", "cls", "mask")
    negative = isinstance(pad, (int, float)) and not isinstance(pad, bool) and pad < 0
    _extend(kvs, SpecialVocab(target_dir, load_merges=True, types=no_pad if negative else None,
                              tokenizer_data=hf.data).kvs())
    eod = merged.get("eod_token_id")
    if eod is not None:
        if isinstance(eod, bool) or not isinstance(eod, int) or eod < 0:
            raise ConvertError(f"{target_dir / 'config.json'}: eod_token_id is {eod!r}, expected a token id")
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eos"], VT.UINT32, eod))
    gen = load_json_if_present(target_dir / "generation_config.json") or {}
    eos = gen.get("eos_token_id")
    if isinstance(eos, list) and len(eos) >= 2:
        if isinstance(eos[0], bool) or not isinstance(eos[0], int) or eos[0] < 0:
            raise ConvertError(f"{target_dir / 'generation_config.json'}: eos_token_id entry {eos[0]!r} is not a "
                               "token id")
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eot"], VT.UINT32, eos[0]))


def _template_file(target_dir: Path, method: str, bundled: str) -> str:
    """The target's ``chat_template.jinja``; upstream falls back to a template file of its own tree: refused."""
    template = target_dir / "chat_template.jinja"
    if not template.is_file():
        raise ConvertError(f"{template}: file not found; llama.cpp's {method} then writes models/templates/{bundled} "
                           "of its source tree, which dspark-convert does not ship")
    return template.read_text(encoding="utf-8")


def _h_minimax01(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    template = _template_file(target_dir, "MiniMaxText01Model.set_vocab", "MiniMax-M1.jinja")
    _set_vocab_gpt2(target_dir, n_vocab, kvs)
    add_kv(kvs, KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING, template))


def _h_kimi_k3(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """Kimi-K3: Kimi-Linear's method (byte-level BPE; its tiktoken fallback refused), then eos = the **draft's**
    ``eos_token_id``; a target without a chat template gets one of upstream's tree (refused)."""
    _h_gpt2_or_kimi(target_dir, n_vocab, kvs, draft)
    eos = draft.get("eos_token_id")
    if eos is not None:
        if isinstance(eos, bool) or not isinstance(eos, int) or eos < 0:
            raise ConvertError(f"draft config.json: eos_token_id is {eos!r}; llama.cpp's Kimi-K3 vocab method writes it "
                               "as one token id and stops on anything else")
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eos"], VT.UINT32, eos))
    if not any(kv.name.startswith(S.TOKENIZER_CHAT_TEMPLATE) for kv in kvs):  # a template, or named ones
        raise ConvertError(f"{target_dir}: no chat template (tokenizer_config.json, chat_template.jinja); llama.cpp's "
                           "Kimi-K3 vocab method then writes models/templates/Kimi-K3.jinja of its source tree, which "
                           "dspark-convert does not ship")


def _h_plamo(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft, *, plamo3: bool = False) -> None:
    """PLaMo 2 (``_set_vocab_plamo``): ``tokenizer.jsonl`` (:func:`~.vocab_files.plamo_vocab`), model ``plamo2``,
    special ids by token text, eot 4, add_space_prefix false, add_bos/add_eos from tokenizer_config.json."""
    tokens, scores, types, ids, config = plamo_vocab(target_dir, n_vocab)
    _token_kvs(kvs, "plamo2", "default", tokens, scores, types)
    for typ, tid in ids.items():
        add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS[typ], VT.UINT32, tid))
    add_kv(kvs, KV(S.SPECIAL_TOKEN_KEYS["eot"], VT.UINT32, 4))
    add_kv(kvs, _bool(S.TOKENIZER_ADD_SPACE_PREFIX, False))
    for typ in ("bos", "eos"):
        value = config.get(f"add_{typ}_token")
        if value is not None:
            if not isinstance(value, bool):
                raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: add_{typ}_token is {value!r}, expected "
                                   "true or false")
            add_kv(kvs, _bool(S.ADD_TOKEN_KEYS[typ], value))
    if plamo3:
        template = config.get("chat_template")
        jinja = target_dir / "chat_template.jinja"
        if jinja.is_file():
            template = jinja.read_text(encoding="utf-8")
        if template:
            if not isinstance(template, (str, list)):
                raise ConvertError(f"{target_dir / 'tokenizer_config.json'}: chat_template is a "
                                   f"{type(template).__name__}, expected a string or a list")
            _extend(kvs, chat_template_kvs(template))


def _h_plamo3(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    _h_plamo(target_dir, n_vocab, kvs, draft, plamo3=True)


def _h_rwkv_world(target_dir: Path, n_vocab: int | None, kvs: list[KV], draft: Draft) -> None:
    """RWKV 6/7 world: :func:`~.vocab_files.rwkv_world_tokens`, model ``rwkv``; eot 261 unless configured, bos and
    eos 0. A target without a chat template gets one of upstream's tree (refused)."""
    tokens, types = rwkv_world_tokens(target_dir, n_vocab)
    add_kv(kvs, _str(S.TOKENIZER_MODEL, "rwkv"))
    add_kv(kvs, KV(S.TOKENIZER_TOKENS, VT.ARRAY, tokens, VT.STRING))
    add_kv(kvs, KV(S.TOKENIZER_TOKEN_TYPE, VT.ARRAY, list(types), VT.INT32))
    sv = SpecialVocab(target_dir)
    if sv.chat_template is None:
        raise ConvertError(f"{target_dir}: no chat template (tokenizer_config.json, chat_template.jinja); llama.cpp's "
                           "RWKV world vocab method then writes models/templates/llama-cpp-rwkv-world.jinja of its "
                           "source tree, which dspark-convert does not ship")
    sv.set_special_token("eot", 261)
    sv.special_ids["bos"] = 0
    sv.special_ids["eos"] = 0
    _extend(kvs, sv.kvs())


HANDLERS: dict[str, Callable[[Path, int | None, list[KV], Draft], None]] = {
    "qwen": _h_qwen, "gpt2": _h_gpt2, "spm": _h_spm, **{n: _ids_handler(n) for n in ("glm", "glm4", "solar_open", "dots3")},
    "llada": _h_llada, "qwen3_omni": _h_qwen3_omni, "spm_prefix": _h_spm_prefix,
    "nemotron": _h_nemotron, "stablelm": _h_stablelm, "muse": _h_muse, "laguna": _h_laguna,
    "gpt2_or_kimi": _h_gpt2_or_kimi, "gpt2_assert_bos": _h_gpt2_assert_bos, "llama": _h_llama, "gemma": _h_gemma,
    "gemma2": _h_gemma2, "gemma3": _h_gemma3, "gemma4": _h_gemma4, "nemotron_h": _h_nemotron_h, "phi3": _h_phi3,
    "grok": _h_grok, "jamba": _h_jamba, "deci": _h_deci, "mpt": _h_mpt, "openelm": _h_openelm, "mamba": _h_mamba,
    "mamba2": _h_mamba2, "internlm2": _h_internlm2, "internlm3": _h_internlm3, "arctic": _h_arctic,
    "xverse": _h_xverse, "chatglm": _h_chatglm, "hunyuan": _h_hunyuan, "minimax01": _h_minimax01,
    "kimi_k3": _h_kimi_k3, "plamo": _h_plamo, "plamo3": _h_plamo3, "rwkv_world": _h_rwkv_world,
    "qwen_tiktoken": _h_qwen_tiktoken, "hunyuan_moe": _h_hunyuan_moe,
}
#: the draft hparams a handler's output depends on (besides vocab_size): part of the cache key
DRAFT_FACTS: dict[str, tuple[str, ...]] = {"laguna": ("eos_token_id", "bos_token_id"),
                                           "mamba": ("pad_vocab_size_multiple",),
                                           "mamba2": ("pad_vocab_size_multiple",),
                                           "chatglm": ("_name_or_path", "padded_vocab_size"),
                                           "kimi_k3": ("eos_token_id",)}


#: handlers whose upstream method falls back to a vocabulary file of llama.cpp's tree when the target has none
_BUILTIN_VOCABS = {"mamba": "gpt-neox", "mamba2": "gpt-neox", "openelm": "llama-spm"}
#: handlers whose method reads a tiktoken file when the target has no tokenizer.json (Kimi's is reproduced,
#: HunYuan dense's is refused by its handler, naming the method)
_TIKTOKEN_FALLBACKS = {"gpt2_or_kimi": TT.KIMI_FILE, "kimi_k3": TT.KIMI_FILE, "hunyuan": TT.HUNYUAN.file}
#: handlers that read a vocabulary file of their own format instead of tokenizer.json / tokenizer.model
_OWN_FORMATS = {"plamo": PLAMO_FILE, "plamo3": PLAMO_FILE, "rwkv_world": RWKV_WORLD_FILE,
                "qwen_tiktoken": TT.QWEN1.file, "hunyuan_moe": TT.HUNYUAN.file}


def target_vocab_kvs(target_dir: Path, vocab_size: int | None, handler: str | None, *, cache: bool = False,
                     draft: Draft | None = None) -> list[KV]:
    """The target's tokenizer KVs in upstream order, padded to the draft ``vocab_size`` (contract §2.5).

    ``handler`` names the handler to run (None: the target's own, :func:`vocab_handler_for_target`);
    ``vocab_size`` is the **draft** config ``vocab_size`` (None: the tokenizer's own size); ``draft`` the draft's
    hparams, which some handlers read (:data:`DRAFT_FACTS`). The draft's mask id
    is the caller's (``plan.add_kv`` replaces a target-defined ``tokenizer.ggml.mask_token_id`` in place).
    With ``cache`` the finished block is kept in (and taken from) the user's cache folder
    (:mod:`~dspark_convert.tokenizer.cache`).

    Example:
        >>> kvs = target_vocab_kvs(Path("/tmp/golden_in/target"), 129280, "qwen")  # doctest: +SKIP
        >>> [kv.name for kv in kvs][:3]  # doctest: +SKIP
        ['tokenizer.ggml.model', 'tokenizer.ggml.pre', 'tokenizer.ggml.tokens']
    """
    target_dir = Path(target_dir)
    if handler is None:
        handler = vocab_handler_for_target(target_dir)
    from .cache import require_regular_tokenizer_files

    require_regular_tokenizer_files(target_dir)  # a FIFO or /dev/zero among them: one line, before any read
    fn = HANDLERS.get(handler)
    if fn is None:
        raise ConvertError(f"unknown tokenizer handler '{handler}' (known: {', '.join(sorted(HANDLERS))})")
    if not target_dir.is_dir():
        raise ConvertError(f"{target_dir}: target model directory not found")
    own = _OWN_FORMATS.get(handler)
    if own is not None and not (target_dir / own).is_file():
        raise ConvertError(f"{target_dir / own}: file not found (the {handler} vocab method reads it)")
    files = ("tokenizer.json", "tokenizer.model") + tuple(f for h, f in _TIKTOKEN_FALLBACKS.items() if h == handler)
    if own is None and not any((target_dir / name).is_file() for name in files):
        if handler in _BUILTIN_VOCABS:
            raise ConvertError(f"{target_dir}: no tokenizer files; llama.cpp would use its builtin vocabulary "
                               f"models/ggml-vocab-{_BUILTIN_VOCABS[handler]}.gguf (a file of its source tree), which "
                               "dspark-convert does not ship")
        raise ConvertError(f"{target_dir}: no tokenizer files (expected tokenizer.json or tokenizer.model)")
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int)
                                   or vocab_size <= 0):
        raise ConvertError(f"draft vocab_size is {vocab_size!r}, expected a positive integer")

    def compute() -> list[KV]:
        kvs: list[KV] = []
        fn(target_dir, vocab_size, kvs, draft or {})
        return kvs

    if not cache:
        return compute()
    from .cache import cached_vocab_kvs

    facts = DRAFT_FACTS.get(handler, ())
    key = handler if not facts else handler + repr([(draft or {}).get(f) for f in facts])
    return cached_vocab_kvs(target_dir, vocab_size, key, compute)
