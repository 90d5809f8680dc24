"""docs/check.md's ``check --target`` examples are real output: each block equals a fresh run of its command
(tests/doc_examples.py; ``python tests/doc_examples.py`` regenerates them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import doc_examples
import pytest


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with doc_examples.clone() as where:
        yield where


def test_check_examples_are_what_check_prints(folder: Path) -> None:
    """Trial 3 friction: the Llama-2 example no longer matched real output (the head row, add_eos)."""
    shown = doc_examples.blocks(doc_examples.DOC.read_text(encoding="utf-8"))
    assert [c for c, _ in shown] == ["$ dspark-convert check draft.gguf --target fixtures/target-llama2-spm",
                                     "$ dspark-convert check draft.gguf --target Qwen3-tiny-Q8_0.gguf"]
    for command, text in shown:
        assert text == doc_examples.run(command, folder), f"{command}: run python tests/doc_examples.py"
