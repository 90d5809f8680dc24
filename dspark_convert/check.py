"""The loader rules of llama.cpp (contract §7, §2.6, §11) applied to a :class:`Plan`.

One function, :func:`check_plan`, runs before every write and behind ``dspark-convert check FILE`` (where the
plan is read back from a GGUF file made by any tool). Each finding names the key or tensor and the rule.

The rulebook reads in four parts: :func:`_key_rules` (every arch), the rule builder of the file's variant (its
``loader`` role, :func:`loader_role`; the contract is :mod:`dspark_convert.roles.loader`), ``layer_rules`` and
:func:`_tensor_rules`. Builders fill a ``Rules`` table (expected shape, why, required) from the file's named
dimensions (``Dims``).
"""

from __future__ import annotations

import math
import os
from numbers import Integral
from pathlib import Path
from types import ModuleType
from typing import Any

from . import schema as S
from .findings import Finding
from .gguf_constants import QT, VT
from .gguffile.options import RemoteOptions
from .plan import KV, Plan, as_int
from .registry import gguf_variant
from .registry.spectype import SpecType, spec_type_of
from .roles.loader import Checker, Dims


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


# ---------------------------------------------------------------------------------------------- key rules
def _key_rules(c: Checker) -> None:
    """Value types and ranges of every known key, the keys every arch requires, the tokenizer and special ids."""
    for k in c.plan.kvs:
        want = _key_type_name(k.name, c.plan.arch)
        per_layer = k.name.replace(c.plan.arch + ".", "{arch}.", 1) in S.PER_LAYER_KEYS.get(c.plan.arch, ())
        if per_layer and k.type == VT.ARRAY and k.sub_type in (want, VT.INT32):
            continue  # one value per layer (the Gemma 4 / Nemotron-H layers' KV heads and FFN widths)
        if want is not None and k.type != want:
            c.err(k.name, "key-type", f"has GGUF type {k.describe()}, expected {want.name}")
        elif want == VT.ARRAY and k.name in S.ARRAY_ELEMENT_TYPES and k.sub_type not in S.ARRAY_ELEMENT_TYPES[k.name]:
            allowed = "/".join(t.name for t in S.ARRAY_ELEMENT_TYPES[k.name])
            c.err(k.name, "array-type", f"has element type {k.describe()}, expected ARRAY[{allowed}]")
        bad_value = _out_of_range(k)
        if bad_value is not None:
            c.err(k.name, "key-range", f"holds {bad_value!r}, which a {k.describe()} value cannot hold")
    eps = S.LAYER_NORM_EPS if c.plan.arch in S.LAYER_NORM_EPS_ARCHES else S.RMS_EPS
    for tpl in (S.CONTEXT_LENGTH, S.EMBEDDING_LENGTH, S.BLOCK_COUNT, eps):
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
def _gqa_rule(c: Checker) -> None:
    """``head_count_kv`` divides ``head_count`` in every layer with attention: either key may be one number or a
    per-layer array (a 0 in either is a layer without attention, e.g. a recurrent one)."""
    n_head, n_head_kv = c.val(S.HEAD_COUNT), c.val(S.HEAD_COUNT_KV)
    if isinstance(n_head, list) or isinstance(n_head_kv, list):
        n = len(n_head) if isinstance(n_head, list) else len(n_head_kv)
        heads = n_head if isinstance(n_head, list) else [n_head] * n
        kvs = n_head_kv if isinstance(n_head_kv, list) else [n_head_kv] * n
        layers = list(zip(heads, kvs, strict=False))  # (an array of the wrong length is its own finding)
    else:
        layers = [(n_head, n_head_kv)]
    for il, (h, kv) in enumerate(layers):
        if (isinstance(h, int) and isinstance(kv, int) and not isinstance(h, bool) and not isinstance(kv, bool)
                and h > 0 and kv > 0 and h % kv):
            where = f"layer {il}: " if len(layers) > 1 else ""
            c.err(c.key(S.HEAD_COUNT_KV), "hparam-value", f"{where}is {kv}, which does not divide head_count {h} "
                  "(grouped-query attention shares each K/V head among head_count / head_count_kv query heads)")
            return


