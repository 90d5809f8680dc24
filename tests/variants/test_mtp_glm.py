"""GLM-4.5 MTP sidecars from the checkpoint (``hf2gguf GLM_CHECKPOINT --mtp``, upstream's ``Glm4MoeModel``,
GGUF architecture ``glm4moe``): byte parity with upstream b11434's ``convert_hf_to_gguf.py --mtp`` at bf16, f16, f32
and q8_0 on three tiny checkpoints of tests/mtp_makers.py (the default GLM-4.5 shape, a second one with other
dimensions, and the same weights as GLM-4.5V stores its text model), the shards read, the loader rules ``check``
applies, the one-line refusals, ``verify``, and (``llama`` tier) speculative greedy == plain greedy in llama-server.

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
CASES = {"glm4moe": "GLM-4.5: hidden 64, 2 trunk layers, 4 experts",
         "glm4moe-wide": "hidden 96, 3 trunk layers, 8 experts in 2 groups, expert width 48 (F16 under q8_0), q/k norms",
         "glm4vmoe": "Glm4vMoeForConditionalGeneration: model.language_model.* names, text_config"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made by transformers from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "glm")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_glm_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


def test_the_cli_writes_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    assert_cli_writes_the_manifest(
        ckpts["glm4moe"], "glm4moe", tmp_path,
        "MTP sidecar (Glm4MoeForCausalLM -> glm4moe): 1 MTP block(s) after 2 trunk layers")


def test_default_name_is_upstreams(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: upstream's ``mtp-<name>-<TYPE>.gguf`` (its ``prepare_metadata`` with the output a folder)."""
    monkeypatch.chdir(tmp_path)
    names = {fam: convert(ckpts[fam], None, outtype="q8_0", mtp=True).path for fam in ("glm4moe", "glm4vmoe")}
    assert {fam: p.name for fam, p in names.items() if p is not None} == {
        "glm4moe": "mtp-GLM-4.5-Tiny-Q8_0.gguf", "glm4vmoe": "mtp-GLM-4.5V-Tiny-Q8_0.gguf"}
    assert describe(tmp_path / "mtp-GLM-4.5-Tiny-Q8_0.gguf") == manifest("glm4moe-q8_0-mtp")


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: the NextN block after the trunk, block_count = trunk + 1, the keys."""
    for fam, (n, experts) in {"glm4moe": (2, 4), "glm4moe-wide": (3, 8), "glm4vmoe": (2, 4)}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            assert (kv["general.architecture"], kv["glm4moe.block_count"], kv["glm4moe.nextn_predict_layers"]) == \
                   ("glm4moe", n + 1, 1)
            assert kv["glm4moe.expert_count"] == experts and kv["glm4moe.expert_gating_func"] == 2
            blocks = {int(t["name"].split(".")[1]) for t in m["tensors"] if t["name"].startswith("blk.")}
            assert blocks == {n}
    wide = {t["name"]: t["type"] for t in manifest("glm4moe-wide-q8_0-mtp")["tensors"]}
    assert wide["blk.3.ffn_down_exps.weight"] == wide["blk.3.ffn_down_shexp.weight"] == "F16"
    assert wide["blk.3.attn_q_norm.weight"] == "F32" and wide["blk.3.ffn_gate_inp.weight"] == "F32"


def test_only_the_shards_holding_the_head_are_read(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The checkpoint split in two shards, the first holding only trunk layers: deleted, the conversion is the same
    file, and the summary says one shard was skipped."""
    import torch
    from safetensors.torch import load_file, save_file

    src = ckpts["glm4moe"]
    cut = tmp_path / "cut"
    cut.mkdir()
    for p in src.iterdir():
        if p.suffix != ".safetensors":
            shutil.copyfile(p, cut / p.name)
    state: dict[str, torch.Tensor] = load_file(str(src / "model.safetensors"))
    trunk = {k: v for k, v in state.items() if k.startswith(("model.layers.0.", "model.layers.1."))}
    rest = {k: v for k, v in state.items() if k not in trunk}
    save_file(rest, str(cut / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    weight_map = {**dict.fromkeys(trunk, "model-00001-of-00002.safetensors"),
                  **dict.fromkeys(rest, "model-00002-of-00002.safetensors")}
    (cut / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(v.numel() * 2 for v in state.values())}, "weight_map": weight_map}))
    out = tmp_path / "cut.gguf"
    r = convert(cut, None, out, outtype="bf16", mtp=True)
    assert describe(out)["tensors"] == manifest("glm4moe-bf16-mtp")["tensors"]
    note = next(n for n in r.notes if n.startswith("read "))
    assert note.startswith("read 1 of 2 shards") and "skipped 1" in note


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["glm4moe"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def _edited(src: Path, dst: Path, **config: Any) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        shutil.copyfile(p, dst / p.name)
    cfg = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    return dst


@pytest.mark.parametrize(("config", "message"), [
    ({"num_nextn_predict_layers": 0}, r"no MTP head: 'num_nextn_predict_layers' is 0"),
    ({"num_nextn_predict_layers": 2}, r"num_nextn_predict_layers is 2 but the checkpoint has NextN layers \[2\] after "
                                      r"num_hidden_layers 2; expected model.layers.2..3"),
    ({"num_hidden_layers": 1}, r"NextN layers \[1, 2\] after num_hidden_layers 1"),
    ({"n_routed_experts": 3}, r"expert 3 is beyond n_routed_experts 3"),
])
def test_a_head_that_does_not_match_its_config_is_refused(ckpts: dict[str, Path], tmp_path: Path,
                                                          config: dict[str, Any], message: str) -> None:
    ck = _edited(ckpts["glm4moe"], tmp_path / "bad", **config)
    with pytest.raises(ConvertError, match=message):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize("drop", ["blk.2.nextn.eh_proj.weight", "blk.2.ffn_down_exps.weight", "blk.2.exp_probs_b.bias",
                                  "blk.2.ffn_up_shexp.weight", "blk.2.attn_q.weight", "token_embd.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    assert_head_required(ckpts["glm4moe"], drop)


def test_loader_rules_check_the_expert_keys(ckpts: dict[str, Path]) -> None:
    """A missing expert_shared_count (required by the glm4moe loader) and an expert width the stacks do not have."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = plan_conversion(ckpts["glm4moe"], None, options=ConvertOptions(outtype="bf16",
                                                                            upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        plan.kvs = [k for k in plan.kvs if k.name != "glm4moe.expert_shared_count"]
        i = next(i for i, k in enumerate(plan.kvs) if k.name == "glm4moe.expert_feed_forward_length")
        plan.kvs[i] = KV("glm4moe.expert_feed_forward_length", VT.UINT32, 16)
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert ("glm4moe.expert_shared_count", "required-key") in found
        assert {(f"blk.2.ffn_{w}_exps.weight", "shape") for w in ("gate", "up", "down")} <= found
        # without expert_shared_count the loader creates no shared expert: those tensors are extra
        assert ("blk.2.ffn_up_shexp.weight", "extra-tensor") in found
    finally:
        planned.close()


@pytest.mark.parametrize("fam", ["glm4moe", "glm4vmoe"])
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (bytes after the type's rounding), full accounting; one
    changed value in the NextN block's attention fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "bf16"), lambda n: n == "blk.2.attn_q.weight")


@pytest.mark.llama
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], tmp_path: Path,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar. The NextN block drafts
    (draft_n > 0) and speculative greedy equals plain greedy."""
    assert_llama_server_drafts_losslessly(ckpts["glm4moe"], tmp_path, llama_bin)
