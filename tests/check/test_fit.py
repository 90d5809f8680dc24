"""``dspark-convert check DRAFT --target TARGET``: llama.cpp's draft/target rules (dspark_convert.fit).

Drafts are converted from the fixtures against target-qwen3. Targets are either HF folders (the fixtures) or
target GGUFs written here with gguf's writer: the header only (``{arch}.*`` sizes and the tokenizer KVs an
upstream conversion of target-qwen3 holds), edited per case. Matched pairs pass every rule; each mismatched
pair fails exactly the rule it breaks, with the exact line, and the CLI exits 1.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from bad_inputs_kit import run_cli
from fit_pairs import FIX, ROOT, TARGET, convert_draft, edit_kvs, hf_target_kvs, tokens_of, write_target_gguf
from fixture_registry import names
from gguf_samples import write_sample

from dspark_convert.errors import ConvertError
from dspark_convert.fit import check_fit, open_target
from dspark_convert.fit.rules import all_rules
from dspark_convert.roles.fit import vocab_facts

#: the committed DFlash / DSpark and EAGLE-3 drafts (tests/fixture_registry.py); those with a d2t vocabulary map
DRAFTS = names(source="committed", variant=("dflash", "eagle3"))
WITH_D2T = set(names(source="committed", tag="d2t"))
TAPS_NOTE = "(GGUF taps are HF target_layer_ids + 1: id k is the input of target layer k, {n} the last layer's output)"


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    logging.getLogger("dspark_convert").setLevel(logging.ERROR)  # the fixture tokenizer's chkhsh note
    folder = tmp_path_factory.mktemp("drafts")
    return {name: convert_draft(name, folder / f"{name}.gguf") for name in DRAFTS}


@pytest.fixture(scope="module")
def qwen_kvs() -> list[Any]:
    return hf_target_kvs()


def statuses(report: Any) -> dict[str, str]:
    return {r.id: r.status for r in report.results}


def fails(report: Any) -> dict[str, str]:
    return {r.id: r.message for r in report.results if r.status == "fail"}


# ---------------------------------------------------------------------------------------------- matched pairs
@pytest.mark.parametrize("kind", ["gguf", "hf"])
@pytest.mark.parametrize("name", DRAFTS)
def test_matched_pair_passes_every_rule(name: str, kind: str, drafts: dict[str, Path], qwen_kvs: list[Any],
                                        tmp_path: Path) -> None:
    target = write_target_gguf(tmp_path / "t.gguf", qwen_kvs) if kind == "gguf" else TARGET
    report = check_fit(drafts[name], target)
    family = "eagle3" if name.startswith("eagle3") else ("dflash" if name.startswith("dflash") else "dspark")
    assert report.draft.family == family
    want = ["vocab-type", "bos", "eos", "vocab-size", "token-text"]
    want += ["extract-layers", "fc-width", "vocab-cover"] if family == "eagle3" else ["taps", "fc-width", "mask-id", "head"]
    want += ["target-graph", "d2t-range", "rope-base", "rope-scaling", "context-length", "chat-template"]
    assert [r.id for r in report.results] == want
    st = statuses(report)
    assert st.pop("d2t-range") == ("pass" if name in WITH_D2T else "skip")
    n_pass = 9 if family == "eagle3" else 10   # DFlash/DSpark: + the head rule (issue 23); + target-graph
    assert {k: v for k, v in st.items() if v != "info"} == dict.fromkeys(want[:n_pass], "pass")
    assert report.ok and report.loader_findings == []
    token_text = next(r for r in report.results if r.id == "token-text")
    assert token_text.message == "equal for ids 5..1023" and token_text.details["differing"] == 0
    if name in WITH_D2T:
        d2t = next(r for r in report.results if r.id == "d2t-range")
        assert d2t.draft == [7, 588] and d2t.message == "d2t maps to target ids 7..588, all < 1024 target tokens"


def test_every_rule_is_documented_with_its_source() -> None:
    """docs/check.md has a table row for each rule id that names the llama.cpp function the rule replays."""
    rows = [ln for ln in (ROOT / "docs" / "check.md").read_text(encoding="utf-8").splitlines() if ln.startswith("| `")]
    for rule in all_rules():
        fn = rule.source.split(": ", 1)[1].split(" ")[0].split("(")[0]
        assert any(f"`{rule.id}`" in row and fn in row for row in rows), (rule.id, fn)

# ---------------------------------------------------------------------------------------------- mismatched pairs
def _tokens_changed(kvs: list[Any], **at: str) -> list[str]:
    tokens = tokens_of(kvs)
    for i, text in at.items():
        tokens[int(i.lstrip("_"))] = text
    return tokens


def test_wrong_tokenizer_of_equal_size(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    old = tokens_of(qwen_kvs)
    tokens = _tokens_changed(qwen_kvs, _700="[/]x[red]", _901="Ġzz")
    target = write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=tokens))
    report = check_fit(drafts["dspark-qwen3"], target)
    assert fails(report) == {"token-text": f"token 700 differs: draft {old[700]!r}, target '[/]x[red]'; "
                                           "2 of 1019 ids (ids 5..1023) differ"}
    r = next(r for r in report.results if r.id == "token-text")
    assert (r.draft, r.target) == (old[700], "[/]x[red]")
    assert r.details == {"first_id": 5, "end_id": 1024, "differing": 2, "first_differing_id": 700}
    out = run_cli(["check", str(drafts["dspark-qwen3"]), "--target", str(target)], tmp_path)
    assert out.exit_code == 1 and out.exception is None
    assert "[/]x[red]" in out.stdout and "DOES NOT FIT: 9 passed, 1 failed, 4 info, 1 skipped" in out.stdout


def test_ids_below_5_are_not_compared(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    tokens = _tokens_changed(qwen_kvs, _0="other0", _4="other4")
    report = check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=tokens)))
    assert report.ok and fails(report) == {}


MISMATCHES: dict[str, tuple[str, dict[str, Any], dict[str, Any], dict[str, str]]] = {
    # case: (draft fixture, tokenizer KV edits, {arch}.* size edits, the failing rules and their lines)
    "add-bos-differs": ("dspark-qwen3", {"add_bos_token": True}, {},
                        {"bos": "add_bos differs: draft false, target true"}),
    "add-eos-differs": ("dspark-qwen3", {"add_eos_token": True}, {},
                        {"eos": "add_eos differs: draft false, target true"}),
    "vocab-type": ("dflash-zlab", {"model": "llama"}, {},
                   {"vocab-type": "vocab type differs: draft BPE (gpt2), target SPM (llama); llama.cpp: \"draft model "
                                  "vocab type must match target model\""}),
    "taps-beyond-target": ("dspark-qwen3", {}, {"block_count": 4},
                           {"taps": "tap 5 is not a layer of the 4-layer target: valid ids are 0..4 "
                                    + TAPS_NOTE.format(n=4)}),
    "wrong-hidden-size": ("dflash-zlab", {}, {"embedding_length": 128},
                          {"fc-width": "fc.weight input width 192 != 3 taps x target embedding_length 128 = 384"}),
    "eagle3-layers-beyond-target": ("eagle3-speculators", {}, {"block_count": 4},
                                    {"extract-layers": "extract layer 5 is not a layer of the target: valid ids are "
                                                       "0..4 (id 4 = the final hidden state); llama.cpp aborts with "
                                                       "\"target layer id exceeds target n_layer\""}),
    "eagle3-wrong-hidden-size": ("eagle3-specforge", {}, {"embedding_length": 32},
                                 {"fc-width": "fc.weight input width 192 != 3 extract layers x target "
                                              "embedding_length 32 = 96 (draft eagle3.target_hidden_size 64)"}),
}


@pytest.mark.parametrize("case", list(MISMATCHES), ids=list(MISMATCHES))
def test_mismatched_pair_fails_exactly_its_rule(case: str, drafts: dict[str, Path], qwen_kvs: list[Any],
                                                tmp_path: Path) -> None:
    fixture, kv_edits, hp, want = MISMATCHES[case]
    target = write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, **kv_edits), **hp)
    report = check_fit(drafts[fixture], target)
    assert fails(report) == want
    assert not report.ok
    out = run_cli(["check", str(drafts[fixture]), "--target", str(target), "--json"], tmp_path)
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and {r["id"]: r["message"] for r in doc["rules"] if r["status"] == "fail"} == want


def test_boundaries_that_still_fit(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    """Tap id == block_count (the last layer's output) is a layer of the target (rule ``taps``), though llama.cpp
    b11434's qwen3 graph does not record that output (rule ``target-graph``); a 128-token size difference is
    accepted."""
    last = check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "a.gguf", qwen_kvs, block_count=5))
    status = {r.id: r.status for r in last.results}
    assert [i for i, s in status.items() if s == "fail"] == ["target-graph"]
    assert status["taps"] == "pass"
    assert check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "c.gguf", qwen_kvs, block_count=6)).ok
    bigger = tokens_of(qwen_kvs) + [f"[PAD{i}]" for i in range(1024, 1024 + 128)]
    report = check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "b.gguf", edit_kvs(qwen_kvs, tokens=bigger)))
    assert report.ok
    assert next(r for r in report.results if r.id == "vocab-size").message == \
        "draft 1024 tokens, target 1152: difference 128 <= 128"


def test_vocab_size_difference_over_128(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    bigger = tokens_of(qwen_kvs) + [f"[PAD{i}]" for i in range(1024, 1024 + 129)]
    report = check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=bigger)))
    assert fails(report) == {"vocab-size": "draft 1024 tokens, target 1153: difference 129 > 128"}


def test_mask_and_d2t_outside_a_smaller_target(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    smaller = write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=tokens_of(qwen_kvs)[:1000]))
    assert fails(check_fit(drafts["dspark-qwen3"], smaller)) == {
        "mask-id": "mask token 1016 is outside the target's 1000 tokens (the draft embeds its mask block with the "
                   "target's token rows)"}
    tiny = write_target_gguf(tmp_path / "u.gguf", edit_kvs(qwen_kvs, tokens=tokens_of(qwen_kvs)[:500]))
    assert fails(check_fit(drafts["dspark-reduced"], tiny)) == {
        "vocab-size": "draft 1024 tokens, target 500: difference 524 > 128",
        "mask-id": "mask token 1016 is outside the target's 500 tokens (the draft embeds its mask block with the "
                   "target's token rows)",
        "d2t-range": "d2t maps to target ids 7..588, outside the target's 500 tokens"}


def test_eagle3_draft_vocab_must_cover_the_target(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    bigger = tokens_of(qwen_kvs) + [f"[PAD{i}]" for i in range(1024, 1100)]
    report = check_fit(drafts["eagle3-llama"], write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=bigger)))
    assert fails(report) == {"vocab-cover": "draft 1024 tokens < target 1100; llama.cpp: \"the draft vocab is smaller "
                                            "than the target's; target tokens past it cannot be mirrored\""}


def test_bos_ids_compared_only_when_added(drafts: dict[str, Path], tmp_path: Path) -> None:
    """A SentencePiece pair adds BOS on both sides: then the ids must match; without add_bos they need not."""
    draft = convert_draft("dspark-qwen3", tmp_path / "spm-draft.gguf", FIX / "target-llama2-spm")
    spm = hf_target_kvs(FIX / "target-llama2-spm", 1024, "llama")
    report = check_fit(draft, write_target_gguf(tmp_path / "a.gguf", spm, arch="llama"))
    assert report.ok
    bos = next(r for r in report.results if r.id == "bos")
    assert (bos.draft, bos.message) == ("add_bos=true (key), bos=1 '<s>'", "both add BOS 1")
    assert fails(check_fit(draft, write_target_gguf(tmp_path / "b.gguf", edit_kvs(spm, bos_token_id=2), arch="llama"))) \
        == {"bos": "BOS id differs: draft 1, target 2 (both add it)"}
    qwen_bos = check_fit(drafts["dspark-qwen3"], write_target_gguf(tmp_path / "c.gguf", edit_kvs(
        hf_target_kvs(), bos_token_id=5)))  # neither side adds BOS: a different BOS id does not matter
    bos = next(r for r in qwen_bos.results if r.id == "bos")
    assert (bos.status, bos.target) == ("pass", f"add_bos=false (key), bos=5 {tokens_of(hf_target_kvs())[5]!r}")


def test_hf_target_folders(drafts: dict[str, Path]) -> None:
    assert check_fit(drafts["dspark-qwen3"], FIX / "target-qwen3-sharded").ok
    report = check_fit(drafts["dspark-qwen3"], FIX / "target-llama2-spm")
    assert report.target.kind == "hf" and report.target.arch == "llama"
    assert fails(report) == {
        "vocab-type": "vocab type differs: draft BPE (gpt2), target SPM (llama); llama.cpp: \"draft model vocab type "
                      "must match target model\"",
        "bos": "add_bos differs: draft false, target true",
        "vocab-size": "draft 1024 tokens, target 512: difference 512 > 128",
        "token-text": "token 5 differs: draft '&', target '<0x02>'; 500 of 507 ids (ids 5..511) differ",
        "mask-id": "mask token 1016 is outside the target's 512 tokens (the draft embeds its mask block with the "
                   "target's token rows)"}
    info = {r.id: r.message for r in report.results if r.status == "info"}
    assert info["rope-base"] == "rope bases differ: draft 1e+06, target 10000"
    assert info["context-length"] == "context lengths differ: draft 40960, target 4096"


def test_hf_target_pre_tokenizer_fallback_is_a_note_not_a_warning(drafts: dict[str, Path], tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The fixture target's chkhsh is in no table: reading it notes the regex fallback (as hf2gguf does), in the
    report and its JSON, never as a logged warning."""
    with caplog.at_level(logging.WARNING, logger="dspark_convert"):
        report = check_fit(drafts["dspark-qwen3"], TARGET)
    assert report.ok and not caplog.records
    assert [(n.level, n.subject) for n in report.notes] == [("note", "tokenizer.ggml.pre")]
    assert "is not in llama.cpp's table" in report.notes[0].message
    assert report.to_dict()["notes"] == [n.to_dict() for n in report.notes]
    r = run_cli(["check", str(drafts["dspark-qwen3"]), "--target", str(TARGET)], tmp_path)
    assert r.exit_code == 0 and r.stderr == "" and r.before == r.after
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("note: ")] == [f"note: {report.notes[0].message}"]


