"""``check SIDECAR.gguf --target TARGET.gguf``: llama.cpp b11434's rules for an MTP sidecar and the target it drafts
for (``common/speculative.cpp``: the ``draft-mtp`` implementation's constructor, ``common_speculative_types_from_gguf``;
spec: drafts-beyond-dflash.md §1.6, §1.7). The sidecar and the target share one architecture and one trunk: the
sidecar's header is the full model's, so every ``{arch}.*`` key but the block count, the MTP count and the per-layer
arrays must equal the target's, and the sidecar's trunk block count must be the target's. The architecture facts
are :mod:`dspark_convert.variants.nextn`'s.
"""

from __future__ import annotations

from typing import Any

from ..plan import as_int
from ..roles.fit import Outcome, Pair, Rule
from ..schema import core as SC
from ..schema import nextn as SN
from ..variants.nextn import layout, nextn_arch, per_layer_keys

SRC_MTP = "common/speculative.cpp: common_speculative_impl_draft_mtp() (n_embd_out of both models, n_layer_nextn)"
SRC_MTP_DETECT = "common/speculative.cpp: common_speculative_types_from_gguf() (blk.{block_count-1}.nextn.eh_proj)"
SRC_MTP_LAYERS = "src/llama-model.cpp: load_hparams() (block_count, nextn_predict_layers; the MTP KV cache)"


def _value(side: Any, key: str) -> Any:
    return side.plan.value(key) if side.plan is not None else None


def _trunk_blocks(side: Any) -> int | None:
    row = nextn_arch(side.arch)
    if row is None or side.plan is None:
        return None
    return layout(row, side.plan.value, side.tensors).n


def rule_arch(p: Pair) -> Outcome:
    d, t = p.draft.arch, p.target.arch
    if d == t:
        return Outcome("pass", d, t, f"both {d}")
    return Outcome("fail", d, t, f"the sidecar is {d}, the target {t}: an MTP sidecar drafts only for its own model")


def rule_trunk(p: Pair) -> Outcome:
    if p.target.kind != "gguf":
        return Outcome("skip", None, None, "the target is not a GGUF: its trunk block count is read from its GGUF")
    n_d, n_t = _trunk_blocks(p.draft), _trunk_blocks(p.target)
    if n_d is None or n_t is None:
        return Outcome("skip", n_d, n_t, "block counts unknown")
    if n_d == n_t:
        return Outcome("pass", n_d, n_t, f"the sidecar's MTP blocks follow a {n_d}-block trunk, the target's")
    return Outcome("fail", n_d, n_t, f"the sidecar follows a {n_d}-block trunk, the target has {n_t} trunk blocks: "
                                     "another model's sidecar")


def rule_width(p: Pair) -> Outcome:
    d, t = p.draft.hp.get("embedding_length"), p.target.hp.get("embedding_length")
    if d == t:
        return Outcome("pass", d, t, f"both {d}")
    return Outcome("fail", d, t, f"embedding_length differs: llama.cpp asserts 'MTP input row width must match the "
                                 f"target h_nextn width' ({d} vs {t})")


def rule_header(p: Pair) -> Outcome:
    """Every ``{arch}.*`` key equal, except block_count / nextn_predict_layers; per-layer arrays: the trunk's
    entries equal."""
    if p.target.kind != "gguf" or p.target.plan is None or p.draft.plan is None:
        return Outcome("skip", None, None, "the target is not a GGUF header")
    if p.draft.arch != p.target.arch:
        return Outcome("skip", p.draft.arch, p.target.arch, "architectures differ (mtp-arch)")
    arch = p.draft.arch
    skip = {SC.BLOCK_COUNT.format(arch=arch), SN.NEXTN_PREDICT_LAYERS.format(arch=arch)}
    per_layer = set(per_layer_keys(arch))
    n = _trunk_blocks(p.draft) or 0
    d_kvs = {k.name: k.value for k in p.draft.plan.kvs if k.name.startswith(arch + ".") and k.name not in skip}
    t_kvs = {k.name: k.value for k in p.target.plan.kvs if k.name.startswith(arch + ".") and k.name not in skip}
    for key in sorted(set(d_kvs) | set(t_kvs)):
        a, b = d_kvs.get(key), t_kvs.get(key)
        if key in per_layer and isinstance(a, list) and isinstance(b, list):
            a, b = a[:n], b[:n]
        if a != b:
            return Outcome("fail", _short(a), _short(b), f"{key} differs: another model's sidecar (or another "
                                                         "conversion of it)")
    return Outcome("pass", len(d_kvs), len(t_kvs), f"{len(d_kvs)} {arch}.* keys agree (per-layer arrays over the "
                                                   f"{n} trunk blocks)")


def rule_spec_type(p: Pair) -> Outcome:
    if p.draft.plan is None:
        return Outcome("skip", None, None, "no header")
    bc = as_int(_value(p.draft, SC.BLOCK_COUNT.format(arch=p.draft.arch)))
    probe = SN.T_NEXTN_EH_PROJ.format(bid=(bc or 1) - 1)
    auto = probe in p.draft.tensors
    how = "llama-server also auto-detects it" if auto else f"no {probe}: llama-server does not auto-detect it"
    return Outcome("info", "draft-mtp", None, f"serve with -md FILE --spec-type draft-mtp ({how})")


def _short(v: Any) -> Any:
    return v if not isinstance(v, list) or len(v) <= 8 else f"[{len(v)} items]"


MTP: frozenset[str] = frozenset()  # every draft of an MTP arch (the rule table's ``families`` filter is by family word)
ARCH_RULES: tuple[Rule, ...] = (
    Rule("mtp-arch", "sidecar and target of one architecture", SRC_MTP, rule_arch, families=MTP),
    Rule("mtp-trunk", "the sidecar's trunk block count is the target's", SRC_MTP_LAYERS, rule_trunk, families=MTP),
    Rule("mtp-width", "embedding_length (n_embd_out) equal", SRC_MTP, rule_width, families=MTP),
    Rule("mtp-header", "every {arch}.* hyperparameter equal (per-layer arrays over the trunk)", SRC_MTP_LAYERS,
         rule_header, families=MTP),
    Rule("mtp-spec-type", "the --spec-type llama-server needs", SRC_MTP_DETECT, rule_spec_type, families=MTP),
)
