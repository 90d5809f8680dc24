#!/usr/bin/env python3
"""Print the mutation table of docs/verify.md: every defect of tests/verify/test_mutations.py, at each outtype, with the
first diverging component ``verify`` names and its NMSE (exact mode), plus the worst round-off of the unmutated
files over several seeds.

usage:
    python benchmarks/verify_mutations.py                  # markdown tables on stdout (~30 s)
    python benchmarks/verify_mutations.py --seeds 20       # round-off over more seeds
    python benchmarks/verify_mutations.py --keep DIR       # also keep the mutated files (DIR/<defect>.<outtype>.gguf)

The Gemma 4 assistant's mutations (``tests/variants/test_assistants.py``) get a table of their own at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "verify"))  # test_mutations, test_verify
sys.path.insert(0, str(ROOT / "tests" / "variants"))  # test_assistants

from test_mutations import MUTATIONS, OUTTYPES, TARGET, VARIANTS, make_variant, mutate, source_of  # noqa: E402
from test_verify import BLOCK_LAYOUTS, EAGLE3_LAYOUTS  # noqa: E402

from dspark_convert.hf2gguf.conversion import convert  # noqa: E402
from dspark_convert.verify import verify  # noqa: E402


def prepare(work: Path, layout: str, outtype: str, cache: dict) -> tuple[Path, Path]:
    """Convert a fixture (or a test variant of one) once."""
    if (layout, outtype) not in cache:
        hf = source_of(layout)
        if layout in VARIANTS:
            hf = work / layout
            if not hf.is_dir():
                make_variant(layout, hf)
        cache[layout, outtype] = (convert(hf, TARGET, work / f"{layout}.{outtype}.gguf", outtype=outtype).path, hf)
    return cache[layout, outtype]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds for the round-off of unmutated files")
    ap.add_argument("--keep", type=Path, help="keep the converted and mutated files here")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="verify_mutations_"))
    work.mkdir(parents=True, exist_ok=True)
    cache: dict = {}

    print(f"## Round-off of correct conversions (worst exact-mode NMSE over {a.seeds} seeds)\n")
    print("| fixture | " + " | ".join(OUTTYPES) + " | worst component |\n|---|" + "---|" * (len(OUTTYPES) + 1))
    overall = 0.0
    for layout in BLOCK_LAYOUTS + EAGLE3_LAYOUTS:
        cells, where = [], ""
        for ot in OUTTYPES:
            path, hf = prepare(work, layout, ot, cache)
            worst = 0.0
            for seed in range(a.seeds):
                r = verify(path, hf, TARGET, seed=seed)
                assert r.passed, (layout, ot, seed, r.first_divergence)
                o = max((o for o in r.outputs if o.nmse is not None), key=lambda o: o.nmse or 0.0)
                if (o.nmse or 0.0) > worst:
                    worst, where = o.nmse or 0.0, o.name
            overall = max(overall, worst)
            cells.append(f"{worst:.1e}")
        print(f"| {layout} | " + " | ".join(cells) + f" | {where} |")
    print(f"\nworst over everything: {overall:.2e}\n")

    print("## Mutations (exact mode, default options): first divergence and its NMSE per outtype\n")
    print("| defect | fixture | first divergence | " + " | ".join(OUTTYPES) + " |\n|---|---|---|" + "---|" * len(OUTTYPES))
    failed_all = True
    for m in MUTATIONS:
        (layout,) = m.layouts
        firsts, cells = set(), []
        for ot in OUTTYPES:
            src, hf = prepare(work, layout, ot, cache)
            dst = mutate(src, work / f"{m.id.replace('[', '.').replace(']', '')}.{ot}.gguf", m.tensors, m.kvs, m.renames)
            r = verify(dst, hf, TARGET)
            failed_all &= not r.passed
            first = r.first_divergence or {"component": "(none: PASS)"}
            firsts.add(first["component"])
            row = next((o for o in [*r.outputs, *([r.accounting] if r.accounting else [])]
                        if o.name == first["component"]), None)
            cells.append("FAIL " + (f"{row.nmse:.0e}" if row is not None and row.nmse is not None else
                                    ("metadata" if first["component"].startswith("metadata") else row.grade if row else "PASS")))
        print(f"| {m.id.split('[')[0]} | {layout} | {' / '.join(sorted(firsts))} | " + " | ".join(cells) + " |")
    print(f"\n{len(MUTATIONS)} mutated fixtures x {len(OUTTYPES)} outtypes: "
          + ("every one FAILS" if failed_all else "SOME PASS"))
    failed_all &= assistant_table(work)
    return 0 if failed_all else 1


def assistant_table(work: Path) -> bool:
    """The Gemma 4 assistant's mutations (tests/variants/test_assistants.py, a-gemma4-e2b, no target): the same table."""
    from assistant_drafts import make
    from test_assistants import GEMMA_MUTATIONS

    draft, _ = make(work, "a-gemma4-e2b")
    print("\n## Gemma 4 assistant mutations (a-gemma4-e2b)\n")
    print("| defect | first divergence | " + " | ".join(OUTTYPES) + " |\n|---|---|" + "---|" * len(OUTTYPES))
    failed_all = True
    for defect, tensors, kvs, _first in GEMMA_MUTATIONS:
        firsts, cells = set(), []
        for ot in OUTTYPES:
            good = work / f"a-gemma4-e2b.{ot}.gguf"
            if not good.is_file():
                convert(draft, None, good, outtype=ot)
            r = verify(mutate(good, work / f"a-gemma4-e2b.mutated.{ot}.gguf", tensors, kvs), draft, None)
            failed_all &= not r.passed
            first = r.first_divergence or {"component": "(none: PASS)"}
            firsts.add(first["component"])
            row = next((o for o in r.outputs if o.name == first["component"]), None)
            cells.append("FAIL " + (f"{row.nmse:.0e}" if row is not None and row.nmse is not None else
                                    (row.grade if row is not None else "PASS")))
        print(f"| {defect} | {' / '.join(sorted(firsts))} | " + " | ".join(cells) + " |")
    print(f"\n{len(GEMMA_MUTATIONS)} mutations x {len(OUTTYPES)} outtypes: "
          + ("every one FAILS" if failed_all else "SOME PASS"))
    return failed_all


if __name__ == "__main__":
    sys.exit(main())
