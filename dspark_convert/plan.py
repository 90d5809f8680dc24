"""The declarative description of a GGUF file: every KV and every tensor, in file order.

A :class:`Plan` is produced by a family module from a checkpoint (``variants/<v>/<family>.py``), printed by ``--dry-run``,
validated by :func:`dspark_convert.check.check_plan`, and executed by :func:`dspark_convert.hf2gguf.writer.write_plan`.
A plan read back from an existing GGUF file (``gguffile.reader.plan_from_gguf``) is the same kind of object, so
``check FILE`` and ``diff A B`` reuse the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .gguf_constants import GGML_QUANT_SIZES, QT, VT

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class KV:
    """One metadata key: name, GGUF value type, value (and element type for arrays).

    Example:
        >>> KV("dflash.block_size", VT.UINT32, 7)
        KV(name='dflash.block_size', type=<GGUFValueType.UINT32: 4>, value=7, sub_type=None)
    """

    name: str
    type: VT
    value: Any
    sub_type: VT | None = None

    def describe(self) -> str:
        """Type as text: ``UINT32`` or ``ARRAY[INT32]``."""
        if self.type == VT.ARRAY:
            return f"ARRAY[{self.sub_type.name if self.sub_type is not None else '?'}]"
        return self.type.name


#: where a tensor's values come from: a checkpoint ("draft", "target"), the converter itself ("generated"), or
#: an existing GGUF file read back for ``check`` / ``diff`` ("file")
Origin = Literal["draft", "target", "generated", "file"]


class RowTransform(Protocol):
    """What the writer needs from a row transform (implemented by ``transforms.Transform`` and its subclasses).

    The writer streams a tensor by chunks of output rows ``[start, stop)`` (``rows = out_rows(shapes)``) whose
    length is a multiple of ``row_group(rows)``, reads ``source_rows(start, stop, shapes)`` of each source
    tensor (an empty span is not read), and converts ``apply_at(chunks, rows, start)`` (by default ``apply(chunks,
    rows)``) from ``out_dtype(source dtypes)`` to the tensor's GGML type. ``sources_ok(n)`` says whether ``n`` sources fit (a stack of experts takes 2 per expert).
    """

    @property
    def name(self) -> str: ...

    @property
    def n_sources(self) -> int: ...

    def sources_ok(self, n: int) -> bool: ...

    def describe(self) -> str: ...

    def out_rows(self, shapes: tuple[tuple[int, ...], ...]) -> int: ...

    def row_group(self, rows: int) -> int | None: ...

    def source_rows(self, start: int, stop: int, shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, int], ...]: ...

    def out_dtype(self, dtypes: tuple[str, ...]) -> str: ...

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray: ...

    def apply_at(self, chunks: Sequence[np.ndarray], rows: int, start: int) -> np.ndarray: ...

    def apply_whole(self, arrays: Sequence[np.ndarray]) -> np.ndarray: ...


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the output file.

    ``shape`` is the logical numpy (HF) shape; GGUF stores it reversed (ggml ``ne``). ``sources`` names the HF
    tensors it is made from (in the draft checkpoint, or in the target checkpoint when ``origin == "target"``):
    one, or several for a ``transform`` that combines them (a weight and its block scales, a stack of
    experts). Generated tensors carry their (small) ``data`` instead. ``transform`` is a row transform applied
    before the dtype conversion (a ``transforms.Transform``; the registry is ``transforms.TRANSFORMS``).
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: QT
    sources: tuple[str, ...] = ()
    origin: Origin = "draft"
    transform: RowTransform | None = None
    source_dtype: str | None = None  # safetensors dtype string of the (first) source ("BF16", "F32", ...)
    data: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def source(self) -> str | None:
        """The first (usually the only) source tensor name, or None for a generated tensor."""
        return self.sources[0] if self.sources else None

    @property
    def transform_name(self) -> str | None:
        return self.transform.name if self.transform is not None else None

    @property
    def ne(self) -> tuple[int, ...]:
        """ggml dimension order (numpy shape reversed)."""
        return tuple(reversed(self.shape))

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor data in the GGUF file (without alignment padding)."""
        block, type_size = GGML_QUANT_SIZES[self.ggml_type]
        return self.n_elements // block * type_size


@dataclass
class Plan:
    """Everything needed to write (or to describe) one GGUF file."""

    arch: str
    kvs: list[KV]
    tensors: list[TensorSpec]
    notes: list[str] = field(default_factory=list)  # human notes (fallbacks, detected heads, ...)
    #: tensors or keys written on purpose where upstream b11434 writes none (``Context.differs_from_upstream``)
    differs_from_upstream: list[str] = field(default_factory=list)

    def kv(self, name: str) -> KV | None:
        """The KV called ``name``, or None."""
        for kv in self.kvs:
            if kv.name == name:
                return kv
        return None

    def value(self, name: str, default: Any = None) -> Any:
        kv = self.kv(name)
        return default if kv is None else kv.value

    def tensor(self, name: str) -> TensorSpec | None:
        for t in self.tensors:
            if t.name == name:
                return t
        return None

    def total_tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def add_kv(kvs: list[KV], kv: KV) -> None:
    """Append ``kv``, or replace an existing key of the same name in place (GGUFWriter semantics).

    Empty strings and empty arrays are skipped, as GGUFWriter's ``add_string`` / ``add_array`` do.
    """
    if kv.type == VT.STRING and kv.value == "":
        return
    if kv.type == VT.ARRAY and len(kv.value) == 0:
        return
    for i, old in enumerate(kvs):
        if old.name == kv.name:
            kvs[i] = kv
            return
    kvs.append(kv)


def as_int(value: Any) -> int | None:
    """A value read from a file or a config as an integer: the value when it is an ``int`` (not a ``bool``), else
    None (a file may hold any type).

    Example:
        >>> as_int(4), as_int(True), as_int(4.0)
        (4, None, None)
    """
    return value if isinstance(value, int) and not isinstance(value, bool) else None
