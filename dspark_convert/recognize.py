"""Which variant is this checkpoint? The HF side of :mod:`.variants`, through the converter's own recognition.

Kept apart from :mod:`.variants` because it needs :mod:`.families` (which imports ``check``, which asks
:mod:`.variants` about GGUF files): the registry stays at the ground floor, this module sits above the families.
``verify`` and the conversion ask it whether a ``--target-model-dir`` folder is in fact a draft.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .variants import Variant, variant_of_family
from .variants.families import draft_architecture, family_for, family_name

__all__ = ["checkpoint_variant", "draft_architecture"]  # draft_architecture lives in families (issue 24)


def checkpoint_variant(config: dict[str, Any], tensor_names: Iterable[str], where: str) -> Variant:
    """The variant a checkpoint converts to (through the converter's own recognition, ``families.family_for``)."""
    return variant_of_family(family_name(family_for(config, tensor_names, where)))
