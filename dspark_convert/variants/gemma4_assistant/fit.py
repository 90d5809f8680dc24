"""``check DRAFT --target TARGET`` rows of every ``gemma4-assistant`` file (``ARCH_RULES``): what llama.cpp's MTP
driver needs from the Gemma 4 target it runs beside (``common/speculative.cpp``: ``embedding_length_out`` equal to
the target's ``n_embd_out``; ``src/llama-model.cpp``: the assistant's sliding / full layers read the target's last
sliding / full KV layers, so the K/V head sizes must match; ``src/models/gemma4-assistant.cpp``: the target's
token embeddings are scaled and concatenated with its hidden row). The vocabulary rows are the generic ones.
"""

from __future__ import annotations

from typing import Any

from ... import schema as S
from ...plan import as_int
from ...roles.fit import Outcome, Pair, Rule

SRC_MTP = ("common/speculative.cpp: common_speculative_impl_draft_mtp constructor (n_embd_out asserted equal); "
           "src/llama-model.cpp shares the target's last sliding / full KV layers")



def _draft(p: Pair, tpl: str) -> Any:
    plan = p.draft.plan
    return None if plan is None else plan.value(tpl.format(arch=S.ARCH_GEMMA4_ASSISTANT))


def rule_backbone_size(p: Pair) -> Outcome:
    """``embedding_length_out`` (the assistant's backbone size) equals the target's hidden size."""
    got, want = as_int(_draft(p, S.EMBEDDING_LENGTH_OUT)), as_int(p.target.hp.get("embedding_length"))
    if got is None or want is None:
        return Outcome("skip", got, want, "a hidden size is unknown")
    ok = got == want
    return Outcome.verdict(ok, got, want,
                   f"embedding_length_out {got} = target hidden size" if ok else
                   f"embedding_length_out is {got}, but the target's hidden size is {want}: llama-server refuses the "
                   "pair (the assistant concatenates the target's embedding and hidden row, 2 x that width)")


def _head_rule(tpl: str, hp_key: str, what: str) -> Any:
    def rule(p: Pair) -> Outcome:
        got, want = as_int(_draft(p, tpl)), as_int(p.target.hp.get(hp_key))
        if got is None or want is None:
            return Outcome("skip", got, want, f"a {what} head size is unknown")
        ok = got == want
        return Outcome.verdict(ok, got, want, f"{what} head size {got} on both sides" if ok else
                       f"the assistant's {what} layers have head size {got}, the target's {want}: they attend over "
                       f"the target's last {what} KV layer, whose heads must have the same size")
    return rule


ARCH_RULES: tuple[Rule, ...] = (
    Rule.target_family(SRC_MTP, "Gemma 4", "gemma4", "Gemma 4 assistant", "KV cache, embeddings and last hidden row"),
    Rule("target-hidden-size", "embedding_length_out = target hidden size", SRC_MTP, rule_backbone_size),
    Rule("head-size-full", "key_length of both sides (full-attention layers)", SRC_MTP,
         _head_rule(S.KEY_LENGTH, "key_length", "full-attention")),
    Rule("head-size-swa", "key_length_swa of both sides (sliding layers)", SRC_MTP,
         _head_rule(S.KEY_LENGTH_SWA, "key_length_swa", "sliding")),
)
