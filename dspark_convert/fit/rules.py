"""Will this draft work with my target? llama.cpp's runtime draft/target rules, as data, one function per rule.

:data:`RULES` and :data:`TAIL_RULES` list the rules of every draft, each GGUF architecture's variant package its own
(``variants/<variant>/fit.py``: ``ARCH_RULES``), each with the llama.cpp source it replays (file and function;
docs/check.md quotes them). :func:`check_fit` reads both sides and runs the rules; each result says
pass / fail / info / skip with the value on both sides.

Example:
    >>> report = check_fit("draft.gguf", "Qwen3-8B-Q4_K_M.gguf")  # doctest: +SKIP
    >>> report.ok, [r.id for r in report.results if r.status == "fail"]  # doctest: +SKIP
    (True, [])
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import schema as S
from ..findings import Finding, JsonRow
from ..gguffile.options import RemoteOptions
from ..notes import collecting
from ..plan import as_int
from ..roles.fit import Outcome, Pair, Rule, Side, as_ints, token_text
from .sides import open_target, side_from_gguf

#: llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE and SPEC_VOCAB_CHECK_START_TOKEN_ID (common/speculative.cpp)
MAX_VOCAB_DIFFERENCE = 128
FIRST_CHECKED_TOKEN = 5

SRC_COMPAT = "common/speculative.cpp: common_speculative_are_compatible()"
SRC_D2T = f"src/models/{S.ARCH_DFLASH}.cpp, src/models/{S.ARCH_EAGLE3}.cpp: d2t (draft id -> target id)"
SRC_HPARAMS = "src/llama-model.cpp: load_hparams() (rope.freq_base, rope.scaling.*, context_length)"
SRC_GRAPH = ("common/speculative.cpp: llama_set_embeddings_layer_inp(); src/llama-graph.cpp: set_outputs() "
             "(\"layer input tensor is null\"); src/models/<target>.cpp: res->t_layer_inp")
SRC_TEMPLATE = "common/chat.cpp: common_chat_templates_init() (llama-server calls it on the target model)"


@dataclass(frozen=True)
class RuleResult(JsonRow):
    """An :class:`Outcome` with the rule's id and its llama.cpp source (the ``--json`` ``rules[]`` entries)."""

    id: str
    status: str
    draft: Any
    target: Any
    message: str
    source: str
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- vocabulary rules
def rule_vocab_type(p: Pair) -> Outcome:
    d, t = p.vd, p.vt
    shown = (f"{d.model} ({d.type})", f"{t.model} ({t.type})")
    if d.type == t.type:
        return Outcome("pass", *shown, f"both {d.type}")
    return Outcome("fail", *shown, f"vocab type differs: draft {d.type} ({d.model}), target {t.type} ({t.model}); "
                                   "llama.cpp: \"draft model vocab type must match target model\"")


def _special_rule(which: str) -> Callable[[Pair], Outcome]:
    def rule(p: Pair) -> Outcome:
        d, t = p.vd, p.vt
        add_d, add_t = (d.add_bos, t.add_bos) if which == "bos" else (d.add_eos, t.add_eos)
        id_d, id_t = (d.bos, t.bos) if which == "bos" else (d.eos, t.eos)
        shown = (d.describe(which, p.draft.tokens), t.describe(which, p.target.tokens))
        if add_d != add_t:
            return Outcome("fail", *shown, f"add_{which} differs: draft {str(add_d).lower()}, target "
                                           f"{str(add_t).lower()}")
        if add_t and id_d != id_t:
            return Outcome("fail", *shown, f"{which.upper()} id differs: draft {id_d}, target {id_t} (both add it)")
        if add_t:
            return Outcome("pass", *shown, f"both add {which.upper()} {id_t}")
        return Outcome("pass", *shown, f"neither adds {which.upper()} (its id is not compared)")

    rule.__name__ = f"rule_{which}"
    return rule


def rule_vocab_size(p: Pair) -> Outcome:
    nd, nt = p.vd.n_tokens, p.vt.n_tokens
    diff = abs(nd - nt)
    ok = diff <= MAX_VOCAB_DIFFERENCE
    return Outcome.verdict(ok, nd, nt, f"draft {nd} tokens, target {nt}: difference {diff} "
                                    f"{'<=' if ok else '>'} {MAX_VOCAB_DIFFERENCE}",
                   {"difference": diff, "max": MAX_VOCAB_DIFFERENCE})


