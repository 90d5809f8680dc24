"""Stale layouts: what a draft GGUF made by an older upstream converter holds differently from b11434, found from
its header (``check`` and ``upgrade`` share it; no conversion code here).

The items of every file (an NVFP4 file's ``prec_a4``, the tokenizer's ``add_bos`` / ``add_eos``) are this
module's; a variant's own are its ``upgrade`` role's (:mod:`dspark_convert.roles.upgrade`), asked through the
registry (:func:`rules_for`). :func:`staleness_findings` makes the ``stale-layout`` warnings of ``check FILE``
(``--target`` too).
"""

from __future__ import annotations

import os

from .findings import Finding
from .registry import BY_NAME, gguf_variant
from .roles.upgrade import ADD_BOS, ADD_EOS, Detection, Header, Stale, Staleness, TargetInfo, UpgradeRules

PREC_A4 = "general.tensor_extra.prec_a4"  # b11223+: NVFP4 tensors of a W4A16 checkpoint (spec §2.4)


def nvfp4_unmarked(f: Header) -> bool:
    """NVFP4 tensors and no ``general.tensor_extra.prec_a4``: right for a W4A4 checkpoint, stale for a W4A16 one."""
    return PREC_A4 not in f.kvs and any(getattr(t, "type_name", None) == "NVFP4" or
                                        getattr(getattr(t, "ggml_type", None), "name", None) == "NVFP4"
                                        for t in f.tensors)


def rules_for(f: Header) -> UpgradeRules:
    """The upgrade rules of ``f``'s variant (the registry's answer), see :func:`variant_rules`; the base rules
    (none) for a file no variant loads."""
    v = gguf_variant(lambda k: f.value(k), (t.name for t in f.tensors))
    return UpgradeRules() if v is None else variant_rules(v.name)


def variant_rules(name: str) -> UpgradeRules:
    """The ``RULES`` of variant ``name``'s ``upgrade`` role; a variant without one has the rules of the variant it
    refines (a new refinement inherits its lineage's), and one that refines none the base rules (none)."""
    v = BY_NAME[name]
    while not v.has_role("upgrade"):
        if v.refines is None:
            return UpgradeRules()
        v = BY_NAME[v.refines]
    rules: UpgradeRules = v.role("upgrade").RULES
    return rules


# ------------------------------------------------------------------------------------------------ detection
def detect_staleness(f: Header, target: TargetInfo | None = None) -> Staleness:
    """Which upstream revisions' layout ``f``'s header has, and what is stale against b11434.

    The items of every file: NVFP4 tensors without ``general.tensor_extra.prec_a4`` (not checked: only the
    checkpoint's ``quant_algo`` tells W4A16, b11223), then the variant's (:meth:`UpgradeRules.detect`; e.g. a key
    a newer converter writes, a tensor renamed, a key an M-RoPE or a Gemma target needs), then, with ``target``,
    the tokenizer's ``add_bos`` / ``add_eos``, which follow the post-processor (b11223).
    """
    d = Detection(f, target)
    if nvfp4_unmarked(f):
        d.unchecked.append(f"{PREC_A4} (NVFP4 tensors: whether they are W4A16 is in the checkpoint's quant_algo; --hf)")
    rules_for(f).detect(d)
    if "tokenizer.ggml.model" in f.kvs:
        if target is None:
            d.unchecked.append("tokenizer add_bos/add_eos (post-processor rule)")
        else:
            for typ, value in target.add_tokens().items():
                key = ADD_BOS if typ == "bos" else ADD_EOS
                if f.value(key) != value:
                    d.seen(False, "b11223")
                    d.stale.append(Stale(key, f"{'missing' if key not in f.kvs else repr(f.value(key))}; b11223+ "
                                         f"writes {value} (the target tokenizer's post-processor rule)", "b11223",
                                         "target"))
    return d.result()


def staleness_findings(path: str | os.PathLike[str], f: Header | None = None,
                       target: TargetInfo | None = None) -> list[Finding]:
    """The ``stale-layout`` findings of ``check FILE`` and of ``check FILE --target TARGET`` (one function for
    both): one ``warning`` per item :func:`detect_staleness` finds (the same items ``upgrade --dry-run`` lists with
    the same target), naming what is stale, the upstream revision that changed it and the ``upgrade`` command that
    fixes it. With ``target`` the items that need it (e.g. M-RoPE sections, a Gemma target's embedding scale, the
    tokenizer flags) are decided too, and the command names it. Empty for a current file. ``f`` is the file's
    header when the caller has read it (any source), else ``path`` is read."""
    if f is None:
        from .gguffile.source import open_gguf_source

        with open_gguf_source(path) as g:
            st = detect_staleness(g, target)
    else:
        st = detect_staleness(f, target)
    ref = target.source if target is not None else None
    return [Finding("warning", s.subject, "stale-layout", f"{s.change} (upstream {s.since}+, file made by "
                    f"{st.describe_revisions()}); fix: '{s.command(path, ref)}', or reconvert with hf2gguf")
            for s in st.stale]
