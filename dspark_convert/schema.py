"""The single table of GGUF names and types used by dspark-convert (data only, no logic).

The PyPI ``gguf`` package (0.19.0) does not know the ``dflash`` / ``eagle3`` architectures, so this module owns
every arch string, metadata key (with its GGUF value type) and tensor name that our files contain. It is the
GGUF side only: the HF -> GGUF name tables belong to the family modules (``families/*.NAMES``). The converter
spells GGUF names only through this module; the reference forwards (``reference/*``) and ``verify`` spell them
again on purpose, so that a wrong name here cannot hide behind the same wrong name there. Facts come from
``spec/gguf-contract.md`` (written against llama.cpp master @749f688) and ``spec/upstream-b11434.md`` (what changed
up to the release the converter now matches, :data:`UPSTREAM_REFERENCE`).
"""

from __future__ import annotations

from .gguf_constants import QT, VT

# ---------------------------------------------------------------------------------------------- reference
#: the llama.cpp release whose ``convert_hf_to_gguf.py`` our files match byte for byte (informational
#: ``general.*`` keys aside); the summary, ``--json`` and the docs name it, and the tokenizer cache keys on it.
UPSTREAM_REFERENCE = "b11434"
UPSTREAM_REFERENCE_DATE = "2026-10-06"
#: how user-facing text names the reference
UPSTREAM_REFERENCE_NAME = f"llama.cpp {UPSTREAM_REFERENCE}"

# ---------------------------------------------------------------------------------------------- architectures
ARCH_DFLASH = "dflash"
ARCH_EAGLE3 = "eagle3"
ARCHES = (ARCH_DFLASH, ARCH_EAGLE3)
#: arch strings written by forks that upstream does not load (contract §1): never written, flagged by check.
FORBIDDEN_ARCHES = ("dspark", "dflash-draft")

# ---------------------------------------------------------------------------------------------- general keys
GENERAL_ARCHITECTURE = "general.architecture"
GENERAL_TYPE = "general.type"
GENERAL_NAME = "general.name"
GENERAL_FILE_TYPE = "general.file_type"
GENERAL_QUANT_VERSION = "general.quantization_version"
GENERAL_ALIGNMENT = "general.alignment"
GENERAL_SIZE_LABEL = "general.size_label"
QUANTIZATION_VERSION = 2

#: general.* metadata keys written from the checkpoint/model card (contract §2.7), in writing order, with types.
GENERAL_META_KEYS: tuple[tuple[str, VT], ...] = (
    ("general.name", VT.STRING),
    ("general.author", VT.STRING),
    ("general.version", VT.STRING),
    ("general.organization", VT.STRING),
    ("general.finetune", VT.STRING),
    ("general.basename", VT.STRING),
    ("general.description", VT.STRING),
    ("general.quantized_by", VT.STRING),
    ("general.size_label", VT.STRING),
    ("general.license", VT.STRING),
    ("general.license.name", VT.STRING),
    ("general.license.link", VT.STRING),
    ("general.url", VT.STRING),
    ("general.doi", VT.STRING),
    ("general.uuid", VT.STRING),
    ("general.repo_url", VT.STRING),
    ("general.source.url", VT.STRING),
    ("general.source.doi", VT.STRING),
    ("general.source.uuid", VT.STRING),
    ("general.source.repo_url", VT.STRING),
)
BASE_MODEL_COUNT = "general.base_model.count"
BASE_MODEL_FIELDS = ("name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url")
#: per-entry keys: BASE_MODEL_KEY.format(i=0, field="name") -> general.base_model.0.name (all STRING)
BASE_MODEL_KEY = "general.base_model.{i}.{field}"
DATASET_COUNT = "general.dataset.count"
DATASET_KEY = "general.dataset.{i}.{field}"  # same fields as BASE_MODEL_FIELDS
GENERAL_TAGS = "general.tags"
GENERAL_LANGUAGES = "general.languages"
#: general.sampling.* keys (contract §2.7), in writing order: (key, type, generation_config.json field)
GENERAL_SAMPLING_KEYS: tuple[tuple[str, VT, str], ...] = (
    ("general.sampling.sequence", VT.STRING, "sequence"),
    ("general.sampling.top_k", VT.INT32, "top_k"),
    ("general.sampling.top_p", VT.FLOAT32, "top_p"),
    ("general.sampling.min_p", VT.FLOAT32, "min_p"),
    ("general.sampling.xtc_probability", VT.FLOAT32, "xtc_probability"),
    ("general.sampling.xtc_threshold", VT.FLOAT32, "xtc_threshold"),
    ("general.sampling.temp", VT.FLOAT32, "temperature"),
    ("general.sampling.penalty_last_n", VT.INT32, "penalty_last_n"),
    ("general.sampling.penalty_repeat", VT.FLOAT32, "penalty_repeat"),
    ("general.sampling.mirostat", VT.INT32, "mirostat"),
    ("general.sampling.mirostat_tau", VT.FLOAT32, "mirostat_tau"),
    ("general.sampling.mirostat_eta", VT.FLOAT32, "mirostat_eta"),
)

