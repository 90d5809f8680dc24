"""The GLM-4.5 MTP family (upstream's ``Glm4MoeModel`` in ``conversion/glm.py``, spec/drafts-beyond-dflash.md §1):
GLM-4.5 / 4.6 / 4.7 (``Glm4MoeForCausalLM``) and GLM-4.5V's text model (``Glm4vMoeForConditionalGeneration``), GGUF
architecture ``glm4moe``.

What upstream's ``--mtp`` file holds for them:

- the NextN layer(s) are ordinary decoder layers after the trunk: ``model.layers.{n+i}.*`` (``n`` =
  ``num_hidden_layers``, ``language_model.`` removed from every name) keep their index, so block ``n + i`` gets the
  layer's attention (with its q/k/v biases), norms, router (``mlp.gate.weight`` F32 and
  ``mlp.gate.e_score_correction_bias`` -> ``exp_probs_b.bias``), shared expert and routed experts (stored per expert,
  stacked into ``ffn_{down,gate,up}_exps`` when the last one of the layer arrives), and its NextN tensors
  ``eh_proj`` / ``enorm`` / ``hnorm`` / ``embed_tokens`` / ``shared_head.head`` / ``shared_head.norm``; of the trunk
  only ``model.embed_tokens``, ``model.norm`` and ``lm_head``; nothing is added to the norms;
- the full header of the target: TextModel's generic block with ``block_count = n + nextn`` and the expert group
  counts (``n_group`` / ``topk_group``), then ``rope.dimension_count`` (head_dim x ``partial_rotary_factor``, 0.5 when
  absent), ``expert_count`` again (same place), ``expert_feed_forward_length``, ``expert_shared_count``,
  ``leading_dense_block_count``, ``expert_gating_func`` (sigmoid), ``expert_weights_scale``, ``expert_weights_norm``
  and ``nextn_predict_layers``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import base_kvs, mapped_once
from ...kit.hparams import HParams
from ...plan import KV, TensorSpec, as_int
from .head import Counts, Head
from .specs import ATTENTION, NEXTN_ROWS, ExpertGroups, layer_indices, layer_spec, stack_spec, target_archs

#: upstream's model class that exports the GLM-4.5 NextN layer with ``--mtp``
MTP_CLASSES = ("Glm4MoeModel",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: the trunk tensors an ``--mtp`` file keeps (names after ``language_model.`` is removed)
KEPT_ROOTS: dict[str, str] = {"model.embed_tokens.weight": S.T_TOKEN_EMBD, "model.norm.weight": S.T_OUTPUT_NORM,
                              "lm_head.weight": S.T_OUTPUT}
#: upstream's ``_n_main_layers``: the first of these keys in the (text) config
LAYER_KEYS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers")
#: a NextN layer's MLP (dense, router and shared expert; the routed experts are stacked): the same in GLM-5
MLP: dict[str, str] = {
    "mlp.gate_proj.weight": S.L_FFN_GATE,
    "mlp.up_proj.weight": S.L_FFN_UP,
    "mlp.down_proj.weight": S.L_FFN_DOWN,
    "mlp.gate.weight": S.L_FFN_GATE_INP,
    "mlp.gate.e_score_correction.bias": S.L_EXP_PROBS_B,
    "mlp.shared_experts.gate_proj.weight": S.L_FFN_GATE_SHEXP,
    "mlp.shared_experts.up_proj.weight": S.L_FFN_UP_SHEXP,
    "mlp.shared_experts.down_proj.weight": S.L_FFN_DOWN_SHEXP,
}
#: a NextN layer's tensor (after ``model.layers.{n+i}.``) -> its GGUF name (after ``blk.{n+i}.``)
LAYER: dict[str, str] = {
    **NEXTN_ROWS,
    **ATTENTION,
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    **MLP,
}
#: per-expert projection -> its stack, in the order upstream emits the three stacks
EXPERT_STACKS: dict[str, str] = {"down_proj": S.L_FFN_DOWN_EXPS, "gate_proj": S.L_FFN_GATE_EXPS,
                                 "up_proj": S.L_FFN_UP_EXPS}
#: ``model.layers.{i}.<rest>`` (after :func:`bare`)
LAYER_RE = re.compile(r"model\.layers\.(\d+)\.(.+)")
#: a routed expert's ``<rest>``: ``mlp.experts.{x}.<projection>.weight``
EXPERT_RE = re.compile(r"mlp\.experts\.(\d+)\.(down_proj|gate_proj|up_proj)\.weight")
#: (checkpoint pattern, short GGUF name) of every NextN layer tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = ([(f"model.layers.*.{hf}", name) for hf, name in LAYER.items()]
                                   + [(f"model.layers.*.mlp.experts.*.{w}.weight", name)
                                      for w, name in EXPERT_STACKS.items()])
#: ``expert_gating_func`` upstream's class always writes (``ExpertGatingFuncType.SIGMOID``)
GATING_SIGMOID = 2


#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = KEPT_ROOTS

def bare(name: str) -> str:
    """A checkpoint name as upstream's filter sees it: ``e_score_correction_bias`` -> ``e_score_correction.bias``,
    every ``language_model.`` removed (``model.language_model.layers.3.x`` -> ``model.layers.3.x``)."""
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name.replace("language_model.", "")


def trunk_layers(config: dict[str, Any]) -> int | None:
    """Upstream's ``_n_main_layers``: the layer count of the (text) config, None when it has none."""
    hp = {**config, **(config.get("text_config") or {})} if isinstance(config.get("text_config"), dict) else config
    key = next((k for k in LAYER_KEYS if k in hp), None)
    v = hp.get(key) if key is not None else None
    return as_int(v)


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """The checkpoint tensors an ``--mtp`` file is made of: the layers from ``num_hidden_layers`` on, the embedding,
    the final norm and the head (the trunk's shards are never opened)."""
    n = trunk_layers(config)

    def keep(name: str) -> bool:
        b = bare(name)
        if b in KEPT_ROOTS:
            return True
        m = LAYER_RE.match(b)
        return m is not None and n is not None and int(m.group(1)) >= n

    return keep


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class GlmMtp(Counts):
    """The config values the file needs, validated (``experts``: ``n_routed_experts``, 0 when none is declared)."""


