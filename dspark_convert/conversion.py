"""``hf2gguf`` as a library call: resolve inputs, build the family's plan, check it, write it.

Example:
    >>> from dspark_convert import convert
    >>> r = convert("fixtures/dspark-qwen3", "fixtures/target-qwen3", "draft.gguf", outtype="bf16")  # doctest: +SKIP
    >>> r.path, r.bytes_written  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from . import schema as S
from .archnames import resolve_architecture
from .check import Finding, check_plan, errors
from .checkpoint import Checkpoint, load_json
from .destination import check_destination
from .errors import ConvertError
from .families import family_for
from .families.common import Context, ConvertOptions, normalize_hparams, rope_dict, tensor_spec
from .fit.conversion import IGNORE_HINT, Pair, conversion_findings, mask_embedding_sources
from .hub import ResolvedModel, resolve_draft, resolve_target
from .metadata import general_kvs
from .naming import default_output_name, expand_output_template
from .notes import collecting
from .plan import Plan, TensorSpec
from .writer import Progress, write_plan

#: where a target checkpoint keeps its input embedding and output head (first match wins)
TARGET_EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight",
                      "language_model.model.embed_tokens.weight", "transformer.wte.weight")
TARGET_OUTPUT_NAMES = ("lm_head.weight", "language_model.lm_head.weight", "output.weight")


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


def _add_target_embeddings(plan: Plan, target: Checkpoint, ctx: Context, out_type_name: str) -> None:
    """Self-contained drafts: take ``token_embd`` (and, for DFlash/DSpark, ``output``) from the target checkpoint.

    Only tensors the draft lacks are added; they go before ``d2t`` (which stays last).
    """
    out = S.OUTTYPES[out_type_name][0]
    have = {t.name for t in plan.tensors}
    embed = next((n for n in TARGET_EMBED_NAMES if n in target), None)
    head = next((n for n in TARGET_OUTPUT_NAMES if n in target), None)
    add: list[TensorSpec] = []
    if S.T_TOKEN_EMBD not in have:
        if embed is None:
            raise ConvertError(f"{target.path}: no input embedding tensor ({', '.join(TARGET_EMBED_NAMES[:2])}) to embed into the draft")
        add.append(tensor_spec(target, embed, S.T_TOKEN_EMBD, out, origin="target"))
    if plan.arch == S.ARCH_DFLASH and S.T_OUTPUT not in have and S.T_D2T not in have:
        src = head or embed  # tied embeddings: the output head is the embedding
        if src is None:
            raise ConvertError(f"{target.path}: no output head (lm_head.weight) to embed into the draft")
        add.append(tensor_spec(target, src, S.T_OUTPUT, out, origin="target"))
    n_tokens = len(plan.value(S.TOKENIZER_TOKENS) or [])
    for t in add:  # every token id the draft sees must have a row (EAGLE-3's token_embd as well as DFlash's)
        if t.shape[0] != n_tokens:
            raise ConvertError(f"{target.ref(t.source or '').file}: tensor '{t.source}' has {t.shape[0]} rows but the draft "
                               f"writes {n_tokens} tokens (expected {n_tokens} rows); the target's vocabulary does not "
                               "match the draft's vocab_size")
    pos = len(plan.tensors) - (1 if plan.tensors and plan.tensors[-1].name == S.T_D2T else 0)
    plan.tensors[pos:pos] = add
    plan.notes.append("self-contained: " + ", ".join(f"{t.name} from target '{t.source}'" for t in add))


def _check_layer_count(plan: Plan, draft: Checkpoint) -> None:
    """The layers the config declares must be the layers the checkpoint holds: name the config key, not the
    hundreds of tensors the loader check would list."""
    n = plan.value(S.BLOCK_COUNT.format(arch=plan.arch))
    present = sorted({int(t.name.split(".")[1]) for t in plan.tensors if t.name.startswith("blk.")})
    if isinstance(n, int) and present != list(range(n)):
        have = f"layers {present}" if len(present) <= 8 else f"{len(present)} layers ({present[0]}..{present[-1]})"
        raise ConvertError(f"{draft.path / 'config.json'}: num_hidden_layers gives {n} layers (block_count) but the "
                           f"checkpoint has tensors for {have if present else 'no layers'}; expected layers 0..{n - 1}")


def _explain(finding: Finding, plan: Plan, sources: dict[str, Checkpoint]) -> str:
    """A loader-rule finding, plus the checkpoint file and HF tensor it concerns (what the user can fix)."""
    t = plan.tensor(finding.subject)
    if t is not None and t.source and t.origin in sources:
        return f"{finding} (from {sources[t.origin].ref(t.source).file}: tensor '{t.source}')"
    if finding.rule == "required-tensor":
        hf = _hf_name(finding.subject, plan.arch)
        if hf:
            return f"{finding}; the draft checkpoint {sources['draft'].path} has no tensor '{hf}'"
    return str(finding)


def _hf_name(gguf_name: str, arch: str) -> str | None:
    """The (bare) HF name that maps to a GGUF tensor name, for messages about missing tensors."""
    if gguf_name.startswith("blk."):
        _, bid, short = gguf_name.split(".", 2)
        suffix = next((hf for hf, g in S.LAYER_TENSORS.items() if g == short), None)
        if suffix is None:
            return None
        return f"midlayer.{suffix}' or 'layers.0.{suffix}" if arch == S.ARCH_EAGLE3 else f"layers.{bid}.{suffix}"
    return next((hf for hf, g in S.GLOBAL_TENSORS.items() if g == gguf_name), None)


def outtype_of(plan: Plan) -> str:
    """The outtype a plan was made for (``auto`` resolved), from its ``general.file_type``."""
    ft = plan.value(S.GENERAL_FILE_TYPE)
    return next(name for name, (_, file_type) in S.OUTTYPES.items() if file_type == ft)


def _insert_general(plan: Plan, kvs: list) -> None:
    """general.* metadata goes right after general.type (row 4 of §2.1)."""
    pos = next(i for i, k in enumerate(plan.kvs) if k.name == S.GENERAL_TYPE) + 1
    names = {k.name for k in plan.kvs}
    plan.kvs[pos:pos] = [k for k in kvs if k.name not in names]


def draft_architecture(config: object) -> str | None:
    """``architectures[0]`` of a config when it names a draft class (of any family) that is not also a target
    class (some EAGLE-3 drafts say ``LlamaForCausalLM``), else None."""
    from .families import FAMILY_MODULES
    from .tokenizer.handlers import TARGET_HANDLERS

    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch in TARGET_HANDLERS:
        return None
    for name in FAMILY_MODULES:
        if arch is not None and arch in importlib.import_module(f".families.{name}", __package__).ARCHITECTURES:
            return arch
    return None


def refuse_draft_as_target(config: object, folder: Path) -> None:
    """A draft folder passed as the target: say so, instead of the layer-count or vocabulary error it causes."""
    arch = draft_architecture(config)
    if arch is not None:
        raise ConvertError(f"{folder}: is a draft checkpoint ({arch}), not a target model; pass the target model "
                           "the draft was trained for as --target-model-dir")


class PlannedConversion(NamedTuple):
    """What :func:`plan_conversion` resolved and planned. ``fit`` holds the fit findings with their own level
    (the caller decides about errors); ``architecture`` says which ``architectures`` value was used and why."""

    plan: Plan
    sources: dict[str, Checkpoint]
    family: str
    draft: ResolvedModel
    target: ResolvedModel
    fit: list[Finding]
    architecture: dict[str, str | None]


def plan_conversion(draft: str | Path, target_model_dir: str | Path | None, *,
                    options: ConvertOptions | None = None) -> PlannedConversion:
    """Resolve the inputs and build the plan (:class:`PlannedConversion`). Writes nothing."""
    options = options or ConvertOptions()
    if target_model_dir is None or str(target_model_dir) == "":
        raise ConvertError("--target-model-dir is required: the draft's tokenizer comes from its target model")
    d = resolve_draft(str(draft))
    ck = Checkpoint(d.path)
    where = str(d.path / "config.json")
    arch = resolve_architecture(ck.config, options.architecture, where)
    if arch.how != "declared":
        ck.config = {**ck.config, "architectures": [arch.used]}
    family = family_for(ck.config, where)
    if not ck.names:
        held = f"no tensor entries in {', '.join(f.name for f in ck.files)}" if ck.files else "no model*.safetensors or pytorch_model*.bin files"
        raise ConvertError(f"{d.path}: the checkpoint has no tensors ({held})")
    wanted = [*TARGET_EMBED_NAMES, *TARGET_OUTPUT_NAMES] if options.embed_from_target else []
    t = resolve_target(str(target_model_dir), tensors=wanted)
    if not (t.path / "config.json").is_file():
        raise ConvertError(f"{t.path}: no config.json (the target model folder needs its config.json and tokenizer files)")
    tconf = load_json(t.path / "config.json")
    refuse_draft_as_target(tconf, t.path)
    ctx = Context(draft=ck, target_dir=t.path, target_config=tconf, options=options)
    plan = family.build_plan(ctx)
    sources = {"draft": ck}
    outtype = outtype_of(plan)
    if options.embed_from_target:
        target = Checkpoint(t.path)
        _add_target_embeddings(plan, target, ctx, outtype)
        sources["target"] = target
    total = sum(ts.n_elements for ts in plan.tensors)
    _insert_general(plan, general_kvs(d.path, total_params=total, target=t, metadata_override=options.metadata_override,
                                      model_name=options.model_name, repo_id=d.repo_id))
    plan.notes.append(f"draft {d.model_id}; target {t.model_id}")
    if arch.note():
        plan.notes.append(str(arch.note()))
    name = family.__name__.rsplit(".", 1)[-1]
    fit = ctx.findings + conversion_findings(_pair(plan, ck, name, d, t, tconf),
                                             mask_sources=mask_embedding_sources(d.path, ck.names))
    return PlannedConversion(plan, sources, name, d, t, fit, arch.to_dict())


def _pair(plan: Plan, ck: Checkpoint, family: str, d: ResolvedModel, t: ResolvedModel, tconf: dict) -> Pair:
    """What the fit rules compare: the planned file, the draft's config, the target's config and name."""
    d2t = plan.tensor(S.T_D2T)
    fc = plan.tensor(S.T_FC)
    if family == "dspark" and plan.tensor(S.T_MARKOV_W1) is None:
        family = "dflash"  # a DeepSpec "DFlash" release (markov_rank 0), converted by the DSpark module
    thp = normalize_hparams(tconf, str(t.path / "config.json"))
    return Pair(family=family, plan_kvs={k.name: k.value for k in plan.kvs},
                plan_tensors={ts.name: ts.shape for ts in plan.tensors},
                d2t_max=int(d2t.data.max()) if d2t is not None and d2t.data is not None and d2t.data.size else None,
                draft_dir=d.path, draft_config=ck.config,
                draft_files={S.T_FC: str(ck.ref(fc.source).file)} if fc is not None and fc.source else {},
                target=t.label, target_dir=t.path, target_config=thp, target_rope=rope_dict(thp))


def convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None = None, *,
            outtype: str = "auto", force: bool = False, dry_run: bool = False, embed_from_target: bool = False,
            allow_nonfinite: bool = False, metadata: Path | None = None, model_name: str | None = None,
            progress: Progress | None = None, ignore_target_mismatch: bool = False,
            architecture: str | None = None) -> ConvertResult:
    """Convert a draft checkpoint (folder or Hub id) into a GGUF file that llama.cpp loads.

    Raises :class:`ConvertError` (nothing written) when the input is invalid, the planned file would break a
    loader rule, or the draft does not fit the target (fit errors; ``ignore_target_mismatch`` makes them warnings).
    ``architecture`` converts as that ``architectures`` value instead of the declared one. ``outfile`` may use ``{ftype}`` / ``{outtype}``; without it the GGUF naming convention is used.
    """
    t0 = time.perf_counter()
    outtype = str(outtype).lower()  # "BF16" is "bf16", as on the command line
    if outtype not in S.OUTTYPE_CHOICES:
        raise ConvertError(f"--outtype {outtype!r}: expected one of {', '.join(S.OUTTYPE_CHOICES)}")
    options = ConvertOptions(outtype=outtype, embed_from_target=embed_from_target, allow_nonfinite=allow_nonfinite,
                             metadata_override=Path(metadata) if metadata else None, model_name=model_name,
                             ignore_target_mismatch=ignore_target_mismatch, architecture=architecture)
    check_destination(outfile, outtype=outtype, force=force, dry_run=dry_run)  # before any reading or download
    with collecting() as notes:
        result = _convert(draft, target_model_dir, outfile, options, force=force, dry_run=dry_run, progress=progress)
    result.findings += [Finding("note", n.subject, n.rule, n.message) for n in notes]
    result.seconds = time.perf_counter() - t0
    return result


def _convert(draft: str | Path, target_model_dir: str | Path | None, outfile: str | Path | None,
             options: ConvertOptions, *, force: bool, dry_run: bool, progress: Progress | None) -> ConvertResult:
    plan, sources, family, d, t, fit, arch_used = plan_conversion(draft, target_model_dir, options=options)
    resolved = outtype_of(plan)
    fit_errors = errors(fit)
    if fit_errors and not options.ignore_target_mismatch:
        for ck in sources.values():
            ck.close()
        raise ConvertError(f"{fit_errors[0].message} ({IGNORE_HINT})"
                           + (f" (and {len(fit_errors) - 1} more)" if len(fit_errors) > 1 else ""))
    fit = [Finding("warning", f.subject, f.rule, f.message) for f in fit]
    _check_layer_count(plan, sources["draft"])
    findings = fit + check_plan(plan)
    bad = errors(findings)
    if bad:
        raise ConvertError(f"the planned file would not load in llama.cpp: {_explain(bad[0], plan, sources)}"
                           + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
    if outfile is None:
        outfile = default_output_name(family=family, outtype=resolved, target_name=t.model_id, draft_name=d.model_id,
                                      size_label=plan.value(S.GENERAL_SIZE_LABEL))
    path = Path(expand_output_template(str(outfile), outtype=resolved))
    result = ConvertResult(path=path, plan=plan, findings=findings, outtype=resolved, dry_run=dry_run, family=family,
                           notes=list(plan.notes), architecture=arch_used)
    if not dry_run:
        t0 = time.perf_counter()
        result.bytes_written = write_plan(plan, sources, path, force=force, allow_nonfinite=options.allow_nonfinite,
                                          progress=progress)
        result.write_seconds = time.perf_counter() - t0
    for ck in sources.values():
        ck.close()
    return result
