"""``hf2gguf`` as a library call: resolve inputs, build the family's plan, check it, write it.

Example:
    >>> from dspark_convert import convert
    >>> r = convert("fixtures/dspark-qwen3", "fixtures/target-qwen3", "draft.gguf", outtype="bf16")  # doctest: +SKIP
    >>> r.path, r.bytes_written  # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import schema as S
from ..archnames import Architecture
from ..check import check_plan, errors, spec_type, spec_type_warning, upstream_writes_unloadable
from ..errors import ConvertError, Interrupted
from ..findings import Finding
from ..fit.conversion import IGNORE_HINT, conversion_findings, mask_embedding_sources
from ..gguf_constants import VT
from ..hf.checkpoint import Checkpoint
from ..hf.hub import ResolvedModel
from ..kit.common import resolve_outtype
from ..notes import collecting
from ..plan import KV, Plan, add_kv
from ..registry.families import family_name
from ..registry.words import UPSTREAM_FLAGS
from ..roles.convert import Context, ConvertOptions, Family
from ..variants.spectype import ANCHOR_KEY, ROWS_FROM_ONE, SpecType, forced_convention, hub_name
from .destination import check_destination, check_planned_name, expect_commit, written_here
from .inputs import (
    Draft,
    Target,
    add_target_tensors,
    fit_pair,
    open_draft,
    open_target,
    shard_note,
    target_tensors,
)
from .metadata import general_kvs, param_counts
from .naming import default_output_name, expand_output_template
from .writer import Progress, write_plan


@dataclass
class ConvertResult:
    """What a conversion did (or, for a dry run, would do)."""

    path: Path | None
    plan: Plan
    findings: list[Finding]
    outtype: str
    bytes_written: int = 0
    seconds: float = 0.0  # the whole conversion (resolving inputs, planning, writing)
    write_seconds: float = 0.0  # writing the file alone (what the progress bar's rate measures)
    dry_run: bool = False
    family: str = ""
    notes: list[str] = field(default_factory=list)
    architecture: dict[str, str | None] | None = None  # declared / used / how (declared, alias, forced)
    #: what llama-server does with the file (:class:`~dspark_convert.variants.spectype.SpecType` as a dict)
    spec_type: dict[str, Any] | None = None

    def __repr__(self) -> str:
        """One short line (the plan's KVs hold whole vocabularies: never printed here)."""
        return (f"ConvertResult(path={str(self.path)!r}, family={self.family!r}, outtype={self.outtype!r}, "
                f"dry_run={self.dry_run}, keys={len(self.plan.kvs)}, tensors={len(self.plan.tensors)}, "
                f"bytes_written={self.bytes_written}, findings={len(self.findings)})")


@dataclass
class PlannedConversion:
    """What :func:`plan_conversion` resolved: the plan, the checkpoints it reads, and who it is for.

    ``sources`` maps a TensorSpec ``origin`` to its open checkpoint; :meth:`close` releases them. ``fit`` holds
    the fit findings (does the draft belong to this target?) with their own level: the caller decides about
    errors (``--ignore-target-mismatch``). ``architecture`` says which ``architectures`` value was used and why.
    """

    plan: Plan
    sources: dict[str, Checkpoint]
    family: Family
    draft: ResolvedModel
    target: ResolvedModel
    outtype: str  # resolved: never "auto"
    fit: list[Finding] = field(default_factory=list)
    architecture: Architecture | None = None

    @property
    def family_name(self) -> str:
        return family_name(self.family)

    def close(self) -> None:
        for ck in self.sources.values():
            ck.close()


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


def _insert_general(plan: Plan, kvs: list[KV]) -> None:
    """general.* metadata goes right after general.type (row 4 of §2.1)."""
    pos = next(i for i, k in enumerate(plan.kvs) if k.name == S.GENERAL_TYPE) + 1
    names = {k.name for k in plan.kvs}
    plan.kvs[pos:pos] = [k for k in kvs if k.name not in names]


def plan_conversion(draft: str | Path, target_model_dir: str | Path | None, *,
                    options: ConvertOptions | None = None) -> PlannedConversion:
    """Resolve the inputs and build the plan. Writes nothing; close the result's checkpoints when done.

    Example:
        >>> p = plan_conversion("fixtures/dflash-zlab", "fixtures/target-qwen3")  # doctest: +SKIP
        >>> p.family_name, p.outtype, len(p.plan.tensors)  # doctest: +SKIP
        ('dflash', 'bf16', 22)
    """
    options = options or ConvertOptions()
    d = open_draft(draft, target_model_dir, options)
    sources = {"draft": d.checkpoint}
    try:
        t = open_target(target_model_dir, d, options)
        ctx = Context(draft=d.checkpoint, target_dir=t.model.path, target_config=t.config, options=options,
                      outtype=resolve_outtype(options.outtype, d.checkpoint))
        plan = d.family.build_plan(ctx)
        plan.differs_from_upstream = list(ctx.differs_from_upstream)
        outtype = _file_outtype(plan, ctx)
        _input_notes(plan, d, outtype)
        t, target_ck, taken = target_tensors(plan, ctx, d, t, target_model_dir)
        if target_ck is not None:
            sources["target"] = target_ck
            if taken:
                add_target_tensors(plan, taken, target_ck, ctx)
        _add_general(plan, d, t, options)
        facts = d.family.target_facts(ctx, plan)
        fit = ctx.findings + conversion_findings(fit_pair(plan, d, t, facts), mask_sources=mask_embedding_sources(
            d.model.path, facts.mask_embedding, file_written=facts.mask_file_written))
    except BaseException:
        for opened in sources.values():
            opened.close()
        raise
    return PlannedConversion(plan=plan, sources=sources, family=d.family, draft=d.model, target=t.model,
                             outtype=outtype, fit=fit, architecture=d.architecture)


def _file_outtype(plan: Plan, ctx: Context) -> str:
    """The outtype the file is named by: the one resolved, or the one a family's fixed ``general.file_type``
    names (a family that fixes every tensor type)."""
    forced = plan.value(S.GENERAL_FILE_TYPE)
    return S.FILE_TYPE_NAMES[forced] if forced != ctx.file_type and forced in S.FILE_TYPE_NAMES else ctx.outtype


def _input_notes(plan: Plan, d: Draft, outtype: str) -> None:
    """The outtype first, then where the tokenizer came from and how much of a sharded checkpoint was read."""
    plan.notes.insert(0, f"outtype {outtype}")
    if d.own_tokenizer:
        plan.notes.append("tokenizer: the checkpoint's own (pass --target-model-dir to take it from another model)")
    if d.select is not None:
        plan.notes.append(shard_note(d.model.path, d.checkpoint))


def _add_general(plan: Plan, d: Draft, t: Target, options: ConvertOptions) -> None:
    """The ``general.*`` metadata (sizes, the base model unless the checkpoint is its own target) and the notes
    naming the draft, the target and the ``architectures`` value used."""
    counts = param_counts((ts.name, ts.shape) for ts in plan.tensors)
    itself = d.own_tokenizer or t.model.path.resolve() == d.model.path.resolve()  # no base model: it is the target
    _insert_general(plan, general_kvs(d.model.path, total_params=counts[0], target=None if itself else t.model,
                                      metadata_override=options.metadata_override, model_name=options.model_name,
                                      repo_id=d.model.repo_id, size_counts=counts))
    plan.notes.append(f"draft {d.model.model_id}; target {t.model.model_id}")
    note = d.architecture.note()
    if note:
        plan.notes.append(note)


def convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None = None, *,
            outtype: str = "auto", force: bool = False, dry_run: bool = False, embed_from_target: bool = False,
            allow_nonfinite: bool = False, metadata: Path | None = None, model_name: str | None = None,
            progress: Progress | None = None, ignore_target_mismatch: bool = False, architecture: str | None = None,
            cache: bool = True, match_upstream: bool = False, **upstream_flags: bool) -> ConvertResult:
    """Convert a draft checkpoint (folder or Hub id) into a GGUF file that llama.cpp loads.

    Raises :class:`ConvertError` (nothing written) when the input is invalid, the planned file would break a
    loader rule, or the draft does not fit the target (fit errors; ``ignore_target_mismatch`` makes them warnings).
    ``architecture`` converts as that ``architectures`` value instead of the declared one. ``outfile`` may use
    ``{ftype}`` / ``{outtype}``; without it the GGUF naming convention is used. ``target_model_dir`` may be None
    for a draft stored inside its target (a family with ``TOKENIZER_IN_CHECKPOINT``): the checkpoint's own
    tokenizer is used. ``upstream_flags`` are upstream's options that select a converter class, by keyword
    (:data:`~dspark_convert.registry.words.UPSTREAM_FLAGS`; ``flag=True`` as on upstream's command line): accepted
    for the family each selects, refused for the others; any other keyword is a TypeError. ``cache=False``
    neither reads nor writes the tokenizer-block cache (:mod:`dspark_convert.tokenizer.cache`). ``match_upstream``
    writes upstream llama.cpp b11434's bytes even where its layout drafts wrongly (a full-vocabulary draft that
    keeps ``token_embd`` on an untied target gets no ``output.weight``; see ``choose_head_layout`` in
    ``kit/``).
    """
    unknown = sorted(set(upstream_flags) - {flag.keyword for flag in UPSTREAM_FLAGS})
    if unknown:
        raise TypeError(f"convert() got an unexpected keyword argument {unknown[0]!r}")
    t0 = time.perf_counter()
    outtype = str(outtype).lower()  # "BF16" is "bf16", as on the command line
    if outtype not in S.OUTTYPE_CHOICES:
        raise ConvertError(f"--outtype {outtype!r}: expected one of {', '.join(S.OUTTYPE_CHOICES)}")
    options = ConvertOptions(outtype=outtype, embed_from_target=embed_from_target, allow_nonfinite=allow_nonfinite,
                             metadata_override=Path(metadata) if metadata else None, model_name=model_name,
                             upstream_flags=frozenset(k for k, given in upstream_flags.items() if given),
                             ignore_target_mismatch=ignore_target_mismatch,
                             architecture=architecture, tokenizer_cache=cache, match_upstream=match_upstream)
    check_destination(outfile, outtype=outtype, force=force, dry_run=dry_run)  # before any reading or download
    expect_commit(None)
    try:
        with collecting() as notes:
            result = _convert(draft, target_model_dir, outfile, options, force=force, dry_run=dry_run,
                              progress=progress)
        result.findings += [Finding("note", n.subject, n.rule, n.message) for n in notes]
        result.seconds = time.perf_counter() - t0
        return result
    except Interrupted as e:
        written = written_here()  # an interrupt after the commit, outside the writer: say what is on disk
        if e.message or written is None:
            raise
        raise Interrupted(e.signum, f"{written}: {Interrupted.describe(e.signum)} after the file was complete; it "
                                    "was written in full") from None