def _hparam_rules(c: Checker) -> None:
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
    _gqa_rule(c)
    for tpl, what in ((S.RMS_EPS, "RMS norm divides by sqrt(mean(x^2) + eps)"),
                      (S.ROPE_FREQ_BASE, "RoPE angles are position / freq_base^(2i/d)"),
                      (S.ROPE_FREQ_BASE_SWA, "RoPE angles are position / freq_base^(2i/d)"),
                      (S.ROPE_SCALING_FACTOR, "scaled RoPE divides positions by the factor"),
                      *POSITIVE_FLOATS):
        v = c.val(tpl)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (math.isfinite(v) and v > 0):
            c.err(c.key(tpl), "hparam-value", f"is {v}, expected a finite positive number ({what})")
    block_key = S.BLOCK_SIZE_KEY.get(c.plan.arch)
    block = ((block_key, 1, S.MAX_BLOCK_SIZE, "a block is one batch of block_size tokens, read into an int32"),) \
        if block_key else ()
    for tpl, low, high, what in (*INT_RANGES, *block):
        v = c.val(tpl)
        if isinstance(v, int) and not isinstance(v, bool) and not low <= v <= high:
            c.err(c.key(tpl), "hparam-value", f"is {v}, expected an integer in [{low}, {high}] ({what})")
    n_layer, nextn = c.val(S.BLOCK_COUNT), c.val(S.NEXTN_PREDICT_LAYERS)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (n_layer, nextn)) and nextn > n_layer:
        c.err(c.key(S.NEXTN_PREDICT_LAYERS), "hparam-value", f"is {nextn}, more than block_count {n_layer} (llama.cpp "
              "asserts nextn_predict_layers <= block_count at load: the MTP blocks are the last of the blocks)")
    for tpl, what in POSITIVE_FLOAT_ARRAYS:
        v = c.val(tpl)
        bad = [x for x in v if isinstance(x, (int, float)) and not (math.isfinite(x) and x > 0)] \
            if isinstance(v, list) else []
        if bad:
            c.err(c.key(tpl), "hparam-value", f"holds {bad[0]}, expected finite positive numbers ({what})")
    names = [t.name for t in c.plan.tensors]
    for tpl, suffixes, what in ((S.HEAD_COUNT, (".attn_q.weight",), "the head size is embedding_length / head_count"),
                                (S.FEED_FORWARD_LENGTH, (".ffn_up.weight", ".ffn_gate.weight"),
                                 "the FFN tensors have feed_forward_length rows")):
        if c.val(tpl) is None and any(n.endswith(suffixes) for n in names):
            c.err(c.key(tpl), "hparam-value", f"is missing while the file has {suffixes[0][1:]} tensors; llama.cpp "
                  f"then reads 0 ({what})")
    _rope_rule(c)
    taps_key = S.TARGET_LAYERS_KEY.get(c.plan.arch)
    taps = c.val(taps_key) if taps_key else None
    if taps_key and isinstance(taps, list) and any(isinstance(t, int) and t < 0 for t in taps):
        low = min(t for t in taps if isinstance(t, int))
        c.err(c.key(taps_key), "hparam-value", f"holds {low}, expected layer indices >= 0 (the loader indexes the "
              "target's layers with them)")


