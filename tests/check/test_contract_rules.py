"""Contract rules that are not refusals: self-contained drafts (--with-target-embeddings), the SentencePiece target
path, and the RoPE permutations as exact inverses of the layouts they undo (property tests).

The refusals of gguf-contract.md §3.5 (validation errors) and §3.7 (files upstream writes but llama.cpp rejects)
are cases of the one bad-input catalogue, tests/bad_inputs_cases.py (``section="§3.5"`` / ``"§3.7"``), each with
its entry in docs/troubleshooting.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from bad_inputs_kit import FIX, TARGET, get_tensor
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_convert import check_file, convert
from dspark_convert.variants.dflash.transforms import deinterleave_rope
from dspark_convert.variants.eagle3.transforms import eagle3_permute


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


# ------------------------------------------------------------------------------------------- SentencePiece target
def test_dspark_against_sentencepiece_target(tmp_path: Path) -> None:
    out = tmp_path / "spm.gguf"
    # the fixture target's vocabulary (512) is not the draft's (1024): a fit error, lifted to test the tokenizer path
    convert(FIX / "dflash-zlab", FIX / "target-llama2-spm", out, outtype="f16", ignore_target_mismatch=True)
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


@settings(max_examples=200, deadline=None)
@given(n_kv=st.integers(1, 4), group=st.integers(1, 4), half=st.integers(1, 8), seed=st.integers(0, 2**31))
def test_eagle3_permute_index_rule(n_kv: int, group: int, half: int, seed: int) -> None:
    n_head, hd = n_kv * group, 2 * half
    rng = np.random.default_rng(seed)
    for n in (n_head, n_kv):
        w = rng.standard_normal((n * hd, 3)).astype(np.float32)
        p = eagle3_permute(w, n_head, n if n != n_head else n_head)
        for g in range(n):
            for i in range(half):
                for c in (0, 1):
                    assert np.array_equal(p[g * hd + 2 * i + c], w[g * hd + c * half + i])
