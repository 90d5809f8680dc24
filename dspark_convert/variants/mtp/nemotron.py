"""The Nemotron-H MTP family (upstream's ``NemotronHModel`` in ``conversion/nemotron.py``, spec/drafts-beyond-dflash.md
§1): ``NemotronHForCausalLM`` with mixture-of-experts layers (``num_experts_per_tok`` in the config), GGUF
architecture ``nemotron_h_moe``.

What upstream's ``--mtp`` file holds for them:

- the checkpoint's MTP head is two layers, ``mtp.layers.0`` (the NextN input fusion ``enorm`` / ``hnorm`` /
  ``eh_proj`` and an attention sub-layer with its ``norm``) and ``mtp.layers.1`` (a MoE sub-layer with its
  ``norm`` and the head's ``final_layernorm``); upstream folds both into the one block ``n`` (``n`` =
  ``num_hidden_layers``): ``mtp.layers.1.norm`` becomes ``post_attention_norm``, ``final_layernorm``
  ``nextn.shared_head_norm``, every other tensor takes the trunk's name for its suffix (``mixer.q_proj`` ->
  ``attn_q``, ``mixer.gate`` -> ``ffn_gate_inp``, ...). The block's q/k rows go through LlamaModel's permutation
  (GraniteHybridModel keeps ``undo_permute``; the head's attention is NoPE, so llama.cpp never undoes it); the
  routed experts (``down_proj`` / ``up_proj``, stored per expert) are stacked (down, then up) when the
  ``2 x n_routed_experts``-th arrives; the router is not forced to F32 (upstream's F32 rule looks for
  ``blk.{1}.ffn_gate_inp``, the checkpoint's layer index, not the block's); of the trunk only
  ``backbone.embeddings``, ``backbone.norm_f`` and ``lm_head``;
- the full header of the target, written by the class chain NemotronH -> GraniteHybrid -> GraniteMoe -> Granite
  -> Llama -> TextModel: :func:`header_kvs` replays its writes in order (a key written again keeps its first place
  and takes the new value: ``context_length`` becomes 2^20, ``feed_forward_length`` and ``head_count_kv`` become
  per-block arrays over ``block_count = n + 1``, the MTP block counted as attention and MoE).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...formats.transforms import Transform
from ...hf.checkpoint import Checkpoint
from ...kit.common import mapped_once, tensor_type
from ...kit.hparams import HParams
from ...plan import KV, TensorSpec
from ...tokenizer.targets import target_rows
from ..eagle3.transforms import Eagle3Permute
from .head import Head
from .specs import ExpertGroups, float_ref, layer_indices, stack_spec

#: upstream's model class that exports the Nemotron-H MTP head with ``--mtp`` (only its MoE variant)
MTP_CLASSES = ("NemotronHModel",)
#: HF class -> GGUF arch: the MoE variant of every architecture the target table registers to that class
ARCHS: dict[str, str] = {row.name: S.ARCH_NEMOTRON_H_MOE for row in target_rows()
                          if row.model_class in MTP_CLASSES and row.mtp_export}
#: the trunk tensors an ``--mtp`` file keeps
KEPT_ROOTS: dict[str, str] = {"backbone.embeddings.weight": S.T_TOKEN_EMBD, "backbone.norm_f.weight": S.T_OUTPUT_NORM,
                              "lm_head.weight": S.T_OUTPUT}
#: upstream's ``_MTP_SPECIAL_RENAMES``: (MTP layer, suffix) -> the block tensor
SPECIAL: dict[tuple[int, str], str] = {
    (0, "enorm.weight"): S.L_NEXTN_ENORM,
    (0, "hnorm.weight"): S.L_NEXTN_HNORM,
    (0, "eh_proj.weight"): S.L_NEXTN_EH_PROJ,
    (1, "norm.weight"): S.L_POST_ATTENTION_NORM,
    (1, "final_layernorm.weight"): S.L_NEXTN_SHARED_HEAD_NORM,
}
#: any other suffix of either MTP layer -> the block tensor (its trunk name ``backbone.layers.{n}.<suffix>``)
LAYER: dict[str, str] = {
    "norm.weight": S.L_ATTN_NORM,
    "mixer.q_proj.weight": S.L_ATTN_Q,
    "mixer.k_proj.weight": S.L_ATTN_K,
    "mixer.v_proj.weight": S.L_ATTN_V,
    "mixer.o_proj.weight": S.L_ATTN_OUT,
    "mixer.q_proj.bias": "attn_q.bias",
    "mixer.k_proj.bias": "attn_k.bias",
    "mixer.v_proj.bias": "attn_v.bias",
    "mixer.o_proj.bias": "attn_output.bias",
    "mixer.gate.weight": S.L_FFN_GATE_INP,
    "mixer.gate.e_score_correction.bias": S.L_EXP_PROBS_B,
    "mixer.shared_experts.up_proj.weight": S.L_FFN_UP_SHEXP,
    "mixer.shared_experts.down_proj.weight": S.L_FFN_DOWN_SHEXP,
    "mixer.fc1_latent_proj.weight": S.L_FFN_LATENT_DOWN,
    "mixer.fc2_latent_proj.weight": S.L_FFN_LATENT_UP,
}
#: per-expert projection -> its stack, in the order upstream emits the two stacks
EXPERT_STACKS: dict[str, str] = {"down_proj": S.L_FFN_DOWN_EXPS, "up_proj": S.L_FFN_UP_EXPS}
#: (checkpoint pattern, short GGUF name) of every MTP tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = ([(f"mtp.layers.{i}.{hf}", name) for (i, hf), name in SPECIAL.items()]
                                   + [(f"mtp.layers.*.{hf}", name) for hf, name in LAYER.items()]
                                   + [(f"mtp.layers.1.mixer.experts.*.{w}.weight", name)
                                      for w, name in EXPERT_STACKS.items()])
_MTP = re.compile(r"mtp\.layers\.(\d+)\.(.+)")
_EXPERT = re.compile(r"mixer\.experts\.(\d+)\.(down_proj|up_proj)\.weight")
#: GraniteHybridModel's hparam prefix: every ``find_hparam`` also tries ``mamba_<key>``
PREFIX = "mamba_"
#: ``TextModel``'s router score functions -> ``expert_gating_func``
GATING = {"sigmoid": 2, "softmax": 1, "sqrtsoftplus": 4}


#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = KEPT_ROOTS

def bare(name: str) -> str:
    """A checkpoint name as upstream's filter sees it (``e_score_correction_bias`` -> ``e_score_correction.bias``)."""
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name.replace("language_model.", "")


