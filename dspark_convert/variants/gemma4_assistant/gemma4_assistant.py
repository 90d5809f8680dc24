"""Gemma 4 assistant drafts (``Gemma4AssistantForCausalLM``, ``Gemma4UnifiedAssistantForCausalLM``; Google's
``gemma-4-*-it-assistant``): the converter family (spec/drafts-beyond-dflash.md §2; upstream b11434
``conversion/gemma.py`` ``Gemma4AssistantModel``, a ``Gemma4Model`` with two more keys).

The file is arch ``gemma4-assistant``, converted on its own: the tokenizer is the assistant folder's own
(``gemma4`` LlamaHfVocab list), no target is read. Keys follow upstream's call sequence (the generic text keys,
Gemma 3's defaults, Gemma 4's sliding-window and per-layer keys, then ``embedding_length_out`` =
``backbone_hidden_size`` and ``nextn_predict_layers`` = ``block_count``); the values are those of the config as
transformers 5.x reads it (upstream loads it through ``AutoConfig``): ``global_head_dim`` defaults to 512 and
moves into ``per_layer_config``, a ``num_global_key_value_heads`` counts only with ``attention_k_eq_v``,
``num_kv_shared_layers`` 0 means every layer, the last layer is always a full-attention one, and a per-layer
value equal to the global one is dropped (a ``num_global_key_value_heads`` equal to ``num_key_value_heads`` writes
no per-layer ``head_count_kv`` array; a ``global_head_dim`` equal to ``head_dim`` is refused, as upstream stops on
it).

Tensors in checkpoint order after a generated ``rope_freqs`` (proportional RoPE of the full-attention layers):
the Gemma 4 layer without K/V projections, ``layer_scalar`` -> ``layer_output_scale.weight``, the embedding cut to
the tokenizer's size, ``pre_projection`` / ``post_projection`` -> ``nextn.*``; the E2B/E4B ``masked_embedding``
tensors are dropped, as upstream drops them. Everything upstream or the loader requires is refused before
anything is written, one line naming the key or tensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint, load_json
from ...kit.common import (
    BACKBONE_GLOBALS,
    BACKBONE_LAYER,
    NameTable,
    finish_plan,
    tensor_spec,
)
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec, add_kv, as_int
from ...roles.convert import Context, TargetFacts, TargetTensor
from .transforms import FirstRows

#: the method's name (hf2gguf/naming.method_name); default output names start with FILE_PREFIX instead
METHOD_WORD = "MTP"
#: llama.cpp's ``-hf`` finds the file beside its target by this file-name keyword (``common/download.cpp``)
FILE_PREFIX = "mtp-"
ARCHITECTURES: tuple[str, ...] = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")
TARGET_TENSORS: tuple[TargetTensor, ...] = ()  # the runtime reads the target's embeddings through its context
TOKENIZER_IN_CHECKPOINT = True  # converted on its own: the assistant folder carries the tokenizer
DSPARK_FLAG = False
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "GEMMA4_LAYER", "METHOD_WORD", "NAMES", "TARGET_TENSORS",
           "TOKENIZER_IN_CHECKPOINT", "assistant_hparams", "build_plan", "hf_names",
           "target_facts"]

A = {"arch": S.ARCH_GEMMA4_ASSISTANT}
#: the rows a Gemma 4 decoder layer (after ``layers.{i}.``) has beyond the backbone's (``kit.common.BACKBONE_LAYER``):
#: its sandwich norms (the post-attention norm follows the mixer here, the FFN input norm is
#: ``pre_feedforward_layernorm``, a post-FFN norm) and the layer output scale (upstream appends ``.weight`` to
#: ``layer_scalar``); the Gemma 4 DSpark draft's table (``variants/gemma4/dspark_gemma4.py``) takes them too
GEMMA4_LAYER: Mapping[str, str] = {
    "post_attention_layernorm.weight": S.L_ATTN_POST_NORM,
    "pre_feedforward_layernorm.weight": S.L_FFN_NORM,
    "post_feedforward_layernorm.weight": S.L_FFN_POST_NORM,
    "layer_scalar": S.L_LAYER_OUT_SCALE,
    "layer_scalar.weight": S.L_LAYER_OUT_SCALE,
}
#: the backbone rows a Q-only layer keeps: it reads the target's KV cache, so it has no K / V projections or K norm
_Q_ONLY_LAYER = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_norm.weight",
                "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
#: HF (``model.`` stripped) -> GGUF names: the backbone's Q-only rows with the Gemma 4 layer's, the backbone's
#: embedding and final norm, and the two projections
NAMES = NameTable(
    layer={**{k: BACKBONE_LAYER[k] for k in _Q_ONLY_LAYER}, **GEMMA4_LAYER},
    globals={**{k: BACKBONE_GLOBALS[k] for k in ("embed_tokens.weight", "norm.weight")},
             "pre_projection.weight": S.T_PRE_PROJECTION, "post_projection.weight": S.T_POST_PROJECTION},
)
#: Gemma4TextConfig's defaults for the fields the keys read (transformers 5.x, the view upstream converts)
TEXT_DEFAULTS: dict[str, Any] = {"max_position_embeddings": 131072, "num_attention_heads": 8, "rms_norm_eps": 1e-6,
                                 "head_dim": 256, "num_key_value_heads": 4, "final_logit_softcapping": None,
                                 "hidden_size_per_layer_input": 0, "attention_k_eq_v": False,
                                 "use_double_wide_mlp": False, "enable_moe_block": False,
                                 "vocab_size_per_layer_input": 0}
DEFAULT_ROPE: dict[str, Any] = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                   "rope_theta": 1000000.0}}
DEFAULT_GLOBAL_HEAD_DIM = 512


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return tuple("model." + n if n not in ("pre_projection.weight", "post_projection.weight") else n
                 for n in NAMES.hf_names(gguf_name))


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    return TargetFacts()  # no fc: the target's hidden size is embedding_length_out (check --target compares it)


# ---------------------------------------------------------------------------------------------- hparams
def assistant_hparams(config: dict[str, Any], where: str) -> HParams:
    """The hparams as upstream converts them: the transformers view of the nested ``text_config`` (defaults
    filled in, per-layer head dims resolved) merged over the top level. Refuses, one line each, what upstream's
    converter or the ``gemma4-assistant`` loader needs and the config lacks."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ConvertError(f"{where}: key 'text_config' is {text!r}, expected the assistant's Gemma 4 text config "
                           "(a JSON object: transformers' Gemma4AssistantConfig layout)")
    hp = HParams({**config, **TEXT_DEFAULTS, **text}, where)
    backbone = config.get("backbone_hidden_size")
    if (as_int(backbone) or 0) <= 0:
        raise ConvertError(f"{where}: backbone_hidden_size is {backbone!r}, expected the target's hidden size (a "
                           "positive integer: it sizes nextn.pre_projection and nextn.post_projection)")
    n_layer = hp.positive("text_config.num_hidden_layers", hp.get("num_hidden_layers"))
    types = hp.get("layer_types")
    if (not isinstance(types, list) or len(types) != n_layer
            or any(t not in ("sliding_attention", "full_attention") for t in types)):
        raise ConvertError(f"{where}: text_config.layer_types is {types!r}, expected num_hidden_layers ({n_layer}) "
                           "entries of 'sliding_attention' / 'full_attention' (llama.cpp requires the "
                           "sliding_window_pattern)")
    hp["layer_types"] = [*types[:-1], "full_attention"]  # Gemma4TextConfig forces the last layer to full attention
    if hp.get("sliding_window_pattern") != 1:
        window = hp.get("sliding_window")
        if (as_int(window) or 0) <= 0:
            raise ConvertError(f"{where}: text_config.sliding_window is {window!r}, expected a positive integer "
                               "(llama.cpp requires the attention.sliding_window of the sliding layers)")
    if not hp.get("num_kv_shared_layers"):
        hp["num_kv_shared_layers"] = n_layer  # Gemma4AssistantConfig: every layer reads the target's KV
    for key, want in (("hidden_size_per_layer_input", 0), ("vocab_size_per_layer_input", 0),
                      ("enable_moe_block", False), ("use_double_wide_mlp", False)):
        if hp.get(key) is not None and (hp[key] != want or type(hp[key]) is not type(want)):
            raise ConvertError(f"{where}: text_config.{key} is {hp.get(key)!r}, expected {want!r} (a Gemma 4 "
                               "assistant has no per-layer embeddings, MoE block or double-wide MLP)")
    if hp["num_kv_shared_layers"] != n_layer:
        raise ConvertError(f"{where}: text_config.num_kv_shared_layers is {hp['num_kv_shared_layers']!r}, expected "
                           f"num_hidden_layers ({n_layer}): every assistant layer reads the target's KV cache")
    if hp.get("attn_logit_softcapping") is not None:
        raise ConvertError(f"{where}: attn_logit_softcapping is {hp['attn_logit_softcapping']!r}, expected null "
                           "(Gemma 3/4 have no attention softcapping; upstream asserts it)")
    rope = hp.get("rope_parameters") or DEFAULT_ROPE
    if not isinstance(rope, dict) or not isinstance(rope.get("full_attention"), dict):
        raise ConvertError(f"{where}: text_config.rope_parameters is {rope!r}, expected an object with "
                           "'full_attention' (and 'sliding_attention') RoPE parameters")
    full = rope["full_attention"]
    if full.get("rope_type") != "proportional":
        raise ConvertError(f"{where}: rope_parameters.full_attention.rope_type is {full.get('rope_type')!r}, "
                           "expected 'proportional' (upstream builds rope_freqs for it and asserts the type)")
    if "partial_rotary_factor" not in full:
        raise ConvertError(f"{where}: rope_parameters.full_attention.partial_rotary_factor is missing, expected "
                           "the rotated fraction of the full-attention head")
    hp["rope_parameters"] = rope
    per_layer = hp.get("per_layer_config")
    if per_layer is None:  # Gemma4TextConfig moves the global head fields into per_layer_config
        layer: dict[str, Any] = {"head_dim": text.get("global_head_dim", DEFAULT_GLOBAL_HEAD_DIM)}
        if hp.get("attention_k_eq_v") and text.get("num_global_key_value_heads") is not None:
            layer["num_key_value_heads"] = text["num_global_key_value_heads"]
        per_layer = {str(i): dict(layer) for i, t in enumerate(hp["layer_types"]) if t == "full_attention"}
    if not isinstance(per_layer, dict) or not all(isinstance(v, dict) for v in per_layer.values()):
        raise ConvertError(f"{where}: text_config.per_layer_config is {per_layer!r}, expected a JSON object of "
                           "per-layer objects")
    hp["per_layer_config"] = _without_global_values(per_layer, hp)
    hp["global_head_dim"] = _per_layer(hp, "head_dim")
    hp["num_global_key_value_heads"] = _per_layer(hp, "num_key_value_heads")
    if hp["global_head_dim"] is None:
        if any(t == "full_attention" and isinstance(layer, dict) and "head_dim" in layer and layer["head_dim"]
               == hp.get("head_dim") for t, layer in zip(hp["layer_types"], _layers(per_layer, n_layer), strict=True)):
            raise ConvertError(f"{where}: the full-attention layers' head dim equals text_config.head_dim "
                               f"({hp.get('head_dim')!r}): transformers drops a per-layer value equal to the global "
                               "one, and upstream b11434's converter then has no head dim for them (AssertionError); "
                               "expected a global_head_dim other than head_dim")
        raise ConvertError(f"{where}: no head_dim for the full-attention layers (expected text_config."
                           "global_head_dim or a per_layer_config entry)")
    for key in ("global_head_dim", "head_dim", "hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads"):
        hp.positive(f"text_config.{key}", hp.get(key))
    return hp


