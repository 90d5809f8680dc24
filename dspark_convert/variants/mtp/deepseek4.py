"""The DeepSeek-V4 MTP family (upstream's ``DeepseekV4Model`` in ``conversion/deepseek.py``;
spec/drafts-beyond-dflash.md §1): ``DeepseekV4ForCausalLM``, GGUF architecture ``deepseek4``.

What upstream's ``--mtp`` file holds:

- the MTP layer(s) ``mtp.{i}.*`` (``i`` < ``num_nextn_predict_layers``) become block ``n + i`` (``n`` =
  ``num_hidden_layers``): a DeepSeek-V4 block (attention with q/o LoRA and sinks, hyper-connection mixes, router
  with its bias, shared and routed experts) plus ``enorm`` / ``hnorm`` -> ``nextn.enorm`` / ``nextn.hnorm``, ``norm``
  -> ``nextn.shared_head_norm``, and ``e_proj`` / ``h_proj`` concatenated along their columns into
  ``nextn.eh_proj`` (forced Q8_0); the layer's ``hc_head_{fn,base,scale}`` become the root
  ``output_hc_{fn,base,scale}``; of the trunk only ``embed.weight``, ``norm.weight`` and ``head.weight`` (with
  ``head.scale``) are kept;
- types as the checkpoint stores them: F8_E4M3 weights (with an F8_E8M0 scale per 128x128 tile) dequantized and
  written as Q8_0 (F16 when a row is not a multiple of 32), the FP4 routed experts repacked losslessly into MXFP4
  stacks, BF16 matrices kept BF16, F32 tensors kept F32, vectors and ``*_norm`` F32; ``--outtype`` decides only for
  F16 sources, and ``general.file_type`` is 38 (MOSTLY_MXFP4_MOE) whatever it says;
- order: each MTP block's three expert stacks (gate, down, up), then each block's ``eh_proj``, then every other
  tensor read, in checkpoint order;
- the header: upstream's DeepSeek-V4 chat template as the second key (the -Flash-0731 one when the folder name
  has ``0731``; a template in the tokenizer's files replaces its value in place), TextModel's generic block with
  ``block_count = n + nextn``, then the DeepSeek-V4 keys, with ``swiglu_clamp_exp`` / ``_shexp`` of
  ``block_count`` entries, ``compress_ratios`` and ``hash_layer_count`` as the config has them,
  ``embedding_length_out`` (hidden x hc_mult) and ``nextn_predict_layers``.

A DeepSeek-V4 checkpoint carrying a DSpark draft (``dspark_*`` keys) is the ``dsv4`` variant's: this family claims
the checkpoints whose ``mtp.{i}.e_proj.weight`` marks an MTP head, and no ``dspark_*`` key is set
(:func:`is_mtp_checkpoint`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import base_kvs, mapped_once
from ...kit.hparams import HParams
from ...plan import KV, TensorSpec
from ..dsv4.blockscaled import (
    dsv4_tensor_spec,
    fp8_output_type,
    fp8_scale,
    mxfp4_stack_spec,
    packaged_template,
)
from .head import Counts, Head
from .specs import layer_indices, target_archs
from .transforms import ColumnConcat

#: upstream's model class that exports the DeepSeek-V4 MTP layer with ``--mtp``
MTP_CLASSES = ("DeepseekV4Model",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: these classes are recognised by :func:`is_mtp_checkpoint`, not by name: a DeepSeek-V4 DSpark draft's config
#: declares the same class
BY_CLAIM = True
#: the family reads its FP8 weights itself (the shared float32 view, ``specs.adopt_fp8``, is not applied)
OWN_FP8 = True
#: the trunk tensors an ``--mtp`` file keeps (``head.scale`` is read with an FP8 head)
KEPT_ROOTS: dict[str, str] = {"embed.weight": S.T_TOKEN_EMBD, "norm.weight": S.T_OUTPUT_NORM,
                              "head.weight": S.T_OUTPUT}
#: an MTP layer's tensors that leave the block: its hyper-connection head -> the root ``output_hc_*``
HC_HEAD: dict[str, str] = {"hc_head_fn": S.T_OUTPUT_HC_FN, "hc_head_base": S.T_OUTPUT_HC_BASE,
                           "hc_head_scale": S.T_OUTPUT_HC_SCALE}
#: an MTP layer's tensor (after ``mtp.{i}.``) -> its GGUF name (after ``blk.{n+i}.``); the experts are stacked, e_proj
#: and h_proj concatenated (:data:`EH_PARTS`)
LAYER: dict[str, str] = {
    "enorm.weight": S.L_NEXTN_ENORM,
    "hnorm.weight": S.L_NEXTN_HNORM,
    "norm.weight": S.L_NEXTN_SHARED_HEAD_NORM,
    **{f"hc_{k}_{p}": f"hc_{k}_{p}.weight" for k in ("attn", "ffn") for p in ("fn", "base", "scale")},
    "attn.attn_sink": "attn_sinks.weight",
    "attn.wq_a.weight": S.L_ATTN_Q_A,
    "attn.wq_b.weight": S.L_ATTN_Q_B,
    "attn.q_norm.weight": S.L_ATTN_Q_A_NORM,
    "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": S.L_ATTN_KV_A_NORM,
    "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight",
    "attn.compressor.ape": "attn_compressor_ape.weight",
    "attn.compressor.wkv.weight": "attn_compressor_kv.weight",
    "attn.compressor.wgate.weight": "attn_compressor_gate.weight",
    "attn.compressor.norm.weight": "attn_compressor_norm.weight",
    "attn.indexer.wq_b.weight": S.L_INDEXER_ATTN_Q_B,
    "attn.indexer.weights_proj.weight": S.L_INDEXER_PROJ,
    "attn.indexer.compressor.ape": "indexer_compressor_ape.weight",
    "attn.indexer.compressor.wkv.weight": "indexer_compressor_kv.weight",
    "attn.indexer.compressor.wgate.weight": "indexer_compressor_gate.weight",
    "attn.indexer.compressor.norm.weight": "indexer_compressor_norm.weight",
    "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate.weight": S.L_FFN_GATE_INP,
    "ffn.gate.bias": S.L_EXP_PROBS_B,
    "ffn.gate.bias_vl": "exp_probs_b_vl.bias",
    "ffn.shared_experts.w1.weight": S.L_FFN_GATE_SHEXP,
    "ffn.shared_experts.w2.weight": S.L_FFN_DOWN_SHEXP,
    "ffn.shared_experts.w3.weight": S.L_FFN_UP_SHEXP,
}
#: routed expert projection -> its MXFP4 stack, in the order upstream writes them
EXPERT_STACKS: dict[str, str] = {"w1": S.L_FFN_GATE_EXPS, "w2": S.L_FFN_DOWN_EXPS, "w3": S.L_FFN_UP_EXPS}
#: the two halves of ``nextn.eh_proj``, in column order
EH_PARTS = ("e_proj.weight", "h_proj.weight")
#: ``mtp.{i}.<rest>``
MTP_RE = re.compile(r"mtp\.(\d+)\.(.+)")
#: a routed expert's ``<rest>``
EXPERT_RE = re.compile(r"ffn\.experts\.(\d+)\.(w[123])\.(weight|scale)")
#: (checkpoint pattern, short GGUF name) of every MTP layer tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = ([(f"mtp.*.{hf}", name) for hf, name in LAYER.items()]
                                   + [(f"mtp.*.{p}", S.L_NEXTN_EH_PROJ) for p in EH_PARTS]
                                   + [(f"mtp.*.ffn.experts.*.{w}.weight", name) for w, name in EXPERT_STACKS.items()])
HF_ROOTS: dict[str, str] = {**KEPT_ROOTS, **{f"mtp.*.{hf}": name for hf, name in HC_HEAD.items()}}
#: the DeepSeek-V4 config keys the file is made from (upstream reads each; a missing one is refused here)
REQUIRED_KEYS = ("hidden_size", "num_hidden_layers", "n_routed_experts", "moe_intermediate_size", "qk_rope_head_dim",
                 "q_lora_rank", "sliding_window", "n_shared_experts", "routed_scaling_factor", "norm_topk_prob",
                 "swiglu_limit", "index_n_heads", "index_head_dim", "index_topk", "o_groups", "o_lora_rank",
                 "compress_ratios", "compress_rope_theta", "hc_mult", "hc_sinkhorn_iters", "hc_eps",
                 "num_hash_layers")
#: upstream's DeepSeek-V4 chat templates: the -Flash-0731 one when the checkpoint's name contains ``0731``
TEMPLATE_FILES = {"0731": "deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "": "deepseek-ai-DeepSeek-V4.jinja"}
#: ``DeepseekV4Config``'s default MTP layer count (upstream reads the config through it)
DEFAULT_NEXTN = 1


def is_mtp_checkpoint(config: dict[str, Any], names: list[str]) -> bool:
    """A DeepSeek-V4 checkpoint of a class here with an MTP head (``mtp.{i}.e_proj.weight``) and no DSpark draft
    (no ``dspark_*`` key set)."""
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else None
    if arch not in ARCHS or any(config.get(k) is not None for k in S.DSV4_CONFIG_KEYS):
        return False
    return any((m := MTP_RE.fullmatch(n)) is not None and m.group(2) == EH_PARTS[0] for n in names)


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """The checkpoint tensors an ``--mtp`` file is made of: ``mtp.*``, the embedding, the final norm and the head
    (with its scale); the trunk's shards are never opened."""
    def keep(name: str) -> bool:
        return name.startswith("mtp.") or name in KEPT_ROOTS or name == "head.scale"

    return keep


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class Dsv4Mtp(Counts):
    """The config values the file needs, validated: the counts, the hidden size, the expert width and the
    hyper-connection streams."""

    hidden: int
    moe: int
    hc: int


