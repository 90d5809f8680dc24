"""An independent float32 torch forward of DSpark / DFlash / EAGLE-3 drafts from the ORIGINAL Hugging Face folder.

Written from ``spec/checkpoints.md`` without using the numpy reference or the converter: it reads ``config.json``
in every layout users bring (DeepSpec flat, z-lab / SpecForge nested ``dflash_config``, speculators
``transformer_layer_config``, EAGLE-3 ``midlayer.`` / ``layers.0.``) and the safetensors with torch's own
reader, and applies RoPE the way the checkpoint was trained (rotate-half, or GPT-J interleaved pairs when
``rope_is_neox_style`` is false; llama3 / linear scaling for EAGLE-3). This is the only module that imports
torch; ``verify`` imports it lazily.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from ..checkpoint import EMBED_NAMES, OUTPUT_NAMES
from ..errors import ConvertError

DSPARK_ARCHS = ("Qwen3DSparkModel", "DSparkDraftModel", "DSparkSpeculator", "Lfm2DSparkDraftModel")
DFLASH_ARCHS = ("DFlashDraftModel", "DFlashSpeculator")
EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator", "Eagle3DraftModel")


class TorchCheckpoint:
    """Tensors of a checkpoint folder through ``safetensors.safe_open(framework="pt")``, read on demand as float32."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        else:
            files = sorted(p.name for p in folder.glob("*.safetensors"))
        if not files:
            raise ConvertError(f"{folder}: no safetensors files")
        self.handles = {f: safe_open(str(folder / f), framework="pt") for f in files}
        self.where = {n: f for f, h in self.handles.items() for n in h.keys()}

    def has(self, name: str) -> bool:
        return name in self.where

    def shape(self, name: str) -> list[int]:
        return list(self.handles[self.where[name]].get_slice(name).get_shape())

    def get(self, name: str) -> torch.Tensor:
        """The whole tensor as float32 (integers keep their type)."""
        if name not in self.where:
            raise ConvertError(f"{self.folder}: tensor '{name}' not found")
        t = self.handles[self.where[name]].get_tensor(name)
        return t.float() if t.is_floating_point() else t

    def rows(self, name: str, ids: list[int]) -> torch.Tensor:
        sl = self.handles[self.where[name]].get_slice(name)
        return torch.cat([sl[i:i + 1] for i in ids]).float()

    def row_chunks(self, name: str, chunk: int = 8192):
        sl = self.handles[self.where[name]].get_slice(name)
        n = sl.get_shape()[0]
        for a in range(0, n, chunk):
            yield a, sl[a:min(n, a + chunk)].float()


def _read_config(folder: Path, merge_text: bool = True) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise ConvertError(f"{folder}: no config.json")
    cfg = json.loads(path.read_text())
    return {**cfg, **cfg.get("text_config", {})} if merge_text else cfg


@dataclass
class HFDraft:
    """The draft checkpoint's config, normalised across layouts, plus lazy weights and the target's."""

    path: Path
    family: str                                  # "dspark" | "dflash" | "eagle3"
    layout: str
    raw: dict[str, Any]
    hp: dict[str, Any]
    weights: TorchCheckpoint
    target: TorchCheckpoint
    target_cfg: dict[str, Any]
    prefix: str = ""                             # per-layer prefix for EAGLE-3 ("midlayer." / "layers.0.")
    notes: list[str] = field(default_factory=list)


def _rope_dict(c: dict[str, Any]) -> dict[str, Any]:
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    rope = dict(rope.get("full_attention", rope))
    rope.setdefault("rope_theta", c.get("rope_theta", 10000.0))
    rope["rope_type"] = str(rope.get("rope_type", rope.get("type", "default")) or "default").lower()
    return rope


