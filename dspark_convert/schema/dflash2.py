"""DFlash2: z-lab ``DFlash2DraftModel``, arch ``dflash`` with per-layer dynamic convolutions and a
low-rank candidate selector (spec/upstream-b11434.md §2.1; manifests-b11434/n-dflash2*). Data only: the conv and
selector keys and tensor names.

Read it through the package (``from .. import schema as S``): this module's rows of ``KEY_TYPES`` (``_KEY_TYPES``)
are joined there.

Example:
    >>> DFLASH_SELECTOR_RANK, _KEY_TYPES[DFLASH_CONV_KERNEL_SIZE].name
    ('dflash.selector_rank', 'UINT32')
"""

from __future__ import annotations

from ..gguf_constants import VT
from .core import ATTN_VALUE_SCALE, EMBEDDING_SCALE, FINAL_LOGIT_SOFTCAPPING, LOGIT_SCALE

DFLASH_CONV_KERNEL_SIZE = "dflash.conv_kernel_size"
DFLASH_CONV_GROUP_SIZE = "dflash.conv_group_size"
DFLASH_SELECTOR_RANK = "dflash.selector_rank"
DFLASH_SELECTOR_TOP_K = "dflash.selector_top_k"
# it also writes the generic {arch}.* scale keys (core.py: LOGIT_SCALE, FINAL_LOGIT_SOFTCAPPING, EMBEDDING_SCALE,
# ATTN_VALUE_SCALE)
#: per-layer conv tensors (names without blk.N.); the base kernels have no ``.weight`` suffix (F32 in any file)
L_ATTN_CONV_BASE = "attn_conv_base"
L_ATTN_CONV_PROJ = "attn_conv_proj.weight"
L_FFN_CONV_BASE = "ffn_conv_base"
L_FFN_CONV_PROJ = "ffn_conv_proj.weight"
T_SELECTOR_PREV = "selector_predecessor.weight"
T_SELECTOR_NEXT = "selector_successor.weight"
T_SELECTOR_HIDDEN = "selector_hidden.weight"  #: its presence makes llama.cpp load the file as DFlash2
#: The GGUF value types of the DFlash2 keys: rows of the package's ``KEY_TYPES``, after the DSV4 keys (the scale
#: keys are rows of dflash.py's already, with the same types: they keep their place there).
_KEY_TYPES: dict[str, VT] = {
    DFLASH_CONV_KERNEL_SIZE: VT.UINT32, DFLASH_CONV_GROUP_SIZE: VT.UINT32, DFLASH_SELECTOR_RANK: VT.UINT32,
    DFLASH_SELECTOR_TOP_K: VT.UINT32, LOGIT_SCALE: VT.FLOAT32, FINAL_LOGIT_SOFTCAPPING: VT.FLOAT32,
    EMBEDDING_SCALE: VT.FLOAT32, ATTN_VALUE_SCALE: VT.FLOAT32,
}
