"""A numpy reference forward of DFlash2 drafts, run straight from a GGUF file.

Follows the graph of upstream llama.cpp b11434 ``src/models/dflash.cpp`` (``build_dflash2_conv``,
``build_dflash2_selector`` and the DFlash decoder), written as equations:

- **dynamic convolution** over the block positions ``t`` (zero left padding inside a block), per channel ``h``
  of group ``g = h // group_size``, for side ``s`` (0: before the mixer, 1: after it):
  ``y[t, h] = sum_{tap < min(K, B)} (dyn[t, s, tap, g] + base[s, tap, h]) * x[t - tap, h]`` with
  ``dyn = proj(x_in)`` reshaped ``[B, 2, K, n_groups]`` (computed once per mixer from the mixer's input);
- **layer**: ``n = attn_norm(x)``; ``a = conv0(n)``; q/k/v from ``a`` (keys / values over ``[C; a]``);
  ``o = conv1(wo(attn) [* value_scale])``; ``x += o``; ``f = ffn_norm(x)``; ``x += conv1'(ffn(conv0'(f)))``;
- **logits** ``U = output(norm(x)) * logit_scale``, soft-capped ``c * tanh(U / c)`` when ``final_logit_softcapping``;
  the embedding is multiplied by ``embedding_scale``;
- **selector**: for block position ``p >= 1``: candidates ``cand_p = top_k(U_p)``, ``gate_p = selector_hidden . h_p``
  (post-norm hidden), predecessors ``[anchor]`` at ``p = 1`` and ``cand_{p-1}`` after, and
  ``score_p[j, i] = sum_r prev[pred_j, r] gate_p[r] next[cand_p[i], r] + U_p[cand_p[i]]`` (``[top_k, top_k]``;
  position 1's single row is repeated).

The torch forward in :mod:`.torch_forward` is written separately from the checkpoint's tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ConvertError
from ...reference.layers import BlockTrunk, attention_block, feed_forward, run_blocks
from ...reference.ops import F32, rms_norm
from ...reference.weights import GGUFWeights, TargetWeights
from ..dflash.numpy_forward import DFlashHParams, block_mask


@dataclass(frozen=True)
class DFlash2HParams:
    base: DFlashHParams
    kernel: int
    group: int
    rank: int
    top_k: int
    logit_scale: float
    softcap: float
    embedding_scale: float
    value_scale: float

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> DFlash2HParams:
        if not g.has("selector_hidden.weight"):
            raise ConvertError(f"{g.path}: no selector_hidden.weight; not a DFlash2 file")
        keys = {}
        for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
            v = g.value(f"dflash.{k}")
            if not isinstance(v, int) or v <= 0:
                raise ConvertError(f"{g.path}: dflash.{k} is {v!r}, expected a positive integer")
            keys[k] = v
        return cls(DFlashHParams.from_gguf(g), keys["conv_kernel_size"], keys["conv_group_size"], keys["selector_rank"],
                   keys["selector_top_k"], float(g.value("dflash.logit_scale", 0.0) or 0.0),
                   float(g.value("dflash.final_logit_softcapping", 0.0) or 0.0),
                   float(g.value("dflash.embedding_scale", 0.0) or 0.0),
                   float(g.value("dflash.attention.value_scale", 0.0) or 0.0))


@dataclass
class DFlash2Outputs(BlockTrunk):
    """The block trunk (scaled embeddings as the block input; scaled, capped logits ``[B, V]``) and the selector's
    candidates and scores."""

    candidates: np.ndarray       # [B-1, top_k] (positions 1..B-1)
    scores: np.ndarray           # [B-1, top_k, top_k]: score[p][pred j][candidate i]


def dynamic_conv(x: np.ndarray, dyn: np.ndarray, base: np.ndarray, side: int, kernel: int, group: int) -> np.ndarray:
    """``y[t, h] = sum_tap (dyn[t, side, tap, h // group] + base[side, tap, h]) * x[t - tap, h]`` (zero padding)."""
    B, H = x.shape
    coeff = dyn.reshape(B, 2, kernel, H // group)[:, side]                       # [B, K, G]
    weight = np.repeat(coeff, group, axis=2) + base.reshape(2, kernel, H)[side][None]   # [B, K, H]
    y = np.zeros_like(x)
    for tap in range(min(kernel, B)):
        shifted = np.zeros_like(x)
        shifted[tap:] = x[:B - tap]
        y += weight[:, tap] * shifted
    return y


LAYER = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm", "ffn_norm",
         "ffn_gate", "ffn_up", "ffn_down", "attn_conv_proj", "ffn_conv_proj")
BASES = ("attn_conv_base", "ffn_conv_base")  #: stored without a ``.weight`` suffix


def _layer(w: dict[str, np.ndarray], hp: DFlash2HParams, il: int, x: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """One layer: the DFlash block with a dynamic convolution on each side of the attention and of the MLP."""
    b = hp.base
    positions = np.arange(ctx.shape[0] + x.shape[0])
    n = rms_norm(x, w["attn_norm"], b.eps)
    dyn = n @ w["attn_conv_proj"].T
    a = dynamic_conv(n, dyn, w["attn_conv_base"], 0, hp.kernel, hp.group)
    o = attention_block(a, ctx, w, b, positions, block_mask(b, il, positions[ctx.shape[0]:], positions))
    if hp.value_scale:
        o = o * F32(hp.value_scale)
    x = x + dynamic_conv(o, dyn, w["attn_conv_base"], 1, hp.kernel, hp.group)
    f = rms_norm(x, w["ffn_norm"], b.eps)
    fdyn = f @ w["ffn_conv_proj"].T
    m = feed_forward(w, dynamic_conv(f, fdyn, w["ffn_conv_base"], 0, hp.kernel, hp.group))
    return x + dynamic_conv(m, fdyn, w["ffn_conv_base"], 1, hp.kernel, hp.group)


def top_k(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first (ties: lower index first)."""
    return np.argsort(-row, kind="stable")[:k]


def selector(g: GGUFWeights, hp: DFlash2HParams, hidden: np.ndarray, U: np.ndarray, anchor: int,
             candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Candidates and pairwise transition scores for block positions 1..B-1 (``candidates`` forces the sets)."""
    gate = hidden @ g.array("selector_hidden.weight").T                          # [B, rank]
    B = hidden.shape[0]
    cands = np.stack([top_k(U[p], hp.top_k) for p in range(1, B)]) if candidates is None else candidates
    scores = np.empty((B - 1, hp.top_k, hp.top_k), np.float32)
    for p in range(1, B):
        c = cands[p - 1]
        pred_ids = [anchor] if p == 1 else list(cands[p - 2])
        pred = g.rows("selector_predecessor.weight", pred_ids) * gate[p][None]   # [n_pred, rank]
        succ = g.rows("selector_successor.weight", list(c))                      # [top_k, rank]
        s = pred @ succ.T + U[p][c][None]
        scores[p - 1] = np.repeat(s, hp.top_k, axis=0) if s.shape[0] == 1 else s
    return cands, scores


def dflash2_forward(g: GGUFWeights, target: TargetWeights | None, features: Sequence[np.ndarray],
                    anchors: Sequence[int], candidates: Sequence[np.ndarray | None] | None = None) -> list[DFlash2Outputs]:
    """One DFlash2 block proposal per (features, anchor) case."""
    hp = DFlash2HParams.from_gguf(g)
    b = hp.base

    def load(il: int) -> dict[str, np.ndarray]:
        return {**g.layer_weights(il, LAYER), **{n: g.array(f"blk.{il}.{n}") for n in BASES}}

    run = run_blocks(g, target, features, anchors, b, b.mask_token_id, b.block_size, load,
                     lambda w, il, x, ctx: _layer(w, hp, il, x, ctx), scale=hp.embedding_scale)
    outs = []
    for i, a in enumerate(anchors):
        h = run.hiddens[i]
        U = g.lm_logits(target, h)
        if hp.logit_scale:
            U = U * F32(hp.logit_scale)
        if hp.softcap > 0:
            U = (np.tanh(U / F32(hp.softcap)) * F32(hp.softcap)).astype(F32)
        forced = None if candidates is None else candidates[i]
        cands, scores = selector(g, hp, h, U, a, forced)
        outs.append(DFlash2Outputs(run.contexts[i], run.inputs[i], run.layers[i], h, U, cands, scores))
    return outs
