"""The pre-norm decoder block of the draft forwards in numpy, one short function per equation (the GGUF side).

Each variant's ``numpy_forward`` composes these into its forward and keeps its own steps (a convolution around
the mixer, sandwich norms, a cached causal layer over a wider input) in its own file. The pieces, in forward order:

- **context** ``C = RMSNorm(F @ W_fc.T)`` (:func:`context_projection`) and the **block input**
  ``X0 = embed([a, m, ..., m]) * scale`` (:func:`block_input`), then the layers, one layer's weights at a time
  (:func:`stream_layers`), and the final norm: the trunk every block forward shares (:func:`run_blocks`, with the
  forward's own layer);
- **attention**: ``q = RMSNorm_q(x Wq)``, ``k = RMSNorm_k([C; x] Wk)``, ``v = [C; x] Wv`` per head, NEOX RoPE,
  GQA softmax attention under the visible-key mask, then ``Wo`` (:func:`attention_block`, on :func:`heads`,
  :func:`rotary_attention` and :func:`visible_keys` / :func:`layer_keys`);
- **MLP** ``x + down(act(gate(n)) * up(n))``, ``n = RMSNorm_ffn(x)`` (:func:`feed_forward`, :func:`ffn_residual`);
- **results**: :class:`BlockTrunk`, a case's values up to its logits, which a forward's own result extends.

Only numpy and :mod:`.ops`: the torch side has its own twin (:mod:`.layers_torch`), never this one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ops import F32, CommonHParams, attention, mlp, rms_norm, rope_cos_sin, rope_neox, silu
from .weights import GGUFWeights, TargetWeights


@dataclass
class BlockTrunk:
    """One case of a block forward up to its logits, the values ``verify`` compares in forward order: the context
    projection ``C [T, H]``, the block input ``[B, H]``, the output of each layer ``[B, H]``, the post-norm hidden
    state ``[B, H]`` and the logits (the rows the forward scores)."""

    context: np.ndarray
    block_input: np.ndarray
    layers: list[np.ndarray]
    hidden: np.ndarray
    logits: np.ndarray


# ============================================================================================== inputs
def context_projection(features: np.ndarray, w_fc: np.ndarray, w_norm: np.ndarray, eps: float) -> np.ndarray:
    """``C = RMSNorm(F @ W_fc.T)``: the tapped target features, projected once for all layers.

    Example:
        >>> context_projection(np.ones((1, 2), np.float32), np.ones((2, 2), np.float32), None, 0.0)
        array([[1., 1.]], dtype=float32)
    """
    return rms_norm(features @ w_fc.T, w_norm, eps)


def block_input(g: GGUFWeights, target: TargetWeights | None, anchor: int, mask_id: int, block_size: int,
                scale: float = 0.0) -> np.ndarray:
    """``X0 = embed([anchor, mask, ..., mask]) * scale`` ``[B, H]`` (``scale`` 0: not scaled)."""
    x = g.embed_tokens(target, [anchor] + [mask_id] * (block_size - 1))
    return x * F32(scale) if scale else x


#: ``layer(w, il, x, ctx) -> x``: one layer of a forward, on that layer's weights
Layer = Callable[[dict[str, np.ndarray], int, np.ndarray, np.ndarray], np.ndarray]


def stream_layers(n_layer: int, load: Callable[[int], dict[str, np.ndarray]], layer: Layer,
                  x0: Sequence[np.ndarray], ctxs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Every case's rows ``x0[i]`` (with its context ``ctxs[i]``) through ``n_layer`` layers, streamed: layer
    ``il``'s weights ``load(il)`` are dequantized once, applied to every case and dropped before the next layer.
    Returns the final rows and, per case, the rows after each layer."""
    xs: list[np.ndarray] = list(x0)
    after: list[list[np.ndarray]] = [[] for _ in x0]
    for il in range(n_layer):
        w = load(il)
        for i, ctx in enumerate(ctxs):
            xs[i] = layer(w, il, xs[i], ctx)
            after[i].append(xs[i])
        del w
    return xs, after


@dataclass
class Blocks:
    """Every case of a block forward up to its final norm, per case: the context projection ``C [T, H]``, the block
    input ``[B, H]``, the output of each layer ``[B, H]`` and the post-norm hidden state ``[B, H]``."""

    contexts: list[np.ndarray]
    inputs: list[np.ndarray]
    layers: list[list[np.ndarray]]
    hiddens: list[np.ndarray]


def run_blocks(g: GGUFWeights, target: TargetWeights | None, features: Iterable[Any], anchors: Sequence[int],
               hp: CommonHParams, mask_id: int, block_size: int, load: Callable[[int], dict[str, np.ndarray]],
               layer: Layer, *, scale: float = 0.0) -> Blocks:
    """The trunk every block forward shares, one case per (features, anchor): the context ``C = RMSNorm_enc(F @
    W_fc.T)`` (:func:`context_projection`), the block input ``embed([a, m, ..., m]) * scale`` (:func:`block_input`),
    the forward's ``layer`` through ``hp.n_layer`` layers streamed by ``load`` (:func:`stream_layers`), then the
    final ``output_norm``."""
    feats = g.feature_arrays(features)
    w_fc, w_enc = g.array("fc.weight"), g.array("enc.output_norm.weight")
    ctxs = [context_projection(f, w_fc, w_enc, hp.eps) for f in feats]
    del w_fc
    x0 = [block_input(g, target, a, mask_id, block_size, scale) for a in anchors]
    xs, layers = stream_layers(hp.n_layer, load, layer, x0, ctxs)
    w_norm = g.array("output_norm.weight")
    return Blocks(ctxs, x0, layers, [rms_norm(x, w_norm, hp.eps) for x in xs])


