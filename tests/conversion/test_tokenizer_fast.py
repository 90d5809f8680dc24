"""The fast tokenizer path (tokjson + fastbpe) gives exactly what json + the whole ``tokenizers`` object give.

Every case builds a target, converts its tokenizer block twice (fast path, then the whole-tokenizer path forced)
and compares the packed KV bytes and ``chkhsh``; ``fast_taken`` says whether the fast path was used (and it must
be where it claims to reproduce the file). The reader itself is checked against ``json.loads`` on generated and
corrupted documents: it returns the same data or refuses (NotFast), never something else.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from gguf import GGUFValueType as VT
from gguf import GGUFWriter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vocab import QWEN2_RE, bpe_json, make_target, write_json
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.header import pack_kv_value
from dspark_convert.gguffile.packed import PackedStrings
from dspark_convert.plan import KV
from dspark_convert.tokenizer import bpe, fastbpe, handlers, tokjson

# every test with the compiled span lookups and packing, then with their numpy forms
pytestmark = pytest.mark.usefixtures("either_kernels")


# ---------------------------------------------------------------------------------------------- helpers
def block(kvs: list[KV]) -> bytes:
    """The KV block these KVs make in a GGUF file."""
    w = GGUFWriter(None, "dflash")
    return b"".join(w._pack_val(kv.name, VT.STRING, add_vtype=False) + pack_kv_value(w, kv.value, kv.type, kv.sub_type)
                    for kv in kvs)


def both(target: Path, n_vocab: int | None, handler: str, monkeypatch: pytest.MonkeyPatch,
         fast_fn: str = "_set_vocab_gpt2_fast") -> tuple[Any, Any, bool]:
    """(fast result, whole-tokenizer result, fast path used); a result is the block bytes or the error text.
    ``fast_fn``: the handlers function that tries the fast path (it returns False to step aside)."""
    def run() -> Any:
        try:
            return block(handlers.target_vocab_kvs(target, n_vocab, handler))
        except ConvertError as e:
            return f"error: {e}"

    taken = []
    real = getattr(handlers, fast_fn)

    def spy(*a: Any) -> bool:
        try:
            result = real(*a)
        except ConvertError:  # the fast path answered, with an error
            taken.append(True)
            raise
        taken.append(result)
        return result

    with monkeypatch.context() as m:
        m.setattr(handlers, fast_fn, spy)
        fast = run()
    with monkeypatch.context() as m:
        m.setattr(handlers, fast_fn, lambda *a: False)
        slow = run()
    return fast, slow, any(taken)


def same_hash(target: Path) -> None:
    """chkhsh of the reduced tokenizer == chkhsh of the whole one."""
    tj = target / "tokenizer.json"
    assert fastbpe.load_fast_bpe(tj).chkhsh() == bpe.chkhsh(bpe.load_hf_tokenizer(tj))


def check(target: Path, monkeypatch: pytest.MonkeyPatch, n_vocab: int | None = None, handler: str = "gpt2",
          fast: bool = True) -> None:
    got, want, taken = both(target, n_vocab, handler, monkeypatch)
    assert got == want
    assert taken is fast
    if fast and not (isinstance(want, str) and want.startswith("error")):
        same_hash(target)


# ---------------------------------------------------------------------------------------------- fixed cases
def test_default_tokenizer_padded_and_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = make_target(tmp_path / "t")
    check(target, monkeypatch)
    check(target, monkeypatch, n_vocab=300)
    check(target, monkeypatch, n_vocab=100)  # too small: the same error on both paths
    kvs = handlers.target_vocab_kvs(target, 300, "gpt2")
    tokens = next(kv.value for kv in kvs if kv.name == "tokenizer.ggml.tokens")
    assert isinstance(tokens, PackedStrings) and len(tokens) == 300
    assert tokens[259:261] == ["<|endoftext|>", "<|im_start|>"] and tokens[299] == "[PAD299]"


@pytest.mark.parametrize("post", [
    processors.TemplateProcessing(single="<|im_start|> $A <|endoftext|>", pair="$A <|endoftext|> $B:1",
                                  special_tokens=[("<|im_start|>", 260), ("<|endoftext|>", 259)]),
    processors.RobertaProcessing(("<|endoftext|>", 259), ("<|im_start|>", 260)),
    processors.BertProcessing(("<|endoftext|>", 259), ("<|im_start|>", 260)),
    processors.Sequence([processors.ByteLevel(), processors.TemplateProcessing(
        single="<|im_start|> $A", special_tokens=[("<|im_start|>", 260)])]),
    processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[("<|im_start|>", 3)]),  # odd literal id
])
def test_post_processors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, post: Any) -> None:
    check(make_target(tmp_path / "t", tokenizer=bpe_json(post=post)), monkeypatch)


@pytest.mark.parametrize("cfg", [
    {"bos_token": "<|im_start|>", "add_bos_token": True, "eos_token": "<|endoftext|>", "add_eos_token": True},
    {"bos_token": "<|im_start|>", "add_bos_token": False, "unk_token": "<unk>", "pad_token": "<pad>"},
    {"additional_special_tokens": ["<extra_1>", "he"], "extra_special_tokens": {"x": "<extra_2>"}},
    {"added_tokens_decoder": {"259": {"content": "<|endoftext|>", "special": False, "normalized": True},
                              "270": {"content": "<new>", "special": True}, "258": {"content": "Ġthe"}}},
    {"tokenizer_class": "GemmaTokenizerFast"},  # class defaults (<bos>, <mask>, ...) become added tokens
    {"tokenizer_class": "Qwen2Tokenizer", "pad_token": None},
    {"tokenizer_class": "LlamaTokenizerFast", "eos_token": "<|im_start|>"},  # over a byte-level file: the backend
    {"split_special_tokens": True, "bos_token": "<|im_start|>"},  # special tokens tokenized: the slow path
    {"clean_up_tokenization_spaces": True, "added_tokens_decoder": {"264": {"content": " ,x", "normalized": False}}},
])
def test_transformers_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cfg: dict) -> None:
    target = make_target(tmp_path / "t", tok_config=cfg)
    check(target, monkeypatch, fast=not cfg.get("split_special_tokens"))


def test_normalizers_and_normalized_added_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    norm = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    check(make_target(tmp_path / "t", tokenizer=bpe_json(normalizer=norm)), monkeypatch)


def test_vocab_order_escapes_and_whitespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bpe_json()
    vocab = data["model"]["vocab"]
    # tokens the JSON must escape, ids out of file order, and a pretty-printed file (as tokenizers writes them)
    for text in ('"x', "\\y", '\\"', "a\nb", "\x01z", "}}", "],", '", "'):
        vocab[text] = len(vocab)
    data["added_tokens"] = [dict(a, id=a["id"] + 8) for a in data["added_tokens"]]
    data["model"]["vocab"] = dict(sorted(vocab.items(), key=lambda kv: (kv[1] * 7919) % len(vocab)))
    target = make_target(tmp_path / "t", tokenizer=data)
    (target / "tokenizer.json").write_text(json.dumps(data, indent=2, ensure_ascii=True), encoding="utf-8")
    check(target, monkeypatch)


def test_legacy_merges_and_spaces_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bpe_json()
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    check(make_target(tmp_path / "l", tokenizer=data), monkeypatch)
    vocab = {"a": 0, "b": 1, " ": 2, "a ": 3, "a b": 4}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", " "), ("a ", "b")]))
    target = make_target(tmp_path / "s", tokenizer=json.loads(tok.to_str()))
    check(target, monkeypatch)
    assert fastbpe.load_fast_bpe(target / "tokenizer.json").merges == ["a Ġ", "aĠ b"]


def test_byte_fallback_unk_and_metaspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = {"<unk>": 0, "<0x41>": 1, "<0xE3>": 2, "▁": 3, "a": 4, "b": 5, "▁a": 6, "ab": 7, "(": 8}
    for fuse in (False, True):
        for byte_fallback in (False, True):
            tok = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "a"), ("a", "b")], byte_fallback=byte_fallback,
                                       unk_token="<unk>", fuse_unk=fuse))
            tok.pre_tokenizer = pre_tokenizers.Metaspace()
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
            tok.add_special_tokens(["<s>"])
            target = make_target(tmp_path / f"b{fuse}{byte_fallback}", tokenizer=json.loads(tok.to_str()))
            check(target, monkeypatch)


def test_ignore_merges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bpe_json()
    data["model"]["ignore_merges"] = True
    vocab = data["model"]["vocab"]
    vocab["Ġsure"], vocab["Ġ("] = len(vocab), len(vocab) + 1  # whole words the merges do not make
    data["added_tokens"] = [dict(a, id=a["id"] + 2) for a in data["added_tokens"]]
    check(make_target(tmp_path / "b", tokenizer=data), monkeypatch)  # byte-level: exact
    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, "abc": 3}, merges=[("a", "b")], ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    check(make_target(tmp_path / "w", tokenizer=json.loads(tok.to_str())), monkeypatch, fast=False)


def test_unsupported_models_take_the_slow_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bpe_json()
    data["model"]["dropout"] = 0.5
    target = make_target(tmp_path / "d", tokenizer=data)
    with pytest.raises(tokjson.NotFast):
        fastbpe.load_fast_bpe(target / "tokenizer.json")
    data = bpe_json()
    data["model"]["continuing_subword_prefix"] = "##"
    target = make_target(tmp_path / "p", tokenizer=data)
    with pytest.raises(tokjson.NotFast):
        fastbpe.load_fast_bpe(target / "tokenizer.json")
    # (the tokenizers library panics on this file: refused before it reads it, one line naming the merge)
    with pytest.raises(ConvertError, match=r"p/tokenizer.json: merge 0 \(\['Ġ', 't'\]\) does not start with the "
                                           r"model's continuing_subword_prefix '##'"):
        handlers.target_vocab_kvs(target, None, "gpt2")
    data = bpe_json(post=processors.ByteLevel())
    data["post_processor"] = {"type": "SomethingNew"}
    target = make_target(tmp_path / "n", tokenizer=data)
    got, want, taken = both(target, None, "gpt2", monkeypatch)
    assert got == want and taken is False and want.startswith("error: ")


def test_malformed_files_fail_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bpe_json()
    data["model"]["merges"].append(["Ġt", "nope"])  # a part the vocabulary lacks
    check(make_target(tmp_path / "m", tokenizer=data), monkeypatch, fast=False)
    target = make_target(tmp_path / "d")
    text = (target / "tokenizer.json").read_text(encoding="utf-8")
    (target / "tokenizer.json").write_text(text.replace('"Ġt": 256', '"Ġt": 256, "Ġt": 7'), encoding="utf-8")
    got, want, taken = both(target, None, "gpt2", monkeypatch)
    assert got == want and taken is False  # a repeated key: json and serde agree, the fast reader steps aside
    (target / "tokenizer.json").write_bytes(text.encode("utf-8").replace(b'"h": ', b'"h\xff": '))
    got, want, taken = both(target, None, "gpt2", monkeypatch)
    assert taken is False and got == want and "not UTF-8" in want


# ---------------------------------------------------------------------------------------------- trained tokenizers
_ALPHABET = "abcdeé中文😀 \n\t\"\\'.,!?]}[{0123456789ΣσςÅ\u0301"


def trained(seed: int, pre: str, byte_fallback: bool, added: list[tuple[str, bool, bool]]) -> dict:
    """A BPE trained on random text of _ALPHABET, with added tokens (content, special, normalized)."""
    rnd = random.Random(seed)
    corpus = ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(5, 60))) for _ in range(200)]
    tok = Tokenizer(models.BPE(byte_fallback=byte_fallback, unk_token=None if pre == "bytelevel" else "<unk>"))
    if pre == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
        alphabet = ["<0x41>", "<0xE4>"] if byte_fallback else []
    trainer = trainers.BpeTrainer(vocab_size=rnd.randint(60, 400), special_tokens=["<unk>", "<s>"],
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    for content, special, normalized in added:
        tok.add_tokens([AddedToken(content, special=special, normalized=normalized)])
    return json.loads(tok.to_str())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), pre=st.sampled_from(["bytelevel", "metaspace"]), byte_fallback=st.booleans(),
       added=st.lists(st.tuples(st.text(_ALPHABET + "<|>", min_size=1, max_size=6), st.booleans(), st.booleans()),
                      max_size=4),
       cfg=st.fixed_dictionaries({}, optional={"add_bos_token": st.booleans(), "bos_token": st.just("<s>"),
                                               "eos_token": st.sampled_from(["<s>", "<eos>"]),
                                               "unk_token": st.just("<unk>")}))
def test_trained_tokenizers(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, seed: int,
                            pre: str, byte_fallback: bool, added: list, cfg: dict) -> None:
    target = make_target(tmp_path_factory.mktemp("t"), tokenizer=trained(seed, pre, byte_fallback, added),
                         tok_config=cfg)
    got, want, taken = both(target, None, "gpt2", monkeypatch)
    assert got == want
    if taken:
        same_hash(target)


# ---------------------------------------------------------------------------------------------- gemma4 (LlamaHfVocab)
def llama_hf(added: list[tuple[str, bool, bool]], extra_model: tuple[str, ...] = ()) -> dict:
    """A byte-fallback BPE with a Sequence decoder (what the gemma4 handler takes), with added tokens
    (content, special, normalized)."""
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<0x0A>": 4, "<0x41>": 5, "<0xe3>": 6, "▁": 7, "a": 8,
             "b": 9, "▁a": 10, "ab": 11, "<|channel>": 12, "<0x4G>": 13}
    for t in extra_model:
        vocab[t] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "a"), ("a", "b")], byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(["<pad>", "<eos>", "<bos>", "<unk>"])
    for content, special, normalized in added:
        tok.add_tokens([AddedToken(content, special=special, normalized=normalized)])
    return json.loads(tok.to_str())


@pytest.mark.parametrize(("added", "cfg"), [
    ([], {}),
    ([("<|channel>", False, False), ("<channel|>", False, False), ("<start>", True, False)],
     {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": True}),
    ([('<|"|>', True, False), ("<user>", False, True)],
     {"tokenizer_class": "GemmaTokenizer", "additional_special_tokens": ["<user>", "<0x41>", "ab"],
      "extra_special_tokens": {"image_token": "<image>"}}),  # class defaults, a byte token named special
    ([("<x>", True, False)], {"added_tokens_decoder": {"15": {"content": "<y>", "special": True}}}),
])
def test_gemma4_fast_list_equals_the_whole_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     added: list, cfg: dict) -> None:
    target = make_target(tmp_path / "t", "Gemma4ForConditionalGeneration", tokenizer=llama_hf(added), tok_config=cfg)
    got, want, taken = both(target, None, "gemma4", monkeypatch, "_gemma4_fast")
    assert taken is True and isinstance(want, bytes) and got == want


@pytest.mark.parametrize(("added", "cfg"), [
    ([], {}),
    ([("<|channel>", False, False), ("<start>", True, False)], {"bos_token": "<bos>", "add_prefix_space": False}),
    ([('<|"|>', True, False), ("<user>", False, True)], {"additional_special_tokens": ["<user>", "<0x41>", "ab"]}),
])
def test_llama_hf_fast_list_equals_the_whole_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       added: list, cfg: dict) -> None:
    """The llama handler's LlamaHfVocab branch (no tokenizer.model, a byte-fallback BPE) by the fast reader."""
    target = make_target(tmp_path / "t", "LlamaForCausalLM", tokenizer=llama_hf(added), tok_config=cfg)
    got, want, taken = both(target, None, "llama", monkeypatch, "_llama_hf_fast")
    assert taken is True and isinstance(want, bytes) and got == want and b"tokenizer.ggml.merges" not in want
    data = llama_hf([])
    data["model"]["merges"].append(["a", "nope"])  # a part the vocabulary lacks: the library's own message
    target = make_target(tmp_path / "m", "LlamaForCausalLM", tokenizer=data)
    got, want, taken = both(target, None, "llama", monkeypatch, "_llama_hf_fast")
    assert taken is False and got == want and want.startswith("error: ")


