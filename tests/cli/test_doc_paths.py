"""Every package path or module the docs and the package's own docstrings and comments name exists.

A path is ``dspark_convert/<folder>/<file>.py`` or ``<folder>/<file>.py`` of a package folder (``hf2gguf/``,
``variants/dflash/``, ...); a module is ``dspark_convert.<module>[.<name>]``, where the name must be defined at the
module's top level. Placeholders (``variants/<v>/loader.py``) are not paths.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

PKG = ROOT / "dspark_convert"
FOLDERS = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
PATH = re.compile(r"(?<![\w/.<>-])(?:dspark_convert/)?((?:" + "|".join(FOLDERS) + r")/(?:\w+/)*\w+\.py)\b")
MODULE = re.compile(r"(?<![\w/.])dspark_convert((?:\.\w+)+)")


def _texts() -> list[tuple[str, str]]:
    out = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8"))
           for p in sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])]
    out += [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in sorted(PKG.rglob("*.py"))]
    return out


def _top_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and [a.name for a in node.names] == ["*"]:
            names |= _top_names(path.parent / f"{node.module}.py")        # a package's star re-export
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_paths(name: str, text: str) -> list[str]:
    """The paths and modules ``text`` names that do not exist."""
    bad = []
    for m in PATH.finditer(text):
        if not (PKG / m.group(1)).is_file():
            bad.append(m.group(0))
    for m in MODULE.finditer(text):
        parts = m.group(1).strip(".").split(".")
        base, i = PKG, 0
        while i < len(parts) and ((base / parts[i]).is_dir() or (base / f"{parts[i]}.py").is_file()):
            base = base / parts[i] if (base / parts[i]).is_dir() else base / f"{parts[i]}.py"
            i += 1
        if i == 0:  # a name of the package itself: the lazy public API (``dspark_convert.convert``) or a dunder
            if not parts[0].startswith("__") and f'"{parts[0]}":' not in (PKG / "__init__.py").read_text():
                bad.append(m.group(0))
            continue
        if i < len(parts):
            module = base / "__init__.py" if base.is_dir() else base
            if parts[i] not in _top_names(module) and not parts[i].startswith("__"):
                bad.append(m.group(0))
    return bad


@pytest.mark.parametrize("name,text", _texts(), ids=[n for n, _ in _texts()])
def test_named_paths_exist(name: str, text: str) -> None:
    assert missing_paths(name, text) == [], name


def test_the_rule_can_fail() -> None:
    assert missing_paths("x", "see `dspark_convert/hf2gguf/nothing.py` and dspark_convert.registry.NOPE") == [
        "dspark_convert/hf2gguf/nothing.py", "dspark_convert.registry.NOPE"]
    assert missing_paths("x", "`variants/<v>/loader.py`, dspark_convert.registry.VARIANTS, hf2gguf/inputs.py") == []
