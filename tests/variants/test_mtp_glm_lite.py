"""GLM-4.7-Flash MTP sidecars from the checkpoint (``hf2gguf GLM47_FLASH_CHECKPOINT --mtp``, upstream's
``Glm4MoeLiteModel``, GGUF architecture ``deepseek2``: GLM-5's MLA / MoE NextN layer without the DSA indexer, under
DeepseekV2's header): byte parity with upstream b11434's ``convert_hf_to_gguf.py --mtp`` at bf16, f16, f32 and q8_0 on
three tiny checkpoints of tests/mtp_makers.py (the default shape with an untied head and ``first_k_dense_replace``
1, a wider one with tied embeddings and no ``first_k_dense_replace``, one with legacy YaRN ``rope_scaling`` whose
config leaves keys to transformers' ``Glm4MoeLiteConfig`` defaults), the loader rules ``check`` applies, the one-line
refusals, ``verify``, and (``llama`` tier) speculative greedy == plain greedy in llama-server.

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
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.roles.convert import ConvertOptions

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"glm4-lite": "GLM-4.7-Flash: hidden 64, 2 trunk layers, 4 heads, q/kv LoRA 48/32, 4 experts, untied head, "
                      "first_k_dense_replace 1",
         "glm4-lite-wide": "hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and nope 24 (attn_v_b / attn_k_b F16 "
                           "under q8_0), 8 experts in 2 groups, 2 shared, tied embeddings (no lm_head), no "
                           "first_k_dense_replace",
         "glm4-lite-yarn": "legacy rope_scaling YaRN with mscale_all_dim; no rope_theta, rms_norm_eps, n_group / "
                           "topk_group, norm_topk_prob, routed_scaling_factor, max_position_embeddings "
                           "(Glm4MoeLiteConfig defaults)"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made by transformers from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "glm_lite")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_glm_lite_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


def test_the_cli_writes_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    assert_cli_writes_the_manifest(
        ckpts["glm4-lite"], "glm4-lite", tmp_path,
        "MTP sidecar (Glm4MoeLiteForCausalLM -> deepseek2): 1 MTP block(s) after 2 trunk layers")


def test_default_name_is_upstreams(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: upstream's own ``mtp-<name>-<TYPE>.gguf`` (``Glm4MoeLiteModel.prepare_metadata`` with the output
    a folder), same bytes."""
    assert_default_name(ckpts["glm4-lite"], "glm4-lite", tmp_path, monkeypatch, "mtp-GLM-4.7-Flash-Tiny-Q8_0.gguf")


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: arch deepseek2, the NextN block after the trunk, block_count = trunk + 1,
    MLA as MQA (head_count_kv 1, key_length = kv_lora_rank + rope), rope.dimension_count = qk_rope_head_dim, no
    indexer and no expert_gating_func; kv_b_proj split into k_b / v_b; the head dropped when tied."""
    for fam, (n, kv_lora, rope, nope, v, heads, lead, tied) in {
            "glm4-lite": (2, 32, 16, 32, 32, 4, 1, False),
            "glm4-lite-wide": (3, 48, 16, 24, 32, 6, 0, True),
            "glm4-lite-yarn": (2, 32, 16, 32, 32, 4, 1, False)}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            assert (kv["general.architecture"], kv["deepseek2.block_count"], kv["deepseek2.nextn_predict_layers"]) == \
                   ("deepseek2", n + 1, 1)
            assert kv["deepseek2.attention.head_count_kv"] == 1
            assert (kv["deepseek2.attention.key_length"], kv["deepseek2.attention.value_length"]) == (kv_lora + rope,
                                                                                                    kv_lora)
            assert kv["deepseek2.attention.key_length_mla"] == nope + rope
            assert kv["deepseek2.rope.dimension_count"] == rope
            assert kv["deepseek2.leading_dense_block_count"] == lead
            assert not any("indexer" in k or "expert_gating_func" in k for k in kv)
            keys = list(kv)
            assert keys.index("deepseek2.nextn_predict_layers") == keys.index("deepseek2.rope.dimension_count") + (
                2 if fam == "glm4-lite-yarn" else 1)
            shapes = {t["name"]: t["ne"] for t in m["tensors"]}
            assert {int(t.split(".")[1]) for t in shapes if t.startswith("blk.")} == {n}
            assert shapes[f"blk.{n}.attn_k_b.weight"] == [nope, kv_lora, heads]
            assert shapes[f"blk.{n}.attn_v_b.weight"] == [kv_lora, v, heads]
            assert ("output.weight" in shapes) is not tied
            assert not any(".indexer." in t for t in shapes)
    yarn = {k: v.get("value") for k, v in manifest("glm4-lite-yarn-bf16-mtp")["kv"].items()}
    assert (yarn["deepseek2.rope.scaling.type"], yarn["deepseek2.context_length"]) == ("yarn", 202752)
    assert (yarn["deepseek2.rope.scaling.factor"], yarn["deepseek2.rope.freq_base"]) == (4.0, 10000.0)
    assert abs(yarn["deepseek2.rope.scaling.yarn_log_multiplier"] - 0.1) < 1e-7
    assert (yarn["deepseek2.expert_weights_scale"], yarn["deepseek2.expert_weights_norm"]) == (
        pytest.approx(1.8), True)
    assert (yarn["deepseek2.expert_group_count"], yarn["deepseek2.attention.layer_norm_rms_epsilon"]) == (
        1, pytest.approx(1e-5))
    wide = {t["name"]: t["type"] for t in manifest("glm4-lite-wide-q8_0-mtp")["tensors"]}
    assert wide["blk.3.attn_k_b.weight"] == wide["blk.3.attn_v_b.weight"] == wide["blk.3.ffn_down_exps.weight"] == "F16"
    assert wide["blk.3.ffn_gate_inp.weight"] == "F32"
    assert wide["blk.3.attn_q_b.weight"] == "Q8_0"


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["glm4-lite"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def _edited(src: Path, dst: Path, **config: Any) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        shutil.copyfile(p, dst / p.name)
    cfg = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    return dst


#: (troubleshooting id, config edit, the error line's text (after ``CKPT/config.json: `` or ``CKPT/…: `` where it
#: names a file), as a regex)
REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("mtp-no-nextn-layers", {"num_nextn_predict_layers": 0}, r"no MTP head: 'num_nextn_predict_layers' is 0"),
    ("mtp-nextn-layers-disagree", {"num_hidden_layers": 1},
     r"num_nextn_predict_layers is 1 but the checkpoint has NextN layers \[1, 2\] after num_hidden_layers 1"),
    ("mtp-kv-b-proj-rows", {"num_key_value_heads": 2},
     r"tensor 'model.layers.2.self_attn.kv_b_proj.weight' has shape \[256, 32\]; upstream splits it into "
     r"num_key_value_heads 2 x \(qk_nope_head_dim 32 \+ v_head_dim 32\) = 128 rows"),
    ("mtp-expert-beyond-count", {"n_routed_experts": 3}, r"expert 3 is beyond n_routed_experts 3"),
    ("glm-lite-null-key", {"kv_lora_rank": None},
     r"key 'kv_lora_rank' is null; transformers' Glm4MoeLiteConfig rejects it, and upstream then reads config.json "
     r"without the class's defaults"),
    ("glm-lite-null-q-lora-rank", {"q_lora_rank": None},
     r"key 'q_lora_rank' is null: upstream then writes attn_q without attention.q_lora_rank, a sidecar llama.cpp "
     r"b11434's deepseek2 loader does not load \(the key is required, and its MTP graph asserts n_lora_q > 0\)"),
    ("glm-lite-null-head-dim", {"head_dim": None},
     r"key 'head_dim' is null; transformers' Glm4MoeLiteConfig sets qk_rope_head_dim from it"),
    ("glm-lite-dense-mtp-block", {"first_k_dense_replace": 3},
     r"the planned file would not load in llama.cpp: deepseek2.leading_dense_block_count: is 3, above the trunk's 2 "
     r"layers: the MTP block is dense"),
]


@pytest.mark.parametrize(("cid", "config", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_head_that_does_not_match_its_config_is_refused(ckpts: dict[str, Path], tmp_path: Path, cid: str,
                                                          config: dict[str, Any], message: str) -> None:
    """One line on stderr, exit 2, nothing written (the CLI), naming the config file, tensor or GGUF key."""
    from typer.testing import CliRunner

    from dspark_convert.cli import app

    ck = _edited(ckpts["glm4-lite"], tmp_path / "bad", **config)
    out = tmp_path / "x.gguf"
    with pytest.raises(ConvertError, match=message):
        convert(ck, None, out, mtp=True)
    r = CliRunner().invoke(app, ["hf2gguf", str(ck), "--mtp", "-o", str(out)])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith((f"error: {ck}/", "error: the planned file would not load in llama.cpp: ")), r.stderr
    assert __import__("re").search(message, r.stderr)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


def test_every_refusal_is_in_the_troubleshooting_catalogue() -> None:
    """Each refusal has a section in docs/troubleshooting.md quoting its one error line (CKPT for the folder)."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    for cid, _, message in REFUSALS:
        head = f"### `{cid}`\n```\n"
        assert head in text, cid
        quoted = text.split(head, 1)[1].split("\n```", 1)[0]
        assert quoted.startswith(("error: CKPT/", "error: the planned file")) and "\n" not in quoted, cid
        assert re.search(message, quoted), cid


