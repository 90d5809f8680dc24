"""Extracting the MTP sidecar of a multi-GB target GGUF, against copying the sidecar's bytes, in one run.

The input is written on the fly into a temporary folder: a qwen35 target in Q8_0 with ``--gib`` GiB of real (non-
sparse) tensor data: a 151,936-token embedding and head, ``--layers`` trunk blocks and one MTP block, the layout of
a Qwen3.5 checkpoint at that size. Each measurement runs in a fresh subprocess (its peak RSS is its own
``ru_maxrss``), ``--runs`` times, interleaved, and the median is reported:

* ``extract``: ``dspark_convert.mtp.run.extract`` of the file (header parse, plan, kernel copy of the sidecar's
  tensors, fsync, rename);
* ``copy``: the baseline, ``shutil.copyfile`` of a file exactly as large as the sidecar (the same bytes to move,
  with the same kernel copy; no fsync, so the ratio is if anything pessimistic for extract), and ``copy+fsync``,
  the same followed by an fsync (extract fsyncs its file before the rename);
* ``remote``: the same extraction over HTTP from the test suite's loopback server (tests/http_server.py),
  with the bytes fetched as a fraction of the remote file.

The page cache is warm for both local measurements (the file was just written); each run's destination is
removed (and synced) before its clock starts. Run:
``python benchmarks/bench_mtp_gguf.py [--gib 2] [--runs 5] [--no-remote]``. Peak memory is each child's ``VmHWM``
(``/proc/self/status``), which a fresh ``exec`` resets.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
V, H = 151936, 2048

_CHILD = r"""
import json, os, resource, sys, time, shutil
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
what, src, dst = sys.argv[2], sys.argv[3], sys.argv[4]
out = {}
t_imp = time.perf_counter()
if what in ("extract", "remote"):
    from dspark_convert.mtp.run import extract
    from dspark_convert.gguffile.options import RemoteOptions
    import gguf  # the size label's rule (imported on first use otherwise)
out["import_seconds"] = time.perf_counter() - t_imp
if os.path.exists(dst):  # freeing the previous run's output is not part of either operation
    os.unlink(dst)
    os.sync()
t0 = time.perf_counter()
if what == "extract":
    r = extract(src, dst, force=True)
    out["bytes"] = r.size