def rule_token_text(p: Pair) -> Outcome:
    ta, tb = p.draft.tokens, p.target.tokens
    n = min(len(ta), len(tb))
    first = FIRST_CHECKED_TOKEN
    span = f"ids {first}..{n - 1}" if n > first else "no ids"
    details: dict[str, Any] = {"first_id": first, "end_id": n, "differing": 0}
    if ta.same_prefix(tb):  # identical stored bytes need no decoding
        return Outcome("pass", len(ta), len(tb), f"equal for {span}", details)
    a, b = ta.values(), tb.values()
    differ = [i for i in range(first, n) if a[i] != b[i] and token_text(a, i) != token_text(b, i)]
    details["differing"] = len(differ)
    if not differ:
        return Outcome("pass", len(ta), len(tb), f"equal for {span}", details)
    i = differ[0]
    details["first_differing_id"] = i
    return Outcome("fail", token_text(a, i), token_text(b, i),
                   f"token {i} differs: draft {token_text(a, i)!r}, target {token_text(b, i)!r}; "
                   f"{len(differ)} of {n - first} ids ({span}) differ", details)


def rule_d2t(p: Pair) -> Outcome:
    rng, nt = p.draft.d2t_range, p.vt.n_tokens
    if rng is None and p.draft.header_only and S.T_D2T in p.draft.tensors:
        return Outcome("skip", None, nt, "the draft is remote: its d2t data was not fetched (check a local copy)")
    if rng is None:
        return Outcome("skip", None, nt, "no d2t tensor: the draft predicts ids of the full vocabulary")
    lo, hi = rng
    ok = lo >= 0 and hi < nt
    return Outcome.verdict(ok, [lo, hi], nt, f"d2t maps to target ids {lo}..{hi}" + (
        f", all < {nt} target tokens" if ok else f", outside the target's {nt} tokens"))


# ---------------------------------------------------------------------------------------------- informational
def _same(a: Any, b: Any, what: str) -> str:
    return f"{what} {'equal' if a == b else 'differ'}: draft {_num(a)}, target {_num(b)}"


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def rule_rope_base(p: Pair) -> Outcome:
    a, b = p.draft.hp.get("rope_freq_base"), p.target.hp.get("rope_freq_base")
    return Outcome("info", a, b, _same(a, b, "rope bases"))


def _scaling(hp: dict[str, Any], tensors: dict[str, Any] | None = None) -> str:
    """A side's rope scaling; a GGUF whose llama3 scaling lives in ``rope_freqs.weight`` (no ``rope.scaling.*``
    keys, as upstream writes llama3 scaling) says so instead of ``none``."""
    kind = hp.get("rope_scaling_type")
    if kind in (None, "none"):
        return f"llama3 (frequency factors in {S.T_ROPE_FREQS})" if tensors and S.T_ROPE_FREQS in tensors else "none"
    orig = hp.get("rope_scaling_orig_ctx")
    return f"{kind} x{hp.get('rope_scaling_factor')}" + (f" (original context {orig})" if orig else "")


def rule_rope_scaling(p: Pair) -> Outcome:
    a, b = _scaling(p.draft.hp, p.draft.tensors), _scaling(p.target.hp, p.target.tensors)
    return Outcome("info", a, b, _same(a, b, "rope scalings"))


def rule_context(p: Pair) -> Outcome:
    a, b = p.draft.hp.get("context_length"), p.target.hp.get("context_length")
    return Outcome("info", a, b, _same(a, b, "context lengths"))


def _template(side: Side) -> dict[str, Any] | None:
    tpl = side.kvs.get(S.TOKENIZER_CHAT_TEMPLATE)
    if not isinstance(tpl, str):
        return None
    return {"chars": len(tpl), "sha256": hashlib.sha256(tpl.encode("utf-8", "surrogatepass")).hexdigest()[:12]}


def rule_chat_template(p: Pair) -> Outcome:
    a, b = _template(p.draft), _template(p.target)
    if a is None or b is None:
        which = "neither side has" if a is None and b is None else ("the draft has no" if a is None else "the target has no")
        return Outcome("info", a, b, f"{which} chat template")
    same = a["sha256"] == b["sha256"]
    return Outcome("info", a, b, f"chat templates {'identical' if same else 'differ'} (llama-server uses the target's)")


