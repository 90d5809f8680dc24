"""A small numpy forward of a plain Qwen3 / Llama target, for the tap features a draft reads.

Reads the Hugging Face folder (``config.json`` + safetensors) directly and runs the causal decoder in float32 over
a whole token sequence at once. It returns every layer's input (``hidden[L]`` = the input of layer ``L``,
``hidden[0]`` = the embeddings, ``hidden[n_layer]`` = the last layer's output before the final norm) and the
logits. That is what llama.cpp extracts for a draft (``llama_get_embeddings_layer_inp(ctx, L)`` for each
``L`` in the draft's ``<arch>.target_layers``, which the converter stores as the HF tap ids + 1), so :func:`tap_features` gives exactly the features llama.cpp feeds the draft.

Meant for tiny targets (the test fixtures): everything is dequantized in memory. Supported: ``Qwen3ForCausalLM``
(q/k RMSNorm per head) and ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` (optional q/k/v biases), rotate-half RoPE
with default or linear scaling, GQA, SwiGLU MLP, tied or untied head; and ``Gemma4ForCausalLM`` (the Gemma 4 text
decoder as llama.cpp's ``gemma4`` graph runs it: embeddings times ``sqrt(hidden)``, sliding and full layers with
their own head size / KV heads / RoPE, q/k RMSNorm and a weightless v RMSNorm, K used as V on full layers with
``attention_k_eq_v``, attention scale 1, the sandwich norms around attention and the GELU-tanh MLP, the per-layer
``layer_scalar``, final logit softcapping; no MoE block, per-layer inputs or KV sharing); and
``MuseGlimmerForConditionalGeneration`` (its text decoder, ``model.language_model.*``, as llama.cpp's
``muse-glimmer`` graph runs it: :func:`muse_glimmer_forward`).

Example:
    >>> out = target_forward(TargetModel("fixtures/target-qwen3"), [1, 2, 3])   # doctest: +SKIP
    >>> out.logits.shape, tap_features(out, [2, 3, 5]).shape                   # doctest: +SKIP
    ((3, 1024), (3, 192))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dspark_convert.errors import ConvertError
from dspark_convert.formats.transforms import to_float32
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.reference.ops import F32, attention, gelu_tanh, mlp, rms_norm, rope_cos_sin, rope_neox

SUPPORTED = ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM", "Gemma4ForCausalLM",
             "MuseGlimmerForConditionalGeneration")
#: the architecture whose text decoder sits under ``model.language_model`` (and its config under ``text_config``)
MUSE = "MuseGlimmerForConditionalGeneration"


class TargetModel:
    """The weights and hyperparameters of a tiny Qwen3/Llama target folder, as float32 numpy arrays."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.ckpt = Checkpoint(self.folder)
        cfg: dict[str, Any] = self.ckpt.config
        arch = (cfg.get("architectures") or ["?"])[0]
        if arch not in SUPPORTED:
            raise ConvertError(f"{self.folder}/config.json: architectures[0] is {arch!r}; the numpy target forward "
                               f"covers {', '.join(SUPPORTED)}")
        if arch == MUSE:
            cfg = {**cfg, **(cfg.get("text_config") or {})}
        self.arch = arch
        self.cfg = cfg
        self.n_layer = int(cfg["num_hidden_layers"])
        self.n_embd = int(cfg["hidden_size"])
        self.n_head = int(cfg["num_attention_heads"])
        self.n_head_kv = int(cfg.get("num_key_value_heads") or self.n_head)
        self.head_dim = int(cfg.get("head_dim") or self.n_embd // self.n_head)
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.tied = "lm_head.weight" not in self.ckpt
        if arch == "Gemma4ForCausalLM":
            _gemma4_check(self.folder, cfg)
            self.rope_theta, self.pos_scale = 0.0, 1.0
            return
        if arch == MUSE and (cfg.get("rope_parameters") or {}).get("rope_type", "default") != "default":
            raise ConvertError(f"{self.folder}/config.json: rope type "
                               f"{cfg['rope_parameters'].get('rope_type')!r} is not covered by the numpy Muse-Glimmer "
                               "forward")
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        self.rope_theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
        rtype = rope.get("rope_type", rope.get("type", "default"))
        if rtype not in ("default", "linear", None):
            raise ConvertError(f"{self.folder}/config.json: rope type {rtype!r} is not covered by the numpy target forward")
        self.pos_scale = 1.0 / float(rope["factor"]) if rtype == "linear" else 1.0

    def _full(self, name: str) -> str:
        for full in (name, f"model.{name}", f"model.language_model.{name}"):
            if full in self.ckpt:
                return full
        return name

    def w(self, name: str) -> np.ndarray:
        """Tensor ``name`` (``model.`` or ``model.language_model.`` prefix optional) as float32."""
        full = self._full(name)
        ref = self.ckpt.ref(full)
        return to_float32(np.ascontiguousarray(self.ckpt.read(full)), ref.dtype).reshape(ref.shape)

    def maybe(self, name: str) -> np.ndarray | None:
        full = self._full(name)
        return self.w(full) if full in self.ckpt else None

    @property
    def embed(self) -> np.ndarray:
        return self.w("embed_tokens.weight")

    @property
    def lm_head(self) -> np.ndarray:
        """The target's output head (the embedding matrix when tied)."""
        return self.embed if self.tied else self.w("lm_head.weight")


@dataclass
class TargetOutputs:
    """``hidden [n_layer+1, T, H]`` (layer inputs, then the last output, pre-norm) and ``logits [T, V]``."""

    hidden: np.ndarray
    logits: np.ndarray


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function in float32 (Muse-Glimmer's attention output gate)."""
    return F32(1) / (F32(1) + np.exp(-x))


def _layer(m: TargetModel, il: int, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    p = f"layers.{il}."
    T = x.shape[0]
    xn = rms_norm(x, m.w(p + "input_layernorm.weight"), m.eps)
    proj = {}
    for n, heads in (("q", m.n_head), ("k", m.n_head_kv), ("v", m.n_head_kv)):
        y = xn @ m.w(f"{p}self_attn.{n}_proj.weight").T
        b = m.maybe(f"{p}self_attn.{n}_proj.bias")
        proj[n] = (y if b is None else y + b).reshape(T, heads, m.head_dim)
    q, k, v = proj["q"], proj["k"], proj["v"]
    qn, kn = m.maybe(p + "self_attn.q_norm.weight"), m.maybe(p + "self_attn.k_norm.weight")
    if qn is not None and kn is not None:
        q, k = rms_norm(q, qn, m.eps), rms_norm(k, kn, m.eps)
    q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
    causal = np.arange(T)[None, :] <= np.arange(T)[:, None]
    x = x + attention(q, k, v, causal) @ m.w(p + "self_attn.o_proj.weight").T
    xn = rms_norm(x, m.w(p + "post_attention_layernorm.weight"), m.eps)
    return x + mlp(xn, m.w(p + "mlp.gate_proj.weight"), m.w(p + "mlp.up_proj.weight"), m.w(p + "mlp.down_proj.weight"))


def target_forward(m: TargetModel, tokens: Sequence[int]) -> TargetOutputs:
    """The causal forward over ``tokens`` (positions 0..T-1)."""
    if m.arch == "Gemma4ForCausalLM":
        return gemma4_forward(m, tokens)
    if m.arch == MUSE:
        return muse_glimmer_forward(m, tokens)
    ids = np.asarray(tokens, dtype=np.int64)
    x = m.embed[ids].astype(F32)
    cos, sin = rope_cos_sin(np.arange(ids.size), m.head_dim, m.rope_theta, pos_scale=m.pos_scale)
    hidden = [x]
    for il in range(m.n_layer):
        x = _layer(m, il, x, cos, sin)
        hidden.append(x)
    logits = rms_norm(x, m.w("norm.weight"), m.eps) @ m.lm_head.T
    return TargetOutputs(np.stack(hidden), logits.astype(F32))


# ---------------------------------------------------------------------------------------------- Gemma 4 text
def _gemma4_check(folder: Path, cfg: dict[str, Any]) -> None:
    for key, off in (("enable_moe_block", False), ("hidden_size_per_layer_input", 0), ("num_kv_shared_layers", 0)):
        if cfg.get(key) not in (None, off):
            raise ConvertError(f"{folder}/config.json: {key} is {cfg.get(key)!r}; the numpy Gemma 4 forward covers "
                               f"{off!r} only")
    for kind in set(cfg.get("layer_types") or []):
        rtype = ((cfg.get("rope_parameters") or {}).get(kind) or {}).get("rope_type", "default")
        if rtype not in ("default", "proportional"):
            raise ConvertError(f"{folder}/config.json: rope_parameters.{kind}.rope_type {rtype!r} is not covered "
                               "by the numpy Gemma 4 forward")


def gemma4_inv_freq(rope: dict[str, Any], head_dim: int) -> np.ndarray:
    """Per rotated pair the inverse frequency of a Gemma 4 layer kind's RoPE (``[head_dim/2]``): ``default``
    ``base^(-2i/d)``; ``proportional`` the same for the first ``int(partial_rotary_factor * d / 2)`` pairs and 0
    (no rotation) for the rest; both divided by ``factor``.

    Example:
        >>> gemma4_inv_freq({"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}, 16).round(4)
        array([1.    , 0.1778, 0.    , 0.    , 0.    , 0.    , 0.    , 0.    ])
    """
    base = float(rope.get("rope_theta", 10000.0))
    n = head_dim // 2
    rotated = int(float(rope.get("partial_rotary_factor", 1.0)) * head_dim // 2) if rope.get("rope_type") == \
        "proportional" else n
    inv = np.zeros(n, dtype=np.float64)
    inv[:rotated] = base ** (-np.arange(0, 2 * rotated, 2, dtype=np.float64) / head_dim)
    return inv / float(rope.get("factor", 1.0))


def _gemma4_layer(m: TargetModel, il: int, x: np.ndarray, pos: np.ndarray,
                  cache: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
    cfg, p, T = m.cfg, f"layers.{il}.", x.shape[0]
    kind = (cfg.get("layer_types") or ["full_attention"] * m.n_layer)[il]
    qn, kn = m.w(p + "self_attn.q_norm.weight"), m.w(p + "self_attn.k_norm.weight")
    d = qn.shape[0]                                  # the layer's head size (global_head_dim on full layers)
    wk = m.w(p + "self_attn.k_proj.weight")
    n_kv = wk.shape[0] // d
    wv = m.maybe(p + "self_attn.v_proj.weight")      # absent: K is V (attention_k_eq_v on full layers)
    xn = rms_norm(x, m.w(p + "input_layernorm.weight"), m.eps)
    q = rms_norm((xn @ m.w(p + "self_attn.q_proj.weight").T).reshape(T, -1, d), qn, m.eps)
    k_raw = (xn @ wk.T).reshape(T, n_kv, d)
    v = rms_norm(k_raw if wv is None else (xn @ wv.T).reshape(T, n_kv, d), None, m.eps)
    k = rms_norm(k_raw, kn, m.eps)
    theta = pos[:, None].astype(np.float64) * gemma4_inv_freq((cfg.get("rope_parameters") or {}).get(kind) or {}, d)
    cos, sin = np.cos(theta).astype(F32), np.sin(theta).astype(F32)
    q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
    if cache is not None:                            # what the layer's KV cache holds: roped keys, normed values
        cache.append((k, v))
    allowed = pos[None, :] <= pos[:, None]
    window = int(cfg.get("sliding_window") or 0)
    if kind == "sliding_attention" and window > 0:
        allowed &= (pos[:, None] - pos[None, :]) < window
    # attention scale 1: ops.attention divides by sqrt(d), so the queries are scaled up by it
    o = attention(q * F32(np.sqrt(d)), k, v, allowed) @ m.w(p + "self_attn.o_proj.weight").T
    x = x + rms_norm(o, m.w(p + "post_attention_layernorm.weight"), m.eps)
    f = rms_norm(x, m.w(p + "pre_feedforward_layernorm.weight"), m.eps)
    h = (gelu_tanh(f @ m.w(p + "mlp.gate_proj.weight").T) * (f @ m.w(p + "mlp.up_proj.weight").T)) \
        @ m.w(p + "mlp.down_proj.weight").T
    x = x + rms_norm(h, m.w(p + "post_feedforward_layernorm.weight"), m.eps)
    scalar = m.maybe(p + "layer_scalar")
    return x if scalar is None else x * scalar.reshape(-1)[0]


def gemma4_forward(m: TargetModel, tokens: Sequence[int],
                   cache: list[tuple[np.ndarray, np.ndarray]] | None = None) -> TargetOutputs:
    """The Gemma 4 text decoder over ``tokens``: ``hidden[0]`` is the scaled embeddings (the first layer's input,
    what llama.cpp taps as layer 0), the logits softcapped as the config says. ``cache`` receives each layer's
    keys (after k_norm and RoPE) and values (after the v norm), ``[T, kv heads, head dim]``: its KV cache."""
    ids = np.asarray(tokens, dtype=np.int64)
    x = (m.embed[ids] * F32(np.sqrt(m.n_embd))).astype(F32)
    pos = np.arange(ids.size)
    hidden = [x]
    for il in range(m.n_layer):
        x = _gemma4_layer(m, il, x, pos, cache)
        hidden.append(x)
    logits = rms_norm(x, m.w("norm.weight"), m.eps) @ m.lm_head.T
    cap = m.cfg.get("final_logit_softcapping")
    if cap:
        logits = np.tanh(logits / F32(cap)) * F32(cap)
    return TargetOutputs(np.stack(hidden), logits.astype(F32))


# ---------------------------------------------------------------------------------------------- Muse-Glimmer text
#: the eps of Muse-Glimmer's post-attention and post-FFN norms (llama.cpp's ``post_norm_eps``; the config's default)
MUSE_POST_NORM_EPS = 1e-8


def _muse_layer(m: TargetModel, il: int, x: np.ndarray, pos: np.ndarray, window: int) -> np.ndarray:
    cfg, p, T, d = m.cfg, f"layers.{il}.", x.shape[0], m.head_dim
    sliding = (cfg.get("layer_types") or ["full_attention"] * m.n_layer)[il] == "sliding_attention"
    post_eps = float(cfg.get("post_norm_eps", MUSE_POST_NORM_EPS))
    xn = rms_norm(x, 1.0 + m.w(p + "input_layernorm.weight"), m.eps)
    q = (xn @ m.w(p + "self_attn.q_proj.weight").T).reshape(T, m.n_head, d)
    k = (xn @ m.w(p + "self_attn.k_proj.weight").T).reshape(T, m.n_head_kv, d)
    v = (xn @ m.w(p + "self_attn.v_proj.weight").T).reshape(T, m.n_head_kv, d)
    q = rms_norm(q, None, m.eps) * F32(cfg.get("qk_scale_factor", 1.0))
    k = rms_norm(k, None, m.eps)
    if sliding:                                      # RoPE on sliding layers, NoPE on full ones
        cos, sin = rope_cos_sin(pos, d, m.rope_theta)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
    allowed = pos[None, :] <= pos[:, None]
    if sliding and window > 0:
        allowed &= (pos[:, None] - pos[None, :]) < window
    o = attention(q, k, v, allowed).reshape(T, -1) * sigmoid(xn @ m.w(p + "self_attn.gate_proj.weight").T)
    o = o @ m.w(p + "self_attn.o_proj.weight").T
    x = x + rms_norm(o, 1.0 + m.w(p + "post_attention_layernorm.weight"), post_eps)
    f = rms_norm(x, 1.0 + m.w(p + "pre_feedforward_layernorm.weight"), m.eps)
    h = mlp(f, m.w(p + "mlp.gate_proj.weight"), m.w(p + "mlp.up_proj.weight"), m.w(p + "mlp.down_proj.weight"))
    return x + rms_norm(h, 1.0 + m.w(p + "post_feedforward_layernorm.weight"), post_eps)


def muse_glimmer_forward(m: TargetModel, tokens: Sequence[int], *, window: int | None = None) -> TargetOutputs:
    """The Muse-Glimmer text decoder over ``tokens`` as llama.cpp's ``muse-glimmer`` graph runs it: the embeddings
    through a weightless RMSNorm (``hidden[0]``, what llama.cpp taps as layer 0); per layer the centered norms
    (``1 + weight``; post norms with eps 1e-8), q/k weightless RMSNorm (q times ``qk_scale_factor``), RoPE
    (rotate-half on the HF weights) with the sliding window on sliding layers and NoPE on full ones, the attention
    output gated by ``sigmoid(gate_proj(x))`` before ``o_proj``, SwiGLU MLP; the final norm, the head, times
    ``output_multiplier``, softcapped. ``window`` overrides the config's ``sliding_window`` (a deliberately wrong
    forward, for tests that must tell them apart)."""
    ids = np.asarray(tokens, dtype=np.int64)
    x = rms_norm(m.embed[ids].astype(F32), None, m.eps)
    pos = np.arange(ids.size)
    w = int(m.cfg.get("sliding_window") or 0) if window is None else window
    hidden = [x]
    for il in range(m.n_layer):
        x = _muse_layer(m, il, x, pos, w)
        hidden.append(x)
    logits = (rms_norm(x, m.w("norm.weight"), m.eps) @ m.lm_head.T) * F32(m.cfg.get("output_multiplier", 1.0))
    cap = m.cfg.get("final_logit_softcapping")
    if cap:
        logits = np.tanh(logits / F32(cap)) * F32(cap)
    return TargetOutputs(np.stack(hidden), logits.astype(F32))


def tap_features(out: TargetOutputs, gguf_layers: Sequence[int]) -> np.ndarray:
    """``[T, len(layers)*H]``: the inputs of target layers ``gguf_layers`` (the GGUF's ``*.target_layers``,
    i.e. HF tap ids + 1), concatenated in order, as llama.cpp feeds a draft that reads target features."""
    n = out.hidden.shape[0] - 1
    for L in gguf_layers:
        if not 0 <= int(L) <= n:
            raise ConvertError(f"target layer {L} out of range (the target has {n} layers)")
    return np.concatenate([out.hidden[int(L)] for L in gguf_layers], axis=1)


def greedy_generate(m: TargetModel, prompt: Sequence[int], n: int, exclude: Sequence[int] = ()) -> list[int]:
    """``n`` greedy tokens after ``prompt`` (full recompute per step; tiny targets only), never choosing a token
    of ``exclude`` (llama-server's ``ignore_eos`` bans the end-of-generation tokens the same way)."""
    seq = list(prompt)
    for _ in range(n):
        z = target_forward(m, seq).logits[-1]
        z[list(exclude)] = -np.inf
        seq.append(int(np.argmax(z)))
    return seq[len(prompt):]
