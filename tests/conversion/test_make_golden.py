"""tests/make_golden.py writes the public golden inputs byte for byte as the sha256 lists of tests/golden/ give them
(the lists are the facts the upstream manifests were made from), and its check catches a file that differs."""

from __future__ import annotations

import json
from pathlib import Path

import make_golden
import pytest


def test_the_lists_cover_every_set() -> None:
    counts = {name: len(make_golden.expected(name)) for name in make_golden.SUMS}
    assert counts == {"inputs": 32, "dsv4": 10, "b11434": 46}
    groups = {rel.split("/")[1] for rel in make_golden.expected("b11434")}
    assert groups == {"qwen3", "qwen3vl", "gemma3", "gemma4", "cases.json", "pt_files.json"}


def test_inputs_and_dsv4_sets_are_byte_identical(golden_inputs: Path) -> None:
    """Every file of sets ``inputs`` and ``dsv4`` (the fixture fails on a difference; this names the count)."""
    written = sorted(str(p.relative_to(golden_inputs)) for p in golden_inputs.rglob("*") if p.is_file())
    listed = sorted(rel.removeprefix("./") for s in ("inputs", "dsv4") for rel in make_golden.expected(s))
    assert written == listed
    assert make_golden.differing(golden_inputs, "inputs") == make_golden.differing(golden_inputs, "dsv4") == []


def test_b11434_qwen3_groups_are_byte_identical(tmp_path: Path) -> None:
    """Groups ``qwen3`` and ``qwen3vl`` (the Gemma groups need the Gemma 3 tokenizer: tests/variants/test_gemma4_dspark.py);
    ``mask_embedding.pt`` by its mask id and values."""
    out = make_golden.make_b11434(tmp_path, upto="qwen3vl")
    assert make_golden.differing(out, "b11434", "./qwen3") == []
    assert make_golden.pt_differing(out) == []
    assert not (out / "gemma3").exists() and not (out / "cases.json").exists()


def test_a_changed_byte_is_found(tmp_path: Path) -> None:
    ck = make_golden.make_dsv4(tmp_path)
    assert make_golden.differing(tmp_path, "dsv4") == []
    config = json.loads((ck / "config.json").read_text())
    (ck / "config.json").write_text(json.dumps({**config, "rope_theta": 10001}, indent=2))
    (ck / "generation_config.json").unlink()
    assert make_golden.differing(tmp_path, "dsv4") == ["./dspark-dsv4/config.json", "./dspark-dsv4/generation_config.json"]


def test_the_gemma_groups_need_their_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Gemma 3 tokenizer"):
        make_golden.make_b11434(tmp_path, upto="gemma3")
