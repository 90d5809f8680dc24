"""Fit checks at conversion (``hf2gguf``): mismatched pairs built from the fixtures stop with one line naming both
sides (nothing written), ``--ignore-target-mismatch`` turns those errors into warnings, warnings (a draft config
naming another target, a learned mask embedding, a different rope) leave the output as it would be; matched
pairs stay clean and byte-identical. Architecture aliases, the closest-name hint and ``--architecture``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_inputs_kit import (
    FIX,
    TARGET,
    assert_refused,
    copy_fixture,
    edit_config,
    get_tensor,
    run_cli,
    run_convert,
    set_tensor,
)
from fixture_registry import names

DRAFTS = names(source="committed", variant=("dflash", "eagle3"))  # tests/fixture_registry.py
HINT = " (pass --ignore-target-mismatch to convert anyway)"


def convert_json(draft: Path, target: Path, out: Path, *extra: str) -> tuple[int, dict, str]:
    """``hf2gguf --json``: exit code, the document with its notes left out of ``findings``, stderr."""
    r = run_cli(["hf2gguf", str(draft), "-t", str(target), "-o", str(out), "--json", *extra], out.parent)
    doc = json.loads(r.stdout) if r.exit_code == 0 else {}
    if doc:
        doc["findings"] = [f for f in doc["findings"] if f["level"] != "note"]
    return r.exit_code, doc, r.stderr


@pytest.mark.parametrize("target", ["target-qwen3", "target-qwen3-sharded"])
@pytest.mark.parametrize("name", DRAFTS)
def test_matched_pairs_have_no_findings(name: str, target: str, tmp_path: Path) -> None:
    code, doc, err = convert_json(FIX / name, FIX / target, tmp_path / "d.gguf")
    assert code == 0, err
    assert [f for f in doc["findings"] if f["rule"] != "spec-type"] == []
    # the one layout llama-server auto-detects wrongly (it reads sample_from_anchor: draft-dspark only) says so
    spec = [f["message"] for f in doc["findings"] if f["rule"] == "spec-type"]
    assert len(spec) == (name == "dflash-deepspec") and all("--spec-type draft-dspark" in m for m in spec), spec


def test_issue_example_wrong_vocab_stops_with_nothing_written(tmp_path: Path) -> None:
    """The issue's reproduction: a Qwen3 draft with a Llama-2 target used to convert silently."""
    out = tmp_path / "out"
    r = run_convert(FIX / "dspark-qwen3", FIX / "target-llama2-spm", out)
    line = assert_refused(r, f"{FIX / 'dspark-qwen3'}/config.json: vocab_size 1024, but "
                             f"{FIX / 'target-llama2-spm'}/config.json has vocab_size 512; the draft predicts ids of "
                             "another vocabulary" + HINT)
    assert line.startswith(str(FIX / "dspark-qwen3"))
    assert r.after == []


def test_ignore_target_mismatch_turns_errors_into_warnings(tmp_path: Path) -> None:
    code, doc, err = convert_json(FIX / "dspark-qwen3", FIX / "target-llama2-spm", tmp_path / "d.gguf",
                                  "--ignore-target-mismatch")
    assert code == 0, err
    rules = {(f["level"], f["rule"]) for f in doc["findings"]}
    assert ("warning", "target-vocab") in rules and ("warning", "target-rope") in rules
    assert not any(f["level"] == "error" for f in doc["findings"])
    assert (tmp_path / "d.gguf").stat().st_size == doc["bytes_written"]
    text = run_cli(["hf2gguf", str(FIX / "dspark-qwen3"), "-t", str(FIX / "target-llama2-spm"), "-o",
                    str(tmp_path / "e.gguf"), "--ignore-target-mismatch"], tmp_path)
    assert text.exit_code == 0 and "target-vocab" in text.stdout


def test_wrong_hidden_size(tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "target-qwen3", "target")
    edit_config(target, hidden_size=128)
    r = run_convert(FIX / "dflash-zlab", target, tmp_path / "out")
    assert_refused(r, f"{FIX / 'dflash-zlab'}/model.safetensors: fc.weight takes 3 target layers x 64 = 192 inputs "
                      f"(a target of hidden size 64), but {target}/config.json has hidden_size 128" + HINT)


def test_every_misfit_is_in_the_one_line(tmp_path: Path) -> None:
    """Issue 37 friction: a second misfit was hidden behind "(and 1 more)"; the line names each."""
    target = copy_fixture(tmp_path, "target-qwen3", "target")
    edit_config(target, hidden_size=128, num_hidden_layers=2)
    r = run_convert(FIX / "dspark-qwen3", target, tmp_path / "out")
    assert_refused(r, f"{FIX / 'dspark-qwen3'}/config.json: 'target_layer_ids' gives target layer 3 (after the +1 "
                      f"shift), but the target {target}/config.json has 2 layers (valid: 0..2); "
                      f"{FIX / 'dspark-qwen3'}/model.safetensors: fc.weight takes 3 target layers x 64 = 192 inputs "
                      f"(a target of hidden size 64), but {target}/config.json has hidden_size 128" + HINT)


