"""MiMo-V2 MTP sidecars from the checkpoint (``hf2gguf MIMO_V2_CHECKPOINT --mtp``, upstream's ``MimoV2Model``, GGUF
architecture ``mimo2``): byte parity with upstream b11434's ``convert_hf_to_gguf.py --mtp`` at bf16, f16, f32 and q8_0
on two tiny checkpoints of tests/mtp_makers.py stored as the releases are (block-scaled FP8 projections with float32
``weight_scale_inv``, three MTP layers ``model.mtp.layers.{0,1,2}``): MiMo-V2-Flash's layout (separate q / k / v,
attention sinks, ``attention_value_scale``), MiMo-V2.5's (the fused ``qkv_proj`` stored per tensor-parallel rank,
other dimensions) and MiMo-V2.5-Pro's (8 ranks, MXFP4 experts in the trunk); MiMo-V2-Flash's sidecar by default with its
MTP layers' q / k / v fused into ``attn_qkv`` (llama.cpp b11434's ``mimo2`` MTP graph aborts on upstream's three
tensors), upstream's bytes with ``--match-upstream``; the loader rules ``check`` applies, the one-line refusals, the shards read, ``verify``, and
(``llama`` tier) speculative greedy == plain greedy in llama-server.

The oracle manifests are ``tests/data/mtp/<family>-<outtype>-mtp.json``: upstream's own ``--mtp`` files of the same
checkpoints, every KV (``general.*`` included) and every tensor's bytes (regenerate with the command in
tests/mtp_makers.py's docstring). Upstream's converter is not run here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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
    copy_checkpoint,
    manifest,
)

from dspark_convert import convert
from dspark_convert.check import check_plan, errors
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.roles.convert import ConvertOptions

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"mimo2": "MiMo-V2-Flash: hidden 256, 2 trunk layers, 4 heads of 48 (V 32), 1 global / 2 sliding KV heads, "
                  "separate FP8 q / k / v ending in partial 128-row tiles, sinks, attention_value_scale",
         "mimo2-fused": "MiMo-V2.5: the fused FP8 qkv_proj over 4 ranks of 60 rows, hidden 192 (a partial column "
                        "tile), 6 heads of 24 (V 8), 2 global / 3 sliding KV heads, MLP width 200 and attention "
                        "output width 48 (F16 under q8_0), no sinks, no value scale",
         "mimo2-pro": "MiMo-V2.5-Pro: the fused qkv_proj over 8 ranks of 26 rows, the trunk's experts stored MXFP4 "
                      "(general.file_type MOSTLY_MXFP4_MOE at every outtype), hidden 128, MLP width 96"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "mimo2")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_mimo2_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant. MiMo-V2-Flash with ``--match-upstream`` (its default file
    fuses q / k / v), where ``check``'s one error is upstream's layout: separate q / k / v the MTP graph aborts on."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path, match_upstream=fam == "mimo2")


def test_flash_default_fuses_qkv_and_keeps_everything_else(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The default Flash sidecar: upstream's header, and upstream's tensors except each MTP block's attn_q / attn_k /
    attn_v, written as one attn_qkv whose bytes are theirs one after the other (at every outtype); ``check`` passes;
    upstream's own layout fails ``check`` on exactly the three missing attn_qkv (rule mtp-graph)."""
    from dspark_convert.check import check_file

    for outtype in OUTTYPES:
        ours, upstream = tmp_path / f"fused.{outtype}.gguf", tmp_path / f"upstream.{outtype}.gguf"
        r = convert(ckpts["mimo2"], None, ours, outtype=outtype, mtp=True)
        assert r.plan.differs_from_upstream == [f"blk.{i}.attn_qkv.weight" for i in (2, 3, 4)]
        assert any("written as one attn_qkv" in n for n in r.plan.notes)
        r = convert(ckpts["mimo2"], None, upstream, outtype=outtype, mtp=True, match_upstream=True)
        assert r.plan.differs_from_upstream == []
        a, b = describe(ours), manifest(f"mimo2-{outtype}-mtp")
        assert describe(upstream) == b and a["kv"] == b["kv"]
        qkv = ("attn_q.weight", "attn_k.weight", "attn_v.weight")
        assert [t for t in a["tensors"] if not t["name"].endswith("attn_qkv.weight")] == \
               [t for t in b["tensors"] if not t["name"].endswith(qkv)]
        fa, fb = read_gguf(ours), read_gguf(upstream)
        for bid in (2, 3, 4):
            fused = bytes(fa.tensor_bytes(f"blk.{bid}.attn_qkv.weight"))
            assert fused == b"".join(bytes(fb.tensor_bytes(f"blk.{bid}.{n}")) for n in qkv)
            assert list(next(t for t in fa.tensors if t.name == f"blk.{bid}.attn_qkv.weight").ne) == [256, 192 + 96 + 64]
        fa.close()
        fb.close()
        assert errors(check_file(ours)) == []
        assert sorted((f.subject, f.rule) for f in errors(check_file(upstream))) == \
               [(f"blk.{i}.attn_qkv.weight", "mtp-graph") for i in (2, 3, 4)]


