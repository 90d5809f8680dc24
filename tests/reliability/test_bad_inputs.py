"""The catalogue of bad inputs (tests/bad_inputs_cases.py, docs/troubleshooting.md): each one, built from a fixture
copy, is refused by ``dspark-convert hf2gguf`` with exit code 2, exactly one ``error:`` line that names the file,
key or tensor with what was found and what was expected, and nothing (no output, no temporary file) left in the
output folder. Property tests then corrupt config keys and safetensors header entries at random.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bad_inputs_cases import BOUND_AS_BYTES, BOUND_SECONDS, CASES, Case, argv, build, fragments
from bad_inputs_kit import (
    DELETE,
    FIX,
    TARGET,
    RawSafetensors,
    assert_refused,
    copy_fixture,
    load_raw,
    read_config,
    read_tensors,
    run_cli,
    run_convert,
    save_raw,
    write_config,
    write_tensors,
)
from fixture_registry import names
from gguf import GGUFReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.hf.checkpoint import read_safetensors_header

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "troubleshooting.md"


@pytest.mark.parametrize("c", [c for c in CASES.values() if not c.bounded], ids=[k for k, c in CASES.items() if not c.bounded])
def test_bad_input_is_refused_with_one_clear_line(c: Case, tmp_path: Path) -> None:
    inp = build(c, tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    outcome = run_cli(argv(c, inp, out_dir), out_dir)
    line = assert_refused(outcome, *fragments(c, inp), code=c.code)
    assert outcome.after == []  # no output file, no *.partial
    # the troubleshooting entry quotes this very line (issue 24 bug 9: its known-architecture lists had gone stale)
    shown = line.replace(str(inp.target), "TARGET").replace(str(inp.draft), "DRAFT")
    assert documented_line(c.id) == f"error: {shown}"


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (BOUND_AS_BYTES, BOUND_AS_BYTES))


@pytest.mark.parametrize("c", [c for c in CASES.values() if c.bounded], ids=[k for k, c in CASES.items() if c.bounded])
def test_hostile_input_is_refused_within_bounds(c: Case, tmp_path: Path) -> None:
    """Issue 25 (2-5): the same one-line refusal, from a real process whose address space is limited to
    BOUND_AS_BYTES (a hostile input that makes memory grow dies with MemoryError or a Rust abort instead, and
    fails here) and that must end within BOUND_SECONDS (a FIFO read never ends: the guard fails it)."""
    inp = build(c, tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    cmd = [sys.executable, "-c", "import sys; from dspark_convert.entry import main; sys.argv[0] = 'dspark-convert'; "
           "main()", *argv(c, inp, out_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "10000", "NO_COLOR": "1"}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=BOUND_SECONDS,
                           preexec_fn=_limit_address_space, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{c.id}: still running after {BOUND_SECONDS} s (a hang)")
    assert "Traceback" not in r.stderr, r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == c.code and len(errs) == 1, (r.returncode, r.stderr)
    for frag in fragments(c, inp):
        assert frag in errs[0], (frag, errs[0])
    assert sorted(p.name for p in out_dir.iterdir()) == []


@pytest.mark.parametrize("c", [CASES[k] for k in ("truncated-safetensors", "missing-layer-tensor", "d2t-duplicates",
                                                  "nan-in-weights")], ids=lambda c: c.id)
def test_python_api_raises_the_same_line(c: Case, tmp_path: Path) -> None:
    inp = build(c, tmp_path)
    out = tmp_path / "out.gguf"
    with pytest.raises(ConvertError) as info:
        convert(inp.draft, inp.target, out, embed_from_target="--with-target-embeddings" in c.args)
    msg = str(info.value)
    assert "\n" not in msg and all(f in msg for f in fragments(c, inp)), msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]


@pytest.mark.parametrize("target", ["target-qwen3", "target-qwen3-sharded"])
def test_a_target_given_as_the_draft_is_named_a_target(target: str, tmp_path: Path) -> None:
    """Issue 24: a Qwen3 target given as DRAFT was 'not a supported draft', with a hint to pass --architecture
    LlamaForCausalLM (which only led to another error). A target class is named as one; the line covers both a
    target passed by mistake and a draft declaring its target's class (test_forced_architecture_is_recorded)."""
    folder = FIX / target
    outcome = run_convert(folder, TARGET, tmp_path / "out")
    line = assert_refused(outcome)
    assert line.startswith(f"{folder}/config.json: architecture 'Qwen3ForCausalLM' is not a supported draft: it is a "
                           f"target model class; if {folder} is the target, pass it as --target-model-dir and the "
                           "draft as DRAFT; if it is a draft declaring its target's class, pass --architecture with "
                           "the draft's class (one of Qwen3DSparkModel, ")
    assert "closest known name" not in line and "LlamaForCausalLM (pass" not in line


