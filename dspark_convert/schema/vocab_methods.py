"""Upstream llama.cpp's vocab methods (the ``set_vocab`` a target class runs, as the target table names them) and
the tokenizer handler of ``tokenizer/handlers.py`` that reproduces each (data only; ``tokenizer/targets.py`` reads it).
A method not listed is refused for a target in one line naming it.
"""

from __future__ import annotations

__all__ = ["VOCAB_METHOD_HANDLERS", "VOCAB_METHODS_NOT_REPRODUCED"]

#: upstream vocab method -> handler name
VOCAB_METHOD_HANDLERS: dict[str, str] = {
    "_set_vocab_gpt2": "gpt2",
    "_set_vocab_sentencepiece": "spm",
    "_set_vocab_glm": "glm",
    "Qwen2Model.set_vocab": "qwen",  # SentencePiece when tokenizer.model exists, else byte-level BPE
    "Qwen2VLModel.set_vocab": "qwen",
    "Qwen3Model.set_vocab": "qwen",  # its InternS1 branch tests the draft's own architecture: never taken
    "Qwen3MoeModel.set_vocab": "gpt2",  # the same InternS1 test, then TextModel.set_vocab
    "DeepseekModel.set_vocab": "qwen",
    "DreamModel.set_vocab": "qwen",
    "StableLMModel.set_vocab": "stablelm",
    "DeepseekV2Model.set_vocab": "gpt2_or_kimi",  # tokenizer.json, else Kimi's tiktoken.model read as data
    "DeepseekV32Model.set_vocab": "gpt2_assert_bos",
    "LlamaModel.set_vocab": "llama",
    "GemmaModel.set_vocab": "gemma",
    "Gemma2Model.set_vocab": "gemma2",
    "Gemma3Model.set_vocab": "gemma3",
    "Gemma4Model.set_vocab": "gemma4",
    "NemotronHModel.set_vocab": "nemotron_h",
    "Phi3MiniModel.set_vocab": "phi3",
    "Glm4Model.set_vocab": "glm4",
    "SolarOpenModel.set_vocab": "solar_open",
    "Dots3NoteModel.set_vocab": "dots3",
    "Exaone4Model.set_vocab": "gpt2",  # get_vocab_base + SpecialVocab(load_merges): _set_vocab_gpt2's body
    "LLaDAModel.set_vocab": "llada",
    "Qwen3OmniMoeTextModel.set_vocab": "qwen3_omni",
    "Ernie4_5Model.set_vocab": "spm_prefix",
    "PanguEmbeddedModel.set_vocab": "spm_prefix",
    "NemotronModel.set_vocab": "nemotron",
    "MuseGlimmerModel.set_vocab": "muse",
    "LagunaModel.set_vocab": "laguna",
    "GrokModel.set_vocab": "grok",
    "JambaModel.set_vocab": "jamba",
    "DeciModel.set_vocab": "deci",
    "MPTModel.set_vocab": "mpt",
    "OpenELMModel.set_vocab": "openelm",  # its builtin llama-spm fallback is refused
    "MambaModel.set_vocab": "mamba",  # its builtin gpt-neox fallback is refused
    "Mamba2Model.set_vocab": "mamba2",  # likewise; tokenizer.model.v3 stops upstream
    "InternLM2Model.set_vocab": "internlm2",
    "InternLM3Model.set_vocab": "internlm3",
    "ArcticModel.set_vocab": "arctic",
    "XverseModel.set_vocab": "xverse",
    "ChatGLMModel.set_vocab": "chatglm",  # its ChatGLM3 and remote-code branches are refused
    "HunYuanModel.set_vocab": "hunyuan",  # its tiktoken (remote code) branch is refused
    "MiniMaxText01Model.set_vocab": "minimax01",  # needs the target's chat_template.jinja (else a file of upstream)
    "KimiLinearModel.set_vocab": "gpt2_or_kimi",  # tokenizer.json, else tiktoken.model read as data
    "KimiK3Model.set_vocab": "kimi_k3",
    "_set_vocab_plamo": "plamo",
    "Plamo3Model.set_vocab": "plamo3",
    "_set_vocab_qwen": "qwen_tiktoken",  # qwen.tiktoken read as data, tokenization_qwen.py's special tokens
    "HunYuanMoEModel.set_vocab": "hunyuan_moe",  # hy.tiktoken read as data, tokenization_hy.py's special tokens
    "_set_vocab_rwkv_world": "rwkv_world",  # needs a target chat template (else a file of upstream)
    "RWKV6Qwen2Model.set_vocab": "qwen",  # SentencePiece when tokenizer.model exists, else byte-level BPE
    "ARwkv7Model.set_vocab": "qwen",
}

#: upstream vocab methods not reproduced, with why (the refusal names it)
VOCAB_METHODS_NOT_REPRODUCED: dict[str, str] = {}