def test_gemma4_ambiguous_or_malformed_files_take_the_whole_tokenizer(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data = llama_hf([("<new>", True, False)])
    data["added_tokens"][-1]["content"] = "ab"  # an added token naming model token 11's text with another id
    target = make_target(tmp_path / "a", "Gemma4ForConditionalGeneration", tokenizer=data)
    got, want, _ = both(target, None, "gemma4", monkeypatch, "_gemma4_fast")
    assert got == want and isinstance(want, bytes)  # the library gives it id 11, and so does the reduced one
    data = llama_hf([])
    data["model"]["merges"].append(["a", "nope"])  # a part the vocabulary lacks: the library's own message
    target = make_target(tmp_path / "m", "Gemma4ForConditionalGeneration", tokenizer=data)
    got, want, taken = both(target, None, "gemma4", monkeypatch, "_gemma4_fast")
    assert taken is False and got == want and want.startswith("error: ")
    data = llama_hf([])
    data["decoder"] = {"type": "ByteFallback"}  # not LlamaHfVocab's: the same refusal on both paths
    target = make_target(tmp_path / "d", "Gemma4ForConditionalGeneration", tokenizer=data)
    got, want, taken = both(target, None, "gemma4", monkeypatch, "_gemma4_fast")
    assert taken is True and got == want and "the gemma4 handler needs a BPE tokenizer.json" in want


# ---------------------------------------------------------------------------------------------- the reader
_TEXT = st.text(st.sampled_from(list("ab\"\\/\n\t\x00\x1fé中😀 ,:[]{}") + ["\ud7ff", "\ue000"]), max_size=6)


def _document(vocab: list[str], merges: list[Any], indent: int | None, ascii_only: bool, order: int) -> bytes:
    ids = list(range(len(vocab)))
    random.Random(order).shuffle(ids) if order else None
    data = {"version": "1.0", "added_tokens": [{"id": 0, "content": "x\"]}"}], "normalizer": None,
            "model": {"type": "BPE", "dropout": None, "vocab": {vocab[i]: i for i in ids}, "merges": merges}}
    return json.dumps(data, indent=indent, ensure_ascii=ascii_only).encode("utf-8")


def _read(raw: bytes) -> tuple[dict, list[bytes], list[Any]]:
    lay = tokjson.locate(raw)
    tokens = tokjson.vocab_tokens(lay)
    merges: list[Any] = []
    for chunk in tokjson.merge_chunks(lay):
        merges += [[a.decode(), b.decode()] for a, b in zip(*chunk, strict=True)] if lay.pairs else [s.decode() for s in chunk]
    return lay.meta, tokens, merges


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vocab=st.lists(_TEXT, unique=True, max_size=30), pairs=st.booleans(), indent=st.sampled_from([None, 0, 2]),
       ascii_only=st.booleans(), order=st.integers(0, 3), chunk=st.integers(1, 64), data=st.data())