# ---------------------------------------------------------------------------------------------- arch keys
# Templates take the arch string: KEY.format(arch=...)
BLOCK_COUNT = "{arch}.block_count"
CONTEXT_LENGTH = "{arch}.context_length"
EMBEDDING_LENGTH = "{arch}.embedding_length"
FEED_FORWARD_LENGTH = "{arch}.feed_forward_length"
HEAD_COUNT = "{arch}.attention.head_count"
HEAD_COUNT_KV = "{arch}.attention.head_count_kv"
CAUSAL = "{arch}.attention.causal"
ROPE_SCALING_TYPE = "{arch}.rope.scaling.type"
ROPE_SCALING_FACTOR = "{arch}.rope.scaling.factor"
ROPE_SCALING_ORIG_CTX = "{arch}.rope.scaling.original_context_length"
ROPE_SCALING_YARN_EXT = "{arch}.rope.scaling.yarn_ext_factor"
ROPE_SCALING_YARN_ATTN = "{arch}.rope.scaling.yarn_attn_factor"
ROPE_SCALING_YARN_BETA_FAST = "{arch}.rope.scaling.yarn_beta_fast"
ROPE_SCALING_YARN_BETA_SLOW = "{arch}.rope.scaling.yarn_beta_slow"
ROPE_DIMENSION_SECTIONS = "{arch}.rope.dimension_sections"
ROPE_FREQ_BASE = "{arch}.rope.freq_base"
ROPE_FREQ_BASE_SWA = "{arch}.rope.freq_base_swa"
RMS_EPS = "{arch}.attention.layer_norm_rms_epsilon"
KEY_LENGTH = "{arch}.attention.key_length"
VALUE_LENGTH = "{arch}.attention.value_length"
VOCAB_SIZE = "{arch}.vocab_size"
ROPE_DIMENSION_COUNT = "{arch}.rope.dimension_count"

# DFlash / DSpark (contract §2.2, §2.3)
DFLASH_BLOCK_SIZE = "dflash.block_size"
DFLASH_TARGET_LAYERS = "dflash.target_layers"
DFLASH_SLIDING_WINDOW = "dflash.attention.sliding_window"
DFLASH_SLIDING_WINDOW_PATTERN = "dflash.attention.sliding_window_pattern"
DFLASH_SAMPLE_FROM_ANCHOR = "dflash.sample_from_anchor"
DFLASH_DEFAULT_BLOCK_SIZE = 16
# DFlash-lineage keys upstream b11434 writes (spec/upstream-b11434.md §2.2, §2.3)
DFLASH_HAS_CONFIDENCE_HEAD = "dflash.has_confidence_head"
ATTN_VALUE_SCALE = "{arch}.attention.value_scale"
LOGIT_SCALE = "{arch}.logit_scale"
FINAL_LOGIT_SOFTCAPPING = "{arch}.final_logit_softcapping"
EMBEDDING_SCALE = "{arch}.embedding_scale"

