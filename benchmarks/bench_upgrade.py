"""Benchmark ``dspark-convert upgrade`` on a release-size (default 3 GiB) synthetic 749f688-era DSpark draft.

The input is a reduced-vocabulary DSpark GGUF without ``dflash.has_confidence_head`` (what 749f688 wrote), with
BF16 tensors shaped like a 4B-class draft, filled by tiling a random block (seconds to make). Each operation runs
in a fresh process, so its peak RSS (``ru_maxrss`` of the child) is its own:

* ``copy``: ``shutil.copyfile`` of the input + fsync (the baseline);
* ``upgrade``: ``dspark_convert.upgrade.upgrade`` (header rewritten, tensor data copied with copy_file_range).

Prints the median time of ``--runs`` runs of each, the ratio upgrade/copy, and the peak RSS of each. No timed
asserts. Usage::

    python benchmarks/bench_upgrade.py [--gib 3] [--runs 3] [--workdir /tmp/bench-upgrade]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_input(path: Path, gib: float) -> None:
    """A 749f688-era DSpark draft of about ``gib`` GiB: hidden 2560, ffn 9728, vocab 151936 (draft 32000)."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFValueType as VT

    from dspark_convert.gguffile.header import pad, write_header
    from dspark_convert.hf2gguf.writer import write_atomically
    from dspark_convert.plan import KV, TensorSpec

    h, ff, vd, nh, nkv, hd = 2560, 9728, 32000, 32, 8, 128
    per_layer = [("attn_norm.weight", (h,), QT.F32), ("ffn_down.weight", (h, ff), QT.BF16),
                 ("ffn_gate.weight", (ff, h), QT.BF16), ("ffn_up.weight", (ff, h), QT.BF16),
                 ("ffn_norm.weight", (h,), QT.F32), ("attn_k_norm.weight", (hd,), QT.F32),
                 ("attn_k.weight", (nkv * hd, h), QT.BF16), ("attn_output.weight", (h, nh * hd), QT.BF16),
                 ("attn_q_norm.weight", (hd,), QT.F32), ("attn_q.weight", (nh * hd, h), QT.BF16),
                 ("attn_v.weight", (nkv * hd, h), QT.BF16)]
    layer_bytes = sum(TensorSpec("x", s, t).nbytes for _, s, t in per_layer)
    globals_ = [TensorSpec("conf_proj.bias", (1,), QT.F32), TensorSpec("conf_proj.weight", (1, h + 64), QT.BF16),
                TensorSpec("fc.weight", (h, 3 * h), QT.BF16), TensorSpec("enc.output_norm.weight", (h,), QT.F32)]
    n_layers = max(1, int(gib * (1 << 30) // layer_bytes))
    tensors = list(globals_)
    for i in range(n_layers):
        tensors += [TensorSpec(f"blk.{i}.{n}", s, t) for n, s, t in per_layer]
    tensors += [TensorSpec("markov_w1.weight", (vd, 64), QT.BF16), TensorSpec("markov_w2.weight", (vd, 64), QT.BF16),
                TensorSpec("output_norm.weight", (h,), QT.F32), TensorSpec("d2t", (vd,), QT.I64)]
    kvs = [KV("general.type", VT.STRING, "model"), KV("general.name", VT.STRING, "Bench Dspark"),
           KV("dflash.block_count", VT.UINT32, n_layers), KV("dflash.embedding_length", VT.UINT32, h),
           KV("dflash.attention.key_length", VT.UINT32, hd), KV("general.file_type", VT.UINT32, 32),
           KV("dflash.block_size", VT.UINT32, 7), KV("dflash.target_layers", VT.ARRAY, [1, 9, 17], VT.INT32),
           KV("dflash.sample_from_anchor", VT.BOOL, True), KV("general.quantization_version", VT.UINT32, 2)]
    block = np.random.default_rng(0).integers(0, 1 << 16, size=1 << 20, dtype=np.uint16).tobytes()  # 2 MiB

    def body(f) -> None:  # type: ignore[no-untyped-def]
        write_header(f, "dflash", kvs, tensors)
        for t in tensors:
            left = t.nbytes
            while left:
                k = min(left, len(block))
                f.write(block[:k])
                left -= k
            f.write(b"\0" * pad(t.nbytes))

    write_atomically(path, body, force=True)


_COPY = ("import os, shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2]); fd = os.open(sys.argv[2], os.O_RDONLY); "
         "os.fsync(fd)")
_UPGRADE = ("import sys; from dspark_convert.upgrade import upgrade; "
            "upgrade(sys.argv[1], sys.argv[2], force=True)")


def run(code: str, src: Path, dst: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of ``code`` in a fresh process (its own rusage, from ``os.wait4``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), str(dst)], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark step failed (exit {proc.returncode}): {code}")
    dst.unlink()
    return dt, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "old.gguf"
    if not src.exists():
        make_input(src, a.gib)
    size = src.stat().st_size
    ups, copies = [], []
    for _ in range(a.runs):  # interleaved, so that background load affects both alike
        copies.append(run(_COPY, src, work / "copy.gguf"))
        ups.append(run(_UPGRADE, src, work / "new.gguf"))
    t_up = statistics.median(t for t, _ in ups)
    t_cp = statistics.median(t for t, _ in copies)
    print(f"input: {src} ({size / (1 << 30):.2f} GiB), {a.runs} runs each, median")
    print(f"copy    (shutil.copyfile + fsync): {t_cp:7.2f} s  {size / t_cp / (1 << 20):7.0f} MiB/s  "
          f"peak RSS {max(r for _, r in copies):6.1f} MiB")
    print(f"upgrade (header + copy_file_range): {t_up:7.2f} s  {size / t_up / (1 << 20):7.0f} MiB/s  "
          f"peak RSS {max(r for _, r in ups):6.1f} MiB")
    print(f"ratio upgrade / copy: {t_up / t_cp:.2f}x  (goal <= 1.2x; peak RSS goal < 100 MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
