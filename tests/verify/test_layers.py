"""The shared layer functions of the two witnesses (``reference/layers.py`` in numpy, ``reference/layers_torch.py`` in
torch) and the DSpark heads of the numpy side (``variants/dflash/heads.py``), each against a tiny case
computed by hand.

The hand case of the attention block: one head of 2 dims, no rotary dims, identity projections and unit norm
weights; the context row ``[0, 1]`` and the block row ``[1, 0]``. RMS-normed, q = ``[√2, 0]`` and the keys are
``[0, √2]`` and ``[√2, 0]``: scores ``0`` and ``2 / √2 = √2``, so the output is ``[p, 1 - p]`` with
``p = e^√2 / (1 + e^√2) = 0.80442``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from dspark_convert.reference import layers, ops
from dspark_convert.variants.dflash import heads as dspark_heads

P = float(np.exp(np.sqrt(2)) / (1 + np.exp(np.sqrt(2))))   # 0.80442
HAND = [P, 1 - P]
SILU_1 = 1 / (1 + np.exp(-1.0))                             # 0.73106


def _HP() -> ops.CommonHParams:
    return ops.CommonHParams(n_layer=1, n_embd=2, n_ff=1, n_head=1, n_head_kv=1, head_dim=2, n_rot=0, eps=0.0,
                             rope_base=10000.0, rope_scaling_type=None, rope_scaling_factor=None)


def _w(**extra: np.ndarray) -> dict[str, np.ndarray]:
    eye, one = np.eye(2, dtype=np.float32), np.ones(2, np.float32)
    return {"attn_q": eye, "attn_k": eye, "attn_v": eye, "attn_output": eye, "attn_q_norm": one,
            "attn_k_norm": one, **extra}


# ---------------------------------------------------------------------------------------------- numpy side
def test_attention_block_hand_case() -> None:
    x, ctx = np.array([[1.0, 0.0]], np.float32), np.array([[0.0, 1.0]], np.float32)
    out = layers.attention_block(x, ctx, _w(), _HP(), np.arange(2), None)
    assert out.shape == (1, 2) and np.allclose(out, [HAND], atol=1e-6)
    hidden = layers.attention_block(x, ctx, _w(), _HP(), np.arange(2), np.array([[False, True]]))
    assert np.allclose(hidden, [[1.0, 0.0]], atol=1e-7)                 # the context key masked: v of the block row
    sunk = layers.attention_block(x, ctx, _w(attn_sinks=np.array([np.log(2.0)], np.float32)), _HP(), np.arange(2), None)
    e = np.exp(np.sqrt(2))                                               # a sink logit ln 2 adds 2 to the denominator
    assert np.allclose(sunk, [[e / (1 + e + 2), 1 / (1 + e + 2)]], atol=1e-6)


def test_rotary_attention_rotates_and_scales() -> None:
    """Position 1 of a 2-dim rotary head with base 1: a quarter-turn-ish rotation by 1 radian of both q and k."""
    q = np.array([[[1.0, 0.0]]], np.float32)                             # the query at position 1
    k = np.array([[[1.0, 0.0]], [[1.0, 0.0]]], np.float32)               # keys at positions 0 and 1
    v = np.array([[[1.0, 0.0]], [[0.0, 1.0]]], np.float32)
    cos, sin = ops.rope_cos_sin(np.arange(2), 2, 1.0)
    out = layers.rotary_attention(q, k, v, cos, sin, None, np.eye(2, dtype=np.float32), scale=1.0)
    s0, s1 = np.cos(1.0), 1.0                                            # rot(q)·k0 = cos 1, rot(q)·rot(k1) = 1
    p1 = np.exp(s1) / (np.exp(s0) + np.exp(s1))
    assert np.allclose(out, [[1 - p1, p1]], atol=1e-6)


def test_visible_keys_rules() -> None:
    q, k = np.array([3, 4]), np.arange(5)
    assert layers.visible_keys(q, k) is None
    causal = layers.visible_keys(q, k, causal=True)
    assert causal is not None and causal.astype(int).tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    both = layers.visible_keys(q, k, causal=True, window=2)
    assert both is not None and both.astype(int).tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    assert layers.visible_keys(q, k, window=10) is None                 # a window wider than the keys hides none


def test_heads_splits_the_projection() -> None:
    x = np.array([[1.0, 2.0]], np.float32)
    w = np.array([[1, 0], [0, 1], [1, 1], [1, -1]], np.float32)
    assert layers.heads(x, w, 2, 2).tolist() == [[[1.0, 2.0], [3.0, -1.0]]]


def test_feed_forward_and_residual_hand_values() -> None:
    w = {"ffn_gate": np.array([[1.0]], np.float32), "ffn_up": np.array([[1.0]], np.float32),
         "ffn_down": np.array([[1.0]], np.float32), "ffn_norm": np.array([1.0], np.float32)}
    x = np.array([[2.0]], np.float32)
    assert np.allclose(layers.feed_forward(w, x), [[2 * 2 / (1 + np.exp(-2.0))]])      # silu(2) * 2 = 3.52318
    assert np.allclose(layers.feed_forward(w, x, ops.gelu_tanh), [[2 * 1.95459769]], atol=1e-6)
    assert np.allclose(layers.ffn_residual(w, x, 0.0), [[2 + SILU_1]])                  # RMSNorm(2) = 1


def test_context_projection_and_block_input() -> None:
    f = np.array([[3.0, 4.0, 0.0]], np.float32)
    w_fc = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    assert np.allclose(layers.context_projection(f, w_fc, np.array([1.0, 2.0], np.float32), 0.0),
                       [[3 / np.sqrt(12.5), 8 / np.sqrt(12.5)]])

    class _G:
        path = "g.gguf"

        def embed_tokens(self, target: object, ids: list[int]) -> np.ndarray:
            return np.array([[float(i), 1.0] for i in ids], np.float32)

    g: Any = _G()
    assert layers.block_input(g, None, 7, 2, 3).tolist() == [[7, 1], [2, 1], [2, 1]]
    assert layers.block_input(g, None, 7, 2, 2, 0.5).tolist() == [[3.5, 0.5], [1, 0.5]]


def test_stream_layers_loads_each_layer_once() -> None:
    loaded: list[int] = []

    def load(il: int) -> dict[str, np.ndarray]:
        loaded.append(il)
        return {"b": np.array([10.0 ** il], np.float32)}

    x0 = [np.zeros(1, np.float32), np.ones(1, np.float32)]
    ctxs = [np.full(1, 100.0, np.float32), np.full(1, 200.0, np.float32)]
    xs, after = layers.stream_layers(3, load, lambda w, il, x, ctx: x + w["b"] + ctx, x0, ctxs)
    assert loaded == [0, 1, 2]
    assert [x.tolist() for x in xs] == [[411.0], [712.0]] and x0[0].tolist() == [0.0]
    assert [[a.tolist() for a in case] for case in after] == [[[101.0], [211.0], [411.0]], [[202.0], [412.0], [712.0]]]


def test_run_blocks_is_context_block_input_layers_and_final_norm() -> None:
    """The block trunk: C = RMSNorm(F @ fc.T) with the enc norm, X0 = embed([a, m, m]) * scale, the forward's layer
    per layer, then output_norm: here one layer adding the context's sum, every norm weight one."""
    arrays = {"fc.weight": np.eye(2, dtype=np.float32), "enc.output_norm.weight": np.ones(2, np.float32),
              "output_norm.weight": np.array([1.0, 2.0], np.float32)}

    class _G:
        def feature_arrays(self, features: Any) -> list[np.ndarray]:
            return [np.asarray(f, dtype=np.float32) for f in features]

        def array(self, name: str) -> np.ndarray:
            return arrays[name]

        def embed_tokens(self, target: object, ids: list[int]) -> np.ndarray:
            return np.array([[float(i), 1.0] for i in ids], np.float32)

    g: Any = _G()
    loaded: list[int] = []

    def load(il: int) -> dict[str, np.ndarray]:
        loaded.append(il)
        return {}

    hp = ops.CommonHParams(n_layer=2, n_embd=2, n_ff=1, n_head=1, n_head_kv=1, head_dim=2, n_rot=0, eps=0.0,
                           rope_base=10000.0, rope_scaling_type=None, rope_scaling_factor=None)
    run = layers.run_blocks(g, None, [[[3.0, 4.0]]], [7], hp, 2, 3, load, lambda w, il, x, ctx: x + ctx.sum(),
                            scale=0.5)
    c = np.array([[3.0, 4.0]]) / np.sqrt(12.5)
    assert np.allclose(run.contexts[0], c)
    assert run.inputs[0].tolist() == [[3.5, 0.5], [1.0, 0.5], [1.0, 0.5]] and loaded == [0, 1]
    x2 = np.array(run.inputs[0]) + 2 * c.sum()
    assert np.allclose(run.layers[0][1], x2)
    assert np.allclose(run.hiddens[0], x2 / np.sqrt(np.mean(x2 * x2, axis=1, keepdims=True)) * [1.0, 2.0])


