"""verify's proof driver: it runs every GGUF variant's ``verify`` role (its ``PROOF``, the contract of
:mod:`dspark_convert.roles.proof`) the same way.

Both kinds of ``PROOF`` answer the same two things here: :func:`accepts` (does this variant's torch side read the
checkpoint?) and :func:`prove` (the :class:`~dspark_convert.roles.proof.Proof`). The driver
(:func:`dspark_convert.verify.verify`) asks the GGUF's variant first; when it does not accept the checkpoint, the
variant whose torch side reads the checkpoint (:func:`checkpoint_prover`) proves the pair, and the tensor accounting
(with the GGUF's variant's rules) names what no forward read.

A forward proof runs the same steps for every variant (:func:`prove_forwards`): open the checkpoint through the
variant's torch side, unrounded and rounded as the GGUF stores it; the metadata rows, the ModelOpt NVFP4 rows; then
(:func:`_drive`) features ``N(0, 1)`` per case context, the variant's draw, the torch forward on the rounded
checkpoint (its failure is an input error), the numpy forward on the GGUF (its failure a failing ``GGUF forward``
row), the rows in forward order, then quality mode: the same rows against the unrounded checkpoint (information,
never the verdict); last the storage summary and the accounting's inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import schema as S
from ..errors import ConvertError, clip_value
from ..hf.checkpoint import read_config
from ..reference.compare import MetadataCheck, OutputCheck
from ..reference.weights import GGUFWeights, TargetWeights
from ..registry import VARIANTS, Variant
from ..roles.proof import (
    TORCH_SIDE,
    Forwards,
    Inputs,
    Job,
    Pair,
    Proof,
    TensorChecks,
    Tensors,
    checkpoint_config,
    names_a_class,
)
from .checks import needs_quality_run, run_candidate, run_reference
from .nvfp4 import nvfp4_rows

if TYPE_CHECKING:
    from ..reference.hf_draft import TorchCheckpoint

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


def torch_side(variant: Variant) -> Any:
    """``variant``'s torch side (its ``torch_forward`` module, the contract of :mod:`dspark_convert.roles.proof`);
    imports torch: without it, a ConvertError saying how to install it."""
    try:
        return variant.role(TORCH_SIDE)
    except ImportError as e:
        raise ConvertError(f"verify needs torch ({e}); install it with: pip install 'dspark-convert[torch]'") from None


def reads(side: Any, hf_dir: Path, *, claimed: bool = False) -> bool:
    """Whether torch side ``side`` reads the checkpoint in ``hf_dir``: its config names one of the side's
    ``ARCHITECTURES`` (``claimed``: the side's ``claims(config)`` takes a config that names none of them)."""
    if claimed:
        return hasattr(side, "claims") and bool(side.claims(checkpoint_config(hf_dir)))
    return names_a_class(hf_dir, side.ARCHITECTURES)


def accepts(spec: Prover, job: Job, variant: Variant) -> bool:
    """Whether ``variant``'s torch side (its ``PROOF``, ``spec``) reads the checkpoint of ``job`` (tensor checks:
    always)."""
    if isinstance(spec, TensorChecks):
        return True
    side = torch_side(variant)
    hf = Path(job.hf_dir)
    return reads(side, hf) or (not _named(hf) and reads(side, hf, claimed=True))


def _forward_variants() -> list[Variant]:
    return [v for v in VARIANTS if isinstance(prover(v), Forwards)]


def _named(hf_dir: Path) -> bool:
    """Whether some forward-proved variant's torch side names the checkpoint's class."""
    return any(reads(torch_side(v), hf_dir) for v in _forward_variants())


def prove(spec: Prover, job: Job, variant: Variant) -> Proof:
    """Run the proof of ``job`` as ``variant`` states it (``spec``, its ``PROOF``), once its GGUF's header passed
    :func:`refuse_broken`."""
    refuse_broken(job.gguf_path)
    if isinstance(spec, TensorChecks):
        return spec.run(job)
    return prove_forwards(spec, job, variant)


def checkpoint_variant(hf_dir: Path) -> Variant:
    """The forward-proved variant whose torch side reads the checkpoint in ``hf_dir``: its class named, else
    claimed; a checkpoint none reads is a ConvertError."""
    hf = Path(hf_dir)
    forwards = _forward_variants()
    v = next((v for v in forwards if reads(torch_side(v), hf)), None) or next(
        (v for v in forwards if reads(torch_side(v), hf, claimed=True)), None)
    if v is None:
        archs = read_config(hf).get("architectures")
        arch = archs[0] if isinstance(archs, list) and archs else None
        raise ConvertError(f"{hf}/config.json: architectures[0] {clip_value(arch)} is not a checkpoint the torch "
                           f"forwards read (classes: {', '.join(a for f in forwards for a in torch_side(f).ARCHITECTURES)})")
    return v


def checkpoint_prover(job: Job) -> tuple[Variant, Prover]:
    """The variant whose torch side reads the checkpoint (:func:`checkpoint_variant`) and its ``PROOF``: who proves
    a pair whose GGUF's variant does not read the checkpoint."""
    v = checkpoint_variant(Path(job.hf_dir))
    p = prover(v)
    assert p is not None
    return v, p


def open_checkpoint(side: Any, hf_dir: Path, target_dir: Path | None,
                    storage: Mapping[str, str] | None = None) -> Any:
    """The checkpoint through ``side``'s ``open``; unreadable input is a ConvertError."""
    try:
        return side.open(hf_dir, target_dir, storage)
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
    """What :func:`prove_forwards` opened for :func:`_drive`: the checkpoint as the GGUF stores it and unrounded (for
    quality mode), the features' width, the draws' vocabulary and the target's weights (None: not needed)."""

    forward: Callable[[Any, Inputs, Any, Any], list[Any]]
    exact: Any
    unrounded: Any
    width: int
    n_vocab: int
    target: Any


def _drive(proof: Proof, job: Job, spec: Forwards, side: _Opened) -> bool:
    """The rows of a forward proof into ``proof``; False when the numpy forward failed (a ``GGUF forward`` row)."""
    rng = np.random.default_rng(job.seed)
    inputs = Inputs([rng.standard_normal((t, side.width)).astype(np.float32) for t in proof.contexts], side.n_vocab,
                    proof.steps)
    drawn = spec.draw(inputs, rng)
    hf = str(job.hf_dir)
    forward = side.forward
    refs = run_reference(hf, lambda: forward(side.exact, inputs, drawn, None))
    outs = run_candidate(proof, lambda: spec.candidate(job.g, side.target, inputs, drawn, refs), CANDIDATE_ERRORS)
    if outs is None:
        return False
    proof.hparams = spec.hparams(job.g, outs, drawn)
    proof.outputs += spec.rows(Pair(refs, outs, inputs, drawn, proof.hparams))
    if not job.quality:
        proof.quality_note = "quality mode skipped (--no-quality)"
        return True
    if needs_quality_run(proof, side.exact.w):
        refs = run_reference(hf, lambda: forward(side.unrounded, inputs, drawn, refs))
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


def prove_forwards(spec: Forwards, job: Job, variant: Variant) -> Proof:
    """A forward proof (see the module docstring), the same for every variant, of a GGUF whose header
    :func:`refuse_broken` passed."""
    side = torch_side(variant)
    hf = Path(job.hf_dir)
    target = None if job.target_dir is None or not spec.needs_target else Path(str(job.target_dir))
    probe = open_checkpoint(side, hf, target)
    proof = Proof(probe.family, probe.layout, job.steps if spec.steps else 0, list(job.contexts),
                  notes=[*probe.notes, *spec.notes])
    run_reference(str(hf), lambda: _guarded(proof, job, variant, lambda: _forward_rows(proof, job, spec, side, probe,
                                                                                        target)))
    return proof


def _forward_rows(proof: Proof, job: Job, spec: Forwards, side: Any, probe: Any, target: Path | None) -> bool:
    g = job.g
    types = gguf_types(g)
    ck = open_checkpoint(side, probe.w.folder, target, storage_of(g, probe.w.names, side.counterpart))
    if hasattr(ck, "round_target"):  # target tensors the file stores (its head as output.weight) as stored
        ck.round_target(types)
    proof.metadata = spec.metadata_rows(g, ck)
    nvfp4 = nvfp4_rows(g, ck.w, Path(job.hf_dir), side.counterpart)  # ModelOpt NVFP4: prec_a4, types, input scales
    proof.metadata += nvfp4.metadata
    proof.notes += runtime_notes(g)
    if any(m.key == "general.architecture" and not m.passed for m in proof.metadata):
        proof.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                         detail="the GGUF architecture does not match the checkpoint family"))
        return False
    width = spec.features_width(g, ck)
    ran = _drive(proof, job, spec, _Opened(side.forward, ck, probe, width, spec.vocabulary(g, ck),
                                           TargetWeights(target) if target is not None else None))
    proof.storage = _storage_summary(ck.w)
    proof.outputs += nvfp4.outputs
    if not ran:
        return False
    t = nvfp4.tensors   # the NVFP4 rows' compared tensors, and the companions the torch side decoded
    proof.tensors = Tensors(g.read - t.gguf_compared, t.gguf_compared, ck.w.names, ck.w.read | t.checkpoint_read,
                            t.checkpoint_compared)
    return True


