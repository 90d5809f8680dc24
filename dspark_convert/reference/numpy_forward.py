"""A readable numpy reference forward of DSpark / DFlash drafts, run straight from a GGUF file.

Written like the equations of ``spec/checkpoints.md`` §2.4 and §3.3, one function per step. Every hyperparameter
comes from the GGUF metadata (or from tensor shapes, e.g. the Markov rank); the target's embeddings and lm_head
come from the target checkpoint when the GGUF does not carry ``token_embd`` / ``output``. Layers are streamed:
one layer's weights are dequantized, used and dropped before the next.

The GGUF arch ``dflash`` implies NEOX (rotate-half) RoPE: the converter has already de-interleaved the q/k rows
of ``rope_is_neox_style: false`` checkpoints. EAGLE-3 lives in :mod:`.eagle3_np`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConvertError
from .weights import GGUFWeights, TargetWeights

F32 = np.float32


# ============================================================================================== primitives
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


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function."""
    return F32(1) / (F32(1) + np.exp(-x))


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


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """Scaled dot-product attention with GQA: ``q [Nq, nh, d]``, ``k``/``v`` ``[Nk, nkv, d]`` -> ``[Nq, nh*d]``.

    Query head ``h`` reads kv head ``h // (nh / nkv)``; ``allowed [Nq, Nk]`` masks keys (None: all visible).

    Example:
        >>> q = k = v = np.ones((2, 2, 4), np.float32)
        >>> attention(q, k, v).shape
        (2, 8)
    """
    nq, nh, d = q.shape
    group = nh // k.shape[1]
    kk = np.repeat(k, group, axis=1).transpose(1, 2, 0)         # [nh, d, Nk]
    vv = np.repeat(v, group, axis=1).transpose(1, 0, 2)         # [nh, Nk, d]
    scores = (q.transpose(1, 0, 2) @ kk) * F32(1.0 / np.sqrt(d))  # [nh, Nq, Nk]
    if allowed is not None:
        scores = np.where(allowed[None], scores, F32(-np.inf))
    out = softmax(scores) @ vv                                  # [nh, Nq, d]
    return out.transpose(1, 0, 2).reshape(nq, nh * d)