def is_read(name: str) -> bool:
    """The checkpoint tensors an ``--mtp`` file is made of (the trunk's shards are never opened)."""
    b = bare(name)
    return b.startswith("mtp.") or b in KEPT_ROOTS


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """:func:`is_read`, whatever the config (the head is ``mtp.*``)."""
    return is_read


def find(hp: HParams, keys: Iterable[str]) -> Any:
    """GraniteHybridModel's ``find_hparam``: the first of ``keys``, then of ``mamba_<key>``, present in ``hp``."""
    keys = tuple(keys)
    return next((hp[k] for k in (*keys, *(PREFIX + k for k in keys)) if k in hp), None)


def need(hp: HParams, keys: Iterable[str], where: str) -> Any:
    keys = tuple(keys)
    v = find(hp, keys)
    if v is None:
        raise ConvertError(f"{where}: none of the keys {', '.join(repr(k) for k in keys)} is set; a Nemotron-H "
                           "checkpoint needs it (upstream's converter fails)")
    return v


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class NemotronMtp:
    """The config values the file needs, validated."""

    hp: HParams
    n: int                  # trunk layers
    experts: int            # n_routed_experts
    ssm: tuple[int, ...]    # the Mamba layers of the pattern
    attn: tuple[int, ...]   # the attention layers (the MTP block included)
    mlp: tuple[int, ...]    # the MoE layers (the MTP block included)
    n_head_kv: int          # the attention blocks' KV heads (head_count_kv)
    perm: tuple[int, int]   # LlamaModel's (n_head, n_kv_head) of the q/k permutation


