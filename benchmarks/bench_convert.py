#!/usr/bin/env python3
"""Benchmark ``hf2gguf``, its fixed costs (tokenizer block, start-up) and ``inspect`` on release-size drafts.

One run measures, for the DSpark 4B and 8B drafts with a Qwen3 (151k tokens) and a Gemma 3 (262k tokens) target
tokenizer (see bench_inputs.py; the tokenizers are fetched once with npm into ~/.cache/dspark-bench-tokenizers):

- ``hf2gguf`` for each outtype: warm page cache with the tokenizer block computed (``--no-cache``), warm with the
  cached tokenizer block, and cold (page cache dropped, block computed);
- the dry run (computed and cached block), the tokenizer block alone (time and memory, and byte equality with the
  whole-``tokenizers`` path it replaces), ``inspect`` (table and ``--json``) and the start-up of the CLI;
- the copy baseline, warm and cold, for every output size.

Every operation runs in its own fresh interpreter; peak RSS is the child's own ``VmHWM``. Warm operations are the
median of ``--runs`` runs, after one read of their inputs; cold ones drop the page cache first (``echo 3 >
/proc/sys/vm/drop_caches``, root only; without root they are skipped and the output says so). Ratios are wall
time over the same run's copy baseline of the same output size, warm against warm and cold against cold.

Copy baseline: read exactly the source byte ranges the conversion reads (16 MiB ``preadv``) and write a file of
exactly the conversion's output size (the bytes read, in proportion: twice for f32, about half for q8_0) with plain
writes, fsync, rename and fsync of the folder, as the converter does: ``cp`` + ``sync`` of the same bytes.

usage: python benchmarks/bench_convert.py [--sizes dspark-4b,dspark-8b] [--tokenizers qwen3,gemma3]
                                          [--outtypes bf16,f16,f32,q8_0] [--runs 3] [--cold-runs 1]
                                          [--only convert,cold,dry,tokenizer,inspect,startup,gguf-whole,verify]
                                          [--workdir DIR] [--keep] [--json FILE] [--package DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODEL_NAMES = ("dspark-4b", "dspark-8b", "dflash-4b", "eagle3-4b")  # bench_inputs.MODELS (numpy-free import here)
TOKENIZERS = ("qwen3", "gemma3", "deepseek")
OUTTYPES = ("bf16", "f16", "f32", "q8_0")
PARTS = ("convert", "cold", "dry", "tokenizer", "inspect", "startup", "gguf-whole", "verify")
DEFAULT_PARTS = ("convert", "cold", "dry", "tokenizer", "inspect", "startup")
PACKAGE_ROOT = [Path(__file__).resolve().parents[1]]  # where the workers import dspark_convert from (--package)
MiB = 1024 * 1024


# ============================================================================================== workers
def _worker(spec: dict) -> dict:
    """Run one operation in this (fresh) process; ``seconds`` times the operation after its imports."""
    op = spec["op"]
    out: dict = {"bytes_out": 0, "bytes_in": 0}
    if op in ("convert", "gguf-whole"):
        from dspark_convert import convert
        from dspark_convert.hf2gguf import writer

        if op == "gguf-whole":  # upstream's approach: whole tensors through gguf.quants.quantize
            _ORIGINAL["chunk_spans"] = writer.chunk_spans
            writer.chunk_spans = _whole_tensor_spans
            writer.WORKERS = writer.LOOKAHEAD = 1  # one tensor at a time, as upstream does
        t0 = time.perf_counter()
        r = convert(spec["draft"], spec["target"], spec["out"], outtype=spec.get("outtype", "q8_0"), force=True,
                    dry_run=spec.get("dry_run", False), cache=spec.get("cache", False),
                    match_upstream=spec.get("match_upstream", False))
        seconds = time.perf_counter() - t0
        ranges = _source_ranges(r.plan, spec["draft"], spec["target"])
        out.update(bytes_out=r.bytes_written, bytes_in=0 if r.dry_run else sum(e - s for _, s, e in ranges),
                   ranges=ranges, planned=r.plan.total_tensor_bytes())
    elif op == "copy":
        t0 = time.perf_counter()
        out = _copy(spec["ranges"], spec["size"], Path(spec["out"]))
        seconds = time.perf_counter() - t0
    elif op == "tokenizer":
        seconds = _tokenizer_block(spec, out)
    elif op == "inspect":
        from dspark_convert.inspect import inspect_gguf

        t0 = time.perf_counter()
        info = inspect_gguf(spec["file"])
        seconds = time.perf_counter() - t0
        out["keys"] = len(info)
    elif op == "verify":
        from dspark_convert.verify import verify

        t0 = time.perf_counter()
        rep = verify(spec["file"], spec["draft"], spec["target"])
        seconds = time.perf_counter() - t0
        out["passed"] = rep.passed
    else:
        raise ValueError(op)
    out["seconds"] = seconds
    out["torch_imported"] = "torch" in sys.modules
    out["peak_rss"] = _status("VmHWM")
    return out


def _tokenizer_block(spec: dict, out: dict) -> float:
    """The target's tokenizer block: its time and the memory it adds. ``whole``: by the whole-``tokenizers`` path
    of before (``json`` + ``Tokenizer.from_str``), then checked byte for byte against the fast path."""
    from gguf import GGUFWriter

    from dspark_convert.gguffile.header import pack_kv_value
    from dspark_convert.tokenizer import handlers

    target, n = Path(spec["target"]), spec["vocab"]
    handler = handlers.vocab_handler_for_target(target)
    for f in target.iterdir():  # the files in the page cache: this measures the work, not the disk
        f.read_bytes()

    def packed(kvs: list) -> bytes:
        w = GGUFWriter(None, "dflash")
        return b"".join(pack_kv_value(w, kv.value, kv.type, kv.sub_type) for kv in kvs)

    fast_path = handlers._set_vocab_gpt2_fast
    if spec.get("whole"):
        handlers._set_vocab_gpt2_fast = lambda *a: False  # the whole-tokenizer path of before
    base = _status("VmRSS")
    t0 = time.perf_counter()
    block = packed(handlers.target_vocab_kvs(target, n, handler, cache=spec.get("cache", False)))
    seconds = time.perf_counter() - t0
    out["block_mib"] = (_status("VmHWM") - base) / MiB
    out["block_bytes"] = len(block)
    if spec.get("whole"):
        handlers._set_vocab_gpt2_fast = fast_path
        out["identical"] = packed(handlers.target_vocab_kvs(target, n, handler)) == block
    return seconds


def _own_peak_rss() -> int:
    """This process's own peak RSS (VmHWM) in bytes (bench_dsv4.py's workers use it too)."""
    return _status("VmHWM")


def _status(field: str) -> int:
    """A field of /proc/self/status in bytes (VmHWM: this process's own peak RSS; not ``ru_maxrss``, which Linux
    carries over from the parent across fork+exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _source_ranges(plan, draft: str, target: str | None = None) -> list[tuple[str, int, int]]:
    """(file, start, end) of every checkpoint tensor a plan reads (all sources of a tensor; the target's too when
    ``target`` is given), in write order: what the copy baseline reads."""
    from dspark_convert.hf.checkpoint import Checkpoint

    cks = {"draft": Checkpoint(Path(draft))}
    if target is not None and any(t.origin == "target" and t.data is None for t in plan.tensors):
        cks["target"] = Checkpoint(Path(target))
    refs = [cks[t.origin].ref(name) for t in plan.tensors if t.data is None and t.origin in cks for name in t.sources]
    return [(str(r.file), r.start, r.end) for r in refs]


def _whole_tensor_spans(spec, sources, *, allow_nonfinite: bool = False, chunk=None):
    """Stand-in for writer.chunk_spans: each plain q8_0 tensor read whole and quantized by gguf.quants.quantize, one
    job writing all of its bytes (the other tensors as the writer cuts them)."""
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import quants

    from dspark_convert.formats import transforms

    if spec.data is not None or spec.transform is not None or spec.ggml_type != QT.Q8_0:
        yield from _ORIGINAL["chunk_spans"](spec, sources, allow_nonfinite=allow_nonfinite, chunk=chunk)
        return

    def whole():
        ref = sources[spec.origin].ref(spec.source)
        dtype = np.dtype(ref.numpy_dtype)
        raw = np.fromfile(ref.file, dtype=dtype, count=(ref.end - ref.start) // dtype.itemsize, offset=ref.start)
        return quants.quantize(transforms.to_float32(raw.reshape(ref.shape), ref.dtype), QT.Q8_0)

    yield 0, spec.nbytes, whole


_ORIGINAL: dict = {}


def _copy(ranges: list[tuple[str, int, int]], size: int, out: Path) -> dict:
    """The I/O floor: read the source ranges once and write ``size`` bytes, spread in proportion as they are read."""
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
    """Read files once so that an operation starts with them cached."""
    for p in paths:
        for f in ([p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())):
            with open(f, "rb", buffering=0) as fh:
                while fh.read(16 * MiB):
                    pass


def _env(cache_dir: Path | None) -> dict:
    """The children's environment: this package first on the path; the tokenizer cache in ``cache_dir`` (when
    given, else the user's own), and the compiled bytecode in ``cache_dir/pycache`` even when
    ``PYTHONDONTWRITEBYTECODE`` is set here, so that every child but the first imports the package as an installed
    copy does (pip compiles it at install; compiling ~80 modules from source costs a child ~0.2 CPU seconds)
    and nothing is written next to the sources."""
    root = str(PACKAGE_ROOT[0])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if cache_dir is not None:
        env["DSPARK_CONVERT_CACHE_DIR"] = str(cache_dir)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir / "pycache")
    return env


def run_op(spec: dict, cache_dir: Path | None = None, *, cold: bool = False, inputs: Sequence[Path] = (),
           script: str = __file__) -> dict:
    """One operation in a fresh interpreter (``script --worker SPEC``, by default this file's worker): wall time
    of the child, its CPU time and own peak RSS, its report. ``cold``: the page cache is dropped first (root);
    otherwise ``inputs`` are read once first."""
    if not (cold and drop_caches()):
        warm(list(inputs))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, script, "--worker", json.dumps(spec)], stdout=out, stderr=err,
                             env=_env(cache_dir))
        # os.wait4 reaps this child and returns ITS rusage (RUSAGE_CHILDREN would be the max over all children);
        # its CPU time is used as is, its peak RSS only when the child could not report its own VmHWM
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode(errors="replace")
    cpu = ru.ru_utime + ru.ru_stime
    rss = ru.ru_maxrss * 1024  # Linux reports KiB
    if os.waitstatus_to_exitcode(status) != 0:
        return {"error": (stderr.strip().splitlines() or ["?"])[-1][:300], "wall": wall, "cpu": cpu, "rss": rss}
    res = json.loads(stdout.strip().splitlines()[-1])
    res.update(wall=wall, rss=res.pop("peak_rss") or rss, cpu=cpu, user=ru.ru_utime)
    return res


