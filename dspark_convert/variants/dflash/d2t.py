"""The draft-to-target vocabulary map of reduced-vocabulary drafts: the ``d2t`` tensor (contract §5.3).

A draft with a reduced vocabulary stores ``d2t``, one offset per draft token id (target id = draft id + offset), the
convention EAGLE-3 introduced and DSpark drafts keep; the GGUF holds the absolute target ids as I64. Both
:mod:`.dspark` and the EAGLE-3 family (:mod:`dspark_convert.variants.eagle3.eagle3`) write it with :func:`d2t_spec`.
"""

from __future__ import annotations

import math

import numpy as np
from gguf import GGMLQuantizationType as QT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...plan import TensorSpec


def d2t_spec(ck: Checkpoint, source: str, limit: int, *, entries: int | None = None) -> TensorSpec:
    """The ``d2t`` tensor: I64 absolute token ids (§5.3), resolved and checked now.

    ``limit`` bounds the ids (the target vocabulary); ``entries`` is the expected count (draft_vocab_size) when
    the family knows it. d2t is small, so it is validated before anything is written.
    """
    ref = ck.ref(source)
    n = math.prod(ref.shape)
    if entries is not None and n != entries:
        raise ConvertError(f"{ref.file}: tensor '{source}' has {n} entries, expected draft_vocab_size {entries}")
    if ref.dtype == "BOOL":
        raise ConvertError(f"{ref.file}: tensor '{source}' has dtype BOOL, expected integer offsets")
    values = d2t_absolute(ck.read(source), limit, what=f"{ref.file}: tensor '{source}'")
    return TensorSpec(name=S.T_D2T, shape=(n,), ggml_type=QT.I64, sources=(source,), source_dtype=ref.dtype,
                      data=values)


def d2t_absolute(offsets: np.ndarray, vocab_limit: int, *, what: str) -> np.ndarray:
    """``d2t[i] + i`` as int64, checked: in ``[0, vocab_limit)`` and unique (§5.3).

    Values pass through float32 upstream; that is exact for |value| < 2^24, which the range check implies for any
    real vocabulary, so integer arithmetic gives the same bytes.

    Example:
        >>> d2t_absolute(np.array([0, 1, 1]), 10, what="d2t").tolist()
        [0, 2, 3]
    """
    flat = np.asarray(offsets).reshape(-1)
    if flat.dtype.kind == "f":
        if not np.all(np.isfinite(flat)) or np.any(flat != np.round(flat)):
            raise ConvertError(f"{what}: expected integer offsets, found non-integer values")
    absolute = flat.astype(np.int64) + np.arange(flat.size, dtype=np.int64)
    bad = np.nonzero((absolute < 0) | (absolute >= vocab_limit))[0]
    if bad.size:
        i = int(bad[0])
        raise ConvertError(f"{what}: entry {i} maps to token id {int(absolute[i])}, outside the vocabulary "
                           f"[0, {vocab_limit})")
    uniq, counts = np.unique(absolute, return_counts=True)
    if uniq.size != absolute.size:
        dup = int(uniq[counts > 1][0])
        raise ConvertError(f"{what}: token id {dup} appears {int(counts[counts > 1][0])} times; expected unique ids")
    return absolute
