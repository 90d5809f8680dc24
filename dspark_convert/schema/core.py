"""The GGUF vocabulary every variant shares (data only): the upstream reference, ``general.*`` keys, the generic
``{arch}.*`` key templates, tokenizer keys and token types, the backbone's tensor names, outtypes and source dtypes.

Read it through the package (``from .. import schema as S``): the tables that several families fill (``KEY_TYPES``,
``ARRAY_ELEMENT_TYPES``, ``SAFETENSORS_DTYPES``) are merged there, and this module holds only its rows of them
(``_KEY_TYPES``, ``_TOKENIZER_KEY_TYPES``, ``_SAFETENSORS_DTYPES``).

Example:
    >>> BLOCK_COUNT.format(arch="dflash"), OUTTYPES["q8_0"][1]
    ('dflash.block_count', 7)
"""

from __future__ import annotations

from ..gguf_constants import QT, VT
from .section import ArrayOf

# ---------------------------------------------------------------------------------------------- reference
#: the llama.cpp release whose ``convert_hf_to_gguf.py`` our files match byte for byte (informational
#: ``general.*`` keys aside); the summary, ``--json`` and the docs name it, and the tokenizer cache keys on it.
UPSTREAM_REFERENCE = "b11434"
UPSTREAM_REFERENCE_DATE = "2026-10-06"
#: how user-facing text names the reference
UPSTREAM_REFERENCE_NAME = f"llama.cpp {UPSTREAM_REFERENCE}"

# ---------------------------------------------------------------------------------------------- general keys
GENERAL_ARCHITECTURE = "general.architecture"
GENERAL_TYPE = "general.type"
GENERAL_NAME = "general.name"
GENERAL_FILE_TYPE = "general.file_type"
GENERAL_QUANT_VERSION = "general.quantization_version"
GENERAL_ALIGNMENT = "general.alignment"
GENERAL_SIZE_LABEL = "general.size_label"
GENERAL_FINETUNE = "general.finetune"
QUANTIZATION_VERSION = 2

