"""The ``check --target`` examples of docs/check.md, made by real runs: each ``$ dspark-convert check ...`` block is
the command and what it prints on a terminal :data:`WIDTH` columns wide, run in a folder holding the fixtures,
``draft.gguf`` (``hf2gguf fixtures/dspark-qwen3 -t fixtures/target-qwen3``, default options) and
``Qwen3-tiny-Q8_0.gguf`` (a target GGUF header with target-qwen3's tokenizer, tests/fit_pairs.py).

``tests/cli/test_doc_check_examples.py`` compares the blocks with fresh runs; ``python tests/doc_examples.py`` rewrites
them in docs/check.md after a change to what ``check`` prints.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "check.md"
WIDTH = 100
BLOCK = re.compile(r"```\n(\$ dspark-convert check [^\n]*)\n(.*?)```", re.S)


@contextlib.contextmanager
def clone() -> Iterator[Path]:
    """A folder as a user has it after the Quick start: fixtures/, draft.gguf, Qwen3-tiny-Q8_0.gguf."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fit_pairs import hf_target_kvs, write_target_gguf

    from dspark_convert import convert

    logging.getLogger("dspark_convert").setLevel(logging.ERROR)  # the fixture tokenizer's chkhsh note
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
        convert(ROOT / "fixtures" / "dspark-qwen3", ROOT / "fixtures" / "target-qwen3", folder / "draft.gguf")
        write_target_gguf(folder / "Qwen3-tiny-Q8_0.gguf", hf_target_kvs())
        yield folder


def run(command: str, folder: Path) -> str:
    """What ``command`` (``$ dspark-convert check FILE --target TARGET``) prints on a WIDTH-column terminal."""
    from dspark_convert.fit import check_fit
    from dspark_convert.render import render_fit

    args = shlex.split(command.removeprefix("$ "))
    assert args[:2] == ["dspark-convert", "check"] and args[3] == "--target" and len(args) == 5, args
    old = Path.cwd()
    os.chdir(folder)
    try:
        report = check_fit(args[2], args[4])
    finally:
        os.chdir(old)
    console = Console(file=io.StringIO(), force_terminal=True, width=WIDTH, record=True, markup=False,
                      highlight=False, color_system=None)
    render_fit(report, console)
    return "\n".join(ln.rstrip() for ln in console.export_text().splitlines()) + "\n"


def blocks(text: str) -> list[tuple[str, str]]:
    """(command, shown output) of every check example block of ``text``."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def regenerate(text: str, folder: Path) -> str:
    return BLOCK.sub(lambda m: f"```\n{m.group(1)}\n{run(m.group(1), folder)}```", text)


if __name__ == "__main__":
    with clone() as where:
        DOC.write_text(regenerate(DOC.read_text(encoding="utf-8"), where), encoding="utf-8")
    print(DOC)