# ============================================================================================== attention
def heads(x: np.ndarray, w: np.ndarray, n: int, d: int) -> np.ndarray:
    """``x @ w.T`` split into ``n`` heads of ``d`` dims: ``[N, n, d]``.

    Example:
        >>> heads(np.ones((3, 2), np.float32), np.ones((4, 2), np.float32), 2, 2).shape
        (3, 2, 2)
    """
    return (x @ w.T).reshape(x.shape[0], n, d)


def visible_keys(q_pos: np.ndarray, k_pos: np.ndarray, *, causal: bool = False, window: int = 0) -> np.ndarray | None:
    """Which keys each query sees ``[Nq, Nk]``: all, less the later ones (``causal``) and those ``window`` or more
    positions back (llama.cpp's sliding-window rule, ``window`` > 0); None when every key is visible.

    Example:
        >>> visible_keys(np.array([2]), np.arange(4), causal=True, window=2).astype(int)
        array([[0, 1, 1, 0]])
    """
    allowed = np.ones((q_pos.size, k_pos.size), dtype=bool)
    if causal:
        allowed &= k_pos[None, :] <= q_pos[:, None]
    if window > 0:
        allowed &= (q_pos[:, None] - k_pos[None, :]) < window
    return None if allowed.all() else allowed


def layer_keys(q_pos: np.ndarray, k_pos: np.ndarray, il: int, *, causal: bool, window: int,
               swa_layers: Sequence[bool]) -> np.ndarray | None:
    """Layer ``il``'s :func:`visible_keys`: all of them, unless attention is ``causal`` or the layer is a
    sliding-window one (``window`` > 0 and ``swa_layers[il]`` true; a layer past the pattern is full attention)."""
    swa = window > 0 and il < len(swa_layers) and swa_layers[il]
    return visible_keys(q_pos, k_pos, causal=causal, window=window if swa else 0)


def rotary_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                     allowed: np.ndarray | None, w_o: np.ndarray, *, scale: float | None = None,
                     sinks: np.ndarray | None = None) -> np.ndarray:
    """``softmax(rope(q) rope(k)^T * scale) v @ W_o.T``: NEOX RoPE with the tables of the keys' positions (the
    queries are the last ``Nq`` of them), GQA attention (:func:`.ops.attention`), then the output projection."""
    first = k.shape[0] - q.shape[0]
    q, k = rope_neox(q, cos[first:], sin[first:]), rope_neox(k, cos, sin)
    return attention(q, k, v, allowed, sinks, scale) @ w_o.T


def attention_block(x: np.ndarray, ctx: np.ndarray, w: dict[str, np.ndarray], hp: CommonHParams,
                    positions: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """The block rows ``x [B, H]`` (already normed) attend to ``[C; x]`` at ``positions`` ``[T + B]``: per-head
    q/k RMS norms, NEOX RoPE, GQA, ``attn_sinks`` when the layer has them; returns ``attn_output``'s rows ``[B, H]``."""
    kv_in = np.concatenate([ctx, x], axis=0)                     # context rows first; no input norm on C
    q = rms_norm(heads(x, w["attn_q"], hp.n_head, hp.head_dim), w["attn_q_norm"], hp.eps)
    k = rms_norm(heads(kv_in, w["attn_k"], hp.n_head_kv, hp.head_dim), w["attn_k_norm"], hp.eps)
    v = heads(kv_in, w["attn_v"], hp.n_head_kv, hp.head_dim)
    cos, sin = rope_cos_sin(positions, hp.n_rot, hp.rope_base, pos_scale=hp.rope_pos_scale)
    return rotary_attention(q, k, v, cos, sin, allowed, w["attn_output"], sinks=w.get("attn_sinks"))


# ============================================================================================== MLP
def feed_forward(w: dict[str, np.ndarray], x: np.ndarray,
                 act: Callable[[np.ndarray], np.ndarray] = silu) -> np.ndarray:
    """``ffn_down(act(ffn_gate x) * ffn_up x)`` (SwiGLU with SiLU; a gated GELU with ``act=gelu_tanh``)."""
    return mlp(x, w["ffn_gate"], w["ffn_up"], w["ffn_down"], act)


def ffn_residual(w: dict[str, np.ndarray], x: np.ndarray, eps: float) -> np.ndarray:
    """``x + feed_forward(RMSNorm_ffn(x))``: the pre-norm MLP half of a block."""
    return x + feed_forward(w, rms_norm(x, w["ffn_norm"], eps))
