"""Default special tokens of transformers' tokenizer classes (issue 14, tokenizer/class_defaults.py).

Every expected value here is what upstream writes with transformers 5.24.0: the types were obtained by running
upstream's two transformers-based vocab paths (``LlamaHfVocab``, ``get_vocab_base``) on these same targets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from dspark_convert import convert
from dspark_convert.schema import TokenType as T
from dspark_convert.tokenizer import bpe as vocab_bpe
from dspark_convert.tokenizer.class_defaults import (
    CLASS_DEFAULT_SPECIALS,
    resolve_tokenizer_class,
    special_token_entries,
)
from dspark_convert.tokenizer.handlers import target_vocab_kvs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
#: Every token some class declares by default.
CANDIDATES = ["<unk>", "<s>", "</s>", "<bos>", "<eos>", "<pad>", "<mask>", "<|endoftext|>", "\u2581<PRE>",
              "\u2581<MID>", "\u2581<SUF>", "\u2581<EOT>", "<FILL_ME>"]
#: class -> (the name the target's tokenizer_config.json uses, the CONTROL tokens upstream writes when the
#: candidates are plain vocabulary entries, the tokens upstream appends when the vocabulary lacks them).
ROWS: dict[str, tuple[str, set[str], list[str]]] = {
    "GemmaTokenizer": ("GemmaTokenizer", {"<unk>", "<bos>", "<eos>", "<pad>", "<mask>"},
                       ["<bos>", "<eos>", "<unk>", "<pad>", "<mask>"]),
    "LlamaTokenizer": ("LlamaTokenizerFast", {"<unk>", "<s>", "</s>"}, ["<s>", "</s>", "<unk>"]),
    "CodeLlamaTokenizer": ("CodeLlamaTokenizerFast",
                           {"<unk>", "<s>", "</s>", "\u2581<PRE>", "\u2581<MID>", "\u2581<SUF>", "\u2581<EOT>",
                            "<FILL_ME>"},
                           ["<s>", "</s>", "<unk>", "\u2581<PRE>", "\u2581<MID>", "\u2581<SUF>", "\u2581<EOT>",
                            "<FILL_ME>"]),
    "Qwen2Tokenizer": ("Qwen2Tokenizer", {"<|endoftext|>"}, ["<|endoftext|>"]),
    "GPT2Tokenizer": ("GPT2TokenizerFast", {"<|endoftext|>"}, ["<|endoftext|>"]),
    "TokenizersBackend": ("PreTrainedTokenizerFast", set(), []),
}
BASE_VOCAB = {"<0x0A>": 0, "<0x41>": 1, "\u2581": 2, "a": 3, "b": 4}


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def spm_bpe_json(vocab: dict[str, int], added: Sequence[tuple[str, bool]] = ()) -> dict:
    """A SentencePiece-style BPE tokenizer.json (byte_fallback, Sequence decoder): what LlamaHfVocab accepts,
    and what Gemma 3 ships. ``added``: (content, special) added tokens, normalized false."""
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    for content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        if special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
    return json.loads(tok.to_str())


def byte_level_json(vocab: dict[str, int]) -> dict:
    """A byte-level BPE tokenizer.json (GPT-2 regex) with one added special token."""
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|im_start|>"])
    return json.loads(tok.to_str())


def make_target(root: Path, tokenizer: dict, tok_config: dict, config: dict) -> Path:
    root.mkdir(parents=True)
    write_json(root / "tokenizer.json", tokenizer)
    write_json(root / "tokenizer_config.json", tok_config)
    write_json(root / "config.json", config)
    return root


def tokens_and_types(target: Path, handler: str, n_vocab: int | None) -> list[tuple[str, int]]:
    kv = {kv.name: kv.value for kv in target_vocab_kvs(target, n_vocab, handler)}
    return list(zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], strict=True))


# ---------------------------------------------------------------------------------------------- the table
def test_every_row_has_a_test_and_a_source() -> None:
    assert set(ROWS) == set(CLASS_DEFAULT_SPECIALS)
    for name, row in CLASS_DEFAULT_SPECIALS.items():
        assert row.source.endswith(f"({name}.__init__)") and ".py" in row.source
        assert {token for _attr, token in row.tokens} == ROWS[name][1]


def present_target(root: Path, config_class: str) -> Path:
    """The candidates are plain vocabulary entries; tokenizer_config.json names none of them."""
    vocab = dict(BASE_VOCAB)
    for token in CANDIDATES:
        vocab[token] = len(vocab)
    return make_target(root, spm_bpe_json(vocab), {"tokenizer_class": config_class},
                       {"architectures": ["LlamaForCausalLM"]})


@pytest.mark.parametrize("row", list(ROWS))
def test_class_defaults_in_vocab_become_control(row: str, tmp_path: Path) -> None:
    config_class, control, _appended = ROWS[row]
    target = present_target(tmp_path / "t", config_class)
    got = tokens_and_types(target, "llama", None)  # LlamaHfVocab: the EAGLE-3 path on this target
    assert got[:5] == [("<0x0A>", T.BYTE), ("<0x41>", T.BYTE), ("\u2581", T.NORMAL), ("a", T.NORMAL),
                       ("b", T.NORMAL)]
    assert got[5:] == [(t, T.CONTROL if t in control else T.NORMAL) for t in CANDIDATES]


@pytest.mark.parametrize("row", list(ROWS))
def test_class_defaults_missing_from_vocab_are_appended(row: str, tmp_path: Path) -> None:
    _config_class, _control, appended = ROWS[row]
    target = make_target(tmp_path / "t", spm_bpe_json(BASE_VOCAB), {"tokenizer_class": row},
                         {"architectures": ["LlamaForCausalLM"]})
    got = tokens_and_types(target, "llama", None)
    assert got[5:] == [(t, T.CONTROL) for t in appended]


@pytest.mark.parametrize("config_class, eot_id", [("Qwen2Tokenizer", 257), ("GPT2Tokenizer", 257),
                                                  ("PreTrainedTokenizerFast", None), (None, None)])
def test_byte_level_path_gets_the_defaults_too(config_class: str | None, eot_id: int | None,
                                               tmp_path: Path) -> None:
    """get_vocab_base (DFlash/DSpark): a missing default becomes a special added token at the next free id."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok_config = {"tokenizer_class": config_class} if config_class else {}
    target = make_target(tmp_path / "t", byte_level_json(vocab), tok_config, {"architectures": ["Qwen3ForCausalLM"]})
    got = tokens_and_types(target, "gpt2", 260)
    assert got[256] == ("<|im_start|>", T.CONTROL)
    want = [("<|endoftext|>", T.CONTROL)] if eot_id else [("[PAD257]", T.UNUSED)]
    assert got[257:] == want + [(f"[PAD{i}]", T.UNUSED) for i in (258, 259)]


