"""The torch side of the ``dflash`` variant (the contract of :mod:`dspark_convert.roles.proof`): how a DSpark /
DFlash / Muse-Glimmer Hugging Face folder is read (:func:`open`, :func:`read_config`), the GGUF tensor each of its
tensors becomes (:func:`counterpart`) and its block forward (:func:`forward`, :func:`block_forward`) on the shared
primitives of ``reference.layers_torch``. Written from ``spec/checkpoints.md``; the class lists are the torch
side's own (it never asks the converter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ... import schema as S
from ...errors import ConvertError, clip_value
from ...hf.checkpoint import load_json
from ...hf.values import as_float, as_u32
from ...reference.hf_draft import HFDraft, HFHParams, TorchCheckpoint, open_draft
from ...reference.layers_torch import (
    Weights,
    apply_rope,
    attention_block,
    context_projection,
    inv_freq,
    mlp_residual,
    rms,
    stream_layers,
    visible_keys,
)
from ...reference.storage import gguf_counterpart
from ...roles.proof import Inputs
from .mask_embedding import MASK_FILE, read_mask_embedding

DSPARK_ARCHS = ("Qwen3DSparkModel", "DSparkDraftModel", "DSparkSpeculator", "Lfm2DSparkDraftModel")
DFLASH_ARCHS = ("DFlashDraftModel", "DFlashSpeculator")
#: Muse-Glimmer assistants: a DFlash block draft with its own names for the context projection and its norm
MUSE_ARCHS = ("MuseGlimmerAssistantModel",)
MUSE_NAMES = {"encoder.fc.weight": "fc.weight", "encoder.output_norm_enc.weight": "hidden_norm.weight"}
ARCHITECTURES = DSPARK_ARCHS + DFLASH_ARCHS + MUSE_ARCHS


def open(hf_dir: Path, target_dir: Path | None, storage: Mapping[str, str] | None) -> HFDraft[BlockHFHParams]:
    """The checkpoint (its weights rounded as ``storage`` says) and the target's weights; a MiMo-style draft's
    learned mask vector (``mask_embedding.pt``) replaces the mask token's embedding row."""
    d = open_draft(hf_dir, Path(str(target_dir)), read_config, storage)
    if (d.path / MASK_FILE).is_file():
        mask_id, vec = read_mask_embedding(d.path / MASK_FILE)
        d.mask_vector = (mask_id, torch.from_numpy(vec))
        d.notes.append(f"{MASK_FILE}: row {mask_id} of the target's embedding replaced by the draft's mask vector")
    return d


#: the DFlash block draft's own globals over the backbone's (this side's own spelling, for the storage rounding only):
#: the context projection and its norm, the Markov head, the confidence head; the lineage's variants take them too
BLOCK_GLOBALS = {
    "fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight",
    "markov_head.markov_w1.weight": "markov_w1.weight", "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight", "confidence_head.proj.bias": "conf_proj.bias",
}


def counterpart(name: str) -> str | None:
    """The GGUF tensor that stores checkpoint tensor ``name`` (the backbone's table with :data:`BLOCK_GLOBALS`)."""
    return gguf_counterpart(name, top=BLOCK_GLOBALS)


def forward(d: HFDraft[BlockHFHParams], inputs: Inputs, anchors: list[int],
            forced: list[TorchBlock] | None) -> list[TorchBlock]:
    """:func:`block_forward` on the cases (``forced``: the Markov chain follows those results' previous tokens)."""
    return block_forward(d, inputs.feats, anchors, None if forced is None else [r.prev_tokens for r in forced])


class DraftFolder:
    """A block-draft folder as a torch side reads it with the checkpoint's own names (the DFlash2 and Gemma4 DSpark
    forwards): ``cfg`` (its ``config.json``), ``dc`` (the config's ``dflash_config``; {} without one), ``w`` (its
    weights, rounded as ``storage`` says: checkpoint name -> GGML type) and ``t`` (the target's weights); ``draft``
    and ``target`` are the two folders; ``family`` / ``layout`` / ``notes`` are the report's."""

    family = ""
    layout = ""

    def __init__(self, draft: Path, target: Path, storage: Mapping[str, str] | None = None) -> None:
        self.where = f"{draft / 'config.json'}"
        self.cfg: dict[str, Any] = load_json(draft / "config.json")
        self.dc: dict[str, Any] = self.cfg.get("dflash_config") or {}
        if not isinstance(self.dc, dict):
            raise ConvertError(f"{self.where}: key 'dflash_config' is {clip_value(self.dc)}, expected a JSON object")
        self.w = TorchCheckpoint(draft, storage)
        self.t = TorchCheckpoint(target)
        self.draft, self.target = draft, target
        self.notes: list[str] = []

    def setting(self, key: str, default: Any = None) -> Any:
        """``key`` of ``dflash_config``, else of the config (``default`` when neither holds it)."""
        return self.dc[key] if key in self.dc else self.cfg.get(key, default)


