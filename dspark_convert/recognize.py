"""Which variant is this checkpoint? The HF side of :mod:`.variants`, through the converter's own recognition.

Kept apart from :mod:`.variants` because it needs :mod:`.families` (which imports ``check``, which asks
:mod:`.variants` about GGUF files): the registry stays at the ground floor, this module sits above the families.
``verify`` and the conversion ask it whether a ``--target-model-dir`` folder is in fact a draft.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .families import family_for, family_modules, family_name
from .variants import Variant, variant_of_family


def checkpoint_variant(config: dict[str, Any], tensor_names: Iterable[str], where: str) -> Variant:
    """The variant a checkpoint converts to (through the converter's own recognition, ``families.family_for``)."""
    return variant_of_family(family_name(family_for(config, tensor_names, where)))


def draft_architecture(config: object) -> str | None:
    """``architectures[0]`` of a config when it names a draft class (of any family) that is not also a target
    class (some drafts say ``LlamaForCausalLM``), else None."""
    from .tokenizer.handlers import TARGET_HANDLERS

    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is None or arch in TARGET_HANDLERS:
        return None
    return arch if any(arch in family.ARCHITECTURES for family in family_modules()) else None

