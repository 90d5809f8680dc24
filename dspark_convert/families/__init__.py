"""Draft families: one module per family, each exposing ``ARCHITECTURES`` and ``build_plan(ctx) -> Plan``.

The registry below maps a checkpoint's ``architectures[0]`` to its module by name (mlx-lm style: modules are
imported only when needed); adding a family is one module plus one line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..archnames import unknown_architecture
from ..errors import ConvertError

FAMILY_MODULES = ("dspark", "dflash", "eagle3")


def family_for(config: dict[str, Any], where: str) -> ModuleType:
    """The family module that converts a checkpoint with this ``config.json``."""
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConvertError(f"{where}: no 'architectures' list; cannot tell which draft family this is")
    known = []
    for mod_name in FAMILY_MODULES:
        mod = importlib.import_module(f".{mod_name}", __name__)
        if archs[0] in mod.ARCHITECTURES:
            return mod
        known.extend(mod.ARCHITECTURES)
    raise unknown_architecture(archs[0], known, where)
