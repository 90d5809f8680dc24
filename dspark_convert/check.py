"""The loader rules of llama.cpp (contract §7, §2.6, §11) applied to a :class:`Plan`.

One function, :func:`check_plan`, runs before every write and behind ``dspark-convert check FILE`` (where the
plan is read back from a GGUF file made by any tool). Each finding names the key or tensor and the rule.

The rulebook reads in four parts: :func:`_key_rules` (every arch), one rule builder per loader variant
(:func:`_dflash_rules`, :func:`_eagle3_rules`; listed in :data:`LOADER_VARIANTS`), :func:`_layer_rules` and
:func:`_tensor_rules`. Builders fill a :class:`Rules` table (expected shape, why, required) from the file's
named dimensions (:class:`Dims`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

from . import schema as S
from .dsv4_rules import dsv4_rules
from .gguf_constants import QT, VT
from .gguffile.options import RemoteOptions
from .gguffile.packed import PackedStrings
from .plan import KV, Plan, TensorSpec
from .variants import gguf_variant


@dataclass(frozen=True)
class Finding:
    """One rule violation (``level`` error) or a note on something that loads but misbehaves (warning)."""

    level: str
    subject: str
    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.subject}: {self.message} [{self.rule}]"


def _key_type_name(name: str, arch: str) -> VT | None:
    if name in S.KEY_TYPES:
        return S.KEY_TYPES[name]
    tpl = name.replace(arch + ".", "{arch}.", 1)
    return S.KEY_TYPES.get(tpl)


#: integer GGUF value types and the values they hold (an out-of-range value would fail inside the GGUF writer)
_INT_RANGES = {VT.UINT8: (0, 2**8 - 1), VT.INT8: (-2**7, 2**7 - 1), VT.UINT16: (0, 2**16 - 1),
               VT.INT16: (-2**15, 2**15 - 1), VT.UINT32: (0, 2**32 - 1), VT.INT32: (-2**31, 2**31 - 1),
               VT.UINT64: (0, 2**64 - 1), VT.INT64: (-2**63, 2**63 - 1)}


def _out_of_range(kv: KV) -> object | None:
    """The first value of an integer KV (or integer array) that its GGUF type cannot hold, else None."""
    typ = kv.sub_type if kv.type == VT.ARRAY else kv.type
    rng = _INT_RANGES.get(typ) if typ is not None else None
    if rng is None:
        return None
    values = kv.value if kv.type == VT.ARRAY else [kv.value]
    if values and set(map(type, values)) == {int}:  # the common case (token types: 150k ints), checked in bulk
        if rng[0] <= min(values) and max(values) <= rng[1]:
            return None
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral) or not rng[0] <= int(v) <= rng[1]:
            return v
    return None


def _int(value: Any) -> int | None:
    """A dimension read from a KV: the value when it is an integer, else None (a file may hold any type)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shape(*dims: int | None) -> tuple[int, ...] | None:
    """A shape to compare, or None (not compared) when a dimension is unknown."""
    known = tuple(d for d in dims if d is not None)
    return known if len(known) == len(dims) else None


def _mul(a: int | None, b: int | None) -> int | None:
    """``a * b`` when both are known and non-zero, else unknown."""
    return a * b if a and b else None


@dataclass(frozen=True)
class Dims:
    """The named dimensions of a file, read from its KVs (None when absent or not an integer)."""

    hidden: int | None  # {arch}.embedding_length
    n_head: int | None
    n_head_kv: int | None  # defaults to n_head
    head_dim: int | None  # {arch}.attention.key_length, else hidden / n_head
    n_layer: int | None
    n_ff: int | None  # feed_forward_length
    n_tokens: int | None  # entries of tokenizer.ggml.tokens

    @classmethod
    def of(cls, kv: dict[str, KV], arch: str) -> Dims:
        def val(tpl: str) -> Any:
            k = kv.get(tpl.format(arch=arch))
            return None if k is None else k.value

        hidden, n_head = _int(val(S.EMBEDDING_LENGTH)), _int(val(S.HEAD_COUNT))
        tokens = kv.get(S.TOKENIZER_TOKENS)
        n_head_kv, key_length = val(S.HEAD_COUNT_KV), val(S.KEY_LENGTH)  # the defaults apply only when these are unset
        return cls(hidden=hidden, n_head=n_head, n_head_kv=_int(n_head_kv) if n_head_kv else n_head,
                   head_dim=_int(key_length) if key_length else (hidden // n_head if hidden is not None and n_head else None),
                   n_layer=_int(val(S.BLOCK_COUNT)), n_ff=_int(val(S.FEED_FORWARD_LENGTH)),
                   n_tokens=len(tokens.value) if tokens is not None and isinstance(tokens.value, (list, tuple, PackedStrings))
                   else None)


@dataclass
class Rules:
    """What the loader creates for one file: each tensor's expected numpy shape (None: any), where that shape
    comes from (for messages), and which tensors it requires. Built by one rule builder per loader variant."""

    expected: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)

    def expect(self, name: str, shape: tuple[int, ...] | None, why: str | None = None, *, required: bool = False) -> None:
        self.expected[name] = shape
        if why is not None:
            self.why[name] = why
        if required:
            self.required.add(name)


