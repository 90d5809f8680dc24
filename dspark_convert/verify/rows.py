"""verify's shared row driver: every GGUF variant's ``verify`` role has one interface, and one driver runs it.

A variant's ``variants/<v>/verify.py`` states only what is its own, in one object, ``PROOF``:

- a :class:`Forwards`: which torch side reads the checkpoint (:data:`SHARED_READER`, the shared reader of
  :mod:`.reference.hf_draft` that each variant's ``torch_forward`` extends as a ``DraftReader``, or the variant's
  own :class:`OwnSide`), what is drawn for each seeded case after its features, which pair of forwards runs on the
  cases, the rows that compare them (exact mode, and quality mode where the side has it), the hyperparameters the
  report shows and the metadata rows;
- or :class:`TensorChecks`: a variant without a reference forward yet, proved tensor by tensor.

Its tensor-accounting drop rules are its :class:`.variants.Variant` descriptor's. Both kinds answer the same three
things (:class:`Prover`): ``needs_target``, ``accepts(job, variant)`` (does this variant's torch side read the
checkpoint?) and ``prove(job, variant) -> Proof``. The driver (:func:`.verify.verify`) asks the GGUF's variant
first; when it does not accept the checkpoint, the variant of the checkpoint's family (as the shared reader names
it) proves the pair, and the tensor accounting (with the GGUF's variant's rules) names what no forward read.

A forward proof runs the same steps for every variant (:func:`_drive`): features ``N(0, 1)`` per case context, the
variant's draw, the torch forward on the checkpoint rounded as the GGUF stores it (its failure is an input error),
the numpy forward on the GGUF (its failure a failing ``GGUF forward`` row), the rows in forward order, then quality
mode: the same rows against the unrounded checkpoint (information, never the verdict).

Example:
    >>> from types import SimpleNamespace as Case
    >>> p = Pair([Case(x=np.ones(3))], [Case(x=np.array([1.0, 1.0, 1.5]))], Inputs([], 0, 0), None)
    >>> p.cases("x", "x").grade, p.cases("x", "x", bound=None).grade
    ('differs', 'poor')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import ConvertError
from ..reference.weights import GGUFWeights, TargetWeights
from ..variants import VARIANTS, Variant, variant_of_family
from .accounting import Tensors
from .checks import (
    MetadataCheck,
    OutputCheck,
    _candidate,
    _quality_ref,
    _reference,
    compare_cases,
    compare_token_cases,
    metadata_checks,
)
from .nvfp4 import nvfp4_rows

__all__ = ["SHARED_READER", "Forwards", "Inputs", "Job", "OwnSide", "Pair", "Proof", "Prover", "Side", "TensorChecks",
           "Tensors", "anchors", "checkpoint_prover", "draft_readers", "gguf_types", "lazy", "next_tokens", "prover",
           "storage_of"]

if TYPE_CHECKING:
    from ..reference.hf_draft import HFDraft

#: what a failing numpy forward may raise (a readable but inconsistent GGUF): a failing row, not an input error
CANDIDATE_ERRORS: tuple[type[Exception], ...] = (ConvertError, ValueError, IndexError, KeyError)


# ============================================================================================== one verify run
@dataclass
class Job:
    """One verify run as the driver hands it to a variant's ``PROOF``: the GGUF, the folders, the cases' context
    lengths and options, and the GGUF's variant (None: a file no variant loads)."""

    g: GGUFWeights
    gguf_path: str | Path
    hf_dir: str | Path
    target_dir: str | Path | None
    contexts: list[int]
    seed: int
    steps: int
    quality: bool
    variant: Variant | None
    #: raises ConvertError when the file's hyperparameters cannot drive a forward (the driver's: ``check``'s
    #: ``hparam-value`` findings, e.g. head_count 0, a division by zero); the shared reader calls it
    refuse_broken: Callable[[], None] = lambda: None
    #: the driver's notes on how llama.cpp runs the file (e.g. its output head taken from token_embd); the shared
    #: reader adds them to its report
    runtime_notes: Callable[[], list[str]] = list
    _draft: Any = None

    def draft(self) -> HFDraft:
        """The checkpoint through the shared torch reader (read once; imports torch)."""
        if self._draft is None:
            self._draft = load_shared_draft(Path(self.hf_dir), Path(str(self.target_dir)))
        return self._draft


