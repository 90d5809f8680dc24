#!/usr/bin/env python3
"""Every release-size family and outtype converted with the compiled kernels and with their numpy forms
(``DSPARK_CONVERT_KERNELS=0``): the two files must be the same bytes.

The inputs are those of bench_outtypes.py (synthetic values at the published dimensions). Printed per family and
outtype: the output's size, the sha256 of each file, whether they are identical, and each conversion's seconds
(one run each: a check, not a timing). Exits 1 when any pair differs.

usage: python benchmarks/kernels_identical.py [--families dspark-4b,nvfp4,dflash2,mimo,gemma4]
                                              [--outtypes q8_0,f16,bf16,f32] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_outtypes as bo  # noqa: E402  (this folder first on the path)

from dspark_convert import convert  # noqa: E402
from dspark_convert.formats import native  # noqa: E402


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    return h.hexdigest()


def _convert(draft: Path, target: Path, out: Path, outtype: str, extra: dict,
             numpy_forms: bool) -> tuple[str, float, int]:
    if numpy_forms:
        os.environ[native.ENV] = "0"
    try:
        t = time.perf_counter()
        convert(draft, target, out, outtype=outtype, force=True, cache=True, **extra)
        seconds = time.perf_counter() - t
    finally:
        os.environ.pop(native.ENV, None)
    digest, size = _sha256(out), out.stat().st_size
    out.unlink()
    return digest, seconds, size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(bo.FAMILIES))
    ap.add_argument("--outtypes", default="q8_0,f16,bf16,f32")
    ap.add_argument("--workdir", type=Path, help="folder for the inputs (each family's deleted after its rows)")
    a = ap.parse_args(argv)
    if not native.built():
        raise SystemExit("kernels_identical: the compiled kernels are not built (pip install -e . with a C compiler)")
    print("| family | outtype | output MB | sha256, compiled | sha256, numpy forms | identical | s compiled / numpy |")
    print("|---|---|---:|---|---|---|---:|")
    different = 0
    with tempfile.TemporaryDirectory(prefix="kernels-identical-", dir=a.workdir) as tmp:
        root = Path(tmp)
        for name in (f for f in a.families.split(",") if f):
            fam = root / name
            fam.mkdir()
            draft, target, extra, _ = bo.make_family(name, fam)
            out = root / "out.gguf"
            for outtype in (o for o in a.outtypes.split(",") if o):
                compiled, t_c, size = _convert(draft, target, out, outtype, extra, numpy_forms=False)
                numpy, t_n, _ = _convert(draft, target, out, outtype, extra, numpy_forms=True)
                same = compiled == numpy
                different += not same
                print(f"| {name} | {outtype} | {size / 1e6:.0f} | {compiled[:16]} | {numpy[:16]} | "
                      f"{'yes' if same else '**no**'} | {t_c:.2f} / {t_n:.2f} |", flush=True)
            shutil.rmtree(fam)
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
