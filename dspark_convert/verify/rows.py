"""verify's proof driver: it runs every GGUF variant's ``verify`` role (its ``PROOF``, the contract of
:mod:`dspark_convert.roles.proof`) the same way.

Both kinds of ``PROOF`` answer the same two things here: :func:`accepts` (does this variant's torch side read the
checkpoint?) and :func:`prove` (the :class:`~dspark_convert.roles.proof.Proof`). The driver
(:func:`dspark_convert.verify.verify`) asks the GGUF's variant first; when it does not accept the checkpoint, the
variant of the checkpoint's family (as the shared reader names it) proves the pair, and the tensor accounting (with
the GGUF's variant's rules) names what no forward read.

A forward proof runs the same steps for every variant (:func:`_drive`): features ``N(0, 1)`` per case context, the
variant's draw, the torch forward on the checkpoint rounded as the GGUF stores it (its failure is an input error),
the numpy forward on the GGUF (its failure a failing ``GGUF forward`` row), the rows in forward order, then quality
mode: the same rows against the unrounded checkpoint (information, never the verdict).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConvertError
from ..reference.compare import MetadataCheck, OutputCheck
from ..reference.weights import GGUFWeights, TargetWeights
from ..registry import VARIANTS, Variant, variant_of_family
from ..roles.proof import Forwards, Inputs, Job, OwnSide, Pair, Proof, TensorChecks, Tensors
from .checks import metadata_checks, needs_quality_run, run_candidate, run_reference
from .nvfp4 import nvfp4_rows

if TYPE_CHECKING:
    from ..reference.hf_draft import HFDraft, TorchCheckpoint

#: a variant's ``PROOF``
Prover = Forwards | TensorChecks

#: what a failing numpy forward may raise (a readable but inconsistent GGUF): a failing row, not an input error
CANDIDATE_ERRORS: tuple[type[Exception], ...] = (ConvertError, ValueError, IndexError, KeyError)


def prover(variant: Variant | None) -> Prover | None:
    """``variant``'s ``PROOF`` (its ``verify`` role), None for no variant or one without the role."""
    if variant is None or not variant.has_role("verify"):
        return None
    p: Prover = variant.role("verify").PROOF
    return p


def accepts(spec: Prover, job: Job, variant: Variant) -> bool:
    """Whether ``variant``'s torch side (its ``PROOF``, ``spec``) reads the checkpoint of ``job``: the shared reader
    names one of its families, its own side reads the folder, or (tensor checks) always."""
    if isinstance(spec, TensorChecks):
        return True
    if isinstance(spec.side, OwnSide):
        return spec.side.reads(Path(job.hf_dir))
    return variant_of_family(job.draft().family) is variant


def prove(spec: Prover, job: Job, variant: Variant) -> Proof:
    """Run the proof of ``job`` as ``variant`` states it (``spec``, its ``PROOF``)."""
    if isinstance(spec, TensorChecks):
        return spec.run(job)
    if isinstance(spec.side, OwnSide):
        return _prove_own(spec.side, job, variant, spec)
    return _prove_shared(job, variant, spec)


def checkpoint_prover(job: Job) -> tuple[Variant, Prover]:
    """The variant of the checkpoint's family (as the shared torch reader names it) and its ``PROOF``: who proves
    a pair whose GGUF's variant does not read the checkpoint."""
    v = variant_of_family(job.draft().family)
    p = prover(v)
    if p is None:  # every variant the shared reader names has its verify role (tests/test_variants.py)
        raise ConvertError(f"{job.hf_dir}: no verify rows for a {v.name} checkpoint")
    return v, p


def draft_readers() -> list[Any]:
    """The torch side's draft readers (``hf_draft.DraftReader``): each registered variant's ``torch_forward``
    that reads a folder for the shared reader, in the registry's order. Imports torch."""
    return [r for r in (v.role("torch_forward") for v in VARIANTS if v.has_role("torch_forward"))
            if hasattr(r, "read_config")]