# EAGLE-3 (contract §2.4)
EAGLE3_TARGET_LAYERS = "eagle3.target_layers"
EAGLE3_TARGET_HIDDEN_SIZE = "eagle3.target_hidden_size"
EAGLE3_NORM_BEFORE_RESIDUAL = "eagle3.norm_before_residual"
EAGLE3_NORM_BEFORE_FC = "eagle3.norm_before_fc"

# ---------------------------------------------------------------------------------------------- tokenizer keys
TOKENIZER_MODEL = "tokenizer.ggml.model"
TOKENIZER_PRE = "tokenizer.ggml.pre"
TOKENIZER_TOKENS = "tokenizer.ggml.tokens"
TOKENIZER_SCORES = "tokenizer.ggml.scores"
TOKENIZER_TOKEN_TYPE = "tokenizer.ggml.token_type"
TOKENIZER_MERGES = "tokenizer.ggml.merges"
TOKENIZER_ADD_SPACE_PREFIX = "tokenizer.ggml.add_space_prefix"
TOKENIZER_MASK_ID = "tokenizer.ggml.mask_token_id"
TOKENIZER_CHAT_TEMPLATE = "tokenizer.chat_template"
TOKENIZER_CHAT_TEMPLATE_N = "tokenizer.chat_template.{name}"
TOKENIZER_CHAT_TEMPLATES = "tokenizer.chat_templates"
TOKENIZER_LOWERCASE = "tokenizer.ggml.normalizer.lowercase"
TOKENIZER_STRIP_ACCENTS = "tokenizer.ggml.normalizer.strip_accents"
#: special-token types in discovery order, with their GGUF keys (contract §2.5.4; "seperator" sic).
SPECIAL_TOKEN_KEYS: dict[str, str] = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "cls": "",  # cls has no key and is never written
    "mask": "tokenizer.ggml.mask_token_id",
    "eot": "tokenizer.ggml.eot_token_id",
    "eom": "tokenizer.ggml.eom_token_id",
}
ADD_TOKEN_KEYS: dict[str, str] = {
    "bos": "tokenizer.ggml.add_bos_token",
    "eos": "tokenizer.ggml.add_eos_token",
    "sep": "tokenizer.ggml.add_sep_token",
}


