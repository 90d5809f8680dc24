#!/usr/bin/env python3
"""Benchmark the numpy reference forward and a whole ``verify`` at the released Qwen3-8B DSpark draft's size.

Dimensions (checkpoints.md §2.2): H 4096, I 12288, 32/8/128 heads, 5 layers, V 151936, Markov rank 256, 5 taps,
block 7. Weights are random BF16. The script writes, in a temporary folder (about 5.4 GB, deleted afterwards):
a SpecForge-layout HF draft (no embed/lm_head, as in the full-vocab GGUF), the matching GGUF written with gguf's
writer (BF16, or Q8_0 with ``--outtype q8_0``), and a target folder holding only a tied
``model.embed_tokens.weight``. Each measurement then runs in a fresh subprocess so that its wall time, CPU time
and peak RSS (VmHWM) are its own; each is repeated (``--repeat``, default 3) and the median is reported. The
baseline, measured in the same run, reads every input byte once (16 MiB ``preadv``, page cache warm as for the
other stages): the least any verify must do.

usage:
    python benchmarks/bench_verify.py                 real dimensions (target: verify < 60 s and < 3 GiB)
    python benchmarks/bench_verify.py --outtype q8_0  the same with a Q8_0 GGUF (the torch side quantizes too)
    python benchmarks/bench_verify.py --tiny          a seconds-long smoke run of the same pipeline
    python benchmarks/bench_verify.py --workdir DIR --keep   keep the inputs (a later run with DIR reuses them)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REAL = {"H": 4096, "I": 12288, "NH": 32, "NKV": 8, "HD": 128, "L": 5, "V": 151936, "R": 256, "TAPS": 5, "B": 7}
TINY = {"H": 256, "I": 512, "NH": 4, "NKV": 2, "HD": 64, "L": 2, "V": 4096, "R": 32, "TAPS": 3, "B": 7}
MASK = 151669
TARGETS = {"numpy": (60.0, 2.0), "verify": (60.0, 3.0)}   # seconds, GiB (issue 11: verify < 60 s, < 3 GiB)
STAGES = ("read", "numpy", "verify")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (truncation is fine for random weights)."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def tensor_plan(d: dict[str, int]) -> list[tuple[str, str, tuple[int, ...], float]]:
    """(HF name, GGUF name, shape, std) of every draft tensor; std 0 marks an RMSNorm weight (ones-ish, F32)."""
    H, ff, q, kv = d["H"], d["I"], d["NH"] * d["HD"], d["NKV"] * d["HD"]
    plan = [("fc.weight", "fc.weight", (H, d["TAPS"] * H), (d["TAPS"] * H) ** -0.5),
            ("hidden_norm.weight", "enc.output_norm.weight", (H,), 0.0), ("norm.weight", "output_norm.weight", (H,), 0.0),
            ("markov_head.markov_w1.weight", "markov_w1.weight", (d["V"], d["R"]), 0.1),
            ("markov_head.markov_w2.weight", "markov_w2.weight", (d["V"], d["R"]), 0.1),
            ("confidence_head.proj.weight", "conf_proj.weight", (1, H + d["R"]), 0.05)]
    for i in range(d["L"]):
        p, b = f"layers.{i}.", f"blk.{i}."
        plan += [(p + "input_layernorm.weight", b + "attn_norm.weight", (H,), 0.0),
                 (p + "post_attention_layernorm.weight", b + "ffn_norm.weight", (H,), 0.0),
                 (p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", (d["HD"],), 0.0),
                 (p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", (d["HD"],), 0.0),
                 (p + "self_attn.q_proj.weight", b + "attn_q.weight", (q, H), H ** -0.5),
                 (p + "self_attn.k_proj.weight", b + "attn_k.weight", (kv, H), H ** -0.5),
                 (p + "self_attn.v_proj.weight", b + "attn_v.weight", (kv, H), H ** -0.5),
                 (p + "self_attn.o_proj.weight", b + "attn_output.weight", (H, q), q ** -0.5),
                 (p + "mlp.gate_proj.weight", b + "ffn_gate.weight", (ff, H), H ** -0.5),
                 (p + "mlp.up_proj.weight", b + "ffn_up.weight", (ff, H), H ** -0.5),
                 (p + "mlp.down_proj.weight", b + "ffn_down.weight", (H, ff), ff ** -0.5)]
    return plan


def safetensors_header(entries: list[tuple[str, str, tuple[int, ...]]]) -> bytes:
    """Header bytes (length prefix included) for tensors written back to back in ``entries`` order."""
    header, off = {}, 0
    for name, dtype, shape in entries:
        n = int(np.prod(shape)) * {"BF16": 2, "F32": 4}[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def make_inputs(work: Path, d: dict[str, int], outtype: str = "bf16") -> None:
    """Write target/, draft/ (HF) and draft.gguf under ``work``, streaming tensor by tensor (``outtype``: the GGUF
    type of the matrices, bf16 or q8_0; norms and biases are F32)."""
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFValueType as VT
    from gguf import GGUFWriter

    from dspark_convert.formats.transforms import quantize_q8_0

    rng = np.random.default_rng(0)
    H, V = d["H"], d["V"]
    target, draft = work / "target", work / "draft"
    target.mkdir(parents=True)
    draft.mkdir()
    (target / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "num_hidden_layers": 36,
        "vocab_size": V, "tie_word_embeddings": True}))
    with open(target / "model.safetensors", "wb") as f:                 # 1.2 GB at real size: row chunks
        f.write(safetensors_header([("model.embed_tokens.weight", "BF16", (V, H))]))
        for a in range(0, V, 8192):
            f.write(bf16_bits(rng.standard_normal((min(V, a + 8192) - a, H), dtype=np.float32)).tobytes())

    taps = list(range(1, 4 * d["TAPS"], 4))
    (draft / "config.json").write_text(json.dumps({
        "architectures": ["DSparkDraftModel"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": d["I"],
        "num_attention_heads": d["NH"], "num_key_value_heads": d["NKV"], "head_dim": d["HD"],
        "num_hidden_layers": d["L"], "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "vocab_size": V,
        "block_size": d["B"], "num_target_layers": 36,
        "dflash_config": {"mask_token_id": MASK % V, "target_layer_ids": taps, "markov_rank": d["R"],
                          "markov_head_type": "vanilla", "enable_confidence_head": True,
                          "confidence_head_with_markov": True}}))
    plan = tensor_plan(d) + [("confidence_head.proj.bias", "conf_proj.bias", (1,), -1.0)]
    w = GGUFWriter(work / "draft.gguf", "dflash")
    for key, value, vt in [
            ("dflash.block_count", d["L"], VT.UINT32), ("dflash.context_length", 40960, VT.UINT32),
            ("dflash.embedding_length", H, VT.UINT32), ("dflash.feed_forward_length", d["I"], VT.UINT32),
            ("dflash.attention.head_count", d["NH"], VT.UINT32), ("dflash.attention.head_count_kv", d["NKV"], VT.UINT32),
            ("dflash.rope.freq_base", 1000000.0, VT.FLOAT32), ("dflash.attention.layer_norm_rms_epsilon", 1e-6, VT.FLOAT32),
            ("dflash.attention.key_length", d["HD"], VT.UINT32), ("dflash.attention.value_length", d["HD"], VT.UINT32),
            ("dflash.block_size", d["B"], VT.UINT32), ("dflash.sample_from_anchor", True, VT.BOOL),
            ("tokenizer.ggml.mask_token_id", MASK % V, VT.UINT32)]:
        w.add_key_value(key, value, vt)
    w.add_key_value("dflash.target_layers", [t + 1 for t in taps], VT.ARRAY, sub_type=VT.INT32)
    q8 = outtype == "q8_0"
    for _, gname, shape, std in plan:
        if std <= 0:
            w.add_tensor_info(gname, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        elif q8:
            byte_shape = (*shape[:-1], shape[-1] // 32 * 34)
            w.add_tensor_info(gname, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=QT.Q8_0)
        else:
            w.add_tensor_info(gname, shape, np.dtype(np.uint16), int(np.prod(shape)) * 2, raw_dtype=QT.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    with open(draft / "model.safetensors", "wb") as f:
        f.write(safetensors_header([(h, "F32" if s <= 0 else "BF16", shape) for h, _, shape, s in plan]))
        for _, _, shape, std in plan:
            if std == 0.0:
                arr = (1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
            elif std < 0:
                arr = np.full(shape, 0.5, np.float32)
            else:
                arr = bf16_bits(rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
            f.write(arr.tobytes())
            w.write_tensor_data(quantize_q8_0(arr, bf16_bits=True) if q8 and std > 0 else arr)
    w.close()


def own_peak_rss_gib() -> float:
    """This process's own peak RSS (VmHWM; ``ru_maxrss`` would carry the parent's high-water mark across fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def read_all(work: Path) -> int:
    """The baseline: every input byte read once, 16 MiB at a time."""
    buf, total = bytearray(16 << 20), 0
    for p in sorted(work.rglob("*")):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                while n := os.readv(fd, [buf]):
                    total += n
            finally:
                os.close(fd)
    return total


