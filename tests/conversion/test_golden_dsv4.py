"""The DeepSeek-V4 DSpark golden sample beyond tests/conversion/test_golden.py (which runs upstream's command at every
outtype): the same bytes without --target-model-dir (the checkpoint's own tokenizer) and with a config declaring
``DeepseekV4DSparkModel``; and the sample's generator (tests/make_golden.py) in other dimensions against the
independent oracle (tests/dsv4_oracle.py)."""

from __future__ import annotations

import json
from pathlib import Path

import make_golden
import pytest
from conftest import GOLDEN_MANIFESTS
from dsv4_oracle import expected_tensors
from dsv4_support import ROOT, assert_matches_oracle
from golden_manifest import compare

from dspark_convert import convert


def make(out: Path, *args: str) -> None:
    """The DeepSeek-V4 DSpark sample of tests/make_golden.py under ``out``, in the dimensions ``args`` give."""
    assert make_golden.main(["dsv4", str(out), *args]) == 0


def test_golden_dsv4_own_tokenizer_and_class_route(golden_inputs: Path, tmp_path: Path) -> None:
    expected = json.loads((GOLDEN_MANIFESTS / "dspark-dsv4.q8_0.json").read_text(encoding="utf-8"))
    sample = golden_inputs / "dspark-dsv4"
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
def test_make_dsv4_other_dimensions_match_the_oracle(golden_dir: Path, tmp_path: Path, variant: str) -> None:
    make(tmp_path, "--name", variant, "--vocab", "1024", "--noise-token", "1016",
         "--tokenizer-dir", str(ROOT / "fixtures" / "target-qwen3"), *VARIANTS[variant])
    ck = tmp_path / variant
    out = tmp_path / f"{variant}.gguf"
    convert(ck, None, out)
    assert_matches_oracle(out, ck)
    assert len(expected_tensors(ck)) > 20
