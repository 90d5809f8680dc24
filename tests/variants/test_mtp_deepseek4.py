"""DeepSeek-V4 MTP sidecars from the checkpoint (``hf2gguf DEEPSEEK_V4_CHECKPOINT --mtp``, upstream's
``DeepseekV4Model``, GGUF architecture ``deepseek4``): byte parity with upstream b11434's ``convert_hf_to_gguf.py
--mtp`` at bf16, f16, f32 and q8_0 on two tiny checkpoints of tests/mtp_makers.py stored as the released one is (FP8
weights with tile scales, FP4 experts; the default shape, and a wide one with an FP8 head, rows that fall back to F16,
two hyper-connection streams and the MTP layer in two shards), reading only the shards holding the head, the
loader rules ``check`` applies, the one-line refusals and ``verify`` (eh_proj rebuilt from e_proj / h_proj, the
MXFP4 stacks from the FP4 codes).

The oracle manifests are ``tests/data/mtp/deepseek4{,-wide}-<outtype>-mtp.json``: upstream's own ``--mtp`` files of
the same checkpoints (regenerate with the command in tests/mtp_makers.py's docstring). Upstream's converter is not run
here.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dsv4_support import Tensors, edit_checkpoint
from golden_manifest import describe
from mtp_family_kit import (
    OUTTYPES,
    assert_cli_writes_the_manifest,
    assert_default_name,
    assert_head_required,
    assert_identical_to_upstream,
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
CASES = {"deepseek4": "hidden 256, 2 trunk layers, 4 heads of 96, 4 FP4 experts of 160, hc 4, BF16 head, one MTP "
                      "shard",
         "deepseek4-wide": "hidden 384, 3 trunk layers (compress ratios 0/4/128, one hash layer), q_lora_rank 100 "
                           "(attn_q_b F16), 6 experts of 96, hc 2, FP8 head with head.scale, the MTP layer in two "
                           "shards"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """family -> its tiny checkpoint (made from a seed, as the manifests' were)."""
    return checkpoints(tmp_path_factory, CASES, "deepseek4")


@pytest.mark.parametrize("fam", sorted(CASES))
def test_deepseek4_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order), at the four outtypes;
    ``check`` passes and the file is the ``mtp`` variant."""
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


def test_the_manifests_are_sidecars_of_their_checkpoints() -> None:
    """What the oracle says upstream writes: the MTP block after the trunk (block_count n + 1, swiglu_clamp arrays of
    n + 1 entries), general.file_type 38 and the same bytes at every outtype; the expert stacks first (MXFP4),
    then eh_proj (Q8_0, 2 x hidden wide), then the rest in checkpoint order with the root output_hc_*; FP8 -> Q8_0
    (F16 when a row is not a multiple of 32), BF16 matrices BF16, vectors F32."""
    for fam, (n, hidden, hc, ratios, head) in {"deepseek4": (2, 256, 4, [0, 0, 0], "BF16"),
                                               "deepseek4-wide": (3, 384, 2, [0, 4, 128, 0], "Q8_0")}.items():
        ms = [manifest(f"{fam}-{outtype}-mtp") for outtype in OUTTYPES]
        assert all(m == ms[0] for m in ms)  # --outtype changes nothing in this file
        kv = {k: v.get("value") for k, v in ms[0]["kv"].items()}
        assert list(kv)[:2] == ["general.architecture", "tokenizer.chat_template"]
        assert (kv["general.architecture"], kv["deepseek4.block_count"], kv["deepseek4.nextn_predict_layers"]) == \
               ("deepseek4", n + 1, 1)
        assert kv["general.file_type"] == 38 and kv["deepseek4.attention.compress_ratios"] == ratios
        assert len(kv["deepseek4.swiglu_clamp_exp"]) == len(kv["deepseek4.swiglu_clamp_shexp"]) == n + 1
        assert kv["deepseek4.embedding_length_out"] == hidden * hc
        tensors = ms[0]["tensors"]
        names = [t["name"] for t in tensors]
        assert names[:4] == [f"blk.{n}.ffn_gate_exps.weight", f"blk.{n}.ffn_down_exps.weight",
                             f"blk.{n}.ffn_up_exps.weight", f"blk.{n}.nextn.eh_proj.weight"]
        assert {int(t.split(".")[1]) for t in names if t.startswith("blk.")} == {n}
        types = {t["name"]: (t["type"], t["ne"]) for t in tensors}
        assert types[f"blk.{n}.ffn_gate_exps.weight"][0] == "MXFP4"
        assert types[f"blk.{n}.nextn.eh_proj.weight"] == ("Q8_0", [2 * hidden, hidden])
        assert types["output.weight"][0] == head and types["token_embd.weight"][0] == "BF16"
        assert types["output_hc_fn.weight"] == ("F32", [hc * hidden, hc])
        assert types[f"blk.{n}.ffn_gate_inp.weight"][0] == "BF16"
        assert types[f"blk.{n}.nextn.shared_head_norm.weight"][0] == "F32"
    wide = {t["name"]: t["type"] for t in manifest("deepseek4-wide-q8_0-mtp")["tensors"]}
    assert wide["blk.3.attn_q_b.weight"] == "F16" and wide["blk.3.attn_q_a.weight"] == "Q8_0"


def test_only_the_shards_of_the_head_are_read(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """The trunk's shards are never opened: without them (the index still lists them) the file is the same, and the
    summary says how much was read and skipped."""
    ck = tmp_path / "no-trunk" / ckpts["deepseek4-wide"].name  # the name general.name comes from
    shutil.copytree(ckpts["deepseek4-wide"], ck)
    (ck / "model-00002-of-00005.safetensors").unlink()  # layers.1 and layers.2
    r = convert(ck, None, tmp_path / "x.gguf", outtype="q8_0", mtp=True)
    assert describe(tmp_path / "x.gguf") == manifest("deepseek4-wide-q8_0-mtp")
    note = next(n for n in r.notes if n.startswith("read "))
    assert note.startswith("read 4 of 5 shards") and "skipped 1 (about" in note


def test_the_cli_writes_the_same_file(ckpts: dict[str, Path], tmp_path: Path) -> None:
    text = assert_cli_writes_the_manifest(
        ckpts["deepseek4"], "deepseek4", tmp_path,
        "MTP sidecar (DeepseekV4ForCausalLM -> deepseek4): 1 MTP block(s) after 2 trunk layers", outtype="bf16")
    assert "read 3 of 4 shards" in text


def test_default_name_is_upstreams(ckpts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o: upstream's ``mtp-<name>-MXFP4_MOE.gguf`` (its file type is MXFP4_MOE whatever the outtype)."""
    assert_default_name(ckpts["deepseek4"], "deepseek4", tmp_path, monkeypatch, "mtp-DeepSeek-V4-Tiny-MXFP4_MOE.gguf")


