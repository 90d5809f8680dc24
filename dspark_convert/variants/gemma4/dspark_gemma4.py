"""Gemma4 DSpark drafts (DeepSpec ``Gemma4DSparkModel``, e.g. ``deepseek-ai/dspark_gemma4_12b_block7``): the
converter family (spec/upstream-b11434.md §2.2, §2.5; upstream b11434 ``conversion/gemma.py:813-910``).

The file is arch ``dflash`` (upstream's class extends ``DFlashModel``, not ``DSparkModel``): no ``d2t``, the
draft's ``lm_head`` kept as ``output.weight`` (or none, when tied), the DFlash keys, then the Gemma 4 ones:
``head_count_kv`` / ``key_length`` / ``value_length`` / ``rope.dimension_count`` from the global-attention
fields, ``embedding_scale = sqrt(hidden_size)``, ``attention.scale = 1``, ``hidden_activation``,
``sample_from_anchor``, ``has_confidence_head``. Tensors: the sandwich norms, ``layer_scalar`` ->
``layer_output_scale.weight``, ``confidence_proj`` -> ``conf_proj``, no ``attn_v`` (K is used as V), and a
generated F32 ``rope_freqs.weight`` for proportional RoPE (``1`` for the rotated pairs, ``1e30`` for the rest).

Every requirement upstream enforces is refused here, before anything is written, with one line naming the
config key (or tensor) and what llama.cpp's Gemma4 DSpark path expects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...formats import modelopt
from ...formats.modelopt import QuantConfig
from ...kit.common import NameTable, base_kvs, finish_plan
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import Context
from ..dflash import lineage
from ..dflash.lineage import DSPARK_FLAG, TARGET_TENSORS, TOKENIZER_IN_CHECKPOINT
from ..gemma4_assistant.gemma4_assistant import GEMMA4_LAYER
from .fit import target_facts

METHOD_WORD, FILE_PREFIX = lineage.DSPARK_NAMING
ARCHITECTURES: tuple[str, ...] = ("Gemma4DSparkModel",)
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "NAMES", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT",
           "build_plan", "hf_names", "requirements", "target_facts"]

#: the lineage's table with the Gemma 4 layer: ``post_attention_layernorm`` is the post-attention sandwich norm
#: here (the lineage maps it to Qwen's pre-FFN norm), ``pre_feedforward_layernorm`` the FFN input norm, the
#: post-FFN sandwich norm, the layer output scale (upstream appends ``.weight`` to ``layer_scalar``), and
#: DeepSpec's ``confidence_proj`` spelling of the confidence head
NAMES = NameTable(
    layer={
        **lineage.NAMES.layer,
        **GEMMA4_LAYER,
    },
    globals={
        **lineage.NAMES.globals,
        "confidence_proj.weight": S.T_CONF_W,
        "confidence_proj.bias": S.T_CONF_B,
    },
    mask_embedding=lineage.NAMES.mask_embedding,
)
#: ``rope_parameters`` when the config has none: Gemma4TextConfig's default for full-attention layers
DEFAULT_ROPE: dict[str, Any] = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}
ROPE_TYPES = ("default", "proportional")
ACTIVATION = "gelu_pytorch_tanh"
#: top-level keys upstream mirrors into a flat ``rope_parameters`` (``TextModel.__init__``)
_MIRRORED = {"rope_theta": ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                            "rotary_emb_base"),
             "partial_rotary_factor": ("partial_rotary_factor", "rope_pct", "rope_percent"),
             "original_max_position_embeddings": ("original_max_position_embeddings",)}


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return NAMES.hf_names(gguf_name)


# ---------------------------------------------------------------------------------------------- requirements
def _first(hp: HParams, keys: tuple[str, ...]) -> Any:
    return next((hp[k] for k in keys if k in hp), None)


def full_attention_rope(hp: HParams, where: str) -> dict[str, Any]:
    """The rope dict of the full-attention layers as upstream reads it: ``rope_parameters`` (its
    ``full_attention`` part when split by layer kind; a flat one completed from the top-level rope keys), or
    :data:`DEFAULT_ROPE` when the config has none. Refused unless its type is ``default`` or ``proportional``."""
    raw = hp.get("rope_parameters")
    if not raw:
        rope = dict(DEFAULT_ROPE)
    elif not isinstance(raw, dict):
        raise ConvertError(f"{where}: key 'rope_parameters' is {raw!r}, expected a JSON object")
    elif "full_attention" in raw or "sliding_attention" in raw:
        rope = raw.get("full_attention", raw)
        if not isinstance(rope, dict):
            raise ConvertError(f"{where}: key 'rope_parameters.full_attention' is {rope!r}, expected a JSON object")
        rope = dict(rope)
    else:
        rope = dict(raw)
        for key, keys in _MIRRORED.items():
            if key not in rope and (value := _first(hp, keys)) is not None:
                rope[key] = value
        if "rope_type" not in rope and "type" in rope:
            rope["rope_type"] = rope["type"]
    if rope.get("rope_type") not in ROPE_TYPES:
        raise ConvertError(f"{where}: rope_parameters rope_type is {rope.get('rope_type')!r}, expected 'default' or "
                           "'proportional' (llama.cpp's Gemma4 DSpark path knows no other RoPE)")
    return rope


def requirements(hp: HParams, bare_names: set[str], where: str) -> None:
    """Upstream's hard requirements (``Gemma4DSparkModel.__init__``), one line each when unmet."""
    n_layer = hp.positive("num_hidden_layers")
    if hp.get("attention_k_eq_v") is not True:
        raise ConvertError(f"{where}: attention_k_eq_v is {hp.get('attention_k_eq_v')!r}, expected true (llama.cpp's "
                           "Gemma4 DSpark attention uses the RMS-normed K projection as V and has no attn_v)")
    types = hp.get("layer_types")
    if types != ["full_attention"] * n_layer:
        raise ConvertError(f"{where}: layer_types is {types!r}, expected ['full_attention'] x num_hidden_layers "
                           f"({n_layer}) (llama.cpp's Gemma4 DSpark supports full-attention layers only)")
    act = hp.get("hidden_activation", ACTIVATION)
    if act != ACTIVATION:
        raise ConvertError(f"{where}: hidden_activation is {act!r}, expected {ACTIVATION!r}")
    for key in ("attention_bias", "enable_moe_block"):
        if hp.get(key):
            raise ConvertError(f"{where}: {key} is {hp[key]!r}, expected false (llama.cpp's Gemma4 DSpark has no "
                               f"{'attention biases' if key == 'attention_bias' else 'MoE block'})")
    vocab = hp.vocab_size("vocab_size", required=True)
    draft_vocab = hp.get("draft_vocab_size") or vocab
    if draft_vocab != vocab:
        raise ConvertError(f"{where}: draft_vocab_size is {draft_vocab!r}, expected vocab_size {vocab} (Gemma4 DSpark "
                           "supports the full vocabulary only)")
    if "lm_head.weight" not in bare_names and hp.get("tie_word_embeddings") is not True:
        raise ConvertError(f"{where}: the checkpoint has no 'lm_head.weight' and tie_word_embeddings is "
                           f"{hp.get('tie_word_embeddings')!r}; expected the tensor, or tie_word_embeddings true")
    dc = lineage.dflash_config(hp, where)
    head = dc.get("markov_head_type", hp.get("markov_head_type", "vanilla"))
    if head != "vanilla":
        raise ConvertError(f"{where}: markov_head_type is {head!r}, expected 'vanilla' (the only Markov head llama.cpp "
                           "implements)")
    full_attention_rope(hp, where)
    if dc.get("mask_token_id", hp.get("mask_token_id")) is None:
        raise ConvertError(f"{where}: mask_token_id is missing (expected in dflash_config or at the top level): "
                           "llama.cpp fills draft blocks with it")
    if not dc.get("target_layer_ids", hp.get("target_layer_ids")):
        raise ConvertError(f"{where}: target_layer_ids is missing or empty (expected in dflash_config or at the top "
                           "level): llama.cpp needs the target layers the draft reads")
    if hp.get("final_logit_softcapping"):
        raise ConvertError(f"{where}: final_logit_softcapping is {hp['final_logit_softcapping']!r}, expected null "
                           "(llama.cpp's Gemma4 DSpark path does not softcap logits)")
    if dc.get("use_swa", False):
        window = dc.get("swa_window_size")
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ConvertError(f"{where}: dflash_config.swa_window_size is {window!r}, expected a positive integer "
                               "(dflash_config.use_swa is true)")
    for key in ("global_head_dim", "num_global_key_value_heads"):
        hp.positive(key, hp.get(key))