def mlp(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """SiLU-gated MLP: ``down(silu(gate(x)) * up(x))``."""
    return (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


# ============================================================================================== weight helpers
def embed_tokens(g: GGUFWeights, target: TargetWeights | None, ids: np.ndarray | list[int]) -> np.ndarray:
    """Embedding rows: the GGUF ``token_embd`` when present, else the target's ``embed_tokens``."""
    if g.has("token_embd.weight"):
        return g.rows("token_embd.weight", ids)
    return _need_target(g, target, "token_embd.weight").embed_rows(ids)


def lm_logits(g: GGUFWeights, target: TargetWeights | None, h: np.ndarray) -> np.ndarray:
    """``h @ W_lm.T`` streamed over vocabulary chunks: the GGUF ``output`` when present, else the target's lm_head."""
    if g.has("output.weight"):
        n, chunks = g.shape("output.weight")[0], g.row_chunks("output.weight")
    else:
        tw = _need_target(g, target, "output.weight")
        n, chunks = tw.ckpt.shape(tw.lm_head_name)[0], tw.lm_head_chunks()
    out = np.empty((h.shape[0], n), dtype=F32)
    for a, w in chunks:
        out[:, a:a + w.shape[0]] = h @ w.T
    return out


def _need_target(g: GGUFWeights, target: TargetWeights | None, tensor: str) -> TargetWeights:
    if target is None:
        raise ConvertError(f"{g.path}: no '{tensor}' tensor; the target checkpoint (--target-model-dir) is needed")
    return target


def layer_weights(g: GGUFWeights, il: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Dequantize the listed tensors of layer ``il`` (``blk.{il}.<name>.weight``) that the file has."""
    return {n: g.array(f"blk.{il}.{n}.weight") for n in names if g.has(f"blk.{il}.{n}.weight")}


# ============================================================================================== DFlash / DSpark
@dataclass(frozen=True)
class DFlashHParams:
    """Everything the DSpark/DFlash forward needs, read from the GGUF (``dflash.*`` keys and tensor shapes)."""

    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    eps: float
    rope_base: float
    rope_pos_scale: float
    block_size: int
    mask_token_id: int
    target_layers: list[int]
    sample_from_anchor: bool
    markov_rank: int
    has_confidence: bool
    sliding_window: int
    swa_layers: list[bool]
    causal: bool

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> DFlashHParams:
        """Read the hyperparameters; ConvertError naming the key when a required one is missing."""
        arch = g.value("general.architecture")
        if arch != "dflash":
            raise ConvertError(f"{g.path}: general.architecture is {arch!r}, expected 'dflash' for a DSpark/DFlash forward")
        if (g.value("dflash.hyper_connection.count") or 0) > 0:
            raise ConvertError(f"{g.path}: DeepSeek-V4 DSpark (hyper connections) is not covered by the numpy reference")

        def need(key: str) -> Any:
            v = g.value(key)
            if v is None:
                raise ConvertError(f"{g.path}: missing metadata key '{key}'")
            return v

        n_embd, n_head = int(need("dflash.embedding_length")), int(need("dflash.attention.head_count"))
        head_dim = int(g.value("dflash.attention.key_length", n_embd // n_head))
        markov = g.has("markov_w1.weight")
        sfa = g.value("dflash.sample_from_anchor")
        n_layer = int(need("dflash.block_count"))
        scale_type = g.value("dflash.rope.scaling.type")
        return cls(
            n_layer=n_layer, n_embd=n_embd, n_head=n_head,
            n_head_kv=int(g.value("dflash.attention.head_count_kv", n_head)), head_dim=head_dim,
            n_rot=int(g.value("dflash.rope.dimension_count", head_dim)),
            eps=float(need("dflash.attention.layer_norm_rms_epsilon")),
            rope_base=float(g.value("dflash.rope.freq_base", 10000.0)),
            rope_pos_scale=1.0 / float(g.value("dflash.rope.scaling.factor", 1.0)) if scale_type == "linear" else 1.0,
            block_size=int(g.value("dflash.block_size", 16)),
            mask_token_id=int(need("tokenizer.ggml.mask_token_id")),
            target_layers=[int(x) for x in need("dflash.target_layers")],
            # absent key: the DSpark (Markov) runtime treats it as true; a plain DFlash file uses rows 1..B-1
            sample_from_anchor=bool(sfa) if sfa is not None else markov,
            markov_rank=g.shape("markov_w1.weight")[1] if markov else 0,
            has_confidence=g.has("conf_proj.weight"),
            sliding_window=int(g.value("dflash.attention.sliding_window", 0) or 0),
            swa_layers=[bool(x) for x in g.value("dflash.attention.sliding_window_pattern", [False] * n_layer)],
            causal=bool(g.value("dflash.attention.causal", False)),
        )

    @property
    def prediction_rows(self) -> list[int]:
        """Block rows that make predictions: all B (anchor-as-first) or rows 1..B-1 (z-lab same-position)."""
        return list(range(0 if self.sample_from_anchor else 1, self.block_size))


@dataclass
class BlockOutputs:
    """Outputs of one block proposal. ``tokens`` are target-vocabulary ids; logits are in the draft vocabulary."""

    hparams: DFlashHParams
    hidden: np.ndarray                     # Hout [B, H], post final norm
    logits: np.ndarray                     # base logits U of the predicting rows [P, Vd]
    tokens: np.ndarray                     # chosen tokens [P] (Markov chain, or per-row argmax)
    prev_tokens: np.ndarray                # [P]: the anchor, then the previous tokens (used by Markov/confidence)
    markov_logits: np.ndarray | None = None       # U + W2 W1[prev] [P, Vd]
    confidence_logits: np.ndarray | None = None   # [P], before the sigmoid
    notes: list[str] = field(default_factory=list)

    @property
    def confidences(self) -> np.ndarray | None:
        return None if self.confidence_logits is None else sigmoid(self.confidence_logits)


def context_projection(features: np.ndarray, w_fc: np.ndarray, w_norm: np.ndarray, eps: float) -> np.ndarray:
    """Step 1: ``C = RMSNorm_hidden_norm(F @ W_fc.T)`` — the tapped target features, projected once for all layers."""
    return rms_norm(features @ w_fc.T, w_norm, eps)


def block_forward(w: dict[str, np.ndarray], hp: DFlashHParams, il: int, x: np.ndarray, ctx: np.ndarray,
                  positions: np.ndarray) -> np.ndarray:
    """Step 3, one pre-norm Qwen3 layer: the block queries attend to ``[C; block]`` (non-causal, q/k norms, NEOX)."""
    T, B = ctx.shape[0], x.shape[0]
    xn = rms_norm(x, w["attn_norm"], hp.eps)
    kv_in = np.concatenate([ctx, xn], axis=0)                     # context rows first; no input norm on C
    q = (xn @ w["attn_q"].T).reshape(B, hp.n_head, hp.head_dim)
    k = (kv_in @ w["attn_k"].T).reshape(T + B, hp.n_head_kv, hp.head_dim)
    v = (kv_in @ w["attn_v"].T).reshape(T + B, hp.n_head_kv, hp.head_dim)
    q, k = rms_norm(q, w["attn_q_norm"], hp.eps), rms_norm(k, w["attn_k_norm"], hp.eps)
    cos, sin = rope_cos_sin(positions, hp.n_rot, hp.rope_base, pos_scale=hp.rope_pos_scale)
    q, k = rope_neox(q, cos[T:], sin[T:]), rope_neox(k, cos, sin)
    x = x + attention(q, k, v, block_mask(hp, il, positions[T:], positions)) @ w["attn_output"].T
    return x + mlp(rms_norm(x, w["ffn_norm"], hp.eps), w["ffn_gate"], w["ffn_up"], w["ffn_down"])


def block_mask(hp: DFlashHParams, il: int, q_pos: np.ndarray, k_pos: np.ndarray) -> np.ndarray | None:
    """Visible keys: all of them, unless the file asks for causal attention or this layer is sliding-window."""
    allowed = np.ones((q_pos.size, k_pos.size), dtype=bool)
    if hp.causal:
        allowed &= k_pos[None, :] <= q_pos[:, None]
    if hp.sliding_window > 0 and il < len(hp.swa_layers) and hp.swa_layers[il]:
        allowed &= (q_pos[:, None] - k_pos[None, :]) < hp.sliding_window   # llama.cpp's SWA rule
    return None if allowed.all() else allowed


def markov_chain(U: np.ndarray, g: GGUFWeights, anchor: int, d2t: np.ndarray | None,
                 prev_tokens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 5, greedy vanilla Markov chain seeded by the anchor: ``z_i = U_i + W2 W1[prev_i]``, ``x_i = argmax z_i``.

    ``prev_tokens`` (the anchor then P-1 tokens) forces the chain's inputs, e.g. to another implementation's
    choices, so that the biased logits stay comparable after a near-tie. Returns ``(z, tokens, prev)``.
    """
    w2 = g.array("markov_w2.weight")                              # [Vd, r]
    P = U.shape[0]
    z, tokens, prev = np.empty_like(U), np.empty(P, np.int64), np.empty(P, np.int64)
    p = anchor
    for i in range(P):
        prev[i] = p if prev_tokens is None or i >= len(prev_tokens) else prev_tokens[i]
        z[i] = U[i] + w2 @ g.rows("markov_w1.weight", [prev[i]])[0]
        d = int(np.argmax(z[i]))
        tokens[i] = d if d2t is None else d2t[d]
        p = tokens[i]
    return z, tokens, prev


def confidence(g: GGUFWeights, hidden: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Step 6: ``l_i = w . [Hout_i ; W1[prev_i]] + b`` (the W1 part only when the head was trained with Markov)."""
    w = g.array("conf_proj.weight").reshape(-1)
    x = hidden
    if w.size > hidden.shape[1]:
        x = np.concatenate([hidden, g.rows("markov_w1.weight", prev)], axis=1)
    b = g.array("conf_proj.bias").reshape(-1)[0] if g.has("conf_proj.bias") else F32(0)
    return x @ w + b


LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")


def dflash_forward(g: GGUFWeights, target: TargetWeights | None, features: np.ndarray, anchor: int,
                   prev_tokens: np.ndarray | None = None) -> BlockOutputs:
    """One DSpark/DFlash block proposal for context features ``F [T, n_t*H]`` and the anchor token at position T.

    Example:
        >>> out = dflash_forward(open_gguf("d.gguf"), TargetWeights("target"), F, anchor=42)  # doctest: +SKIP
        >>> out.tokens, out.confidences                                                      # doctest: +SKIP
    """
    hp = DFlashHParams.from_gguf(g)
    features = np.asarray(features, dtype=F32)
    if features.shape[1] != g.shape("fc.weight")[1]:
        raise ConvertError(f"{g.path}: fc.weight takes {g.shape('fc.weight')[1]} features, got {features.shape[1]}")
    ctx = context_projection(features, g.array("fc.weight"), g.array("enc.output_norm.weight"), hp.eps)
    T, B = ctx.shape[0], hp.block_size
    ids = [anchor] + [hp.mask_token_id] * (B - 1)                  # step 2: [a, m, ..., m]
    x = embed_tokens(g, target, ids)
    positions = np.arange(T + B)
    for il in range(hp.n_layer):                                   # stream: one layer's weights at a time
        w = layer_weights(g, il, LAYER_TENSORS)
        x = block_forward(w, hp, il, x, ctx, positions)
        del w
    hidden = rms_norm(x, g.array("output_norm.weight"), hp.eps)    # step 4
    rows = hp.prediction_rows
    U = lm_logits(g, target, hidden[rows])
    d2t = g.ints("d2t") if g.has("d2t") else None
    out = BlockOutputs(hp, hidden, U, np.empty(0, np.int64), np.empty(0, np.int64))
    if hp.markov_rank:
        out.markov_logits, out.tokens, out.prev_tokens = markov_chain(U, g, anchor, d2t, prev_tokens)
    else:                                                          # plain DFlash: every row in parallel
        d = np.argmax(U, axis=1)
        out.tokens = d if d2t is None else d2t[d]
        out.prev_tokens = np.concatenate([[anchor], out.tokens[:-1]]).astype(np.int64)
    if hp.has_confidence:
        out.confidence_logits = confidence(g, hidden[rows], out.prev_tokens)
    return out
