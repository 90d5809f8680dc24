"""Tiny random targets of the families whose llama.cpp b11434 graph records ``t_layer_inp``, for the ``llama`` tier.

Each maker writes a seeded BF16 model made with transformers (hidden 64 = the draft cases' hidden size of
``tests/target_drafts.py``) and the Qwen3.5 tokenizer of ``tests/target_kit.py`` (Gemma 4: the Gemma-style one of
``tests/gemma4_drafts.py``) into a folder, which upstream's own
``convert_hf_to_gguf.py`` turns into the target GGUF; DeepSeek-V4 and MiMo-V2 are written as their releases store
them by ``tests/mtp_makers.py``. :data:`FAMILIES` names each family's maker, the
GGUF architecture upstream writes and the draft cases run on it.

Example:
    >>> sorted(FAMILIES)[:3]
    ['deepseek4', 'gemma4', 'gpt-oss']
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from target_kit import QWEN35_VOCAB, qwen35_tokenizer

#: the gated DeltaNet sizes of the Qwen3.5-style families, and their interleaved M-RoPE over a quarter of the head
_LINEAR: dict[str, Any] = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                           "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4}
_MROPE: dict[str, Any] = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                          "mrope_section": [1, 1, 0], "mrope_interleaved": True}

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


def nemotron_h_dense(folder: Path) -> Path:
    """``NemotronHForCausalLM`` in the dense layout (Nemotron-H-8B's: Mamba-2, attention and ReLU² MLP layers, no
    experts; upstream's ``nemotron_h``). transformers 5 writes its MoE defaults and a ``layers_block_type`` list into
    the config; the file keeps the dense checkpoint's keys instead (``hybrid_override_pattern``, no expert keys), and
    the family converts it with ``raw_config``."""
    _save(folder, "NemotronHConfig", "NemotronHForCausalLM", 49, intermediate_size=128,
          layers_block_type=["mamba", "mlp", "attention", "mlp", "mamba", "mlp"], ssm_state_size=16,
          mamba_num_heads=8, mamba_head_dim=16, n_groups=2, conv_kernel=4, expand=2, chunk_size=16,
          num_nextn_predict_layers=0)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    moe = ("num_experts_per_tok", "n_routed_experts", "n_shared_experts", "moe_intermediate_size", "moe_latent_size",
           "moe_shared_expert_intermediate_size", "moe_shared_expert_overlap", "n_group", "topk_group",
           "routed_scaling_factor", "norm_topk_prob")
    config = {k: v for k, v in config.items() if k not in moe and k != "layers_block_type"}
    config.update(hybrid_override_pattern="M-*-M-", num_hidden_layers=6)  # M: Mamba-2, -: MLP, *: attention
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


def qwen35_moe(folder: Path) -> Path:
    """``Qwen3_5MoeForCausalLM``: gated DeltaNet layers with a gated full-attention layer last, MoE with a shared
    expert, interleaved M-RoPE over a quarter of the head."""
    return _save(folder, "Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", 50, moe_intermediate_size=32,
                 shared_expert_intermediate_size=32, num_hidden_layers=4,
                 layer_types=["linear_attention"] * 3 + ["full_attention"], **_LINEAR, num_experts=8,
                 num_experts_per_tok=2, rope_parameters=_MROPE)


def qwen4exp(folder: Path) -> Path:
    """``Qwen4ExpForCausalLM`` (upstream's ``qwen4exp``): Qwen3.5's gated DeltaNet and M-RoPE with 2
    hyper-connection streams in place of the layer norms and QSA sparse attention (indexer) on the full-attention
    layer; no PLE n-gram table. Its graph records the hyper-connection residual (2 x hidden per token) as the layer
    input, which llama.cpp b11434's layer-input copy refuses, so it is no :data:`FAMILIES` entry."""
    return _save(folder, "Qwen4ExpTextConfig", "Qwen4ExpForCausalLM", 51, moe_intermediate_size=32,
                 shared_expert_intermediate_size=32, num_hidden_layers=4,
                 layer_types=["linear_attention"] * 3 + ["full_attention"], **_LINEAR, num_experts=8,
                 num_experts_per_tok=2, hc_count=2, hc_lowrank=8, indexer_n_heads=2, indexer_kv_heads=1,
                 indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4, rope_parameters=_MROPE)


def hunyuan_dense(folder: Path) -> Path:
    """``HunYuanDenseV1ForCausalLM`` (tokenizer.json: upstream's byte-level branch of ``HunYuanModel.set_vocab``,
    eos = ``eod_token_id``)."""
    return _save(folder, "HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", 52, intermediate_size=128,
                 num_hidden_layers=6, eod_token_id=248046)


def hunyuan_moe(folder: Path) -> Path:
    """``HunYuanMoEV1ForCausalLM`` (Hunyuan-A13B's layout: 4 experts top-2 with a shared MLP in every layer; the
    per-layer lists ``moe_intermediate_size`` / ``moe_topk`` / ``num_shared_expert`` upstream's converter reads),
    with the special ids of ``tests/target_kit.py``'s HunYuan target (``eod_token_id``, no padding id, the eot of
    ``generation_config.json``). Its graph records no layer inputs (the table's ``layer_inputs``), so it is no
    :data:`FAMILIES` entry."""
    _save(folder, "HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM", 53, intermediate_size=32, num_hidden_layers=6,
          num_experts=4, moe_topk=2, eod_token_id=248046)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(moe_intermediate_size=[32] * 6, moe_topk=[2] * 6, num_shared_expert=[1] * 6, pad_token_id=-1)
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [248046, 248044]}), encoding="utf-8")
    return folder


