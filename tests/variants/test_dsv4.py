"""DeepSeek-V4 DSpark conversions in other dimensions than the golden sample, tensor by tensor against the
independent oracle (tests/dsv4_oracle.py): sizes, stage counts, expert counts, hc multipliers, shard boundaries
inside a stage, partial FP8 tiles and rows that are not a multiple of 32 (F16), tiny scales; both selection routes
(``dspark_*`` keys + ``mtp.*`` tensors, and ``architectures: [DeepseekV4DSparkModel]``), ``--dspark``, the
tokenizer default, and the refusals. Checkpoints come from fixtures/dsv4.py (no ../shared needed)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from dsv4_support import (
    F16_OUTTYPES,
    F16_SOURCES,
    ORACLE,
    ROOT,
    TOKENIZER,
    assert_matches_oracle,
    dsv4,
    edit_checkpoint,
    kvs_of,
    make,
    make_f16_sources,
    tensors_of,
)
from gguf import GGUFValueType as VT
from golden_manifest import compare
from typer.testing import CliRunner

from dspark_convert import convert
from dspark_convert.cli import app
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf

VARIANTS = {
    # other sizes, 2 stages, 3 experts, hc 2; q_lora 100 and wo_a rows of 80 are not multiples of 32 (-> F16);
    # 320 columns leave partial 128-tiles; 4 draft shards cut inside stages
    "h320-s2-e3-hc2-f16rows-split": (dsv4.Dims(hidden=320, stages=2, experts=3, hc=2, moe=96, heads=3, head_dim=80,
                                               o_groups=3, q_lora=100, o_lora=64, markov_rank=16),
                                     dsv4.Layout(mtp_split="size", mtp_shards=4)),
    # one stage, one expert, hc 1, exact tiles
    "h128-s1-e1-hc1": (dsv4.Dims(hidden=128, stages=1, experts=1, hc=1, moe=64, heads=2, head_dim=64, q_lora=128,
                                 o_groups=1, o_lora=64, taps=2), dsv4.Layout(main_shards=1)),
    # four stages, five experts, hc 3, 7 shards (several boundaries inside stages), 2 taps
    "h384-s4-e5-hc3-split7": (dsv4.Dims(hidden=384, stages=4, experts=5, hc=3, moe=64, taps=2, layers=6,
                                        markov_rank=32), dsv4.Layout(mtp_split="size", mtp_shards=7, main_shards=3)),
    # the class declared in the config instead of DeepseekV4ForCausalLM + dspark_* keys
    "dspark-class": (dsv4.Dims(hidden=192, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32),
                     dsv4.Layout(arch="DeepseekV4DSparkModel")),
    # tiny and wide E8M0 scales: subnormal products, Q8_0 blocks whose maximum is subnormal
    "tiny-scales": (dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32),
                    dsv4.Layout(fp8_scale=(0, 12), fp4_scale=(0, 20))),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_matches_oracle_at_every_outtype(tmp_path: Path, variant: str) -> None:
    dims, layout = VARIANTS[variant]
    ck = make(tmp_path, dims=dims, layout=layout)
    outs = []
    for outtype in ("q8_0", "bf16", "auto"):  # the family forces every type: all outtypes give the same bytes
        out = tmp_path / f"{variant}.{outtype}.gguf"
        r = convert(ck, None, out, outtype=outtype)
        assert r.family == "dspark_dsv4" and read_gguf(out).kvs["general.file_type"].value == 38
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    assert_matches_oracle(tmp_path / f"{variant}.q8_0.gguf", ck)


def test_f16_sources_take_the_outtype_as_upstreams(tmp_path: Path) -> None:
    """Upstream forces FP8 (Q8_0), BF16 and F32 sources to a type, not F16 ones: those take --outtype (auto: f16,
    from the first F16 / BF16 matrix of the draft, stage 0's F16 router), except the router itself (F32). The
    outputs are upstream b11434's (its manifests, ``tests/dsv4_support.py``) at every outtype."""
    ck = make_f16_sources(tmp_path)
    types = {}
    for outtype in F16_OUTTYPES:
        out = tmp_path / f"{outtype}.gguf"
        assert convert(ck, None, out, outtype=outtype).family == "dspark_dsv4"
        assert compare(out, json.loads((ORACLE / f"{F16_SOURCES}.{outtype}.json").read_text())) == [], outtype
        types[outtype] = {t[0]: t[1] for t in tensors_of(out)}
        assert read_gguf(out).kvs["general.file_type"].value == 38
    assert {o: t["blk.1.ffn_down_shexp.weight"] for o, t in types.items()} == {
        "f32": "F32", "bf16": "BF16", "q8_0": "Q8_0", "auto": "F16"}
    assert {t["blk.0.ffn_gate_inp.weight"] for t in types.values()} == {"F32"}
    assert {t["fc.weight"] for t in types.values()} == {"BF16"}
    assert {t["blk.1.ffn_gate_inp.weight"] for t in types.values()} == {"BF16"}  # stored BF16: kept


def test_dspark_flag_and_both_routes_give_the_same_bytes(tmp_path: Path) -> None:
    dims = dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32)
    a = make(tmp_path, "a/dsv4", dims=dims)
    b = make(tmp_path, "b/dsv4", dims=dims, layout=dsv4.Layout(arch="DeepseekV4DSparkModel"))
    ra = convert(a, None, tmp_path / "a.gguf", dspark=True)
    rb = convert(b, None, tmp_path / "b.gguf")
    assert ra.family == rb.family == "dspark_dsv4"
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