@dataclass
class Proof:
    """What a variant's ``PROOF`` hands the driver: the report's family and layout words, its inputs, rows and
    notes, and (``tensors``; None when the forwards did not run to the end) the accounting's inputs."""

    family: str = ""
    layout: str = ""
    steps: int = 0
    contexts: list[int] = field(default_factory=list)
    hparams: dict[str, Any] = field(default_factory=dict)
    storage: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: list[OutputCheck] = field(default_factory=list)      # exact mode: the verdict
    quality: list[OutputCheck] = field(default_factory=list)      # quality mode: information only
    quality_note: str = ""
    metadata: list[MetadataCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tensors: Tensors | None = None


class Prover(Protocol):
    """The one interface of a variant's ``verify`` role (its module's ``PROOF``)."""

    #: whether verify needs ``--target-model-dir`` for it
    needs_target: bool

    def accepts(self, job: Job, variant: Variant) -> bool:
        """Whether ``variant``'s torch side reads the checkpoint of ``job``."""
        ...

    def prove(self, job: Job, variant: Variant) -> Proof:
        """Run the proof of ``job`` as ``variant``."""
        ...


def prover(variant: Variant | None) -> Prover | None:
    """``variant``'s ``PROOF`` (its ``verify`` role), None for no variant or one without the role."""
    if variant is None or not variant.has_role("verify"):
        return None
    p: Prover = variant.role("verify").PROOF
    return p


def checkpoint_prover(job: Job) -> tuple[Variant, Prover]:
    """The variant of the checkpoint's family (as the shared torch reader names it) and its ``PROOF``: who proves
    a pair whose GGUF's variant does not read the checkpoint."""
    v = variant_of_family(job.draft().family)
    p = prover(v)
    if p is None:  # every variant the shared reader names has its verify role (tests/test_variants.py)
        raise ConvertError(f"{job.hf_dir}: no verify rows for a {v.name} checkpoint")
    return v, p


# ============================================================================================== the shared torch reader
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


def lazy(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported at its first call: a torch side's class or function, so that reading a variant's
    role imports no torch (verify says it needs torch when it runs).

    Example:
        >>> lazy("math", "hypot")(3, 4)
        5.0
    """
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return call


def storage_of(g: GGUFWeights, names: Collection[str], counterpart: Callable[[str], str | None]) -> dict[str, str]:
    """Checkpoint name -> GGML type of the GGUF tensor it became, by a torch side's own name table
    (``counterpart``: checkpoint name -> GGUF name, None for none)."""
    types = gguf_types(g)
    return {n: types[c] for n in names if (c := counterpart(n)) is not None and c in types}


# ============================================================================================== rows
@dataclass(frozen=True)
class Inputs:
    """A forward proof's seeded inputs: one feature matrix per case (``[context, width]``), the vocabulary the
    draws come from, the chained steps."""

    feats: list[np.ndarray]
    n_vocab: int
    steps: int


@dataclass(frozen=True)
class Pair:
    """Both forwards on the same cases, for a variant's rows: ``refs`` (torch, the checkpoint), ``outs`` (numpy, the
    GGUF), the inputs, what the variant drew for them and the report's hyperparameters."""

    refs: list[Any]
    outs: list[Any]
    inputs: Inputs
    drawn: Any
    hparams: dict[str, Any] = field(default_factory=dict)   # what the variant's ``hparams`` read of the GGUF

    def both(self, attr: str) -> tuple[list[Any], list[Any]]:
        """``attr`` of every case, on each side."""
        return [getattr(r, attr) for r in self.refs], [getattr(x, attr) for x in self.outs]

    def cases(self, name: str, attr: str, **kw: Any) -> OutputCheck:
        """:func:`.checks.compare_cases` of ``attr`` (keywords: ``bound``, ``argmax``, ``layer``, ...)."""
        return compare_cases(name, *self.both(attr), **kw)

    def tokens(self, name: str, logits: str) -> OutputCheck:
        """The chosen tokens (``tokens``) position by position, near-ties judged by the ``logits`` they came from."""
        return compare_token_cases(name, *self.both("tokens"), *self.both(logits))

    def layers(self, *, missing_fails: bool = False) -> list[OutputCheck]:
        """``layer i output`` for each layer (``layers``) both sides have; with ``missing_fails``, a failing row for
        each layer only one side has."""
        nr, no = len(self.refs[0].layers), len(self.outs[0].layers)
        rows = []
        for il in range(max(nr, no) if missing_fails else min(nr, no)):
            if il >= nr or il >= no:
                rows.append(OutputCheck(f"layer {il} output", [], grade="missing", passed=False, layer=il,
                                        detail=f"{nr} layers in the checkpoint, {no} in the GGUF"))
                continue
            rows.append(compare_cases(f"layer {il} output", [r.layers[il] for r in self.refs],
                                      [x.layers[il] for x in self.outs], layer=il))
        return rows

    def block_trunk(self, *, missing_fails: bool = False) -> list[OutputCheck]:
        """A block draft's rows up to its logits: context projection, block input, each layer, the post-norm
        hidden state (``context``, ``block_input``, ``layers``, ``hidden``)."""
        return [self.cases("context projection", "context"), self.cases("block input (embeddings)", "block_input"),
                *self.layers(missing_fails=missing_fails), self.cases("block hidden (post-norm)", "hidden")]


def anchors(rng: np.random.Generator, inputs: Inputs) -> list[int]:
    """A block draft's draw: one random anchor token per case."""
    return [int(a) for a in rng.integers(0, inputs.n_vocab, size=len(inputs.feats))]


def next_tokens(rng: np.random.Generator, inputs: Inputs) -> list[np.ndarray]:
    """A chain draft's draw: a random next token at every context position of every case."""
    return [rng.integers(0, inputs.n_vocab, size=len(f)) for f in inputs.feats]


# ============================================================================================== forward proofs
#: (checkpoint side, inputs, drawn, refs to force or None) -> the torch forward's result per case
Reference = Callable[[Any, Inputs, Any, Any], list[Any]]
#: (GGUF, target, inputs, drawn, the torch results) -> the numpy forward's result per case
Candidate = Callable[[GGUFWeights, TargetWeights, Inputs, Any, list[Any]], list[Any]]


@dataclass(frozen=True)
class Forwards:
    """A variant proved by two forwards: which torch side, which draw, which forwards, which rows and metadata
    (see the module docstring). ``metadata(g, checkpoint)`` gets what the side opened (the shared reader's
    ``HFDraft``, or the variant's own checkpoint object)."""

    side: Side
    draw: Callable[[np.random.Generator, Inputs], Any]
    reference: Reference
    candidate: Candidate
    hparams: Callable[[GGUFWeights, list[Any], Any], dict[str, Any]]
    rows: Callable[[Pair], list[OutputCheck]]
    metadata: Callable[[GGUFWeights, Any], list[MetadataCheck]]
    #: quality mode's rows (against the unrounded checkpoint), where the side has quality mode
    quality_rows: Callable[[Pair], list[OutputCheck]] | None = None
    needs_target: bool = True

    def accepts(self, job: Job, variant: Variant) -> bool:
        return self.side.accepts(job, variant)

    def prove(self, job: Job, variant: Variant) -> Proof:
        return self.side.prove(job, variant, self)


class Side(Protocol):
    """Which torch side reads the checkpoint of a forward proof."""

    def accepts(self, job: Job, variant: Variant) -> bool:
        ...

    def prove(self, job: Job, variant: Variant, spec: Forwards) -> Proof:
        ...


@dataclass
class _Opened:
    """What a side opened for :func:`_drive`: the checkpoint as the GGUF stores it (and unrounded, for quality
    mode), the features' width and the draws' vocabulary."""

    exact: Any
    unrounded: Any | None
    width: int
    n_vocab: int
    target: TargetWeights
    errors: tuple[type[Exception], ...] = CANDIDATE_ERRORS


def _drive(proof: Proof, job: Job, spec: Forwards, side: _Opened) -> bool:
    """The rows of a forward proof into ``proof``; False when the numpy forward failed (a ``GGUF forward`` row)."""
    rng = np.random.default_rng(job.seed)
    inputs = Inputs([rng.standard_normal((t, side.width)).astype(np.float32) for t in proof.contexts], side.n_vocab,
                    proof.steps)
    drawn = spec.draw(rng, inputs)
    hf = str(job.hf_dir)
    refs = _reference(hf, lambda: spec.reference(side.exact, inputs, drawn, None))
    outs = _candidate(proof, lambda: spec.candidate(job.g, side.target, inputs, drawn, refs), side.errors)
    if outs is None:
        return False
    proof.hparams = spec.hparams(job.g, outs, drawn)
    proof.outputs += spec.rows(Pair(refs, outs, inputs, drawn, proof.hparams))
    if side.unrounded is None or spec.quality_rows is None:
        return True
    if not job.quality:
        proof.quality_note = "quality mode skipped (--no-quality)"
        return True
    if _quality_ref(proof, side.exact):
        refs = _reference(hf, lambda: spec.reference(side.unrounded, inputs, drawn, refs))
    proof.quality += spec.quality_rows(Pair(refs, outs, inputs, drawn, proof.hparams))
    return True


def _guarded(proof: Proof, job: Job, variant: Variant, run: Callable[[], bool]) -> bool | None:
    """``run()``; None when it raised an input error on a file of another variant than ``variant`` (the checkpoint's
    forward cannot compute it): the ``architectures`` and ``forward`` rows say so. A file of no variant or of
    ``variant`` itself re-raises."""
    try:
        return run()
    except ConvertError as e:
        if job.variant is None or job.variant is variant:
            raise
        proof.metadata.append(MetadataCheck("architectures", f"a {job.variant.name} file",
                                            f"a {variant.name} file (the checkpoint: {proof.family})", False))
        proof.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                         detail=f"the checkpoint's forward cannot run on this file: {e}"))
        return None


