"""Shape figures of the package: modules, units, layers, import edges, cycles, upward imports, longest function.

Usage::

    python benchmarks/import_graph.py [PACKAGE_DIR]      # default: dspark_convert next to this folder

Every ``import`` statement of the package that names one of its own modules counts (module level, inside
functions and under ``TYPE_CHECKING`` alike: each is a dependency a reader has to follow). Two views:

- **modules**: every ``.py`` file is a node (``__init__`` files included, as their package);
- **units**: a subpackage (``reference``, ``tokenizer``, ``gguffile``, each ``variants/<name>``) counts as one
  node, as in the architecture review (a nested subpackage is its own unit); edges inside a unit disappear.

A node's **layer** is 0 when it imports nothing of the package, else 1 + the highest layer it imports; an
**upward import** is an edge to a node of the same or a higher layer, which only a cycle can produce.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def module_name(pkg: Path, path: Path) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(pkg: Path, path: Path, known: set[str]) -> set[str]:
    """The package modules ``path`` imports (``from . import x`` resolves to module ``x`` when it is one)."""
    name = module_name(pkg, path)
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == pkg.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != pkg.name:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    # importlib.import_module(f".{name}", __name__) in a registry: the registry depends on every listed module
    return {m for m in out if m in known and m != name}


def layers(nodes: set[str], edges: dict[str, set[str]]) -> tuple[dict[str, int], list[list[str]]]:
    """Layer of every node (cycles collapsed to one layer) and the cycles (strongly connected components > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    sccs: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    comp_of = {v: i for i, c in enumerate(sccs) for v in c}
    layer: dict[int, int] = {}
    for i, comp in enumerate(sccs):  # Tarjan emits components in reverse topological order: deps first
        deps = {comp_of[w] for v in comp for w in edges[v]} - {i}
        layer[i] = 1 + max((layer[d] for d in deps), default=-1)
    return {v: layer[comp_of[v]] for v in nodes}, [sorted(c) for c in sccs if len(c) > 1]


def longest_functions(pkg: Path, n: int = 5) -> list[tuple[int, str]]:
    found = []
    for path in sorted(pkg.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                found.append((node.end_lineno - node.lineno + 1, f"{module_name(pkg, path)}.{node.name}"))
    return sorted(found, reverse=True)[:n]


def figures(pkg: Path) -> dict[str, object]:
    files = sorted(p for p in pkg.rglob("*.py"))
    known = {module_name(pkg, p) for p in files}
    edges: dict[str, set[str]] = {module_name(pkg, p): imports_of(pkg, p, known) for p in files}
    subpackages = {module_name(pkg, p.parent) for p in files if p.parent != pkg}

    def unit(m: str) -> str:
        # the innermost subpackage holding m (``variants.dflash``, not ``variants``): each variant is a unit
        return max((s for s in subpackages if m == s or m.startswith(s + ".")), key=len, default=m)

    units = {unit(m) for m in known} - {pkg.name}
    unit_edges: dict[str, set[str]] = defaultdict(set)
    for m, deps in edges.items():
        if unit(m) == pkg.name:
            continue  # the lazy public API maps names to modules: not a layer of its own
        unit_edges[unit(m)] |= {unit(d) for d in deps if unit(d) != unit(m) and unit(d) != pkg.name}
    for u in units:
        unit_edges.setdefault(u, set())
    mod_layer, mod_cycles = layers(set(edges), edges)
    unit_layer, unit_cycles = layers(units, unit_edges)
    upward = sum(1 for u, ds in unit_edges.items() for d in ds if unit_layer[d] >= unit_layer[u])
    return {
        "python files": len(files),
        "top-level modules": sum(1 for p in files if p.parent == pkg and p.name != "__init__.py"),
        "units (subpackages as one)": len(units),
        "unit layers": 1 + max(unit_layer.values()),
        "unit import edges": sum(len(d) for d in unit_edges.values()),
        "module import edges": sum(len(d) for d in edges.values()),
        "module layers": 1 + max(mod_layer.values()),
        "cycles (modules)": len(mod_cycles),
        "cycles (units)": len(unit_cycles),
        "upward imports (units)": upward,
        "longest functions": ", ".join(f"{name} {n}" for n, name in longest_functions(pkg)),
        "_layers": {u: unit_layer[u] for u in sorted(units, key=lambda u: (unit_layer[u], u))},
        "_cycles": mod_cycles + unit_cycles,
    }


def main() -> None:
    pkg = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "dspark_convert"
    figs = figures(pkg.resolve())
    for key, value in figs.items():
        if not key.startswith("_"):
            print(f"{key:28} {value}")
    by_layer: dict[int, list[str]] = defaultdict(list)
    for u, lay in figs["_layers"].items():  # type: ignore[attr-defined]
        by_layer[lay].append(u.split(".", 1)[-1])
    for lay in sorted(by_layer):
        print(f"  layer {lay}: {' '.join(by_layer[lay])}")
    for c in figs["_cycles"]:  # type: ignore[attr-defined]
        print("  cycle:", " -> ".join(c))


if __name__ == "__main__":
    main()
