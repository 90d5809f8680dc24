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
from ..archnames import Architecture, resolve_architecture
from ..check import check_plan, errors
from ..errors import ConvertError, Interrupted, require_regular
from ..findings import Finding
from ..fit.conversion import IGNORE_HINT, Pair, conversion_findings, mask_embedding_sources
from ..hf.checkpoint import INDEX_NAME, Checkpoint, Select, load_json, read_json, read_weight_map, tensor_names
from ..hf.hub import TOKENIZER_FILES, ResolvedModel, resolve_draft, resolve_target
from ..kit.common import resolve_outtype, tensor_spec
from ..kit.hparams import normalize_hparams, rope_dict
from ..notes import collecting
from ..plan import KV, Plan, TensorSpec
from ..registry.families import architecture_aliases, family_for, family_name, refuse_draft_as_target
from ..registry.words import UPSTREAM_FLAGS
from ..roles.convert import Context, ConvertOptions, Family, TargetFacts, TargetTensor
from .destination import check_destination, check_planned_name, expect_commit, written_here
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


def choose_family(folder: Path, architecture: str | None = None
                  ) -> tuple[Family, Select | None, Architecture, dict[str, Any]]:
    """The family of the draft checkpoint in ``folder`` (from its config and tensor names, without opening
    shards an index lists), the tensors it reads (None: all), the ``architectures`` value used (the declared
    one, an alias upstream accepts, or ``architecture`` (``--architecture``) when given) and the config as the
    family sees it (``architectures`` holding that value)."""
    cfg = folder / "config.json"
    require_regular(cfg)
    if not cfg.is_file():
        raise ConvertError(f"{folder}: no config.json (expected a Hugging Face checkpoint folder)")
    config = load_json(cfg)
    arch = resolve_architecture(config, architecture, str(cfg), architecture_aliases())
    if arch.how != "declared":
        config = {**config, "architectures": [arch.used]}
    family = family_for(config, tensor_names(folder), str(cfg))
    return family, family.draft_tensors(config), arch, config


def _add_target_tensors(plan: Plan, wanted_tensors: tuple[TargetTensor, ...], target: Checkpoint,
                        ctx: Context) -> None:
    """Take ``wanted_tensors`` the draft lacks from the target checkpoint: the family's ``TARGET_TENSORS`` for a
    self-contained draft, or what the family's plan asked for (``ctx.target_tensors``).

    They go before ``d2t`` (which stays last).
    """
    have = {t.name for t in plan.tensors}
    add: list[TensorSpec] = []
    for wanted in wanted_tensors:
        if any(n in have for n in wanted.unless):
            continue
        src = next((n for n in wanted.candidates if n in target), None)
        if src is None:
            raise ConvertError(f"{target.path}: no {wanted.what} ({', '.join(wanted.shown)}) to embed into the draft")
        add.append(tensor_spec(target, src, wanted.name, ctx.out_type, origin="target"))
    n_tokens = len(plan.value(S.TOKENIZER_TOKENS) or [])
    for t in add:  # every token id the draft sees must have a row (a token_embd of any arch)
        if t.shape[0] != n_tokens:
            raise ConvertError(f"{target.ref(t.source or '').file}: tensor '{t.source}' has {t.shape[0]} rows but the draft "
                               f"writes {n_tokens} tokens (expected {n_tokens} rows); the target's vocabulary does not "
                               "match the draft's vocab_size")
    pos = len(plan.tensors) - (1 if plan.tensors and plan.tensors[-1].name == S.T_D2T else 0)
    plan.tensors[pos:pos] = add
    if add:
        plan.notes.append(("self-contained: " if ctx.options.embed_from_target else "added: ")
                          + ", ".join(f"{t.name} from target '{t.source}'" for t in add))


