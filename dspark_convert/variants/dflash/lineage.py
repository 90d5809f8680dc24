"""The DFlash lineage: what every family writing arch ``dflash`` shares (contract §2.2, §4.1, §5.1).

Not a family itself (no ``Variant`` row lists it): ``dflash.py`` (z-lab DFlash) and ``dspark.py`` (DSpark, DFlash
plus Markov / confidence heads) compose these helpers, as upstream's ``DSparkModel`` extends ``DFlashModel``; the
``dflash2``, ``dsv4`` and ``gemma4`` variants build on it too. A new ``dflash``-arch family starts here: the name
table, the target-layer rule, the ``dflash.*`` keys (:func:`dflash_kvs`, and :func:`b11434_kvs`: the keys upstream
b11434 writes after the generic ones, spec/upstream-b11434.md §2.1, §2.2), the tokenizer step and the tensor walk.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Literal

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError, clip_value
from ...formats import modelopt
from ...formats.modelopt import QuantConfig
from ...formats.transforms import Nvfp4Repack, Transform
from ...kit.common import (
    BACKBONE_GLOBALS,
    BACKBONE_LAYER,
    NameTable,
    is_skipped,
    tensor_spec,
    tensor_type,
)
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import INPUT_EMBEDDING, OUTPUT_HEAD, Context, TargetFacts, TargetTensor
from .transforms import DeinterleaveRope

#: HF -> GGUF names of the DFlash lineage (§4.1, §4.2): a Qwen3 layer (the shared backbone) plus the DFlash / DSpark
#: globals. Names that map but that the loader never creates (biases, fc.bias) are written and then refused by check
#: (§7.5); attention sinks load since upstream b10705 (one per head).
NAMES = NameTable(
    layer={**BACKBONE_LAYER,
           # per-head attention sinks (upstream b10705+: a name holding "sink" gets ".weight", then maps)
           "self_attn.sinks.weight": S.L_ATTN_SINKS,
           "self_attn.attention_sink_bias.weight": S.L_ATTN_SINKS,
           "self_attn.learnable_sink_param.weight": S.L_ATTN_SINKS},
    globals={
        **BACKBONE_GLOBALS,
        "fc.weight": S.T_FC,
        "fc.bias": S.T_FC_BIAS,
        "hidden_norm.weight": S.T_ENC_NORM,  # the context norm
        "markov_head.markov_w1.weight": S.T_MARKOV_W1,
        "markov_head.markov_w2.weight": S.T_MARKOV_W2,
        "confidence_head.proj.weight": S.T_CONF_W,
        "confidence_head.proj.bias": S.T_CONF_B,
        "d2t": S.T_D2T,
    },
    mask_embedding=frozenset({"mask_embedding", "mask_embedding.weight"}),  # DeepSpec's learned mask vector
)

#: a self-contained dflash draft takes the input embedding and, unless it has its own or a reduced vocabulary
#: (d2t), the output head (tied targets: the embedding) from the target (§3.6)
TARGET_TENSORS: tuple[TargetTensor, ...] = (INPUT_EMBEDDING, OUTPUT_HEAD)


#: the tokenizer always comes from --target-model-dir; --dspark is not for these drafts
TOKENIZER_IN_CHECKPOINT = False
DSPARK_FLAG = False
#: ``(METHOD_WORD, FILE_PREFIX)`` of the lineage's two methods: the method's name (hf2gguf/naming.method_name;
#: default output names start with the prefix instead) and the file-name keyword llama.cpp's ``-hf`` finds the file
#: beside its target by (``common/download.cpp``)
DFLASH_NAMING = ("DFlash", "dflash-")
DSPARK_NAMING = ("DSpark", "dspark-")


# ---------------------------------------------------------------------------------------------- family contract
def hf_names(gguf_name: str) -> tuple[str, ...]:
    return NAMES.hf_names(gguf_name)


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """The fit facts of a ``dflash``-arch file: ``fc`` takes one target hidden state per target layer, the draft
    shares the target's rope, and a learned mask embedding is dropped."""
    taps = plan.value(S.DFLASH_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None, shares_rope=True,
                       mask_embedding=tuple(n for n in ctx.draft.names if bare_name(n) in NAMES.mask_embedding))


