#!/usr/bin/env python3
"""Benchmark ``hf2gguf`` per outtype with one conversion thread against one per core, on 1 and 2 cores.

For a release-size draft (default: the DSpark 4B draft with the real Qwen3 tokenizer, see bench_inputs.py), each
outtype (bf16, f16, q8_0 by default) and each core count (the child process pinned to the first N cores with
``sched_setaffinity``), three operations run interleaved, each in a fresh interpreter, ``--runs`` times:

- ``copy``: the durable copy of the same output (read the bytes the conversion reads, write a file of the
  conversion's output size, fsync, rename, fsync the folder; bench_convert.py's copy baseline);
- ``1 thread``: the conversion with ``DSPARK_CONVERT_THREADS=1`` (the baseline: one worker converting chunks);
- ``threads=cores``: the conversion as it runs by default (one worker per usable core);
- with ``--before DIR``, also ``before``: the conversion by the dspark_convert in DIR (e.g. a checkout of main),
  with its own default threads;
- with ``--numpy-forms``, also ``numpy forms``: the default conversion with ``DSPARK_CONVERT_KERNELS=0`` (the
  numpy forms of the compiled Q8_0 / BF16 -> F16 kernels: what a package built without a C compiler runs).

Warm page cache, cached tokenizer block (filled by a first conversion that is not counted), so the figures are the
tensor streaming. Reported per row: median wall seconds with the spread, the median over runs of each run's
ratio to the copy next to it, CPU seconds (user + system) of the child, its own peak RSS (``VmHWM``); the
``speed-up`` column is ``1 thread`` / ``threads=cores`` on the default row and ``before`` / ``threads=cores``
on the ``before`` row.

usage: python benchmarks/bench_threads.py [--size dspark-4b] [--tokenizer qwen3] [--outtypes bf16,f16,q8_0]
                                          [--cores 1,2] [--runs 5] [--before DIR] [--numpy-forms] [--workdir DIR]
                                          [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convert as bc  # noqa: E402  (this folder first on the path)

MiB = 1024 * 1024


def _worker(spec: dict) -> dict:
    """In the child: pin to the first ``cores`` cores, set the thread count, then run bench_convert's worker."""
    os.sched_setaffinity(0, range(spec["cores"]))
    if spec.get("threads"):
        os.environ["DSPARK_CONVERT_THREADS"] = str(spec["threads"])
    else:
        os.environ.pop("DSPARK_CONVERT_THREADS", None)
    if spec.get("numpy_forms"):
        os.environ["DSPARK_CONVERT_KERNELS"] = "0"
    else:
        os.environ.pop("DSPARK_CONVERT_KERNELS", None)
    return bc._worker(spec)


HERE = bc.PACKAGE_ROOT[0]


def run(spec: dict, cache: Path, inputs: list[Path]) -> dict:
    bc.PACKAGE_ROOT[0] = Path(spec.get("package") or HERE)  # the children import dspark_convert from here
    r = bc.run_op(spec, cache, inputs=inputs, script=__file__)
    if "error" in r:
        raise SystemExit(f"{spec['op']} failed: {r['error']}")
    return r


def bench(draft: Path, target: Path, outtype: str, cores: int, runs: int, work: Path, cache: Path,
          before: Path | None = None, numpy_forms: bool = False) -> list[dict]:
    out = work / f"out-{outtype}.gguf"
    base = {"op": "convert", "draft": str(draft), "target": str(target), "out": str(out), "outtype": outtype,
            "cache": True, "cores": cores}
    first = run({**base, "threads": 1}, cache, [draft, target])  # fills the tokenizer cache; gives the ranges
    copy = {"op": "copy", "ranges": first["ranges"], "size": first["bytes_out"], "out": str(work / "copy.bin"),
            "cores": cores}
    modes = {"copy": copy, "1 thread": {**base, "threads": 1}, f"threads={cores} (default)": {**base, "threads": 0}}
    if before is not None:
        modes["before (its default threads)"] = {**base, "threads": 0, "package": str(before)}
    if numpy_forms:
        modes["numpy forms (default threads)"] = {**base, "threads": 0, "numpy_forms": True}
    got: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(runs):
        for m, spec in modes.items():
            got[m].append(run(spec, cache, [draft]))
    rows = []
    copies = got["copy"]
    for m, rs in got.items():
        ratios = [r["wall"] / c["wall"] for r, c in zip(rs, copies, strict=True)]
        walls = sorted(r["wall"] for r in rs)
        rows.append({"outtype": outtype, "cores": cores, "mode": m, "wall": statistics.median(walls),
                     "spread": (walls[0], walls[-1]), "x_copy": None if m == "copy" else statistics.median(ratios),
                     "cpu": statistics.median(r["cpu"] for r in rs), "user": statistics.median(r["user"] for r in rs),
                     "rss_mib": max(r["rss"] for r in rs) / MiB,
                     "mb_out": first["bytes_out"] / 1e6})
    rows[2]["speedup"] = rows[1]["wall"] / rows[2]["wall"]  # 1 thread / default
    for row in rows[3:]:
        row["speedup"] = row["wall"] / rows[2]["wall"]  # before / default, numpy forms / default
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| outtype | cores | run | wall s | spread s | x copy | CPU s | peak RSS MiB | output MB | speed-up |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        x = f"{r['x_copy']:.2f}" if r["x_copy"] is not None else ""
        s = f"{r['speedup']:.2f}x" if "speedup" in r else ""
        lines.append(f"| {r['outtype']} | {r['cores']} | {r['mode']} | {r['wall']:.2f} | {r['spread'][0]:.2f}-"
                     f"{r['spread'][1]:.2f} | {x} | {r['cpu']:.2f} | {r['rss_mib']:.0f} | {r['mb_out']:.0f} | {s} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="dspark-4b", help=f"draft ({','.join(bc.MODEL_NAMES)})")
    ap.add_argument("--tokenizer", default="qwen3", help=f"target tokenizer ({','.join(bc.TOKENIZERS)})")
    ap.add_argument("--outtypes", default="bf16,f16,q8_0")
    ap.add_argument("--cores", default="1,2", help="core counts to pin the conversions to")
    ap.add_argument("--runs", type=int, default=5, help="runs per operation (medians reported)")
    ap.add_argument("--workdir", type=Path, help="use (and keep) this folder; inputs already there are reused")
    ap.add_argument("--json", type=Path, help="also write the rows and the machine description to this file")
    ap.add_argument("--before", type=Path, help="folder holding an earlier dspark_convert to time as well")
    ap.add_argument("--numpy-forms", action="store_true", help="also time the numpy forms (DSPARK_CONVERT_KERNELS=0)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(json.loads(a.worker))))
        return 0
    import bench_inputs

    usable = len(os.sched_getaffinity(0))
    cores = [c for c in (int(x) for x in a.cores.split(",") if x) if c <= usable]
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        root = a.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        draft, target, _ = bench_inputs.make_inputs(root, [a.size], tokenizer=a.tokenizer)[a.size]
        work = Path(tmp)
        cache = work / "cache"
        print(f"# {a.size} + {a.tokenizer} tokenizer; {bc.machine()}; load average at start "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        rows = []
        for outtype in (o for o in a.outtypes.split(",") if o):
            for c in cores:
                new = bench(draft, target, outtype, c, a.runs, work, cache, a.before and a.before.resolve(),
                            a.numpy_forms)
                rows += new
                print(*table(new).splitlines()[2:], sep="\n", flush=True)
        print(f"# load average at end {os.getloadavg()[0]:.2f}")
        print(table(rows))
        if a.json:
            a.json.write_text(json.dumps({"machine": bc.machine(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