def read_hparams(arch: str, hp: HParams, names: list[str], where: str) -> GlmMtp:
    """``num_hidden_layers``, ``num_nextn_predict_layers`` (the NextN layers must be ``model.layers.{n}..``) and
    ``n_routed_experts``, each refused in one line when unusable."""
    key = next((k for k in LAYER_KEYS if k in hp), "num_hidden_layers")
    n = hp.positive(key, hp.find((key,), required=True))
    declared = hp.get("num_nextn_predict_layers")
    nextn = hp.u32("num_nextn_predict_layers", declared) if declared is not None else 0
    found = [i for i in layer_indices(lambda x: LAYER_RE.match(bare(x)), names) if i >= n]
    if nextn == 0:
        raise ConvertError(f"{where}: no MTP head: 'num_nextn_predict_layers' is {declared!r} (upstream's --mtp "
                           "writes NextN layers only when the config declares them)")
    if found != list(range(n, n + nextn)):
        raise ConvertError(f"{where}: num_nextn_predict_layers is {nextn} but the checkpoint has NextN layers "
                           f"{found or 'none'} after num_hidden_layers {n}; expected model.layers.{n}.."
                           f"{n + nextn - 1}")
    experts = hp.get("n_routed_experts")
    return GlmMtp(arch, hp, n, nextn, hp.u32("n_routed_experts", experts) if experts is not None else 0)


def insert_expert_groups(base: list[KV], arch: str, hp: HParams, where: str) -> None:
    """Put ``expert_group_count`` / ``expert_group_used_count`` (``n_group`` / ``topk_group``, when set) into
    TextModel's generic block ``base`` where TextModel writes them: after the experts used per token, before the
    gating function, the key / value lengths or ``general.file_type``, whichever comes first."""
    a = {"arch": arch}
    groups = [KV(tpl.format(**a), VT.UINT32, hp.u32(k, hp[k]))
              for tpl, k in ((S.EXPERT_GROUP_COUNT, "n_group"), (S.EXPERT_GROUP_USED_COUNT, "topk_group"))
              if hp.get(k) is not None]
    after = {t.format(**a) for t in (S.EXPERT_GATING_FUNC, S.KEY_LENGTH, S.VALUE_LENGTH)} | {S.GENERAL_FILE_TYPE}
    at = next(i for i, kv in enumerate(base) if kv.name in after)
    base[at:at] = groups