def test_without_the_flag_it_is_a_target(ckpts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts["deepseek4"], None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_a_dspark_checkpoint_is_not_an_mtp_head(tmp_path: Path) -> None:
    """A DeepSeek-V4 checkpoint with a DSpark draft (``dspark_*`` keys) stays the dsv4 variant's: --mtp is refused
    in one line, and the draft converts without it."""
    from dsv4_support import make

    ck = make(tmp_path, "dspark")
    with pytest.raises(ConvertError, match=r"^--mtp: .* is not a target checkpoint whose MTP head is written here"):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert not (tmp_path / "x.gguf").exists()
    assert convert(ck, None, tmp_path / "d.gguf").family == "dspark_dsv4"


def _config(src: Path, dst: Path, **config: Any) -> Path:
    shutil.copytree(src, dst)
    cfg = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({k: v for k, v in {**cfg, **config}.items() if v != "DROP"}))
    return dst


@pytest.mark.parametrize(("config", "message"), [
    ({"num_nextn_predict_layers": 0}, r"no MTP head: 'num_nextn_predict_layers' is 0"),
    ({"num_nextn_predict_layers": 2}, r"num_nextn_predict_layers is 2 but the checkpoint has MTP layers mtp.0; "
                                      r"expected mtp.0..mtp.1"),
    ({"compress_ratios": "DROP"}, r"key 'compress_ratios' is missing; upstream's DeepSeek-V4 --mtp conversion reads it"),
    ({"n_routed_experts": 3}, r"expert 3 of mtp.0.ffn.experts.\*.w1 is beyond n_routed_experts 3"),
    ({"num_hash_layers": 3}, r"num_hash_layers 3 is beyond num_hidden_layers 2"),
    ({"compress_ratios": [0, 0]}, r"the planned file would not load in llama.cpp: deepseek4.attention.compress_ratios: "
                                  r"has 2 entries, expected at least block_count 3"),
])
def test_a_head_that_does_not_match_its_config_is_refused(ckpts: dict[str, Path], tmp_path: Path,
                                                          config: dict[str, Any], message: str) -> None:
    ck = _config(ckpts["deepseek4"], tmp_path / "bad", **config)
    with pytest.raises(ConvertError, match=message) as e:
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x.gguf").exists()