def bare_name(hf_name: str) -> str:
    """HF name without the ``model.`` / ``language_model.`` prefixes (upstream adds ``model.`` then maps), and
    with ``.weight`` appended to an attention-sink name that lacks it (upstream b10705+ ``filter_tensors``).

    Example:
        >>> bare_name("model.layers.0.self_attn.sinks")
        'layers.0.self_attn.sinks.weight'
    """
    name = hf_name.replace("language_model.", "")
    name = name[len("model."):] if name.startswith("model.") else name
    return name + ".weight" if "sink" in name and not name.endswith(".weight") else name


# ---------------------------------------------------------------------------------------------- keys
def target_config(ctx: Context) -> HParams:
    """The target's config as a typed view (refusals name the target's ``config.json``)."""
    return HParams(ctx.target_config, str(ctx.target_dir / "config.json"))


def target_taps(ctx: Context, ids: Any, key: str) -> list[int]:
    """The ``dflash.target_layers`` of the HF output-of-layer ids under config key ``key``: llama.cpp's
    input-of-layer ids (the +1 rule, §5.1), refused when missing or not integers.

    Written ids must lie in [0, n_target_layers] (llama.cpp taps layer inputs): a tap beyond the target is a fit
    error (``target-layers``), recorded in ``ctx.findings``, not raised.
    """
    if not isinstance(ids, list) or not ids:
        raise ConvertError(f"{ctx.where}: '{key}' is missing or empty; llama.cpp needs the target layer ids "
                           "(it fails with \"DFlash model requires 'target_layers'\")")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConvertError(f"{ctx.where}: '{key}' is {ids!r}, expected a list of integers")
    taps = [i + 1 for i in ids]
    n = ctx.target_config.get("num_hidden_layers")
    if isinstance(n, int):
        bad = [t for t in taps if t < 0 or t > n]
        if bad:
            ctx.err(key, "target-layers", f"{ctx.where}: '{key}' gives target layer {bad[0]} (after the +1 shift), "
                    f"but the target {ctx.target_dir / 'config.json'} has {n} layers (valid: 0..{n})")
    return taps


def dflash_config(hp: HParams, where: str) -> dict[str, Any]:
    """The ``dflash_config`` sub-dict (empty when absent); anything but a JSON object is refused."""
    dc = hp.get("dflash_config")
    if dc is None:
        return {}
    if not isinstance(dc, dict):
        raise ConvertError(f"{where}: key 'dflash_config' is {dc!r}, expected a JSON object")
    return dc


def block_size(hp: HParams, dc: dict[str, Any], where: str) -> int:
    """``dflash.block_size``: ``dflash_config.block_size``, else the top-level ``block_size``, else 16 (upstream
    b10662+: a ``dflash_config`` value wins over the top-level one)."""
    key = "dflash_config.block_size" if "block_size" in dc else "block_size"
    block = dc.get("block_size", hp.get("block_size", S.DFLASH_DEFAULT_BLOCK_SIZE))
    if hp.u32(key, block) == 0:
        raise ConvertError(f"{where}: key '{key}' is 0, expected a positive integer")
    return int(block)