def run_cli(args: list[str], cache_dir: Path) -> float:
    """Wall time of one ``dspark-convert`` command (stdout discarded)."""
    cmd = [sys.executable, "-c", "import sys; from dspark_convert.cli import main; sys.argv[0] = 'dspark-convert'; "
           "main()", *args]
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(cache_dir), check=False)
    return time.perf_counter() - t0


def _median_ratio(runs: list[dict], bases: list[dict]) -> float | None:
    """The median over runs of wall / wall of the copy run next to it."""
    pairs = [r["wall"] / c["wall"] for r, c in zip(runs, bases, strict=True) if "error" not in r and "error" not in c]
    return statistics.median(pairs) if pairs else None


def median_of(runs: list[dict]) -> dict:
    """The run with the median wall time, with the spread of all runs."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    ok.sort(key=lambda r: r["wall"])
    r = dict(ok[len(ok) // 2])
    r["runs"] = len(ok)
    r["spread"] = (ok[0]["wall"], ok[-1]["wall"])
    return r


def machine() -> dict:
    """nproc, CPU model, RAM, Python and library versions, for the report."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    mem = next((int(ln.split()[1]) * 1024 for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), 0)
    vers = subprocess.run([sys.executable, "-c", "import numpy, gguf, tokenizers; from importlib.metadata import "
                           "version; print(numpy.__version__, version('gguf'), tokenizers.__version__)"],
                          capture_output=True, text=True).stdout.split()
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gib": round(mem / 1024**3, 1), "python": sys.version.split()[0],
            "numpy": vers[0] if vers else "?", "gguf": vers[1] if len(vers) > 1 else "?",
            "tokenizers": vers[2] if len(vers) > 2 else "?", "load": os.getloadavg()[0]}


