"""Draft families: one module per family, each implementing :class:`~dspark_convert.families.base.Family`.

The registry below lists the family modules by name (mlx-lm style: modules are imported only when needed).
:func:`family_for` picks the module whose ``ARCHITECTURES`` holds the checkpoint's ``architectures[0]``, else
the first whose ``claims(config, tensor_names)`` is true (a draft stored inside a target checkpoint, whose
config names the target's architecture). Adding a family is one module plus one line here; see
docs/adding-a-family.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from ..archnames import unknown_architecture
from ..errors import ConvertError
from .base import Family

#: family modules in the order they are asked (``dflash_base`` is the DFlash lineage's shared base, not a family)
FAMILY_MODULES = ("dspark", "dflash", "dflash2", "eagle3", "dspark_dsv4")

if TYPE_CHECKING:  # mypy checks every family module against the Family protocol
    from . import dflash, dflash2, dspark, dspark_dsv4, eagle3

    _FAMILIES: tuple[Family, ...] = (dspark, dflash, dflash2, eagle3, dspark_dsv4)


def family_modules() -> list[Family]:
    """The family modules of :data:`FAMILY_MODULES`, imported."""
    return [cast(Family, importlib.import_module(f".{name}", __name__)) for name in FAMILY_MODULES]


def family_name(family: Family) -> str:
    """``dspark``, ``dflash``, ``eagle3``: the module name, used in output file names and reports."""
    return str(getattr(family, "__name__", type(family).__name__)).rsplit(".", 1)[-1]


def family_for(config: dict[str, Any], tensor_names: Iterable[str], where: str) -> Family:
    """The family that converts a checkpoint with this ``config.json`` and these tensor names.

    Example:
        >>> family_name(family_for({"architectures": ["DFlashDraftModel"]}, [], "config.json"))
        'dflash'
    """
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConvertError(f"{where}: no 'architectures' list; cannot tell which draft family this is")
    modules = family_modules()
    for mod in modules:
        if archs[0] in mod.ARCHITECTURES:
            return mod
    names = list(tensor_names)
    for mod in modules:
        try:
            if mod.claims(config, names):
                return mod
        except ConvertError as e:  # the family's kind, but not convertible: its reason, with the file
            raise ConvertError(f"{where}: {e}") from None
    known = [a for mod in modules for a in mod.ARCHITECTURES]
    raise unknown_architecture(archs[0], known, where)