#: draft GGUF architectures whose llama.cpp implementation reads the target's layer inputs
LAYER_INPUT_ARCHS = frozenset({S.ARCH_DFLASH, S.ARCH_EAGLE3})


def last_layer_tap(draft_arch: str, kvs: Mapping[str, Any], n_layer: Any) -> int | None:
    """``n_layer`` when a draft of :data:`schema.FINAL_LAYER_TAP_ARCHES` taps it (its ``TARGET_LAYERS_KEY`` key
    holds HF ids + 1), i.e. it reads the target's last layer output, which llama.cpp asks the target graph for as
    layer input ``n_layer``; else None."""
    if draft_arch not in S.FINAL_LAYER_TAP_ARCHES:
        return None
    ids, n = as_ints(kvs.get(S.TARGET_LAYERS_KEY[draft_arch])), as_int(n_layer)
    return n if ids is not None and n is not None and n in ids else None


def final_layer_message(draft_arch: str, arch: str, tap: int) -> str:
    """The one line of a last-layer tap on a graph that does not record it."""
    from ..tokenizer.targets import final_layer_input_archs

    return (f"the draft taps the target's last layer output ({S.TARGET_LAYERS_KEY[draft_arch]} holds {tap} = "
            f"block_count), which llama.cpp b11434's {arch} graph does not record (only "
            f"{', '.join(final_layer_input_archs())} do): llama-server aborts on the first draft block (\"layer input "
            "tensor is null\")")


def wide_layer_message(arch: str) -> str:
    """The one line of a draft on a graph that records the hyper-connection residual as its layer inputs."""
    return (f"llama.cpp b11434's {arch} graph records its hyper-connection residual (hyper_connection.count x hidden "
            "values per token) as the layer inputs: llama-server aborts on the first draft block "
            "(\"GGML_ASSERT(row_floats == model.hparams.n_embd) failed\")")


def rule_target_graph(p: Pair) -> Outcome:
    """A draft of :data:`LAYER_INPUT_ARCHS` reads the target's layer inputs: llama.cpp's graph of the target
    architecture must record them (the target table's ``layer_inputs``, read from llama.cpp b11434's C++ tree), and
    for a draft of :data:`schema.FINAL_LAYER_TAP_ARCHES` tapping the last layer (tap ``block_count``) also the last
    layer's output (the table's ``final_layer_input``); the recorded rows must be hidden rows (not the
    hyper-connection residual of the table's ``wide_layer_input``)."""
    from ..tokenizer.targets import (
        gguf_arch_of,
        records_final_layer_input,
        records_layer_inputs,
        records_wide_layer_input,
    )

    if p.draft.arch not in LAYER_INPUT_ARCHS:
        return Outcome("skip", p.draft.arch, None, f"a {p.draft.arch} draft reads no target layer inputs")
    arch = p.target.arch if p.target.kind == "gguf" else gguf_arch_of(p.target.config)
    known = records_layer_inputs(arch) if arch is not None else None
    if arch is None or known is None:
        return Outcome("skip", "layer inputs", arch, f"target architecture {arch or '?'} is not in the target table")
    last = last_layer_tap(p.draft.arch, p.draft.kvs, p.target.hp.get("block_count"))
    if known and records_wide_layer_input(arch):
        return Outcome("fail", "layer inputs", arch, wide_layer_message(arch))
    if known and last is not None and not records_final_layer_input(arch):
        return Outcome("fail", f"tap {last} (the last layer's output)", arch, final_layer_message(p.draft.arch, arch, last),
                       {"last_layer_tap": last})
    if known:
        return Outcome("pass", "layer inputs", arch, f"llama.cpp's {arch} graph records the layer inputs the draft reads")
    return Outcome("fail", "layer inputs", arch,
                   f"llama.cpp b11434's {arch} graph records no layer inputs: llama-server aborts on the first draft "
                   "block (\"layer input tensor is null\"); a newer llama.cpp may add them")