def _without_global_values(per_layer: dict[str, Any], hp: HParams) -> dict[str, Any]:
    """``per_layer_config`` as transformers 5.x keeps it (its heterogeneous-config check): a per-layer value equal
    to the global one is dropped, then every layer entry left empty."""
    kept = {idx: {k: v for k, v in layer.items() if not (k in hp and hp[k] == v)} for idx, layer in per_layer.items()}
    return {idx: layer for idx, layer in kept.items() if layer}


def _layers(per_layer: dict[str, Any], n_layer: int) -> list[dict[str, Any] | None]:
    """Each layer's ``per_layer_config`` entry (None where it has none)."""
    by_index = {int(i): layer for i, layer in per_layer.items() if str(i).lstrip("-").isdigit()}
    return [by_index.get(i) for i in range(n_layer)]


def _per_layer(hp: HParams, field: str) -> Any:
    """A field of the first full-attention layer's ``per_layer_config`` entry (upstream's scan), else None."""
    for idx, layer in hp["per_layer_config"].items():
        i = int(idx)
        if i < len(hp["layer_types"]) and hp["layer_types"][i] == "full_attention" and field in layer:
            return layer[field]
    return None


# ---------------------------------------------------------------------------------------------- keys
def assistant_kvs(hp: HParams, file_type: int, where: str) -> list[KV]:
    """The keys in upstream's call order (a key written twice keeps its first place, its last value)."""
    kvs: list[KV] = []

    def u32(tpl: str, value: Any, key: str) -> None:
        add_kv(kvs, KV(tpl.format(**A), VT.UINT32, hp.u32(key, value)))

    def f32(tpl: str, value: Any, key: str) -> None:
        add_kv(kvs, KV(tpl.format(**A), VT.FLOAT32, hp.number(key, value)))

    n_layer = hp["num_hidden_layers"]
    rope, full = hp["rope_parameters"], hp["rope_parameters"]["full_attention"]
    # TextModel.set_gguf_parameters
    u32(S.BLOCK_COUNT, n_layer, "num_hidden_layers")
    u32(S.CONTEXT_LENGTH, hp["max_position_embeddings"], "max_position_embeddings")
    u32(S.EMBEDDING_LENGTH, hp["hidden_size"], "hidden_size")
    u32(S.FEED_FORWARD_LENGTH, hp["intermediate_size"], "intermediate_size")
    u32(S.HEAD_COUNT, hp["num_attention_heads"], "num_attention_heads")
    u32(S.HEAD_COUNT_KV, hp["num_key_value_heads"], "num_key_value_heads")
    if hp.get("is_causal") is False:
        add_kv(kvs, KV(S.CAUSAL.format(**A), VT.BOOL, False))
    if full.get("rope_theta") is not None:
        f32(S.ROPE_FREQ_BASE, full["rope_theta"], "rope_theta")
    swa_theta = rope.get("sliding_attention", {}).get("rope_theta")
    if swa_theta is not None:
        f32(S.ROPE_FREQ_BASE_SWA, swa_theta, "rope_parameters.sliding_attention.rope_theta")
    f32(S.RMS_EPS, hp["rms_norm_eps"], "rms_norm_eps")
    u32(S.KEY_LENGTH, hp["head_dim"], "head_dim")
    u32(S.VALUE_LENGTH, hp["head_dim"], "head_dim")
    add_kv(kvs, KV(S.GENERAL_FILE_TYPE, VT.UINT32, file_type))
    # Gemma3Model.set_gguf_parameters (its defaults; the keys above keep their place)
    f32(S.ROPE_FREQ_BASE, full.get("rope_theta", 1_000_000.0), "rope_theta")
    if hp.get("final_logit_softcapping"):
        f32(S.FINAL_LOGIT_SOFTCAPPING, hp["final_logit_softcapping"], "final_logit_softcapping")
    if hp.get("sliding_window_pattern") != 1:
        u32(S.SLIDING_WINDOW, hp["sliding_window"], "sliding_window")
    # Gemma4Model.set_gguf_parameters
    u32(S.SHARED_KV_LAYERS, hp["num_kv_shared_layers"], "num_kv_shared_layers")
    u32(S.EMBEDDING_LENGTH_PER_LAYER_INPUT, hp.get("hidden_size_per_layer_input") or 0, "hidden_size_per_layer_input")
    swa = [t == "sliding_attention" for t in hp["layer_types"]]
    add_kv(kvs, KV(S.SLIDING_WINDOW_PATTERN.format(**A), VT.ARRAY, swa, VT.BOOL))
    head_full, head_swa = hp["global_head_dim"], hp["head_dim"]
    u32(S.KEY_LENGTH, head_full, "global_head_dim")
    u32(S.VALUE_LENGTH, head_full, "global_head_dim")
    u32(S.KEY_LENGTH_SWA, head_swa, "head_dim")
    u32(S.VALUE_LENGTH_SWA, head_swa, "head_dim")
    expert_ff = next((hp[k] for k in ("expert_intermediate_size", "moe_intermediate_size") if k in hp), None)
    if expert_ff is not None:
        u32(S.EXPERT_FEED_FORWARD_LENGTH, expert_ff, "moe_intermediate_size")
    kv_full, kv_swa = hp["num_global_key_value_heads"], hp["num_key_value_heads"]
    if kv_full is not None and kv_swa is not None:
        heads = [hp.u32("num_key_value_heads", kv_swa if s else kv_full) for s in swa]
        add_kv(kvs, KV(S.HEAD_COUNT_KV.format(**A), VT.ARRAY, heads, VT.INT32))  # gguf-py types a list of ints INT32
    u32(S.ROPE_DIMENSION_COUNT, head_full, "global_head_dim")
    factor_swa = rope.get("partial_rotary_factor", 1.0)  # read on the nested dict: 1.0 unless given at its top
    u32(S.ROPE_DIMENSION_COUNT_SWA, int(head_swa * hp.number("partial_rotary_factor", factor_swa)),
        "rope.dimension_count_swa")
    # Gemma4AssistantModel.set_gguf_parameters
    u32(S.EMBEDDING_LENGTH_OUT, hp["backbone_hidden_size"], "backbone_hidden_size")
    u32(S.NEXTN_PREDICT_LAYERS, n_layer, "num_hidden_layers")
    return kvs