@dataclass
class _Checker:
    """The state a rule builder works on: the plan's keys and tensors, its dimensions, the rules, the findings."""

    plan: Plan
    dims: Dims
    kv: dict[str, KV]
    tensors: dict[str, TensorSpec]
    rules: Rules = field(default_factory=Rules)
    findings: list[Finding] = field(default_factory=list)

    def err(self, subject: str, rule: str, msg: str) -> None:
        self.findings.append(Finding("error", subject, rule, msg))

    def warn(self, subject: str, rule: str, msg: str) -> None:
        self.findings.append(Finding("warning", subject, rule, msg))

    def key(self, tpl: str) -> str:
        return tpl.format(arch=self.plan.arch)

    def val(self, tpl: str) -> Any:
        """A KV value (any type: a file may hold anything), None when absent."""
        k = self.kv.get(self.key(tpl))
        return None if k is None else k.value


# ---------------------------------------------------------------------------------------------- key rules
def _key_rules(c: _Checker) -> None:
    """Value types and ranges of every known key, the keys every arch requires, the tokenizer and special ids."""
    for k in c.plan.kvs:
        want = _key_type_name(k.name, c.plan.arch)
        if want is not None and k.type != want:
            c.err(k.name, "key-type", f"has GGUF type {k.describe()}, expected {want.name}")
        elif want == VT.ARRAY and k.name in S.ARRAY_ELEMENT_TYPES and k.sub_type not in S.ARRAY_ELEMENT_TYPES[k.name]:
            allowed = "/".join(t.name for t in S.ARRAY_ELEMENT_TYPES[k.name])
            c.err(k.name, "array-type", f"has element type {k.describe()}, expected ARRAY[{allowed}]")
        bad_value = _out_of_range(k)
        if bad_value is not None:
            c.err(k.name, "key-range", f"holds {bad_value!r}, which a {k.describe()} value cannot hold")
    for tpl in (S.CONTEXT_LENGTH, S.EMBEDDING_LENGTH, S.BLOCK_COUNT, S.RMS_EPS):
        if c.key(tpl) not in c.kv:
            c.err(c.key(tpl), "required-key", "is missing (llama.cpp: \"key not found in model\")")
    for key in (S.TOKENIZER_MODEL, S.TOKENIZER_TOKENS):
        if key not in c.kv:
            c.err(key, "tokenizer", "is missing (llama.cpp cannot load a model without a tokenizer)")
    if c.val(S.TOKENIZER_MODEL) == "gpt2" and S.TOKENIZER_MERGES not in c.kv:
        c.err(S.TOKENIZER_MERGES, "tokenizer", "is missing; a gpt2 (BPE) tokenizer needs merges")
    n_tokens = c.dims.n_tokens
    for type_name, key in S.SPECIAL_TOKEN_KEYS.items():
        value = c.kv[key].value if key and key in c.kv else None
        if n_tokens is not None and isinstance(value, int) and value >= n_tokens:
            c.findings.append(Finding("error" if type_name == "mask" else "warning", key, "special-id",
                                      f"is {value}, outside the {n_tokens} tokens (llama.cpp ignores it: 'bad special token')"))
    if not c.plan.tensors:
        c.err("tensors", "tensor-count", "the file has no tensors (a metadata-only file is not a usable draft)")


