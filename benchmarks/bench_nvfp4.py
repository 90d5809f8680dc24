#!/usr/bin/env python3
"""Benchmark converting a ModelOpt NVFP4 W4A16 DSpark draft of the published size (issue 22, Nemotron-3.5 DSpark).

``nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4-DSpark`` (spec/upstream-b11434.md §2.4, §3): Qwen3DSparkModel,
6 layers, one ~1.35 GB model.safetensors, NVFP4 W4A16, own embeddings, per-head sinks. Dimensions used here
(synthetic values; the ones the spec does not give are assumed and stated): hidden 2688 (Nemotron-3 Nano 30B-A3B's),
32 heads x 128, 2 KV heads, FFN 16,384 (assumed, to reach the published size), Markov rank 256, 5 target taps,
vocabulary 129,280 (the DeepSeek-V4 tokenizer of the sample target stands in for Nemotron's 131,072). Every linear is
NVFP4 (U8 codes + E4M3 block scales + scalar scales), embed_tokens and markov_w1 BF16, written from one tiled random
block (the converter's cost does not depend on the values).

Each conversion (``dspark-convert hf2gguf --match-upstream``: the file upstream b11434 writes; no target weights
needed) runs in its own child, once with ``--no-cache`` (the target's 129k-token tokenizer block computed, as in a
first conversion) and once with that block taken from the per-target cache; the baseline in the same run copies
the checkpoint's safetensors (copyfile + fsync).
Printed: wall time, ratio to the copy, the converter's peak RSS (``ru_maxrss`` of the child), for 6 layers and
for 3 layers (peak RSS must not grow with the layer count: tensors stream in row chunks).

usage: python benchmarks/bench_nvfp4.py TARGET_DIR [--layers 3,6] [--outtype bf16] [--workdir DIR]
  TARGET_DIR: a target folder with config.json and a tokenizer (e.g. make_inputs_b11434.py's qwen3/target)
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

import numpy as np

H, NH, NKV, HD, FF, R, V, TAPS = 2688, 32, 2, 128, 16384, 256, 129280, [1, 12, 23, 34, 45]
_rng = np.random.default_rng(0)
BLOCK = {"U8": _rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes(),
         "F8_E4M3": _rng.integers(0x28, 0x48, 1 << 20, dtype=np.uint8).tobytes(),   # positive block scales
         "BF16": ((_rng.standard_normal(1 << 19, dtype=np.float32) * 0.02).view(np.uint32) >> 16).astype(np.uint16).tobytes(),
         "F32": (_rng.uniform(0.001, 0.01, 1 << 18)).astype(np.float32).tobytes()}
SIZE = {"U8": 1, "F8_E4M3": 1, "BF16": 2, "F32": 4}


def tensors(layers: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    t: dict[str, tuple[str, tuple[int, ...]]] = {
        "embed_tokens.weight": ("BF16", (V, H)), "markov_head.markov_w1.weight": ("BF16", (V, R)),
        "confidence_head.proj.weight": ("BF16", (1, H + R)), "confidence_head.proj.bias": ("BF16", (1,)),
        "hidden_norm.weight": ("BF16", (H,)), "norm.weight": ("BF16", (H,))}
    lin = {"fc": (H, len(TAPS) * H), "markov_head.markov_w2": (V, R)}
    for i in range(layers):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": ("BF16", (H,)), p + "post_attention_layernorm.weight": ("BF16", (H,)),
                  p + "self_attn.q_norm.weight": ("BF16", (HD,)), p + "self_attn.k_norm.weight": ("BF16", (HD,)),
                  p + "self_attn.sinks": ("F32", (NH,))})
        lin.update({p + "self_attn.q_proj": (NH * HD, H), p + "self_attn.k_proj": (NKV * HD, H),
                    p + "self_attn.v_proj": (NKV * HD, H), p + "self_attn.o_proj": (H, NH * HD),
                    p + "mlp.gate_proj": (FF, H), p + "mlp.up_proj": (FF, H), p + "mlp.down_proj": (H, FF)})
    for k, (o, n) in lin.items():
        t.update({k + ".weight": ("U8", (o, n // 2)), k + ".weight_scale": ("F8_E4M3", (o, n // 16)),
                  k + ".weight_scale_2": ("F32", ())})
    return t


def write_safetensors(path: Path, shapes: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    header, off = {}, 0
    for name in sorted(shapes):
        dtype, shape = shapes[name]
        n = int(np.prod(shape)) * SIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for name in sorted(shapes):
            dtype, shape = shapes[name]
            left = int(np.prod(shape)) * SIZE[dtype]
            while left:
                chunk = BLOCK[dtype][: min(left, len(BLOCK[dtype]))]
                f.write(chunk)
                left -= len(chunk)
    return off


def make_draft(d: Path, layers: int) -> int:
    d.mkdir(parents=True, exist_ok=True)
    q = {"quant_algo": "W4A16_NVFP4", "group_size": 16,
         "exclude_modules": ["lm_head", "embed_tokens", "markov_head.markov_w1", "confidence_head*"]}
    cfg = {"architectures": ["Qwen3DSparkModel"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": FF,
           "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD, "num_hidden_layers": layers,
           "rms_norm_eps": 1e-6, "vocab_size": V, "max_position_embeddings": 32768, "rope_theta": 1e7,
           "tie_word_embeddings": False, "layer_types": ["full_attention"] * layers, "block_size": 3,
           "target_layer_ids": [t - 1 for t in TAPS], "mask_token_id": V - 481, "markov_rank": R,
           "markov_head_type": "vanilla", "enable_confidence_head": True, "confidence_head_with_markov": True,
           "num_target_layers": 52, "quantization_config": {"quant_method": "modelopt", **q}}
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    (d / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt", "version": "0.37.0"},
                                                        "quantization": q}))
    return write_safetensors(d / "model.safetensors", tensors(layers))


WRAP = ("import resource,subprocess,sys\nsubprocess.run(sys.argv[1:],check=True,capture_output=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
COPY = ("import os,shutil,sys\nshutil.copyfile(sys.argv[1],sys.argv[2])\n"
        "fd=os.open(sys.argv[2],os.O_RDONLY); os.fsync(fd); os.close(fd)")


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall time and peak RSS (MiB) of ``cmd``, measured in a fresh wrapper process (its only child)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAP, *cmd], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, int(p.stdout.strip()) / 1024


def target_for(base: Path, work: Path) -> Path:
    """The target folder: ``base``'s tokenizer files and a config of the draft's dimensions (no weights)."""
    t = work / "target"
    t.mkdir(exist_ok=True)
    for f in base.iterdir():
        if f.name.startswith("tokenizer"):
            shutil.copy(f, t / f.name)
    cfg = json.loads((base / "config.json").read_text())
    cfg.update({"hidden_size": H, "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD,
                "num_hidden_layers": 52, "vocab_size": V})
    (t / "config.json").write_text(json.dumps(cfg))
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", type=Path)
    ap.add_argument("--layers", default="6,3")
    ap.add_argument("--outtype", default="bf16")
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    exe = shutil.which("dspark-convert") or "dspark-convert"
    try:
        target = target_for(a.target, work)
        print(f"NVFP4 W4A16 DSpark: hidden {H}, {NH}x{HD} heads, {NKV} KV heads, FFN {FF} (assumed), rank {R}, "
              f"vocab {V}, outtype {a.outtype}")
        for layers in [int(x) for x in a.layers.split(",")]:
            d = work / f"draft{layers}"
            n = make_draft(d, layers)
            out = work / "d.gguf"
            copy_s, _ = timed([sys.executable, "-c", COPY, str(d / "model.safetensors"), str(work / "copy.bin")])
            (work / "copy.bin").unlink()
            cmd = [exe, "hf2gguf", str(d), "--target-model-dir", str(target), "--outtype", a.outtype, "-o", str(out),
                   "--match-upstream", "--force"]
            cold_s, rss = timed([*cmd, "--no-cache"])          # the tokenizer block computed (a first conversion)
            timed(cmd)                                          # fills the per-target tokenizer cache
            conv_s, rss2 = timed(cmd)                           # the tokenizer block from the cache
            print(f"  {layers} layers: checkpoint {n / 1e9:.3f} GB, GGUF {out.stat().st_size / 1e9:.3f} GB; copy "
                  f"baseline {copy_s:.1f} s; convert {cold_s:.1f} s with the tokenizer computed (ratio "
                  f"{cold_s / copy_s:.2f}), {conv_s:.1f} s with it cached (ratio {conv_s / copy_s:.2f}); converter "
                  f"peak RSS {rss:.0f} / {rss2:.0f} MiB")
            out.unlink()
            shutil.rmtree(d)
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
