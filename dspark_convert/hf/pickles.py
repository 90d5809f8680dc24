"""Safe loading of PyTorch pickle checkpoints (``pytorch_model*.bin``): ``weights_only=True`` only.

Imported only when a checkpoint has no safetensors, so conversions of safetensors checkpoints never import torch.
A pickle can name any Python callable to run while it loads; torch's weights-only unpickler refuses every global
outside its tensor allow-list before calling it, so a hostile file is refused and nothing in it runs.
"""

from __future__ import annotations

import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConvertError, clip

_TORCH_TO_ST = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


@dataclass
class PickledTensor:
    array: np.ndarray  # BF16 as uint16 bits, like the safetensors path
    dtype_str: str


def pickle_refusal(path: Path, e: Exception) -> ConvertError:
    """One line for a failed ``torch.load``: what was refused (or why the file is unreadable), never torch's advice
    to retry with ``weights_only=False``."""
    import pickle

    text = str(e)
    if isinstance(e, pickle.UnpicklingError):
        m = re.search(r"GLOBAL ([\w.]+)", text)
        what = f"it references '{m.group(1)}', which is not a tensor type" if m else \
            next((ln.strip() for ln in text.splitlines()[1:] if ln.strip() and "weights_only" not in ln
                  and "documentation" not in ln), "it holds objects other than tensors")
        return ConvertError(f"{path}: refused to load: {what}; only plain tensor state dicts are read (torch.load "
                            "with weights_only=True) and nothing in the file was run; convert it to safetensors "
                            "where you trust its source")
    detail = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return ConvertError(f"{path}: cannot be read as a PyTorch checkpoint ({type(e).__name__}: {detail}); expected a "
                        "file written by torch.save (truncated download?)")


def weights_only_load(path: Path, without_torch: str) -> object:
    """``torch.load(path, weights_only=True)`` on the CPU (memory-mapped for the zip format), torch's warnings
    silenced. Raises ConvertError naming ``path``: ``without_torch`` when PyTorch is not installed,
    :func:`pickle_refusal`'s line when torch refuses or cannot read the file."""
    try:
        import torch
    except ImportError:
        raise ConvertError(f"{path}: {without_torch}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # e.g. "Detected pickle protocol 4": noise, not a problem
            # mmap only works for the zip format (torch >= 1.6); a legacy pickle is read into memory
            return torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as e:  # noqa: BLE001 - torch raises many types for unsafe or corrupt pickles
        raise pickle_refusal(path, e) from None


def load_pickle_state_dict(path: Path) -> dict[str, PickledTensor]:
    """Load a pickle state dict with ``torch.load(weights_only=True)``; refuse anything that is not plain tensors.

    Example:
        >>> sd = load_pickle_state_dict(Path("draft/pytorch_model.bin"))  # doctest: +SKIP
        >>> sd["fc.weight"].dtype_str, sd["fc.weight"].array.shape  # doctest: +SKIP
        ('BF16', (64, 192))
    """
    sd = weights_only_load(path, "pickle checkpoints need PyTorch (pip install 'dspark-convert[torch]'), or convert "
                                 "it to safetensors")
    import torch

    if not isinstance(sd, dict):
        raise ConvertError(f"{path}: expected a state dict of tensors, found {type(sd).__name__}")
    out: dict[str, PickledTensor] = {}
    for name, t in sd.items():
        if not isinstance(name, str):
            raise ConvertError(f"{path}: a state dict key is {clip(repr(name))} (a {type(name).__name__}), expected a "
                               "tensor name (a string)")
        if not isinstance(t, torch.Tensor):
            raise ConvertError(f"{path}: entry '{clip(name)}' is a {type(t).__name__}, expected a tensor")
        if t.is_meta or t.layout != torch.strided:
            kind = "a meta tensor (no data)" if t.is_meta else f"a {str(t.layout).removeprefix('torch.')} tensor"
            raise ConvertError(f"{path}: tensor '{clip(name)}' is {kind}, expected a dense tensor with its data")
        dt = str(t.dtype).removeprefix("torch.")
        if dt not in _TORCH_TO_ST:
            raise ConvertError(f"{path}: tensor '{name}' has unsupported dtype {dt} (expected one of {', '.join(_TORCH_TO_ST)})")
        t = t.contiguous()
        arr = t.view(torch.int16).numpy().view(np.uint16) if dt == "bfloat16" else t.numpy()
        out[name] = PickledTensor(arr, _TORCH_TO_ST[dt])
    return out