class Bench:
    """Runs the operations of one draft + tokenizer and collects the rows."""

    def __init__(self, root: Path, runs: int, cold_runs: int, can_drop: bool, log=print) -> None:
        self.root, self.runs, self.cold_runs, self.can_drop, self.log = root, runs, cold_runs, can_drop, log
        self.rows: list[dict] = []

    def emit(self, row: dict) -> None:
        self.rows.append(row)
        self.log(fmt_table([row]).split("\n", 2)[-1])

    def warm_op(self, spec: dict, inputs: list[Path], cache_dir: Path, runs: int | None = None) -> dict:
        warm(inputs)
        return median_of([run_op(spec, cache_dir) for _ in range(runs or self.runs)])

    def row(self, draft: str, tok: str, op: str, r: dict, base: dict | None = None, **extra) -> None:
        row = {"draft": draft, "tokenizer": tok, "op": op, **r, **extra}
        if "error" not in r and base and "error" not in base and base.get("wall"):
            row["x_copy"] = r["wall"] / base["wall"]
        if row.get("x_copy") is None:
            row.pop("x_copy", None)
        self.emit(row)


def bench_one(b: Bench, name: str, tok: str, outtypes: list[str], parts: set[str]) -> None:
    """Every operation for draft ``name`` with a target carrying tokenizer ``tok``."""
    from bench_inputs import MODELS, TOKENIZERS, input_folders, make_inputs, write_target_weights

    t0 = time.perf_counter()
    make_inputs(b.root, [name], tokenizer=tok)
    d, t = input_folders(b.root, name, tok)
    if "verify" in parts and name == "eagle3-4b":
        write_target_weights(t, MODELS[name])
    os.sync()
    b.log(f"# {name} with the {tok} tokenizer: inputs ready in {time.perf_counter() - t0:.1f} s")
    cache = b.root / f"cache-{name}-{tok}"  # the tokenizer-block cache of these runs
    shutil.rmtree(cache, ignore_errors=True)
    spec = {"op": "convert", "draft": str(d), "target": str(t)}
    if "tokenizer" in parts:
        tspec = {"op": "tokenizer", "target": str(t), "vocab": TOKENIZERS[tok].vocab}
        b.row(name, tok, "tokenizer block (computed)", b.warm_op(tspec, [t], cache))
        r = b.warm_op({**tspec, "whole": True}, [t], cache, runs=1)
        b.row(name, tok, "tokenizer block, whole-tokenizers path of before", r,
              note="identical bytes" if r.get("identical") else "DIFFERENT BYTES")
        run_op({**tspec, "cache": True}, cache)  # fills the cache
        b.row(name, tok, "tokenizer block (cached)", b.warm_op({**tspec, "cache": True}, [t], cache))
    if "dry" in parts:
        out = b.root / f"{name}-{tok}.dry.gguf"
        r = b.warm_op({**spec, "out": str(out), "outtype": "bf16", "dry_run": True}, [d, t], cache)
        b.row(name, tok, "dry run (tokenizer block computed)", r)
        run_op({**spec, "out": str(out), "outtype": "bf16", "dry_run": True, "cache": True}, cache)  # fills it
        r = b.warm_op({**spec, "out": str(out), "outtype": "bf16", "dry_run": True, "cache": True}, [d, t], cache)
        b.row(name, tok, "dry run (cached tokenizer block)", r)
    for ot in outtypes if "convert" in parts or "cold" in parts else []:
        out = b.root / f"{name}-{tok}.{ot}.gguf"
        s = {**spec, "out": str(out), "outtype": ot}
        first = run_op(s, cache)  # learns the output size and the source ranges (not counted)
        if "error" in first:
            b.row(name, tok, f"hf2gguf {ot}", first)
            continue
        run_op({**s, "cache": True}, cache)  # fills the tokenizer cache (not counted)
        size = first["bytes_out"]
        cp = {"op": "copy", "ranges": first["ranges"], "size": size, "out": str(b.root / "copy.out")}
        # interleaved: copy, conversion, conversion with the cached block, copy, ... so that a busy spell of a
        # shared machine hits all three; the ratios are the median of each run's own ratio
        warm([d, t])
        runs: dict[str, list[dict]] = {"copy": [], "warm": [], "cached": []}
        for _ in range(b.runs):
            for key, op in (("copy", cp), ("warm", s), ("cached", {**s, "cache": True})):
                runs[key].append(run_op(op, cache))
        label = f"({size / 1e9:.2f} GB, {ot})"
        b.row(name, tok, f"copy baseline, warm {label}", median_of(runs["copy"]))
        for key, what in (("warm", "warm"), ("cached", "warm, cached tokenizer")):
            b.row(name, tok, f"hf2gguf {ot}, {what}", median_of(runs[key]), x_copy=_median_ratio(runs[key], runs["copy"]))
        if "cold" in parts and b.can_drop:
            cold: dict[str, list[dict]] = {"copy": [], "cold": []}
            for _ in range(b.cold_runs):
                for key, op in (("copy", cp), ("cold", s)):
                    drop_caches()
                    cold[key].append(run_op(op, cache))
            b.row(name, tok, f"copy baseline, cold {label}", median_of(cold["copy"]))
            b.row(name, tok, f"hf2gguf {ot}, cold", median_of(cold["cold"]), x_copy=_median_ratio(cold["cold"], cold["copy"]))
        (b.root / "copy.out").unlink(missing_ok=True)
        if ot == "bf16" and "inspect" in parts:
            op = b.warm_op({"op": "inspect", "file": str(out)}, [out], cache, runs=max(b.runs, 5))
            table = sorted(run_cli(["inspect", str(out)], cache) for _ in range(max(b.runs, 5)))
            js = sorted(run_cli(["inspect", "--json", str(out)], cache) for _ in range(max(b.runs, 5)))
            gb = out.stat().st_size / 1e9
            b.row(name, tok, f"inspect, table ({gb:.1f} GB file)", {**op, "wall": statistics.median(table),
                                                                    "spread": (table[0], table[-1])})
            b.row(name, tok, f"inspect --json ({gb:.1f} GB file)", {**op, "wall": statistics.median(js),
                                                                    "spread": (js[0], js[-1])})
        if ot == "bf16" and "verify" in parts and name == "eagle3-4b":
            b.row(name, tok, "verify", b.warm_op({"op": "verify", "file": str(out), "draft": str(d),
                                                  "target": str(t)}, [out, d, t], cache, runs=1))
        if ot == "q8_0" and "gguf-whole" in parts:
            whole = b.root / f"{name}-{tok}.q8_0.whole.gguf"
            w = b.warm_op({**spec, "op": "gguf-whole", "out": str(whole), "outtype": "q8_0"}, [d, t], cache, runs=1)
            if "error" not in w:
                w["note"] = "identical bytes" if _same_file(out, whole) else "DIFFERENT BYTES"
                whole.unlink()
            b.row(name, tok, "gguf-whole q8_0", w, median_of(runs["copy"]))
        out.unlink(missing_ok=True)


