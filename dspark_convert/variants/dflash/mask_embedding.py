"""A learned mask embedding that a MiMo-style DFlash draft ships beside its weights as ``mask_embedding.pt``: a torch
pickle of ``{"mask_token_id": int, "embedding": Tensor[hidden]}`` (spec/upstream-b11434.md §2.2). The converter
(``dflash_mimo.py``, ``upgrade.py``) and the torch side of ``verify`` (``torch_forward.py``) read it.

A file of exactly that shape as ``torch.save`` writes it (a zip archive, little-endian, a contiguous tensor) is read
without torch: its pickle is unpickled with a closed list of globals (the tensor rebuild, the storage classes of the
float and integer dtypes, ``OrderedDict``) and the storage bytes come from the archive. Anything else goes to
``torch.load(weights_only=True)`` (nothing in the file can run), and anything but that dict is refused in one line.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConvertError, clip_value
from ...hf.pickles import weights_only_load

MASK_FILE = "mask_embedding.pt"
_FLOATS = ("float32", "float16", "bfloat16", "float64")
#: ``torch.<Name>Storage`` -> the numpy dtype of its elements (bfloat16 read as its 16-bit pattern)
_STORAGES = {"FloatStorage": "<f4", "HalfStorage": "<f2", "BFloat16Storage": "<u2", "DoubleStorage": "<f8",
             "LongStorage": "<i8", "IntStorage": "<i4"}


class _NotPlain(Exception):
    """The file is not the plain shape :func:`_read_plain` reads: torch reads (or refuses) it."""


@dataclass(frozen=True)
class _Tensor:
    values: np.ndarray  # float32 for a float storage, int64 for an integer one
    floating: bool


def _rebuild(storage: tuple[str, bytes], offset: int, size: tuple[int, ...], stride: tuple[int, ...], *_: Any) -> _Tensor:
    kind, raw = storage
    n = int(np.prod(size)) if size else 1
    want = tuple(int(np.prod(size[i + 1:])) for i in range(len(size)))
    if not isinstance(offset, int) or tuple(stride) != want or len(size) > 1:
        raise _NotPlain
    arr = np.frombuffer(raw, dtype=kind)
    if offset < 0 or offset + n > arr.size:
        raise _NotPlain
    arr = arr[offset:offset + n].reshape(size)
    if kind == "<u2":  # bfloat16: the upper half of a float32
        return _Tensor((arr.astype(np.uint32) << 16).view(np.float32), True)
    floating = kind[1] == "f"
    return _Tensor(arr.astype(np.float32 if floating else np.int64), floating)


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` of a ``torch.save`` archive with a closed list of globals."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str) -> None:
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix = archive, prefix

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in _STORAGES:
            return _STORAGES[name]
        raise _NotPlain

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and pid[1] in _STORAGES.values()):
            raise _NotPlain
        try:
            return pid[1], self.archive.read(f"{self.prefix}data/{pid[2]}")
        except KeyError:
            raise _NotPlain from None


def _read_plain(path: Path) -> tuple[int, np.ndarray]:
    """The plain shape (see the module docstring) read without torch; :class:`_NotPlain` for anything else."""
    try:
        with zipfile.ZipFile(path) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pkl) != 1:
                raise _NotPlain
            prefix = pkl[0][: -len("data.pkl")]
            if prefix + "byteorder" in z.namelist() and z.read(prefix + "byteorder") != b"little":
                raise _NotPlain
            obj = _PlainUnpickler(z.read(pkl[0]), z, prefix).load()
    except (_NotPlain, zipfile.BadZipFile, OSError, pickle.UnpicklingError, ValueError, TypeError, EOFError,
            AttributeError, IndexError, KeyError):
        raise _NotPlain from None
    if not isinstance(obj, dict) or set(obj) != {"mask_token_id", "embedding"}:
        raise _NotPlain
    mask_id, emb = obj["mask_token_id"], obj["embedding"]
    if isinstance(mask_id, _Tensor) and mask_id.values.size == 1 and not mask_id.floating:
        mask_id = int(mask_id.values.reshape(-1)[0])
    if isinstance(mask_id, bool) or not isinstance(mask_id, int):
        raise _NotPlain
    if not isinstance(emb, _Tensor) or emb.values.ndim != 1 or not emb.floating:
        raise _NotPlain
    return mask_id, np.array(emb.values, dtype=np.float32)


def read_mask_embedding(path: Path) -> tuple[int, np.ndarray]:
    """``(mask_token_id, embedding as float32 [hidden])`` of a ``mask_embedding.pt``.

    Example:
        >>> mask_id, vec = read_mask_embedding(Path("draft/mask_embedding.pt"))  # doctest: +SKIP
        >>> mask_id, vec.shape  # doctest: +SKIP
        (128799, (32,))
    """
    try:
        return _read_plain(path)
    except _NotPlain:
        pass
    obj = weights_only_load(path, "reading it needs PyTorch (pip install 'dspark-convert[torch]')")
    import torch

    want = "a dict of 'mask_token_id' (an integer) and 'embedding' (a 1-D float tensor)"
    if not isinstance(obj, dict) or set(obj) != {"mask_token_id", "embedding"}:
        found = f"a dict with keys {clip_value(sorted(map(str, obj)))}" if isinstance(obj, dict) \
            else f"a {type(obj).__name__}"
        raise ConvertError(f"{path}: holds {found}, expected {want}")
    mask_id, emb = obj["mask_token_id"], obj["embedding"]
    if isinstance(mask_id, torch.Tensor) and mask_id.numel() == 1 and not mask_id.is_floating_point():
        mask_id = int(mask_id.item())
    if isinstance(mask_id, bool) or not isinstance(mask_id, int):
        raise ConvertError(f"{path}: 'mask_token_id' is {clip_value(mask_id)}, expected {want}")
    if not isinstance(emb, torch.Tensor) or emb.dim() != 1 or str(emb.dtype).removeprefix("torch.") not in _FLOATS:
        what = f"a {emb.dim()}-D {str(emb.dtype).removeprefix('torch.')} tensor" if isinstance(emb, torch.Tensor) \
            else f"a {type(emb).__name__}"
        raise ConvertError(f"{path}: 'embedding' is {what}, expected {want}")
    if emb.layout != torch.strided or emb.device.type != "cpu":  # a meta or sparse tensor holds no plain values
        raise ConvertError(f"{path}: 'embedding' is a {emb.layout} tensor on device {emb.device.type}, expected "
                           f"{want} (dense, with its values stored)")
    return mask_id, emb.detach().to(torch.float32).contiguous().numpy().copy()