def load_draft(draft_dir: str | Path, target_dir: str | Path) -> HFDraft:
    """Read and normalise a draft folder (any supported layout) and open the target's weights.

    Example:
        >>> d = load_draft("dspark_qwen3_4b_block7", "Qwen3-4B")   # doctest: +SKIP
        >>> d.family, d.hp["block_size"], d.hp["sample_from_anchor"]  # doctest: +SKIP
        ('dspark', 7, True)
    """
    folder, tfolder = Path(draft_dir), Path(target_dir)
    raw = _read_config(folder, merge_text=False)
    arch = (raw.get("architectures") or [""])[0]
    c = {**raw, **raw.get("transformer_layer_config", {})}
    nested = raw.get("dflash_config") or {}
    weights, target, tcfg = TorchCheckpoint(folder), TorchCheckpoint(tfolder), _read_config(tfolder)
    H, nh = int(c["hidden_size"]), int(c["num_attention_heads"])
    default_hd = 128 if c.get("model_type") == "qwen3" else H // nh       # Qwen3Config's default head_dim is 128
    rope = _rope_dict(c)
    hp: dict[str, Any] = {
        "n_layer": int(c["num_hidden_layers"]), "n_embd": H, "n_ff": int(c["intermediate_size"]), "n_head": nh,
        "n_head_kv": int(c.get("num_key_value_heads") or nh), "head_dim": int(c.get("head_dim") or default_hd),
        "eps": float(c.get("rms_norm_eps", 1e-6)), "rope_theta": float(rope["rope_theta"]), "rope": rope,
        "vocab_size": int(c.get("vocab_size") or 0),
    }
    d = HFDraft(folder, "", "", raw, hp, weights, target, tcfg)
    if arch in DSPARK_ARCHS or arch in DFLASH_ARCHS:
        _normalise_block_draft(d, arch, c, nested)
    elif arch in EAGLE3_ARCHS or ("draft_vocab_size" in c and hp["n_layer"] == 1):
        _normalise_eagle3(d, arch, c)
    else:
        raise ConvertError(f"{folder}/config.json: architectures[0] {arch!r} is not a DSpark, DFlash or EAGLE-3 draft")
    return d


