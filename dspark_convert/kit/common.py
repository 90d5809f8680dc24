"""Builders shared by every draft family: the generic KVs (§2.1), name tables and tensor specs (§4), the dtype
rule (§6) and the final KV order. Family modules compose these; GGUF names come from schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError, clip_value
from ..hf.checkpoint import Checkpoint
from ..hf.values import as_float, as_u32
from ..plan import KV, Origin, Plan, RowTransform, TensorSpec, add_kv
from .hparams import find_hparam, rope_dict


def base_kvs(arch: str, hp: dict[str, Any], file_type: int, where: str) -> list[KV]:
    """Row 5 of §2.1: the generic hparam keys, ending with ``general.file_type``."""
    a = {"arch": arch}
    out: list[KV] = []

    def u32(tpl: str, keys: tuple[str, ...], required: bool = False) -> None:
        v = find_hparam(hp, keys, required=required, where=where)
        if v is not None:
            out.append(KV(tpl.format(**a), VT.UINT32, as_u32(v, keys[0], where)))

    u32(S.BLOCK_COUNT, ("n_layers", "num_hidden_layers", "n_layer", "num_layers"), required=True)
    u32(S.CONTEXT_LENGTH, ("max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"))
    u32(S.EMBEDDING_LENGTH, ("hidden_size", "n_embd", "dim"))
    u32(S.FEED_FORWARD_LENGTH, ("prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"))
    u32(S.HEAD_COUNT, ("num_attention_heads", "n_head", "n_heads"))
    u32(S.HEAD_COUNT_KV, ("num_key_value_heads", "n_kv_heads"))
    if hp.get("is_causal") is False:
        out.append(KV(S.CAUSAL.format(**a), VT.BOOL, False))
    rd = rope_dict(hp)
    rope_type = str(rd.get("rope_type", "")).lower()
    if rope_type == "linear" and "factor" in rd:
        out.append(KV(S.ROPE_SCALING_TYPE.format(**a), VT.STRING, "linear"))
        out.append(KV(S.ROPE_SCALING_FACTOR.format(**a), VT.FLOAT32, as_float(rd["factor"], "rope factor", where)))
    elif rope_type == "yarn" and "factor" in rd:
        out.append(KV(S.ROPE_SCALING_TYPE.format(**a), VT.STRING, "yarn"))
        out.append(KV(S.ROPE_SCALING_FACTOR.format(**a), VT.FLOAT32, as_float(rd["factor"], "rope factor", where)))
        if "original_max_position_embeddings" not in rd:
            raise ConvertError(f"{where}: yarn rope scaling needs 'original_max_position_embeddings'")
        out.append(KV(S.ROPE_SCALING_ORIG_CTX.format(**a), VT.UINT32, as_u32(rd["original_max_position_embeddings"], "original_max_position_embeddings", where)))
        for tpl, keys in ((S.ROPE_SCALING_YARN_EXT, ("extrapolation_factor",)), (S.ROPE_SCALING_YARN_ATTN, ("attention_factor", "attn_factor")),
                          (S.ROPE_SCALING_YARN_BETA_FAST, ("beta_fast",)), (S.ROPE_SCALING_YARN_BETA_SLOW, ("beta_slow",))):
            v = find_hparam(rd, keys)
            if v is not None:
                out.append(KV(tpl.format(**a), VT.FLOAT32, as_float(v, keys[0], where)))
    elif rope_type in ("longrope", "su"):
        out.append(KV(S.ROPE_SCALING_TYPE.format(**a), VT.STRING, "longrope"))
    if "mrope_section" in rd:
        sec = [int(x) for x in rd["mrope_section"]] + [0] * 4
        out.append(KV(S.ROPE_DIMENSION_SECTIONS.format(**a), VT.ARRAY, sec[:4], VT.INT32))
    if rd.get("rope_theta") is not None:
        out.append(KV(S.ROPE_FREQ_BASE.format(**a), VT.FLOAT32, as_float(rd["rope_theta"], "rope_theta", where)))
    params = hp.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("sliding_attention"), dict) and "rope_theta" in params["sliding_attention"]:
        out.append(KV(S.ROPE_FREQ_BASE_SWA.format(**a), VT.FLOAT32, as_float(params["sliding_attention"]["rope_theta"], "rope_theta", where)))
    eps = find_hparam(hp, ("rms_norm_eps", "norm_eps"))
    if eps is not None:
        out.append(KV(S.RMS_EPS.format(**a), VT.FLOAT32, as_float(eps, "rms_norm_eps", where)))
    out += expert_kvs(arch, hp, where)
    if hp.get("head_dim") is not None:
        hd = as_u32(hp["head_dim"], "head_dim", where)
        out.append(KV(S.KEY_LENGTH.format(**a), VT.UINT32, hd))
        out.append(KV(S.VALUE_LENGTH.format(**a), VT.UINT32, hd))
    out.append(KV(S.GENERAL_FILE_TYPE, VT.UINT32, file_type))
    return out


def expert_kvs(arch: str, hp: dict[str, Any], where: str) -> list[KV]:
    """Upstream's generic MoE keys (between the norm epsilon and the head sizes): expert count, experts used per
    token, gating function from the router's score function. Absent for dense configs."""
    a = {"arch": arch}
    out: list[KV] = []
    for tpl, keys in ((S.EXPERT_COUNT, ("num_local_experts", "num_experts", "n_routed_experts")),
                      (S.EXPERT_USED_COUNT, ("num_experts_per_tok", "num_experts_per_token", "top_k_experts"))):
        v = find_hparam(hp, keys)
        if v is not None:
            out.append(KV(tpl.format(**a), VT.UINT32, as_u32(v, keys[0], where)))
    score = find_hparam(hp, ("score_function", "scoring_func", "score_func", "moe_router_activation",
                             "moe_router_activation_func"))
    if score is not None:
        if not isinstance(score, str) or score not in S.SCORE_FUNCS:
            raise ConvertError(f"{where}: router score function {clip_value(score)} is not one llama.cpp knows "
                               f"(expected one of {', '.join(S.SCORE_FUNCS)})")
        out.append(KV(S.EXPERT_GATING_FUNC.format(**a), VT.UINT32, S.SCORE_FUNCS[score]))
    return out