def nanbeige(folder: Path) -> Path:
    """``NanbeigeForCausalLM``: a Llama layout under its own name (``num_loops`` absent: one pass)."""
    _save(folder, "LlamaConfig", "LlamaForCausalLM", 54, intermediate_size=128, num_hidden_layers=6)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(architectures=["NanbeigeForCausalLM"], model_type="nanbeige")
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


def minimax_01(folder: Path) -> Path:
    """``MiniMaxText01ForCausalLM`` in the released checkpoint's form: lightning (linear) attention in 7 layers and
    softmax attention in the 8th (the period llama.cpp assumes), 4 experts top-2 per layer, the ``layernorm_*``
    residual scales (1.0) and ``rotary_dim`` of its config, ``model.safetensors.index.json`` (upstream's converter
    reads the embedding through it), a ``chat_template.jinja`` (which its ``set_vocab`` prefers). The weights are
    transformers' ``MiniMaxForCausalLM`` without the decay buffers it stores."""
    import torch
    import transformers as tf
    from safetensors.torch import load_file, save_file

    config = tf.MiniMaxConfig(**{**_COMMON, "intermediate_size": 32, "num_hidden_layers": 8, "num_local_experts": 4,
                                 "num_experts_per_tok": 2, "block_size": 16,
                                 "layer_types": ["linear_attention"] * 7 + ["full_attention"]})
    torch.manual_seed(55)
    tf.MiniMaxForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    weights = {k: v for k, v in load_file(str(folder / "model.safetensors")).items()
               if not k.endswith(("_decay", ".slope_rate"))}
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": dict.fromkeys(sorted(weights), "model.safetensors")}),
        encoding="utf-8")
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    for k in [k for k in cfg if k == "layer_types" or k.endswith(("_alpha_factor", "_beta_factor"))]:
        del cfg[k]
    cfg.update(architectures=["MiniMaxText01ForCausalLM"], model_type="minimax_text_01", rotary_dim=16,
               attn_type_list=[0] * 7 + [1],
               **{f"layernorm_{n}_{ab}": 1.0 for n in ("full_attention", "linear_attention", "mlp")
                  for ab in ("alpha", "beta")})
    (folder / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    qwen35_tokenizer(folder)
    (folder / "chat_template.jinja").write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                                                "{% endfor %}", encoding="utf-8")
    return folder


