"""Shape figures of the package: modules, units, layers, import edges, cycles, upward imports, longest function.

Usage::

    python benchmarks/import_graph.py [PACKAGE_DIR]      # default: dspark_convert next to this folder

Every ``import`` statement of the package that names one of its own modules counts (module level, inside
functions and under ``TYPE_CHECKING`` alike: each is a dependency a reader has to follow). Two views:

- **modules**: every ``.py`` file is a node (``__init__`` files included, as their package);
- **units**: a subpackage (``reference``, ``tokenizer``, ``gguffile``, each ``variants/<name>``) counts as one
  node, as in the architecture review (a nested subpackage is its own unit); edges inside a unit disappear;
- **top-level units**: each folder of the package (``variants/`` whole) and each top-level module is one node:
  no two of them may import each other, and there is no cycle among them.

It also counts what the variants see of the rest of the package (the **chassis**): the distinct names the modules
under ``variants/`` import from outside it, from how many modules and how many top-level units (``roles/`` or
``reference/`` whole, ``plan`` ...), and the imports of an underscored name from another module, anywhere in the
package.

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

    limit = sys.getrecursionlimit()  # the depth-first search recurses once per node of a path: room for all of them
    sys.setrecursionlimit(max(limit, 2 * len(nodes) + 1000))
    try:
        for v in sorted(nodes):
            if v not in index:
                strong(v)
    finally:  # a process-wide setting: a caller (a test importing this file) keeps its own
        sys.setrecursionlimit(limit)
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
    def top(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2])

    tops = {top(m) for m in known} - {pkg.name}
    top_edges: dict[str, set[str]] = {u: set() for u in tops}
    for m, deps in edges.items():
        if top(m) != pkg.name:
            top_edges[top(m)] |= {top(d) for d in deps if top(d) not in (top(m), pkg.name)}
    mutual = sorted({tuple(sorted((a, b))) for a, ds in top_edges.items() for b in ds if a in top_edges.get(b, ())})
    _, top_cycles = layers(tops, top_edges)
    api = chassis_api(pkg, known)
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
        "top-level units": len(tops),
        "mutual pairs (top-level units)": len(mutual),
        "cycles (top-level units)": len(top_cycles),
        "chassis names a variant imports": len(api["names"]),
        "chassis modules a variant imports": len(api["modules"]),
        "chassis units a variant imports": len(api["units"]),
        "underscored cross-module imports": len(api["underscored"]),
        "longest functions": ", ".join(f"{name} {n}" for n, name in longest_functions(pkg)),
        "_layers": {u: unit_layer[u] for u in sorted(units, key=lambda u: (unit_layer[u], u))},
        "_cycles": mod_cycles + unit_cycles,
        "_mutual": mutual,
        "_top_cycles": top_cycles,
        "_top_edges": top_edges,
        "_chassis": api,
    }


def _import_targets(pkg: Path, path: Path, known: set[str]) -> list[tuple[str, str]]:
    """(module, name) of every ``from X import name`` of ``path`` whose X is a package module."""
    name = module_name(pkg, path)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target in known:
                out += [(target, a.name) for a in node.names]
    return out


def chassis_api(pkg: Path, known: set[str]) -> dict[str, list[str]]:
    """What the variants import from outside ``variants/`` (``module.name``, and the modules), and every import of
    an underscored name from another package module (``importer: module.name``)."""
    variants = f"{pkg.name}.variants"
    names: set[str] = set()
    underscored: list[str] = []
    # a compiled extension module (its .pyi stub gives its name) is a submodule too, not a name
    modules = known | {module_name(pkg, p) for p in pkg.rglob("*.pyi")}
    for path in sorted(pkg.rglob("*.py")):
        me = module_name(pkg, path)
        for target, name in _import_targets(pkg, path, known):
            if f"{target}.{name}" in modules:
                continue  # a submodule, not a name
            if name.startswith("_") and not name.startswith("__") and target != me:
                underscored.append(f"{me}: {target}.{name}")
            if me.startswith(variants) and not target.startswith(variants):
                names.add(f"{target}.{name}")
    mods = sorted({n.rsplit(".", 1)[0] for n in names})
    return {"names": sorted(names), "modules": mods, "units": sorted({".".join(m.split(".")[:2]) for m in mods}),
            "underscored": underscored}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "-v"]
    pkg = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "dspark_convert"
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
    for a, b in figs["_mutual"]:  # type: ignore[attr-defined]
        print(f"  mutual: {a} <-> {b}")
    if "-v" in sys.argv:
        api = figs["_chassis"]
        for key in ("units", "modules", "underscored"):
            print(f"  {key}:", ", ".join(api[key]))  # type: ignore[index]


if __name__ == "__main__":
    main()