# ---------------------------------------------------------------------------------------------- hyperparameter values
def _hparam_rules(c: _Checker) -> None:
    """Values the loader accepts but the math cannot use. A 0 here is not "unknown": llama.cpp divides by the head
    counts (``n_embd / n_head`` is the head size, ``n_head / n_head_kv`` the GQA ratio), sizes tensors by the key
    and value lengths, divides by ``sqrt(mean + eps)`` in every RMS norm, and raises ``freq_base`` to powers
    (and scales positions by ``1 / factor``) for RoPE."""
    for tpl, what in ((S.HEAD_COUNT, "the head size is embedding_length / head_count"),
                      (S.HEAD_COUNT_KV, "the GQA ratio is head_count / head_count_kv"),
                      (S.KEY_LENGTH, "the K projection has head_count x key_length rows"),
                      (S.VALUE_LENGTH, "the V projection has head_count_kv x value_length rows")):
        v = c.val(tpl)
        if isinstance(v, int) and not isinstance(v, bool) and v <= 0:
            c.err(c.key(tpl), "hparam-value", f"is {v}, expected a positive integer ({what}; llama.cpp divides or "
                  "sizes tensors by it)")
    n_head, n_head_kv = c.val(S.HEAD_COUNT), c.val(S.HEAD_COUNT_KV)
    if (isinstance(n_head, int) and isinstance(n_head_kv, int) and n_head > 0 and n_head_kv > 0
            and n_head % n_head_kv):
        c.err(c.key(S.HEAD_COUNT_KV), "hparam-value", f"is {n_head_kv}, which does not divide head_count {n_head} "
              "(grouped-query attention shares each K/V head among head_count / head_count_kv query heads)")
    for tpl, what in ((S.RMS_EPS, "RMS norm divides by sqrt(mean(x^2) + eps)"),
                      (S.ROPE_FREQ_BASE, "RoPE angles are position / freq_base^(2i/d)"),
                      (S.ROPE_FREQ_BASE_SWA, "RoPE angles are position / freq_base^(2i/d)"),
                      (S.ROPE_SCALING_FACTOR, "scaled RoPE divides positions by the factor")):
        v = c.val(tpl)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (math.isfinite(v) and v > 0):
            c.err(c.key(tpl), "hparam-value", f"is {v}, expected a finite positive number ({what})")