# ---------------------------------------------------------------------------------------------- tensors
@dataclass(frozen=True)
class NameTable:
    """A family's HF -> GGUF tensor names (like gguf-py's ``TensorNameMap``), on bare HF names.

    ``layer`` maps the part after ``layers.{i}.`` to the GGUF name after ``blk.{i}.``; ``globals`` maps whole
    bare names. "Bare" is after the family's own prefix normalisation (``bare_name`` in each family module).
    ``mask_embedding`` lists bare names of a learned mask embedding: known to the family but without a GGUF
    name (llama.cpp embeds the mask token with the target's row), so the conversion drops them and the fit
    checks warn (``mask-embedding``, through the family's ``target_facts``).

    Example:
        >>> t = NameTable({"mlp.up_proj.weight": "ffn_up.weight"}, {"norm.weight": "output_norm.weight"})
        >>> t.gguf_name("layers.3.mlp.up_proj.weight"), t.hf_names("blk.3.ffn_up.weight")
        ('blk.3.ffn_up.weight', ('layers.3.mlp.up_proj.weight',))
    """

    layer: Mapping[str, str]
    globals: Mapping[str, str]
    mask_embedding: frozenset[str] = frozenset()

    def gguf_name(self, bare: str) -> str | None:
        """GGUF name of a bare HF name (``layers.{i}.x`` or a global name), or None if it has no mapping."""
        if bare.startswith("layers."):
            parts = bare.split(".", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2] in self.layer:
                return S.LAYER_PREFIX.format(bid=int(parts[1])) + self.layer[parts[2]]
            return None
        return self.globals.get(bare)

    def hf_names(self, gguf_name: str) -> tuple[str, ...]:
        """The bare HF names that map to ``gguf_name`` (reverse lookup, for messages), in table order."""
        if gguf_name.startswith("blk."):
            _, bid, short = gguf_name.split(".", 2)
            return tuple(f"layers.{bid}.{hf}" for hf, g in self.layer.items() if g == short)
        return tuple(hf for hf, g in self.globals.items() if g == gguf_name)


#: HF -> GGUF names of one Qwen3 / Llama decoder layer (after ``layers.{i}.``), the backbone every dense draft
#: family shares; a family's ``NameTable.layer`` extends it with its own rows (e.g. a ``hidden_norm`` row).
BACKBONE_LAYER: Mapping[str, str] = {
    "input_layernorm.weight": S.L_ATTN_NORM,
    "self_attn.q_proj.weight": S.L_ATTN_Q,
    "self_attn.k_proj.weight": S.L_ATTN_K,
    "self_attn.v_proj.weight": S.L_ATTN_V,
    "self_attn.o_proj.weight": S.L_ATTN_OUT,
    "self_attn.q_proj.bias": S.L_ATTN_Q_BIAS,
    "self_attn.k_proj.bias": S.L_ATTN_K_BIAS,
    "self_attn.v_proj.bias": S.L_ATTN_V_BIAS,
    "self_attn.o_proj.bias": S.L_ATTN_OUT_BIAS,
    "self_attn.q_norm.weight": S.L_ATTN_Q_NORM,
    "self_attn.k_norm.weight": S.L_ATTN_K_NORM,
    "self_attn.sinks": S.L_ATTN_SINKS,
    "post_attention_layernorm.weight": S.L_FFN_NORM,
    "mlp.gate_proj.weight": S.L_FFN_GATE,
    "mlp.up_proj.weight": S.L_FFN_UP,
    "mlp.down_proj.weight": S.L_FFN_DOWN,
}
#: HF -> GGUF names of the backbone's own globals (final norm, input embedding, output head)
BACKBONE_GLOBALS: Mapping[str, str] = {
    "norm.weight": S.T_OUTPUT_NORM,
    "embed_tokens.weight": S.T_TOKEN_EMBD,
    "lm_head.weight": S.T_OUTPUT,
}