def _qwen35_vocab(folder: Path) -> Path:
    """A checkpoint of ``tests/mtp_makers.py`` made with the Qwen3.5 vocabulary: its tokenizer and special ids."""
    qwen35_tokenizer(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update({k: _COMMON[k] for k in ("bos_token_id", "eos_token_id")})
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return folder


#: DeepSeek-V4's compressed-attention layers: compress ratio -> compressor width factor (upstream's ``coff``)
_DSV4_COMPRESSORS = {4: 2, 128: 1}


def deepseek4(folder: Path) -> Path:
    """``DeepseekV4ForCausalLM`` as released (FP8 / FP4 blocks, 4 hyper-connection streams, sharded, one MTP layer
    the target conversion drops): ``tests/mtp_makers.py``'s maker at hidden 64 with 4 trunk layers of compress
    ratios 0, 0, 4, 128 and the attention sizes of llama.cpp's own tiny DeepSeek-V4 (tests/test-llama-archs.cpp:
    heads of 64 with 32 rotary, q rank 64, output rank 32, indexer heads of 128), and the compressors (and, at ratio
    4, the lightning indexer) of those layers in one more shard, BF16 / F32. (llama.cpp b11434 divides by zero
    creating the KV cache of a model without a ratio-4 layer; with the maker's default attention sizes, heads of 96
    and indexer heads of 32, its graph fails a reshape assertion.)"""
    import mtp_makers
    import torch
    from safetensors.torch import save_file

    ratios = (0, 0, 4, 128)
    mtp_makers.make_deepseek4(folder, hidden=64, layers=len(ratios), head_dim=64, rope=32, q_lora=64, o_lora=32,
                              ratios=ratios, vocab=QWEN35_VOCAB)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(index_n_heads=4, index_head_dim=128)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    hidden, head, q_lora = config["hidden_size"], config["head_dim"], config["q_lora_rank"]
    n_idx, idx_dim = config["index_n_heads"], config["index_head_dim"]
    g = torch.Generator().manual_seed(56)

    def rnd(*shape: int, dtype: Any = torch.bfloat16, offset: float = 0.0) -> Any:
        return (torch.randn(*shape, generator=g) * 0.05 + offset).to(dtype)

    extra: dict[str, Any] = {}
    for i, ratio in enumerate(ratios):
        if not ratio:
            continue
        c, p = f"layers.{i}.attn.compressor.", f"layers.{i}.attn.indexer."
        width = _DSV4_COMPRESSORS[ratio] * head
        extra.update({c + "wkv.weight": rnd(width, hidden), c + "wgate.weight": rnd(width, hidden),
                      c + "ape": rnd(ratio, width, dtype=torch.float32), c + "norm.weight": rnd(head, offset=1.0)})
        if ratio == 4:
            extra.update({p + "wq_b.weight": rnd(n_idx * idx_dim, q_lora), p + "weights_proj.weight": rnd(n_idx, hidden),
                          p + "compressor.wkv.weight": rnd(2 * idx_dim, hidden),
                          p + "compressor.wgate.weight": rnd(2 * idx_dim, hidden),
                          p + "compressor.ape": rnd(ratio, 2 * idx_dim, dtype=torch.float32),
                          p + "compressor.norm.weight": rnd(idx_dim, offset=1.0)})
    save_file(extra, str(folder / "model-compressors.safetensors"), metadata={"format": "pt"})
    index = json.loads((folder / "model.safetensors.index.json").read_text(encoding="utf-8"))
    index["weight_map"].update(dict.fromkeys(extra, "model-compressors.safetensors"))
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2), encoding="utf-8")
    return _qwen35_vocab(folder)


def mimo2(folder: Path) -> Path:
    """``MiMoV2FlashForCausalLM`` as released (FP8 tiles, a global dense layer and a sliding-window MoE layer with
    sinks, three MTP layers the target conversion drops): ``tests/mtp_makers.py``'s maker at hidden 64. Its
    ``model_type`` has no config class in b11434's pinned transformers, so upstream reads the config raw."""
    import mtp_makers

    return _qwen35_vocab(mtp_makers.make_mimo2(folder, hidden=64, vocab=QWEN35_VOCAB))


@dataclass(frozen=True)
class Family:
    """A target family: its maker, the GGUF architecture upstream writes for it, the draft cases run on it."""

    make: Callable[[Path], Path]
    arch: str
    cases: tuple[str, ...]
    extra: tuple[str, ...] = ()  # more options of upstream's convert_hf_to_gguf.py
    prompt: tuple[int, ...] | None = None  # token ids (None: llama_support.PROMPT, ids of the Qwen3.5 vocabulary)
    raw_config: bool = False  # upstream reads config.json raw (llama.target.convert_target)


FAMILIES: dict[str, Family] = {
    "llama3": Family(llama3, "llama", ("dflash2-llama3",)),
    "qwen3-moe": Family(qwen3_moe, "qwen3moe", ("dflash-qwen3-moe",)),
    "qwen3-next": Family(qwen3_next, "qwen3next", ("dspark-qwen3-next",), ("--no-mtp",)),
    "gpt-oss": Family(gpt_oss, "gpt-oss", ("dflash-gpt-oss",)),
    "minimax-m2": Family(minimax_m2, "minimax-m2", ("dspark-minimax-m2",)),
    "lfm2": Family(lfm2, "lfm2", ("dflash-lfm2",)),
    "gemma4": Family(gemma4, "gemma4", ("dflash-gemma4",), prompt=(2, 300, 280, 290, 271, 285, 299, 277)),
    "nemotron-h": Family(nemotron_h, "nemotron_h_moe", ("dflash-nemotron-h",)),
    "nemotron-h-dense": Family(nemotron_h_dense, "nemotron_h", ("dflash-nemotron-h",), raw_config=True),
    "qwen35-moe": Family(qwen35_moe, "qwen35moe", ("dspark-qwen35-moe",), ("--no-mtp",)),
    "minimax-01": Family(minimax_01, "minimax-01", ("dflash-minimax",)),
    "deepseek4": Family(deepseek4, "deepseek4", ("dflash-deepseek4",), ("--no-mtp",)),
    "mimo2": Family(mimo2, "mimo2", ("dspark-mimo2",), ("--no-mtp",), raw_config=True),
    "nanbeige": Family(nanbeige, "nanbeige", ("dflash2-nanbeige",)),
    "hunyuan-dense": Family(hunyuan_dense, "hunyuan-dense", ("dspark-hunyuan",)),
}
