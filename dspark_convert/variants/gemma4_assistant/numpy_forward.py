"""A numpy reference forward of Gemma 4 assistant files, run straight from the GGUF (the GGUF side of ``verify``).

Follows the graph of upstream llama.cpp b11434 ``src/models/gemma4-assistant.cpp`` as the MTP driver runs it
(``common/speculative.cpp``, shared-memory mode), written as equations; every value comes from the GGUF's keys and
tensors, except the three things the file does not hold, which are inputs: the target's token-embedding rows
(``e(tok)``, width ``embedding_length_out``), the target's hidden row ``h`` and the target's KV cache (the keys and
values of its last sliding and last full-attention layers, ``T`` positions ``0 .. T-1``, keys already roped).

- **pre projection** ``x = nextn.pre_projection [e(tok) * sqrt(n_backbone); h]`` (``n_backbone`` =
  ``embedding_length_out``; the embedding half first);
- **layer** (every layer, ``blk.i``): ``n = RMSNorm_attn(x)``; ``q = RMSNorm_q(n Wq)`` per head, NEOX RoPE at the
  query position ``T`` on ``rope.dimension_count`` dims (full layers: ``rope.freq_base``, divided by
  ``rope_freqs``; sliding layers: ``rope.dimension_count_swa``, ``rope.freq_base_swa``, no factors); Q-only attention
  over the cache of the layer's kind, scale 1.0, causal, a sliding layer seeing only keys with
  ``T - pos < sliding_window``; ``a = x + RMSNorm_post_attn(o Wo)``;
  ``x = (a + RMSNorm_post_ffw(down(gelu_tanh(f Wg) * f Wu))) * layer_output_scale`` with ``f = RMSNorm_ffn(a)``;
- **heads** ``y = RMSNorm_out(x)``; ``logits = token_embd y`` (llama.cpp duplicates ``token_embd`` as the output);
  ``h_nextn = nextn.post_projection y``;
- **chain**: each later step feeds the chosen token and its own ``h_nextn`` back, at the same position ``T`` and over
  the same cache (the driver's "same position for all draft tokens"); ``forced`` replaces the fed-back tokens and
  rows (verify feeds the torch side's, so that each step is compared on the same inputs).

The torch forward of the checkpoint (:mod:`.torch_forward`) is written separately, with the checkpoint's names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import schema as S
from ...errors import ConvertError
from ...reference.layers import heads, layer_keys
from ...reference.ops import F32, attention, gelu_tanh, rms_norm, rope_cos_sin, rope_neox
from ...reference.storage import round_values
from ...reference.weights import GGUFWeights

A = S.ARCH_GEMMA4_ASSISTANT
#: per-layer tensors the forward reads (``blk.N.<name>.weight``)
LAYER = ("attn_norm", "attn_q", "attn_q_norm", "attn_output", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up",
         "ffn_down", "post_ffw_norm", "layer_output_scale")
PRE, POST = "nextn.pre_projection.weight", "nextn.post_projection.weight"
SWA, FULL = "sliding", "full"


def _key(g: GGUFWeights, name: str, default: Any = None) -> Any:
    v = g.value(f"{A}.{name}")
    return default if v is None else v


def _per_layer(v: Any, n: int, what: str, path: object) -> list[int]:
    vals = [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)] * n
    if len(vals) != n:
        raise ConvertError(f"{path}: {A}.{what} has {len(vals)} entries, block_count is {n}")
    return vals


@dataclass(frozen=True)
class AssistantHParams:
    """What the graph reads of the file's keys (``embedding_length_out`` is the backbone width ``n_backbone``)."""

    n_layer: int
    n_embd: int
    n_backbone: int
    n_head: list[int]
    n_head_kv: list[int]
    head_dim: int
    head_dim_swa: int
    n_rot: int
    n_rot_swa: int
    rope_base: float
    rope_base_swa: float
    eps: float
    sliding_window: int
    swa_layers: list[bool] = field(default_factory=list)

    @classmethod
    def from_gguf(cls, g: GGUFWeights) -> AssistantHParams:
        n = int(g.need(f"{A}.block_count"))
        nextn = int(_key(g, "nextn_predict_layers", 0))
        if nextn != n:
            raise ConvertError(f"{g.path}: {A}.nextn_predict_layers is {nextn}, block_count {n}: the graph runs "
                               "nextn_predict_layers layers and every layer of the file is an assistant layer")
        swa = [bool(x) for x in g.need(f"{A}.attention.sliding_window_pattern")]
        if len(swa) != n:
            raise ConvertError(f"{g.path}: {A}.attention.sliding_window_pattern has {len(swa)} entries, block_count {n}")
        head_dim = int(g.need(f"{A}.attention.key_length"))
        head_dim_swa = int(g.need(f"{A}.attention.key_length_swa"))
        if head_dim != int(_key(g, "attention.value_length", head_dim)) or \
                head_dim_swa != int(_key(g, "attention.value_length_swa", head_dim_swa)):
            raise ConvertError(f"{g.path}: key and value head sizes differ (the loader requires them equal)")
        n_embd, n_backbone = int(g.need(f"{A}.embedding_length")), int(g.need(f"{A}.embedding_length_out"))
        if n_backbone == n_embd:
            raise ConvertError(f"{g.path}: {A}.embedding_length_out equals embedding_length ({n_embd}); the loader "
                               "requires it to carry the target's hidden size")
        base = float(g.need(f"{A}.rope.freq_base"))
        return cls(
            n_layer=n, n_embd=n_embd, n_backbone=n_backbone,
            n_head=_per_layer(g.need(f"{A}.attention.head_count"), n, "attention.head_count", g.path),
            n_head_kv=_per_layer(g.need(f"{A}.attention.head_count_kv"), n, "attention.head_count_kv", g.path),
            head_dim=head_dim, head_dim_swa=head_dim_swa,
            n_rot=int(_key(g, "rope.dimension_count", head_dim)),
            n_rot_swa=int(_key(g, "rope.dimension_count_swa", head_dim_swa)),
            rope_base=base, rope_base_swa=float(_key(g, "rope.freq_base_swa", base)),
            eps=float(g.need(f"{A}.attention.layer_norm_rms_epsilon")),
            sliding_window=int(g.need(f"{A}.attention.sliding_window")), swa_layers=swa)

    def kind(self, il: int) -> str:
        return SWA if self.swa_layers[il] else FULL

    def kv_shape(self, kind: str) -> tuple[int, int]:
        """``(kv heads, head size)`` of the target cache layer a layer of ``kind`` reads (its first such layer's)."""
        il = next((i for i in range(self.n_layer) if self.kind(i) == kind), None)
        if il is None:
            return 0, 0
        return self.n_head_kv[il], self.head_dim_swa if kind == SWA else self.head_dim


