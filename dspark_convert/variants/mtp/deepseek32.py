"""The DeepSeek-V3.2 MTP family (upstream's ``DeepseekV32Model`` in ``conversion/deepseek.py``, a
``DeepseekV2Model``; spec/drafts-beyond-dflash.md §1): ``DeepseekV32ForCausalLM`` (DeepSeek-V3.2 / V3.2-Exp), GGUF
architecture ``deepseek32``: MLA attention with the DSA indexer, as GLM-5 (:mod:`.glm_dsa`), whose tables and header
this module reuses.

What upstream's ``--mtp`` file holds for them, where it differs from GLM-5's:

- the same tensors (the NextN layer(s) ``model.layers.{n+i}.*`` with their index, ``kv_b_proj`` split into
  ``attn_k_b`` / ``attn_v_b``, the indexer, the expert stacks, the embedding, final norm and head), but a released
  checkpoint stores its linear weights as block-scaled FP8 (``quantization_config`` ``quant_method: fp8``,
  ``weight_block_size [128, 128]``: an F8_E4M3 weight and a float ``weight_scale_inv`` per block). Upstream
  dequantizes each one to float32 (weight x its block's scale, one float32 product) before anything else, so a
  dequantized weight is written at the outtype like any float tensor, ``kv_b_proj`` is split and the experts are
  stacked after the dequantization; the scales (and unused ``activation_scale`` tensors) are not written;
- the header: DeepseekV2's keys as GLM-5 has them, but ``rope.dimension_count`` is ``qk_rope_head_dim`` (no
  ``partial_rotary_factor``) and there is no ``attention.indexer.types``; the config is read as transformers'
  ``DeepseekV32Config`` gives it (its class defaults, ``head_dim`` = ``qk_rope_head_dim``);
- the tokenizer: byte-level BPE after upstream's ``add_bos_token`` assertion (the target table's
  ``gpt2_assert_bos`` handler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gguf import GGMLQuantizationType as QT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import mapped_once, tensor_type
from ...kit.hparams import HParams
from ...plan import TensorSpec
from . import glm, glm_dsa
from .head import Head
from .specs import FLOAT_DTYPES, ExpertGroups, layer_spec, stack_spec, target_archs
from .transforms import Fp8ExpertStack, Fp8MlaKvBSplit, Fp8ScaleInvDequant

#: upstream's model class that exports the DeepSeek-V3.2 NextN layer with ``--mtp``
MTP_CLASSES = ("DeepseekV32Model",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: the checkpoint names of the NextN layer tensors (GLM-5's: the same MLA, indexer and MoE layout)
HF_LAYER = glm_dsa.HF_LAYER
#: the root tensors by checkpoint name, for messages
HF_ROOTS: dict[str, str] = glm.KEPT_ROOTS
#: ``DeepseekV32Config``'s class defaults (transformers 5), for the keys upstream reads
CONFIG_DEFAULTS: dict[str, Any] = {
    "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
    "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "n_group": 8, "topk_group": 4,
    "num_experts_per_tok": 8, "norm_topk_prob": True, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64,
    "first_k_dense_replace": 3,
}
#: what upstream's FP8 dequantization consumes (the scales, read with their weight) or drops (activation scales)
FP8_SIDE_TENSORS = ("_scale_inv", ".activation_scale", "_activation_scale")


def config_view(config: dict[str, Any], where: str) -> HParams:
    """The hparams as upstream sees them (``AutoConfig.from_pretrained(...).to_dict()`` of ``DeepseekV32Config``):
    class defaults, ``head_dim`` = ``qk_rope_head_dim``, rope settings in ``rope_parameters``; a config's own
    ``indexer_types`` is not read (upstream's class writes no indexer types)."""
    hp = glm_dsa.config_view(config, where, defaults=CONFIG_DEFAULTS, cls_name="DeepseekV32Config",
                             indexer_types=False)
    hp.pop("indexer_types", None)
    return hp


def fp8_block(hp: HParams, where: str) -> tuple[int, int] | None:
    """FP8's ``weight_block_size`` (rows, columns each ``weight_scale_inv`` value covers); None when the config
    declares no quantization. Refused in one line when another quantization is declared or the block size is not
    two positive integers."""
    qc = hp.get("quantization_config")
    if qc is None:
        return None
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    if method != "fp8":
        raise ConvertError(f"{where}: quantization_config quant_method {method!r}: the DeepSeek-V3.2 MTP head is "
                           "converted from float or block-scaled FP8 (quant_method 'fp8') weights")
    bs = qc.get("weight_block_size")
    if not (isinstance(bs, list) and len(bs) == 2 and all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                                          for b in bs)):
        raise ConvertError(f"{where}: quantization_config weight_block_size is {bs!r}, expected two positive "
                           "integers (the rows and columns each weight_scale_inv value covers)")
    return bs[0], bs[1]


