"""``verify`` end to end: every fixture layout, converted by ``convert`` at every outtype, matches its HF
checkpoint to float32 round-off in exact mode (the torch side rounds each checkpoint tensor the way the GGUF stores
it), component by component; the quality section reports what the storage type cost. Also: the grading helpers,
the JSON schema and the CLI exit codes. The mutation suite (tests/verify/test_mutations.py) shows what fails.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, TARGET
from fixture_registry import names
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.reference.compare import (
    EXACT_NMSE,
    OutputCheck,
    add_argmax,
    compare_cases,
    compare_tokens,
    compare_values,
    grade,
)
from dspark_convert.verify import verify

pytest.importorskip("torch", reason="verify runs the torch reference forward (torch extra)")

BLOCK_LAYOUTS = names(source="committed", variant="dflash")
EAGLE3_LAYOUTS = names(source="committed", variant="eagle3")
OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
runner = CliRunner()


def target_of(layout: str) -> Path:
    # eagle3-llama (llama3 rope scaling, F16 weights) is paired with target-qwen3 too: its d2t indexes a
    # 1024-token vocabulary, and verify only needs the target's embeddings, not its tokenizer
    return FIXTURES / "target-qwen3"


def worst_nmse(report) -> float:
    return max(o.nmse for o in report.outputs if o.nmse is not None)


def test_dflash2_quality_mode_rows(converted) -> None:
    """Quality mode on the DFlash2 torch side: Q8_0 costs the scaled, capped block logits an NMSE of about 1.2e-3
    ("good", 22 of 24 top-1 tokens kept); BF16 holds the BF16 checkpoint exactly, so the quality row is the exact
    one and the note says why."""
    q8 = verify(converted("dflash2-zlab", "q8_0"), FIXTURES / "dflash2-zlab", FIXTURES / "target-qwen3", context=8)
    assert q8.passed and q8.quality_note.startswith("GGUF forward vs the torch forward of the unrounded checkpoint")
    (q,) = q8.quality
    assert (q.name, q.grade, q.agree, q.total) == ("block logits (scaled, capped)", "good", 22, 24)
    assert q.nmse is not None and 1e-4 < q.nmse < 1e-2
    bf16 = verify(converted("dflash2-zlab", "bf16"), FIXTURES / "dflash2-zlab", FIXTURES / "target-qwen3", context=8)
    assert bf16.quality_note.startswith("storage is lossless for this checkpoint")
    (q,) = bf16.quality
    assert (q.agree, q.total) == (24, 24) and q.nmse is not None and q.nmse < 1e-10


def test_a_dflash_file_beside_a_dflash2_checkpoint(converted) -> None:
    """The checkpoint's torch side proves a pair whose GGUF's variant does not read it (one path for every
    variant): a DFlash file beside a DFlash2 checkpoint gets the DFlash2 rows, which name what the file lacks."""
    r = verify(converted("dflash-zlab", "bf16"), FIXTURES / "dflash2-zlab", FIXTURES / "target-qwen3", context=8)
    assert not r.passed and (r.family, r.layout) == ("dflash2", "z-lab DFlash2")
    assert [m.key for m in r.metadata if not m.passed] == [
        "dflash.conv_kernel_size", "dflash.conv_group_size", "dflash.selector_rank", "dflash.selector_top_k",
        "architectures"]
    assert [(o.name, o.grade) for o in r.outputs] == [("forward", "not run")]
    assert r.first_divergence is not None and r.first_divergence["component"] == "forward"


# ---------------------------------------------------------------------------------------------- all layouts
@pytest.mark.parametrize("layout", BLOCK_LAYOUTS + EAGLE3_LAYOUTS)
@pytest.mark.parametrize("outtype", OUTTYPES)
def test_every_conversion_agrees_to_round_off(converted, layout: str, outtype: str) -> None:
    r = verify(converted(layout, outtype), FIXTURES / layout, target_of(layout))
    assert r.passed, [o for o in r.outputs if not o.passed] + [m for m in r.metadata if not m.passed]
    assert r.first_divergence is None and r.bound == EXACT_NMSE
    assert worst_nmse(r) < EXACT_NMSE / 20            # measured: 1e-13 .. 2e-11 (docs/verify.md)
    assert all(o.grade in ("round-off", "identical") for o in r.outputs)
    tokens = next(o for o in r.outputs if o.name == "chosen tokens")
    assert tokens.agree == tokens.total and tokens.near_ties == 0 and tokens.total >= 3 * 3
    assert all(m.passed for m in r.metadata) and len(r.metadata) >= 15
    # the rounding the torch side applied is the GGUF's: every type in the file that stores draft weights
    stored = {t.qtype.name for t in read_gguf(r.gguf).tensors if t.qtype.name not in ("I64",) and t.name != "rope_freqs.weight"}
    assert set(r.storage) == stored
    if outtype == "q8_0":                              # quantization really changed values, and quality shows it
        assert r.storage["Q8_0"]["changed"] > 0.9 * r.storage["Q8_0"]["values"]
        q = max(o.nmse for o in r.quality if o.nmse is not None)
        assert 1e-6 < q < 1e-2 and "unrounded" in r.quality_note
    else:
        assert all(o.passed for o in r.quality)


def test_quality_rows_say_what_rounding_cost(converted) -> None:
    """F32 checkpoint: bf16 and f16 change values (quality below exact); f32 keeps them (quality == exact)."""
    f32, bf16, f16 = (verify(converted("dspark-qwen3-f32", t), FIXTURES / "dspark-qwen3-f32", TARGET)
                      for t in ("f32", "bf16", "f16"))
    assert "lossless" in f32.quality_note and f32.storage["F32"]["changed"] == 0
    assert all(o.grade == "essentially identical" and o.nmse < 1e-10 for o in f32.quality)
    assert bf16.storage["BF16"]["changed"] > 0 and "unrounded" in bf16.quality_note
    worst = {t: max(o.nmse for o in r.quality if o.nmse is not None) for t, r in (("bf16", bf16), ("f16", f16))}
    assert 1e-7 < worst["bf16"] < 1e-3 and 1e-10 < worst["f16"] < worst["bf16"]   # measured 2e-4 and 3e-7
    logits = next(o for o in bf16.quality if o.name == "block logits")
    assert logits.total == 3 * 7 and logits.agree is not None and logits.grade in ("excellent", "very good", "good")


def test_block_report_contents(converted) -> None:
    r = verify(converted("dspark-qwen3", "f32"), FIXTURES / "dspark-qwen3", TARGET, seed=3)
    assert [o.name for o in r.outputs] == [
        "context projection", "block input (embeddings)", "layer 0 output", "layer 1 output", "block hidden (post-norm)",
        "block logits", "Markov bias W2 W1[prev]", "Markov-biased logits", "chosen tokens", "confidence (logit)"]
    by = {o.name: o for o in r.outputs}
    assert by["layer 1 output"].layer == 1 and by["layer 1 output"].shape == [7, 64]
    assert by["context projection"].shape[1] == 64 and by["context projection"].case in (0, 1, 2)
    assert by["block logits"].shape == [7, 1024] and by["block logits"].agree == by["block logits"].total == 21
    assert by["chosen tokens"].shape == [21]
    assert r.contexts == [4, 16, 64] and len(r.hparams["anchors"]) == 3
    assert r.hparams["target_layers"] == [2, 3, 5] and r.hparams["prediction_rows"] == list(range(7))
    assert r.hparams["sample_from_anchor"] is True and r.hparams["markov_rank"] == 8
    assert [o.name for o in r.quality] == ["block logits", "Markov-biased logits", "confidence (logit)"]
    keys = {m.key: m for m in r.metadata}
    assert keys["dflash.target_layers"].expected == [2, 3, 5]
    assert keys["tokenizer.ggml.mask_token_id"].gguf == keys["tokenizer.ggml.mask_token_id"].expected
    assert keys["dflash.rope.scaling.type"].expected is None and keys["dflash.rope.freq_base"].gguf == 1e6


def test_zlab_uses_same_position_rows(converted) -> None:
    r = verify(converted("dflash-zlab", "f32"), FIXTURES / "dflash-zlab", TARGET)
    assert r.hparams["sample_from_anchor"] is False
    assert r.hparams["prediction_rows"] == list(range(1, 16))
    assert next(o for o in r.outputs if o.name == "block logits").shape == [15, 1024]
    assert "Markov bias W2 W1[prev]" not in [o.name for o in r.outputs]


def test_eagle3_report_contents(converted) -> None:
    r = verify(converted("eagle3-speculators", "f32"), FIXTURES / "eagle3-speculators", TARGET, context=5, steps=4)
    assert r.contexts == [1, 5, 20]
    assert [o.name for o in r.outputs] == [
        "fc output", "prefill output (layer 0, pre-norm)", "prefill logits", "step 0 logits", "step 1 hidden (pre-norm)",
        "step 1 logits", "step 2 hidden (pre-norm)", "step 2 logits", "step 3 hidden (pre-norm)", "step 3 logits",
        "chosen tokens"]
    by = {o.name: o for o in r.outputs}
    assert by["prefill logits"].total == 1 + 5 + 20 and by["step 2 hidden (pre-norm)"].shape == [1, 64]
    assert by["step 3 logits"].shape == [1, 256] and by["chosen tokens"].shape == [12]
    assert [o.name for o in r.quality] == ["prefill logits", "step logits"]
    keys = {m.key: m for m in r.metadata}
    assert keys["eagle3.target_layers"].gguf == [2, 3, 5] and keys["eagle3.norm_before_residual"].gguf is True
    assert keys["d2t (absolute ids)"].passed and keys["rope_freqs.weight (llama3 scaling)"].expected == "absent"
    llama = verify(converted("eagle3-llama", "f32"), FIXTURES / "eagle3-llama", TARGET)
    assert {m.key: m for m in llama.metadata}["rope_freqs.weight (llama3 scaling)"].gguf == "equal"


def test_seed_changes_inputs_but_not_the_verdict(converted) -> None:
    path = converted("dspark-specforge", "bf16")
    a = verify(path, FIXTURES / "dspark-specforge", TARGET, seed=1, context=4)
    b = verify(path, FIXTURES / "dspark-specforge", TARGET, seed=2, context=40)
    assert a.passed and b.passed and a.hparams["anchors"] != b.hparams["anchors"] and b.contexts == [10, 40, 160]
    c = verify(converted("eagle3-normfc", "q8_0"), FIXTURES / "eagle3-normfc", TARGET, quality=False)
    assert c.passed and c.quality == [] and "skipped" in c.quality_note


def test_first_divergence_names_the_component(converted, tmp_path: Path) -> None:
    """A defect in layer 1 only: layer 0 still agrees to round-off, layer 1 is named first."""
    from gguf import quants

    src = converted("dflash-deepspec", "bf16")
    dst = tmp_path / "m.gguf"
    shutil.copyfile(src, dst)
    f = read_gguf(dst)
    t = f.tensor("blk.1.ffn_down.weight")
    w = quants.dequantize(np.array(f.tensor_data(t.name)), t.qtype).reshape(t.shape)
    data = quants.quantize(np.ascontiguousarray(-w), t.qtype).tobytes()
    with open(dst, "r+b") as fh:
        fh.seek(t.offset)
        fh.write(data)
    r = verify(dst, FIXTURES / "dflash-deepspec", TARGET)
    by = {o.name: o for o in r.outputs}
    assert by["layer 0 output"].passed and not by["layer 1 output"].passed and not r.passed
    first = r.first_divergence
    assert first is not None and (first["component"], first["layer"]) == ("layer 1 output", 1)
    assert "blk.1." in first["look_at"]
    res = runner.invoke(app, ["verify", str(dst), "--hf", str(FIXTURES / "dflash-deepspec"), "-t", str(TARGET)],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 1 and "first divergence: layer 1 output" in res.stdout and "look at: blk.1." in res.stdout


def test_golden_dspark_deepspec(golden_inputs: Path, tmp_path: Path) -> None:
    """The golden DSpark draft (129,280-token target vocabulary) against its checkpoint, at every outtype."""
    src = golden_inputs
    for outtype in OUTTYPES:
        path = convert(src / "dspark-deepspec", src / "target", tmp_path / f"g.{outtype}.gguf", outtype=outtype).path
        r = verify(path, src / "dspark-deepspec", src / "target")
        assert r.passed and worst_nmse(r) < EXACT_NMSE / 20


# ---------------------------------------------------------------------------------------------- grading
def test_grades_follow_upstream_thresholds() -> None:
    assert [grade(x) for x in (5e-7, 5e-5, 5e-4, 5e-3, 5e-2)] == [
        "essentially identical", "excellent", "very good", "good", "poor"]


def test_compare_values_numbers() -> None:
    ref = np.array([0.0, 1.0, 2.0, 3.0])
    c = compare_values("x", ref, ref + np.array([0.0, 0.0, 0.0, 0.1]), bound=None)
    assert c.nmse == pytest.approx(0.0025 / 1.25)
    assert c.nmse_db == pytest.approx(10 * math.log10(0.002))
    assert c.max_abs == pytest.approx(0.1) and c.grade == "good" and c.passed
    exact = compare_values("x", ref, ref + np.array([0.0, 0.0, 0.0, 1e-5]))        # 1e-10 / 14: round-off
    assert exact.passed and exact.grade == "round-off" and exact.nmse == pytest.approx(1e-10 / 14)
    off = compare_values("x", ref, ref + np.array([0.0, 0.0, 0.0, 2e-4]))          # 4e-8 / 14: a defect
    assert not off.passed and off.grade == "differs"
    assert not compare_values("x", ref, ref + 1.0).passed
    bad = compare_values("x", ref, ref[:3])
    assert not bad.passed and bad.grade == "shape mismatch"
    assert not compare_values("x", ref, np.array([0.0, np.nan, 2.0, 3.0])).passed


def test_nonfinite_values_are_blamed_on_the_side_holding_them() -> None:
    """Issue 24: a NaN in the checkpoint was blamed on the GGUF forward, and NaN logits gave 'chosen tokens 21/21
    identical PASS' (both argmax to 0)."""
    from dspark_convert.reference.compare import compare_tokens

    ref, nan = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, np.nan, 2.0, 3.0])
    assert compare_values("x", ref, nan).detail == "GGUF forward produced NaN/Inf"
    both = compare_values("x", nan, nan)
    assert (both.passed, both.grade, both.detail) == (False, "non-finite", "both forwards produced NaN/Inf: the "
                                                      "checkpoint holds non-finite values")
    only_ref = compare_values("x", nan, ref, bound=None)
    assert not only_ref.passed and only_ref.detail.startswith("the reference (HF checkpoint) forward produced NaN/Inf")
    logits = np.full((3, 5), np.nan)
    tokens = np.zeros(3, dtype=np.int64)
    t = compare_tokens("chosen tokens", tokens, tokens, logits, logits)
    assert (t.passed, t.grade, t.agree, t.total) == (False, "non-finite", 0, 3)
    assert t.detail == "logits: both forwards produced NaN/Inf: the checkpoint holds non-finite values"


