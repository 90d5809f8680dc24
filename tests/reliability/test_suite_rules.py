"""The rules that keep this suite honest: it skips only for the environment (no llama-server, missing torch), each
skip says why, the golden suite needs nothing outside the checkout, and ``-m "not golden"`` deselects exactly the
golden tests."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"


# ------------------------------------------------------------------------------------------- golden set
def _copy_alone(tmp: Path) -> Path:
    """The test suite copied to ``tmp/repo``, with nothing beside it (no ``../shared``)."""
    repo = tmp / "repo"
    shutil.copytree(TESTS, repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo)
    assert sorted(p.name for p in tmp.iterdir()) == ["repo"]
    return repo


def _pytest(repo: Path, *args: str, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conversion/test_golden.py",
                           *args], cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def test_golden_suite_needs_nothing_beside_the_checkout(tmp_path: Path) -> None:
    """The golden inputs come from tests/make_golden.py, checked against tests/golden/*.sha256: the suite runs (and
    passes) in a copy with no ``../shared``; ``-m "not golden"`` deselects it."""
    repo = _copy_alone(tmp_path)
    run = _pytest(repo, "-k", "eagle3-specforge", ci="1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout and "skipped" not in run.stdout and "error" not in run.stdout, run.stdout
    deselected = _pytest(repo, "-m", "not golden", ci="1")
    assert deselected.returncode == 5 and "26 deselected" in deselected.stdout, deselected.stdout  # 5: none ran


def test_golden_marker_covers_every_test_that_reads_the_golden_set() -> None:
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "-m", "golden"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    files = sorted({i.split("::")[0] for i in ids})
    assert files == ["tests/check/test_upgrade.py", "tests/conversion/test_golden.py",
                     "tests/conversion/test_golden_dsv4.py", "tests/conversion/test_make_golden.py",
                     "tests/conversion/test_metadata.py", "tests/conversion/test_tokenizer_b11434.py",
                     "tests/conversion/test_vocab.py", "tests/llama/test_llama.py",
                     "tests/llama/test_llama_newfam.py", "tests/reliability/test_hostile_round3.py",
                     "tests/variants/test_conformance.py", "tests/variants/test_dsv4.py",
                     "tests/variants/test_gemma4_dspark.py", "tests/variants/test_new_drafts.py",
                     "tests/variants/test_nvfp4_dspark.py", "tests/verify/test_verify.py"]
    assert "tests/verify/test_verify.py::test_golden_dspark_deepspec" in ids
    # 13 layouts x 4 outtypes (--match-upstream), 12 default-layout checks, the fast-describe equivalence
    assert sum(i.startswith("tests/conversion/test_golden.py") for i in ids) == 26
    assert sum(i.startswith("tests/conversion/test_metadata.py::test_golden_name_and_size_label") for i in ids) == 13
    assert sum(i.startswith("tests/conversion/test_golden_dsv4.py") for i in ids) == 3


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
                # pytest.skip is used in exactly one place, in conftest: the llama tier (no llama-server binary;
                # under CI the run says so)
                assert path.name == "conftest.py", f"{where}: pytest.skip outside conftest.llama_bin"
                seen.append(f"{path.name}:skip")
    assert seen.count("conftest.py:skip") == 1