def child(stage: str, work: Path, d: dict[str, int]) -> None:
    """Run one measured stage in this (fresh) process and print its figures as JSON."""
    u0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, cpu0 = time.perf_counter(), u0.ru_utime + u0.ru_stime
    extra: dict = {}
    if stage == "read":
        extra = {"bytes": read_all(work)}
    elif stage == "numpy":
        from dspark_convert.reference.weights import TargetWeights, open_gguf
        from dspark_convert.variants.dflash.numpy_forward import BlockCase, dflash_forward

        feats = np.random.default_rng(0).standard_normal((16, d["TAPS"] * d["H"])).astype(np.float32)
        (out,) = dflash_forward(open_gguf(work / "draft.gguf"), TargetWeights(work / "target"), [BlockCase(feats, 42)])
        extra = {"tokens": out.tokens.tolist()}
    else:
        from dspark_convert.verify import verify

        r = verify(work / "draft.gguf", work / "draft", work / "target")
        extra = {"passed": r.passed, "worst_exact_nmse": max(o.nmse for o in r.outputs if o.nmse is not None),
                 "quality_worst_nmse": max((o.nmse for o in r.quality if o.nmse is not None), default=None),
                 "first_divergence": r.first_divergence, "contexts": r.contexts, "quality_note": r.quality_note,
                 "storage": {k: f"{v['tensors']} tensors, {v['changed']} of {v['values']} values changed"
                             for k, v in r.storage.items()}}
    wall = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_SELF)
    cpu = use.ru_utime + use.ru_stime - cpu0                                # less sensitive to a busy machine
    print(json.dumps({"stage": stage, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "peak_rss_gib": round(own_peak_rss_gib(), 3), **extra}))


