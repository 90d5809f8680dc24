#!/usr/bin/env python3
"""Benchmark ``hf2gguf TARGET --mtp`` on a sharded multi-GB Qwen3.5 checkpoint generated in a temp folder.

The checkpoint: hidden 4096, 16 heads x 256 (4 KV heads), FFN 12288, V = 129,280 (the DeepSeek tokenizer of the
test extra), 1 MTP layer, and a trunk of --layers layers. The shards holding the head (embedding, final norm + head,
``mtp.*``) are written in full; the trunk shards are sparse placeholders of their real size (a valid safetensors
header + a hole), which costs no disk: the converter must never open them. Values are a repeated pattern (the
converter's cost does not depend on them).

Each operation runs in its own subprocess (peak RSS: the child's ``ru_maxrss`` from ``os.wait4``). Baseline in the
same run: ``copy`` copies the shards the conversion reads into one file (the I/O floor for reading those bytes and
writing as many). Reported: the shards read and their bytes (from the conversion's own summary), the median time of
--runs runs, the ratio to the copy, peak RSS.

usage: python benchmarks/bench_mtp.py [--layers 32] [--runs 3] [--outtype bf16] [--workdir DIR] [--keep]
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MiB = 1024 * 1024
H, NH, NKV, HD, FF, V = 4096, 16, 4, 256, 12288, 129280


def _header(tensors: list[tuple[str, list[int]]]) -> tuple[bytes, int]:
    hdr: dict[str, object] = {}
    off = 0
    for name, shape in sorted(tensors):
        n = 2
        for d in shape:
            n *= d
        hdr[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return len(h).to_bytes(8, "little") + h, off


def write_shard(path: Path, tensors: list[tuple[str, list[int]]], *, sparse: bool) -> int:
    head, size = _header(tensors)
    with open(path, "wb") as f:
        f.write(head)
        if sparse:
            f.truncate(len(head) + size)
        else:
            block = (bytes([0x80, 0x3F, 0x00, 0xBF]) * (MiB // 4))  # 1.0, -0.5 in BF16, repeated
            left = size
            while left > 0:
                k = min(left, len(block))
                f.write(block[:k])
                left -= k
    return len(head) + size


def make_checkpoint(out: Path, layers: int) -> dict[str, int]:
    sys.path.insert(0, str(ROOT / "tests"))
    from mtp_checkpoints import tokenizer_dir

    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir() / name, out / name)

    def attn(p: str) -> list[tuple[str, list[int]]]:
        return [(p + "self_attn.q_proj.weight", [2 * NH * HD, H]), (p + "self_attn.k_proj.weight", [NKV * HD, H]),
                (p + "self_attn.v_proj.weight", [NKV * HD, H]), (p + "self_attn.o_proj.weight", [H, NH * HD]),
                (p + "self_attn.q_norm.weight", [HD]), (p + "self_attn.k_norm.weight", [HD])]

    def block(p: str) -> list[tuple[str, list[int]]]:
        return [(p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H]), *attn(p),
                (p + "mlp.gate_proj.weight", [FF, H]), (p + "mlp.up_proj.weight", [FF, H]),
                (p + "mlp.down_proj.weight", [H, FF])]

    shards: list[tuple[list[tuple[str, list[int]]], bool]] = [([("model.embed_tokens.weight", [V, H])], False)]
    per = 4
    for s in range(0, layers, per):
        shards.append(([t for i in range(s, min(layers, s + per)) for t in block(f"model.layers.{i}.")], True))
    shards.append(([("model.norm.weight", [H]), ("lm_head.weight", [V, H])], False))
    shards.append(([("mtp.fc.weight", [H, 2 * H]), ("mtp.pre_fc_norm_embedding.weight", [H]),
                    ("mtp.pre_fc_norm_hidden.weight", [H]), ("mtp.norm.weight", [H]), *block("mtp.layers.0.")], False))
    weight_map, sizes, total = {}, {"full": 0, "sparse": 0}, 0
    for i, (tensors, sparse) in enumerate(shards, 1):
        fn = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        n = write_shard(out / fn, tensors, sparse=sparse)
        sizes["sparse" if sparse else "full"] += n
        for name, _ in tensors:
            weight_map[name] = fn
        total += n
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                  "weight_map": weight_map}))
    cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": H,
           "intermediate_size": FF, "num_hidden_layers": layers, "num_attention_heads": NH, "num_key_value_heads": NKV,
           "head_dim": HD, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "vocab_size": V,
           "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
           "linear_num_key_heads": 16, "linear_num_value_heads": 32, "full_attention_interval": 4,
           "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)],
           "rope_parameters": {"rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "rope_type": "default",
                               "mrope_section": [11, 11, 10], "mrope_interleaved": True},
           "mtp_num_hidden_layers": 1, "tie_word_embeddings": False}
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    return {"shards": len(shards), "total": total, **sizes}


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and stdout of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    out = p.stdout.read() if p.stdout else ""
    err = p.stderr.read() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed: {err[-2000:]}")
    return dt, ru.ru_maxrss * 1024, out


CONVERT = """
import json, sys
from dspark_convert import convert
r = convert(sys.argv[1], None, sys.argv[2], outtype=sys.argv[3], force=True, mtp=True)
print(json.dumps({"notes": r.notes, "bytes": r.bytes_written}))
"""
COPY = """
import os, shutil, sys
with open(sys.argv[1], "wb") as out:
    for src in sys.argv[2:]:
        with open(src, "rb") as f:
            shutil.copyfileobj(f, out, 8 << 20)
    out.flush(); os.fsync(out.fileno())
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--outtype", default="bf16")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-mtp-"))
    ck = work / "Qwen3.5-Bench"
    try:
        info = make_checkpoint(ck, a.layers)
        print(f"checkpoint: {info['shards']} shards, {info['total'] / 1e9:.2f} GB declared "
              f"({info['full'] / 1e9:.2f} GB written: embedding, head, MTP; {info['sparse'] / 1e9:.2f} GB trunk as holes)")
        py = sys.executable
        out = work / "mtp.gguf"
        conv, rss, notes = [], [], {}
        for _ in range(a.runs):
            dt, peak, text = timed([py, "-c", CONVERT, str(ck), str(out), a.outtype])
            conv.append(dt)
            rss.append(peak)
            notes = json.loads(text.strip().splitlines()[-1])
        read = next(n for n in notes["notes"] if n.startswith("read "))
        weight_map = json.loads((ck / "model.safetensors.index.json").read_text())["weight_map"]
        opened = sorted({weight_map[n] for n in weight_map if n.startswith(("mtp.", "lm_head", "model.norm",
                                                                             "model.embed_tokens"))})
        read_bytes = sum((ck / s).stat().st_size for s in opened)
        out.unlink()
        copy = []
        for _ in range(a.runs):
            dt, _, _ = timed([py, "-c", COPY, str(work / "copy.bin"), *(str(ck / s) for s in opened)])
            copy.append(dt)
            (work / "copy.bin").unlink()
        mc, mk = statistics.median(conv), statistics.median(copy)
        print(f"conversion summary: {read}")
        print(f"bytes read: {read_bytes / 1e9:.3f} GB of {info['total'] / 1e9:.2f} GB "
              f"({100 * read_bytes / info['total']:.1f}%); written {notes['bytes'] / 1e9:.3f} GB ({a.outtype})")
        print(f"hf2gguf --mtp: median {mc:.2f} s over {a.runs} runs {[round(x, 2) for x in conv]}")
        print(f"copy of the same shards: median {mk:.2f} s {[round(x, 2) for x in copy]}")
        print(f"ratio to copy: {mc / mk:.2f}x; peak RSS {max(rss) / MiB:.0f} MiB (median {statistics.median(rss) / MiB:.0f})")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