def test_reader_equals_json(monkeypatch: pytest.MonkeyPatch, vocab: list[str], pairs: bool, indent: int | None,
                            ascii_only: bool, order: int, chunk: int, data: st.DataObject) -> None:
    monkeypatch.setattr(tokjson, "CHUNK", chunk)  # many small pieces: cuts next to quotes and escapes
    part = _TEXT.filter(lambda s: " " not in s)
    merges = data.draw(st.lists(st.lists(_TEXT, min_size=2, max_size=2) if pairs
                                else st.tuples(part, part).map(" ".join), max_size=20))
    raw = _document(vocab, merges, indent, ascii_only, order)
    ref = json.loads(raw)
    model = ref["model"]
    want_tokens = [t.encode("utf-8", "surrogatepass") for t in sorted(model.pop("vocab"), key=lambda t: vocab.index(t))]
    want_merges = model.pop("merges")
    try:
        meta, tokens, got_merges = _read(raw)
    except tokjson.NotFast:  # allowed only where the bytes are not plain UTF-8 (lone surrogates)
        assert any("\ud800" <= c <= "\udfff" for t in vocab for c in t)
        return
    assert (meta, tokens, got_merges) == (ref, want_tokens, want_merges)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), chunk=st.integers(1, 40), edit=st.sampled_from(["insert", "delete", "replace"]),
       byte=st.sampled_from(list(b' ,:"\\[]{}0a\n\xff\x01')))
