"""``hf2gguf`` as a library call: open the inputs, plan, check, name, write.

:func:`plan_conversion` opens the draft and the target (:mod:`.inputs`), has the family plan the file and completes
the plan (:mod:`.planning`, :func:`.inputs.take_target_tensors`) and collects the fit findings (:mod:`.checks`);
:func:`convert` checks the destination first, then checks the plan (:func:`.checks.check_planned`), names the file
(:func:`.naming.output_path`) and writes it (:mod:`.writer`).

Example:
    >>> from dspark_convert import convert
    >>> r = convert("fixtures/dspark-qwen3", "fixtures/target-qwen3", "draft.gguf", outtype="bf16")  # doctest: +SKIP
    >>> r.path, r.bytes_written  # doctest: +SKIP
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import schema as S
from ..errors import ConvertError, Interrupted
from ..findings import Finding
from ..notes import collecting
from ..registry.words import UPSTREAM_KEYWORDS
from ..roles.convert import ConvertOptions
from .checks import check_planned, fit_findings
from .destination import check_destination, check_planned_name, expect_commit, written_here
from .inputs import open_draft, open_target, take_target_tensors
from .naming import output_path
from .planning import add_general, family_plan
from .results import ConvertResult, PlannedConversion
from .writer import Progress, write_plan


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
        ctx, plan, outtype = family_plan(d, t, options)
        t, target_ck = take_target_tensors(plan, ctx, d, t, target_model_dir)
        if target_ck is not None:
            sources["target"] = target_ck
        add_general(plan, d, t, options)
        fit = fit_findings(plan, ctx, d, t)
    except BaseException:
        for opened in sources.values():
            opened.close()
        raise
    return PlannedConversion(plan=plan, sources=sources, family=d.family, draft=d.model, target=t.model,
                             outtype=outtype, fit=fit, architecture=d.architecture)


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
    unknown = sorted(set(upstream_flags) - UPSTREAM_KEYWORDS)
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
    check_destination(outfile, outtype=outtype, force=force)  # before any reading or download
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


def _convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None,
             options: ConvertOptions, *, force: bool, dry_run: bool, progress: Progress | None) -> ConvertResult:
    planned = plan_conversion(draft, target_model_dir, options=options)
    try:
        findings, st = check_planned(planned, options)
        path, name_note = output_path(outfile, planned, st)
        if name_note is not None:  # a name the user chose: a note
            findings.append(name_note)
        result = ConvertResult.of(planned, path, findings, st, dry_run)
        if dry_run:  # what the writer would refuse, the dry run refuses too (a {ftype} name is known only now)
            check_planned_name(path, force=force)
        else:
            t0 = time.perf_counter()
            result.bytes_written = write_plan(planned.plan, planned.sources, path, force=force,
                                              allow_nonfinite=options.allow_nonfinite, progress=progress)
            result.write_seconds = time.perf_counter() - t0
    finally:
        planned.close()
    return result
