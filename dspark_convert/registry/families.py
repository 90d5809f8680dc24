"""Which family converts this checkpoint, and which variant is it? The HF side of :mod:`dspark_convert.registry`.

A family is one module, ``variants/<variant>/<family>.py``, implementing
:class:`~dspark_convert.roles.convert.Family`; each :class:`~dspark_convert.registry.Variant` row lists its family
modules, in the order they are asked (imported only when needed, mlx-lm style). :func:`family_for` picks the module
whose ``ARCHITECTURES`` holds the checkpoint's ``architectures[0]``, else the first whose optional
``claims(config, tensor_names)`` is true (a draft stored inside a target checkpoint, whose config names the
target's architecture); :func:`checkpoint_variant` names the variant it writes. Adding a family is one module plus
its name in its variant's row; see docs/adding-a-family.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from ..archnames import unknown_architecture
from ..errors import ConvertError
from ..roles.convert import Family, family_claims
from . import VARIANTS, VARIANTS_PACKAGE, Variant, variant_of_family

#: the variants whose family modules are asked first, in this order (the order the refusal messages list the known
#: ``architectures`` in); any other variant's modules follow, in the rows' order (a new variant needs no entry)
ASKED_FIRST = ("dflash", "dflash2", "eagle3", "dsv4", "gemma4")


def family_modules() -> list[Family]:
    """Every variant's family modules, imported, in the order they are asked (:data:`ASKED_FIRST`, then the rows'
    order; within a variant, its row's order)."""
    rank = {name: i for i, name in enumerate(ASKED_FIRST)}
    rows = sorted(VARIANTS, key=lambda v: rank.get(v.name, len(rank)))
    return [cast(Family, importlib.import_module(f"{VARIANTS_PACKAGE}.{v.name}.{name}"))
            for v in rows for name in v.families]


def family_name(family: Family) -> str:
    """``dspark``, ``dflash``, ``eagle3``: the module name, used in output file names and reports."""
    return str(getattr(family, "__name__", type(family).__name__)).rsplit(".", 1)[-1]


def checkpoint_variant(config: dict[str, Any], tensor_names: Iterable[str], where: str) -> Variant:
    """The variant a checkpoint converts to (through the converter's own recognition, :func:`family_for`)."""
    return variant_of_family(family_name(family_for(config, tensor_names, where)))


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
            if family_claims(mod, config, names):
                return mod
        except ConvertError as e:  # the family's kind, but not convertible: its reason, with the file
            raise ConvertError(f"{where}: {e}") from None
    from ..tokenizer.targets import is_target_architecture

    known = [a for mod in modules for a in mod.ARCHITECTURES]
    if is_target_architecture(archs[0]):  # a target model's class: the closest draft name would be a wrong hint
        folder = os.path.dirname(where) or "."
        raise ConvertError(f"{where}: architecture '{archs[0]}' is not a supported draft: it is a target model class; "
                           f"if {folder} is the target, pass it as --target-model-dir and the draft as DRAFT; if it is "
                           f"a draft declaring its target's class, pass --architecture with the draft's class (one "
                           f"of {', '.join(dict.fromkeys(known))})")
    raise unknown_architecture(archs[0], known, where, architecture_aliases())


def architecture_aliases() -> dict[str, str]:
    """``architectures`` values upstream's converter maps to a class we support (alias -> supported name): each
    family module's ``ALIASES``, in :func:`family_modules` order.

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
    from ..tokenizer.targets import is_target_architecture  # imported when needed: families load without it

    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is not None and isinstance(config, dict) and "draft_vocab_size" in config:
        return arch  # an EAGLE-3 draft that calls itself LlamaForCausalLM: no target config has draft_vocab_size
    if arch is None or is_target_architecture(arch):
        return None
    return arch if any(arch in family.ARCHITECTURES for family in family_modules()) else None


def refuse_draft_as_target(config: object, folder: Path, flag: str = "--target-model-dir") -> None:
    """A draft folder passed as the target (``flag``): say so, instead of the layer-count or vocabulary error it
    causes."""
    arch = draft_architecture(config)
    if arch is not None:
        raise ConvertError(f"{folder}: is a draft checkpoint ({arch}), not a target model; pass the target model "
                           f"the draft was trained for as {flag}")


def draft_checkpoint_family(folder: Path, flag: str) -> Family:
    """The family of the draft checkpoint ``folder`` given as ``flag`` (``--hf``), refusing in one line what is not
    a draft checkpoint: no ``config.json``, or a target model's folder (a config of a target class that no family
    claims, e.g. ``Qwen3ForCausalLM``)."""
    from ..hf.checkpoint import Checkpoint, load_json

    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ConvertError(f"{flag} {folder}: no config.json; expected the draft checkpoint folder (config.json + "
                           "safetensors)")
    config = load_json(config_path)
    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is not None and draft_architecture(config) is None:
        names = list(Checkpoint(folder).names)
        if not any(_claims(mod, config, names) for mod in family_modules()):
            raise ConvertError(f"{flag} {folder}: is a target model ({arch}), not a draft checkpoint; pass the "
                               f"draft's checkpoint folder as {flag}")
        return family_for(config, names, str(config_path))
    return family_for(config, [], str(config_path))


def _claims(mod: Family, config: dict[str, Any], names: list[str]) -> bool:
    try:
        return family_claims(mod, config, names)
    except ConvertError:
        return True  # the family's kind (family_for then says why it cannot be converted)


def family_variant(family: Family) -> str:
    """The GGUF variant (package under ``variants/``) whose files ``family`` writes."""
    return str(getattr(family, "__name__", "")).split(".")[-2]