def _rope_rule(c: Checker) -> None:
    """``rope.dimension_count`` (and ``_swa``) even and at most the head size the rotation runs over: ggml's RoPE
    asserts ``n_dims <= ne0`` and ``n_dims % 2 == 0`` on each head (the loader reads the keys unchecked, so
    llama-server aborts at the first decode). The head size is ``key_length`` (``key_length_swa`` for the SWA
    layers, falling back to ``key_length``), else ``embedding_length / head_count``."""
    def ints(*tpls: str) -> int | None:
        return next((v for v in map(as_int, map(c.val, tpls)) if v is not None), None)

    emb, heads = ints(S.EMBEDDING_LENGTH), ints(S.HEAD_COUNT)
    default = emb // heads if emb is not None and heads else None
    for rope, head_keys in ((S.ROPE_DIMENSION_COUNT, (S.KEY_LENGTH,)),
                            (S.ROPE_DIMENSION_COUNT_SWA, (S.KEY_LENGTH_SWA, S.KEY_LENGTH))):
        n_rot, head = ints(rope), ints(*head_keys)
        head = head if head is not None else default
        if n_rot is not None and head is not None and n_rot > 0 and (n_rot > head or n_rot % 2):
            c.err(c.key(rope), "hparam-value", f"is {n_rot}, expected an even number at most the head size {head} "
                  "(ggml's RoPE asserts n_dims <= head size and n_dims % 2 == 0: llama-server aborts at the first "
                  "decode)")


#: integer keys the loader divides by, indexes with or allocates from, with their range (any arch that has them)
INT_RANGES: tuple[tuple[str, int, int, str], ...] = (
    (S.BLOCK_COUNT, 1, S.MAX_LAYERS, f"llama.cpp asserts 0 < block_count <= LLAMA_MAX_LAYERS ({S.MAX_LAYERS}) at "
     "load"),
    (S.FEED_FORWARD_LENGTH, 1, 2**31 - 1, "the FFN tensors have feed_forward_length rows"),
    (S.EXPERT_COUNT, 1, 2**31 - 1, "the expert tensors have expert_count slices"),
    (S.EXPERT_USED_COUNT, 1, 2**31 - 1, "llama.cpp asserts 0 < expert_used_count <= expert_count at load"),
    (S.EXPERT_FEED_FORWARD_LENGTH, 1, 2**31 - 1, "the expert tensors have expert_feed_forward_length rows"),
    (S.INDEXER_TOP_K, 1, 2**31 - 1, "the indexer selects top_k positions"),
    (S.INDEXER_HEAD_COUNT, 1, 2**31 - 1, "the indexer's heads"),
    (S.INDEXER_KEY_LENGTH, 1, 2**31 - 1, "the indexer's key length"),
    (S.ROPE_DIMENSION_COUNT, 1, 2**31 - 1, "RoPE rotates rope.dimension_count dimensions of each head"),
    (S.HC_COUNT, 0, 2**31 - 1, "hyper-connection streams"),
)
#: float keys that must be finite and positive (any arch that has them), besides eps / RoPE base / RoPE factor
POSITIVE_FLOATS: tuple[tuple[str, str], ...] = (
    (S.HC_EPSILON, "hyper-connection normalisation divides by it"),
    (S.EXPERT_WEIGHTS_SCALE, "the routed experts' weights are scaled by it"),
    (S.COMPRESS_ROPE_FREQ_BASE, "RoPE angles are position / freq_base^(2i/d)"),
)
#: float arrays whose every element must be finite and positive
POSITIVE_FLOAT_ARRAYS: tuple[tuple[str, str], ...] = (
    (S.SWIGLU_CLAMP_EXP, "the SwiGLU of the routed experts is clamped to it"),
    (S.SWIGLU_CLAMP_SHEXP, "the SwiGLU of the shared experts is clamped to it"),
)


def _tensor_rules(c: Checker) -> None:
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


def loader_role(plan: Plan) -> ModuleType | None:
    """The ``loader`` role (:mod:`dspark_convert.roles.loader`) of the variant that loads ``plan``; None when no
    variant loads it."""
    v = gguf_variant(lambda k: plan.arch if k == S.GENERAL_ARCHITECTURE else plan.value(k), (t.name for t in plan.tensors))
    return None if v is None else v.role("loader")


