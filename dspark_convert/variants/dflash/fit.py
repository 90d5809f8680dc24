"""The fit facts of the ``dflash`` variant (``check --target``): the family word fit's rules are keyed by, and
:data:`ARCH_RULES`, the rules of every ``dflash`` file (the variants refining it too), which ``fit.rules.fit_rules``
runs after the vocabulary rules.

Example:
    >>> family_word({"fc.weight": (8, 4)}), family_word({"markov_w1.weight": (4, 8)})
    ('dflash', 'dspark')
"""

from __future__ import annotations

from collections.abc import Collection

from ... import schema as S
from ...plan import as_int
from ...roles.fit import Outcome, Pair, Rule

SRC_DFLASH = "common/speculative.cpp: common_speculative_impl_draft_dflash (constructor, process())"
SRC_MASK = "common/speculative.cpp: common_speculative_impl_draft_dflash::draft(); src/models/dflash.cpp"
SRC_HEAD = "src/models/dflash.cpp: load_tensors() (output absent, token_embd present -> output := token_embd)"


def family_word(tensor_names: Collection[str]) -> str:
    """``dspark`` for a ``dflash`` file with Markov tensors (DSpark), else ``dflash``."""
    return "dspark" if S.T_MARKOV_W1 in tensor_names else "dflash"


def rule_dflash_taps(p: Pair) -> Outcome:
    taps = p.draft.ints(S.DFLASH_TARGET_LAYERS)
    n = as_int(p.target.hp.get("block_count"))
    if taps is None or n is None:
        missing = S.DFLASH_TARGET_LAYERS if taps is None else "the target's block_count"
        return Outcome("skip", taps, n, f"{missing} is missing; nothing to compare")
    bad = [x for x in taps if not 0 <= x <= n]
    conv = f"(GGUF taps are HF target_layer_ids + 1: id k is the input of target layer k, {n} the last layer's output)"
    if bad:
        return Outcome("fail", taps, n, f"tap {bad[0]} is not a layer of the {n}-layer target: valid ids are 0..{n} "
                                        + conv, {"outside": bad})
    return Outcome("pass", taps, n, f"all in 0..{n} (HF target_layer_ids + 1; {n} = the last layer's output)")


def rule_dflash_fc(p: Pair) -> Outcome:
    taps = p.draft.ints(S.DFLASH_TARGET_LAYERS)
    return p.fc_width(len(taps) if taps else None, "taps")


def rule_mask_id(p: Pair) -> Outcome:
    mask = as_int(p.draft.kvs.get(S.TOKENIZER_MASK_ID))
    nt = p.vt.n_tokens
    if mask is None:
        return Outcome("skip", None, nt, "the draft has no tokenizer.ggml.mask_token_id (check FILE warns about it)")
    text = f" {p.target.tokens[mask]!r}" if mask < nt else ""
    return Outcome.verdict(mask < nt, mask, nt, f"mask token {mask}{text} " + (
        f"< {nt} target tokens" if mask < nt else f"is outside the target's {nt} tokens (the draft embeds its mask "
                                                  "block with the target's token rows)"))


#: the one line of the ``head`` rule's failure: why acceptance suffers and how to fix the file
HEAD_FIX = ("llama.cpp b11434 then scores drafts with token_embd.weight (the embeddings) instead of the target's "
            "head, so the file loads and stays lossless but acceptance will suffer; fix: reconvert with dspark-convert "
            "hf2gguf (its layout drafts with the target's head), or add output.weight with dspark-convert upgrade")


def rule_head(p: Pair) -> Outcome:
    """A full-vocabulary DFlash/DSpark draft with ``token_embd`` and no ``output`` (upstream's layout since b10705)
    runs with ``token_embd`` as its head (b11223+ loader); for an untied target that is the wrong matrix."""
    t = p.draft.tensors
    layout = "+".join(n.split(".")[0] for n in (S.T_TOKEN_EMBD, "output.weight") if n in t) or "neither"
    tied = p.target.tied
    target_head = "unknown" if tied is None else "tied" if tied else "untied"
    if S.T_D2T in t:
        return Outcome("pass", layout, target_head, "reduced vocabulary: the draft scores with its own head (d2t)")
    if "output.weight" in t:
        return Outcome("pass", layout, target_head, "the draft carries output.weight; llama.cpp scores with it")
    if S.T_TOKEN_EMBD not in t:
        return Outcome("pass", layout, target_head, "no token_embd/output: llama.cpp shares the target's embeddings and head")
    if tied is None:
        return Outcome("skip", layout, target_head, "the draft's head at run time is its token_embd; whether the target's "
                                                    "head is tied is unknown, so nothing to compare")
    if tied:
        return Outcome("pass", layout, target_head, "llama.cpp scores with token_embd, which is the tied target's head")
    return Outcome("fail", layout, target_head, "full-vocabulary draft with token_embd.weight but no output.weight, and "
                                                "the target's head is untied: " + HEAD_FIX)


ARCH_RULES: tuple[Rule, ...] = (
    Rule("taps", "every dflash.target_layers id is a target layer (0..block_count)", SRC_DFLASH, rule_dflash_taps),
    Rule("fc-width", "fc input width = taps x target embedding_length", SRC_DFLASH, rule_dflash_fc),
    Rule("mask-id", "mask token id < target vocabulary", SRC_MASK, rule_mask_id),
    Rule("head", "the head llama.cpp scores with is the target's (token_embd without output only for a tied target)",
         SRC_HEAD, rule_head),
)
