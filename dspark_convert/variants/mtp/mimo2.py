"""The MiMo-V2 MTP family (upstream's ``MimoV2Model`` in ``conversion/mimo.py``, spec/drafts-beyond-dflash.md §1):
MiMo-V2-Flash (``MiMoV2FlashForCausalLM``) and MiMo-V2.5 / V2.5-Pro (``MiMoV2ForCausalLM``), GGUF architecture
``mimo2``.

What upstream's ``--mtp`` file holds for them:

- the three MTP layers ``model.mtp.layers.{0,1,2}.*`` (the count is fixed by the class, not read from the config),
  renamed to blocks ``n .. n + 2`` (``n`` = ``num_hidden_layers``): ``eh_proj`` / ``enorm`` / ``hnorm``, the attention
  (separate ``q_proj`` / ``k_proj`` / ``v_proj``, or MiMo-V2.5's fused ``qkv_proj`` -> ``attn_qkv``), ``o_proj``, the
  sliding-window sinks ``attention_sink_bias`` -> ``attn_sinks``, ``input_layernorm`` -> ``attn_norm``,
  ``pre_mlp_layernorm`` -> ``ffn_norm``, the dense MLP and ``final_layernorm`` -> ``layer_output_norm``; of the trunk
  only ``model.embed_tokens``, ``model.norm`` and ``lm_head`` (matched on the raw checkpoint names); routed experts
  of an MTP layer, were there any, stacked gate, up, down;
- block-scaled FP8 weights (``quant_method: fp8``, ``weight_block_size``) dequantized to float32 (weight x
  ``weight_scale_inv``, one float32 product), then written at the outtype like any float tensor; a fused FP8
  ``qkv_proj`` is stored per tensor-parallel rank (8 or 4 ranks, found from its scale rows) and regrouped into
  ``[Q | K | V]`` with the sliding-window KV head count (the MTP layers attend like the SWA layers);
- the full header of the target: TextModel's generic block (``block_count = n + 3``, rope bases for the full and
  the sliding layers, expert counts and groups, the sigmoid gating), then ``head_count_kv`` per block (the sliding
  count for the MTP blocks, written in place of the generic one), ``attention.sliding_window``,
  ``sliding_window_pattern`` (``hybrid_layer_pattern`` + three 1s), ``value_length`` (``v_head_dim``, in place),
  ``expert_feed_forward_length``, ``rope.dimension_count`` (``head_dim x partial_rotary_factor``), the RMS epsilon
  (``layernorm_epsilon``, 1e-5 when absent), ``attention.value_scale`` when set and ``nextn_predict_layers`` 3;
  ``general.file_type`` is MOSTLY_MXFP4_MOE (38) whatever the outtype when the checkpoint stores its routed experts
  MXFP4 (``store_dtype: mxfp4``, MiMo-V2.5-Pro), though the sidecar holds none.

One difference by default: an MTP layer's separate ``q_proj`` / ``k_proj`` / ``v_proj`` (MiMo-V2-Flash) are written as
one ``attn_qkv`` (their rows one after the other, each rounded as upstream rounds it alone), because llama.cpp b11434's
``mimo2`` MTP graph asserts the fused tensor (``GGML_ASSERT(layer.wqkv ...)``) and aborts on upstream's three;
``--match-upstream`` writes upstream's three tensors.

The config is read as it is on disk: b11434 pins transformers 4.57.6, which has no config class for these model
types (upstream falls back to ``config.json``).
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
from .glm import insert_expert_groups
from .head import Counts, Head
from .specs import (
    FLOAT_DTYPES,
    NEXTN_ROWS,
    ExpertGroups,
    float_ref,
    fp8_block,
    layer_indices,
    layer_spec,
    stack_spec,
    target_archs,
)
from .transforms import Fp8ScaleInvDequant, QkvConcat, TpQkvDequant

#: upstream's model class that exports the MiMo-V2 MTP layers with ``--mtp``
MTP_CLASSES = ("MimoV2Model",)
#: HF class -> GGUF arch
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: the family reads its FP8 weights itself (the shared float32 view, ``specs.adopt_fp8``, is not applied)
OWN_FP8 = True
#: the MTP layers upstream's class writes, whatever the config says (``_n_nextn``)
NEXTN = 3
#: the trunk tensors an ``--mtp`` file keeps, matched on the raw checkpoint name
KEPT_ROOTS: dict[str, str] = {"model.embed_tokens.weight": S.T_TOKEN_EMBD, "model.norm.weight": S.T_OUTPUT_NORM,
                              "lm_head.weight": S.T_OUTPUT}
#: an MTP layer's tensor (after ``model.mtp.layers.{i}.``, sinks with ``.weight`` added) -> its GGUF name (after
#: ``blk.{n+i}.``), by gguf-py's ``mimo2`` tensor map
LAYER: dict[str, str] = {
    **NEXTN_ROWS,
    "final_layernorm.weight": S.L_LAYER_OUT_NORM,
    "input_layernorm.weight": S.L_ATTN_NORM,
    "pre_mlp_layernorm.weight": S.L_FFN_NORM,
    "post_attention_layernorm.weight": S.L_FFN_NORM,
    "self_attn.q_proj.weight": S.L_ATTN_Q,
    "self_attn.k_proj.weight": S.L_ATTN_K,
    "self_attn.v_proj.weight": S.L_ATTN_V,
    "self_attn.qkv_proj.weight": S.L_ATTN_QKV,
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.qkv_proj.bias": "attn_qkv.bias",
    "self_attn.o_proj.weight": S.L_ATTN_OUT,
    "self_attn.attention_sink_bias.weight": S.L_ATTN_SINKS,
    "mlp.gate_proj.weight": S.L_FFN_GATE,
    "mlp.up_proj.weight": S.L_FFN_UP,
    "mlp.down_proj.weight": S.L_FFN_DOWN,
    "mlp.gate.weight": S.L_FFN_GATE_INP,
    "mlp.gate.e_score_correction.bias": S.L_EXP_PROBS_B,
}
#: per-expert projection -> its stack, in the order upstream's stacker emits them
EXPERT_STACKS: dict[str, str] = {"gate_proj": S.L_FFN_GATE_EXPS, "up_proj": S.L_FFN_UP_EXPS,
                                 "down_proj": S.L_FFN_DOWN_EXPS}
#: an MTP layer's separate projections (MiMo-V2-Flash) -> their place in a fused ``attn_qkv``
QKV = {"self_attn.q_proj.weight": 0, "self_attn.k_proj.weight": 1, "self_attn.v_proj.weight": 2}
MTP_RE = re.compile(r"model\.mtp\.layers\.(\d+)\.(.+)")
EXPERT_RE = re.compile(r"mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight")
#: (checkpoint pattern, short GGUF name) of every MTP layer tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = ([(f"model.mtp.layers.*.{hf.removesuffix('.weight') if 'sink' in hf else hf}", name)
                                    for hf, name in LAYER.items()]
                                   + [(f"model.mtp.layers.*.mlp.experts.*.{w}.weight", name)
                                      for w, name in EXPERT_STACKS.items()])
#: the config keys upstream's class reads without a default (a missing one is its KeyError)
REQUIRED = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "swa_num_key_value_heads", "head_dim",
            "v_head_dim", "swa_head_dim", "swa_num_attention_heads", "swa_v_head_dim", "hybrid_layer_pattern",
            "sliding_window", "n_routed_experts", "moe_intermediate_size", "topk_method")
#: upstream's ``assert``s on the sliding layers' attention: the same head sizes and count as the full layers'
SAME_AS = (("swa_head_dim", "head_dim"), ("swa_num_attention_heads", "num_attention_heads"),
           ("swa_v_head_dim", "v_head_dim"))


#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = KEPT_ROOTS

def bare(name: str) -> str:
    """A checkpoint name as upstream's filters leave it: a sink bias gets ``.weight``, ``e_score_correction_bias``
    becomes ``e_score_correction.bias``, ``language_model.`` goes."""
    if "attention_sink" in name and not name.endswith(".weight"):
        name += ".weight"
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name.replace("language_model.", "")


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """The checkpoint tensors an ``--mtp`` file is made of: ``model.mtp.layers.*`` (their FP8 scales included), the
    embedding, the final norm and the head (the trunk's shards are never opened)."""
    def keep(name: str) -> bool:
        return name.startswith("model.mtp.layers.") or name in KEPT_ROOTS

    return keep


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class MimoMtp(Counts):
    """The config values the file needs, validated: ``block`` is FP8's ``weight_block_size`` (None: no FP8),
    ``rope`` upstream's view of the rope parameters, ``mxfp4`` whether the checkpoint stores its routed experts MXFP4
    (``store_dtype: mxfp4``)."""

    block: tuple[int, int] | None
    rope: dict[str, Any]
    mxfp4: bool


def _find(hp: HParams, keys: tuple[str, ...]) -> Any:
    return next((hp[k] for k in keys if k in hp), None)


def rope_view(hp: HParams) -> dict[str, Any]:
    """TextModel's ``rope_parameters``: ``rope_parameters`` / ``rope_scaling`` of the config, completed (when it is not
    split into ``full_attention`` / ``sliding_attention``) with the sliding layers' base, the global base, the type,
    ``partial_rotary_factor`` and ``original_max_position_embeddings`` of the top level."""
    rp = dict(hp.get("rope_parameters", hp.get("rope_scaling")) or {})
    if "full_attention" in rp or "sliding_attention" in rp:
        return rp
    local = _find(hp, ("local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta",
                       "rope_local_base_freq"))
    if local is not None:
        rp["sliding_attention"] = {"rope_theta": local}
    theta = _find(hp, ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"))
    if "rope_theta" not in rp and theta is not None:
        rp["rope_theta"] = theta
    if "rope_type" not in rp and rp.get("type") is not None:
        rp["rope_type"] = rp["type"]
    for key, keys in (("partial_rotary_factor", ("partial_rotary_factor", "rope_pct", "rope_percent")),
                      ("original_max_position_embeddings", ("original_max_position_embeddings",))):
        v = _find(hp, keys)
        if key not in rp and v is not None:
            rp[key] = v
    return rp


def _block_size(hp: HParams, where: str) -> tuple[int, int] | None:
    """FP8's ``weight_block_size`` (None when the checkpoint is not ``quant_method: fp8``); refused in one line when
    another quantization is declared or the block size is not two positive integers."""
    qc = hp.get("quantization_config")
    if qc is None:
        return None
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    if method != "fp8":
        raise ConvertError(f"{where}: quantization_config quant_method {method!r}: the MiMo-V2 MTP head is converted "
                           "from float or block-scaled FP8 (quant_method 'fp8') weights")
    return fp8_block(hp, where)


def read_hparams(arch: str, hp: HParams, names: list[str], where: str) -> MimoMtp:
    """The keys upstream's class reads, its assertions, and the three MTP layers, each refused in one line."""
    for key in REQUIRED:
        hp.require(key, "upstream's MimoV2Model reads it (KeyError)")
    for swa, full in SAME_AS:
        if hp[swa] != hp[full]:
            raise ConvertError(f"{where}: {swa} {hp[swa]!r} differs from {full} {hp[full]!r}; upstream's MimoV2Model "
                               "asserts they are equal")
    if hp["topk_method"] != "noaux_tc":
        raise ConvertError(f"{where}: topk_method is {hp['topk_method']!r}; upstream's MimoV2Model asserts 'noaux_tc'")
    n = hp.positive("num_hidden_layers")
    pattern = hp["hybrid_layer_pattern"]
    if not isinstance(pattern, list) or len(pattern) != n or any(p not in (0, 1) or isinstance(p, bool)
                                                                 for p in pattern):
        raise ConvertError(f"{where}: hybrid_layer_pattern is {pattern!r}, expected num_hidden_layers {n} entries of "
                           "0 (full attention) or 1 (sliding window)")
    found = layer_indices(MTP_RE.match, names)
    if found != list(range(NEXTN)):
        raise ConvertError(f"{where}: the checkpoint has MTP layers {found or 'none'}; upstream's MimoV2Model writes "
                           f"exactly model.mtp.layers.0..{NEXTN - 1} (block_count num_hidden_layers + {NEXTN})")
    rope = rope_view(hp)
    if "partial_rotary_factor" not in rope:
        raise ConvertError(f"{where}: no partial_rotary_factor in the rope parameters; upstream's MimoV2Model reads "
                           "rope_parameters['partial_rotary_factor'] (KeyError)")
    experts = hp.u32("n_routed_experts")
    return MimoMtp(arch, hp, n, NEXTN, experts, _block_size(hp, where), rope, _mxfp4(hp, where))


def _mxfp4(hp: HParams, where: str) -> bool:
    """Whether the routed experts are stored MXFP4 (``quantization_config.store_dtype: mxfp4``); refused in one line
    when its ``mxfp4_block_size`` is not ggml's 32."""
    qc = hp.get("quantization_config") or {}
    if not isinstance(qc, dict) or qc.get("store_dtype") != "mxfp4":
        return False
    if qc.get("mxfp4_block_size", 32) != 32:
        raise ConvertError(f"{where}: quantization_config mxfp4_block_size is {qc.get('mxfp4_block_size')!r}; "
                           "upstream's MimoV2Model repacks MXFP4 experts in ggml's blocks of 32 only")
    return True


def header_kvs(g: MimoMtp, file_type: int, where: str) -> tuple[list[KV], list[KV]]:
    """The target's own header, as upstream's class writes it: (TextModel's generic block ending with
    ``general.file_type``, the class's keys); a key written again keeps its first place and takes the new value."""
    hp, a = g.hp, {"arch": g.arch}
    base = base_kvs(g.arch, {**hp, "rope_parameters": g.rope, "num_hidden_layers": g.n + g.nextn}, file_type, where)
    insert_expert_groups(base, g.arch, hp, where)
    fam: list[KV] = []

    def put(tpl: str, vt: VT, value: Any, sub: VT | None = None) -> None:
        kv = KV(tpl.format(**a), vt, value, sub) if sub is not None else KV(tpl.format(**a), vt, value)
        for kvs in (base, fam):
            at = next((i for i, x in enumerate(kvs) if x.name == kv.name), None)
            if at is not None:
                kvs[at] = kv
                return
        fam.append(kv)

    full = hp.u32("num_key_value_heads")
    swa = hp.u32("swa_num_key_value_heads")
    pattern = [int(p) for p in hp["hybrid_layer_pattern"]] + [1] * g.nextn
    put(S.HEAD_COUNT_KV, VT.ARRAY, [swa if p == 1 else full for p in pattern], VT.INT32)
    put(S.SLIDING_WINDOW, VT.UINT32, hp.u32("sliding_window"))
    put(S.SLIDING_WINDOW_PATTERN, VT.ARRAY, pattern, VT.INT32)
    put(S.VALUE_LENGTH, VT.UINT32, hp.u32("v_head_dim"))
    put(S.EXPERT_COUNT, VT.UINT32, g.experts)
    put(S.EXPERT_FEED_FORWARD_LENGTH, VT.UINT32, hp.u32("moe_intermediate_size"))
    factor = hp.fraction("partial_rotary_factor", g.rope["partial_rotary_factor"])
    put(S.ROPE_DIMENSION_COUNT, VT.UINT32, int(hp.u32("head_dim") * factor))
    put(S.RMS_EPS, VT.FLOAT32, hp.number("layernorm_epsilon", default=1e-5))
    if hp.get("attention_value_scale") is not None:
        put(S.ATTN_VALUE_SCALE, VT.FLOAT32, hp.number("attention_value_scale"))
    put(S.NEXTN_PREDICT_LAYERS, VT.UINT32, g.nextn)
    return base, fam


# ---------------------------------------------------------------------------------------------- tensors
def renamed(name: str, n: int) -> tuple[int, str] | None:
    """(block, the part after the layer prefix) of an MTP layer tensor after upstream's filters and rename; None for
    anything else."""
    m = MTP_RE.fullmatch(bare(name))
    return (n + int(m.group(1)), m.group(2)) if m is not None else None


def gguf_name(name: str, n: int) -> str | None:
    """The GGUF name of one read checkpoint tensor (None: an expert, stacked separately, or unmapped)."""
    if name in KEPT_ROOTS:
        return KEPT_ROOTS[name]
    r = renamed(name, n)
    if r is not None and r[1] in LAYER:
        return S.LAYER_PREFIX.format(bid=r[0]) + LAYER[r[1]]
    return None


def _fp8_spec(ck: Checkpoint, g: MimoMtp, src: str, name: str, out: QT) -> TensorSpec:
    """GGUF tensor ``name`` dequantized from F8_E4M3 ``src`` and its ``weight_scale_inv``: the fused ``qkv_proj``
    with :class:`TpQkvDequant` (the MTP layers' sliding-window KV heads), any other weight with
    :class:`Fp8ScaleInvDequant` over ``weight_block_size``."""
    ref, sname = ck.ref(src), src.removesuffix(".weight") + ".weight_scale_inv"
    sref = ck.ref(sname)
    if g.block is None:
        raise ConvertError(f"{ref.file}: tensor '{src}' has dtype F8_E4M3 but the config declares no "
                           "quantization_config with quant_method 'fp8'")
    if sref.dtype not in FLOAT_DTYPES or len(sref.shape) != 2 or len(ref.shape) != 2:
        raise ConvertError(f"{sref.file}: tensor '{sname}' has dtype {sref.dtype} and shape {list(sref.shape)}; "
                           "expected one float scale per block of a 2-D F8_E4M3 weight")
    rows, cols = ref.shape
    if src.endswith(".self_attn.qkv_proj.weight"):
        hp = g.hp
        heads, kv = hp["num_attention_heads"], hp["swa_num_key_value_heads"]
        q, k, v = heads * hp["head_dim"], kv * hp["head_dim"], kv * hp["v_head_dim"]
        if rows != q + k + v:
            raise ConvertError(f"{ref.file}: tensor '{src}' has {rows} rows; expected q + k + v = {q + k + v} "
                               f"(heads {heads} x head_dim, swa_num_key_value_heads {kv} x head_dim / v_head_dim)")
        tp = next((c for c in (8, 4) if rows % c == 0 and sref.shape[0] == c * -(-(rows // c) // 128)), None)
        if tp is None or q % tp or k % tp or v % tp:
            raise ConvertError(f"{sref.file}: tensor '{sname}' has {sref.shape[0]} scale rows: not 8 or 4 tensor-"
                               f"parallel ranks of {rows} q + k + v rows (upstream: \"cannot detect TP\")")
        if sref.shape[1] * 128 < cols:
            raise ConvertError(f"{sref.file}: tensor '{sname}' has {sref.shape[1]} scale columns for {cols} weight "
                               "columns in blocks of 128")
        return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out),
                          sources=(src, sname) * (3 * tp),
                          transform=TpQkvDequant(tp, q // tp, k // tp, v // tp, sref.dtype),
                          source_dtype=ref.dtype)
    br, bc = g.block
    if sref.shape != (-(-rows // br), -(-cols // bc)):
        raise ConvertError(f"{sref.file}: tensor '{sname}' has shape {list(sref.shape)}; expected "
                           f"[{-(-rows // br)}, {-(-cols // bc)}] for a {rows} x {cols} weight in {br} x {bc} blocks")
    return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out), sources=(src, sname),
                      transform=Fp8ScaleInvDequant(br, bc, sref.dtype), source_dtype=ref.dtype)


def _qkv_spec(ck: Checkpoint, g: MimoMtp, srcs: list[str], name: str, out: QT) -> TensorSpec:
    """GGUF tensor ``name`` (``attn_qkv``): the separate q / k / v projections ``srcs`` one after the other, each
    dequantized from F8_E4M3 with its ``weight_scale_inv`` as upstream does for each alone, or copied from floats."""
    refs = [ck.ref(x) for x in srcs]
    if len({r.shape[1:] for r in refs}) != 1 or any(len(r.shape) != 2 for r in refs):
        raise ConvertError(f"{refs[0].file}: the q / k / v projections of '{srcs[0]}' differ in columns "
                           f"({[list(r.shape) for r in refs]}); expected 2-D weights of hidden_size columns")
    rows = (refs[0].shape[0], refs[1].shape[0], refs[2].shape[0])
    shape = (sum(rows), refs[0].shape[1])
    fp8 = [r.dtype == "F8_E4M3" for r in refs]
    if any(fp8) and not all(fp8):
        raise ConvertError(f"{refs[0].file}: the q / k / v projections of '{srcs[0]}' are partly F8_E4M3 "
                           f"({[r.dtype for r in refs]}); expected all FP8 or all float")
    if not any(fp8):
        dtypes = tuple(float_ref(ck, x).dtype for x in srcs)
        return TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out), sources=tuple(srcs),
                          transform=QkvConcat(rows, None, None, (dtypes[0], dtypes[1], dtypes[2])),
                          source_dtype=refs[0].dtype)
    scales = [_fp8_spec(ck, g, x, name, out).sources[1] for x in srcs]  # each checked as a lone FP8 weight
    sdtypes = {ck.ref(x).dtype for x in scales}
    if len(sdtypes) != 1 or g.block is None:
        raise ConvertError(f"{ck.ref(scales[0]).file}: the q / k / v scales of '{srcs[0]}' differ in dtype "
                           f"({sorted(sdtypes)})")
    return TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out),
                      sources=tuple(x for pair in zip(srcs, scales, strict=True) for x in pair),
                      transform=QkvConcat(rows, g.block, sdtypes.pop(), ("F8_E4M3",) * 3), source_dtype="F8_E4M3")


def _skipped(src: str, g: MimoMtp) -> bool:
    """What upstream's FP8 dequantization consumes or drops: the scales (read with their weight) and the unused
    activation scales."""
    return g.block is not None and src.endswith(("_scale_inv", ".activation_scale", "_activation_scale"))


def plan_tensors(ck: Checkpoint, g: MimoMtp, out: QT, *, fuse: bool = True) -> list[TensorSpec]:
    """The file's tensors in upstream's order: the read tensors in checkpoint order (FP8 weights dequantized with
    their scales), an MTP layer's three expert stacks (gate, up, down) where its last expert tensor arrives. With
    ``fuse``, an MTP layer's separate q / k / v become one ``attn_qkv`` where the last of them arrives (llama.cpp's
    ``mimo2`` MTP graph needs it; upstream's ``--mtp`` writes the three)."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(3 * g.experts)
    pending: dict[int, dict[int, str]] = {}
    for src in ck.names:
        if _skipped(src, g):
            continue
        r = renamed(src, g.n)
        if fuse and r is not None and r[1] in QKV:
            parts = pending.setdefault(r[0], {})
            parts[QKV[r[1]]] = src
            if len(parts) == 3:
                name = mapped_once(ck, seen, src, S.LAYER_PREFIX.format(bid=r[0]) + S.L_ATTN_QKV,
                                   f"a {g.arch} MTP head")
                specs.append(_qkv_spec(ck, g, [parts[0], parts[1], parts[2]], name, out))
            continue
        e = EXPERT_RE.fullmatch(r[1]) if r is not None else None
        if r is not None and e is not None:
            if ck.ref(src).dtype not in FLOAT_DTYPES:
                raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' has dtype {ck.ref(src).dtype}; the experts of "
                                   "a MiMo-V2 MTP layer are converted from BF16, F16 or F32 weights")
            bid, xid = r[0], int(e.group(1))
            if xid >= g.experts:
                raise ConvertError(f"{ck.ref(src).file}: tensor '{src}': expert {xid} is beyond n_routed_experts "
                                   f"{g.experts}")
            full = groups.add(bid, e.group(2), xid, src)
            if full is not None:
                specs += [stack_spec(ck, full.get(w, {}), g.experts,
                                     f"model.mtp.layers.{bid - g.n}.mlp.experts.*.{w}.weight",
                                     S.LAYER_PREFIX.format(bid=bid) + stack, out, count_key="n_routed_experts")
                          for w, stack in EXPERT_STACKS.items()]
            continue
        name = mapped_once(ck, seen, src, gguf_name(src, g.n), f"a {g.arch} MTP head")
        if ck.ref(src).dtype == "F8_E4M3":
            specs.append(_fp8_spec(ck, g, src, name, out))
        else:
            if src.removesuffix(".weight") + ".weight_scale_inv" in ck:
                raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' has a weight_scale_inv but dtype "
                                   f"{ck.ref(src).dtype}; expected F8_E4M3")
            specs.append(layer_spec(ck, src, name, out))
    for bid, parts in pending.items():
        if len(parts) != 3:
            missing = [p for p, i in QKV.items() if i not in parts]
            raise ConvertError(f"{ck.path}: model.mtp.layers.{bid - g.n} has no {missing[0]} beside "
                               f"{next(iter(parts.values()))}; the fused attn_qkv needs q, k and v")
    for bid, c in groups.incomplete():
        raise ConvertError(f"{ck.path}: model.mtp.layers.{bid - g.n} has {c} expert tensors, expected 3 x "
                           f"n_routed_experts {g.experts} = {3 * g.experts} (upstream fails with \"Unprocessed "
                           "experts\")")
    return specs


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str, *,
            match_upstream: bool = False) -> Head:
    """The sidecar of a ``MimoV2Model`` checkpoint: header, tensors and the layer counts; separate q / k / v fused
    into ``attn_qkv`` unless ``match_upstream`` (upstream's bytes, which llama.cpp b11434 cannot draft with)."""
    g = read_hparams(ARCHS[hf_arch], hp, ck.names, where)
    tensors = plan_tensors(ck, g, out, fuse=not match_upstream)
    # MXFP4-stored experts make upstream's class declare MOSTLY_MXFP4_MOE after converting the tensors, also in a
    # sidecar that holds none of them
    head = g.head(header_kvs(g, S.FILE_TYPE_MOSTLY_MXFP4_MOE if g.mxfp4 else file_type, where), tensors)
    fused = tuple(t.name for t in tensors if isinstance(t.transform, QkvConcat))
    if not fused:
        return head
    return replace(head, differs=fused, why=(
        f"{', '.join(fused)}: the MTP layers' q_proj / k_proj / v_proj written as one attn_qkv (upstream's --mtp writes "
        "attn_q / attn_k / attn_v, on which llama.cpp b11434's mimo2 MTP graph aborts: GGML_ASSERT \"MIMO2 MTP "
        "requires fused attn_qkv\"); the bytes are upstream's three tensors one after the other"))
