"""The ``eagle3`` variant in llama.cpp's loop: the three-way check's reference for an EAGLE-3 file.

Contract: :mod:`llama.refs`. One ``Eagle3Case`` per logged block (the context's tap features and its tokens
shifted by one, as many chained steps as llama.cpp drafted), with llama.cpp's drafted tokens forced as the chain's
feedback, so one near-tie does not shift the rest; scores in the draft vocabulary, mapped through ``d2t``.
"""

from __future__ import annotations

import numpy as np

from dspark_convert.variants.eagle3.numpy_forward import Eagle3Case, eagle3_forward
from llama.refs import DraftInputs, RefBlock


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The EAGLE-3 chained proposal for each of ``d.blocks`` (see the module docstring)."""
    cases = [Eagle3Case(d.context(b), d.sequence[1:int(b.n_context or 0) + 1], steps=len(b.tokens),
                        forced_tokens=np.asarray(b.tokens, dtype=np.int64)) for b in d.blocks]
    return [RefBlock(o.tokens.tolist(), o.logits, d.draft_id) for o in eagle3_forward(d.g, d.target, cases)]
