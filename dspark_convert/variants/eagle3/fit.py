"""The fit facts of the ``eagle3`` variant (``check --target``): :data:`ARCH_RULES`, the rules of every ``eagle3``
file, which ``fit.rules.fit_rules`` runs after the vocabulary rules.
"""

from __future__ import annotations

from ... import schema as S
from ...plan import as_int
from ...roles.fit import Outcome, Pair, Rule

SRC_EAGLE3 = "common/speculative.cpp: common_speculative_impl_draft_eagle3 (constructor)"
SRC_VOCAB_COVER = "common/speculative.cpp: spec_check_draft_ctx(need_vocab = true)"


def rule_eagle3_layers(p: Pair) -> Outcome:
    taps = p.draft.ints(S.EAGLE3_TARGET_LAYERS)
    n = as_int(p.target.hp.get("block_count"))
    if taps is None or len(taps) != 3:
        return Outcome("fail", taps, n, f"eagle3.target_layers has {None if taps is None else len(taps)} entries; "
                                        "llama.cpp: \"draft model is not eagle3 (expected 3 extract layers, got N)\"")
    if n is None:
        return Outcome("skip", taps, n, "the target's block_count is missing; nothing to compare")
    bad = [x for x in taps if not 0 <= x <= n]
    if bad:
        return Outcome("fail", taps, n, f"extract layer {bad[0]} is not a layer of the target: valid ids are 0..{n} "
                                        f"(id {n} = the final hidden state); llama.cpp aborts with \"target layer id "
                                        "exceeds target n_layer\"", {"outside": bad})
    return Outcome("pass", taps, n, f"3 extract layers, all in 0..{n} ({n} = the final hidden state)")


def rule_eagle3_fc(p: Pair) -> Outcome:
    out = p.fc_width(3, "extract layers")
    ht = p.draft.kvs.get(S.EAGLE3_TARGET_HIDDEN_SIZE)
    return Outcome(out.status, out.draft, out.target, f"{out.message} (draft eagle3.target_hidden_size {ht})")


def rule_vocab_cover(p: Pair) -> Outcome:
    nd, nt = p.vd.n_tokens, p.vt.n_tokens
    msg = f"draft {nd} tokens {'>=' if nd >= nt else '<'} target {nt}"
    return Outcome.verdict(nd >= nt, nd, nt, msg + ("" if nd >= nt else "; llama.cpp: \"the draft vocab is smaller than "
                                                                      "the target's; target tokens past it cannot be mirrored\""))


ARCH_RULES: tuple[Rule, ...] = (
    Rule("extract-layers", "exactly 3 eagle3.target_layers, all in 0..block_count", SRC_EAGLE3, rule_eagle3_layers),
    Rule("fc-width", "fc input width = 3 x target embedding_length", SRC_EAGLE3, rule_eagle3_fc),
    Rule("vocab-cover", "draft vocabulary at least the target's", SRC_VOCAB_COVER, rule_vocab_cover),
)
