"""The numpy reference forward (GGUF side) and the torch forward (HF side), piece by piece.

Primitives are checked against hand-computed values and against each other (torch vs numpy, written
independently); the GGUF hyperparameter readers against the fixtures' known configs; the forward's streaming,
Markov chain, confidence head and EAGLE-3 KV cache against direct recomputation.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, TARGET
from fixture_registry import names

from dspark_convert.errors import ConvertError
from dspark_convert.reference import ops
from dspark_convert.reference.weights import GGUFWeights, TargetWeights, open_gguf
from dspark_convert.variants.dflash import numpy_forward as nf
from dspark_convert.variants.eagle3.numpy_forward import (
    Eagle3Case,
    Eagle3HParams,
    KVCache,
    eagle3_forward,
    eagle3_step,
    fc_input,
)

torch = pytest.importorskip("torch", reason="the torch forward needs torch (torch extra)")
from dspark_convert.reference import layers_torch as tf  # noqa: E402
from dspark_convert.reference.hf_draft import HFHParams, RopeParams  # noqa: E402
from dspark_convert.variants.dflash.torch_forward import block_forward  # noqa: E402
from dspark_convert.verify.rows import checkpoint_variant, storage_of, torch_side  # noqa: E402


def load_draft(folder: Path, g: GGUFWeights | None = None) -> Any:
    """The checkpoint through the torch side of the variant that reads it (rounded as ``g`` stores it)."""
    side = torch_side(checkpoint_variant(folder))
    storage = None if g is None else storage_of(g, side.open(folder, TARGET, None).w.names, side.counterpart)
    return side.open(folder, TARGET, storage)

MASK = 1016
RNG = np.random.default_rng(11)


def _hp(head_dim: int, rope: RopeParams) -> HFHParams:
    return HFHParams(n_layer=1, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=head_dim, eps=1e-6, rope=rope,
                     vocab_size=1024, draft_vocab_size=1024, target_layers=[1], own_embed=False)


@pytest.fixture(scope="session")
def gguf(converted):
    """``gguf(layout, outtype="f32") -> GGUFWeights`` of a converted fixture (conftest's ``converted``)."""
    return lambda layout, outtype="f32": open_gguf(converted(layout, outtype))


# ---------------------------------------------------------------------------------------------- primitives
def test_rms_norm_values() -> None:
    x = np.array([[1.0, -2.0, 2.0, 0.0]], np.float32)          # mean square 9/4
    y = ops.rms_norm(x, np.array([1, 1, 2, 1], np.float32), 0.0)
    assert np.allclose(y, [[2 / 3, -4 / 3, 8 / 3, 0.0]])
    assert np.allclose(ops.rms_norm(x, None, 0.75), x / np.sqrt(3.0))


def test_rope_tables() -> None:
    cos, sin = ops.rope_cos_sin(np.array([0, 2]), 4, 100.0)
    assert np.allclose(cos[0], 1) and np.allclose(sin[0], 0)
    assert np.allclose(sin[1], np.sin([2.0, 2.0 / 10.0]), atol=1e-7)     # 100^(-2/4) = 0.1
    c2, s2 = ops.rope_cos_sin(np.array([2]), 4, 100.0, freq_factors=np.array([1.0, 4.0]))
    assert np.allclose(s2[0], np.sin([2.0, 0.05]), atol=1e-7)
    c3, _ = ops.rope_cos_sin(np.array([8]), 4, 100.0, pos_scale=0.25)
    assert np.allclose(c3[0], np.cos([2.0, 0.2]), atol=1e-7)


def _to_pairs(x: np.ndarray) -> np.ndarray:
    """Rotate-half order -> interleaved pairs along the last axis (the converter's EAGLE-3 q/k permutation)."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], 2, d // 2).swapaxes(-1, -2).reshape(x.shape)


def test_interleaved_rope_on_permuted_rows_equals_neox() -> None:
    """Why the converter permutes EAGLE-3 q/k: NORM rope on pair-ordered dims == NEOX rope on half-ordered dims."""
    x = RNG.standard_normal((5, 3, 8)).astype(np.float32)
    cos, sin = ops.rope_cos_sin(np.arange(5), 8, 10000.0)
    assert np.allclose(ops.rope_norm(_to_pairs(x), cos, sin), _to_pairs(ops.rope_neox(x, cos, sin)), atol=1e-6)
    assert not np.allclose(ops.rope_norm(x, cos, sin), ops.rope_neox(x, cos, sin), atol=1e-3)


@pytest.mark.parametrize("neox", [True, False])
def test_torch_and_numpy_rope_agree(neox: bool) -> None:
    x = RNG.standard_normal((6, 2, 16)).astype(np.float32)          # [N, heads, d]
    pos = np.arange(3, 9)
    cos, sin = ops.rope_cos_sin(pos, 16, 1e6)
    want = (ops.rope_neox if neox else ops.rope_norm)(x, cos, sin)
    freqs = tf.inv_freq(_hp(16, RopeParams(theta=1e6)))
    got = tf.apply_rope(torch.from_numpy(x).transpose(0, 1), torch.from_numpy(pos), freqs, neox).transpose(0, 1)
    assert np.allclose(got.numpy(), want, atol=1e-5)


def test_partial_rotation_keeps_tail() -> None:
    x = RNG.standard_normal((2, 1, 8)).astype(np.float32)
    cos, sin = ops.rope_cos_sin(np.array([3, 4]), 4, 10.0)
    for rope in (ops.rope_neox, ops.rope_norm):
        assert np.array_equal(rope(x, cos, sin)[..., 4:], x[..., 4:])


def test_llama3_frequencies_match_the_converters_rope_freqs() -> None:
    """torch inv_freq (HF llama3 rule) == base^(-2i/d) / factor_i with the contract's rope_freqs formula (§4.3)."""
    rope = RopeParams(type="llama3", theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=8192)
    d, base = 128, 500000.0
    got = tf.inv_freq(_hp(d, rope)).numpy()
    freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    wavelen = 2 * np.pi / freq
    s = (8192 / wavelen - 1.0) / (4.0 - 1.0)
    factors = np.where(wavelen < 8192 / 4.0, 1.0, np.where(wavelen > 8192 / 1.0, 8.0, 1 / ((1 - s) / 8.0 + s)))
    assert np.allclose(got, freq / factors, rtol=1e-12)
    assert factors[0] == 1.0 and factors[-1] == 8.0 and 1.0 < factors[(factors > 1) & (factors < 8)].min()


def test_attention_gqa_and_mask() -> None:
    q = RNG.standard_normal((3, 4, 8)).astype(np.float32)
    k = RNG.standard_normal((5, 2, 8)).astype(np.float32)
    v = RNG.standard_normal((5, 2, 8)).astype(np.float32)
    allowed = np.tril(np.ones((3, 5), bool), k=2)
    out = ops.attention(q, k, v, allowed).reshape(3, 4, 8)
    for i in range(3):
        for h in range(4):
            kv = h // 2                                          # query heads 0,1 -> kv 0; 2,3 -> kv 1
            s = (k[:, kv] @ q[i, h]) / np.sqrt(8)
            s[~allowed[i]] = -np.inf
            p = np.exp(s - s.max())
            assert np.allclose(out[i, h], (p / p.sum()) @ v[:, kv], atol=1e-6)


def test_block_mask_rules() -> None:
    hp = nf.DFlashHParams(n_layer=2, n_embd=64, n_ff=None, n_head=4, n_head_kv=2, head_dim=16, n_rot=16, eps=1e-6,
                          rope_base=1e4, rope_scaling_type=None, rope_scaling_factor=None, block_size=4, mask_token_id=0,
                          target_layers=[1], sample_from_anchor=True, markov_rank=0, has_confidence=False,
                          sliding_window=3, swa_layers=[True, False], causal=False)
    q, k = np.arange(5, 9), np.arange(9)
    m = nf.block_mask(hp, 0, q, k)
    assert m is not None and m[0].tolist() == [False] * 3 + [True] * 6          # q 5 sees keys 3..8 (window 3)
    assert m[3].tolist() == [False] * 6 + [True] * 3
    assert nf.block_mask(hp, 1, q, k) is None                                    # full-attention layer


# ---------------------------------------------------------------------------------------------- GGUF side
def test_dflash_hparams_from_gguf(gguf) -> None:
    hp = nf.DFlashHParams.from_gguf(gguf("dspark-qwen3"))
    assert (hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_rot) == (2, 64, 4, 2, 16, 16)
    assert hp.block_size == 7 and hp.mask_token_id == MASK and hp.target_layers == [2, 3, 5]
    assert hp.sample_from_anchor is True and hp.prediction_rows == list(range(7))
    assert hp.markov_rank == 8 and hp.has_confidence and hp.rope_base == 1e6
    assert hp.eps == pytest.approx(1e-6, rel=1e-6) and not hp.causal
    z = nf.DFlashHParams.from_gguf(gguf("dflash-zlab"))              # no sample_from_anchor key, no Markov
    assert gguf("dflash-zlab").value("dflash.sample_from_anchor") is None
    assert z.sample_from_anchor is False and z.prediction_rows == list(range(1, 16)) and z.markov_rank == 0
    swa = nf.DFlashHParams.from_gguf(gguf("dflash-zlab-swa"))
    assert swa.sliding_window == 32 and swa.swa_layers == [True, False]
    assert nf.DFlashHParams.from_gguf(gguf("dspark-specforge")).markov_rank == 32


def test_sliding_window_is_applied_on_both_sides(gguf) -> None:
    """With 40 context rows the window (32) hides keys from layer 0; both sides mask them identically."""
    g, tw = gguf("dflash-zlab-swa"), TargetWeights(TARGET)
    feats = RNG.standard_normal((40, 192)).astype(np.float32)
    (out,) = nf.dflash_forward(g, tw, [nf.BlockCase(feats, 5)])
    d = load_draft(FIXTURES / "dflash-zlab-swa")
    assert d.hp.swa == [True, False] and d.hp.sliding_window == 32 and d.hp.is_swa(0) and not d.hp.is_swa(1)
    assert np.allclose(block_forward(d, [feats], [5])[0].hidden, out.hidden, atol=1e-5)
    d = replace(d, hp=replace(d.hp, swa=[False, False]))
    assert not np.allclose(block_forward(d, [feats], [5])[0].hidden, out.hidden, atol=1e-3)


def test_forward_streams_layer_by_layer(gguf, monkeypatch: pytest.MonkeyPatch) -> None:
    g = gguf("dspark-qwen3")
    loaded: list[str] = []
    real = GGUFWeights.array

    def spy(self: GGUFWeights, name: str) -> np.ndarray:
        loaded.append(name)
        return real(self, name)

    monkeypatch.setattr(GGUFWeights, "array", spy)
    cases = [nf.BlockCase(RNG.standard_normal((t, 192)).astype(np.float32), 7) for t in (4, 9)]
    outs = nf.dflash_forward(g, TargetWeights(TARGET), cases)
    blocks = [int(n.split(".")[1]) for n in loaded if n.startswith("blk.")]
    assert blocks == sorted(blocks) and blocks.count(0) == blocks.count(1) == 11   # each layer once for both cases
    assert loaded.count("markov_w2.weight") == 1 and loaded.count("fc.weight") == 1
    assert [o.context.shape[0] for o in outs] == [4, 9] and len(outs[1].layers) == 2
    assert "markov_w1.weight" not in loaded                                        # only gathered rows of W1


def test_markov_chain_and_confidence_formulas(gguf) -> None:
    g, tw = gguf("dspark-qwen3"), TargetWeights(TARGET)
    feats = RNG.standard_normal((6, 192)).astype(np.float32)
    (out,) = nf.dflash_forward(g, tw, [nf.BlockCase(feats, 42)])
    w1, w2 = g.array("markov_w1.weight"), g.array("markov_w2.weight")
    assert out.prev_tokens[0] == 42 and np.array_equal(out.prev_tokens[1:], out.tokens[:-1])
    assert out.markov_bias is not None and np.allclose(out.markov_bias, w1[out.prev_tokens] @ w2.T, atol=1e-5)
    assert np.array_equal(out.markov_logits, out.logits + out.markov_bias)
    assert np.array_equal(out.layers[-1], out.layers[1]) and np.allclose(out.hidden, ops.rms_norm(
        out.layers[1], g.array("output_norm.weight"), 1e-6), atol=1e-6)
    assert np.array_equal(out.tokens, out.markov_logits.argmax(1))
    ell = np.concatenate([out.hidden, w1[out.prev_tokens]], 1) @ g.array("conf_proj.weight")[0] + g.array("conf_proj.bias")[0]
    assert np.allclose(out.confidence_logits, ell, atol=1e-5) and out.confidence_logits.shape == (7,)
    (forced,) = nf.dflash_forward(g, tw, [nf.BlockCase(feats, 42, out.prev_tokens)])
    assert np.array_equal(forced.markov_logits, out.markov_logits)
    other = np.array([42, 1, 2, 3, 4, 5, 6])
    assert np.array_equal(nf.dflash_forward(g, tw, [nf.BlockCase(feats, 42, other)])[0].prev_tokens, other)


def test_logits_use_the_targets_lm_head(gguf) -> None:
    g, tw = gguf("dspark-specforge"), TargetWeights(TARGET)  # a draft that stores neither embed_tokens nor lm_head
    assert not g.has("output.weight") and not g.has("token_embd.weight")
    (out,) = nf.dflash_forward(g, tw, [nf.BlockCase(RNG.standard_normal((3, 192)).astype(np.float32), 9)])
    lm = np.concatenate([w for _, w in tw.lm_head_chunks(chunk=100)])
    assert lm.shape == (1024, 64) and np.allclose(out.logits, out.hidden @ lm.T, atol=1e-5)
    assert np.array_equal(out.block_input, tw.embed_rows([9] + [MASK] * 6))
    with pytest.raises(ConvertError, match="target-model-dir"):
        nf.dflash_forward(g, None, [nf.BlockCase(RNG.standard_normal((3, 192)).astype(np.float32), 9)])


def test_reduced_vocab_maps_draft_ids(gguf) -> None:
    g = gguf("dspark-reduced")
    (out,) = nf.dflash_forward(g, TargetWeights(TARGET), [nf.BlockCase(RNG.standard_normal((5, 192)).astype(np.float32), 3)])
    assert out.logits.shape == (7, 256)
    assert np.array_equal(out.tokens, g.ints("d2t")[out.markov_logits.argmax(1)])


def test_wrong_arch_is_refused(gguf) -> None:
    with pytest.raises(ConvertError, match="expected 'dflash'"):
        nf.dflash_forward(gguf("eagle3-specforge"), None, [nf.BlockCase(np.zeros((2, 192), np.float32), 0)])
    with pytest.raises(ConvertError, match="fc.weight takes 192 features, got 10"):
        nf.dflash_forward(gguf("dflash-zlab"), None, [nf.BlockCase(np.zeros((2, 10), np.float32), 0)])


def test_eagle3_hparams_and_chain(gguf) -> None:
    g, tw = gguf("eagle3-normfc"), TargetWeights(TARGET)
    hp = Eagle3HParams.from_gguf(g)
    assert hp.norm_before_fc and not hp.norm_before_residual and hp.target_layers == [2, 3, 5]
    assert Eagle3HParams.from_gguf(gguf("eagle3-speculators")).norm_before_residual
    feats, toks = RNG.standard_normal((5, 192)).astype(np.float32), RNG.integers(0, 1024, 5)
    (out,) = eagle3_forward(g, tw, [Eagle3Case(feats, toks, steps=3)])
    assert out.prefill_hidden.shape == (5, 64) and out.step_hidden.shape == (2, 64) and out.logits.shape == (3, 256)
    assert out.prefill_logits.shape == (5, 256) and np.array_equal(out.prefill_logits[-1], out.logits[0])
    assert np.array_equal(out.fc, fc_input(g, hp, feats))
    assert np.array_equal(out.tokens, g.ints("d2t")[out.logits.argmax(1)])
    # the KV-cached chain equals one causal pass over the whole sequence (context, then the fed-back rows)
    w = g.layer_weights(0, ("attn_norm", "attn_norm_2", "attn_q", "attn_k", "attn_v", "attn_output",
                        "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"))
    h = np.concatenate([fc_input(g, hp, feats), out.prefill_hidden[-1:], out.step_hidden[:1]])
    ids = np.concatenate([toks, out.tokens[:2]])
    full = eagle3_step(w, hp, h, g.embed_tokens(tw, ids), np.arange(7), KVCache(), None)
    assert np.allclose(full[5:], out.step_hidden, atol=1e-5)
    assert np.allclose(full[:5], out.prefill_hidden, atol=1e-5)


def test_rows_of_a_quantized_tensor(gguf) -> None:
    g = gguf("dspark-specforge", "q8_0")
    assert g.qtype("blk.0.ffn_up.weight").name == "Q8_0"
    full = g.array("blk.0.ffn_up.weight")
    assert np.array_equal(g.rows("blk.0.ffn_up.weight", [5, 1]), full[[5, 1]])
    chunks = list(g.row_chunks("blk.0.ffn_up.weight", chunk=50))
    assert [a for a, _ in chunks] == [0, 50, 100] and np.array_equal(np.concatenate([c for _, c in chunks]), full)
    with pytest.raises(ConvertError, match="row 128 out of range"):
        g.rows("blk.0.ffn_up.weight", [128])


# ---------------------------------------------------------------------------------------------- target side
def test_target_sharded_and_tied(tmp_path: Path) -> None:
    a, b = TargetWeights(TARGET), TargetWeights(FIXTURES / "target-qwen3-sharded")
    assert np.array_equal(a.embed_rows([0, 1016]), b.embed_rows([0, 1016]))
    tied = tmp_path / "tied"
    tied.mkdir()
    emb = b.embed_rows(np.arange(1024))
    from safetensors.numpy import save_file
    save_file({"model.embed_tokens.weight": emb}, str(tied / "model.safetensors"))
    (tied / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))
    t = TargetWeights(tied)
    assert t.lm_head_name == "model.embed_tokens.weight"
    assert np.array_equal(np.concatenate([w for _, w in t.lm_head_chunks(chunk=300)]), emb)