def test_compare_cases_keeps_the_worst_case() -> None:
    ref = [np.eye(3), 2 * np.eye(3)]
    got = [np.eye(3), 2 * np.eye(3) + 1e-3]
    c = compare_cases("x", ref, got, argmax=True)
    assert (c.case, c.passed, c.agree, c.total) == (1, False, 6, 6) and "largest in case 1" in c.detail
    q = compare_cases("x", ref, got, bound=None, argmax=True)
    assert q.passed and q.grade == "excellent"


def test_near_ties_are_not_failures() -> None:
    ref = np.array([[1.0, 0.999, 0.0], [3.0, 0.0, 1.0]])
    got = np.array([[0.999, 1.0, 0.0], [3.0, 0.0, 1.0]])          # row 0: a 1e-3 tie flipped by a 1e-3 error
    c = add_argmax(OutputCheck("l", [2, 3]), ref, got)
    assert (c.agree, c.total, c.near_ties, c.passed, c.agree_by_position) == (1, 2, 1, True, [False, True])
    ref2 = np.array([[1.0, 0.5, 0.0], [3.0, 0.0, 1.0]])
    got2 = np.array([[0.9, 1.0, 0.0], [3.0, 0.0, 1.0]])             # a decisive margin (0.5) overturned
    c2 = add_argmax(OutputCheck("l", [2, 3]), ref2, got2)
    assert (c2.passed, c2.near_ties, c2.detail) == (False, 0, "argmax differs at position(s) [0]")
    t = compare_tokens("t", np.array([10, 20]), np.array([11, 20]), ref, got)
    assert (t.agree, t.near_ties, t.passed, t.grade) == (1, 1, True, "near-ties only")
    t2 = compare_tokens("t", np.array([10, 20]), np.array([10, 21]), ref, got)   # same argmax, other id: d2t bug
    assert not t2.passed and "position(s) [1]" in t2.detail


