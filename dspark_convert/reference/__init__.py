"""Shared reference machinery used by ``verify`` and by each variant's forwards (no family knowledge here).

- :mod:`.ops`: the shared numpy primitives (RMSNorm, RoPE, attention, MLP) and the common GGUF hyperparameters.
- :mod:`.weights`: lazy GGUF / target-checkpoint access (the single GGUF adapter, :func:`open_gguf`).
- :mod:`.layers_torch` (with :mod:`.hf_draft`, which reads the folder, and :mod:`.storage`, which rounds its
  values the way the GGUF stores them): the shared torch primitives and decoder block of the independent float32
  forwards of the original Hugging Face folder. These use torch; import them explicitly (they are not imported here).

Each variant's own forwards are ``dspark_convert.variants.<name>.numpy_forward`` (read weights and every
hyperparameter from a GGUF file, streaming layer by layer) and ``.torch_forward``.

Example:
    >>> from dspark_convert.reference import open_gguf, TargetWeights
    >>> g = open_gguf("draft.gguf")  # doctest: +SKIP
"""

from __future__ import annotations

from .weights import GGUFWeights, TargetWeights, open_gguf

__all__ = ["GGUFWeights", "TargetWeights", "open_gguf"]
