"""Time and peak memory of computing one target's tokenizer block (no cache), before and after a change.

Each run is a fresh Python process (imports outside the timed part) that computes ``target_vocab_kvs`` for a
target folder with the cache off, and prints the seconds of that call (wall and process CPU: on a shared machine
the CPU time is the steadier figure), the process's peak RSS (MiB, imports
included) and the sha256 of the block (its cache encoding: every key, type and value). The tokenizer files are
read once before the runs, so the page cache is warm. Prints the median and spread of ``--runs`` runs per
package, and whether the blocks of the packages are byte-identical.

    python benchmarks/bench_tokenizer_block.py --target ~/.cache/dspark-convert/gemma3-tokenizer \\
        --handler gemma4 --before main --runs 5

``--before REF`` measures the package at git ref REF (extracted with ``git archive`` into a temporary folder)
beside this checkout's; ``--package DIR`` measures the checkout at DIR instead of this one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_RUN = r"""
import hashlib, json, resource, sys, time
from pathlib import Path
from dspark_convert.tokenizer.cache import encode_entry
from dspark_convert.tokenizer.handlers import target_vocab_kvs
t, c = time.perf_counter(), time.process_time()
kvs = target_vocab_kvs(Path(sys.argv[1]), None, sys.argv[2])
s, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"s": s, "cpu": cpu, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "sha": hashlib.sha256(encode_entry(kvs, [])).hexdigest()}))
"""


def measure(package: Path, target: Path, handler: str, runs: int) -> list[dict[str, float | str]]:
    env = {**os.environ, "PYTHONPATH": str(package)}
    out = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", _RUN, str(target), handler], env=env, capture_output=True,
                             text=True, check=True, cwd=package)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


def summary(name: str, rows: list[dict[str, float | str]]) -> str:
    secs = sorted(float(r["s"]) for r in rows)
    peaks = sorted(float(r["peak"]) for r in rows)
    cpus = sorted(float(r["cpu"]) for r in rows)
    return (f"{name:8s} block {statistics.median(secs):.3f} s (spread {secs[0]:.3f}-{secs[-1]:.3f}), "
            f"CPU {statistics.median(cpus):.3f} s (spread {cpus[0]:.3f}-{cpus[-1]:.3f}), "
            f"peak RSS {statistics.median(peaks):.0f} MiB (spread {peaks[0]:.0f}-{peaks[-1]:.0f}), "
            f"sha256 {rows[0]['sha']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=Path, required=True, help="target folder (tokenizer.json, tokenizer_config.json)")
    ap.add_argument("--handler", default="gemma4", help="tokenizer handler (default gemma4)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", help="git ref to measure beside this checkout")
    ap.add_argument("--package", type=Path, default=HERE, help="checkout to measure (default: this one)")
    args = ap.parse_args()
    for f in args.target.iterdir():  # warm the page cache
        if f.is_file():
            f.read_bytes()
    results: dict[str, list[dict[str, float | str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tok-") as tmp:
        if args.before:
            archive = subprocess.run(["git", "-C", str(args.package), "archive", args.before, "dspark_convert"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            results["before"] = measure(Path(tmp), args.target, args.handler, args.runs)
        results["after" if args.before else "package"] = measure(args.package, args.target, args.handler, args.runs)
    for name, rows in results.items():
        print(summary(name, rows))
    shas = {str(r["sha"]) for rows in results.values() for r in rows}
    print("blocks byte-identical" if len(shas) == 1 else f"blocks DIFFER: {sorted(shas)}")
    return 0 if len(shas) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
