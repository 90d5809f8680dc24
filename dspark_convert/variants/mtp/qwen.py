"""The Qwen MTP families (upstream's ``_QwenMtpMixin``, spec/drafts-beyond-dflash.md §1.2-§1.4): Qwen3.5 / 3.6
dense (``qwen35``), Qwen3.5 MoE (``qwen35moe``) and Qwen3-Next (``qwen3next``).

What upstream's ``--mtp`` file holds for them:

- ``mtp.*`` (or ``model.mtp.*``): ``mtp.layers.{i}.X`` becomes block ``n + i`` with the trunk's layer names;
  ``mtp.fc`` / ``pre_fc_norm_embedding`` / ``pre_fc_norm_hidden`` / ``norm`` become ``blk.{n}.nextn.eh_proj`` /
  ``enorm`` / ``hnorm`` / ``shared_head_norm``; of the trunk only ``model.embed_tokens``, ``model.norm`` and
  ``lm_head`` (``language_model.`` stripped);
- every ``*norm.weight`` (the MTP norms included) gets ``+ 1`` in the stored dtype;
- MTP experts stored per expert are stacked into ``ffn_{down,gate,up}_exps`` when the last one arrives; fused
  stacks (transformers' layout: ``mlp.experts.down_proj`` ``[E, hidden, ff]`` and ``mlp.experts.gate_up_proj``
  ``[E, 2 x ff, hidden]``, with or without ``.weight``) become ``ffn_down_exps`` as they are and ``ffn_gate_exps`` /
  ``ffn_up_exps`` from the two halves, where they arrive; the router weights are F32;
- the full header of the target (``block_count = n + nextn``, ``nextn_predict_layers``, the SSM keys,
  ``recurrent_layers`` over ``block_count`` with the MTP blocks ``false``, ``full_attention_interval``,
  ``rope.dimension_count``; ``qwen35`` / ``qwen35moe`` always carry ``rope.dimension_sections``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import base_kvs, mapped_once, tensor_type
from ...kit.hparams import HParams
from ...plan import KV, TensorSpec
from .head import Counts, Head
from .specs import ATTENTION, ExpertGroups, float_ref, layer_spec, stack_spec, target_archs
from .transforms import AddOne, GateUpHalf

#: upstream's model classes that carry the Qwen MTP mixin (``_QwenMtpMixin`` in ``conversion/qwen.py``)
MTP_CLASSES = ("Qwen3_5TextModel", "Qwen3_5MoeTextModel", "Qwen3NextModel")
#: HF class -> GGUF arch: every architecture the target table registers to one of those classes
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: ``qwen.py`` ``_QWEN35_DEFAULT_MROPE_SECTION``: written when the config has no ``mrope_section``
DEFAULT_MROPE_SECTION = [11, 11, 10, 0]
#: the trunk tensors an ``--mtp`` file keeps (names after ``language_model.`` is stripped)
KEPT_ROOTS: dict[str, str] = {
    "model.embed_tokens.weight": S.T_TOKEN_EMBD, "embed_tokens.weight": S.T_TOKEN_EMBD,
    "model.norm.weight": S.T_OUTPUT_NORM, "norm.weight": S.T_OUTPUT_NORM,
    "lm_head.weight": S.T_OUTPUT,
}
#: ``mtp.<name>`` outside the layers -> the name upstream's mixin gives it in block ``n`` (its ``+1`` norm rule sees
#: this name: ``enorm`` / ``hnorm`` / ``shared_head.norm`` end in ``norm.weight``)
MTP_RENAMES: dict[str, str] = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
                               "norm": "shared_head.norm"}
#: ``mtp.<name>.weight`` outside the layers -> the NextN tensor of block ``n``
MTP_ROOTS: dict[str, str] = {
    "fc": S.L_NEXTN_EH_PROJ, "pre_fc_norm_embedding": S.L_NEXTN_ENORM, "pre_fc_norm_hidden": S.L_NEXTN_HNORM,
    "norm": S.L_NEXTN_SHARED_HEAD_NORM,
}
#: an MTP layer's tensor (after ``mtp.layers.{i}.``) -> its GGUF name (after ``blk.{n+i}.``)
LAYER: dict[str, str] = {
    **ATTENTION,
    "mlp.gate_proj.weight": S.L_FFN_GATE,
    "mlp.up_proj.weight": S.L_FFN_UP,
    "mlp.down_proj.weight": S.L_FFN_DOWN,
    "mlp.gate.weight": S.L_FFN_GATE_INP,
    "mlp.shared_expert.gate_proj.weight": S.L_FFN_GATE_SHEXP,
    "mlp.shared_expert.up_proj.weight": S.L_FFN_UP_SHEXP,
    "mlp.shared_expert.down_proj.weight": S.L_FFN_DOWN_SHEXP,
    "mlp.shared_expert_gate.weight": S.L_FFN_GATE_INP_SHEXP,
}
#: per-expert projection -> its stack, in the order upstream emits the three stacks
EXPERT_STACKS: dict[str, str] = {"down_proj": S.L_FFN_DOWN_EXPS, "gate_proj": S.L_FFN_GATE_EXPS,
                                 "up_proj": S.L_FFN_UP_EXPS}
#: a fused expert stack (after ``mtp.layers.{i}.``, ``.weight`` optional) -> its GGUF stacks (after ``blk.{n+i}.``)
#: with the half of the source each takes (None: all of it), in upstream's order
FUSED_STACKS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "down_proj": ((S.L_FFN_DOWN_EXPS, None),),
    "gate_up_proj": ((S.L_FFN_GATE_EXPS, "gate"), (S.L_FFN_UP_EXPS, "up")),
}
#: (checkpoint pattern, short GGUF name) of every MTP tensor of block ``n`` on, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = ([(f"mtp.{hf}.weight", g) for hf, g in MTP_ROOTS.items()]
                                   + [(f"mtp.layers.*.{hf}", g) for hf, g in LAYER.items()]
                                   + [(f"mtp.layers.*.mlp.experts.*.{w}.weight", g) for w, g in EXPERT_STACKS.items()]
                                   + [(f"mtp.layers.*.mlp.experts.{w}", g) for w, outs in FUSED_STACKS.items()
                                      for g, _ in outs])
_EXPERT = re.compile(r"mlp\.experts\.(\d+)\.(down_proj|gate_proj|up_proj)\.weight")
_FUSED = re.compile(r"mlp\.experts\.(down_proj|gate_up_proj)(?:\.weight)?")


#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = KEPT_ROOTS

def bare(name: str) -> str:
    """A checkpoint name as the mixin sees it: ``language_model.`` removed (``model.language_model.x`` ->
    ``model.x``), ``model.mtp.`` -> ``mtp.``."""
    name = name.replace("model.language_model.", "model.", 1) if name.startswith("model.language_model.") else name
    name = name.replace("language_model.", "", 1) if name.startswith("language_model.") else name
    return name[len("model."):] if name.startswith("model.mtp.") else name


def is_read(name: str) -> bool:
    """The checkpoint tensors an ``--mtp`` file is made of (all others are never opened)."""
    b = bare(name)
    return b.startswith("mtp.") or b in KEPT_ROOTS


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """:func:`is_read`, whatever the config (the head is ``mtp.*``)."""
    return is_read


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class QwenMtp(Counts):
    """The config values the file needs, validated (``experts``: ``num_experts``, 0 for the dense MLP)."""


def mtp_layers(names: list[str]) -> int:
    """1 + the highest ``mtp.layers.{i}`` index among ``names`` (0 when there is none)."""
    idx = [int(p[2]) for p in (bare(n).split(".", 3) for n in names)
           if len(p) == 4 and p[0] == "mtp" and p[1] == "layers" and p[2].isdecimal()]
    return 1 + max(idx) if idx else 0


def read_hparams(arch: str, hp: HParams, names: list[str], where: str) -> QwenMtp:
    """``num_hidden_layers``, the MTP layer count (``mtp_num_hidden_layers``, or counted from the tensors when the
    key is 0 or absent, as upstream's mixin does) and the expert count, each refused in one line when unusable (more
    than one MTP layer too: the layout has NextN tensors for the first MTP block only, which llama.cpp does not load)."""
    n = hp.positive("num_hidden_layers", hp.find(("num_hidden_layers",), required=True))
    declared = hp.get("mtp_num_hidden_layers") or 0
    counted = mtp_layers(names)
    nextn = hp.u32("mtp_num_hidden_layers", declared) if declared else counted
    if nextn == 0:
        raise ConvertError(f"{where}: no MTP head: 'mtp_num_hidden_layers' is {hp.get('mtp_num_hidden_layers')!r} and "
                           "the checkpoint has no mtp.layers.* tensors (upstream's --mtp asserts it)")
    if counted != nextn:
        raise ConvertError(f"{where}: mtp_num_hidden_layers is {nextn} but the checkpoint has mtp.layers.* tensors "
                           f"for {counted} layer(s); expected mtp.layers.0..{nextn - 1}")
    if nextn > 1:
        raise ConvertError(f"{where}: {nextn} MTP layers: the checkpoint's one mtp.fc / mtp.pre_fc_norm_* make the "
                           f"nextn.eh_proj / enorm / hnorm of the first MTP block only, and llama.cpp's {arch} loader "
                           "requires them in every MTP block (upstream b11434's --mtp writes that file; it does not "
                           "load)")
    experts = hp.get("num_experts") or 0
    if arch != S.ARCH_QWEN35 and not experts:
        raise ConvertError(f"{where}: key 'num_experts' is missing; a {arch} checkpoint is a mixture of experts")
    return QwenMtp(arch, hp, n, nextn, hp.u32("num_experts", experts) if arch != S.ARCH_QWEN35 else 0)


def header_kvs(q: QwenMtp, file_type: int, where: str) -> tuple[list[KV], list[KV]]:
    """The target's own header, as upstream's class writes it: (TextModel's generic block ending with
    ``general.file_type``, then the family's keys)."""
    hp, a = q.hp, {"arch": q.arch}
    view = {**hp, "num_hidden_layers": q.n + q.nextn}
    base = base_kvs(q.arch, view, file_type, where)

    def u32(tpl: str, key: str) -> KV:
        return KV(tpl.format(**a), VT.UINT32, hp.u32(key, hp.require(key, f"a {q.arch} checkpoint needs it")))

    fam: list[KV] = []
    if hp.get("moe_intermediate_size") is not None:  # Qwen2MoeModel
        fam.append(u32(S.EXPERT_FEED_FORWARD_LENGTH, "moe_intermediate_size"))
    if hp.get("shared_expert_intermediate_size") is not None:
        fam.append(u32(S.EXPERT_SHARED_FEED_FORWARD_LENGTH, "shared_expert_intermediate_size"))
    fam.append(KV(S.NEXTN_PREDICT_LAYERS.format(**a), VT.UINT32, q.nextn))  # the mixin
    fam += [u32(S.SSM_CONV_KERNEL, "linear_conv_kernel_dim"), u32(S.SSM_STATE_SIZE, "linear_key_head_dim"),
            u32(S.SSM_GROUP_COUNT, "linear_num_key_heads"), u32(S.SSM_TIME_STEP_RANK, "linear_num_value_heads")]
    inner = hp.u32("linear_value_head_dim", hp.require("linear_value_head_dim", f"a {q.arch} checkpoint needs it"))
    fam.append(KV(S.SSM_INNER_SIZE.format(**a), VT.UINT32, inner * hp.u32("linear_num_value_heads")))
    types = hp.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != q.n:
            count = len(types) if isinstance(types, list) else types
            raise ConvertError(f"{where}: layer_types has {count} entries, expected num_hidden_layers ({q.n})")
        fam.append(KV(S.RECURRENT_LAYERS.format(**a), VT.ARRAY,
                      [t == "linear_attention" for t in types] + [False] * q.nextn, VT.BOOL))
    fam.append(KV(S.FULL_ATTENTION_INTERVAL.format(**a), VT.UINT32,
                  hp.u32("full_attention_interval", default=4)))
    rd = hp.rope()
    head_dim = hp.get("head_dim")
    if head_dim is None:
        head_dim = hp.positive("hidden_size") // hp.positive("num_attention_heads")
    factor = rd.get("partial_rotary_factor", 0.25)
    fam.append(KV(S.ROPE_DIMENSION_COUNT.format(**a), VT.UINT32, int(head_dim * factor)))
    if q.arch in (S.ARCH_QWEN35, S.ARCH_QWEN35MOE) and "mrope_section" not in rd:
        fam.append(KV(S.ROPE_DIMENSION_SECTIONS.format(**a), VT.ARRAY, list(DEFAULT_MROPE_SECTION), VT.INT32))
    return base, fam


# ---------------------------------------------------------------------------------------------- tensors
def gguf_name(q: QwenMtp, name: str) -> str | None:
    """The GGUF name of one read checkpoint tensor (None: an expert, stacked separately, or unmapped)."""
    b = bare(name)
    if b in KEPT_ROOTS:
        return KEPT_ROOTS[b]
    parts = b.split(".", 3)
    if len(parts) == 3 and parts[1] in MTP_ROOTS and parts[2] == "weight":
        return S.LAYER_PREFIX.format(bid=q.n) + MTP_ROOTS[parts[1]]
    if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal() and parts[3] in LAYER:
        return S.LAYER_PREFIX.format(bid=q.n + int(parts[2])) + LAYER[parts[3]]
    return None


def _norm(name: str) -> bool:
    """Upstream's ``+1`` rule, on the name after the mixin's renames: every ``*norm.weight`` except
    ``linear_attn.norm``."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "mtp" and parts[1] in MTP_RENAMES:
        name = f"{MTP_RENAMES[parts[1]]}.{parts[2]}"
    return name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight")


def _spec(ck: Checkpoint, src: str, name: str, out: QT) -> TensorSpec:
    """:func:`.specs.layer_spec`, with upstream's ``+ 1`` on the norms (:func:`_norm`)."""
    spec = layer_spec(ck, src, name, out)
    return replace(spec, transform=AddOne(ck.ref(src).dtype)) if _norm(bare(src)) else spec


def fused_specs(ck: Checkpoint, q: QwenMtp, src: str, proj: str, bid: int, seen: dict[str, str],
                out: QT) -> list[TensorSpec]:
    """The expert stacks of block ``bid`` made of the fused checkpoint stack ``src`` (``proj``: ``down_proj`` or
    ``gate_up_proj``, :data:`FUSED_STACKS`), refused in one line unless it is a float 3-D tensor of ``num_experts``
    experts (a ``gate_up_proj`` with an even row count, as upstream requires)."""
    ref = float_ref(ck, src)
    if not q.experts:
        raise ConvertError(f"{ref.file}: tensor '{src}' is an expert stack but the config has no num_experts")
    if len(ref.shape) != 3 or ref.shape[0] != q.experts or (proj == "gate_up_proj" and ref.shape[1] % 2):
        want = "an even number of rows (gate and up)" if proj == "gate_up_proj" else "[experts, hidden, ff]"
        raise ConvertError(f"{ref.file}: tensor '{src}' has shape {list(ref.shape)}; expected num_experts "
                           f"{q.experts} 3-D stacks with {want}")
    specs = []
    for stack, part in FUSED_STACKS[proj]:
        name = mapped_once(ck, seen, src, S.LAYER_PREFIX.format(bid=bid) + stack, f"a {q.arch} MTP head")
        if part is None:
            specs.append(layer_spec(ck, src, name, out))
            continue
        e, rows, cols = ref.shape
        shape = (e, rows // 2, cols)
        specs.append(TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out), sources=(src,),
                                transform=GateUpHalf(part), source_dtype=ref.dtype))
    return specs