def test_draft_config_naming_another_target_warns(tmp_path: Path) -> None:
    draft = copy_fixture(tmp_path, "dspark-speculators", "draft")
    cfg = json.loads((draft / "config.json").read_text())
    cfg["speculators_config"]["verifier"]["name_or_path"] = "meta-llama/Llama-3.1-8B-Instruct"
    (draft / "config.json").write_text(json.dumps(cfg))
    code, doc, err = convert_json(draft, TARGET, tmp_path / "d.gguf")
    assert code == 0, err
    assert [(f["level"], f["rule"], f["message"]) for f in doc["findings"]] == [
        ("warning", "target-name", f"{draft}/config.json: speculators_config.verifier.name_or_path names the target "
                                   f"'meta-llama/Llama-3.1-8B-Instruct', but the target given is '{TARGET}'")]


def test_learned_mask_embedding_warns_and_changes_no_byte(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    draft = copy_fixture(tmp_path / "a", "dspark-qwen3", "draft")  # same folder name: same general.name
    dtype, norm = get_tensor(draft, "norm.weight")
    set_tensor(draft, "mask_embedding", dtype, norm.copy())
    code, doc, err = convert_json(draft, TARGET, tmp_path / "d.gguf")
    assert code == 0, err
    assert [(f["level"], f["rule"]) for f in doc["findings"]] == [("warning", "mask-embedding")]
    assert "tensor 'mask_embedding'" in doc["findings"][0]["message"]
    code, plain, _ = convert_json(copy_fixture(tmp_path / "b", "dspark-qwen3", "draft"), TARGET, tmp_path / "p.gguf")
    assert (tmp_path / "d.gguf").read_bytes() == (tmp_path / "p.gguf").read_bytes()


def test_mask_id_in_padding_rows_alone_does_not_warn(tmp_path: Path) -> None:
    """Released drafts often use a mask id among the target's [PAD...] rows: that is not a finding."""
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    edit_config(draft, mask_token_id=1020)  # ids 1017..1023 are padding rows of the target tokenizer
    code, doc, err = convert_json(draft, TARGET, tmp_path / "d.gguf")
    assert code == 0, err
    assert doc["findings"] == []


def test_target_rope_difference_warns_for_dspark_only(tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "target-qwen3", "target")
    edit_config(target, rope_parameters={"rope_theta": 10000000.0, "rope_type": "default"})
    code, doc, err = convert_json(FIX / "dspark-qwen3", target, tmp_path / "d.gguf")
    assert code == 0, err
    assert [f["message"] for f in doc["findings"]] == [
        f"{FIX / 'dspark-qwen3'}/config.json: rope theta 1e+06 (dflash.rope.freq_base), but {target}/config.json has "
        "rope theta 1e+07; the draft inherits the target's rope"]
    code, doc, err = convert_json(FIX / "eagle3-speculators", target, tmp_path / "e.gguf")
    assert code == 0 and doc["findings"] == []


def _with_architecture(tmp_path: Path, arch: str) -> Path:
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    edit_config(draft, architectures=[arch])
    return draft


def test_alias_converts_as_the_supported_name(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    code, doc, err = convert_json(_with_architecture(tmp_path / "a", "LingDSparkModel"), TARGET, tmp_path / "l.gguf")
    assert code == 0, err
    assert doc["architecture"] == {"declared": "LingDSparkModel", "used": "Qwen3DSparkModel", "how": "alias"}
    assert "architecture LingDSparkModel converted as Qwen3DSparkModel (an alias upstream accepts)" in doc["plan"]["notes"]
    code, plain, err = convert_json(copy_fixture(tmp_path / "b", "dspark-qwen3", "draft"), TARGET, tmp_path / "p.gguf")
    assert plain["architecture"] == {"declared": "Qwen3DSparkModel", "used": "Qwen3DSparkModel", "how": "declared"}
    assert (tmp_path / "l.gguf").read_bytes() == (tmp_path / "p.gguf").read_bytes()


def test_forced_architecture_is_recorded(tmp_path: Path) -> None:
    draft = _with_architecture(tmp_path, "Qwen3ForCausalLM")  # a published draft declaring its target's class
    assert_refused(run_convert(draft, TARGET, tmp_path / "out"),
                   f"{draft}/config.json: architecture 'Qwen3ForCausalLM' is not a supported draft")
    out = run_cli(["hf2gguf", str(draft), "-t", str(TARGET), "-o", str(tmp_path / "f.gguf"),
                   "--architecture", "Qwen3DSparkModel"], tmp_path)
    assert out.exit_code == 0, out.stderr
    assert "architecture Qwen3DSparkModel forced with --architecture (config.json declares 'Qwen3ForCausalLM')" \
        in out.stdout
