"""An independent float32 torch forward of a DFlash2 checkpoint, from the Hugging Face folder.

Reads ``config.json`` (``dflash_config``) and the checkpoint's own tensor names (``layers.N.attention_conv.*``,
``candidate_selector.*``); the target supplies the embeddings and the lm_head. The math follows upstream
llama.cpp b11434 ``src/models/dflash.cpp`` (no public z-lab DFlash2 modelling code was available offline), in
torch terms: the dynamic convolution as one ``unfold``-free sum over shifted block views, the selector as one
batched ``einsum``. Weights are optionally rounded the way the GGUF stores them (``storage``: checkpoint name ->
GGML type), through :class:`reference.hf_draft.TorchCheckpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import ConvertError
from ...hf.values import as_float, as_positive, as_u32
from ...reference.hf_draft import TorchCheckpoint, common_hparams, rope_params
from ...reference.layers_torch import (
    attention_block,
    context_projection,
    rms,
    stream_layers,
    swiglu,
    visible_keys,
)
from ...reference.storage import gguf_counterpart
from ...roles.proof import Inputs
from ..dflash.torch_forward import BLOCK_GLOBALS, DraftFolder, TorchTrunk, bounded_block_size

#: the torch side's own spelling of the DFlash2 tensors' GGUF names (layer part, global) beside the backbone's
#: table of :func:`reference.storage.gguf_counterpart` and the block draft's globals (``BLOCK_GLOBALS``); exact
#: mode rounds each checkpoint tensor as its GGUF one
_CONV_GGUF = {"attention_conv.base_kernel": "attn_conv_base", "attention_conv.kernel_projection.weight":
              "attn_conv_proj.weight", "mlp_conv.base_kernel": "ffn_conv_base",
              "mlp_conv.kernel_projection.weight": "ffn_conv_proj.weight"}
_SELECTOR_GGUF = {"candidate_selector.predecessor_codebook": "selector_predecessor.weight",
                  "candidate_selector.successor_codebook": "selector_successor.weight",
                  "candidate_selector.hidden_projection.weight": "selector_hidden.weight"}


def counterpart(name: str) -> str | None:
    """The GGUF tensor that stores checkpoint tensor ``name`` (``model.`` / ``language_model.`` prefixes dropped;
    an attention-sink name gains ``.weight`` as upstream's does), None when none does.

    Example:
        >>> counterpart("model.layers.1.mlp_conv.base_kernel"), counterpart("norm.weight")
        ('blk.1.ffn_conv_base', 'output_norm.weight')
    """
    bare = name.replace("language_model.", "")
    bare = bare[len("model."):] if bare.startswith("model.") else bare
    bare = bare + ".weight" if "sink" in bare and not bare.endswith(".weight") else bare
    if bare in _SELECTOR_GGUF:
        return _SELECTOR_GGUF[bare]
    parts = bare.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit() and parts[2] in _CONV_GGUF:
        return f"blk.{int(parts[1])}.{_CONV_GGUF[parts[2]]}"
    return gguf_counterpart(bare, top=BLOCK_GLOBALS)


#: the checkpoint classes this forward reads (the HF side's own list: it does not ask the converter)
ARCHITECTURES: tuple[str, ...] = ("DFlash2DraftModel",)


@dataclass(frozen=True)
class Heads:
    """The head counts, head size and norm epsilon :func:`dflash2_forward` reads from ``config.json``: the
    :class:`reference.layers_torch.HeadShape` its attention block takes."""

    n_head: int
    n_head_kv: int
    head_dim: int
    eps: float


@dataclass
class Torch2Outputs(TorchTrunk):
    """One case of :func:`dflash2_forward`: the trunk's values, then the candidate sets of block positions 1..B-1
    and the selector's scores over them."""

    candidates: np.ndarray
    scores: np.ndarray


class DFlash2Checkpoint(DraftFolder):
    """The draft folder's config and weights, and the target's embeddings / lm_head."""

    family = "dflash2"
    layout = "z-lab DFlash2"

    def embed_name(self) -> str:
        """The target's embedding tensor."""
        return "model.embed_tokens.weight" if self.t.has("model.embed_tokens.weight") else "embed_tokens.weight"

    def head_name(self) -> str:
        """The target tensor that scores the block: its ``lm_head``, else (tied) its embedding."""
        return "lm_head.weight" if self.t.has("lm_head.weight") else self.embed_name()

    def round_target(self, gguf_types: Mapping[str, str]) -> None:
        """Round the target's head as the file stores it when the file carries it as ``output.weight`` (the
        converter adds it when the draft keeps its own embed_tokens on an untied target) and the draft has no
        ``lm_head`` of its own."""
        if "output.weight" in gguf_types and not self.has("lm_head.weight"):
            self.t = TorchCheckpoint(self.target, {self.head_name(): gguf_types["output.weight"]})

    def name(self, bare: str) -> str:
        """The checkpoint's name for ``bare`` (with or without the ``model.`` prefix)."""
        return bare if self.w.has(bare) else "model." + bare

    def get(self, bare: str) -> torch.Tensor:
        return self.w.get(self.name(bare))

    def has(self, bare: str) -> bool:
        return self.w.has(bare) or self.w.has("model." + bare)


def open(hf_dir: Path, target_dir: Path | None, storage: Mapping[str, str] | None) -> DFlash2Checkpoint:
    """The checkpoint (its weights rounded as ``storage`` says) and the target's weights."""
    return DFlash2Checkpoint(hf_dir, Path(str(target_dir)), storage)


def forward(ck: DFlash2Checkpoint, inputs: Inputs, anchors: list[int], forced: Any) -> list[Torch2Outputs]:
    """:func:`dflash2_forward` on the cases (each run chooses its own candidate sets)."""
    return dflash2_forward(ck, inputs.feats, anchors)


def conv(x: torch.Tensor, dyn: torch.Tensor, base: torch.Tensor, side: int, K: int, group: int) -> torch.Tensor:
    """Per-token, per-group dynamic causal convolution over the block (zero left padding)."""
    B, H = x.shape
    w = dyn.view(B, 2, K, H // group)[:, side].repeat_interleave(group, dim=2) + base[side].unsqueeze(0)  # [B, K, H]
    taps = [torch.nn.functional.pad(x, (0, 0, tap, 0))[:B] for tap in range(min(K, B))]
    return sum((w[:, tap] * taps[tap] for tap in range(len(taps))), torch.zeros_like(x))


def _rope(x: torch.Tensor, pos: torch.Tensor, theta: float, n_rot: int) -> torch.Tensor:
    inv = 1.0 / (theta ** (torch.arange(0, n_rot, 2, dtype=torch.float64) / n_rot))
    ang = (pos.double()[:, None] * inv[None]).float()
    cos, sin = torch.cos(ang)[None], torch.sin(ang)[None]
    r, rest = x[..., :n_rot], x[..., n_rot:]
    a, b = r[..., : n_rot // 2], r[..., n_rot // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


#: the layer tensors this forward reads (the checkpoint's names, below ``layers.N.``)
LAYER = ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
         "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight",
         "self_attn.k_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
         "attention_conv.base_kernel", "attention_conv.kernel_projection.weight", "mlp_conv.base_kernel",
         "mlp_conv.kernel_projection.weight")


@torch.no_grad()
def dflash2_forward(ck: DFlash2Checkpoint, features: Sequence[np.ndarray], anchors: Sequence[int],
                    candidates: Sequence[np.ndarray | None] | None = None) -> list[Torch2Outputs]:
    # the config read as the converter reads it: one line naming the key for a value of another type or range
    c, where = ck.cfg, ck.where
    common = common_hparams(c, where)
    eps, H, nh, nkv = common["eps"], common["n_embd"], common["n_head"], common["n_head_kv"]
    hd = as_positive(c.get("head_dim") or H // nh, "head_dim", where)
    K, group, top_k = (as_positive(ck.dc.get(k), f"dflash_config.{k}", where)
                       for k in ("conv_kernel_size", "conv_group_size", "selector_top_k"))
    if H % group:
        raise ConvertError(f"{where}: hidden_size {H} is not a multiple of dflash_config.conv_group_size {group}")
    B = bounded_block_size(ck.dc.get("block_size", c.get("block_size", 16)), where,
                           "dflash_config.block_size" if "block_size" in ck.dc else "block_size")
    mask_id = as_u32(ck.dc.get("mask_token_id"), "dflash_config.mask_token_id", where)
    rope = rope_params(c, where)
    theta, n_rot = rope.theta, int(hd * rope.partial)
    causal = c.get("is_causal", ck.dc.get("causal"))
    use_swa = bool(ck.dc.get("use_swa"))
    window = (ck.dc.get("swa_window_size") or c.get("sliding_window")) if (c.get("use_sliding_window") or use_swa) else None
    window = None if window is None else as_u32(window, "sliding_window", where)
    layer_types = c.get("layer_types") or []
    layer_types = layer_types if isinstance(layer_types, list) else []
    scales = {key: ck.setting(key) for key in ("input_embedding_scale", "output_multiplier", "final_logit_softcapping")}
    emb_scale, logit_scale, cap = (None if v is None else as_float(v, k, where) for k, v in scales.items())
    value_scale = ck.dc.get("attention_value_scale")
    value_scale = None if value_scale is None else as_float(value_scale, "dflash_config.attention_value_scale", where)
    shape = Heads(nh, nkv, hd, eps)

    embed_name = ck.embed_name()
    own_embed = ck.has("embed_tokens.weight") and c.get("has_embed_tokens") is not False

    def embed(ids: list[int]) -> torch.Tensor:
        return ck.w.rows(ck.name("embed_tokens.weight"), ids) if own_embed else ck.t.rows(embed_name, ids)

    fc, hn = ck.get("fc.weight"), ck.get("hidden_norm.weight")
    Cs = [context_projection(f, fc, hn, eps) for f in features]
    xs = [embed([a] + [mask_id] * (B - 1)) for a in anchors]
    if emb_scale is not None:
        xs = [x * float(emb_scale) for x in xs]
    x0 = [x.numpy() for x in xs]

    def load(il: int) -> dict[str, torch.Tensor]:
        return {n: ck.get(f"layers.{il}.{n}") for n in LAYER}

    def layer(L: dict[str, torch.Tensor], il: int, x: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        T = C.shape[0]
        pos = torch.arange(T + B)
        swa_layer = bool(window) and (use_swa or (il < len(layer_types) and layer_types[il] == "sliding_attention"))
        n = rms(x, L["input_layernorm.weight"], eps)
        dyn = n @ L["attention_conv.kernel_projection.weight"].T
        a = conv(n, dyn, L["attention_conv.base_kernel"], 0, K, group)
        mask = visible_keys(pos[T:], pos, causal=bool(causal), window=int(window or 0) if swa_layer else 0)
        o = attention_block(L, "", a, C, shape, lambda t, at: _rope(t, at, theta, n_rot), mask)
        if value_scale is not None:
            o = o * float(value_scale)
        x = x + conv(o, dyn, L["attention_conv.base_kernel"], 1, K, group)
        f = rms(x, L["post_attention_layernorm.weight"], eps)
        fdyn = f @ L["mlp_conv.kernel_projection.weight"].T
        m = swiglu(conv(f, fdyn, L["mlp_conv.base_kernel"], 0, K, group), L, "")
        return x + conv(m, fdyn, L["mlp_conv.base_kernel"], 1, K, group)

    xs, layers = stream_layers(common["n_layer"], load, layer, xs, Cs)
    norm = ck.get("norm.weight")
    head_name = ck.head_name()
    W_prev, W_next = ck.get("candidate_selector.predecessor_codebook"), ck.get("candidate_selector.successor_codebook")
    W_gate = ck.get("candidate_selector.hidden_projection.weight")
    outs = []
    for i, anchor in enumerate(anchors):
        h = rms(xs[i], norm, eps)
        U = torch.cat([h @ w.T for _, w in ck.t.row_chunks(head_name)], dim=1)
        if logit_scale is not None:
            U = U * float(logit_scale)
        if cap is not None and float(cap) > 0:
            U = torch.tanh(U / float(cap)) * float(cap)
        forced = None if candidates is None else candidates[i]
        cand = (torch.from_numpy(np.asarray(forced)) if forced is not None else
                torch.stack([torch.sort(-U[j], stable=True).indices[:top_k] for j in range(1, B)]))
        gate = h @ W_gate.T
        scores = []
        for j in range(1, B):
            pred_ids = torch.tensor([anchor]) if j == 1 else cand[j - 2]
            s = torch.einsum("jr,r,ir->ji", W_prev[pred_ids], gate[j], W_next[cand[j - 1]]) + U[j][cand[j - 1]][None]
            scores.append(s.expand(top_k, top_k) if s.shape[0] == 1 else s)
        outs.append(Torch2Outputs(Cs[i].numpy(), x0[i], layers[i], h.numpy(), U.numpy(), cand.numpy(),
                                  torch.stack(scores).numpy()))
    return outs