def _check_layer_count(plan: Plan, draft: Checkpoint) -> None:
    """The layers the config declares must be the layers the checkpoint holds: name the config key, not the
    hundreds of tensors the loader check would list."""
    n = plan.value(S.BLOCK_COUNT.format(arch=plan.arch))
    present = sorted({int(t.name.split(".")[1]) for t in plan.tensors if t.name.startswith("blk.")})
    if isinstance(n, int) and (len(present) != n or present != list(range(n))):  # the length first: n can be 4e9
        have = f"layers {present}" if len(present) <= 8 else f"{len(present)} layers ({present[0]}..{present[-1]})"
        raise ConvertError(f"{draft.path / 'config.json'}: num_hidden_layers gives {n} layers (block_count) but the "
                           f"checkpoint has tensors for {have if present else 'no layers'}; expected layers 0..{n - 1}")


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


def _insert_general(plan: Plan, kvs: list[KV]) -> None:
    """general.* metadata goes right after general.type (row 4 of §2.1)."""
    pos = next(i for i, k in enumerate(plan.kvs) if k.name == S.GENERAL_TYPE) + 1
    names = {k.name for k in plan.kvs}
    plan.kvs[pos:pos] = [k for k in kvs if k.name not in names]


def _own_tokenizer(d: ResolvedModel) -> ResolvedModel:
    """The checkpoint as its own tokenizer source (a draft stored inside its target): the folder itself, or from
    the Hub the same repo's config and tokenizer files (no weights)."""
    t = resolve_target(f"{d.repo_id}@{d.commit or d.revision}" if d.commit or d.revision else d.repo_id) if d.repo_id else d
    if not any((t.path / name).is_file() for name in TOKENIZER_FILES):
        raise ConvertError(f"{t.path}: the checkpoint has no tokenizer ({', '.join(TOKENIZER_FILES)}); pass "
                           "--target-model-dir with the target model's tokenizer")
    return t


def shard_note(folder: Path, ck: Checkpoint) -> str:
    """How much of a sharded checkpoint the conversion reads: the shards holding the draft, and what it skips.

    Skipped shards are measured on disk when present, else estimated from the index's ``total_size`` (tensor
    bytes) minus the tensor bytes of the shards read.
    """
    index = folder / INDEX_NAME
    if not index.is_file():
        return f"read {len(ck.files)} file(s) holding the draft"
    shards = sorted(set(read_weight_map(index).values()))
    read = {f.name for f in ck.files}
    skipped = [s for s in shards if s not in read]
    read_bytes = sum(f.stat().st_size for f in ck.files)
    present = [folder / s for s in skipped if (folder / s).is_file()]
    if len(present) == len(skipped):
        skip_bytes = sum(p.stat().st_size for p in present)
        about = ""
    else:
        data = read_json(index)
        meta = data.get("metadata") if isinstance(data, dict) else None
        total = meta.get("total_size") if isinstance(meta, dict) else None
        tensor_bytes = sum(ck.ref(n).end - ck.ref(n).start for n in ck.names)
        skip_bytes = max(0, int(total) - tensor_bytes) if isinstance(total, (int, float)) else 0
        about = "about "
    return (f"read {len(read)} of {len(shards)} shards ({read_bytes / 1e9:.2f} GB: the ones holding the draft); "
            f"skipped {len(skipped)} ({about}{skip_bytes / 1e9:.2f} GB), never opened or downloaded")


def _refuse_options(family: Family, draft: str, own_tokenizer: bool, options: ConvertOptions) -> None:
    """Options the draft's family does not take: an upstream flag that selects another family
    (:data:`~dspark_convert.registry.words.UPSTREAM_FLAGS`), no ``--target-model-dir`` (only a family whose
    checkpoint carries the tokenizer)."""
    for flag in UPSTREAM_FLAGS:
        if flag.keyword in options.upstream_flags and not getattr(family, flag.attribute, False):
            raise ConvertError(f"{flag.option}: {draft} {flag.refusal}")
    if own_tokenizer and not family.TOKENIZER_IN_CHECKPOINT:
        raise ConvertError("--target-model-dir is required: the draft's tokenizer comes from its target model")


