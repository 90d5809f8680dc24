"""The command line as a user meets it: hf2gguf (dry run, JSON, default names, templates, Hub repo ids offline)
and check (good and broken files, JSON), each also through its Python function."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from typer.testing import CliRunner

from dspark_convert import check_file, convert, plan_from_gguf
from dspark_convert.check import check_plan
from dspark_convert.cli import app
from dspark_convert.plan import KV, Plan, TensorSpec

FIX = Path(__file__).resolve().parents[2] / "fixtures"
TARGET = FIX / "target-qwen3"
runner = CliRunner()
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def invoke(*args: str) -> object:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False, env={"COLUMNS": "250"})


# ------------------------------------------------------------------------------------------- hf2gguf
def test_dry_run_prints_plan_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "x.gguf"
    r = invoke("hf2gguf", FIX / "dspark-qwen3-interleaved", "-t", TARGET, "-o", out, "--outtype", "q8_0", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    for text in ("dflash.sample_from_anchor", "BOOL", "markov_w1.weight", "blk.1.attn_q.weight", "deinterleave_rope",
                 "dry run", "would write"):
        assert text in r.stdout, text


def test_json_summary(tmp_path: Path) -> None:
    out = tmp_path / "d.gguf"
    r = invoke("hf2gguf", FIX / "dspark-reduced", "-t", TARGET, "-o", out, "--outtype", "bf16", "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["output"] == str(out) and doc["outtype"] == "bf16" and doc["family"] == "dspark"
    assert doc["bytes_written"] == out.stat().st_size and not doc["dry_run"]
    kv = {k["name"]: k for k in doc["plan"]["kvs"]}
    assert kv["dflash.target_layers"] == {"name": "dflash.target_layers", "type": "ARRAY[INT32]", "value": [2, 3, 5]}
    assert kv["tokenizer.ggml.tokens"]["value"]["count"] == 1024
    tensors = doc["plan"]["tensors"]
    assert tensors[-1]["name"] == "d2t" and tensors[-1]["type"] == "I64" and tensors[-1]["ne"] == [256]


def test_auto_outtype_and_default_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = invoke("hf2gguf", FIX / "dspark-qwen3", "-t", TARGET)
    assert r.exit_code == 0, r.stderr
    made = sorted(p.name for p in tmp_path.glob("*.gguf"))
    assert len(made) == 1 and made[0].endswith("-BF16.gguf")  # the checkpoint is BF16, so auto picks BF16
    plan = plan_from_gguf(tmp_path / made[0])
    assert plan.value("general.file_type") == 32


def test_auto_on_f16_checkpoint_and_template(tmp_path: Path) -> None:
    r = convert(FIX / "eagle3-llama", TARGET, tmp_path / "e3-{ftype}-{outtype}.gguf", outtype="auto")
    assert r.outtype == "f16" and r.path == tmp_path / "e3-F16-f16.gguf" and r.path.exists()


def test_existing_output_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "d.gguf"
    out.write_bytes(b"precious")
    r = runner.invoke(app, ["hf2gguf", str(FIX / "dflash-zlab"), "-t", str(TARGET), "-o", str(out)])
    assert r.exit_code == 2 and "already exists" in r.stderr and out.read_bytes() == b"precious"
    r = runner.invoke(app, ["hf2gguf", str(FIX / "dflash-zlab"), "-t", str(TARGET), "-o", str(out), "--force"])
    assert r.exit_code == 0 and out.read_bytes()[:4] == b"GGUF"


def _cache_repo(cache: Path, repo_id: str, src: Path) -> Path:
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / COMMIT
    shutil.copytree(src, snap)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snap


def test_hub_repo_ids_end_to_end_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    _cache_repo(cache, "deepseek-ai/dspark_qwen3_tiny", FIX / "dspark-qwen3")
    _cache_repo(cache, "Qwen/Qwen3-Tiny", TARGET)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    r = invoke("hf2gguf", "deepseek-ai/dspark_qwen3_tiny", "-t", f"Qwen/Qwen3-Tiny@{COMMIT}", "--outtype", "q8_0")
    assert r.exit_code == 0, r.stderr
    made = list(tmp_path.glob("*.gguf"))
    assert [p.name for p in made] == ["dspark-Qwen3-Tiny-Q8_0.gguf"]
    local = convert(FIX / "dspark-qwen3", TARGET, tmp_path / "local.gguf", outtype="q8_0")
    a, b = plan_from_gguf(made[0]), plan_from_gguf(local.path)
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors]
    assert a.value("general.name") == "Dspark_Qwen3_Tiny"
    assert a.value("general.base_model.0.repo_url") == "https://huggingface.co/Qwen/Qwen3-Tiny"
    from dspark_convert.gguffile.reader import read_gguf

    ra, rb = read_gguf(made[0]), read_gguf(local.path)
    for t in rb.tensors:  # identical tensor bytes whichever way the checkpoint was found
        assert bytes(ra.tensor_bytes(t.name)) == bytes(rb.tensor_bytes(t.name))


def test_hub_offline_miss_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["hf2gguf", "someorg/not-cached", "-t", str(TARGET), "-o", "x.gguf"])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "someorg/not-cached" in lines[0] and "offline" in lines[0]
    assert not (tmp_path / "x.gguf").exists()


# ------------------------------------------------------------------------------------------- check
def _write(plan: Plan, path: Path) -> Path:
    """Write a (possibly broken) plan with gguf's writer directly, bypassing our pre-write check."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch=plan.arch)
    for kv in plan.kvs[1:]:
        w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
    for t in plan.tensors:
        n = int(np.prod(t.shape))
        if t.ggml_type == QT.I64:
            w.add_tensor(t.name, np.zeros(n, np.int64).reshape(t.shape))
        else:
            w.add_tensor(t.name, np.zeros(t.shape, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def good_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    out = tmp_path_factory.mktemp("good") / "good.gguf"
    convert(FIX / "dspark-qwen3", TARGET, out, outtype="f32")
    return plan_from_gguf(out)


def test_check_good_file(tmp_path: Path, good_plan: Plan) -> None:
    path = _write(good_plan, tmp_path / "g.gguf")
    assert check_file(path) == []
    r = invoke("check", path)
    assert r.exit_code == 0 and "passes every loader rule" in r.stdout
    doc = json.loads(invoke("check", path, "--json").stdout)
    # issue 23: check --json also says which --spec-type llama-server needs (a Markov-head file: auto-detected)
    assert doc == {"file": str(path), "arch": "dflash", "ok": True, "findings": [],
                   "spec_type": {"spec_type": "draft-dspark", "auto_detected": "draft-dspark",
                                 "reason": "markov_w1.weight present", "extra_flags": [], "flag_needed": False},
                   "hf_name": {"name": "g.gguf", "spec_type": "draft-dspark", "keyword": "dspark-", "found_as": None,
                               "problem": HIDDEN_G}}


#: check's warning for a draft-dspark file named g.gguf
HIDDEN_G = ("the file name 'g.gguf' lacks 'dspark-', the keyword llama-server's -hf finds a draft-dspark draft by: it "
            "does not find this file beside its target (and may take it for the main model); name it e.g. "
            "dspark-g.gguf")


@pytest.mark.parametrize(("name", "warning"), [
    ("g.gguf", HIDDEN_G),
    ("Qwen3-8B-DSpark-BF16.gguf", "the file name 'Qwen3-8B-DSpark-BF16.gguf' lacks 'dspark-' (lower case), the "
     "keyword llama-server's -hf finds a draft-dspark draft by: it does not find this file beside its target (and may "
     "take it for the main model); name it e.g. dspark-Qwen3-8B-DSpark-BF16.gguf"),
    ("dflash-Qwen3-8B-BF16.gguf", "the file name 'dflash-Qwen3-8B-BF16.gguf' lacks 'dspark-', the keyword "
     "llama-server's -hf finds a draft-dspark draft by: it finds this file as a draft-dflash draft; replace 'dflash-' "
     "with 'dspark-'"),
    ("mtp-dspark-Qwen3-8B-BF16.gguf", "the file name 'mtp-dspark-Qwen3-8B-BF16.gguf' holds 'mtp-' as well as "
     "'dspark-': -hfd without --spec-type runs it as draft-mtp, not draft-dspark; drop 'mtp-' from the name"),
    ("dspark-Qwen3-8B-BF16.gguf", None),
    ("Qwen3-8B-dspark-BF16.gguf", None),
])
def test_check_and_inspect_say_when_the_name_hides_the_draft_from_hf(tmp_path: Path, good_plan: Plan, name: str,
                                                                     warning: str | None) -> None:
    """llama-server b11434's -hf finds a draft beside its target only by a lower-case keyword in its file name."""
    path = _write(good_plan, tmp_path / name)
    r = invoke("check", path)
    assert r.exit_code == 0 and "passes every loader rule" in r.stdout
    assert r.stderr == (f"warning: {warning}\n" if warning else "")
    doc = json.loads(invoke("check", path, "--json").stdout)
    assert doc["hf_name"]["problem"] == warning and doc["hf_name"]["keyword"] == "dspark-"
    info = json.loads(invoke("inspect", path, "--json", "--no-tensors").stdout)
    assert info["hf_name"] == doc["hf_name"]
    rows = invoke("inspect", path, "--no-tensors").stdout.split("Summary\n", 1)[1]
    shown = " ".join(rows.split("-hf name", 1)[1].split())  # the cell (wrapped or not) and what follows, in one line
    assert shown.startswith(warning if warning else
                            "found by llama-server -hf as a draft-dspark draft ('dspark-' in the name)")


def _mutated(plan: Plan, kvs: dict[str, KV | None] | None = None, drop: tuple[str, ...] = (),
             add: tuple[TensorSpec, ...] = (), arch: str | None = None) -> Plan:
    new_kvs = []
    for k in plan.kvs:
        if kvs and k.name in kvs:
            if kvs[k.name] is not None:
                new_kvs.append(kvs[k.name])
        else:
            new_kvs.append(k)
    if arch:
        new_kvs[0] = KV("general.architecture", VT.STRING, arch)
    tensors = [t for t in plan.tensors if t.name not in drop] + list(add)
    return Plan(arch=arch or plan.arch, kvs=new_kvs, tensors=tensors)


CASES = {
    "block_size INT32": ({"dflash.block_size": KV("dflash.block_size", VT.INT32, 7)}, (), (), None,
                         "dflash.block_size", "key-type"),
    "sample_from_anchor UINT32": ({"dflash.sample_from_anchor": KV("dflash.sample_from_anchor", VT.UINT32, 1)}, (), (), None,
                                  "dflash.sample_from_anchor", "key-type"),
    "target_layers FLOAT32": ({"dflash.target_layers": KV("dflash.target_layers", VT.ARRAY, [2.0, 3.0], VT.FLOAT32)}, (), (), None,
                              "dflash.target_layers", "array-type"),
    "no target_layers": ({"dflash.target_layers": None}, (), (), None, "dflash.target_layers", "required-key"),
    "mask id INT32": ({"tokenizer.ggml.mask_token_id": KV("tokenizer.ggml.mask_token_id", VT.INT32, 1016)}, (), (), None,
                      "tokenizer.ggml.mask_token_id", "key-type"),
    "missing tensor": (None, ("blk.1.ffn_up.weight",), (), None, "blk.1.ffn_up.weight", "required-tensor"),
    # conf_proj is optional since b10705; markov_w2 is still required with markov_w1
    "Markov without w2": (None, ("markov_w2.weight",), (), None, "markov_w2.weight", "required-tensor"),
    "extra t2d": (None, (), (TensorSpec("t2d", (1024,), QT.F32),), None, "t2d", "extra-tensor"),
    "wrong fc shape": (None, ("fc.weight",), (TensorSpec("fc.weight", (64, 128), QT.F32),), None, "fc.weight", "shape"),
    "fork arch": (None, (), (), "dspark", "general.architecture", "arch"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_finds_each_broken_rule(tmp_path: Path, good_plan: Plan, case: str) -> None:
    kvs, drop, add, arch, subject, rule = CASES[case]
    path = _write(_mutated(good_plan, kvs, drop, add, arch), tmp_path / "bad.gguf")
    findings = [f for f in check_file(path) if f.level == "error"]
    assert (subject, rule) in {(f.subject, f.rule) for f in findings}, findings
    r = invoke("check", path, "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and any(f["subject"] == subject and f["rule"] == rule for f in doc["findings"])
    r = invoke("check", path)
    assert r.exit_code == 1 and subject in r.stdout


def test_check_plan_markov_rows_follow_token_count(good_plan: Plan) -> None:
    """markov_w1 rows must equal the written token count (contract §7.2)."""
    tokens = good_plan.kv("tokenizer.ggml.tokens")
    assert tokens is not None
    short = KV(tokens.name, tokens.type, tokens.value[:1000], tokens.sub_type)
    findings = check_plan(_mutated(good_plan, {tokens.name: short}))
    assert ("markov_w1.weight", "shape") in {(f.subject, f.rule) for f in findings}


def test_check_unreadable_file(tmp_path: Path) -> None:
    p = tmp_path / "junk.gguf"
    p.write_bytes(b"NOTGGUF" * 10)
    r = runner.invoke(app, ["check", str(p)])
    assert r.exit_code == 2 and "junk.gguf" in r.stderr
