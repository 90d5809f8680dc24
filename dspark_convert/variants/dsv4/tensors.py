"""Tensor-level proof of a DeepSeek-V4 DSpark GGUF against its checkpoint (the variant has no reference forward).

For a tensor (or a row chunk / one expert of it):

1. the checkpoint's values are dequantized in **torch**, the way upstream does it (``float8_e4m3fn`` weights
   times ``float8_e8m0fnu`` tile scales repeated over 128x128 tiles; FP4 e2m1 codes through the e2m1 table times
   the E8M0 scale of each group of 32; BF16 widened; F32 as is): independent of the converter's numpy kernels;
2. those values go through the rounding of the GGUF type (:func:`reference.storage.round_values`, the one the
   torch forward's weights go through too: gguf-py's quantizer then dequantizer for Q8_0 and BF16, numpy's cast for
   F16, nothing for F32; no torch and none of the converter's code); the MXFP4 stacks are a lossless repack, so
   their checkpoint values are compared as they are;
3. the GGUF's bytes are dequantized with **gguf-py** and must equal step 2 exactly (NaN matches NaN, -0 matches
   +0: ggml's MXFP4 table has no negative zero).

The largest deviation from the unrounded checkpoint values is reported too (the Q8_0 / F16 rounding error).
torch is imported inside the functions (verify is the only command that needs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT

from ...reference.storage import round_values

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@dataclass
class TensorCheck:
    """One GGUF tensor compared with the checkpoint."""

    name: str
    type: str
    shape: list[int]
    elements: int = 0
    mismatches: int = 0
    max_abs: float = 0.0        # max |GGUF value - rounded checkpoint value| over finite values (0: exact)
    max_rounding: float = 0.0   # max |GGUF value - unrounded checkpoint value| over finite values
    first_mismatch: str = ""
    passed: bool = True

    def add(self, ref: np.ndarray, got: np.ndarray, rounded: np.ndarray) -> None:
        """Fold one chunk in: ``ref`` unrounded checkpoint values, ``rounded`` after the GGUF type's rounding,
        ``got`` the GGUF's values (all float32, same shape)."""
        same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
        bad = int(same.size - np.count_nonzero(same))
        if bad and not self.mismatches:
            i = int(np.flatnonzero(~same.reshape(-1))[0])
            self.first_mismatch = (f"element {self.elements + i}: GGUF {float(got.reshape(-1)[i])!r}, checkpoint "
                                   f"{float(ref.reshape(-1)[i])!r} -> {float(rounded.reshape(-1)[i])!r} after rounding")
        self.mismatches += bad
        self.elements += int(ref.size)
        fin = np.isfinite(ref) & np.isfinite(got) & np.isfinite(rounded)
        if fin.any():
            g64 = got[fin].astype(np.float64)
            self.max_rounding = max(self.max_rounding, float(np.max(np.abs(g64 - ref[fin]))))
            self.max_abs = max(self.max_abs, float(np.max(np.abs(g64 - rounded[fin]))))
        self.passed = self.mismatches == 0


# ---------------------------------------------------------------------------------------------- checkpoint side
def fp8_values(weight: np.ndarray, scale: np.ndarray, *, row0: int = 0) -> np.ndarray:
    """Rows ``[row0, row0 + len(weight))`` of a block-scaled FP8 weight, dequantized in torch as upstream
    (``weight.float() * scale.float().repeat_interleave(128, 0)[rows].repeat_interleave(128, 1)[:, :in]``);
    ``scale`` is the whole scale tensor."""
    import torch

    w = torch.from_numpy(np.ascontiguousarray(weight).view(np.uint8)).view(torch.float8_e4m3fn).float()
    s = torch.from_numpy(np.ascontiguousarray(scale).view(np.uint8)).view(torch.float8_e8m0fnu).float()
    full = s.repeat_interleave(128, 0)[row0:row0 + w.shape[0]].repeat_interleave(128, 1)[:, :w.shape[1]]
    return (w * full).numpy()


