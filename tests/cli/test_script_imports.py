"""The scripts under ``benchmarks/`` and ``scripts/`` import only what exists.

They run outside the suite (they print figures or sweep against upstream), so a module that moves would break them
silently. Every ``from dspark_convert.X import n`` (and ``import dspark_convert.X``) they hold must name a module of
the package and a name it defines or a submodule; every ``from M import n`` of a test-side module (``tests/``, the
path the scripts put first) must name an existing file there and a name it binds at its top level.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py")])
TESTS = ROOT / "tests"


def _bound(path: Path) -> set[str]:
    """The names a test-side module binds at its top level (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Name)) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _test_module(module: str) -> Path | None:
    base = TESTS.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent that is not a package
        return False


def missing_imports(source: str) -> list[str]:
    """What ``source`` imports from the package or from ``tests/`` that does not exist (``line: module.name``)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [f"{node.lineno}: {a.name}" for a in node.names
                    if a.name.startswith("dspark_convert") and not _is_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "dspark_convert":
                try:
                    mod = importlib.import_module(node.module)
                except ImportError:
                    out.append(f"{node.lineno}: {node.module}")
                    continue
                for a in node.names:
                    if a.name != "*" and not hasattr(mod, a.name) and not _is_module(f"{node.module}.{a.name}"):
                        out.append(f"{node.lineno}: {node.module}.{a.name}")
            elif (path := _test_module(node.module)) is not None:
                bound = _bound(path)
                out += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names
                        if a.name != "*" and a.name not in bound and _test_module(f"{node.module}.{a.name}") is None]
    return out


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_imports_exist(script: Path) -> None:
    assert missing_imports(script.read_text(encoding="utf-8")) == []


def test_missing_imports_are_found() -> None:
    """The checker names a moved module, a missing name and a missing test-side name; it passes real ones."""
    src = ("from dspark_convert.reference.target_np import TargetModel\n"
           "from dspark_convert.plan import Plan, NoSuchName\n"
           "import dspark_convert.no_such_module\n"
           "from llama.target_np import TargetModel, NotThere\n"
           "from dspark_convert.hf2gguf import conversion\n")
    assert missing_imports(src) == ["1: dspark_convert.reference.target_np", "2: dspark_convert.plan.NoSuchName",
                                    "3: dspark_convert.no_such_module", "4: llama.target_np.NotThere"]
    assert len(SCRIPTS) > 30