def test_the_cli_writes_the_same_file_from_the_mtp_shards_only(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The summary names the head and the shards read: the embedding's and the MTP layers', not the trunk's."""
    text = assert_cli_writes_the_manifest(
        ckpts["mimo2"], "mimo2", tmp_path,
        "MTP sidecar (MiMoV2FlashForCausalLM -> mimo2): 3 MTP block(s) after 2 trunk layers", flags=("--match-upstream",))
    assert "read 2 of 3 shards" in text


def test_only_the_head_is_selected(ckpts: dict[str, Path]) -> None:
    """The tensors read: the MTP layers (their FP8 scales included), the embedding, the final norm and the head."""
    from dspark_convert.hf.checkpoint import Checkpoint
    from dspark_convert.variants.mtp.mtp import draft_tensors

    ck = Checkpoint(ckpts["mimo2"], select=draft_tensors(json.loads((ckpts["mimo2"] / "config.json").read_text())))
    try:
        names = list(ck.names)
    finally:
        ck.close()
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
            "model.mtp.layers.2.self_attn.q_proj.weight_scale_inv"} <= set(names)
    assert not [n for n in names if n.startswith("model.layers.")]
    assert len(names) == 3 + 3 * 20


def test_default_name_is_the_mtp_keyword(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: ``mtp-<name>-<TYPE>.gguf``, upstream's ``MimoV2Model.prepare_metadata`` name."""
    assert_default_name(ckpts["mimo2-fused"], "mimo2-fused", tmp_path, monkeypatch, "mtp-MiMo-V2.5-Tiny-BF16.gguf", outtype="bf16")


def test_mxfp4_experts_name_the_file_mxfp4_moe(ckpts: dict[str, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint storing its experts MXFP4: ``general.file_type`` 38 and upstream's default name
    ``mtp-<name>-MXFP4_MOE.gguf`` whatever the outtype (the MTP tensors themselves follow the outtype)."""
    monkeypatch.chdir(tmp_path)
    r = convert(ckpts["mimo2-pro"], None, outtype="q8_0", mtp=True)
    assert r.path is not None and r.path.name == "mtp-MiMo-V2.5-Pro-Tiny-MXFP4_MOE.gguf"
    assert describe(r.path) == manifest("mimo2-pro-q8_0-mtp")
    for outtype in OUTTYPES:
        assert manifest(f"mimo2-pro-{outtype}-mtp")["kv"]["general.file_type"]["value"] == 38


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: three MTP blocks after the trunk, block_count = trunk + 3, the MTP
    blocks sliding-window in head_count_kv and the pattern, value_length v_head_dim, the rope width head_dim x
    0.334; FP8 weights dequantized (written at the outtype), the fused qkv as one tensor."""
    for fam, (kv_heads, k_len, v_len, rot, scale) in {"mimo2": ([1, 2, 2, 2, 2], 48, 32, 16, 0.707),
                                                      "mimo2-fused": ([2, 3, 3, 3, 3], 24, 8, 8, None),
                                                      "mimo2-pro": ([2, 2, 2, 2, 2], 24, 8, 8, None)}.items():
        for outtype in OUTTYPES:
            m = manifest(f"{fam}-{outtype}-mtp")
            kv = {k: v.get("value") for k, v in m["kv"].items()}
            assert (kv["general.architecture"], kv["mimo2.block_count"], kv["mimo2.nextn_predict_layers"]) == \
                   ("mimo2", 5, 3)
            assert kv["mimo2.attention.head_count_kv"] == kv_heads
            assert kv["mimo2.attention.sliding_window_pattern"] == [0, 1, 1, 1, 1]
            assert (kv["mimo2.attention.key_length"], kv["mimo2.attention.value_length"]) == (k_len, v_len)
            assert kv["mimo2.rope.dimension_count"] == rot
            assert (kv["mimo2.rope.freq_base"], kv["mimo2.rope.freq_base_swa"]) == (5000000.0, 10000.0)
            got = kv.get("mimo2.attention.value_scale")
            assert (got is None) if scale is None else abs(got - scale) < 1e-7
            blocks = {int(t["name"].split(".")[1]) for t in m["tensors"] if t["name"].startswith("blk.")}
            assert blocks == {2, 3, 4}
    flash = {t["name"]: (t["type"], t["ne"]) for t in manifest("mimo2-q8_0-mtp")["tensors"]}
    assert flash["blk.4.attn_q.weight"] == ("Q8_0", [256, 192]) and flash["blk.4.attn_k.weight"] == ("Q8_0", [256, 96])
    assert flash["blk.4.attn_sinks.weight"] == ("F32", [4]) and flash["blk.4.layer_output_norm.weight"][0] == "F32"
    fused = {t["name"]: (t["type"], t["ne"]) for t in manifest("mimo2-fused-q8_0-mtp")["tensors"]}
    assert fused["blk.2.attn_qkv.weight"] == ("Q8_0", [192, 144 + 72 + 24])
    assert fused["blk.2.ffn_down.weight"][0] == fused["blk.2.attn_output.weight"][0] == "F16"
    assert not [n for n in fused if "attn_q." in n or "sinks" in n]


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["mimo2"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def _drop_layer_2(t: dict[str, Any]) -> None:
    for k in [k for k in t if k.startswith("model.mtp.layers.2.")]:
        del t[k]


def _short_qkv_scale(t: dict[str, Any]) -> None:
    k = "model.mtp.layers.0.self_attn.qkv_proj.weight_scale_inv"
    t[k] = t[k][:3].clone()


_QC = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8"}


@pytest.mark.parametrize(("fam", "config", "edit", "message"), [
    ("mimo2", {"topk_method": "greedy"}, None, r"topk_method is 'greedy'; upstream's MimoV2Model asserts 'noaux_tc'"),
    ("mimo2", {"swa_head_dim": 32}, None, r"swa_head_dim 32 differs from head_dim 48; upstream's MimoV2Model asserts"),
    ("mimo2", {"swa_num_key_value_heads": None}, None, r"key 'swa_num_key_value_heads' is missing; upstream's "
                                                       r"MimoV2Model reads it"),
    ("mimo2", {"partial_rotary_factor": None}, None, r"no partial_rotary_factor in the rope parameters"),
    ("mimo2", {"hybrid_layer_pattern": [0]}, None, r"hybrid_layer_pattern is \[0\], expected num_hidden_layers 2"),
    ("mimo2", {"quantization_config": {"quant_method": "awq"}}, None, r"quant_method 'awq': the MiMo-V2 MTP head"),
    ("mimo2", {"quantization_config": {**_QC, "weight_block_size": [128]}}, None,
     r"weight_block_size is \[128\], expected two positive integers"),
    ("mimo2", {"quantization_config": None}, None, r"tensor 'model.mtp.layers.0.mlp.down_proj.weight' has dtype "
                                                   r"F8_E4M3 but the config declares no quantization_config"),
    ("mimo2", {"quantization_config": {**_QC, "weight_block_size": [64, 128]}}, None,
     r"'model.mtp.layers.0.mlp.down_proj.weight_scale_inv' has shape \[2, 3\]; expected \[4, 3\]"),
    ("mimo2", None, _drop_layer_2, r"the checkpoint has MTP layers \[0, 1\]; upstream's MimoV2Model writes exactly "
                                   r"model.mtp.layers.0..2"),
    ("mimo2-fused", None, _short_qkv_scale, r"'model.mtp.layers.0.self_attn.qkv_proj.weight_scale_inv' has 3 scale "
                                            r"rows: not 8 or 4 tensor-parallel ranks"),
    ("mimo2-pro", {"quantization_config": {**_QC, "weight_block_size": [128, 128], "store_dtype": "mxfp4",
                                           "mxfp4_block_size": 16}}, None, r"mxfp4_block_size is 16; upstream's "
                                                                            r"MimoV2Model repacks MXFP4 experts in "
                                                                            r"ggml's blocks of 32 only"),
    ("mimo2-fused", {"swa_num_key_value_heads": 2}, None, r"'model.mtp.layers.0.self_attn.qkv_proj.weight' has 240 "
                                                          r"rows; expected q \+ k \+ v = 208"),
])
def test_a_head_upstream_cannot_convert_is_refused_in_one_line(
        ckpts: dict[str, Path], tmp_path: Path, fam: str, config: dict[str, Any] | None,
        edit: Callable[[dict[str, Any]], None] | None, message: str) -> None:
    ck = copy_checkpoint(ckpts[fam], tmp_path / "bad", config, edit, delete=None)
    with pytest.raises(ConvertError, match=message) as e:
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x.gguf").exists()


def test_the_cli_refusal_is_one_line_and_writes_nothing(ckpts: dict[str, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dspark_convert.cli import app

    ck = copy_checkpoint(ckpts["mimo2"], tmp_path / "bad", {"topk_method": "greedy"}, delete=None)
    out = tmp_path / "mtp.gguf"
    r = CliRunner().invoke(app, ["hf2gguf", str(ck), "--mtp", "-o", str(out)])
    assert r.exit_code != 0
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "topk_method is 'greedy'" in lines[0]
    assert list(tmp_path.glob("*.gguf")) == []


def _planned(ck: Path) -> Any:
    return plan_conversion(ck, None, options=ConvertOptions(outtype="bf16", upstream_flags=frozenset({"mtp"})))


@pytest.mark.parametrize(("fam", "drop"), [
    ("mimo2", "blk.2.nextn.eh_proj.weight"), ("mimo2", "blk.3.nextn.hnorm.weight"), ("mimo2", "blk.4.attn_qkv.weight"),
    ("mimo2", "blk.3.attn_output.weight"), ("mimo2", "blk.4.ffn_norm.weight"),
    ("mimo2", "blk.2.attn_norm.weight"), ("mimo2", "output.weight"), ("mimo2", "token_embd.weight"),
    ("mimo2-fused", "blk.2.attn_qkv.weight"), ("mimo2-pro", "blk.4.attn_qkv.weight"),
])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], fam: str, drop: str) -> None:
    """Each required tensor's absence is a finding; dropping the fused attn_qkv makes attn_q / k / v required."""
    assert_head_required(ckpts[fam], drop, drop.replace("attn_qkv", "attn_q"))


def test_loader_rules_check_the_mimo2_keys(ckpts: dict[str, Path]) -> None:
    """A missing sliding window / RMS epsilon, per-block arrays of the wrong length, a KV head count the tensors do
    not have and a block without its dense FFN (the MTP graph asserts it: rule mtp-graph) are errors; the sinks and
    layer_output_norm are optional."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = _planned(ckpts["mimo2"])
    try:
        plan = planned.plan
        plan.tensors = [t for t in plan.tensors if not t.name.endswith(("attn_sinks.weight", "layer_output_norm.weight"))]
        assert errors(check_plan(plan)) == []
        plan.tensors = [t for t in plan.tensors if t.name != "blk.3.ffn_up.weight"]
        plan.kvs = [k for k in plan.kvs if k.name not in ("mimo2.attention.sliding_window",
                                                          "mimo2.attention.layer_norm_rms_epsilon")]
        for i, k in enumerate(plan.kvs):
            if k.name == "mimo2.attention.sliding_window_pattern":
                plan.kvs[i] = KV(k.name, VT.ARRAY, [0, 1, 1, 1], VT.INT32)
            elif k.name == "mimo2.attention.head_count_kv":
                plan.kvs[i] = KV(k.name, VT.ARRAY, [1, 2, 2, 2, 4], VT.INT32)
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert {("mimo2.attention.sliding_window", "required-key"),
                ("mimo2.attention.layer_norm_rms_epsilon", "required-key"),
                ("mimo2.attention.sliding_window_pattern", "array-length"), ("blk.3.ffn_up.weight", "mtp-graph")} <= found
        assert ("blk.4.attn_qkv.weight", "shape") in found and ("blk.3.attn_qkv.weight", "shape") not in found
    finally:
        planned.close()


@pytest.mark.parametrize(("fam", "pick", "match"), [("mimo2", "attn_qkv.weight", False), ("mimo2", "attn_q.weight", True),
                                                    ("mimo2-fused", "attn_qkv.weight", False),
                                                    ("mimo2-pro", "attn_qkv.weight", False)])
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, pick: str,
                                                             match: bool, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (the FP8 weights dequantized from their scales again, the
    fused qkv regrouped or Flash's q / k / v put together again, then rounded to the type), full accounting with the
    scales; one changed byte in a dequantized projection fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0", "f16", "bf16"), lambda n: n.endswith(pick),
                                     match_upstream=match)


def test_verify_spells_the_dequantization_independently(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The q rows of the f32 sidecar's fused attn_qkv are e4m3(w) x the scale of their 128 x 128 tile: checked here
    from the raw F8_E4M3 bytes with torch, the way upstream computes it."""
    import numpy as np
    from safetensors.torch import load_file

    out = tmp_path / "f32.gguf"
    convert(ckpts["mimo2"], None, out, outtype="f32", mtp=True)
    t = load_file(str(ckpts["mimo2"] / "model-00003-of-00003.safetensors"))
    w, s = t["model.mtp.layers.1.self_attn.q_proj.weight"], t["model.mtp.layers.1.self_attn.q_proj.weight_scale_inv"]
    want = w.float() * s.repeat_interleave(128, 0)[:w.shape[0]].repeat_interleave(128, 1)[:, :w.shape[1]]
    f = read_gguf(out)
    got = np.frombuffer(bytes(f.tensor_bytes("blk.3.attn_qkv.weight")), np.float32).reshape(-1, w.shape[1])[:w.shape[0]]
    f.close()
    assert np.array_equal(got, want.numpy())


@pytest.mark.llama
@pytest.mark.parametrize("fam", sorted(CASES))
def test_llama_server_drafts_with_the_sidecar(ckpts: dict[str, Path], tmp_path: Path, fam: str,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar (its three MTP blocks chained).
    The head drafts (draft_n > 0) and speculative greedy equals plain greedy."""
    assert_llama_server_drafts_losslessly(ckpts[fam], tmp_path, llama_bin)


@pytest.mark.llama
def test_llama_server_aborts_on_upstreams_flash_layout(ckpts: dict[str, Path], tmp_path: Path,
                                                       llama_bin: tuple[Path, Path]) -> None:
    """Why the default Flash sidecar fuses q / k / v: upstream's own layout (``--match-upstream``) loads, and
    llama-server b11434 aborts in its mimo2 MTP graph as soon as it drafts."""
    import mtp_makers

    from dspark_convert.llamacpp.server import LlamaServer, ServerError

    binary, tree = llama_bin
    trunk = mtp_makers.upstream_convert(ckpts["mimo2"], tmp_path / "trunk.gguf", "f32", ("--no-mtp",), tree=tree)
    side = tmp_path / "mtp.gguf"
    convert(ckpts["mimo2"], None, side, outtype="f32", mtp=True, match_upstream=True)
    with pytest.raises(ServerError, match=r"MIMO2 MTP requires fused attn_qkv"):
        with LlamaServer(binary, trunk, extra=["-md", str(side), "--spec-type", "draft-mtp"]) as s:
            s.complete([400, 401, 72, 300], 8)


@pytest.mark.parametrize("fam", sorted(CASES))
def test_small_chunks_write_the_same_bytes(ckpts: dict[str, Path], fam: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few rows (across the q / k / v parts and the tensor-parallel ranks of a fused qkv_proj, and
    inside 128-row scale blocks) give the bytes one chunk per tensor gives: the manifests', or Flash's fused file."""
    from dspark_convert.hf2gguf import writer

    whole = tmp_path / "whole.gguf"
    convert(ckpts[fam], None, whole, outtype="q8_0", mtp=True)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(writer, "MIN_CHUNK_BYTES", 3000)
    small = tmp_path / "small.gguf"
    convert(ckpts[fam], None, small, outtype="q8_0", mtp=True)
    assert small.read_bytes() == whole.read_bytes()
    if fam != "mimo2":
        assert describe(small) == manifest(f"{fam}-q8_0-mtp")
