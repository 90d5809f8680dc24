"""An independent float32 torch forward of a Gemma 4 assistant checkpoint, from the Hugging Face folder (the
checkpoint side of ``verify``).

Reads ``config.json`` (``text_config`` nested, ``backbone_hidden_size`` at the top) and the checkpoint's own tensor
names (``pre_projection.weight``, ``model.layers.N.self_attn.q_proj.weight``, ``model.layers.N.layer_scalar``, ...),
never the converter's tables. The math follows transformers' ``Gemma4AssistantForCausalLM`` as its assisted
generation drives it (``Gemma4AssistantCandidateGenerator``): ``inputs_embeds = pre_projection(cat(target
embedding of the last token, target hidden row))``, the target's embedding being ``Gemma4TextScaledWordEmbedding``
(scaled by ``sqrt(backbone_hidden_size)``); every layer a ``Gemma4TextDecoderLayer`` whose attention reuses the
target's shared KV states of its layer type (``q_norm(q_proj(.))`` roped, scaling 1.0, no K/V projections of its
own; a sliding layer reads what the target's sliding cache holds before the new token: its last ``sliding_window -
1`` positions), sandwich norms, the gated ``gelu_pytorch_tanh`` MLP and ``* layer_scalar``; then ``model.norm``,
``lm_head`` (tied to ``embed_tokens``; the E2B/E4B ordered-embedding sampler is not used: llama.cpp scores every
token) and ``post_projection`` of the normed row. Each drafted token is fed back with the drafted ``h`` at the same
position (``position_ids = len - 1`` for every step). RoPE as transformers' Gemma 4: ``default`` for sliding layers,
``proportional`` for full layers (``int(factor * head_dim / 2)`` rotated frequencies ``base^(-2i / head_dim)``, the
rest zero), rotate-half.

Weights are optionally rounded the way the GGUF stores them (``storage``: checkpoint name -> GGML type) through
:class:`~dspark_convert.reference.hf_draft.TorchCheckpoint`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import ConvertError, clip_value
from ...hf.checkpoint import load_json
from ...hf.values import as_float, as_positive, as_u32
from ...reference.hf_draft import TorchCheckpoint
from ...reference.storage import gguf_counterpart
from ...roles.proof import Inputs
from .seeded import cache, embed_rows


@dataclass
class TorchOutputs:
    pre: list[np.ndarray]
    layers: list[list[np.ndarray]]
    hidden: list[np.ndarray]
    logits: list[np.ndarray]
    h_next: list[np.ndarray]
    tokens: np.ndarray
    inputs: np.ndarray
    h_in: list[np.ndarray]


@dataclass(frozen=True)
class TorchCase:
    """The target-side inputs of one drafting situation, spelled as transformers hands them to the assistant: the
    last hidden row, the last token, the target's (unscaled) embedding rows and ``shared_kv_states`` (layer type ->
    (keys, values), ``[positions, kv heads, head dim]``)."""

    hidden: np.ndarray
    token: int
    embed: Callable[[list[int]], np.ndarray]
    shared_kv_states: dict[str, tuple[np.ndarray, np.ndarray]]


#: the checkpoint classes this forward reads (the torch side's own spelling: the converter's is its own)
ARCHITECTURES: tuple[str, ...] = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")


class AssistantCheckpoint:
    """The assistant folder: ``cfg`` (its config), ``text`` (the text config), ``w`` (its weights, rounded as
    ``storage`` says); ``family`` / ``layout`` / ``notes`` are the report's."""

    family = "gemma4_assistant"
    layout = "Gemma 4 assistant (text_config nested)"

    def __init__(self, draft: Path, target: Path | None = None, storage: Mapping[str, str] | None = None) -> None:
        self.where = f"{draft / 'config.json'}"
        self.cfg: dict[str, Any] = load_json(draft / "config.json")
        text = self.cfg.get("text_config")
        if not isinstance(text, dict):
            raise ConvertError(f"{self.where}: key 'text_config' is {clip_value(text)}, expected a JSON object (the "
                               "assistant's text config)")
        self.text: dict[str, Any] = dict(text)
        self.w = TorchCheckpoint(draft, storage)
        self.notes: list[str] = []
        self._check_config()

    @property
    def backbone(self) -> int:
        return int(self.cfg["backbone_hidden_size"])

    def _check_config(self) -> None:
        """Every config value the forward, its seeded inputs and the metadata rows read, typed as the converter
        reads them and sized by the checkpoint's tensors (the seeded target cache and embedding rows are allocated
        by them): one line naming the key otherwise."""
        t, where = self.text, self.where

        def positive(key: str, default: Any = None) -> int:
            return as_positive(t.get(key, default), f"text_config.{key}", where)

        backbone = as_positive(self.cfg.get("backbone_hidden_size"), "backbone_hidden_size", where)
        if self.w.has("pre_projection.weight") and self.w.shape("pre_projection.weight")[-1] != 2 * backbone:
            raise ConvertError(f"{where}: key 'backbone_hidden_size' is {backbone}, but pre_projection.weight has "
                               f"{self.w.shape('pre_projection.weight')[-1]} columns (2 x backbone_hidden_size)")
        n_layer = positive("num_hidden_layers")
        types = t.get("layer_types")
        if (not isinstance(types, list) or len(types) != n_layer
                or any(x not in ("sliding_attention", "full_attention") for x in types)):
            raise ConvertError(f"{where}: key 'text_config.layer_types' is {clip_value(types)}, expected "
                               f"num_hidden_layers ({n_layer}) entries of 'sliding_attention' / 'full_attention'")
        nh = positive("num_attention_heads")
        for kind in dict.fromkeys(types):
            nkv, hd = self.layer_geometry(kind)
            as_positive(nkv, "text_config.num_key_value_heads", where)
            as_positive(hd, "text_config.head_dim" if kind == "sliding_attention" else "text_config.global_head_dim",
                        where)
            if nh % nkv:
                raise ConvertError(f"{where}: the {kind} layers' {nkv} KV heads do not divide num_attention_heads {nh}")
            q = f"model.layers.{types.index(kind)}.self_attn.q_proj.weight"
            if self.w.has(q) and self.w.shape(q)[0] != nh * hd:
                raise ConvertError(f"{where}: num_attention_heads {nh} x head size {hd} of the {kind} layers is "
                                   f"{nh * hd}, but {q} has {self.w.shape(q)[0]} rows")
        as_u32(t.get("sliding_window", 0), "text_config.sliding_window", where)
        as_float(t.get("rms_norm_eps", 1e-6), "text_config.rms_norm_eps", where)
        rope = t.get("rope_parameters") or {}
        for kind, part in (rope.items() if isinstance(rope, dict) else [("", rope)]):
            if not isinstance(part, dict):
                raise ConvertError(f"{where}: key 'text_config.rope_parameters' is {clip_value(rope)}, expected an "
                                   "object of one JSON object per layer type")
            for key in ("rope_theta", "partial_rotary_factor"):
                if key in part:
                    as_float(part[key], f"text_config.rope_parameters.{kind}.{key}", where)

    def layer_geometry(self, layer_type: str) -> tuple[int, int]:
        """``(kv heads, head dim)`` of the shared KV states of ``layer_type`` (Gemma4TextConfig's ``per_layer_config``:
        a full layer's head dim is ``global_head_dim``, its KV heads ``num_global_key_value_heads`` only with
        ``attention_k_eq_v``, a missing flag counting as set)."""
        t = self.text
        where = self.where
        if layer_type == "full_attention":
            glob = t.get("num_global_key_value_heads")
            key = "num_global_key_value_heads" if glob is not None and t.get("attention_k_eq_v", True) else \
                "num_key_value_heads"
            return (as_u32(t.get(key), f"text_config.{key}", where),
                    as_u32(t.get("global_head_dim") or 512, "text_config.global_head_dim", where))
        return (as_u32(t.get("num_key_value_heads"), "text_config.num_key_value_heads", where),
                as_u32(t.get("head_dim"), "text_config.head_dim", where))


