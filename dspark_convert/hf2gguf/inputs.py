"""Opening a conversion's inputs: the draft (resolve, recognise its family, refuse what the family does not take,
read its tensors) and the target (its own tokenizer or the target folder, the tensors the family asks for).

:func:`open_draft` and :func:`open_target` are the first two steps of
:func:`dspark_convert.hf2gguf.conversion.plan_conversion`; once the family has planned, :func:`take_target_tensors`
opens the target checkpoint for the tensors the plan takes from it and adds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import schema as S
from ..archnames import Architecture, resolve_architecture
from ..errors import ConvertError
from ..hf.checkpoint import (
    INDEX_NAME,
    Checkpoint,
    Select,
    load_json,
    read_config,
    read_json,
    read_weight_map,
    tensor_names,
)
from ..hf.hub import TOKENIZER_FILES, ResolvedModel, resolve_draft, resolve_target
from ..kit.common import tensor_spec
from ..plan import Plan, TensorSpec
from ..registry.families import architecture_aliases, family_for, family_name, refuse_draft_as_target
from ..registry.words import UPSTREAM_FLAGS
from ..roles.convert import Context, ConvertOptions, Family, TargetTensor, family_draft_tensors
from ..units import human_bytes


@dataclass
class Draft:
    """The draft as a conversion reads it: where it is, its family, the tensors it reads (``select``, None: all),
    the ``architectures`` value used, its open checkpoint, and whether it is its own tokenizer source."""

    model: ResolvedModel
    family: Family
    select: Select | None
    architecture: Architecture
    checkpoint: Checkpoint
    own_tokenizer: bool


@dataclass
class Target:
    """The target as a conversion reads it: where it is (its config and tokenizer files) and its config."""

    model: ResolvedModel
    config: dict[str, Any]


def choose_family(folder: Path, architecture: str | None = None
                  ) -> tuple[Family, Select | None, Architecture, dict[str, Any]]:
    """The family of the draft checkpoint in ``folder`` (from its config and tensor names, without opening
    shards an index lists), the tensors it reads (None: all), the ``architectures`` value used (the declared
    one, an alias upstream accepts, or ``architecture`` (``--architecture``) when given) and the config as the
    family sees it (``architectures`` holding that value)."""
    config = read_config(folder)
    arch = resolve_architecture(config, architecture, architecture_aliases())
    if arch.how != "declared":
        config = {**config, "architectures": [arch.used]}
    family = family_for(config, tensor_names(folder), str(folder / "config.json"))
    return family, family_draft_tensors(family, config), arch, config


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
    return (f"read {len(read)} of {len(shards)} shards ({human_bytes(read_bytes)}: the ones holding the draft); "
            f"skipped {len(skipped)} ({about}{human_bytes(skip_bytes)}), never opened or downloaded")


def _refuse_options(family: Family, draft: str, own_tokenizer: bool, options: ConvertOptions) -> None:
    """Options the draft's family does not take: an upstream flag that selects another family
    (:data:`~dspark_convert.registry.words.UPSTREAM_FLAGS`), no ``--target-model-dir`` (only a family whose
    checkpoint carries the tokenizer)."""
    for flag in UPSTREAM_FLAGS:
        takes = getattr(family, flag.attribute, False)
        if flag.keyword in options.upstream_flags and not takes:
            raise ConvertError(f"{flag.option}: {draft} {flag.refusal}")
        if flag.required and takes and flag.keyword not in options.upstream_flags:
            raise ConvertError(f"{draft}: {flag.missing}")
    if own_tokenizer and not family.TOKENIZER_IN_CHECKPOINT:
        raise ConvertError("--target-model-dir is required: the draft's tokenizer comes from its target model")


def open_draft(draft: str | Path, target_model_dir: str | Path | None, options: ConvertOptions) -> Draft:
    """The draft checkpoint (a folder or a Hub repo: only the shards holding what its family reads are downloaded),
    its family recognised once the config is at hand, the options its family does not take refused, its tensors
    opened; a checkpoint without tensors is refused saying what the folder holds."""
    own_tokenizer = target_model_dir is None or str(target_model_dir) == ""

    def pick(folder: Path) -> Select | None:  # from the Hub: config and index are there, no shard yet
        family, select, _, _ = choose_family(folder, options.architecture)
        _refuse_options(family, str(draft), own_tokenizer, options)
        return select

    d = resolve_draft(str(draft), select=pick)
    family, select, arch, config = choose_family(d.path, options.architecture)
    _refuse_options(family, d.label, own_tokenizer, options)
    ck = Checkpoint(d.path, select=select, config=config)
    if not ck.names:
        ck.close()
        held = (f"no tensor entries in {', '.join(f.name for f in ck.files)}" if ck.files
                else "no model*.safetensors or pytorch_model*.bin files")
        stray = [] if ck.files else sorted(f.name for f in d.path.glob("*.safetensors"))
        if stray:  # weights under another name (``draft_model.safetensors``): read only when an index names them
            held = (f"found {', '.join(stray)}, but only model*.safetensors are read without a {INDEX_NAME} "
                    "that names the weights files")
        if select is not None and (d.path / INDEX_NAME).is_file():
            held = f"none of the tensors the {family_name(family)} family reads is in {INDEX_NAME}"
        raise ConvertError(f"{d.path}: the checkpoint has no tensors ({held})")
    return Draft(d, family, select, arch, ck, own_tokenizer)


def open_target(target_model_dir: str | Path | None, draft: Draft, options: ConvertOptions) -> Target:
    """The target: the draft's own tokenizer source, or the target folder / repo (with the tensors
    ``--with-target-embeddings`` takes); refused without a config.json or when it is a draft."""
    wanted = [n for t in draft.family.TARGET_TENSORS for n in t.candidates] if options.embed_from_target else []
    t = _own_tokenizer(draft.model) if draft.own_tokenizer else resolve_target(str(target_model_dir), tensors=wanted)
    if not (t.path / "config.json").is_file():
        raise ConvertError(f"{t.path}: no config.json (the target model folder needs its config.json and tokenizer files)")
    config = load_json(t.path / "config.json")
    if not draft.own_tokenizer:  # the checkpoint as its own tokenizer source may well be a draft's folder
        refuse_draft_as_target(config, t.path)
    return Target(t, config)


def take_target_tensors(plan: Plan, ctx: Context, draft: Draft, target: Target,
                        target_model_dir: str | Path | None) -> tuple[Target, Checkpoint | None]:
    """The tensors the plan takes from the target (``--with-target-embeddings``, the family's plan:
    ``ctx.target_tensors``, or tensors a family built from the target itself): the target checkpoint opened for
    them, with the target resolved again for them when it is a Hub repo, and the tensors the draft lacks added
    (:func:`add_target_tensors`). Returns the target and its open checkpoint (None when the plan takes nothing
    from it; closed here when adding fails)."""
    options = ctx.options
    from_target = {src for ts in plan.tensors if ts.origin == "target" for src in ts.sources}
    if not (options.embed_from_target or ctx.target_tensors or from_target):
        return target, None
    taken = draft.family.TARGET_TENSORS if options.embed_from_target else tuple(ctx.target_tensors)
    wanted = [n for w in draft.family.TARGET_TENSORS for n in w.candidates] if options.embed_from_target else []
    if not options.embed_from_target and taken:  # fetch only what the plan asks for
        wanted = [n for w in taken for n in w.candidates]
        if not draft.own_tokenizer:
            target = Target(resolve_target(str(target_model_dir), tensors=wanted + sorted(from_target)), target.config)
    ck = Checkpoint(target.model.path, select=(set(wanted) | from_target).__contains__, config=target.config)
    if taken:
        try:
            add_target_tensors(plan, taken, ck, ctx)
        except BaseException:
            ck.close()
            raise
    return target, ck


def add_target_tensors(plan: Plan, wanted_tensors: tuple[TargetTensor, ...], target: Checkpoint,
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