def head_dim_of(hp: HParams, where: str) -> int:
    """The draft's head size: ``head_dim``, else hidden_size / num_attention_heads."""
    if hp.get("head_dim"):
        return hp.u32("head_dim")
    return (hp.u32("hidden_size")
            // hp.positive("num_attention_heads"))


def dflash_kvs(ctx: Context, hp: HParams, dc: dict[str, Any], taps: list[int]) -> list[KV]:
    """The ``dflash.*`` keys after the generic ones, in upstream b11434's order (spec/upstream-b11434.md §2.2):
    partial-rotary dimension count, value scale, block size, logit scale / softcapping / embedding scale,
    target layers, sliding window, causal flag, and the degenerate M-RoPE sections of an M-RoPE target."""
    where, arch = ctx.where, {"arch": S.ARCH_DFLASH}
    out: list[KV] = []
    factor = hp.rope_view().get("partial_rotary_factor")
    if factor is not None:
        rot = int(head_dim_of(hp, where) * hp.fraction("partial_rotary_factor", factor))
        out.append(KV(S.ROPE_DIMENSION_COUNT.format(**arch), VT.UINT32, hp.u32("partial_rotary_factor", rot)))
    if dc.get("attention_value_scale") is not None:
        out.append(KV(S.ATTN_VALUE_SCALE.format(**arch), VT.FLOAT32,
                      hp.number("dflash_config.attention_value_scale", dc["attention_value_scale"])))
    out.append(KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, block_size(hp, dc, where)))
    for key, tpl, positive in (("output_multiplier", S.LOGIT_SCALE, False),
                               ("final_logit_softcapping", S.FINAL_LOGIT_SOFTCAPPING, True)):
        value = dc.get(key, hp.get(key))
        if value is not None and (not positive or hp.number(key, value) > 0):
            out.append(KV(tpl.format(**arch), VT.FLOAT32, hp.number(key, value)))
    scale = embedding_scale(ctx, hp, dc)
    if scale is not None:
        out.append(KV(S.EMBEDDING_SCALE.format(**arch), VT.FLOAT32, scale))
    out.append(KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32))
    use_swa = bool(dc.get("use_swa", False))
    window = dc.get("swa_window_size") or hp.get("sliding_window")
    if (hp.get("use_sliding_window") or use_swa) and window:
        key = "dflash_config.swa_window_size" if dc.get("swa_window_size") else "sliding_window"
        n_layers = hp.u32("num_hidden_layers", hp.find(("n_layers", "num_hidden_layers", "n_layer", "num_layers")))
        types = hp.get("layer_types") or []
        if not use_swa and not isinstance(types, list):
            raise ConvertError(f"{where}: layer_types is {clip_value(types)}, expected a list of layer types "
                               "('sliding_attention', 'full_attention')")
        pattern = [True] * n_layers if use_swa else [t == "sliding_attention" for t in types]
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, hp.u32(key, window)))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY, pattern, VT.BOOL))
    causal = hp.get("is_causal")
    if causal is None:
        causal = dc.get("causal")
    if causal is not None:
        out.append(KV(S.CAUSAL.format(**arch), VT.BOOL, bool(causal)))
    if target_config(ctx).uses_mrope:
        out.append(KV(S.ROPE_DIMENSION_SECTIONS.format(**arch), VT.ARRAY, [head_dim_of(hp, where) // 2, 0, 0, 0],
                      VT.INT32))
    return out


def embedding_scale(ctx: Context, hp: HParams, dc: dict[str, Any]) -> float | None:
    """``dflash.embedding_scale``: the config's ``input_embedding_scale`` (``dflash_config`` first); without one,
    sqrt(target hidden_size) when the target's text architecture is a Gemma (the target table's prefix; Gemma
    scales the embeddings the draft shares by it; upstream b11401+)."""
    value = dc.get("input_embedding_scale", hp.get("input_embedding_scale"))
    if value is not None:
        return hp.number("input_embedding_scale", value)
    target = target_config(ctx)
    if target.scales_embeddings:
        return float(target.text.positive("hidden_size") ** 0.5)
    return None


def vocab_kvs(ctx: Context, vocab_size: int | None, mask_id: Any) -> tuple[list[KV], list[KV]]:
    """The target's tokenizer (handler chosen by the target's architecture, §2.5.1), padded to the draft's
    (already checked) ``vocab_size``, and the draft mask id."""
    vocab = ctx.target_vocab(vocab_size, None, draft=ctx.draft.config)
    tail: list[KV] = []
    if mask_id is not None:
        if isinstance(mask_id, bool) or not isinstance(mask_id, int) or mask_id < 0:
            raise ConvertError(f"{ctx.where}: mask_token_id is {mask_id!r}, expected a non-negative integer")
        n_tokens = len(next((kv.value for kv in vocab if kv.name == S.TOKENIZER_TOKENS), []))
        if n_tokens and mask_id >= n_tokens:  # llama.cpp would drop it ("bad special token") and fill blocks with -1
            raise ConvertError(f"{ctx.where}: mask_token_id is {mask_id}, outside the vocabulary of {n_tokens} tokens "
                               f"(expected an id in [0, {n_tokens}))")
        tail.append(KV(S.TOKENIZER_MASK_ID, VT.UINT32, mask_id))
    return vocab, tail


# ---------------------------------------------------------------------------------------------- tensors
_ROPE_ROWS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight")


def rope_transforms(hp: HParams, names: Set[str], where: str) -> dict[str, Transform]:
    """q/k rows and norms of an interleaved-RoPE checkpoint (``rope_is_neox_style: false``) -> NEOX order, once
    (upstream b11223+: one permutation in ``DFlashModel``, so DFlash drafts get it too)."""
    if hp.get("rope_is_neox_style", True):
        return {}
    hd = hp.get("head_dim")
    if not isinstance(hd, int) or isinstance(hd, bool) or hd < 2 or hd % 2:
        raise ConvertError(f"{where}: rope_is_neox_style is false but 'head_dim' is {hd!r}; an even head_dim is "
                           "needed to de-interleave q/k")
    return {n: DeinterleaveRope(hd) for n in names if n.endswith(_ROPE_ROWS)}


#: what :func:`choose_head_layout` decides for the draft's output head
HeadLayout = Literal["keep", "drop", "from-target", "none"]


def choose_head_layout(ctx: Context, *, keeps_embedding: bool, head_in_draft: bool,
                       upstream_drops_head: bool) -> HeadLayout:
    """The output head of a ``dflash`` file: ``keep`` the draft's ``lm_head`` as ``output.weight``, ``drop`` it,
    add the target's head (``from-target``), or ``none`` (no head in the draft, none added).

    Upstream b11434 drops a full-vocabulary DSpark's ``lm_head`` but keeps its ``embed_tokens``
    (``upstream_drops_head``); its loader (b11223+) then uses ``token_embd`` as the output head. On an untied
    target that scores the draft with the embedding matrix instead of the target's head (spec/upstream-b11434.md
    §2.3; reproduced in llama-server b11434). So by default a file that keeps ``token_embd`` on an untied target
    also gets ``output.weight``: the draft's own ``lm_head`` (DeepSpec stores the target's head there), else the
    target's. That file drafts with the target's head on b11434 and on 749f688-era llama.cpp alike (both load
    an optional ``output``). ``--match-upstream`` (``ctx.options.match_upstream``) gives upstream's layout.
    Tied targets are unaffected (their head is the embedding).
    """
    upstream = upstream_head_layout(head_in_draft=head_in_draft, upstream_drops_head=upstream_drops_head)
    if ctx.options.match_upstream or upstream == "keep" or not keeps_embedding:
        return upstream
    if target_config(ctx).ties_embeddings:
        return upstream
    return "keep" if head_in_draft else "from-target"


def upstream_head_layout(*, head_in_draft: bool, upstream_drops_head: bool) -> HeadLayout:
    """What upstream b11434 does with the draft's ``lm_head``."""
    return ("drop" if upstream_drops_head else "keep") if head_in_draft else "none"


def apply_head_layout(ctx: Context, layout: HeadLayout, upstream: HeadLayout, notes: list[str]) -> None:
    """Record what :func:`choose_head_layout` decided where it differs from upstream's layout: the target head to
    add (a ``ctx.target_tensors`` request) and a note saying why the file differs from upstream's bytes."""
    if layout == upstream:
        return
    why = "untied target; without it llama.cpp b11434 drafts with token_embd as the head (see --match-upstream)"
    ctx.differs_from_upstream.append(S.T_OUTPUT)
    if layout == "from-target":
        ctx.target_tensors.append(OUTPUT_HEAD)
        notes.append(f"output.weight from the target's head: {why}")
    elif layout == "keep":
        notes.append(f"output.weight kept from the draft's lm_head: {why}")


def map_tensors(ctx: Context, out: QT, *, drop: Set[str] = frozenset(),
                transforms: Mapping[str, Transform] | None = None,
                quant: QuantConfig | None = None) -> tuple[list[TensorSpec], str | None]:
    """Every checkpoint tensor in conversion order, mapped to its GGUF name; returns (tensors, d2t source name).

    ``drop`` holds bare HF names the family removes; ``transforms`` maps bare names to row transforms. With a
    ModelOpt NVFP4 ``quant`` (:func:`quant_config`), the NVFP4 linears and their scales come first (upstream
    b11434 writes them before every other tensor); its FP8 linears stay in their place (:func:`plain_spec`).
    """
    specs, consumed, fp8 = nvfp4_specs(ctx, quant, drop) if quant is not None else ([], set(), {})
    d2t = None
    for hf in ctx.draft.names:
        bare = bare_name(hf)
        if is_skipped("model." + bare) or bare in drop or bare in NAMES.mask_embedding or hf in consumed:
            continue
        if quant is not None and bare.endswith(modelopt.DROPPED_SUFFIXES):
            continue
        if bare == "d2t":
            d2t = hf
            continue
        name = NAMES.gguf_name(bare)
        if name is None or name == S.T_D2T:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the dflash layout "
                               "(upstream fails with \"Can not map tensor\")")
        specs.append(plain_spec(ctx, hf, name, out, fp8, transform=(transforms or {}).get(bare)))
    return specs, d2t