def check_plan(plan: Plan) -> list[Finding]:
    """All loader-rule findings for ``plan`` (empty list: llama.cpp's loader accepts it).

    Example:
        >>> [str(f) for f in check_plan(plan) if f.level == "error"]  # doctest: +SKIP
        []
    """
    from .variants.nextn import nextn_arch

    loader = loader_role(plan)
    kind: list[Finding] = []
    if nextn_arch(plan.arch) is not None:  # a target file with an MTP path: full, sidecar or trunk
        from .variants.nextn.loader import nextn_findings

        kind = nextn_findings(plan)
        if loader is None:  # a full target or a trunk: the nextn rules are the whole check
            return kind
        kind = [f for f in kind if f.level == "note"]  # a sidecar: what it is, then its variant's loader rules
    if plan.arch not in S.ARCHES or loader is None:
        hint = (" (a fork's arch string upstream does not load)" if plan.arch in S.FORBIDDEN_ARCHES else
                " (a target model's file? check a draft against it: 'dspark-convert check DRAFT.gguf --target FILE')"
                if any(t.name == "token_embd.weight" for t in plan.tensors) and plan.value(S.BLOCK_COUNT.format(arch=plan.arch)) is not None
                else "")
        return [Finding("error", S.GENERAL_ARCHITECTURE, "arch", f"'{plan.arch}' is not a draft architecture llama.cpp "
                        f"loads; expected one of {', '.join(S.ARCHES)}{hint}")]
    kv = {k.name: k for k in plan.kvs}
    c = Checker(plan, Dims.of(kv, plan.arch), kv, {t.name: t for t in plan.tensors})
    _key_rules(c)
    _hparam_rules(c)
    in_width = loader.rules(c)
    if getattr(loader, "GENERIC_LAYERS", True):
        c.layer_rules(in_width, loader.in_what(c.dims))
    companion_rules(c)  # optional .scale / .input_scale of the linears (NVFP4 drafts)
    tensor_extra_rules(c)
    _tensor_rules(c)
    return kind + c.findings


def spec_type(plan: Plan) -> SpecType:
    """The ``--spec-type`` llama-server needs for the file (:mod:`.registry.spectype`)."""
    kv = {k.name: k.value for k in plan.kvs}
    return spec_type_of(kv.get, [t.name for t in plan.tensors])


def spec_type_warning(st: SpecType) -> str | None:
    """A warning line when llama-server's auto-detection picks a type that drafts the file wrongly (not a loader
    finding: the file loads, and upstream writes the same)."""
    if not (st.flag_needed and st.auto_detected is not None):
        return None
    flags = "".join(" " + f for f in st.extra_flags)
    return (f"llama-server would auto-detect {st.auto_detected} for this file; serve it with --spec-type "
            f"{st.spec_type}{flags}: {st.reason}")


def upstream_writes_unloadable(f: Finding) -> bool:
    """A loader error ``--match-upstream`` writes anyway, because upstream b11434 writes it: the ``input_scale`` of
    a root NVFP4 linear (``fc`` / ``markov_w2``), which llama.cpp does not read (its file then fails to load), and
    a MiMo-V2 MTP block with separate q / k / v, which llama.cpp's ``mimo2`` MTP graph aborts on (rule
    ``mtp-graph``)."""
    return (f.rule == "extra-tensor" and f.subject.endswith(".input_scale") and not f.subject.startswith("blk.")) \
        or f.rule == "mtp-graph"


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


def stale_layout(path: str | os.PathLike[str], plan: Plan | None = None, target: Any = None) -> list[Finding]:
    """The ``stale-layout`` warnings of ``check FILE`` and ``check FILE --target TARGET``: what an older upstream
    revision's layout lacks, each with the ``upgrade`` command that fixes it
    (:func:`dspark_convert.staleness.staleness_findings`, below ``check``: the conversion is not imported; empty for
    a current file). ``plan`` is the file's header when already read (local or remote), else ``path`` is read;
    ``target`` (a :class:`~dspark_convert.staleness.TargetInfo`, or the fit path's target
    :class:`~dspark_convert.roles.fit.Side`) decides the items that depend on the target."""
    from .roles.upgrade import PlanHeader, TargetInfo
    from .staleness import staleness_findings

    info = target if target is None or isinstance(target, TargetInfo) else TargetInfo.from_side(target)
    return staleness_findings(path, PlanHeader(plan) if plan is not None else None, info)