def _drop(*names: str) -> Callable[[Tensors], None]:
    def mutate(t: Tensors) -> None:
        for n in names:
            del t[n]
    return mutate


def _reshape(name: str, shape: tuple[int, ...]) -> Callable[[Tensors], None]:
    def mutate(t: Tensors) -> None:
        dt, a = t[name]
        t[name] = (dt, np.zeros(shape, a.dtype))
    return mutate


def _add(name: str, dtype: str, shape: tuple[int, ...]) -> Callable[[Tensors], None]:
    def mutate(t: Tensors) -> None:
        t[name] = (dtype, np.zeros(shape, np.uint16 if dtype == "BF16" else np.float32))
    return mutate


@pytest.mark.parametrize(("mutate", "message"), [
    (_drop("mtp.0.h_proj.weight", "mtp.0.h_proj.scale"),
     r"tensor 'mtp.0.e_proj.weight' has no partner 'mtp.0.h_proj.weight'"),
    (_drop("mtp.0.ffn.experts.1.w3.weight", "mtp.0.ffn.experts.1.w3.scale"),
     r"expert 1 of mtp.0.ffn.experts.\*.w3 is missing \(the config says 4 routed experts\)"),
    (_drop("mtp.0.attn.wkv.scale"), r"tensor 'mtp.0.attn.wkv.weight' is F8_E4M3 but the checkpoint has no "
                                    r"'mtp.0.attn.wkv.scale'"),
    (_drop("mtp.0.attn.wkv.weight", "mtp.0.attn.wkv.scale"),
     r"the planned file would not load in llama.cpp: blk.2.attn_kv.weight"),
    (_drop("mtp.0.hc_head_fn"), r"the planned file would not load in llama.cpp: output_hc_fn.weight"),
    (_drop("head.weight"), r"the planned file would not load in llama.cpp: output.weight"),
    (_reshape("mtp.0.h_proj.weight", (128, 256)), r"tensors 'mtp.0.e_proj.weight' \[256, 256\] and "
                                                  r"'mtp.0.h_proj.weight' \[128, 256\] cannot be concatenated"),
    (_reshape("mtp.0.ffn.experts.0.w2.weight", (256, 64)), r"tensor 'mtp.0.ffn.experts.0.w2.weight' is I8 \[256, 64\], "
                                                          r"expected I8 \[256, 80\]"),
    (_reshape("mtp.0.attn.wkv.scale", (2, 2)), r"tensor 'mtp.0.attn.wkv.scale' is F8_E8M0 \[2, 2\], expected F8_E8M0 "
                                               r"\[1, 2\]"),
    (_reshape("mtp.0.attn_norm.weight", (128,)), r"the planned file would not load in llama.cpp: "
                                                 r"blk.2.attn_norm.weight"),
    (_add("mtp.0.extra.weight", "BF16", (4, 4)), r"tensor 'mtp.0.extra.weight' is not part of a deepseek4 MTP head"),
    (_add("mtp.1.attn_norm.weight", "BF16", (256,)), r"num_nextn_predict_layers is 1 but the checkpoint has MTP "
                                                     r"layers mtp.0, mtp.1"),
])
def test_missing_or_misshapen_mtp_tensors_are_refused(ckpts: dict[str, Path], tmp_path: Path,
                                                      mutate: Callable[[Tensors], None], message: str) -> None:
    ck = tmp_path / "bad"
    shutil.copytree(ckpts["deepseek4"], ck)
    edit_checkpoint(ck, mutate)
    with pytest.raises(ConvertError, match=message) as e:
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x.gguf").exists()