def test_allow_nonfinite_converts_and_keeps_the_nan(tmp_path: Path) -> None:
    inp = build(CASES["nan-in-weights"], tmp_path)
    out = tmp_path / "out.gguf"
    r = run_convert(inp.draft, inp.target, tmp_path, "--allow-nonfinite", name="out.gguf")
    assert r.exit_code == 0, r.stderr
    t = next(t for t in GGUFReader(out).tensors if t.name == "blk.0.ffn_up.weight")
    bits = np.asarray(t.data).view(np.uint16).reshape(128, 64)  # BF16 copied byte for byte
    assert bits[3, 5] == 0x7FC0
    assert int(np.sum((bits & 0x7F80) == 0x7F80)) == 1
    # issue 24: the NaN is named, per tensor (it used to be written with no word)
    src = inp.draft / "model.safetensors"
    want = (f"note: {src}: tensor 'layers.0.mlp.up_proj.weight' contains NaN or Inf values, written as they are to "
            "'blk.0.ffn_up.weight' (--allow-nonfinite)")
    assert [ln for ln in r.stdout.splitlines() if "NaN" in ln] == [want], r.stdout


def documented_line(case_id: str) -> str:
    """The message docs/troubleshooting.md quotes for a case."""
    head = f"### `{case_id}`\n```\n"
    return DOC.read_text(encoding="utf-8").split(head, 1)[1].split("\n```", 1)[0]


def test_every_case_is_in_the_troubleshooting_catalogue() -> None:
    """Each case has a section whose quoted message holds the fragments the test checks (DRAFT / TARGET for the
    folders), so the documented lines cannot drift from what the converter prints."""
    text = DOC.read_text(encoding="utf-8")
    for k, c in CASES.items():
        head = f"### `{k}`\n```\n"
        assert head in text, f"docs/troubleshooting.md has no section for {k}"
        quoted = text.split(head, 1)[1].split("\n```", 1)[0]
        assert quoted.startswith("error: ") and "\n" not in quoted, k
        for frag in c.fragments:
            assert frag.format(draft="DRAFT", target="TARGET") in quoted, (k, frag)
        entry = text.split(head, 1)[1].split("\n#", 1)[0]
        if c.section:  # a rule of the GGUF contract: the entry says which
            assert f"ontract {c.section}" in entry, (k, c.section)


def test_rewritten_checkpoint_converts_identically(tmp_path: Path) -> None:
    """The helpers themselves: re-packing every tensor (new header, new offsets) changes nothing a converter
    sees, so each case above fails only because of its own corruption."""
    draft = copy_fixture(tmp_path / "a", "dspark-qwen3")
    write_tensors(draft / "model.safetensors", dict(reversed(read_tensors(draft / "model.safetensors").items())))
    assert load_raw(draft / "model.safetensors").data != load_raw(FIX / "dspark-qwen3" / "model.safetensors").data
    ours, theirs = tmp_path / "a" / "x.gguf", tmp_path / "b.gguf"
    convert(draft, TARGET, ours)
    convert(FIX / "dspark-qwen3", TARGET, theirs)
    assert ours.read_bytes() == theirs.read_bytes()


# ------------------------------------------------------------------------------------------- property tests
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CONFIG_FIXTURES = names(tag="config-fuzz")
ODD_VALUES = [DELETE, "x", None, -1, 0, [], {"a": 1}, True, 1.5, 10**12, [1, "a"]]


def _key_paths(cfg: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in cfg.items():
        out.append((*prefix, k))
        if isinstance(v, dict):
            out.extend(_key_paths(v, (*prefix, k)))
    return out


@FUZZ
@given(data=st.data())
def test_any_corrupted_config_key_converts_or_gives_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                              data: st.DataObject) -> None:
    """Whatever one config key holds (missing, wrong type, absurd), the result is a GGUF or a ConvertError:
    never a traceback, never a file left behind."""
    fixture = data.draw(st.sampled_from(CONFIG_FIXTURES))
    config = read_config(FIX / fixture)
    path = data.draw(st.sampled_from(_key_paths(config)))
    value = data.draw(st.sampled_from(ODD_VALUES))
    tmp = tmp_path_factory.mktemp("cfg")
    draft = copy_fixture(tmp, fixture)
    node = config
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    write_config(draft, config)
    out = tmp / "out"
    out.mkdir()
    try:
        convert(draft, TARGET, out / "d.gguf")
    except ConvertError as e:
        assert "\n" not in str(e) and str(e)
        assert list(out.iterdir()) == []
    else:
        assert [p.name for p in out.iterdir()] == ["d.gguf"]


@functools.lru_cache(maxsize=1)
def _seed_file() -> RawSafetensors:
    return load_raw(FIX / "dspark-qwen3" / "model.safetensors")


def _pristine_header() -> RawSafetensors:
    seed = _seed_file()
    return RawSafetensors(json.loads(json.dumps(seed.header)), seed.data)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(["fc.weight", "lm_head.weight", "markov_head.markov_w1.weight", "norm.weight"]),
       field=st.sampled_from(["dtype", "shape", "data_offsets", None]),
       value=st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False), st.text(max_size=8),
                       st.lists(st.one_of(st.integers(-2**66, 2**66), st.text(max_size=3)), max_size=4),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
def test_any_corrupted_header_entry_is_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory, name: str,
                                                           field: str | None, value: object) -> None:
    f = tmp_path_factory.getbasetemp() / "fuzzed.safetensors"
    st_ = _pristine_header()
    if field is None:
        st_.header[name] = value
    else:
        st_.header[name][field] = value
    save_raw(f, st_)
    try:
        refs = read_safetensors_header(f)
    except ConvertError as e:
        assert "\n" not in str(e) and str(f) in str(e)
    else:  # accepted only if still consistent: every range inside the file and sized by its shape
        size = f.stat().st_size
        assert all(0 <= r.start <= r.end <= size for r in refs)