def test_near_tie_fraction_has_one_home() -> None:
    """verify's argmax rows and the llama.cpp three-way check call a differing position a near-tie by one rule: the
    fraction is defined once (``reference/compare.py``) and the three-way check reads it from there."""
    import re

    from conftest import ROOT

    from dspark_convert.reference.compare import TIE_STD_FRACTION

    homes = [p.relative_to(ROOT).as_posix() for p in sorted([*(ROOT / "dspark_convert").rglob("*.py"), *(ROOT / "tests" / "llama").glob("*.py")])
             if re.search(r"^TIE_\w* = ", p.read_text(), re.M)]
    assert homes == ["dspark_convert/reference/compare.py"] and TIE_STD_FRACTION == 0.1
    assert "TIE_STD_FRACTION * " in (ROOT / "tests" / "llama" / "threeway.py").read_text()


# ---------------------------------------------------------------------------------------------- JSON + CLI
def test_json_schema(converted) -> None:
    path = converted("dflash-deepspec", "f32")
    res = runner.invoke(app, ["verify", str(path), "--hf", str(FIXTURES / "dflash-deepspec"), "-t",
                              str(FIXTURES / "target-qwen3"), "--json", "--context", "8", "--seed", "5"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["schema_version"] == 2 and d["passed"] is True and d["first_divergence"] is None
    assert d["inputs"] == {"contexts": [2, 8, 32], "seed": 5, "steps": 3} and d["bound"] == EXACT_NMSE
    assert d["family"] == "dspark" and d["layout"] == "flat" and d["arch"] == "dflash"
    assert {"name", "shape", "nmse", "nmse_db", "max_abs", "grade", "agree", "total", "near_ties",
            "agree_by_position", "passed", "detail", "layer", "case"} == set(d["outputs"][0])
    logits = next(o for o in d["outputs"] if o["name"] == "block logits")
    assert logits["agree_by_position"] == [True] * 21 and logits["shape"] == [7, 1024]
    assert [o["name"] for o in d["quality"]] == ["block logits"] and "lossless" in d["quality_note"]
    assert d["storage"]["F32"]["changed"] == 0 and d["storage"]["F32"]["tensors"] >= 20
    assert {"key", "gguf", "expected", "passed"} == set(d["metadata"][0])
    assert d["hparams"]["sample_from_anchor"] is True and d["hparams"]["markov_rank"] == 0
    assert len(d["hparams"]["anchors"]) == 3


def test_cli_exit_codes(converted, tmp_path: Path) -> None:
    path = converted("eagle3-angelslim", "f32")
    hf, tgt = str(FIXTURES / "eagle3-angelslim"), str(FIXTURES / "target-qwen3")
    ok = runner.invoke(app, ["verify", str(path), "--hf", hf, "-t", tgt], env={"COLUMNS": "200"})
    assert ok.exit_code == 0 and "PASS" in ok.stdout and "step 2 logits" in ok.stdout and "quality" in ok.stdout
    quick = runner.invoke(app, ["verify", str(path), "--hf", hf, "-t", tgt, "--no-quality"], env={"COLUMNS": "200"})
    assert quick.exit_code == 0 and "quality mode skipped" in quick.stdout and "the unrounded" not in quick.stdout
    wrong = runner.invoke(app, ["verify", str(path), "--hf", str(FIXTURES / "dspark-qwen3"), "-t", tgt])
    assert wrong.exit_code == 2 and wrong.stdout == "" and "is a checkpoint of variant 'dflash'" in wrong.stderr  # input
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope.gguf"), "--hf", hf, "-t", tgt])
    assert missing.exit_code == 2
    no_cfg = tmp_path / "empty"
    no_cfg.mkdir()
    res = runner.invoke(app, ["verify", str(path), "--hf", str(no_cfg), "-t", tgt])
    assert res.exit_code == 2 and "config.json" in res.stderr
    shutil.rmtree(no_cfg)


def test_render_prints_hostile_text_literally() -> None:
    """Names from files and folders reach the console as literal text, never as markup."""
    from rich.console import Console

    from dspark_convert.reference.compare import MetadataCheck
    from dspark_convert.render import render_verify
    from dspark_convert.verify import VerifyReport

    r = VerifyReport("[/]x.gguf", "[red]hf", "t", "dflash", "dspark", "flat", 0, 3, [4, 16, 64])
    r.outputs = [OutputCheck("layer 0 output", [7, 64], nmse=0.5, nmse_db=-3.0, max_abs=1.0, grade="differs",
                             passed=False, detail="[bold]case 1", layer=0, case=1)]
    r.metadata = [MetadataCheck("[/]key", "[i]a", "b", False)]
    r.notes = ["[/]note\x1b"]
    con = Console(record=True, width=200, markup=True)
    render_verify(r, con)
    out = con.export_text()
    for literal in ("verify [/]x.gguf", "[bold]case 1", "[/]key", "'[i]a'", "note: [/]note\\x1b",
                    "first divergence: layer 0 output (case 1, context 16)", "look at: blk.0.*"):
        assert literal in out, literal
    assert out.rstrip().endswith("FAIL")


def test_hub_repo_ids_are_accepted(converted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: ``verify --hf`` and ``--target-model-dir`` rejected the Hub repo ids ``hf2gguf`` and ``check
    --target`` accept. Here the repos are in an offline Hub cache (no network): the same report as the folders."""
    path = converted("dspark-qwen3", "bf16")
    cache = tmp_path / "hf-cache"
    for repo, fixture in (("org/draft", "dspark-qwen3"), ("org/target", "target-qwen3")):
        snap = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / ("ab" * 20)
        shutil.copytree(FIXTURES / fixture, snap)
        (snap.parents[1] / "refs").mkdir()
        (snap.parents[1] / "refs" / "main").write_text("ab" * 20)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["verify", str(path), "--hf", "org/draft", "-t", "org/target", "--json", "--no-quality"])
    assert r.exit_code == 0, r.stderr
    local = runner.invoke(app, ["verify", str(path), "--hf", str(FIXTURES / "dspark-qwen3"), "-t", str(TARGET),
                                "--json", "--no-quality"])
    hub_doc, local_doc = json.loads(r.stdout), json.loads(local.stdout)
    for doc in (hub_doc, local_doc):
        doc.pop("hf_dir"), doc.pop("target_dir")
    assert hub_doc == local_doc and hub_doc["passed"] is True


@pytest.fixture(scope="module")
def dspark_without_lm_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dspark-qwen3 without its lm_head: a full-vocabulary DSpark that keeps embed_tokens, on the untied Qwen3
    target (the default conversion adds the target's lm_head as output.weight)."""
    from safetensors.torch import load_file, save_file

    out = tmp_path_factory.mktemp("nolm") / "dspark-nolm"
    shutil.copytree(FIXTURES / "dspark-qwen3", out)
    dropped = 0
    for f in sorted(out.glob("*.safetensors")):
        d = load_file(f)
        dropped += d.pop("lm_head.weight", None) is not None
        save_file(d, f, metadata={"format": "pt"})
    assert dropped == 1
    idx = out / "model.safetensors.index.json"
    if idx.is_file():
        j = json.loads(idx.read_text())
        j["weight_map"].pop("lm_head.weight", None)
        idx.write_text(json.dumps(j))
    return out


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "q8_0"])
def test_target_tensors_the_file_stores_are_rounded_as_stored(dspark_without_lm_head: Path, tmp_path: Path,
                                                              outtype: str) -> None:
    """The target's head added as output.weight and the target's embeddings copied in (--with-target-embeddings)
    are rounded on the torch side as the file stores them: exact mode passes at every outtype (before, q8_0 failed
    the block logits of a correct file at NMSE 3e-5), and the tensors are the target's."""
    out = tmp_path / "d.gguf"
    convert(dspark_without_lm_head, TARGET, out, outtype=outtype)
    f = read_gguf(out)
    assert {"output.weight", "token_embd.weight"} <= {t.name for t in f.tensors}
    f.close()
    r = verify(out, dspark_without_lm_head, TARGET, context=8, quality=False)
    assert r.passed, [(o.name, o.passed) for o in r.outputs]
    emb = tmp_path / "e.gguf"
    convert(FIXTURES / "dflash-zlab", TARGET, emb, outtype=outtype, embed_from_target=True)
    f = read_gguf(emb)
    assert "token_embd.weight" in {t.name for t in f.tensors}
    f.close()
    r = verify(emb, FIXTURES / "dflash-zlab", TARGET, context=8, quality=False)
    assert r.passed, [(o.name, o.passed) for o in r.outputs]
