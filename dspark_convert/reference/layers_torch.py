"""The shared torch side of the checkpoint forwards (the HF side of ``verify``): the primitives and the pre-norm
decoder block, one short function per equation, spelled with the checkpoint's tensor names
(``self_attn.q_proj.weight``, ``mlp.gate_proj.weight``, ...). Each variant's ``torch_forward`` composes these and
keeps its own steps (its RoPE as the authors wrote it, convolutions, a cached causal layer over a wider input).

Written from ``spec/checkpoints.md`` without using the numpy reference (:mod:`.layers` is its twin, written
separately) or the converter. The checkpoint is read by :mod:`.hf_draft` (weights optionally rounded the way the
GGUF stores them) and RoPE is applied the way the checkpoint was trained (rotate-half, or GPT-J interleaved pairs
when ``rope_is_neox_style`` is false; llama3 / linear scaling). The pieces:

- **primitives**: RMSNorm (:func:`rms`), RoPE (:func:`inv_freq`, :func:`apply_rope`), attention with GQA and sinks
  (:func:`attend`), the SwiGLU MLP (:func:`swiglu`) (the draft's or the target's embeddings and head, a layer's
  tensors and the d2t mapping are reads of the checkpoint: methods of :class:`.hf_draft.HFDraft`);
- **context** ``C = RMSNorm(F @ fc.T)`` (:func:`context_projection`);
- **attention**: q/k/v per head with q/k RMS norms (:func:`qk_normed_heads`), the visible-key mask
  (:func:`visible_keys`), and the block rows attending to ``[C; x]`` through ``o_proj`` (:func:`attention_block`);
- **MLP** ``x + swiglu(RMSNorm(x))`` (:func:`mlp_residual`);
- the layers, one layer's weights at a time (:func:`stream_layers`).

Only torch and the torch side's own modules: never the numpy reference (the two forwards are independent witnesses).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch

from .hf_draft import HFHParams

Weights = dict[str, torch.Tensor]


# ============================================================================================== math
def rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    """RMSNorm in float32, weight used as is."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def inv_freq(hp: HFHParams) -> torch.Tensor:
    """Rotation frequencies ``theta^(-2i/d)``, adjusted by llama3 / linear rope scaling (HF semantics)."""
    d, rope = int(hp.head_dim * hp.rope.partial), hp.rope
    f = 1.0 / (rope.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if rope.type == "linear":
        f = f / rope.factor
    elif rope.type == "llama3":
        lo, hi, old = rope.low_freq_factor, rope.high_freq_factor, rope.original_max_position_embeddings
        wavelen = 2 * math.pi / f
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, f / rope.factor, f)
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        f = torch.where(medium, (1 - smooth) * f / rope.factor + smooth * f, scaled)
    return f


