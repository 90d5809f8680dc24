"""MTP (NextN) sidecars: the MTP head of a target checkpoint written as a file of the target's own architecture
(``convert_hf_to_gguf.py --mtp``, spec/drafts-beyond-dflash.md §1). Data only, like the rest of the schema.

A sidecar holds ``token_embd`` / ``output_norm`` / ``output`` and the MTP block(s) ``blk.{n}..`` (``n`` = the trunk's
layer count), declares ``block_count = n + nextn`` and ``{arch}.nextn_predict_layers = nextn``, and lacks
``blk.0.attn_norm.weight``, which is how the loader recognises it (§1.6).

Example:
    >>> NEXTN_PREDICT_LAYERS.format(arch=ARCH_QWEN35), L_NEXTN_EH_PROJ
    ('qwen35.nextn_predict_layers', 'nextn.eh_proj.weight')
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import NEXTN_PREDICT_LAYERS
from .section import ArrayOf

ARCH_QWEN35 = "qwen35"
ARCH_QWEN35MOE = "qwen35moe"
ARCH_QWEN3NEXT = "qwen3next"
ARCH_GLM4MOE = "glm4moe"
ARCH_GLM_DSA = "glm-dsa"
#: GLM-4.7-Flash (upstream's ``Glm4MoeLiteModel``): DeepSeek-V2's MLA architecture
ARCH_DEEPSEEK2 = "deepseek2"
ARCH_DEEPSEEK32 = "deepseek32"
ARCH_NEMOTRON_H_MOE = "nemotron_h_moe"
ARCH_DEEPSEEK4 = "deepseek4"
ARCH_MIMO2 = "mimo2"
#: the GGUF architectures whose MTP sidecars are written (the loaders with ``mtp_only`` detection)
MTP_ARCHES = (ARCH_QWEN35, ARCH_QWEN35MOE, ARCH_QWEN3NEXT, ARCH_GLM4MOE, ARCH_GLM_DSA, ARCH_DEEPSEEK2,
              ARCH_NEMOTRON_H_MOE, ARCH_DEEPSEEK4, ARCH_MIMO2, ARCH_DEEPSEEK32)
#: archs whose loader requires the LayerNorm epsilon instead of the RMS one (which then defaults to it)
LAYER_NORM_EPS_ARCHES = (ARCH_NEMOTRON_H_MOE,)

# keys (templates take the arch string), in upstream's writing order
EXPERT_SHARED_FEED_FORWARD_LENGTH = "{arch}.expert_shared_feed_forward_length"
SSM_CONV_KERNEL = "{arch}.ssm.conv_kernel"
SSM_STATE_SIZE = "{arch}.ssm.state_size"
SSM_GROUP_COUNT = "{arch}.ssm.group_count"
SSM_TIME_STEP_RANK = "{arch}.ssm.time_step_rank"
SSM_INNER_SIZE = "{arch}.ssm.inner_size"
RECURRENT_LAYERS = "{arch}.attention.recurrent_layers"
FULL_ATTENTION_INTERVAL = "{arch}.full_attention_interval"
EXPERT_GROUP_COUNT = "{arch}.expert_group_count"
EXPERT_GROUP_USED_COUNT = "{arch}.expert_group_used_count"
LEADING_DENSE_BLOCK_COUNT = "{arch}.leading_dense_block_count"
# MLA (glm-dsa, deepseek2) and the DSA indexer (glm-dsa; ``attention.q_lora_rank`` and ``attention.indexer.{head_count,key_length,top_k}``
# are in dsv4.py)
KV_LORA_RANK = "{arch}.attention.kv_lora_rank"
KEY_LENGTH_MLA = "{arch}.attention.key_length_mla"
VALUE_LENGTH_MLA = "{arch}.attention.value_length_mla"
ROPE_SCALING_YARN_LOG_MUL = "{arch}.rope.scaling.yarn_log_multiplier"
INDEXER_TYPES = "{arch}.attention.indexer.types"
#: Nemotron-H: the LayerNorm epsilon (its loader requires it; the RMS epsilon defaults to it), GraniteHybrid's rope
#: flag and the latent MoE width (Nemotron 3 Super)
LAYER_NORM_EPS = "{arch}.attention.layer_norm_epsilon"
ROPE_SCALING_FINETUNED = "{arch}.rope.scaling.finetuned"
MOE_LATENT_SIZE = "{arch}.moe_latent_size"
RESIDUAL_SCALE = "{arch}.residual_scale"

# tensors of a NextN block (after ``blk.{n}.``)
L_NEXTN_EH_PROJ = "nextn.eh_proj.weight"
L_NEXTN_EMBED_TOKENS = "nextn.embed_tokens.weight"
L_NEXTN_ENORM = "nextn.enorm.weight"
L_NEXTN_HNORM = "nextn.hnorm.weight"
L_NEXTN_SHARED_HEAD_HEAD = "nextn.shared_head_head.weight"
L_NEXTN_SHARED_HEAD_NORM = "nextn.shared_head_norm.weight"
L_POST_ATTENTION_NORM = "post_attention_norm.weight"
L_FFN_GATE_INP = "ffn_gate_inp.weight"
L_FFN_GATE_EXPS = "ffn_gate_exps.weight"
L_FFN_UP_EXPS = "ffn_up_exps.weight"
L_FFN_DOWN_EXPS = "ffn_down_exps.weight"
L_FFN_GATE_SHEXP = "ffn_gate_shexp.weight"
L_FFN_UP_SHEXP = "ffn_up_shexp.weight"
L_FFN_DOWN_SHEXP = "ffn_down_shexp.weight"
L_FFN_GATE_INP_SHEXP = "ffn_gate_inp_shexp.weight"
#: Nemotron 3 Super's latent MoE projections (``mixer.fc1_latent_proj`` / ``fc2_latent_proj``)
L_FFN_LATENT_DOWN = "ffn_latent_down.weight"
L_FFN_LATENT_UP = "ffn_latent_up.weight"
#: MiMo-V2: the fused q/k/v projection (MiMo-V2.5) and the MTP block's norm before the head (``final_layernorm``)
L_ATTN_QKV = "attn_qkv.weight"
L_LAYER_OUT_NORM = "layer_output_norm.weight"
#: the router's score-correction bias (``mlp.gate.e_score_correction_bias``, GLM-4.5)
L_EXP_PROBS_B = "exp_probs_b.bias"
# MLA attention and the DSA indexer of a glm-dsa block
L_ATTN_Q_A = "attn_q_a.weight"
L_ATTN_Q_B = "attn_q_b.weight"
L_ATTN_Q_A_NORM = "attn_q_a_norm.weight"
L_ATTN_KV_A_MQA = "attn_kv_a_mqa.weight"
L_ATTN_KV_A_NORM = "attn_kv_a_norm.weight"
#: ``kv_b_proj`` split per head into ``k_b`` (transposed) and ``v_b`` (upstream's ``DeepseekV2Model``)
L_ATTN_K_B = "attn_k_b.weight"
L_ATTN_V_B = "attn_v_b.weight"
L_INDEXER_K_NORM = "indexer.k_norm.weight"
L_INDEXER_K_NORM_B = "indexer.k_norm.bias"
L_INDEXER_PROJ = "indexer.proj.weight"
L_INDEXER_ATTN_K = "indexer.attn_k.weight"
L_INDEXER_ATTN_Q_B = "indexer.attn_q_b.weight"
#: tensors upstream always writes as F32 (``base.py`` forced types: router weights)
F32_LAYER_TENSORS = (L_FFN_GATE_INP, L_FFN_GATE_INP_SHEXP, L_INDEXER_PROJ)

#: The GGUF value types of the MTP sidecar keys (an array: its element types, contract §2.6): rows of the package's
#: ``KEY_TYPES``.
_KEY_TYPES: dict[str, VT | ArrayOf] = {
    NEXTN_PREDICT_LAYERS: VT.UINT32,
    EXPERT_SHARED_FEED_FORWARD_LENGTH: VT.UINT32,
    SSM_CONV_KERNEL: VT.UINT32,
    SSM_STATE_SIZE: VT.UINT32,
    SSM_GROUP_COUNT: VT.UINT32,
    SSM_TIME_STEP_RANK: VT.UINT32,
    SSM_INNER_SIZE: VT.UINT32,
    RECURRENT_LAYERS: ArrayOf(VT.BOOL),
    FULL_ATTENTION_INTERVAL: VT.UINT32,
    EXPERT_GROUP_COUNT: VT.UINT32,
    EXPERT_GROUP_USED_COUNT: VT.UINT32,
    LEADING_DENSE_BLOCK_COUNT: VT.UINT32,
    KV_LORA_RANK: VT.UINT32,
    KEY_LENGTH_MLA: VT.UINT32,
    VALUE_LENGTH_MLA: VT.UINT32,
    ROPE_SCALING_YARN_LOG_MUL: VT.FLOAT32,
    INDEXER_TYPES: ArrayOf(VT.BOOL),
    LAYER_NORM_EPS: VT.FLOAT32,
    ROPE_SCALING_FINETUNED: VT.BOOL,
    MOE_LATENT_SIZE: VT.UINT32,
    RESIDUAL_SCALE: VT.FLOAT32,
}
