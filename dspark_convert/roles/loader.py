"""The ``loader`` role's contract: what a variant's ``variants/<v>/loader.py`` builds on.

A loader module states llama.cpp's loader rules for its files (``check``). It holds:

- ``rules(c: Checker) -> int | None``: expect the variant's key and global tensors in ``c.rules`` (and add findings),
  returning the q/k/v input width of its layers (None: unknown);
- ``in_what(dims: Dims) -> str``: how that input width is described in a message;
- ``GENERIC_LAYERS`` (optional, default True): its layers are the Qwen3 / Llama ones of :meth:`Checker.layer_rules`
  (a variant whose ``rules`` expect its own layer tensors sets it False).

``check`` (:func:`dspark_convert.check.check_plan`) runs the key rules of every arch, the variant's ``rules``,
:meth:`Checker.layer_rules` and the tensor rules on a :class:`Checker`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import schema as S
from ..findings import Finding
from ..gguffile.packed import PackedStrings
from ..plan import KV, Plan, TensorSpec, as_int

#: a shape a rule expects, dimension by dimension (a None dimension: unknown); None: any shape
Shape = tuple[int | None, ...] | None


def _known(shape: Shape) -> tuple[int, ...] | None:
    """``shape`` when every dimension is known, else None (not compared)."""
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(d for d in shape if d is not None)


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

    @staticmethod
    def product(*dims: int | None) -> int | None:
        """The product of ``dims`` when every one is known and non-zero, else unknown (None).

        Example:
            >>> Dims.product(4, 64), Dims.product(4, None), Dims.product(0, 64)
            (256, None, None)
        """
        out = 1
        for d in dims:
            if not d:
                return None
            out *= d
        return out


@dataclass
class Rules:
    """What the loader creates for one file: each tensor's expected numpy shape (None: any), where that shape
    comes from (for messages), and which tensors it requires. Built by one rule builder per loader variant."""

    expected: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)

    def expect(self, name: str, shape: Shape, why: str | None = None, *, required: bool = False) -> None:
        """Expect tensor ``name`` with ``shape`` (not compared when a dimension is unknown), worded by ``why``."""
        self.expected[name] = _known(shape)
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

    def layer_count(self, n_layer: int) -> int:
        """The layers to expect: ``block_count``, or for a hostile count (more layers than the file has tensors)
        the tensor count, with one finding instead of billions of expected layers."""
        n_tensors = len(self.plan.tensors)
        if n_layer > n_tensors:
            self.err(self.key(S.BLOCK_COUNT), "block-count", f"is {n_layer}, but the file holds only {n_tensors} "
                     f"tensors; expected at most one layer per tensor")
            return n_tensors
        return n_layer

    def layer_rules(self, in_width: int | None, in_what: str) -> None:
        """Expect the per-layer tensors the loader creates for this arch (a Qwen3 / Llama attention + SwiGLU
        layer) whose q/k/v take ``in_width`` inputs (described as ``in_what``)."""
        d = self.dims
        q_rows, kv_rows = Dims.product(d.n_head, d.head_dim), Dims.product(d.n_head_kv, d.head_dim)
        q_what = f"num_attention_heads {d.n_head} x head_dim {d.head_dim}"
        kv_what = f"num_key_value_heads {d.n_head_kv} x head_dim {d.head_dim}"
        hidden: Shape = (d.hidden,)
        shapes: dict[str, tuple[Shape, str]] = {
            S.L_ATTN_NORM: (hidden, f"hidden_size {d.hidden}"),
            S.L_ATTN_NORM_2: (hidden, f"hidden_size {d.hidden}"),
            S.L_FFN_NORM: (hidden, f"hidden_size {d.hidden}"),
            S.L_ATTN_Q: ((q_rows, in_width or None), f"ne[1] = {q_what}, ne[0] = {in_what}"),
            S.L_ATTN_K: ((kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
            S.L_ATTN_V: ((kv_rows, in_width or None), f"ne[1] = {kv_what}, ne[0] = {in_what}"),
            S.L_ATTN_OUT: ((d.hidden, q_rows), f"ne[0] = {q_what}"),
            S.L_ATTN_Q_NORM: ((d.head_dim,), f"head_dim {d.head_dim}"),
            S.L_ATTN_SINKS: ((d.n_head,), f"num_attention_heads {d.n_head}"),
            S.L_ATTN_K_NORM: ((d.head_dim,), f"head_dim {d.head_dim}"),
            S.L_FFN_GATE: ((d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
            S.L_FFN_UP: ((d.n_ff or None, d.hidden), f"ne[1] = intermediate_size {d.n_ff}"),
            S.L_FFN_DOWN: ((d.hidden, d.n_ff or None), f"ne[0] = intermediate_size {d.n_ff}"),
        }
        for i in range(self.layer_count(d.n_layer or 0)):
            for short, required in S.LOADER_LAYER_TENSORS[self.plan.arch].items():
                shape, why = shapes[short]
                self.rules.expect(S.LAYER_PREFIX.format(bid=i) + short, shape, why, required=required)


