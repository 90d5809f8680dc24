"""``verify`` for MTP sidecars: every tensor against the checkpoint, rounded as stored (no reference forward).

Each GGUF tensor is rebuilt from the checkpoint here, with this module's own spelling of upstream's ``--mtp`` rules
(not the converter's tables, so a wrong row there shows as a failing tensor): the HF name of each GGUF tensor, the
``+ 1`` of the RMS norms (the Qwen families only; in float16 for an F16 checkpoint, float32 otherwise), the per-expert
stacks and transformers' fused ones (``gate_up_proj`` halved), Nemotron-H's q/k row
permutation and its two MTP layers folded into one block, DeepSeek-V4's block-scaled FP8 weights (decoded in torch as
upstream does) and its ``e_proj`` / ``h_proj`` side by side into ``nextn.eh_proj``; then rounded to the GGUF tensor's
type with gguf-py (``quants.quantize``) and compared byte for byte. DeepSeek-V4's MXFP4 expert stacks are a lossless
repack: their bytes are rebuilt here from the FP4 codes and E8M0 scales (the two layouts written out) and compared as
they are. Accounting: every GGUF tensor compared,
every checkpoint tensor of the head (``mtp.*`` for the Qwen families, ``model.layers.{n}..`` for GLM-4.5 (``glm4moe``)
and GLM-5 / GLM-4.7-Flash / DeepSeek-V3.2 (``glm-dsa`` / ``deepseek2`` / ``deepseek32``, whose ``kv_b_proj`` is split per
head into ``attn_k_b`` / ``attn_v_b`` here again, after any FP8 dequantization, and whose tied ``lm_head`` is not part
of the file),
``mtp.layers.0`` / ``1`` for Nemotron-H (``nemotron_h_moe``), ``mtp.{i}.*`` with every FP8 / FP4 scale for
DeepSeek-V4 (``deepseek4``), ``model.mtp.layers.{0,1,2}`` for MiMo-V2 (``mimo2``, whose FP8 weights are dequantized
here again from their ``weight_scale_inv``, MiMo-V2.5's tensor-parallel ``qkv_proj`` regrouped into
``[Q | K | V]``), the embedding, the final norm, the head) compared as a source, FP8 scales included; the trunk is
not part of the file. A ``quant_method: fp8`` checkpoint of the other families (Qwen's and GLM's -FP8 releases) is
read the same way: each F8_E4M3 weight times its ``weight_scale_inv`` block, then the family's rules; a ModelOpt FP8
export's weights times their ``weight_scale`` (per tensor or per row), its activation / KV-cache scales dropped by
the variant's rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint, load_json
from ...plan import as_int
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights
from ...roles.proof import Job, Proof, TensorChecks

FAMILY = "mtp"
LAYOUT = "MTP sidecar (mtp.* inside the target checkpoint)"
NO_FORWARD = ("an MTP-block reference forward is not implemented yet: no forward outputs are graded; every tensor is "
              "compared with the checkpoint instead (rebuilt as upstream's --mtp does, rounded to the GGUF type, "
              "byte for byte)")
QUALITY_NOTE = "the GGUF's tensors against the unrounded checkpoint values: max abs is the rounding of the type"

_ROOTS = {"token_embd.weight": ("model.embed_tokens.weight", "embed_tokens.weight"),
          "output_norm.weight": ("model.norm.weight", "norm.weight"), "output.weight": ("lm_head.weight",)}
_NEXTN = {"nextn.eh_proj.weight": "mtp.fc.weight", "nextn.enorm.weight": "mtp.pre_fc_norm_embedding.weight",
          "nextn.hnorm.weight": "mtp.pre_fc_norm_hidden.weight", "nextn.shared_head_norm.weight": "mtp.norm.weight"}
_LAYER = {"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
          "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
          "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
          "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
          "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
          "ffn_down.weight": "mlp.down_proj.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
          "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
          "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
          "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
          "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight"}
_EXPS = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}
#: GLM-4.5: a NextN block's GGUF tensor (after ``blk.{i}.``) -> the checkpoint tensor (after ``model.layers.{i}.``)
_GLM_LAYER = {"nextn.eh_proj.weight": "eh_proj.weight", "nextn.enorm.weight": "enorm.weight",
              "nextn.hnorm.weight": "hnorm.weight", "nextn.embed_tokens.weight": "embed_tokens.weight",
              "nextn.shared_head_head.weight": "shared_head.head.weight",
              "nextn.shared_head_norm.weight": "shared_head.norm.weight",
              "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
              "attn_v.bias": "self_attn.v_proj.bias", "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
              "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
              "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
              "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
              **{k: v for k, v in _LAYER.items() if not v.startswith("mlp.shared_expert")}}
#: GLM-5 (``glm-dsa``): MLA attention, the DSA indexer, ``ffn_norm`` for the post-attention norm
_DSA_LAYER = {"attn_q_a.weight": "self_attn.q_a_proj.weight", "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
              "attn_q_b.weight": "self_attn.q_b_proj.weight",
              "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
              "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
              "attn_k_b.weight": "self_attn.kv_b_proj.weight", "attn_v_b.weight": "self_attn.kv_b_proj.weight",
              "ffn_norm.weight": "post_attention_layernorm.weight",
              "indexer.attn_q_b.weight": "self_attn.indexer.wq_b.weight",
              "indexer.attn_k.weight": "self_attn.indexer.wk.weight",
              "indexer.k_norm.weight": "self_attn.indexer.k_norm.weight",
              "indexer.k_norm.bias": "self_attn.indexer.k_norm.bias",
              "indexer.proj.weight": "self_attn.indexer.weights_proj.weight",
              **{k: v for k, v in _GLM_LAYER.items() if not k.startswith(("attn_q", "attn_k", "attn_v",
                                                                              "post_attention"))}}
_GLM_ARCHES = ("glm4moe", "glm-dsa", "deepseek2", "deepseek32")
#: the MLA archs (upstream's ``DeepseekV2Model`` subclasses: GLM-5, GLM-4.7-Flash, DeepSeek-V3.2): ``kv_b_proj``
#: split, ``lm_head`` dropped when ``tie_word_embeddings`` is true
_MLA_ARCHES = ("glm-dsa", "deepseek2", "deepseek32")
#: Nemotron-H: the block's GGUF tensor (after ``blk.{n}.``) -> (MTP layer, checkpoint tensor after
#: ``mtp.layers.{i}.``): upstream folds mtp.layers.0 (fusion + attention) and mtp.layers.1 (MoE + head norm) into it
_NEMO_LAYER = {"nextn.enorm.weight": (0, "enorm.weight"), "nextn.hnorm.weight": (0, "hnorm.weight"),
               "nextn.eh_proj.weight": (0, "eh_proj.weight"), "attn_norm.weight": (0, "norm.weight"),
               **{f"attn_{g}.{w}": (0, f"mixer.{h}_proj.{w}") for g, h in (("q", "q"), ("k", "k"), ("v", "v"),
                                                                            ("output", "o")) for w in ("weight", "bias")},
               "post_attention_norm.weight": (1, "norm.weight"),
               "nextn.shared_head_norm.weight": (1, "final_layernorm.weight"),
               "ffn_gate_inp.weight": (1, "mixer.gate.weight"),
               "exp_probs_b.bias": (1, "mixer.gate.e_score_correction_bias"),
               "ffn_up_shexp.weight": (1, "mixer.shared_experts.up_proj.weight"),
               "ffn_down_shexp.weight": (1, "mixer.shared_experts.down_proj.weight"),
               "ffn_latent_down.weight": (1, "mixer.fc1_latent_proj.weight"),
               "ffn_latent_up.weight": (1, "mixer.fc2_latent_proj.weight")}
_NEMO_ROOTS = {"token_embd.weight": "backbone.embeddings.weight", "output_norm.weight": "backbone.norm_f.weight",
               "output.weight": "lm_head.weight"}
_NEMO_ARCHES = ("nemotron_h_moe",)
#: DeepSeek-V4 (``deepseek4``): the MTP block's GGUF tensor (after ``blk.{n+i}.``) -> the checkpoint tensor (after
#: ``mtp.{i}.``); ``nextn.eh_proj`` is ``e_proj`` and ``h_proj`` side by side, the expert stacks are repacked FP4
_DS4_LAYER = {"nextn.enorm.weight": "enorm.weight", "nextn.hnorm.weight": "hnorm.weight",
              "nextn.shared_head_norm.weight": "norm.weight", "attn_sinks.weight": "attn.attn_sink",
              "attn_q_a.weight": "attn.wq_a.weight", "attn_q_b.weight": "attn.wq_b.weight",
              "attn_q_a_norm.weight": "attn.q_norm.weight", "attn_kv.weight": "attn.wkv.weight",
              "attn_kv_a_norm.weight": "attn.kv_norm.weight", "attn_output_a.weight": "attn.wo_a.weight",
              "attn_output_b.weight": "attn.wo_b.weight", "attn_compressor_ape.weight": "attn.compressor.ape",
              "attn_compressor_kv.weight": "attn.compressor.wkv.weight",
              "attn_compressor_gate.weight": "attn.compressor.wgate.weight",
              "attn_compressor_norm.weight": "attn.compressor.norm.weight",
              "indexer.attn_q_b.weight": "attn.indexer.wq_b.weight",
              "indexer.proj.weight": "attn.indexer.weights_proj.weight",
              "indexer_compressor_ape.weight": "attn.indexer.compressor.ape",
              "indexer_compressor_kv.weight": "attn.indexer.compressor.wkv.weight",
              "indexer_compressor_gate.weight": "attn.indexer.compressor.wgate.weight",
              "indexer_compressor_norm.weight": "attn.indexer.compressor.norm.weight",
              "attn_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
              "ffn_gate_inp.weight": "ffn.gate.weight", "exp_probs_b.bias": "ffn.gate.bias",
              "exp_probs_b_vl.bias": "ffn.gate.bias_vl", "ffn_gate_shexp.weight": "ffn.shared_experts.w1.weight",
              "ffn_down_shexp.weight": "ffn.shared_experts.w2.weight",
              "ffn_up_shexp.weight": "ffn.shared_experts.w3.weight",
              **{f"hc_{k}_{p}.weight": f"hc_{k}_{p}" for k in ("attn", "ffn") for p in ("fn", "base", "scale")}}
_DS4_EXPS = {"ffn_gate_exps.weight": "w1", "ffn_down_exps.weight": "w2", "ffn_up_exps.weight": "w3"}
_DS4_ROOTS = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight", "output.weight": "head.weight"}
_DS4_ARCHES = ("deepseek4",)


def _ds4_select(s: str) -> bool:
    return s.startswith("mtp.") or s in _DS4_ROOTS.values() or s == "head.scale"


def _ds4_with_scale(ck: Checkpoint, w: str) -> list[str]:
    """``w``, and its ``.scale`` when ``w`` is F8_E4M3 (block-scaled) or an FP4 expert."""
    scale = w.removesuffix(".weight") + ".scale"
    return [w, scale] if ck.ref(w).dtype in ("F8_E4M3", "I8", "U8") and scale in ck else [w]


#: a block tensor's GGUF name: ``blk.<index>.<rest>``
_BLOCK = re.compile(r"blk\.(\d+)\.(.+)")


def _block(gguf: str) -> tuple[str, str] | None:
    """``(index, rest)`` of a block tensor's GGUF name; None for any other name (a root the family does not write).

    Example:
        >>> _block("blk.3.nextn.eh_proj.weight"), _block("token_embd")
        (('3', 'nextn.eh_proj.weight'), None)
    """
    m = _BLOCK.fullmatch(gguf)
    return None if m is None else (m.group(1), m.group(2))


def _ds4_hf(ck: Checkpoint, gguf: str, n: int, nextn: int) -> list[str]:
    """DeepSeek-V4: the checkpoint tensors (weights with their scales) ``gguf`` is made of; [] when none."""
    if gguf in _DS4_ROOTS:
        return _ds4_with_scale(ck, _DS4_ROOTS[gguf]) if _DS4_ROOTS[gguf] in ck else []
    if gguf.startswith("output_hc_"):  # the MTP layer's own hyper-connection head
        part = gguf.removeprefix("output_hc_").removesuffix(".weight")
        return next(([f"mtp.{i}.hc_head_{part}"] for i in reversed(range(nextn)) if f"mtp.{i}.hc_head_{part}" in ck), [])
    if (blk := _block(gguf)) is None:
        return []
    bid, short = blk
    i = int(bid) - n
    p = f"mtp.{i}."
    if short == "nextn.eh_proj.weight":
        if p + "e_proj.weight" not in ck or p + "h_proj.weight" not in ck:
            return []
        return _ds4_with_scale(ck, p + "e_proj.weight") + _ds4_with_scale(ck, p + "h_proj.weight")
    if short in _DS4_LAYER:
        return _ds4_with_scale(ck, p + _DS4_LAYER[short]) if p + _DS4_LAYER[short] in ck else []
    if short in _DS4_EXPS:
        out: list[str] = []
        while (w := f"{p}ffn.experts.{len(out) // 2}.{_DS4_EXPS[short]}.weight") in ck:
            out += [w, w.removesuffix(".weight") + ".scale"]
        return out
    return []


def _ds4_value(ck: Checkpoint, srcs: list[str]) -> np.ndarray:
    """float32 values of one checkpoint weight (``[w]``, or ``[w, scale]`` for block-scaled F8_E4M3), decoded in
    torch as upstream does: ``weight.float() * scale.float().repeat_interleave(128, 0)[:out]
    .repeat_interleave(128, 1)[:, :in]``."""
    raw, dtype = ck.read(srcs[0]), ck.ref(srcs[0]).dtype
    if dtype != "F8_E4M3":
        return (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else raw.astype(np.float32)
    import torch

    w = torch.from_numpy(np.array(raw).view(np.uint8)).view(torch.float8_e4m3fn).float()
    sc = torch.from_numpy(np.array(ck.read(srcs[1])).view(np.uint8)).view(torch.float8_e8m0fnu).float()
    full = sc.repeat_interleave(128, 0)[:w.shape[0]].repeat_interleave(128, 1)[:, :w.shape[1]]
    return (w * full).numpy()


def _ds4_mxfp4(ck: Checkpoint, srcs: list[str]) -> bytes:
    """ggml's MXFP4 blocks of FP4 experts (``srcs``: weight, scale of each expert), written from the two layouts:
    the source has element ``2k`` in the low nibble of byte ``k`` and one E8M0 scale per 32 elements; a block is
    the scale byte, then 16 bytes holding element ``j`` (low nibble) and ``j + 16`` (high nibble)."""
    out = []
    for w, sc in zip(srcs[::2], srcs[1::2], strict=True):
        packed, scale = np.ascontiguousarray(ck.read(w)).view(np.uint8), np.ascontiguousarray(ck.read(sc)).view(np.uint8)
        rows = packed.shape[0]
        codes = np.empty((rows, packed.shape[1] * 2), np.uint8)
        codes[:, 0::2], codes[:, 1::2] = packed & 0x0F, packed >> 4
        groups = codes.reshape(rows, -1, 32)
        qs = groups[:, :, :16] | (groups[:, :, 16:] << 4)
        out.append(np.concatenate([scale.reshape(rows, -1, 1), qs], axis=2).tobytes())
    return b"".join(out)


def _ds4_values(ck: Checkpoint, gguf: str, srcs: list[str]) -> np.ndarray:
    """The float32 values of a non-expert GGUF tensor: one weight, or ``e_proj`` and ``h_proj`` side by side."""
    if gguf.endswith("nextn.eh_proj.weight"):
        cut = 2 if ck.ref(srcs[0]).dtype == "F8_E4M3" else 1
        return np.concatenate([_ds4_value(ck, srcs[:cut]), _ds4_value(ck, srcs[cut:])], axis=1)
    return _ds4_value(ck, srcs)


#: MiMo-V2: an MTP block's GGUF tensor (after ``blk.{n+i}.``) -> the checkpoint tensors it may come from (after
#: ``model.mtp.layers.{i}.``)
_MIMO_LAYER = {"nextn.eh_proj.weight": ("eh_proj.weight",), "nextn.enorm.weight": ("enorm.weight",),
               "nextn.hnorm.weight": ("hnorm.weight",), "nextn.embed_tokens.weight": ("embed_tokens.weight",),
               "nextn.shared_head_head.weight": ("shared_head.head.weight",),
               "nextn.shared_head_norm.weight": ("shared_head.norm.weight",),
               "layer_output_norm.weight": ("final_layernorm.weight",),
               "attn_norm.weight": ("input_layernorm.weight",),
               "ffn_norm.weight": ("pre_mlp_layernorm.weight", "post_attention_layernorm.weight"),
               "attn_qkv.weight": ("self_attn.qkv_proj.weight",), "attn_qkv.bias": ("self_attn.qkv_proj.bias",),
               "attn_sinks.weight": ("self_attn.attention_sink_bias", "self_attn.attention_sink_bias.weight"),
               "exp_probs_b.bias": ("mlp.gate.e_score_correction_bias",),
               **{k: (v,) for k, v in _GLM_LAYER.items() if k.startswith(("attn_q", "attn_k", "attn_v", "attn_output",
                                                                          "ffn_gate.", "ffn_up.", "ffn_down.",
                                                                          "ffn_gate_inp"))}}
_MIMO_ROOTS = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
               "output.weight": "lm_head.weight"}
_MIMO_ARCHES = ("mimo2",)


def _mimo_hf(ck: Checkpoint, gguf: str, n: int) -> list[str]:
    """MiMo-V2: the checkpoint tensors ``gguf`` is made of (without FP8 scales); [] when none."""
    if gguf in _MIMO_ROOTS:
        return [_MIMO_ROOTS[gguf]] if _MIMO_ROOTS[gguf] in ck else []
    if (blk := _block(gguf)) is None:
        return []
    bid, short = blk
    p = f"model.mtp.layers.{int(bid) - n}."
    if short in _MIMO_LAYER:
        found = next(([p + c] for c in _MIMO_LAYER[short] if p + c in ck), [])
        qkv = [f"{p}self_attn.{x}_proj.weight" for x in "qkv"]
        if not found and short == "attn_qkv.weight" and all(x in ck for x in qkv):
            return qkv  # MiMo-V2-Flash's q / k / v, fused by hf2gguf for llama.cpp's MTP graph
        return found
    if short in _EXPS:
        out: list[str] = []
        while p + f"mlp.experts.{len(out)}.{_EXPS[short]}.weight" in ck:
            out.append(p + f"mlp.experts.{len(out)}.{_EXPS[short]}.weight")
        return out
    return []


def _mimo_select(s: str) -> bool:
    return s.startswith("model.mtp.layers.") or s in _MIMO_ROOTS.values()


def _e4m3(codes: np.ndarray) -> np.ndarray:
    """F8_E4M3 bytes -> float32, from the bit fields (subnormals below exponent 1; ``S.1111.111`` is NaN)."""
    c = np.asarray(codes).view(np.uint8).astype(np.int32)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 0xF, c & 0x7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * np.exp2(e - 7.0))
    return np.where((c & 0x7F) == 0x7F, np.nan, sign * mag).astype(np.float32)


def _scale_inv_fp8(ck: Checkpoint, src: str, cfg: dict[str, Any]) -> tuple[np.ndarray, str]:
    """An F8_E4M3 weight times its ``weight_scale_inv`` (float32), as upstream's FP8 dequantization: each value times
    the scale of its ``weight_block_size`` block; MiMo-V2.5's fused ``qkv_proj`` by its tensor-parallel ranks (8 or
    4, the one whose 128-row scale blocks per rank match the scale's rows), then its ranks' Q, K and V rows
    gathered."""
    sname = src.removesuffix(".weight") + ".weight_scale_inv"
    w, s = _e4m3(ck.read(src)), _values(ck, [sname], False)
    r, c = w.shape
    if src.endswith("qkv_proj.weight"):
        heads, kv = int(cfg["num_attention_heads"]), int(cfg["swa_num_key_value_heads"])
        hd, vd = int(cfg["head_dim"]), int(cfg["v_head_dim"])
        sizes = (heads * hd, kv * hd, kv * vd)
        tp = next(t for t in (8, 4) if r % t == 0 and s.shape[0] == t * -(-(r // t) // 128))
        per, blocks = r // tp, -(-(r // tp) // 128)
        rows = np.arange(r)
        x = w * s[(rows // per) * blocks + (rows % per) // 128][:, np.arange(c) // 128]
        starts = np.cumsum((0,) + tuple(z // tp for z in sizes))
        order = [rank * per + j for part in range(3) for rank in range(tp)
                 for j in range(int(starts[part]), int(starts[part + 1]))]
        return x[order], sname
    qc = cfg.get("quantization_config")
    br, bc = qc["weight_block_size"] if isinstance(qc, dict) else (128, 128)
    return w * s[np.arange(r) // br][:, np.arange(c) // bc], sname


def _fp8(ck: Checkpoint, src: str) -> tuple[np.ndarray, str]:
    """An F8_E4M3 weight's float32 values and its scale's name: times its ``weight_scale_inv`` blocks
    (``quant_method: fp8``, :func:`_scale_inv_fp8`), or times its ModelOpt ``weight_scale`` (one float, or one per row)."""
    scale = src.removesuffix(".weight") + ".weight_scale"
    if src + "_scale_inv" in ck or scale not in ck:
        return _scale_inv_fp8(ck, src, ck.config)
    w, s = _e4m3(ck.read(src)), _values(ck, [scale], False).reshape(-1)
    return w * (s[:1] if s.size == 1 else s).reshape(-1, 1), scale


#: GGUF names that upstream adds one to (its rule on the renamed HF name: ``*norm.weight``)
_PLUS_ONE = re.compile(r"(output_norm|blk\.\d+\.(attn_norm|post_attention_norm|attn_q_norm|attn_k_norm|"
                       r"nextn\.enorm|nextn\.hnorm|nextn\.shared_head_norm))\.weight")


def _hf(ck: Checkpoint, gguf: str, n: int) -> list[str]:
    """The checkpoint tensors ``gguf`` is made of (several for an expert stack); [] when none is found."""
    def pick(cands: tuple[str, ...]) -> list[str]:
        lm = [c.replace("model.", "model.language_model.", 1) for c in cands if c.startswith("model.")]
        return [next(c for c in (*lm, *cands) if c in ck)] if any(c in ck for c in (*lm, *cands)) else []

    if gguf in _ROOTS:
        return pick(_ROOTS[gguf])
    if (blk := _block(gguf)) is None:
        return []
    bid, short = blk
    i = int(bid) - n
    if short in _NEXTN:
        return pick((_NEXTN[short], "model." + _NEXTN[short]))
    if short in _LAYER:
        return pick((f"mtp.layers.{i}.{_LAYER[short]}", f"model.mtp.layers.{i}.{_LAYER[short]}"))
    if short in _EXPS:
        out: list[str] = []
        e = 0
        while True:
            got = pick((f"mtp.layers.{i}.mlp.experts.{e}.{_EXPS[short]}.weight",
                        f"model.mtp.layers.{i}.mlp.experts.{e}.{_EXPS[short]}.weight"))
            if not got:
                break
            out += got
            e += 1
        if out:
            return out
        fused = "down_proj" if short == "ffn_down_exps.weight" else "gate_up_proj"  # transformers' fused stacks
        return pick(tuple(f"{p}mtp.layers.{i}.mlp.experts.{fused}{w}" for p in ("", "model.") for w in ("", ".weight")))
    return []


def _gate_up_half(x: np.ndarray, short: str, src: str) -> np.ndarray:
    """A fused ``gate_up_proj`` stack ``[experts, 2 x ff, hidden]`` -> the half ``short`` is (gate: each expert's
    first ``ff`` rows, up: its last); any other tensor as it is."""
    if not src.removesuffix(".weight").endswith(".gate_up_proj"):
        return x
    ff = x.shape[1] // 2
    return np.ascontiguousarray(x[:, :ff] if short == "ffn_gate_exps.weight" else x[:, ff:])


def _glm_hf(ck: Checkpoint, gguf: str, table: dict[str, str] = _GLM_LAYER) -> list[str]:
    """GLM-4.5 / GLM-5: the checkpoint tensors ``gguf`` is made of (the NextN layers keep their index); [] when
    none."""
    def pick(cand: str) -> list[str]:
        return next(([c] for c in (cand.replace("model.", "model.language_model.", 1), cand) if c in ck), [])

    if gguf in _ROOTS:
        return next((got for c in _ROOTS[gguf] if c.startswith(("model.", "lm_head")) for got in [pick(c)] if got), [])
    if (blk := _block(gguf)) is None:
        return []
    bid, short = blk
    if short in table:
        return pick(f"model.layers.{bid}.{table[short]}")
    if short in _EXPS:
        out: list[str] = []
        while got := pick(f"model.layers.{bid}.mlp.experts.{len(out)}.{_EXPS[short]}.weight"):
            out += got
        return out
    return []


def _nemo_hf(ck: Checkpoint, gguf: str) -> list[str]:
    """Nemotron-H: the checkpoint tensors ``gguf`` is made of; [] when none."""
    if gguf in _NEMO_ROOTS:
        return [_NEMO_ROOTS[gguf]] if _NEMO_ROOTS[gguf] in ck else []
    short = gguf.split(".", 2)[-1]
    if short in _NEMO_LAYER:
        i, name = _NEMO_LAYER[short]
        return [f"mtp.layers.{i}.{name}"] if f"mtp.layers.{i}.{name}" in ck else []
    if short in _EXPS:
        out: list[str] = []
        while f"mtp.layers.1.mixer.experts.{len(out)}.{_EXPS[short]}.weight" in ck:
            out.append(f"mtp.layers.1.mixer.experts.{len(out)}.{_EXPS[short]}.weight")
        return out
    return []


def _nemo_rope_rows(x: np.ndarray, gguf: str, cfg: dict[str, object]) -> np.ndarray:
    """Nemotron-H's q/k (weights and biases): per head, the two halves of its rows interleaved (row ``2i + c`` is
    row ``c * head_rows / 2 + i``), q over ``num_attention_heads`` heads, k over ``num_key_value_heads``."""
    short = gguf.split(".", 2)[-1]
    key = {"attn_q": "num_attention_heads", "attn_k": "num_key_value_heads"}.get(short.split(".")[0])
    heads = cfg.get(key) if key else None
    if not isinstance(heads, int) or heads <= 0:
        return x
    half = x.shape[0] // heads // 2
    return np.ascontiguousarray(x.reshape(heads, 2, half, *x.shape[1:]).swapaxes(1, 2)).reshape(x.shape)


def _nemo_select(s: str) -> bool:
    return s.startswith("mtp.") or s in _NEMO_ROOTS.values()


def _tied(hf_dir: Path) -> bool:
    """Whether the checkpoint's config (or its text config) sets ``tie_word_embeddings`` true."""
    try:
        cfg = load_json(hf_dir / "config.json")
    except ConvertError:
        return False
    text = cfg.get("text_config")
    return {**cfg, **(text if isinstance(text, dict) else {})}.get("tie_word_embeddings") is True