elif what in ("copy", "copy+fsync"):
    shutil.copyfile(src, dst)
    if what == "copy+fsync":
        fd = os.open(dst, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
elif what == "remote":
    from http_server import FileServer, Route
    from pathlib import Path
    with FileServer() as s:
        s.routes["/t.gguf"] = Route(Path(src))
        t0 = time.perf_counter()
        r = extract(s.url + "/t.gguf", dst, force=True, remote=RemoteOptions(deadline=3600))
    out["fetched"] = r.fetch.bytes_fetched
    out["file_bytes"] = r.fetch.file_bytes
out["seconds"] = time.perf_counter() - t0
# VmHWM: this process's own peak (ru_maxrss would carry the parent's peak across fork + exec)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
out["peak_rss"] = int(hwm[0].split()[1]) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def make_target(path: Path, gib: float, layers: int) -> int:
    """A qwen35 Q8_0 target of about ``gib`` GiB: embedding, ``layers`` trunk blocks, 1 MTP block, norm, head.
    Returns the sidecar's tensor bytes."""
    from gguf import GGML_QUANT_SIZES, GGUFWriter
    from gguf import GGMLQuantizationType as QT

    block, size = GGML_QUANT_SIZES[QT.Q8_0]
    emb = V * H // block * size
    per_block = (gib * (1 << 30) - 2 * emb) / (layers + 1)
    ff = max(256, int(per_block / (3 * H * size / block)) // 256 * 256)
    w = GGUFWriter(path, "qwen35")
    w.add_uint32("qwen35.block_count", layers + 1)
    w.add_uint32("qwen35.nextn_predict_layers", 1)
    w.add_uint32("qwen35.embedding_length", H)
    w.add_array("qwen35.attention.recurrent_layers", [i % 4 != 3 for i in range(layers)] + [False])
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(V)])
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, 1 << 24, dtype=np.uint8)

    def q8(rows: int, cols: int) -> np.ndarray:
        n = rows * (cols // block * size)
        return np.resize(pool, n).reshape(rows, cols // block * size)

    def add(name: str, rows: int, cols: int) -> None:
        w.add_tensor(name, q8(rows, cols), raw_dtype=QT.Q8_0)

    add("token_embd.weight", V, H)
    for b in range(layers + 1):
        w.add_tensor(f"blk.{b}.attn_norm.weight", np.ones(H, np.float32))
        add(f"blk.{b}.ffn_gate.weight", ff, H)
        add(f"blk.{b}.ffn_up.weight", ff, H)
        add(f"blk.{b}.ffn_down.weight", H, ff)
        if b == layers:
            add(f"blk.{b}.nextn.eh_proj.weight", H, 2 * H)
    w.add_tensor("output_norm.weight", np.ones(H, np.float32))
    add("output.weight", V, H)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from dspark_convert.mtp.cut import open_inputs, plan_extract

    files = open_inputs(path)
    try:
        return plan_extract(files).data_bytes
    finally:
        for f in files:
            f.close()


def child(what: str, src: Path, dst: Path) -> dict[str, float]:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), what, str(src), str(dst)], capture_output=True,
                       text=True, check=True)
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0, help="size of the generated target")
    ap.add_argument("--layers", type=int, default=8, help="trunk blocks")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-remote", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None, help="where to write the target (default: a temp folder)")
    ap.add_argument("--make", type=Path, default=None, help=argparse.SUPPRESS)  # the generator's own process
    args = ap.parse_args(argv)
    if args.make is not None:
        sys.path.insert(0, str(ROOT))
        print(make_target(args.make, args.gib, args.layers))
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-mtp-", dir=args.workdir))
    try:
        src = work / "target.gguf"
        t0 = time.perf_counter()
        gen = subprocess.run([sys.executable, __file__, "--make", str(src), "--gib", str(args.gib), "--layers",
                              str(args.layers)], capture_output=True, text=True, check=True)
        side_bytes = int(gen.stdout.strip().splitlines()[-1])
        total = src.stat().st_size
        print(f"target {total / (1 << 30):.2f} GiB written in {time.perf_counter() - t0:.1f} s; sidecar tensors "
              f"{side_bytes / (1 << 20):.0f} MiB ({side_bytes / total:.1%} of the file)")
        same = work / "same-size.bin"
        with open(same, "wb") as fh:  # the baseline's input: the sidecar's byte count of real data
            fh.truncate(0)
            chunk = np.random.default_rng(1).integers(0, 256, 1 << 24, dtype=np.uint8).tobytes()
            left = side_bytes
            while left:
                left -= fh.write(chunk[: min(len(chunk), left)])
        rows: dict[str, list[dict[str, float]]] = {"extract": [], "copy": [], "copy+fsync": []}
        if not args.no_remote:
            rows["remote"] = []
        for _ in range(args.runs):
            rows["extract"].append(child("extract", src, work / "mtp.gguf"))
            rows["copy"].append(child("copy", same, work / "copy.bin"))
            rows["copy+fsync"].append(child("copy+fsync", same, work / "copy.bin"))
            if "remote" in rows:
                rows["remote"].append(child("remote", src, work / "mtp-remote.gguf"))
        med = {k: statistics.median(r["seconds"] for r in v) for k, v in rows.items()}
        rss = {k: max(r["peak_rss"] for r in v) for k, v in rows.items()}
        for k in rows:
            print(f"{k:8s} median {med[k]:.3f} s over {args.runs} runs; peak RSS {rss[k] / (1 << 20):.0f} MiB")
        print(f"extract / copy of the sidecar's bytes: {med['extract'] / med['copy']:.2f}x (goal <= 1.2x), "
              f"{med['extract'] / med['copy+fsync']:.2f}x against copy + fsync (extract fsyncs before its rename); "
              f"peak RSS {rss['extract'] / (1 << 20):.0f} MiB (goal < 128 MiB); imports "
              f"{statistics.median(r['import_seconds'] for r in rows['extract']):.2f} s (not in the times)")
        if "remote" in rows:
            r = rows["remote"][0]
            print(f"remote: fetched {r['fetched'] / (1 << 20):.1f} MiB of {r['file_bytes'] / (1 << 20):.0f} MiB "
                  f"({r['fetched'] / r['file_bytes']:.1%}); {med['remote'] / med['copy']:.2f}x the local copy "
                  "(loopback)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
