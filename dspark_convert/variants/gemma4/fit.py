"""Gemma4 DSpark fit facts: what a planned Gemma4 DSpark file says about its target, for the conversion-time fit
checks (``fit/conversion.py``).

``fc`` takes one target hidden state per target layer (as every ``dflash`` file). The draft's full-attention RoPE
is its own (proportional, with ``rope_freqs``), not the target's sliding / full mix, so the generic
``target-rope`` comparison (theta and scaling type against the target's top-level rope) does not apply: the
Gemma 4 target's ``proportional`` type would be reported as a mismatch it is not.
"""

from __future__ import annotations

from ... import schema as S
from ...families.base import Context, TargetFacts
from ...plan import Plan


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    taps = plan.value(S.DFLASH_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None, shares_rope=False)
