"""A small numpy forward of a plain Qwen3 / Llama target, for the tap features a draft reads.

Reads the Hugging Face folder (``config.json`` + safetensors) directly and runs the causal decoder in float32 over
a whole token sequence at once. It returns every layer's input (``hidden[L]`` = the input of layer ``L``,
``hidden[0]`` = the embeddings, ``hidden[n_layer]`` = the last layer's output before the final norm) and the
logits. That is what llama.cpp extracts for a draft (``llama_get_embeddings_layer_inp(ctx, L)`` for each
``L`` in the draft's ``dflash.target_layers`` / ``eagle3.target_layers``, which the converter stores as the HF
tap ids + 1), so :func:`tap_features` gives exactly the features llama.cpp feeds the draft.

Meant for tiny targets (the test fixtures): everything is dequantized in memory. Supported: ``Qwen3ForCausalLM``
(q/k RMSNorm per head) and ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` (optional q/k/v biases), rotate-half RoPE
with default or linear scaling, GQA, SwiGLU MLP, tied or untied head.

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

from ..errors import ConvertError
from ..hf.checkpoint import Checkpoint
from ..transforms import to_float32
from .ops import F32, attention, mlp, rms_norm, rope_cos_sin, rope_neox

SUPPORTED = ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM")


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
        self.arch = arch
        self.n_layer = int(cfg["num_hidden_layers"])
        self.n_embd = int(cfg["hidden_size"])
        self.n_head = int(cfg["num_attention_heads"])
        self.n_head_kv = int(cfg.get("num_key_value_heads") or self.n_head)
        self.head_dim = int(cfg.get("head_dim") or self.n_embd // self.n_head)
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        self.rope_theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
        rtype = rope.get("rope_type", rope.get("type", "default"))
        if rtype not in ("default", "linear", None):
            raise ConvertError(f"{self.folder}/config.json: rope type {rtype!r} is not covered by the numpy target forward")
        self.pos_scale = 1.0 / float(rope["factor"]) if rtype == "linear" else 1.0
        self.tied = "lm_head.weight" not in self.ckpt

    def w(self, name: str) -> np.ndarray:
        """Tensor ``name`` (``model.`` prefix optional) as float32."""
        full = name if name in self.ckpt else f"model.{name}"
        ref = self.ckpt.ref(full)
        return to_float32(np.ascontiguousarray(self.ckpt.read(full)), ref.dtype).reshape(ref.shape)

    def maybe(self, name: str) -> np.ndarray | None:
        full = name if name in self.ckpt else f"model.{name}"
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

    def greedy(self) -> np.ndarray:
        """The argmax token after each position."""
        return np.argmax(self.logits, axis=1)


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
    ids = np.asarray(tokens, dtype=np.int64)
    x = m.embed[ids].astype(F32)
    cos, sin = rope_cos_sin(np.arange(ids.size), m.head_dim, m.rope_theta, pos_scale=m.pos_scale)
    hidden = [x]
    for il in range(m.n_layer):
        x = _layer(m, il, x, cos, sin)
        hidden.append(x)
    logits = rms_norm(x, m.w("norm.weight"), m.eps) @ m.lm_head.T
    return TargetOutputs(np.stack(hidden), logits.astype(F32))


def tap_features(out: TargetOutputs, gguf_layers: Sequence[int]) -> np.ndarray:
    """``[T, len(layers)*H]``: the inputs of target layers ``gguf_layers`` (the GGUF's ``*.target_layers``,
    i.e. HF tap ids + 1), concatenated in order, as llama.cpp feeds a DFlash/DSpark/EAGLE-3 draft."""
    n = out.hidden.shape[0] - 1
    for L in gguf_layers:
        if not 0 <= int(L) <= n:
            raise ConvertError(f"target layer {L} out of range (the target has {n} layers)")
    return np.concatenate([out.hidden[int(L)] for L in gguf_layers], axis=1)


def greedy_generate(m: TargetModel, prompt: Sequence[int], n: int) -> list[int]:
    """``n`` greedy tokens after ``prompt`` (full recompute per step; tiny targets only)."""
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(target_forward(m, seq).greedy()[-1]))
    return seq[len(prompt):]