# ---------------------------------------------------------------------------------------------- HF side
@pytest.mark.parametrize("layout,family,kind,sfa,layers,neox,block,own_embed", [
    ("dspark-qwen3", "dspark", "flat", True, [2, 3, 5], True, 7, True),
    ("dspark-qwen3-interleaved", "dspark", "flat", True, [2, 3, 5], False, 7, True),
    ("dflash-deepspec", "dspark", "flat", True, [2, 3, 5], True, 7, True),
    ("dflash-zlab", "dflash", "nested", False, [2, 3, 5], True, 16, False),
    ("dspark-specforge", "dspark", "nested", True, [2, 3, 5], True, 7, False),
    ("dspark-speculators", "dspark", "speculators", True, [2, 3, 5], True, 7, True),
    ("dspark-reduced", "dspark", "speculators", True, [2, 3, 5], True, 7, True),
])
def test_hf_config_normalisation(layout: str, family: str, kind: str, sfa: bool, layers: list[int], neox: bool,
                                 block: int, own_embed: bool) -> None:
    d = load_draft(FIXTURES / layout)
    assert (d.family, d.layout, d.hp.sample_from_anchor, d.hp.target_layers) == (family, kind, sfa, layers)
    assert (d.hp.neox, d.hp.block_size, d.hp.own_embed, d.hp.mask_token_id) == (neox, block, own_embed, MASK)
    assert (d.hp.head_dim, d.hp.n_head_kv, d.hp.rope.theta, d.hp.rope.type) == (16, 2, 1e6, "default")