def fp4_values(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """FP4 e2m1 codes (two per byte, element 2i low) times the E8M0 scale of each 32 values, in torch."""
    import torch

    p = torch.from_numpy(np.ascontiguousarray(packed).view(np.uint8))
    codes = torch.stack((p & 0x0F, p >> 4), dim=-1).reshape(p.shape[0], -1).long()
    vals = torch.tensor(E2M1, dtype=torch.float32)[codes]
    s = torch.from_numpy(np.ascontiguousarray(scale).view(np.uint8)).view(torch.float8_e8m0fnu).float()
    return (vals * s.repeat_interleave(32, 1)).numpy()


def plain_values(raw: np.ndarray, dtype: str) -> np.ndarray:
    """BF16 bits / F16 / F32 source values as float32."""
    if dtype == "BF16":
        return (np.asarray(raw).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(raw).astype(np.float32)


# ---------------------------------------------------------------------------------------------- driver
ROWS_PER_CHUNK_F32 = 1 << 22  #: float32 values per compared chunk (16 MiB), whatever the tensor size


#: verify's own spelling of the DeepSeek-V4 DSpark names (spec/dsv4-dspark.md §3), written apart from the
#: converter's table (``variants/dsv4/names.py``) so that a wrong row there shows as a failing tensor here:
#: HF name inside stage ``mtp.{s}.`` -> GGUF name after ``blk.{s}.``
STAGE_GGUF: dict[str, str] = {
    "attn.attn_sink": "attn_sinks.weight", "attn.wq_a.weight": "attn_q_a.weight", "attn.wq_b.weight": "attn_q_b.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight", "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight", "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight", "attn_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight", "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight", "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
    **{f"hc_{p}_{k}": f"hc_{p}_{k}.weight" for p in ("attn", "ffn") for k in ("fn", "base", "scale")},
}
#: names lifted out of the stage (the stage number is dropped) -> GGUF name
ROOT_GGUF: dict[str, str] = {
    "main_proj.weight": "fc.weight", "main_norm.weight": "enc.output_norm.weight", "norm.weight": "output_norm.weight",
    **{f"hc_head_{k}": f"output_hc_{k}.weight" for k in ("fn", "base", "scale")},
    "markov_head.markov_w1.weight": "markov_w1.weight", "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight",
}
#: routed expert projection -> GGUF expert stack after ``blk.{s}.``
EXPERT_GGUF: dict[str, str] = {"w1": "ffn_gate_exps.weight", "w2": "ffn_down_exps.weight", "w3": "ffn_up_exps.weight"}
_MTP = re.compile(r"mtp\.(\d+)\.(.+)")
_MTP_EXPERT = re.compile(r"ffn\.experts\.(\d+)\.(w[123])\.weight")


def source_map(names: list[str]) -> dict[str, tuple[str, ...]]:
    """GGUF tensor name -> checkpoint names it comes from: ``(weight,)``, ``(weight, scale)`` for FP8, and for an
    expert stack ``(w_e0.weight, w_e0.scale, w_e1.weight, ...)``; from this module's own name tables.

    Example:
        >>> source_map(["mtp.0.attn.wkv.weight", "mtp.0.attn.wkv.scale", "mtp.1.norm.weight",
        ...             "mtp.0.ffn.experts.1.w2.weight", "mtp.0.ffn.experts.1.w2.scale", "mtp.0.ffn.experts.0.w2.weight",
        ...             "mtp.0.ffn.experts.0.w2.scale"])
        ... # doctest: +NORMALIZE_WHITESPACE
        {'blk.0.attn_kv.weight': ('mtp.0.attn.wkv.weight', 'mtp.0.attn.wkv.scale'),
         'output_norm.weight': ('mtp.1.norm.weight',),
         'blk.0.ffn_down_exps.weight': ('mtp.0.ffn.experts.0.w2.weight', 'mtp.0.ffn.experts.0.w2.scale',
                                        'mtp.0.ffn.experts.1.w2.weight', 'mtp.0.ffn.experts.1.w2.scale')}
    """
    have = set(names)
    out: dict[str, tuple[str, ...]] = {}
    experts: dict[str, dict[int, tuple[str, str]]] = {}
    for src in names:
        m = _MTP.fullmatch(src)
        if m is None:
            continue
        stage, rest = int(m.group(1)), m.group(2)
        ex = _MTP_EXPERT.fullmatch(rest)
        if ex is not None:
            scale = src.removesuffix(".weight") + ".scale"
            experts.setdefault(f"blk.{stage}.{EXPERT_GGUF[ex.group(2)]}", {})[int(ex.group(1))] = (src, scale)
            continue
        g = ROOT_GGUF.get(rest) or (f"blk.{stage}.{STAGE_GGUF[rest]}" if rest in STAGE_GGUF else None)
        if g is not None:
            scale = src.removesuffix(".weight") + ".scale"
            out[g] = (src, scale) if src.endswith(".weight") and scale in have else (src,)
    for g, per in experts.items():
        out[g] = tuple(x for e in sorted(per) for x in per[e])
    return out


def check_tensor(g: Any, ck: Any, name: str, sources: tuple[str, ...]) -> TensorCheck:
    """Compare GGUF tensor ``name`` (``g``: :class:`reference.weights.GGUFWeights`) with its checkpoint sources
    (``ck``: :class:`hf.checkpoint.Checkpoint`), chunk by chunk."""
    qt = g.qtype(name)
    shape = list(g.shape(name))
    chk = TensorCheck(name, qt.name if qt is not None else "?", shape[::-1])
    if qt is None:
        chk.passed, chk.first_mismatch = False, "unknown GGML type"
        return chk
    if qt == QT.MXFP4:  # one expert at a time: [rows, cols] per expert
        rows = shape[1]
        for e in range(0, len(sources), 2):
            w, s = sources[e], sources[e + 1]
            ref = fp4_values(ck.read_rows(w, 0, ck.shape(w)[0]), ck.read_rows(s, 0, ck.shape(s)[0]))
            k = e // 2
            chk.add(ref, g.rows(name, slice(k * rows, (k + 1) * rows)), ref)
        return chk
    src = sources[0]
    src_shape = ck.shape(src)
    n_rows = src_shape[0] if src_shape else 1
    cols = max(1, int(np.prod(src_shape[1:]))) if len(src_shape) > 1 else 1
    step = max(128, ROWS_PER_CHUNK_F32 // cols // 128 * 128)
    scale = ck.read_rows(sources[1], 0, ck.shape(sources[1])[0]) if len(sources) == 2 else None
    for a in range(0, n_rows, step):
        b = min(n_rows, a + step)
        raw = ck.read_rows(src, a, b) if src_shape else ck.read_rows(src, 0, 1)
        ref = fp8_values(raw, scale, row0=a) if scale is not None else plain_values(raw, ck.ref(src).dtype)
        ref = ref.reshape(b - a, -1) if len(shape) > 1 else ref.reshape(1, -1)
        got = g.rows(name, slice(a, b)) if len(shape) > 1 else g.array(name).reshape(1, -1)
        chk.add(ref, got.reshape(ref.shape), round_values(ref, qt.name))
    return chk


def dsv4_tensor_checks(gguf_path: str | Path, ck: Any) -> tuple[list[TensorCheck], list[str]]:
    """Every tensor of a DeepSeek-V4 DSpark GGUF against the checkpoint ``ck``; returns (checks, problems) where
    problems name GGUF tensors without a checkpoint source and draft tensors the GGUF lacks."""
    from ...reference.weights import GGUFWeights

    g = GGUFWeights(gguf_path)
    smap = source_map(list(ck.names))
    present = [t.name for t in g.file.tensors]
    problems = [f"GGUF tensor '{n}' has no source in the checkpoint" for n in present if n not in smap]
    problems += [f"checkpoint tensor '{smap[n][0]}' is missing from the GGUF (expected '{n}')"
                 for n in smap if n not in set(present)]
    checks = [check_tensor(g, ck, n, smap[n]) for n in present if n in smap]
    g.file.close()
    return checks, problems