def read_hparams(g: GGUFWeights) -> AssistantHParams:
    """:meth:`AssistantHParams.from_gguf`, its refusals (keys llama.cpp would refuse) raised as ValueError: a
    failing forward of the file, not an input error."""
    try:
        return AssistantHParams.from_gguf(g)
    except ConvertError as e:
        raise ValueError(str(e)) from None


@dataclass(frozen=True)
class AssistantCase:
    """One drafting situation: the target's hidden row ``h [n_backbone]``, the last accepted token, the target's
    embedding rows (``embed(tokens) -> [n, n_backbone]``, unscaled) and its cache (``kind -> (K, V)``, each
    ``[T, kv heads, head size]``)."""

    h: np.ndarray
    token: int
    embed: Callable[[list[int]], np.ndarray]
    kv: dict[str, tuple[np.ndarray, np.ndarray]]

    @property
    def positions(self) -> int:
        return int(next(iter(self.kv.values()))[0].shape[0])


@dataclass
class AssistantOutputs:
    """Per chained step ``s``: the pre-projected row, each layer's output, the post-norm row, the logits, the
    ``h_nextn`` row; the chosen tokens and the tokens fed in."""

    pre: list[np.ndarray]
    layers: list[list[np.ndarray]]     # [step][layer] -> [1, n_embd]
    hidden: list[np.ndarray]
    logits: list[np.ndarray]
    h_next: list[np.ndarray]
    tokens: np.ndarray                 # [steps]
    inputs: np.ndarray                 # [steps]: the token of each step's embedding
    h_in: list[np.ndarray]             # [steps]: the hidden row each step was fed


