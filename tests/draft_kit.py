"""What the draft generators of the test suite share (``new_drafts``, ``nvfp4_drafts``, ``gemma4_drafts``): seeded
random tensors as BF16 or F32, and a safetensors writer (by hand, so that the bytes, and with them the stored
upstream manifests in ``tests/data/oracle-b11434/``, never depend on a library version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: a tensor as written: (safetensors dtype, array of that dtype's bits)
Tensor = tuple[str, np.ndarray]


def bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


class Maker:
    """Random tensors in a fixed order from one seed (plain ones as ``dtype``: BF16, F16 or F32)."""

    def __init__(self, seed: int, dtype: str) -> None:
        self.rng, self.dtype = np.random.default_rng(seed), dtype

    def t(self, *shape: int, scale: float = 0.05, mean: float = 0.0) -> Tensor:
        a = (mean + self.rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)
        if self.dtype == "F16":
            return ("F16", a.astype(np.float16))
        return ("BF16", bf16(a)) if self.dtype == "BF16" else ("F32", a)

    def norm(self, n: int) -> Tensor:
        """A norm weight: mean 1, spread 0.1."""
        return self.t(n, scale=0.1, mean=1.0)


def save_safetensors(path: Path, tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> None:
    """One safetensors file, tensors in name order (then ``__metadata__`` when given), header padded to 8 bytes."""
    header: dict[str, Any] = {}
    blobs, off = [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    path.write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))
