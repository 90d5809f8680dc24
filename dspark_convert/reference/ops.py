"""Numpy primitives shared by the reference forwards (each variant's ``numpy_forward`` module).

RMSNorm, activations, RoPE (both pairings), attention and the gated MLP, each a few lines of float32 numpy, and the
hyperparameters every arch reads the same way (:class:`CommonHParams`). What a forward reads from the file (a
layer's weights, the features, embeddings, logits) are methods of :class:`.weights.GGUFWeights`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .weights import GGUFWeights

F32 = np.float32

def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x^2) + eps) * w`` over the last axis (Qwen3/Llama RMSNorm, weight used as is).

    Example:
        >>> rms_norm(np.array([[3.0, 4.0]], np.float32), None, 0.0).round(4)
        array([[0.8485, 1.1314]], dtype=float32)
    """
    x = x.astype(F32, copy=False)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + F32(eps))
    return y if w is None else y * w


def silu(x: np.ndarray) -> np.ndarray:
    """``x * sigmoid(x)``."""
    return x / (F32(1) + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (``gelu_pytorch_tanh``; ggml's ``gelu``).

    Example:
        >>> gelu_tanh(np.array([0.0, 1.0], np.float32)).round(4)
        array([0.    , 0.8412], dtype=float32)
    """
    return (F32(0.5) * x * (F32(1) + np.tanh(F32(np.sqrt(2 / np.pi)) * (x + F32(0.044715) * x ** 3)))).astype(F32)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax (masked entries are ``-inf``)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def rope_cos_sin(positions: np.ndarray, n_rot: int, base: float, freq_factors: np.ndarray | None = None,
                 pos_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin tables ``[N, n_rot/2]`` of ``theta_i = pos * scale * base^(-2i/n_rot) / freq_factor_i``.

    ``freq_factors`` is the GGUF ``rope_freqs.weight`` (llama3 scaling divides the frequencies by it);
    ``pos_scale`` is ``1/factor`` for linear rope scaling.

    Example:
        >>> c, s = rope_cos_sin(np.array([0, 1]), 4, 10000.0)
        >>> c.shape, float(c[0, 0]), float(s[1, 0]).__round__(4)
        ((2, 2), 1.0, 0.8415)
    """
    inv_freq = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors.astype(np.float64)
    theta = np.asarray(positions, dtype=np.float64)[:, None] * pos_scale * inv_freq[None, :]
    return np.cos(theta).astype(F32), np.sin(theta).astype(F32)


def rope_neox(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate-half RoPE on ``x [N, heads, d]``: dim ``i`` pairs with ``i + n_rot/2`` (first ``n_rot`` dims).

    Example:
        >>> c, s = rope_cos_sin(np.array([1]), 2, 10000.0)
        >>> rope_neox(np.array([[[1.0, 0.0]]], np.float32), c, s).round(4)
        array([[[0.5403, 0.8415]]], dtype=float32)
    """
    half = cos.shape[-1]
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s, rest], axis=-1)


def rope_norm(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Interleaved-pair RoPE (ggml NORM, GPT-J style): dims ``(2i, 2i+1)`` rotate together.

    Example:
        >>> c, s = rope_cos_sin(np.array([1]), 2, 10000.0)
        >>> rope_norm(np.array([[[1.0, 0.0]]], np.float32), c, s).round(4)
        array([[[0.5403, 0.8415]]], dtype=float32)
    """
    n = 2 * cos.shape[-1]
    c, s = cos[:, None, :], sin[:, None, :]
    x0, x1 = x[..., 0:n:2], x[..., 1:n:2]
    out = np.empty_like(x)
    out[..., 0:n:2] = x0 * c - x1 * s
    out[..., 1:n:2] = x0 * s + x1 * c
    out[..., n:] = x[..., n:]
    return out


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray | None = None,
              sinks: np.ndarray | None = None, scale: float | None = None) -> np.ndarray:
    """Scaled dot-product attention with GQA: ``q [Nq, nh, d]``, ``k``/``v`` ``[Nk, nkv, d]`` -> ``[Nq, nh*d]``.

    Query head ``h`` reads kv head ``h // (nh / nkv)``; ``allowed [Nq, Nk]`` masks keys (None: all visible);
    ``sinks [nh]`` (llama.cpp ``attn_sinks``) adds one value-less logit per head to each softmax; ``scale``
    multiplies the scores (None: ``1 / sqrt(d)``; a file's ``attention.scale`` otherwise).

    Example:
        >>> q = k = v = np.ones((2, 2, 4), np.float32)
        >>> attention(q, k, v).shape
        (2, 8)
    """
    nq, nh, d = q.shape
    group = nh // k.shape[1]
    kk = np.repeat(k, group, axis=1).transpose(1, 2, 0)         # [nh, d, Nk]
    vv = np.repeat(v, group, axis=1).transpose(1, 0, 2)         # [nh, Nk, d]
    scores = (q.transpose(1, 0, 2) @ kk) * F32(1.0 / np.sqrt(d) if scale is None else scale)  # [nh, Nq, Nk]
    if allowed is not None:
        scores = np.where(allowed[None], scores, F32(-np.inf))
    if sinks is not None:
        col = np.broadcast_to(sinks.astype(F32).reshape(nh, 1, 1), (nh, nq, 1))
        probs = softmax(np.concatenate([scores, col], axis=-1))[..., :-1]
    else:
        probs = softmax(scores)
    out = probs @ vv                                            # [nh, Nq, d]
    return out.transpose(1, 0, 2).reshape(nq, nh * d)


def mlp(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray,
        act: Callable[[np.ndarray], np.ndarray] = silu) -> np.ndarray:
    """Gated MLP: ``down(act(gate(x)) * up(x))`` (SwiGLU with the default SiLU)."""
    return (act(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


# ============================================================================================== hyperparameters
@dataclass(frozen=True)
class CommonHParams:
    """The hyperparameters every arch reads the same way, with the defaults llama.cpp applies to absent keys."""

    n_layer: int
    n_embd: int
    n_ff: int | None
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    eps: float
    rope_base: float
    rope_scaling_type: str | None
    rope_scaling_factor: float | None

    @property
    def rope_pos_scale(self) -> float:
        """Position multiplier of linear rope scaling (``1 / factor``); 1 otherwise."""
        return 1.0 / self.rope_scaling_factor if self.rope_scaling_type == "linear" and self.rope_scaling_factor else 1.0

    @staticmethod
    def read(g: GGUFWeights, arch: str) -> CommonHParams:
        """``{arch}.*`` block count, widths, heads, eps and rope settings (one reader for every numpy forward and
        verify; a forward's own hyperparameters extend these: ``MyHParams(**vars(CommonHParams.read(g, arch)), ...)``).

        Example:
            >>> CommonHParams.read(open_gguf("d.gguf"), "dflash").head_dim  # doctest: +SKIP
            128
        """
        n_embd, n_head = int(g.need(f"{arch}.embedding_length")), int(g.need(f"{arch}.attention.head_count"))
        head_dim = int(g.value(f"{arch}.attention.key_length", n_embd // n_head))
        ff, factor = g.value(f"{arch}.feed_forward_length"), g.value(f"{arch}.rope.scaling.factor")
        return CommonHParams(
            n_layer=int(g.need(f"{arch}.block_count")), n_embd=n_embd, n_ff=None if ff is None else int(ff),
            n_head=n_head, n_head_kv=int(g.value(f"{arch}.attention.head_count_kv", n_head)), head_dim=head_dim,
            n_rot=int(g.value(f"{arch}.rope.dimension_count", head_dim)),
            eps=float(g.need(f"{arch}.attention.layer_norm_rms_epsilon")),
            rope_base=float(g.value(f"{arch}.rope.freq_base", 10000.0)),
            rope_scaling_type=g.value(f"{arch}.rope.scaling.type"),
            rope_scaling_factor=None if factor is None else float(factor),
        )
