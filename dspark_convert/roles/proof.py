"""The ``verify`` role's contract: what a variant's ``variants/<v>/verify.py`` states, as its ``PROOF``.

- a :class:`Forwards`: which torch side reads the checkpoint (:data:`SHARED_READER`, the shared reader of
  :mod:`dspark_convert.reference.hf_draft` that the variant's ``torch_forward`` extends as a ``DraftReader``, or the
  variant's own :class:`OwnSide`), what is drawn for each seeded case after its features (:func:`anchors`,
  :func:`next_tokens`), which pair of forwards runs on the cases, the rows that compare them (exact mode, and
  quality mode), the hyperparameters the report shows and the metadata rows;
- or :class:`TensorChecks`: a variant without a reference forward yet, proved tensor by tensor (``run(job)``
  returns the :class:`Proof`).

A variant's rows compare a :class:`Pair` (both forwards on the same cases) with the kernel of
:mod:`dspark_convert.reference.compare`. The driver (:mod:`dspark_convert.verify.rows`) runs every ``PROOF``; the
tensor accounting's drop rules are the variant's ``Variant`` row's.

Example:
    >>> from types import SimpleNamespace as Case
    >>> p = Pair([Case(x=np.ones(3))], [Case(x=np.array([1.0, 1.0, 1.5]))], Inputs([], 0, 0), None)
    >>> p.cases("x", "x").grade, p.cases("x", "x", bound=None).grade
    ('differs', 'poor')
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..reference.compare import MetadataCheck, OutputCheck, compare_cases, compare_token_cases
from ..reference.weights import GGUFWeights, TargetWeights


@dataclass
class Job:
    """One verify run as the driver hands it to a variant's ``PROOF``: the GGUF, the folders, the cases' context
    lengths and options, and the name of the GGUF's variant (None: a file no variant loads)."""

    g: GGUFWeights
    gguf_path: str | Path
    hf_dir: str | Path
    target_dir: str | Path | None
    contexts: list[int]
    seed: int
    steps: int
    quality: bool
    variant: str | None
    #: raises ConvertError when the file's hyperparameters cannot drive a forward (the driver's: ``check``'s
    #: ``hparam-value`` findings, e.g. head_count 0, a division by zero); the shared reader calls it
    refuse_broken: Callable[[], None] = lambda: None
    #: the driver's notes on how llama.cpp runs the file (e.g. its output head taken from token_embd); the shared
    #: reader adds them to its report
    runtime_notes: Callable[[], list[str]] = list
    #: the checkpoint through the shared torch reader (the driver's; read once, imports torch)
    read_draft: Callable[[], Any] = lambda: None
    _draft: Any = None

    def draft(self) -> Any:
        """The checkpoint through the shared torch reader (an ``HFDraft``; read once)."""
        if self._draft is None:
            self._draft = self.read_draft()
        return self._draft


@dataclass
class Tensors:
    """What the accounting needs of a proof that ran to the end (or one contribution to it, such as the NVFP4
    rows'): the tensors the forwards read and the tensor checks compared, on each side, and the checkpoint's names."""

    gguf_read: set[str] = field(default_factory=set)
    gguf_compared: set[str] = field(default_factory=set)
    checkpoint_names: list[str] = field(default_factory=list)
    checkpoint_read: set[str] = field(default_factory=set)
    checkpoint_compared: set[str] = field(default_factory=set)


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
        """:func:`~dspark_convert.reference.compare.compare_cases` of ``attr`` (keywords: ``bound``, ``argmax``, ``layer``, ...)."""
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


#: (checkpoint side, inputs, drawn, refs to force or None) -> the torch forward's result per case
Reference = Callable[[Any, Inputs, Any, Any], list[Any]]


#: (GGUF, target, inputs, drawn, the torch results) -> the numpy forward's result per case
Candidate = Callable[[GGUFWeights, TargetWeights, Inputs, Any, list[Any]], list[Any]]


