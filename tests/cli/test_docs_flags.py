"""The docs cannot name a flag the tool does not have: every ``--flag`` in README.md and docs/*.md exists in the
help of the subcommand it is used with.

- In a command (``dspark-convert SUB ... --flag``, also across ``\\`` line continuations), the flag must be in
  ``dspark-convert SUB --help`` (``dspark-convert --flag``: the top-level help).
- Anywhere else (prose, tables), it must be in the help of some subcommand, unless it belongs to another tool
  named in the same paragraph (llama-server, upstream's converter, the benchmark and fixture scripts, hf).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from dspark_convert.cli import app

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SUBCOMMANDS = ("hf2gguf", "check", "inspect", "diff", "verify", "upgrade", "mtp-extract", "mtp-strip", "mtp-graft",
               "bench")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
COMMAND = re.compile(r"dspark-convert(?:\s+(" + "|".join(SUBCOMMANDS) + r"))?\b(.*)")
#: flags of other tools, allowed outside dspark-convert commands when their owner is named in the paragraph
FOREIGN = {
    "--spec-type": ("llama",), "--spec-draft-n-max": ("llama",),
    "--no-repack": ("llama",), "--spec-draft-p-min": ("llama",), "--metrics": ("llama",), "--cache": ("llamacpp.build",),
    "--jobs": ("llamacpp.build",), "--n-predict": ("bench",),
    "--remote": ("upstream", "convert_hf_to_gguf"), "--split-max-size": ("upstream", "convert_hf_to_gguf"),
    "--dspark": ("upstream", "convert_hf_to_gguf"), "--vocab-only": ("upstream", "convert_hf_to_gguf"),
    "--check": ("fixtures/generate.py", "scripts/target_table.py"), "--tree": ("scripts/target_table.py",),
    "--oracle": ("tests/target_drafts.py",), "--revision": ("hf download",), "--clear": ("python3 -m venv",), "--no-files": ("fish",),
    "--config-settings": ("pip install",),
    **{f: ("bench",) for f in ("--sizes", "--only", "--workdir", "--keep", "--warm", "--package", "--tiny",
                                "--runs", "--repeat", "--seeds", "--tokenizers", "--outtypes",
                                "--cold-runs", "--upstream", "--golden", "--gemma-tokenizer", "--tokenizer", "--gib",
                                "--sample", "--only-new", "--before", "--cores", "--handler", "--target", "--families",
                                "--numpy-forms")},
}


@cache
def help_flags(sub: str | None) -> frozenset[str]:
    r = CliRunner().invoke(app, [*([sub] if sub else []), "--help"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    return frozenset(FLAG.findall(r.stdout))


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text.replace("\\\n", " ")) if p.strip()]


def uses(path: Path) -> list[tuple[str | None, str, str]]:
    """``(subcommand or None, flag, paragraph)`` for every flag in the file; subcommand None: not in a command."""
    out = []
    for para in _paragraphs(path.read_text(encoding="utf-8")):
        for line in para.splitlines():
            rest = line
            for segment in re.split(r"\||&&|;|`", line):
                m = COMMAND.search(segment)
                if m:
                    out += [(m.group(1) or "", f, para) for f in FLAG.findall(m.group(2))]
                    rest = rest.replace(segment, " ", 1)
            out += [(None, f, para) for f in FLAG.findall(rest)]
    return out


def test_the_scan_finds_commands_and_prose() -> None:
    """The scanner itself: flags in a command are attributed to its subcommand; others are prose."""
    readme = uses(ROOT / "README.md")
    assert ("hf2gguf", "--target-model-dir", ) in {(s, f) for s, f, _ in readme}
    assert any(s is None for s, _, _ in readme)
    assert len({(s, f) for s, f, _ in readme if s}) >= 3


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_documented_flag_exists(path: Path) -> None:
    everywhere = frozenset().union(*(help_flags(s) for s in SUBCOMMANDS), help_flags(None))
    wrong = []
    for sub, flag, para in uses(path):
        if sub is not None:
            if flag not in help_flags(sub or None):
                wrong.append(f"dspark-convert {sub} has no {flag}")
        elif flag not in everywhere and not any(w in para.lower() for w in FOREIGN.get(flag, ())):
            wrong.append(f"{flag} (in prose) is not a dspark-convert flag: {para.strip()[:100]!r}")
    assert not wrong, f"{path.name}: " + "; ".join(wrong)


def test_comparison_rows_do_not_deny_what_the_tool_has() -> None:
    """Issue 24 bug 8: docs/comparison.md said DeepSeek-V4 DSpark (``--dspark``) was "not yet" supported while
    ``hf2gguf --dspark`` converts it. A row naming one of our flags cannot say no in the dspark-convert column, and
    a row naming a flag we lack cannot say yes."""
    ours = frozenset().union(*(help_flags(s) for s in SUBCOMMANDS))
    rows = [ln.split("|")[1:-1] for ln in (ROOT / "docs" / "comparison.md").read_text(encoding="utf-8").splitlines()
            if ln.startswith("| ") and FLAG.search(ln.split("|")[1])]
    assert len(rows) >= 2
    for feature, answer, *_ in rows:
        flags = FLAG.findall(feature)
        have = all(f in ours for f in flags)
        said = answer.strip().split()[0].rstrip(":,").lower()
        assert (said != "no" and "not yet" not in answer) if have else said == "no", (feature, answer)
