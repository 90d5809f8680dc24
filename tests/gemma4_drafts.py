"""Deterministic Gemma4 DSpark variants with other dimensions than the public sample (issue 22), each with its own
Gemma 4 target (``Gemma4ForConditionalGeneration`` config, a small synthetic Gemma-style tokenizer: byte-fallback
BPE, ``<bos>`` template post-processor, the Gemma 4 "visible" tokens), so that no test needs the network.

``tests/data/oracle-b11434/<variant>.<outtype>.json`` are upstream b11434's output for each variant, described by
``tests/golden_manifest.describe`` (made with ``python tests/gemma4_drafts.py OUT --oracle UPSTREAM_TREE``, which
runs upstream's ``convert_hf_to_gguf.py OUT/<v> --target-model-dir OUT/<v>-target --outtype T``).

Variants (what each changes from the sample: hidden 32, 2 layers, 4 heads x global_head_dim 16, 1 global KV head,
proportional RoPE 0.25 nested by layer kind, untied, confidence head, BF16):

- ``v-gemma4-f32``: F32, 3 layers, 2 heads x 32, 2 global KV heads, a flat ``rope_parameters`` completed from the
  top-level ``partial_rotary_factor`` 0.5, mask id and target layers in ``dflash_config``, ``sample_from_anchor``
  false, ``model.``-prefixed tensor names, confidence head without bias.
- ``v-gemma4-tied``: hidden 64, 1 layer, 8 heads x 8, 1 global KV head, no ``rope_parameters`` (Gemma4TextConfig's
  default: proportional 0.25, theta 1e6 -> one rotated pair), tied (no ``lm_head``), no confidence head.
- ``v-gemma4-default``: default RoPE (no ``rope_freqs``), 4 heads x 64, 2 global KV heads, Markov rank 8,
  ``confidence_head.proj`` spelling, ``dflash_config.use_swa`` (sliding-window keys), ``block_size`` in
  ``dflash_config``.
- ``v-gemma4-nomarkov``: DeepSpec's "DFlash" release of the class (``markov_rank`` 0: no Markov or confidence
  head), proportional RoPE with factor 1.0 (every pair rotates, ``rope_freqs`` all ones).

Example:
    >>> sorted(VARIANTS)
    ['v-gemma4-default', 'v-gemma4-f32', 'v-gemma4-nomarkov', 'v-gemma4-tied']
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draft_kit import Maker as _Maker
from draft_kit import Tensor
from draft_kit import save_safetensors as _save

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")
TAPS = [0, 2, 3]
N_TARGET_LAYERS = 5
MASK = 4  # <mask>, as in Gemma 3's tokenizer


# ---------------------------------------------------------------------------------------------- tokenizer
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>", "<|channel>",
            "<channel|>", "<|tool_call>", "<tool_call|>"]
WORDS = ["\u2581", *"abcdefghijklmnopqrstuvwxyz", "\u2581a", "\u2581b", "ab", "\u2581ab", "\u2581the", "th", "he", "\u2581t"]
MERGES = [["\u2581", "a"], ["\u2581", "b"], ["a", "b"], ["\u2581a", "b"], ["t", "h"], ["h", "e"], ["\u2581", "t"],
          ["\u2581t", "he"]]
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] | trim }}"
                 "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def gemma_tokenizer() -> tuple[dict[str, Any], dict[str, Any]]:
    """(tokenizer.json, tokenizer_config.json) of a small Gemma-style tokenizer: specials, 256 byte tokens,
    words and merges."""
    vocab: dict[str, int] = {}
    for tok in SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + WORDS:
        vocab[tok] = len(vocab)
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": t not in ("<mask>", "<|channel>", "<channel|>")} for t in SPECIALS]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": MERGES},
    }
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
           "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>", "chat_template": CHAT_TEMPLATE,
           "model_max_length": 131072, "tokenizer_class": "GemmaTokenizer",
           "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added}}
    return tok, cfg


N_TOKENS = len(SPECIALS) + 256 + len(WORDS)


# ---------------------------------------------------------------------------------------------- tensors


@dataclass(frozen=True)
class Dims:
    hidden: int = 32
    layers: int = 2
    heads: int = 4
    global_head_dim: int = 16
    global_kv: int = 1
    head_dim: int = 8  # the sliding layers' (unused by the draft; key_length is replaced by global_head_dim)
    ff: int = 64
    rank: int = 4  # 0: no Markov head (DeepSpec's "DFlash" release of the same class)
    dtype: str = "BF16"
    tied: bool = False
    confidence: str | None = "confidence_proj"  # None: no confidence head
    conf_bias: bool = True
    prefix: str = ""
    config: dict[str, Any] = field(default_factory=dict)


def draft_tensors(d: Dims, seed: int) -> dict[str, Tensor]:
    m, V, H, R = _Maker(seed, d.dtype), N_TOKENS, d.hidden, d.rank
    t: dict[str, Tensor] = {"embed_tokens.weight": m.t(V, H), "norm.weight": m.norm(H), "hidden_norm.weight": m.norm(H),
                            "fc.weight": m.t(H, len(TAPS) * H)}
    if R:
        t.update({"markov_head.markov_w1.weight": m.t(V, R), "markov_head.markov_w2.weight": m.t(V, R)})
    if not d.tied:
        t["lm_head.weight"] = m.t(V, H)
    if d.confidence:
        t[f"{d.confidence}.weight"] = m.t(1, H + R)
        if d.conf_bias:
            t[f"{d.confidence}.bias"] = m.t(1)
    qd, kd = d.heads * d.global_head_dim, d.global_kv * d.global_head_dim
    for i in range(d.layers):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": m.norm(H), p + "post_attention_layernorm.weight": m.norm(H),
                  p + "pre_feedforward_layernorm.weight": m.norm(H), p + "post_feedforward_layernorm.weight": m.norm(H),
                  p + "layer_scalar": m.t(1, scale=0.2, mean=0.8),
                  p + "self_attn.q_proj.weight": m.t(qd, H), p + "self_attn.k_proj.weight": m.t(kd, H),
                  p + "self_attn.o_proj.weight": m.t(H, qd), p + "self_attn.q_norm.weight": m.norm(d.global_head_dim),
                  p + "self_attn.k_norm.weight": m.norm(d.global_head_dim), p + "mlp.gate_proj.weight": m.t(d.ff, H),
                  p + "mlp.up_proj.weight": m.t(d.ff, H), p + "mlp.down_proj.weight": m.t(H, d.ff)})
    return {d.prefix + k: v for k, v in t.items()}


def draft_config(d: Dims) -> dict[str, Any]:
    """DeepSpec's ``build_draft_config`` shape: the target text config's fields plus the DSpark ones (no
    ``model_type``: see make_inputs_b11434.py)."""
    c: dict[str, Any] = {
        "architectures": ["Gemma4DSparkModel"], "target_model_type": "gemma4", "target_text_model_type": "gemma4_text",
        "hidden_size": d.hidden, "intermediate_size": d.ff, "num_hidden_layers": d.layers,
        "num_attention_heads": d.heads, "num_key_value_heads": 2, "head_dim": d.head_dim,
        "global_head_dim": d.global_head_dim, "num_global_key_value_heads": d.global_kv, "attention_k_eq_v": True,
        "vocab_size": N_TOKENS, "rms_norm_eps": 1e-6, "max_position_embeddings": 131072, "sliding_window": 512,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
        "layer_types": ["full_attention"] * d.layers, "enable_moe_block": False, "attention_bias": False,
        "tie_word_embeddings": d.tied, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
        "num_target_layers": N_TARGET_LAYERS, "block_size": 7, "mask_token_id": MASK, "target_layer_ids": TAPS,
        "markov_rank": d.rank, "markov_head_type": "vanilla", "final_logit_softcapping": None,
        "enable_confidence_head": d.confidence is not None,
        "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                               "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    }
    c.update(d.config)
    return {k: v for k, v in c.items() if v is not _DROP}


_DROP = object()


def target_config(d: Dims) -> dict[str, Any]:
    text = {"model_type": "gemma4_text", "hidden_size": d.hidden, "intermediate_size": d.ff,
            "num_hidden_layers": N_TARGET_LAYERS, "num_attention_heads": d.heads, "num_key_value_heads": 2,
            "head_dim": d.head_dim, "global_head_dim": d.global_head_dim, "num_global_key_value_heads": d.global_kv,
            "attention_k_eq_v": True, "vocab_size": N_TOKENS, "rms_norm_eps": 1e-6, "max_position_embeddings": 131072,
            "sliding_window": 512, "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
            "layer_types": ["sliding_attention"] * 4 + ["full_attention"], "tie_word_embeddings": True,
            "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                   "rope_theta": 1000000.0},
                                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
            "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


VARIANTS: dict[str, tuple[Dims, int]] = {
    "v-gemma4-f32": (Dims(layers=3, heads=2, global_head_dim=32, global_kv=2, dtype="F32", conf_bias=False,
                          prefix="model.",
                          config={"rope_parameters": {"rope_type": "proportional", "rope_theta": 10000.0},
                                  "partial_rotary_factor": 0.5, "sample_from_anchor": False,
                                  "mask_token_id": _DROP, "target_layer_ids": _DROP,
                                  "dflash_config": {"mask_token_id": MASK, "target_layer_ids": TAPS}}), 2211),
    "v-gemma4-tied": (Dims(hidden=64, layers=1, heads=8, global_head_dim=8, global_kv=1, ff=128, tied=True,
                           confidence=None, config={"rope_parameters": _DROP}), 2212),
    "v-gemma4-default": (Dims(heads=4, global_head_dim=64, global_kv=2, rank=8, confidence="confidence_head.proj",
                              config={"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                             "rope_theta": 500000.0}},
                                      "block_size": 4,
                                      "dflash_config": {"block_size": 6, "use_swa": True, "swa_window_size": 64}}),
                         2213),
    "v-gemma4-nomarkov": (Dims(hidden=32, layers=2, heads=4, global_head_dim=16, global_kv=1, rank=0, confidence=None,
                               config={"markov_head_type": _DROP, "enable_confidence_head": False,
                                       "rope_parameters": {"full_attention": {"rope_type": "proportional",
                                                                              "partial_rotary_factor": 1.0,
                                                                              "rope_theta": 1000000.0}}}), 2214),
}


def make(out: Path, name: str) -> tuple[Path, Path]:
    """Write variant ``name`` to ``out/name`` and its target to ``out/name-target``; return (draft, target)."""
    return make_dims(out, name, *VARIANTS[name])


def make_dims(out: Path, name: str, d: Dims, seed: int) -> tuple[Path, Path]:
    """:func:`make` of any dimensions ``d`` and seed (``out/name``, ``out/name-target``)."""
    draft, target = out / name, out / f"{name}-target"
    draft.mkdir(parents=True, exist_ok=True)
    (draft / "config.json").write_text(json.dumps(draft_config(d), indent=2))
    tensors = draft_tensors(d, seed)
    _save(draft / "model.safetensors", tensors)
    write_target(target, d)
    # the target's embeddings (DeepSpec drafts store a copy of them): what verify reads from a target
    _save(target / "model.safetensors", {"model.language_model.embed_tokens.weight": tensors[d.prefix + "embed_tokens.weight"]})
    return draft, target


def write_target(folder: Path, d: Dims) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tok, tok_cfg = gemma_tokenizer()
    (folder / "config.json").write_text(json.dumps(target_config(d), indent=2))
    (folder / "tokenizer.json").write_text(json.dumps(tok, indent=1, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))


def main(argv: list[str]) -> int:
    """``gemma4_drafts.py OUT --oracle TREE``: write every variant, convert with upstream, store the manifests."""
    out, tree = Path(argv[0]), Path(argv[argv.index("--oracle") + 1])
    sys.path.insert(0, str(HERE))
    from golden_manifest import describe

    ORACLE.mkdir(parents=True, exist_ok=True)
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else list(VARIANTS)
    for name in only:
        draft, target = make(out, name)
        for t in OUTTYPES:
            gguf = out / f"{name}.{t}.gguf"
            p = subprocess.run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(draft), "--target-model-dir",
                                str(target), "--outtype", t, "--outfile", str(gguf)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
            if p.returncode:
                print(p.stderr[-3000:])
                return 1
            (ORACLE / f"{name}.{t}.json").write_text(json.dumps(describe(gguf), indent=1) + "\n")
            print(name, t, "ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