def rope_freqs(hp: HParams, where: str) -> np.ndarray:
    """``rope_freqs.weight`` of the full-attention layers' proportional RoPE: 1.0 for the rotated pairs, 1e30
    (never rotated) for the rest, over ``global_head_dim / 2`` pairs."""
    full = hp["rope_parameters"]["full_attention"]
    head = hp["global_head_dim"]
    factor = hp.number("rope_parameters.full_attention.partial_rotary_factor", full["partial_rotary_factor"])
    n_rot = int(head * factor / 2)
    if not 0 < factor <= 1:
        raise ConvertError(f"{where}: rope_parameters.full_attention.partial_rotary_factor is {factor!r}, expected a "
                           "fraction in (0, 1]")
    return np.array([1.0] * n_rot + [1e30] * (int(head / 2) - n_rot), dtype=np.float32)


# ---------------------------------------------------------------------------------------------- tensors
def tokenizer_rows(folder: Any, where: str) -> int:
    """The embedding rows upstream keeps: the pieces of ``tokenizer.model``, else ``tokenizer.json``'s vocabulary
    plus its added tokens (``Gemma3Model.modify_tensors``)."""
    from pathlib import Path

    folder = Path(folder)
    if (folder / "tokenizer.model").is_file():
        from ...tokenizer.spm import spm_token_list

        return len(spm_token_list(folder, None)[0])
    path = folder / "tokenizer.json"
    data = load_json(path)
    try:
        return len(data["model"]["vocab"]) + len(data["added_tokens"])
    except (KeyError, TypeError) as e:
        raise ConvertError(f"{path}: cannot count the tokenizer's tokens ({e}); expected a tokenizer.json with "
                           "model.vocab and added_tokens") from None