def load_shared_draft(hf_dir: Path, target_dir: Path) -> HFDraft:
    """The checkpoint through the shared torch reader; unreadable input is a ConvertError."""
    try:
        from ..reference import torch_forward
    except ImportError as e:
        raise ConvertError(f"verify needs torch ({e}); install it with: pip install 'dspark-convert[torch]'") from None
    try:
        return torch_forward.load_draft(hf_dir, target_dir, draft_readers())
    except ConvertError:
        raise
    except (KeyError, ValueError, TypeError, OSError) as e:
        raise ConvertError(f"{hf_dir}: cannot read the draft checkpoint for the reference forward ({type(e).__name__}: {e})") from None


def gguf_types(g: GGUFWeights) -> dict[str, str]:
    """GGUF tensor name -> GGML type name (what the torch side rounds each checkpoint tensor to)."""
    return {t.name: t.qtype.name for t in g.file.tensors if t.qtype is not None}


def storage_of(g: GGUFWeights, names: Collection[str], counterpart: Callable[[str], str | None]) -> dict[str, str]:
    """Checkpoint name -> GGML type of the GGUF tensor it became, by a torch side's own name table
    (``counterpart``: checkpoint name -> GGUF name, None for none)."""
    types = gguf_types(g)
    return {n: types[c] for n in names if (c := counterpart(n)) is not None and c in types}


@dataclass
class _Opened:
    """What a side opened for :func:`_drive`: the checkpoint as the GGUF stores it (its weights, ``weights``, record
    the rounding) and unrounded, for quality mode; the features' width and the draws' vocabulary."""

    exact: Any
    weights: TorchCheckpoint
    unrounded: Any | None
    width: int
    n_vocab: int
    target: Any      # TargetWeights; None for forwards that need no target
    errors: tuple[type[Exception], ...] = CANDIDATE_ERRORS


def _drive(proof: Proof, job: Job, spec: Forwards, side: _Opened) -> bool:
    """The rows of a forward proof into ``proof``; False when the numpy forward failed (a ``GGUF forward`` row)."""
    rng = np.random.default_rng(job.seed)
    inputs = Inputs([rng.standard_normal((t, side.width)).astype(np.float32) for t in proof.contexts], side.n_vocab,
                    proof.steps)
    drawn = spec.draw(rng, inputs)
    hf = str(job.hf_dir)
    refs = run_reference(hf, lambda: spec.reference(side.exact, inputs, drawn, None))
    outs = run_candidate(proof, lambda: spec.candidate(job.g, side.target, inputs, drawn, refs), side.errors)
    if outs is None:
        return False
    proof.hparams = spec.hparams(job.g, outs, drawn)
    proof.outputs += spec.rows(Pair(refs, outs, inputs, drawn, proof.hparams))
    if side.unrounded is None or spec.quality_rows is None:
        return True
    if not job.quality:
        proof.quality_note = "quality mode skipped (--no-quality)"
        return True
    if needs_quality_run(proof, side.weights):
        refs = run_reference(hf, lambda: spec.reference(side.unrounded, inputs, drawn, refs))
    proof.quality += spec.quality_rows(Pair(refs, outs, inputs, drawn, proof.hparams))
    return True


def _guarded(proof: Proof, job: Job, variant: Variant, run: Callable[[], bool]) -> bool | None:
    """``run()``; None when it raised an input error on a file of another variant than ``variant`` (the checkpoint's
    forward cannot compute it): the ``architectures`` and ``forward`` rows say so. A file of no variant or of
    ``variant`` itself re-raises."""
    try:
        return run()
    except ConvertError as e:
        if job.variant is None or job.variant == variant.name:
            raise
        proof.metadata.append(MetadataCheck("architectures", f"a {job.variant} file",
                                            f"a {variant.name} file (the checkpoint: {proof.family})", False))
        proof.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                         detail=f"the checkpoint's forward cannot run on this file: {e}"))
        return None