#: loader rules on a header key's type or value: a file that breaks one is not run (its sizes may be anything)
UNRUNNABLE_RULES = frozenset({"key-type", "array-type", "key-range", "array-length", "hparam-value", "block-count"})
#: the keys every architecture's loader requires (``{arch}.`` left out): missing, they refuse the file whatever its
#: layout (another missing key may be another layout's, which the accounting names)
CORE_KEYS = frozenset(t.removeprefix("{arch}.") for t in (S.CONTEXT_LENGTH, S.EMBEDDING_LENGTH, S.BLOCK_COUNT,
                                                            S.RMS_EPS, S.LAYER_NORM_EPS))


def refuse_broken(gguf_path: str | Path) -> None:
    """A file whose header no forward can run on (``check``'s findings on a key's type or value:
    :data:`UNRUNNABLE_RULES`; e.g. ``head_count`` 0, a division by zero, or a RoPE dimension count of 2^32 - 1, which
    the forward would size arrays by), or that lacks a tensor llama.cpp requires (its only loader errors are
    ``required-tensor``: neither llama.cpp nor the forward can run it), is an input error. A file with other loader
    errors too (extra tensors: another layout's, whose keys it then lacks) is left to the comparison and the tensor
    accounting, which name them."""
    from ..check import check_file

    findings = check_file(gguf_path)
    broken = [f for f in findings if f.level == "error" and (f.rule in UNRUNNABLE_RULES or f.rule == "required-key"
                                                              and f.subject.partition(".")[2] in CORE_KEYS)]
    if broken:
        raise ConvertError(f"{gguf_path}: {broken[0].subject}: {broken[0].message}; the forward cannot run on it "
                           f"(check reports it as [{broken[0].rule}])")
    errors = [f for f in findings if f.level == "error"]
    if errors and all(f.rule == "required-tensor" for f in errors):
        raise ConvertError(f"{gguf_path}: does not load in llama.cpp ("
                           + "; ".join(f"{e.subject}: {e.message}" for e in errors)
                           + f"); verify compares a file that loads: see 'dspark-convert check {gguf_path}'")


def runtime_notes(g: GGUFWeights) -> list[str]:
    """How llama.cpp runs the file, where a reader would not guess it: its output head duplicated from token_embd."""
    from ..check import TOKEN_EMBD_HEAD_NOTE, runtime_head

    head = runtime_head(str(g.value("general.architecture")), {n for n in ("token_embd.weight", "output.weight") if g.has(n)})
    return [TOKEN_EMBD_HEAD_NOTE] if head == "token_embd" else []
