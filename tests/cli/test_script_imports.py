"""The scripts under ``benchmarks/`` and ``scripts/`` load, and every module they import exists.

They run outside the suite (they print figures or sweep against upstream), so a module that moves, in the package
or in ``tests/``, would otherwise break them silently. Each script is loaded in its own interpreter under a name
other than ``__main__`` (its top level runs: imports, the ``sys.path`` entries it adds, constants; its ``main()``
does not). Then every import statement of the file, those inside functions too, must name a module found on the
``sys.path`` the top level left (plus ``tests/``, which some scripts add only inside ``main()``), and every name
imported from the package must exist. Imports guarded by ``except ImportError`` and the upstream tree's own
package (:data:`RUNTIME_PATH_MODULES`, put on ``sys.path`` at run time) are not checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py")])
#: modules a script imports from a folder it puts on ``sys.path`` just before (the llama.cpp tree's converter)
RUNTIME_PATH_MODULES = ("conversion",)

_CHECK = r'''
import ast, importlib, importlib.util, runpy, sys

def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False

path, tests, skip = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
sys.argv = [path]
runpy.run_path(path, run_name="loaded")
sys.path.append(tests)
tree = ast.parse(open(path, encoding="utf-8").read())
guarded = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Try) and any(h.type is not None and "ImportError" in ast.unparse(h.type)
                                         for h in node.handlers):
        guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
missing = []
for node in ast.walk(tree):
    if id(node) in guarded:
        continue
    if isinstance(node, ast.Import):
        missing += [f"{node.lineno}: {a.name}" for a in node.names if a.name not in skip and not found(a.name)]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module not in skip:
        if not found(node.module):
            missing.append(f"{node.lineno}: {node.module}")
        elif node.module.split(".")[0] == "dspark_convert":
            mod = importlib.import_module(node.module)
            missing += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names
                        if a.name != "*" and not hasattr(mod, a.name) and not found(f"{node.module}.{a.name}")]
if missing:
    sys.exit("cannot import " + ", ".join(sorted(missing, key=lambda m: int(m.split(":")[0]))))
'''


def load_error(script: Path) -> str | None:
    """The last line of what loading ``script`` (its top level, then every import it names) fails with; None when
    all of it is there."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", _CHECK, str(script), str(ROOT / "tests"), ",".join(RUNTIME_PATH_MODULES)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_loads(script: Path) -> None:
    assert load_error(script) is None


def test_load_error_names_a_moved_module(tmp_path: Path) -> None:
    """A script importing, at its top or inside a function, a module that is not there (in the package, or on the
    ``tests/`` path it adds), or a name the package lacks, fails with what is missing; one importing what exists
    (a test module of a group folder it adds, an optional module under ``except ImportError``) loads."""
    moved = tmp_path / "moved.py"
    moved.write_text("import sys\nsys.path.insert(0, 'tests')\nfrom test_mutations import MUTATIONS\n")
    gone = tmp_path / "gone.py"
    gone.write_text("from dspark_convert.reference.target_np import TargetModel\n")
    nested = tmp_path / "nested.py"
    nested.write_text("import sys\nsys.path.insert(0, 'tests')\n\n\ndef main():\n    from test_gemma4_dspark import x\n"
                      "    from dspark_convert.plan import Plan, NoSuchName\n")
    fine = tmp_path / "fine.py"
    fine.write_text("import sys\nsys.path[:0] = ['tests', 'tests/verify']\nfrom test_mutations import MUTATIONS\n"
                    "from dspark_convert.plan import Plan\ntry:\n    import no_such_optional_module\n"
                    "except ImportError:\n    pass\n\n\ndef main():\n    from draft_kit import bf16\n")
    assert load_error(moved) == "ModuleNotFoundError: No module named 'test_mutations'"
    assert load_error(gone) == "ModuleNotFoundError: No module named 'dspark_convert.reference.target_np'"
    assert load_error(nested) == "cannot import 6: test_gemma4_dspark, 7: dspark_convert.plan.NoSuchName"
    assert load_error(fine) is None
    assert len(SCRIPTS) > 30
