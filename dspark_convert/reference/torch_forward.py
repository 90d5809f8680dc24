"""The shared torch primitives of the independent float32 forwards of the ORIGINAL Hugging Face folder (each
variant's ``torch_forward`` module under ``dspark_convert/variants/`` composes them into its forward).

Written from ``spec/checkpoints.md`` without using the numpy reference or the converter. The folder is read by
:mod:`.hf_draft` (any layout; weights optionally rounded the way the GGUF stores them, see
:meth:`.hf_draft.HFDraft.with_storage`), and RoPE is applied the way the checkpoint was trained (rotate-half, or
GPT-J interleaved pairs when ``rope_is_neox_style`` is false; llama3 / linear scaling). Layers are streamed: one
layer's weights are read, applied to every case, and dropped. Besides the final outputs, every intermediate
quantity ``verify`` compares is returned (context projection, each layer's output, the Markov bias term, ...).
This module and :mod:`.hf_draft` are the only ones that import torch; ``verify`` imports them lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from .hf_draft import HFDraft, HFHParams
from .storage import round_to_storage

__all__ = ["HFDraft", "apply_rope", "attend", "inv_freq", "rms", "swiglu"]

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


def token_embeddings(d: HFDraft, ids: list[int]) -> torch.Tensor:
    table, name = (d.weights, "embed_tokens.weight") if d.hp.own_embed else (d.target, d.target_embed_name())
    x = table.rows(name, ids)
    if d.mask_vector is not None:  # the learned mask vector, cast to the dtype of the table it patches (upstream:
        mask_id, vec = d.mask_vector  # the draft's own embed_tokens when it has one, else the target's embedding)
        row = vec.to(table.dtype_of(name)).to(torch.float32)[None]
        kind = table.storage.get(name)
        if kind is not None:  # rounded as the GGUF stores the patched table
            row = round_to_storage(row, kind)
        x[torch.tensor(ids) == mask_id] = row[0]
    return x


def output_logits(d: HFDraft, h: torch.Tensor, own: bool) -> torch.Tensor:
    """``h @ W_lm.T`` streamed over row chunks: the draft's lm_head (``own``) or the target's (tied: embeddings)."""
    if own:
        ck, name = d.weights, "lm_head.weight"
    else:
        ck, name = d.target, "lm_head.weight" if d.target.has("lm_head.weight") else d.target_embed_name()
    return torch.cat([h @ w.T for _, w in ck.row_chunks(name)], dim=1)


class _Used(dict[str, torch.Tensor]):
    """A layer's tensors, loaded in bulk; a lookup records the name as read by the forward (verify's tensor
    accounting counts what the forward used, not what it loaded)."""

    def __init__(self, items: dict[str, torch.Tensor], read: set[str]) -> None:
        super().__init__(items)
        self._read = read

    def __getitem__(self, name: str) -> torch.Tensor:
        self._read.add(name)
        return super().__getitem__(name)


def decoder_layer(d: HFDraft, p: str) -> Weights:
    return _Used({n: d.weights.get(n, record=False) for n in d.weights.names if n.startswith(p)}, d.weights.read)


def to_target(d: HFDraft, reduced: bool) -> Callable[[int], int]:
    """Draft id -> target id through ``d2t`` offsets (identity without a reduced vocabulary)."""
    if not (reduced and d.weights.has("d2t")):
        return int
    off = d.weights.get("d2t").long()
    return lambda i: int(i) + int(off[int(i)])


@contextmanager
def threads_for(d: HFDraft) -> Iterator[None]:
    """One intra-op thread for tiny drafts: thread-pool wake-ups cost 10x the matmuls on a loaded 2-core box."""
    old = torch.get_num_threads()
    if d.hp.n_embd * d.hp.n_ff < 1 << 20:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)
