"""Issue 25.8: hyperparameter values the loader accepts but the math cannot use (a head count of 0, a key length
of 0, an epsilon of NaN or -1, an infinite RoPE base, a RoPE scaling factor of 0) are refused by ``hf2gguf``
(before writing) and by ``check`` on a GGUF file that holds them, each with the rule that breaks."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from bad_inputs_kit import FIX, TARGET, run_cli
from gguf import GGUFValueType as VT

from dspark_convert import convert
from dspark_convert.check import check_plan
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.hf2gguf.writer import write_plan
from dspark_convert.plan import KV

DRAFT = FIX / "dspark-qwen3"
CASES = [
    ("dflash.attention.head_count", 0, VT.UINT32,
     "is 0, expected a positive integer (the head size is embedding_length / head_count; llama.cpp divides or sizes "
     "tensors by it)"),
    ("dflash.attention.key_length", 0, VT.UINT32,
     "is 0, expected a positive integer (the K projection has head_count x key_length rows; llama.cpp divides or "
     "sizes tensors by it)"),
    ("dflash.attention.layer_norm_rms_epsilon", math.nan, VT.FLOAT32,
     "is nan, expected a finite positive number (RMS norm divides by sqrt(mean(x^2) + eps))"),
    ("dflash.attention.layer_norm_rms_epsilon", -1.0, VT.FLOAT32,
     "is -1.0, expected a finite positive number (RMS norm divides by sqrt(mean(x^2) + eps))"),
    ("dflash.rope.freq_base", math.inf, VT.FLOAT32,
     "is inf, expected a finite positive number (RoPE angles are position / freq_base^(2i/d))"),
    ("dflash.rope.scaling.factor", 0.0, VT.FLOAT32,
     "is 0.0, expected a finite positive number (scaled RoPE divides positions by the factor)"),
]


@pytest.fixture(scope="module")
def good() -> object:
    return convert(DRAFT, TARGET, "unused.gguf", dry_run=True).plan


def _with(plan: object, key: str, value: object, vt: VT) -> object:
    kvs = [k for k in plan.kvs if k.name != key] + [KV(key, vt, value)]  # type: ignore[attr-defined]
    return dataclasses.replace(plan, kvs=kvs)  # type: ignore[type-var]


@pytest.mark.parametrize(("key", "value", "vt", "msg"), CASES, ids=[f"{c[0].split('.')[-1]}={c[1]}" for c in CASES])
def test_check_refuses_the_value_with_its_rule(good: object, tmp_path: Path, key: str, value: object, vt: VT,
                                               msg: str) -> None:
    assert not [f for f in check_plan(good) if f.level == "error"]  # type: ignore[arg-type]
    bad = _with(good, key, value, vt)
    found = [(f.subject, f.rule, f.message) for f in check_plan(bad) if f.level == "error"]  # type: ignore[arg-type]
    assert (key, "hparam-value", msg) in found, found
    out = tmp_path / "bad.gguf"
    write_plan(bad, {"draft": Checkpoint(DRAFT)}, out)  # type: ignore[arg-type]
    r = run_cli(["check", str(out)], tmp_path)
    assert r.exit_code != 0 and msg in r.stdout + r.stderr, (r.exit_code, r.stdout[-2000:])


def test_verify_refuses_a_head_count_of_zero_in_one_line(good: object, tmp_path: Path) -> None:
    """Issue 25.7: verify on a GGUF with head_count 0 was a ZeroDivisionError traceback."""
    out = tmp_path / "h0.gguf"
    write_plan(_with(good, "dflash.attention.head_count", 0, VT.UINT32), {"draft": Checkpoint(DRAFT)}, out)  # type: ignore[arg-type]
    r = run_cli(["verify", str(out), "--hf", str(DRAFT), "-t", str(TARGET)], tmp_path)
    assert r.exception is None and r.exit_code == 2, (r.exit_code, r.stderr[-2000:])
    assert r.error_lines == [f"error: {out}: dflash.attention.head_count: {CASES[0][3]}; the forward cannot run on "
                             "it (check reports it as [hparam-value])"]