class SharedReader:
    """The torch side of :mod:`.reference.hf_draft` (each variant's ``torch_forward`` that is a ``DraftReader``):
    it reads the checkpoints of the variant's families, rounds them as the GGUF stores them (and keeps them
    unrounded for quality mode), and adds the common metadata rows, the NVFP4 rows and the storage summary."""

    def accepts(self, job: Job, variant: Variant) -> bool:
        """The shared reader names one of ``variant``'s families for the checkpoint."""
        return variant_of_family(job.draft().family) is variant

    def prove(self, job: Job, variant: Variant, spec: Forwards) -> Proof:
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
        if _guarded(proof, job, variant, lambda: _drive(proof, job, spec, _Opened(exact, d, width, n_vocab, target)
                                                        )) is None:
            return proof
        proof.storage = _storage_summary(exact)
        proof.outputs += nvfp4.outputs
        if not any(o.name == "GGUF forward" for o in proof.outputs):      # the forwards ran to the end
            t = nvfp4.tensors   # the NVFP4 rows' compared tensors, and the companions the torch side decoded
            proof.tensors = Tensors(g.read - t.gguf_compared, t.gguf_compared, d.weights.names,
                                    d.weights.read | t.checkpoint_read, t.checkpoint_compared)
        return proof


#: the shared torch reader, as a :class:`Forwards` side
SHARED_READER = SharedReader()