# ---------------------------------------------------------------------------------------------- ModelOpt NVFP4
def quant_config(ctx: Context) -> QuantConfig | None:
    """The draft's ModelOpt NVFP4 quantization (config ``quantization_config`` + ``hf_quant_config.json``), or None;
    a compressed-tensors NVFP4 draft is read under ModelOpt's names from then on."""
    q = modelopt.read_quant_config(ctx.draft.path, ctx.draft.config, ctx.draft.names, bare_name)
    if q is not None and q.compressed:
        modelopt.adopt_compressed_tensors(ctx.draft)
    return q


def nvfp4_specs(ctx: Context, quant: QuantConfig,
                drop: Set[str]) -> tuple[list[TensorSpec], set[str], dict[str, tuple[Transform, tuple[str, ...]]]]:
    """The NVFP4 linears of the draft (a ``.weight`` with a 2-D ``.weight_scale``), each as an NVFP4 tensor then its
    non-trivial ``.scale`` / ``.input_scale`` (F32 [1]); returns (specs, the checkpoint names they consume, the
    ModelOpt FP8 weights: {weight: (the transform dequantizing it by its per-tensor or per-channel
    ``weight_scale``, its sources)}, whose scales and input scales are consumed too: :func:`plain_spec` dequantizes
    them where they stand)."""
    ck = ctx.draft
    specs: list[TensorSpec] = []
    consumed: set[str] = set()
    fp8: dict[str, tuple[Transform, tuple[str, ...]]] = {}
    for hf in ck.names:
        bare = bare_name(hf)
        if not hf.endswith(".weight") or bare in drop or is_skipped("model." + bare):
            continue
        found = modelopt.fp8_dequant(ck, hf, ck.read)
        if found is not None:  # upstream drops every input_scale but an NVFP4 linear's
            fp8[hf] = found[1], found[2]
            consumed.update((found[0], hf.removesuffix(".weight") + ".input_scale"))
            continue
        scale = hf.removesuffix(".weight") + ".weight_scale"
        if scale not in ck:
            ref = ck.ref(hf)
            if ref.dtype == "U8":
                raise ConvertError(f"{ref.file}: tensor '{modelopt.stored_name(ck, hf)}' is U8 (NVFP4 codes?) but the checkpoint has no "
                                   f"'{scale}' (its E4M3 block scales)")
            continue
        if len(ck.ref(scale).shape) < 2:  # a per-channel FP8 scale, not NVFP4
            continue
        lin = modelopt.nvfp4_linear(ck, hf, ck.read)
        name = NAMES.gguf_name(bare)
        if name is None:
            raise ConvertError(f"{ck.ref(hf).file}: tensor '{hf}' has no GGUF name in the dflash layout "
                               "(upstream fails with \"Can not map tensor\")")
        specs.append(TensorSpec(name=name, shape=lin.shape, ggml_type=QT.NVFP4, sources=(lin.weight, lin.scale),
                                transform=Nvfp4Repack(lin.scale), source_dtype="U8"))
        for src, value, suffix in ((lin.scale2, lin.scale2_value, ".scale"),
                                   (lin.input_scale, lin.input_scale_value, ".input_scale")):
            if src is None or modelopt.scale_is_trivial(value):
                continue
            if suffix == ".input_scale" and not name.startswith("blk."):
                # the loader reads no input_scale for fc / markov_w2: upstream writes one and its file then fails
                # with "wrong number of tensors" (llama-server b11434); dropped unless --match-upstream
                if not ctx.options.match_upstream:
                    ctx.warn(name.removesuffix(".weight") + suffix, "nvfp4",
                             f"'{src}' ({value}) not written: llama.cpp reads no input_scale for {name} and refuses a "
                             "file holding one (--match-upstream writes it)")
                    continue
            specs.append(TensorSpec(name=name.removesuffix(".weight") + suffix, shape=(1,), ggml_type=QT.F32,
                                    sources=(src,), source_dtype=ck.ref(src).dtype,
                                    data=np.array([value], np.float32)))
        consumed.update(lin.sources)
    return specs, consumed, fp8


