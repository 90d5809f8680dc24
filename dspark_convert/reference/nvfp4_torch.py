"""The torch side's own reading of ModelOpt NVFP4 weights (independent of the converter's numpy repack).

``value(i, j) = e2m1(code(i, j)) * float8_e4m3fn(weight_scale[i, j // 16]) * weight_scale_2``, where ``code(i, j)``
is the low nibble of byte ``j // 2`` of row ``i`` for even ``j`` and the high nibble for odd ``j`` (ModelOpt's
packing), and e2m1 is 1 sign, 2 exponent (bias 1) and 1 mantissa bit, decoded here from those bits; the E4M3 block
scales are decoded by torch's own ``float8_e4m3fn`` dtype. No code is shared with :mod:`dspark_convert.formats.quant`.
"""

from __future__ import annotations

import torch


def _e2m1_values() -> torch.Tensor:
    """The 16 e2m1 values from the bit fields: subnormal ``m/2`` at exponent 0, else ``(1 + m/2) * 2^(e-1)``."""
    code = torch.arange(16)
    sign = 1.0 - 2.0 * ((code >> 3) & 1).float()
    exp, man = ((code >> 1) & 3).float(), (code & 1).float()
    mag = torch.where(exp == 0, man * 0.5, (1.0 + man * 0.5) * torch.pow(2.0, exp - 1.0))
    return sign * mag


E2M1 = _e2m1_values()


def dequant_modelopt_nvfp4(weight: torch.Tensor, scale: torch.Tensor, scale2: torch.Tensor) -> torch.Tensor:
    """ModelOpt NVFP4 rows (U8 ``[r, c/2]``, E4M3 ``[r, c/16]``, scalar ``weight_scale_2``) -> float32 ``[r, c]``.

    Example:
        >>> w = torch.tensor([[0x21] * 8], dtype=torch.uint8)      # codes 1, 2, 1, 2, ...: 0.5, 1.0, ...
        >>> s = torch.tensor([[1.0]]).to(torch.float8_e4m3fn)
        >>> dequant_modelopt_nvfp4(w, s, torch.tensor(2.0))[0, :4].tolist()
        [1.0, 2.0, 1.0, 2.0]
    """
    w = weight.to(torch.uint8)
    rows = w.shape[0]
    codes = torch.stack([w & 0x0F, w >> 4], dim=-1).reshape(rows, -1).long()   # even column: low nibble
    vals = E2M1[codes]
    if scale.dtype == torch.uint8:                    # raw bytes: read them as float8_e4m3fn
        scale = scale.view(torch.float8_e4m3fn)
    s = scale.float().repeat_interleave(16, dim=1)
    return vals * s * scale2.float().reshape(())
