"""Nemotron-H MTP sidecars from the checkpoint (``hf2gguf NEMOTRON_H_CHECKPOINT --mtp``, upstream's ``NemotronHModel``
with experts, GGUF architecture ``nemotron_h_moe``): byte parity with upstream b11434's ``convert_hf_to_gguf.py
--mtp`` at bf16, f16, f32 and q8_0 on two tiny checkpoints of tests/mtp_makers.py (the default Nemotron-H shape, and a
second one with other dimensions, a latent MoE and biases on the head's attention), the shards read, the loader
rules ``check`` applies, the one-line refusals, ``verify``, and (``llama`` tier) speculative greedy == plain greedy in
llama-server.

The oracle manifests are ``tests/data/mtp/<family>-<outtype>-mtp.json``: upstream's own ``--mtp`` files of the same
checkpoints, every KV (``general.*`` included) and every tensor's bytes (regenerate with the command in
tests/mtp_makers.py's docstring). Upstream's converter is not run here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from golden_manifest import describe
from mtp_family_kit import (
    OUTTYPES,
    assert_cli_writes_the_manifest,
    assert_default_name,
    assert_head_required,
    assert_identical_to_upstream,
    assert_llama_server_drafts_losslessly,
    assert_verify_proves_and_catches,
    checkpoints,
    manifest,
)

from dspark_convert import convert
from dspark_convert.check import check_plan, errors
from dspark_convert.errors import ConvertError
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.roles.convert import ConvertOptions

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"nemotron_h_moe": "Nemotron-H: hidden 64, M*E, 4 experts, the MTP head folded into block 3",
         "nemotron_h_moe-wide": "hidden 96, MEM*E, head_dim 24 (not hidden / heads), latent MoE 64, 8 experts in 2 "
                                "groups, widths 48/40 (F16 under q8_0), q/k/v/o biases on the head"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made by transformers from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "nemotron")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_nemotron_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


def test_the_layer_pattern_as_a_list_is_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """``layers_block_type`` (``["mamba", "attention", "moe"]``, as transformers 5 saves the config) instead of
    ``hybrid_override_pattern``: upstream writes the same sidecar (checked once against b11434), and so do we."""
    cfg = json.loads((ckpts["nemotron_h_moe"] / "config.json").read_text())
    pattern = {"M": "mamba", "*": "attention", "E": "moe"}
    ck = _edited(ckpts["nemotron_h_moe"], tmp_path / "Nemotron-H-Tiny", ("hybrid_override_pattern",),
                 layers_block_type=[pattern[c] for c in cfg["hybrid_override_pattern"]])
    out = tmp_path / "list.gguf"
    convert(ck, None, out, outtype="bf16", mtp=True)
    assert describe(out) == manifest("nemotron_h_moe-bf16-mtp")


def test_the_cli_writes_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    assert_cli_writes_the_manifest(
        ckpts["nemotron_h_moe"], "nemotron_h_moe", tmp_path,
        "MTP sidecar (NemotronHForCausalLM -> nemotron_h_moe): 1 MTP block(s) after 3 trunk layers")


def test_default_name_is_upstreams(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: upstream's ``mtp-<name>-<TYPE>.gguf`` (NemotronHModel's ``prepare_metadata`` with the output a
    folder: no size label)."""
    assert_default_name(ckpts["nemotron_h_moe"], "nemotron_h_moe", tmp_path, monkeypatch, "mtp-Nemotron-H-Tiny-Q8_0.gguf")


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: one block after the trunk holding both MTP layers, per-block arrays over
    block_count with the block as attention and MoE, context_length 2^20, the rope width from hidden / heads."""
    for fam, (n, experts, kv_heads, ff) in {"nemotron_h_moe": (3, 4, [0, 2, 0, 2], [0, 0, 32, 32]),
                                             "nemotron_h_moe-wide": (5, 8, [0, 0, 0, 3, 0, 3],
                                                                     [0, 48, 0, 0, 48, 48])}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            a = "nemotron_h_moe"
            assert (kv["general.architecture"], kv[f"{a}.block_count"], kv[f"{a}.nextn_predict_layers"]) == \
                   (a, n + 1, 1)
            assert kv[f"{a}.expert_count"] == experts and kv[f"{a}.context_length"] == 2 ** 20
            assert kv[f"{a}.attention.head_count_kv"] == kv_heads and kv[f"{a}.feed_forward_length"] == ff
            assert kv[f"{a}.rope.dimension_count"] == 16 and kv[f"{a}.rope.scaling.finetuned"] is False
            blocks = {int(t["name"].split(".")[1]) for t in m["tensors"] if t["name"].startswith("blk.")}
            assert blocks == {n}
    wide = {t["name"]: t["type"] for t in manifest("nemotron_h_moe-wide-q8_0-mtp")["tensors"]}
    assert wide["blk.5.ffn_down_exps.weight"] == wide["blk.5.ffn_down_shexp.weight"] == "F16"
    # upstream's F32 rule for the router looks for blk.1 (the checkpoint's mtp.layers.1), so it is quantized
    assert wide["blk.5.ffn_gate_inp.weight"] == "Q8_0" and wide["blk.5.exp_probs_b.bias"] == "F32"
    assert {"blk.5.ffn_latent_down.weight", "blk.5.ffn_latent_up.weight", "blk.5.attn_q.bias"} <= set(wide)


def test_only_the_shards_holding_the_head_are_read(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The checkpoint split in two shards, the first holding only trunk layers: deleted, the conversion is the same
    file, and the summary says one shard was skipped."""
    import torch
    from safetensors.torch import load_file, save_file

    src = ckpts["nemotron_h_moe"]
    cut = tmp_path / "cut"
    cut.mkdir()
    for p in src.iterdir():
        if p.suffix != ".safetensors":
            shutil.copyfile(p, cut / p.name)
    state: dict[str, torch.Tensor] = load_file(str(src / "model.safetensors"))
    trunk = {k: v for k, v in state.items() if k.startswith("backbone.layers.")}
    rest = {k: v for k, v in state.items() if k not in trunk}
    save_file(rest, str(cut / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    weight_map = {**dict.fromkeys(trunk, "model-00001-of-00002.safetensors"),
                  **dict.fromkeys(rest, "model-00002-of-00002.safetensors")}
    (cut / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(v.numel() * 2 for v in state.values())}, "weight_map": weight_map}))
    out = tmp_path / "cut.gguf"
    r = convert(cut, None, out, outtype="bf16", mtp=True)
    assert describe(out)["tensors"] == manifest("nemotron_h_moe-bf16-mtp")["tensors"]
    note = next(n for n in r.notes if n.startswith("read "))
    assert note.startswith("read 1 of 2 shards") and "skipped 1" in note


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["nemotron_h_moe"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def _edited(src: Path, dst: Path, drop: tuple[str, ...] = (), **config: Any) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        shutil.copyfile(p, dst / p.name)
    cfg = json.loads((src / "config.json").read_text())
    cfg = {k: v for k, v in {**cfg, **config}.items() if k not in drop}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(("config", "drop", "message"), [
    ({"num_nextn_predict_layers": 0}, (), r"no MTP head: 'num_nextn_predict_layers' is 0"),
    ({"num_nextn_predict_layers": 2}, (), r"num_nextn_predict_layers is 2; upstream's Nemotron-H MTP conversion "
                                          r"supports 1"),
    ({}, ("num_experts_per_tok",), r"no MTP head: a Nemotron-H checkpoint without experts"),
    ({"hybrid_override_pattern": "M*EE"}, (), r"the layer pattern has 4 entries, expected num_hidden_layers \(3\)"),
    ({"n_routed_experts": 3}, (), r"expert 3 is beyond n_routed_experts 3"),
    ({"mamba_head_dim": 8}, (), r"the SSM inner size 32 .* is not a multiple of d_head 64"),
])
def test_a_head_that_does_not_match_its_config_is_refused(ckpts: dict[str, Path], tmp_path: Path,
                                                          config: dict[str, Any], drop: tuple[str, ...],
                                                          message: str) -> None:
    ck = _edited(ckpts["nemotron_h_moe"], tmp_path / "bad", drop, **config)
    with pytest.raises(ConvertError, match=message):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize("drop", ["blk.3.nextn.eh_proj.weight", "blk.3.nextn.shared_head_norm.weight",
                                  "blk.3.ffn_down_exps.weight", "blk.3.exp_probs_b.bias", "blk.3.ffn_up_shexp.weight",
                                  "blk.3.attn_q.weight", "blk.3.post_attention_norm.weight", "token_embd.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    assert_head_required(ckpts["nemotron_h_moe"], drop)


def test_loader_rules_check_the_keys_and_widths(ckpts: dict[str, Path]) -> None:
    """A missing LayerNorm epsilon (the nemotron_h_moe loader requires it, not the RMS one), a per-block array that
    is not one entry per block, a per-block KV head count the block's k/v do not have, and an expert width the stacks
    do not have."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = plan_conversion(ckpts["nemotron_h_moe"], None,
                              options=ConvertOptions(outtype="bf16", upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        a = "nemotron_h_moe"
        assert f"{a}.attention.layer_norm_rms_epsilon" not in {k.name for k in plan.kvs}
        plan.kvs = [k for k in plan.kvs if k.name != f"{a}.attention.layer_norm_epsilon"]
        for i, k in enumerate(plan.kvs):
            if k.name == f"{a}.expert_feed_forward_length":
                plan.kvs[i] = KV(k.name, VT.UINT32, 16)
            elif k.name == f"{a}.attention.head_count_kv":
                plan.kvs[i] = KV(k.name, VT.ARRAY, [0, 2, 0, 1], VT.INT32)
            elif k.name == f"{a}.feed_forward_length":
                plan.kvs[i] = KV(k.name, VT.ARRAY, [0, 0, 32], VT.INT32)
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert (f"{a}.feed_forward_length", "array-length") in found
        assert (f"{a}.attention.layer_norm_epsilon", "required-key") in found
        assert {("blk.3.attn_k.weight", "shape"), ("blk.3.attn_v.weight", "shape")} <= found
        assert {("blk.3.ffn_up_exps.weight", "shape"), ("blk.3.ffn_down_exps.weight", "shape")} <= found
    finally:
        planned.close()


@pytest.mark.parametrize("fam", sorted(CASES))
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (bytes after the type's rounding, q/k permuted as upstream),
    full accounting; one changed value in the block's attention fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "f16", "bf16"), lambda n: n.endswith(".attn_q.weight"))


@pytest.mark.llama
@pytest.mark.parametrize("fam", sorted(CASES))
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], fam: str, tmp_path: Path,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar (the wide one with the latent
    MoE and the attention biases). The MTP block drafts (draft_n > 0) and speculative greedy equals plain greedy
    (the tiny random head's drafts are rejected: this proves the file loads and runs, not its quality)."""
    assert_llama_server_drafts_losslessly(ckpts[fam], tmp_path, llama_bin)
