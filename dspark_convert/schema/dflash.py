"""The GGUF names of the ``dflash`` arch (DFlash / DSpark, contract §2.2, §2.3; data only): its arch string, the
``dflash.*`` keys, the draft's own tensors (``fc``, the encoder norm, the Markov and confidence heads, ``d2t``) and
its loader's tensor rows.

Read it through the package (``from .. import schema as S``): this module's rows of the merged tables
(``_KEY_TYPES``, ``_LOADER_LAYER_TENSORS``) are joined there.

Example:
    >>> ARCH_DFLASH, _LOADER_LAYER_TENSORS[L_ATTN_SINKS]
    ('dflash', False)
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import (
    ATTN_VALUE_SCALE,
    EMBEDDING_SCALE,
    FINAL_LOGIT_SOFTCAPPING,
    L_ATTN_K,
    L_ATTN_K_NORM,
    L_ATTN_NORM,
    L_ATTN_OUT,
    L_ATTN_Q,
    L_ATTN_Q_NORM,
    L_ATTN_SINKS,
    L_ATTN_V,
    L_FFN_DOWN,
    L_FFN_GATE,
    L_FFN_NORM,
    L_FFN_UP,
    LOGIT_SCALE,
    SLIDING_WINDOW,
    SLIDING_WINDOW_PATTERN,
)
from .section import ArrayOf

# ---------------------------------------------------------------------------------------------- architectures
ARCH_DFLASH = "dflash"
#: arch strings written by forks that upstream does not load (contract §1): never written, flagged by check.
FORBIDDEN_ARCHES = ("dspark", "dflash-draft")

# ---------------------------------------------------------------------------------------------- arch keys
# DFlash / DSpark (contract §2.2, §2.3)
DFLASH_BLOCK_SIZE = "dflash.block_size"
DFLASH_TARGET_LAYERS = "dflash.target_layers"
DFLASH_SLIDING_WINDOW = SLIDING_WINDOW.format(arch=ARCH_DFLASH)
DFLASH_SLIDING_WINDOW_PATTERN = SLIDING_WINDOW_PATTERN.format(arch=ARCH_DFLASH)
DFLASH_SAMPLE_FROM_ANCHOR = "dflash.sample_from_anchor"
DFLASH_DEFAULT_BLOCK_SIZE = 16
# DFlash-lineage keys upstream b11434 writes (spec/upstream-b11434.md §2.2, §2.3); the generic {arch}.* ones
# (value scale, logit scale, softcapping, embedding scale) are core.py's names
DFLASH_HAS_CONFIDENCE_HEAD = "dflash.has_confidence_head"

# ---------------------------------------------------------------------------------------------- value types
#: The GGUF value types of the DFlash keys (an array: its element types, contract §2.6): rows of the package's
#: ``KEY_TYPES``, after the generic arch keys.
_KEY_TYPES: dict[str, VT | ArrayOf] = {
    DFLASH_BLOCK_SIZE: VT.UINT32,
    DFLASH_TARGET_LAYERS: ArrayOf(VT.INT32, VT.UINT32),
    DFLASH_SLIDING_WINDOW: VT.UINT32,
    DFLASH_SLIDING_WINDOW_PATTERN: ArrayOf(VT.BOOL, VT.INT32, VT.UINT32),
    DFLASH_SAMPLE_FROM_ANCHOR: VT.BOOL,
    DFLASH_HAS_CONFIDENCE_HEAD: VT.BOOL,
    ATTN_VALUE_SCALE: VT.FLOAT32,
    LOGIT_SCALE: VT.FLOAT32,
    FINAL_LOGIT_SOFTCAPPING: VT.FLOAT32,
    EMBEDDING_SCALE: VT.FLOAT32,
}

# ---------------------------------------------------------------------------------------------- tensors
T_FC = "fc.weight"
T_FC_BIAS = "fc.bias"
T_ENC_NORM = "enc.output_norm.weight"
T_MARKOV_W1 = "markov_w1.weight"
T_MARKOV_W2 = "markov_w2.weight"
T_CONF_W = "conf_proj.weight"
T_CONF_B = "conf_proj.bias"
T_D2T = "d2t"
T_FC_SCALE = "fc.scale"

#: Per-layer tensors llama.cpp's ``dflash`` loader creates (ggml names without the blk.N. prefix; contract §7).
_LOADER_LAYER_TENSORS: dict[str, bool] = {  # name -> required
    L_ATTN_NORM: True, L_FFN_NORM: True, L_ATTN_Q: True, L_ATTN_K: True, L_ATTN_V: True, L_ATTN_OUT: True,
    L_ATTN_Q_NORM: True, L_ATTN_K_NORM: True, L_FFN_GATE: True, L_FFN_UP: True, L_FFN_DOWN: True,
    L_ATTN_SINKS: False,  # b10705+ loader: optional {n_head} (dflash.cpp:242)
}
