"""The names of a DeepSeek-V4 DSpark draft: which checkpoint tensors (``mtp.{s}.*``) it has and the GGUF names they
become (spec/dsv4-dspark.md §3, with the supplement's corrections). Data and name functions only: the family
(:mod:`.dspark_dsv4`) plans the file with them, ``verify`` (:mod:`.tensors`) finds each GGUF
tensor's sources with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ... import schema as S

#: HF name inside a stage (after ``mtp.{s}.``) -> GGUF name after ``blk.{s}.`` (spec/dsv4-dspark.md §3)
STAGE_TENSORS: dict[str, str] = {
    "attn.attn_sink": "attn_sinks.weight",
    "attn.wq_a.weight": "attn_q_a.weight",
    "attn.wq_b.weight": "attn_q_b.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight",
    "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight",
    "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight",
    "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight",
    "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight",
    "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
    "hc_attn_fn": "hc_attn_fn.weight",
    "hc_attn_base": "hc_attn_base.weight",
    "hc_attn_scale": "hc_attn_scale.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight",
    "hc_ffn_base": "hc_ffn_base.weight",
    "hc_ffn_scale": "hc_ffn_scale.weight",
}
#: names lifted out of the stage namespace (the stage index is dropped; upstream's ``_rekey_mtp_tensor_name``)
ROOT_TENSORS: dict[str, str] = {
    "main_proj.weight": S.T_FC,
    "main_norm.weight": S.T_ENC_NORM,
    "norm.weight": S.T_OUTPUT_NORM,
    "hc_head_fn": S.T_OUTPUT_HC_FN,
    "hc_head_base": S.T_OUTPUT_HC_BASE,
    "hc_head_scale": S.T_OUTPUT_HC_SCALE,
    "markov_head.markov_w1.weight": S.T_MARKOV_W1,
    "markov_head.markov_w2.weight": S.T_MARKOV_W2,
    "confidence_head.proj.weight": S.T_CONF_W,
}
#: routed expert projection -> GGUF stack name after ``blk.{s}.``, in writing order (gate, down, up)
EXPERT_TENSORS: dict[str, str] = dict(zip(("w1", "w2", "w3"), S.DSV4_EXPERT_TENSORS, strict=True))

_STAGE = re.compile(r"mtp\.(\d+)\.(.+)")
_EXPERT = re.compile(r"ffn\.experts\.(\d+)\.(w[123])\.(weight|scale)")


def draft_names(names: list[str]) -> list[str]:
    """The checkpoint names that belong to the draft (``mtp.*``)."""
    return [n for n in names if n.startswith(S.DSV4_DRAFT_PREFIX)]


def is_draft(name: str) -> bool:
    return name.startswith(S.DSV4_DRAFT_PREFIX)


def split_stage(name: str) -> tuple[int, str]:
    """``mtp.{s}.rest`` -> (s, rest)."""
    m = _STAGE.fullmatch(name)
    if m is None:
        raise ValueError(name)
    return int(m.group(1)), m.group(2)


def expert_parts(rest: str) -> tuple[int, str, str] | None:
    """``ffn.experts.{e}.w{1,2,3}.{weight,scale}`` -> (e, "w1", "weight"), else None."""
    m = _EXPERT.fullmatch(rest)
    return None if m is None else (int(m.group(1)), m.group(2), m.group(3))


@dataclass
class DraftGroups:
    """A checkpoint's draft tensors sorted out by :func:`group_draft` (the conversion plans them, verify finds
    each GGUF tensor's sources with them)."""

    #: non-expert tensors in checkpoint order: (checkpoint name, stage, name inside the stage); FP8 scales whose
    #: weight is present are left out (they are read with it)
    dense: list[tuple[str, int, str]]
    #: routed experts: (stage, ``w1`` / ``w2`` / ``w3``) -> expert -> weight name (its scale is stored beside it)
    experts: dict[tuple[int, str], dict[int, str]]
    stages: set[int]
    #: ``mtp.*`` names that are not ``mtp.<stage>.<name>``
    unnamed: list[str]


def group_draft(names: list[str]) -> DraftGroups:
    """Sort the draft (``mtp.*``) names of a checkpoint into dense tensors and expert stacks.

    Example:
        >>> g = group_draft(["mtp.0.ffn.experts.1.w2.weight", "mtp.0.ffn.experts.1.w2.scale", "mtp.0.attn.wkv.weight",
        ...                  "mtp.0.attn.wkv.scale", "mtp.x", "embed.weight"])
        >>> g.dense, g.stages, g.unnamed
        ([('mtp.0.attn.wkv.weight', 0, 'attn.wkv.weight')], {0}, ['mtp.x'])
        >>> g.experts[(0, "w2")]
        {1: 'mtp.0.ffn.experts.1.w2.weight'}
    """
    have = set(names)
    out = DraftGroups([], {}, set(), [])
    for src in names:
        if not is_draft(src):
            continue
        try:
            stage, rest = split_stage(src)
        except ValueError:
            out.unnamed.append(src)
            continue
        out.stages.add(stage)
        ex = expert_parts(rest)
        if ex is not None:
            e, w, part = ex
            if part == "weight":
                out.experts.setdefault((stage, w), {})[e] = src
        elif not (rest.endswith(".scale") and src.removesuffix(".scale") + ".weight" in have):
            out.dense.append((src, stage, rest))
    return out


def gguf_name(stage: int, rest: str) -> str | None:
    """GGUF name of a non-expert draft tensor (``rest`` = name after ``mtp.{stage}.``), None if unknown."""
    if rest in ROOT_TENSORS:
        return ROOT_TENSORS[rest]
    if rest in STAGE_TENSORS:
        return S.LAYER_PREFIX.format(bid=stage) + STAGE_TENSORS[rest]
    return None