def apply_rope(x: torch.Tensor, pos: torch.Tensor, freqs: torch.Tensor, neox: bool) -> torch.Tensor:
    """RoPE on ``x [heads, N, d]``: rotate-half (``neox``) or GPT-J interleaved pairs ``(2i, 2i+1)``."""
    n = 2 * freqs.shape[0]
    if n < x.shape[-1]:  # partial rotary: the first n dims rotate, the rest pass through
        return torch.cat([apply_rope(x[..., :n], pos, freqs, neox), x[..., n:]], -1)
    ang = pos.double()[:, None] * freqs[None, :]
    if neox:
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1).float(), torch.cat([ang.sin(), ang.sin()], -1).float()
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], -1) * sin
    cos, sin = ang.cos().repeat_interleave(2, -1).float(), ang.sin().repeat_interleave(2, -1).float()
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + rot * sin


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
           sinks: torch.Tensor | None = None) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` with GQA; ``q [nh, Nq, d]``, ``k/v [nkv, Nk, d]`` -> ``[Nq, nh*d]``; ``sinks
    [nh]``: one extra value-less logit per head in each softmax (gpt-oss style attention sinks)."""
    rep = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        col = sinks.reshape(-1, 1, 1).expand(s.shape[0], s.shape[1], 1)
        p = torch.softmax(torch.cat([s, col], -1), -1)[..., :-1]
    else:
        p = torch.softmax(s, -1)
    return (p @ v).transpose(0, 1).reshape(q.shape[1], -1)


def swiglu(x: torch.Tensor, L: Weights, p: str) -> torch.Tensor:
    """``down(silu(gate(x)) * up(x))``."""
    gate, up = x @ L[p + "mlp.gate_proj.weight"].T, x @ L[p + "mlp.up_proj.weight"].T
    return (torch.nn.functional.silu(gate) * up) @ L[p + "mlp.down_proj.weight"].T


#: ``rope(x [heads, N, d], positions [N])``: the RoPE a forward applies (its own pairing and frequencies)
Rope = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class HeadShape(Protocol):
    """The head counts, head size and norm epsilon of a layer (a forward's hyperparameters have them)."""

    @property
    def n_head(self) -> int: ...
    @property
    def n_head_kv(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def eps(self) -> float: ...


def context_projection(features: np.ndarray, fc: torch.Tensor, norm: torch.Tensor, eps: float) -> torch.Tensor:
    """``C = RMSNorm(F @ fc.T)``: the tapped target features ``F [T, n*Ht]`` projected to ``[T, H]``.

    Example:
        >>> context_projection(np.ones((1, 2)), torch.ones(2, 2), torch.ones(2), 0.0)
        tensor([[1., 1.]])
    """
    return rms(torch.from_numpy(np.asarray(features, dtype=np.float32)) @ fc.T, norm, eps)


def qk_normed_heads(L: Weights, p: str, x: torch.Tensor, kv: torch.Tensor,
                    hp: HeadShape) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``q = q_norm(x q_proj)``, ``k = k_norm(kv k_proj)``, ``v = kv v_proj``, split into heads and transposed to
    ``[heads, N, d]`` (``p``: the layer's name prefix)."""
    q = rms((x @ L[p + "self_attn.q_proj.weight"].T).view(x.shape[0], hp.n_head, hp.head_dim),
            L[p + "self_attn.q_norm.weight"], hp.eps)
    k = rms((kv @ L[p + "self_attn.k_proj.weight"].T).view(kv.shape[0], hp.n_head_kv, hp.head_dim),
            L[p + "self_attn.k_norm.weight"], hp.eps)
    v = (kv @ L[p + "self_attn.v_proj.weight"].T).view(kv.shape[0], hp.n_head_kv, hp.head_dim)
    return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)


def visible_keys(q_pos: torch.Tensor, k_pos: torch.Tensor, *, causal: bool = False,
                 window: int = 0) -> torch.Tensor | None:
    """``[Nq, Nk]`` True where a query sees a key: not a later one (``causal``), fewer than ``window`` positions back
    (``window`` > 0); None when every key is visible.

    Example:
        >>> visible_keys(torch.tensor([2]), torch.arange(4), causal=True, window=2).int()
        tensor([[0, 1, 1, 0]], dtype=torch.int32)
    """
    mask = torch.ones(q_pos.numel(), k_pos.numel(), dtype=torch.bool)
    if causal:
        mask &= k_pos[None, :] <= q_pos[:, None]
    if window > 0:
        mask &= (q_pos[:, None] - k_pos[None, :]) < window
    return None if bool(mask.all()) else mask


def attention_block(L: Weights, p: str, x: torch.Tensor, C: torch.Tensor, hp: HeadShape, rope: Rope,
                    mask: torch.Tensor | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The block rows ``x [B, H]`` (already normed) attend to ``[C; x]``: q/k-normed heads, ``rope`` at positions
    ``0..T+B-1`` (the queries at the last B), GQA softmax attention, then ``o_proj`` -> ``[B, H]``."""
    T = C.shape[0]
    pos = torch.arange(T + x.shape[0])
    q, k, v = qk_normed_heads(L, p, x, torch.cat([C, x]), hp)
    q, k = rope(q, pos[T:]), rope(k, pos)
    return attend(q, k, v, mask, sinks) @ L[p + "self_attn.o_proj.weight"].T


def mlp_residual(L: Weights, p: str, x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x + swiglu(RMSNorm_post_attention(x))``: the pre-norm MLP half of a block."""
    return x + swiglu(rms(x, L[p + "post_attention_layernorm.weight"], eps), L, p)


def stream_layers(n_layer: int, load: Callable[[int], Weights],
                  layer: Callable[[Weights, int, torch.Tensor, torch.Tensor], torch.Tensor],
                  x0: Sequence[torch.Tensor], Cs: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], list[list[np.ndarray]]]:
    """Every case's rows ``x0[i]`` (with its context ``Cs[i]``) through ``n_layer`` layers, streamed: layer ``il``'s
    weights ``load(il)`` are read once, applied to every case and dropped. Returns the final rows and, per case, the
    rows after each layer (as numpy, for verify's rows)."""
    xs: list[torch.Tensor] = list(x0)
    after: list[list[np.ndarray]] = [[] for _ in x0]
    for il in range(n_layer):
        L = load(il)
        for i, C in enumerate(Cs):
            xs[i] = layer(L, il, xs[i], C)
            after[i].append(xs[i].numpy())
        del L
    return xs, after
