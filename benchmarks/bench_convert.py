#!/usr/bin/env python3
"""Benchmark ``hf2gguf`` (bf16 / f16 / f32 / q8_0), ``inspect`` and ``verify`` on realistic-size drafts.

One command generates the checkpoints (released DSpark 4B / 8B, z-lab DFlash 4B and AngelSlim EAGLE-3 4B dims,
see bench_inputs.py) into a temporary folder, then runs every operation IN ITS OWN SUBPROCESS, so that the peak
RSS reported (the child's own ``VmHWM``) belongs to that operation alone; CPU time comes from ``os.wait4``.
Before each operation the page cache is dropped (``sync; echo 3 > /proc/sys/vm/drop_caches``; needs root) or,
when that is not allowed (or with --warm), the operation's inputs are read once so that every operation starts
equally warm. The method is printed.

Baselines, measured in the same run:
- ``copy``: read exactly the source byte ranges the conversion reads (16 MiB ``preadv`` into one buffer) and
  write a file of exactly the conversion's output size (the bytes read, written in proportion: twice for f32,
  about half for q8_0) with plain unbuffered writes, then fsync, rename into place and fsync the folder, as the
  converter does. That is what ``cp`` + ``sync`` costs: the I/O floor of a straightforward converter.
- ``gguf-whole``: the same conversion to q8_0, but every tensor loaded whole and quantized with gguf-py's own
  ``gguf.quants.quantize`` (upstream's approach); its output is compared byte for byte with ours.

usage: python benchmarks/bench_convert.py [--sizes dspark-4b,dspark-8b,dflash-4b,eagle3-4b]
                                          [--only bf16,f16,f32,q8_0,copy,gguf-whole,inspect,verify]
                                          [--workdir DIR] [--keep] [--warm] [--json FILE] [--package DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODEL_NAMES = ("dspark-4b", "dspark-8b", "dflash-4b", "eagle3-4b")  # bench_inputs.MODELS (numpy-free import here)

OUTTYPES = ("bf16", "f16", "f32", "q8_0")
OPS = (*OUTTYPES, "copy", "gguf-whole", "inspect", "verify")
PACKAGE_ROOT = [Path(__file__).resolve().parents[1]]  # where the workers import dspark_convert from (--package)
INSPECT_RUNS = 3
VERIFY_MODELS = ("eagle3-4b",)  # verify loads the draft twice in float32 (torch + numpy): the smallest one
MiB = 1024 * 1024


# ============================================================================================== workers
def _worker(spec: dict) -> dict:
    """Run one operation in this (fresh) process and return its measurements.

    ``seconds`` times the operation itself, after the imports (the parent's ``wall`` includes interpreter start-up
    and imports).
    """
    op = spec["op"]
    if op in ("convert", "gguf-whole"):
        from dspark_convert import convert, writer

        if op == "gguf-whole":  # upstream's approach: whole tensors through gguf.quants.quantize
            _ORIGINAL["chunk_jobs"] = writer.chunk_jobs
            writer.chunk_jobs = _whole_tensor_jobs
            writer.WORKERS = writer.LOOKAHEAD = 1  # one tensor at a time, as upstream does
        t0 = time.perf_counter()
        r = convert(spec["draft"], spec["target"], spec["out"], outtype=spec.get("outtype", "q8_0"), force=True)
        seconds = time.perf_counter() - t0
        ranges = _source_ranges(r.plan, spec["draft"])
        out = {"bytes_out": r.bytes_written, "bytes_in": sum(e - s for _, s, e in ranges), "ranges": ranges}
    elif op == "copy":
        t0 = time.perf_counter()
        out = _copy(spec["ranges"], spec["size"], Path(spec["out"]))
        seconds = time.perf_counter() - t0
    elif op == "inspect":
        from dspark_convert.inspect import inspect_gguf

        t0 = time.perf_counter()
        info = inspect_gguf(spec["file"])
        seconds = time.perf_counter() - t0
        out = {"bytes_out": 0, "bytes_in": 0, "keys": len(info)}
    elif op == "verify":
        from dspark_convert.verify import verify

        t0 = time.perf_counter()
        rep = verify(spec["file"], spec["draft"], spec["target"])
        seconds = time.perf_counter() - t0
        out = {"bytes_out": 0, "bytes_in": 0, "passed": rep.passed}
    else:
        raise ValueError(op)
    out["seconds"] = seconds
    out["torch_imported"] = "torch" in sys.modules
    out["peak_rss"] = _own_peak_rss()
    return out


def _own_peak_rss() -> int | None:
    """This process's own peak RSS (VmHWM), in bytes.

    Not ``ru_maxrss``: Linux carries the parent's high-water mark across fork+exec into the child's, so a child
    of a large parent would report at least the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _source_ranges(plan, draft: str) -> list[tuple[str, int, int]]:
    """(file, start, end) of every draft tensor a plan reads, in write order (what the copy baseline reads)."""
    from dspark_convert.checkpoint import Checkpoint

    ck = Checkpoint(Path(draft))
    refs = [ck.ref(t.source) for t in plan.tensors if t.source and t.origin == "draft" and t.data is None]
    return [(str(r.file), r.start, r.end) for r in refs]