def open(hf_dir: Path, target_dir: Path | None, storage: Mapping[str, str] | None) -> AssistantCheckpoint:
    """The checkpoint (its weights rounded as ``storage`` says); no target folder is read."""
    return AssistantCheckpoint(hf_dir, None, storage)


def forward(ck: AssistantCheckpoint, inputs: Inputs, drawn: list[tuple[int, int]], forced: Any) -> list[TorchOutputs]:
    """:func:`assistant_forward` on the cases' seeded inputs (:mod:`.seeded`: the last token, the target's embedding
    rows and cache, shaped by the config), ``inputs.steps`` chained steps."""
    types = [lt for lt in ("sliding_attention", "full_attention") if lt in ck.text["layer_types"]]
    cases = [TorchCase(f[-1], tok, embed_rows(seed, ck.backbone),
                       {lt: cache(seed, lt == "full_attention", f.shape[0], *ck.layer_geometry(lt)) for lt in types})
             for f, (tok, seed) in zip(inputs.feats, drawn, strict=True)]
    return assistant_forward(ck, cases, inputs.steps)


def rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Gemma4RMSNorm: ``x * (mean(x^2) + eps)^-0.5``, times the weight as stored."""
    y = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    return y if w is None else y * w


def inv_freq(text: dict[str, Any], layer_type: str, head_dim: int) -> torch.Tensor:
    """The rotation frequencies of a layer type (proportional: ``head_dim / 2`` of them, zeros not rotating)."""
    rp = (text.get("rope_parameters") or {}).get(layer_type) or {}
    base = float(rp.get("rope_theta", 1000000.0 if layer_type == "full_attention" else 10000.0))
    half = head_dim // 2
    if rp.get("rope_type", "proportional" if layer_type == "full_attention" else "default") == "proportional":
        angles = int(float(rp.get("partial_rotary_factor", 1.0)) * head_dim / 2)
        f = 1.0 / base ** (torch.arange(0, 2 * angles, 2, dtype=torch.float64) / head_dim)
        return torch.cat([f, torch.zeros(half - angles, dtype=torch.float64)])
    rot = int(head_dim * float(rp.get("partial_rotary_factor", 1.0)))   # a partial rotation: the first rot dims
    return 1.0 / base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)


def rope(x: torch.Tensor, freqs: torch.Tensor, position: int) -> torch.Tensor:
    """``x [heads, d]`` at ``position``: its first ``2 len(freqs)`` dims as ``x cos + rotate_half(x) sin``."""
    ang = (position * freqs).float()
    cos, sin = torch.cos(torch.cat([ang, ang])), torch.sin(torch.cat([ang, ang]))
    r, half = 2 * freqs.numel(), freqs.numel()
    xr = x[..., :r]
    out = xr * cos + torch.cat([-xr[..., half:], xr[..., :half]], dim=-1) * sin
    return torch.cat([out, x[..., r:]], dim=-1)


def shared_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``q [heads, d]`` over every shared key ``k``/``v`` ``[N, kv heads, d]``, scaling 1.0, GQA by repeat."""
    rep = q.shape[0] // k.shape[1]
    kk, vv = k.repeat_interleave(rep, 1).transpose(0, 1), v.repeat_interleave(rep, 1).transpose(0, 1)  # [heads, N, d]
    p = torch.softmax((kk @ q.unsqueeze(-1)).squeeze(-1), dim=-1)                                       # [heads, N]
    return (p.unsqueeze(1) @ vv).reshape(1, -1)