def plan_conversion(draft: str | Path, target_model_dir: str | Path | None, *,
                    options: ConvertOptions | None = None) -> PlannedConversion:
    """Resolve the inputs and build the plan. Writes nothing; close the result's checkpoints when done.

    Example:
        >>> p = plan_conversion("fixtures/dflash-zlab", "fixtures/target-qwen3")  # doctest: +SKIP
        >>> p.family_name, p.outtype, len(p.plan.tensors)  # doctest: +SKIP
        ('dflash', 'bf16', 22)
    """
    options = options or ConvertOptions()
    own_tokenizer = target_model_dir is None or str(target_model_dir) == ""

    def pick(folder: Path) -> Select | None:  # from the Hub: config and index are there, no shard yet
        family, select, _, _ = choose_family(folder, options.architecture)
        _refuse_options(family, str(draft), own_tokenizer, options)
        return select

    d = resolve_draft(str(draft), select=pick)
    family, select, arch, config = choose_family(d.path, options.architecture)
    _refuse_options(family, d.label, own_tokenizer, options)
    ck = Checkpoint(d.path, select=select, config=config)
    sources = {"draft": ck}
    try:
        if not ck.names:
            held = (f"no tensor entries in {', '.join(f.name for f in ck.files)}" if ck.files
                    else "no model*.safetensors or pytorch_model*.bin files")
            stray = [] if ck.files else sorted(f.name for f in d.path.glob("*.safetensors"))
            if stray:  # weights under another name (``draft_model.safetensors``): read only when an index names them
                held = (f"found {', '.join(stray)}, but only model*.safetensors are read without a {INDEX_NAME} "
                        "that names the weights files")
            if select is not None and (d.path / INDEX_NAME).is_file():
                held = f"none of the tensors the {family_name(family)} family reads is in {INDEX_NAME}"
            raise ConvertError(f"{d.path}: the checkpoint has no tensors ({held})")
        wanted = [n for t in family.TARGET_TENSORS for n in t.candidates] if options.embed_from_target else []
        t = _own_tokenizer(d) if own_tokenizer else resolve_target(str(target_model_dir), tensors=wanted)
        if not (t.path / "config.json").is_file():
            raise ConvertError(f"{t.path}: no config.json (the target model folder needs its config.json and tokenizer files)")
        tconf = load_json(t.path / "config.json")
        refuse_draft_as_target(tconf, t.path)
        outtype = resolve_outtype(options.outtype, ck)
        ctx = Context(draft=ck, target_dir=t.path, target_config=tconf, options=options, outtype=outtype)
        plan = family.build_plan(ctx)
        plan.differs_from_upstream = list(ctx.differs_from_upstream)
        forced = plan.value(S.GENERAL_FILE_TYPE)
        if forced != ctx.file_type and forced in S.FILE_TYPE_NAMES:  # the family fixes every tensor type
            outtype = S.FILE_TYPE_NAMES[forced]
        plan.notes.insert(0, f"outtype {outtype}")
        if own_tokenizer:
            plan.notes.append("tokenizer: the checkpoint's own (pass --target-model-dir to take it from another model)")
        if select is not None:
            plan.notes.append(shard_note(d.path, ck))
        from_target = {src for ts in plan.tensors if ts.origin == "target" for src in ts.sources}
        if options.embed_from_target or ctx.target_tensors or from_target:
            # target tensors: --with-target-embeddings, the family's plan (ctx.target_tensors: the head layout),
            # or tensors a family built from the target itself (MiMo's patched embedding)
            taken = family.TARGET_TENSORS if options.embed_from_target else tuple(ctx.target_tensors)
            if not options.embed_from_target and taken:  # fetch only what the plan asks for
                wanted = [n for w in taken for n in w.candidates]
                if not own_tokenizer:
                    t = resolve_target(str(target_model_dir), tensors=wanted + sorted(from_target))
            sources["target"] = Checkpoint(t.path, select=(set(wanted) | from_target).__contains__, config=tconf)
            if taken:
                _add_target_tensors(plan, taken, sources["target"], ctx)
        counts = param_counts((ts.name, ts.shape) for ts in plan.tensors)
        itself = own_tokenizer or t.path.resolve() == d.path.resolve()  # no base model: the checkpoint is the target
        _insert_general(plan, general_kvs(d.path, total_params=counts[0], target=None if itself else t,
                                          metadata_override=options.metadata_override, model_name=options.model_name,
                                          repo_id=d.repo_id, size_counts=counts))
        plan.notes.append(f"draft {d.model_id}; target {t.model_id}")
        note = arch.note()
        if note:
            plan.notes.append(note)
        facts = family.target_facts(ctx, plan)
        fit = ctx.findings + conversion_findings(_pair(plan, ck, d, t, tconf, facts),
                                                 mask_sources=mask_embedding_sources(d.path, facts.mask_embedding))
    except BaseException:
        for opened in sources.values():
            opened.close()
        raise
    return PlannedConversion(plan=plan, sources=sources, family=family, draft=d, target=t, outtype=outtype, fit=fit,
                             architecture=arch)