def read_hparams(arch: str, hp: HParams, names: list[str], where: str) -> Dsv4Mtp:
    """The config keys upstream reads (each refused in one line when missing or unusable), and the MTP layers:
    ``mtp.0 .. mtp.{nextn-1}`` must be there, none beyond."""
    for key in REQUIRED_KEYS:
        hp.require(key, "upstream's DeepSeek-V4 --mtp conversion reads it")
    n = hp.positive("num_hidden_layers")
    declared = hp.get("num_nextn_predict_layers", DEFAULT_NEXTN)
    nextn = hp.u32("num_nextn_predict_layers", declared) if declared is not None else 0
    if nextn == 0:
        raise ConvertError(f"{where}: no MTP head: 'num_nextn_predict_layers' is {declared!r} (upstream's --mtp "
                           "writes the mtp.* layers only when the config declares them)")
    found = layer_indices(MTP_RE.fullmatch, names)
    if found != list(range(nextn)):
        raise ConvertError(f"{where}: num_nextn_predict_layers is {nextn} but the checkpoint has MTP layers "
                           f"{', '.join(f'mtp.{i}' for i in found) or 'none'}; expected mtp.0..mtp.{nextn - 1}")
    hash_layers = hp.u32("num_hash_layers")
    if hash_layers > n:
        raise ConvertError(f"{where}: num_hash_layers {hash_layers} is beyond num_hidden_layers {n}: the MTP layer "
                           "would be a hash-routed layer, whose routing table upstream does not write")
    ratios = hp["compress_ratios"]
    if not isinstance(ratios, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ratios):
        raise ConvertError(f"{where}: key 'compress_ratios' is {ratios!r}, expected a list of integers")
    if not isinstance(hp["norm_topk_prob"], bool):
        raise ConvertError(f"{where}: key 'norm_topk_prob' is {hp['norm_topk_prob']!r}, expected true or false")
    return Dsv4Mtp(arch, hp, n, nextn, hp.positive("n_routed_experts"),
                   hp.positive("hidden_size"),
                   hp.positive("moe_intermediate_size"),
                   hp.positive("hc_mult"))