def _forced_convention(planned: PlannedConversion, corrected: bool) -> Finding | None:
    """:func:`variants.spectype.forced_convention`'s warning for a class forced with ``--architecture`` on a
    checkpoint that declares another family, as a finding (rule ``architecture``); None when it does not apply.
    ``corrected``: the plan's :data:`variants.spectype.ANCHOR_KEY` is set to the weights' convention
    (:data:`variants.spectype.ROWS_FROM_ONE`) when it applies."""
    arch, plan = planned.architecture, planned.plan
    if arch is None or arch.how != "forced":
        return None
    from ..hf.checkpoint import load_json
    from .inputs import choose_family

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


def _convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None,
             options: ConvertOptions, *, force: bool, dry_run: bool, progress: Progress | None) -> ConvertResult:
    planned = plan_conversion(draft, target_model_dir, options=options)
    try:
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
        if outfile is None:
            outfile = default_output_name(family=planned.family_name, outtype=planned.outtype,
                                          target_name=planned.target.model_id, draft_name=planned.draft.model_id,
                                          size_label=plan.value(S.GENERAL_SIZE_LABEL), spec_type=st.spec_type)
        path = Path(expand_output_template(str(outfile), outtype=planned.outtype))
        if st.spec_type is not None and (hidden := hub_name(str(path), st.spec_type).problem) is not None:
            findings.append(Finding("note", str(path), "hf-name", hidden))  # a name the user chose: a note
        result = ConvertResult(path=path, plan=plan, findings=findings, outtype=planned.outtype, dry_run=dry_run,
                               family=planned.family_name, notes=list(plan.notes),
                               architecture=planned.architecture.to_dict() if planned.architecture else None,
                               spec_type=st.to_dict() if st.spec_type is not None else None)
        if dry_run:  # what the writer would refuse, the dry run refuses too (a {ftype} name is known only now)
            check_planned_name(path, force=force)
        else:
            t0 = time.perf_counter()
            result.bytes_written = write_plan(plan, planned.sources, path, force=force,
                                              allow_nonfinite=options.allow_nonfinite, progress=progress)
            result.write_seconds = time.perf_counter() - t0
    finally:
        planned.close()
    return result
