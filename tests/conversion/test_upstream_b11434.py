"""What upstream llama.cpp b11434 writes for the DFlash lineage that 749f688 did not (spec/upstream-b11434.md §2.2,
§2.3, §2.7), one test per behaviour, on small edits of the committed fixtures; and our default where upstream's
layout drafts wrongly (an untied target's head, ``variants.dflash.lineage.choose_head_layout``).

Plans come from dry runs (the keys and tensors the file would hold, in file order); the byte checks convert.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bad_inputs_kit import copy_fixture, drop_tensor, edit_config, get_tensor, read_config, set_tensor, write_tensors
from conftest import FIXTURES, TARGET

from dspark_convert import convert
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.kit.hparams import HParams, target_text_architecture, target_ties_embeddings, target_uses_mrope
from dspark_convert.plan import Plan


def plan_of(draft: Path, tmp: Path, target: Path = TARGET, **kw: Any) -> Plan:
    return convert(draft, target, tmp / "dry.gguf", outtype="f32", dry_run=True, **kw).plan


def family_keys(plan: Plan) -> list[str]:
    """The keys after ``general.file_type`` and before the tokenizer block, in file order."""
    names = [k.name for k in plan.kvs]
    return [n for n in names[names.index("general.file_type") + 1:] if not n.startswith(("tokenizer.", "general."))]


def tied_target(tmp: Path) -> Path:
    t = tmp / "target-tied"
    shutil.copytree(TARGET, t)
    edit_config(t, tie_word_embeddings=True)
    return t


# ---------------------------------------------------------------------------------------------- DSpark heads
def test_has_confidence_head_follows_the_checkpoint(tmp_path: Path) -> None:
    plan = plan_of(FIXTURES / "dspark-qwen3", tmp_path)
    assert plan.value("dflash.has_confidence_head") is True
    assert family_keys(plan)[-2:] == ["dflash.sample_from_anchor", "dflash.has_confidence_head"]
    d = copy_fixture(tmp_path, "dspark-qwen3")
    drop_tensor(d, "confidence_head.proj.weight")
    drop_tensor(d, "confidence_head.proj.bias")
    plan = plan_of(d, tmp_path)  # b10705+: the loader makes conf_proj optional, the runtime reads this flag
    assert plan.value("dflash.has_confidence_head") is False
    assert plan.tensor("markov_w1.weight") is not None and plan.tensor("conf_proj.weight") is None


def test_match_upstream_keeps_embed_tokens_and_drops_lm_head(tmp_path: Path) -> None:
    plan = plan_of(FIXTURES / "dspark-qwen3", tmp_path, match_upstream=True)
    names = [t.name for t in plan.tensors]
    assert "token_embd.weight" in names and "output.weight" not in names
    assert names.index("token_embd.weight") == 2  # source order: after conf_proj.bias, conf_proj.weight


def test_default_adds_the_drafts_head_on_an_untied_target(tmp_path: Path) -> None:
    out = tmp_path / "d.gguf"
    r = convert(FIXTURES / "dspark-qwen3", TARGET, out, outtype="f32")
    up = convert(FIXTURES / "dspark-qwen3", TARGET, tmp_path / "u.gguf", outtype="f32", match_upstream=True)
    assert [t.name for t in r.plan.tensors if t.name != "output.weight"] == [t.name for t in up.plan.tensors]
    assert any("output.weight kept from the draft's lm_head" in n for n in r.notes)
    f = read_gguf(out)
    _, head = get_tensor(FIXTURES / "dspark-qwen3", "lm_head.weight")  # BF16 bits
    want = (head.astype(np.uint32) << 16).view(np.float32)
    assert np.frombuffer(bytes(f.tensor_bytes("output.weight")), np.float32).tolist() == want.ravel().tolist()
    f.close()


def test_default_takes_the_targets_head_when_the_draft_has_none(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dspark-qwen3")
    drop_tensor(d, "lm_head.weight")
    out = tmp_path / "d.gguf"
    r = convert(d, TARGET, out, outtype="f32")
    t = r.plan.tensor("output.weight")
    assert t is not None and (t.origin, t.source) == ("target", "lm_head.weight")
    f = read_gguf(out)
    _, head = get_tensor(TARGET, "lm_head.weight")
    got = np.frombuffer(bytes(f.tensor_bytes("output.weight")), np.float32)
    assert got.tolist() == (head.astype(np.uint32) << 16).view(np.float32).ravel().tolist()
    f.close()
    assert plan_of(d, tmp_path, match_upstream=True).tensor("output.weight") is None


def test_tied_target_keeps_upstreams_layout(tmp_path: Path) -> None:
    plan = plan_of(FIXTURES / "dspark-qwen3", tmp_path, target=tied_target(tmp_path))
    names = [t.name for t in plan.tensors]
    assert "token_embd.weight" in names and "output.weight" not in names
    assert target_ties_embeddings({"architectures": ["Gemma3ForCausalLM"]})
    assert not target_ties_embeddings({"architectures": ["Qwen3ForCausalLM"]})
    assert target_ties_embeddings({"text_config": {"tie_word_embeddings": True}, "tie_word_embeddings": False})


def test_reduced_vocabulary_keeps_both(tmp_path: Path) -> None:
    for kw in ({}, {"match_upstream": True}):
        names = [t.name for t in plan_of(FIXTURES / "dspark-reduced", tmp_path, **kw).tensors]
        assert "token_embd.weight" in names and "output.weight" in names and names[-1] == "d2t"


# ---------------------------------------------------------------------------------------------- keys
def test_block_size_from_dflash_config_first(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    cfg = read_config(d)
    edit_config(d, block_size=9, dflash_config={**cfg["dflash_config"], "block_size": 5})
    assert plan_of(d, tmp_path).value("dflash.block_size") == 5
    edit_config(d, dflash_config=cfg["dflash_config"])
    assert plan_of(d, tmp_path).value("dflash.block_size") == 9


@pytest.mark.parametrize("top, nested, want", [(None, True, True), (None, False, False), (False, True, False),
                                               (None, None, None)])
def test_attention_causal(tmp_path: Path, top: bool | None, nested: bool | None, want: bool | None) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    dc = dict(read_config(d)["dflash_config"])
    if nested is not None:
        dc["causal"] = nested
    edit_config(d, dflash_config=dc, **({} if top is None else {"is_causal": top}))
    kv = plan_of(d, tmp_path).kv("dflash.attention.causal")
    assert (kv.value if kv else None) is want
    if kv is not None:
        assert kv.type.name == "BOOL"


def test_swa_from_dflash_config(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    dc = read_config(d)["dflash_config"]
    edit_config(d, dflash_config={**dc, "use_swa": True, "swa_window_size": 48})  # no layer_types needed
    plan = plan_of(d, tmp_path)
    assert plan.value("dflash.attention.sliding_window") == 48
    assert plan.value("dflash.attention.sliding_window_pattern") == [True, True]


def test_partial_rotary_and_value_scale_in_upstreams_order(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    dc = read_config(d)["dflash_config"]
    edit_config(d, partial_rotary_factor=0.5, dflash_config={**dc, "attention_value_scale": 0.25})
    plan = plan_of(d, tmp_path)
    assert plan.value("dflash.rope.dimension_count") == 8  # head_dim 16 x 0.5
    assert plan.value("dflash.attention.value_scale") == 0.25
    assert family_keys(plan)[:3] == ["dflash.rope.dimension_count", "dflash.attention.value_scale", "dflash.block_size"]


def test_top_level_target_layer_ids(tmp_path: Path) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    dc = {k: v for k, v in read_config(d)["dflash_config"].items() if k != "target_layer_ids"}
    edit_config(d, dflash_config=dc, target_layer_ids=[0, 3, 4])
    assert plan_of(d, tmp_path).value("dflash.target_layers") == [1, 4, 5]


def test_mrope_target_gets_degenerate_sections(tmp_path: Path) -> None:
    t = tmp_path / "target-mrope"
    shutil.copytree(TARGET, t)
    cfg = read_config(t)
    edit_config(t, text_config={"rope_parameters": {"rope_theta": 1e6, "mrope_section": [8, 4, 4]}},
                architectures=cfg["architectures"])
    plan = plan_of(FIXTURES / "dflash-zlab", tmp_path, target=t)
    assert plan.value("dflash.rope.dimension_sections") == [8, 0, 0, 0]  # head_dim 16 / 2
    assert family_keys(plan)[-1] == "dflash.rope.dimension_sections"
    assert plan_of(FIXTURES / "dflash-zlab", tmp_path).kv("dflash.rope.dimension_sections") is None
    assert target_uses_mrope({"rope_scaling": {"mrope_section": [1]}})


def test_gemma_target_embedding_scale_and_text_architecture(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from dspark_convert.variants.dflash.lineage import embedding_scale

    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "text_config": {"hidden_size": 64}}
    ctx: Any = SimpleNamespace(target_config=cfg, target_dir=tmp_path, where="config.json")
    assert embedding_scale(ctx, HParams({}), {}) == 8.0  # sqrt(target hidden_size), from the text config
    assert embedding_scale(ctx, HParams({"input_embedding_scale": 2.0}), {}) == 2.0  # the draft's own scale wins
    ctx.target_config = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64}
    assert embedding_scale(ctx, HParams({}), {}) is None
    assert target_text_architecture({"architectures": ["X"], "text_config": {"architectures": ["GemmaText"]}}) == "GemmaText"


# ---------------------------------------------------------------------------------------------- tensors
@pytest.mark.parametrize("hf", ["layers.0.self_attn.sinks", "layers.0.self_attn.attention_sink_bias",
                                "model.layers.0.self_attn.learnable_sink_param"])
def test_sink_names_get_weight(tmp_path: Path, hf: str) -> None:
    d = copy_fixture(tmp_path, "dflash-zlab")
    set_tensor(d, hf, "F32", np.arange(4, dtype=np.float32))
    t = plan_of(d, tmp_path).tensor("blk.0.attn_sinks.weight")
    assert t is not None and t.shape == (4,) and t.ggml_type.name == "F32" and t.source == hf


def test_dflash_interleaved_rope_is_permuted_once(tmp_path: Path) -> None:
    from test_convert_fixtures import neox_from_interleaved

    d = copy_fixture(tmp_path, "dflash-zlab")
    edit_config(d, rope_is_neox_style=False)
    out = tmp_path / "i.gguf"
    convert(d, TARGET, out, outtype="f32")
    f = read_gguf(out)
    for hf, g in (("layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"),
                  ("layers.1.self_attn.k_norm.weight", "blk.1.attn_k_norm.weight")):
        _, w = get_tensor(d, hf)
        x = (w.astype(np.uint32) << 16).view(np.float32) if w.dtype == np.uint16 else w.astype(np.float32)
        got = np.frombuffer(bytes(f.tensor_bytes(g)), np.float32).reshape(x.shape)
        assert np.array_equal(got, neox_from_interleaved(x, 16)) and not np.array_equal(got, x)
    f.close()


def test_dsv4_drops_bias_vl(tmp_path: Path) -> None:
    """DeepSeek-V4-Flash-Vision-Exp's ``mtp.N.ffn.gate.bias_vl`` is not part of the draft (b10786+); the root
    ``aligner.*`` / ``image_*`` tensors are never read."""
    import make_golden

    args = ["dsv4", str(tmp_path), "--name", "v", "--vocab", "1024", "--noise-token", "1016", "--tokenizer-dir",
            str(TARGET), "--hidden", "192", "--stages", "1", "--experts", "1", "--hc", "2", "--moe", "64",
            "--q-lora", "96", "--taps", "1", "--main-shards", "1", "--markov-rank", "16"]
    assert make_golden.main(args) == 0
    ck = tmp_path / "v"
    convert(ck, None, tmp_path / "plain.gguf")
    index = json.loads((ck / "model.safetensors.index.json").read_text())
    extra = {"mtp.0.ffn.gate.bias_vl": ("F32", np.ones(4, np.float32)), "aligner.fc.weight": ("F32", np.ones((2, 2), np.float32)),
             "image_newline": ("F32", np.ones(4, np.float32))}
    write_tensors(ck / "model-vl.safetensors", extra)
    index["weight_map"].update({name: "model-vl.safetensors" for name in extra})
    (ck / "model.safetensors.index.json").write_text(json.dumps(index))
    convert(ck, None, tmp_path / "vl.gguf")  # without the filter: "not part of a DeepSeek-V4 DSpark draft"
    assert (tmp_path / "vl.gguf").read_bytes() == (tmp_path / "plain.gguf").read_bytes()
