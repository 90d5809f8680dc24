"""Rules shared by every draft family: config normalisation (§2.0), base keys (§2.1), name mapping (§4) and
the dtype rule (§6). Family modules compose these; they never spell a GGUF name themselves (schema does).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from .. import schema as S
from ..checkpoint import Checkpoint
from ..errors import ConvertError
from ..plan import KV, Plan, TensorSpec, add_kv

# transformers 5.24 config-class defaults that upstream's AutoConfig view adds before any rule runs (§2.0).
_QWEN3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28,
    "attention_bias": False,
}
_LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
}
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "lm_config", "language_config", "lfm")
_DEFAULT_ROPE_THETA = 10000.0


def normalize_hparams(config: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    """The draft hparams as upstream sees them: the transformers config-class view for ``qwen3`` / ``llama``
    configs (class defaults filled in, rope moved into ``rope_parameters``), the raw dict otherwise, with a
    nested ``text_config`` (and its aliases) merged into the top level.

    Example:
        >>> normalize_hparams({"model_type": "qwen3", "hidden_size": 8})["max_position_embeddings"]
        32768
    """
    hp = copy.deepcopy(config)
    for key in _TEXT_CONFIG_KEYS:
        if isinstance(hp.get(key), dict):
            hp.update(hp.pop(key))
    thinker = hp.get("thinker_config")
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict):
        hp.update(thinker["text_config"])
    model_type = hp.get("model_type")
    if model_type == "qwen3":
        for k, v in _QWEN3_DEFAULTS.items():
            hp.setdefault(k, v)
        if hp.get("num_key_value_heads") is None:
            hp["num_key_value_heads"] = hp["num_attention_heads"]
        if not hp.get("use_sliding_window"):
            hp["sliding_window"] = None
        if hp.get("layer_types") is None:
            n_layers = _int(hp["num_hidden_layers"], "num_hidden_layers", where)
            window_from = _int(hp["max_window_layers"], "max_window_layers", where) if hp["sliding_window"] is not None else 0
            hp["layer_types"] = [
                "sliding_attention" if hp["sliding_window"] is not None and i >= window_from else "full_attention"
                for i in range(n_layers)
            ]
        _move_rope(hp)
    elif model_type == "llama":
        for k, v in _LLAMA_DEFAULTS.items():
            hp.setdefault(k, v)
        if hp.get("num_key_value_heads") is None:
            hp["num_key_value_heads"] = hp["num_attention_heads"]
        if hp.get("head_dim") is None:
            hp["head_dim"] = _int(hp["hidden_size"], "hidden_size", where) // _positive(hp["num_attention_heads"], "num_attention_heads", where)
        _move_rope(hp)
    return hp


def draft_hparams(raw: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    """Draft hparams for any schema: the config-class view of a known top-level ``model_type``, else the raw dict;
    then a speculators ``transformer_layer_config`` merged into the top level (§2.0). Speculators configs have no
    top-level ``model_type`` transformers knows, so upstream reads them raw and no class defaults apply."""
    hp = normalize_hparams(raw, where)
    tlc = hp.pop("transformer_layer_config", None)
    if isinstance(tlc, dict):
        hp.update(tlc)
    return hp


def _move_rope(hp: dict[str, Any]) -> None:
    """transformers >= 5 keeps rope settings in ``rope_parameters`` (an unscaled config gets ``rope_type`` default)."""
    params = hp.get("rope_parameters")
    if not isinstance(params, dict):
        scaling = hp.pop("rope_scaling", None)
        params = dict(scaling) if isinstance(scaling, dict) else {}
        if "type" in params and "rope_type" not in params:
            params["rope_type"] = params.pop("type")
        params.setdefault("rope_type", "default")
        params.setdefault("rope_theta", hp.pop("rope_theta", _DEFAULT_ROPE_THETA))
        hp["rope_parameters"] = params
    hp.pop("rope_theta", None)


def find_hparam(hp: dict[str, Any], keys: Iterable[str], *, required: bool = False, where: str = "config.json") -> Any:
    """Value of the first of ``keys`` present in ``hp`` (even if null), like upstream's ``find_hparam``."""
    keys = tuple(keys)
    for k in keys:
        if k in hp:
            return hp[k]
    if required:
        raise ConvertError(f"{where}: none of the keys {', '.join(repr(k) for k in keys)} is present")
    return None