def test_reader_never_accepts_what_json_refuses(monkeypatch: pytest.MonkeyPatch, seed: int, chunk: int, edit: str,
                                               byte: int) -> None:
    monkeypatch.setattr(tokjson, "CHUNK", chunk)
    rnd = random.Random(seed)
    vocab = ["a", "b", "ab", '"q', "\\", "}", "],", "é"]
    raw = bytearray(_document(vocab, [["a", "b"], ['"q', "\\"]], rnd.choice([None, 2]), rnd.random() < 0.5, 0))
    pos = rnd.randrange(len(raw))
    if edit == "insert":
        raw[pos:pos] = bytes([byte])
    elif edit == "delete":
        del raw[pos]
    else:
        raw[pos] = byte
    try:
        got = _read(bytes(raw))
    except tokjson.NotFast:
        return
    ref = json.loads(bytes(raw))  # the fast reader took it: json must too, with the same content
    vocab_map = ref["model"].pop("vocab")
    if len(set(got[1])) != len(got[1]):  # a repeated key: vocab_tokens leaves that to its caller (fastbpe refuses)
        assert len(vocab_map) < len(got[1])
        return
    assert got[1] == [t.encode() for t in sorted(vocab_map, key=vocab_map.get)]
    assert sorted(vocab_map.values()) == list(range(len(vocab_map)))
    assert got[2] == ref["model"].pop("merges")
    assert got[0] == ref


def test_real_layout_is_taken(tmp_path: Path) -> None:
    """tokenizers' own pretty-printed file, chunked, reads back exactly."""
    data = bpe_json()
    text = Tokenizer.from_str(json.dumps(data)).to_str(pretty=True)
    lay = tokjson.locate(text.encode("utf-8"))
    assert tokjson.vocab_tokens(lay) == [t.encode() for t in sorted(data["model"]["vocab"],
                                                                     key=data["model"]["vocab"].get)]
    assert lay.pairs and [list(zip(*c, strict=True)) for c in tokjson.merge_chunks(lay)] == [
        [(a.encode(), b.encode()) for a, b in data["model"]["merges"]]]
    write_json(tmp_path / "x.json", data)  # (make_target writes compact JSON: covered by the cases above)
