"""Gemma4 DSpark fit facts: what a planned Gemma4 DSpark file says about its target, for the conversion-time fit
checks (``fit/conversion.py``).

``fc`` takes one target hidden state per target layer (as every ``dflash`` file). The draft's full-attention RoPE
is its own (proportional, with ``rope_freqs``), not the target's sliding / full mix, so the generic
``target-rope`` comparison (theta and scaling type against the target's top-level rope) does not apply: the
Gemma 4 target's ``proportional`` type would be reported as a mismatch it is not.
"""

from __future__ import annotations

import math

from ... import schema as S
from ...plan import Plan
from ...roles.convert import Context, TargetFacts
from ...roles.fit import Outcome, Pair, Rule


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    taps = plan.value(S.DFLASH_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None, shares_rope=False)


# ---------------------------------------------------------------------------------------------- check --target
SRC_GRAPH = "src/models/dflash.cpp: llama_model_dflash::graph (embedding_scale, rope_freqs, K as V)"


def rule_embedding_scale(p: Pair) -> Outcome:
    """llama.cpp multiplies the draft's token embeddings by ``embedding_scale``; Gemma 4 scales by sqrt(hidden)."""
    got = None if p.draft.plan is None else p.draft.plan.value(S.EMBEDDING_SCALE.format(arch=S.ARCH_DFLASH))
    n = p.target.hp.get("embedding_length")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return Outcome("skip", got, n, "the target's hidden size is unknown")
    want = math.sqrt(n)
    ok = isinstance(got, (int, float)) and not isinstance(got, bool) and math.isclose(float(got), want, rel_tol=1e-6)
    return Outcome.verdict(ok, got, n, f"embedding_scale {got} = sqrt(target hidden size {n})" if ok else
                   f"embedding_scale is {got}, expected sqrt(target hidden size {n}) = {want:.6g} (Gemma 4 scales "
                   "its embeddings by it)")


def rule_rope_kind(p: Pair) -> Outcome:
    """Replaces the generic ``rope-scaling`` row: ``rope_freqs.weight`` here is proportional RoPE, not llama3
    scaling."""
    a = "proportional (rope_freqs.weight)" if S.T_ROPE_FREQS in p.draft.tensors else "default"
    kind = p.target.hp.get("rope_scaling_type")
    b = "default" if kind in (None, "none", "default") else str(kind)
    same = a.split(" ")[0] == b
    return Outcome("pass" if same else "info", a, b, "full-attention RoPE of the same kind" if same else
                   f"full-attention RoPE differs: draft {a}, target {b}")


RULES: tuple[Rule, ...] = (
    Rule.target_family(SRC_GRAPH, "Gemma 4", "gemma4", "Gemma4 DSpark draft", "hidden states and embeddings"),
    Rule("embedding-scale", "embedding_scale = sqrt(target hidden size)", SRC_GRAPH, rule_embedding_scale),
    Rule("rope-scaling", "full-attention RoPE kind of both sides (proportional: rope_freqs.weight)", SRC_GRAPH,
         rule_rope_kind),
)