#: rounds the input rows of a matmul as ggml's CPU kernels do for one weight (None: not rounded)
Rounding = Callable[[np.ndarray], np.ndarray]


#: the weight types whose matmuls round their input rows (ggml's ``vec_dot_type``), by the same rounding as storage
_ROUNDED = ("BF16", "F16", "Q8_0")


def ggml_roundings(g: GGUFWeights) -> dict[str, Rounding]:
    """Per matrix of the file, how llama.cpp's CPU matmul rounds its input rows (the weight type's ``vec_dot_type``:
    BF16, F16, Q8_0 blocks; F32 weights take F32 rows)."""
    def rounding(kind: str) -> Rounding:
        return lambda x: round_values(np.ascontiguousarray(x, F32), kind).astype(F32).reshape(x.shape)

    return {t.name: rounding(t.qtype.name) for t in g.file.tensors
            if t.qtype is not None and t.qtype.name in _ROUNDED and len(t.shape) == 2}


def _into(rnd: dict[str, Rounding], name: str, x: np.ndarray) -> np.ndarray:
    r = rnd.get(name)
    return x if r is None else r(x)


def _layer(w: dict[str, np.ndarray], hp: AssistantHParams, il: int, x: np.ndarray, T: int,
           kv: tuple[np.ndarray, np.ndarray], freqs: np.ndarray | None, rnd: dict[str, Rounding]) -> np.ndarray:
    swa = hp.swa_layers[il]
    d = hp.head_dim_swa if swa else hp.head_dim
    if w["attn_q"].shape[0] != hp.n_head[il] * d:
        raise ValueError(f"blk.{il}.attn_q.weight has {w['attn_q'].shape[0]} rows; a {'sliding' if swa else 'full'} "
                         f"layer of {hp.n_head[il]} heads of {d} needs {hp.n_head[il] * d} (check "
                         f"{A}.attention.sliding_window_pattern and the key lengths)")
    p = f"blk.{il}."
    n = _into(rnd, p + "attn_q.weight", rms_norm(x, w["attn_norm"], hp.eps))
    q = rms_norm(heads(n, w["attn_q"], hp.n_head[il], d), w["attn_q_norm"], hp.eps)
    cos, sin = rope_cos_sin(np.array([T]), hp.n_rot_swa if swa else hp.n_rot,
                            hp.rope_base_swa if swa else hp.rope_base, freq_factors=None if swa else freqs)
    q = rope_neox(q, cos, sin)
    k, v = kv
    if k.shape[1:] != (hp.n_head_kv[il], d):
        raise ValueError(f"blk.{il}: the cache holds {k.shape[1]} KV heads of {k.shape[2]}, the file's keys say "
                           f"{hp.n_head_kv[il]} of {d}")
    allowed = layer_keys(np.array([T]), np.arange(k.shape[0]), il, causal=True, window=hp.sliding_window,
                         swa_layers=hp.swa_layers)
    o = _into(rnd, p + "attn_output.weight", attention(q, k, v, allowed, scale=1.0)) @ w["attn_output"].T
    a = x + rms_norm(o, w["post_attention_norm"], hp.eps)
    f = _into(rnd, p + "ffn_up.weight", rms_norm(a, w["ffn_norm"], hp.eps))
    m = _into(rnd, p + "ffn_down.weight", gelu_tanh(f @ w["ffn_gate"].T) * (f @ w["ffn_up"].T)) @ w["ffn_down"].T
    return ((a + rms_norm(m, w["post_ffw_norm"], hp.eps)) * w["layer_output_scale"].reshape(-1)[0]).astype(F32)