def test_hf_eagle3_normalisation() -> None:
    sf = load_draft(FIXTURES / "eagle3-specforge")
    assert sf.family == "eagle3" and sf.prefix == "midlayer." and sf.hp.draft_vocab_size == 256
    assert sf.hp.target_layers == [2, 3, 3]                          # upstream default [2, L//2, L-3], L = 6
    assert any("eagle_config ids [1, 2, 4]" in n for n in sf.notes)
    sp = load_draft(FIXTURES / "eagle3-speculators")
    assert sp.prefix == "layers.0." and sp.hp.target_layers == [2, 3, 5] and sp.hp.norm_before_residual
    ll = load_draft(FIXTURES / "eagle3-llama")
    assert ll.hp.rope.type == "llama3" and ll.hp.head_dim == 16 and ll.hp.eps == 1e-5


def test_hf_unknown_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "hidden_size": 8,
                                                      "num_attention_heads": 2, "num_hidden_layers": 1,
                                                      "intermediate_size": 16}))
    from safetensors.numpy import save_file
    save_file({"w": np.zeros(2, np.float32)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ConvertError, match=r"'BertModel' is not a checkpoint the torch forwards read \(classes: "
                                            r"Gemma4DSparkModel, DFlash2DraftModel, Qwen3DSparkModel, .*, Eagle3DraftModel\)$"):
        load_draft(tmp_path)


# ---------------------------------------------------------------------------------------------- storage rounding
def test_round_to_storage_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    from gguf import GGMLQuantizationType as QT
    from gguf import quants

    from dspark_convert.reference import storage
    from dspark_convert.reference.storage import round_to_storage, round_values

    x = torch.tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, 1 / 3, 70000.0, -2.5e-8])
    assert round_to_storage(x, "F32") is x
    assert round_to_storage(x, "BF16").tolist()[:3] == [1.0, 1.015625, 0.333984375]   # ties to even, both ways
    f16 = round_to_storage(x, "F16")
    assert f16[3] == float("inf") and f16.tolist()[:2] == [1.00390625, 1.01171875]
    w = torch.from_numpy(RNG.standard_normal((3, 64)).astype(np.float32))
    q = round_to_storage(w, "Q8_0")
    assert np.array_equal(q.numpy(), quants.dequantize(quants.quantize(w.numpy(), QT.Q8_0), QT.Q8_0))
    assert not torch.equal(q, w) and float((q - w).abs().max()) < float(w.abs().max()) / 127
    with pytest.raises(ConvertError, match="GGML type Q9_9"):
        round_to_storage(w, "Q9_9")
    monkeypatch.setattr(storage, "_ROUND_CHUNK", 64)                # one row per chunk: the same values
    assert torch.equal(round_to_storage(w, "Q8_0"), q)
    mx = round_to_storage(w, "MXFP4")                                 # any block type gguf-py can quantize
    assert np.array_equal(mx.numpy(), quants.dequantize(quants.quantize(w.numpy(), QT.MXFP4), QT.MXFP4))
    for kind in ("F16", "BF16", "Q8_0"):                             # the same numbers without torch, and torch's casts
        assert np.array_equal(round_values(w.numpy(), kind), round_to_storage(w, kind).numpy()), kind
    assert torch.equal(round_to_storage(x, "BF16"), x.to(torch.bfloat16).float())
    assert torch.equal(round_to_storage(x, "F16"), x.to(torch.float16).float())


