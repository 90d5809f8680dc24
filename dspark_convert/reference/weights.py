"""Weight access for the numpy reference forward: a GGUF file and the target's embeddings/lm_head, read lazily.

:class:`GGUFWeights` sits on the project's header-only reader (gguf-py's ``GGUFReader`` builds a Python object
per token string and takes ~10 s on a 129k-token tokenizer). Tensor bytes are read with positioned reads rather
than through a memory map, so the bytes of a layer leave the process (and its RSS) as soon as the layer has been
used: the reference streams a draft layer by layer and an lm_head chunk by chunk, dequantizing each piece with
``gguf.quants.dequantize``. :func:`open_gguf` is the one adapter the reference uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

from .. import schema as S
from ..errors import ConvertError
from ..formats.transforms import to_float32
from ..gguffile.reader import GGUFFile, read_gguf
from ..hf.checkpoint import EMBED_NAMES, OUTPUT_NAMES, Checkpoint

#: rows dequantized at once when streaming a large matrix (about 128 MB of float32 for H = 4096)
CHUNK_ROWS = 8192
_INT_TYPES = (QT.I8, QT.I16, QT.I32, QT.I64)
Index = np.ndarray | list[int] | slice


def read_rows(path: Path, offset: int, row_bytes: int, n_rows: int, index: Index) -> np.ndarray:
    """Rows ``index`` of a row-major block of ``n_rows`` rows of ``row_bytes`` bytes at ``offset``, as uint8 rows.

    A slice is one positioned read; a list of rows is one read per row (lookups of a few tokens).

    Example:
        >>> read_rows(Path("w.bin"), 0, 8, 4, slice(1, 3)).shape  # doctest: +SKIP
        (2, 8)
    """
    rows = range(n_rows)[index] if isinstance(index, slice) else np.asarray(index, dtype=np.int64).reshape(-1)
    out = np.empty((len(rows), row_bytes), dtype=np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        if isinstance(rows, range) and rows.step == 1:  # a range exactly when index is a slice
            spans = [(0, rows.start, len(rows))] if len(rows) else []
        else:
            spans = [(i, int(rows[i]), 1) for i in range(len(rows))]
        for dst, first, count in spans:
            if not (0 <= first and first + count <= n_rows):
                raise ConvertError(f"{path}: row {first} out of range (tensor has {n_rows} rows)")
            view, pos = out[dst:dst + count].reshape(-1).data, offset + first * row_bytes  # .data: memoryview(array)
            while len(view):                               # read straight into the array, no bytes copy
                n = os.preadv(fd, [view], pos)
                if n <= 0:
                    raise ConvertError(f"{path}: truncated tensor data at byte {pos:,}")
                view, pos = view[n:], pos + n
    finally:
        os.close(fd)
    return out


class GGUFWeights:
    """Lazy, dequantizing tensor access on top of :func:`dspark_convert.gguffile.reader.read_gguf` (header-only parse),
    and the reads every numpy forward makes the same way: a layer's weights, the tapped features, the token
    embeddings and the logits with the head llama.cpp uses (the target's when the file has none).

    Example:
        >>> g = GGUFWeights("draft.gguf")                      # doctest: +SKIP
        >>> g.value("dflash.block_size"), g.shape("fc.weight")  # doctest: +SKIP
        (7, (32, 96))
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.file: GGUFFile = read_gguf(self.path)
        self._names = {t.name for t in self.file.tensors}
        #: every tensor whose data was read (verify's tensor accounting: what the forward actually used)
        self.read: set[str] = set()

    # ------------------------------------------------------------------------------------------ metadata
    def value(self, key: str, default: Any = None) -> Any:
        """The value of metadata ``key`` (lists for arrays), or ``default`` when absent."""
        return self.file.value(key, default)

    def need(self, key: str) -> Any:
        """The value of a required metadata key; ConvertError naming the key when it is absent."""
        v = self.file.value(key)
        if v is None:
            raise ConvertError(f"{self.path}: missing metadata key '{key}'")
        return v

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
    def _raw(self, name: str, index: Index) -> np.ndarray:
        """Stored bytes of rows ``index`` (axis 0; a 1-D tensor is one row) as ``[rows, bytes_per_row]``."""
        t = self.file.tensor(name)
        self.read.add(name)
        if t.qtype is None or t.nbytes is None:
            raise ConvertError(f"{self.path}: tensor '{name}' has unknown type {t.type_name}")
        cols = t.ne[0] if t.ne else 1
        block, size = GGML_QUANT_SIZES[t.qtype]
        row_bytes = cols // block * size
        return read_rows(self.path, t.offset, row_bytes, t.nbytes // row_bytes, index)

    def array(self, name: str) -> np.ndarray:
        """The whole tensor dequantized to float32, in numpy order."""
        return self._dequant(name, self._raw(name, slice(None))).reshape(self.shape(name))

    def rows(self, name: str, index: Index) -> np.ndarray:
        """Selected rows (axis 0 of a 2-D tensor) dequantized to float32."""
        return self._dequant(name, self._raw(name, index))

    def row_chunks(self, name: str, chunk: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, float32 rows)`` over a 2-D tensor, ``chunk`` rows at a time (bounded memory)."""
        n = self.shape(name)[0]
        for a in range(0, n, chunk):
            yield a, self.rows(name, slice(a, min(n, a + chunk)))

    def ints(self, name: str) -> np.ndarray:
        """An integer tensor (``d2t``, I64) as int64."""
        qt = self.qtype(name)
        if qt not in _INT_TYPES:
            raise ConvertError(f"{self.path}: tensor '{name}' is {self.file.tensor(name).type_name}, expected I64")
        dt = {QT.I8: "i1", QT.I16: "<i2", QT.I32: "<i4", QT.I64: "<i8"}[qt]
        return self._raw(name, slice(None)).reshape(-1).view(dt).astype(np.int64)

    # ------------------------------------------------------------------------------------------ a forward's reads
    def layer_weights(self, il: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Dequantize the listed tensors of layer ``il`` (``blk.{il}.<name>.weight``) that the file has."""
        return {n: self.array(f"blk.{il}.{n}.weight") for n in names if self.has(f"blk.{il}.{n}.weight")}

    def feature_arrays(self, features: Iterable[Any]) -> list[np.ndarray]:
        """Each case's target features as an F32 ``(tokens, width)`` array; refused in one line unless every width
        is the one ``fc.weight`` takes."""
        feats = [np.asarray(f, dtype=np.float32) for f in features]
        for f in feats:
            if f.ndim != 2 or f.shape[1] != self.shape("fc.weight")[1]:
                raise ConvertError(f"{self.path}: fc.weight takes {self.shape('fc.weight')[1]} features, "
                                   f"got {f.shape[-1]}")
        return feats

    def embed_tokens(self, target: TargetWeights | None, ids: np.ndarray | list[int]) -> np.ndarray:
        """Embedding rows: the file's ``token_embd`` when present, else the target's ``embed_tokens``."""
        if self.has("token_embd.weight"):
            return self.rows("token_embd.weight", ids)
        return self._need_target(target, "token_embd.weight").embed_rows(ids)

    def lm_logits(self, target: TargetWeights | None, h: np.ndarray, runtime: bool = True) -> np.ndarray:
        """``h @ W_lm.T`` streamed over vocabulary chunks, with the head llama.cpp b11434 really uses: the file's
        ``output`` when present; else, for a file of an arch whose loader duplicates ``token_embd`` as the head
        (``schema.EMBD_AS_HEAD_ARCHES``, ``TENSOR_DUPLICATED``) and holding it, that embedding matrix; else the
        target's lm_head.

        ``runtime=False`` skips the ``token_embd`` rule: the head the draft was trained with (the file's ``output``
        or the target's lm_head), i.e. what a correct file drafts with."""
        name = "output.weight"
        if (not self.has(name) and runtime and self.value("general.architecture") in S.EMBD_AS_HEAD_ARCHES
                and self.has("token_embd.weight")):
            name = "token_embd.weight"
        if self.has(name):
            n, chunks = self.shape(name)[0], self.row_chunks(name)
        else:
            tw = self._need_target(target, "output.weight")
            n, chunks = tw.ckpt.shape(tw.lm_head_name)[0], tw.lm_head_chunks()
        out = np.empty((h.shape[0], n), dtype=np.float32)
        for a, w in chunks:
            out[:, a:a + w.shape[0]] = h @ w.T
        return out

    def _need_target(self, target: TargetWeights | None, tensor: str) -> TargetWeights:
        if target is None:
            raise ConvertError(f"{self.path}: no '{tensor}' tensor; the target checkpoint (--target-model-dir) is "
                               "needed")
        return target

    def _dequant(self, name: str, raw: np.ndarray) -> np.ndarray:
        qt = self.qtype(name)
        if qt is None or qt in _INT_TYPES:
            raise ConvertError(f"{self.path}: tensor '{name}' is {self.file.tensor(name).type_name}, expected a float type")
        rows = raw.shape[0]
        try:
            # Blocks never straddle rows, so the rows are decoded as one long row: gguf's dequantize loops in
            # Python over groups of 16 rows, which costs more than the decoding itself on large matrices.
            flat = dequantize(raw.reshape(1, -1), qt)
            out = np.ascontiguousarray(flat, dtype=np.float32).reshape(rows, -1)
        except NotImplementedError:
            raise ConvertError(f"{self.path}: tensor '{name}' has type {qt.name}, which the reference cannot dequantize") from None
        scale = name.removesuffix(".weight") + ".scale"
        if qt == QT.NVFP4 and name.endswith(".weight") and self.has(scale):
            # the per-tensor scale llama.cpp multiplies the product by (ggml_mul after the matmul): the same
            # factor on every weight of the tensor
            out *= self._dequant(scale, self._raw(scale, slice(None))).reshape(-1)[0]
        return out


def open_gguf(path: str | Path) -> GGUFWeights:
    """Open a GGUF file for the reference forward (the single adapter between the reference and a GGUF reader).

    Example:
        >>> open_gguf("draft.gguf").value("general.architecture")  # doctest: +SKIP
        'dflash'
    """
    return GGUFWeights(path)


# ---------------------------------------------------------------------------------------------- target side


_EMBED_OR_OUTPUT = frozenset(EMBED_NAMES + OUTPUT_NAMES)


class TargetWeights:
    """The target model's token embedding and lm_head, read lazily from its safetensors (sharded or not).

    A target without ``lm_head.weight`` (``tie_word_embeddings``) uses the embedding matrix as its lm_head.

    Example:
        >>> tw = TargetWeights("Qwen3-4B")               # doctest: +SKIP
        >>> tw.embed_rows([151669]).shape                # doctest: +SKIP
        (1, 2560)
    """

    def __init__(self, target_dir: str | Path) -> None:
        # only the shards holding the embedding / output head are opened (a target's index may list 46)
        self.ckpt = Checkpoint(Path(target_dir), need_config=False, select=_EMBED_OR_OUTPUT.__contains__)
        embed_name = next((n for n in EMBED_NAMES if n in self.ckpt), None)
        if embed_name is None:
            raise ConvertError(f"{target_dir}: no target embedding tensor ({' / '.join(EMBED_NAMES)})")
        self.embed_name: str = embed_name
        self.lm_head_name = next((n for n in OUTPUT_NAMES if n in self.ckpt), embed_name)

    def _float(self, name: str, index: Index) -> np.ndarray:
        ref = self.ckpt.ref(name)
        if ref.file.suffix != ".safetensors" or len(ref.shape) != 2:   # pickle checkpoints live in memory already
            raw = self.ckpt.read(name)
            return to_float32(np.ascontiguousarray(raw[index]), ref.dtype)
        item = ref.numpy_dtype.itemsize
        raw = read_rows(ref.file, ref.start, ref.shape[1] * item, ref.shape[0], index)
        return to_float32(raw.view(ref.numpy_dtype), ref.dtype)

    def embed_rows(self, ids: np.ndarray | list[int]) -> np.ndarray:
        """Embedding rows of token ``ids`` as float32."""
        return self._float(self.embed_name, ids)

    def lm_head_chunks(self, chunk: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, float32 rows)`` of the lm_head (or the tied embedding)."""
        n = self.ckpt.shape(self.lm_head_name)[0]
        for a in range(0, n, chunk):
            yield a, self._float(self.lm_head_name, slice(a, min(n, a + chunk)))
