"""The declarative description of a GGUF file: every KV and every tensor, in file order.

A :class:`Plan` is produced by a family module from a checkpoint (``families``), printed by ``--dry-run``,
validated by :func:`dspark_convert.check.check_plan`, and executed by :func:`dspark_convert.writer.write_plan`.
A plan read back from an existing GGUF file (``reader.plan_from_gguf``) is the same kind of object, so
``check FILE`` and ``diff A B`` reuse the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .gguffile.constants import GGML_QUANT_SIZES, QT, VT

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


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the output file.

    ``shape`` is the logical numpy (HF) shape; GGUF stores it reversed (ggml ``ne``). ``source`` names the HF
    tensor it comes from (in the draft checkpoint, or in the target checkpoint when ``origin == "target"``);
    generated tensors carry their (small) ``data`` instead. ``transform`` names a value-preserving reordering
    applied before the dtype conversion (see ``transforms.TRANSFORMS``).
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: QT
    source: str | None = None
    origin: str = "draft"  # "draft" | "target" | "generated"
    transform: str | None = None
    transform_args: tuple[int, ...] = ()
    source_dtype: str | None = None  # safetensors dtype string of the source ("BF16", "F32", ...)
    data: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def ne(self) -> tuple[int, ...]:
        """ggml dimension order (numpy shape reversed)."""
        return tuple(reversed(self.shape))

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

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