@pytest.mark.parametrize("layout", names(tag="rounding"))
@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_rounded_checkpoint_equals_the_gguf_bit_for_bit(gguf, layout: str, outtype: str) -> None:
    """The heart of exact mode: every draft tensor the torch side reads, rounded as its GGUF counterpart is stored,
    equals the GGUF's dequantized values exactly (row permutations of q/k aside, compared as value multisets)."""
    g = gguf(layout, outtype)
    d = load_draft(FIXTURES / layout, g)
    counterpart = torch_side(checkpoint_variant(FIXTURES / layout)).counterpart
    seen = 0
    for name in d.weights.names:
        gname = counterpart(name)
        if gname is None or not g.has(gname):
            assert name in ("d2t", "t2d") or name.endswith(("embed_tokens.weight", "lm_head.weight")), name
            continue
        ours, theirs = d.weights.get(name).numpy().reshape(g.shape(gname)), g.array(gname)
        if any(k in gname for k in ("attn_q", "attn_k")):
            ours, theirs = np.sort(ours.ravel()), np.sort(theirs.ravel())
        assert np.array_equal(ours, theirs), gname
        seen += 1
    assert seen >= 12
    assert set(d.weights.storage.values()) == {t.type_name for t in g.file.tensors if t.type_name != "I64"}