def test_named_tokens_in_the_config_override_the_class_defaults(tmp_path: Path) -> None:
    vocab = dict(BASE_VOCAB)
    for token in CANDIDATES:
        vocab[token] = len(vocab)
    # an explicit null drops the default; another value replaces it
    tok_config = {"tokenizer_class": "GemmaTokenizer", "mask_token": None, "pad_token": "<|endoftext|>"}
    target = make_target(tmp_path / "t", spm_bpe_json(vocab), tok_config, {"architectures": ["LlamaForCausalLM"]})
    control = {t for t, ty in tokens_and_types(target, "llama", None) if ty == T.CONTROL}
    assert control == {"<unk>", "<bos>", "<eos>", "<|endoftext|>"}


def test_model_specific_token_keys_are_special(tmp_path: Path) -> None:
    """Gemma 3 style ``boi_token`` / ``image_token`` keys: transformers counts them among all_special_ids."""
    vocab = {**BASE_VOCAB, "<start_of_image>": 5, "<img>": 6}
    image = {"__type": "AddedToken", "content": "<img>", "special": False, "normalized": False, "lstrip": False,
             "rstrip": False, "single_word": False}
    tok_config = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<start_of_image>", "eos_token": None,
                  "unk_token": None, "pad_token": None, "mask_token": None, "boi_token": "<start_of_image>",
                  "image_token": image, "eoi_token": "<end_of_image>", "add_bos_token": True}
    target = make_target(tmp_path / "t", spm_bpe_json(vocab), tok_config, {"architectures": ["LlamaForCausalLM"]})
    got = tokens_and_types(target, "llama", None)
    assert got[5:] == [("<start_of_image>", T.CONTROL), ("<img>", T.CONTROL), ("<end_of_image>", T.CONTROL)]


