"""An independent float32 torch forward of DSpark / DFlash / EAGLE-3 drafts from the ORIGINAL Hugging Face folder.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from .hf_draft import HFDraft, HFHParams, load_draft
from .storage import round_to_storage

__all__ = ["HFDraft", "TorchBlock", "TorchEagle3", "apply_rope", "block_forward", "eagle3_forward", "inv_freq",
           "load_draft", "rms"]

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


def _embed(d: HFDraft, ids: list[int]) -> torch.Tensor:
    x = d.weights.rows("embed_tokens.weight", ids) if d.hp.own_embed else d.target.rows(d.target_embed_name(), ids)
    if d.mask_vector is not None:  # MiMo: the learned mask vector, cast to the embedding's dtype as upstream does
        mask_id, vec = d.mask_vector
        name = d.target_embed_name()
        row = vec.to(d.target.dtype_of(name)).to(torch.float32)[None]
        kind = d.target.storage.get(name)
        if kind is not None:  # rounded as the GGUF stores the patched table
            row = round_to_storage(row, kind)
        x[torch.tensor(ids) == mask_id] = row[0]
    return x


def _lm(d: HFDraft, h: torch.Tensor, own: bool) -> torch.Tensor:
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


def _layer(d: HFDraft, p: str) -> Weights:
    return _Used({n: d.weights.get(n, record=False) for n in d.weights.names if n.startswith(p)}, d.weights.read)


def _to_target(d: HFDraft, reduced: bool) -> Callable[[int], int]:
    """Draft id -> target id through ``d2t`` offsets (identity without a reduced vocabulary)."""
    if not (reduced and d.weights.has("d2t")):
        return int
    off = d.weights.get("d2t").long()
    return lambda i: int(i) + int(off[int(i)])


@contextmanager
def _threads_for(d: HFDraft) -> Iterator[None]:
    """One intra-op thread for tiny drafts: thread-pool wake-ups cost 10x the matmuls on a loaded 2-core box."""
    old = torch.get_num_threads()
    if d.hp.n_embd * d.hp.n_ff < 1 << 20:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# ============================================================================================== DSpark / DFlash
@dataclass
class TorchBlock:
    """Reference outputs of one block proposal, step by step (numpy arrays; tokens are target ids)."""

    context: np.ndarray
    block_input: np.ndarray
    layers: list[np.ndarray]
    hidden: np.ndarray
    logits: np.ndarray
    tokens: np.ndarray
    prev_tokens: np.ndarray
    markov_bias: np.ndarray | None = None
    markov_logits: np.ndarray | None = None
    confidence_logits: np.ndarray | None = None


def block_layer(L: Weights, hp: HFHParams, il: int, x: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """One Qwen3 layer: the block ``x [B, H]`` attends to ``[C; block]`` (non-causal; SWA layers mask far keys)."""
    p, eps, nh, nkv, hd = f"layers.{il}.", hp.eps, hp.n_head, hp.n_head_kv, hp.head_dim
    T, B = C.shape[0], x.shape[0]
    pos = torch.arange(T + B)
    xn = rms(x, L[p + "input_layernorm.weight"], eps)
    kv = torch.cat([C, xn])
    q = rms((xn @ L[p + "self_attn.q_proj.weight"].T).view(B, nh, hd), L[p + "self_attn.q_norm.weight"], eps).transpose(0, 1)
    k = rms((kv @ L[p + "self_attn.k_proj.weight"].T).view(T + B, nkv, hd), L[p + "self_attn.k_norm.weight"], eps).transpose(0, 1)
    v = (kv @ L[p + "self_attn.v_proj.weight"].T).view(T + B, nkv, hd).transpose(0, 1)
    freqs = inv_freq(hp)
    q, k = apply_rope(q, pos[T:], freqs, hp.neox), apply_rope(k, pos, freqs, hp.neox)
    mask = (pos[T:, None] - pos[None, :]) < hp.sliding_window if hp.is_swa(il) else None
    if hp.causal:  # the block's own later positions hidden (is_causal / dflash_config.causal)
        later = pos[None, :] <= pos[T:, None]
        mask = later if mask is None else mask & later
    sinks = next((L[p + n] for n in ("self_attn.sinks", "self_attn.attention_sink_bias",
                                     "self_attn.learnable_sink_param") if p + n in L), None)
    a = attend(q, k, v, mask, sinks) @ L[p + "self_attn.o_proj.weight"].T
    x = x + (a * hp.value_scale if hp.value_scale else a)
    return x + swiglu(rms(x, L[p + "post_attention_layernorm.weight"], eps), L, p)


def markov(d: HFDraft, U: torch.Tensor, w2: torch.Tensor, anchor: int, to_target: Callable[[int], int],
           prev_tokens: np.ndarray | None) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """Greedy vanilla Markov chain: ``bias_i = W2 W1[prev_i]``, ``z_i = U_i + bias_i``, ``prev_{i+1} = argmax z_i``."""
    bias, toks, prevs, prev = [], [], [], anchor
    for i in range(U.shape[0]):
        prev = prev if prev_tokens is None else int(prev_tokens[i])
        bias.append(w2 @ d.weights.rows("markov_head.markov_w1.weight", [prev])[0])
        prevs.append(prev)
        toks.append(to_target(int((U[i] + bias[-1]).argmax())))
        prev = toks[-1]
    b = torch.stack(bias)
    return b, U + b, toks, prevs


def confidence(d: HFDraft, hidden: torch.Tensor, prevs: list[int]) -> torch.Tensor:
    """``l_i = w . [Hout_i ; W1[prev_i]] + b`` (the W1 part when the head was trained with Markov)."""
    cw, cb = d.weights.get("confidence_head.proj.weight")[0], d.weights.get("confidence_head.proj.bias")[0]
    if cw.numel() > hidden.shape[1]:
        hidden = torch.cat([hidden, d.weights.rows("markov_head.markov_w1.weight", prevs)], 1)
    return hidden @ cw + cb


@torch.no_grad()
def block_forward(d: HFDraft, features: Sequence[np.ndarray], anchors: Sequence[int],
                  prev_tokens: Sequence[np.ndarray | None] | None = None) -> list[TorchBlock]:
    """DSpark/DFlash, one block proposal per case: ``C = hidden_norm(fc(F))``; block ``[a, m, ..., m]`` attends to
    ``[C; block]`` through every layer; ``U = lm_head(norm(X))``; Markov chain; confidence head."""
    with _threads_for(d):
        return _block_forward(d, features, anchors, prev_tokens or [None] * len(anchors))


def _block_forward(d: HFDraft, features: Sequence[np.ndarray], anchors: Sequence[int],
                   prev_tokens: Sequence[np.ndarray | None]) -> list[TorchBlock]:
    hp, w = d.hp, d.weights
    fc, hn = w.get("fc.weight"), w.get("hidden_norm.weight")
    Cs = [rms(torch.from_numpy(np.asarray(f, dtype=np.float32)) @ fc.T, hn, hp.eps) for f in features]
    del fc
    xs = [_embed(d, [a] + [int(hp.mask_token_id or 0)] * (hp.block_size - 1)) for a in anchors]
    x0 = [x.numpy() for x in xs]
    layers: list[list[np.ndarray]] = [[] for _ in anchors]
    for il in range(hp.n_layer):
        L = _layer(d, f"layers.{il}.")
        for i, C in enumerate(Cs):
            xs[i] = block_layer(L, hp, il, xs[i], C)
            layers[i].append(xs[i].numpy())
        del L
    norm = w.get("norm.weight")
    hidden = [rms(x, norm, hp.eps) for x in xs]
    rows = hp.prediction_rows
    U_all = _lm(d, torch.cat([h[rows] for h in hidden]), hp.own_lm_head)
    to_target = _to_target(d, hp.draft_vocab_size < hp.vocab_size)
    w2 = w.get("markov_head.markov_w2.weight") if hp.markov_rank else None
    outs = []
    for i, a in enumerate(anchors):
        U = U_all[i * len(rows):(i + 1) * len(rows)]
        out = TorchBlock(Cs[i].numpy(), x0[i], layers[i], hidden[i].numpy(), U.numpy(), np.empty(0, np.int64),
                         np.empty(0, np.int64))
        if w2 is not None:
            bias, z, toks, prevs = markov(d, U, w2, a, to_target, prev_tokens[i])
            out.markov_bias, out.markov_logits = bias.numpy(), z.numpy()
        else:
            toks = [to_target(j) for j in U.argmax(1)]
            prevs = [a, *toks[:-1]]
        out.tokens, out.prev_tokens = np.array(toks, dtype=np.int64), np.array(prevs, dtype=np.int64)
        if hp.has_confidence:
            out.confidence_logits = confidence(d, hidden[i][rows], prevs).numpy()
        outs.append(out)
    return outs


# ============================================================================================== EAGLE-3
@dataclass
class TorchEagle3:
    """Reference outputs of an EAGLE-3 prefill and chain."""

    fc: np.ndarray
    prefill_hidden: np.ndarray
    prefill_logits: np.ndarray
    step_hidden: np.ndarray
    logits: np.ndarray
    tokens: np.ndarray


def eagle3_layer(d: HFDraft, L: Weights, h: torch.Tensor, ids: list[int]) -> torch.Tensor:
    """Layer 0 over every position so far (a full causal recompute, no cache): ``z = [norm(emb); norm(h)]``."""
    hp, p, eps = d.hp, d.prefix, d.hp.eps
    N, nh, nkv, hd = h.shape[0], hp.n_head, hp.n_head_kv, hp.head_dim
    hn = rms(h, L[p + "hidden_norm.weight"], eps)
    z = torch.cat([rms(_embed(d, ids), L[p + "input_layernorm.weight"], eps), hn], 1)
    q = (z @ L[p + "self_attn.q_proj.weight"].T).view(N, nh, hd).transpose(0, 1)
    k = (z @ L[p + "self_attn.k_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
    v = (z @ L[p + "self_attn.v_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
    pos, freqs = torch.arange(N), inv_freq(hp)
    q, k = apply_rope(q, pos, freqs, True), apply_rope(k, pos, freqs, True)
    attn = attend(q, k, v, torch.ones(N, N).tril().bool()) @ L[p + "self_attn.o_proj.weight"].T
    mid = (hn if hp.norm_before_residual else h) + attn
    return mid + swiglu(rms(mid, L[p + "post_attention_layernorm.weight"], eps), L, p)


@torch.no_grad()
def eagle3_forward(d: HFDraft, features: Sequence[np.ndarray], tokens: Sequence[np.ndarray], steps: int,
                   forced_tokens: Sequence[np.ndarray | None] | None = None) -> list[TorchEagle3]:
    """EAGLE-3 (checkpoints.md §4.4), per case: fc over the 3 taps, one Llama layer on ``[norm(emb); norm(h)]``,
    causal over the draft's own positions, logits over the draft vocab at every position, then chained steps
    feeding back the pre-norm hidden."""
    with _threads_for(d):
        forced = forced_tokens or [None] * len(features)
        return [_eagle3_case(d, f, t, steps, ft) for f, t, ft in zip(features, tokens, forced, strict=True)]


def _eagle3_case(d: HFDraft, features: np.ndarray, tokens: np.ndarray, steps: int,
                 forced: np.ndarray | None) -> TorchEagle3:
    hp, w = d.hp, d.weights
    L = _layer(d, d.prefix)
    g = torch.from_numpy(np.asarray(features, dtype=np.float32))
    if hp.norm_before_fc:
        g = rms(g, w.get("input_norm.weight"), hp.eps)
    h_in, ids = g @ w.get("fc.weight").T, [int(t) for t in tokens]
    fc = h_in.clone()
    to_target = _to_target(d, True)
    norm_w = w.get("norm.weight")
    out = eagle3_layer(d, L, h_in, ids)
    prefill, prefill_logits = out.clone(), _lm(d, rms(out, norm_w, hp.eps), True)
    logits: list[torch.Tensor] = []
    chosen: list[int] = []
    for s in range(steps):
        if s == 0:
            zs = prefill_logits[-1]
        else:
            nxt = chosen[-1] if forced is None else int(forced[s - 1])
            h_in, ids = torch.cat([h_in, out[-1:]]), ids + [nxt]
            out = eagle3_layer(d, L, h_in, ids)
            zs = _lm(d, rms(out[-1:], norm_w, hp.eps), True)[0]
        logits.append(zs)
        chosen.append(to_target(int(zs.argmax())))
    T = features.shape[0]
    return TorchEagle3(fc.numpy(), prefill.numpy(), prefill_logits.numpy(), out[T:].numpy(),
                       torch.stack(logits).numpy(), np.array(chosen, dtype=np.int64))
