"""DeepSeek-V3.2 MTP sidecars from the checkpoint (``hf2gguf DEEPSEEK_V32_CHECKPOINT --mtp``, upstream's
``DeepseekV32Model``, GGUF architecture ``deepseek32``: MLA attention with the DSA indexer, as GLM-5's): byte parity
with upstream b11434's ``convert_hf_to_gguf.py --mtp`` at bf16, f16, f32 and q8_0 on four tiny checkpoints of
tests/mtp_makers.py (a BF16 one; an F16 one with other dimensions, YaRN rope scaling and tied embeddings; and two
stored as the release is, block-scaled FP8 linears with float32 ``weight_scale_inv``: 128 x 128 blocks with the NextN
layer in its own shard and a config leaving keys to ``DeepseekV32Config``'s defaults, and 32 x 64 blocks with two NextN
layers, written only with ``--match-upstream``), the loader rules ``check`` applies, the one-line refusals, the shards
read, ``verify``, and (``llama`` tier) speculative greedy == plain greedy in llama-server.

The oracle manifests are ``tests/data/mtp/<family>-<outtype>-mtp.json``: upstream's own ``--mtp`` files of the same
checkpoints, every KV (``general.*`` included) and every tensor's bytes (regenerate with the command in
tests/mtp_makers.py's docstring). Upstream's converter is not run here. Upstream's ``DeepseekV32Model.set_vocab``
asserts that transformers' tokenizer adds BOS, which transformers 5 denies every byte-level tokenizer (upstream stops
on the released checkpoint); the manifests were made past that check (tests/mtp_makers.py's ``_BOOT``), the
vocabulary path dspark-convert takes with its ``upstream-stops`` note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mtp_family_kit import (
    OUTTYPES,
    assert_cli_writes_the_manifest,
    assert_default_name,
    assert_head_required,
    assert_identical_to_upstream,
    assert_llama_server_drafts_losslessly,
    assert_verify_proves_and_catches,
    checkpoints,
    copy_checkpoint,
    manifest,
)

from dspark_convert import convert
from dspark_convert.check import check_plan, errors
from dspark_convert.errors import ConvertError
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.roles.convert import ConvertOptions

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"deepseek32": "BF16: hidden 64, 2 trunk layers, 4 heads, q/kv LoRA 48/32, 4 experts",
         "deepseek32-wide": "F16: hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and nope 24 (attn_v_b / attn_k_b "
                            "F16 under q8_0), 8 experts in 2 groups, 2 shared, YaRN with mscale_all_dim, tied "
                            "embeddings (lm_head stored, not written)",
         "deepseek32-fp8": "FP8 128x128 blocks (partial column block: hidden 192; kv_b_proj of two row blocks), 16 "
                           "experts in DeepseekV32Config's 8 groups, three shards; no rms_norm_eps / n_group / topk_group / max_position_embeddings "
                           "(DeepseekV32Config defaults)",
         "deepseek32-fp8-nextn2": "FP8 32x64 blocks (q_lora_rank 40: partial blocks), two NextN layers"}
#: the cases llama.cpp's one-block MTP graph cannot run: written with --match-upstream only
TWO_LAYERS = ("deepseek32-fp8-nextn2",)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made by transformers from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "deepseek32")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_deepseek32_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str,
                                                              tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes (two NextN layers: only the one-block graph rule) and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path, match_upstream=fam in TWO_LAYERS)


def test_the_cli_writes_the_same_file_from_the_head_shards_only(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The summary names the head and the shards read: the roots' and the NextN layer's, not the trunk's."""
    text = assert_cli_writes_the_manifest(
        ckpts["deepseek32-fp8"], "deepseek32-fp8", tmp_path,
        "MTP sidecar (DeepseekV32ForCausalLM -> deepseek32): 1 MTP block(s) after 2 trunk layers")
    assert "read 2 of 3 shards" in text


