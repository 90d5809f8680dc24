#!/usr/bin/env python3
"""Sweep MTP conversions over checkpoint shapes the committed manifests do not cover, against upstream b11434.

    python scripts/oracle_sweep_mtp.py [--tree LLAMA_CPP_TREE] [--only SUBSTRING ...] [--keep DIR] [--list]

For every case of :data:`CASES` (a maker of tests/mtp_makers.py, its keyword dimensions and a seed) it writes the
tiny target checkpoint into a temporary folder, then for each of the case's outtypes:

- ``mtp``: upstream's ``convert_hf_to_gguf.py CKPT --mtp`` (the b11434 tree's converter with its own gguf-py, run by
  ``tests/mtp_makers.upstream_convert``) against ``dspark_convert.convert(CKPT, None, OUT, mtp=True)`` (what
  ``dspark-convert hf2gguf CKPT --mtp`` runs);
- ``cuts`` (the cases that list it): upstream's full conversion, then ``mtp-extract`` of it against upstream's
  ``--mtp`` file and ``mtp-strip`` of it against upstream's ``--no-mtp`` file.

The two files of a pair are compared byte for byte (sha256 of the whole file); on a difference the first differing
KV (its order, type or value) or tensor (name, type, shape or bytes) is printed, from both files' manifests
(tests/golden_manifest.describe, our reader). When upstream fails on a checkpoint, our side must refuse it too
(one line, printed).

Output: one line per comparison, ``<case> <outtype> <mode>: <outcome> (<detail>)``, the outcome one of
``identical``, ``both refuse`` (upstream fails on the checkpoint, we refuse it in one line), ``we refuse (upstream's
file does not load)`` (a file upstream writes that llama.cpp's loader does not load) or ``DIFFERS`` (with the first
difference, or our refusal), then the dimensions of the case; at the end the summary
``N/M identical; B both refuse, R we refuse (...), D DIFFERS``. Exit status 1 when any comparison differs. The
tree defaults to ``$DSPARK_LLAMA_TREE`` or the cache folder the llama-server build uses (tests/mtp_makers.TREE).
Each upstream conversion takes a few seconds; the whole sweep about half an hour on two cores.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "fixtures")]

import mtp_makers as M  # noqa: E402
from golden_manifest import describe  # noqa: E402
from mtp_makers import QwenDims  # noqa: E402

BASE = ("bf16", "q8_0")
ALL = ("bf16", "f16", "f32", "q8_0")
#: with ``auto`` (upstream's default: the first 2-D BF16 / F16 tensor's type, else f16)
AUTO = (*ALL, "auto")
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}


@dataclass(frozen=True)
class Case:
    """One checkpoint: ``maker`` (a tests/mtp_makers.py function) called with ``seed`` and ``kwargs``, converted
    at ``outtypes``; ``cuts``: also upstream's full / ``--no-mtp`` files and our extract / strip of the full one;
    ``match_upstream``: ours converted with ``--match-upstream`` (MiMo-V2-Flash's separate q / k / v, where our
    default writes the fused ``attn_qkv`` llama.cpp's graph needs: docs/mtp-checkpoint.md; more than one MTP block
    where the arch's MTP graph takes one, which our default refuses: rule ``mtp-graph``)."""

    name: str
    maker: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 100
    outtypes: tuple[str, ...] = BASE
    cuts: bool = False
    match_upstream: bool = False

    def dims(self) -> str:
        def show(v: Any) -> str:
            if isinstance(v, QwenDims):  # only the fields that are not the default
                return "QwenDims(" + ", ".join(f"{f.name}={getattr(v, f.name)!r}" for f in fields(v)
                                               if getattr(v, f.name) != f.default) + ")"
            return repr(v)

        return ", ".join(f"{k}={show(v)}" for k, v in self.kwargs.items())


def _q(**kw: Any) -> QwenDims:
    return QwenDims(**kw)


#: M-RoPE sections that fit a rotary width of 8 (head_dim 32 x 0.25) and 16 (64 x 0.25)
MR8 = {"mrope_section": [2, 1, 1], "mrope_interleaved": True}
MR16 = M.MROPE16

CASES: list[Case] = [
    # ---- Qwen3.5 / 3.6 dense
    Case("qwen35-h128-L2", "make_qwen35_dense", {"dims": _q(hidden=128, layers=2, full_interval=2, heads=4, kv_heads=2,
                                                              head_dim=32, ff=256), "mrope": MR8}, 101, cuts=True),
    Case("qwen35-h192-L3-mtp2", "make_qwen35_dense",
         {"dims": _q(hidden=192, layers=3, full_interval=3, heads=6, kv_heads=2, head_dim=32, ff=320, mtp_layers=2),
          "mrope": MR8}, 102, ALL, cuts=True),
    Case("qwen35-h320-tied-f16", "make_qwen35_dense",
         {"dims": _q(hidden=320, layers=4, heads=5, kv_heads=1, head_dim=64, ff=384, tie=True, dtype="float16"),
          "mrope": MR16}, 103, AUTO),
    Case("qwen35-h512-f32", "make_qwen35_dense",
         {"dims": _q(hidden=512, layers=2, full_interval=2, heads=8, kv_heads=4, head_dim=64, ff=1024, dtype="float32"),
          "mrope": MR16}, 104, ALL),
    Case("qwen35-h96-L1-allfull", "make_qwen35_dense",
         {"dims": _q(hidden=96, layers=1, full_interval=1, heads=3, kv_heads=1, head_dim=32, ff=160), "mrope": MR8}, 105),
    Case("qwen35-h160-lin", "make_qwen35_dense",
         {"dims": _q(hidden=160, layers=4, full_interval=2, lin=(4, 8, 32, 16), ff=224)}, 106),
    Case("qwen35-h128-no-mrope", "make_qwen35_dense",
         {"dims": _q(hidden=128, layers=2, full_interval=2, head_dim=32), "mrope": {}}, 107),
    Case("qwen35-h128-yarn", "make_qwen35_dense",
         {"dims": _q(hidden=128, layers=2, full_interval=2, head_dim=32, rope=tuple(YARN.items())), "mrope": MR8},
         108),
    Case("qwen35-h224-rot05", "make_qwen35_dense",
         {"dims": _q(hidden=224, layers=2, full_interval=2, heads=7, kv_heads=7, head_dim=32, rotary=0.5)}, 109),
    Case("qwen35-h448-f16-untied", "make_qwen35_dense",
         {"dims": _q(hidden=448, layers=3, full_interval=3, heads=7, kv_heads=1, head_dim=64, ff=608,
                     dtype="float16"), "mrope": MR16}, 110, ALL),
    # ---- Qwen3.5 MoE
    Case("qwen35moe-h128-e8k2", "make_qwen35_moe",
         {"dims": _q(hidden=128, layers=2, full_interval=2, head_dim=32), "experts": 8, "topk": 2, "moe_ff": 64,
          "shared_ff": 64, "mrope": MR8}, 111, cuts=True),
    Case("qwen35moe-h192-e6k3-mtp2", "make_qwen35_moe",
         {"dims": _q(hidden=192, layers=3, full_interval=3, heads=6, kv_heads=3, head_dim=32, mtp_layers=2),
          "experts": 6, "topk": 3, "moe_ff": 96, "shared_ff": 128, "mrope": MR8}, 112, ALL, cuts=True),
    Case("qwen35moe-h320-e16k4-tied-f16", "make_qwen35_moe",
         {"dims": _q(hidden=320, layers=4, heads=4, kv_heads=2, head_dim=64, tie=True, dtype="float16"),
          "experts": 16, "topk": 4, "moe_ff": 32, "shared_ff": 160, "mrope": MR16}, 113),
    Case("qwen35moe-h256-e4k1-ff48", "make_qwen35_moe",
         {"dims": _q(hidden=256, layers=2, full_interval=2, head_dim=32, dtype="float32"), "experts": 4, "topk": 1,
          "moe_ff": 48, "shared_ff": 80, "mrope": MR8}, 114, ALL),
    Case("qwen35moe-h160-fused-bf16", "make_qwen35_moe",
         {"dims": _q(hidden=160, layers=2, full_interval=2, heads=5, kv_heads=1, head_dim=32), "experts": 4,
          "topk": 2, "moe_ff": 96, "shared_ff": 32, "mrope": MR8, "per_expert_mtp": False}, 115, ALL, cuts=True),
    Case("qwen35moe-h384-e32k8", "make_qwen35_moe",
         {"dims": _q(hidden=384, layers=4, heads=6, kv_heads=2, head_dim=64), "experts": 32, "topk": 8,
          "moe_ff": 32, "shared_ff": 192, "mrope": MR16}, 116),
    # ---- Qwen3-Next
    Case("qwen3next-h128-L2-e8", "make_qwen3_next",
         {"dims": _q(hidden=128, layers=2, full_interval=2, head_dim=32), "experts": 8, "topk": 2, "moe_ff": 64},
         121, cuts=True),
    Case("qwen3next-h192-mtp2-e6k3", "make_qwen3_next",
         {"dims": _q(hidden=192, layers=4, heads=6, kv_heads=2, head_dim=32, mtp_layers=2), "experts": 6, "topk": 3,
          "moe_ff": 96, "shared_ff": 64}, 122, ALL, cuts=True),
    Case("qwen3next-h320-L3-tied-f32", "make_qwen3_next",
         {"dims": _q(hidden=320, layers=3, full_interval=3, heads=5, kv_heads=5, head_dim=64, tie=True,
                     dtype="float32"), "experts": 4, "topk": 2, "moe_ff": 160, "shared_ff": 32}, 123, AUTO),
    Case("qwen3next-h256-perexpert-f16", "make_qwen3_next",
         {"dims": _q(hidden=256, layers=4, full_interval=2, heads=4, kv_heads=1, head_dim=64, dtype="float16"),
          "experts": 8, "topk": 2, "moe_ff": 64, "shared_ff": 128, "per_expert_mtp": True}, 124, ALL, cuts=True),
    Case("qwen3next-h96-L1", "make_qwen3_next",
         {"dims": _q(hidden=96, layers=1, full_interval=1, heads=3, kv_heads=3, head_dim=32, lin=(1, 2, 32, 32)),
          "experts": 4, "topk": 1, "moe_ff": 32}, 125),
    # ---- GLM-4.5 MoE
    Case("glm4moe-h128-e8k2", "make_glm4_moe",
         {"hidden": 128, "layers": 2, "experts": 8, "topk": 2, "moe_ff": 64, "head_dim": 32, "ff": 256}, 131,
         cuts=True),
    Case("glm4moe-h192-nextn2-e6k3", "make_glm4_moe",
         {"hidden": 192, "layers": 3, "nextn": 2, "experts": 6, "topk": 3, "moe_ff": 96, "heads": 6, "kv_heads": 2,
          "head_dim": 32, "groups": (2, 1)}, 132, ALL, cuts=True, match_upstream=True),
    Case("glm4moe-h320-e16k4-qknorm", "make_glm4_moe",
         {"hidden": 320, "layers": 3, "first_dense": 2, "experts": 16, "topk": 4, "moe_ff": 32, "heads": 5,
          "kv_heads": 1, "head_dim": 64, "qk_norm": True, "rotary": 0.25, "scale": 2.5}, 133),
    Case("glm4moe-h256-yarn-f16", "make_glm4_moe",
         {"hidden": 256, "layers": 2, "experts": 4, "moe_ff": 64, "rope": YARN, "dtype": "float16"}, 134, ALL),
    Case("glm4moe-h160-f32-shared2", "make_glm4_moe",
         {"hidden": 160, "layers": 2, "experts": 8, "moe_ff": 80, "shared": 2, "norm_topk": False,
          "dtype": "float32", "first_dense": 0}, 135, AUTO),
    Case("glm4vmoe-h192", "make_glm4_moe",
         {"hidden": 192, "layers": 2, "experts": 8, "moe_ff": 64, "heads": 6, "kv_heads": 2, "head_dim": 32,
          "vl": True}, 136),
    Case("glm4moe-h448-L4-e12k6", "make_glm4_moe",
         {"hidden": 448, "layers": 4, "experts": 12, "topk": 6, "moe_ff": 64, "heads": 7, "kv_heads": 7,
          "head_dim": 64, "groups": (3, 2), "ff": 512}, 137),
    Case("glm4moe-h96-L1", "make_glm4_moe",
         {"hidden": 96, "layers": 1, "experts": 4, "moe_ff": 32, "heads": 3, "kv_heads": 1, "head_dim": 32}, 138,
         cuts=True),
    Case("glm4moe-h128-nextn2-f16", "make_glm4_moe",
         {"hidden": 128, "layers": 2, "nextn": 2, "experts": 4, "moe_ff": 64, "dtype": "float16", "qk_norm": True},
         139, ALL, match_upstream=True),
    # ---- GLM-5 (glm-dsa)
    Case("glm5-h128-e8k2", "make_glm5",
         {"hidden": 128, "layers": 2, "heads": 4, "q_lora": 64, "kv_lora": 64, "rope": 32, "nope": 32, "v_dim": 32,
          "experts": 8, "moe_ff": 64}, 141),
    Case("glm5-h192-nextn2", "make_glm5",
         {"hidden": 192, "layers": 3, "nextn": 2, "heads": 6, "q_lora": 96, "kv_lora": 64, "rope": 16, "nope": 48,
          "v_dim": 48, "experts": 6, "topk": 3, "moe_ff": 96, "index": (4, 32, 8)}, 142, ALL, match_upstream=True),
    Case("glm5-h320-f16-idx", "make_glm5",
         {"hidden": 320, "layers": 2, "heads": 5, "q_lora": 160, "kv_lora": 96, "rope": 32, "nope": 64, "v_dim": 64,
          "experts": 16, "topk": 4, "moe_ff": 32, "index": (2, 64, 16), "indexer_types": ["full", "shared"],
          "dtype": "float16"}, 143, ALL),
    Case("glm5-h256-yarn-f32", "make_glm5",
         {"hidden": 256, "layers": 2, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "yarn", "factor": 8.0,
                                                          "original_max_position_embeddings": 512,
                                                          "mscale_all_dim": 0.707, "mscale": 0.707},
          "dtype": "float32"}, 144, ALL),
    Case("glm5-h160-L1", "make_glm5",
         {"hidden": 160, "layers": 1, "heads": 2, "q_lora": 32, "kv_lora": 32, "rope": 16, "nope": 16, "v_dim": 16,
          "experts": 4, "moe_ff": 32}, 145),
    Case("glm5-h224-groups", "make_glm5",
         {"hidden": 224, "layers": 2, "heads": 7, "q_lora": 96, "kv_lora": 64, "rope": 32, "nope": 32, "v_dim": 32,
          "experts": 8, "moe_ff": 48, "shared": 2, "groups": (2, 1), "scale": 1.0, "norm_topk": False,
          "index": (4, 32, 4)}, 146, ALL),
    # ---- GLM-4.7-Flash (deepseek2)
    Case("glm47f-h128-e8k2", "make_glm4_lite",
         {"hidden": 128, "layers": 2, "heads": 4, "q_lora": 64, "kv_lora": 64, "rope": 32, "nope": 32, "v_dim": 32,
          "experts": 8, "moe_ff": 64}, 181, cuts=True),
    Case("glm47f-h192-nextn2", "make_glm4_lite",
         {"hidden": 192, "layers": 3, "nextn": 2, "heads": 6, "q_lora": 96, "kv_lora": 64, "rope": 16, "nope": 48,
          "v_dim": 48, "experts": 6, "topk": 3, "moe_ff": 96}, 182, ALL, cuts=True, match_upstream=True),
    Case("glm47f-h320-f16-tied", "make_glm4_lite",
         {"hidden": 320, "layers": 2, "heads": 5, "q_lora": 160, "kv_lora": 96, "rope": 32, "nope": 64, "v_dim": 64,
          "experts": 16, "topk": 4, "moe_ff": 32, "tie": True, "dtype": "float16"}, 183, AUTO),
    Case("glm47f-h256-yarn-f32", "make_glm4_lite",
         {"hidden": 256, "layers": 2, "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                                                       "original_max_position_embeddings": 512,
                                                       "mscale_all_dim": 0.707, "mscale": 0.707},
          "dtype": "float32"}, 184, ALL),
    Case("glm47f-h160-L1", "make_glm4_lite",
         {"hidden": 160, "layers": 1, "heads": 2, "q_lora": 32, "kv_lora": 32, "rope": 16, "nope": 16, "v_dim": 16,
          "experts": 4, "moe_ff": 32}, 185, cuts=True),
    Case("glm47f-h224-groups-nodense", "make_glm4_lite",
         {"hidden": 224, "layers": 2, "heads": 7, "q_lora": 96, "kv_lora": 64, "rope": 32, "nope": 32, "v_dim": 32,
          "experts": 8, "moe_ff": 48, "shared": 2, "groups": (2, 1), "scale": 1.0, "norm_topk": False,
          "first_dense": None}, 186, ALL, cuts=True),
    Case("glm47f-h96-tied-bf16-defaults", "make_glm4_lite",
         {"hidden": 96, "layers": 2, "heads": 3, "q_lora": 48, "kv_lora": 32, "rope": 16, "nope": 16, "v_dim": 16,
          "experts": 4, "moe_ff": 32, "tie": True, "rope_theta": None,
          "drop": ("n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor", "rms_norm_eps",
                   "max_position_embeddings")}, 187, AUTO),
    Case("glm47f-h128-no-qlora", "make_glm4_lite",
         {"hidden": 128, "layers": 2, "heads": 4, "q_lora": None, "kv_lora": 32, "rope": 16, "nope": 32, "v_dim": 32,
          "experts": 4, "moe_ff": 32}, 188),
    # ---- Nemotron-H
    Case("nemotron-h128-e8k2", "make_nemotron_h",
         {"hidden": 128, "pattern": "M*E", "heads": 4, "kv_heads": 2, "head_dim": 32, "mamba_heads": 8,
          "experts": 8, "topk": 2, "moe_ff": 64, "shared_ff": 96}, 151, cuts=True),
    Case("nemotron-h192-latent", "make_nemotron_h",
         {"hidden": 192, "pattern": "ME*E", "heads": 6, "kv_heads": 2, "head_dim": 32, "mamba_heads": 6,
          "mamba_head_dim": 32, "ssm_groups": 3, "experts": 6, "topk": 3, "moe_ff": 96, "shared_ff": 64,
          "latent": 96}, 152, ALL),
    Case("nemotron-h320-f16", "make_nemotron_h",
         {"hidden": 320, "pattern": "*EME", "heads": 5, "kv_heads": 1, "head_dim": 64, "mamba_heads": 10,
          "mamba_head_dim": 32, "ssm_groups": 2, "experts": 16, "topk": 4, "moe_ff": 32, "shared_ff": 160,
          "dtype": "float16", "attention_bias": True}, 153, AUTO),
    Case("nemotron-h96-minimal", "make_nemotron_h",
         {"hidden": 96, "pattern": "*E", "heads": 3, "kv_heads": 1, "head_dim": 32, "experts": 4, "topk": 1,
          "moe_ff": 32, "shared_ff": 32, "eps": 1e-6}, 154),
    Case("nemotron-h256-latent-f32", "make_nemotron_h",
         {"hidden": 256, "pattern": "MMM*EE", "heads": 4, "kv_heads": 2, "head_dim": 64, "mamba_heads": 8,
          "mamba_head_dim": 32, "ssm_groups": 4, "experts": 8, "topk": 2, "moe_ff": 64, "shared_ff": 128,
          "latent": 128, "groups": (2, 1), "dtype": "float32"}, 155, ALL, cuts=True),
    # ---- DeepSeek-V4
    Case("deepseek4-h128-L1", "make_deepseek4",
         {"hidden": 128, "layers": 1, "heads": 2, "head_dim": 64, "rope": 16, "q_lora": 64, "o_groups": 1,
          "o_lora": 64, "experts": 4, "moe": 64, "hc": 2}, 161),
    Case("deepseek4-h320-e8", "make_deepseek4",
         {"hidden": 320, "layers": 2, "heads": 4, "head_dim": 96, "rope": 32, "q_lora": 160, "o_groups": 2,
          "o_lora": 96, "experts": 8, "moe": 96, "hc": 4, "ratios": (4, 0)}, 162, AUTO),
    Case("deepseek4-h512-fp8head", "make_deepseek4",
         {"hidden": 512, "layers": 2, "heads": 4, "head_dim": 128, "rope": 64, "q_lora": 256, "o_groups": 2,
          "o_lora": 128, "experts": 6, "moe": 128, "hc": 3, "fp8_head": True, "mtp_shards": 3, "hash_layers": 1,
          "routed_scale": 2.0, "swiglu_limit": 5.0}, 163),
    Case("deepseek4-h256-L3-ratios", "make_deepseek4",
         {"hidden": 256, "layers": 3, "heads": 2, "head_dim": 128, "rope": 64, "q_lora": 128, "o_groups": 2,
          "o_lora": 64, "experts": 8, "moe": 64, "hc": 4, "ratios": (4, 128, 0), "mtp_shards": 2}, 164, ALL),
    # ---- MiMo-V2
    Case("mimo2-h320", "make_mimo2",
         {"hidden": 320, "heads": 5, "kv_full": 1, "kv_swa": 5, "head_dim": 64, "v_dim": 48, "ff": 256,
          "experts": 8, "moe_ff": 96}, 171, AUTO, match_upstream=True),
    Case("mimo2-h128-fused2", "make_mimo2",
         {"hidden": 128, "heads": 4, "kv_full": 2, "kv_swa": 2, "head_dim": 32, "v_dim": 32, "ff": 160,
          "experts": 4, "moe_ff": 64, "fused_tp": 2, "sinks": False, "arch": "MiMoV2ForCausalLM"}, 172),
    Case("mimo2-h512-mxfp4", "make_mimo2",
         {"hidden": 512, "heads": 8, "kv_full": 4, "kv_swa": 4, "head_dim": 64, "v_dim": 64, "ff": 384,
          "experts": 4, "moe_ff": 128, "fused_tp": 4, "arch": "MiMoV2ForCausalLM", "mxfp4": True,
          "value_scale": 0.5}, 173),
    Case("mimo2-h256-nosinks-vocab", "make_mimo2",
         {"hidden": 256, "heads": 2, "kv_full": 1, "kv_swa": 1, "head_dim": 128, "v_dim": 64, "ff": 224,
          "experts": 6, "moe_ff": 32, "sinks": False, "vocab": 1280}, 174, ALL, match_upstream=True),
    # ---- DeepSeek-V3.2 (deepseek32)
    Case("ds32-h128-e8k2", "make_deepseek32",
         {"hidden": 128, "layers": 2, "heads": 4, "q_lora": 64, "kv_lora": 64, "rope": 32, "nope": 32, "v_dim": 32,
          "experts": 8, "moe_ff": 64}, 181, cuts=True),
    Case("ds32-h192-fp8-nextn2", "make_deepseek32",
         {"hidden": 192, "layers": 3, "nextn": 2, "heads": 6, "q_lora": 96, "kv_lora": 64, "rope": 16, "nope": 48,
          "v_dim": 48, "experts": 6, "topk": 3, "moe_ff": 96, "index": (4, 64, 8), "fp8": (128, 128)}, 182, ALL,
         cuts=True, match_upstream=True),
    Case("ds32-h256-fp8-yarn", "make_deepseek32",
         {"hidden": 256, "layers": 2, "experts": 16, "topk": 4, "moe_ff": 64, "groups": (8, 4), "fp8": (128, 128),
          "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 512, "mscale": 1.0,
                           "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}}, 183, AUTO, cuts=True),
    Case("ds32-h160-L1-tied-f16", "make_deepseek32",
         {"hidden": 160, "layers": 1, "heads": 2, "q_lora": 32, "kv_lora": 32, "rope": 16, "nope": 16, "v_dim": 16,
          "experts": 4, "moe_ff": 32, "tied": True, "dtype": "float16"}, 184, AUTO),
    Case("ds32-h320-fp8-64x32-groups", "make_deepseek32",
         {"hidden": 320, "layers": 2, "heads": 5, "q_lora": 160, "kv_lora": 96, "rope": 32, "nope": 64, "v_dim": 64,
          "experts": 16, "topk": 4, "moe_ff": 48, "shared": 2, "groups": (4, 2), "scale": 1.0, "norm_topk": False,
          "index": (2, 64, 16), "fp8": (64, 32)}, 185, ALL),
    Case("ds32-h96-f32-defaults", "make_deepseek32",
         {"hidden": 96, "layers": 2, "heads": 3, "q_lora": 48, "kv_lora": 32, "rope": 16, "nope": 16, "v_dim": 32,
          "experts": 16, "moe_ff": 32, "dtype": "float32",
          "drop": ("rms_norm_eps", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor")}, 186, AUTO),
]


def _sha(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def first_difference(ours: Path, theirs: Path) -> str:
    """The first KV (order, type, value) or tensor (name, type, shape, bytes) where the two files differ."""
    a, b = describe(ours), describe(theirs)
    for i, (ka, kb) in enumerate(zip(a["kv_order"], b["kv_order"], strict=False)):
        if ka != kb:
            return f"KV #{i}: ours {ka!r}, upstream {kb!r}"
        if a["kv"][ka] != b["kv"][kb]:
            return f"KV {ka}: ours {a['kv'][ka]}, upstream {b['kv'][kb]}"
    if len(a["kv_order"]) != len(b["kv_order"]):
        extra = a["kv_order"][len(b["kv_order"]):] or b["kv_order"][len(a["kv_order"]):]
        return f"KV count: ours {len(a['kv_order'])}, upstream {len(b['kv_order'])} (first extra {extra[0]!r})"
    for i, (ta, tb) in enumerate(zip(a["tensors"], b["tensors"], strict=False)):
        if ta != tb:
            what = [k for k in ("name", "type", "ne", "sha256") if ta.get(k) != tb.get(k)]
            return f"tensor #{i} {ta['name']} / {tb['name']}: {', '.join(what)} differ (ours {ta['type']} " \
                   f"{ta['ne']}, upstream {tb['type']} {tb['ne']})"
    if len(a["tensors"]) != len(b["tensors"]):
        return f"tensor count: ours {len(a['tensors'])}, upstream {len(b['tensors'])}"
    return "same manifest, other bytes (padding or alignment)"


#: the outcomes of a comparison: identical files; both refuse the checkpoint (upstream fails, we refuse in one
#: line); we refuse a file upstream writes but llama.cpp does not load; anything else
OUTCOMES = ("identical", "both refuse", "we refuse (upstream's file does not load)", "DIFFERS")


def run_case(case: Case, work: Path, tree: Path) -> list[tuple[str, str, str]]:
    """``[(label, outcome, detail)]`` for every comparison of ``case``, ``outcome`` one of :data:`OUTCOMES`."""
    from dspark_convert import convert
    from dspark_convert.errors import ConvertError
    from dspark_convert.mtp.run import extract, strip

    def refused(e: ConvertError) -> tuple[str, str]:
        text = str(e)
        return (OUTCOMES[2] if "does not load" in text or "would not load" in text else OUTCOMES[3]), f"we refuse: {text}"

    def compared(ours: Path, theirs: Path) -> tuple[str, str]:
        if _sha(ours) == _sha(theirs):
            return OUTCOMES[0], ""
        return OUTCOMES[3], first_difference(ours, theirs)

    maker = getattr(M, case.maker)
    ckpt = maker(work / case.name, case.seed, **case.kwargs)
    rows: list[tuple[str, str, str]] = []
    for outtype in case.outtypes:
        up = work / f"{case.name}-{outtype}-up-mtp.gguf"
        ours = work / f"{case.name}-{outtype}-ours-mtp.gguf"
        label = f"{case.name} {outtype} mtp{' --match-upstream' if case.match_upstream else ''}"
        try:
            M.upstream_convert(ckpt, up, outtype, ("--mtp",), tree=tree)
        except RuntimeError as e:
            last = str(e).strip().splitlines()[-1]
            try:
                convert(ckpt, None, ours, outtype=outtype, mtp=True, match_upstream=case.match_upstream)
                rows.append((label, OUTCOMES[3], f"upstream fails ({last}) but we convert"))
            except ConvertError as ours_e:
                rows.append((label, OUTCOMES[1], f"upstream {last!r}; ours {str(ours_e)!r}"))
            continue
        try:
            convert(ckpt, None, ours, outtype=outtype, mtp=True, match_upstream=case.match_upstream)
            rows.append((label, *compared(ours, up)))
        except ConvertError as e:
            rows.append((label, *refused(e)))
        if case.cuts:
            full = work / f"{case.name}-{outtype}-up-full.gguf"
            nomtp = work / f"{case.name}-{outtype}-up-nomtp.gguf"
            M.upstream_convert(ckpt, full, outtype, (), tree=tree)
            M.upstream_convert(ckpt, nomtp, outtype, ("--no-mtp",), tree=tree)
            for mode, fn, theirs in (("extract", extract, up), ("strip", strip, nomtp)):
                cut = work / f"{case.name}-{outtype}-ours-{mode}.gguf"
                try:
                    fn(full, cut)
                    rows.append((f"{case.name} {outtype} {mode}", *compared(cut, theirs)))
                except ConvertError as e:
                    rows.append((f"{case.name} {outtype} {mode}", *refused(e)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=M.TREE, help="the llama.cpp b11434 tree (upstream's converter)")
    ap.add_argument("--only", action="append", help="run the cases whose name contains this (repeatable)")
    ap.add_argument("--keep", type=Path, help="write the checkpoints and files here instead of a temporary folder")
    ap.add_argument("--list", action="store_true", help="print the cases and their dimensions, convert nothing")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.only or any(s in c.name for s in args.only)]
    if args.list:
        for c in cases:
            print(f"{c.name}: {c.maker}(seed={c.seed}, {c.dims()}) at {', '.join(c.outtypes)}"
                  f"{' + full/--no-mtp cuts' if c.cuts else ''}{' (ours --match-upstream)' if c.match_upstream else ''}")
        return 0
    if not (args.tree / "convert_hf_to_gguf.py").is_file():
        print(f"no convert_hf_to_gguf.py in {args.tree} (--tree or $DSPARK_LLAMA_TREE)", file=sys.stderr)
        return 2
    counts = dict.fromkeys(OUTCOMES, 0)
    with tempfile.TemporaryDirectory(prefix="mtp-sweep-") as tmp:
        root = args.keep or Path(tmp)
        for c in cases:
            t0 = time.perf_counter()
            try:
                rows = run_case(c, root, args.tree)
            except Exception as e:  # a maker or harness failure: one line, the sweep goes on
                rows = [(f"{c.name} - -", OUTCOMES[3], f"ERROR {type(e).__name__}: {e}".splitlines()[0])]
                traceback.print_exc(limit=3, file=sys.stderr)
            for label, outcome, detail in rows:
                counts[outcome] += 1
                print(f"{label}: {outcome}{' (' + detail + ')' if detail else ''}", flush=True)
            print(f"  {c.maker}(seed={c.seed}, {c.dims()}) [{time.perf_counter() - t0:.0f} s]", flush=True)
    total = sum(counts.values())
    print(f"{counts[OUTCOMES[0]]}/{total} identical; " + ", ".join(f"{n} {k}" for k, n in counts.items()
                                                               if k != OUTCOMES[0]))
    return 0 if counts[OUTCOMES[3]] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
