"""DeepSeek-V4 DSpark: the draft stored as ``mtp.{s}.*`` inside a DeepSeek-V4 checkpoint, written by
upstream's ``DeepseekV4DSparkModel`` as arch ``dflash`` with DeepSeek-V4 blocks (spec/dsv4-dspark.md, which
corrects gguf-contract.md Appendix A; golden manifests dspark-dsv4.*). Data only, like the rest of the schema.

Read it through the package (``from .. import schema as S``): this module's rows of the merged tables
(``_KEY_TYPES``, ``_SAFETENSORS_DTYPES``) are joined there.

Example:
    >>> FILE_TYPE_NAMES[FILE_TYPE_MOSTLY_MXFP4_MOE], len(DSV4_LAYER_TENSORS)
    ('mxfp4_moe', 24)
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import EXPERT_FEED_FORWARD_LENGTH, T_OUTPUT_NORM
from .dflash import T_CONF_W, T_ENC_NORM, T_FC, T_MARKOV_W1, T_MARKOV_W2
from .section import ArrayOf

#: draft classes whose checkpoint carries the target's tokenizer (DeepSeek-V4 DSpark: the draft's target is the
#: checkpoint itself) -> the tokenizer handler upstream runs for them (TextModel.set_vocab, byte-level BPE); the
#: target classes themselves are rows of the target table
DRAFT_CARRIER_TOKENIZERS: dict[str, str] = {"DeepseekV4DSparkModel": "gpt2"}
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

#: The GGUF value types of the DSV4 keys (an array: its element types, contract §2.6): rows of the package's
#: ``KEY_TYPES``, after the tokenizer keys.
_KEY_TYPES: dict[str, VT | ArrayOf] = {
    EXPERT_COUNT: VT.UINT32, EXPERT_USED_COUNT: VT.UINT32, EXPERT_GATING_FUNC: VT.UINT32, Q_LORA_RANK: VT.UINT32,
    EXPERT_FEED_FORWARD_LENGTH: VT.UINT32, EXPERT_SHARED_COUNT: VT.UINT32, EXPERT_WEIGHTS_SCALE: VT.FLOAT32,
    EXPERT_WEIGHTS_NORM: VT.BOOL, SWIGLU_CLAMP_EXP: ArrayOf(VT.FLOAT32), SWIGLU_CLAMP_SHEXP: ArrayOf(VT.FLOAT32),
    INDEXER_HEAD_COUNT: VT.UINT32, INDEXER_KEY_LENGTH: VT.UINT32, INDEXER_TOP_K: VT.UINT32,
    OUTPUT_GROUP_COUNT: VT.UINT32, OUTPUT_LORA_RANK: VT.UINT32, COMPRESS_RATIOS: ArrayOf(VT.INT32, VT.UINT32),
    COMPRESS_ROPE_FREQ_BASE: VT.FLOAT32, HC_COUNT: VT.UINT32, HC_SINKHORN_ITERATIONS: VT.UINT32,
    HC_EPSILON: VT.FLOAT32, HASH_LAYER_COUNT: VT.UINT32,
}

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
#: family that decodes them (block-scaled FP8, packed FP4 in I8) accepts them; rows of ``SAFETENSORS_DTYPES``
_SAFETENSORS_DTYPES: dict[str, tuple[str, bool]] = {"F8_E4M3": ("u1", False), "F8_E8M0": ("u1", False)}