def bare_name(name: str) -> str:
    return name.removeprefix("model.")


def map_tensors(ck: Checkpoint, hp: HParams, out: QT, n_rows: int, where: str) -> list[TensorSpec]:
    specs: list[TensorSpec] = []
    for hf in ck.names:
        if "masked_embedding" in hf:  # E2B/E4B ordered-embedding tensors: upstream drops them
            continue
        if hf == "lm_head.weight" or hf == "model.lm_head.weight":
            raise ConvertError(f"{ck.ref(hf).file}: tensor '{hf}': the Gemma 4 assistant's head is its tied "
                               "embedding; llama.cpp has no output tensor for it (upstream: \"Can not map tensor\")")
        name = NAMES.gguf_name(bare_name(hf))
        if name is None:
            raise ConvertError(f"{ck.ref(hf).file}: tensor '{hf}' has no GGUF name in the Gemma 4 assistant layout "
                               "(upstream fails with \"Can not map tensor\")")
        spec = tensor_spec(ck, hf, name, out)
        if name == S.T_TOKEN_EMBD and spec.shape[0] > n_rows:
            spec = tensor_spec(ck, hf, name, out, transform=FirstRows(n_rows))
            spec = TensorSpec(name=spec.name, shape=(n_rows, *spec.shape[1:]), ggml_type=spec.ggml_type,
                              sources=spec.sources, origin=spec.origin, transform=spec.transform,
                              source_dtype=spec.source_dtype)
        specs.append(spec)
    return specs