def rope_dict(hp: dict[str, Any]) -> dict[str, Any]:
    """The rope dict of §2.1: rope_parameters / rope_scaling (its full_attention part), completed from the top level."""
    rd = hp.get("rope_parameters") or hp.get("rope_scaling") or {}
    rd = dict(rd.get("full_attention", rd)) if isinstance(rd, dict) else {}
    if "rope_theta" not in rd:
        theta = find_hparam(hp, ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"))
        if theta is not None:
            rd["rope_theta"] = theta
    if "rope_type" not in rd and "type" in rd:
        rd["rope_type"] = rd["type"]
    for k in ("partial_rotary_factor", "original_max_position_embeddings"):
        if k not in rd and k in hp:
            rd[k] = hp[k]
    return rd


def _int(value: Any, key: str, where: str) -> int:
    """A config integer written as UINT32: refuse other types and out-of-range values here, by config key
    (the GGUF writer would fail later with a bare struct error)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConvertError(f"{where}: key '{key}' is {value!r}, expected an integer")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ConvertError(f"{where}: key '{key}' is {value}, expected a non-negative integer below 2**32")
    return value


#: the tokenizer list is padded to the draft vocab_size in memory; real vocabularies are far below this
MAX_VOCAB_SIZE = 2**24


def check_vocab_size(value: Any, key: str, where: str) -> None:
    """A vocab size from the config, if given: a positive integer up to :data:`MAX_VOCAB_SIZE`.

    Example:
        >>> check_vocab_size(1024, "vocab_size", "config.json")
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VOCAB_SIZE:
        raise ConvertError(f"{where}: key '{key}' is {value!r}, expected a positive integer up to {MAX_VOCAB_SIZE}")


def _positive(value: Any, key: str, where: str) -> int:
    """A config integer that is used as a divisor or a count of heads: at least 1."""
    if _int(value, key, where) == 0:
        raise ConvertError(f"{where}: key '{key}' is 0, expected a positive integer")
    return value


def _float(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{where}: key '{key}' is {value!r}, expected a number")
    return float(value)


def base_kvs(arch: str, hp: dict[str, Any], file_type: int, where: str) -> list[KV]:
    """Row 5 of §2.1: the generic hparam keys, ending with ``general.file_type``."""
    a = {"arch": arch}
    out: list[KV] = []

    def u32(tpl: str, keys: tuple[str, ...], required: bool = False) -> None:
        v = find_hparam(hp, keys, required=required, where=where)
        if v is not None:
            out.append(KV(tpl.format(**a), VT.UINT32, _int(v, keys[0], where)))

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
        out.append(KV(S.ROPE_SCALING_FACTOR.format(**a), VT.FLOAT32, _float(rd["factor"], "rope factor", where)))
    elif rope_type == "yarn" and "factor" in rd:
        out.append(KV(S.ROPE_SCALING_TYPE.format(**a), VT.STRING, "yarn"))
        out.append(KV(S.ROPE_SCALING_FACTOR.format(**a), VT.FLOAT32, _float(rd["factor"], "rope factor", where)))
        if "original_max_position_embeddings" not in rd:
            raise ConvertError(f"{where}: yarn rope scaling needs 'original_max_position_embeddings'")
        out.append(KV(S.ROPE_SCALING_ORIG_CTX.format(**a), VT.UINT32, _int(rd["original_max_position_embeddings"], "original_max_position_embeddings", where)))
        for tpl, keys in ((S.ROPE_SCALING_YARN_EXT, ("extrapolation_factor",)), (S.ROPE_SCALING_YARN_ATTN, ("attention_factor", "attn_factor")),
                          (S.ROPE_SCALING_YARN_BETA_FAST, ("beta_fast",)), (S.ROPE_SCALING_YARN_BETA_SLOW, ("beta_slow",))):
            v = find_hparam(rd, keys)
            if v is not None:
                out.append(KV(tpl.format(**a), VT.FLOAT32, _float(v, keys[0], where)))
    elif rope_type in ("longrope", "su"):
        out.append(KV(S.ROPE_SCALING_TYPE.format(**a), VT.STRING, "longrope"))
    if "mrope_section" in rd:
        sec = [int(x) for x in rd["mrope_section"]] + [0] * 4
        out.append(KV(S.ROPE_DIMENSION_SECTIONS.format(**a), VT.ARRAY, sec[:4], VT.INT32))
    if rd.get("rope_theta") is not None:
        out.append(KV(S.ROPE_FREQ_BASE.format(**a), VT.FLOAT32, _float(rd["rope_theta"], "rope_theta", where)))
    params = hp.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("sliding_attention"), dict) and "rope_theta" in params["sliding_attention"]:
        out.append(KV(S.ROPE_FREQ_BASE_SWA.format(**a), VT.FLOAT32, _float(params["sliding_attention"]["rope_theta"], "rope_theta", where)))
    eps = find_hparam(hp, ("rms_norm_eps", "norm_eps"))
    if eps is not None:
        out.append(KV(S.RMS_EPS.format(**a), VT.FLOAT32, _float(eps, "rms_norm_eps", where)))
    out += expert_kvs(arch, hp, where)
    if hp.get("head_dim") is not None:
        hd = _int(hp["head_dim"], "head_dim", where)
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
            out.append(KV(tpl.format(**a), VT.UINT32, _int(v, keys[0], where)))
    score = find_hparam(hp, ("score_function", "scoring_func", "score_func", "moe_router_activation",
                             "moe_router_activation_func"))
    if score is not None:
        if score not in S.SCORE_FUNCS:
            raise ConvertError(f"{where}: router score function {score!r} is not one llama.cpp knows "
                               f"(expected one of {', '.join(S.SCORE_FUNCS)})")
        out.append(KV(S.EXPERT_GATING_FUNC.format(**a), VT.UINT32, S.SCORE_FUNCS[score]))
    return out


# ---------------------------------------------------------------------------------------------- tensors
_SKIP_SUFFIXES = (".rotary_emb.inv_freq", ".attention.bias", ".attention.masked_bias")
_MULTIMODAL_PREFIXES = ("mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.", "sound_projection.")
_MULTIMODAL_PARTS = ("visual.", "vision.", "audio.", "vision_", "audio_", "projector.", "patch_embed", "multi_modal_projector", "vision_tower", "audio_tower", "mm_projector")


def is_skipped(name: str) -> bool:
    """Names upstream drops silently: rotary buffers, attention masks, multimodal parts (§4.4)."""
    return name.endswith(_SKIP_SUFFIXES) or name.startswith(_MULTIMODAL_PREFIXES) or any(p in name for p in _MULTIMODAL_PARTS)


def gguf_name(bare: str) -> str | None:
    """GGUF name of a bare HF name (``layers.{i}.x`` or a global name), or None if it has no mapping."""
    if bare.startswith("layers."):
        parts = bare.split(".", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2] in S.LAYER_TENSORS:
            return S.LAYER_PREFIX.format(bid=int(parts[1])) + S.LAYER_TENSORS[parts[2]]
        return None
    return S.GLOBAL_TENSORS.get(bare)


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


@dataclass
class ConvertOptions:
    """What the user asked for, beyond the two folders."""

    outtype: str = "auto"
    embed_from_target: bool = False  # write the target's token_embd (and output) into the draft
    allow_nonfinite: bool = False
    metadata_override: Path | None = None
    model_name: str | None = None


@dataclass
class Context:
    """Everything a family needs to build a plan."""

    draft: Checkpoint
    target_dir: Path
    target_config: dict[str, Any]
    options: ConvertOptions

    @property
    def where(self) -> str:
        return str(self.draft.path / "config.json")


def tensor_spec(ck: Checkpoint, source: str, name: str, out: QT, **kw: Any) -> TensorSpec:
    ref = ck.ref(source)
    if not ref.is_float and name != S.T_D2T:
        raise ConvertError(f"{ref.file}: tensor '{source}' has dtype {ref.dtype}, expected a floating-point type")
    return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out), source=source,
                      source_dtype=ref.dtype, **kw)


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
