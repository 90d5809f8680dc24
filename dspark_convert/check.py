"""The loader rules of llama.cpp (contract §7, §2.6, §11) applied to a :class:`Plan`.

One function, :func:`check_plan`, runs before every write and behind ``dspark-convert check FILE`` (where the
plan is read back from a GGUF file made by any tool). Each finding names the key or tensor and the rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from . import schema as S
from .dsv4_rules import dsv4_rules
from .plan import KV, Plan


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
    if values and all(type(v) is int for v in values):  # the common case (token types: 150k ints), checked in bulk
        if rng[0] <= min(values) and max(values) <= rng[1]:
            return None
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral) or not rng[0] <= int(v) <= rng[1]:
            return v
    return None


def check_plan(plan: Plan) -> list[Finding]:
    """All loader-rule findings for ``plan`` (empty list: llama.cpp's loader accepts it).

    Example:
        >>> [str(f) for f in check_plan(plan) if f.level == "error"]  # doctest: +SKIP
        []
    """
    out: list[Finding] = []

    def err(subject: str, rule: str, msg: str) -> None:
        out.append(Finding("error", subject, rule, msg))

    arch = plan.arch
    if arch not in S.ARCHES:
        hint = " (a fork's arch string upstream does not load)" if arch in S.FORBIDDEN_ARCHES else ""
        err(S.GENERAL_ARCHITECTURE, "arch", f"'{arch}' is not a draft architecture llama.cpp loads; expected one of {', '.join(S.ARCHES)}{hint}")
        return out
    kv = {k.name: k for k in plan.kvs}
    a = {"arch": arch}

    # --- value types of every key we know
    for k in plan.kvs:
        want = _key_type_name(k.name, arch)
        if want is not None and k.type != want:
            err(k.name, "key-type", f"has GGUF type {k.describe()}, expected {want.name}")
        elif want == VT.ARRAY and k.name in S.ARRAY_ELEMENT_TYPES and k.sub_type not in S.ARRAY_ELEMENT_TYPES[k.name]:
            allowed = "/".join(t.name for t in S.ARRAY_ELEMENT_TYPES[k.name])
            err(k.name, "array-type", f"has element type {k.describe()}, expected ARRAY[{allowed}]")
        bad_value = _out_of_range(k)
        if bad_value is not None:
            err(k.name, "key-range", f"holds {bad_value!r}, which a {k.describe()} value cannot hold")

    # Any, as KV.value: a metadata value is only known at run time (a file may hold any type); the shape
    # expressions below may build nonsense from it, and the isinstance check before comparing shapes skips those.
    def val(tpl: str) -> Any:
        k = kv.get(tpl.format(**a))
        return None if k is None else k.value

    for tpl in (S.CONTEXT_LENGTH, S.EMBEDDING_LENGTH, S.BLOCK_COUNT, S.RMS_EPS):
        if tpl.format(**a) not in kv:
            err(tpl.format(**a), "required-key", "is missing (llama.cpp: \"key not found in model\")")
    for key in (S.TOKENIZER_MODEL, S.TOKENIZER_TOKENS):
        if key not in kv:
            err(key, "tokenizer", "is missing (llama.cpp cannot load a model without a tokenizer)")
    if val(S.TOKENIZER_MODEL) == "gpt2" and S.TOKENIZER_MERGES not in kv:
        err(S.TOKENIZER_MERGES, "tokenizer", "is missing; a gpt2 (BPE) tokenizer needs merges")
    tokens = kv.get(S.TOKENIZER_TOKENS)
    n_tokens = len(tokens.value) if tokens is not None and isinstance(tokens.value, (list, tuple)) else None
    for type_name, key in S.SPECIAL_TOKEN_KEYS.items():
        if key and key in kv and n_tokens is not None and isinstance(kv[key].value, int) and kv[key].value >= n_tokens:
            level = "error" if type_name == "mask" else "warning"
            out.append(Finding(level, key, "special-id", f"is {kv[key].value}, outside the {n_tokens} tokens (llama.cpp ignores it: 'bad special token')"))

    H, nh = val(S.EMBEDDING_LENGTH), val(S.HEAD_COUNT)
    nkv = val(S.HEAD_COUNT_KV) or nh
    n_layer, F = val(S.BLOCK_COUNT), val(S.FEED_FORWARD_LENGTH)
    hd = val(S.KEY_LENGTH) or (H // nh if isinstance(H, int) and isinstance(nh, int) and nh else None)
    tensors = {t.name: t for t in plan.tensors}
    if not plan.tensors:
        err("tensors", "tensor-count", "the file has no tensors (a metadata-only file is not a usable draft)")
    # name -> numpy shape (None: any); a shape built from a missing or odd value holds a non-int and is not compared
    expected: dict[str, tuple[object, ...] | None] = {}
    why: dict[str, str] = {}  # name -> where the expected shape comes from (for shape messages)
    required: set[str] = set()

    hc_count = val(S.HC_COUNT)
    if arch == S.ARCH_DFLASH and isinstance(hc_count, int) and not isinstance(hc_count, bool) and hc_count > 0:
        # DeepSeek-V4 DSpark: the loader's hyper-connection branch (dsv4_rules.py)
        taps = val(S.DFLASH_TARGET_LAYERS)
        if not isinstance(taps, (list, tuple)) or not taps:
            err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
        if S.TOKENIZER_MASK_ID not in kv:
            out.append(Finding("warning", S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1"))
        rules = dsv4_rules(val, n_tokens, {t.name: tuple(t.shape) for t in plan.tensors})
        for subject, rule, msg in rules.findings:
            err(subject, rule, msg)
        expected.update(rules.expected)
        why.update(rules.why)
        required |= rules.required
        n_layer = 0  # the DSV4 block tensors are in `expected` already
        in_width = H
    elif arch == S.ARCH_DFLASH:
        taps = val(S.DFLASH_TARGET_LAYERS)
        if not isinstance(taps, (list, tuple)) or not taps:
            err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
        sw = val(S.DFLASH_SLIDING_WINDOW)
        if isinstance(sw, int) and sw > 0:
            pat = kv.get(S.DFLASH_SLIDING_WINDOW_PATTERN)
            if pat is None or pat.type != VT.ARRAY:
                err(S.DFLASH_SLIDING_WINDOW_PATTERN, "required-key", "must be an array when sliding_window > 0")
            elif isinstance(n_layer, int) and len(pat.value) != n_layer:
                err(S.DFLASH_SLIDING_WINDOW_PATTERN, "shape", f"has {len(pat.value)} entries, expected block_count {n_layer}")
        if S.TOKENIZER_MASK_ID not in kv:
            out.append(Finding("warning", S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1"))
        T = len(taps) if isinstance(taps, (list, tuple)) else None
        w1 = tensors.get(S.T_MARKOV_W1)
        R = w1.shape[1] if w1 is not None and len(w1.shape) == 2 else None
        d2t = tensors.get(S.T_D2T)
        Vd = d2t.shape[0] if d2t is not None else n_tokens
        required |= {S.T_FC, S.T_ENC_NORM, S.T_OUTPUT_NORM}
        expected.update({S.T_FC: (H, T * H) if T and H else None, S.T_ENC_NORM: (H,), S.T_OUTPUT_NORM: (H,),
                         S.T_TOKEN_EMBD: (n_tokens, H) if n_tokens else None, S.T_OUTPUT: (Vd, H) if Vd else None,
                         S.T_D2T: None, S.T_FC_SCALE: (1,)})
        vd_what = f"{Vd} draft tokens (d2t entries)" if d2t is not None else f"{Vd} tokens"
        why.update({S.T_FC: f"ne[0] = {T} target layers x hidden_size {H}",
                    S.T_TOKEN_EMBD: f"ne[0] = hidden_size {H}, ne[1] = {n_tokens} tokens",
                    S.T_OUTPUT: f"ne[0] = hidden_size {H}, ne[1] = {vd_what}",
                    S.T_MARKOV_W1: f"ne[0] = Markov rank {R}, ne[1] = {n_tokens} tokens",
                    S.T_MARKOV_W2: f"ne[0] = Markov rank {R}, ne[1] = {vd_what}",
                    S.T_CONF_W: f"ne[0] = hidden_size {H} + Markov rank {R}"})
        if w1 is not None:
            required |= {S.T_MARKOV_W2, S.T_CONF_W}
            if S.DFLASH_BLOCK_SIZE not in kv:
                err(S.DFLASH_BLOCK_SIZE, "required-key", "is missing; the DSpark graph asserts it when Markov tensors exist")
            expected.update({S.T_MARKOV_W1: (n_tokens, R) if n_tokens else None, S.T_MARKOV_W2: (Vd, R) if Vd else None,
                             S.T_CONF_W: (1, H + R) if H and R else None, S.T_CONF_B: (1,)})
        else:
            for name in (S.T_MARKOV_W2, S.T_CONF_W, S.T_CONF_B):
                if name in tensors:
                    err(name, "extra-tensor", "is present without markov_w1.weight; llama.cpp would not create it")
        in_width = H
    else:  # eagle3
        taps = val(S.EAGLE3_TARGET_LAYERS)
        if not isinstance(taps, (list, tuple)) or len(taps) != 3:
            err(S.EAGLE3_TARGET_LAYERS, "required-key", f"must have exactly 3 entries, found {None if taps is None else len(taps)}")
        Ht = val(S.EAGLE3_TARGET_HIDDEN_SIZE)
        if Ht is None:
            err(S.EAGLE3_TARGET_HIDDEN_SIZE, "required-key", "is missing (llama.cpp requires it)")
        if n_layer not in (None, 1):
            err(S.BLOCK_COUNT.format(**a), "eagle3", f"is {n_layer}; the EAGLE-3 graph needs exactly 1 layer")
        d2t = tensors.get(S.T_D2T)
        Vd = d2t.shape[0] if d2t is not None else None
        nbf = bool(val(S.EAGLE3_NORM_BEFORE_FC))
        required |= {S.T_FC, S.T_OUTPUT_NORM} | ({S.T_ENC_NORM} if nbf else set())
        n_rot = val(S.ROPE_DIMENSION_COUNT) or hd
        expected.update({S.T_FC: (H, 3 * Ht) if H and Ht else None, S.T_OUTPUT_NORM: (H,), S.T_OUTPUT: (Vd, H) if Vd else None,
                         S.T_TOKEN_EMBD: None, S.T_D2T: None, S.T_ROPE_FREQS: (n_rot // 2,) if n_rot else None})
        if nbf:
            expected[S.T_ENC_NORM] = (3 * Ht,) if Ht else None
        why.update({S.T_FC: f"ne[0] = 3 target layers x target_hidden_size {Ht}",
                    S.T_OUTPUT: f"ne[0] = hidden_size {H}, ne[1] = {Vd} d2t entries"})
        if S.T_OUTPUT in tensors and S.T_D2T not in tensors and n_tokens and tensors[S.T_OUTPUT].shape[0] != n_tokens:
            err(S.T_OUTPUT, "d2t", f"has {tensors[S.T_OUTPUT].shape[0]} rows (a reduced vocabulary) but there is no d2t tensor")
        if S.T_TOKEN_EMBD in tensors and H and tensors[S.T_TOKEN_EMBD].shape[-1] != H:
            err(S.T_TOKEN_EMBD, "shape", f"has shape {list(tensors[S.T_TOKEN_EMBD].ne)}, expected ne[0] = {H}")
        in_width = 2 * H if isinstance(H, int) else None

    # --- per-layer tensors
    layer_shapes = {
        "attn_norm.weight": (H,), "attn_norm_2.weight": (H,), "ffn_norm.weight": (H,),
        "attn_q.weight": (nh * hd, in_width) if nh and hd and in_width else None,
        "attn_k.weight": (nkv * hd, in_width) if nkv and hd and in_width else None,
        "attn_v.weight": (nkv * hd, in_width) if nkv and hd and in_width else None,
        "attn_output.weight": (H, nh * hd) if nh and hd else None,
        "attn_q_norm.weight": (hd,), "attn_k_norm.weight": (hd,),
        "ffn_gate.weight": (F, H) if F else None, "ffn_up.weight": (F, H) if F else None, "ffn_down.weight": (H, F) if F else None,
    }
    in_what = f"hidden_size {H}" if arch == S.ARCH_DFLASH else f"2 x hidden_size {H}"
    q_what, kv_what = f"num_attention_heads {nh} x head_dim {hd}", f"num_key_value_heads {nkv} x head_dim {hd}"
    layer_why = {
        "attn_q.weight": f"ne[1] = {q_what}, ne[0] = {in_what}", "attn_k.weight": f"ne[1] = {kv_what}, ne[0] = {in_what}",
        "attn_v.weight": f"ne[1] = {kv_what}, ne[0] = {in_what}", "attn_output.weight": f"ne[0] = {q_what}",
        "attn_q_norm.weight": f"head_dim {hd}", "attn_k_norm.weight": f"head_dim {hd}",
        "ffn_gate.weight": f"ne[1] = intermediate_size {F}", "ffn_up.weight": f"ne[1] = intermediate_size {F}",
        "ffn_down.weight": f"ne[0] = intermediate_size {F}",
    }
    for i in range(n_layer if isinstance(n_layer, int) else 0):
        for short, req in S.LOADER_LAYER_TENSORS[arch].items():
            name = S.LAYER_PREFIX.format(bid=i) + short
            expected[name] = layer_shapes[short]
            why[name] = layer_why.get(short, f"hidden_size {H}")
            if req:
                required.add(name)

    for name in sorted(required - tensors.keys()):
        err(name, "required-tensor", "is missing (llama.cpp: \"check_tensor_dims: tensor not found\")")
    for t in plan.tensors:
        if t.name not in expected:
            err(t.name, "extra-tensor", "is not a tensor llama.cpp creates for this arch (loading fails with \"wrong number of tensors\")")
            continue
        want_shape = expected[t.name]
        if want_shape is not None and all(isinstance(d, int) for d in want_shape) and tuple(t.shape) != tuple(want_shape):
            hint = f" ({why[t.name]})" if t.name in why else ""
            err(t.name, "shape", f"has ggml shape {list(t.ne)}, expected {list(reversed(want_shape))}{hint}")
        if t.name == S.T_D2T and t.ggml_type != QT.I64:
            err(t.name, "dtype", f"has type {t.ggml_type.name}, expected I64 (the graph asserts it)")
        if (len(t.shape) <= 1 or t.name.endswith("_norm.weight")) and t.name != S.T_D2T and t.ggml_type != QT.F32:
            err(t.name, "dtype", f"has type {t.ggml_type.name}, expected F32 for norms and 1-D tensors")
    return out


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]


def check_file(path: str | Path) -> list[Finding]:
    """``dspark-convert check FILE``: the loader rules applied to a GGUF file made by any tool.

    Example:
        >>> [f.subject for f in check_file("draft.gguf") if f.level == "error"]  # doctest: +SKIP
        []
    """
    from .gguffile.reader import plan_from_gguf

    return check_plan(plan_from_gguf(path))