# ============================================================================================== quantized formats
# Loader rules of per-tensor quantization companions and of ``general.tensor_extra`` (llama.cpp b11434).
#
# - ``src/llama-model.cpp`` (after each arch's own tensors): for every per-layer linear the arch created (q, k, v,
#   output, gate, down, up), an optional ``<name>.scale`` and ``<name>.input_scale`` of shape {1}.
# - the draft arch's own loader (``src/models/``): optional root ``fc.scale`` {1} and ``markov_w2.scale`` {1}; no
#   ``input_scale`` for them (a file holding ``fc.input_scale`` fails with "wrong number of tensors").
# - ``llama_prec_policy::load`` (``llama-model.cpp``): ``general.tensor_extra.prec_a4`` must be a BOOL array of the
#   length of ``general.tensor_extra.name`` (else loading throws); names are matched to tensors, unknown ones
#   ignored (a warning here: a W4A16 tensor the list misses runs with 4-bit activations on Blackwell).
#
# Knows no draft family: it adds expectations for the tensors another rule builder already expects.
TENSOR_EXTRA_NAME = "general.tensor_extra.name"
TENSOR_EXTRA_PREC_A4 = "general.tensor_extra.prec_a4"
#: per-layer linears whose ``.scale`` / ``.input_scale`` the generic loader pass creates
LAYER_LINEARS = (S.L_ATTN_Q, S.L_ATTN_K, S.L_ATTN_V, S.L_ATTN_OUT, S.L_FFN_GATE, S.L_FFN_DOWN, S.L_FFN_UP)
#: root linears with an optional ``.scale`` (the draft arch's loader)
ROOT_SCALED = (S.T_FC, S.T_MARKOV_W2)


def companion_rules(c: Checker) -> None:
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


def tensor_extra_rules(c: Checker) -> None:
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


# ---------------------------------------------------------------------------------------------- the head llama.cpp runs
def runtime_head(arch: str | None, tensor_names: set[str] | frozenset[str]) -> str:
    """Which matrix llama.cpp b11434 scores a draft with: ``"output"``, ``"token_embd"`` or ``"target"``.

    An arch of ``schema.EMBD_AS_HEAD_ARCHES`` (its loader, ``src/models/<arch>.cpp``, marks ``token_embd``
    ``TENSOR_DUPLICATED`` as the output): ``output`` if present, else ``token_embd`` if present, else the target's
    head. Any other arch: ``output`` if present, else the target's.

    Example:
        >>> runtime_head("dflash", {"token_embd.weight", "fc.weight"})
        'token_embd'
        >>> runtime_head("eagle3", {"token_embd.weight"})
        'target'
    """
    if S.T_OUTPUT in tensor_names:
        return "output"
    if arch in S.EMBD_AS_HEAD_ARCHES and S.T_TOKEN_EMBD in tensor_names:
        return "token_embd"
    return "target"


#: the loader sources of the rule: llama.cpp keeps one model file per arch
EMBD_AS_HEAD_SOURCES = ", ".join(f"src/models/{arch}.cpp" for arch in sorted(S.EMBD_AS_HEAD_ARCHES))


#: verify's note for a file llama.cpp scores with ``token_embd`` (:func:`runtime_head`)
TOKEN_EMBD_HEAD_NOTE = ("llama.cpp b11434 scores this file with token_embd.weight (output.weight is absent, "
                        f"{EMBD_AS_HEAD_SOURCES}), so the GGUF forward does too")