# ---------------------------------------------------------------------------------------------- per-arch rules
def _dflash_rules(c: _Checker) -> int | None:
    """DFlash / DSpark (contract §7.1, §7.3): keys, the global tensors and the Markov / confidence heads.

    Returns the input width of the layers' q/k/v projections (the hidden size).
    """
    hidden, n_tokens = c.dims.hidden, c.dims.n_tokens
    taps = c.val(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or not taps:
        c.err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
    window = c.val(S.DFLASH_SLIDING_WINDOW)
    if isinstance(window, int) and window > 0:
        pattern = c.kv.get(S.DFLASH_SLIDING_WINDOW_PATTERN)
        if pattern is None or pattern.type != VT.ARRAY:
            c.err(S.DFLASH_SLIDING_WINDOW_PATTERN, "required-key", "must be an array when sliding_window > 0")
        elif c.dims.n_layer is not None and len(pattern.value) != c.dims.n_layer:
            c.err(S.DFLASH_SLIDING_WINDOW_PATTERN, "shape",
                  f"has {len(pattern.value)} entries, expected block_count {c.dims.n_layer}")
    if S.TOKENIZER_MASK_ID not in c.kv:
        c.warn(S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1")
    n_taps = len(taps) if isinstance(taps, (list, tuple)) else None
    w1 = c.tensors.get(S.T_MARKOV_W1)
    markov_rank = w1.shape[1] if w1 is not None and len(w1.shape) == 2 else None
    d2t = c.tensors.get(S.T_D2T)
    n_draft_vocab = d2t.shape[0] if d2t is not None else n_tokens
    vocab_what = f"{n_draft_vocab} draft tokens (d2t entries)" if d2t is not None else f"{n_draft_vocab} tokens"
    r = c.rules
    r.expect(S.T_FC, _shape(hidden, _mul(n_taps, hidden)), f"ne[0] = {n_taps} target layers x hidden_size {hidden}",
             required=True)
    r.expect(S.T_ENC_NORM, _shape(hidden), required=True)
    r.expect(S.T_OUTPUT_NORM, _shape(hidden), required=True)
    r.expect(S.T_TOKEN_EMBD, _shape(n_tokens or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {n_tokens} tokens")
    r.expect(S.T_OUTPUT, _shape(n_draft_vocab or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {vocab_what}")
    r.expect(S.T_D2T, None)
    r.expect(S.T_FC_SCALE, (1,))
    r.why[S.T_MARKOV_W1] = f"ne[0] = Markov rank {markov_rank}, ne[1] = {n_tokens} tokens"
    r.why[S.T_MARKOV_W2] = f"ne[0] = Markov rank {markov_rank}, ne[1] = {vocab_what}"
    r.why[S.T_CONF_W] = f"ne[0] = hidden_size {hidden} + Markov rank {markov_rank}"
    if w1 is not None:
        if S.DFLASH_BLOCK_SIZE not in c.kv:
            c.err(S.DFLASH_BLOCK_SIZE, "required-key", "is missing; the DSpark graph asserts it when Markov tensors exist")
        r.expect(S.T_MARKOV_W1, _shape(n_tokens or None, markov_rank))
        r.expect(S.T_MARKOV_W2, _shape(n_draft_vocab or None, markov_rank), required=True)
        # optional since upstream b10705 (vanilla-Markov exports ship without a confidence head)
        r.expect(S.T_CONF_W, _shape(1, hidden + markov_rank if hidden and markov_rank else None))
        r.expect(S.T_CONF_B, (1,))
    else:
        for name in (S.T_MARKOV_W2, S.T_CONF_W, S.T_CONF_B):
            if name in c.tensors:
                c.err(name, "extra-tensor", "is present without markov_w1.weight; llama.cpp would not create it")
    return hidden


def _eagle3_rules(c: _Checker) -> int | None:
    """EAGLE-3 (contract §7.2): keys, one layer, the global tensors.

    Returns the input width of the layer's q/k/v projections (2 x hidden: embedding and hidden state).
    """
    hidden = c.dims.hidden
    taps = c.val(S.EAGLE3_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or len(taps) != 3:
        c.err(S.EAGLE3_TARGET_LAYERS, "required-key", f"must have exactly 3 entries, found {None if taps is None else len(taps)}")
    if c.val(S.EAGLE3_TARGET_HIDDEN_SIZE) is None:
        c.err(S.EAGLE3_TARGET_HIDDEN_SIZE, "required-key", "is missing (llama.cpp requires it)")
    target_hidden = _int(c.val(S.EAGLE3_TARGET_HIDDEN_SIZE))
    if c.val(S.BLOCK_COUNT) not in (None, 1):
        c.err(c.key(S.BLOCK_COUNT), "eagle3", f"is {c.val(S.BLOCK_COUNT)}; the EAGLE-3 graph needs exactly 1 layer")
    d2t = c.tensors.get(S.T_D2T)
    n_draft_vocab = d2t.shape[0] if d2t is not None else None
    norm_before_fc = bool(c.val(S.EAGLE3_NORM_BEFORE_FC))
    n_rot = _int(c.val(S.ROPE_DIMENSION_COUNT)) if c.val(S.ROPE_DIMENSION_COUNT) else c.dims.head_dim
    r = c.rules
    r.expect(S.T_FC, _shape(hidden, _mul(3, target_hidden)) if hidden else None,
             f"ne[0] = 3 target layers x target_hidden_size {target_hidden}", required=True)
    r.expect(S.T_OUTPUT_NORM, _shape(hidden), required=True)
    r.expect(S.T_OUTPUT, _shape(n_draft_vocab or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {n_draft_vocab} d2t entries")
    r.expect(S.T_TOKEN_EMBD, None)
    r.expect(S.T_D2T, None)
    r.expect(S.T_ROPE_FREQS, _shape(n_rot // 2 if n_rot else None))
    if norm_before_fc:
        r.expect(S.T_ENC_NORM, _shape(_mul(3, target_hidden)), required=True)
    out = c.tensors.get(S.T_OUTPUT)
    if out is not None and d2t is None and c.dims.n_tokens and out.shape[0] != c.dims.n_tokens:
        c.err(S.T_OUTPUT, "d2t", f"has {out.shape[0]} rows (a reduced vocabulary) but there is no d2t tensor")
    embd = c.tensors.get(S.T_TOKEN_EMBD)
    if embd is not None and hidden and embd.shape[-1] != hidden:
        c.err(S.T_TOKEN_EMBD, "shape", f"has shape {list(embd.ne)}, expected ne[0] = {hidden}")
    return 2 * hidden if hidden is not None else None


def _layer_count(c: _Checker, n_layer: int) -> int:
    """The layers to expect: ``block_count``, or for a hostile count (more layers than the file has tensors) the
    tensor count, with one finding instead of billions of expected layers."""
    if n_layer > len(c.plan.tensors):
        c.err(c.key(S.BLOCK_COUNT), "block-count", f"is {n_layer}, but the file holds only {len(c.plan.tensors)} "
              f"tensors; expected at most one layer per tensor")
        return len(c.plan.tensors)
    return n_layer


def _layer_rules(c: _Checker, in_width: int | None, in_what: str) -> None:
    """The per-layer tensors the loader creates for this arch (a Qwen3 / Llama attention + SwiGLU layer)."""
    d = c.dims
    q_rows, kv_rows = _mul(d.n_head, d.head_dim), _mul(d.n_head_kv, d.head_dim)
    q_what = f"num_attention_heads {d.n_head} x head_dim {d.head_dim}"
    kv_what = f"num_key_value_heads {d.n_head_kv} x head_dim {d.head_dim}"
    hidden = _shape(d.hidden)
    shapes: dict[str, tuple[tuple[int, ...] | None, str]] = {
        S.L_ATTN_NORM: (hidden, f"hidden_size {d.hidden}"),
        S.L_ATTN_NORM_2: (hidden, f"hidden_size {d.hidden}"),
        S.L_FFN_NORM: (hidden, f"hidden_size {d.hidden}"),
        S.L_ATTN_Q: (_shape(q_rows, in_width or None), f"ne[1] = {q_what}, ne[0] = {in_what}"),
        S.L_ATTN_K: (_shape(kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
        S.L_ATTN_V: (_shape(kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
        S.L_ATTN_OUT: (_shape(d.hidden, q_rows), f"ne[0] = {q_what}"),
        S.L_ATTN_Q_NORM: (_shape(d.head_dim), f"head_dim {d.head_dim}"),
        S.L_ATTN_SINKS: (_shape(d.n_head), f"num_attention_heads {d.n_head}"),
        S.L_ATTN_K_NORM: (_shape(d.head_dim), f"head_dim {d.head_dim}"),
        S.L_ATTN_SINKS: (_shape(d.n_head), f"num_attention_heads {d.n_head}"),
        S.L_FFN_GATE: (_shape(d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
        S.L_FFN_UP: (_shape(d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
        S.L_FFN_DOWN: (_shape(d.hidden, d.n_ff or None), f"ne[0] = intermediate_size {d.n_ff}"),
    }
    for i in range(_layer_count(c, d.n_layer or 0)):
        for short, required in S.LOADER_LAYER_TENSORS[c.plan.arch].items():
            shape, why = shapes[short]
            c.rules.expect(S.LAYER_PREFIX.format(bid=i) + short, shape, why, required=required)


def _tensor_rules(c: _Checker) -> None:
    """Every tensor against the rules: required ones present, no extras, shapes and types as the loader asserts."""
    rules = c.rules
    for name in sorted(rules.required - c.tensors.keys()):
        c.err(name, "required-tensor", "is missing (llama.cpp: \"check_tensor_dims: tensor not found\")")
    for t in c.plan.tensors:
        if t.name not in rules.expected:
            c.err(t.name, "extra-tensor", "is not a tensor llama.cpp creates for this arch (loading fails with \"wrong number of tensors\")")
            continue
        want = rules.expected[t.name]
        if want is not None and tuple(t.shape) != want:
            hint = f" ({rules.why[t.name]})" if t.name in rules.why else ""
            c.err(t.name, "shape", f"has ggml shape {list(t.ne)}, expected {list(reversed(want))}{hint}")
        if t.name == S.T_D2T and t.ggml_type != QT.I64:
            c.err(t.name, "dtype", f"has type {t.ggml_type.name}, expected I64 (the graph asserts it)")
        if (len(t.shape) <= 1 or t.name.endswith("_norm.weight")) and t.name != S.T_D2T and t.ggml_type != QT.F32:
            c.err(t.name, "dtype", f"has type {t.ggml_type.name}, expected F32 for norms and 1-D tensors")


def _is_dflash2(plan: Plan) -> bool:
    """llama.cpp loads a ``dflash`` file as DFlash2 when it holds ``selector_hidden.weight``."""
    return _variant(plan) == "dflash2"


def _dflash2_rules(c: _Checker) -> int | None:
    """DFlash2 (spec/upstream-b11434.md §2.1; b11434 ``src/models/dflash.cpp``): the DFlash rules, plus the conv /
    selector keys (present and positive, ``hidden % group == 0``, ``hidden >= top_k (top_k + 1)``), the
    selector and per-layer conv tensors, and a full vocabulary (no d2t)."""
    hidden = _dflash_rules(c)
    keys = {}
    for key in (S.DFLASH_BLOCK_SIZE, S.DFLASH_CONV_KERNEL_SIZE, S.DFLASH_CONV_GROUP_SIZE, S.DFLASH_SELECTOR_RANK,
                S.DFLASH_SELECTOR_TOP_K):
        v = _int(c.val(key))
        if not v or v <= 0:
            c.err(key, "required-key", "is missing or 0 (llama.cpp: \"DFlash2 model is missing conv/selector metadata\")")
        keys[key] = v if v and v > 0 else None
    group, top_k = keys[S.DFLASH_CONV_GROUP_SIZE], keys[S.DFLASH_SELECTOR_TOP_K]
    kernel, rank = keys[S.DFLASH_CONV_KERNEL_SIZE], keys[S.DFLASH_SELECTOR_RANK]
    if hidden and group and hidden % group:
        c.err(S.DFLASH_CONV_GROUP_SIZE, "dflash2", f"is {group}; hidden_size {hidden} is not a multiple of it "
              "(llama.cpp: \"DFlash2 hidden size must be divisible by conv_group_size\")")
    if hidden and top_k and hidden < top_k * (top_k + 1):
        c.err(S.DFLASH_SELECTOR_TOP_K, "dflash2", f"is {top_k}; hidden_size {hidden} is below top_k x (top_k + 1) = "
              f"{top_k * (top_k + 1)} (llama.cpp: \"DFlash2 hidden size is too small for the selector lattice\")")
    if S.T_D2T in c.tensors:
        c.err(S.T_D2T, "dflash2", "is present; DFlash2's selector scores the full vocabulary (no reduced vocabulary)")
    n_tokens = c.dims.n_tokens
    r = c.rules
    for name in (S.T_SELECTOR_PREV, S.T_SELECTOR_NEXT):
        r.expect(name, _shape(n_tokens or None, rank), f"ne[0] = selector_rank {rank}, ne[1] = {n_tokens} tokens",
                 required=True)
    r.expect(S.T_SELECTOR_HIDDEN, _shape(rank, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = selector_rank {rank}",
             required=True)
    projected = 2 * kernel * hidden // group if kernel and hidden and group and not hidden % group else None
    for i in range(_layer_count(c, c.dims.n_layer or 0)):
        p = S.LAYER_PREFIX.format(bid=i)
        for base, proj in ((S.L_ATTN_CONV_BASE, S.L_ATTN_CONV_PROJ), (S.L_FFN_CONV_BASE, S.L_FFN_CONV_PROJ)):
            r.expect(p + base, _shape(2, kernel, hidden), f"ne = [hidden_size {hidden}, conv_kernel_size {kernel}, 2]",
                     required=True)
            r.expect(p + proj, _shape(projected, hidden), f"ne[1] = 2 x conv_kernel_size {kernel} x hidden_size "
                     f"{hidden} / conv_group_size {group}", required=True)
    return hidden


def _variant(plan: Plan) -> str | None:
    """The GGUF variant of :mod:`.variants` that loads this plan (None: no variant)."""
    v = gguf_variant(lambda k: plan.arch if k == S.GENERAL_ARCHITECTURE else plan.value(k), (t.name for t in plan.tensors))
    return None if v is None else v.name


def _is_dsv4(plan: Plan) -> bool:
    """A ``dflash`` file with hyper-connections: the loader's DeepSeek-V4 DSpark branch."""
    return _variant(plan) == "dsv4"


def _dsv4_rules(c: _Checker) -> int | None:
    """DeepSeek-V4 DSpark (Appendix A as corrected by spec/dsv4-dspark.md): the DSV4 keys, every stage's
    DeepSeek-V4 block tensors and the hyper-connection head, from :func:`.dsv4_rules.dsv4_rules`."""
    taps = c.val(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or not taps:
        c.err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
    if S.TOKENIZER_MASK_ID not in c.kv:
        c.warn(S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1")
    n_layer = c.val(S.BLOCK_COUNT)
    n_layer = _layer_count(c, n_layer if isinstance(n_layer, int) and not isinstance(n_layer, bool) else 0)
    found = dsv4_rules(c.val, c.dims.n_tokens, {t.name: tuple(t.shape) for t in c.plan.tensors}, n_layer)
    for subject, rule, msg in found.findings:
        c.err(subject, rule, msg)
    for name, shape in found.expected.items():
        c.rules.expect(name, _shape(*shape) if shape is not None else None, found.why.get(name),
                       required=name in found.required)
    return None


@dataclass(frozen=True)
class LoaderVariant:
    """One way llama.cpp loads an arch: when it applies, its key and global-tensor rules, and how its layers'
    q/k/v input width is described. A new variant (e.g. a ``dflash`` file with MLA / MoE / hyper-connection
    layers) is one more entry in :data:`LOADER_VARIANTS`, ahead of the one it refines. ``generic_layers``: the
    layers are the Qwen3 / Llama ones of :func:`_layer_rules` (a variant whose rules expect its own layer tensors
    sets it False)."""

    name: str
    applies: Callable[[Plan], bool]
    rules: Callable[[_Checker], int | None]  # returns the layers' q/k/v input width
    in_what: Callable[[Dims], str]
    generic_layers: bool = True


LOADER_VARIANTS: tuple[LoaderVariant, ...] = (
    LoaderVariant("dflash-dsv4", _is_dsv4, _dsv4_rules, lambda d: f"hidden_size {d.hidden}", generic_layers=False),
    LoaderVariant("dflash2", _is_dflash2, _dflash2_rules, lambda d: f"hidden_size {d.hidden}"),
    LoaderVariant("dflash", lambda p: _variant(p) == "dflash", _dflash_rules, lambda d: f"hidden_size {d.hidden}"),
    LoaderVariant("eagle3", lambda p: _variant(p) == "eagle3", _eagle3_rules, lambda d: f"2 x hidden_size {d.hidden}"),
)


def check_plan(plan: Plan) -> list[Finding]:
    """All loader-rule findings for ``plan`` (empty list: llama.cpp's loader accepts it).

    Example:
        >>> [str(f) for f in check_plan(plan) if f.level == "error"]  # doctest: +SKIP
        []
    """
    variant = next((v for v in LOADER_VARIANTS if v.applies(plan)), None)
    if plan.arch not in S.ARCHES or variant is None:
        hint = " (a fork's arch string upstream does not load)" if plan.arch in S.FORBIDDEN_ARCHES else ""
        return [Finding("error", S.GENERAL_ARCHITECTURE, "arch", f"'{plan.arch}' is not a draft architecture llama.cpp "
                        f"loads; expected one of {', '.join(S.ARCHES)}{hint}")]
    kv = {k.name: k for k in plan.kvs}
    c = _Checker(plan, Dims.of(kv, plan.arch), kv, {t.name: t for t in plan.tensors})
    _key_rules(c)
    _hparam_rules(c)
    in_width = variant.rules(c)
    if variant.generic_layers:
        _layer_rules(c, in_width, variant.in_what(c.dims))
    _tensor_rules(c)
    return c.findings


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]


def check_file(path: str | Path, remote: RemoteOptions | None = None) -> list[Finding]:
    """``dspark-convert check FILE``: the loader rules applied to a GGUF file made by any tool.

    ``path`` may be a Hub file (``hf://ORG/REPO/file.gguf[@REV]``) or a URL: the rules need only the header,
    which is fetched with range requests (``remote`` tunes them).

    Example:
        >>> [f.subject for f in check_file("draft.gguf") if f.level == "error"]  # doctest: +SKIP
        []
    """
    from .gguffile.source import plan_from_source

    return check_plan(plan_from_source(path, remote)[0])


def stale_layout(path: str | Path, plan: Plan | None = None) -> list[Finding]:
    """``check FILE``'s ``stale-layout`` warnings: what an older upstream revision's layout lacks, each with the
    ``upgrade`` command that fixes it (:func:`dspark_convert.upgrade.staleness_findings`; empty for a current
    file). ``plan`` is the file's header when already read (local or remote), else ``path`` is read."""
    from .upgrade import PlanHeader, staleness_findings

    return staleness_findings(path, PlanHeader(plan) if plan is not None else None)