def test_only_the_head_is_selected(ckpts: dict[str, Path]) -> None:
    """The tensors read: the NextN layer (its FP8 scales included), the embedding, the final norm and the head."""
    from dspark_convert.hf.checkpoint import Checkpoint
    from dspark_convert.variants.mtp.mtp import draft_tensors

    src = ckpts["deepseek32-fp8"]
    ck = Checkpoint(src, select=draft_tensors(json.loads((src / "config.json").read_text())))
    try:
        names = list(ck.names)
    finally:
        ck.close()
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
            "model.layers.2.self_attn.kv_b_proj.weight_scale_inv",
            "model.layers.2.mlp.experts.15.down_proj.weight_scale_inv"} <= set(names)
    assert not [n for n in names if n.startswith(("model.layers.0.", "model.layers.1."))]
    # 3 roots; the layer: 6 NextN, 2 norms, 7 attention (+ 5 FP8 scales), 5 indexer (+ 2), router 2, shared 3 (+ 3),
    # 16 experts x 3 (+ 48)
    assert len(names) == 3 + 6 + 2 + 12 + 7 + 2 + 6 + 96


def test_default_name_is_the_mtp_keyword(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: ``mtp-<name>-<TYPE>.gguf`` as for the other MTP families (upstream's ``DeepseekV32Model`` keeps the
    full model's ``<name>-<size>-<TYPE>.gguf``, which llama-server's -hf does not find as a draft), same bytes."""
    assert_default_name(ckpts["deepseek32"], "deepseek32", tmp_path, monkeypatch, "mtp-DeepSeek-V3.2-Tiny-Q8_0.gguf")


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: the NextN block(s) after the trunk, block_count = trunk + nextn, MLA as
    MQA, rope.dimension_count = qk_rope_head_dim, no indexer types, the sigmoid gating of scoring_func,
    DeepseekV32Config's defaults where the config is silent; the FP8 weights dequantized (no scale tensor, no F8
    type), kv_b_proj split; a tied head not written."""
    for fam, (n, nextn, kv_lora, nope, heads, experts) in {
            "deepseek32": (2, 1, 32, 32, 4, 4), "deepseek32-wide": (3, 1, 48, 24, 6, 8),
            "deepseek32-fp8": (2, 1, 64, 32, 4, 16), "deepseek32-fp8-nextn2": (2, 2, 32, 32, 4, 4)}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            assert (kv["general.architecture"], kv["deepseek32.block_count"],
                    kv["deepseek32.nextn_predict_layers"]) == ("deepseek32", n + nextn, nextn)
            assert (kv["deepseek32.attention.head_count_kv"], kv["deepseek32.rope.dimension_count"]) == (1, 16)
            assert (kv["deepseek32.attention.key_length"], kv["deepseek32.attention.value_length"]) == (kv_lora + 16,
                                                                                                      kv_lora)
            assert kv["deepseek32.expert_gating_func"] == 2 and "deepseek32.attention.indexer.types" not in kv
            assert kv["deepseek32.expert_count"] == experts
            shapes = {t["name"]: t["ne"] for t in m["tensors"]}
            assert {int(t.split(".")[1]) for t in shapes if t.startswith("blk.")} == set(range(n, n + nextn))
            assert shapes[f"blk.{n}.attn_k_b.weight"] == [nope, kv_lora, heads]
            assert shapes[f"blk.{n}.ffn_gate_exps.weight"][2] == experts
            assert not [t for t in m["tensors"] if "scale" in t["name"] or t["type"].startswith("F8")]
    fp8 = {k: v.get("value") for k, v in manifest("deepseek32-fp8-bf16-mtp")["kv"].items()}
    assert (fp8["deepseek32.context_length"], fp8["deepseek32.expert_group_count"],
            fp8["deepseek32.expert_group_used_count"]) == (163840, 8, 4)
    assert abs(fp8["deepseek32.attention.layer_norm_rms_epsilon"] - 1e-6) < 1e-12
    wide = {k: v.get("value") for k, v in manifest("deepseek32-wide-bf16-mtp")["kv"].items()}
    assert (wide["deepseek32.rope.scaling.type"], wide["deepseek32.rope.scaling.factor"]) == ("yarn", 4.0)
    assert abs(wide["deepseek32.rope.scaling.yarn_log_multiplier"] - 0.1) < 1e-7
    assert "output.weight" not in {t["name"] for t in manifest("deepseek32-wide-bf16-mtp")["tensors"]}
    q8 = {t["name"]: t["type"] for t in manifest("deepseek32-wide-q8_0-mtp")["tensors"]}
    assert q8["blk.3.attn_k_b.weight"] == q8["blk.3.attn_v_b.weight"] == q8["blk.3.ffn_down_exps.weight"] == "F16"
    fp8q = {t["name"]: t["type"] for t in manifest("deepseek32-fp8-q8_0-mtp")["tensors"]}
    assert fp8q["blk.2.attn_k_b.weight"] == fp8q["blk.2.ffn_gate_exps.weight"] == fp8q["blk.2.attn_q_b.weight"] == \
        "Q8_0"
    assert fp8q["blk.2.indexer.proj.weight"] == fp8q["blk.2.ffn_gate_inp.weight"] == "F32"


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["deepseek32"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_two_nextn_layers_need_match_upstream(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """Upstream writes both NextN layers; llama.cpp b11434's deepseek32 MTP graph asserts one block, so hf2gguf
    refuses the file unless ``--match-upstream``."""
    with pytest.raises(ConvertError, match=r"deepseek32.nextn_predict_layers: is 2: llama.cpp b11434's deepseek32 MTP "
                                           r"graph takes a single MTP block"):
        convert(ckpts["deepseek32-fp8-nextn2"], None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()


def test_the_tokenizer_is_taken_past_upstreams_stop_with_a_note(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """transformers 5 says a byte-level tokenizer adds no BOS, so upstream's assertion stops; tokenizer_config.json
    says add_bos_token true and the sidecar gets the byte-level vocabulary with an ``upstream-stops`` note. Without
    add_bos_token true it is refused, as upstream's assertion intends."""
    r = convert(ckpts["deepseek32"], None, tmp_path / "ok.gguf", outtype="bf16", mtp=True)
    stops = [f for f in r.findings if f.rule == "upstream-stops"]
    assert len(stops) == 1 and "stops on this DeepSeek-V3.2 target" in stops[0].message
    bad = copy_checkpoint(ckpts["deepseek32"], tmp_path / "bad")
    tc = json.loads((bad / "tokenizer_config.json").read_text())
    (bad / "tokenizer_config.json").write_text(json.dumps({**tc, "add_bos_token": False}))
    with pytest.raises(ConvertError, match=r"add_bos_token is False, expected true"):
        convert(bad, None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()


def _short_kv_b_scale(t: dict[str, Any]) -> None:
    k = "model.layers.2.self_attn.kv_b_proj.weight_scale_inv"
    t[k] = t[k][:1].clone()


def _drop_expert_scale(t: dict[str, Any]) -> None:
    del t["model.layers.2.mlp.experts.3.up_proj.weight_scale_inv"]


def _float_weight_with_scale(t: dict[str, Any]) -> None:
    import torch

    k = "model.layers.2.self_attn.o_proj.weight"
    t[k] = t[k].to(torch.float32).to(torch.bfloat16)


_QC = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8"}


@pytest.mark.parametrize(("fam", "config", "edit", "message"), [
    ("deepseek32", {"num_nextn_predict_layers": 0}, None, r"no MTP head: 'num_nextn_predict_layers' is 0"),
    ("deepseek32", {"num_hidden_layers": 1}, None, r"NextN layers \[1, 2\] after num_hidden_layers 1"),
    ("deepseek32", {"num_key_value_heads": 2}, None, r"kv_b_proj.weight' has shape \[256, 32\]; upstream splits it "
                                                     r"into num_key_value_heads 2 x \(qk_nope_head_dim 32 \+ "
                                                     r"v_head_dim 32\) = 128 rows"),
    ("deepseek32-fp8", {"num_key_value_heads": 2}, None, r"kv_b_proj.weight' has shape \[256, 64\]; upstream "
                                                         r"splits it into num_key_value_heads 2"),
    ("deepseek32", {"n_routed_experts": 3}, None, r"expert 3 is beyond n_routed_experts 3"),
    ("deepseek32-fp8", {"n_routed_experts": 15}, None, r"expert 15 is beyond n_routed_experts 15"),
    ("deepseek32", {"q_lora_rank": None}, None, r"key 'q_lora_rank' is null; transformers' DeepseekV32Config rejects "
                                                r"it"),
    ("deepseek32", {"q_lora_rank": ...}, None, r"blk.2.indexer.attn_q_b.weight: has ggml shape \[48, 256\], expected "
                                               r"\[1536, 256\]"),
    ("deepseek32", {"index_topk": "x"}, None, r"index_topk"),
    ("deepseek32-fp8", {"quantization_config": {"quant_method": "awq"}}, None,
     r"quant_method 'awq': an MTP head is converted from float weights, block-scaled FP8 \('fp8'\) or ModelOpt "
     r"FP8"),
    ("deepseek32-fp8", {"quantization_config": {**_QC, "weight_block_size": [128]}}, None,
     r"weight_block_size is \[128\], expected two positive integers"),
    ("deepseek32-fp8", {"quantization_config": ...}, None,
     r"tensor 'model.layers.2.mlp.experts.0.down_proj.weight_scale_inv' is not part of a deepseek32 MTP head "
     r"\(upstream fails with \"Can not map tensor\"\)"),
    ("deepseek32-fp8", {"quantization_config": {**_QC, "weight_block_size": [64, 128]}}, None,
     r"weight_scale_inv' is F32 \[\d+, \d+\]; expected a float scale per 64x128 block of '[^']+' \[\d+, \d+\]: "
     r"\[\d+, \d+\]"),
    ("deepseek32-fp8", None, _short_kv_b_scale, r"'model.layers.2.self_attn.kv_b_proj.weight_scale_inv' is F32 "
                                                r"\[1, 1\]; expected a float scale per 128x128 block of "
                                                r"'model.layers.2.self_attn.kv_b_proj.weight' \[256, 64\]: \[2, 1\]"),
    ("deepseek32-fp8", None, _drop_expert_scale, r"tensor 'model.layers.2.mlp.experts.3.up_proj.weight' has dtype "
                                                 r"F8_E4M3 but the checkpoint has no "
                                                 r"'model.layers.2.mlp.experts.3.up_proj.weight_scale_inv' "
                                                 r"\(block-scaled FP8"),
    ("deepseek32-fp8", None, _float_weight_with_scale, r"tensor 'model.layers.2.self_attn.o_proj.weight' is BF16 "
                                                       r"\[\d+, \d+\] beside "
                                                       r"'model.layers.2.self_attn.o_proj.weight_scale_inv'; expected "
                                                       r"an F8_E4M3 matrix"),
])
def test_a_head_upstream_cannot_convert_is_refused_in_one_line(
        ckpts: dict[str, Path], tmp_path: Path, fam: str, config: dict[str, Any] | None,
        edit: Callable[[dict[str, Any]], None] | None, message: str) -> None:
    ck = copy_checkpoint(ckpts[fam], tmp_path / "bad", config, edit)
    with pytest.raises(ConvertError, match=message) as e:
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x.gguf").exists()


def test_the_cli_refusal_is_one_line_and_writes_nothing(ckpts: dict[str, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dspark_convert.cli import app

    ck = copy_checkpoint(ckpts["deepseek32-fp8"], tmp_path / "bad", {"quantization_config": {"quant_method": "awq"}})
    out = tmp_path / "mtp.gguf"
    r = CliRunner().invoke(app, ["hf2gguf", str(ck), "--mtp", "-o", str(out)])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "quant_method 'awq'" in lines[0]
    assert list(tmp_path.glob("*.gguf")) == []


@pytest.mark.parametrize("drop", ["blk.2.nextn.eh_proj.weight", "blk.2.attn_k_b.weight", "blk.2.attn_v_b.weight",
                                  "blk.2.attn_kv_a_mqa.weight", "blk.2.attn_q_a_norm.weight", "blk.2.ffn_norm.weight",
                                  "blk.2.ffn_up_exps.weight", "blk.2.ffn_gate_shexp.weight", "token_embd.weight",
                                  "blk.2.indexer.proj.weight", "blk.2.indexer.k_norm.bias",
                                  "blk.2.indexer.attn_q_b.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    """Unlike glm-dsa's loader, deepseek32's requires the indexer tensors."""
    assert_head_required(ckpts["deepseek32-fp8"], drop)


def test_loader_rules_check_the_deepseek32_keys(ckpts: dict[str, Path]) -> None:
    """expert_gating_func (required by the deepseek32 loader, unlike glm-dsa's), q_lora_rank, key_length_mla and
    expert_used_count above 0 are errors when missing; exp_probs_b.bias is optional."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = plan_conversion(ckpts["deepseek32"], None, options=ConvertOptions(outtype="bf16",
                                                                               upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        plan.tensors = [t for t in plan.tensors if t.name != "blk.2.exp_probs_b.bias"]
        assert errors(check_plan(plan)) == []
        plan.kvs = [k for k in plan.kvs if k.name not in ("deepseek32.expert_gating_func",
                                                          "deepseek32.attention.q_lora_rank",
                                                          "deepseek32.attention.key_length_mla")]
        plan.kvs = [KV(k.name, VT.UINT32, 0) if k.name == "deepseek32.expert_used_count" else k for k in plan.kvs]
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert {("deepseek32.expert_gating_func", "required-key"), ("deepseek32.attention.q_lora_rank", "required-key"),
                ("deepseek32.attention.key_length_mla", "required-key"),
                ("deepseek32.expert_used_count", "required-key")} <= found
    finally:
        planned.close()


@pytest.mark.parametrize(("fam", "pick"), [("deepseek32", "attn_k_b.weight"), ("deepseek32-wide", "attn_v_b.weight"),
                                           ("deepseek32-fp8", "attn_k_b.weight"),
                                           ("deepseek32-fp8", "ffn_gate_exps.weight"),
                                           ("deepseek32-fp8-nextn2", "blk.3.attn_q_b.weight")])
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, pick: str,
                                                              tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (FP8 weights dequantized from their scales again, k_b / v_b
    split from kv_b_proj, experts stacked), every NextN-layer tensor and scale a source; one changed byte in the
    picked tensor fails it by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "bf16"), lambda n: n.endswith(pick),
                                     match_upstream=fam in TWO_LAYERS)


def test_verify_spells_the_dequantization_independently(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """A file whose FP8 expert stack was dequantized with the wrong scale (one expert's scale for all) fails verify on
    that tensor only."""
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import quants

    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.hf.checkpoint import Checkpoint
    from dspark_convert.verify import verify

    ck_dir = ckpts["deepseek32-fp8"]
    out = tmp_path / "f32.gguf"
    convert(ck_dir, None, out, outtype="f32", mtp=True)
    name = "blk.2.ffn_up_exps.weight"
    f = read_gguf(out)
    blob = bytes(f.tensor_bytes(name))
    f.close()
    ck = Checkpoint(ck_dir)
    try:
        from dspark_convert.formats.quant import fp8_scale_inv_dequant

        s0 = np.asarray(ck.read("model.layers.2.mlp.experts.0.up_proj.weight_scale_inv"))
        wrong = np.stack([fp8_scale_inv_dequant(np.asarray(ck.read(f"model.layers.2.mlp.experts.{e}.up_proj.weight")),
                                                s0, 128, 128, "F32") for e in range(16)])
    finally:
        ck.close()
    bad_bytes = np.ascontiguousarray(quants.quantize(wrong.astype(np.float32), QT.F32)).tobytes()
    assert len(bad_bytes) == len(blob) and bad_bytes != blob
    data = out.read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data.replace(blob, bad_bytes))
    r = verify(bad, ck_dir, None, quality=False)
    assert [o.name for o in r.outputs if not o.passed] == [name]


@pytest.mark.llama
@pytest.mark.parametrize("fam", ["deepseek32", "deepseek32-fp8"])
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], tmp_path: Path, fam: str,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar. The NextN block drafts
    (draft_n > 0) and speculative greedy equals plain greedy (the indexer head size is 64: llama.cpp's DSA cache
    rotates indexer keys by a Hadamard matrix of at least 64)."""
    assert_llama_server_drafts_losslessly(ckpts[fam], tmp_path, llama_bin)