def test_special_token_entries_order_and_overrides() -> None:
    config = {"bos_token": {"content": "<b>"}, "pad_token": None, "prefix_token": "<P>", "add_bos_token": True,
              "foo_token": 3, "additional_special_tokens": ["<x>"], "extra_special_tokens": {"img": "<i>"}}
    assert special_token_entries(config, "CodeLlamaTokenizer") == [
        {"content": "<b>"}, "</s>", "<unk>", "<P>", "\u2581<MID>", "\u2581<SUF>", "\u2581<EOT>", "<FILL_ME>", "<x>",
        "<i>"]
    assert special_token_entries(config, "TokenizersBackend") == [{"content": "<b>"}, "<P>", "<x>", "<i>"]
    assert special_token_entries({}, "FooTokenizer") == []


# ---------------------------------------------------------------------------------------------- class resolution
@pytest.mark.parametrize("tokenizer_class, model_type, byte_level, expected", [
    ("GemmaTokenizer", None, False, "GemmaTokenizer"),
    ("GemmaTokenizerFast", "gemma3_text", False, "GemmaTokenizer"),
    ("GemmaTokenizer", "gemma4_text", False, "GemmaTokenizer"),
    ("LlamaTokenizer", None, False, "LlamaTokenizer"),
    ("LlamaTokenizerFast", None, True, "TokenizersBackend"),  # byte-level tokenizer.json: DeepSeek, Llama 3 repos
    ("LlamaTokenizerFast", "deepseek_v3", True, "TokenizersBackend"),
    ("LlamaTokenizer", "mistral", False, "TokenizersBackend"),
    ("LlamaTokenizer", "phi3", False, "TokenizersBackend"),
    ("LlamaTokenizer", "gemma3_text", False, "LlamaTokenizer"),  # the hub class wins unless the type is listed
    ("GPT2Tokenizer", "phi3", True, "TokenizersBackend"),  # Phi-4
    ("GPT2Tokenizer", None, True, "GPT2Tokenizer"),
    ("PreTrainedTokenizerFast", "qwen2", True, "Qwen2Tokenizer"),  # qwen2's hub class is known to be wrong
    ("PreTrainedTokenizerFast", "qwen3", True, "TokenizersBackend"),
    ("PreTrainedTokenizerFast", "llama", True, "TokenizersBackend"),
    ("PreTrainedTokenizer", None, False, "TokenizersBackend"),  # PythonBackend is replaced by the backend
    ("Qwen2TokenizerFast", "qwen3_moe", True, "Qwen2Tokenizer"),
    ("CodeLlamaTokenizer", "llama", False, "CodeLlamaTokenizer"),
    ("Qwen3Tokenizer", None, True, "TokenizersBackend"),  # no such class
    ("FooTokenizer", "gemma3", False, "TokenizersBackend"),  # an unknown hub class: the backend, not gemma's
    (None, "gemma3", False, "GemmaTokenizer"),  # no tokenizer_class: the model type's class
    (None, "qwen3", True, "Qwen2Tokenizer"),
    (None, "deepseek_v4", True, "TokenizersBackend"),
    (None, None, False, "TokenizersBackend"),
])
def test_resolve_tokenizer_class(tokenizer_class: str | None, model_type: str | None, byte_level: bool,
                                 expected: str) -> None:
    tok_config = {"tokenizer_class": tokenizer_class} if tokenizer_class else {}
    config = {"model_type": model_type} if model_type else {}
    text = '{"pre_tokenizer": {"type": "ByteLevel"}}' if byte_level else '{"pre_tokenizer": null}'
    assert resolve_tokenizer_class(tok_config, config, text) == expected


