"""Issue 23: ``check`` and ``inspect`` say which ``--spec-type`` llama-server b11434 needs for a draft file
(dspark_convert/registry/spectype.py, from upstream's common/speculative.cpp), and ``check`` prints a warning
line when llama-server's auto-detection would draft the file wrongly (a head-less anchor-first file: DeepSpec's
"DFlash"); it is not a loader finding (the file loads, and upstream writes the same)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dspark_convert.check import check_file, spec_type, spec_type_warning
from dspark_convert.cli import app
from dspark_convert.gguffile.source import plan_from_source
from dspark_convert.inspect import inspect_gguf
from dspark_convert.registry.spectype import HF_KEYWORDS, SPEC_TYPES, file_name_of, hub_name, spec_type_of

#: fixture -> (needed, auto-detected) on llama-server b11434
CASES = {
    "dspark-qwen3": ("draft-dspark", "draft-dspark"),        # markov_w1.weight
    "dspark-specforge": ("draft-dspark", "draft-dspark"),    # Markov head, bonus anchor (sample_from_anchor false)
    "dflash-zlab": ("draft-dflash", "draft-dflash"),         # no Markov head, no sample_from_anchor key
    "dflash2-zlab": ("draft-dflash", "draft-dflash"),        # selector walk under draft-dflash
    "dflash-deepspec": ("draft-dspark", "draft-dflash"),     # head-less, sample_from_anchor true: auto-detect is wrong
    "eagle3-specforge": ("draft-eagle3", None),              # never auto-detected
}


@pytest.mark.parametrize("layout", list(CASES))
def test_spec_type_per_fixture(layout: str, converted: Callable[..., Path]) -> None:
    f = converted(layout, "bf16")
    info = inspect_gguf(f, tensors=False)
    st = info["spec_type"]
    assert (st["spec_type"], st["auto_detected"]) == CASES[layout]
    assert st["flag_needed"] is (CASES[layout][0] != CASES[layout][1])
    assert check_file(f) == []          # not a loader finding: the file loads (and upstream writes the same)
    warning = spec_type_warning(spec_type(plan_from_source(f)[0]))
    if layout == "dflash-deepspec":
        assert warning is not None and warning.startswith(
            "llama-server would auto-detect draft-dflash for this file; serve it with --spec-type draft-dspark "
            "--spec-draft-p-min 0: ")
        assert "one position late" in warning
    else:
        assert warning is None


def test_check_cli_prints_the_spec_type(converted: Callable[..., Path]) -> None:
    r = CliRunner().invoke(app, ["check", str(converted("eagle3-specforge", "bf16"))])
    assert r.exit_code == 0
    assert "llama-server: pass --spec-type draft-eagle3 (llama-server never auto-detects an eagle3 file)" in \
        " ".join(r.stdout.split())
    deepspec = str(converted("dflash-deepspec", "bf16"))
    r = CliRunner().invoke(app, ["check", deepspec, "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["ok"] is True and doc["findings"] == []
    assert doc["spec_type"]["spec_type"] == "draft-dspark" and doc["spec_type"]["flag_needed"] is True
    assert doc["spec_type"]["extra_flags"] == ["--spec-draft-p-min 0"]
    r = CliRunner().invoke(app, ["check", deepspec])
    assert r.exit_code == 0
    assert " ".join(r.stderr.split()).startswith("warning: llama-server would auto-detect draft-dflash for this file; "
                                                 "serve it with --spec-type draft-dspark --spec-draft-p-min 0: ")


def test_spec_type_rules_from_the_loader_source() -> None:
    """The decision table of common/speculative.cpp, on bare metadata."""
    def st(kv: dict, names: list[str]) -> tuple[str | None, str | None]:
        s = spec_type_of({"general.architecture": "dflash", **kv}.get, names)
        return s.spec_type, s.auto_detected

    assert st({}, ["markov_w1.weight"]) == ("draft-dspark", "draft-dspark")
    assert st({"dflash.sample_from_anchor": False}, ["markov_w1.weight"]) == ("draft-dspark", "draft-dspark")
    assert st({"dflash.sample_from_anchor": True}, []) == ("draft-dspark", "draft-dflash")
    assert st({"dflash.sample_from_anchor": False}, []) == ("draft-dflash", "draft-dflash")
    assert st({}, []) == ("draft-dflash", "draft-dflash")
    assert st({"dflash.sample_from_anchor": True}, ["selector_hidden.weight"]) == ("draft-dflash", "draft-dflash")
    other = spec_type_of({"general.architecture": "qwen3"}.get, [])
    assert other.spec_type is None and not other.flag_needed
    assert spec_type_of({"general.architecture": "eagle3"}.get, []).flag_needed


@pytest.mark.parametrize(("ref", "name"), [
    ("out/dspark-a-BF16.gguf", "dspark-a-BF16.gguf"),
    ("hf://org/repo/sub/dspark-a.gguf@v1", "dspark-a.gguf"),
    ("hf://org/repo@v1/sub/dspark-a.gguf", "dspark-a.gguf"),
    ("https://host/x/dflash-a.gguf?download=true#frag", "dflash-a.gguf"),
    ("org/repo/mtp-a.gguf", "mtp-a.gguf"),
])
def test_the_name_hf_sees(ref: str, name: str) -> None:
    assert file_name_of(ref) == name


def test_hf_keywords_follow_download_cpp() -> None:
    """common/download.cpp b11434: find_best_mtp/eagle3/dflash/dspark look for these substrings; common/arg.cpp tries
    mtp, dspark, dflash, eagle3 in this order when -hfd has no --spec-type."""
    assert list(HF_KEYWORDS.items()) == [("draft-mtp", "mtp-"), ("draft-dspark", "dspark-"),
                                         ("draft-dflash", "dflash-"), ("draft-eagle3", "eagle3-")]
    assert set(HF_KEYWORDS) == set(SPEC_TYPES)
    for spec, keyword in HF_KEYWORDS.items():
        good = hub_name(f"{keyword}Qwen3-8B-Q8_0.gguf", spec)
        assert (good.keyword, good.found_as, good.problem) == (keyword, spec, None)
        upper = hub_name(f"{keyword.upper()}Qwen3-8B-Q8_0.gguf", spec)  # matched case-sensitively
        assert upper.found_as is None and upper.problem is not None and "(lower case)" in upper.problem
        bare = hub_name(f"{keyword[:-1]}_Qwen3-8B-Q8_0.gguf", spec)  # the hyphen is part of the keyword
        assert bare.found_as is None and bare.problem is not None
        assert hub_name(f"{keyword}a.bin", spec).problem == (f"the file name '{keyword}a.bin' does not end in .gguf: "
                                                              "llama-server's -hf looks at .gguf files only")
    assert hub_name("eagle3-dflash-x.gguf", "draft-eagle3").found_as == "draft-dflash"  # dflash- is tried first