def test_tokenizer_defaults_to_the_checkpoint_and_target_dir_still_works(tmp_path: Path) -> None:
    dims = dsv4.Dims(hidden=128, stages=1, experts=1, moe=32, head_dim=64, q_lora=64, o_lora=32)
    ck = make(tmp_path, dims=dims)
    r = convert(ck, None, tmp_path / "own.gguf")
    assert "tokenizer: the checkpoint's own (pass --target-model-dir to take it from another model)" in r.notes
    # the same tokenizer and config in another folder: same tensors and keys (general.base_model.0 names that folder)
    other = tmp_path / "target"
    other.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (other / f).write_bytes((ck / f).read_bytes())
    r2 = convert(ck, other, tmp_path / "target.gguf")
    assert not any(n.startswith("tokenizer: the checkpoint") for n in r2.notes)
    assert tensors_of(tmp_path / "own.gguf") == tensors_of(tmp_path / "target.gguf")
    assert kvs_of(tmp_path / "own.gguf") == kvs_of(tmp_path / "target.gguf")
    assert kvs_of(tmp_path / "own.gguf")["tokenizer.ggml.tokens"][1][1016] == "<|mask|>"
    # a checkpoint without tokenizer files needs --target-model-dir, and says so
    bare = make(tmp_path, "bare", dims=dims, tokenizer=None)
    with pytest.raises(ConvertError) as e:
        convert(bare, None, tmp_path / "bare.gguf")
    assert str(e.value) == (f"{bare}: the checkpoint has no tokenizer (tokenizer.json, tokenizer.model, vocab.json); "
                            "pass --target-model-dir with the target model's tokenizer")
    assert not (tmp_path / "bare.gguf").exists()
    tok = tmp_path / "tok"  # the tokenizer files, with the checkpoint's config: the target itself
    shutil.copytree(TOKENIZER, tok)
    shutil.copy(bare / "config.json", tok / "config.json")
    convert(bare, tok, tmp_path / "bare.gguf")
    assert tensors_of(tmp_path / "bare.gguf") == tensors_of(tmp_path / "own.gguf")
    # another model as the target: the fit check compares main_proj's width with its hidden size
    with pytest.raises(ConvertError) as e:
        convert(bare, TOKENIZER, tmp_path / "qwen.gguf")
    assert str(e.value) == (f"{bare / 'model-00003-of-00003.safetensors'}: fc.weight takes 3 target layers x 128 = 384 "
                            f"inputs (a target of hidden size 128), but {TOKENIZER / 'config.json'} has hidden_size 64 "
                            "(pass --ignore-target-mismatch to convert anyway)")
    assert not (tmp_path / "qwen.gguf").exists()
    r3 = convert(bare, TOKENIZER, tmp_path / "qwen.gguf", ignore_target_mismatch=True)
    assert [(f.level, f.rule) for f in r3.findings if f.level != "note"] == [("warning", "target-hidden-size")]
    assert tensors_of(tmp_path / "qwen.gguf") == tensors_of(tmp_path / "own.gguf")