def _whole_tensor_jobs(spec, sources, *, allow_nonfinite: bool = False):
    """Stand-in for writer.chunk_jobs: each q8_0 tensor read whole and quantized by gguf.quants.quantize."""
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import quants

    from dspark_convert import transforms

    if spec.data is not None or spec.transform is not None or spec.ggml_type != QT.Q8_0:
        yield from _ORIGINAL["chunk_jobs"](spec, sources, allow_nonfinite=allow_nonfinite)
        return

    def whole():
        ref = sources[spec.origin].ref(spec.source)
        dtype = np.dtype(ref.numpy_dtype)
        raw = np.fromfile(ref.file, dtype=dtype, count=(ref.end - ref.start) // dtype.itemsize, offset=ref.start)
        return quants.quantize(transforms.to_float32(raw.reshape(ref.shape), ref.dtype), QT.Q8_0)

    yield whole


_ORIGINAL: dict = {}


def _copy(ranges: list[tuple[str, int, int]], size: int, out: Path) -> dict:
    """The I/O floor: read the source ranges once and write ``size`` bytes, spread in proportion as they are read.

    Each 16 MiB chunk read is written as many times as needed to keep ``written / size == read / source`` (twice
    for f32, about half of it for q8_0), then the file is fsynced and renamed into place like the converter's.
    """
    buf = bytearray(16 * MiB)
    view = memoryview(buf)
    total = sum(e - s for _, s, e in ranges)
    tmp = out.with_name(f".{out.name}.partial")
    written = read = 0
    with open(tmp, "wb", buffering=0) as f:
        for path, start, end in ranges:
            fd = os.open(path, os.O_RDONLY)
            try:
                pos = start
                while pos < end:
                    n = os.preadv(fd, [view[:min(len(buf), end - pos)]], pos)
                    pos += n
                    read += n
                    due = size * read // total if total else size
                    while written < due:
                        written += f.write(view[:min(n, due - written)])
            finally:
                os.close(fd)
        while written < size:
            written += f.write(view[:min(len(buf), size - written)])
        os.fsync(f.fileno())
    os.replace(tmp, out)
    dfd = os.open(out.parent, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    return {"bytes_out": written, "bytes_in": read}


# ============================================================================================== driver
def drop_caches() -> bool:
    """Drop the page cache (root only). Returns False when the kernel refuses."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def warm(paths: list[Path]) -> None:
    """Read files once so that an operation starts with them cached (fallback when caches cannot be dropped)."""
    for p in paths:
        for f in ([p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())):
            with open(f, "rb", buffering=0) as fh:
                while fh.read(16 * MiB):
                    pass


def run_op(spec: dict, cold: bool, inputs: list[Path], script: str = __file__) -> dict:
    """Run one operation in a fresh interpreter (``script --worker SPEC``, by default this file's worker): its wall
    time, the peak RSS of that child alone, and its report."""
    if not (cold and drop_caches()):
        warm(inputs)
    root = str(PACKAGE_ROOT[0])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, script, "--worker", json.dumps(spec)], stdout=out, stderr=err, env=env)
        # os.wait4 reaps this child and returns ITS rusage (RUSAGE_CHILDREN would be the max over all children);
        # its CPU time is used as is, its peak RSS only when the child could not report its own VmHWM
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode(errors="replace")
    rss = ru.ru_maxrss * 1024  # Linux reports KiB
    cpu = ru.ru_utime + ru.ru_stime
    if p.returncode != 0:
        return {"error": (stderr.strip().splitlines() or ["?"])[-1][:300], "wall": wall, "rss": rss, "cpu": cpu}
    res = json.loads(stdout.strip().splitlines()[-1])
    res.update(wall=wall, rss=res.pop("peak_rss") or rss, cpu=cpu)
    return res


def machine() -> dict:
    """nproc, CPU model, RAM and the disk under the work folder, for the report."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    mem = next((int(ln.split()[1]) * 1024 for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), 0)
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gib": round(mem / 1024**3, 1), "python": sys.version.split()[0]}


def _row(model: str, op: str, r: dict, base: dict | None = None) -> dict:
    row = {"model": model, "op": op, **r}
    if "error" not in r and base and "error" not in base and base.get("seconds"):
        row["x_copy"] = r["seconds"] / base["seconds"]
    return row


def fmt_table(rows: list[dict]) -> str:
    """A Markdown table: wall time, output / source throughput, peak RSS and the ratio to the copy baseline."""
    head = ("| draft | operation | time s | process s | CPU s | output MB | out MB/s | src MB/s | peak RSS MiB | x copy |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['op']} | failed: {r['error']} ||||||||")
            continue
        s = r["seconds"]
        out = f"{r['bytes_out'] / 1e6:.0f}" if r["bytes_out"] else ""
        omb = f"{r['bytes_out'] / 1e6 / s:.0f}" if r["bytes_out"] else ""
        imb = f"{r['bytes_in'] / 1e6 / s:.0f}" if r["bytes_in"] else ""
        x = f"{r['x_copy']:.2f}" if "x_copy" in r else ""
        note = f" ({r['note']})" if r.get("note") else ""
        lines.append(f"| {r['model']} | {r['op']}{note} | {s:.2f} | {r['wall']:.2f} | {r['cpu']:.1f} | {out} | {omb} | {imb} | "
                     f"{r['rss'] / MiB:.0f} | {x} |")
    return "\n".join(lines)


def bench(root: Path, sizes: list[str], only: set[str], cold: bool, log=print) -> list[dict]:
    """Generate the inputs under ``root`` (reused when present) and run every selected operation."""
    from bench_inputs import MODELS, make_inputs, write_target_weights

    assert set(MODELS) == set(MODEL_NAMES)
    t0 = time.perf_counter()
    folders = {}
    for name in sizes:
        d, t = root / name, root / f"target-h{MODELS[name].hidden}"
        if not ((d / "model.safetensors.index.json").exists() and (t / "config.json").exists()):
            make_inputs(root, [name])
        if "verify" in only and name in VERIFY_MODELS:
            write_target_weights(t, MODELS[name])
        folders[name] = (d, t)
    os.sync()
    log(f"inputs ready in {time.perf_counter() - t0:.1f} s under {root}")
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        log(fmt_table([row]).split("\n", 2)[-1])

    for name in sizes:
        d, t = folders[name]
        copies: dict[int, dict] = {}
        for ot in (o for o in OUTTYPES if o in only):
            out = root / f"{name}.{ot}.gguf"
            r = run_op({"op": "convert", "draft": str(d), "target": str(t), "out": str(out), "outtype": ot}, cold, [d, t])
            base = None
            if "error" not in r and "copy" in only:
                size = r["bytes_out"]
                if size not in copies:  # bf16 and f16 files have the same size: one baseline serves both
                    cp = root / f"{name}.copy"
                    copies[size] = run_op({"op": "copy", "ranges": r["ranges"], "size": size, "out": str(cp)}, cold, [d])
                    cp.unlink(missing_ok=True)
                    emit(_row(name, f"copy baseline ({size / 1e9:.2f} GB)", copies[size]))
                base = copies[size]
            emit(_row(name, f"hf2gguf {ot}", r, base))
            if "error" in r:
                continue
            if ot == "bf16" and "inspect" in only:  # short and noisy: the median of INSPECT_RUNS cold runs
                runs = sorted((run_op({"op": "inspect", "file": str(out)}, cold, [out]) for _ in range(INSPECT_RUNS)),
                              key=lambda x: x.get("seconds", float("inf")))
                emit(_row(name, f"inspect ({out.stat().st_size / 1e9:.1f} GB file, median of {INSPECT_RUNS})",
                          runs[len(runs) // 2]))
            if ot == "bf16" and "verify" in only and name in VERIFY_MODELS:
                v = run_op({"op": "verify", "file": str(out), "draft": str(d), "target": str(t)}, cold, [out, d, t])
                emit(_row(name, "verify" + ("" if v.get("passed", True) else " (FAILED)"), v))
            if ot == "q8_0" and "gguf-whole" in only:
                whole = root / f"{name}.q8_0.whole.gguf"
                w = run_op({"op": "gguf-whole", "draft": str(d), "target": str(t), "out": str(whole)}, cold, [d, t])
                if "error" not in w:
                    w["note"] = "identical bytes" if _same_file(out, whole) else "DIFFERENT BYTES"
                    whole.unlink()
                emit(_row(name, "gguf-whole q8_0", w, base))
            out.unlink(missing_ok=True)
    return rows


def _same_file(a: Path, b: Path) -> bool:
    import filecmp

    return filecmp.cmp(a, b, shallow=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(MODEL_NAMES), help=f"drafts (default all: {','.join(MODEL_NAMES)})")
    ap.add_argument("--only", default=",".join(OPS), help=f"operations to run (default all: {','.join(OPS)})")
    ap.add_argument("--workdir", type=Path, help="use (and keep) this folder; inputs already there are reused")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--warm", action="store_true", help="do not drop the page cache; warm each operation's inputs")
    ap.add_argument("--json", type=Path, help="also write the rows and the machine description to this file")
    ap.add_argument("--package", type=Path, help="folder holding the dspark_convert to measure (default: this "
                                                  "checkout), e.g. an older version for a before/after comparison")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(json.loads(a.worker))))
        return 0
    if a.package:
        PACKAGE_ROOT[0] = a.package.resolve()
    sizes = [s for s in a.sizes.split(",") if s]
    only = {s for s in a.only.split(",") if s}
    bad = [s for s in sizes if s not in MODEL_NAMES] + [o for o in only if o not in OPS]
    if bad:
        ap.error(f"unknown size/operation {bad[0]!r}")
    root = a.workdir or Path(tempfile.mkdtemp(prefix="dspark-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if free < 24e9:
        ap.error(f"{root}: {free / 1e9:.0f} GB free; the benchmark needs about 24 GB")
    cold = not a.warm and drop_caches()
    info = {**machine(), "cache": "dropped before each operation" if cold else "warm: inputs read once before each operation"}
    print(json.dumps(info))
    t0 = time.perf_counter()
    try:
        rows = bench(root, sizes, only, cold)
    finally:
        if not (a.keep or a.workdir):
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{fmt_table(rows)}\n\ntotal {time.perf_counter() - t0:.0f} s; page cache {info['cache']}")
    if a.json:
        a.json.write_text(json.dumps({"machine": info, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
