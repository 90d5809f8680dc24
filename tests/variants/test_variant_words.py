"""What the command line says about the variants (``dspark_convert/registry/words.py``, issue 20): the help text and
upstream's family-selecting flag come from the variants' words, which ``--help`` loads without the registry, and
they agree with the registry and the family modules they describe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, TARGET

from dspark_convert import convert
from dspark_convert.registry import VARIANTS, words
from dspark_convert.registry.families import family_modules, family_name

ROOT = Path(__file__).resolve().parents[2]


def test_cli_loads_the_words_alone_and_they_are_the_registrys() -> None:
    code = ("import sys, json; import dspark_convert.cli as c; "
            "alone = 'dspark_convert.registry' not in sys.modules and 'gguf.constants' not in sys.modules; "
            "import dspark_convert.registry.words as w; from dspark_convert.registry import words as w2; "
            "same = w is w2 and [vars(f) for f in c.W.UPSTREAM_FLAGS] == [vars(f) for f in w.UPSTREAM_FLAGS] "
            "and all(getattr(c.W, n) == getattr(w, n) for n in ('DRAFT_KINDS', 'DRAFTS_INSIDE_TARGETS', "
            "'FILES_INSIDE_TARGETS', 'CHAINED_DRAFTS')); "
            "print(json.dumps([alone, same, c.UPSTREAM_FLAG.option, c.SUMMARY]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout) == [True, True, "--dspark",
                                    "Convert DSpark / DFlash / Gemma 4 assistant / EAGLE-3 / MTP sidecar drafts to GGUF, "
                                    "inspect and verify GGUF files."]


def test_words_agree_with_the_registry_and_the_families() -> None:
    # one draft kind per variant that refines none (the others are kinds of those)
    assert len(words.DRAFT_KINDS) == len([v for v in VARIANTS if v.refines is None]) == 4
    flag, mtp = words.UPSTREAM_FLAGS
    assert (mtp.option, mtp.keyword, mtp.attribute, mtp.required) == ("--mtp", "mtp", "MTP_FLAG", True)
    assert mtp.help == ("Upstream's flag for the MTP head inside a target checkpoint, written as an MTP sidecar "
                        "(needed: without it the checkpoint is a target model).")
    assert [family_name(m) for m in family_modules() if getattr(m, mtp.attribute, False)] == ["mtp"]
    assert (flag.option, flag.keyword, flag.attribute) == ("--dspark", "dspark", "DSPARK_FLAG")
    assert flag.help == "Upstream's flag for the DSpark draft inside a DeepSeek-V4 checkpoint (recognised without it)."
    # the flag selects the draft inside a target; the families whose checkpoint carries the tokenizer are that one
    # and the Gemma 4 assistant (converted on its own)
    selected = [family_name(m) for m in family_modules() if getattr(m, flag.attribute)]
    inside = [family_name(m) for m in family_modules() if m.TOKENIZER_IN_CHECKPOINT]
    assert selected == ["dspark_dsv4"] and inside == ["dspark_dsv4", "gemma4_assistant", "mtp"]
    assert len(words.DRAFTS_INSIDE_TARGETS) == len(words.FILES_INSIDE_TARGETS) == len(inside)


def test_convert_takes_upstream_flags_by_keyword_only(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"^convert\(\) got an unexpected keyword argument 'dsprak'$"):
        convert(FIXTURES / "dspark-qwen3", TARGET, tmp_path / "x.gguf", dry_run=True, dsprak=True)
    r = convert(FIXTURES / "dspark-qwen3", TARGET, tmp_path / "x.gguf", dry_run=True, dspark=False)
    assert r.family == "dspark" and list(tmp_path.iterdir()) == []