def test_markov_chain_and_confidence_hand_case() -> None:
    w1 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)    # rank 2, vocabulary 3

    class _G:
        path = "g.gguf"

        def rows(self, name: str, ids: Any) -> np.ndarray:
            assert name == "markov_w1.weight"
            return w1[np.asarray(ids, dtype=np.int64)]

        def array(self, name: str) -> np.ndarray:
            return {"conf_proj.weight": np.array([[1.0, 0.0, 2.0, 3.0]], np.float32),
                    "conf_proj.bias": np.array([0.5], np.float32)}[name]

        def has(self, name: str) -> bool:
            return name == "conf_proj.bias"

    g: Any = _G()
    U = np.zeros((2, 3), np.float32)
    w2 = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]], np.float32)    # W2 W1[0] = [0, 5, 0]: 0 -> 1 -> 2
    bias, z, tokens, prev = dspark_heads.markov_chain(U, w2, g, 0, None)
    assert prev.tolist() == [0, 1] and tokens.tolist() == [1, 2]
    assert bias.tolist() == [[0, 5, 0], [0, 0, 5]] and np.array_equal(z, U + bias)
    _, _, mapped, fed = dspark_heads.markov_chain(U, w2, g, 0, np.array([2, 0, 1]))
    assert mapped.tolist() == [0, 0] and fed.tolist() == [0, 0]          # d2t maps draft 1 to target 0, fed back
    hidden = np.array([[1.0, 1.0], [2.0, 0.0]], np.float32)
    # [h; W1[prev]] . [1, 0, 2, 3] + 0.5: [1, 1, 1, 0] -> 3.5, [2, 0, 0, 1] -> 5.5
    assert dspark_heads.confidence(g, hidden, prev).tolist() == [3.5, 5.5]


