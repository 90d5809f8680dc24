"""Benchmark ``dspark-convert upgrade`` on a release-size (default 3 GiB) synthetic 749f688-era DSpark draft.

The input is a reduced-vocabulary DSpark GGUF without ``dflash.has_confidence_head`` (what 749f688 wrote), with
BF16 tensors shaped like a 4B-class draft (filled by tiling a random block: seconds to make) and a Qwen-sized
tokenizer block (151,936 tokens, token types and 151,387 merges: the header a real draft carries). Each
operation runs in a fresh process, so its time includes start-up and its peak RSS (``ru_maxrss`` of the child) is
its own:

* ``cp``: ``cp --reflink=never`` + ``sync FILE`` (the baseline the ratio uses);
* ``shutil``: ``shutil.copyfile`` + fsync (a second baseline);
* ``upgrade``: ``dspark_convert.upgrade.upgrade`` (header spliced, tensor data copied with copy_file_range, fsync,
  rename, folder fsync).

One untimed warm-up run of each first (the input is then in the page cache for all: warm against warm), then
``--runs`` interleaved runs (the order rotated each round); prints the median time of each, the ratio upgrade / cp and upgrade / shutil, and the
peak RSS. No timed asserts. Usage::

    python benchmarks/bench_upgrade.py [--gib 3] [--runs 5] [--workdir /tmp/bench-upgrade]
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
    from dspark_convert.hf2gguf.atomic import write_atomically
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
    # Markov heads: w1 reads the previous token (target vocabulary), w2 writes draft-vocabulary logits (d2t's size)
    tensors += [TensorSpec("markov_w1.weight", (151936, 64), QT.BF16), TensorSpec("markov_w2.weight", (vd, 64), QT.BF16),
                TensorSpec("output_norm.weight", (h,), QT.F32), TensorSpec("d2t", (vd,), QT.I64)]
    kvs = [KV("general.type", VT.STRING, "model"), KV("general.name", VT.STRING, "Bench Dspark"),
           KV("dflash.block_count", VT.UINT32, n_layers), KV("dflash.embedding_length", VT.UINT32, h),
           KV("dflash.context_length", VT.UINT32, 40960), KV("dflash.feed_forward_length", VT.UINT32, ff),
           KV("dflash.attention.head_count", VT.UINT32, nh), KV("dflash.attention.head_count_kv", VT.UINT32, nkv),
           KV("dflash.attention.layer_norm_rms_epsilon", VT.FLOAT32, 1e-6),
           KV("dflash.attention.key_length", VT.UINT32, hd), KV("general.file_type", VT.UINT32, 32),
           KV("dflash.block_size", VT.UINT32, 7), KV("dflash.target_layers", VT.ARRAY, [1, 9, 17], VT.INT32),
           KV("dflash.sample_from_anchor", VT.BOOL, True), KV("general.quantization_version", VT.UINT32, 2),
           KV("tokenizer.ggml.model", VT.STRING, "gpt2"), KV("tokenizer.ggml.pre", VT.STRING, "qwen2"),
           KV("tokenizer.ggml.tokens", VT.ARRAY, [f"tok{i:06d}" for i in range(151936)], VT.STRING),
           KV("tokenizer.ggml.token_type", VT.ARRAY, [1] * 151936, VT.INT32),
           KV("tokenizer.ggml.merges", VT.ARRAY, [f"t{i} m{i}" for i in range(151387)], VT.STRING),
           KV("tokenizer.ggml.eos_token_id", VT.UINT32, 151645)]
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


_SHUTIL = ("import os, shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2]); fd = os.open(sys.argv[2], os.O_RDONLY); "
           "os.fsync(fd)")
_UPGRADE = ("import sys; from dspark_convert.upgrade import upgrade; "
            "upgrade(sys.argv[1], sys.argv[2], force=True)")


def run(argv: list[str], dst: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds user + system) of ``argv`` in a fresh process (its own rusage,
    from ``os.wait4``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark step failed (exit {proc.returncode}): {argv}")
    dst.unlink()
    return dt, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "old.gguf"
    if not src.exists():  # in a child process: the parent stays small, so its forks' peak RSS is their own
        code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_upgrade as b; " \
               f"b.make_input(__import__('pathlib').Path({str(src)!r}), {a.gib!r})"
        subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    size = src.stat().st_size
    cases = {
        "cp": ["sh", "-c", 'cp --reflink=never "$0" "$1" && sync "$1"', str(src), str(work / "cp.gguf")],
        "shutil": [sys.executable, "-c", _SHUTIL, str(src), str(work / "shutil.gguf")],
        "upgrade": [sys.executable, "-c", _UPGRADE, str(src), str(work / "new.gguf")],
    }
    dst = {name: Path(argv[-1]) for name, argv in cases.items()}
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    for name, argv in cases.items():  # warm-up (untimed): the input in the page cache for every case
        run(argv, dst[name])
    names = list(cases)
    for i in range(a.runs):  # interleaved, the order rotated each round: background load and position affect all alike
        for name in names[i % len(names):] + names[:i % len(names)]:
            results[name].append(run(cases[name], dst[name]))
    med = {name: statistics.median(t for t, _, _ in rs) for name, rs in results.items()}
    cpu = {name: statistics.median(c for _, _, c in rs) for name, rs in results.items()}
    print(f"input: {src} ({size / (1 << 30):.2f} GiB), warm page cache, {a.runs} interleaved runs each, median")
    for name, rs in results.items():
        spread = ", ".join(f"{t:.2f}" for t, _, _ in rs)
        print(f"{name:8s} {med[name]:7.2f} s  {size / med[name] / (1 << 20):7.0f} MiB/s  CPU {cpu[name]:5.2f} s  "
              f"peak RSS {max(r for _, r, _ in rs):6.1f} MiB  (runs: {spread})")
    print(f"ratio upgrade / cp: {med['upgrade'] / med['cp']:.2f}x, upgrade / shutil: "
          f"{med['upgrade'] / med['shutil']:.2f}x  (goal <= 1.2x; peak RSS goal < 100 MiB); CPU upgrade / cp: "
          f"{cpu['upgrade'] / cpu['cp']:.2f}x (the wall time of all three is mostly the disk's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