def _storage_summary(weights: TorchCheckpoint) -> dict[str, dict[str, Any]]:
    """GGML type -> what rounding the checkpoint to it changed (tensors, values, changed values, largest change)."""
    out: dict[str, dict[str, Any]] = {}
    for r in weights.rounding.values():
        s = out.setdefault(r.ggml_type, {"tensors": 0, "values": 0, "changed": 0, "max_change": 0.0})
        s["tensors"] += 1
        s["values"] += r.values
        s["changed"] += r.changed
        s["max_change"] = max(s["max_change"], r.max_change)
    return dict(sorted(out.items()))


def _prove_shared(job: Job, variant: Variant, spec: Forwards) -> Proof:
    """A forward proof on the shared torch reader: the common metadata rows, the NVFP4 rows, the storage summary,
    exact and quality mode."""
    d = job.draft()
    target = TargetWeights(str(job.target_dir))
    proof = Proof(d.family, d.layout, job.steps, list(job.contexts), notes=list(d.notes))
    job.refuse_broken()
    g = job.g
    proof.metadata = metadata_checks(g, d)
    nvfp4 = nvfp4_rows(g, d.weights, Path(job.hf_dir))   # ModelOpt NVFP4: prec_a4 arrays, types, input scales
    proof.metadata += nvfp4.metadata
    proof.notes += job.runtime_notes()
    if not proof.metadata[0].passed:
        proof.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                         detail="the GGUF architecture does not match the checkpoint family"))
        return proof
    width = d.weights.shape("fc.weight")[1]
    n_vocab = min(x for x in (d.hp.vocab_size, target.ckpt.shape(target.embed_name)[0]) if x)
    exact = d.with_storage(gguf_types(g))
    if _guarded(proof, job, variant, lambda: _drive(proof, job, spec, _Opened(exact, exact.weights, d, width, n_vocab, target)
                                                    )) is None:
        return proof
    proof.storage = _storage_summary(exact.weights)
    proof.outputs += nvfp4.outputs
    if not any(o.name == "GGUF forward" for o in proof.outputs):      # the forwards ran to the end
        t = nvfp4.tensors   # the NVFP4 rows' compared tensors, and the companions the torch side decoded
        proof.tensors = Tensors(g.read - t.gguf_compared, t.gguf_compared, d.weights.names,
                                d.weights.read | t.checkpoint_read, t.checkpoint_compared)
    return proof


def _prove_own(side: OwnSide, job: Job, variant: Variant, spec: Forwards) -> Proof:
    """A forward proof on a variant's own torch side (exact mode)."""
    proof = Proof(side.family, side.layout, job.steps if side.chained else 0, list(job.contexts))
    run_reference(str(job.hf_dir), lambda: _guarded(proof, job, variant, lambda: _own_rows(side, proof, job, spec)))
    return proof

def _own_rows(side: OwnSide, proof: Proof, job: Job, spec: Forwards) -> bool:
    g, hf = job.g, Path(job.hf_dir)
    tgt = None if job.target_dir is None else Path(str(job.target_dir))
    probe = side.checkpoint(hf, tgt, None)
    ck = side.checkpoint(hf, tgt, storage_of(g, probe.w.names, side.counterpart))
    if hasattr(ck, "round_target"):  # target tensors the file stores (its head as output.weight) as stored
        ck.round_target(gguf_types(g))
    proof.metadata = spec.metadata(g, ck)
    proof.notes += list(side.notes)
    width = g.shape("fc.weight")[1] if side.width is None else side.width(g, ck)
    opened = _Opened(ck, ck.w, probe, width, side.n_vocab(g, tgt),
                     TargetWeights(tgt) if tgt is not None and spec.needs_target else None,
                     errors=(ValueError, KeyError, IndexError))
    ran = _drive(proof, job, spec, opened)
    proof.storage = _storage_summary(ck.w)
    if ran:
        proof.tensors = Tensors(set(g.read), set(), ck.w.names, ck.w.read, set())
    return ran