def _normalise_block_draft(d: HFDraft, arch: str, c: dict[str, Any], nested: dict[str, Any]) -> None:
    hp, w, raw = d.hp, d.weights, d.raw
    speculators = "transformer_layer_config" in raw or "aux_hidden_state_layer_ids" in raw
    d.family = "dflash" if arch in DFLASH_ARCHS else "dspark"
    d.layout = "speculators" if speculators else ("nested" if nested else "flat")
    hp["block_size"] = int(raw.get("block_size") or nested.get("block_size") or 16)
    if speculators:                             # already input-of-layer ids
        hp["taps"] = list(raw.get("aux_hidden_state_layer_ids") or [])
        hp["target_layers"] = list(hp["taps"])
        hp["mask_token_id"] = raw.get("mask_token_id")
    else:
        taps = nested.get("target_layer_ids", raw.get("target_layer_ids"))
        if taps is None and "num_target_layers" in raw:            # z-lab build_target_layer_ids
            lt, n = int(raw["num_target_layers"]), hp["n_layer"]
            taps = [round(1 + i * (lt - 4) / (n - 1)) for i in range(n)] if n > 1 else [lt // 2]
        hp["taps"] = list(taps or [])
        hp["target_layers"] = [int(t) + 1 for t in hp["taps"]]    # output-of-layer -> input-of-layer
        hp["mask_token_id"] = nested.get("mask_token_id", raw.get("mask_token_id"))
    head_type = nested.get("markov_head_type", raw.get("markov_head_type", "vanilla"))
    if w.has("markov_head.markov_w1.weight") and head_type != "vanilla":
        raise ConvertError(f"{d.path}/config.json: markov_head_type {head_type!r}: only 'vanilla' is supported")
    hp["markov_rank"] = w.shape("markov_head.markov_w1.weight")[1] if w.has("markov_head.markov_w1.weight") else 0
    hp["has_confidence"] = w.has("confidence_head.proj.weight")
    if "sample_from_anchor" in raw:
        hp["sample_from_anchor"] = bool(raw["sample_from_anchor"])
    else:  # DFlash: same-position; DSpark anchor-as-first, except keyless speculators exports (gguf-contract §3.3)
        hp["sample_from_anchor"] = d.family == "dspark" and not speculators
    # rotate-half unless a DSpark config says otherwise; z-lab's DFlashDraftModel always uses rotate_half
    neox = c.get("rope_is_neox_style", c.get("is_neox_style", True))
    hp["neox"] = True if arch == "DFlashDraftModel" else bool(neox)
    window = c.get("sliding_window") if c.get("use_sliding_window") else None
    # Qwen3Config derives missing layer_types: sliding from layer max_window_layers (default 28) on
    layer_types = c.get("layer_types") or ["sliding_attention" if window and i >= int(c.get("max_window_layers", 28))
                                           else "full_attention" for i in range(hp["n_layer"])]
    hp["swa"] = [bool(window) and t == "sliding_attention" for t in layer_types] or [False] * hp["n_layer"]
    hp["sliding_window"] = int(window or 0)
    hp["draft_vocab_size"] = int(c.get("draft_vocab_size") or hp["vocab_size"])
    reduced = hp["draft_vocab_size"] < hp["vocab_size"]
    # the GGUF keeps embed/lm_head only for a reduced vocab (DSpark) or when the checkpoint has them (DFlash)
    own = reduced if d.family == "dspark" else True
    hp["own_embed"] = own and w.has("embed_tokens.weight") and raw.get("has_embed_tokens") is not False
    hp["own_lm_head"] = own and w.has("lm_head.weight")
    if d.family == "dspark" and not reduced and w.has("embed_tokens.weight"):
        d.notes.append("full-vocab DSpark: the draft's stored embed_tokens/lm_head copies are replaced by the target's")


def _normalise_eagle3(d: HFDraft, arch: str, c: dict[str, Any]) -> None:
    hp, w, raw = d.hp, d.weights, d.raw
    d.family, d.layout = "eagle3", ("speculators" if arch == "Eagle3Speculator" else "midlayer")
    d.prefix = next((p for p in ("midlayer.", "layers.0.", "model.layers.0.") if w.has(p + "mlp.down_proj.weight")), "")
    if not d.prefix:
        raise ConvertError(f"{d.path}: no EAGLE-3 layer tensors (midlayer.* or layers.0.*)")
    if w.has(d.prefix + "self_attn.q_norm.weight") or any(w.has(f"fc_norm.{i}.weight") for i in range(3)):
        raise ConvertError(f"{d.path}: q/k-norm (DeepSpec) or fc_norm EAGLE-3 variants are not supported")
    if hp["rope"]["rope_type"] not in ("default", "llama3", "linear"):
        raise ConvertError(f"{d.path}/config.json: rope type {hp['rope']['rope_type']!r} is not supported by verify")
    lt = int(d.target_cfg.get("num_hidden_layers", 0))
    hp["target_layers"] = list(raw.get("eagle_aux_hidden_state_layer_ids") or [2, lt // 2, lt - 3])
    nested = (raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if nested and [int(i) + 1 for i in nested] != hp["target_layers"]:
        d.notes.append(f"eagle_config ids {nested} (output-of-layer) are ignored by upstream; target_layers "
                       f"{hp['target_layers']} are used instead")
    hp["target_hidden_size"] = int(raw.get("target_hidden_size") or d.target_cfg.get("hidden_size") or hp["n_embd"])
    hp["norm_before_residual"] = bool(raw.get("norm_before_residual", False))
    hp["norm_before_fc"] = bool(raw.get("norm_before_fc", False))
    hp["draft_vocab_size"] = int(c.get("draft_vocab_size") or w.shape("lm_head.weight")[0])
    hp["own_embed"] = w.has("embed_tokens.weight")


# ============================================================================================== math
def rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    """RMSNorm in float32, weight used as is."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def inv_freq(hp: dict[str, Any]) -> torch.Tensor:
    """Rotation frequencies ``theta^(-2i/d)``, adjusted by llama3 / linear rope scaling (HF semantics)."""
    d, rope = hp["head_dim"], hp["rope"]
    f = 1.0 / (hp["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if rope["rope_type"] == "linear":
        f = f / float(rope["factor"])
    elif rope["rope_type"] == "llama3":
        factor, lo, hi = float(rope["factor"]), float(rope.get("low_freq_factor", 1.0)), float(rope.get("high_freq_factor", 4.0))
        old = float(rope.get("original_max_position_embeddings", 8192))
        wavelen = 2 * math.pi / f
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, f / factor, f)
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        f = torch.where(medium, (1 - smooth) * f / factor + smooth * f, scaled)
    return f


def apply_rope(x: torch.Tensor, pos: torch.Tensor, freqs: torch.Tensor, neox: bool) -> torch.Tensor:
    """RoPE on ``x [heads, N, d]``: rotate-half (``neox``) or GPT-J interleaved pairs ``(2i, 2i+1)``."""
    ang = pos.double()[:, None] * freqs[None, :]
    if neox:
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1).float(), torch.cat([ang.sin(), ang.sin()], -1).float()
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], -1) * sin
    cos, sin = ang.cos().repeat_interleave(2, -1).float(), ang.sin().repeat_interleave(2, -1).float()
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + rot * sin


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` with GQA; ``q [nh, Nq, d]``, ``k/v [nkv, Nk, d]`` -> ``[Nq, nh*d]``."""
    rep = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(q.shape[1], -1)


def swiglu(x: torch.Tensor, L: dict[str, torch.Tensor], p: str) -> torch.Tensor:
    return (torch.nn.functional.silu(x @ L[p + "mlp.gate_proj.weight"].T) * (x @ L[p + "mlp.up_proj.weight"].T)) @ L[p + "mlp.down_proj.weight"].T


def _embed(d: HFDraft, ids: list[int]) -> torch.Tensor:
    return d.weights.rows("embed_tokens.weight", ids) if d.hp["own_embed"] else d.target.rows(_target_embed(d), ids)


def _target_embed(d: HFDraft) -> str:
    for n in EMBED_NAMES:
        if d.target.has(n):
            return n
    raise ConvertError(f"{d.target.folder}: no target embedding tensor")


def _lm(d: HFDraft, h: torch.Tensor, own: bool) -> torch.Tensor:
    if own:
        ck, name = d.weights, "lm_head.weight"
    else:
        ck, name = d.target, next((n for n in OUTPUT_NAMES if d.target.has(n)), None) or _target_embed(d)
    return torch.cat([h @ w.T for _, w in ck.row_chunks(name)], dim=1)


def _layer(d: HFDraft, p: str) -> dict[str, torch.Tensor]:
    return {n: d.weights.get(n) for n in d.weights.where if n.startswith(p)}


@contextmanager
def _threads_for(d: HFDraft) -> Iterator[None]:
    """One intra-op thread for tiny drafts: thread-pool wake-ups cost 10x the matmuls on a loaded 2-core box."""
    old = torch.get_num_threads()
    if d.hp["n_embd"] * d.hp["n_ff"] < 1 << 20:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# ============================================================================================== DSpark / DFlash
@dataclass
class TorchBlock:
    """Reference outputs of one block proposal (numpy arrays; tokens are target ids)."""

    hidden: np.ndarray
    logits: np.ndarray
    tokens: np.ndarray
    prev_tokens: np.ndarray
    markov_logits: np.ndarray | None = None
    confidence_logits: np.ndarray | None = None


@torch.no_grad()
def block_forward(d: HFDraft, features: np.ndarray, anchor: int, prev_tokens: np.ndarray | None = None) -> TorchBlock:
    """DSpark/DFlash: ``C = hidden_norm(fc(F))``; block ``[a, m, ..., m]`` attends to ``[C; block]``; heads."""
    with _threads_for(d):
        return _block_forward(d, features, anchor, prev_tokens)


def _block_forward(d: HFDraft, features: np.ndarray, anchor: int, prev_tokens: np.ndarray | None) -> TorchBlock:
    hp, w = d.hp, d.weights
    eps, nh, nkv, hd, B = hp["eps"], hp["n_head"], hp["n_head_kv"], hp["head_dim"], hp["block_size"]
    F = torch.from_numpy(np.asarray(features, dtype=np.float32))
    C = rms(F @ w.get("fc.weight").T, w.get("hidden_norm.weight"), eps)
    T = C.shape[0]
    x = _embed(d, [anchor] + [int(hp["mask_token_id"])] * (B - 1))
    pos, freqs = torch.arange(T + B), inv_freq(hp)
    for il in range(hp["n_layer"]):
        p = f"layers.{il}."
        L = _layer(d, p)
        xn = rms(x, L[p + "input_layernorm.weight"], eps)
        kv = torch.cat([C, xn])
        q = rms((xn @ L[p + "self_attn.q_proj.weight"].T).view(B, nh, hd), L[p + "self_attn.q_norm.weight"], eps).transpose(0, 1)
        k = rms((kv @ L[p + "self_attn.k_proj.weight"].T).view(T + B, nkv, hd), L[p + "self_attn.k_norm.weight"], eps).transpose(0, 1)
        v = (kv @ L[p + "self_attn.v_proj.weight"].T).view(T + B, nkv, hd).transpose(0, 1)
        q, k = apply_rope(q, pos[T:], freqs, hp["neox"]), apply_rope(k, pos, freqs, hp["neox"])
        mask = None
        if hp["swa"][il] if il < len(hp["swa"]) else False:
            mask = (pos[T:, None] - pos[None, :]) < hp["sliding_window"]
        x = x + attend(q, k, v, mask) @ L[p + "self_attn.o_proj.weight"].T
        x = x + swiglu(rms(x, L[p + "post_attention_layernorm.weight"], eps), L, p)
        del L
    hidden = rms(x, w.get("norm.weight"), eps)
    rows = list(range(0 if hp["sample_from_anchor"] else 1, B))
    U = _lm(d, hidden[rows], hp["own_lm_head"])
    off = w.get("d2t").long() if w.has("d2t") and hp["draft_vocab_size"] < hp["vocab_size"] else None
    to_target = (lambda i: int(i) + int(off[int(i)])) if off is not None else int
    out = TorchBlock(hidden.numpy(), U.numpy(), np.empty(0, np.int64), np.empty(0, np.int64))
    if hp["markov_rank"]:
        w2, z, toks, prevs, prev = w.get("markov_head.markov_w2.weight"), [], [], [], anchor
        for i in range(len(rows)):
            prev = prev if prev_tokens is None else int(prev_tokens[i])
            zi = U[i] + w2 @ w.rows("markov_head.markov_w1.weight", [prev])[0]
            prevs.append(prev)
            toks.append(to_target(zi.argmax()))
            z.append(zi)
            prev = toks[-1]
        out.markov_logits, out.tokens, out.prev_tokens = torch.stack(z).numpy(), np.array(toks), np.array(prevs)
    else:
        out.tokens = np.array([to_target(i) for i in U.argmax(1)], dtype=np.int64)
        out.prev_tokens = np.array([anchor, *out.tokens[:-1]], dtype=np.int64)
    if hp["has_confidence"]:
        cw, cb = w.get("confidence_head.proj.weight")[0], w.get("confidence_head.proj.bias")[0]
        inp = hidden[rows]
        if cw.numel() > inp.shape[1]:
            inp = torch.cat([inp, w.rows("markov_head.markov_w1.weight", [int(t) for t in out.prev_tokens])], 1)
        out.confidence_logits = (inp @ cw + cb).numpy()
    return out


# ============================================================================================== EAGLE-3
@dataclass
class TorchEagle3:
    """Reference outputs of an EAGLE-3 prefill and chain."""

    prefill_hidden: np.ndarray
    step_hidden: np.ndarray
    logits: np.ndarray
    tokens: np.ndarray


@torch.no_grad()
def eagle3_forward(d: HFDraft, features: np.ndarray, tokens: np.ndarray, steps: int,
                   forced_tokens: np.ndarray | None = None) -> TorchEagle3:
    """EAGLE-3 (checkpoints.md §4.4): fc over the 3 taps, one Llama layer on ``[norm(emb); norm(h)]``, causal over
    the draft's own positions, logits over the draft vocab, then chained steps feeding back the pre-norm hidden."""
    with _threads_for(d):
        return _eagle3_forward(d, features, tokens, steps, forced_tokens)


def _eagle3_forward(d: HFDraft, features: np.ndarray, tokens: np.ndarray, steps: int,
                    forced_tokens: np.ndarray | None) -> TorchEagle3:
    hp, w, p = d.hp, d.weights, d.prefix
    eps, nh, nkv, hd = hp["eps"], hp["n_head"], hp["n_head_kv"], hp["head_dim"]
    L, freqs = _layer(d, p), inv_freq(hp)
    g = torch.from_numpy(np.asarray(features, dtype=np.float32))
    if hp["norm_before_fc"]:
        g = rms(g, w.get("input_norm.weight"), eps)
    h_in, toks = g @ w.get("fc.weight").T, [int(t) for t in tokens]
    off = w.get("d2t").long() if w.has("d2t") else None
    norm_w = w.get("norm.weight")
    logits: list[torch.Tensor] = []
    chosen: list[int] = []

    def run(h: torch.Tensor, ids: list[int]) -> torch.Tensor:   # full causal recompute over every position so far
        N = h.shape[0]
        hn = rms(h, L[p + "hidden_norm.weight"], eps)
        z = torch.cat([rms(_embed(d, ids), L[p + "input_layernorm.weight"], eps), hn], 1)
        q = (z @ L[p + "self_attn.q_proj.weight"].T).view(N, nh, hd).transpose(0, 1)
        k = (z @ L[p + "self_attn.k_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
        v = (z @ L[p + "self_attn.v_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
        pos = torch.arange(N)
        q, k = apply_rope(q, pos, freqs, True), apply_rope(k, pos, freqs, True)
        mid = (hn if hp["norm_before_residual"] else h) + attend(q, k, v, torch.ones(N, N).tril().bool()) @ L[p + "self_attn.o_proj.weight"].T
        return mid + swiglu(rms(mid, L[p + "post_attention_layernorm.weight"], eps), L, p)

    out = run(h_in, toks)
    prefill = out.clone()
    for s in range(steps):
        if s > 0:
            nxt = chosen[-1] if forced_tokens is None else int(forced_tokens[s - 1])
            h_in, toks = torch.cat([h_in, out[-1:]]), toks + [nxt]
            out = run(h_in, toks)
        zs = (rms(out[-1:], norm_w, eps) @ w.get("lm_head.weight").T)[0]
        di = int(zs.argmax())
        logits.append(zs)
        chosen.append(di + int(off[di]) if off is not None else di)
    T = features.shape[0]
    return TorchEagle3(prefill.numpy(), out[T:].numpy(), torch.stack(logits).numpy(), np.array(chosen, dtype=np.int64))
