#!/usr/bin/env python3
"""Benchmark the issue-22 draft formats at published size (synthetic values): DFlash2 and MiMo-style DFlash.

For each family: write a synthetic checkpoint of the published dimensions (values: one random BF16 block tiled,
so writing is cheap), convert it with ``dspark-convert hf2gguf`` in a child process, and copy the checkpoint's
safetensors in another child (the baseline, same run: every byte read with ``preadv`` into user space and written,
then fsynced, as bench_convert.py's I/O floor). Prints wall time, the ratio
to the copy, the CPU seconds of both (steadier than wall time on a shared machine) and the converter's peak RSS
(the child's ``ru_maxrss``). The inputs are synced to disk before the first copy; ``--repeat N`` interleaves N
copy / convert pairs and prints the medians.

Published sizes (spec/upstream-b11434.md §3): DFlash2 ``z-lab/Qwen3.8-27B-DFlash2``: hidden 5120, 5 layers,
vocab 248,320, conv kernel 2 / group 16, selector rank 256 / top-k 16 (heads 40 x 128, 8 KV heads, FFN 17,408
assumed: Qwen3-27B-class). MiMo: dims not published in the spec; ``--mimo`` runs hidden 4096 (MiMo-V2.5, the
MiMo-V2-Flash backbone; ``--mimo-hidden 6144`` for MiMo-V2.5-Pro, per the public model cards), vocab 152,064, 2 layers,
FFN 3 x hidden (stated in the output). ``--scale S`` divides hidden / FFN / heads (and the vocabulary, down to the 129,280 tokens of the DeepSeek-V4
tokenizer of the sample target) by S for a quick run.

usage: python benchmarks/bench_new_drafts.py TARGET_DIR [--scale 1] [--outtype bf16] [--workdir DIR] [--mimo]
       [--mimo-hidden 4096] [--skip-dflash2] [--repeat 1]
  TARGET_DIR: a target folder with a tokenizer (e.g. make_inputs_b11434.py's qwen3/target)
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

BLOCK = np.random.default_rng(0).standard_normal(1 << 20, dtype=np.float32) * 0.02
BLOCK_BF16 = (BLOCK.view(np.uint32) >> 16).astype(np.uint16).tobytes()


def write_safetensors(path: Path, shapes: dict[str, tuple[int, ...]]) -> int:
    header, off = {}, 0
    for name in sorted(shapes):
        n = int(np.prod(shapes[name])) * 2
        header[name] = {"dtype": "BF16", "shape": list(shapes[name]), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        left = off
        while left:
            chunk = BLOCK_BF16[: min(left, len(BLOCK_BF16))]
            f.write(chunk)
            left -= len(chunk)
    return off


def layer_shapes(p: str, H: int, nh: int, nkv: int, hd: int, ff: int) -> dict[str, tuple[int, ...]]:
    return {p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (nh * hd, H), p + "self_attn.k_proj.weight": (nkv * hd, H),
            p + "self_attn.v_proj.weight": (nkv * hd, H), p + "self_attn.o_proj.weight": (H, nh * hd),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (ff, H), p + "mlp.up_proj.weight": (ff, H), p + "mlp.down_proj.weight": (H, ff)}


def config(arch: str, H: int, nh: int, nkv: int, hd: int, ff: int, L: int, V: int, dc: dict) -> dict:
    return {"architectures": [arch], "model_type": "qwen3", "hidden_size": H, "intermediate_size": ff,
            "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd, "num_hidden_layers": L,
            "rms_norm_eps": 1e-6, "vocab_size": V, "max_position_embeddings": 32768, "rope_theta": 1e7,
            "tie_word_embeddings": False, "layer_types": ["full_attention"] * L, "is_causal": False,
            "dflash_config": dc}


def make_dflash2(d: Path, s: int) -> str:
    H, nh, nkv, hd, ff, L, V, K, G, R = 5120 // s, 40 // s or 1, 8 // s or 1, 128, 17408 // s, 5, max(248320 // s, 129280), 2, 16, 256
    taps = [1, 15, 29, 43, 57][:L]
    shapes = {"fc.weight": (H, len(taps) * H), "hidden_norm.weight": (H,), "norm.weight": (H,),
              "candidate_selector.predecessor_codebook": (V, R), "candidate_selector.successor_codebook": (V, R),
              "candidate_selector.hidden_projection.weight": (R, H)}
    for i in range(L):
        shapes.update(layer_shapes(f"layers.{i}.", H, nh, nkv, hd, ff))
        for m in ("attention_conv", "mlp_conv"):
            shapes[f"layers.{i}.{m}.base_kernel"] = (2, K, H)
            shapes[f"layers.{i}.{m}.kernel_projection.weight"] = (2 * K * H // G, H)
    d.mkdir(parents=True, exist_ok=True)
    cfg = config("DFlash2DraftModel", H, nh, nkv, hd, ff, L, V, {
        "block_size": 8, "conv_kernel_size": K, "conv_group_size": G, "selector_rank": R, "selector_top_k": 16,
        "mask_token_id": V - 10, "target_layer_ids": taps})
    (d / "config.json").write_text(json.dumps(cfg))
    n = write_safetensors(d / "model.safetensors", shapes)
    return f"DFlash2 hidden {H}, {L} layers, vocab {V}, rank {R}: {n / 2**30:.2f} GiB"


def make_mimo(d: Path, target: Path, s: int, hidden: int = 4096) -> str:
    """Draft + its own target folder (embedding and lm_head of the stated size, the given target's tokenizer)."""
    import torch

    H, nh, nkv, hd, ff, L, V = (hidden // s, hidden // 128 // s or 1, 8 // s or 1, 128, 3 * hidden // s, 2,
                                max(152064 // s, 129280))
    taps = [1, 10, 20]
    shapes = {"fc.weight": (H, len(taps) * H), "hidden_norm.weight": (H,), "norm.weight": (H,)}
    for i in range(L):
        shapes.update(layer_shapes(f"layers.{i}.", H, nh, nkv, hd, ff))
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config("DFlashDraftModel", H, nh, nkv, hd, ff, L, V, {
        "mask_token_id": V - 10, "target_layer_ids": taps})))
    n = write_safetensors(d / "model.safetensors", shapes)
    torch.save({"mask_token_id": V - 10, "embedding": torch.ones(H)}, d / "mask_embedding.pt")
    t = d.parent / "mimo-target"
    t.mkdir(exist_ok=True)
    for f in target.iterdir():
        if f.name.startswith("tokenizer"):
            shutil.copy(f, t / f.name)
    (t / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                               "hidden_size": H, "num_hidden_layers": 24, "vocab_size": V,
                                               "num_attention_heads": nh, "tie_word_embeddings": False}))
    n += write_safetensors(t / "model.safetensors", {"model.embed_tokens.weight": (V, H), "lm_head.weight": (V, H)})
    return f"MiMo DFlash hidden {H}, {L} layers, vocab {V} (target embedding + head patched in): {n / 2**30:.2f} GiB"


