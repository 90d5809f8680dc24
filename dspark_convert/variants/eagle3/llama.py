"""The ``eagle3`` variant in llama.cpp's loop: the three-way check's reference for an EAGLE-3 file.

The role (``Variant.role("llama")``, interface :mod:`dspark_convert.roles.llama`): one
:class:`.numpy_forward.Eagle3Case` per logged block (the context's tap features and its tokens shifted by one, as
many chained steps as llama.cpp drafted), with llama.cpp's drafted tokens forced as the chain's feedback, so one
near-tie does not shift the rest; scores in the draft vocabulary, mapped through ``d2t``.
"""

from __future__ import annotations

import numpy as np

from ...roles.llama import DraftInputs, RefBlock
from .numpy_forward import Eagle3Case, eagle3_forward


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The EAGLE-3 chained proposal for each of ``d.blocks`` (see the module docstring)."""
    cases = [Eagle3Case(d.context(b), d.sequence[1:int(b.n_context or 0) + 1], steps=len(b.tokens),
                        forced_tokens=np.asarray(b.tokens, dtype=np.int64)) for b in d.blocks]
    return [RefBlock(o.tokens.tolist(), o.logits, d.draft_id) for o in eagle3_forward(d.g, d.target, cases)]
