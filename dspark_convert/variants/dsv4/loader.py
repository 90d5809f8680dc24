"""Loader rules of a DeepSeek-V4 DSpark file: arch ``dflash`` with ``hyper_connection.count > 0``.

llama.cpp's dflash loader takes its DeepSeek-V4 branch when ``dflash.hyper_connection.count`` is positive
(gguf-contract.md Appendix A, corrected by spec/dsv4-dspark.md): it then requires the hyper-connection, MoE,
attention and compression keys below, ``expert_gating_func`` = sqrtsoftplus, ``compress_ratios`` all 0, and creates
the DeepSeek-V4 block tensors per stage plus the hyper-connection head; it creates no ``token_embd`` / ``output``
(the target's are used), so those are extra tensors ("wrong number of tensors").

:func:`dsv4_rules` returns the expected numpy shapes (``None``: any shape), where each comes from, the required
tensors and the key findings; :mod:`dspark_convert.check` compares the tensors. Dimensions are named as in the config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import schema as S
from ...plan import as_int
from ...roles.loader import Checker, Dims

#: keys the DSV4 branch of the loader reads with "required" (Appendix A), with what each is for
REQUIRED_KEYS: tuple[tuple[str, str], ...] = (
    (S.HC_COUNT, "hyper-connection streams"),
    (S.HC_SINKHORN_ITERATIONS, "hyper-connection Sinkhorn iterations"),
    (S.HC_EPSILON, "hyper-connection epsilon"),
    (S.Q_LORA_RANK, "attention q_lora_rank"),
    (S.DFLASH_SLIDING_WINDOW, "sliding-window attention"),
    (S.EXPERT_COUNT, "routed experts (MoE tensor shapes)"),
    (S.EXPERT_USED_COUNT, "experts used per token"),
    (S.EXPERT_FEED_FORWARD_LENGTH, "expert feed-forward length"),
    (S.EXPERT_SHARED_COUNT, "shared experts"),
    (S.EXPERT_WEIGHTS_SCALE, "routed expert weight scale"),
    (S.EXPERT_WEIGHTS_NORM, "routed expert weight normalisation"),
    (S.EXPERT_GATING_FUNC, "expert gating function"),
    (S.SWIGLU_CLAMP_EXP, "SwiGLU clamp of the routed experts"),
    (S.OUTPUT_GROUP_COUNT, "grouped output projection"),
    (S.OUTPUT_LORA_RANK, "grouped output projection rank"),
    (S.COMPRESS_RATIOS, "attention compression (all 0 for the draft)"),
    (S.DFLASH_BLOCK_SIZE, "DSpark block size"),
)


@dataclass
class Dsv4Rules:
    """What :func:`dsv4_rules` found: expected shapes, their explanations, required tensors, key findings."""

    expected: dict[str, tuple[int | None, ...] | None] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    findings: list[tuple[str, str, str]] = field(default_factory=list)  # (subject, rule, message), all errors



def dsv4_rules(val: Callable[[str], Any], n_tokens: int | None, shapes: dict[str, tuple[int, ...]],
               n_layer: int) -> Dsv4Rules:
    """The DSV4 DSpark rules. ``val(tpl)`` reads an arch key (template ``{arch}.x`` or a full name), ``n_tokens``
    is the tokenizer size, ``shapes`` the tensors present (name -> numpy shape), ``n_layer`` the stages to expect
    (``block_count``, bounded by the caller for hostile files)."""
    r = Dsv4Rules(findings=key_findings(val))
    w1 = shapes.get(S.T_MARKOV_W1)
    rank = w1[1] if w1 is not None and len(w1) == 2 else None
    layer = layer_shapes(val)
    for i in range(n_layer):
        for short, (shape, why) in layer.items():
            name = S.LAYER_PREFIX.format(bid=i) + short
            r.expected[name] = shape
            r.why[name] = why
            r.required.add(name)
    for name, (shape, why) in global_shapes(val, n_tokens, rank).items():
        r.expected[name] = shape
        r.why[name] = why
        if S.DSV4_GLOBAL_TENSORS[name]:
            r.required.add(name)
    return r


def key_findings(val: Callable[[str], Any]) -> list[tuple[str, str, str]]:
    """The required keys, the gating function, and ``compress_ratios`` / ``swiglu_clamp_exp`` against
    ``block_count``: (subject, rule, message) of each error."""
    out = []
    for tpl, what in REQUIRED_KEYS:
        if val(tpl) is None:
            out.append((tpl.format(arch=S.ARCH_DFLASH), "required-key",
                        f"is missing; the DeepSeek-V4 DSpark loader requires it ({what})"))
    gating = val(S.EXPERT_GATING_FUNC)
    if gating is not None and gating != S.EXPERT_GATING_SQRTSOFTPLUS:
        out.append((S.EXPERT_GATING_FUNC.format(arch=S.ARCH_DFLASH), "dsv4",
                    f"is {gating!r}, expected {S.EXPERT_GATING_SQRTSOFTPLUS} (sqrtsoftplus; the DeepSeek-V4 "
                    "DSpark loader refuses other gating functions)"))
    n_layer = as_int(val(S.BLOCK_COUNT))
    ratios = val(S.COMPRESS_RATIOS)
    if isinstance(ratios, (list, tuple)):
        if any(x != 0 for x in ratios):
            out.append((S.COMPRESS_RATIOS.format(arch=S.ARCH_DFLASH), "dsv4",
                        f"is {list(ratios)}; the draft's stages use no compressed attention (expected all 0)"))
        if n_layer is not None and len(ratios) != n_layer:
            out.append((S.COMPRESS_RATIOS.format(arch=S.ARCH_DFLASH), "shape",
                        f"has {len(ratios)} entries, expected block_count {n_layer}"))
    clamp = val(S.SWIGLU_CLAMP_EXP)
    if isinstance(clamp, (list, tuple)) and n_layer is not None and len(clamp) != n_layer:
        out.append((S.SWIGLU_CLAMP_EXP.format(arch=S.ARCH_DFLASH), "shape",
                    f"has {len(clamp)} entries, expected block_count {n_layer}"))
    return out


def _mul(*xs: int | None) -> int | None:
    out = 1
    for x in xs:
        if x is None:
            return None
        out *= x
    return out


Shapes = dict[str, tuple[tuple[int | None, ...], str]]


def layer_shapes(val: Callable[[str], Any]) -> Shapes:
    """Every stage tensor (short name) -> (expected numpy shape, where it comes from)."""
    hidden, heads = as_int(val(S.EMBEDDING_LENGTH)), as_int(val(S.HEAD_COUNT))
    head_dim = as_int(val(S.KEY_LENGTH))
    kv_heads = as_int(val(S.HEAD_COUNT_KV)) or 1
    q_lora, o_groups, o_lora = as_int(val(S.Q_LORA_RANK)), as_int(val(S.OUTPUT_GROUP_COUNT)), as_int(val(S.OUTPUT_LORA_RANK))
    experts, expert_ff = as_int(val(S.EXPERT_COUNT)), as_int(val(S.EXPERT_FEED_FORWARD_LENGTH))
    shared = as_int(val(S.EXPERT_SHARED_COUNT))
    hc = as_int(val(S.HC_COUNT))
    q_dim = _mul(heads, head_dim)
    mix = _mul(2 + hc, hc) if hc is not None else None
    shexp = _mul(expert_ff, shared)
    out_in = q_dim // o_groups if q_dim is not None and o_groups else None
    layer: Shapes = {
        "attn_norm.weight": ((hidden,), f"hidden_size {hidden}"),
        "ffn_norm.weight": ((hidden,), f"hidden_size {hidden}"),
        "attn_q_a.weight": ((q_lora, hidden), f"ne[1] = q_lora_rank {q_lora}, ne[0] = hidden_size {hidden}"),
        "attn_q_a_norm.weight": ((q_lora,), f"q_lora_rank {q_lora}"),
        "attn_q_b.weight": ((q_dim, q_lora), f"ne[1] = heads {heads} x head_dim {head_dim}, ne[0] = q_lora_rank {q_lora}"),
        "attn_kv.weight": ((_mul(kv_heads, head_dim), hidden), f"ne[1] = head_dim {head_dim}, ne[0] = hidden_size {hidden}"),
        "attn_kv_a_norm.weight": ((head_dim,), f"head_dim {head_dim}"),
        "attn_output_a.weight": ((_mul(o_groups, o_lora), out_in),
                                 f"ne[1] = o_groups {o_groups} x o_lora_rank {o_lora}, ne[0] = heads x head_dim / o_groups"),
        "attn_output_b.weight": ((hidden, _mul(o_groups, o_lora)),
                                 f"ne[1] = hidden_size {hidden}, ne[0] = o_groups {o_groups} x o_lora_rank {o_lora}"),
        "attn_sinks.weight": ((heads,), f"heads {heads}"),
        "ffn_gate_inp.weight": ((experts, hidden), f"ne[1] = experts {experts}, ne[0] = hidden_size {hidden}"),
        "exp_probs_b.bias": ((experts,), f"experts {experts}"),
        "ffn_gate_exps.weight": ((experts, expert_ff, hidden), f"[hidden_size {hidden}, expert_ff {expert_ff}, experts {experts}]"),
        "ffn_up_exps.weight": ((experts, expert_ff, hidden), f"[hidden_size {hidden}, expert_ff {expert_ff}, experts {experts}]"),
        "ffn_down_exps.weight": ((experts, hidden, expert_ff), f"[expert_ff {expert_ff}, hidden_size {hidden}, experts {experts}]"),
        "ffn_gate_shexp.weight": ((shexp, hidden), f"ne[1] = expert_ff {expert_ff} x shared experts {shared}"),
        "ffn_up_shexp.weight": ((shexp, hidden), f"ne[1] = expert_ff {expert_ff} x shared experts {shared}"),
        "ffn_down_shexp.weight": ((hidden, shexp), f"ne[0] = expert_ff {expert_ff} x shared experts {shared}"),
    }
    for k in ("attn", "ffn"):
        layer[f"hc_{k}_fn.weight"] = ((mix, _mul(hc, hidden)), f"ne[1] = (2 + hc {hc}) x hc, ne[0] = hc x hidden_size {hidden}")
        layer[f"hc_{k}_base.weight"] = ((mix,), f"(2 + hc {hc}) x hc")
        layer[f"hc_{k}_scale.weight"] = ((3,), "3 scales (pre, post, residual)")
    assert set(layer) == set(S.DSV4_LAYER_TENSORS)
    return layer


def global_shapes(val: Callable[[str], Any], n_tokens: int | None, rank: int | None) -> Shapes:
    """The global tensors (``fc``, norms, hyper-connection head, Markov head, confidence) -> (shape, where from);
    ``rank`` is the Markov rank (from ``markov_w1``'s shape)."""
    hidden, hc = as_int(val(S.EMBEDDING_LENGTH)), as_int(val(S.HC_COUNT))
    taps = val(S.DFLASH_TARGET_LAYERS)
    n_taps = len(taps) if isinstance(taps, (list, tuple)) else None
    return {
        S.T_FC: ((hidden, _mul(n_taps, hidden)), f"ne[0] = {n_taps} target layers x hidden_size {hidden}"),
        S.T_ENC_NORM: ((hidden,), f"hidden_size {hidden}"),
        S.T_OUTPUT_NORM: ((hidden,), f"hidden_size {hidden}"),
        S.T_OUTPUT_HC_FN: ((hc, _mul(hc, hidden)), f"ne[1] = hc {hc}, ne[0] = hc x hidden_size {hidden}"),
        S.T_OUTPUT_HC_BASE: ((hc,), f"hc {hc}"),
        S.T_OUTPUT_HC_SCALE: ((1,), "one scale"),
        S.T_MARKOV_W1: ((n_tokens, rank), f"ne[0] = Markov rank {rank}, ne[1] = {n_tokens} tokens"),
        S.T_MARKOV_W2: ((n_tokens, rank), f"ne[0] = Markov rank {rank}, ne[1] = {n_tokens} tokens"),
        S.T_CONF_W: ((1, hidden + rank if hidden is not None and rank is not None else None),
                     f"ne[0] = hidden_size {hidden} + Markov rank {rank}"),
    }


# ---------------------------------------------------------------------------------------------- check's role
#: the layers are DeepSeek-V4 blocks, expected by :func:`dsv4_rules`, not the generic Qwen3 / Llama layers
GENERIC_LAYERS = False


def in_what(d: Dims) -> str:
    return f"hidden_size {d.hidden}"


def rules(c: Checker) -> int | None:
    """DeepSeek-V4 DSpark (Appendix A as corrected by spec/dsv4-dspark.md): the DSV4 keys, every stage's
    DeepSeek-V4 block tensors and the hyper-connection head, from :func:`dsv4_rules`."""
    taps = c.val(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or not taps:
        c.err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
    if S.TOKENIZER_MASK_ID not in c.kv:
        c.warn(S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1")
    n_layer = c.val(S.BLOCK_COUNT)
    n_layer = c.layer_count(n_layer if isinstance(n_layer, int) and not isinstance(n_layer, bool) else 0)
    found = dsv4_rules(c.val, c.dims.n_tokens, {t.name: tuple(t.shape) for t in c.plan.tensors}, n_layer)
    for subject, rule, msg in found.findings:
        c.err(subject, rule, msg)
    for name, dims in found.expected.items():
        c.rules.expect(name, dims, found.why.get(name),
                       required=name in found.required)
    return None
