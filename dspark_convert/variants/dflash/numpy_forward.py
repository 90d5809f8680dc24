"""A readable numpy reference forward of DSpark / DFlash drafts, run straight from a GGUF file.

Written like the equations of ``spec/checkpoints.md`` §2.4 and §3.3, one function per step. Every hyperparameter
comes from the GGUF metadata (or from tensor shapes, e.g. the Markov rank); the target's embeddings and lm_head
come from the target checkpoint when the GGUF does not carry ``token_embd`` / ``output``. Layers are streamed:
one layer's weights are dequantized, used by every block proposal (case) and dropped before the next. The DSpark
heads (the Markov chain, the confidence head) are :mod:`.heads`'s; the Gemma 4 DSpark forward takes them too.

The GGUF arch ``dflash`` implies NEOX (rotate-half) RoPE: the converter has already de-interleaved the q/k rows
of ``rope_is_neox_style: false`` checkpoints. EAGLE-3 has its own (``variants/eagle3/numpy_forward.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ... import schema as S
from ...errors import ConvertError
from ...reference.layers import attention_block, ffn_residual, layer_keys, run_blocks
from ...reference.ops import F32, CommonHParams, rms_norm
from ...reference.weights import GGUFWeights, TargetWeights
from .heads import confidence, draft_tokens


# ============================================================================================== DFlash / DSpark
@dataclass(frozen=True)
class DFlashHParams(CommonHParams):
    """Everything the DSpark/DFlash forward needs, read from the GGUF: the common keys (:class:`CommonHParams`),
    the ``dflash.*`` keys and tensor shapes."""

    block_size: int
    mask_token_id: int
    target_layers: list[int]
    sample_from_anchor: bool
    markov_rank: int
    has_confidence: bool
    sliding_window: int
    swa_layers: list[bool]
    causal: bool
    #: ``dflash.attention.value_scale`` (0: none): llama.cpp scales the attention output after ``attn_output``
    value_scale: float = 0.0

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> DFlashHParams:
        """Read the hyperparameters; ConvertError naming the key when a required one is missing."""
        arch = g.value("general.architecture")
        if arch != "dflash":
            raise ConvertError(f"{g.path}: general.architecture is {arch!r}, expected 'dflash' for a DSpark/DFlash forward")
        if int(g.value(S.HC_COUNT.format(arch="dflash"), 0) or 0) > 0:
            raise ConvertError(f"{g.path}: DeepSeek-V4 DSpark (hyper connections) is not covered by the numpy reference")
        c = CommonHParams.read(g, "dflash")
        markov = g.has("markov_w1.weight")
        sfa = g.value("dflash.sample_from_anchor")
        return cls(
            **vars(c),
            block_size=int(g.value("dflash.block_size", 16)),
            mask_token_id=int(g.need("tokenizer.ggml.mask_token_id")),
            target_layers=[int(x) for x in g.need("dflash.target_layers")],
            # absent key: the DSpark (Markov) runtime treats it as true; a plain DFlash file uses rows 1..B-1
            sample_from_anchor=bool(sfa) if sfa is not None else markov,
            markov_rank=g.shape("markov_w1.weight")[1] if markov else 0,
            has_confidence=g.has("conf_proj.weight"),
            sliding_window=int(g.value("dflash.attention.sliding_window", 0) or 0),
            swa_layers=[bool(x) for x in g.value("dflash.attention.sliding_window_pattern", [False] * c.n_layer)],
            causal=bool(g.value("dflash.attention.causal", False)),
            value_scale=float(g.value("dflash.attention.value_scale", 0.0) or 0.0),
        )

    @property
    def prediction_rows(self) -> list[int]:
        """Block rows that make predictions: all B (anchor-as-first) or rows 1..B-1 (z-lab same-position)."""
        return list(range(0 if self.sample_from_anchor else 1, self.block_size))


@dataclass
class BlockCase:
    """The inputs of one block proposal: context features ``F [T, n_t*H]`` and the anchor token at position T.

    ``prev_tokens`` (the anchor, then P-1 tokens) forces the Markov chain's inputs, e.g. to another
    implementation's choices, so that the biased logits stay comparable after a near-tie.
    """

    features: np.ndarray
    anchor: int
    prev_tokens: np.ndarray | None = None


@dataclass
class BlockOutputs:
    """Outputs of one block proposal, step by step. ``tokens`` are target ids; logits are in the draft vocabulary."""

    hparams: DFlashHParams
    context: np.ndarray                    # C [T, H], step 1
    block_input: np.ndarray                # X0 = embeddings of [a, m, ..., m] [B, H], step 2
    layers: list[np.ndarray]               # X after each layer [B, H], step 3
    hidden: np.ndarray                     # Hout [B, H], post final norm
    logits: np.ndarray                     # base logits U of the predicting rows [P, Vd]
    tokens: np.ndarray                     # chosen tokens [P] (Markov chain, or per-row argmax)
    prev_tokens: np.ndarray                # [P]: the anchor, then the previous tokens (used by Markov/confidence)
    markov_bias: np.ndarray | None = None         # W2 W1[prev] [P, Vd]
    markov_logits: np.ndarray | None = None       # U + W2 W1[prev] [P, Vd]
    confidence_logits: np.ndarray | None = None   # [P], before the sigmoid
    notes: list[str] = field(default_factory=list)


def block_forward(w: dict[str, np.ndarray], hp: DFlashHParams, il: int, x: np.ndarray, ctx: np.ndarray,
                  positions: np.ndarray) -> np.ndarray:
    """Step 3, one pre-norm Qwen3 layer: the block queries attend to ``[C; block]`` (non-causal, q/k norms, NEOX)."""
    T = ctx.shape[0]
    o = attention_block(rms_norm(x, w["attn_norm"], hp.eps), ctx, w, hp, positions,
                        block_mask(hp, il, positions[T:], positions))
    x = x + (o * F32(hp.value_scale) if hp.value_scale else o)    # src/models/dflash.cpp: ggml_scale after wo
    return ffn_residual(w, x, hp.eps)


def block_mask(hp: DFlashHParams, il: int, q_pos: np.ndarray, k_pos: np.ndarray) -> np.ndarray | None:
    """Visible keys: all of them, unless the file asks for causal attention or this layer is sliding-window."""
    return layer_keys(q_pos, k_pos, il, causal=hp.causal, window=hp.sliding_window, swa_layers=hp.swa_layers)


LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "attn_sinks")


def dflash_forward(g: GGUFWeights, target: TargetWeights | None, cases: Sequence[BlockCase], *,
                  runtime_head: bool = True) -> list[BlockOutputs]:
    """One DSpark/DFlash block proposal per case (features ``F [T, n_t*H]``, the anchor token at position T).

    The logits use the head llama.cpp runs the file with (``GGUFWeights.lm_logits``: a full-vocabulary file with
    ``token_embd`` but no ``output`` scores with ``token_embd``); ``runtime_head=False`` uses the head the draft
    was trained with (the file's ``output``, else the target's lm_head) instead.

    Every layer's weights are dequantized once and applied to every case; the lm_head is streamed once for all.

    Example:
        >>> out = dflash_forward(open_gguf("d.gguf"), TargetWeights("target"), [BlockCase(F, 42)])  # doctest: +SKIP
        >>> out[0].tokens, out[0].confidence_logits                                                     # doctest: +SKIP
    """
    hp = DFlashHParams.from_gguf(g)
    B = hp.block_size
    run = run_blocks(g, target, (c.features for c in cases), [c.anchor for c in cases], hp,  # steps 1-4
                     hp.mask_token_id, B, lambda il: g.layer_weights(il, LAYER_TENSORS),
                     lambda w, il, x, ctx: block_forward(w, hp, il, x, ctx, np.arange(ctx.shape[0] + B)))
    hiddens = run.hiddens
    rows = hp.prediction_rows
    U_all = g.lm_logits(target, np.concatenate([h[rows] for h in hiddens]), runtime=runtime_head)
    d2t = g.ints("d2t") if g.has("d2t") else None
    w2 = g.array("markov_w2.weight") if hp.markov_rank else None
    outs = []
    for i, c in enumerate(cases):
        U = U_all[i * len(rows):(i + 1) * len(rows)]
        out = BlockOutputs(hp, run.contexts[i], run.inputs[i], run.layers[i], hiddens[i], U, np.empty(0, np.int64),
                           np.empty(0, np.int64))
        out.markov_bias, out.markov_logits, out.tokens, out.prev_tokens = draft_tokens(U, g, c.anchor, d2t, w2,
                                                                                        c.prev_tokens)
        if hp.has_confidence:
            out.confidence_logits = confidence(g, hiddens[i][rows], out.prev_tokens)
        outs.append(out)
    return outs
