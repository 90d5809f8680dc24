"""Every package path or module the docs and the package's own docstrings and comments name exists.

A path is ``dspark_convert/<folder>/<file>.py`` or ``<folder>/<file>.py`` of a package folder (``hf2gguf/``,
``variants/dflash/``, ...); a module is ``dspark_convert.<module>[.<name>]``, where the name must be defined at the
module's top level. Placeholders (``variants/<v>/loader.py``) are not paths.

A cross-reference in a package docstring (``:func:`X```, ``:class:``, ``:mod:``, ``:data:``, ``:meth:``,
``:attr:``, ...) names something that exists: ``X`` absolute (``dspark_convert.a.b``), relative to the module as a
relative import is (``.lineage.b11434_kvs``, ``..dflash.lineage``), relative to the package (``staleness.
detect_staleness``), or a name the module defines or imports anywhere (a method, an attribute, an imported class);
a name of another library counts when that library is installed.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import ROOT

PKG = ROOT / "dspark_convert"
FOLDERS = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
PATH = re.compile(r"(?<![\w/.<>-])(?:dspark_convert/)?((?:" + "|".join(FOLDERS) + r")/(?:\w+/)*\w+\.py)\b")
MODULE = re.compile(r"(?<![\w/.])dspark_convert((?:\.\w+)+)")
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|obj|exc|const):`[~!]?([\w.]+)[^`]*`")


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


def _defined_anywhere(path: Path) -> set[str]:
    """Every name ``path`` defines or binds at any depth: functions, classes, assignments, ``self.x`` attributes."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return names


def _resolves(module: str, is_package: bool, ref: str) -> bool:
    """Whether the cross-reference ``ref`` in ``module`` names something that exists (module docstring)."""
    if ref.startswith("."):
        dots = len(ref) - len(ref.lstrip("."))
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - dots + 1]
        return _resolves(module, is_package, ".".join([*base, ref.lstrip(".")]).rstrip("."))
    if ref.split(".")[0] == "dspark_convert":
        return not missing_paths("ref", ref)
    first = ref.split(".")[0]
    own = PKG.parent / (module.replace(".", "/") + ("/__init__.py" if is_package else ".py"))
    if first in _defined_anywhere(own) or first in _top_names(own):  # _top_names follows a star re-export
        return True
    if (PKG / first).is_dir() or (PKG / f"{first}.py").is_file():
        return _resolves(module, is_package, f"dspark_convert.{ref}")
    return importlib.util.find_spec(first) is not None


def missing_refs(path: Path) -> list[str]:
    """The cross-references of ``path`` (a package module) that name nothing, as ``line: reference``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    module = ".".join(parts[:-1] if is_package else parts)
    text = path.read_text(encoding="utf-8")
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in ROLE.finditer(text)
            if not _resolves(module, is_package, m.group(1))]


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docstring_cross_references_resolve(path: Path) -> None:
    assert missing_refs(path) == []


def test_the_cross_reference_rule_can_fail() -> None:
    for good, bad in ((":func:`.lineage.b11434_kvs`", ":func:`.keys.b11434_kvs`"),
                      (":func:`..dflash.lineage.b11434_kvs`", ":func:`..dflash.keys.b11434_kvs`"),
                      (":func:`staleness.detect_staleness`", ":func:`detect_staleness`"),
                      (":class:`dspark_convert.reference.ops.CommonHParams`", ":class:`.ops.CommonHParams`")):
        assert _resolves("dspark_convert.variants.dflash.dflash_mimo", False, good.split("`")[1]), good
        assert not _resolves("dspark_convert.variants.dflash.dflash_mimo", False, bad.split("`")[1]), bad
    assert _resolves("dspark_convert.schema", True, "UPSTREAM_REFERENCE")  # through schema's star re-export
    assert not _resolves("dspark_convert.schema", True, "UPSTREAM_NOPE")


@pytest.mark.parametrize("name,text", _texts(), ids=[n for n, _ in _texts()])
def test_named_paths_exist(name: str, text: str) -> None:
    assert missing_paths(name, text) == [], name


def test_the_rule_can_fail() -> None:
    assert missing_paths("x", "see `dspark_convert/hf2gguf/nothing.py` and dspark_convert.registry.NOPE") == [
        "dspark_convert/hf2gguf/nothing.py", "dspark_convert.registry.NOPE"]
    assert missing_paths("x", "`variants/<v>/loader.py`, dspark_convert.registry.VARIANTS, hf2gguf/inputs.py") == []