def _require_tensors(ck: Checkpoint, hp: HParams, specs: list[TensorSpec], where: str) -> None:
    """The tensors the loader creates, with the shapes it asserts (``src/models/gemma4-assistant.cpp``)."""
    have = {t.name: t.shape for t in specs}
    H, B = hp["hidden_size"], hp["backbone_hidden_size"]
    want: dict[str, tuple[int, ...]] = {S.T_OUTPUT_NORM: (H,), S.T_PRE_PROJECTION: (H, 2 * B),
                                        S.T_POST_PROJECTION: (B, H)}
    for i, kind in enumerate(hp["layer_types"]):
        hd = hp["global_head_dim"] if kind == "full_attention" else hp["head_dim"]
        q = hp["num_attention_heads"] * hd
        p = S.LAYER_PREFIX.format(bid=i)
        want.update({p + S.L_ATTN_NORM: (H,), p + S.L_ATTN_Q: (q, H), p + S.L_ATTN_Q_NORM: (hd,),
                     p + S.L_ATTN_OUT: (H, q), p + S.L_ATTN_POST_NORM: (H,), p + S.L_LAYER_OUT_SCALE: (1,),
                     p + S.L_FFN_NORM: (H,), p + S.L_FFN_GATE: (hp["intermediate_size"], H),
                     p + S.L_FFN_UP: (hp["intermediate_size"], H), p + S.L_FFN_DOWN: (H, hp["intermediate_size"]),
                     p + S.L_FFN_POST_NORM: (H,)})
    if S.T_TOKEN_EMBD not in have:
        raise ConvertError(f"{where}: the checkpoint has no 'model.embed_tokens.weight' (the assistant's tied "
                           "embedding: llama.cpp scores its drafts with it)")
    if have[S.T_TOKEN_EMBD][1:] != (H,):
        raise ConvertError(f"{where}: tensor 'model.embed_tokens.weight' has shape {list(have[S.T_TOKEN_EMBD])}, "
                           f"expected [vocab, hidden_size {H}]")
    for name, shape in want.items():
        hf = ", ".join(hf_names(name)) or name
        if name not in have:
            raise ConvertError(f"{where}: the checkpoint has no '{hf}' (llama.cpp's gemma4-assistant loader requires "
                               f"{name})")
        if tuple(have[name]) != shape:
            raise ConvertError(f"{where}: tensor '{hf}' has shape {list(have[name])}, expected {list(shape)} (from "
                               "the config's hidden sizes, head counts and head dims)")
    extra = sorted(set(have) - set(want) - {S.T_TOKEN_EMBD})
    if extra:
        raise ConvertError(f"{where}: tensor '{', '.join(hf_names(extra[0])) or extra[0]}' belongs to no layer of "
                           f"num_hidden_layers {hp['num_hidden_layers']} (llama.cpp would not load {extra[0]})")