def test_chat_template_is_upstreams_and_0731_by_name(tmp_path: Path) -> None:
    """upstream's DeepSeek-V4 template is the second key; the -Flash-0731 one when the folder name has 0731; a
    template in the tokenizer's own tokenizer_config.json replaces it in place (gguf-py's rule for a re-added key)."""
    dims = dsv4.Dims(hidden=128, stages=1, experts=1, moe=32, head_dim=64, q_lora=64, o_lora=32)
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_bytes((TOKENIZER / "tokenizer.json").read_bytes())
    cfg = json.loads((TOKENIZER / "tokenizer_config.json").read_text())
    own_template = cfg.pop("chat_template")
    (tok / "tokenizer_config.json").write_text(json.dumps(cfg))
    templates = ROOT / "dspark_convert" / "variants" / "dsv4" / "chat_templates"
    for name, fn in (("DeepSeek-V4-Flash-DSpark", "deepseek-ai-DeepSeek-V4.jinja"),
                     ("DeepSeek-V4-Flash-0731", "deepseek-ai-DeepSeek-V4-Flash-0731.jinja")):
        ck = make(tmp_path, name, dims=dims, tokenizer=tok)
        convert(ck, None, tmp_path / f"{name}.gguf")
        kvs = list(kvs_of(tmp_path / f"{name}.gguf", skip_general=False).items())
        assert kvs[1] == ("tokenizer.chat_template", (VT.STRING, (templates / fn).read_text(encoding="utf-8")))
    ck = make(tmp_path, "with-own-template", dims=dims)
    convert(ck, None, tmp_path / "own.gguf")
    kvs = list(kvs_of(tmp_path / "own.gguf", skip_general=False).items())
    assert kvs[1] == ("tokenizer.chat_template", (VT.STRING, own_template))