@torch.no_grad()
def assistant_forward(ck: AssistantCheckpoint, cases: Sequence[TorchCase], steps: int) -> list[TorchOutputs]:
    t = ck.text
    eps = float(t.get("rms_norm_eps", 1e-6))
    nh, types = int(t["num_attention_heads"]), list(t["layer_types"])
    window = int(t["sliding_window"])
    scale = float(ck.backbone) ** 0.5
    names = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_norm.weight", "self_attn.o_proj.weight",
             "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight", "mlp.gate_proj.weight",
             "mlp.up_proj.weight", "mlp.down_proj.weight", "post_feedforward_layernorm.weight", "layer_scalar")
    L = [{n: ck.w.get(f"model.layers.{il}.{n}") for n in names} for il in range(int(t["num_hidden_layers"]))]
    pre, post = ck.w.get("pre_projection.weight"), ck.w.get("post_projection.weight")
    norm = ck.w.get("model.norm.weight")
    head = ck.w.get("lm_head.weight" if ck.w.has("lm_head.weight") else "model.embed_tokens.weight")
    outs = []
    for c in cases:
        shared = {}
        for kind, (k, v) in c.shared_kv_states.items():
            kt, vt = torch.from_numpy(np.asarray(k, np.float32)), torch.from_numpy(np.asarray(v, np.float32))
            if kind == "sliding_attention":     # the target's sliding cache: the last window - 1 positions
                kt, vt = kt[-(window - 1):] if window > 1 else kt[:0], vt[-(window - 1):] if window > 1 else vt[:0]
            shared[kind] = (kt, vt)
        position = int(next(iter(c.shared_kv_states.values()))[0].shape[0])   # len(input_ids) - 1
        hid = torch.from_numpy(np.asarray(c.hidden, np.float32)).reshape(1, -1)
        tok = c.token
        o = TorchOutputs([], [], [], [], [], np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        chosen, fed = [], []
        for _ in range(steps):
            fed.append(tok)
            o.h_in.append(hid.numpy().copy())
            emb = torch.from_numpy(np.asarray(c.embed([tok]), np.float32)).reshape(1, -1) * scale
            x = torch.cat([emb, hid], dim=-1) @ pre.T
            o.pre.append(x.numpy().copy())
            rows = []
            for il, lt in enumerate(types):
                W = L[il]
                hd = ck.layer_geometry(lt)[1]
                n = rms(x, W["input_layernorm.weight"], eps)
                q = rms((n @ W["self_attn.q_proj.weight"].T).view(nh, hd), W["self_attn.q_norm.weight"], eps)
                q = rope(q, inv_freq(t, lt, hd), position)
                keys, values = shared[lt]
                a = x + rms(shared_attention(q, keys, values) @ W["self_attn.o_proj.weight"].T,
                            W["post_attention_layernorm.weight"], eps)
                f = rms(a, W["pre_feedforward_layernorm.weight"], eps)
                g = torch.nn.functional.gelu(f @ W["mlp.gate_proj.weight"].T, approximate="tanh")
                m = (g * (f @ W["mlp.up_proj.weight"].T)) @ W["mlp.down_proj.weight"].T
                x = (a + rms(m, W["post_feedforward_layernorm.weight"], eps)) * W["layer_scalar"].reshape(-1)[0]
                rows.append(x.numpy().copy())
            o.layers.append(rows)
            y = rms(x, norm, eps)
            logits = y @ head.T
            hid = y @ post.T
            o.hidden.append(y.numpy().copy())
            o.logits.append(logits.numpy().copy())
            o.h_next.append(hid.numpy().copy())
            tok = int(torch.argmax(logits[0]))
            chosen.append(tok)
        o.tokens, o.inputs = np.asarray(chosen, np.int64), np.asarray(fed, np.int64)
        outs.append(o)
    return outs


#: the Gemma 4 decoder layer's own names over the shared table's (this side's own spelling, for the storage rounding
#: only): a norm after the attention and after the MLP, the MLP's input norm, a per-layer output scale
SANDWICH_LAYER = {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "layer_scalar": "layer_output_scale.weight",
}
#: the assistant's projections -> the GGUF names llama.cpp loads them as (this side's own spelling, for the storage
#: rounding only); the layers, the embedding and the norm: the shared table with :data:`SANDWICH_LAYER`
_PROJECTIONS = {"pre_projection.weight": "nextn.pre_projection.weight",
                "post_projection.weight": "nextn.post_projection.weight"}


def counterpart(hf_name: str) -> str | None:
    """The GGUF tensor a checkpoint tensor becomes (None: none).

    Example:
        >>> counterpart("model.layers.3.layer_scalar"), counterpart("masked_embedding.centroids.weight")
        ('blk.3.layer_output_scale.weight', None)
    """
    bare = hf_name.removeprefix("model.")
    return _PROJECTIONS.get(bare) or gguf_counterpart(bare, layer=SANDWICH_LAYER)


