"""An independent float32 torch forward of a Gemma4 DSpark checkpoint, from the Hugging Face folder (the checkpoint
side of ``verify``).

Reads ``config.json`` and the checkpoint's own tensor names (``layers.N.self_attn.k_proj.weight``,
``layers.N.layer_scalar``, ``confidence_proj.*``, ...) and never the converter's tables. The math follows the
authors' code, DeepSpec's ``deepspec/modeling/dspark/gemma4/modeling.py`` (``Gemma4DSparkAttention``: K from the
context and the block, ``v = v_norm(k_proj(.))`` with a weightless RMS norm when ``attention_k_eq_v``, q/k norms,
scaling 1.0, non-causal; ``Gemma4DSparkDecoderLayer``: sandwich norms and ``* layer_scalar``; the embedding scaled
by ``sqrt(hidden_size)``; ``hidden_norm(fc(.))`` for the context) and transformers' Gemma 4 RoPE
(``_compute_proportional_rope_parameters``: ``int(factor * head_dim / 2)`` rotated frequencies
``base^(-2i / head_dim)``, zeros for the rest, rotate-half over the whole head). Weights are optionally rounded the
way the GGUF stores them (``storage``: checkpoint name -> GGML type) through
:class:`~dspark_convert.reference.hf_draft.TorchCheckpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...reference.layers_torch import visible_keys
from ...reference.storage import gguf_counterpart
from ...roles.proof import Inputs
from ..dflash.torch_forward import BLOCK_GLOBALS, DraftFolder, TorchTrunk
from ..gemma4_assistant.torch_forward import SANDWICH_LAYER


@dataclass
class TorchOutputs(TorchTrunk):
    """One case of :func:`gemma4_forward`: the trunk's values, then the Markov bias and biased logits (None without
    a Markov head), the chosen and previous tokens, and the confidence logits (None without a confidence head)."""

    markov_bias: np.ndarray | None
    markov_logits: np.ndarray | None
    tokens: np.ndarray
    prev_tokens: np.ndarray
    confidence_logits: np.ndarray | None


#: the checkpoint class this forward reads (the torch side's own spelling: the converter's is its own)
ARCHITECTURES: tuple[str, ...] = ("Gemma4DSparkModel",)


class Gemma4Checkpoint(DraftFolder):
    """The draft folder's config and weights (the target's embeddings when the draft has none)."""

    family = "dspark_gemma4"
    layout = "DeepSpec Gemma4DSparkModel"

    def name(self, bare: str) -> str | None:
        for n in (bare, "model." + bare):
            if self.w.has(n):
                return n
        return None

    def has(self, bare: str) -> bool:
        return self.name(bare) is not None

    def get(self, bare: str) -> torch.Tensor:
        n = self.name(bare)
        if n is None:
            raise KeyError(f"tensor '{bare}' is not in the checkpoint")
        return self.w.get(n)


def open(hf_dir: Path, target_dir: Path | None, storage: Mapping[str, str] | None) -> Gemma4Checkpoint:
    """The checkpoint (its weights rounded as ``storage`` says) and the target's weights."""
    return Gemma4Checkpoint(hf_dir, Path(str(target_dir)), storage)


def forward(ck: Gemma4Checkpoint, inputs: Inputs, anchors: list[int], forced: Any) -> list[TorchOutputs]:
    """:func:`gemma4_forward` on the cases (each run follows its own Markov chain)."""
    return gemma4_forward(ck, inputs.feats, anchors)


def rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Gemma4RMSNorm: ``x * (mean(x^2) + eps)^-0.5``, times the weight as stored (``with_scale=False``: none)."""
    y = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    return y if w is None else y * w


def rope_tables(cfg: dict[str, Any], head_dim: int, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos / sin ``[N, head_dim]`` of the full-attention RoPE (proportional or default), rotate-half layout."""
    rp = cfg.get("rope_parameters") or {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                           "rope_theta": 1000000.0}}
    rp = rp.get("full_attention", rp)
    base = float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if rp.get("rope_type") == "proportional":
        factor = float(rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
        angles = int(factor * head_dim // 2)
        inv = 1.0 / base ** (torch.arange(0, 2 * angles, 2, dtype=torch.float64) / head_dim)
        inv = torch.cat([inv, torch.zeros(head_dim // 2 - angles, dtype=torch.float64)])
    else:
        inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = (pos.double()[:, None] * inv[None]).float()
    ang = torch.cat([ang, ang], dim=-1)
    return torch.cos(ang), torch.sin(ang)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x [heads, N, d]`` rotated: ``x cos + rotate_half(x) sin``."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[None] + rot * sin[None]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Scaled dot-product attention with scale 1.0 (Gemma4DSparkAttention.scaling), GQA by repeat_interleave."""
    rep = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    s = q @ k.transpose(1, 2)
    if allowed is not None:
        s = s.masked_fill(~allowed[None], float("-inf"))
    o = torch.softmax(s, dim=-1) @ v                                   # [nh, Nq, d]
    return o.transpose(0, 1).reshape(q.shape[1], -1)


@torch.no_grad()
def gemma4_forward(ck: Gemma4Checkpoint, features: Sequence[np.ndarray], anchors: Sequence[int]) -> list[TorchOutputs]:
    c = ck.cfg
    eps = float(c.get("rms_norm_eps", 1e-6))
    H, nh, hd = int(c["hidden_size"]), int(c["num_attention_heads"]), int(c["global_head_dim"])
    k_eq_v = bool(c.get("attention_k_eq_v"))
    nkv = int(c["num_global_key_value_heads"] if k_eq_v else c["num_key_value_heads"])
    B = int(ck.setting("block_size", 16))
    mask_id = int(ck.setting("mask_token_id"))
    use_swa, window = bool(ck.dc.get("use_swa")), int(ck.dc.get("swa_window_size") or 0)
    sample_from_anchor = bool(c.get("sample_from_anchor", True))
    own_embed = ck.has("embed_tokens.weight")
    t_embed = "model.embed_tokens.weight" if ck.t.has("model.embed_tokens.weight") else "embed_tokens.weight"

    def embed(ids: list[int]) -> torch.Tensor:
        name = ck.name("embed_tokens.weight")
        return ck.w.rows(name, ids) if own_embed and name else ck.t.rows(t_embed, ids)

    fc, hn = ck.get("fc.weight"), ck.get("hidden_norm.weight")
    Cs = [rms(torch.from_numpy(np.asarray(f, np.float32)) @ fc.T, hn, eps) for f in features]
    xs = [embed([a] + [mask_id] * (B - 1)) * (float(H) ** 0.5) for a in anchors]
    x0 = [x.numpy() for x in xs]
    layers: list[list[np.ndarray]] = [[] for _ in anchors]
    names = ("input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
             "post_feedforward_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
             "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight", "mlp.gate_proj.weight",
             "mlp.up_proj.weight", "mlp.down_proj.weight", "layer_scalar")
    for il in range(int(c["num_hidden_layers"])):
        L = {n: ck.get(f"layers.{il}.{n}") for n in names}
        v_proj = None if k_eq_v else ck.get(f"layers.{il}.self_attn.v_proj.weight")
        for i, C in enumerate(Cs):
            x, T = xs[i], C.shape[0]
            pos = torch.arange(T + B)
            cos, sin = rope_tables(c, hd, pos)
            h = rms(x, L["input_layernorm.weight"], eps)
            q = rms((h @ L["self_attn.q_proj.weight"].T).view(B, nh, hd), L["self_attn.q_norm.weight"], eps)
            kin = torch.cat([C, h])
            k_raw = (kin @ L["self_attn.k_proj.weight"].T).view(T + B, nkv, hd)
            v = rms(k_raw, None, eps) if v_proj is None else (kin @ v_proj.T).view(T + B, nkv, hd)
            k = rms(k_raw, L["self_attn.k_norm.weight"], eps)
            q = rotate(q.transpose(0, 1), cos[T:], sin[T:])
            k = rotate(k.transpose(0, 1), cos, sin)
            allowed = visible_keys(pos[T:], pos, window=window if use_swa else 0)
            o = attend(q, k, v.transpose(0, 1), allowed) @ L["self_attn.o_proj.weight"].T
            x = x + rms(o, L["post_attention_layernorm.weight"], eps)
            f = rms(x, L["pre_feedforward_layernorm.weight"], eps)
            g = torch.nn.functional.gelu(f @ L["mlp.gate_proj.weight"].T, approximate="tanh")
            m = (g * (f @ L["mlp.up_proj.weight"].T)) @ L["mlp.down_proj.weight"].T
            xs[i] = (x + rms(m, L["post_feedforward_layernorm.weight"], eps)) * L["layer_scalar"].reshape(-1)[0]
            layers[i].append(xs[i].numpy())
        del L
    norm = ck.get("norm.weight")
    head = ck.get("lm_head.weight") if ck.has("lm_head.weight") else None
    rows = list(range(0 if sample_from_anchor else 1, B))
    w1 = ck.get("markov_head.markov_w1.weight") if ck.has("markov_head.markov_w1.weight") else None
    w2 = ck.get("markov_head.markov_w2.weight") if ck.has("markov_head.markov_w2.weight") else None
    conf = next((p for p in ("confidence_proj", "confidence_head.proj") if ck.has(p + ".weight")), None)
    outs = []
    for i, a in enumerate(anchors):
        hid = rms(xs[i], norm, eps)
        hr = hid[rows]
        if head is not None:
            U = hr @ head.T
        else:  # tied: the (own or target) embedding matrix is the head
            name = ck.name("embed_tokens.weight")
            U = hr @ (ck.w.get(name) if own_embed and name else ck.t.get(t_embed)).T
        bias = z = None
        prev, tokens = [], []
        p = a
        if w1 is not None and w2 is not None:
            bias_rows, z_rows = [], []
            for r in range(U.shape[0]):
                prev.append(p)
                b = w1[p] @ w2.T
                bias_rows.append(b)
                z_rows.append(U[r] + b)
                p = int(torch.argmax(z_rows[-1]))
                tokens.append(p)
            bias, z = torch.stack(bias_rows), torch.stack(z_rows)
        else:
            tokens = [int(t) for t in torch.argmax(U, dim=1)]
            prev = [a] + tokens[:-1]
        cl = None
        if conf is not None:
            wc = ck.get(conf + ".weight").reshape(-1)
            feat = hr if wc.numel() == H or w1 is None else torch.cat([hr, w1[torch.tensor(prev)]], dim=1)
            cl = feat @ wc + (ck.get(conf + ".bias").reshape(-1)[0] if ck.has(conf + ".bias") else 0.0)
        outs.append(TorchOutputs(Cs[i].numpy(), x0[i], layers[i], hid.numpy(), U.numpy(),
                                 None if bias is None else bias.numpy(), None if z is None else z.numpy(),
                                 np.asarray(tokens, np.int64), np.asarray(prev, np.int64),
                                 None if cl is None else np.asarray(cl, np.float32)))
    return outs


#: DeepSpec's confidence head -> the GGUF names llama.cpp loads it as (this side's own spelling, for the storage
#: rounding only); the layer and every other name: the backbone's table
#: (:func:`dspark_convert.reference.storage.gguf_counterpart`) with the Gemma 4 layer's (``SANDWICH_LAYER``) and the
#: block draft's globals (``BLOCK_GLOBALS``)
_GLOBAL_COUNTERPARTS = {"confidence_proj.weight": "conf_proj.weight", "confidence_proj.bias": "conf_proj.bias"}


def counterpart(hf_name: str) -> str | None:
    """The GGUF tensor a checkpoint tensor becomes (None: none)."""
    bare = hf_name.removeprefix("model.")
    return _GLOBAL_COUNTERPARTS.get(bare) or gguf_counterpart(bare, layer=SANDWICH_LAYER, top=BLOCK_GLOBALS)


