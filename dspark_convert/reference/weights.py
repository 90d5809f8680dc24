"""Weight access for the numpy reference forward: a memory-mapped GGUF file and the target's embeddings/lm_head.

Everything here is lazy. :class:`GGUFWeights` sits on the project's header-only reader (gguf-py's ``GGUFReader``
builds a Python object per token string and takes ~10 s on a 129k-token tokenizer); a tensor, or a slice of its
rows, is dequantized on request with ``gguf.quants.dequantize``. So the reference streams a draft layer by layer
and an lm_head chunk by chunk.

:func:`open_gguf` is the one adapter the reference uses, so a different reader can be swapped in later.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

from ..checkpoint import Checkpoint
from ..errors import ConvertError
from ..reader import GGUFFile, read_gguf
from ..transforms import to_float32

#: rows dequantized at once when streaming a large matrix (about 128 MB of float32 for H = 4096)
CHUNK_ROWS = 8192
_INT_TYPES = (QT.I8, QT.I16, QT.I32, QT.I64)


class GGUFWeights:
    """Lazy, dequantizing tensor access on top of :func:`dspark_convert.reader.read_gguf` (header-only parse).

    Example:
        >>> g = GGUFWeights("draft.gguf")                      # doctest: +SKIP
        >>> g.value("dflash.block_size"), g.shape("fc.weight")  # doctest: +SKIP
        (7, (32, 96))
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.file: GGUFFile = read_gguf(self.path)
        self._names = {t.name for t in self.file.tensors}

    # ------------------------------------------------------------------------------------------ metadata
    def value(self, key: str, default: Any = None) -> Any:
        """The value of metadata ``key`` (lists for arrays), or ``default`` when absent."""
        return self.file.value(key, default)

    def has(self, name: str) -> bool:
        """Whether the file holds tensor ``name``."""
        return name in self._names

    def shape(self, name: str) -> tuple[int, ...]:
        """numpy-order shape (ggml ``ne`` reversed)."""
        return self.file.tensor(name).shape

    def qtype(self, name: str) -> QT | None:
        """GGML type of tensor ``name`` (None when unknown)."""
        return self.file.tensor(name).qtype

    # ------------------------------------------------------------------------------------------ data
    def _raw_rows(self, name: str) -> np.ndarray:
        """The stored data as ``[rows, row]`` (typed for F32/F16, bytes for BF16/quantized; 1-D: one row)."""
        raw = self.file.tensor_data(name)
        return raw.reshape(1, -1) if raw.ndim <= 1 else raw.reshape(-1, raw.shape[-1])

    def array(self, name: str) -> np.ndarray:
        """The whole tensor dequantized to float32, in numpy order."""
        return self._dequant(name, self._raw_rows(name)).reshape(self.shape(name))

    def rows(self, name: str, index: np.ndarray | list[int] | slice) -> np.ndarray:
        """Selected rows (axis 0 of a 2-D tensor) dequantized to float32."""
        raw = self._raw_rows(name)
        sel = raw[index] if isinstance(index, slice) else raw[np.asarray(index, dtype=np.int64)]
        return self._dequant(name, sel)

    def row_chunks(self, name: str, chunk: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, float32 rows)`` over a 2-D tensor, ``chunk`` rows at a time (bounded memory)."""
        n = self.shape(name)[0]
        for a in range(0, n, chunk):
            yield a, self.rows(name, slice(a, min(n, a + chunk)))

    def ints(self, name: str) -> np.ndarray:
        """An integer tensor (``d2t``, I64) as int64."""
        if self.qtype(name) not in _INT_TYPES:
            raise ConvertError(f"{self.path}: tensor '{name}' is {self.file.tensor(name).type_name}, expected I64")
        return np.asarray(self.file.tensor_data(name)).astype(np.int64).reshape(-1)

    def _dequant(self, name: str, raw: np.ndarray) -> np.ndarray:
        qt = self.qtype(name)
        if qt is None or qt in _INT_TYPES:
            raise ConvertError(f"{self.path}: tensor '{name}' is {self.file.tensor(name).type_name}, expected a float type")
        try:  # F32/F16 views come typed; BF16 and block-quantized types as bytes (what dequantize takes)
            return np.ascontiguousarray(dequantize(np.ascontiguousarray(raw), qt), dtype=np.float32)
        except NotImplementedError:
            raise ConvertError(f"{self.path}: tensor '{name}' has type {qt.name}, which the reference cannot dequantize") from None


def open_gguf(path: str | Path) -> GGUFWeights:
    """Open a GGUF file for the reference forward (the single adapter between the reference and a GGUF reader).

    Example:
        >>> open_gguf("draft.gguf").value("general.architecture")  # doctest: +SKIP
        'dflash'
    """
    return GGUFWeights(path)


# ---------------------------------------------------------------------------------------------- target side
_EMBED_NAMES = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight", "embed_tokens.weight")
_LM_HEAD_NAMES = ("lm_head.weight", "model.lm_head.weight")


class TargetWeights:
    """The target model's token embedding and lm_head, read lazily from its safetensors (sharded or not).

    A target without ``lm_head.weight`` (``tie_word_embeddings``) uses the embedding matrix as its lm_head.

    Example:
        >>> tw = TargetWeights("Qwen3-4B")               # doctest: +SKIP
        >>> tw.embed_rows([151669]).shape                # doctest: +SKIP
        (1, 2560)
    """

    def __init__(self, target_dir: str | Path) -> None:
        self.ckpt = Checkpoint(Path(target_dir), need_config=False)
        self.embed_name = next((n for n in _EMBED_NAMES if n in self.ckpt), None)
        if self.embed_name is None:
            raise ConvertError(f"{target_dir}: no target embedding tensor ({' / '.join(_EMBED_NAMES)})")
        self.lm_head_name = next((n for n in _LM_HEAD_NAMES if n in self.ckpt), self.embed_name)

    def _float(self, name: str, rows: np.ndarray | slice) -> np.ndarray:
        raw = self.ckpt.read(name)
        sel = raw[rows] if isinstance(rows, slice) else raw[np.asarray(rows, dtype=np.int64)]
        return to_float32(np.ascontiguousarray(sel), self.ckpt.ref(name).dtype)

    def embed_rows(self, ids: np.ndarray | list[int]) -> np.ndarray:
        """Embedding rows of token ``ids`` as float32."""
        return self._float(self.embed_name, ids)

    def lm_head_chunks(self, chunk: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, float32 rows)`` of the lm_head (or the tied embedding)."""
        n = self.ckpt.shape(self.lm_head_name)[0]
        for a in range(0, n, chunk):
            yield a, self._float(self.lm_head_name, slice(a, min(n, a + chunk)))
