"""Gemma4 DSpark (DeepSpec ``Gemma4DSparkModel``): a ``dflash`` file on a Gemma 4 backbone (issue 22).

What this variant knows lives here, one module per concern: ``convert`` (the converter family: name table,
requirements, keys, the generated ``rope_freqs``), ``fit`` (fit facts), ``loader`` (b11434 loader rules for
``check``), ``numpy_forward`` (the GGUF side of ``verify``), ``torch_forward`` (the checkpoint side, with its own
HF names) and ``verify`` (rows, tensor accounting). This ``__init__`` holds only the registry descriptor
(names and predicates, no numpy), so the registry can import it.

A ``dflash`` file is this variant when it has ``blk.0.layer_output_scale.weight``: only the Gemma 4 block has a
per-layer output scale (llama.cpp loads it as an optional tensor of every ``dflash`` layer).
"""

from __future__ import annotations

from collections.abc import Collection

from ... import schema as S
from .. import DropRule, Value, Variant

MARKER = S.LAYER_PREFIX.format(bid=0) + S.L_LAYER_OUT_SCALE


def matches(value: Value, tensor_names: Collection[str]) -> bool:
    return value("general.architecture") == S.ARCH_DFLASH and MARKER in tensor_names


VARIANT = Variant(
    "gemma4_dspark", S.ARCH_DFLASH, matches, ("dspark_gemma4",), refines="dflash",
    checkpoint_drops=(
        DropRule("embed_tokens.weight", "the GGUF has no token_embd: the draft's stored copy is replaced by the "
                 "target's embeddings", if_gguf_lacks=S.T_TOKEN_EMBD),
    ),
    package="gemma4",
)