def test_resolve_with_auto_map_and_config_json_class() -> None:
    # remote code declared: the byte-level and model-type rules are skipped, the named local class is used
    auto = {"tokenizer_class": "LlamaTokenizerFast", "auto_map": {"AutoTokenizer": ["tok.Tok", None]}}
    assert resolve_tokenizer_class(auto, {}, '"ByteLevel"') == "LlamaTokenizer"
    assert resolve_tokenizer_class({**auto, "tokenizer_class": "GemmaTokenizer"}, {"model_type": "qwen3"},
                                   "") == "GemmaTokenizer"
    # a tokenizer_class in the target config.json counts when tokenizer_config.json has none
    assert resolve_tokenizer_class({}, {"tokenizer_class": "GemmaTokenizerFast"}, "") == "GemmaTokenizer"


# ---------------------------------------------------------------------------------------------- issue 14 case
GEMMA_SPECIALS = [("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True), ("<mask>", False)]


def gemma3_target(root: Path) -> Path:
    """A Gemma 3 target without tokenizer.model: ``<mask>`` (id 4) is an added token with special false and
    tokenizer_config.json has no mask_token key."""
    vocab = {content: i for i, (content, _special) in enumerate(GEMMA_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    vocab["\u2581"] = len(vocab)
    while len(vocab) < 1024:
        vocab[f"\u2581w{len(vocab)}"] = len(vocab)
    decoder = {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": s} for i, (c, s) in enumerate(GEMMA_SPECIALS)}
    tok_config = {"tokenizer_class": "GemmaTokenizer", "added_tokens_decoder": decoder, "bos_token": "<bos>",
                  "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": True,
                  "add_eos_token": False}
    config = json.loads((FIXTURES / "target-qwen3" / "config.json").read_text(encoding="utf-8"))
    config.update(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", bos_token_id=2, eos_token_id=1)
    return make_target(root, spm_bpe_json(vocab, GEMMA_SPECIALS), tok_config, config)


def test_issue_14_eagle3_on_gemma3_target(tmp_path: Path) -> None:
    target = gemma3_target(tmp_path / "gemma3")
    out = tmp_path / "eagle3.gguf"
    convert(FIXTURES / "eagle3-specforge", target, out, outtype="f16")
    reader = GGUFReader(out)
    field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(field.parts[i][0]) for i in field.data]
    tokens = [bytes(reader.fields["tokenizer.ggml.tokens"].parts[i]).decode()
              for i in reader.fields["tokenizer.ggml.tokens"].data]
    assert tokens[:6] == ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<0x00>"]
    assert types[4] == T.CONTROL  # upstream 3; 1 (NORMAL) before the fix
    assert types[:5] == [T.CONTROL] * 5 and types[5:261] == [T.BYTE] * 256 and set(types[261:]) == {T.NORMAL}
    assert len(types) == 1024


def test_issue_14_dflash_path_on_the_same_target_unchanged(tmp_path: Path) -> None:
    """get_vocab_base never reads all_special_ids: ``<mask>`` is CONTROL there because it looks special."""
    target = gemma3_target(tmp_path / "gemma3")
    tokens, types = vocab_bpe.bpe_token_list(vocab_bpe.load_hf_tokenizer(target / "tokenizer.json"), 1030)
    assert list(zip(tokens[:6], types[:6], strict=True)) == [
        ("<pad>", T.CONTROL), ("<eos>", T.CONTROL), ("<bos>", T.CONTROL), ("<unk>", T.CONTROL),
        ("<mask>", T.CONTROL), ("<0x00>", T.NORMAL)]
    assert tokens[1024:] == [f"[PAD{i}]" for i in range(1024, 1030)] and set(types[5:1024]) == {T.NORMAL}
