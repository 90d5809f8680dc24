"""The GGUF names of the ``eagle3`` arch (EAGLE-3, contract §2.4; data only): its arch string, the ``eagle3.*``
keys, its own tensors (``attn_norm_2``, ``rope_freqs``) and its loader's tensor rows.

Read it through the package (``from .. import schema as S``): this module's rows of the merged tables
(``_KEY_TYPES``, ``_LOADER_LAYER_TENSORS``) are joined there.

Example:
    >>> ARCH_EAGLE3, L_ATTN_NORM_2 in _LOADER_LAYER_TENSORS
    ('eagle3', True)
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import (
    L_ATTN_K,
    L_ATTN_NORM,
    L_ATTN_OUT,
    L_ATTN_Q,
    L_ATTN_V,
    L_FFN_DOWN,
    L_FFN_GATE,
    L_FFN_NORM,
    L_FFN_UP,
)
from .section import ArrayOf

# ---------------------------------------------------------------------------------------------- architectures
ARCH_EAGLE3 = "eagle3"

# ---------------------------------------------------------------------------------------------- arch keys
# EAGLE-3 (contract §2.4)
EAGLE3_TARGET_LAYERS = "eagle3.target_layers"
EAGLE3_TARGET_HIDDEN_SIZE = "eagle3.target_hidden_size"
EAGLE3_NORM_BEFORE_RESIDUAL = "eagle3.norm_before_residual"
EAGLE3_NORM_BEFORE_FC = "eagle3.norm_before_fc"

# ---------------------------------------------------------------------------------------------- value types
#: The GGUF value types of the EAGLE-3 keys (an array: its element types, contract §2.6): rows of the package's
#: ``KEY_TYPES``, after the DFlash keys.
_KEY_TYPES: dict[str, VT | ArrayOf] = {
    EAGLE3_TARGET_LAYERS: ArrayOf(VT.INT32, VT.UINT32),
    EAGLE3_TARGET_HIDDEN_SIZE: VT.UINT32,
    EAGLE3_NORM_BEFORE_RESIDUAL: VT.BOOL,
    EAGLE3_NORM_BEFORE_FC: VT.BOOL,
}

# ---------------------------------------------------------------------------------------------- tensors
L_ATTN_NORM_2 = "attn_norm_2.weight"  # EAGLE-3: the norm of the target hidden states
T_ROPE_FREQS = "rope_freqs.weight"

#: Per-layer tensors llama.cpp's ``eagle3`` loader creates (ggml names without the blk.N. prefix; contract §7).
_LOADER_LAYER_TENSORS: dict[str, bool] = {  # name -> required
    L_ATTN_NORM: True, L_ATTN_NORM_2: True, L_FFN_NORM: True, L_ATTN_Q: True, L_ATTN_K: True, L_ATTN_V: True,
    L_ATTN_OUT: True, L_FFN_GATE: True, L_FFN_UP: True, L_FFN_DOWN: True,
}