def test_hf_target_repo_id_from_the_local_cache(drafts: dict[str, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    snap = tmp_path / "hub" / "models--org--target" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (snap / f).write_bytes((TARGET / f).read_bytes())
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    report = check_fit(drafts["dspark-qwen3"], "org/target")
    assert report.ok and report.target.source == "org/target" and report.target.kind == "hf"


def test_sparse_2gb_target_is_read_from_its_header(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    target = write_target_gguf(tmp_path / "big.gguf", qwen_kvs, big_tensor_bytes=2 << 30)
    assert target.stat().st_size > 2 << 30 and target.stat().st_blocks * 512 < 1 << 20  # a hole, not data
    side = open_target(target)
    assert side.tensors == {"token_embd.weight": (64, (2 << 30) // 256)} and side.hp["block_count"] == 6
    assert check_fit(drafts["dspark-qwen3"], target).ok


# ---------------------------------------------------------------------------------------------- CLI and JSON
def test_cli_json_schema_and_exit_0(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    target = write_target_gguf(tmp_path / "t.gguf", qwen_kvs)
    out = run_cli(["check", str(drafts["eagle3-llama"]), "--target", str(target), "--json"], tmp_path)
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) == {"draft", "draft_arch", "family", "target", "target_kind", "target_arch", "ok", "counts",
                        "rules", "loader_findings", "notes", "spec_type"}
    assert (doc["draft_arch"], doc["family"], doc["target_kind"], doc["target_arch"]) == ("eagle3", "eagle3", "gguf",
                                                                                          "qwen3")
    # the --spec-type the draft runs with, as check DRAFT --json says it
    alone = json.loads(run_cli(["check", str(drafts["eagle3-llama"]), "--json"], tmp_path).stdout)
    assert doc["spec_type"] == alone["spec_type"] and doc["spec_type"]["spec_type"] == "draft-eagle3"
    assert doc["counts"] == {"pass": 10, "fail": 0, "info": 4, "skip": 0} and doc["notes"] == []
    for r in doc["rules"]:
        assert set(r) == {"id", "status", "draft", "target", "message", "source", "details"}
    layers = next(r for r in doc["rules"] if r["id"] == "extract-layers")
    assert (layers["draft"], layers["target"], layers["status"]) == ([2, 3, 3], 6, "pass")
    assert layers["source"] == "common/speculative.cpp: common_speculative_impl_draft_eagle3 (constructor)"


def test_cli_unreadable_inputs_exit_2(drafts: dict[str, Path], tmp_path: Path) -> None:
    text = tmp_path / "target.gguf"
    text.write_text("not a gguf")
    cases = [([str(drafts["dflash-zlab"]), "--target", str(text)], f"{text}: header at byte 0: truncated"),
             ([str(drafts["dflash-zlab"]), "--target", str(tmp_path / "missing.gguf")],
              f"{tmp_path / 'missing.gguf'}: no such file (expected a target GGUF, a target model folder or a Hugging "
              "Face repo id)"),
             ([str(tmp_path / "nope.gguf"), "--target", str(TARGET)], f"{tmp_path / 'nope.gguf'}: cannot open")]
    for args, frag in cases:
        out = run_cli(["check", *args], tmp_path)
        assert out.exit_code == 2 and out.exception is None, out.stdout
        assert len(out.error_lines) == 1 and frag in out.error_lines[0], out.stderr


@pytest.mark.parametrize("given", ["dspark-qwen3.gguf", "eagle3-angelslim.gguf", "dspark-qwen3", "eagle3-llama",
                                   "eagle3-angelslim"])
def test_a_draft_given_as_the_target_is_named_a_draft(given: str, drafts: dict[str, Path], tmp_path: Path) -> None:
    """Issue 24 bug 4: a draft GGUF was checked as a 2-layer target, a draft folder refused as an unsupported
    target architecture (or, for an EAGLE-3 draft calling itself LlamaForCausalLM, as lacking tokenizer files)."""
    target = drafts[given[:-5]] if given.endswith(".gguf") else FIX / given
    arch = "dflash" if given.startswith("dspark") else "eagle3"
    if given.endswith(".gguf"):
        want = (f"{target}: is a draft GGUF (general.architecture '{arch}'), not a target model; pass the target "
                "model the draft was made for as --target")
    else:
        config = json.loads((target / "config.json").read_text())
        want = (f"{target}: is a draft checkpoint ({config['architectures'][0]}), not a target model; pass the "
                "target model the draft was trained for as --target")
    with pytest.raises(ConvertError) as e:
        check_fit(drafts["dspark-qwen3"], target)
    assert str(e.value) == want
    out = run_cli(["check", str(drafts["eagle3-normfc"]), "--target", str(target)], tmp_path)
    assert out.exit_code == 2 and out.error_lines == [f"error: {want}"], out.stderr


def test_eagle3_llama3_scaling_in_rope_freqs_is_shown(drafts: dict[str, Path]) -> None:
    """Issue 24: ``check --target`` showed ``rope-scaling none`` for the EAGLE-3 draft whose llama3 scaling is
    written (as upstream does) as ``rope_freqs.weight`` rather than ``rope.scaling.*`` keys."""
    rows = {r.id: r for r in check_fit(drafts["eagle3-llama"], TARGET).results}
    assert rows["rope-scaling"].draft == "llama3 (frequency factors in rope_freqs.weight)"
    assert rows["rope-scaling"].target == "none"
    plain = {r.id: r for r in check_fit(drafts["eagle3-angelslim"], TARGET).results}
    assert plain["rope-scaling"].draft == "none"


def test_draft_failing_loader_rules_is_reported_too(tmp_path: Path, qwen_kvs: list[Any]) -> None:
    bad = write_sample(tmp_path / "bad.gguf")
    report = check_fit(bad, write_target_gguf(tmp_path / "t.gguf", qwen_kvs))
    assert not report.ok and any(f.level == "error" for f in report.loader_findings)
    out = run_cli(["check", str(bad), "--target", str(tmp_path / "t.gguf")], tmp_path)
    assert out.exit_code == 1 and "Draft loader rules" in out.stdout and "loader error(s)" in out.stdout


def test_target_without_tokens_is_refused(tmp_path: Path, drafts: dict[str, Path], qwen_kvs: list[Any]) -> None:
    target = write_target_gguf(tmp_path / "t.gguf", edit_kvs(qwen_kvs, tokens=None))
    with pytest.raises(ConvertError, match=r"t\.gguf: key 'tokenizer\.ggml\.tokens' is missing or not a string array"):
        check_fit(drafts["dflash-zlab"], target)


# ---------------------------------------------------------------------------------------------- llama.cpp vocab defaults
@pytest.mark.parametrize(("kvs", "n", "want"), [
    ({"tokenizer.ggml.model": "llama"}, 3, ("SPM", True, 1, False, 2)),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"}, 20, ("BPE", False, 11, False, 11)),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe"}, 20, ("BPE", True, 11, False, 11)),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "glm4"}, 20, ("BPE", False, None, False, 11)),
    ({"tokenizer.ggml.model": "t5"}, 20, ("UGM", False, None, True, 1)),
    ({"tokenizer.ggml.model": "bert"}, 200, ("WPM", True, 101, False, None)),
    # an id outside the vocabulary is dropped ("bad special token") and the default stays
    ({"tokenizer.ggml.model": "llama", "tokenizer.ggml.bos_token_id": 7, "tokenizer.ggml.eos_token_id": 2}, 5,
     ("SPM", True, 1, False, 2)),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": 3}, 5,
     ("BPE", True, 3, False, 11)),
    ({"tokenizer.ggml.model": "mystery"}, 5, ("unknown 'mystery'", False, None, False, None)),
])
def test_vocab_facts_replay_llama_cpp_defaults(kvs: dict[str, Any], n: int, want: tuple[Any, ...]) -> None:
    f = vocab_facts(kvs, [f"t{i}" for i in range(n)])
    assert (f.type, f.add_bos, f.bos, f.add_eos, f.eos) == want


