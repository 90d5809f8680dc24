"""The keys upstream b11434 writes for a DFlash-class draft after the generic ones (spec/upstream-b11434.md §2.1,
§2.2): ``block_size`` (``dflash_config`` first), partial rotary, value scale, logit scale, softcap, embedding
scale, target layers, SWA, ``causal`` and M-RoPE sections. MiMo-style DFlash (:mod:`.dflash_mimo`) writes them
as they are; DFlash2 (``variants/dflash2``, which refines this variant) adds its conv / selector keys after
``block_size``.
"""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from ... import schema as S
from ...plan import KV
from ..kit.base import Context
from ..kit.hparams import as_float, as_fraction, as_positive, as_u32, rope_dict


def _setting(hp: dict[str, Any], dc: dict[str, Any], key: str) -> Any:
    """``dflash_config[key]``, else the top-level ``key`` (upstream's lookup order for the scales)."""
    return dc[key] if key in dc else hp.get(key)


def _target_text(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config")
    return {**cfg, **text} if isinstance(text, dict) else cfg


def _target_arch(cfg: dict[str, Any]) -> str:
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""


def _target_uses_mrope(ctx: Context) -> bool:
    cfg = ctx.target_config.get("text_config", ctx.target_config)
    if not isinstance(cfg, dict):
        return False
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    return isinstance(rope, dict) and "mrope_section" in rope


def b11434_kvs(ctx: Context, hp: dict[str, Any], dc: dict[str, Any], taps: list[int],
               after_block: list[KV]) -> list[KV]:
    """The keys upstream b11434 writes after the generic ones for a DFlash-class draft, in its order (§2.1, §2.2);
    ``after_block``: a refining variant's keys, written right after ``block_size`` (DFlash2's conv / selector keys)."""
    where = ctx.where
    out: list[KV] = []
    head_dim = hp.get("head_dim") or as_u32(hp["hidden_size"], "hidden_size", where) // as_positive(
        hp["num_attention_heads"], "num_attention_heads", where)
    factor = rope_dict(hp).get("partial_rotary_factor")
    if factor is not None:
        out.append(KV(S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_DFLASH), VT.UINT32,
                      int(head_dim * as_fraction(factor, "partial_rotary_factor", where))))
    if dc.get("attention_value_scale") is not None:
        out.append(KV(S.ATTN_VALUE_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32,
                      as_float(dc["attention_value_scale"], "dflash_config.attention_value_scale", where)))
    block = dc["block_size"] if "block_size" in dc else hp.get("block_size", S.DFLASH_DEFAULT_BLOCK_SIZE)
    out.append(KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, as_positive(block, "block_size", where)))
    out += after_block
    scale = _setting(hp, dc, "output_multiplier")
    if scale is not None:
        out.append(KV(S.LOGIT_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32, as_float(scale, "output_multiplier", where)))
    cap = _setting(hp, dc, "final_logit_softcapping")
    if cap is not None and as_float(cap, "final_logit_softcapping", where) > 0:
        out.append(KV(S.FINAL_LOGIT_SOFTCAPPING.format(arch=S.ARCH_DFLASH), VT.FLOAT32, float(cap)))
    emb = _setting(hp, dc, "input_embedding_scale")
    if emb is None and _target_arch(ctx.target_config).startswith("Gemma"):
        emb = as_u32(_target_text(ctx.target_config)["hidden_size"], "hidden_size", str(ctx.target_dir)) ** 0.5
    if emb is not None:
        out.append(KV(S.EMBEDDING_SCALE.format(arch=S.ARCH_DFLASH), VT.FLOAT32,
                      as_float(emb, "input_embedding_scale", where)))
    out.append(KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32))
    use_swa = bool(dc.get("use_swa", False))
    window = dc.get("swa_window_size") or hp.get("sliding_window")
    if (hp.get("use_sliding_window") or use_swa) and window:
        n_layer = as_u32(hp["num_hidden_layers"], "num_hidden_layers", where)
        pattern = [True] * n_layer if use_swa else [t == "sliding_attention" for t in hp.get("layer_types") or []]
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, as_u32(window, "sliding_window", where)))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY, pattern, VT.BOOL))
    causal = hp.get("is_causal")
    if causal is None:
        causal = dc.get("causal")
    if causal is not None:  # a key written twice keeps its first place (GGUFWriter): add_kv replaces in place
        out.append(KV(S.CAUSAL.format(arch=S.ARCH_DFLASH), VT.BOOL, bool(causal)))
    if _target_uses_mrope(ctx):
        out.append(KV(S.ROPE_DIMENSION_SECTIONS.format(arch=S.ARCH_DFLASH), VT.ARRAY, [head_dim // 2, 0, 0, 0],
                      VT.INT32))
    return out
