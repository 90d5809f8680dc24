"""The rules that keep this suite honest: it skips only for the environment (missing ../shared locally, missing
torch), each skip says why, the golden suite fails under CI when ../shared is absent, and ``-m "not golden"``
deselects exactly the golden tests."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, golden_decision

TESTS = ROOT / "tests"


# ------------------------------------------------------------------------------------------- golden rule
def test_golden_decision(tmp_path: Path) -> None:
    present = tmp_path / "golden"
    (present / "manifests").mkdir(parents=True)
    (present / "make_inputs.py").write_text("")
    absent = tmp_path / "nowhere" / "golden"
    assert golden_decision(present, {}) == ("run", "")
    assert golden_decision(present, {"CI": "true"}) == ("run", "")
    reason = f"golden set not found at {absent} (clone the shared folder beside the checkout as ../shared)"
    for env in ({}, {"CI": ""}, {"CI": "0"}, {"CI": "false"}, {"CI": "No"}):
        assert golden_decision(absent, env) == ("skip", reason), env
    for env in ({"CI": "true"}, {"CI": "1"}, {"CI": "yes"}):
        assert golden_decision(absent, env) == ("fail", f"{reason}; CI is set, so the byte-parity suite may not be "
                                                        "skipped"), env


def _copy_without_shared(tmp: Path) -> Path:
    """The test suite's golden part copied to ``tmp/repo``, whose ``../shared`` does not exist."""
    repo = tmp / "repo"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", repo)
    for name in ("conftest.py", "fixture_registry.py", "test_golden.py", "golden_manifest.py"):
        shutil.copy(TESTS / name, repo / "tests" / name)
    assert not (tmp / "shared").exists()
    return repo


def _pytest(repo: Path, *args: str, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_golden.py",
                           *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_golden_suite_fails_under_ci_without_shared(tmp_path: Path) -> None:
    repo = _copy_without_shared(tmp_path)
    ci = _pytest(repo, ci="1")
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "26 errors" in ci.stdout and "golden set not found at" in ci.stdout and "CI is set" in ci.stdout, ci.stdout
    local = _pytest(repo, ci=None)
    assert local.returncode == 0, local.stdout + local.stderr
    assert "26 skipped" in local.stdout and "golden set not found at" in local.stdout, local.stdout
    deselected = _pytest(repo, "-m", "not golden", ci="1")
    assert deselected.returncode == 5 and "26 deselected" in deselected.stdout, deselected.stdout  # 5: none ran


def test_golden_marker_covers_every_test_that_reads_the_golden_set() -> None:
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "-m", "golden"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    files = sorted({i.split("::")[0] for i in ids})
    assert files == ["tests/test_conformance.py", "tests/test_dsv4.py", "tests/test_gemma4_dspark.py", "tests/test_golden.py",
                     "tests/test_golden_dsv4.py", "tests/test_llama.py", "tests/test_llama_newfam.py",
                     "tests/test_metadata.py", "tests/test_new_drafts.py", "tests/test_nvfp4_dspark.py",
                     "tests/test_tokenizer_b11434.py", "tests/test_upgrade.py",
                     "tests/test_upstream_b11434.py", "tests/test_verify.py", "tests/test_vocab.py"]
    assert "tests/test_verify.py::test_golden_dspark_deepspec" in ids
    # 13 layouts x 4 outtypes (--match-upstream), 12 default-layout checks, the fast-describe equivalence
    assert sum(i.startswith("tests/test_golden.py") for i in ids) == 26
    assert sum(i.startswith("tests/test_metadata.py::test_golden_name_and_size_label") for i in ids) == 13
    assert sum(i.startswith("tests/test_golden_dsv4.py") for i in ids) == 3


# ------------------------------------------------------------------------------------------- no silent skips
#: the only modules a test module may import-or-skip: optional extras, not the product
OPTIONAL_MODULES = {"torch"}


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            out.append((name, node))
    return out


def test_every_skip_is_an_environment_skip_with_a_reason() -> None:
    seen = []
    for path in sorted(TESTS.glob("*.py")):
        for name, call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{call.lineno}"
            kw = {k.arg for k in call.keywords}
            if name == "importorskip":
                module = call.args[0].value if isinstance(call.args[0], ast.Constant) else None
                assert module in OPTIONAL_MODULES and "reason" in kw, f"{where}: importorskip({module!r}) without reason " \
                                                                      "or of a required module"
                seen.append(name)
            elif name == "skipif":
                assert "reason" in kw, f"{where}: skipif without a reason"
                seen.append(name)
            elif name == "skip" and path.name != "test_suite_rules.py":
                # pytest.skip is used in exactly two places, both in conftest: the golden rule (../shared absent,
                # not under CI) and the llama tier (no llama-server binary; under CI the run says so, issue 23)
                assert path.name == "conftest.py", f"{where}: pytest.skip outside conftest.require_golden/llama_bin"
                seen.append(f"{path.name}:skip")
    assert seen.count("conftest.py:skip") == 2