def test_remote_draft_and_target_over_http(drafts: dict[str, Path], qwen_kvs: list[Any], tmp_path: Path) -> None:
    """DRAFT and --target as URLs (a local server started here): headers fetched with range requests; the remote
    draft's d2t data is not fetched, so that one rule is skipped and says why."""
    from http_server import FileServer, Route

    from dspark_convert.gguffile.options import RemoteOptions

    big = write_target_gguf(tmp_path / "big.gguf", qwen_kvs, big_tensor_bytes=2 << 30)
    small = write_target_gguf(tmp_path / "small.gguf", edit_kvs(qwen_kvs, tokens=tokens_of(qwen_kvs)[:500]))
    with FileServer() as s:
        s.routes["/big.gguf"] = Route(big)
        s.routes["/small.gguf"] = Route(small)
        s.routes["/draft.gguf"] = Route(drafts["eagle3-speculators"])
        opts = RemoteOptions(timeout=10.0, retries=0)
        report = check_fit(f"{s.url}/draft.gguf", f"{s.url}/big.gguf", remote=opts)
        assert report.ok and report.target.source == f"{s.url}/big.gguf" and report.target.kind == "gguf"
        d2t = next(r for r in report.results if r.id == "d2t-range")
        assert (d2t.status, d2t.message) == ("skip", "the draft is remote: its d2t data was not fetched (check a local "
                                                     "copy)")
        assert fails(check_fit(drafts["dspark-qwen3"], f"{s.url}/small.gguf", remote=opts)) == {
            "vocab-size": "draft 1024 tokens, target 500: difference 524 > 128",
            "mask-id": "mask token 1016 is outside the target's 500 tokens (the draft embeds its mask block with the "
                       "target's token rows)"}
        out = run_cli(["check", f"{s.url}/draft.gguf", "--target", f"{s.url}/big.gguf", "--json"], tmp_path)
        assert out.exit_code == 0, out.stderr
        assert json.loads(out.stdout)["target"] == f"{s.url}/big.gguf"
