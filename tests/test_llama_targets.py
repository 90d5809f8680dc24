"""The ``llama`` tier on targets of the target table: DFlash, DSpark and DFlash2 drafts converted for a Qwen3.5 target
(``Qwen3_5ForConditionalGeneration``: nested ``text_config``, M-RoPE, hybrid linear/full attention) load in
llama-server b11434 and decode exactly what the target decodes alone; on a GLM-4.5 target (``Glm4MoeForCausalLM``)
llama-server b11434 aborts, because its glm4moe graph exposes no layer inputs for the draft (docs/targets.md).

The targets are tiny random models made with transformers (seeded), carrying the Qwen3.5 tokenizer of
``tests/target_kit.py``, and converted to GGUF by upstream's own ``convert_hf_to_gguf.py``. The drafts are the cases of
``tests/target_drafts.py`` whose files ``tests/test_targets.py`` proves byte-identical to upstream's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama.target import convert_target
from llama_support import PROMPT, Run, run
from target_drafts import make_case
from target_kit import GLM_ADDED, qwen35_config, qwen35_tokenizer

from dspark_convert import convert
from dspark_convert.errors import ConvertError


def _qwen35_weights(folder: Path) -> Path:
    import torch
    import transformers as tf

    text = qwen35_config("Qwen3_5ForConditionalGeneration")["text_config"]
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3}
    torch.manual_seed(0)
    config = tf.Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    tf.Qwen3_5ForConditionalGeneration(config).to(torch.bfloat16).save_pretrained(folder)
    qwen35_tokenizer(folder)
    return folder


def _glm_weights(folder: Path) -> Path:
    import torch
    import transformers as tf

    config = tf.Glm4MoeConfig(vocab_size=248320, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                              num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                              n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1, n_shared_experts=1,
                              partial_rotary_factor=0.5, num_nextn_predict_layers=0, tie_word_embeddings=False,
                              max_position_embeddings=4096, use_qk_norm=True)
    torch.manual_seed(1)
    tf.Glm4MoeForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    qwen35_tokenizer(folder, extra=GLM_ADDED, eos_token="<|endoftext|>", chat_template=None)
    return folder


@pytest.fixture(scope="module")
def qwen35(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """(HF folder, BF16 GGUF by upstream's converter, plain greedy run) of the Qwen3.5 target."""
    out = tmp_path_factory.mktemp("llama-qwen35")
    hf = _qwen35_weights(out / "target")
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    gguf = convert_target(llama_bin[1], hf, out / "target.bf16.gguf", outtype="bf16", pre="qwen35",
                          extra=["--no-mtp"])
    return hf, gguf, run(llama_bin[0], gguf)


@pytest.mark.llama
@pytest.mark.parametrize("case", ["dflash-qwen35", "dspark-qwen35", "dflash2-qwen35"])
def test_drafts_on_qwen35_load_and_are_lossless(case: str, llama_bin: tuple[Path, Path],
                                                qwen35: tuple[Path, Path, Run], tmp_path: Path) -> None:
    hf, gguf, plain = qwen35
    draft, _ = make_case(tmp_path, case, tmp_path / "targets")
    f = convert(draft, hf, tmp_path / f"{case}.bf16.gguf", outtype="bf16").path
    r = run(llama_bin[0], gguf, f)
    assert len(plain.completion.tokens) == 16
    assert r.completion.draft_n > 0, f"{case}: llama-server reported no drafted tokens"
    assert r.completion.tokens == plain.completion.tokens, f"{case}: speculative output differs from plain greedy"


@pytest.mark.llama
def test_dflash_on_glm4moe_target_aborts_in_llama_server_b11434(llama_bin: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    """The draft file is upstream's (test_targets.py) and the target runs alone; together llama-server b11434 stops
    with "layer input tensor is null": its glm4moe graph does not record the layer inputs a DFlash draft reads."""
    hf = _glm_weights(tmp_path / "target")
    gguf = convert_target(llama_bin[1], hf, tmp_path / "target.bf16.gguf", outtype="bf16", pre="qwen35")
    plain = run(llama_bin[0], gguf)
    assert len(plain.completion.tokens) == 16
    draft, _ = make_case(tmp_path, "dflash-glm4-moe", tmp_path / "targets")
    f = convert(draft, hf, tmp_path / "dflash-glm4-moe.bf16.gguf", outtype="bf16").path
    with pytest.raises(ConvertError, match=r"llama-server /completion failed|llama-server exited"):
        run(llama_bin[0], gguf, f, prompt=PROMPT)
