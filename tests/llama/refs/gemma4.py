"""The ``gemma4`` variant in llama.cpp's loop: the three-way check's reference for a Gemma4 DSpark file.

Contract: :mod:`llama.refs`. The same block proposal as DSpark, through the Gemma 4 decoder layers (the variant's
numpy forward, ``gemma4_forward``), the Markov chain fed llama.cpp's previous choices; the scores are the Markov
head's logits when the file has one. The target's tap features come from the numpy Gemma 4 target forward
(:mod:`llama.target_np`). The forward scores with the file's head as llama.cpp does (``runtime_head`` is not
consulted).
"""

from __future__ import annotations

from dspark_convert.variants.gemma4.numpy_forward import gemma4_forward
from llama.refs import DraftInputs, RefBlock


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The Gemma4 DSpark block proposal for each of ``d.blocks`` (see the module docstring)."""
    outs = gemma4_forward(d.g, d.target, [d.context(b) for b in d.blocks], [int(b.anchor or 0) for b in d.blocks],
                          prev_tokens=[d.prev_tokens(b) for b in d.blocks])
    return [RefBlock(o.tokens.tolist(), o.markov_logits if o.markov_logits is not None else o.logits, d.draft_id)
            for o in outs]
