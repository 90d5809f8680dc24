"""Safe loading of PyTorch pickle checkpoints (``pytorch_model*.bin``): ``weights_only=True`` only.

Imported only when a checkpoint has no safetensors, so conversions of safetensors checkpoints never import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConvertError

_TORCH_TO_ST = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


@dataclass
class PickledTensor:
    array: np.ndarray  # BF16 as uint16 bits, like the safetensors path
    dtype_str: str


def load_pickle_state_dict(path: Path) -> dict[str, PickledTensor]:
    """Load a pickle state dict with ``torch.load(weights_only=True)``; refuse anything that is not plain tensors."""
    try:
        import torch
    except ImportError:
        raise ConvertError(f"{path}: pickle checkpoints need PyTorch (pip install 'dspark-convert[torch]'), or convert it to safetensors") from None
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for unsafe or corrupt pickles
        raise ConvertError(f"{path}: refused to load: only plain tensor state dicts are accepted (weights_only=True): {str(e).splitlines()[0]}") from None
    if not isinstance(sd, dict):
        raise ConvertError(f"{path}: expected a state dict of tensors, found {type(sd).__name__}")
    out: dict[str, PickledTensor] = {}
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            raise ConvertError(f"{path}: entry '{name}' is a {type(t).__name__}, expected a tensor")
        dt = str(t.dtype).removeprefix("torch.")
        if dt not in _TORCH_TO_ST:
            raise ConvertError(f"{path}: tensor '{name}' has unsupported dtype {dt}")
        t = t.contiguous()
        arr = t.view(torch.int16).numpy().view(np.uint16) if dt == "bfloat16" else t.numpy()
        out[name] = PickledTensor(arr, _TORCH_TO_ST[dt])
    return out