#: the rules of every draft, in table order: the vocabulary rules, then (:func:`fit_rules`) the rules of the
#: draft's GGUF architecture (its base variant's ``fit.ARCH_RULES``), then :data:`TAIL_RULES`
RULES: tuple[Rule, ...] = (
    Rule("vocab-type", "tokenizer model / vocab type equal", SRC_COMPAT, rule_vocab_type),
    Rule("bos", "add_bos equal, and the BOS id when BOS is added", SRC_COMPAT, _special_rule("bos")),
    Rule("eos", "add_eos equal, and the EOS id when EOS is added", SRC_COMPAT, _special_rule("eos")),
    Rule("vocab-size", f"token counts differ by at most {MAX_VOCAB_DIFFERENCE}", SRC_COMPAT, rule_vocab_size),
    Rule("token-text", f"token texts equal from id {FIRST_CHECKED_TOKEN} to min(n_draft, n_target)", SRC_COMPAT,
         rule_token_text),
)
TAIL_RULES: tuple[Rule, ...] = (
    Rule("target-graph", "the target's llama.cpp graph records the layer inputs the draft reads", SRC_GRAPH,
         rule_target_graph),
    Rule("d2t-range", "every d2t id < target vocabulary", SRC_D2T, rule_d2t),
    Rule("rope-base", "rope.freq_base of both sides", SRC_HPARAMS, rule_rope_base),
    Rule("rope-scaling", "rope scaling of both sides", SRC_HPARAMS, rule_rope_scaling),
    Rule("context-length", "context_length of both sides", SRC_HPARAMS, rule_context),
    Rule("chat-template", "tokenizer.chat_template of both sides", SRC_TEMPLATE, rule_chat_template),
)


def fit_rules(draft: Side, target: Side) -> list[RuleResult]:
    """Every rule of the table that applies to the draft (:data:`RULES`, its arch's :func:`arch_rules`,
    :data:`TAIL_RULES`; a rule with ``families`` only for a draft of those family words), in table order, then its
    variant's own rules."""
    pair = Pair(draft, target)
    fam = draft.family
    own = variant_rules(draft)
    replaced = {r.id for r in own}
    out = []
    table = (*RULES, *arch_rules(draft.arch), *TAIL_RULES)
    for rule in [r for r in table if r.id not in replaced] + list(own):
        if not rule.families or fam in rule.families:
            o = rule.fn(pair)
            out.append(RuleResult(rule.id, o.status, o.draft, o.target, o.message, rule.source, o.details))
    return out


def arch_rules(arch: str) -> tuple[Rule, ...]:
    """The rules of every draft of a GGUF architecture: its base variant's ``fit.ARCH_RULES``
    (:func:`..registry.base_variant`; a variant refining it adds its own through :func:`variant_rules`); none for an
    arch no variant writes."""
    from ..registry import base_variant
    from ..variants.nextn import nextn_arch

    v = base_variant(arch)
    if v is None and nextn_arch(arch) is not None:  # an MTP sidecar of a target architecture
        return _mtp_rules()
    if v is None or not v.has_role("fit"):
        return ()
    return tuple(getattr(v.role("fit"), "ARCH_RULES", ()))


def all_rules() -> tuple[Rule, ...]:
    """Every row of the rule table: :data:`RULES`, each GGUF architecture's :func:`arch_rules`, :data:`TAIL_RULES`
    (docs/check.md documents each; a variant's own :func:`variant_rules` are documented on its page)."""
    from ..registry import VARIANTS

    archs = dict.fromkeys(v.arch for v in VARIANTS)
    return (*RULES, *(r for a in archs for r in arch_rules(a)), *_mtp_rules(), *TAIL_RULES)


def _mtp_rules() -> tuple[Rule, ...]:
    """The rules of an MTP sidecar and its target (:mod:`.mtp`)."""
    from .mtp import ARCH_RULES

    return ARCH_RULES


def variant_rules(draft: Side) -> tuple[Rule, ...]:
    """The rules a draft's variant package adds (``variants/<variant>/fit.py``: ``RULES``); a rule with the id of
    a rule of :data:`RULES` replaces it for that variant."""
    from ..registry import gguf_variant

    if draft.plan is None:
        return ()
    plan = draft.plan
    v = gguf_variant(lambda k: plan.arch if k == S.GENERAL_ARCHITECTURE else plan.value(k), draft.tensors)
    if v is None or not v.has_role("fit"):
        return ()
    return tuple(getattr(v.role("fit"), "RULES", ()))