def assistant_forward(g: GGUFWeights, cases: Sequence[AssistantCase], steps: int,
                      forced: Sequence[tuple[np.ndarray, list[np.ndarray] | None] | None] | None = None,
                      *, ggml_rounding: bool = False) -> list[AssistantOutputs]:
    """``steps`` chained draft steps per case; ``forced[i]`` (the tokens and, unless None, the hidden rows fed in at
    each step) replaces what the chain feeds back. ``ggml_rounding``: round every matmul's input rows as llama.cpp's
    CPU kernels do (:func:`ggml_roundings`; the three-way check's reference, not verify's)."""
    hp = read_hparams(g)
    pre = g.array(PRE)
    if pre.shape != (hp.n_embd, 2 * hp.n_backbone):
        raise ValueError(f"{g.path}: {PRE} is {list(pre.shape[::-1])}, embedding_length_out {hp.n_backbone} and "
                           f"embedding_length {hp.n_embd} imply [{2 * hp.n_backbone}, {hp.n_embd}] (llama.cpp refuses "
                           "to load it)")
    post = g.array(POST)
    if post.shape != (hp.n_backbone, hp.n_embd):
        raise ValueError(f"{g.path}: {POST} is {list(post.shape[::-1])}, expected [{hp.n_embd}, {hp.n_backbone}]")
    freqs = g.array("rope_freqs.weight") if g.has("rope_freqs.weight") else None
    if freqs is None and not all(hp.swa_layers):
        raise ValueError(f"{g.path}: no rope_freqs.weight; the loader requires it for the full-attention layers")
    rnd = ggml_roundings(g) if ggml_rounding else {}
    weights = [{n: g.array(f"blk.{il}.{n}.weight") for n in LAYER} for il in range(hp.n_layer)]
    w_norm = g.array("output_norm.weight")
    scale = F32(np.sqrt(float(hp.n_backbone)))
    outs = []
    for i, c in enumerate(cases):
        T = c.positions
        for kind, (k, _v) in c.kv.items():
            if k.shape[0] != T:
                raise ValueError(f"the {kind} cache has {k.shape[0]} positions, expected {T}")
        h = np.asarray(c.h, F32).reshape(1, -1)
        if h.shape[1] != hp.n_backbone:
            raise ValueError(f"{g.path}: {A}.embedding_length_out is {hp.n_backbone}, the target's hidden rows "
                               f"have {h.shape[1]} values")
        force = None if forced is None else forced[i]
        tok = c.token
        o = AssistantOutputs([], [], [], [], [], np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        chosen, fed = [], []
        for s in range(steps):
            if force is not None and s < len(force[0]):
                tok = int(force[0][s])
                if force[1] is not None:
                    h = np.asarray(force[1][s], F32).reshape(1, -1)
            fed.append(tok)
            o.h_in.append(h)
            e = np.asarray(c.embed([tok]), F32).reshape(1, -1) * scale
            x = (_into(rnd, PRE, np.concatenate([e, h], axis=1)) @ pre.T).astype(F32)
            o.pre.append(x)
            rows = []
            for il in range(hp.n_layer):
                x = _layer(weights[il], hp, il, x, T, c.kv[hp.kind(il)], freqs, rnd)
                rows.append(x)
            o.layers.append(rows)
            y = rms_norm(x, w_norm, hp.eps)
            o.hidden.append(y)
            logits = np.empty((1, g.shape("token_embd.weight")[0]), F32)
            yr = _into(rnd, "token_embd.weight", y)
            for a, w in g.row_chunks("token_embd.weight"):
                logits[:, a:a + w.shape[0]] = yr @ w.T
            o.logits.append(logits)
            h = (_into(rnd, POST, y) @ post.T).astype(F32)
            o.h_next.append(h)
            tok = int(np.argmax(logits[0]))
            chosen.append(tok)
        o.tokens, o.inputs = np.asarray(chosen, np.int64), np.asarray(fed, np.int64)
        outs.append(o)
    return outs
