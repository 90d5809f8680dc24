"""The ``dflash`` variant in llama.cpp's loop: the three-way check's reference for a DSpark or DFlash file.

Contract: :mod:`llama.refs`. One ``BlockCase`` per logged block (the context's tap features, the anchor, and as
previous tokens llama.cpp's own choices, which feed DSpark's Markov head), run by the variant's numpy forward
(``dflash_forward``) with the head the check asks for (``runtime_head``). The proposal's scores are the Markov
head's logits when the file has one, else the block's logits. A ModelOpt NVFP4 file runs the same forward on its
dequantized blocks (times their ``.scale``).
"""

from __future__ import annotations

from dspark_convert.variants.dflash.numpy_forward import BlockCase, dflash_forward
from llama.refs import DraftInputs, RefBlock


def reference_drafts(d: DraftInputs) -> list[RefBlock]:
    """The DSpark / DFlash block proposal for each of ``d.blocks`` (see the module docstring)."""
    cases = [BlockCase(d.context(b), int(b.anchor or 0), prev_tokens=d.prev_tokens(b)) for b in d.blocks]
    outs = dflash_forward(d.g, d.target, cases, runtime_head=d.runtime_head)
    return [RefBlock(o.tokens.tolist(), o.markov_logits if o.markov_logits is not None else o.logits, d.draft_id)
            for o in outs]