def header_kvs(g: Dsv4Mtp, where: str) -> tuple[list[KV], list[KV]]:
    """The target's own header, as upstream's class writes it: TextModel's generic block (``block_count`` = trunk
    + MTP layers, ending with ``general.file_type`` 38), then the DeepSeek-V4 keys."""
    hp, a = g.hp, {"arch": g.arch}
    blocks = g.n + g.nextn
    view = {k: v for k, v in hp.items() if k not in ("n_layers", "n_layer", "num_layers")}
    view["num_hidden_layers"] = blocks
    base = base_kvs(g.arch, view, S.FILE_TYPE_MOSTLY_MXFP4_MOE, where)

    def u32(tpl: str, key: str) -> KV:
        return KV(tpl.format(**a), VT.UINT32, hp.u32(key, hp[key]))

    def f32(tpl: str, key: str) -> KV:
        return KV(tpl.format(**a), VT.FLOAT32, hp.number(key, hp[key]))

    clamp = [hp.number("swiglu_limit")] * blocks
    fam = [
        u32(S.ROPE_DIMENSION_COUNT, "qk_rope_head_dim"),
        u32(S.Q_LORA_RANK, "q_lora_rank"),
        u32(S.SLIDING_WINDOW, "sliding_window"),
        u32(S.EXPERT_FEED_FORWARD_LENGTH, "moe_intermediate_size"),
        u32(S.EXPERT_SHARED_COUNT, "n_shared_experts"),
        f32(S.EXPERT_WEIGHTS_SCALE, "routed_scaling_factor"),
        KV(S.EXPERT_WEIGHTS_NORM.format(**a), VT.BOOL, hp["norm_topk_prob"]),
        KV(S.SWIGLU_CLAMP_EXP.format(**a), VT.ARRAY, clamp, VT.FLOAT32),
        KV(S.SWIGLU_CLAMP_SHEXP.format(**a), VT.ARRAY, list(clamp), VT.FLOAT32),
        u32(S.INDEXER_HEAD_COUNT, "index_n_heads"),
        u32(S.INDEXER_KEY_LENGTH, "index_head_dim"),
        u32(S.INDEXER_TOP_K, "index_topk"),
        u32(S.OUTPUT_GROUP_COUNT, "o_groups"),
        u32(S.OUTPUT_LORA_RANK, "o_lora_rank"),
        KV(S.COMPRESS_RATIOS.format(**a), VT.ARRAY, list(hp["compress_ratios"]), VT.INT32),
        f32(S.COMPRESS_ROPE_FREQ_BASE, "compress_rope_theta"),
        u32(S.HC_COUNT, "hc_mult"),
        u32(S.HC_SINKHORN_ITERATIONS, "hc_sinkhorn_iters"),
        f32(S.HC_EPSILON, "hc_eps"),
        u32(S.HASH_LAYER_COUNT, "num_hash_layers"),
        KV(S.EMBEDDING_LENGTH_OUT.format(**a), VT.UINT32, g.hidden * g.hc),
        KV(S.NEXTN_PREDICT_LAYERS.format(**a), VT.UINT32, g.nextn),
    ]
    return base, fam


