"""The three-way check's variant references (a test tier, outside the wheel): one module per GGUF variant,
``tests/llama/refs/<variant>.py``, found by the variant's name, and the contract they share.

The check knows no variant. For a draft file it asks the registry which variant the file is
(:func:`dspark_convert.registry.gguf_variant`) and imports that variant's reference module
(:func:`reference_for`), which has one function::

    reference_drafts(d: DraftInputs) -> list[RefBlock]

the variant's numpy reference proposal for each block llama-server logged (``d.blocks``, in order, one
:class:`RefBlock` each), from the target's tap features (``d.features``) and the file (``d.g``), built on the
variant's own numpy forward (``dspark_convert.variants.<variant>.numpy_forward``). A reference that chains (a head
fed its own previous choice) is fed llama.cpp's previous choices instead (:meth:`DraftInputs.prev_tokens`), so
that one near-tie does not shift the rest of the block. A draft whose tokens llama-server does not log (its blocks
carry only ``n_draft`` / ``n_accepted``) returns, per block, the candidate ids its scores refer to
(``RefBlock.candidates``) and the std of each position's logits (``row_scales``); the check then compares what
verification revealed.

A variant without a module here is refused by the check, naming the variant.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from dspark_convert.reference import GGUFWeights, TargetWeights


class DraftBlock(Protocol):
    """One draft as llama-server logged it (``dspark_convert.llamacpp.server.DraftBlock``): the tokens drafted, the
    anchor (the target's last sampled token), the context length before it, the tokens sent for verification and
    how many of them the target accepted."""

    tokens: list[int]
    anchor: int | None
    n_context: int | None
    n_draft: int | None
    n_accepted: int | None


@dataclass
class RefBlock:
    """The reference's proposal for one block: chosen target ids and, per position, the scores it chose from
    (draft vocabulary) and the draft id of each target id (``d2t`` inverse; identity for a full vocabulary)."""

    tokens: list[int]
    scores: np.ndarray
    draft_id: dict[int, int] | None
    #: a draft whose tokens the log does not show: per position the candidate ids the scores refer to, and the std
    #: of that position's logits
    candidates: np.ndarray | None = None
    row_scales: np.ndarray | None = None


def continuation(sequence: np.ndarray, b: DraftBlock) -> list[int]:
    """The target's tokens after the block's anchor (what a fully accepted draft would be).

    Example:
        >>> from types import SimpleNamespace as Block
        >>> continuation(np.arange(10), Block(n_context=3, n_draft=4))
        [4, 5, 6, 7]
    """
    start = int(b.n_context or 0) + 1
    return [int(x) for x in sequence[start:start + int(b.n_draft or 0)]]


@dataclass(frozen=True)
class DraftInputs:
    """What a variant's ``reference_drafts`` gets: the draft file, the target's weights, the target's tap features
    over the whole ``sequence`` (prompt then generated tokens; one row per token), the logged blocks (each one's
    anchor is ``sequence[n_context]``, checked before), the ``d2t`` inverse (None: full vocabulary) and whether to
    score with the head llama.cpp runs (``runtime_head``) rather than the one the draft was trained with; and the
    numpy target model (``target_model``) for a draft with no taps (``features`` is then empty)."""

    g: GGUFWeights
    target: TargetWeights
    features: np.ndarray
    sequence: np.ndarray
    blocks: Sequence[DraftBlock]
    draft_id: dict[int, int] | None
    runtime_head: bool = False
    #: the numpy target model (:class:`llama.target_np.TargetModel`) for a draft that reads more of the target than
    #: its tap features (a Gemma 4 assistant: its KV cache and last hidden row); None when the check has none
    target_model: Any = None

    def context(self, b: DraftBlock) -> np.ndarray:
        """The target's features of the block's context (its first ``n_context`` tokens)."""
        return self.features[:b.n_context]

    def prev_tokens(self, b: DraftBlock) -> np.ndarray:
        """Per block position, the token before it as llama.cpp chose it: the anchor, then its drafted tokens."""
        return np.asarray([b.anchor, *b.tokens[:-1]], dtype=np.int64)

    def continuation(self, b: DraftBlock) -> list[int]:
        """:func:`continuation` of the block in this sequence."""
        return continuation(self.sequence, b)


def reference_for(variant: str) -> ModuleType | None:
    """The reference module of GGUF variant ``variant`` (``llama.refs.<variant>``), None when the check does not
    cover it."""
    name = f"{__name__}.{variant}"
    return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None
