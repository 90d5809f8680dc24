"""A learned mask embedding that a draft ships beside its weights as ``mask_embedding.pt`` (the family modules
that convert such drafts say which): a torch pickle of ``{"mask_token_id": int, "embedding": Tensor[hidden]}``
(spec/upstream-b11434.md §2.2). The converter and the torch side of ``verify`` both read it, with
``torch.load(weights_only=True)`` (nothing in the file can run) and anything but that dict is refused in one line.
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

import numpy as np

from ..errors import ConvertError
from .pickles import pickle_refusal

MASK_FILE = "mask_embedding.pt"
_FLOATS = ("float32", "float16", "bfloat16", "float64")


def read_mask_embedding(path: Path) -> tuple[int, np.ndarray]:
    """``(mask_token_id, embedding as float32 [hidden])`` of a ``mask_embedding.pt``.

    Example:
        >>> mask_id, vec = read_mask_embedding(Path("draft/mask_embedding.pt"))  # doctest: +SKIP
        >>> mask_id, vec.shape  # doctest: +SKIP
        (128799, (32,))
    """
    try:
        import torch
    except ImportError:
        raise ConvertError(f"{path}: reading it needs PyTorch (pip install 'dspark-convert[torch]')") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as e:  # noqa: BLE001 - torch raises many types for unsafe or corrupt pickles
        raise pickle_refusal(path, e) from None
    want = "a dict of 'mask_token_id' (an integer) and 'embedding' (a 1-D float tensor)"
    if not isinstance(obj, dict) or set(obj) != {"mask_token_id", "embedding"}:
        found = f"a dict with keys {sorted(map(str, obj))}" if isinstance(obj, dict) else f"a {type(obj).__name__}"
        raise ConvertError(f"{path}: holds {found}, expected {want}")
    mask_id, emb = obj["mask_token_id"], obj["embedding"]
    if isinstance(mask_id, torch.Tensor) and mask_id.numel() == 1 and not mask_id.is_floating_point():
        mask_id = int(mask_id.item())
    if isinstance(mask_id, bool) or not isinstance(mask_id, int):
        raise ConvertError(f"{path}: 'mask_token_id' is {mask_id!r}, expected {want}")
    if not isinstance(emb, torch.Tensor) or emb.dim() != 1 or str(emb.dtype).removeprefix("torch.") not in _FLOATS:
        what = f"a {emb.dim()}-D {str(emb.dtype).removeprefix('torch.')} tensor" if isinstance(emb, torch.Tensor) \
            else f"a {type(emb).__name__}"
        raise ConvertError(f"{path}: 'embedding' is {what}, expected {want}")
    return mask_id, emb.detach().to(torch.float32).contiguous().numpy().copy()
