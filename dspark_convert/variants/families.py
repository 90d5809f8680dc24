"""Draft families: one module per family, each implementing :class:`~dspark_convert.variants.kit.base.Family`.

The registry below lists the family modules by name (mlx-lm style: modules are imported only when needed).
:func:`family_for` picks the module whose ``ARCHITECTURES`` holds the checkpoint's ``architectures[0]``, else
the first whose ``claims(config, tensor_names)`` is true (a draft stored inside a target checkpoint, whose
config names the target's architecture). Adding a family is one module plus one line here; see
docs/adding-a-family.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from ..archnames import unknown_architecture
from ..errors import ConvertError
from .kit.base import Family

#: family modules in the order they are asked, as ``<variant>.<family>`` under this package (each variant's
#: ``families`` in :data:`.VARIANTS` names its family modules; ``kit.dflash_base`` is the DFlash lineage's base)
FAMILY_MODULES = ("dflash.dspark", "dflash.dflash", "dflash2.dflash2", "eagle3.eagle3", "dsv4.dspark_dsv4",
                  "gemma4.convert", "mtp.convert")
#: (mypy checks each family module against the Family protocol in its variant's ``__init__``, so this module
#: imports no variant package: the registry's unit stays below the slices)


def family_modules() -> list[Family]:
    """The family modules of :data:`FAMILY_MODULES`, imported."""
    return [cast(Family, importlib.import_module(f"{__package__}.{name}")) for name in FAMILY_MODULES]


def family_name(family: Family) -> str:
    """``dspark``, ``dflash``, ``eagle3``: the module name, used in output file names and reports."""
    own = getattr(family, "FAMILY", None)  # a family module in a variant package is named ``convert``
    return own if isinstance(own, str) else str(getattr(family, "__name__", type(family).__name__)).rsplit(".", 1)[-1]


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
    from ..tokenizer.handlers import TARGET_HANDLERS

    known = [a for mod in modules for a in mod.ARCHITECTURES]
    if archs[0] in TARGET_HANDLERS:  # a target model's class: the closest draft name would be a wrong hint
        folder = os.path.dirname(where) or "."
        raise ConvertError(f"{where}: architecture '{archs[0]}' is not a supported draft: it is a target model class; "
                           f"if {folder} is the target, pass it as --target-model-dir and the draft as DRAFT; if it is "
                           f"a draft declaring its target's class, pass --architecture with the draft's class (one "
                           f"of {', '.join(dict.fromkeys(known))})")
    raise unknown_architecture(archs[0], known, where, architecture_aliases())


def architecture_aliases() -> dict[str, str]:
    """``architectures`` values upstream's converter maps to a class we support (alias -> supported name): each
    family module's ``ALIASES``, in :data:`FAMILY_MODULES` order.

    Example:
        >>> architecture_aliases()["LingDSparkModel"]
        'Qwen3DSparkModel'
    """
    out: dict[str, str] = {}
    for mod in family_modules():
        out.update(getattr(mod, "ALIASES", {}))
    return out


def draft_architecture(config: object) -> str | None:
    """``architectures[0]`` of a config when it names a draft class (of any family) that is not also a target
    class (some EAGLE-3 drafts say ``LlamaForCausalLM``), else None."""
    from ..tokenizer.handlers import TARGET_HANDLERS  # imported when needed: families load without it

    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is not None and isinstance(config, dict) and "draft_vocab_size" in config:
        return arch  # an EAGLE-3 draft that calls itself LlamaForCausalLM: no target config has draft_vocab_size
    if arch is None or arch in TARGET_HANDLERS:
        return None
    return arch if any(arch in family.ARCHITECTURES for family in family_modules()) else None


def refuse_draft_as_target(config: object, folder: Path, flag: str = "--target-model-dir") -> None:
    """A draft folder passed as the target (``flag``): say so, instead of the layer-count or vocabulary error it
    causes."""
    arch = draft_architecture(config)
    if arch is not None:
        raise ConvertError(f"{folder}: is a draft checkpoint ({arch}), not a target model; pass the target model "
                           f"the draft was trained for as {flag}")