def measure(args: list[str], stage: str, repeat: int) -> dict:
    """Median wall / CPU and the largest peak RSS of ``repeat`` fresh-process runs of ``stage``."""
    runs = []
    for _ in range(repeat):
        res = subprocess.run(args + ["--stage", stage], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"stage {stage} failed:\n{res.stderr}")
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    fig = dict(runs[-1])
    fig["wall_s"] = statistics.median(r["wall_s"] for r in runs)
    fig["cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
    fig["peak_rss_gib"] = max(r["peak_rss_gib"] for r in runs)
    fig["walls"] = [r["wall_s"] for r in runs]
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="small dimensions: a quick smoke run")
    ap.add_argument("--outtype", choices=["bf16", "q8_0"], default="bf16", help="GGUF type of the matrices")
    ap.add_argument("--repeat", type=int, default=3, help="runs per stage (the median is reported)")
    ap.add_argument("--workdir", type=Path, help="where to write the inputs (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the inputs afterwards")
    ap.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    d = TINY if a.tiny else REAL
    if a.stage:
        child(a.stage, a.workdir, d)
        return 0
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench_verify_"))
    stamp = {"dims": d, "outtype": a.outtype}
    try:
        marker = work / "inputs.json"
        if marker.is_file() and json.loads(marker.read_text()) == stamp:
            print(f"inputs: reusing {work}")
        else:
            for sub in ("draft", "target"):
                shutil.rmtree(work / sub, ignore_errors=True)
            t0 = time.perf_counter()
            make_inputs(work, d, a.outtype)
            marker.write_text(json.dumps(stamp))
            print(f"inputs: written in {time.perf_counter() - t0:.1f} s under {work}")
        size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file()) / 2**30
        print(f"inputs: {size:.2f} GiB (draft safetensors, {a.outtype} GGUF, target embedding); "
              f"median of {a.repeat} fresh-process runs per stage")
        args = [sys.executable, __file__, "--workdir", str(work)] + (["--tiny"] if a.tiny else [])
        ok, base = True, None
        for stage in STAGES:
            fig = measure(args, stage, a.repeat)
            line = (f"{stage:7s} wall {fig['wall_s']:7.2f} s   cpu {fig['cpu_s']:7.2f} s   "
                    f"peak RSS {fig['peak_rss_gib']:6.2f} GiB   runs {fig['walls']}")
            if stage == "read":
                base = fig["wall_s"]
                print(line + "   (baseline: every input byte read once)")
                continue
            max_s, max_gib = TARGETS[stage]
            met = fig["wall_s"] < max_s and fig["peak_rss_gib"] < max_gib and fig.get("passed", True)
            ok &= met or a.tiny
            ratio = f"{fig['wall_s'] / base:.1f}x read" if base else ""
            print(f"{line}   {ratio}   (target < {max_s:.0f} s, < {max_gib:.0f} GiB: {'met' if met else 'MISSED'})")
            rest = {k: v for k, v in fig.items() if k not in ("stage", "wall_s", "cpu_s", "peak_rss_gib", "walls")}
            print("        " + json.dumps(rest))
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
