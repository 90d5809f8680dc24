"""``verify`` end to end: every fixture layout, converted by ``convert``, matches its HF checkpoint numerically.

f32 files must agree to NMSE < 1e-10 (two float32 forwards of the same weights); bf16/f16 within "excellent";
q8_0 within "very good" (block quantization of random Gaussian weights measures 6e-5 .. 2.5e-4 here, see
docs/verify.md). Also: the grading helpers, the JSON schema and the CLI exit codes.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.conversion import convert
from dspark_convert.verify import (
    OutputCheck,
    add_argmax,
    compare_tokens,
    compare_values,
    grade,
    verify,
)

pytest.importorskip("torch", reason="verify runs the torch reference forward (torch extra)")

BLOCK_LAYOUTS = ["dspark-qwen3", "dspark-qwen3-interleaved", "dspark-qwen3-f32", "dflash-deepspec", "dflash-zlab",
                 "dflash-zlab-swa", "dspark-specforge", "dspark-speculators", "dspark-reduced"]
EAGLE3_LAYOUTS = ["eagle3-specforge", "eagle3-angelslim", "eagle3-speculators", "eagle3-normfc", "eagle3-llama"]
runner = CliRunner()


def target_of(layout: str) -> Path:
    # eagle3-llama (llama3 rope scaling, F16 weights) is paired with target-qwen3 too: its d2t indexes a
    # 1024-token vocabulary, and verify only needs the target's embeddings, not its tokenizer
    return FIXTURES / "target-qwen3"


def worst_nmse(report) -> float:
    return max(o.nmse for o in report.outputs if o.nmse is not None)


# ---------------------------------------------------------------------------------------------- all layouts
@pytest.mark.parametrize("layout", BLOCK_LAYOUTS + EAGLE3_LAYOUTS)
def test_f32_conversion_is_numerically_identical(converted, layout: str) -> None:
    r = verify(converted(layout, "f32"), FIXTURES / layout, target_of(layout))
    assert r.passed, [o for o in r.outputs if not o.passed] + [m for m in r.metadata if not m.passed]
    assert worst_nmse(r) < 1e-10
    assert all(o.grade in ("essentially identical", "identical") for o in r.outputs)
    tokens = next(o for o in r.outputs if o.name == "chosen tokens")
    assert tokens.agree == tokens.total and tokens.near_ties == 0
    assert all(m.passed for m in r.metadata) and len(r.metadata) >= 12


@pytest.mark.parametrize("layout", BLOCK_LAYOUTS + EAGLE3_LAYOUTS)
@pytest.mark.parametrize("outtype", ["bf16", "f16"])
def test_half_precision_is_excellent(converted, layout: str, outtype: str) -> None:
    r = verify(converted(layout, outtype), FIXTURES / layout, target_of(layout))
    assert r.passed
    assert worst_nmse(r) < 1e-4


@pytest.mark.parametrize("layout", BLOCK_LAYOUTS + EAGLE3_LAYOUTS)
def test_q8_0_is_very_good(converted, layout: str) -> None:
    r = verify(converted(layout, "q8_0"), FIXTURES / layout, target_of(layout))
    assert r.passed, [o for o in r.outputs if not o.passed]
    assert 1e-7 < worst_nmse(r) < 1e-3          # real quantization error, far below the 1e-2 pass line


def test_block_report_contents(converted) -> None:
    r = verify(converted("dspark-qwen3", "f32"), FIXTURES / "dspark-qwen3", FIXTURES / "target-qwen3", seed=3)
    assert [o.name for o in r.outputs] == ["block hidden (post-norm)", "block logits", "Markov-biased logits",
                                           "chosen tokens", "confidence (logit)"]
    by = {o.name: o for o in r.outputs}
    assert by["block logits"].shape == [7, 1024] and by["block logits"].agree == 7
    assert by["chosen tokens"].shape == [7]
    assert r.hparams["target_layers"] == [2, 3, 5] and r.hparams["prediction_rows"] == list(range(7))
    assert r.hparams["sample_from_anchor"] is True and r.hparams["markov_rank"] == 8
    keys = {m.key: m for m in r.metadata}
    assert keys["dflash.target_layers"].expected == [2, 3, 5]
    assert keys["tokenizer.ggml.mask_token_id"].gguf == keys["tokenizer.ggml.mask_token_id"].expected


def test_zlab_uses_same_position_rows(converted) -> None:
    r = verify(converted("dflash-zlab", "f32"), FIXTURES / "dflash-zlab", FIXTURES / "target-qwen3")
    assert r.hparams["sample_from_anchor"] is False
    assert r.hparams["prediction_rows"] == list(range(1, 16))
    assert next(o for o in r.outputs if o.name == "block logits").shape == [15, 1024]
    assert "Markov-biased logits" not in [o.name for o in r.outputs]


def test_eagle3_report_contents(converted) -> None:
    r = verify(converted("eagle3-speculators", "f32"), FIXTURES / "eagle3-speculators", FIXTURES / "target-qwen3",
               context=5, steps=4)
    by = {o.name: o for o in r.outputs}
    assert by["prefill hidden (pre-norm)"].shape == [5, 64]
    assert by["chained step hidden (pre-norm)"].shape == [3, 64]
    assert by["step logits"].shape == [4, 256] and by["chosen tokens"].shape == [4]
    keys = {m.key: m for m in r.metadata}
    assert keys["eagle3.target_layers"].gguf == [2, 3, 5] and keys["eagle3.norm_before_residual"].gguf is True
    assert keys["d2t (absolute ids)"].passed


def test_seed_changes_inputs_but_not_the_verdict(converted) -> None:
    path = converted("dspark-specforge", "bf16")
    a = verify(path, FIXTURES / "dspark-specforge", FIXTURES / "target-qwen3", seed=1, context=4)
    b = verify(path, FIXTURES / "dspark-specforge", FIXTURES / "target-qwen3", seed=2, context=40)
    assert a.passed and b.passed and a.hparams["anchor"] != b.hparams["anchor"]


def test_golden_dspark_deepspec(golden_inputs: Path, tmp_path: Path) -> None:
    """The golden DSpark draft (129,280-token target vocabulary) against its checkpoint, at f32."""
    src = golden_inputs
    path = convert(src / "dspark-deepspec", src / "target", tmp_path / "g.gguf", outtype="f32").path
    r = verify(path, src / "dspark-deepspec", src / "target")
    assert r.passed and worst_nmse(r) < 1e-10


# ---------------------------------------------------------------------------------------------- grading
def test_grades_follow_upstream_thresholds() -> None:
    assert [grade(x) for x in (5e-7, 5e-5, 5e-4, 5e-3, 5e-2)] == [
        "essentially identical", "excellent", "very good", "good", "poor"]


def test_compare_values_numbers() -> None:
    ref = np.array([0.0, 1.0, 2.0, 3.0])
    c = compare_values("x", ref, ref + np.array([0.0, 0.0, 0.0, 0.1]))
    assert c.nmse == pytest.approx(0.0025 / 1.25)
    assert c.nmse_db == pytest.approx(10 * math.log10(0.002))
    assert c.max_abs == pytest.approx(0.1) and c.grade == "good" and c.passed
    assert not compare_values("x", ref, ref + 1.0).passed
    bad = compare_values("x", ref, ref[:3])
    assert not bad.passed and bad.grade == "shape mismatch"
    assert not compare_values("x", ref, np.array([0.0, np.nan, 2.0, 3.0])).passed


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


# ---------------------------------------------------------------------------------------------- JSON + CLI
def test_json_schema(converted) -> None:
    path = converted("dflash-deepspec", "f32")
    res = runner.invoke(app, ["verify", str(path), "--hf", str(FIXTURES / "dflash-deepspec"), "-t",
                              str(FIXTURES / "target-qwen3"), "--json", "--context", "8", "--seed", "5"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["schema_version"] == 1 and d["passed"] is True
    assert d["inputs"] == {"context": 8, "seed": 5, "steps": 3}
    assert d["family"] == "dspark" and d["layout"] == "flat" and d["arch"] == "dflash"
    assert {"name", "shape", "nmse", "nmse_db", "max_abs", "grade", "agree", "total", "near_ties",
            "agree_by_position", "passed", "detail"} == set(d["outputs"][0])
    logits = next(o for o in d["outputs"] if o["name"] == "block logits")
    assert logits["agree_by_position"] == [True] * 7 and logits["shape"] == [7, 1024]
    assert {"key", "gguf", "expected", "passed"} == set(d["metadata"][0])
    assert d["hparams"]["sample_from_anchor"] is True and d["hparams"]["markov_rank"] == 0


def test_cli_exit_codes(converted, tmp_path: Path) -> None:
    path = converted("eagle3-angelslim", "f32")
    hf, tgt = str(FIXTURES / "eagle3-angelslim"), str(FIXTURES / "target-qwen3")
    ok = runner.invoke(app, ["verify", str(path), "--hf", hf, "-t", tgt], env={"COLUMNS": "200"})
    assert ok.exit_code == 0 and "PASS" in ok.stdout and "step logits" in ok.stdout
    wrong = runner.invoke(app, ["verify", str(path), "--hf", str(FIXTURES / "dspark-qwen3"), "-t", tgt])
    assert wrong.exit_code == 1 and "FAIL" in wrong.stdout
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope.gguf"), "--hf", hf, "-t", tgt])
    assert missing.exit_code == 2
    no_cfg = tmp_path / "empty"
    no_cfg.mkdir()
    res = runner.invoke(app, ["verify", str(path), "--hf", str(no_cfg), "-t", tgt])
    assert res.exit_code == 2 and "config.json" in res.stderr
    shutil.rmtree(no_cfg)