def plain_spec(ctx: Context, hf: str, name: str, out: QT, fp8: Mapping[str, tuple[Transform, tuple[str, ...]]],
               transform: Transform | None = None) -> TensorSpec:
    """GGUF tensor ``name`` from checkpoint tensor ``hf`` at outtype type ``out``: a ModelOpt FP8 weight of ``fp8``
    (:func:`nvfp4_specs`) dequantized to float32 by its scale, as upstream's ``dequant_model`` does, any other
    through ``tensor_spec`` (with ``transform``)."""
    if hf not in fp8:
        return tensor_spec(ctx.draft, hf, name, out, transform=transform)
    ref = ctx.draft.ref(hf)
    if transform is not None:
        raise ConvertError(f"{ref.file}: tensor '{hf}' is ModelOpt FP8, which this layout cannot convert (its rows "
                           f"are rewritten: {transform.describe()})")
    dequant, sources = fp8[hf]
    return TensorSpec(name=name, shape=ref.shape, ggml_type=tensor_type(name, ref.shape, out), sources=sources,
                      transform=dequant, source_dtype=ref.dtype)


def nvfp4_metadata(plan: Plan, quant: QuantConfig | None, outtype_file_type: int) -> None:
    """An NVFP4 draft's keys, in place: ``general.file_type`` 39 at f32 / f16 / bf16, and the
    ``general.tensor_extra`` name / prec_a4 arrays of its W4A16 tensors right after ``general.quantization_version``;
    a compressed-tensors draft gets a note saying under which names its tensors were read."""
    if quant is None:
        return
    if quant.compressed:
        plan.notes.append(modelopt.COMPRESSED_NOTE)
    ft = modelopt.file_type(quant, outtype_file_type)
    pairs = [(t.name, bare_name(t.sources[0])) for t in plan.tensors if t.ggml_type == QT.NVFP4 and t.sources]
    names, values = modelopt.prec_a4_arrays(pairs, quant)
    kvs: list[KV] = []
    for kv in plan.kvs:
        kvs.append(KV(kv.name, kv.type, ft) if kv.name == S.GENERAL_FILE_TYPE else kv)
        if kv.name == S.GENERAL_QUANT_VERSION and names:
            kvs += [KV(modelopt.TENSOR_EXTRA_NAME, VT.ARRAY, names, VT.STRING),
                    KV(modelopt.TENSOR_EXTRA_PREC_A4, VT.ARRAY, values, VT.BOOL)]
    plan.kvs[:] = kvs