def test_config_aliases_are_transformers(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """``head_dim`` and ``num_local_experts`` are ``Glm4MoeLiteConfig`` aliases: ``head_dim`` sets
    ``qk_rope_head_dim`` (a kv_a_proj_with_mqa of the old width then no longer fits: refused by the loader rules)
    and writes no key_length of its own; ``num_local_experts`` is ``n_routed_experts``."""
    same = _edited(ckpts["glm4-lite"], tmp_path / "GLM-4.7-Flash-Tiny", head_dim=16, num_local_experts=4)
    out = tmp_path / "same.gguf"
    convert(same, None, out, outtype="bf16", mtp=True)
    assert describe(out) == manifest("glm4-lite-bf16-mtp")
    kvs = read_gguf(out).kvs
    assert (kvs["deepseek2.rope.dimension_count"].value, kvs["deepseek2.attention.key_length"].value) == (16, 48)
    assert kvs["deepseek2.expert_count"].value == 4
    wider = _edited(ckpts["glm4-lite"], tmp_path / "wider", head_dim=8, num_local_experts=4)
    with pytest.raises(ConvertError, match=r"would not load in llama.cpp: blk\.2\.attn_kv_a_mqa\.weight: has ggml "
                                           r"shape \[64, 48\], expected \[64, 40\] \(kv_lora_rank 32 \+ "
                                           r"rope.dimension_count 8\)"):
        convert(wider, None, tmp_path / "w.gguf", outtype="bf16", mtp=True)
    assert not (tmp_path / "w.gguf").exists()


@pytest.mark.parametrize("drop", ["blk.2.nextn.eh_proj.weight", "blk.2.attn_k_b.weight", "blk.2.attn_v_b.weight",
                                  "blk.2.attn_kv_a_mqa.weight", "blk.2.attn_q_a_norm.weight", "blk.2.ffn_norm.weight",
                                  "blk.2.ffn_up_exps.weight", "blk.2.ffn_gate_shexp.weight", "token_embd.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    assert_head_required(ckpts["glm4-lite"], drop)


def test_loader_rules_check_the_mla_keys(ckpts: dict[str, Path]) -> None:
    """exp_probs_b.bias and the head are optional; a missing q_lora_rank / key_length_mla, expert_used_count 0 and
    a kv_lora_rank the tensors do not have are errors; two NextN blocks break the single-block MTP graph."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV
    from dspark_convert.variants.mtp.loader import MTP_GRAPH

    planned = plan_conversion(ckpts["glm4-lite"], None, options=ConvertOptions(outtype="bf16",
                                                                              upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        plan.tensors = [t for t in plan.tensors if t.name not in ("blk.2.exp_probs_b.bias", "output.weight")]
        assert errors(check_plan(plan)) == []
        plan.kvs = [k for k in plan.kvs if k.name not in ("deepseek2.attention.q_lora_rank",
                                                          "deepseek2.attention.key_length_mla")]
        for i, k in enumerate(plan.kvs):
            if k.name == "deepseek2.expert_used_count":
                plan.kvs[i] = KV(k.name, VT.UINT32, 0)
            elif k.name == "deepseek2.attention.kv_lora_rank":
                plan.kvs[i] = KV(k.name, VT.UINT32, 16)
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert {("deepseek2.attention.q_lora_rank", "required-key"),
                ("deepseek2.attention.key_length_mla", "required-key"),
                ("deepseek2.expert_used_count", "required-key")} <= found
        assert {("blk.2.attn_kv_a_norm.weight", "shape"), ("blk.2.attn_v_b.weight", "shape")} <= found
        for i, k in enumerate(plan.kvs):
            if k.name in ("deepseek2.block_count", "deepseek2.nextn_predict_layers"):
                plan.kvs[i] = KV(k.name, VT.UINT32, k.value + 1)
        assert ("deepseek2.nextn_predict_layers", MTP_GRAPH) in {(f.subject, f.rule) for f in errors(check_plan(plan))}
    finally:
        planned.close()


@pytest.mark.parametrize("fam", sorted(CASES))
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (bytes after the type's rounding; k_b / v_b split from
    kv_b_proj again), full accounting (the tied head is not expected); one changed byte in the split attn_k_b fails
    that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "bf16"), lambda n: n.endswith("attn_k_b.weight"))


def test_verify_accounts_for_a_stored_tied_head(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """A tied checkpoint that still stores lm_head.weight: upstream drops it, so does our file, and verify does not
    count it as a checkpoint tensor left out."""
    from dspark_convert.verify import verify

    ck = _edited(ckpts["glm4-lite"], tmp_path / "tied", tie_word_embeddings=True)
    out = tmp_path / "tied.gguf"
    convert(ck, None, out, outtype="bf16", mtp=True)
    names = [t.name for t in read_gguf(out).tensors]
    assert "output.weight" not in names and len(names) == len(manifest("glm4-lite-bf16-mtp")["tensors"]) - 1
    r = verify(out, ck, None, quality=False)
    assert r.passed and len(r.outputs) == len(names)


@pytest.mark.llama
@pytest.mark.parametrize("fam", sorted(CASES))
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], tmp_path: Path, fam: str,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar. The NextN block drafts
    (draft_n > 0) and speculative greedy equals plain greedy."""
    assert_llama_server_drafts_losslessly(ckpts[fam], tmp_path, llama_bin)


@pytest.mark.llama
def test_check_pairs_the_sidecar_with_upstreams_trunk(ckpts: dict[str, Path], tmp_path: Path,
                                                       llama_bin: tuple[Path, Path]) -> None:
    """``check SIDECAR --target TRUNK`` (upstream's ``--no-mtp`` file): the MTP pairing rules pass (same arch,
    trunk block count, width and every deepseek2.* key) and the sidecar is auto-detected as draft-mtp."""
    import mtp_makers
    from typer.testing import CliRunner

    from dspark_convert.cli import app

    _, tree = llama_bin
    trunk = mtp_makers.upstream_convert(ckpts["glm4-lite"], tmp_path / "trunk.gguf", "bf16", ("--no-mtp",), tree=tree)
    side = tmp_path / "mtp-glm.gguf"
    convert(ckpts["glm4-lite"], None, side, outtype="bf16", mtp=True)
    r = CliRunner().invoke(app, ["check", str(side), "--target", str(trunk)], terminal_width=200)
    assert r.exit_code == 0, r.output
    rows = {ln.split()[0]: ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("mtp-")}
    assert rows == {"mtp-arch": "pass", "mtp-trunk": "pass", "mtp-width": "pass", "mtp-header": "pass",
                    "mtp-spec-type": "info"}
    assert "24 deepseek2.* keys agree" in r.stdout and "FITS: 9 passed, 0 failed" in r.stdout