class TokenType:
    """GGUF token types (llama.cpp ``llama_token_type``)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# ---------------------------------------------------------------------------------------------- value types
#: The GGUF value type of every fixed key we write (templates included). Used by the writer and by check.
KEY_TYPES: dict[str, VT] = {
    GENERAL_ARCHITECTURE: VT.STRING,
    GENERAL_TYPE: VT.STRING,
    GENERAL_FILE_TYPE: VT.UINT32,
    GENERAL_QUANT_VERSION: VT.UINT32,
    GENERAL_ALIGNMENT: VT.UINT32,
    BLOCK_COUNT: VT.UINT32,
    CONTEXT_LENGTH: VT.UINT32,
    EMBEDDING_LENGTH: VT.UINT32,
    FEED_FORWARD_LENGTH: VT.UINT32,
    HEAD_COUNT: VT.UINT32,
    HEAD_COUNT_KV: VT.UINT32,
    CAUSAL: VT.BOOL,
    ROPE_SCALING_TYPE: VT.STRING,
    ROPE_SCALING_FACTOR: VT.FLOAT32,
    ROPE_SCALING_ORIG_CTX: VT.UINT32,
    ROPE_SCALING_YARN_EXT: VT.FLOAT32,
    ROPE_SCALING_YARN_ATTN: VT.FLOAT32,
    ROPE_SCALING_YARN_BETA_FAST: VT.FLOAT32,
    ROPE_SCALING_YARN_BETA_SLOW: VT.FLOAT32,
    ROPE_DIMENSION_SECTIONS: VT.ARRAY,
    ROPE_FREQ_BASE: VT.FLOAT32,
    ROPE_FREQ_BASE_SWA: VT.FLOAT32,
    RMS_EPS: VT.FLOAT32,
    KEY_LENGTH: VT.UINT32,
    VALUE_LENGTH: VT.UINT32,
    VOCAB_SIZE: VT.UINT32,
    ROPE_DIMENSION_COUNT: VT.UINT32,
    DFLASH_BLOCK_SIZE: VT.UINT32,
    DFLASH_TARGET_LAYERS: VT.ARRAY,
    DFLASH_SLIDING_WINDOW: VT.UINT32,
    DFLASH_SLIDING_WINDOW_PATTERN: VT.ARRAY,
    DFLASH_SAMPLE_FROM_ANCHOR: VT.BOOL,
    DFLASH_HAS_CONFIDENCE_HEAD: VT.BOOL,
    ATTN_VALUE_SCALE: VT.FLOAT32,
    LOGIT_SCALE: VT.FLOAT32,
    FINAL_LOGIT_SOFTCAPPING: VT.FLOAT32,
    EMBEDDING_SCALE: VT.FLOAT32,
    EAGLE3_TARGET_LAYERS: VT.ARRAY,
    EAGLE3_TARGET_HIDDEN_SIZE: VT.UINT32,
    EAGLE3_NORM_BEFORE_RESIDUAL: VT.BOOL,
    EAGLE3_NORM_BEFORE_FC: VT.BOOL,
    TOKENIZER_MODEL: VT.STRING,
    TOKENIZER_PRE: VT.STRING,
    TOKENIZER_MASK_ID: VT.UINT32,
    **{k: VT.UINT32 for k in SPECIAL_TOKEN_KEYS.values() if k},
    **{k: VT.BOOL for k in ADD_TOKEN_KEYS.values()},
}

#: Element types that the loader accepts for array keys (contract §2.6).
ARRAY_ELEMENT_TYPES: dict[str, tuple[VT, ...]] = {
    DFLASH_TARGET_LAYERS: (VT.INT32, VT.UINT32),
    EAGLE3_TARGET_LAYERS: (VT.INT32, VT.UINT32),
    DFLASH_SLIDING_WINDOW_PATTERN: (VT.BOOL, VT.INT32, VT.UINT32),
    ROPE_DIMENSION_SECTIONS: (VT.INT32,),
}

# ---------------------------------------------------------------------------------------------- tensors
# GGUF tensor names only: which HF tensor becomes which is each family's own table (families/*: NAMES).
LAYER_PREFIX = "blk.{bid}."
#: per-layer tensors (ggml names without the blk.N. prefix)
L_ATTN_NORM = "attn_norm.weight"
L_ATTN_NORM_2 = "attn_norm_2.weight"  # EAGLE-3: the norm of the target hidden states
L_ATTN_Q = "attn_q.weight"
L_ATTN_K = "attn_k.weight"
L_ATTN_V = "attn_v.weight"
L_ATTN_OUT = "attn_output.weight"
L_ATTN_Q_BIAS = "attn_q.bias"
L_ATTN_K_BIAS = "attn_k.bias"
L_ATTN_V_BIAS = "attn_v.bias"
L_ATTN_OUT_BIAS = "attn_output.bias"
L_ATTN_Q_NORM = "attn_q_norm.weight"
L_ATTN_K_NORM = "attn_k_norm.weight"
L_ATTN_SINKS = "attn_sinks.weight"
L_FFN_NORM = "ffn_norm.weight"
L_FFN_GATE = "ffn_gate.weight"
L_FFN_UP = "ffn_up.weight"
L_FFN_DOWN = "ffn_down.weight"

T_TOKEN_EMBD = "token_embd.weight"
T_OUTPUT = "output.weight"
T_OUTPUT_NORM = "output_norm.weight"
T_FC = "fc.weight"
T_FC_BIAS = "fc.bias"
T_ENC_NORM = "enc.output_norm.weight"
T_MARKOV_W1 = "markov_w1.weight"
T_MARKOV_W2 = "markov_w2.weight"
T_CONF_W = "conf_proj.weight"
T_CONF_B = "conf_proj.bias"
T_D2T = "d2t"
T_ROPE_FREQS = "rope_freqs.weight"
T_FC_SCALE = "fc.scale"

#: Per-layer tensors llama.cpp's loader creates (ggml names without the blk.N. prefix), by arch (contract §7).
LOADER_LAYER_TENSORS: dict[str, dict[str, bool]] = {  # name -> required
    ARCH_DFLASH: {
        L_ATTN_NORM: True, L_FFN_NORM: True, L_ATTN_Q: True, L_ATTN_K: True, L_ATTN_V: True, L_ATTN_OUT: True,
        L_ATTN_Q_NORM: True, L_ATTN_K_NORM: True, L_FFN_GATE: True, L_FFN_UP: True, L_FFN_DOWN: True,
        L_ATTN_SINKS: False,  # b10705+ loader: optional {n_head} (dflash.cpp:242)
    },
    ARCH_EAGLE3: {
        L_ATTN_NORM: True, L_ATTN_NORM_2: True, L_FFN_NORM: True, L_ATTN_Q: True, L_ATTN_K: True, L_ATTN_V: True,
        L_ATTN_OUT: True, L_FFN_GATE: True, L_FFN_UP: True, L_FFN_DOWN: True,
    },
}
#: Global tensors the loader creates, by arch: name -> required (None: required under a condition, see check).
LOADER_GLOBAL_TENSORS: dict[str, dict[str, bool | None]] = {
    ARCH_DFLASH: {
        T_FC: True, T_ENC_NORM: True, T_OUTPUT_NORM: True, T_TOKEN_EMBD: False, T_OUTPUT: False, T_D2T: False,
        T_FC_SCALE: False, T_MARKOV_W1: False, T_MARKOV_W2: None, T_CONF_W: False, T_CONF_B: False,
    },
    ARCH_EAGLE3: {
        T_FC: True, T_OUTPUT_NORM: True, T_ENC_NORM: None, T_OUTPUT: False, T_TOKEN_EMBD: False, T_D2T: False,
        T_ROPE_FREQS: False,
    },
}
#: Archs whose loader makes ``token_embd`` the output head when ``output`` is absent (``TENSOR_DUPLICATED``,
#: src/models/dflash.cpp load_tensors; b11223+); an ``eagle3`` file without ``output`` scores with the target's head.
EMBD_AS_HEAD_ARCHES = frozenset({ARCH_DFLASH})
#: The key listing the target layers whose hidden states feed ``fc``, by arch (contract §2.2, §2.4).
TARGET_LAYERS_KEY: dict[str, str] = {ARCH_DFLASH: DFLASH_TARGET_LAYERS, ARCH_EAGLE3: EAGLE3_TARGET_LAYERS}
#: The keys in which a draft file describes its target (its taps, the target's hidden size): the variants' fit
#: rules read them from a draft side (``fit/sides.py``).
DRAFT_TARGET_KEYS = (*TARGET_LAYERS_KEY.values(), EAGLE3_TARGET_HIDDEN_SIZE)

# ---------------------------------------------------------------------------------------------- dtypes
#: outtype name -> (GGML type, general.file_type)  (contract §2.1, §6)
OUTTYPES: dict[str, tuple[QT, int]] = {
    "f32": (QT.F32, 0),
    "f16": (QT.F16, 1),
    "q8_0": (QT.Q8_0, 7),
    "bf16": (QT.BF16, 32),
}
OUTTYPE_CHOICES = ("f32", "f16", "bf16", "q8_0", "auto")
#: safetensors dtype string -> (numpy dtype used to read the raw bytes, is a float type)
SAFETENSORS_DTYPES: dict[str, tuple[str, bool]] = {
    "F64": ("<f8", True), "F32": ("<f4", True), "F16": ("<f2", True), "BF16": ("<u2", True),
    "I64": ("<i8", False), "I32": ("<i4", False), "I16": ("<i2", False), "I8": ("i1", False),
    "U8": ("u1", False), "BOOL": ("?", False),
}

# ==============================================================================================================
# DeepSeek-V4 DSpark (issue 12): the draft stored as ``mtp.{s}.*`` inside a DeepSeek-V4 checkpoint, written by
# upstream's ``DeepseekV4DSparkModel`` as arch ``dflash`` with DeepSeek-V4 blocks (spec/dsv4-dspark.md, which
# corrects gguf-contract.md Appendix A; golden manifests dspark-dsv4.*). Data only, like everything above.
# ==============================================================================================================
DSV4_ARCHITECTURE = "DeepseekV4DSparkModel"  #: a config naming this selects the family without --dspark
DSV4_TARGET_ARCHITECTURE = "DeepseekV4ForCausalLM"  #: the full checkpoint's own class
DSV4_MODEL_TYPE = "deepseek_v4"
#: HF classes of checkpoints that carry their draft inside (the draft's target is the checkpoint itself) -> the
#: tokenizer handler upstream runs for them (``tokenizer/handlers.py``: TextModel.set_vocab, byte-level BPE)
DRAFT_CARRIER_TOKENIZERS = {DSV4_TARGET_ARCHITECTURE: "gpt2", DSV4_ARCHITECTURE: "gpt2"}
DSV4_DRAFT_PREFIX = "mtp."  #: draft tensors: mtp.{stage}.<name>
#: draft tensors upstream b10786+ drops (DeepSeek-V4-Flash-Vision-Exp's ``ffn.gate.bias_vl``); the root
#: ``aligner.*`` / ``image_*`` tensors it filters are never read (only ``mtp.*`` is)
DSV4_DROPPED_SUFFIXES = (".ffn.gate.bias_vl",)
DSV4_CONFIG_KEYS = ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank")

# keys (templates take the arch string), in upstream's writing order
EXPERT_COUNT = "{arch}.expert_count"
EXPERT_USED_COUNT = "{arch}.expert_used_count"
EXPERT_GATING_FUNC = "{arch}.expert_gating_func"
Q_LORA_RANK = "{arch}.attention.q_lora_rank"
EXPERT_FEED_FORWARD_LENGTH = "{arch}.expert_feed_forward_length"
EXPERT_SHARED_COUNT = "{arch}.expert_shared_count"
EXPERT_WEIGHTS_SCALE = "{arch}.expert_weights_scale"
EXPERT_WEIGHTS_NORM = "{arch}.expert_weights_norm"
SWIGLU_CLAMP_EXP = "{arch}.swiglu_clamp_exp"
SWIGLU_CLAMP_SHEXP = "{arch}.swiglu_clamp_shexp"
INDEXER_HEAD_COUNT = "{arch}.attention.indexer.head_count"
INDEXER_KEY_LENGTH = "{arch}.attention.indexer.key_length"
INDEXER_TOP_K = "{arch}.attention.indexer.top_k"
OUTPUT_GROUP_COUNT = "{arch}.attention.output_group_count"
OUTPUT_LORA_RANK = "{arch}.attention.output_lora_rank"
COMPRESS_RATIOS = "{arch}.attention.compress_ratios"
COMPRESS_ROPE_FREQ_BASE = "{arch}.attention.compress_rope_freq_base"
HC_COUNT = "{arch}.hyper_connection.count"
HC_SINKHORN_ITERATIONS = "{arch}.hyper_connection.sinkhorn_iterations"
HC_EPSILON = "{arch}.hyper_connection.epsilon"
HASH_LAYER_COUNT = "{arch}.hash_layer_count"

#: router score function (config ``scoring_func`` and aliases) -> ``expert_gating_func`` (llama.cpp
#: ``llama_expert_gating_func_type``: softmax 1, sigmoid 2, sqrtsoftplus 4); the DSV4 loader requires 4.
SCORE_FUNCS: dict[str, int] = {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}
EXPERT_GATING_SQRTSOFTPLUS = 4
#: ``general.file_type`` of every DSV4 DSpark GGUF (LlamaFileType.MOSTLY_MXFP4_MOE), whatever --outtype says
FILE_TYPE_MOSTLY_MXFP4_MOE = 38
#: a family-fixed ``general.file_type`` -> the type name used for the output file name (``{ftype}``: MXFP4_MOE)
FILE_TYPE_NAMES: dict[int, str] = {FILE_TYPE_MOSTLY_MXFP4_MOE: "mxfp4_moe"}

KEY_TYPES.update({
    EXPERT_COUNT: VT.UINT32, EXPERT_USED_COUNT: VT.UINT32, EXPERT_GATING_FUNC: VT.UINT32, Q_LORA_RANK: VT.UINT32,
    EXPERT_FEED_FORWARD_LENGTH: VT.UINT32, EXPERT_SHARED_COUNT: VT.UINT32, EXPERT_WEIGHTS_SCALE: VT.FLOAT32,
    EXPERT_WEIGHTS_NORM: VT.BOOL, SWIGLU_CLAMP_EXP: VT.ARRAY, SWIGLU_CLAMP_SHEXP: VT.ARRAY,
    INDEXER_HEAD_COUNT: VT.UINT32, INDEXER_KEY_LENGTH: VT.UINT32, INDEXER_TOP_K: VT.UINT32,
    OUTPUT_GROUP_COUNT: VT.UINT32, OUTPUT_LORA_RANK: VT.UINT32, COMPRESS_RATIOS: VT.ARRAY,
    COMPRESS_ROPE_FREQ_BASE: VT.FLOAT32, HC_COUNT: VT.UINT32, HC_SINKHORN_ITERATIONS: VT.UINT32,
    HC_EPSILON: VT.FLOAT32, HASH_LAYER_COUNT: VT.UINT32,
})
ARRAY_ELEMENT_TYPES.update({
    SWIGLU_CLAMP_EXP: (VT.FLOAT32,),
    SWIGLU_CLAMP_SHEXP: (VT.FLOAT32,),
    COMPRESS_RATIOS: (VT.INT32, VT.UINT32),
})

# GGUF tensor names (spec/dsv4-dspark.md §3)
T_OUTPUT_HC_FN = "output_hc_fn.weight"
T_OUTPUT_HC_BASE = "output_hc_base.weight"
T_OUTPUT_HC_SCALE = "output_hc_scale.weight"
#: per-stage tensors the DSV4 DSpark loader creates (names without blk.N.), all required (Appendix A, §3)
DSV4_LAYER_TENSORS: tuple[str, ...] = (
    "attn_norm.weight", "ffn_norm.weight",
    "attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight", "attn_kv.weight", "attn_kv_a_norm.weight",
    "attn_output_a.weight", "attn_output_b.weight", "attn_sinks.weight",
    "ffn_gate_inp.weight", "exp_probs_b.bias",
    "ffn_gate_exps.weight", "ffn_down_exps.weight", "ffn_up_exps.weight",
    "ffn_gate_shexp.weight", "ffn_down_shexp.weight", "ffn_up_shexp.weight",
    "hc_attn_fn.weight", "hc_attn_base.weight", "hc_attn_scale.weight",
    "hc_ffn_fn.weight", "hc_ffn_base.weight", "hc_ffn_scale.weight",
)
#: routed-expert stacks, written first (stage 0..n-1 x this order), MXFP4
DSV4_EXPERT_TENSORS: tuple[str, ...] = ("ffn_gate_exps.weight", "ffn_down_exps.weight", "ffn_up_exps.weight")
#: global tensors of a DSV4 DSpark file: name -> required. ``output.weight`` / ``token_embd.weight`` are not
#: loaded (the target's are used): an extra tensor fails with "wrong number of tensors".
DSV4_GLOBAL_TENSORS: dict[str, bool] = {
    T_FC: True, T_ENC_NORM: True, T_OUTPUT_NORM: True,
    T_OUTPUT_HC_FN: True, T_OUTPUT_HC_BASE: True, T_OUTPUT_HC_SCALE: True,
    T_MARKOV_W1: True, T_MARKOV_W2: True, T_CONF_W: True,
}
#: source dtypes of DeepSeek-V4 checkpoints: read as raw bytes; not plain floats (``is_float`` False), so only a
#: family that decodes them (block-scaled FP8, packed FP4 in I8) accepts them
SAFETENSORS_DTYPES.update({"F8_E4M3": ("u1", False), "F8_E8M0": ("u1", False)})

# ==============================================================================================================
# DFlash2 (issue 22): z-lab ``DFlash2DraftModel``, arch ``dflash`` with per-layer dynamic convolutions and a
# low-rank candidate selector (spec/upstream-b11434.md §2.1; manifests-b11434/n-dflash2*). Data only.
# ==============================================================================================================
DFLASH2_ARCHITECTURE = "DFlash2DraftModel"
DFLASH_CONV_KERNEL_SIZE = "dflash.conv_kernel_size"
DFLASH_CONV_GROUP_SIZE = "dflash.conv_group_size"
DFLASH_SELECTOR_RANK = "dflash.selector_rank"
DFLASH_SELECTOR_TOP_K = "dflash.selector_top_k"
LOGIT_SCALE = "{arch}.logit_scale"
FINAL_LOGIT_SOFTCAPPING = "{arch}.final_logit_softcapping"
EMBEDDING_SCALE = "{arch}.embedding_scale"
ATTN_VALUE_SCALE = "{arch}.attention.value_scale"
#: per-layer conv tensors (names without blk.N.); the base kernels have no ``.weight`` suffix (F32 in any file)
L_ATTN_CONV_BASE = "attn_conv_base"
L_ATTN_CONV_PROJ = "attn_conv_proj.weight"
L_FFN_CONV_BASE = "ffn_conv_base"
L_FFN_CONV_PROJ = "ffn_conv_proj.weight"
T_SELECTOR_PREV = "selector_predecessor.weight"
T_SELECTOR_NEXT = "selector_successor.weight"
T_SELECTOR_HIDDEN = "selector_hidden.weight"  #: its presence makes llama.cpp load the file as DFlash2
KEY_TYPES.update({
    DFLASH_CONV_KERNEL_SIZE: VT.UINT32, DFLASH_CONV_GROUP_SIZE: VT.UINT32, DFLASH_SELECTOR_RANK: VT.UINT32,
    DFLASH_SELECTOR_TOP_K: VT.UINT32, LOGIT_SCALE: VT.FLOAT32, FINAL_LOGIT_SOFTCAPPING: VT.FLOAT32,
    EMBEDDING_SCALE: VT.FLOAT32, ATTN_VALUE_SCALE: VT.FLOAT32,
})

# ==============================================================================================================
# Gemma4 DSpark (issue 22): DeepSpec ``Gemma4DSparkModel``, arch ``dflash`` on a Gemma 4 backbone: K used as V,
# sandwich norms, a per-layer output scale and proportional RoPE (spec/upstream-b11434.md §2.5; manifests-b11434/
# n-gemma4-dspark). Data only; the family's knowledge is dspark_convert/variants/gemma4/.
# ==============================================================================================================
GEMMA4_DSPARK_ARCHITECTURE = "Gemma4DSparkModel"
ATTENTION_SCALE = "{arch}.attention.scale"
HIDDEN_ACTIVATION = "{arch}.hidden_activation"
#: per-layer tensors (names without blk.N.): the Gemma sandwich norms and the layer output scale
L_ATTN_POST_NORM = "post_attention_norm.weight"
L_FFN_POST_NORM = "post_ffw_norm.weight"
L_LAYER_OUT_SCALE = "layer_output_scale.weight"  #: its presence makes a ``dflash`` file a Gemma4 DSpark
KEY_TYPES.update({ATTENTION_SCALE: VT.FLOAT32, HIDDEN_ACTIVATION: VT.STRING})
