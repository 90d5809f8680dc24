"""Muse-Glimmer assistant drafts (``MuseGlimmerAssistantModel``, Meta's ``Muse-Glimmer-30B-assistant``): a ``dflash``
file with its own tensor names (spec/drafts-beyond-dflash.md §3; upstream b11434 ``conversion/muse_glimmer.py``
``MuseGlimmerAssistantModel``, a plain ``TextModel``, not the DFlash class).

What differs from the z-lab DFlash path: ``encoder.fc`` / ``encoder.output_norm_enc`` for the context projection
and its norm, un-prefixed ``layers.{i}.*`` / ``norm`` names mapped as they are (no NeoX permutation, no norm
shift); ``block_size`` and ``target_layer_ids`` are required top-level keys (``dflash.target_layers`` = ids + 1);
the sliding-window keys are written whenever both ``sliding_window`` and ``layer_types`` are set; the mask id is
the top-level ``mask_token_id``; ``attention.causal`` only by the generic rule (``is_causal: false``). The
tokenizer is the target's (``--target-model-dir`` is required): for a ``MuseGlimmerForConditionalGeneration``
target, byte-level BPE plus ``eot_token_id`` = ``<|eot|>``. No embedding or head: llama.cpp borrows the
target's.
"""

from __future__ import annotations

from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...kit.common import BACKBONE_LAYER, NameTable, base_kvs, finish_plan, tensor_spec
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import Context, TargetFacts
from . import lineage
from .lineage import DSPARK_FLAG, TARGET_TENSORS, TOKENIZER_IN_CHECKPOINT

METHOD_WORD, FILE_PREFIX = lineage.DFLASH_NAMING
ARCHITECTURES: tuple[str, ...] = ("MuseGlimmerAssistantModel",)
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "METHOD_WORD", "NAMES", "TARGET_TENSORS",
           "TOKENIZER_IN_CHECKPOINT", "build_plan", "hf_names", "target_facts"]

#: HF -> GGUF names as gguf-py's tensor map resolves them for arch ``dflash`` (``model.`` is accepted before the
#: layers and the final norm, not before ``encoder.``: upstream cannot map ``model.encoder.fc.weight``)
NAMES = NameTable(
    layer=dict(BACKBONE_LAYER),
    globals={"encoder.fc.weight": S.T_FC, "encoder.output_norm_enc.weight": S.T_ENC_NORM,
             "norm.weight": S.T_OUTPUT_NORM},
)


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return NAMES.hf_names(gguf_name)


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    return lineage.target_facts(ctx, plan)


def _name(hf: str) -> str | None:
    if hf.startswith(("model.layers.", "model.norm.")):
        hf = hf.removeprefix("model.")
    return NAMES.gguf_name(hf)


def requirements(hp: HParams, where: str) -> None:
    """What upstream's converter reads without a default, and what the ``dflash`` loader needs to draft a
    sliding-window assistant as trained."""
    for key in ("block_size", "target_layer_ids"):
        if hp.get(key) is None:
            raise ConvertError(f"{where}: key '{key}' is missing, expected at the top level of a Muse-Glimmer "
                               "assistant config (upstream reads it without a default)")
    hp.positive("block_size")
    n_layer = hp.positive("num_hidden_layers")
    types = hp.get("layer_types")
    pattern = hp.get("sliding_window_pattern")
    if hp.get("sliding_window") and not types:
        got = f" (sliding_window_pattern {pattern!r} is not read)" if pattern is not None else ""
        raise ConvertError(f"{where}: sliding_window is {hp['sliding_window']!r} but layer_types is missing{got}; "
                           "expected layer_types, one 'sliding_attention' / 'full_attention' per layer (upstream "
                           "writes the sliding-window keys only from layer_types: without them llama.cpp attends "
                           "over the whole context)")
    if types is not None and (not isinstance(types, list) or len(types) != n_layer
                              or any(t not in ("sliding_attention", "full_attention") for t in types)):
        raise ConvertError(f"{where}: layer_types is {types!r}, expected num_hidden_layers ({n_layer}) entries of "
                           "'sliding_attention' / 'full_attention'")
    if types and any(t == "sliding_attention" for t in types) and not hp.get("sliding_window"):
        raise ConvertError(f"{where}: layer_types has sliding layers but sliding_window is "
                           f"{hp.get('sliding_window')!r}, expected a positive window")


def muse_kvs(ctx: Context, hp: HParams, where: str) -> list[KV]:
    """The keys ``MuseGlimmerAssistantModel.set_gguf_parameters`` adds after the generic ones."""
    out = [KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, hp.u32("block_size")),
           KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, lineage.target_taps(ctx, hp["target_layer_ids"], "target_layer_ids"),
              VT.INT32)]
    if hp.get("sliding_window") and hp.get("layer_types"):
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, hp.u32("sliding_window")))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY,
                      [t == "sliding_attention" for t in hp["layer_types"]], VT.BOOL))
    return out


def map_tensors(ctx: Context) -> list[TensorSpec]:
    specs = []
    for hf in ctx.draft.names:
        name = _name(hf)
        if name is None:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the Muse-Glimmer "
                               "assistant layout (upstream fails with \"Can not map tensor\")")
        specs.append(tensor_spec(ctx.draft, hf, name, ctx.out_type))
    return specs


def build_plan(ctx: Context) -> Plan:
    """Plan for a Muse-Glimmer assistant: requirements first, then keys, the target's tokenizer and the tensors
    as upstream b11434 writes them."""
    where = ctx.where
    hp = HParams.of(ctx.draft.config, where)
    requirements(hp, where)
    tensors = map_tensors(ctx)
    mask = hp.get("mask_token_id")
    vocab, tail = lineage.vocab_kvs(ctx, None, mask)
    n_swa = sum(t == "sliding_attention" for t in hp.get("layer_types") or [])
    notes = [f"Muse-Glimmer assistant: {hp['num_hidden_layers']} layers ({n_swa} sliding), block "
             f"{hp['block_size']}; the target's embeddings and head at run time"]
    return finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, ctx.file_type, where), muse_kvs(ctx, hp, where),
                       vocab, tail, tensors, notes)
