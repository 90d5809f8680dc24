"""The ``llama`` tier on targets of the target table: DFlash, DSpark and DFlash2 drafts converted for a Qwen3.5 target
(``Qwen3_5ForConditionalGeneration``: nested ``text_config``, M-RoPE, hybrid linear/full attention) and for a Ling-3
target (``BailingMoeV3ForCausalLM``: KDA linear attention, MLA, MoE) load in llama-server b11434 and
decode exactly what the target decodes alone; on a GLM-4.5 target (``Glm4MoeForCausalLM``) and a HunYuan-MoE target
llama-server b11434 aborts, because their graphs expose no layer inputs for the draft, and on a Qwen4-Exp target,
because its graph records hyper-connection-wide layer inputs (docs/targets.md).

The targets are tiny random models (seeded): made with transformers, or for Ling-3, which transformers 5 has no class
for, written as safetensors in the tensor names upstream's converter reads. They carry the Qwen3.5 tokenizer of
``tests/target_kit.py`` and are converted to GGUF by upstream's own ``convert_hf_to_gguf.py``. The drafts are the cases
of ``tests/target_drafts.py`` whose files ``tests/conversion/test_targets.py`` proves byte-identical to upstream's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draft_kit import Maker, Tensor, save_safetensors
from llama_support import PROMPT, Run, failing_log, run
from target_drafts import make_case
from target_kit import GLM_ADDED, QWEN35_VOCAB, qwen35_config, qwen35_tokenizer

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.fit.rules import check_fit
from dspark_convert.reference import open_gguf
from llama.families import hunyuan_moe, qwen4exp
from llama.target import convert_target


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


#: a tiny Ling-3 (``BailingMoeV3ForCausalLM``): KDA linear attention with full MLA attention every third layer (2, 5),
#: one dense lead layer then sigmoid-routed MoE with a shared expert; the switches upstream's converter requires
LING3_CONFIG = {
    "architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_moe_v3", "torch_dtype": "bfloat16",
    "vocab_size": QWEN35_VOCAB, "hidden_size": 64, "num_hidden_layers": 6, "layer_group_size": 3,
    "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 32, "short_conv_kernel_size": 4,
    "no_kda_lora": True, "kda_safe_gate": True, "kda_lower_bound": -5.0,
    "gated_attention_proj_granularity_type": "head_wise",
    "q_lora_rank": None, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "intermediate_size": 128, "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 32,
    "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 1, "first_k_dense_replace": 1,
    "score_function": "sigmoid", "routed_scaling_factor": 2.5, "norm_topk_prob": True,
    "num_nextn_predict_layers": 0, "rms_norm_eps": 1e-6, "rope_theta": 600000.0, "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def _ling3_weights(folder: Path) -> Path:
    """The checkpoint in the Ling tensor names upstream's ``BailingMoeV3Model`` and gguf-py's tensor map read
    (``model.word_embeddings``, ``attention.*`` with ``f_proj`` / ``g_proj`` / ``A_log`` / ``dt_bias`` / ``dense``,
    ``mlp.gate`` with ``expert_bias``, per-expert ``mlp.experts.E.*``, ``mlp.shared_experts.*``): transformers 5 has
    no BailingMoeV3 class, so the safetensors are written directly (seeded, BF16; the router bias F32)."""
    c = LING3_CONFIG
    h, nh, hd, v = c["hidden_size"], c["num_attention_heads"], c["head_dim"], c["vocab_size"]
    inner, conv, group = nh * hd, c["short_conv_kernel_size"], c["layer_group_size"]
    kv_rank, nope, rope, vd = c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    ff, eff, sff, ne = c["intermediate_size"], c["moe_intermediate_size"], c["moe_shared_expert_intermediate_size"], \
        c["num_experts"]
    m = Maker(32070, "BF16")
    t: dict[str, Tensor] = {"model.word_embeddings.weight": m.t(v, h, scale=1.0), "model.norm.weight": m.norm(h),
                            "lm_head.weight": m.t(v, h, scale=0.5)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = m.norm(h)
        t[p + "post_attention_layernorm.weight"] = m.norm(h)
        a = p + "attention."
        if (i + 1) % group == 0:  # full (MLA) attention, gate per head
            t.update({a + "q_proj.weight": m.t(nh * (nope + rope), h),
                      a + "kv_a_proj_with_mqa.weight": m.t(kv_rank + rope, h),
                      a + "kv_a_layernorm.weight": m.norm(kv_rank),
                      a + "kv_b_proj.weight": m.t(nh * (nope + vd), kv_rank),
                      a + "g_proj.weight": m.t(nh, h), a + "dense.weight": m.t(h, nh * vd)})
        else:  # KDA linear attention
            t.update({a + "q_proj.weight": m.t(inner, h), a + "k_proj.weight": m.t(inner, h),
                      a + "v_proj.weight": m.t(inner, h), a + "q_conv1d.weight": m.t(inner, 1, conv, scale=0.3),
                      a + "k_conv1d.weight": m.t(inner, 1, conv, scale=0.3),
                      a + "v_conv1d.weight": m.t(inner, 1, conv, scale=0.3), a + "f_proj.weight": m.t(inner, h),
                      a + "b_proj.weight": m.t(nh, h), a + "A_log": m.t(nh, scale=0.5), a + "dt_bias": m.t(inner),
                      a + "g_proj.weight": m.t(inner, h), a + "o_norm.weight": m.norm(hd),
                      a + "dense.weight": m.t(h, inner)})
        if i < c["first_k_dense_replace"]:
            t.update({p + "mlp.gate_proj.weight": m.t(ff, h), p + "mlp.up_proj.weight": m.t(ff, h),
                      p + "mlp.down_proj.weight": m.t(h, ff)})
            continue
        t[p + "mlp.gate.weight"] = m.t(ne, h, scale=0.5)
        t[p + "mlp.gate.expert_bias"] = ("F32", m.rng.standard_normal(ne, dtype="float32") * 0.01)
        for e in range(ne):
            q = f"{p}mlp.experts.{e}."
            t.update({q + "gate_proj.weight": m.t(eff, h), q + "up_proj.weight": m.t(eff, h),
                      q + "down_proj.weight": m.t(h, eff)})
        t.update({p + "mlp.shared_experts.gate_proj.weight": m.t(sff, h),
                  p + "mlp.shared_experts.up_proj.weight": m.t(sff, h),
                  p + "mlp.shared_experts.down_proj.weight": m.t(h, sff)})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(c, indent=1), encoding="utf-8")
    save_safetensors(folder / "model.safetensors", t)
    qwen35_tokenizer(folder)
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


@pytest.fixture(scope="module")
def ling3(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """(HF folder, BF16 GGUF by upstream's converter, plain greedy run) of the Ling-3 target."""
    out = tmp_path_factory.mktemp("llama-ling3")
    hf = _ling3_weights(out / "target")
    gguf = convert_target(llama_bin[1], hf, out / "target.bf16.gguf", outtype="bf16", pre="qwen35")
    g = open_gguf(gguf)
    assert g.value("general.architecture") == "bailingmoe3"
    assert list(g.value("bailingmoe3.attention.head_count_kv")) == [0, 0, 1, 0, 0, 1]  # KDA, KDA, MLA, ...
    return hf, gguf, run(llama_bin[0], gguf)


@pytest.mark.llama
@pytest.mark.parametrize("case", ["dspark-ling3", "dflash-ling3", "dflash2-ling3"])
def test_drafts_on_ling3_target_load_and_are_lossless(case: str, llama_bin: tuple[Path, Path],
                                                      ling3: tuple[Path, Path, Run], tmp_path: Path) -> None:
    """llama.cpp b11434's bailingmoe3 graph records ``t_layer_inp`` for every layer (KDA and MLA alike), so the
    DSpark, DFlash and DFlash2 drafts upstream would write for a Ling-3 target speculate on it: same tokens as the
    target alone."""
    hf, gguf, plain = ling3
    assert len(plain.completion.tokens) == 16
    draft, _ = make_case(tmp_path, case, tmp_path / "targets")
    conv = convert(draft, hf, tmp_path / f"{case}.bf16.gguf", outtype="bf16")
    assert conv.path is not None
    assert not [f for f in conv.findings if f.rule == "target-graph"]
    r = run(llama_bin[0], gguf, conv.path)
    c = r.completion
    print(f"{case}: drafted {c.draft_n}, accepted {c.draft_n_accepted}")
    assert c.draft_n > 0, f"{case}: llama-server reported no drafted tokens"
    assert 0 <= c.draft_n_accepted <= c.draft_n
    assert c.tokens == plain.completion.tokens, f"{case}: speculative output differs from plain greedy"


@pytest.mark.llama
def test_dflash_tapping_the_last_layer_of_ling3_aborts_and_check_says_so(llama_bin: tuple[Path, Path],
                                                                         ling3: tuple[Path, Path, Run],
                                                                         tmp_path: Path) -> None:
    """A DFlash draft whose taps include the target's last layer (GGUF tap 6 of a 6-layer target) asks llama.cpp for
    layer input ``n_layer``, which the bailingmoe3 graph does not record: llama-server b11434 aborts ("layer input
    tensor is null"). The conversion warns and ``check --target`` fails ``target-graph`` with the same reason."""
    hf, gguf, _ = ling3
    draft, _ = make_case(tmp_path, "dflash-ling3-last", tmp_path / "targets")
    conv = convert(draft, hf, tmp_path / "dflash-ling3-last.bf16.gguf", outtype="bf16")
    assert conv.path is not None
    assert list(open_gguf(conv.path).value("dflash.target_layers")) == [2, 4, 6]
    warned = [f.message for f in conv.findings if f.rule == "target-graph"]
    assert len(warned) == 1 and "taps the target's last layer output" in warned[0] and "bailingmoe3" in warned[0]
    rule = {r.id: r for r in check_fit(conv.path, gguf).results}["target-graph"]
    assert (rule.status, rule.details) == ("fail", {"last_layer_tap": 6})
    with pytest.raises(ConvertError, match=r"llama-server /completion failed|llama-server exited"):
        run(llama_bin[0], gguf, conv.path)


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


@pytest.mark.llama
def test_draft_on_hunyuan_moe_target_aborts_and_check_says_so(llama_bin: tuple[Path, Path], tmp_path: Path) -> None:
    """HunYuan-MoE (``HunYuanMoEV1ForCausalLM``): llama.cpp b11434's hunyuan-moe graph records no layer inputs, so a
    draft on it aborts on its first block, and ``check --target`` fails ``target-graph`` for it. (This target's own
    vocab method reads a tiktoken vocabulary through remote code in upstream's converter; the target here is written
    with the dense class's byte-level vocabulary instead, and the draft is the DSpark converted for the HunYuan dense
    target with the same tokenizer and special ids.) The target alone runs."""
    hf = hunyuan_moe(tmp_path / "target")
    gguf = convert_target(llama_bin[1], hf, tmp_path / "target.bf16.gguf", outtype="bf16", pre="qwen35",
                          vocab_of=("hunyuan", "HunYuanMoEModel", "HunYuanModel"))
    assert open_gguf(gguf).value("general.architecture") == "hunyuan-moe"
    assert len(run(llama_bin[0], gguf).completion.tokens) == 16
    draft, dense = make_case(tmp_path, "dspark-hunyuan", tmp_path / "targets")
    f = convert(draft, dense, tmp_path / "dspark-hunyuan.bf16.gguf", outtype="bf16").path
    assert f is not None
    rule = {r.id: r for r in check_fit(f, gguf).results}["target-graph"]
    assert (rule.status, rule.target) == ("fail", "hunyuan-moe")
    assert "hunyuan-moe graph records no layer inputs" in rule.message
    assert "layer input tensor is null" in failing_log(llama_bin[0], gguf, f)


@pytest.mark.llama
def test_dflash_on_qwen4exp_target_aborts_in_llama_server_b11434(llama_bin: tuple[Path, Path], tmp_path: Path) -> None:
    """The draft file is upstream's (test_targets.py) and the target runs alone; together llama-server b11434 aborts
    on the first draft block: its qwen4exp graph records the hyper-connection residual (``hc_count`` x hidden per
    token) as the layer input, and the copy into the draft's buffer asserts one hidden row per token. The
    conversion warns and ``check --target`` fails ``target-graph`` with that assert."""
    hf = qwen4exp(tmp_path / "target")
    gguf = convert_target(llama_bin[1], hf, tmp_path / "target.bf16.gguf", outtype="bf16", pre="qwen35",
                          extra=["--no-mtp"])
    g = open_gguf(gguf)
    assert (g.value("general.architecture"), g.value("qwen4exp.hyper_connection.count")) == ("qwen4exp", 2)
    assert len(run(llama_bin[0], gguf).completion.tokens) == 16
    draft, _ = make_case(tmp_path, "dflash-qwen4exp", tmp_path / "targets")
    conv = convert(draft, hf, tmp_path / "dflash-qwen4exp.bf16.gguf", outtype="bf16")
    assert conv.path is not None
    assert [f.message for f in conv.findings if f.rule == "target-graph"][0].endswith(
        'qwen4exp graph records its hyper-connection residual (hyper_connection.count x hidden values per token) as '
        'the layer inputs: llama-server aborts on the first draft block ("GGML_ASSERT(row_floats == '
        'model.hparams.n_embd) failed")')
    rule = {r.id: r for r in check_fit(conv.path, gguf).results}["target-graph"]
    assert (rule.status, rule.target) == ("fail", "qwen4exp") and "row_floats == model.hparams.n_embd" in rule.message
    assert "GGML_ASSERT(row_floats == model.hparams.n_embd) failed" in failing_log(llama_bin[0], gguf, conv.path)