def _pair(plan: Plan, ck: Checkpoint, d: ResolvedModel, t: ResolvedModel, tconf: dict[str, Any],
          facts: TargetFacts) -> Pair:
    """What the fit rules compare: the planned file, the family's facts, the draft's config, the target's config
    and name."""
    d2t = plan.tensor(S.T_D2T)
    fc = plan.tensor(S.T_FC)
    thp = normalize_hparams(tconf, str(t.path / "config.json"))
    return Pair(arch=plan.arch, facts=facts, plan_kvs={k.name: k.value for k in plan.kvs},
                plan_tensors={ts.name: ts.shape for ts in plan.tensors},
                d2t_max=int(d2t.data.max()) if d2t is not None and d2t.data is not None and d2t.data.size else None,
                draft_dir=d.path, draft_config=ck.config,
                draft_files={S.T_FC: str(ck.ref(fc.source).file)} if fc is not None and fc.source and fc.origin == "draft" else {},
                target=t.label, target_dir=t.path, target_config=thp, target_rope=rope_dict(thp))


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


def _upstream_unloadable(f: Finding) -> bool:
    """A loader error ``--match-upstream`` writes anyway, because upstream b11434 writes it: the ``input_scale`` of
    a root NVFP4 linear (``fc`` / ``markov_w2``), which llama.cpp does not read (its file then fails to load)."""
    return f.rule == "extra-tensor" and f.subject.endswith(".input_scale") and not f.subject.startswith("blk.")


def _convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None,
             options: ConvertOptions, *, force: bool, dry_run: bool, progress: Progress | None) -> ConvertResult:
    planned = plan_conversion(draft, target_model_dir, options=options)
    try:
        plan = planned.plan
        fit_errors = errors(planned.fit)
        if fit_errors and not options.ignore_target_mismatch:
            raise ConvertError(f"{fit_errors[0].message} ({IGNORE_HINT})"
                               + (f" (and {len(fit_errors) - 1} more)" if len(fit_errors) > 1 else ""))
        fit = [Finding("warning", f.subject, f.rule, f.message) for f in planned.fit]
        _check_layer_count(plan, planned.sources["draft"])
        findings = fit + check_plan(plan)
        bad = [f for f in errors(findings) if not (options.match_upstream and _upstream_unloadable(f))]
        if bad:
            raise ConvertError(f"the planned file would not load in llama.cpp: {_explain(bad[0], planned)}"
                               + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
        if outfile is None:
            outfile = default_output_name(family=planned.family_name, outtype=planned.outtype,
                                          target_name=planned.target.model_id, draft_name=planned.draft.model_id,
                                          size_label=plan.value(S.GENERAL_SIZE_LABEL))
        path = Path(expand_output_template(str(outfile), outtype=planned.outtype))
        result = ConvertResult(path=path, plan=plan, findings=findings, outtype=planned.outtype, dry_run=dry_run,
                               family=planned.family_name, notes=list(plan.notes),
                               architecture=planned.architecture.to_dict() if planned.architecture else None)
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