def block_forwards(torch_module: str, forward: str, numpy_forward: Callable[..., list[Any]],
                   forced: str) -> tuple[Reference, Candidate]:
    """The two forwards of a block draft with its own torch side: ``torch_module.forward(checkpoint, features,
    anchors)`` (imported at its first call) and ``numpy_forward(g, target, features, anchors, forced_inputs)``, the
    GGUF side fed each case's ``forced`` attribute of the torch side's result."""
    torch_forward = lazy(torch_module, forward)

    def reference(ck: Any, inputs: Inputs, anchors: list[int], refs: list[Any] | None) -> list[Any]:
        return torch_forward(ck, inputs.feats, anchors)

    def candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, anchors: list[int],
                  refs: list[Any]) -> list[Any]:
        return numpy_forward(g, target, inputs.feats, anchors, [getattr(r, forced) for r in refs])

    return reference, candidate


def names_a_class(hf_dir: Path, classes: Collection[str]) -> bool:
    """An :class:`OwnSide`'s ``reads``: the checkpoint's own ``config.json`` lists one of ``classes`` in its
    ``architectures`` (False without a config)."""
    cfg = Path(hf_dir) / "config.json"
    archs = json.loads(cfg.read_text()).get("architectures") if cfg.is_file() else None
    return isinstance(archs, list) and any(a in classes for a in archs)


@dataclass(frozen=True)
class Forwards:
    """A variant proved by two forwards: which torch side, which draw, which forwards, which rows and metadata
    (see the module docstring). ``metadata(g, checkpoint)`` gets what the side opened (the shared reader's
    ``HFDraft``, or the variant's own checkpoint object)."""

    side: SharedReader | OwnSide
    draw: Callable[[np.random.Generator, Inputs], Any]
    reference: Reference
    candidate: Candidate
    hparams: Callable[[GGUFWeights, list[Any], Any], dict[str, Any]]
    rows: Callable[[Pair], list[OutputCheck]]
    metadata: Callable[[GGUFWeights, Any], list[MetadataCheck]]
    #: quality mode's rows (against the unrounded checkpoint)
    quality_rows: Callable[[Pair], list[OutputCheck]] | None = None
    needs_target: bool = True


class SharedReader:
    """The torch side of :mod:`dspark_convert.reference.hf_draft` (each variant's ``torch_forward`` that is a
    ``DraftReader``): it reads the checkpoints of the variant's families, rounds them as the GGUF stores them (and
    keeps them unrounded for quality mode), and adds the common metadata rows, the NVFP4 rows and the storage
    summary."""


#: the shared torch reader, as a :class:`Forwards` side
SHARED_READER = SharedReader()


@dataclass(frozen=True)
class OwnSide:
    """A variant's own torch side: the report's ``family`` / ``layout`` words, ``reads(hf_dir)`` (the checkpoint's
    own config names a class it reads: the GGUF alone does not decide which forwards run), ``checkpoint(draft,
    target, storage)`` (its checkpoint object, with ``.w`` the draft's ``TorchCheckpoint``), ``counterpart``
    (its own checkpoint -> GGUF name table, for the storage rounding) and the draws' vocabulary. Quality mode runs the
    same forward on ``checkpoint(draft, target, None)`` (the unrounded values).
    A checkpoint object with ``round_target(types)`` (GGUF name -> GGML type) is handed the file's types too: it
    rounds the target tensors the file stores, e.g. the target's head written as ``output.weight``.
    ``width(g, checkpoint)`` is the features' width (None: ``fc.weight``'s input width); ``notes`` go into the
    report; ``chained``: the forwards draft ``--steps`` chained tokens (the inputs' and the report's ``steps``; else
    0). A side whose ``Forwards`` needs no target gets ``None`` for the target folder."""

    family: str
    layout: str
    reads: Callable[[Path], bool]
    checkpoint: Callable[[Path, Path | None, Mapping[str, str] | None], Any]
    counterpart: Callable[[str], str | None]
    n_vocab: Callable[[GGUFWeights, Any], int]     # (GGUF, the target folder or None)
    width: Callable[[GGUFWeights, Any], int] | None = None
    notes: tuple[str, ...] = ()
    chained: bool = False


@dataclass(frozen=True)
class TensorChecks:
    """A variant without a reference forward yet: ``run(job)`` compares every tensor with the checkpoint and
    returns the proof (rows, notes and its accounting's ``compared`` sets); it reads any checkpoint folder and
    needs no target."""

    run: Callable[[Job], Proof]
    needs_target: bool = False