def build_plan(ctx: Context) -> Plan:
    """Plan for a Gemma 4 assistant: requirements first, then keys, tokenizer and tensors as upstream b11434
    writes them."""
    where = ctx.where
    hp = assistant_hparams(ctx.draft.config, where)
    rows = tokenizer_rows(ctx.draft.path, where)
    tensors = map_tensors(ctx.draft, hp, ctx.out_type, rows, where)
    _require_tensors(ctx.draft, hp, tensors, where)
    freqs = rope_freqs(hp, where)
    tensors.insert(0, TensorSpec(S.T_ROPE_FREQS, freqs.shape, QT.F32, origin="generated", data=freqs))
    vocab = ctx.target_vocab(None, "gemma4", folder=ctx.draft.path)
    n_swa = sum(t == "sliding_attention" for t in hp["layer_types"])
    notes = [f"Gemma 4 assistant: {hp['num_hidden_layers']} layers ({n_swa} sliding), Q-only attention into the "
             f"target's KV cache; backbone hidden size {hp['backbone_hidden_size']}",
             "serve with llama-server -md FILE --spec-type draft-mtp (the file has no nextn.eh_proj to detect)"]
    dropped = [n for n in ctx.draft.names if "masked_embedding" in n]
    if dropped:
        notes.append(f"dropped {len(dropped)} masked_embedding tensor(s) (ordered-embedding sampling; llama.cpp "
                     "scores with the full embedding)")
    return finish_plan(S.ARCH_GEMMA4_ASSISTANT, [], assistant_kvs(hp, ctx.file_type, where), [], vocab, [],
                       tensors, notes)