def test_templates_are_upstreams_files(golden_dir: Path) -> None:
    """The embedded templates are upstream's ``models/templates/`` files (sha256 in tests/golden/templates.sha256)."""
    sums = {name: digest for digest, name in (ln.split() for ln in (golden_dir / "templates.sha256").read_text().splitlines())}
    assert sorted(sums) == ["deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "deepseek-ai-DeepSeek-V4.jinja"]
    for fn, digest in sums.items():
        data = (ROOT / "dspark_convert" / "variants" / "dsv4" / "chat_templates" / fn).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, fn


# ---------------------------------------------------------------------------------------------- streaming
def test_chunks_do_not_grow_with_experts_or_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write job (one chunk: read, dequantize or repack, quantize) stays below the same bound whatever the
    number of experts and stages: an expert stack is streamed one expert (or a few small ones) at a time, an FP8
    weight by groups of 128 rows."""
    from dspark_convert.hf2gguf import writer
    from dspark_convert.hf2gguf.conversion import plan_conversion

    monkeypatch.setattr(writer, "CHUNK_BYTES", 8192)
    biggest = {}
    for experts, stages in ((2, 1), (16, 1), (16, 4)):
        dims = dsv4.Dims(hidden=256, stages=stages, experts=experts, moe=64, head_dim=64, q_lora=64, o_lora=32)
        ck = make(tmp_path, f"e{experts}s{stages}", dims=dims)
        planned = plan_conversion(ck, None)
        try:
            sizes = [job().nbytes for t in planned.plan.tensors if t.name.endswith("_exps.weight") or t.transform
                     for *_, job in writer.chunk_spans(t, planned.sources)]
        finally:
            planned.close()
        biggest[(experts, stages)] = max(sizes)
    # the largest job of all: 128 rows (one tile row) of main_proj [256, 3 x 256] as Q8_0 (an expert is 8.5 KiB)
    assert set(biggest.values()) == {128 * 3 * 256 // 32 * 34}, biggest


# ---------------------------------------------------------------------------------------------- refusals
SMALL = dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32)


def _drop(*names: str):
    def mutate(t: dict) -> None:
        for n in names:
            del t[n]
    return mutate


def _set(name: str, dtype: str, arr: np.ndarray):
    return lambda t: t.__setitem__(name, (dtype, arr))


def _nan_fp8(t: dict) -> None:
    dt, a = t["mtp.1.attn.wkv.weight"]
    a = a.copy()
    a[3, 5] = 0x7F
    t["mtp.1.attn.wkv.weight"] = (dt, a)


def _nan_expert_scale(t: dict) -> None:
    dt, a = t["mtp.0.ffn.experts.1.w2.scale"]
    a = a.copy()
    a[0, 0] = 0xFF
    t["mtp.0.ffn.experts.1.w2.scale"] = (dt, a)


REFUSALS = {
    "missing-fp8-scale": (_drop("mtp.0.attn.wq_a.scale"),
                          "tensor 'mtp.0.attn.wq_a.weight' is F8_E4M3 but the checkpoint has no 'mtp.0.attn.wq_a.scale' "
                          "(an F8_E8M0 scale per 128x128 tile)"),
    "fp8-scale-shape": (_set("mtp.0.attn.wq_b.scale", "F8_E8M0", np.full((1, 2), 127, np.uint8)),
                        "tensor 'mtp.0.attn.wq_b.scale' is F8_E8M0 [1, 2], expected F8_E8M0 [2, 1] (one scale per "
                        "128x128 tile of [256, 64])"),
    "missing-expert": (_drop("mtp.1.ffn.experts.1.w3.weight", "mtp.1.ffn.experts.1.w3.scale"),
                       "expert 1 of mtp.1.ffn.experts.*.w3 is missing (the config says 2 routed experts per stage)"),
    "extra-expert": (lambda t: t.update({"mtp.0.ffn.experts.2.w1.weight": t["mtp.0.ffn.experts.1.w1.weight"],
                                         "mtp.0.ffn.experts.2.w1.scale": t["mtp.0.ffn.experts.1.w1.scale"]}),
                     "expert 2 of mtp.0.ffn.experts.*.w1 is beyond n_routed_experts 2"),
    "expert-scale-dtype": (_set("mtp.0.ffn.experts.0.w1.scale", "I8", np.zeros((32, 4), np.uint8)),
                           "tensor 'mtp.0.ffn.experts.0.w1.scale' is I8 [32, 4], expected F8_E8M0 [32, 4]"),
    "expert-shape": (_set("mtp.1.ffn.experts.0.w2.weight", "I8", np.zeros((128, 8), np.uint8)),
                     "tensor 'mtp.1.ffn.experts.0.w2.weight' is I8 [128, 8], expected I8 [128, 16] (FP4 codes, two "
                     "per byte, of a [128, 32] expert)"),
    "unknown-tensor": (_set("mtp.1.attn.compressor.ape", "F32", np.zeros((4, 8), np.float32)),
                       "tensor 'mtp.1.attn.compressor.ape' is not part of a DeepSeek-V4 DSpark draft (upstream fails "
                       "with \"Can not map tensor\")"),
    "nan-fp8-code": (_nan_fp8, "tensor 'mtp.1.attn.wkv.weight' contains NaN or Inf values (pass --allow-nonfinite "
                               "to convert it anyway)"),
    "nan-expert-scale": (_nan_expert_scale, "tensor 'mtp.0.ffn.experts.0.w2.weight' contains NaN or Inf values"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_bad_checkpoints_are_refused_in_one_line(tmp_path: Path, case: str) -> None:
    ck = make(tmp_path, dims=SMALL)
    mutate, fragment = REFUSALS[case]
    edit_checkpoint(ck, mutate)
    out = tmp_path / "out.gguf"
    with pytest.raises(ConvertError) as e:
        convert(ck, None, out)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    assert not out.exists() and not list(tmp_path.glob(".out.gguf*"))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # gguf-py's Q8_0 of a NaN block
def test_nonfinite_values_convert_when_allowed(tmp_path: Path) -> None:
    ck = make(tmp_path, dims=SMALL)
    edit_checkpoint(ck, _nan_fp8)
    convert(ck, None, tmp_path / "out.gguf", allow_nonfinite=True)
    assert_matches_oracle(tmp_path / "out.gguf", ck)


CONFIG_REFUSALS = {
    "softmax-router": ({"scoring_func": "softmax"}, "key 'scoring_func' is 'softmax'; the DeepSeek-V4 DSpark loader "
                                                    "needs 'sqrtsoftplus' (expert_gating_func 4)"),
    "no-q-lora": ({"q_lora_rank": None}, "key 'q_lora_rank' is missing; a DeepSeek-V4 DSpark draft needs it"),
    "bad-taps": ({"dspark_target_layer_ids": "40"}, "key 'dspark_target_layer_ids' is '40', expected a non-empty list"),
    "noise-outside-vocab": ({"dspark_noise_token_id": 5000}, "dspark_noise_token_id is 5000, outside the vocabulary "
                                                             "of 1024 tokens"),
}


@pytest.mark.parametrize("case", list(CONFIG_REFUSALS))
def test_bad_configs_are_refused_naming_the_key(tmp_path: Path, case: str) -> None:
    extra, fragment = CONFIG_REFUSALS[case]
    ck = make(tmp_path, dims=SMALL, layout=dsv4.Layout(config_extra=extra))
    with pytest.raises(ConvertError) as e:
        convert(ck, None, tmp_path / "out.gguf")
    assert str(e.value).startswith(f"{ck / 'config.json'}: ") and fragment in str(e.value)


def test_a_deepseek_v4_checkpoint_without_a_draft(tmp_path: Path) -> None:
    plain = make(tmp_path, "plain", dims=SMALL, layout=dsv4.Layout(draft=False))
    with pytest.raises(ConvertError) as e:
        convert(plain, None, tmp_path / "x.gguf")
    assert str(e.value) == (f"{plain / 'config.json'}: a DeepSeek-V4 checkpoint without a DSpark draft (no dspark_* "
                            "config keys and no mtp.* tensors); only such a draft is converted here (convert the main "
                            "model with llama.cpp's convert_hf_to_gguf.py)")
    # the plain V4 release: one MTP block (mtp.0.*) but no dspark_* keys
    mtp_only = make(tmp_path, "mtp-only", dims=SMALL)
    cfg = json.loads((mtp_only / "config.json").read_text())
    for k in ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank"):
        del cfg[k]
    (mtp_only / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError, match=r"without a DSpark draft \(no dspark_\* config keys \(dspark_block_size"):
        convert(mtp_only, None, tmp_path / "x.gguf", dspark=True)
    assert not (tmp_path / "x.gguf").exists()


def test_dspark_flag_and_target_embeddings_are_refused_where_they_do_not_apply(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"^--dspark: .*dspark-qwen3 is not a DeepSeek-V4 checkpoint with a DSpark"):
        convert(ROOT / "fixtures" / "dspark-qwen3", TOKENIZER, tmp_path / "x.gguf", dspark=True)
    with pytest.raises(ConvertError, match="^--target-model-dir is required"):
        convert(ROOT / "fixtures" / "dspark-qwen3", None, tmp_path / "x.gguf")
    ck = make(tmp_path, dims=SMALL)
    with pytest.raises(ConvertError, match="^--with-target-embeddings: a DeepSeek-V4 DSpark draft uses the target's"):
        convert(ck, None, tmp_path / "x.gguf", embed_from_target=True)


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_summary_dry_run_json_check_inspect_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    ck = make(tmp_path, "DeepSeek-V4-Flash", dims=SMALL, layout=dsv4.Layout(mtp_split="size", mtp_shards=3))
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["hf2gguf", str(ck), "--dspark"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "dspark-DeepSeek-V4-Flash-MXFP4_MOE.gguf"  # -hf finds it as a draft-dspark sidecar
    assert out.is_file()
    for text in ("tokenizer: the checkpoint's own", "read 3 of 5 shards", "skipped 2", "MOSTLY_MXFP4_MOE"):
        assert text in r.stdout, text
    # --force: the dry run makes the real run's destination checks (issue 24.11), and the default name now exists
    dry = runner.invoke(app, ["hf2gguf", str(ck), "--dry-run", "--json", "--force"])
    doc = json.loads(dry.stdout)
    assert doc["outtype"] == "mxfp4_moe" and doc["family"] == "dspark_dsv4" and doc["dry_run"]
    t0 = doc["plan"]["tensors"][0]
    assert (t0["name"], t0["type"]) == ("blk.0.ffn_gate_exps.weight", "MXFP4")
    check = runner.invoke(app, ["check", str(out), "--json"])
    assert check.exit_code == 0 and json.loads(check.stdout)["findings"] == []
    info = json.loads(runner.invoke(app, ["inspect", str(out), "--json", "--stats"]).stdout)
    assert info["by_type"]["MXFP4"]["tensors"] == 6 and info["kvs"]["general.file_type"]["value"] == 38
    stats = next(t["stats"] for t in info["tensors"] if t["name"] == "blk.1.ffn_up_exps.weight")
    assert stats is not None and stats["nan"] == 0 and stats["max"] > 0
    same = runner.invoke(app, ["diff", str(out), str(out), "--json"])
    assert same.exit_code == 0
    other = tmp_path / "other.gguf"
    convert(make(tmp_path, "other", dims=SMALL, seed=9), None, other)
    d = json.loads(runner.invoke(app, ["diff", str(out), str(other), "--json"]).stdout)
    changed = {t["name"]: t for t in d["tensors"]["changed"]}
    assert "blk.0.ffn_down_exps.weight" in changed and changed["blk.0.ffn_down_exps.weight"]["nmse"] > 0


def test_cli_without_a_draft_is_one_line_exit_2(tmp_path: Path) -> None:
    plain = make(tmp_path, "plain", dims=SMALL, layout=dsv4.Layout(draft=False))
    r = CliRunner().invoke(app, ["hf2gguf", str(plain), "-o", str(tmp_path / "x.gguf")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "without a DSpark draft" in r.stderr
    assert not (tmp_path / "x.gguf").exists()