def _scale(ck: Checkpoint, block: tuple[int, int] | None, src: str) -> tuple[str, str]:
    """The ``weight_scale_inv`` of F8_E4M3 weight ``src`` and its dtype, checked: a config declaring FP8, a 2-D weight,
    a float scale of ``[ceil(rows / block_rows), ceil(cols / block_cols)]``; refused in one line otherwise."""
    ref, sname = ck.ref(src), src.removesuffix(".weight") + ".weight_scale_inv"
    if block is None:
        raise ConvertError(f"{ref.file}: tensor '{src}' has dtype F8_E4M3 but the config declares no "
                           "quantization_config with quant_method 'fp8'")
    if sname not in ck:
        raise ConvertError(f"{ref.file}: tensor '{src}' has dtype F8_E4M3 but the checkpoint has no '{sname}'")
    sref = ck.ref(sname)
    br, bc = block
    want = (-(-ref.shape[0] // br), -(-ref.shape[1] // bc)) if len(ref.shape) == 2 else None
    if sref.dtype not in FLOAT_DTYPES or want is None or sref.shape != want:
        raise ConvertError(f"{sref.file}: tensor '{sname}' has dtype {sref.dtype} and shape {list(sref.shape)}; "
                           f"expected a float scale of shape {list(want) if want else '[blocks, blocks]'} for the "
                           f"{list(ref.shape)} weight in {br} x {bc} blocks")
    return sname, sref.dtype


def _fp8_spec(ck: Checkpoint, block: tuple[int, int] | None, src: str, name: str, out: QT) -> TensorSpec:
    """GGUF tensor ``name`` dequantized from F8_E4M3 ``src`` and its ``weight_scale_inv`` (F32 where upstream forces
    F32 by name, e.g. a router or ``indexer.proj``)."""
    sname, sdtype = _scale(ck, block, src)
    ref = ck.ref(src)
    br, bc = block or (0, 0)
    short = name.split(".", 2)[-1] if name.startswith("blk.") else name
    ggml = QT.F32 if short in S.F32_LAYER_TENSORS else tensor_type(name, ref.shape, out)
    return TensorSpec(name=name, shape=ref.shape, ggml_type=ggml, sources=(src, sname),
                      transform=Fp8ScaleInvDequant(br, bc, sdtype), source_dtype=ref.dtype)


def _kv_b(ck: Checkpoint, g: glm_dsa.DsaMtp, block: tuple[int, int] | None, src: str, bid: int,
          out: QT) -> list[TensorSpec]:
    """``attn_k_b`` / ``attn_v_b`` from one ``kv_b_proj``: GLM-5's split (:func:`glm_dsa._kv_b`), of the dequantized
    values when the weight is F8_E4M3."""
    if ck.ref(src).dtype != "F8_E4M3":
        return glm_dsa._kv_b(ck, g, src, bid, out)
    sname, sdtype = _scale(ck, block, src)
    ref = ck.ref(src)
    width = g.nope + g.v
    if ref.shape[0] != g.heads_kv * width:
        raise ConvertError(f"{ref.file}: tensor '{src}' has shape {list(ref.shape)}; upstream splits it into "
                           f"num_key_value_heads {g.heads_kv} x (qk_nope_head_dim {g.nope} + v_head_dim {g.v}) = "
                           f"{g.heads_kv * width} rows (its assert fails otherwise)")
    rank = ref.shape[1]
    br, bc = block or (0, 0)
    p = S.LAYER_PREFIX.format(bid=bid)
    specs = []
    for part, shape in (("k", (g.heads_kv, rank, g.nope)), ("v", (g.heads_kv, g.v, rank))):
        name = p + glm_dsa.KV_B_PARTS[part]
        specs.append(TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out), sources=(src, sname),
                                transform=Fp8MlaKvBSplit(part, g.heads_kv, g.nope, g.v, br, bc, sdtype),
                                source_dtype=ref.dtype))
    return specs


