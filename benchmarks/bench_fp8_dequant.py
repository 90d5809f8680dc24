#!/usr/bin/env python3
"""Speed of the FP8 (E4M3 + float block scales) dequantization the MTP sidecars of FP8 targets go through.

Times :func:`dspark_convert.formats.quant.fp8_scale_inv_dequant` on the row chunks the writer hands a transform
(``--rows`` rows of a ``--cols``-wide weight, 128 x 128 scale blocks, chunks starting mid-block as tensor-parallel
slices do) against the plain formula in this file (every value's scale gathered into a full ``rows x cols`` array,
then one product), in the same process, interleaved, warm, median of ``--runs`` passes; checks that both give the
same float32 bits. Prints ns per value for each and their ratio.

usage: python benchmarks/bench_fp8_dequant.py [--rows 512] [--cols 4096] [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dspark_convert.formats.quant import E4M3_VALUES, float_values, fp8_scale_inv_dequant  # noqa: E402

BLOCK = 128


def gathered(w: np.ndarray, scale: np.ndarray, rows: int, cols: int, dtype: str, row0: int) -> np.ndarray:
    """The formula as written: each value's scale looked up into a full array, then one float32 product."""
    r, c = w.shape
    s = float_values(scale, dtype)
    full = s[(row0 % rows + np.arange(r)) // rows][:, np.arange(c) // cols]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.take(E4M3_VALUES, w) * full


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    w = rng.integers(0, 256, (args.rows, args.cols), dtype=np.uint8)  # every E4M3 code, NaN included
    row0 = BLOCK // 2  # a chunk that starts mid-block
    n_blocks = -(-(row0 + args.rows) // BLOCK)
    scale = rng.random((n_blocks, -(-args.cols // BLOCK)), dtype=np.float32)
    a = fp8_scale_inv_dequant(w, scale, BLOCK, BLOCK, "F32", row0=row0)
    b = gathered(w, scale, BLOCK, BLOCK, "F32", row0)
    same = a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))
    times: dict[str, list[float]] = {"fp8_scale_inv_dequant": [], "gathered formula": []}
    for _ in range(args.runs):
        for name, fn in (("fp8_scale_inv_dequant", lambda: fp8_scale_inv_dequant(w, scale, BLOCK, BLOCK, "F32",
                                                                                 row0=row0)),
                         ("gathered formula", lambda: gathered(w, scale, BLOCK, BLOCK, "F32", row0))):
            t = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t) * 1e9 / w.size)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"chunk {args.rows} x {args.cols} E4M3, {BLOCK}x{BLOCK} F32 scales, from row {row0}; "
          f"median of {args.runs}; same bits: {same}")
    for k, v in med.items():
        print(f"  {k:24s} {v:6.2f} ns/value (spread {min(times[k]):.2f}-{max(times[k]):.2f})")
    print(f"  ratio gathered / fp8_scale_inv_dequant: {med['gathered formula'] / med['fp8_scale_inv_dequant']:.2f}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
