"""Gemma 4 assistant (``Gemma4AssistantForCausalLM`` / ``Gemma4UnifiedAssistantForCausalLM``): arch
``gemma4-assistant``, a Q-only multi-token-prediction head that reads the target's KV cache, token embeddings and
last hidden row (spec/drafts-beyond-dflash.md §2; upstream b11434 ``conversion/gemma.py:933-951``,
``src/models/gemma4-assistant.cpp``). Data only; the family's knowledge is dspark_convert/variants/gemma4_assistant/.

Read it through the package (``from .. import schema as S``): this module's rows of ``KEY_TYPES`` and
``ARRAY_ELEMENT_TYPES`` (``_KEY_TYPES``) and the loader rows are joined there.

Example:
    >>> EMBEDDING_LENGTH_OUT.format(arch=ARCH_GEMMA4_ASSISTANT), T_PRE_PROJECTION
    ('gemma4-assistant.embedding_length_out', 'nextn.pre_projection.weight')
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import (
    EMBEDDING_LENGTH_OUT,
    EXPERT_FEED_FORWARD_LENGTH,
    KEY_LENGTH_SWA,
    NEXTN_PREDICT_LAYERS,
    SLIDING_WINDOW,
    SLIDING_WINDOW_PATTERN,
    VALUE_LENGTH_SWA,
)
from .section import ArrayOf

ARCH_GEMMA4_ASSISTANT = "gemma4-assistant"
SHARED_KV_LAYERS = "{arch}.attention.shared_kv_layers"
EMBEDDING_LENGTH_PER_LAYER_INPUT = "{arch}.embedding_length_per_layer_input"
ROPE_DIMENSION_COUNT_SWA = "{arch}.rope.dimension_count_swa"
#: root tensors (no ``blk.`` prefix)
T_PRE_PROJECTION = "nextn.pre_projection.weight"
T_POST_PROJECTION = "nextn.post_projection.weight"
#: The GGUF value types of the assistant's keys (an array: its element types; ``feed_forward_length`` /
#: ``head_count_kv`` may be per-layer arrays: the generic rows accept either).
_KEY_TYPES: dict[str, VT | ArrayOf] = {
    EMBEDDING_LENGTH_OUT: VT.UINT32, NEXTN_PREDICT_LAYERS: VT.UINT32, SHARED_KV_LAYERS: VT.UINT32,
    EMBEDDING_LENGTH_PER_LAYER_INPUT: VT.UINT32, SLIDING_WINDOW: VT.UINT32, SLIDING_WINDOW_PATTERN: ArrayOf(VT.BOOL),
    KEY_LENGTH_SWA: VT.UINT32, VALUE_LENGTH_SWA: VT.UINT32, ROPE_DIMENSION_COUNT_SWA: VT.UINT32,
    EXPERT_FEED_FORWARD_LENGTH: VT.UINT32,
}
