"""The scripts under ``benchmarks/`` and ``scripts/`` load: their top level (imports, the ``sys.path`` entries
they add for ``tests/`` modules, module constants) runs without error.

They run outside the suite (they print figures or sweep against upstream), so a module that moves, in the package
or in ``tests/``, would otherwise break them silently. Each script is loaded in its own interpreter under a name
other than ``__main__`` (its ``main()`` does not run), as a user's ``python benchmarks/X.py`` would load it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py")])


def load_error(script: Path) -> str | None:
    """The last line of the error loading ``script``'s top level raises, None when it loads."""
    code = "import runpy, sys; sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='loaded')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", code, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_loads(script: Path) -> None:
    assert load_error(script) is None


def test_load_error_names_a_moved_module(tmp_path: Path) -> None:
    """A script importing a module that is not there (in the package, or on the ``tests/`` path it adds) fails
    to load with the name of what is missing; one importing what exists loads."""
    moved = tmp_path / "moved.py"
    moved.write_text("import sys\nsys.path.insert(0, 'tests')\nfrom test_mutations import MUTATIONS\n")
    gone = tmp_path / "gone.py"
    gone.write_text("from dspark_convert.reference.target_np import TargetModel\n")
    fine = tmp_path / "fine.py"
    fine.write_text("import sys\nsys.path[:0] = ['tests', 'tests/verify']\nfrom test_mutations import MUTATIONS\n"
                    "from dspark_convert.plan import Plan\n")
    assert load_error(moved) == "ModuleNotFoundError: No module named 'test_mutations'"
    assert load_error(gone) == "ModuleNotFoundError: No module named 'dspark_convert.reference.target_np'"
    assert load_error(fine) is None
    assert len(SCRIPTS) > 30