def bench_startup(b: Bench) -> None:
    """Start-up: a bare interpreter, ``--help``, and the imports of the conversion stack."""
    cache = b.root / "cache-startup"
    n = max(b.runs, 5)
    for label, args in (("python -c pass (interpreter alone)", ["-c", "pass"]),
                        ("dspark-convert --help", ["-c", "import sys; from dspark_convert.cli import main; "
                                                   "sys.argv[1:] = ['--help']; main()"]),
                        ("import the conversion stack", ["-c", "import dspark_convert.hf2gguf.conversion, "
                                                         "dspark_convert.tokenizer.handlers"])):
        walls = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=_env(cache), check=False)
            walls.append(time.perf_counter() - t0)
        walls.sort()
        b.row("-", "-", f"start-up: {label}", {"wall": statistics.median(walls), "seconds": statistics.median(walls),
                                               "spread": (walls[0], walls[-1]), "cpu": 0, "rss": 0,
                                               "bytes_in": 0, "bytes_out": 0})


def _same_file(a: Path, b: Path) -> bool:
    import filecmp

    return filecmp.cmp(a, b, shallow=False)


def fmt_table(rows: list[dict]) -> str:
    """A Markdown table: median wall (and spread), operation time, throughput, peak RSS, ratio to the copy."""
    head = ("| draft | tokenizer | operation | wall s | spread s | op s | output MB | src MB/s | peak RSS MiB | x copy |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['draft']} | {r['tokenizer']} | {r['op']} | failed: {r['error']} ||||||||")
            continue
        w = r["wall"]
        spread = f"{r['spread'][0]:.2f}-{r['spread'][1]:.2f}" if r.get("spread") else ""
        out = f"{r['bytes_out'] / 1e6:.0f}" if r.get("bytes_out") else ""
        src = f"{r['bytes_in'] / 1e6 / w:.0f}" if r.get("bytes_in") else ""
        rss = f"{r['rss'] / MiB:.0f}" if r.get("rss") else ""
        if r.get("block_mib") is not None:
            rss += f" (+{r['block_mib']:.0f} block)"
        x = f"{r['x_copy']:.2f}" if "x_copy" in r else ""
        note = f" ({r['note']})" if r.get("note") else ""
        lines.append(f"| {r['draft']} | {r['tokenizer']} | {r['op']}{note} | {w:.2f} | {spread} | {r['seconds']:.2f} | "
                     f"{out} | {src} | {rss} | {x} |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> str:
    """The issue's targets, met or not, from the rows."""
    def pick(pred) -> list[dict]:
        return [r for r in rows if "error" not in r and pred(r["op"])]

    lines = ["| target | measured | met |", "|---|---|---|"]

    def ratio(ot: str, limit: float, cached: bool) -> None:
        suffix = ", warm, cached tokenizer" if cached else ", warm"
        rs = [r for r in pick(lambda op: op == f"hf2gguf {ot}{suffix}") if "x_copy" in r]
        if rs:
            worst = max(r["x_copy"] for r in rs)
            what = "cached tokenizer" if cached else "tokenizer computed"
            lines.append(f"| warm {ot} <= {limit}x copy ({what}) | {min(r['x_copy'] for r in rs):.2f}-{worst:.2f}x "
                         f"| {'yes' if worst <= limit else 'no'} |")

    for cached in (False, True):
        ratio("bf16", 1.5, cached)
        ratio("f16", 2.5, cached)
        ratio("f32", 2.5, cached)
    q8 = pick(lambda op: op.startswith("hf2gguf q8_0, warm"))
    if q8:
        rates = [r["bytes_in"] / 1e6 / r["wall"] for r in q8]
        lines.append(f"| q8_0 >= 200 MB/s of source | {min(rates):.0f}-{max(rates):.0f} MB/s | "
                     f"{'yes' if min(rates) >= 200 else 'no'} |")
    conv = pick(lambda op: op.startswith(("hf2gguf", "dry run")))
    if conv:
        peak = max(r["rss"] for r in conv) / MiB
        lines.append(f"| peak RSS < 200 MiB (every conversion) | {peak:.0f} MiB | {'yes' if peak < 200 else 'no'} |")
    for label, limit in (("inspect, table", 0.4), ("inspect --json", 0.8)):
        ins = pick(lambda op, lab=label: op.startswith(lab))
        if ins:
            worst = max(r["wall"] for r in ins)
            lines.append(f"| {label} < {limit} s | {worst:.2f} s | {'yes' if worst < limit else 'no'} |")
    blocks = [r for r in pick(lambda op: op == "tokenizer block (computed)") if r["tokenizer"] == "qwen3"]
    if blocks:
        t, m = max(r["seconds"] for r in blocks), max(r["block_mib"] for r in blocks)
        lines.append(f"| 151k-token tokenizer block < 0.4 s, < 64 MiB | {t:.2f} s, {m:.0f} MiB | "
                     f"{'yes' if t < 0.4 and m < 64 else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="dspark-4b,dspark-8b", help=f"drafts ({','.join(MODEL_NAMES)})")
    ap.add_argument("--tokenizers", default="qwen3,gemma3", help=f"target tokenizers ({','.join(TOKENIZERS)})")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--only", default=",".join(DEFAULT_PARTS), help=f"parts to run ({','.join(PARTS)})")
    ap.add_argument("--runs", type=int, default=3, help="runs per warm operation (the median is reported)")
    ap.add_argument("--cold-runs", type=int, default=1, help="runs per cold operation")
    ap.add_argument("--workdir", type=Path, help="use (and keep) this folder; inputs already there are reused")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
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
    toks = [s for s in a.tokenizers.split(",") if s]
    outtypes = [s for s in a.outtypes.split(",") if s]
    parts = {s for s in a.only.split(",") if s}
    bad = ([s for s in sizes if s not in MODEL_NAMES] + [t for t in toks if t not in TOKENIZERS]
           + [o for o in outtypes if o not in OUTTYPES] + [p for p in parts if p not in PARTS])
    if bad:
        ap.error(f"unknown size/tokenizer/outtype/part {bad[0]!r}")
    root = a.workdir or Path(tempfile.mkdtemp(prefix="dspark-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    can_drop = drop_caches()
    info = {**machine(), "page cache": "dropped before each cold operation (root)" if can_drop else
            "cannot be dropped (not root): cold operations skipped", "runs": a.runs, "cold_runs": a.cold_runs}
    print(json.dumps(info))
    b = Bench(root, a.runs, a.cold_runs, can_drop)
    t0 = time.perf_counter()
    try:
        if "startup" in parts:
            bench_startup(b)
        for name in sizes:
            for tok in toks:
                bench_one(b, name, tok, outtypes, parts)
    finally:
        if not (a.keep or a.workdir):
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{fmt_table(b.rows)}\n\n{targets(b.rows)}\n\ntotal {time.perf_counter() - t0:.0f} s; "
          f"page cache: {info['page cache']}; load average at start {info['load']:.2f}")
    if a.json:
        a.json.write_text(json.dumps({"machine": info, "rows": b.rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
