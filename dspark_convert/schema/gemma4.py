"""Gemma4 DSpark: DeepSpec ``Gemma4DSparkModel``, arch ``dflash`` on a Gemma 4 backbone: K used as V,
sandwich norms, a per-layer output scale and proportional RoPE (spec/upstream-b11434.md §2.5; manifests-b11434/
n-gemma4-dspark). Data only; the family's knowledge is dspark_convert/variants/gemma4/.

Read it through the package (``from .. import schema as S``): this module's rows of ``KEY_TYPES`` (``_KEY_TYPES``)
are joined there.

Example:
    >>> ATTENTION_SCALE.format(arch="dflash"), _KEY_TYPES[HIDDEN_ACTIVATION].name
    ('dflash.attention.scale', 'STRING')
"""

from __future__ import annotations

from ..gguf_constants import VT

ATTENTION_SCALE = "{arch}.attention.scale"
HIDDEN_ACTIVATION = "{arch}.hidden_activation"
#: per-layer tensors (names without blk.N.): the Gemma sandwich norms and the layer output scale
L_ATTN_POST_NORM = "post_attention_norm.weight"
L_FFN_POST_NORM = "post_ffw_norm.weight"
L_LAYER_OUT_SCALE = "layer_output_scale.weight"  #: its presence makes a ``dflash`` file a Gemma4 DSpark
#: The GGUF value types of the Gemma4 keys: the last rows of the package's ``KEY_TYPES``.
_KEY_TYPES: dict[str, VT] = {ATTENTION_SCALE: VT.FLOAT32, HIDDEN_ACTIVATION: VT.STRING}