def _stacks(ck: Checkpoint, g: glm_dsa.DsaMtp, block: tuple[int, int] | None, groups: ExpertGroups, src: str,
            out: QT) -> list[TensorSpec] | None:
    """As :func:`glm.expert_stacks` (None: not a routed expert; [] until the layer's last expert tensor), the stacks
    of F8_E4M3 experts dequantized (:class:`Fp8ExpertStack`) before they are stacked."""
    m = glm.LAYER_RE.fullmatch(glm.bare(src))
    e = glm.EXPERT_RE.fullmatch(m.group(2)) if m is not None else None
    if m is None or e is None:
        return None
    if ck.ref(src).dtype != "F8_E4M3":
        return glm.expert_stacks(ck, g.experts, groups, src, out)
    if not g.experts:
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' is an expert but the config has no n_routed_experts")
    bid, xid = int(m.group(1)), int(e.group(1))
    if xid >= g.experts:
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}': expert {xid} is beyond n_routed_experts {g.experts}")
    full = groups.add(bid, e.group(2), xid, src)
    if full is None:
        return []
    specs = []
    for w, stack in glm.EXPERT_STACKS.items():
        what = f"model.layers.{bid}.mlp.experts.*.{w}.weight"
        per = full.get(w, {})
        name = S.LAYER_PREFIX.format(bid=bid) + stack
        refs = [ck.ref(per[x]) for x in sorted(per)]
        if any(r.dtype != "F8_E4M3" for r in refs):
            # a float projection among FP8 ones: the float rules (and their refusals) apply
            specs.append(stack_spec(ck, per, g.experts, what, name, out, count_key="n_routed_experts"))
            continue
        missing = sorted(set(range(g.experts)) - per.keys())
        if missing:
            raise ConvertError(f"{ck.path}: expert {missing[0]} of {what} is missing")
        scales = [_scale(ck, block, per[x]) for x in range(g.experts)]
        shapes = {ck.ref(per[x]).shape for x in range(g.experts)}
        if len(shapes) != 1 or len({d for _, d in scales}) != 1:
            raise ConvertError(f"{refs[0].file}: the experts of {what} differ in shape or scale dtype "
                               f"({sorted(shapes)}); expected one 2-D shape")
        rows, cols = refs[0].shape
        shape = (g.experts, rows, cols)
        br, bc = block or (0, 0)
        specs.append(TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out),
                                sources=tuple(x for i in range(g.experts) for x in (per[i], scales[i][0])),
                                transform=Fp8ExpertStack(g.experts, br, bc, scales[0][1]), source_dtype="F8_E4M3"))
    return specs


def plan_tensors(ck: Checkpoint, g: glm_dsa.DsaMtp, block: tuple[int, int] | None, out: QT) -> list[TensorSpec]:
    """The file's tensors in upstream's order: the read tensors in checkpoint order without the FP8 scales (FP8
    weights dequantized with them; ``kv_b_proj`` -> k_b, v_b), the three expert stacks (down, gate, up) where the
    ``3 x n_routed_experts``-th expert weight of their layer arrives."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(3 * g.experts)
    tied = g.hp.get("tie_word_embeddings") is True
    for src in ck.names:
        b = glm.bare(src)
        if tied and b in ("lm_head.weight", "model.lm_head.weight"):
            continue
        if block is not None and src.endswith(FP8_SIDE_TENSORS):
            continue
        fp8 = ck.ref(src).dtype == "F8_E4M3"
        if not fp8 and src.removesuffix(".weight") + ".weight_scale_inv" in ck and block is not None:
            raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' has a weight_scale_inv but dtype "
                               f"{ck.ref(src).dtype}; expected F8_E4M3")
        stacks = _stacks(ck, g, block, groups, src, out)
        if stacks is not None:
            specs += stacks
            continue
        m = glm.LAYER_RE.fullmatch(b)
        if m is not None and m.group(2) == glm_dsa.KV_B:
            specs += _kv_b(ck, g, block, src, int(m.group(1)), out)
            continue
        name = mapped_once(ck, seen, src, glm_dsa.gguf_name(src), f"a {g.arch} MTP head")
        specs.append(_fp8_spec(ck, block, src, name, out) if fp8 else layer_spec(ck, src, name, out))
    glm.check_experts(ck, g.experts, groups)
    return specs


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """As GLM-4.5: the layers from ``num_hidden_layers`` on (their FP8 scales included), the embedding, the final
    norm and the head."""
    return glm.reads(config)


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``DeepseekV32Model`` checkpoint: header, tensors and the layer counts."""
    view = config_view(hp, where)
    block = fp8_block(view, where)
    g = glm_dsa.read_hparams(ARCHS[hf_arch], view, ck.names, where)
    tensors = plan_tensors(ck, g, block, out)
    return g.head(glm_dsa.header_kvs(g, file_type, where, partial_rotary=False), tensors)