@dataclass(frozen=True)
class OwnSide:
    """A variant's own torch side: the report's ``family`` / ``layout`` words, ``reads(hf_dir)`` (the checkpoint's
    own config names a class it reads: the GGUF alone does not decide which forwards run), ``checkpoint(draft,
    target, storage)`` (its checkpoint object, with ``.w`` the draft's ``TorchCheckpoint``), ``counterpart``
    (its own checkpoint -> GGUF name table, for the storage rounding) and the draws' vocabulary. Exact mode only.
    A checkpoint object with ``round_target(types)`` (GGUF name -> GGML type) is handed the file's types too: it
    rounds the target tensors the file stores, e.g. the target's head written as ``output.weight``."""

    family: str
    layout: str
    reads: Callable[[Path], bool]
    checkpoint: Callable[[Path, Path, Mapping[str, str] | None], Any]
    counterpart: Callable[[str], str | None]
    n_vocab: Callable[[GGUFWeights, Path], int]

    def accepts(self, job: Job, variant: Variant) -> bool:
        return self.reads(Path(job.hf_dir))

    def prove(self, job: Job, variant: Variant, spec: Forwards) -> Proof:
        proof = Proof(self.family, self.layout, 0, list(job.contexts))
        _reference(str(job.hf_dir), lambda: _guarded(proof, job, variant, lambda: self._rows(proof, job, spec)))
        return proof

    def _rows(self, proof: Proof, job: Job, spec: Forwards) -> bool:
        g, hf, tgt = job.g, Path(job.hf_dir), Path(str(job.target_dir))
        probe = self.checkpoint(hf, tgt, None)
        ck = self.checkpoint(hf, tgt, storage_of(g, probe.w.names, self.counterpart))
        if hasattr(ck, "round_target"):  # target tensors the file stores (its head as output.weight) as stored
            ck.round_target(gguf_types(g))
        proof.metadata = spec.metadata(g, ck)
        opened = _Opened(ck, None, g.shape("fc.weight")[1], self.n_vocab(g, tgt), TargetWeights(tgt),
                         errors=(ValueError, KeyError, IndexError))
        ran = _drive(proof, job, spec, opened)
        if ran:
            proof.tensors = Tensors(set(g.read), set(), ck.w.names, ck.w.read, set())
        return ran


def _storage_summary(exact: HFDraft) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in exact.weights.rounding.values():
        s = out.setdefault(r.ggml_type, {"tensors": 0, "values": 0, "changed": 0, "max_change": 0.0})
        s["tensors"] += 1
        s["values"] += r.values
        s["changed"] += r.changed
        s["max_change"] = max(s["max_change"], r.max_change)
    return dict(sorted(out.items()))


# ============================================================================================== tensor proofs
@dataclass(frozen=True)
class TensorChecks:
    """A variant without a reference forward yet: ``run(job)`` compares every tensor with the checkpoint and
    returns the proof (rows, notes and its accounting's ``compared`` sets); it reads any checkpoint folder and
    needs no target."""

    run: Callable[[Job], Proof]
    needs_target: bool = False

    def accepts(self, job: Job, variant: Variant) -> bool:
        return True

    def prove(self, job: Job, variant: Variant) -> Proof:
        return self.run(job)
