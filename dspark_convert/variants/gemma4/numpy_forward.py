"""A numpy reference forward of Gemma4 DSpark files, run straight from the GGUF (the GGUF side of ``verify``).

Follows the decoder graph of upstream llama.cpp b11434 ``src/models/dflash.cpp`` for a file with the optional
Gemma 4 tensors, written as equations (every value from the GGUF metadata and tensors):

- **context** ``C = RMSNorm_enc(F @ fc.T)``; **block input** ``X0 = token_embd[a, m, ..., m] * embedding_scale``;
- **layer**: ``n = RMSNorm_attn(x)``; ``q = RMSNorm_q(n Wq)``; keys over ``[C; n]``: ``k = RMSNorm_k(kin Wk)`` and,
  without ``attn_v``, ``v = RMSNorm(kin Wk)`` (no weight: K used as V); RoPE NEOX on ``key_length`` dims with
  ``theta_i = pos * base^(-2i / n_rot) / rope_freqs[i]`` (proportional RoPE: ``1e30`` freezes the unrotated
  pairs); ``o = softmax(q k^T * attention.scale) v Wo``; ``x = x + RMSNorm_post_attn(o)``;
  ``f = RMSNorm_ffn(x)``; ``x = (x + RMSNorm_post_ffw(down(gelu_tanh(f Wg) * f Wu))) * layer_output_scale``;
- **head** ``U = output(RMSNorm_out(x))`` (``token_embd`` when the file has no ``output``, as the b11223+ loader
  does), the vanilla Markov chain ``z = U + W2 W1[prev]`` and the confidence logit ``w . [h; W1[prev]] + b``
  (the DSpark heads of :mod:`dspark_convert.reference.layers`).

The torch forward of the checkpoint (:mod:`.torch_forward`) is written separately, with the checkpoint's names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ... import schema as S
from ...errors import ConvertError
from ...reference.layers import BlockTrunk, feed_forward, heads, layer_keys, rotary_attention, run_blocks
from ...reference.ops import CommonHParams, gelu_tanh, rms_norm, rope_cos_sin, silu
from ...reference.weights import GGUFWeights, TargetWeights
from ..dflash.heads import confidence, draft_tokens

A = S.ARCH_DFLASH
#: per-layer tensors the forward reads (``blk.N.<name>.weight``; ``attn_v`` only when present)
LAYER = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm", "post_attention_norm",
         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm", "layer_output_scale")


@dataclass(frozen=True)
class Gemma4HParams(CommonHParams):
    """Gemma4 DSpark hyperparameters read from the GGUF: the common keys (:class:`CommonHParams`), the block
    and the Gemma 4 ones (embedding and attention scales, activation, sliding window, causal mask)."""

    block_size: int
    mask_token_id: int
    embedding_scale: float
    attention_scale: float
    activation: str
    sample_from_anchor: bool
    sliding_window: int
    swa_layers: tuple[bool, ...]
    causal: bool

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> Gemma4HParams:
        c = CommonHParams.read(g, A)
        if c.head_dim != int(g.value(S.VALUE_LENGTH.format(arch=A), c.head_dim)):
            raise ConvertError(f"{g.path}: key_length {c.head_dim} differs from value_length (the graph asserts them equal)")
        scale = float(g.value(S.ATTENTION_SCALE.format(arch=A), 0.0) or 0.0)
        return cls(
            **vars(c), block_size=int(g.value(S.DFLASH_BLOCK_SIZE, S.DFLASH_DEFAULT_BLOCK_SIZE)),
            mask_token_id=int(g.need(S.TOKENIZER_MASK_ID)),
            embedding_scale=float(g.value(S.EMBEDDING_SCALE.format(arch=A), 0.0) or 0.0),
            attention_scale=scale if scale else float(1.0 / np.sqrt(c.head_dim)),
            activation=str(g.value(S.HIDDEN_ACTIVATION.format(arch=A), "silu")),
            sample_from_anchor=bool(g.value(S.DFLASH_SAMPLE_FROM_ANCHOR, True)),
            sliding_window=int(g.value(S.DFLASH_SLIDING_WINDOW, 0) or 0),
            swa_layers=tuple(bool(x) for x in g.value(S.DFLASH_SLIDING_WINDOW_PATTERN, [False] * c.n_layer)),
            causal=bool(g.value(S.CAUSAL.format(arch=A), False)),
        )

    @property
    def prediction_rows(self) -> list[int]:
        return list(range(0 if self.sample_from_anchor else 1, self.block_size))


@dataclass
class Gemma4Outputs(BlockTrunk):
    """The block trunk (scaled embeddings as the block input; ``U`` of the predicting rows ``[P, V]``) and the
    heads: the Markov bias and biased logits, the chosen and previous tokens, the confidence logits."""

    markov_bias: np.ndarray | None
    markov_logits: np.ndarray | None
    tokens: np.ndarray             # chosen tokens [P]
    prev_tokens: np.ndarray        # [P]
    confidence_logits: np.ndarray | None


def layer(w: dict[str, np.ndarray], hp: Gemma4HParams, il: int, x: np.ndarray, ctx: np.ndarray,
          freqs: np.ndarray | None) -> np.ndarray:
    """One layer: the pre-norm block with K as V (no ``attn_v``), the file's attention scale, sandwich norms after
    the mixer and the MLP, a gated GELU and the layer output scale."""
    T, B, d = ctx.shape[0], x.shape[0], hp.head_dim
    pos = np.arange(T + B)
    n = rms_norm(x, w["attn_norm"], hp.eps)
    kin = np.concatenate([ctx, n], axis=0)
    q = rms_norm(heads(n, w["attn_q"], hp.n_head, d), w["attn_q_norm"], hp.eps)
    k_raw = heads(kin, w["attn_k"], hp.n_head_kv, d)
    v = heads(kin, w["attn_v"], hp.n_head_kv, d) if "attn_v" in w else rms_norm(k_raw, None, hp.eps)
    k = rms_norm(k_raw, w["attn_k_norm"], hp.eps)
    cos, sin = rope_cos_sin(pos, hp.n_rot, hp.rope_base, freq_factors=freqs)
    allowed = layer_keys(pos[T:], pos, il, causal=hp.causal, window=hp.sliding_window, swa_layers=hp.swa_layers)
    o = rotary_attention(q, k, v, cos, sin, allowed, w["attn_output"], scale=hp.attention_scale)
    if "post_attention_norm" in w:
        o = rms_norm(o, w["post_attention_norm"], hp.eps)
    x = x + o
    act = gelu_tanh if hp.activation in ("gelu", "gelu_pytorch_tanh") else silu
    m = feed_forward(w, rms_norm(x, w["ffn_norm"], hp.eps), act)
    if "post_ffw_norm" in w:
        m = rms_norm(m, w["post_ffw_norm"], hp.eps)
    x = x + m
    return x * w["layer_output_scale"].reshape(-1)[0] if "layer_output_scale" in w else x


def gemma4_forward(g: GGUFWeights, target: TargetWeights | None, features: Sequence[np.ndarray],
                   anchors: Sequence[int], prev_tokens: Sequence[np.ndarray | None] | None = None) -> list[Gemma4Outputs]:
    """One block proposal per (features, anchor) case; ``prev_tokens`` forces the Markov chain's inputs."""
    hp = Gemma4HParams.from_gguf(g)
    freqs = g.array("rope_freqs.weight") if g.has("rope_freqs.weight") else None
    run = run_blocks(g, target, features, anchors, hp, hp.mask_token_id, hp.block_size,
                     lambda il: g.layer_weights(il, LAYER), lambda w, il, x, ctx: layer(w, hp, il, x, ctx, freqs),
                     scale=hp.embedding_scale)
    rows = hp.prediction_rows
    w2 = g.array("markov_w2.weight") if g.has("markov_w2.weight") else None
    outs = []
    for i, a in enumerate(anchors):
        h = run.hiddens[i]
        U = g.lm_logits(target, h[rows])
        forced = None if prev_tokens is None else prev_tokens[i]
        bias, z, tokens, prev = draft_tokens(U, g, a, None, w2, forced)
        conf = confidence(g, h[rows], prev) if g.has("conf_proj.weight") else None
        outs.append(Gemma4Outputs(run.contexts[i], run.inputs[i], run.layers[i], h, U, bias, z, tokens, prev, conf))
    return outs