@dataclass
class FitReport:
    """The answer of ``dspark-convert check DRAFT --target TARGET`` (JSON schema: docs/json-schemas.md)."""

    draft: Side
    target: Side
    results: list[RuleResult]
    loader_findings: list[Finding]
    notes: list[Finding] = field(default_factory=list)  # level "note": fallbacks taken while reading a side

    @property
    def ok(self) -> bool:
        """No rule fails and the draft passes the loader rules."""
        return all(r.status != "fail" for r in self.results) and all(f.level != "error" for f in self.loader_findings)

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in ("pass", "fail", "info", "skip")}

    def spec_type(self) -> dict[str, Any] | None:
        """The ``--spec-type`` llama-server runs the draft with (as ``check DRAFT`` says it), or None when the draft
        does not load (no loader error) or is no draft llama-server runs."""
        from ..check import spec_type

        if self.draft.plan is None or any(f.level == "error" for f in self.loader_findings):
            return None
        st = spec_type(self.draft.plan)
        return st.to_dict() if st.spec_type is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"draft": self.draft.source, "draft_arch": self.draft.arch, "family": self.draft.family,
                "target": self.target.source, "target_kind": self.target.kind, "target_arch": self.target.arch,
                "ok": self.ok, "counts": self.counts(), "rules": [r.to_dict() for r in self.results],
                "loader_findings": [f.to_dict() for f in self.loader_findings],
                "notes": [f.to_dict() for f in self.notes], "spec_type": self.spec_type()}


#: the rules that say whether the target's vocabulary is the draft's (the tokenizer facts a target supplies to the
#: staleness detector and to ``upgrade --target`` are taken only from a target that passes them)
VOCABULARY_RULES = ("vocab-type", "vocab-size", "token-text")


def vocabulary_misfit(results: list[RuleResult]) -> list[RuleResult]:
    """The failed :data:`VOCABULARY_RULES` of ``results`` (empty: the target's vocabulary fits the draft)."""
    return [r for r in results if r.id in VOCABULARY_RULES and r.status == "fail"]


def target_vocabulary_misfit(draft: str | os.PathLike[str], target: str | os.PathLike[str], *,
                             remote: RemoteOptions | None = None) -> str | None:
    """None when ``target``'s vocabulary fits the GGUF draft ``draft`` (:data:`VOCABULARY_RULES`), else every
    failing rule's finding, joined into one line (the reason ``upgrade --target`` refuses such a target). A side
    without a vocabulary (a target GGUF header holding only the keys an upgrade reads) has nothing to compare:
    None."""
    from .sides import NoVocabulary

    try:
        with collecting():
            d = side_from_gguf(draft, remote=remote)
            t = open_target(target, remote)
    except NoVocabulary:
        return None
    pair = Pair(d, t)
    failed = [f"{r.id}: {o.message}" for r in RULES if r.id in VOCABULARY_RULES
              for o in [r.fn(pair)] if o.status == "fail"]
    return "; ".join(failed) if failed else None


def check_fit(draft: str | os.PathLike[str], target: str | os.PathLike[str], *,
              remote: RemoteOptions | None = None) -> FitReport:
    """``dspark-convert check DRAFT --target TARGET``: the draft's loader rules plus every fit rule.

    ``draft`` is a GGUF draft and ``target`` a target GGUF (header only), each a local path, an ``hf://`` reference
    or a URL (``remote`` sets header size and timeout limits); ``target`` may also be a target model folder or a
    Hub repo id. Raises ConvertError (one line) when either side cannot be read.
    """
    from ..check import check_plan, stale_layout

    with collecting() as notes:  # e.g. an HF target's pre-tokenizer recognised by its regex
        d = side_from_gguf(draft, remote=remote)
        t = open_target(target, remote)
    assert d.plan is not None
    results = fit_rules(d, t)
    misfit = vocabulary_misfit(results)
    # the loader rules, then check FILE's stale-layout warnings: with a target whose vocabulary fits, its items are
    # decided too; a target that does not fit decides nothing (its tokenizer flags are not the draft's)
    notes_out = [Finding("note", n.subject, n.rule, n.message) for n in notes]
    if misfit:
        notes_out.append(Finding("note", str(target), "stale-layout",
                                 "the target's vocabulary does not fit the draft (" + ", ".join(r.id for r in misfit)
                                 + "): no stale-layout item is judged from it"))
    return FitReport(d, t, results, check_plan(d.plan) + stale_layout(draft, d.plan, t if not misfit else None),
                     notes_out)
