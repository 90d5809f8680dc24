"""Whether a planned conversion may be written: does the draft fit its target (:func:`fit_findings`), and does the
planned file load in llama.cpp and run as the ``--spec-type`` it is named for (:func:`check_planned`)."""

from __future__ import annotations

from .. import schema as S
from ..check import check_plan, errors, spec_type, spec_type_warning, upstream_writes_unloadable
from ..errors import ConvertError
from ..findings import Finding
from ..fit.conversion import IGNORE_HINT, Pair, conversion_findings, mask_embedding_sources
from ..gguf_constants import VT
from ..hf.checkpoint import Checkpoint, load_json
from ..kit.hparams import normalize_hparams, rope_dict
from ..plan import KV, Plan, add_kv
from ..registry.families import family_name
from ..registry.spectype import ANCHOR_KEY, ROWS_FROM_ONE, SpecType, forced_convention
from ..roles.convert import Context, ConvertOptions, TargetFacts
from .inputs import Draft, Target, choose_family
from .results import PlannedConversion


def fit_findings(plan: Plan, ctx: Context, draft: Draft, target: Target) -> list[Finding]:
    """The fit findings of the conversion (does the draft belong to this target?): the family's own
    (``ctx.findings``), then the fit rules on the family's target facts, with their own level."""
    facts = draft.family.target_facts(ctx, plan)
    return ctx.findings + conversion_findings(fit_pair(plan, draft, target, facts), mask_sources=mask_embedding_sources(
        draft.model.path, facts.mask_embedding, file_written=facts.mask_file_written))


def fit_pair(plan: Plan, draft: Draft, target: Target, facts: TargetFacts) -> Pair:
    """What the fit rules compare: the planned file, the family's facts, the draft's config, the target's config
    and name."""
    ck, d, t, tconf = draft.checkpoint, draft.model, target.model, target.config
    d2t = plan.tensor(S.T_D2T)
    fc = plan.tensor(S.T_FC)
    thp = normalize_hparams(tconf, str(t.path / "config.json"))
    return Pair(arch=plan.arch, facts=facts, plan_kvs={k.name: k.value for k in plan.kvs},
                plan_tensors={ts.name: ts.shape for ts in plan.tensors},
                d2t_max=int(d2t.data.max()) if d2t is not None and d2t.data is not None and d2t.data.size else None,
                draft_dir=d.path, draft_config=ck.config,
                draft_files={S.T_FC: str(ck.ref(fc.source).file)} if fc is not None and fc.source and fc.origin == "draft" else {},
                target=t.label, target_dir=t.path, target_config=thp, target_rope=rope_dict(thp))


def check_planned(planned: PlannedConversion, options: ConvertOptions) -> tuple[list[Finding], SpecType]:
    """The findings of a planned conversion (its fit findings as warnings, then llama.cpp's loader rules) and what
    llama-server does with the file. Raises :class:`ConvertError` on a fit error (unless
    ``--ignore-target-mismatch``: every misfit in the one line), on layers the checkpoint does not hold, and on a
    loader error (unless ``--match-upstream`` and upstream writes the same unloadable file): the first one
    explained, the others named."""
    plan = planned.plan
    fit_errors = errors(planned.fit)
    if fit_errors and not options.ignore_target_mismatch:
        # every misfit in the one line (a second one is not hidden behind a count)
        raise ConvertError("; ".join(f.message for f in fit_errors) + f" ({IGNORE_HINT})")
    fit = [Finding("warning", f.subject, f.rule, f.message) for f in planned.fit]
    _check_layer_count(plan, planned.sources["draft"])
    findings = fit + check_plan(plan)
    bad = [f for f in errors(findings) if not (options.match_upstream and upstream_writes_unloadable(f))]
    if bad:
        raise ConvertError(f"the planned file would not load in llama.cpp: {_explain(bad[0], planned)}"
                           + _more(bad[1:]))
    st = spec_type(plan)
    if (forced := _forced_convention(planned, not options.match_upstream)) is not None:
        findings.append(forced)  # the class's key contradicts the weights: corrected, or said
        st = spec_type(plan) if not options.match_upstream else SpecType(
            "draft-dflash", "draft-dflash", f"weights trained on block rows 1..n ({forced.rule} warning)")
    elif (spec_warning := spec_type_warning(st)) is not None:  # it loads, but auto-detection drafts it wrongly
        findings.append(Finding("warning", "llama-server", "spec-type", spec_warning))
    return findings, st


