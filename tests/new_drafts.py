"""Deterministic DFlash2 variants with other dimensions than the public sample (issue 22): hidden 32 (the target's: llama.cpp
sizes fc from the draft's hidden size), 2 heads x 16, 1 KV head, FFN 96, V 129,280, for the target of the shared golden set (``make_inputs.py OUT`` -> ``OUT/target``,
the DeepSeek-V4 tokenizer; the committed fixture tokenizer is one upstream's pre-tokenizer table does not know).

``tests/data/oracle-b11434/<variant>.<outtype>.json`` are upstream b11434's output for each variant, described by
``tests/golden_manifest.describe`` (made with ``python tests/new_drafts.py OUT TARGET --oracle UPSTREAM_TREE``, which
runs upstream's ``convert_hf_to_gguf.py DRAFT --target-model-dir TARGET --outtype T``; ``--only A,B`` for some).
``MIMO_VARIANTS`` are MiMo-style DFlash drafts (``mask_embedding.pt``) whose mask rows fall at chunk boundaries of
the streamed embedding table.

Example:
    >>> sorted(VARIANTS)
    ['v-dflash2-bf16', 'v-dflash2-f32']
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from draft_kit import Maker as _Maker
from draft_kit import Tensor
from draft_kit import save_safetensors as _save

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")
H, NH, NKV, HD, FF, V, MASK = 32, 2, 1, 16, 96, 129280, 128799
TAPS = [0, 2, 3]



def dflash2_tensors(m: _Maker, layers: int, kernel: int, group: int, rank: int, embed: bool) -> dict[str, Tensor]:
    t: dict[str, Tensor] = {"fc.weight": m.t(H, len(TAPS) * H), "hidden_norm.weight": m.t(H, scale=0.1, mean=1.0),
                            "norm.weight": m.t(H, scale=0.1, mean=1.0)}
    for i in range(layers):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": m.t(H, scale=0.1, mean=1.0),
                  p + "post_attention_layernorm.weight": m.t(H, scale=0.1, mean=1.0),
                  p + "self_attn.q_proj.weight": m.t(NH * HD, H), p + "self_attn.k_proj.weight": m.t(NKV * HD, H),
                  p + "self_attn.v_proj.weight": m.t(NKV * HD, H), p + "self_attn.o_proj.weight": m.t(H, NH * HD),
                  p + "self_attn.q_norm.weight": m.t(HD, scale=0.1, mean=1.0),
                  p + "self_attn.k_norm.weight": m.t(HD, scale=0.1, mean=1.0),
                  p + "mlp.gate_proj.weight": m.t(FF, H), p + "mlp.up_proj.weight": m.t(FF, H),
                  p + "mlp.down_proj.weight": m.t(H, FF)})
        for mod in ("attention_conv", "mlp_conv"):
            t[p + mod + ".base_kernel"] = m.t(2, kernel, H, scale=0.5)
            t[p + mod + ".kernel_projection.weight"] = m.t(2 * kernel * H // group, H)
    t["candidate_selector.predecessor_codebook"] = m.t(V, rank)
    t["candidate_selector.successor_codebook"] = m.t(V, rank)
    t["candidate_selector.hidden_projection.weight"] = m.t(rank, H)
    if embed:
        t["embed_tokens.weight"] = m.t(V, H)
    return t


def _config(layers: int, dtype: str, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": FF,
        "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD, "num_hidden_layers": layers,
        "rms_norm_eps": 1e-6, "vocab_size": V, "max_position_embeddings": 8192, "hidden_act": "silu",
        "torch_dtype": dtype, "tie_word_embeddings": False, "rope_theta": 1000000.0, "num_target_layers": 5,
        "layer_types": ["full_attention"] * layers, "auto_map": {"AutoModel": "dflash.DFlash2DraftModel"},
    }
    c.update(extra)
    return c


def _v_f32(out: Path) -> None:
    """F32, kernel 4 / group 8 / rank 12 / top-k 5 (32 >= 30), 3 layers, causal, dflash_config.use_swa, top-level block_size,
    scales split between dflash_config and the top level, softcapping 0 (not written)."""
    cfg = _config(3, "float32", block_size=12, is_causal=True, input_embedding_scale=2.0, final_logit_softcapping=0.0,
                  dflash_config={"conv_kernel_size": 4, "conv_group_size": 8, "selector_rank": 12,
                                 "selector_top_k": 5, "mask_token_id": MASK, "target_layer_ids": TAPS,
                                 "use_swa": True, "swa_window_size": 48, "output_multiplier": 0.75})
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    _save(out / "model.safetensors", dflash2_tensors(_Maker(2201, "F32"), 3, 4, 8, 12, embed=False))


def _v_bf16(out: Path) -> None:
    """BF16, kernel 1 / group 32 / rank 32 / top-k 4, 2 layers, dflash_config.causal false, own
    embed_tokens (kept as token_embd), codebooks q8_0-able (rank 32)."""
    cfg = _config(2, "bfloat16", dflash_config={"block_size": 5, "conv_kernel_size": 1, "conv_group_size": 32,
                                                "selector_rank": 32, "selector_top_k": 4, "mask_token_id": MASK,
                                                "target_layer_ids": TAPS, "causal": False})
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    _save(out / "model.safetensors", dflash2_tensors(_Maker(2202, "BF16"), 2, 1, 32, 32, embed=True))


VARIANTS = {"v-dflash2-f32": _v_f32, "v-dflash2-bf16": _v_bf16}


# ---------------------------------------------------------------------------------------------- MiMo-style DFlash
def _mimo_tensors(m: _Maker, layers: int, nh: int, nkv: int, hd: int, ff: int, sink: str, H: int = H,
                  taps: list[int] = TAPS) -> dict[str, Tensor]:
    """A MiMo DFlash draft's tensors (hidden ``H``, ``len(taps)`` target states into ``fc``)."""
    t: dict[str, Tensor] = {"fc.weight": m.t(H, len(taps) * H), "hidden_norm.weight": m.t(H, scale=0.1, mean=1.0),
                            "norm.weight": m.t(H, scale=0.1, mean=1.0)}
    for i in range(layers):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": m.t(H, scale=0.1, mean=1.0),
                  p + "post_attention_layernorm.weight": m.t(H, scale=0.1, mean=1.0),
                  p + "self_attn.q_proj.weight": m.t(nh * hd, H), p + "self_attn.k_proj.weight": m.t(nkv * hd, H),
                  p + "self_attn.v_proj.weight": m.t(nkv * hd, H), p + "self_attn.o_proj.weight": m.t(H, nh * hd),
                  p + "self_attn.q_norm.weight": m.t(hd, scale=0.1, mean=1.0),
                  p + "self_attn.k_norm.weight": m.t(hd, scale=0.1, mean=1.0),
                  p + "mlp.gate_proj.weight": m.t(ff, H), p + "mlp.up_proj.weight": m.t(ff, H),
                  p + "mlp.down_proj.weight": m.t(H, ff), p + "self_attn." + sink: m.t(nh, scale=0.5)})
    return t