#: general.* metadata keys written from the checkpoint/model card (contract §2.7), in writing order, with types.
GENERAL_META_KEYS: tuple[tuple[str, VT], ...] = (
    ("general.name", VT.STRING),
    ("general.author", VT.STRING),
    ("general.version", VT.STRING),
    ("general.organization", VT.STRING),
    (GENERAL_FINETUNE, VT.STRING),
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
#: general.sampling.* keys (contract §2.7), in writing order: (key, type, generation_config.json field); each key is
#: ``general.sampling.`` and its field's name, ``temp`` for ``temperature``
GENERAL_SAMPLING_KEYS: tuple[tuple[str, VT, str], ...] = tuple(
    (f"general.sampling.{'temp' if field == 'temperature' else field}", vt, field) for field, vt in {
        "sequence": VT.STRING, "top_k": VT.INT32, "top_p": VT.FLOAT32, "min_p": VT.FLOAT32,
        "xtc_probability": VT.FLOAT32, "xtc_threshold": VT.FLOAT32, "temperature": VT.FLOAT32,
        "penalty_last_n": VT.INT32, "penalty_repeat": VT.FLOAT32, "mirostat": VT.INT32, "mirostat_tau": VT.FLOAT32,
        "mirostat_eta": VT.FLOAT32}.items())

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
#: how many multi-token-prediction (NextN) blocks follow the trunk (UINT32): MTP sidecars, the Gemma 4 assistant
NEXTN_PREDICT_LAYERS = "{arch}.nextn_predict_layers"
#: ``LLAMA_MAX_LAYERS`` (``src/llama-hparams.h``): the loader asserts ``0 < block_count <= 512``
MAX_LAYERS = 512
#: the largest ``block_size`` accepted (llama.cpp reads it with ``atoi`` into an int32 and allocates the block's
#: batch from it); real drafts use 16, llama.cpp's default batch is 2048 tokens
MAX_BLOCK_SIZE = 4096
#: the per-expert FFN width of a MoE block (UINT32, or one value per block)
EXPERT_FEED_FORWARD_LENGTH = "{arch}.expert_feed_forward_length"
#: sliding-window attention: the window, which layers use it, and the K / V head widths of those layers
SLIDING_WINDOW = "{arch}.attention.sliding_window"
SLIDING_WINDOW_PATTERN = "{arch}.attention.sliding_window_pattern"
KEY_LENGTH_SWA = "{arch}.attention.key_length_swa"
VALUE_LENGTH_SWA = "{arch}.attention.value_length_swa"
#: the width of the hidden state a head hands on when it is not ``embedding_length`` (the Gemma 4 assistant: the
#: target's hidden size, ``post_projection``'s output and half of ``pre_projection``'s input)
EMBEDDING_LENGTH_OUT = "{arch}.embedding_length_out"

# DFlash-lineage keys upstream b11434 writes (spec/upstream-b11434.md §2.2, §2.3); DFlash2 writes them too (their
# types are rows of dflash.py's and dflash2.py's tables)
ATTN_VALUE_SCALE = "{arch}.attention.value_scale"
LOGIT_SCALE = "{arch}.logit_scale"
FINAL_LOGIT_SOFTCAPPING = "{arch}.final_logit_softcapping"
EMBEDDING_SCALE = "{arch}.embedding_scale"

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
#: The GGUF value type of the general and generic arch keys (templates included; an array: its element types, contract
#: §2.6): the first rows of the package's ``KEY_TYPES`` (every fixed key we write; used by the writer and by check).
_KEY_TYPES: dict[str, VT | ArrayOf] = {
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
    ROPE_DIMENSION_SECTIONS: ArrayOf(VT.INT32),
    ROPE_FREQ_BASE: VT.FLOAT32,
    ROPE_FREQ_BASE_SWA: VT.FLOAT32,
    RMS_EPS: VT.FLOAT32,
    KEY_LENGTH: VT.UINT32,
    VALUE_LENGTH: VT.UINT32,
    VOCAB_SIZE: VT.UINT32,
    ROPE_DIMENSION_COUNT: VT.UINT32,
}
#: The value types of the tokenizer keys: rows of ``KEY_TYPES`` after the arch keys of every family.
_TOKENIZER_KEY_TYPES: dict[str, VT] = {
    TOKENIZER_MODEL: VT.STRING,
    TOKENIZER_PRE: VT.STRING,
    TOKENIZER_MASK_ID: VT.UINT32,
    **{k: VT.UINT32 for k in SPECIAL_TOKEN_KEYS.values() if k},
    **{k: VT.BOOL for k in ADD_TOKEN_KEYS.values()},
}

# ---------------------------------------------------------------------------------------------- tensors
# GGUF tensor names only: which HF tensor becomes which is each family's own table (variants/<v>/<family>.py: NAMES).
LAYER_PREFIX = "blk.{bid}."
#: per-layer tensors of the backbone block (ggml names without the blk.N. prefix)
L_ATTN_NORM = "attn_norm.weight"
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

# ---------------------------------------------------------------------------------------------- dtypes
#: outtype name -> (GGML type, general.file_type)  (contract §2.1, §6)
OUTTYPES: dict[str, tuple[QT, int]] = {
    "f32": (QT.F32, 0),
    "f16": (QT.F16, 1),
    "q8_0": (QT.Q8_0, 7),
    "bf16": (QT.BF16, 32),
}
OUTTYPE_CHOICES = ("f32", "f16", "bf16", "q8_0", "auto")
#: safetensors dtype string -> (numpy dtype used to read the raw bytes, is a float type): the plain dtypes, the
#: first rows of the package's ``SAFETENSORS_DTYPES``
_SAFETENSORS_DTYPES: dict[str, tuple[str, bool]] = {
    "F64": ("<f8", True), "F32": ("<f4", True), "F16": ("<f2", True), "BF16": ("<u2", True),
    "I64": ("<i8", False), "I32": ("<i4", False), "I16": ("<i2", False), "I8": ("i1", False),
    "U8": ("u1", False), "BOOL": ("?", False),
}
