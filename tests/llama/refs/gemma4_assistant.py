"""The ``gemma4_assistant`` variant in llama.cpp's loop: the three-way check's reference for a Gemma 4 assistant.

Contract: :mod:`llama.refs`. The assistant reads no tap features; for each logged block (context ``T``, anchor
``a``) it reads what llama.cpp's MTP driver hands it from the target (``common/speculative.cpp``, shared-memory
mode; ``src/llama-model.cpp``'s KV sharing): the target's KV cache over positions ``0 .. T-1`` of its layer
``n_layer - 2`` (the sliding layers') and ``n_layer - 1`` (the full layers'), stored as F16 as llama-server's
default cache type stores them; the target's post-final-norm hidden row of position ``T - 1`` (its ``h_nextn``);
the target's token embeddings. The numpy target forward (:func:`llama.target_np.gemma4_forward`) computes them;
the assistant's chain (the variant's ``assistant_forward``) is fed llama.cpp's drafted tokens (its own ``h_nextn``
rows), one step per logged position, so that one near-tie does not shift the rest, and rounds each matmul's input
rows as llama.cpp's CPU kernels do (BF16, F16, Q8_0 blocks by the weight's type): a chain multiplies that rounding
step by step.
"""

from __future__ import annotations

import numpy as np

from dspark_convert.errors import ConvertError
from dspark_convert.reference.ops import F32, rms_norm
from dspark_convert.variants.gemma4_assistant.numpy_forward import (
    FULL,
    SWA,
    AssistantCase,
    assistant_forward,
    read_hparams,
)
from llama.refs import DraftInputs, RefBlock
from llama.target_np import gemma4_forward

#: the target layers whose cache each kind of assistant layer reads, counted from the end
SHARED = {SWA: 2, FULL: 1}


def _f16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float16).astype(F32)


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The assistant's chained proposal for each of ``d.blocks`` (see the module docstring)."""
    m = d.target_model
    if m is None:
        raise ConvertError(f"{d.g.path}: a Gemma 4 assistant reads the target's KV cache: the check needs the target model")
    cache: list[tuple[np.ndarray, np.ndarray]] = []
    out = gemma4_forward(m, [int(t) for t in d.sequence], cache)
    normed = rms_norm(out.hidden[-1], m.w("norm.weight"), m.eps)
    hp = read_hparams(d.g)
    kinds = {hp.kind(i) for i in range(hp.n_layer)}
    embed = m.embed

    def rows(tokens: list[int]) -> np.ndarray:
        return np.asarray(embed[np.asarray(tokens, dtype=np.int64)], F32)

    cases, forced = [], []
    for b in d.blocks:
        T = int(b.n_context or 0)
        kv = {k: (_f16(cache[-SHARED[k]][0][:T]), _f16(cache[-SHARED[k]][1][:T])) for k in kinds}
        cases.append(AssistantCase(normed[T - 1], int(b.anchor or 0), rows, kv))
        forced.append((d.prev_tokens(b), None))
    outs = []
    for c, f, b in zip(cases, forced, d.blocks, strict=True):   # each block its own chain length
        outs += assistant_forward(d.g, [c], max(1, len(b.tokens)), [f], ggml_rounding=True)
    return [RefBlock(o.tokens.tolist(), np.concatenate(o.logits), None) for o in outs]