def _glm_select(n: int, *, tied: bool = False) -> Callable[[str], bool]:
    """GLM-4.5 / GLM-5 / GLM-4.7-Flash: the embedding, final norm, head (not when ``tied``: upstream's
    ``DeepseekV2Model`` drops it) and every layer from ``n`` on."""
    roots = ("model.embed_tokens.weight", "model.norm.weight") + (() if tied else ("lm_head.weight",))

    def keep(s: str) -> bool:
        b = s.replace("language_model.", "")
        parts = b.split(".")
        return b in roots or (
            len(parts) > 3 and parts[:2] == ["model", "layers"] and parts[2].isdecimal() and int(parts[2]) >= n)
    return keep


def _qwen_select(s: str) -> bool:
    return (s.replace("model.language_model.", "model.").replace("model.mtp.", "mtp.").startswith("mtp.")
            or s in {c for v in _ROOTS.values() for c in v}
            or s.replace("model.language_model.", "model.") in {c for v in _ROOTS.values() for c in v})


def _values(ck: Checkpoint, srcs: list[str], plus_one: bool) -> np.ndarray:
    """float32 values of ``srcs`` (several: stacked); ``plus_one``: the norm's ``+ 1``, taken in float16 for an F16
    source (upstream keeps F16 tensors F16 until the write) and in float32 for the others."""
    arrays = []
    for s in srcs:
        raw, dtype = ck.read(s), ck.ref(s).dtype
        if plus_one and dtype == "F16":
            arrays.append((np.asarray(raw).view(np.float16) + np.float16(1)).astype(np.float32))
            continue
        x = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else raw.astype(np.float32)
        arrays.append(x + np.float32(1) if plus_one else x)
    return np.stack(arrays) if len(arrays) > 1 else arrays[0]


