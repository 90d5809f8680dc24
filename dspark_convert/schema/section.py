"""How a schema module types its metadata keys: one table, ``_KEY_TYPES``, with a row per key; an array key's row
is :class:`ArrayOf` its element types (the ones the loader accepts, contract §2.6), any other key's row its GGUF
value type. The package splits every module's table into ``KEY_TYPES`` and ``ARRAY_ELEMENT_TYPES``.

Example:
    >>> rows = {"{arch}.layers": ArrayOf(VT.INT32, VT.UINT32), "x.count": VT.UINT32}
    >>> [(k, v.name) for k, v in value_types(rows).items()], [t.name for t in element_types(rows)["{arch}.layers"]]
    ([('{arch}.layers', 'ARRAY'), ('x.count', 'UINT32')], ['INT32', 'UINT32'])
"""

from __future__ import annotations

from collections.abc import Mapping

from ..gguf_constants import VT


class ArrayOf(tuple[VT, ...]):
    """The row of an array key: value type ``ARRAY``, holding the element types the loader accepts."""

    def __new__(cls, *elements: VT) -> ArrayOf:
        return super().__new__(cls, elements)


def value_types(rows: Mapping[str, VT | ArrayOf]) -> dict[str, VT]:
    """key -> GGUF value type (``ARRAY`` for an :class:`ArrayOf` row), in the rows' order."""
    return {k: VT.ARRAY if isinstance(v, ArrayOf) else v for k, v in rows.items()}


def element_types(rows: Mapping[str, VT | ArrayOf]) -> dict[str, tuple[VT, ...]]:
    """array key -> the element types the loader accepts, in the rows' order."""
    return {k: tuple(v) for k, v in rows.items() if isinstance(v, ArrayOf)}
