"""GLM-5 MTP sidecars from the checkpoint (``hf2gguf GLM5_CHECKPOINT --mtp``, upstream's ``GlmMoeDsaModel``, GGUF
architecture ``glm-dsa``: MLA attention with the DSA indexer): byte parity with upstream b11434's
``convert_hf_to_gguf.py --mtp`` at bf16, f16, f32 and q8_0 on two tiny checkpoints of tests/mtp_makers.py (the default
GLM-5 shape, a GLM-5.2-style one with other dimensions and explicit ``indexer_types``, and one with YaRN rope
scaling whose config leaves keys to transformers' defaults), the loader rules ``check``
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
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.roles.convert import ConvertOptions

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"glm-dsa": "GLM-5: hidden 64, 2 trunk layers, 4 heads, q/kv LoRA 48/32, 4 experts, no indexer_types",
         "glm-dsa-wide": "hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and nope 24 (attn_v_b / attn_k_b F16 "
                         "under q8_0), 8 experts in 2 groups, 2 shared, indexer_types full/shared/full",
         "glm-dsa-yarn": "YaRN rope with mscale_all_dim; no head_dim, rms_norm_eps, n_group / topk_group, "
                         "norm_topk_prob, routed_scaling_factor, max_position_embeddings (GlmMoeDsaConfig defaults)"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made by transformers from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "glm5")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_glm5_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


def test_the_cli_writes_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    assert_cli_writes_the_manifest(
        ckpts["glm-dsa"], "glm-dsa", tmp_path,
        "MTP sidecar (GlmMoeDsaForCausalLM -> glm-dsa): 1 MTP block(s) after 2 trunk layers")


def test_default_name_is_the_mtp_keyword(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: ``mtp-<name>-<TYPE>.gguf`` as for the other MTP families (upstream's ``GlmMoeDsaModel`` keeps the
    full model's ``<name>-<size>-<TYPE>.gguf``, which llama-server's -hf does not find as a draft), same bytes."""
    assert_default_name(ckpts["glm-dsa"], "glm-dsa", tmp_path, monkeypatch, "mtp-GLM-5-Tiny-Q8_0.gguf")


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: the NextN block after the trunk, block_count = trunk + 1, MLA as MQA
    (head_count_kv 1, key_length = kv_lora_rank + rope), the indexer keys; kv_b_proj split into k_b / v_b."""
    for fam, (n, kv_lora, rope, nope, v, heads, types) in {
            "glm-dsa": (2, 32, 16, 32, 32, 4, [True, True]),
            "glm-dsa-wide": (3, 48, 16, 24, 32, 6, [True, False, True]),
            "glm-dsa-yarn": (2, 32, 16, 32, 32, 4, [True, True])}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            assert (kv["general.architecture"], kv["glm-dsa.block_count"], kv["glm-dsa.nextn_predict_layers"]) == \
                   ("glm-dsa", n + 1, 1)
            assert kv["glm-dsa.attention.head_count_kv"] == 1
            assert (kv["glm-dsa.attention.key_length"], kv["glm-dsa.attention.value_length"]) == (kv_lora + rope,
                                                                                                kv_lora)
            assert kv["glm-dsa.attention.key_length_mla"] == nope + rope and kv["glm-dsa.rope.dimension_count"] == rope
            assert kv["glm-dsa.attention.indexer.types"] == types
            shapes = {t["name"]: t["ne"] for t in m["tensors"]}
            assert {int(t.split(".")[1]) for t in shapes if t.startswith("blk.")} == {n}
            assert shapes[f"blk.{n}.attn_k_b.weight"] == [nope, kv_lora, heads]
            assert shapes[f"blk.{n}.attn_v_b.weight"] == [kv_lora, v, heads]
    yarn = {k: v.get("value") for k, v in manifest("glm-dsa-yarn-bf16-mtp")["kv"].items()}
    assert (yarn["glm-dsa.rope.scaling.type"], yarn["glm-dsa.context_length"]) == ("yarn", 202752)
    assert abs(yarn["glm-dsa.rope.scaling.yarn_log_multiplier"] - 0.1) < 1e-7
    assert (yarn["glm-dsa.expert_weights_scale"], yarn["glm-dsa.expert_weights_norm"]) == (2.5, True)
    wide = {t["name"]: t["type"] for t in manifest("glm-dsa-wide-q8_0-mtp")["tensors"]}
    assert wide["blk.3.attn_k_b.weight"] == wide["blk.3.attn_v_b.weight"] == wide["blk.3.ffn_down_exps.weight"] == "F16"
    assert wide["blk.3.indexer.proj.weight"] == wide["blk.3.ffn_gate_inp.weight"] == "F32"
    assert wide["blk.3.attn_q_b.weight"] == "Q8_0"


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["glm-dsa"], None, tmp_path / "x.gguf")
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
    ({"num_hidden_layers": 1}, r"NextN layers \[1, 2\] after num_hidden_layers 1"),
    ({"num_key_value_heads": 2}, r"kv_b_proj.weight' has shape \[256, 32\]; upstream splits it into "
                                 r"num_key_value_heads 2 x \(qk_nope_head_dim 32 \+ v_head_dim 32\) = 128 rows"),
    ({"n_routed_experts": 3}, r"expert 3 is beyond n_routed_experts 3"),
    ({"q_lora_rank": None}, r"key 'q_lora_rank' is null; transformers' GlmMoeDsaConfig rejects it"),
])
def test_a_head_that_does_not_match_its_config_is_refused(ckpts: dict[str, Path], tmp_path: Path,
                                                          config: dict[str, Any], message: str) -> None:
    ck = _edited(ckpts["glm-dsa"], tmp_path / "bad", **config)
    with pytest.raises(ConvertError, match=message):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()


def test_config_defaults_are_transformers(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """Without ``indexer_types`` upstream writes transformers' default (every trunk layer full); with
    ``index_topk_freq`` / ``index_skip_topk_offset`` the pattern they give."""
    plain = tmp_path / "plain.gguf"
    convert(ckpts["glm-dsa"], None, plain, outtype="bf16", mtp=True)
    assert read_gguf(plain).kvs["glm-dsa.attention.indexer.types"].value == [True, True]
    ck = _edited(ckpts["glm-dsa-wide"], tmp_path / "freq", indexer_types=None, index_topk_freq=2,
                 index_skip_topk_offset=2)
    out = tmp_path / "freq.gguf"
    convert(ck, None, out, outtype="bf16", mtp=True)
    assert read_gguf(out).kvs["glm-dsa.attention.indexer.types"].value == [True, True, False]


@pytest.mark.parametrize("drop", ["blk.2.nextn.eh_proj.weight", "blk.2.attn_k_b.weight", "blk.2.attn_v_b.weight",
                                  "blk.2.attn_kv_a_mqa.weight", "blk.2.attn_q_a_norm.weight", "blk.2.ffn_norm.weight",
                                  "blk.2.ffn_up_exps.weight", "blk.2.ffn_gate_shexp.weight", "token_embd.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    assert_head_required(ckpts["glm-dsa"], drop)


def test_loader_rules_check_the_mla_and_indexer_keys(ckpts: dict[str, Path]) -> None:
    """The indexer tensors are optional; a missing q_lora_rank / key_length_mla, an indexer_types array of the wrong
    length and a kv_lora_rank the tensors do not have are errors."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = plan_conversion(ckpts["glm-dsa"], None, options=ConvertOptions(outtype="bf16",
                                                                            upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        plan.tensors = [t for t in plan.tensors if not t.name.startswith("blk.2.indexer.")]
        assert errors(check_plan(plan)) == []
        plan.kvs = [k for k in plan.kvs if k.name not in ("glm-dsa.attention.q_lora_rank",
                                                          "glm-dsa.attention.key_length_mla")]
        for i, k in enumerate(plan.kvs):
            if k.name == "glm-dsa.attention.indexer.types":
                plan.kvs[i] = KV(k.name, VT.ARRAY, [True, True, True], VT.BOOL)
            elif k.name == "glm-dsa.attention.kv_lora_rank":
                plan.kvs[i] = KV(k.name, VT.UINT32, 16)
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert {("glm-dsa.attention.q_lora_rank", "required-key"), ("glm-dsa.attention.key_length_mla", "required-key"),
                ("glm-dsa.attention.indexer.types", "array-length")} <= found
        assert {("blk.2.attn_kv_a_norm.weight", "shape"), ("blk.2.attn_v_b.weight", "shape")} <= found
    finally:
        planned.close()


@pytest.mark.parametrize("fam", sorted(CASES))
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (bytes after the type's rounding; k_b / v_b split from
    kv_b_proj again), full accounting; one changed byte in the split attn_k_b fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "bf16"), lambda n: n.endswith("attn_k_b.weight"))


@pytest.mark.llama
@pytest.mark.parametrize("fam", sorted(CASES))
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], tmp_path: Path, fam: str,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar. The NextN block drafts
    (draft_n > 0) and speculative greedy equals plain greedy (the indexer head size is 64: llama.cpp's DSA cache
    rotates indexer keys by a Hadamard matrix of at least 64)."""
    assert_llama_server_drafts_losslessly(ckpts[fam], tmp_path, llama_bin)