# ---------------------------------------------------------------------------------------------- tensors
def gguf_name(name: str, n: int) -> str | None:
    """The GGUF name of one read checkpoint tensor (None: an expert, e_proj / h_proj, a scale, or unmapped)."""
    if name in KEPT_ROOTS:
        return KEPT_ROOTS[name]
    m = MTP_RE.fullmatch(name)
    if m is None:
        return None
    rest = m.group(2)
    if rest in HC_HEAD:
        return HC_HEAD[rest]
    if rest in LAYER:
        return S.LAYER_PREFIX.format(bid=n + int(m.group(1))) + LAYER[rest]
    return None


def _is_fp8(ck: Checkpoint, src: str) -> bool:
    return ck.ref(src).dtype == "F8_E4M3"


def _eh_proj(ck: Checkpoint, i: int, bid: int) -> TensorSpec | None:
    """``nextn.eh_proj`` of MTP layer ``i``: ``e_proj`` and ``h_proj`` (each FP8 with its scale, or a float
    tensor) side by side, forced Q8_0 (F16 when a row is not a multiple of 32); None when the layer has neither,
    refused when it has one only or their rows differ."""
    srcs = [f"mtp.{i}.{p}" for p in EH_PARTS]
    have = [s for s in srcs if s in ck]
    if not have:
        return None
    if len(have) == 1:
        missing = next(s for s in srcs if s not in ck)
        raise ConvertError(f"{ck.ref(have[0]).file}: tensor '{have[0]}' has no partner '{missing}' (upstream "
                           "concatenates the two into nextn.eh_proj)")
    refs = [ck.ref(s) for s in srcs]
    if any(len(r.shape) != 2 for r in refs) or refs[0].shape[0] != refs[1].shape[0]:
        raise ConvertError(f"{refs[1].file}: tensors '{srcs[0]}' {list(refs[0].shape)} and '{srcs[1]}' "
                           f"{list(refs[1].shape)} cannot be concatenated along their columns (2-D, same rows)")
    sources: list[str] = []
    dtypes: list[str] = []
    for s, r in zip(srcs, refs, strict=True):
        if r.dtype == "F8_E4M3":
            sources += [s, fp8_scale(ck, s)]
        elif r.dtype in ("BF16", "F16", "F32"):
            sources.append(s)
        else:
            raise ConvertError(f"{r.file}: tensor '{s}' has dtype {r.dtype}; expected F8_E4M3 (+ scale) or a float")
        dtypes.append(r.dtype)
    shape = (refs[0].shape[0], refs[0].shape[1] + refs[1].shape[1])
    return TensorSpec(name=S.LAYER_PREFIX.format(bid=bid) + S.L_NEXTN_EH_PROJ, shape=shape,
                      ggml_type=fp8_output_type(shape[1]), sources=tuple(sources),
                      transform=ColumnConcat(tuple(dtypes)), source_dtype=dtypes[0])