def _mla_split(x: np.ndarray, short: str, ne: list[int]) -> np.ndarray:
    """GLM-5's ``kv_b_proj`` values ``[heads x (nope + v), kv_lora_rank]`` -> ``attn_k_b`` (GGUF ne ``[nope,
    kv_lora_rank, heads]``: each head's first ``nope`` rows, transposed) or ``attn_v_b`` (ne ``[kv_lora_rank, v,
    heads]``: each head's last ``v`` rows), the sizes read from the GGUF tensor's own shape."""
    heads = ne[2]
    kv = x.reshape(heads, x.shape[0] // heads, x.shape[1])
    if short == "attn_k_b.weight":
        return np.ascontiguousarray(kv[:, :ne[0], :].transpose(0, 2, 1))
    return np.ascontiguousarray(kv[:, kv.shape[1] - ne[1]:, :])


def _stored(raw: bytes, qt: QT) -> np.ndarray:
    """The float32 values of a tensor's bytes of type ``qt``."""
    if qt == QT.F32:
        return np.frombuffer(raw, np.float32)
    if qt == QT.F16:
        return np.frombuffer(raw, np.float16).astype(np.float32)
    if qt == QT.BF16:
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(quants.dequantize(np.frombuffer(raw, np.uint8).reshape(-1, 34), qt), np.float32).reshape(-1)


def _count(g: GGUFWeights, key: str) -> int:
    """A layer count of the sidecar's header; ConvertError when it is missing or not a non-negative integer."""
    v = as_int(g.value(key))
    if v is None or v < 0:
        raise ConvertError(f"{g.path}: {key} is {g.value(key)!r}, expected a layer count (an MTP sidecar's header "
                           "has one)")
    return v


def sidecar_rows(g: GGUFWeights, hf_dir: str | Path, *, quality: bool = True) -> Proof:
    """Every tensor of the MTP sidecar ``g`` (the file verify opened) against the checkpoint (see the module
    docstring), and the layer-count keys."""
    f = g.file
    arch = f.kvs["general.architecture"].value
    n_all, nextn = (_count(g, f"{arch}.{k}") for k in ("block_count", "nextn_predict_layers"))
    glm, nemo = arch in _GLM_ARCHES, arch in _NEMO_ARCHES
    ds4, mimo = arch in _DS4_ARCHES, arch in _MIMO_ARCHES
    select = (_glm_select(n_all - nextn, tied=arch in _MLA_ARCHES and _tied(Path(hf_dir))) if glm
              else _nemo_select if nemo else _ds4_select if ds4 else _mimo_select if mimo else _qwen_select)
    ck = Checkpoint(Path(hf_dir), select=select)
    rows = Proof(FAMILY, LAYOUT, quality_note=QUALITY_NOTE, notes=[NO_FORWARD])
    compared: set[str] = set()
    sources: set[str] = set()
    problems: list[str] = []
    try:
        for t in f.tensors:
            srcs = (_glm_hf(ck, t.name, _DSA_LAYER if arch in _MLA_ARCHES else _GLM_LAYER) if glm
                    else _nemo_hf(ck, t.name) if nemo else _ds4_hf(ck, t.name, n_all - nextn, nextn) if ds4
                    else _mimo_hf(ck, t.name, n_all - nextn) if mimo
                    else _hf(ck, t.name, n_all - nextn))
            if not srcs:
                problems.append(f"{t.name}: no checkpoint tensor becomes it under upstream's --mtp rules")
                continue
            qt = QT[t.type_name]
            got = bytes(f.tensor_bytes(t.name))
            if qt == QT.MXFP4:  # a lossless repack: the bytes themselves, rebuilt from the FP4 codes and scales
                ok = got == _ds4_mxfp4(ck, srcs)
                rows.outputs.append(OutputCheck(t.name, list(t.ne), max_abs=0.0, grade="exact" if ok else "differs",
                                                passed=ok, detail="" if ok else "bytes differ from the checkpoint's "
                                                "FP4 codes and scales repacked into MXFP4 blocks"))
                if quality:
                    rows.quality.append(OutputCheck(t.name, list(t.ne), max_abs=0.0, grade="lossless repack"))
                compared.add(t.name)
                sources.update(srcs)
                continue
            if ds4:
                x = _ds4_values(ck, t.name, srcs)
            elif mimo and t.name.endswith("attn_qkv.weight") and len(srcs) == 3:  # separate q / k / v, one after another
                fp8 = [_scale_inv_fp8(ck, s, ck.config) if ck.ref(s).dtype == "F8_E4M3" else (_values(ck, [s], False), "")
                       for s in srcs]
                x = np.concatenate([v for v, _ in fp8])
                srcs = [*srcs, *(scale for _, scale in fp8 if scale)]
            elif mimo and len(srcs) == 1 and ck.ref(srcs[0]).dtype == "F8_E4M3":
                x, scale = _scale_inv_fp8(ck, srcs[0], ck.config)
                srcs = [*srcs, scale]
            elif any(ck.ref(s).dtype == "F8_E4M3" for s in srcs):  # block-scaled or ModelOpt FP8
                fp8 = [_fp8(ck, s) if ck.ref(s).dtype == "F8_E4M3" else (_values(ck, [s], False), "") for s in srcs]
                x = np.stack([v for v, _ in fp8]) if len(fp8) > 1 else fp8[0][0]
                srcs = [*srcs, *(scale for _, scale in fp8 if scale)]
            else:
                x = _values(ck, srcs, not glm and not nemo and not mimo and _PLUS_ONE.fullmatch(t.name) is not None)
            short = t.name.split(".", 2)[-1]
            if short in _EXPS and len(srcs) == 1:
                x = _gate_up_half(x, short, srcs[0])
            if arch in _MLA_ARCHES and short in ("attn_k_b.weight", "attn_v_b.weight"):
                x = _mla_split(x, short, list(t.ne))
            if nemo:
                x = _nemo_rope_rows(x, t.name, ck.config.get("text_config", ck.config))
            compared.add(t.name)
            sources.update(srcs)
            n_values = int(np.prod(t.ne))
            if x.size != n_values:
                rows.outputs.append(OutputCheck(t.name, list(t.ne), grade="differs", passed=False,
                                                detail=f"{n_values:,} values; the checkpoint's {', '.join(srcs)} "
                                                f"make {x.size:,}"))
                continue
            want = np.ascontiguousarray(quants.quantize(x, qt)).view(np.uint8).tobytes()
            stored = _stored(got, qt)
            ok = got == want
            diff = float(np.max(np.abs(stored.reshape(-1)[:x.size] - x.reshape(-1)))) if x.size else 0.0
            rows.outputs.append(OutputCheck(t.name, list(t.ne), max_abs=0.0 if ok else diff,
                                            grade="exact" if ok else "differs", passed=ok,
                                            detail="" if ok else f"bytes differ from the checkpoint rounded to {qt.name}"))
            if quality:
                rows.quality.append(OutputCheck(t.name, list(t.ne), max_abs=diff, grade="rounding of " + qt.name))
        rows.outputs += [OutputCheck("tensors", [], grade="missing", passed=False, detail=p) for p in problems]
        names = list(ck.names)
        rows.compared(compared, names, sources)
        trunk = sorted({int(n.split(".")[1]) for n in (t.name for t in f.tensors) if n.startswith("blk.")})
        rows.metadata.append(MetadataCheck.compare(f"{arch}.nextn_predict_layers", nextn, len(trunk)))
        cfg = ck.config.get("text_config", ck.config)
        rows.metadata.append(MetadataCheck.compare(f"{arch}.block_count", n_all, cfg.get("num_hidden_layers", 0) + len(trunk)))
        rows.hparams = {"trunk_layers": n_all - nextn, "mtp_layers": nextn}
    finally:
        ck.close()
    return rows


def _proof(job: Job) -> Proof:
    return sidecar_rows(job.g, job.hf_dir, quality=job.quality)


#: verify's role: no forward, every tensor against the checkpoint (the checkpoint is the target: no target needed)
PROOF = TensorChecks(_proof)
