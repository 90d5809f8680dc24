"""A readable numpy reference forward of EAGLE-3 drafts, run straight from a GGUF file (checkpoints.md §4.4).

Hyperparameters come from the ``eagle3.*`` metadata. The GGUF arch ``eagle3`` implies interleaved-pair (ggml
NORM) RoPE: the converter permuted the q/k rows from the checkpoint's rotate-half order, so this forward rotates
adjacent pairs. ``rope_freqs.weight`` (llama3 scaling) divides the rotation frequencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConvertError
from ...reference.layers import ffn_residual, heads
from ...reference.ops import F32, CommonHParams, attention, rms_norm, rope_cos_sin, rope_norm
from ...reference.weights import GGUFWeights, TargetWeights


@dataclass(frozen=True)
class Eagle3HParams(CommonHParams):
    """EAGLE-3 hyperparameters read from the GGUF: the common keys (:class:`CommonHParams`) and ``eagle3.*``."""

    target_hidden_size: int
    target_layers: list[int]
    norm_before_residual: bool
    norm_before_fc: bool

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> Eagle3HParams:
        """Read the hyperparameters; ConvertError naming the key when a required one is missing."""
        arch = g.value("general.architecture")
        if arch != "eagle3":
            raise ConvertError(f"{g.path}: general.architecture is {arch!r}, expected 'eagle3'")
        c = CommonHParams.read(g, "eagle3")
        if c.n_layer != 1:
            raise ConvertError(f"{g.path}: eagle3.block_count is {c.n_layer}, expected 1")
        return cls(
            **vars(c),
            target_hidden_size=int(g.need("eagle3.target_hidden_size")),
            target_layers=[int(x) for x in g.need("eagle3.target_layers")],
            norm_before_residual=bool(g.value("eagle3.norm_before_residual", False)),
            norm_before_fc=bool(g.value("eagle3.norm_before_fc", False)),
        )


@dataclass
class Eagle3Case:
    """The inputs of one EAGLE-3 run: features ``[T, 3*Ht]`` and next tokens ``x_{t+1}`` ``[T]`` of the context,
    then ``steps`` chained draft tokens; ``forced_tokens`` overrides the tokens fed back (teacher forcing)."""

    features: np.ndarray
    tokens: np.ndarray
    steps: int
    forced_tokens: np.ndarray | None = None


@dataclass
class Eagle3Outputs:
    """Prefill over the context, then ``steps`` chained draft tokens (target-vocabulary ids)."""

    hparams: Eagle3HParams
    fc: np.ndarray                  # [T, H] step 1: fc over the taps (after input_norm with norm_before_fc)
    prefill_hidden: np.ndarray      # [T, H] pre-norm layer outputs at the context positions
    prefill_logits: np.ndarray      # [T, Vd] logits at every context position (the last row is step 0's)
    step_hidden: np.ndarray         # [K-1, H] pre-norm outputs of the chained steps 1..K-1
    logits: np.ndarray              # [K, Vd] draft-vocabulary logits of steps 0..K-1
    tokens: np.ndarray              # [K] chosen target ids
    notes: list[str] = field(default_factory=list)


class KVCache:
    """RoPE'd keys and values of the positions processed so far (the draft's own causal cache)."""

    def __init__(self) -> None:
        self.k: np.ndarray | None = None
        self.v: np.ndarray | None = None

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.k = k if self.k is None else np.concatenate([self.k, k])
        self.v = v if self.v is None else np.concatenate([self.v, v])
        return self.k, self.v


def fc_input(g: GGUFWeights, hp: Eagle3HParams, features: np.ndarray) -> np.ndarray:
    """Step 1: ``h = (RMSNorm_input_norm(g) if norm_before_fc else g) @ W_fc.T`` over the 3 tapped features."""
    if hp.norm_before_fc:
        features = rms_norm(features, g.array("enc.output_norm.weight"), hp.eps)
    return features @ g.array("fc.weight").T


def eagle3_step(w: dict[str, np.ndarray], hp: Eagle3HParams, h: np.ndarray, e: np.ndarray, positions: np.ndarray,
                cache: KVCache, freq_factors: np.ndarray | None) -> np.ndarray:
    """Step 2, layer 0 for new rows ``h [N, H]`` with token embeddings ``e [N, H]`` at ``positions``.

    ``z = [norm(e); norm(h)]`` feeds q/k/v; causal attention over the cache plus the new rows; the residual is
    ``h`` (or the normed ``h`` with ``norm_before_residual``). Returns the pre-norm output ``[N, H]``.
    """
    N = h.shape[0]
    hn = rms_norm(h, w["attn_norm_2"], hp.eps)
    z = np.concatenate([rms_norm(e, w["attn_norm"], hp.eps), hn], axis=1)   # embedding first
    residual = hn if hp.norm_before_residual else h
    q = heads(z, w["attn_q"], hp.n_head, hp.head_dim)
    k = heads(z, w["attn_k"], hp.n_head_kv, hp.head_dim)
    v = heads(z, w["attn_v"], hp.n_head_kv, hp.head_dim)
    cos, sin = rope_cos_sin(positions, hp.n_rot, hp.rope_base, freq_factors, hp.rope_pos_scale)
    k_all, v_all = cache.append(rope_norm(k, cos, sin), v)
    past = k_all.shape[0] - N
    allowed = np.arange(k_all.shape[0])[None, :] <= (past + np.arange(N))[:, None]   # causal
    hmid = residual + attention(rope_norm(q, cos, sin), k_all, v_all, allowed) @ w["attn_output"].T
    return ffn_residual(w, hmid, hp.eps)


EAGLE3_TENSORS = ("attn_norm", "attn_norm_2", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                  "ffn_gate", "ffn_up", "ffn_down")


def eagle3_forward(g: GGUFWeights, target: TargetWeights | None, cases: Sequence[Eagle3Case]) -> list[Eagle3Outputs]:
    """Per case: prefill ``T`` context positions, then chain ``steps`` draft tokens.

    Step s feeds back the previous pre-norm output and token (fc skipped) at the next position. Greedy draft ids
    map to target ids through ``d2t``. The layer's weights are dequantized once for every case.

    Example:
        >>> out = eagle3_forward(open_gguf("e.gguf"), None, [Eagle3Case(F, toks, steps=3)])  # doctest: +SKIP
        >>> out[0].tokens.shape                                                                # doctest: +SKIP
        (3,)
    """
    hp = Eagle3HParams.from_gguf(g)
    feats = g.feature_arrays(c.features for c in cases)
    w = g.layer_weights(0, EAGLE3_TENSORS)
    freq = g.array("rope_freqs.weight") if g.has("rope_freqs.weight") else None
    d2t = g.ints("d2t") if g.has("d2t") else None
    w_norm = g.array("output_norm.weight")
    outs = []
    for c, f in zip(cases, feats, strict=True):
        cache, T = KVCache(), f.shape[0]
        h = fc_input(g, hp, f)
        prefill = eagle3_step(w, hp, h, g.embed_tokens(target, c.tokens), np.arange(T), cache, freq)
        prefill_logits = g.lm_logits(target, rms_norm(prefill, w_norm, hp.eps))
        last, z = prefill[-1:], prefill_logits[-1]
        logits: list[np.ndarray] = []
        chosen: list[int] = []
        step_hidden: list[np.ndarray] = []
        for s in range(c.steps):
            if s > 0:                                              # feed back the pre-norm hidden and the token
                tok = chosen[-1] if c.forced_tokens is None else int(c.forced_tokens[s - 1])
                last = eagle3_step(w, hp, last, g.embed_tokens(target, [tok]), np.array([T + s - 1]), cache, freq)
                step_hidden.append(last[0])
                z = g.lm_logits(target, rms_norm(last, w_norm, hp.eps))[0]
            d = int(np.argmax(z))
            logits.append(z)
            chosen.append(d if d2t is None else int(d2t[d]))
        outs.append(Eagle3Outputs(hp, h, prefill, prefill_logits, np.array(step_hidden, dtype=F32).reshape(-1, hp.n_embd),
                                  np.array(logits), np.array(chosen, dtype=np.int64)))
    return outs
