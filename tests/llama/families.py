"""Tiny random targets of the families whose llama.cpp b11434 graph records ``t_layer_inp``, for the ``llama`` tier.

Each maker writes a seeded BF16 model made with transformers (hidden 64 = the draft cases' hidden size of
``tests/target_drafts.py``) and the Qwen3.5 tokenizer of ``tests/target_kit.py`` (Gemma 4: the Gemma-style one of
``tests/gemma4_drafts.py``) into a folder, which upstream's own
``convert_hf_to_gguf.py`` turns into the target GGUF. :data:`FAMILIES` names each family's maker, the GGUF
architecture upstream writes and the draft cases run on it.

Example:
    >>> sorted(FAMILIES)[:3]
    ['gemma4', 'gpt-oss', 'lfm2']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from target_kit import QWEN35_VOCAB, qwen35_tokenizer

#: the sizes every family shares: the draft cases' hidden size, 4 query heads of 16, 2 KV heads
_COMMON: dict[str, Any] = {"vocab_size": QWEN35_VOCAB, "hidden_size": 64, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096,
                           "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": 248046,
                           "pad_token_id": None}


def _save(folder: Path, config_class: str, model_class: str, seed: int, **kwargs: Any) -> Path:
    import torch
    import transformers as tf

    config = getattr(tf, config_class)(**{**_COMMON, **kwargs})
    torch.manual_seed(seed)
    getattr(tf, model_class)(config).to(torch.bfloat16).save_pretrained(folder)
    qwen35_tokenizer(folder)
    return folder


def llama3(folder: Path) -> Path:
    """``LlamaForCausalLM`` with Llama-3's RoPE scaling (tokenizer.json only: upstream's Llama-3 byte-level path)."""
    return _save(folder, "LlamaConfig", "LlamaForCausalLM", 41, intermediate_size=128, num_hidden_layers=6,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 2048})


def qwen3_moe(folder: Path) -> Path:
    """``Qwen3MoeForCausalLM`` (Qwen3-30B-A3B's layout): QK-norm attention, 8 experts top-2 in every layer."""
    return _save(folder, "Qwen3MoeConfig", "Qwen3MoeForCausalLM", 42, intermediate_size=128,
                 moe_intermediate_size=32, num_hidden_layers=6, num_experts=8, num_experts_per_tok=2,
                 decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)


def qwen3_next(folder: Path) -> Path:
    """``Qwen3NextForCausalLM``: gated DeltaNet linear attention with a gated full-attention layer every 4th, MoE with
    a shared expert."""
    return _save(folder, "Qwen3NextConfig", "Qwen3NextForCausalLM", 43, intermediate_size=128,
                 moe_intermediate_size=32, shared_expert_intermediate_size=32, num_hidden_layers=8,
                 layer_types=["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(8)],
                 linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                 linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25})


def gpt_oss(folder: Path) -> Path:
    """``GptOssForCausalLM``: alternating sliding / full attention with sinks, 4 experts top-2 (BF16, not MXFP4)."""
    return _save(folder, "GptOssConfig", "GptOssForCausalLM", 44, intermediate_size=64, num_hidden_layers=6,
                 num_local_experts=4, num_experts_per_tok=2, sliding_window=32,
                 layer_types=["sliding_attention", "full_attention"] * 3)


def minimax_m2(folder: Path) -> Path:
    """``MiniMaxM2ForCausalLM``: per-layer QK-norm, partial rotary (``rotary_dim``), sigmoid-routed experts."""
    return _save(folder, "MiniMaxM2Config", "MiniMaxM2ForCausalLM", 45, intermediate_size=32, num_hidden_layers=6,
                 num_local_experts=8, num_experts_per_tok=2, rotary_dim=8, use_qk_norm=True,
                 qk_norm_type="per_layer", scoring_func="sigmoid", use_routing_bias=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5})


def lfm2(folder: Path) -> Path:
    """``Lfm2ForCausalLM``: short gated convolutions with full attention at layers 2 and 5."""
    return _save(folder, "Lfm2Config", "Lfm2ForCausalLM", 46, intermediate_size=128, num_hidden_layers=6,
                 layer_types=["conv", "conv", "full_attention", "conv", "conv", "full_attention"], conv_L_cache=3,
                 block_auto_adjust_ff_dim=False)


def nemotron_h(folder: Path) -> Path:
    """``NemotronHForCausalLM`` in Nemotron-3-Nano's layout (upstream's ``nemotron_h_moe``: the config names
    ``num_experts_per_tok``): Mamba-2 layers, one attention layer, sigmoid-routed MoE layers with a shared expert."""
    return _save(folder, "NemotronHConfig", "NemotronHForCausalLM", 47, intermediate_size=128,
                 layers_block_type=["mamba", "moe", "attention", "mamba", "moe", "mamba"], ssm_state_size=16,
                 mamba_num_heads=8, mamba_head_dim=16, n_groups=2, conv_kernel=4, expand=2, chunk_size=16,
                 n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
                 moe_shared_expert_intermediate_size=32, n_group=1, topk_group=1, num_nextn_predict_layers=0)


def gemma4(folder: Path) -> Path:
    """``Gemma4ForCausalLM``: sliding and full layers (K-as-V, proportional RoPE on the full ones), sandwich norms,
    embedding scale, logit softcap, tied head; the small Gemma-style tokenizer of ``tests/gemma4_drafts.py``
    (upstream's ``Gemma4Model.set_vocab``)."""
    import json

    import torch
    from gemma4_drafts import N_TOKENS, gemma_tokenizer
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM

    cfg = Gemma4TextConfig(
        vocab_size=N_TOKENS, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=4096, rms_norm_eps=1e-6, sliding_window=512,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2, final_logit_softcapping=30.0,
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, tie_word_embeddings=True, bos_token_id=2,
        eos_token_id=1, pad_token_id=0,
        rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                            "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    torch.manual_seed(48)
    Gemma4ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(folder)
    tok, tok_cfg = gemma_tokenizer()
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg), encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Family:
    """A target family: its maker, the GGUF architecture upstream writes for it, the draft cases run on it."""

    make: Callable[[Path], Path]
    arch: str
    cases: tuple[str, ...]
    extra: tuple[str, ...] = ()  # more options of upstream's convert_hf_to_gguf.py
    prompt: tuple[int, ...] | None = None  # token ids (None: llama_support.PROMPT, ids of the Qwen3.5 vocabulary)


FAMILIES: dict[str, Family] = {
    "llama3": Family(llama3, "llama", ("dflash2-llama3",)),
    "qwen3-moe": Family(qwen3_moe, "qwen3moe", ("dflash-qwen3-moe",)),
    "qwen3-next": Family(qwen3_next, "qwen3next", ("dspark-qwen3-next",), ("--no-mtp",)),
    "gpt-oss": Family(gpt_oss, "gpt-oss", ("dflash-gpt-oss",)),
    "minimax-m2": Family(minimax_m2, "minimax-m2", ("dspark-minimax-m2",)),
    "lfm2": Family(lfm2, "lfm2", ("dflash-lfm2",)),
    "gemma4": Family(gemma4, "gemma4", ("dflash-gemma4",), prompt=(2, 300, 280, 290, 271, 285, 299, 277)),
    "nemotron-h": Family(nemotron_h, "nemotron_h_moe", ("dflash-nemotron-h",)),
}