def _pattern(hp: HParams, n: int, where: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(Mamba, attention, MoE) layer indices of ``hybrid_override_pattern`` / ``layers_block_type``."""
    pattern = hp.get("hybrid_override_pattern") or hp.get("layers_block_type")
    if not isinstance(pattern, (str, list)) or not pattern:
        raise ConvertError(f"{where}: no 'hybrid_override_pattern' (or 'layers_block_type'): the Nemotron-H layer "
                           "pattern is needed to write the per-block keys")
    if len(pattern) != n:
        raise ConvertError(f"{where}: the layer pattern has {len(pattern)} entries, expected num_hidden_layers ({n}) "
                           "(upstream asserts it)")
    if isinstance(pattern, str):
        kinds = [{"M": "ssm", "*": "attn", "E": "mlp"}.get(c, "") for c in pattern]
    else:
        kinds = ["ssm" if t in ("mamba", "linear_attention") else "attn" if t in ("attention", "full_attention")
                 else "mlp" if t == "moe" else "" for t in pattern]
    ssm, attn, mlp = (tuple(i for i, k in enumerate(kinds) if k == want) for want in ("ssm", "attn", "mlp"))
    if len(attn) == n:
        raise ConvertError(f"{where}: every layer of the pattern is attention; upstream converts such a checkpoint as "
                           "Granite, not nemotron_h_moe")
    return ssm, attn, mlp


def read_hparams(hp: HParams, names: list[str], where: str) -> NemotronMtp:
    """The layer count, the pattern, ``num_nextn_predict_layers`` (1, with ``mtp.layers.0`` and ``mtp.layers.1``)
    and the MoE keys, each refused in one line when unusable."""
    if "num_experts_per_tok" not in hp:
        raise ConvertError(f"{where}: no MTP head: a Nemotron-H checkpoint without experts ('num_experts_per_tok') is "
                           "nemotron_h, whose MTP head upstream does not export (\"--mtp was requested, but this model "
                           "does not contain a supported MTP head\")")
    types = hp.get("layers_block_type")
    n = len(types) if isinstance(types, list) else hp.positive("num_hidden_layers", need(hp, ("n_layers", "num_hidden_layers", "n_layer", "num_layers"), where))
    declared = hp.get("num_nextn_predict_layers") or 0
    if declared == 0:
        raise ConvertError(f"{where}: no MTP head: 'num_nextn_predict_layers' is {hp.get('num_nextn_predict_layers')!r} "
                           "(upstream's --mtp: \"this model does not contain a supported MTP head\")")
    if hp.u32("num_nextn_predict_layers", declared) != 1:
        raise ConvertError(f"{where}: num_nextn_predict_layers is {declared}; upstream's Nemotron-H MTP conversion "
                           "supports 1 (one head of two layers, mtp.layers.0 and mtp.layers.1)")
    found = layer_indices(lambda x: _MTP.fullmatch(bare(x)), names)
    if found != [0, 1]:
        raise ConvertError(f"{where}: the MTP head has layers {found or 'none'}; expected mtp.layers.0 (fusion + "
                           "attention) and mtp.layers.1 (MoE + final norm)")
    ssm, attn, mlp = _pattern(hp, n, where)
    experts = hp.positive("n_routed_experts")
    n_kv = hp.positive("num_key_value_heads", need(hp, ("num_key_value_heads", "n_head_kv"), where))
    perm = (hp.positive("num_attention_heads", need(hp, ("n_heads", "num_attention_heads"), where)),
            hp.positive("num_key_value_heads", need(hp, ("n_kv_heads", "num_key_value_heads"), where)))
    return NemotronMtp(hp, n, experts, ssm, (*attn, n), (*mlp, n), n_kv, perm)


class _Writer:
    """gguf-py's writer as far as the header goes: a key written again keeps its first place, takes the new value."""

    def __init__(self, arch: str) -> None:
        self.a = {"arch": arch}
        self.kvs: dict[str, KV] = {}

    def add(self, tpl: str, vt: VT, value: Any, sub: VT | None = None) -> None:
        name = tpl.format(**self.a)
        self.kvs[name] = KV(name, vt, value, sub) if sub is not None else KV(name, vt, value)


def header_kvs(g: NemotronMtp, file_type: int, where: str) -> tuple[list[KV], list[KV]]:
    """The target's own header as upstream's class chain writes it: (TextModel's block up to ``general.file_type``,
    then the rest), each key where it was first written with the value it was last given."""
    hp = HParams({k: v for k, v in g.hp.items() if k != "head_dim"}, g.hp.where)  # GraniteModel pops head_dim before TextModel sees it
    w = _Writer(S.ARCH_NEMOTRON_H_MOE)
    n_all = g.n + 1

    def u32(tpl: str, v: Any, key: str) -> None:
        w.add(tpl, VT.UINT32, hp.u32(key, v))

    def f32(tpl: str, v: Any, key: str) -> None:
        w.add(tpl, VT.FLOAT32, hp.number(key, v))

    # TextModel.set_gguf_parameters
    u32(S.BLOCK_COUNT, n_all, "num_hidden_layers")
    for tpl, keys in ((S.CONTEXT_LENGTH, ("max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                          "max_sequence_length", "model_max_length")),
                      (S.EMBEDDING_LENGTH, ("hidden_size", "n_embd", "dim")),
                      (S.FEED_FORWARD_LENGTH, ("prefix_dense_intermediate_size", "dense_intermediate_size",
                                               "intermediate_size", "n_inner", "hidden_dim")),
                      (S.HEAD_COUNT, ("num_attention_heads", "n_head", "n_heads")),
                      (S.HEAD_COUNT_KV, ("num_key_value_heads", "n_kv_heads"))):
        if (v := find(hp, keys)) is not None:
            u32(tpl, v, keys[0])
    if hp.get("is_causal") is False:
        w.add(S.CAUSAL, VT.BOOL, False)
    rd = hp.rope()
    rope_type = rd.get("rope_type")
    if rope_type is not None:
        factor = rd.get("factor")
        if rope_type == "linear" and factor is not None:
            w.add(S.ROPE_SCALING_TYPE, VT.STRING, "linear")
            f32(S.ROPE_SCALING_FACTOR, factor, "factor")
        elif rope_type == "yarn" and factor is not None:
            raise ConvertError(f"{where}: yarn rope scaling on a Nemotron-H checkpoint is not written by this version")
        elif rope_type in ("su", "longrope"):
            w.add(S.ROPE_SCALING_TYPE, VT.STRING, "longrope")
    if "mrope_section" in rd:
        w.add(S.ROPE_DIMENSION_SECTIONS, VT.ARRAY, ([int(x) for x in rd["mrope_section"]] + [0] * 4)[:4], VT.INT32)
    if rd.get("rope_theta") is not None:
        f32(S.ROPE_FREQ_BASE, rd["rope_theta"], "rope_theta")
    for tpl, keys in ((S.RMS_EPS, ("rms_norm_eps", "norm_eps")),
                      (S.LAYER_NORM_EPS, ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"))):
        if (v := find(hp, keys)) is not None:
            f32(tpl, v, keys[0])
    for tpl, keys in ((S.EXPERT_COUNT, ("num_local_experts", "num_experts", "n_routed_experts")),
                      (S.EXPERT_USED_COUNT, ("num_experts_per_tok", "num_experts_per_token", "top_k_experts"))):
        if (v := find(hp, keys)) is not None:
            u32(tpl, v, keys[0])
    for tpl, key in ((S.EXPERT_GROUP_COUNT, "n_group"), (S.EXPERT_GROUP_USED_COUNT, "topk_group")):
        if hp.get(key) is not None:
            u32(tpl, hp[key], key)
    score = find(hp, ("score_function", "scoring_func", "score_func", "moe_router_activation",
                      "moe_router_activation_func", "expert_selection_fn"))
    if score is not None:
        if score not in GATING:
            raise ConvertError(f"{where}: router score function {score!r} is not one upstream converts "
                               f"(expected one of {', '.join(GATING)})")
        w.add(S.EXPERT_GATING_FUNC, VT.UINT32, GATING[score])
    w.add(S.GENERAL_FILE_TYPE, VT.UINT32, file_type)
    # LlamaModel: the vocab size, and the rope width from hidden_size / heads (head_dim is gone by now)
    u32(S.VOCAB_SIZE, hp.get("vocab_size"), "vocab_size")
    hidden = hp.positive("hidden_size")
    u32(S.ROPE_DIMENSION_COUNT, hidden // hp.positive("num_attention_heads"),
        "head_dim")
    # GraniteModel's multipliers, GraniteMoeModel's shared width
    for tpl, key in ((S.ATTENTION_SCALE, "attention_multiplier"), (S.EMBEDDING_SCALE, "embedding_multiplier"),
                     (S.RESIDUAL_SCALE, "residual_multiplier"), (S.LOGIT_SCALE, "logits_scaling")):
        if hp.get(key):
            f32(tpl, hp[key], key)
    if hp.get("spatial_target_layers") or hp.get("deepstack_layer_map"):
        raise ConvertError(f"{where}: a Granite 4 Vision deepstack map on a Nemotron-H checkpoint is not written here")
    if hp.get("shared_intermediate_size"):
        u32(S.EXPERT_SHARED_FEED_FORWARD_LENGTH, hp["shared_intermediate_size"], "shared_intermediate_size")
    # GraniteHybridModel: the Mamba mixer, per-block KV heads, no rope
    d_model = need(hp, ("mamba_head_dim", "hidden_size", "d_model"), where)
    d_inner = hp.positive("mamba_num_heads", need(hp, ("num_heads",), where)) * hp.positive("mamba_head_dim", d_model)
    u32(S.SSM_CONV_KERNEL, need(hp, ("conv_kernel", "d_conv"), where), "conv_kernel")
    u32(S.SSM_STATE_SIZE, need(hp, ("state_size", "d_state", "state_dim", "ssm_state_size"), where), "ssm_state_size")
    u32(S.SSM_GROUP_COUNT, need(hp, ("n_groups", "num_groups"), where), "n_groups")
    u32(S.SSM_INNER_SIZE, d_inner, "mamba_num_heads x mamba_head_dim")
    u32(S.SSM_TIME_STEP_RANK, need(hp, ("n_heads", "num_heads"), where), "mamba_num_heads")
    if hp.get("attn_rotary_emb"):
        u32(S.ROPE_DIMENSION_COUNT, hp["attn_rotary_emb"], "attn_rotary_emb")
    w.add(S.HEAD_COUNT_KV, VT.ARRAY, [g.n_head_kv if i in g.attn else 0 for i in range(n_all)], VT.INT32)
    use_rope = "BambaForCausalLM" in (hp.get("architectures") or []) or not g.ssm
    w.add(S.ROPE_SCALING_FINETUNED, VT.BOOL, use_rope)
    if not use_rope:
        u32(S.CONTEXT_LENGTH, 2 ** 20, "context_length")
    d_head = find(hp, ("d_head",)) or 64
    if hp.get("hidden_act") not in (None, "silu"):
        raise ConvertError(f"{where}: hidden_act is {hp.get('hidden_act')!r}; upstream asserts silu (or none)")
    if d_inner % hp.positive("d_head", d_head):
        raise ConvertError(f"{where}: the SSM inner size {d_inner} (mamba_num_heads x mamba_head_dim) is not a "
                           f"multiple of d_head {d_head} (upstream asserts it)")
    # NemotronHModel
    head_dim = g.hp.get("head_dim", g.hp.get("attention_head_dim"))
    if head_dim is None:
        raise ConvertError(f"{where}: no 'head_dim' (or 'attention_head_dim'); upstream asserts it")
    u32(S.KEY_LENGTH, head_dim, "head_dim")
    u32(S.VALUE_LENGTH, head_dim, "head_dim")

    def req(key: str) -> Any:
        return hp.require(key, "a Nemotron-H MoE checkpoint needs it")

    moe_ff = req("moe_intermediate_size")
    w.add(S.FEED_FORWARD_LENGTH, VT.ARRAY, [hp.u32("moe_intermediate_size", moe_ff) if i in g.mlp else 0
                                            for i in range(n_all)], VT.INT32)
    u32(S.EXPERT_USED_COUNT, req("num_experts_per_tok"), "num_experts_per_tok")
    u32(S.EXPERT_FEED_FORWARD_LENGTH, moe_ff, "moe_intermediate_size")
    u32(S.EXPERT_SHARED_FEED_FORWARD_LENGTH, req("moe_shared_expert_intermediate_size"),
        "moe_shared_expert_intermediate_size")
    u32(S.EXPERT_COUNT, req("n_routed_experts"), "n_routed_experts")
    u32(S.EXPERT_SHARED_COUNT, req("n_shared_experts"), "n_shared_experts")
    norm = req("norm_topk_prob")
    if not isinstance(norm, bool):
        raise ConvertError(f"{where}: key 'norm_topk_prob' is {norm!r}, expected true or false")
    w.add(S.EXPERT_WEIGHTS_NORM, VT.BOOL, norm)
    f32(S.EXPERT_WEIGHTS_SCALE, req("routed_scaling_factor"), "routed_scaling_factor")
    u32(S.EXPERT_GROUP_COUNT, req("n_group"), "n_group")
    u32(S.EXPERT_USED_COUNT, hp["num_experts_per_tok"], "num_experts_per_tok")
    if hp.get("moe_latent_size") is not None:
        u32(S.MOE_LATENT_SIZE, hp["moe_latent_size"], "moe_latent_size")
    u32(S.NEXTN_PREDICT_LAYERS, 1, "num_nextn_predict_layers")
    kvs = list(w.kvs.values())
    at = next(i for i, kv in enumerate(kvs) if kv.name == S.GENERAL_FILE_TYPE) + 1
    return kvs[:at], kvs[at:]


# ---------------------------------------------------------------------------------------------- tensors
def gguf_name(n: int, name: str) -> str | None:
    """The GGUF name of one read checkpoint tensor (None: an expert, stacked separately, or unmapped)."""
    b = bare(name)
    if b in KEPT_ROOTS:
        return KEPT_ROOTS[b]
    m = _MTP.fullmatch(b)
    if m is None or int(m.group(1)) > 1:
        return None
    short = SPECIAL.get((int(m.group(1)), m.group(2))) or LAYER.get(m.group(2))
    return None if short is None else S.LAYER_PREFIX.format(bid=n) + short


def _permute(g: NemotronMtp, short: str) -> Transform | None:
    """LlamaModel's q/k permutation (``undo_permute``): q with ``n_head`` groups, k with ``n_head_kv``."""
    if short.startswith("attn_q."):
        return Eagle3Permute(g.perm[0], g.perm[0])
    if short.startswith("attn_k."):
        return Eagle3Permute(*g.perm)
    return None


def _spec(ck: Checkpoint, g: NemotronMtp, src: str, name: str, out: QT) -> TensorSpec:
    ref = float_ref(ck, src)
    short = name.split(".", 2)[-1] if name.startswith("blk.") else name
    transform = _permute(g, short)
    if transform is not None:
        groups = transform.groups if isinstance(transform, Eagle3Permute) else 1
        if not ref.shape or ref.shape[0] % (2 * groups):
            raise ConvertError(f"{ref.file}: tensor '{src}' has {ref.shape[0] if ref.shape else 0} rows, not a "
                               f"multiple of 2 x {groups} heads (upstream's q/k permutation reshapes by heads)")
    return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out), sources=(src,),
                      transform=transform, source_dtype=ref.dtype)


def plan_tensors(ck: Checkpoint, g: NemotronMtp, out: QT) -> list[TensorSpec]:
    """The file's tensors in upstream's order: the read tensors in checkpoint order, the two expert stacks (down, up)
    where the ``2 x n_routed_experts``-th expert tensor of the head arrives."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(2 * g.experts)  # both MTP layers' experts go to block n
    for src in ck.names:
        b = bare(src)
        m = _MTP.fullmatch(b)
        e = _EXPERT.fullmatch(m.group(2)) if m is not None else None
        if m is not None and e is not None and int(m.group(1)) <= 1:
            xid = int(e.group(1))
            if xid >= g.experts:
                raise ConvertError(f"{ck.ref(src).file}: tensor '{src}': expert {xid} is beyond n_routed_experts "
                                   f"{g.experts}")
            full = groups.add(g.n, e.group(2), xid, src)
            if full is not None:
                specs += [stack_spec(ck, full.get(w, {}), g.experts, f"mtp.layers.*.mixer.experts.*.{w}.weight",
                                     S.LAYER_PREFIX.format(bid=g.n) + stack, out, count_key="n_routed_experts")
                          for w, stack in EXPERT_STACKS.items()]
            continue
        name = mapped_once(ck, seen, src, gguf_name(g.n, src), f"a {S.ARCH_NEMOTRON_H_MOE} MTP head")
        specs.append(_spec(ck, g, src, name, out))
    count = groups.count.get(g.n, 0)
    if count != 2 * g.experts:
        raise ConvertError(f"{ck.path}: the MTP head has {count} expert tensors, expected 2 x n_routed_experts "
                           f"{g.experts} = {2 * g.experts} (upstream fails with \"Unprocessed experts\")")
    return specs


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``NemotronHModel`` MoE checkpoint: header, tensors and the layer counts."""
    g = read_hparams(hp, ck.names, where)
    base, fam = header_kvs(g, file_type, where)
    tensors = plan_tensors(ck, g, out)
    return Head(ARCHS[hf_arch], g.n, 1, base, fam, tensors)