def _check_layer_count(plan: Plan, draft: Checkpoint) -> None:
    """The layers the config declares must be the layers the checkpoint holds: name the config key, not the
    hundreds of tensors the loader check would list."""
    n = plan.value(S.BLOCK_COUNT.format(arch=plan.arch))
    present = sorted({int(t.name.split(".")[1]) for t in plan.tensors if t.name.startswith("blk.")})
    nextn = plan.value(S.NEXTN_PREDICT_LAYERS.format(arch=plan.arch))
    # an MTP sidecar holds only the last nextn_predict_layers blocks (no trunk)
    first = n - nextn if isinstance(n, int) and isinstance(nextn, int) and 0 < nextn <= n and 0 not in present else 0
    if isinstance(n, int) and (len(present) != n - first or present != list(range(first, n))):  # n can be 4e9
        have = f"layers {present}" if len(present) <= 8 else f"{len(present)} layers ({present[0]}..{present[-1]})"
        raise ConvertError(f"{draft.path / 'config.json'}: num_hidden_layers gives {n} layers (block_count) but the "
                           f"checkpoint has tensors for {have if present else 'no layers'}; expected layers "
                           f"{first}..{n - 1}")


def _explain(finding: Finding, planned: PlannedConversion) -> str:
    """A loader-rule finding, plus the checkpoint file and HF tensor it concerns (what the user can fix)."""
    t = planned.plan.tensor(finding.subject)
    if t is not None and t.source and t.origin in planned.sources:
        return f"{finding} (from {planned.sources[t.origin].ref(t.source).file}: tensor '{t.source}')"
    if finding.rule == "required-tensor":
        hf = planned.family.hf_names(finding.subject)
        if hf:
            names = " or ".join(f"'{n}'" for n in hf)
            return f"{finding}; the draft checkpoint {planned.sources['draft'].path} has no tensor {names}"
    return str(finding)


def _more(rest: list[Finding], shown: int = 5) -> str:
    """The other loader errors after the first one explained: each named by its key or tensor and rule (the first
    ``shown``), so that no problem hides behind a bare count."""
    if not rest:
        return ""
    names = ", ".join(f"{f.subject} [{f.rule}]" for f in rest[:shown])
    more = f" and {len(rest) - shown} more" if len(rest) > shown else ""
    return f" (also: {names}{more})"


def _forced_convention(planned: PlannedConversion, corrected: bool) -> Finding | None:
    """:func:`registry.spectype.forced_convention`'s warning for a class forced with ``--architecture`` on a
    checkpoint that declares another family, as a finding (rule ``architecture``); None when it does not apply.
    ``corrected``: the plan's :data:`registry.spectype.ANCHOR_KEY` is set to the weights' convention
    (:data:`registry.spectype.ROWS_FROM_ONE`) when it applies."""
    arch, plan = planned.architecture, planned.plan
    if arch is None or arch.how != "forced":
        return None
    try:
        declared = family_name(choose_family(planned.draft.path)[0])
    except ConvertError:  # the declared value names no family: nothing to compare with
        return None
    message = forced_convention(declared, family_name(planned.family), load_json(planned.draft.path / "config.json"),
                                plan.value, [t.name for t in plan.tensors], str(arch.used), str(arch.declared),
                                corrected=corrected)
    if message is None:
        return None
    if corrected:
        add_kv(plan.kvs, KV(ANCHOR_KEY, VT.BOOL, ROWS_FROM_ONE))
        plan.differs_from_upstream.append(ANCHOR_KEY)
    return Finding("warning", "--architecture", "architecture", message)