def _plan(ck: Path) -> Any:
    return plan_conversion(ck, None, options=ConvertOptions(outtype="bf16", upstream_flags=frozenset({"mtp"})))


@pytest.mark.parametrize("drop", ["token_embd.weight", "output.weight", "output_hc_fn.weight", "output_hc_scale.weight",
                                  "blk.2.nextn.eh_proj.weight", "blk.2.nextn.enorm.weight", "blk.2.attn_sinks.weight",
                                  "blk.2.attn_output_a.weight", "blk.2.hc_ffn_fn.weight", "blk.2.exp_probs_b.bias",
                                  "blk.2.ffn_down_exps.weight", "blk.2.ffn_up_shexp.weight"])
def test_loader_rules_require_the_head(ckpts: dict[str, Path], drop: str) -> None:
    assert_head_required(ckpts["deepseek4"], drop)


def test_loader_rules_check_the_keys(ckpts: dict[str, Path]) -> None:
    """nextn_predict_layers 1 (the MTP graph asserts one block), expert_gating_func 4 (sqrtsoftplus), the per-block
    arrays' lengths, the keys the loader reads; the optional NextN tensors may be absent."""
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = _plan(ckpts["deepseek4"])
    try:
        plan = planned.plan
        plan.tensors = [t for t in plan.tensors if t.name != "blk.2.nextn.shared_head_norm.weight"]
        assert errors(check_plan(plan)) == []
        plan.kvs = [k for k in plan.kvs if k.name != "deepseek4.hyper_connection.count"]
        edits = {"deepseek4.expert_gating_func": KV("deepseek4.expert_gating_func", VT.UINT32, 2),
                 "deepseek4.swiglu_clamp_exp": KV("deepseek4.swiglu_clamp_exp", VT.ARRAY, [10.0, 10.0], VT.FLOAT32),
                 "deepseek4.attention.compress_ratios": KV("deepseek4.attention.compress_ratios", VT.ARRAY, [0, 0, 8],
                                                           VT.INT32)}
        plan.kvs = [edits.get(k.name, k) for k in plan.kvs]
        found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
        assert {("deepseek4.hyper_connection.count", "required-key"), ("deepseek4.expert_gating_func", "required-key"),
                ("deepseek4.swiglu_clamp_exp", "array-length"),
                ("deepseek4.attention.compress_ratios", "key-range")} <= found
        plan.kvs = [KV(k.name, VT.UINT32, 2) if k.name == "deepseek4.nextn_predict_layers" else k for k in plan.kvs]
        assert ("deepseek4.nextn_predict_layers", "required-key") in {(f.subject, f.rule) for f in
                                                                      errors(check_plan(plan))}
    finally:
        planned.close()


@pytest.mark.parametrize("fam", sorted(CASES))
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (FP8 dequantized in torch and rounded to Q8_0 / F16, eh_proj
    concatenated again, the MXFP4 stacks rebuilt from the FP4 codes), full accounting; one changed byte in eh_proj
    fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("q8_0",), lambda n: n.endswith("nextn.eh_proj.weight"))


def test_verify_catches_a_changed_mxfp4_code(ckpts: dict[str, Path], tmp_path: Path) -> None:
    from dspark_convert.verify import verify

    out = tmp_path / "m.gguf"
    convert(ckpts["deepseek4"], None, out, outtype="bf16", mtp=True)
    f = read_gguf(out)
    name = "blk.2.ffn_up_exps.weight"
    blob = bytes(f.tensor_bytes(name))
    f.close()
    data = bytearray(out.read_bytes())
    at = data.find(blob)
    assert at > 0 and data.find(blob, at + 1) == -1
    data[at + 17 * 5 + 3] ^= 0x10  # one FP4 code of the sixth block
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    r = verify(bad, ckpts["deepseek4"], None, quality=False)
    assert not r.passed
    assert [o.name for o in r.outputs if not o.passed] == [name]
    assert r.tensors is not None and r.tensors["counts"]["checkpoint"]["unaccounted"] == 0
