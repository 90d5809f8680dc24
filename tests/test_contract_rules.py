"""Each validation rule of gguf-contract.md §3.5 and each refusal of §3.7 (files upstream writes but llama.cpp
rejects): the conversion stops with one line naming the culprit, exit code 2, and no output file.
Also: self-contained drafts (--with-target-embeddings), the SentencePiece target path, and the RoPE permutations
as exact inverses of the layouts they undo (property tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from badinputs import (
    DELETE,
    FIX,
    TARGET,
    assert_refused,
    copy_fixture,
    edit_config,
    get_tensor,
    run_convert,
    set_tensor,
)
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_convert import check_file, convert
from dspark_convert.transforms import deinterleave_rope, eagle3_permute, eagle3_unpermute, interleave_rope


# ------------------------------------------------------------------------------------------- §3.5 DSpark
def test_markov_head_type_other_than_vanilla(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-qwen3")
    edit_config(d, markov_head_type="gated")
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "markov_head_type", "'gated'", "vanilla")


def test_markov_head_type_nested_specforge(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-specforge")
    cfg = json.loads((d / "config.json").read_text())
    cfg["dflash_config"]["markov_head_type"] = "rnn"
    (d / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "markov_head_type", "'rnn'")


def test_draft_vocab_larger_than_vocab(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-speculators")
    edit_config(d, draft_vocab_size=2048)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "draft_vocab_size 2048", "vocab_size 1024")


def test_reduced_vocab_without_d2t(tmp_path: Path) -> None:
    from badinputs import drop_tensor

    d = copy_fixture(tmp_path, "dspark-reduced")
    drop_tensor(d, "d2t")
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "draft_vocab_size 256", "no 'd2t'")


def test_d2t_wrong_length(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-reduced")
    _, d2t = get_tensor(d, "d2t")
    set_tensor(d, "d2t", "I64", d2t[:200])
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "'d2t'", "200 entries", "256")


def test_d2t_out_of_range(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-reduced")
    _, d2t = get_tensor(d, "d2t")
    bad = d2t.copy()
    bad[-1] = 5000  # 255 + 5000 >= 1024
    set_tensor(d, "d2t", "I64", bad)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "'d2t'", "entry 255", "5255", "[0, 1024)")


def test_d2t_duplicates(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-reduced")
    _, d2t = get_tensor(d, "d2t")
    bad = d2t.copy()
    bad[1] = bad[0] - 1  # entry 1 maps to the same id as entry 0
    set_tensor(d, "d2t", "I64", bad)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "'d2t'", "appears 2 times", "unique")


def test_eagle3_d2t_checked_against_target_vocab(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "eagle3-specforge")
    _, d2t = get_tensor(d, "d2t")
    bad = d2t.copy()
    bad[0] = -1
    set_tensor(d, "d2t", "I64", bad)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "'d2t'", "entry 0", "-1", "[0, 1024)")


# ------------------------------------------------------------------------------------------- other aborts
def test_unmappable_tensor(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-qwen3")
    set_tensor(d, "layers.0.mystery.weight", "BF16", np.zeros((4, 4), np.uint16))
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "layers.0.mystery.weight", "no GGUF name")


def test_d2t_in_dflash_draft_model(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    set_tensor(d, "d2t", "I64", np.zeros(16, np.int64))
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "'d2t'", "DFlashDraftModel")


def test_unregistered_target_arch(tmp_path: Path) -> None:
    t = copy_fixture(tmp_path, "target-qwen3")
    edit_config(t, architectures=["TotallyNewForCausalLM"])
    assert_refused(run_convert(FIX / "dflash-zlab", t, tmp_path / "out"), "TotallyNewForCausalLM", "not supported")


def test_target_token_id_beyond_draft_vocab(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    edit_config(d, vocab_size=1000)  # the target tokenizer has ids up to 1016
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "tokenizer.json", "vocab_size 1000")


def test_missing_target_dir(tmp_path: Path) -> None:
    assert_refused(run_convert(FIX / "dflash-zlab", tmp_path / "nope", tmp_path / "out"), "nope", "no such folder")


# ------------------------------------------------------------------------------------------- §3.7 refusals
def test_missing_target_layer_ids(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    cfg = json.loads((d / "config.json").read_text())
    cfg["dflash_config"]["target_layer_ids"] = []
    (d / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "target_layer_ids", "missing or empty", "target_layers")


def test_eagle3_input_norm_without_norm_before_fc(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "eagle3-normfc")
    edit_config(d, norm_before_fc=DELETE)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "input_norm.weight", "norm_before_fc")


def test_eagle3_tap_count_not_three(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "eagle3-speculators")
    edit_config(d, eagle_aux_hidden_state_layer_ids=[1, 2, 3, 4])
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "eagle_aux_hidden_state_layer_ids", "4 entries", "exactly 3")


def test_mask_id_outside_token_count(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-qwen3")
    edit_config(d, mask_token_id=5000)
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), "config.json", "mask_token_id is 5000", "[0, 1024)")


@pytest.mark.parametrize("extra", ["layers.0.self_attn.sinks", "fc.bias"])
def test_extra_tensor_the_loader_does_not_create(tmp_path: Path, extra: str) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    set_tensor(d, extra, "BF16", np.zeros((4,) if extra.endswith("sinks") else (64,), np.uint16))
    gguf = "blk.0.attn_sinks.weight" if extra.endswith("sinks") else "fc.bias"
    assert_refused(run_convert(d, TARGET, tmp_path / "out"), gguf, "wrong number of tensors")


# ------------------------------------------------------------------------------------------- self-contained
def test_self_contained_dflash_takes_target_embeddings(tmp_path: Path) -> None:
    out = tmp_path / "zlab.gguf"
    r = convert(FIX / "dflash-zlab", FIX / "target-qwen3-sharded", out, outtype="bf16", embed_from_target=True)
    names = [t.name for t in r.plan.tensors]
    assert names[-2:] == ["token_embd.weight", "output.weight"]
    assert check_file(out) == []
    rd = GGUFReader(out)
    t = {x.name: x for x in rd.tensors}
    _, emb = get_tensor(FIX / "target-qwen3", "model.embed_tokens.weight")
    _, head = get_tensor(FIX / "target-qwen3", "lm_head.weight")
    assert t["token_embd.weight"].tensor_type == QT.BF16 and list(t["token_embd.weight"].shape) == [64, 1024]
    assert np.asarray(t["token_embd.weight"].data).tobytes() == emb.tobytes()
    assert np.asarray(t["output.weight"].data).tobytes() == head.tobytes()


def test_self_contained_eagle3_adds_only_token_embd_before_d2t(tmp_path: Path) -> None:
    out = tmp_path / "e3.gguf"
    r = convert(FIX / "eagle3-angelslim", TARGET, out, outtype="f16", embed_from_target=True)
    names = [t.name for t in r.plan.tensors]
    assert names[-2:] == ["token_embd.weight", "d2t"] and names.count("output.weight") == 1
    assert check_file(out) == []


def test_self_contained_keeps_draft_embeddings(tmp_path: Path) -> None:
    r = convert(FIX / "eagle3-speculators", TARGET, tmp_path / "e3.gguf", outtype="f32", embed_from_target=True)
    assert [t.origin for t in r.plan.tensors if t.name == "token_embd.weight"] == ["draft"]


def test_self_contained_target_vocab_mismatch(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    edit_config(d, vocab_size=1100)
    assert_refused(run_convert(d, TARGET, tmp_path / "out", "--with-target-embeddings"),
                   "model.embed_tokens.weight", "1024 rows", "1100 tokens")


# ------------------------------------------------------------------------------------------- SentencePiece target
def test_dspark_against_sentencepiece_target(tmp_path: Path) -> None:
    out = tmp_path / "spm.gguf"
    convert(FIX / "dflash-zlab", FIX / "target-llama2-spm", out, outtype="f16")
    rd = GGUFReader(out)
    f = rd.fields
    assert bytes(f["tokenizer.ggml.model"].parts[-1]).decode() == "llama"
    assert bytes(f["tokenizer.ggml.pre"].parts[-1]).decode() == "default"
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    scores = [f["tokenizer.ggml.scores"].parts[i][0] for i in f["tokenizer.ggml.scores"].data]
    assert len(tokens) == 1024 and tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[600] == "[PAD600]"
    assert scores[600] == -10000.0
    assert "tokenizer.ggml.merges" not in f
    assert int(f["tokenizer.ggml.mask_token_id"].parts[-1][0]) == 1016


# ------------------------------------------------------------------------------------------- RoPE properties
@settings(max_examples=200, deadline=None)
@given(heads=st.integers(1, 8), half=st.integers(1, 16), cols=st.integers(0, 5), seed=st.integers(0, 2**31))
def test_deinterleave_undoes_interleaved_layout(heads: int, half: int, cols: int, seed: int) -> None:
    hd = 2 * half
    rng = np.random.default_rng(seed)
    neox = rng.standard_normal((heads * hd, cols) if cols else (heads * hd,)).astype(np.float32)
    # build the interleaved (GPT-J) layout of these NEOX rows by the index rule, then undo it
    inter = np.empty_like(neox)
    for g in range(heads):
        for j in range(half):
            inter[g * hd + 2 * j] = neox[g * hd + j]
            inter[g * hd + 2 * j + 1] = neox[g * hd + half + j]
    assert np.array_equal(deinterleave_rope(inter, hd), neox)
    assert np.array_equal(interleave_rope(neox, hd), inter)


@settings(max_examples=200, deadline=None)
@given(n_kv=st.integers(1, 4), group=st.integers(1, 4), half=st.integers(1, 8), seed=st.integers(0, 2**31))
def test_eagle3_permute_inverse_and_index_rule(n_kv: int, group: int, half: int, seed: int) -> None:
    n_head, hd = n_kv * group, 2 * half
    rng = np.random.default_rng(seed)
    for n in (n_head, n_kv):
        w = rng.standard_normal((n * hd, 3)).astype(np.float32)
        p = eagle3_permute(w, n_head, n if n != n_head else n_head)
        for g in range(n):
            for i in range(half):
                for c in (0, 1):
                    assert np.array_equal(p[g * hd + 2 * i + c], w[g * hd + c * half + i])
        assert np.array_equal(eagle3_unpermute(p, n_head, n if n != n_head else n_head), w)
