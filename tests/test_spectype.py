"""Issue 23: ``check`` and ``inspect`` say which ``--spec-type`` llama-server b11434 needs for a draft file
(dspark_convert/variants/spectype.py, from upstream's common/speculative.cpp), and ``check`` warns when
llama-server's auto-detection would draft the file wrongly (a head-less anchor-first file: DeepSpec's "DFlash")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dspark_convert.check import check_file, errors
from dspark_convert.cli import app
from dspark_convert.inspect import inspect_gguf
from dspark_convert.variants.spectype import spec_type_of

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
    findings = check_file(f)
    assert errors(findings) == []
    warned = [x for x in findings if x.rule == "spec-type"]
    if layout == "dflash-deepspec":
        assert len(warned) == 1 and warned[0].level == "warning"
        assert warned[0].message.startswith("serve this file with --spec-type draft-dspark --spec-draft-p-min 0: ")
        assert "one position late" in warned[0].message
    else:
        assert warned == []


def test_check_cli_prints_the_spec_type(converted: Callable[..., Path]) -> None:
    r = CliRunner().invoke(app, ["check", str(converted("eagle3-specforge", "bf16"))])
    assert r.exit_code == 0
    assert "llama-server: pass --spec-type draft-eagle3 (llama-server never auto-detects an eagle3 file)" in \
        " ".join(r.stdout.split())
    r = CliRunner().invoke(app, ["check", str(converted("dflash-deepspec", "bf16")), "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["ok"] is True
    assert doc["spec_type"]["spec_type"] == "draft-dspark" and doc["spec_type"]["flag_needed"] is True
    assert doc["spec_type"]["extra_flags"] == ["--spec-draft-p-min 0"]
    assert [f["rule"] for f in doc["findings"]] == ["spec-type"]


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
