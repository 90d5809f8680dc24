"""llama.cpp b11434's loader rules for target files with MTP (NextN) layers: ``check FILE`` on a full target, an
MTP sidecar or a trunk (spec: drafts-beyond-dflash.md §1.6, §1.7).

Example:
    >>> [f.rule for f in nextn_findings(plan)]  # doctest: +SKIP
    ['mtp-kind']
"""

from __future__ import annotations

from ...findings import Finding
from ...plan import Plan
from ...schema import core as SC
from ...schema import nextn as SN
from . import layout, nextn_arch, per_layer_keys


def nextn_findings(plan: Plan) -> list[Finding]:
    """What the loader of ``plan.arch`` (an arch with an MTP path) does with the file: errors for a file it refuses,
    a warning for a sidecar that cannot run, and one note saying what the file is and how llama-server runs it."""
    row = nextn_arch(plan.arch)
    assert row is not None
    names = {t.name for t in plan.tensors}
    lay = layout(row, plan.value, names)
    arch, out = plan.arch, []
    bc_key, nx_key = SC.BLOCK_COUNT.format(arch=arch), SN.NEXTN_PREDICT_LAYERS.format(arch=arch)
    if not lay.block_count:
        return [Finding("error", bc_key, "mtp-blocks", "missing or 0: the loader needs the block count")]
    if lay.nextn >= lay.block_count:
        return [Finding("error", nx_key, "mtp-blocks", f"{lay.nextn} MTP blocks with {bc_key} = {lay.block_count}: "
                        "the trunk would have no block (n_layer() = block_count - nextn_predict_layers)")]
    for key in per_layer_keys(arch):  # get_key_or_arr: an array must have exactly block_count entries
        v = plan.value(key)
        if isinstance(v, list) and len(v) != lay.block_count:
            out.append(Finding("error", key, "mtp-per-layer", f"{len(v)} entries; the loader reads one per block "
                               f"({bc_key} = {lay.block_count}) and refuses the file"))
    for name in (SC.T_TOKEN_EMBD, "output_norm.weight"):
        if name not in names:
            out.append(Finding("error", name, "mtp-tensor", "missing: every loader requires it (trunk and sidecar)"))
    if lay.kind == "trunk" and lay.nextn:
        if row.trunk_only:
            out.append(Finding("note", nx_key, "mtp-kind", f"trunk-only file: the {arch} loader sees no "
                               f"blk.{lay.n}.nextn.eh_proj and does not require the MTP tensors; serve an MTP "
                               "sidecar with -md FILE --spec-type draft-mtp"))
        else:
            out.append(Finding("error", nx_key, "mtp-kind", f"{lay.nextn} with no blk.{lay.n}.* tensors: the {arch} "
                               f"loader still requires the MTP block (tensor 'blk.{lay.n}.attn_norm.weight' not "
                               f"found); a trunk needs block_count {lay.n} and no {nx_key} (what mtp-strip writes)"))
        return out
    if lay.kind == "sidecar":
        n_last = lay.block_count - 1
        if SN.T_NEXTN_EH_PROJ.format(bid=n_last) not in names:
            out.append(Finding("warning", SN.T_NEXTN_EH_PROJ.format(bid=n_last), "mtp-spec-type",
                               "absent: llama-server does not auto-detect the sidecar; pass --spec-type draft-mtp"))
        if row.no_graph:
            out.append(Finding("warning", nx_key, "mtp-graph", f"the sidecar loads but cannot draft: {row.no_graph}"))
        out.append(Finding("note", nx_key, "mtp-kind", f"MTP sidecar ({lay.nextn} block(s) after a {lay.n}-block "
                           "trunk): llama-server -m TARGET.gguf -md FILE --spec-type draft-mtp (TARGET: the full "
                           "file or its trunk, same header and vocabulary: check FILE --target TARGET)"))
    elif lay.kind == "full":
        how = (f"the {arch} loader has no MTP graph ({row.no_graph})" if row.no_graph
               else "llama-server -m FILE --spec-type draft-mtp drafts with its own MTP blocks; mtp-extract cuts "
                    "them out as a sidecar")
        out.append(Finding("note", nx_key, "mtp-kind", f"full target: {lay.n} trunk + {lay.nextn} MTP block(s); {how}"))
    elif lay.kind == "trunk":
        out.append(Finding("note", bc_key, "mtp-kind", f"target without MTP blocks ({lay.block_count} blocks); an MTP "
                           "sidecar made for it runs with -md FILE --spec-type draft-mtp"))
    else:
        out.append(Finding("error", nx_key, "mtp-kind", f"neither trunk ({row.trunk_probe}) nor MTP blocks "
                           f"(blk.{lay.n}.*): nothing the loader can run"))
    return out
