"""The conversion's trip through the conversion wing, counted with ``sys.setprofile`` on fixture conversions.

Usage::

    python benchmarks/conversion_trip.py [FIXTURE ...]     # default: dspark-qwen3, eagle3-specforge, dflash2-zlab

One ``convert(..., dry_run=True)`` per fixture (the plan, its checks and metadata; the writer's streaming is left
out, as the architecture review counts it apart). Every call the package makes is recorded with its caller:

- **stops**: the distinct package functions (``file:function``) that ``hf2gguf/conversion.py`` calls in another
  file: where the orchestrator hands the draft out;
- **returns to conversion.py**: how many such calls it makes (control comes back each time);
- **entered**: every distinct package function the trip enters, and their files (the writer's, the tokenizer's and
  the GGUF reader's internals excluded: they are their own trips);
- **plan_conversion lines**: the length of the orchestrator.

Run it with ``PYTHONPATH=<other checkout>`` to measure another revision the same way.
"""

from __future__ import annotations

import ast
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("dspark-qwen3", "eagle3-specforge", "dflash2-zlab")
#: inner machinery that is a trip of its own (streaming the tensors, building the vocabulary)
APART = ("hf2gguf/writer.py", "hf2gguf/atomic.py", "tokenizer/", "gguffile/")


def trip(fixture: str) -> dict[str, Any]:
    import dspark_convert
    from dspark_convert import convert

    pkg = Path(dspark_convert.__file__).resolve().parent
    conv = str(pkg / "hf2gguf" / "conversion.py")
    stops: set[str] = set()
    entered: set[str] = set()
    returns = 0

    def rel(code_file: str) -> str | None:
        p = Path(code_file)
        try:
            return p.resolve().relative_to(pkg).as_posix()
        except ValueError:
            return None

    def prof(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal returns
        if event != "call":
            return
        here = rel(frame.f_code.co_filename)
        if here is None or here.startswith(APART):
            return
        caller = frame.f_back
        name = f"{here}:{frame.f_code.co_name}"
        if caller is not None and caller.f_code.co_filename == conv and here != "hf2gguf/conversion.py":
            returns += 1
            stops.add(name)
        if frame.f_code.co_name not in ("<module>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"):
            entered.add(name)

    fx = ROOT / "fixtures"
    with tempfile.TemporaryDirectory() as tmp:
        sys.setprofile(prof)
        try:
            convert(fx / fixture, fx / "target-qwen3", Path(tmp) / "out.gguf", outtype="f32", dry_run=True)
        finally:
            sys.setprofile(None)
    return {"stops": len(stops), "returns": returns, "entered": len(entered),
            "files": len({s.split(":")[0] for s in entered}), "_stops": sorted(stops)}


def plan_conversion_lines() -> int:
    import dspark_convert

    path = Path(dspark_convert.__file__).resolve().parent / "hf2gguf" / "conversion.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == "plan_conversion" and node.end_lineno is not None:
            return node.end_lineno - node.lineno + 1
    return 0


def main() -> None:
    import dspark_convert

    fixtures = [a for a in sys.argv[1:] if not a.startswith("-")] or list(DEFAULT)
    print(f"package: {Path(dspark_convert.__file__).resolve().parent}")
    print(f"plan_conversion lines: {plan_conversion_lines()}")
    for f in fixtures:
        t = trip(f)
        print(f"{f:20} stops {t['stops']:3}  returns to conversion.py {t['returns']:3}  entered {t['entered']:3} "
              f"functions in {t['files']:2} files")
        if "-v" in sys.argv:
            print("   ", ", ".join(t["_stops"]))


if __name__ == "__main__":
    main()
