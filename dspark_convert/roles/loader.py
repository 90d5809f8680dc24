"""The ``loader`` role's contract: what a variant's ``variants/<v>/loader.py`` builds on.

A loader module states llama.cpp's loader rules for its files (``check``). It holds:

- ``rules(c: Checker) -> int | None``: expect the variant's key and global tensors in ``c.rules`` (and add findings),
  returning the q/k/v input width of its layers (None: unknown);
- ``in_what(dims: Dims) -> str``: how that input width is described in a message;
- ``GENERIC_LAYERS`` (optional, default True): its layers are the Qwen3 / Llama ones of :func:`layer_rules`
  (a variant whose ``rules`` expect its own layer tensors sets it False).

``check`` (:func:`dspark_convert.check.check_plan`) runs the key rules of every arch, the variant's ``rules``,
:func:`layer_rules` and the tensor rules on a :class:`Checker`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import schema as S
from ..findings import Finding
from ..gguffile.packed import PackedStrings
from ..plan import KV, Plan, TensorSpec, as_int


def shape_of(*dims: int | None) -> tuple[int, ...] | None:
    """A shape to compare, or None (not compared) when a dimension is unknown."""
    known = tuple(d for d in dims if d is not None)
    return known if len(known) == len(dims) else None


def mul(a: int | None, b: int | None) -> int | None:
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

        hidden, n_head = as_int(val(S.EMBEDDING_LENGTH)), as_int(val(S.HEAD_COUNT))
        tokens = kv.get(S.TOKENIZER_TOKENS)
        n_head_kv, key_length = val(S.HEAD_COUNT_KV), val(S.KEY_LENGTH)  # the defaults apply only when these are unset
        return cls(hidden=hidden, n_head=n_head, n_head_kv=as_int(n_head_kv) if n_head_kv else n_head,
                   head_dim=as_int(key_length) if key_length else (hidden // n_head if hidden is not None and n_head else None),
                   n_layer=as_int(val(S.BLOCK_COUNT)), n_ff=as_int(val(S.FEED_FORWARD_LENGTH)),
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
class Checker:
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


# ---------------------------------------------------------------------------------------------- per-arch rules
def layer_count(c: Checker, n_layer: int) -> int:
    """The layers to expect: ``block_count``, or for a hostile count (more layers than the file has tensors) the
    tensor count, with one finding instead of billions of expected layers."""
    if n_layer > len(c.plan.tensors):
        c.err(c.key(S.BLOCK_COUNT), "block-count", f"is {n_layer}, but the file holds only {len(c.plan.tensors)} "
              f"tensors; expected at most one layer per tensor")
        return len(c.plan.tensors)
    return n_layer


def layer_rules(c: Checker, in_width: int | None, in_what: str) -> None:
    """The per-layer tensors the loader creates for this arch (a Qwen3 / Llama attention + SwiGLU layer)."""
    d = c.dims
    q_rows, kv_rows = mul(d.n_head, d.head_dim), mul(d.n_head_kv, d.head_dim)
    q_what = f"num_attention_heads {d.n_head} x head_dim {d.head_dim}"
    kv_what = f"num_key_value_heads {d.n_head_kv} x head_dim {d.head_dim}"
    hidden = shape_of(d.hidden)
    shapes: dict[str, tuple[tuple[int, ...] | None, str]] = {
        S.L_ATTN_NORM: (hidden, f"hidden_size {d.hidden}"),
        S.L_ATTN_NORM_2: (hidden, f"hidden_size {d.hidden}"),
        S.L_FFN_NORM: (hidden, f"hidden_size {d.hidden}"),
        S.L_ATTN_Q: (shape_of(q_rows, in_width or None), f"ne[1] = {q_what}, ne[0] = {in_what}"),
        S.L_ATTN_K: (shape_of(kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
        S.L_ATTN_V: (shape_of(kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
        S.L_ATTN_OUT: (shape_of(d.hidden, q_rows), f"ne[0] = {q_what}"),
        S.L_ATTN_Q_NORM: (shape_of(d.head_dim), f"head_dim {d.head_dim}"),
        S.L_ATTN_SINKS: (shape_of(d.n_head), f"num_attention_heads {d.n_head}"),
        S.L_ATTN_K_NORM: (shape_of(d.head_dim), f"head_dim {d.head_dim}"),
        S.L_ATTN_SINKS: (shape_of(d.n_head), f"num_attention_heads {d.n_head}"),
        S.L_FFN_GATE: (shape_of(d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
        S.L_FFN_UP: (shape_of(d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
        S.L_FFN_DOWN: (shape_of(d.hidden, d.n_ff or None), f"ne[0] = intermediate_size {d.n_ff}"),
    }
    for i in range(layer_count(c, d.n_layer or 0)):
        for short, required in S.LOADER_LAYER_TENSORS[c.plan.arch].items():
            shape, why = shapes[short]
            c.rules.expect(S.LAYER_PREFIX.format(bid=i) + short, shape, why, required=required)
