"""Draft ``architectures`` names: aliases upstream accepts for the same converter classes, ``--architecture`` to
force one, and the closest known name for an unknown one.

The aliases are the family modules' (each may declare ``ALIASES``: alias -> one of its ``ARCHITECTURES``;
:func:`dspark_convert.registry.families.architecture_aliases` collects them); this module only applies them.

Example:
    >>> resolve_architecture({"architectures": ["OldDraftModel"]}, None, {"OldDraftModel": "NewDraftModel"}).used
    'NewDraftModel'
    >>> closest_name("Qwen3DsparkModel", ["Qwen3DSparkModel", "DFlashDraftModel"])
    'Qwen3DSparkModel'
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConvertError, clip


@dataclass(frozen=True)
class Architecture:
    """Which ``architectures`` value a conversion uses and why: ``declared`` (config.json), ``alias`` (an upstream
    alias of a supported name) or ``forced`` (``--architecture``)."""

    declared: str | None
    used: str | None
    how: str

    def note(self) -> str | None:
        """The summary line for an alias or a forced name (None when the declared name is used as is)."""
        if self.how == "alias":
            return f"architecture {self.declared} converted as {self.used} (an alias upstream accepts)"
        if self.how == "forced":
            return f"architecture {self.used} forced with --architecture (config.json declares {self.declared!r})"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"declared": self.declared, "used": self.used, "how": self.how}


def resolve_architecture(config: dict[str, Any], forced: str | None, aliases: Mapping[str, str]) -> Architecture:
    """The architecture to convert as: ``forced`` (``--architecture``, aliases allowed), else the declared
    ``architectures[0]`` mapped through ``aliases`` (upstream's aliases of supported names)."""
    archs = config.get("architectures")
    declared = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if forced is not None:
        if not forced.strip():
            raise ConvertError("--architecture: expected an architecture name such as Qwen3DSparkModel")
        return Architecture(declared, aliases.get(forced, forced), "forced")
    if declared is not None and declared in aliases:
        return Architecture(declared, aliases[declared], "alias")
    return Architecture(declared, declared, "declared")


def closest_name(name: str, known: Sequence[str]) -> str | None:
    """The known name most like ``name`` (case-insensitive), or None when nothing is close."""
    lowered = {k.lower(): k for k in known}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def unknown_architecture(name: str, known: Sequence[str], where: str, aliases: Mapping[str, str]) -> ConvertError:
    """The one-line error for an unsupported ``architectures`` value: the supported list (``known``, then the
    ``aliases``) and the closest name."""
    names = list(dict.fromkeys([*known, *aliases]))
    near = closest_name(name, names) if len(name) <= 200 else None
    hint = f"; closest known name: {near} (pass --architecture {aliases.get(near, near)} if the checkpoint has that " \
           "layout)" if near else "; pass --architecture NAME if the checkpoint has one of these layouts"
    return ConvertError(f"{where}: architecture '{clip(name)}' is not a supported draft (known: {', '.join(names)}){hint}")
