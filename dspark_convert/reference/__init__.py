"""Reference forwards used by ``verify``.

- :mod:`.dflash_np` (DSpark / DFlash) and :mod:`.eagle3_np` (EAGLE-3): readable numpy forwards that read
  weights and every hyperparameter from a GGUF file, streaming layer by layer.
- :mod:`.torch_forward` (with :mod:`.hf_draft`, which reads the folder, and :mod:`.storage`, which rounds its
  values the way the GGUF stores them): an independent float32 torch forward of the original Hugging Face
  folder. These and :mod:`.dsv4_tensors` (the DeepSeek-V4 tensor-level checks) are the only modules that use
  torch; import them explicitly (they are not imported here).
- :mod:`.ops`: the shared numpy primitives (RMSNorm, RoPE, attention, MLP) and the common GGUF hyperparameters.
- :mod:`.weights`: lazy GGUF / target-checkpoint access (the single GGUF adapter, :func:`open_gguf`).

Example:
    >>> from dspark_convert.reference import dflash_forward, open_gguf, TargetWeights
    >>> out = dflash_forward(open_gguf("draft.gguf"), TargetWeights("Qwen3-8B"), [BlockCase(features, 42)])  # doctest: +SKIP
"""

from __future__ import annotations

from .dflash_np import (
    BlockCase,
    BlockOutputs,
    DFlashHParams,
    block_forward,
    confidence,
    context_projection,
    dflash_forward,
    markov_chain,
)
from .eagle3_np import Eagle3Case, Eagle3HParams, Eagle3Outputs, eagle3_forward, eagle3_step
from .ops import CommonHParams, attention, mlp, read_common_hparams, rms_norm, rope_cos_sin, rope_neox, rope_norm
from .weights import GGUFWeights, TargetWeights, open_gguf

__all__ = [
    "BlockCase", "BlockOutputs", "CommonHParams", "DFlashHParams", "Eagle3Case", "Eagle3HParams", "Eagle3Outputs",
    "GGUFWeights", "TargetWeights", "attention", "block_forward", "confidence", "context_projection", "dflash_forward",
    "eagle3_forward", "eagle3_step", "markov_chain", "mlp", "open_gguf", "read_common_hparams", "rms_norm",
    "rope_cos_sin", "rope_neox", "rope_norm",
]
