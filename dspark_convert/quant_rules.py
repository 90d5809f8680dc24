"""Loader rules of per-tensor quantization companions and of ``general.tensor_extra`` (llama.cpp b11434).

- ``src/llama-model.cpp`` (after each arch's own tensors): for every per-layer linear the arch created (q, k, v,
  output, gate, down, up), an optional ``<name>.scale`` and ``<name>.input_scale`` of shape {1}.
- the draft arch's own loader (``src/models/``): optional root ``fc.scale`` {1} and ``markov_w2.scale`` {1}; no
  ``input_scale`` for them (a file holding ``fc.input_scale`` fails with "wrong number of tensors").
- ``llama_prec_policy::load`` (``llama-model.cpp``): ``general.tensor_extra.prec_a4`` must be a BOOL array of the
  length of ``general.tensor_extra.name`` (else loading throws); names are matched to tensors, unknown ones
  ignored (a warning here: a W4A16 tensor the list misses runs with 4-bit activations on Blackwell).

Knows no draft family: it adds expectations for the tensors another rule builder already expects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import schema as S
from .gguf_constants import QT, VT

if TYPE_CHECKING:
    from .check import _Checker

TENSOR_EXTRA_NAME = "general.tensor_extra.name"
TENSOR_EXTRA_PREC_A4 = "general.tensor_extra.prec_a4"
#: per-layer linears whose ``.scale`` / ``.input_scale`` the generic loader pass creates
LAYER_LINEARS = (S.L_ATTN_Q, S.L_ATTN_K, S.L_ATTN_V, S.L_ATTN_OUT, S.L_FFN_GATE, S.L_FFN_DOWN, S.L_FFN_UP)
#: root linears with an optional ``.scale`` (the draft arch's loader)
ROOT_SCALED = (S.T_FC, S.T_MARKOV_W2)


def companion_rules(c: _Checker) -> None:
    """Expect the optional {1} companions of the linears the file's rules already expect."""
    r = c.rules
    for name in list(r.expected):
        base = name.removesuffix(".weight")
        if name.startswith(S.LAYER_PREFIX.split("{")[0]) and name.split(".", 2)[-1] in LAYER_LINEARS:
            r.expect(base + ".scale", (1,), "a per-tensor weight scale")
            r.expect(base + ".input_scale", (1,), "a per-tensor activation scale")
        elif name in ROOT_SCALED:
            r.expect(base + ".scale", (1,), "a per-tensor weight scale")
    # their type: the 1-D tensors' F32 rule of check._tensor_rules


def tensor_extra_rules(c: _Checker) -> None:
    """``general.tensor_extra.name`` / ``.prec_a4``: parallel arrays (STRING / BOOL), names of tensors of the file,
    sorted and unique as upstream writes them, and every NVFP4 tensor's flag explained."""
    names_kv, prec_kv = c.kv.get(TENSOR_EXTRA_NAME), c.kv.get(TENSOR_EXTRA_PREC_A4)
    if names_kv is None:
        fp4 = [t.name for t in c.plan.tensors if t.ggml_type == QT.NVFP4]
        if fp4 and prec_kv is None:
            c.warn(TENSOR_EXTRA_NAME, "tensor-extra", f"is absent: llama.cpp runs the {len(fp4)} NVFP4 tensors with "
                   "4-bit activations (W4A4) on Blackwell; right for an NVFP4 (W4A4) checkpoint, wrong for W4A16 "
                   "(verify compares the arrays with the checkpoint's quantization config)")
        if prec_kv is not None:
            c.warn(TENSOR_EXTRA_PREC_A4, "tensor-extra", f"is present without {TENSOR_EXTRA_NAME}; llama.cpp ignores it")
        return
    if names_kv.type != VT.ARRAY or names_kv.sub_type != VT.STRING:
        c.err(TENSOR_EXTRA_NAME, "tensor-extra", f"is {names_kv.describe()}, expected ARRAY[STRING]")
        return
    names = [str(n) for n in names_kv.value]
    if prec_kv is None or prec_kv.type != VT.ARRAY or prec_kv.sub_type != VT.BOOL:
        c.err(TENSOR_EXTRA_PREC_A4, "tensor-extra", f"is {'missing' if prec_kv is None else prec_kv.describe()}; "
              "llama.cpp throws \"general.tensor_extra.prec_a4 must be a bool array\"")
        return
    if len(prec_kv.value) != len(names):
        c.err(TENSOR_EXTRA_PREC_A4, "tensor-extra", f"has {len(prec_kv.value)} values for {len(names)} names; llama.cpp "
              "throws \"tensor/value length mismatch\"")
        return
    unknown = [n for n in names if n not in c.tensors]
    if unknown:
        c.warn(TENSOR_EXTRA_NAME, "tensor-extra", f"names '{unknown[0]}', which is not a tensor of the file "
               f"(llama.cpp ignores it){f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}")
    if names != sorted(set(names)):
        c.warn(TENSOR_EXTRA_NAME, "tensor-extra", "is not sorted and unique (upstream writes sorted names)")
    not_fp4 = [n for n in names if n in c.tensors and c.tensors[n].ggml_type != QT.NVFP4]
    if not_fp4:
        c.warn(TENSOR_EXTRA_NAME, "tensor-extra", f"names '{not_fp4[0]}', which is not NVFP4 (the flag only matters "
               "for 4-bit weights)")
