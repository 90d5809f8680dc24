"""Where family knowledge lives: the issue-20 figures, for this checkout or any commit.

Usage::

    python scripts/family_figures.py                 # the working tree's dspark_convert/
    python scripts/family_figures.py --ref 3fc559b   # the package as committed at a revision (git archive)

For DeepSeek-V4 DSpark and EAGLE-3 (the two families the architecture review measured, §1.1-1.2) it prints:

- **files naming it**: package ``.py`` files that name the family, and the lines that do;
- **outside variants/ and the schema**: the same, counting only files outside the family zones (``variants/``, ``registry/``,
  ``families/``, ``schema.py`` until 2026-12-02, then the ``schema/`` package): the slices the family still spreads over;
- **in its slice**: files and lines under ``variants/<slice>/`` (0 before the migration).

Then **files outside the zones naming any family** (the files ``tests/variants/test_variants.py``'s ``ALLOWED`` lists), not
counting doctest examples (:func:`without_examples`: an example's arch string is data).

Then the **dispatch points**: places outside the zones that decide "which family is this?". Counted from the
AST: every test of an ``if`` / ``elif`` / conditional expression / comprehension filter / ``while``, and every
``lambda`` body, that mentions a family (a string constant naming one, or an identifier such as
``ARCH_EAGLE3`` / ``_is_dsv4``), plus every dict literal keyed by family names (a lookup table by family).
The figure is a count of decisions, not of lines; the list of places is printed with ``--list``.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = {
    "DSV4": (re.compile(r"(?i)dsv4|deepseek[-_ ]?v4|deepseekv4"), "dsv4"),
    "EAGLE-3": (re.compile(r"(?i)eagle-?3"), "eagle3"),
}
#: a family named in prose or a string (tests/variants/test_variants.py imports it: one word list). Not a family: DeepSeek-V2
#: / V3 and the first DeepSeek (``DeepseekForCausalLM``, upstream's ``DeepseekModel``), target models, not the
#: DeepSeek-V4 draft family; and the project's own name used as a prefix, i.e. ``dspark-convert`` /
#: ``dspark_convert`` (paths, temp folders) and its uppercase environment variables ``DSPARK_LLAMA_*``
#: (case-sensitive: ``dspark_llama`` or ``DSPARK_FLAG`` still name the family)
FAMILY_WORD = re.compile(r"(?i)(?<![\w-])(dflash|eagle-?3|dsv4|deepseek(?![-_ ]?v[23](?!\d))(?!(?:ForCausalLM|Model)\b)"
                         r"|(?!(?-i:DSPARK_LLAMA_))dspark(?![_-]convert))")
#: a family named in an identifier (``ARCH_EAGLE3``, ``_is_dsv4``, ``DFLASH_ARCHS``)
FAMILY_IDENT = re.compile(r"(?i)dflash|eagle3|dsv4|dspark")
ZONES = ("variants/", "registry/", "families/", "schema.py", "schema/")


def without_examples(text: str) -> str:
    """``text`` without its doctest examples: ``>>>`` / ``...`` lines and the expected output after them (up to a
    blank line or the docstring's end). An example's arch string or repo id is the example's data, not family
    knowledge; the dispatch-point figure reads the code (the AST) and is not affected.
    """
    out: list[str] = []
    in_example = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith((">>>", "... ")) or s == "...":
            in_example = True
            continue
        if in_example and s and not s.startswith('"""'):
            in_example = '"""' not in s          # an expected output line (the last one may close the docstring)
            continue
        in_example = False
        out.append(line)
    return "\n".join(out)


def package_at(ref: str | None, tmp: Path) -> Path:
    if ref is None:
        return ROOT / "dspark_convert"
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "dspark_convert"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "dspark_convert"


def _mentions(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and FAMILY_WORD.search(n.value):
            return True
        if isinstance(n, ast.Name) and FAMILY_IDENT.search(n.id):
            return True
        if isinstance(n, ast.Attribute) and FAMILY_IDENT.search(n.attr):
            return True
    return False


def dispatch_points(pkg: Path) -> list[str]:
    out: list[str] = []
    for p in sorted(pkg.rglob("*.py")):
        rel = p.relative_to(pkg).as_posix()
        if rel.startswith(ZONES):
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            tests: list[ast.AST] = []
            if isinstance(node, (ast.If, ast.IfExp, ast.While)):
                tests.append(node.test)
            elif isinstance(node, ast.comprehension):
                tests.extend(node.ifs)
            elif isinstance(node, ast.Lambda):
                tests.append(node.body)
            elif isinstance(node, ast.Dict):
                keys = [k for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                if keys and any(FAMILY_WORD.fullmatch(str(k.value)) or FAMILY_IDENT.fullmatch(str(k.value))
                                for k in keys):
                    out.append(f"{rel}:{node.lineno} table")
                continue
            out.extend(f"{rel}:{getattr(t, 'lineno', 0)}" for t in tests if _mentions(t))
    return out


def figures(pkg: Path) -> dict[str, object]:
    res: dict[str, object] = {}
    files = sorted(pkg.rglob("*.py"))
    for fam, (rx, slice_name) in FAMILIES.items():
        naming = {p: sum(1 for line in p.read_text(encoding="utf-8").splitlines() if rx.search(line)) for p in files}
        naming = {p: n for p, n in naming.items() if n}
        outside = {p: n for p, n in naming.items() if not p.relative_to(pkg).as_posix().startswith(ZONES)}
        sl = [p for p in files if p.relative_to(pkg).as_posix().startswith(f"variants/{slice_name}/")]
        res[f"{fam}: files naming it / lines naming it"] = f"{len(naming)} / {sum(naming.values())}"
        res[f"{fam}: of those outside variants/ and schema"] = f"{len(outside)} / {sum(outside.values())}"
        res[f"{fam}: files / lines in variants/{slice_name}/"] = (
            f"{len(sl)} / {sum(len(p.read_text(encoding='utf-8').splitlines()) for p in sl)}")
    outside_any = [p for p in files if not p.relative_to(pkg).as_posix().startswith(ZONES)
                   and FAMILY_WORD.search(without_examples(p.read_text(encoding="utf-8")))]
    res["package files outside the zones naming any family"] = len(outside_any)
    res["dispatch points (decisions by family outside the zones)"] = len(dispatch_points(pkg))
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", help="a git revision (default: the working tree)")
    ap.add_argument("--list", action="store_true", help="also list the dispatch points")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pkg = package_at(args.ref, Path(tmp))
        print(f"package: {args.ref or 'working tree'}")
        for k, v in figures(pkg).items():
            print(f"  {k:<58} {v}")
        if args.list:
            for where in dispatch_points(pkg):
                print(f"    {where}")


if __name__ == "__main__":
    main(sys.argv[1:])