def _setting(hp: HParams, dc: dict[str, Any], key: str) -> Any:
    """``dflash_config[key]``, else the top-level ``key`` (upstream's lookup order for the scales)."""
    return dc[key] if key in dc else hp.get(key)


def _target_text(ctx: Context) -> HParams:
    cfg = ctx.target_config
    text = cfg.get("text_config")
    return HParams({**cfg, **text} if isinstance(text, dict) else cfg, str(ctx.target_dir))


def _target_arch(cfg: dict[str, Any]) -> str:
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""


def b11434_kvs(ctx: Context, hp: HParams, dc: dict[str, Any], taps: list[int],
               after_block: list[KV]) -> list[KV]:
    """The keys upstream b11434 writes after the generic ones for a DFlash-class draft, in its order (§2.1, §2.2);
    ``after_block``: a refining variant's keys, written right after ``block_size`` (DFlash2's conv / selector keys)."""
    out: list[KV] = []
    head_dim = hp.get("head_dim") or hp.u32("hidden_size") // hp.positive("num_attention_heads")
    factor = hp.rope().get("partial_rotary_factor")
    if factor is not None:
        out.append(KV(S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_DFLASH), VT.UINT32,
                      int(head_dim * hp.fraction("partial_rotary_factor", factor))))
    if dc.get("attention_value_scale") is not None:
        out.append(KV(S.ATTN_VALUE_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32,
                      hp.number("dflash_config.attention_value_scale", dc["attention_value_scale"])))
    block = dc["block_size"] if "block_size" in dc else hp.get("block_size", S.DFLASH_DEFAULT_BLOCK_SIZE)
    out.append(KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, hp.positive("block_size", block)))
    out += after_block
    scale = _setting(hp, dc, "output_multiplier")
    if scale is not None:
        out.append(KV(S.LOGIT_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32, hp.number("output_multiplier", scale)))
    cap = _setting(hp, dc, "final_logit_softcapping")
    if cap is not None and hp.number("final_logit_softcapping", cap) > 0:
        out.append(KV(S.FINAL_LOGIT_SOFTCAPPING.format(arch=S.ARCH_DFLASH), VT.FLOAT32, float(cap)))
    emb = _setting(hp, dc, "input_embedding_scale")
    if emb is None and _target_arch(ctx.target_config).startswith("Gemma"):
        emb = _target_text(ctx).u32("hidden_size") ** 0.5
    if emb is not None:
        out.append(KV(S.EMBEDDING_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32,
                      hp.number("input_embedding_scale", emb)))
    out.append(KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32))
    use_swa = bool(dc.get("use_swa", False))
    window = dc.get("swa_window_size") or hp.get("sliding_window")
    if (hp.get("use_sliding_window") or use_swa) and window:
        n_layer = hp.u32("num_hidden_layers")
        pattern = [True] * n_layer if use_swa else [t == "sliding_attention" for t in hp.get("layer_types") or []]
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, hp.u32("sliding_window", window)))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY, pattern, VT.BOOL))
    causal = hp.get("is_causal")
    if causal is None:
        causal = dc.get("causal")
    if causal is not None:  # a key written twice keeps its first place (GGUFWriter): add_kv replaces in place
        out.append(KV(S.CAUSAL.format(arch=S.ARCH_DFLASH), VT.BOOL, bool(causal)))
    if target_config(ctx).uses_mrope:
        out.append(KV(S.ROPE_DIMENSION_SECTIONS.format(arch=S.ARCH_DFLASH), VT.ARRAY, [head_dim // 2, 0, 0, 0],
                      VT.INT32))
    return out