WRAP = ("import resource,subprocess,sys\nsubprocess.run(sys.argv[1:],check=True,capture_output=True)\n"
        "r=resource.getrusage(resource.RUSAGE_CHILDREN)\nprint(r.ru_maxrss,r.ru_utime+r.ru_stime)")


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """Wall time, peak RSS (MiB) and CPU seconds (user + system) of ``cmd``, measured in a fresh wrapper process
    (its only child). CPU time is the steadier figure on a shared machine: it does not count waiting."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAP, *cmd], check=True, capture_output=True, text=True)
    rss, cpu = p.stdout.split()
    return time.perf_counter() - t0, int(rss) / 1024, float(cpu)


#: the copy baseline, as benchmarks/bench_convert.py's I/O floor: read every byte in 16 MiB ``preadv`` calls and
#: write it (user space, like the converter; not ``copy_file_range``, which never brings the bytes to user space),
#: then fsync
COPY = ("import os,sys\nb=bytearray(16<<20);v=memoryview(b)\nfor s,d in zip(sys.argv[1::2],sys.argv[2::2]):\n"
        " i=os.open(s,os.O_RDONLY);o=os.open(d,os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o644);p=0\n"
        " while n:=os.preadv(i,[v],p):\n  os.write(o,v[:n]);p+=n\n"
        " os.fsync(o);os.close(o);os.close(i)")


def run(label: str, draft: Path, target: Path, out: Path, outtype: str, copies: list[Path], repeat: int = 1) -> None:
    """Copy, then convert, ``repeat`` times interleaved; prints each run and the median of the per-run ratios."""
    os.sync()  # the synthetic inputs reach the disk first: else the first copy pays for writing them back
    ratios, cpu_ratios, rss = [], [], 0.0
    print(label)
    for _ in range(repeat):
        copy_s, _, copy_cpu = timed([sys.executable, "-c", COPY] + [
            str(x) for p in copies for x in (p, out.with_suffix(f".{p.parent.name}.copy"))])
        for p in out.parent.glob("*.copy"):
            p.unlink()
        os.sync()
        conv_s, peak, conv_cpu = timed([shutil.which("dspark-convert") or "dspark-convert", "hf2gguf", str(draft),
                                        "--target-model-dir", str(target), "--outtype", outtype, "-o", str(out),
                                        "--ignore-target-mismatch", "--no-cache"])
        ratios.append(conv_s / copy_s)
        cpu_ratios.append(conv_cpu / copy_cpu)
        rss = max(rss, peak)
        print(f"  convert {outtype}: {conv_s:.1f} s ({conv_cpu:.1f} s CPU), copy baseline {copy_s:.1f} s "
              f"({copy_cpu:.1f} s CPU), ratio {conv_s / copy_s:.2f} (CPU {conv_cpu / copy_cpu:.2f}), converter peak "
              f"RSS {peak:.0f} MiB, output {out.stat().st_size / 2**30:.2f} GiB")
        out.unlink()
        os.sync()
    if repeat > 1:
        print(f"  median of {repeat} runs: ratio {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), "
              f"CPU ratio {statistics.median(cpu_ratios):.2f}, peak RSS {rss:.0f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", type=Path)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--outtype", default="bf16")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--mimo", action="store_true")
    ap.add_argument("--mimo-hidden", type=int, default=4096, help="MiMo hidden size (6144: MiMo-V2.5-Pro)")
    ap.add_argument("--skip-dflash2", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved copy / convert runs (median ratio printed)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    try:
        if not a.skip_dflash2:
            d = work / "dflash2"
            label = make_dflash2(d, a.scale)
            run(label, d, a.target, work / "d2.gguf", a.outtype, [d / "model.safetensors"], a.repeat)
            shutil.rmtree(d)
        if a.mimo:
            d = work / "mimo"
            label = make_mimo(d, a.target, a.scale, a.mimo_hidden)
            run(label, d, work / "mimo-target", work / "m.gguf", a.outtype,
                [d / "model.safetensors", work / "mimo-target" / "model.safetensors"], a.repeat)
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