def header_kvs(g: GlmMtp, file_type: int, where: str) -> tuple[list[KV], list[KV]]:
    """The target's own header, as upstream's class writes it: (TextModel's generic block ending with
    ``general.file_type``, then the class's keys; a key written twice keeps its first place)."""
    hp, a = g.hp, {"arch": g.arch}
    key = next((k for k in LAYER_KEYS if k in hp), "num_hidden_layers")
    base = base_kvs(g.arch, {**hp, key: g.n + g.nextn}, file_type, where)
    insert_expert_groups(base, g.arch, hp, where)

    def u32(tpl: str, k: str) -> list[KV]:
        return [] if hp.get(k) is None else [KV(tpl.format(**a), VT.UINT32, hp.u32(k, hp[k]))]

    rd = hp.rope()
    head_dim = hp.get("head_dim")
    if head_dim is None:
        head_dim = hp.positive("hidden_size") // hp.positive("num_attention_heads")
    factor = hp.number("partial_rotary_factor", rd.get("partial_rotary_factor", 0.5))
    fam = [KV(S.ROPE_DIMENSION_COUNT.format(**a), VT.UINT32, int(hp.u32("head_dim", head_dim) * factor))]
    fam += u32(S.EXPERT_COUNT, "n_routed_experts")
    fam += u32(S.EXPERT_FEED_FORWARD_LENGTH, "moe_intermediate_size")
    fam += u32(S.EXPERT_SHARED_COUNT, "n_shared_experts")
    fam += u32(S.LEADING_DENSE_BLOCK_COUNT, "first_k_dense_replace")
    fam.append(KV(S.EXPERT_GATING_FUNC.format(**a), VT.UINT32, GATING_SIGMOID))
    if hp.get("routed_scaling_factor") is not None:
        fam.append(KV(S.EXPERT_WEIGHTS_SCALE.format(**a), VT.FLOAT32,
                      hp.number("routed_scaling_factor")))
    if hp.get("norm_topk_prob") is not None:
        v = hp["norm_topk_prob"]
        if not isinstance(v, bool):
            raise ConvertError(f"{where}: key 'norm_topk_prob' is {v!r}, expected true or false")
        fam.append(KV(S.EXPERT_WEIGHTS_NORM.format(**a), VT.BOOL, v))
    fam.append(KV(S.NEXTN_PREDICT_LAYERS.format(**a), VT.UINT32, g.nextn))
    return base, fam


# ---------------------------------------------------------------------------------------------- tensors
def gguf_name(name: str, layer: Mapping[str, str] = LAYER) -> str | None:
    """The GGUF name of one read checkpoint tensor by the ``layer`` table (None: an expert, stacked separately, or
    unmapped)."""
    b = bare(name)
    if b in KEPT_ROOTS:
        return KEPT_ROOTS[b]
    m = LAYER_RE.fullmatch(b)
    if m is not None and m.group(2) in layer:
        return S.LAYER_PREFIX.format(bid=int(m.group(1))) + layer[m.group(2)]
    return None


def expert_stacks(ck: Checkpoint, experts: int, groups: ExpertGroups, src: str, out: QT) -> list[TensorSpec] | None:
    """None when ``src`` is not a routed expert ``model.layers.{i}.mlp.experts.{x}.*``; else it joins ``groups``
    and the result is the block's three stacks (down, gate, up) when it is the ``3 x n_routed_experts``-th of its
    block, [] before. Refused in one line when the config has no experts or ``x`` is beyond them."""
    m = LAYER_RE.fullmatch(bare(src))
    e = EXPERT_RE.fullmatch(m.group(2)) if m is not None else None
    if m is None or e is None:
        return None
    if not experts:
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' is an expert but the config has no n_routed_experts")
    bid, xid = int(m.group(1)), int(e.group(1))
    if xid >= experts:
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}': expert {xid} is beyond n_routed_experts {experts}")
    full = groups.add(bid, e.group(2), xid, src)
    if full is None:
        return []
    return [stack_spec(ck, full.get(w, {}), experts, f"model.layers.{bid}.mlp.experts.*.{w}.weight",
                       S.LAYER_PREFIX.format(bid=bid) + stack, out, count_key="n_routed_experts")
            for w, stack in EXPERT_STACKS.items()]


def check_experts(ck: Checkpoint, experts: int, groups: ExpertGroups) -> None:
    """Refuse, in one line, a block that got some expert tensors but not ``3 x n_routed_experts``."""
    for bid, c in groups.incomplete():
        raise ConvertError(f"{ck.path}: model.layers.{bid} has {c} expert tensors, expected 3 x n_routed_experts "
                           f"{experts} = {3 * experts} (upstream fails with \"Unprocessed experts\")")


def plan_tensors(ck: Checkpoint, g: GlmMtp, out: QT) -> list[TensorSpec]:
    """The file's tensors in upstream's order: the read tensors in checkpoint order, the three expert stacks (down,
    gate, up) where the ``3 x n_routed_experts``-th expert tensor of their layer arrives."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(3 * g.experts)
    for src in ck.names:
        stacks = expert_stacks(ck, g.experts, groups, src, out)
        if stacks is not None:
            specs += stacks
            continue
        name = mapped_once(ck, seen, src, gguf_name(src), f"a {g.arch} MTP head")
        specs.append(layer_spec(ck, src, name, out))
    check_experts(ck, g.experts, groups)
    return specs


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``Glm4MoeModel`` checkpoint: header, tensors and the layer counts."""
    g = read_hparams(ARCHS[hf_arch], hp, ck.names, where)
    tensors = plan_tensors(ck, g, out)
    return g.head(header_kvs(g, file_type, where), tensors)
