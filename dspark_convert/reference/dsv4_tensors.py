"""Tensor-level proof of a DeepSeek-V4 DSpark GGUF against its checkpoint (no DSV4 reference forward yet).

For a tensor (or a row chunk / one expert of it):

1. the checkpoint's values are dequantized in **torch**, the way upstream does it (``float8_e4m3fn`` weights
   times ``float8_e8m0fnu`` tile scales repeated over 128x128 tiles; FP4 e2m1 codes through the e2m1 table times
   the E8M0 scale of each group of 32; BF16 widened; F32 as is): independent of the converter's numpy kernels;
2. those values go through the rounding of the GGUF type with **gguf-py** (``quants.quantize`` then
   ``quants.dequantize`` for Q8_0, a cast for F16 / BF16; nothing for F32 and for the lossless MXFP4 repack);
3. the GGUF's bytes are dequantized with **gguf-py** and must equal step 2 exactly (NaN matches NaN, -0 matches
   +0: ggml's MXFP4 table has no negative zero).

The largest deviation from the unrounded checkpoint values is reported too (the Q8_0 / F16 rounding error).
torch is imported inside the functions (verify is the only command that needs it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@dataclass
class TensorCheck:
    """One GGUF tensor compared with the checkpoint."""

    name: str
    type: str
    shape: list[int]
    elements: int = 0
    mismatches: int = 0
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
        fin = np.isfinite(ref) & np.isfinite(got)
        if fin.any():
            self.max_rounding = max(self.max_rounding, float(np.max(np.abs(got[fin].astype(np.float64) - ref[fin]))))
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


# ---------------------------------------------------------------------------------------------- GGUF side
def rounded(values: np.ndarray, ggml_type: QT) -> np.ndarray:
    """``values`` after the rounding of ``ggml_type`` (gguf-py's quantizers), as float32."""
    if ggml_type in (QT.F32, QT.MXFP4):
        return values
    with np.errstate(over="ignore", invalid="ignore"):
        return quants.dequantize(quants.quantize(np.ascontiguousarray(values, np.float32), ggml_type), ggml_type)


def gguf_values(raw: np.ndarray, ggml_type: QT) -> np.ndarray:
    """The GGUF tensor bytes (rows of the byte shape) dequantized by gguf-py, float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        return quants.dequantize(np.asarray(raw).view(np.uint8), ggml_type).astype(np.float32, copy=False)