@dataclass(frozen=True)
class BlockHFHParams(HFHParams):
    """A block draft's hyperparameters: the common ones plus the DSpark / DFlash fields of its config."""

    own_lm_head: bool = False            # lm_head from the draft
    block_size: int = 0
    taps: list[int] = field(default_factory=list)
    mask_token_id: int | None = None
    markov_rank: int = 0
    has_confidence: bool = False
    sample_from_anchor: bool = False
    neox: bool = True
    swa: list[bool] = field(default_factory=list)
    sliding_window: int = 0
    causal: bool = False                 # is_causal, else dflash_config.causal
    value_scale: float = 0.0             # dflash_config.attention_value_scale (MiMo): wo(attn) * it

    def is_swa(self, il: int) -> bool:
        """Whether layer ``il`` is a sliding-window layer."""
        return bool(self.sliding_window) and il < len(self.swa) and self.swa[il]

    @property
    def prediction_rows(self) -> list[int]:
        """Block rows that predict: all B (anchor-as-first) or rows 1..B-1 (same-position)."""
        return list(range(0 if self.sample_from_anchor else 1, self.block_size))


def read_config(folder: Path, arch: str, raw: dict[str, Any], c: dict[str, Any], w: TorchCheckpoint,
                tcfg: dict[str, Any], common: dict[str, Any], notes: list[str]) -> tuple[str, str, str, BlockHFHParams]:
    """A block draft's config in any layout (flat DeepSpec, nested ``dflash_config``, speculators)."""
    where = f"{folder / 'config.json'}"
    nested = raw.get("dflash_config") or {}
    if not isinstance(nested, dict):
        raise ConvertError(f"{where}: key 'dflash_config' is {clip_value(nested)}, expected a JSON object")
    speculators = "transformer_layer_config" in raw or "aux_hidden_state_layer_ids" in raw
    if arch in MUSE_ARCHS:
        return _muse_config(raw, c, w, common, where)
    family = "dflash" if arch in DFLASH_ARCHS else "dspark"
    n_layer = common["n_layer"]
    taps: list[int]
    if speculators:                             # already input-of-layer ids
        taps = list(raw.get("aux_hidden_state_layer_ids") or [])
        target_layers, mask = list(taps), raw.get("mask_token_id")
    else:
        ids = nested.get("target_layer_ids", raw.get("target_layer_ids"))
        if ids is None and "num_target_layers" in raw:             # z-lab build_target_layer_ids
            lt = as_u32(raw["num_target_layers"], "num_target_layers", where)
            ids = [round(1 + i * (lt - 4) / (n_layer - 1)) for i in range(n_layer)] if n_layer > 1 else [lt // 2]
        taps = list(ids or [])
        target_layers = [int(t) + 1 for t in taps]                 # output-of-layer -> input-of-layer
        mask = nested.get("mask_token_id", raw.get("mask_token_id"))
    head_type = nested.get("markov_head_type", raw.get("markov_head_type", "vanilla"))
    if w.has("markov_head.markov_w1.weight") and head_type != "vanilla":
        raise ConvertError(f"{folder}/config.json: markov_head_type {head_type!r}: only 'vanilla' is supported")
    if "sample_from_anchor" in raw:
        sfa = bool(raw["sample_from_anchor"])
    else:  # DFlash: same-position; DSpark anchor-as-first, except keyless speculators exports (gguf-contract §3.3)
        sfa = family == "dspark" and not speculators
    # rotate-half unless a DSpark config says otherwise; z-lab's DFlashDraftModel always uses rotate_half
    neox = True if arch == "DFlashDraftModel" else bool(c.get("rope_is_neox_style", c.get("is_neox_style", True)))
    use_swa = bool(nested.get("use_swa"))     # MiMo-style: every layer sliding, window from dflash_config
    window = (nested.get("swa_window_size") or c.get("sliding_window")) if (c.get("use_sliding_window") or use_swa) \
        else None
    # Qwen3Config derives missing layer_types: sliding from layer max_window_layers (default 28) on
    layer_types = ["sliding_attention"] * n_layer if use_swa else c.get("layer_types") or [
        "sliding_attention" if window and i >= int(c.get("max_window_layers", 28)) else "full_attention"
        for i in range(n_layer)]
    causal = c.get("is_causal")
    causal = nested.get("causal") if causal is None else causal
    draft_vocab = int(c.get("draft_vocab_size") or common["vocab_size"])
    reduced = draft_vocab < common["vocab_size"]
    # the draft runs with the embed_tokens / lm_head it stores (DeepSpec's copies of the target's); upstream b11434
    # keeps a full-vocab DSpark's embed_tokens, and our default keeps its lm_head too on an untied target
    own = True
    if family == "dspark" and not reduced and w.has("embed_tokens.weight") and not w.has("lm_head.weight"):
        notes.append("full-vocab DSpark without lm_head: the target's head scores the draft")
    hp = BlockHFHParams(
        **common, draft_vocab_size=draft_vocab, target_layers=target_layers,
        own_embed=own and w.has("embed_tokens.weight") and raw.get("has_embed_tokens") is not False,
        own_lm_head=own and w.has("lm_head.weight"),
        block_size=bounded_block_size(raw.get("block_size") or nested.get("block_size") or 16, where), taps=taps,
        mask_token_id=None if mask is None else as_u32(mask, "mask_token_id", where),
        markov_rank=w.shape("markov_head.markov_w1.weight")[1] if w.has("markov_head.markov_w1.weight") else 0,
        has_confidence=w.has("confidence_head.proj.weight"), sample_from_anchor=sfa, neox=neox,
        swa=[bool(window) and t == "sliding_attention" for t in layer_types] or [False] * n_layer,
        sliding_window=as_u32(window or 0, "sliding_window", where), causal=bool(causal),
        value_scale=as_float(nested.get("attention_value_scale") or 0.0, "dflash_config.attention_value_scale", where),
    )
    layout = "speculators" if speculators else ("nested" if nested else "flat")
    return family, layout, "", hp


def bounded_block_size(value: Any, where: str, key: str = "block_size") -> int:
    """The block size a config gives under ``key``, in [1, ``MAX_BLOCK_SIZE``] (the forward allocates the block's
    rows by it)."""
    block = as_u32(value, key, where)
    if not 1 <= block <= S.MAX_BLOCK_SIZE:
        raise ConvertError(f"{where}: key '{key}' is {block}, expected an integer in [1, {S.MAX_BLOCK_SIZE}]")
    return block


def _muse_config(raw: dict[str, Any], c: dict[str, Any], w: TorchCheckpoint,
                 common: dict[str, Any], where: str) -> tuple[str, str, str, BlockHFHParams]:
    """A Muse-Glimmer assistant (transformers' ``MuseGlimmerAssistantModel``): top-level block size, output-of-layer
    target ids, mask id; sliding layers from ``layer_types`` with ``sliding_window``; always bidirectional (its
    attention is non-causal whatever ``is_causal`` says, as is llama.cpp's ``dflash`` graph without the key);
    rotate-half RoPE; same-position prediction; the target's embedding and head."""
    w.rename(MUSE_NAMES)
    n_layer = common["n_layer"]
    types = c.get("layer_types") or ["full_attention"] * n_layer
    window = c.get("sliding_window") if c.get("layer_types") else None
    ids = [as_u32(t, "target_layer_ids", where) for t in c.get("target_layer_ids") or []]
    mask = c.get("mask_token_id")
    hp = BlockHFHParams(
        **common, draft_vocab_size=common["vocab_size"], target_layers=[i + 1 for i in ids], own_embed=False,
        own_lm_head=False, block_size=bounded_block_size(c.get("block_size") or 16, where), taps=ids,
        mask_token_id=None if mask is None else as_u32(mask, "mask_token_id", where), sample_from_anchor=False,
        neox=True, swa=[bool(window) and t == "sliding_attention" for t in types],
        sliding_window=as_u32(window or 0, "sliding_window", where),
        causal=False)
    return "muse_glimmer", "flat", "", hp


# ============================================================================================== DSpark / DFlash
@dataclass
class TorchTrunk:
    """One case of a block forward on the checkpoint up to its logits, as numpy arrays in forward order (the values
    ``verify`` compares with the GGUF side's): the context projection ``C [T, H]``, the block input ``[B, H]``, the
    output of each layer ``[B, H]``, the post-norm hidden state ``[B, H]`` and the logits. Each block forward's own
    result (DFlash / DSpark, DFlash2, Gemma4 DSpark) extends it."""

    context: np.ndarray
    block_input: np.ndarray
    layers: list[np.ndarray]
    hidden: np.ndarray
    logits: np.ndarray


@dataclass
class TorchBlock(TorchTrunk):
    """Reference outputs of one block proposal, step by step (numpy arrays; tokens are target ids)."""

    tokens: np.ndarray
    prev_tokens: np.ndarray
    markov_bias: np.ndarray | None = None
    markov_logits: np.ndarray | None = None
    confidence_logits: np.ndarray | None = None


def block_layer(L: Weights, hp: BlockHFHParams, il: int, x: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """One Qwen3 layer: the block ``x [B, H]`` attends to ``[C; block]`` (non-causal unless the config says causal;
    SWA layers mask far keys)."""
    p, T, freqs = f"layers.{il}.", C.shape[0], inv_freq(hp)
    pos = torch.arange(T + x.shape[0])
    mask = visible_keys(pos[T:], pos, causal=hp.causal, window=hp.sliding_window if hp.is_swa(il) else 0)
    sinks = next((L[p + n] for n in ("self_attn.sinks", "self_attn.attention_sink_bias",
                                     "self_attn.learnable_sink_param") if p + n in L), None)
    o = attention_block(L, p, rms(x, L[p + "input_layernorm.weight"], hp.eps), C, hp,
                        lambda t, at: apply_rope(t, at, freqs, hp.neox), mask, sinks)
    x = x + (o * hp.value_scale if hp.value_scale else o)
    return mlp_residual(L, p, x, hp.eps)


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
    with d.threads():
        return _block_forward(d, features, anchors, prev_tokens or [None] * len(anchors))


def _block_forward(d: HFDraft, features: Sequence[np.ndarray], anchors: Sequence[int],
                   prev_tokens: Sequence[np.ndarray | None]) -> list[TorchBlock]:
    hp, w = d.hp, d.weights
    fc, hn = w.get("fc.weight"), w.get("hidden_norm.weight")
    Cs = [context_projection(f, fc, hn, hp.eps) for f in features]
    del fc
    xs = [d.token_embeddings([a] + [int(hp.mask_token_id or 0)] * (hp.block_size - 1)) for a in anchors]
    x0 = [x.numpy() for x in xs]
    xs, layers = stream_layers(hp.n_layer, lambda il: d.decoder_layer(f"layers.{il}."),
                               lambda L, il, x, C: block_layer(L, hp, il, x, C), xs, Cs)
    norm = w.get("norm.weight")
    hidden = [rms(x, norm, hp.eps) for x in xs]
    rows = hp.prediction_rows
    U_all = d.output_logits(torch.cat([h[rows] for h in hidden]), hp.own_lm_head)
    to_target_ids = d.to_target(hp.draft_vocab_size < hp.vocab_size)
    w2 = w.get("markov_head.markov_w2.weight") if hp.markov_rank else None
    outs = []
    for i, a in enumerate(anchors):
        U = U_all[i * len(rows):(i + 1) * len(rows)]
        out = TorchBlock(Cs[i].numpy(), x0[i], layers[i], hidden[i].numpy(), U.numpy(), np.empty(0, np.int64),
                         np.empty(0, np.int64))
        if w2 is not None:
            bias, z, toks, prevs = markov(d, U, w2, a, to_target_ids, prev_tokens[i])
            out.markov_bias, out.markov_logits = bias.numpy(), z.numpy()
        else:
            toks = [to_target_ids(j) for j in U.argmax(1)]
            prevs = [a, *toks[:-1]]
        out.tokens, out.prev_tokens = np.array(toks, dtype=np.int64), np.array(prevs, dtype=np.int64)
        if hp.has_confidence:
            out.confidence_logits = confidence(d, hidden[i][rows], prevs).numpy()
        outs.append(out)
    return outs