_SKIP_SUFFIXES = (".rotary_emb.inv_freq", ".attention.bias", ".attention.masked_bias")
_MULTIMODAL_PREFIXES = ("mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.", "sound_projection.")
_MULTIMODAL_PARTS = ("visual.", "vision.", "audio.", "vision_", "audio_", "projector.", "patch_embed", "multi_modal_projector", "vision_tower", "audio_tower", "mm_projector")


def is_skipped(name: str) -> bool:
    """Names upstream drops silently: rotary buffers, attention masks, multimodal parts (§4.4)."""
    return name.endswith(_SKIP_SUFFIXES) or name.startswith(_MULTIMODAL_PREFIXES) or any(p in name for p in _MULTIMODAL_PARTS)


def tensor_type(name: str, shape: tuple[int, ...], out: QT) -> QT:
    """The GGUF type of a tensor under outtype ``out`` (§6), with the Q8_0 -> F16 fallback."""
    if name == S.T_D2T:
        return QT.I64
    if len(shape) <= 1 or name.endswith("_norm.weight") or name[-7:] not in (".weight", ".lora_a", ".lora_b"):
        return QT.F32
    if out == QT.Q8_0 and shape[-1] % 32:
        return QT.F16
    return out


def resolve_outtype(outtype: str, ck: Checkpoint) -> str:
    """``auto``: the first >= 2-D BF16 / F16 checkpoint tensor in conversion order decides; F16 otherwise (§6)."""
    if outtype != "auto":
        if outtype not in S.OUTTYPES:
            raise ConvertError(f"--outtype {outtype!r}: expected one of {', '.join(S.OUTTYPE_CHOICES)}")
        return outtype
    for name in ck.names:
        ref = ck.ref(name)
        if len(ref.shape) >= 2 and ref.dtype in ("BF16", "F16"):
            return ref.dtype.lower()
    return "f16"


def tensor_spec(ck: Checkpoint, sources: str | Sequence[str], name: str, out: QT, *, origin: Origin = "draft",
                transform: RowTransform | None = None) -> TensorSpec:
    """The spec of a GGUF tensor made from checkpoint tensor(s) ``sources`` (the first gives shape and dtype)."""
    names = (sources,) if isinstance(sources, str) else tuple(sources)
    ref = ck.ref(names[0])
    for extra in names[1:]:
        ck.ref(extra)  # every source must exist: say so now, not halfway through writing
    if not ref.is_float and name != S.T_D2T:
        raise ConvertError(f"{ref.file}: tensor '{names[0]}' has dtype {ref.dtype}, expected a floating-point type")
    return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out), sources=names,
                      origin=origin, transform=transform, source_dtype=ref.dtype)


def mapped_once(ck: Checkpoint, seen: dict[str, str], src: str, name: str | None, draft: str) -> str:
    """``name``, the GGUF tensor checkpoint tensor ``src`` becomes, recorded in ``seen`` (GGUF name -> source).
    Refused in one line when there is none (``src`` is not part of ``draft``, the words naming the draft) or when
    another tensor already became it."""
    if name is None:
        raise ConvertError(f"{ck.ref(src).file}: tensor '{src}' is not part of {draft} (upstream fails with \"Can not "
                           "map tensor\")")
    if name in seen:
        raise ConvertError(f"{ck.ref(src).file}: tensors '{seen[name]}' and '{src}' both become '{name}'")
    seen[name] = src
    return name


def finish_plan(arch: str, head: list[KV], base: list[KV], family: list[KV],
                vocab: list[KV], tail: list[KV], tensors: list[TensorSpec], notes: list[str]) -> Plan:
    """Assemble the KVs in the order of §2.1 (rows 1–10); general.* metadata (row 4) is inserted by the caller
    once the tensors (and so the parameter count) are known."""
    kvs: list[KV] = [KV(S.GENERAL_ARCHITECTURE, VT.STRING, arch)]
    for group in (head, [KV(S.GENERAL_TYPE, VT.STRING, "model")], base, family,
                  [KV(S.GENERAL_QUANT_VERSION, VT.UINT32, S.QUANTIZATION_VERSION)], vocab, tail):
        for kv in group:
            add_kv(kvs, kv)
    return Plan(arch=arch, kvs=kvs, tensors=tensors, notes=notes)