def plan_tensors(ck: Checkpoint, g: Dsv4Mtp, out: QT) -> list[TensorSpec]:
    """The file's tensors in upstream's order: every MTP block's expert stacks (gate, down, up), every block's
    ``eh_proj``, then every other read tensor in checkpoint order."""
    experts: dict[tuple[int, str], dict[int, str]] = {}
    consumed: set[str] = set()
    for src in ck.names:
        m = MTP_RE.fullmatch(src)
        e = EXPERT_RE.fullmatch(m.group(2)) if m is not None else None
        if m is None or e is None:
            continue
        consumed.add(src)
        if e.group(3) == "weight":
            experts.setdefault((int(m.group(1)), e.group(2)), {})[int(e.group(1))] = src
    stacks: list[TensorSpec] = []
    for i in range(g.nextn):
        for w, stack in EXPERT_STACKS.items():
            rows, cols = (g.hidden, g.moe) if w == "w2" else (g.moe, g.hidden)
            stacks.append(mxfp4_stack_spec(ck, experts.get((i, w), {}), g.experts, rows, cols,
                                           S.LAYER_PREFIX.format(bid=g.n + i) + stack, f"mtp.{i}.ffn.experts.*.{w}",
                                           f"the config says {g.experts} routed experts"))
    eh: list[TensorSpec] = []
    for i in range(g.nextn):
        spec = _eh_proj(ck, i, g.n + i)
        if spec is not None:
            eh.append(spec)
            consumed.update(spec.sources)
    dense: list[TensorSpec] = []
    seen: dict[str, str] = {}
    for src in ck.names:
        if src in consumed:
            continue
        if src.endswith(".scale") and src.removesuffix(".scale") + ".weight" in ck \
                and _is_fp8(ck, src.removesuffix(".scale") + ".weight"):
            continue  # read with its FP8 weight
        name = mapped_once(ck, seen, src, gguf_name(src, g.n), f"a {g.arch} MTP head")
        dense.append(dsv4_tensor_spec(ck, src, name, out, "a DeepSeek-V4 MTP head"))
    return stacks + eh + dense


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``DeepseekV4Model`` checkpoint: header (with the chat template first), tensors and the
    layer counts (``file_type`` is not used: upstream writes 38 whatever the outtype)."""
    g = read_hparams(ARCHS[hf_arch], hp, ck.names, where)
    tensors = plan_tensors(ck, g, out)
    base, fam = header_kvs(g, where)
    lead = [KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING,
               packaged_template(ck.path, TEMPLATE_FILES))]
    return Head(g.arch, g.n, g.nextn, base, fam, tensors, lead)