def plan_tensors(ck: Checkpoint, q: QwenMtp, out: QT) -> list[TensorSpec]:
    """The file's tensors in upstream's order: the read tensors in checkpoint order, an expert stack (down, gate,
    up) where the last expert of its layer arrives, a fused stack's (down; or gate, up) where it is."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(3 * q.experts)
    for src in ck.names:
        b = bare(src)
        parts = b.split(".", 3)
        in_layer = len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal()
        fused = _FUSED.fullmatch(parts[3]) if in_layer else None
        if fused is not None:
            specs += fused_specs(ck, q, src, fused.group(1), q.n + int(parts[2]), seen, out)
            continue
        m = _EXPERT.fullmatch(parts[3]) if in_layer else None
        if m is not None:
            if not q.experts:
                raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' is an expert but the config has no num_experts")
            bid = q.n + int(parts[2])
            full = groups.add(bid, m.group(2), int(m.group(1)), src)
            if full is not None:
                specs += [stack_spec(ck, full.get(w, {}), q.experts, f"mtp.layers.{bid - q.n}.mlp.experts.*.{w}.weight",
                                     S.LAYER_PREFIX.format(bid=bid) + stack, out, count_key="num_experts",
                                     words="expected BF16, F16 or F32")
                          for w, stack in EXPERT_STACKS.items()]
            continue
        name = mapped_once(ck, seen, src, gguf_name(q, src), f"a {q.arch} MTP head")
        specs.append(_spec(ck, src, name, out))
    for bid, n in groups.incomplete():
        raise ConvertError(f"{ck.path}: mtp.layers.{bid - q.n} has {n} expert tensors, expected 3 x num_experts "
                           f"{q.experts} = {3 * q.experts}")
    return specs


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a checkpoint of one of the mixin's classes: header, tensors and the layer counts."""
    q = read_hparams(ARCHS[hf_arch], hp, ck.names, where)
    tensors = plan_tensors(ck, q, out)
    return q.head(header_kvs(q, file_type, where), tensors)