# ---------------------------------------------------------------------------------------------- keys and tensors
def rope_freqs(head_dim: int, rope: dict[str, Any], where: str) -> np.ndarray | None:
    """The generated ``rope_freqs.weight`` of proportional RoPE: ``[1.0] * n_rot + [1e30] * rest`` over
    ``head_dim / 2`` pairs, ``n_rot = head_dim * partial_rotary_factor / 2`` (the 1e30 factors leave the unrotated
    pairs in place); None for default RoPE."""
    if rope.get("rope_type") != "proportional":
        return None
    value = rope.get("partial_rotary_factor", 0.25)
    fraction = HParams(rope, where).fraction("rope_parameters.partial_rotary_factor", value)
    n_rot = int(head_dim * fraction / 2)
    if not 0 < fraction <= 1 or head_dim * fraction != 2 * n_rot:
        raise ConvertError(f"{where}: rope_parameters.partial_rotary_factor {value!r} x global_head_dim {head_dim} is "
                           "not a positive even number of rotated dimensions (expected a factor in (0, 1] giving one)")
    return np.array([1.0] * n_rot + [1e30] * (head_dim // 2 - n_rot), dtype=np.float32)


def upstream_view(hp: HParams, rope: dict[str, Any]) -> HParams:
    """hparams as the lineage's key builders should see them: the full-attention rope dict as ``rope_parameters``
    (already completed from the top level, so the top-level rope keys are left out)."""
    mirrored = {k for keys in _MIRRORED.values() for k in keys}
    return HParams({**{k: v for k, v in hp.items() if k not in mirrored and k != "rope_scaling"}, "rope_parameters": rope},
                   hp.where)


def gemma4_kvs(hp: HParams, has_conf: bool, where: str) -> list[KV]:
    """The keys upstream's Gemma4 class writes after the DFlash ones (``gemma.py:853-877``)."""
    a = {"arch": S.ARCH_DFLASH}
    head_dim = hp.positive("global_head_dim")
    hidden = hp.positive("hidden_size")
    sample = hp.get("sample_from_anchor", True)
    return [
        KV(S.HEAD_COUNT_KV.format(**a), VT.UINT32,
           hp.u32("num_global_key_value_heads")),
        KV(S.KEY_LENGTH.format(**a), VT.UINT32, head_dim),
        KV(S.VALUE_LENGTH.format(**a), VT.UINT32, head_dim),
        KV(S.ROPE_DIMENSION_COUNT.format(**a), VT.UINT32, head_dim),
        KV(S.EMBEDDING_SCALE.format(**a), VT.FLOAT32, float(hidden ** 0.5)),
        KV(S.ATTENTION_SCALE.format(**a), VT.FLOAT32, 1.0),
        KV(S.HIDDEN_ACTIVATION.format(**a), VT.STRING, ACTIVATION),
        KV(S.DFLASH_SAMPLE_FROM_ANCHOR, VT.BOOL, bool(sample)),
        KV(S.DFLASH_HAS_CONFIDENCE_HEAD, VT.BOOL, has_conf),
    ]


def map_tensors(ctx: Context, hp: HParams, quant: QuantConfig | None = None) -> list[TensorSpec]:
    """Every checkpoint tensor in checkpoint order, mapped with :data:`NAMES`; a tensor without a GGUF name is
    refused (upstream: "Can not map tensor"). With a ModelOpt NVFP4 ``quant``, the lineage's NVFP4 linears and their
    scales come first."""
    from ...kit.common import is_skipped

    drop = {"embed_tokens.weight"} if hp.get("has_embed_tokens", True) is False else set()
    specs, consumed, fp8 = lineage.nvfp4_specs(ctx, quant, drop) if quant is not None else ([], set(), {})
    for hf in ctx.draft.names:
        bare = lineage.bare_name(hf)
        if hf in consumed or (quant is not None and bare.endswith(modelopt.DROPPED_SUFFIXES)):
            continue
        if is_skipped("model." + bare) or bare in drop or bare in NAMES.mask_embedding:
            continue
        name = NAMES.gguf_name(bare)
        if name is None or name == S.T_D2T:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the Gemma4 DSpark layout "
                               "(upstream fails with \"Can not map tensor\")")
        specs.append(lineage.plain_spec(ctx, hf, name, ctx.out_type, fp8))
    return specs


def build_plan(ctx: Context) -> Plan:
    """Plan for a Gemma4 DSpark draft: requirements first, then keys and tensors as upstream b11434 writes them."""
    where = ctx.where
    hp = HParams.of(ctx.draft.config, where)
    bare = {lineage.bare_name(n) for n in ctx.draft.names}
    requirements(hp, bare, where)
    dc = lineage.dflash_config(hp, where)
    rope = full_attention_rope(hp, where)
    view = upstream_view(hp, rope)
    taps = lineage.target_taps(ctx, dc.get("target_layer_ids", hp.get("target_layer_ids")), "target_layer_ids")
    quant = lineage.quant_config(ctx)
    tensors = map_tensors(ctx, hp, quant)
    freqs = rope_freqs(hp.positive("global_head_dim"), rope, where)
    if freqs is not None:  # upstream yields its generated tensors first
        tensors.insert(0, TensorSpec(S.T_ROPE_FREQS, freqs.shape, QT.F32, origin="generated", data=freqs))
    # upstream: any checkpoint tensor of a confidence head (after the confidence_proj rename)
    has_conf = any("confidence_proj" in n or "confidence_head.proj" in n for n in ctx.draft.names)
    family = lineage.dflash_kvs(ctx, view, dc, taps) + gemma4_kvs(hp, has_conf, where)
    vocab_size = hp.vocab_size("vocab_size", required=True)
    vocab, tail = lineage.vocab_kvs(ctx, vocab_size, dc.get("mask_token_id", hp.get("mask_token_id")))
    notes = [f"Gemma4 DSpark: K used as V, sandwich norms, layer output scale; RoPE {rope['rope_type']}"
             + (f", rope_freqs for {int(np.count_nonzero(freqs == 1.0))} of {freqs.size} pairs" if freqs is not None
                else ""),
             "Markov head: " + ("yes" if any(t.name == S.T_MARKOV_W1 for t in tensors) else "no")
             + "; confidence head: " + ("yes" if has_conf else "no")]
    if str(ctx.draft.config.get("model_type", "")).startswith("gemma4"):
        notes.append(f"model_type {ctx.draft.config['model_type']!r}: read as the raw config.json (upstream b11434 "
                     "reads it through transformers 5.x, whose Gemma4TextConfig moves global_head_dim into "
                     "per_layer_config, and fails with KeyError 'global_head_dim'; these are the bytes it writes "
                     "for the same config without model_type)")
    plan = finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, view, ctx.file_type, where), family, vocab, tail,
                       tensors, notes)
    lineage.nvfp4_metadata(plan, quant, ctx.file_type)  # ModelOpt NVFP4: file type 39, prec_a4 arrays
    return plan