def test_ops_attention_scale_and_gelu() -> None:
    q = np.array([[[1.0, 0.0]]], np.float32)
    k = np.array([[[1.0, 0.0]], [[0.0, 0.0]]], np.float32)
    v = np.array([[[1.0, 0.0]], [[0.0, 1.0]]], np.float32)
    e = np.exp(1.0)
    assert np.allclose(ops.attention(q, k, v, scale=1.0), [[e / (e + 1), 1 / (e + 1)]])
    e2 = np.exp(1 / np.sqrt(2))
    assert np.allclose(ops.attention(q, k, v), [[e2 / (e2 + 1), 1 / (e2 + 1)]])           # default 1/sqrt(d)
    assert np.allclose(ops.gelu_tanh(np.array([0.0, 1.0, -1.0], np.float32)), [0.0, 0.841192, -0.158808], atol=1e-6)


# ---------------------------------------------------------------------------------------------- torch side
torch = pytest.importorskip("torch", reason="the torch side needs torch (torch extra)")
from dspark_convert.reference import layers_torch as lt  # noqa: E402


@dataclass(frozen=True)
class _Heads:
    """A :class:`~dspark_convert.reference.layers_torch.HeadShape` in plain numbers (a forward's own record)."""

    n_head: int
    n_head_kv: int
    head_dim: int
    eps: float


def _L(p: str = "") -> dict[str, Any]:
    eye, one = torch.eye(2), torch.ones(2)
    return {p + "self_attn.q_proj.weight": eye, p + "self_attn.k_proj.weight": eye, p + "self_attn.v_proj.weight": eye,
            p + "self_attn.o_proj.weight": eye, p + "self_attn.q_norm.weight": one, p + "self_attn.k_norm.weight": one,
            p + "post_attention_layernorm.weight": torch.ones(1), p + "mlp.gate_proj.weight": torch.ones(1, 1),
            p + "mlp.up_proj.weight": torch.ones(1, 1), p + "mlp.down_proj.weight": torch.ones(1, 1)}


def test_torch_attention_block_hand_case() -> None:
    x, C = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    hp = _Heads(1, 1, 2, 0.0)
    seen: list[list[int]] = []

    def no_rope(t: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        seen.append(pos.tolist())
        return t

    out = lt.attention_block(_L("layers.0."), "layers.0.", x, C, hp, no_rope, None)
    assert torch.allclose(out, torch.tensor([HAND]), atol=1e-6)
    assert seen == [[1], [0, 1]]                                         # queries at the block rows, keys at all
    masked = lt.attention_block(_L(), "", x, C, hp, no_rope, torch.tensor([[False, True]]))
    assert torch.allclose(masked, torch.tensor([[1.0, 0.0]]))
    q, k, v = lt.qk_normed_heads(_L(), "", x, torch.cat([C, x]), hp)
    assert q.shape == (1, 1, 2) and k.shape == v.shape == (1, 2, 2)
    assert torch.allclose(k[0], torch.tensor([[0.0, 2 ** 0.5], [2 ** 0.5, 0.0]]))


def test_torch_visible_keys_rules() -> None:
    q, k = torch.tensor([3, 4]), torch.arange(5)
    assert lt.visible_keys(q, k) is None and lt.visible_keys(q, k, window=10) is None
    both = lt.visible_keys(q, k, causal=True, window=2)
    assert both is not None and both.int().tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]


def test_torch_mlp_residual_context_and_streaming() -> None:
    assert torch.allclose(lt.mlp_residual(_L(), "", torch.tensor([[2.0]]), 0.0), torch.tensor([[2 + SILU_1]], dtype=torch.float32))
    C = lt.context_projection(np.array([[3.0, 4.0, 0.0]]), torch.tensor([[1.0, 0, 0], [0, 1, 0]]),
                              torch.tensor([1.0, 2.0]), 0.0)
    assert torch.allclose(C, torch.tensor([[3 / 12.5 ** 0.5, 8 / 12.5 ** 0.5]]))
    loaded: list[int] = []

    def load(il: int) -> dict[str, torch.Tensor]:
        loaded.append(il)
        return {"b": torch.tensor([10.0 ** il])}

    xs, after = lt.stream_layers(2, load, lambda L, il, x, c: x + L["b"] + c, [torch.zeros(1)],
                                 [torch.full((1,), 100.0)])
    assert loaded == [0, 1] and xs[0].tolist() == [211.0]
    assert [a.tolist() for a in after[0]] == [[101.0], [211.0]]
