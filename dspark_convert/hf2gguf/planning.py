"""The family's plan for an opened draft and target (:func:`family_plan`), and the ``general.*`` metadata and notes
that complete it (:func:`add_general`): the planning steps of
:func:`dspark_convert.hf2gguf.conversion.plan_conversion`."""

from __future__ import annotations

from .. import schema as S
from ..kit.common import resolve_outtype
from ..plan import KV, Plan
from ..roles.convert import Context, ConvertOptions
from .inputs import Draft, Target, shard_note
from .metadata import general_kvs, param_counts


def family_plan(d: Draft, t: Target, options: ConvertOptions) -> tuple[Context, Plan, str]:
    """The draft family's plan from the :class:`Context` of ``d`` and ``t`` (the outtype resolved once), with the
    outtype the file is named by: the one resolved, or the one a family's fixed ``general.file_type`` names (a
    family that fixes every tensor type). The plan's notes start with that outtype, and end with where the
    tokenizer came from and how much of a sharded checkpoint was read."""
    ctx = Context(draft=d.checkpoint, target_dir=t.model.path, target_config=t.config, options=options,
                  outtype=resolve_outtype(options.outtype, d.checkpoint))
    plan = d.family.build_plan(ctx)
    plan.differs_from_upstream = list(ctx.differs_from_upstream)
    forced = plan.value(S.GENERAL_FILE_TYPE)
    outtype = S.FILE_TYPE_NAMES[forced] if forced != ctx.file_type and forced in S.FILE_TYPE_NAMES else ctx.outtype
    plan.notes.insert(0, f"outtype {outtype}")
    if d.own_tokenizer:
        plan.notes.append("tokenizer: the checkpoint's own (pass --target-model-dir to take it from another model)")
    if d.select is not None:
        plan.notes.append(shard_note(d.model.path, d.checkpoint))
    return ctx, plan, outtype


def add_general(plan: Plan, d: Draft, t: Target, options: ConvertOptions) -> None:
    """The ``general.*`` metadata (sizes, the base model unless the checkpoint is its own target), right after
    ``general.type``, and the notes naming the draft, the target and the ``architectures`` value used."""
    counts = param_counts((ts.name, ts.shape) for ts in plan.tensors)
    itself = d.own_tokenizer or t.model.path.resolve() == d.model.path.resolve()  # no base model: it is the target
    _insert_general(plan, general_kvs(d.model.path, total_params=counts[0], target=None if itself else t.model,
                                      metadata_override=options.metadata_override, model_name=options.model_name,
                                      repo_id=d.model.repo_id, size_counts=counts))
    plan.notes.append(f"draft {d.model.model_id}; target {t.model.model_id}")
    note = d.architecture.note()
    if note:
        plan.notes.append(note)


def _insert_general(plan: Plan, kvs: list[KV]) -> None:
    """general.* metadata goes right after general.type (row 4 of §2.1)."""
    pos = next(i for i, k in enumerate(plan.kvs) if k.name == S.GENERAL_TYPE) + 1
    names = {k.name for k in plan.kvs}
    plan.kvs[pos:pos] = [k for k in kvs if k.name not in names]