def _mimo_config(layers: int, dtype: str, nh: int, nkv: int, hd: int, ff: int, mask: int, **extra: Any) -> dict[str, Any]:
    c = _config(layers, dtype, architectures=["DFlashDraftModel"], num_attention_heads=nh, num_key_value_heads=nkv,
                head_dim=hd, intermediate_size=ff, auto_map={"AutoModel": "dflash.DFlashDraftModel"})
    c.pop("num_target_layers")
    c["dflash_config"] = {"mask_token_id": mask, "target_layer_ids": TAPS}
    for k, v in extra.items():
        if k == "dflash_config":
            c[k].update(v)
        else:
            c[k] = v
    return c


def _mask_pt(path: Path, mask: int, vec: np.ndarray, dtype: str) -> None:
    import torch  # the file format is a torch pickle

    torch.save({"mask_token_id": mask, "embedding": torch.from_numpy(vec.astype(np.float32)).to(getattr(torch, dtype))},
               path)


def _v_mimo_boundary(out: Path) -> None:
    """BF16, MiMo's index-only layout (dflash_draft_model.safetensors + index), 3 layers, 4 heads x 8, 2 KV heads,
    FFN 80, partial RoPE 0.25 in rope_parameters, attention_sink_bias, use_swa 24, value scale 0.75; mask id 65536:
    the first row of the target embedding's second 4 MiB chunk (65,536 BF16 rows of 32), a float16 vector."""
    cfg = _mimo_config(3, "bfloat16", 4, 2, 8, 80, 65536, dflash_config={
        "use_swa": True, "swa_window_size": 24, "attention_value_scale": 0.75})
    cfg.pop("rope_theta")
    cfg["rope_parameters"] = {"rope_theta": 2000000.0, "rope_type": "default", "partial_rotary_factor": 0.25}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    m = _Maker(2211, "BF16")
    tensors = _mimo_tensors(m, 3, 4, 2, 8, 80, "attention_sink_bias")
    _save(out / "dflash_draft_model.safetensors", tensors)
    size = (out / "dflash_draft_model.safetensors").stat().st_size
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": size}, "weight_map": dict.fromkeys(sorted(tensors), "dflash_draft_model.safetensors")},
        indent=1))
    _mask_pt(out / "mask_embedding.pt", 65536, m.rng.standard_normal(H, dtype=np.float32) * 0.05, "float16")


def _v_mimo_own_embed(out: Path) -> None:
    """F32, 1 layer, 2 heads x 16, 1 KV head, learnable_sink_param, the draft's own F32 embed_tokens (the table that is
    patched; output is still the target's lm_head); mask id 65535: the last row of the second 4 MiB chunk (32,768 F32
    rows of 32 each), a float32 vector."""
    cfg = _mimo_config(1, "float32", NH, NKV, HD, FF, 65535, partial_rotary_factor=0.5)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    m = _Maker(2212, "F32")
    tensors = {**_mimo_tensors(m, 1, NH, NKV, HD, FF, "learnable_sink_param"), "embed_tokens.weight": m.t(V, H)}
    _save(out / "model.safetensors", tensors)
    _mask_pt(out / "mask_embedding.pt", 65535, m.rng.standard_normal(H, dtype=np.float32) * 0.05, "float32")


MIMO_VARIANTS = {"v-mimo-boundary": _v_mimo_boundary, "v-mimo-own-embed": _v_mimo_own_embed}


def make(out: Path, name: str) -> Path:
    """Write variant ``name`` (DFlash2 or MiMo) to ``out/name`` and return its folder."""
    {**VARIANTS, **MIMO_VARIANTS}[name](out / name)
    return out / name


def main(argv: list[str]) -> int:
    """``new_drafts.py OUT TARGET --oracle TREE``: write every variant, convert with upstream, store the manifests."""
    out, target, tree = Path(argv[0]), Path(argv[1]), Path(argv[argv.index("--oracle") + 1])
    sys.path.insert(0, str(HERE))
    from golden_manifest import write_upstream_manifest

    ORACLE.mkdir(parents=True, exist_ok=True)
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    for name in [n for n in {**VARIANTS, **MIMO_VARIANTS} if only is None or n in only]:
        d = make(out, name)
        for t in OUTTYPES:
            write_upstream_manifest(tree, d, target, out, name, t, ORACLE)
            print(name, t, "ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
