"""The ``verify`` role's contract: what a variant's ``variants/<v>/verify.py`` states, as its ``PROOF``.

- a :class:`Forwards`: a variant proved by two forwards. Its torch side is found by convention in
  ``variants/<v>/torch_forward.py`` (:data:`TORCH_SIDE`): ``ARCHITECTURES`` (the checkpoint classes it reads; an
  optional ``claims(config)`` for a config that names none), ``open(hf_dir, target_dir, storage)`` (the checkpoint
  object: ``.w`` its :class:`~dspark_convert.reference.hf_draft.TorchCheckpoint` rounded as ``storage`` says, checkpoint
  name -> GGML type; ``.family``, ``.layout``, ``.notes`` for the report; optionally ``round_target(types)``, the
  target tensors the file stores rounded as stored), ``counterpart(name)`` (checkpoint name -> the GGUF tensor that
  stores it, None for none) and ``forward(checkpoint, inputs, drawn, forced)`` (``forced``: the first run's results
  when quality mode runs the unrounded checkpoint, else None). The ``PROOF`` names what is drawn for each seeded
  case after its features (:meth:`Inputs.anchors`, :meth:`Inputs.next_tokens`), the numpy forward on the GGUF, the rows that
  compare the two (exact mode, and quality mode), the hyperparameters the report shows and the metadata rows;
- or :class:`TensorChecks`: a variant without a reference forward, proved tensor by tensor (``run(job)``
  returns the :class:`Proof`).

A variant's rows compare a :class:`Pair` (both forwards on the same cases) with the kernel of
:mod:`dspark_convert.reference.compare`. The driver (:mod:`dspark_convert.verify.rows`) runs every ``PROOF`` through
one path: exact mode, quality mode, the ModelOpt NVFP4 rows and the tensor accounting's inputs, for every variant;
the accounting's drop rules are the variant's ``Variant`` row's.

Example:
    >>> from types import SimpleNamespace as Case
    >>> p = Pair([Case(x=np.ones(3))], [Case(x=np.array([1.0, 1.0, 1.5]))], Inputs([], 0, 0), None)
    >>> p.cases("x", "x").grade, p.cases("x", "x", bound=None).grade
    ('differs', 'poor')
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..hf.checkpoint import read_config
from ..reference.compare import MetadataCheck, OutputCheck, compare_cases, compare_token_cases
from ..reference.ops import CommonHParams
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

    def compared(self, gguf: set[str], checkpoint_names: list[str], checkpoint: set[str]) -> None:
        """The accounting's inputs of a proof that compared tensors and read none for a forward: the GGUF tensors
        and checkpoint tensors (of ``checkpoint_names``, all it holds) the checks compared."""
        self.tensors = Tensors(gguf_compared=gguf, checkpoint_names=checkpoint_names, checkpoint_compared=checkpoint)


@dataclass(frozen=True)
class Inputs:
    """A forward proof's seeded inputs: one feature matrix per case (``[context, width]``), the vocabulary the
    draws come from, the chained steps."""

    feats: list[np.ndarray]
    n_vocab: int
    steps: int

    def anchors(self, rng: np.random.Generator) -> list[int]:
        """A block draft's draw: one random anchor token per case."""
        return [int(a) for a in rng.integers(0, self.n_vocab, size=len(self.feats))]

    def next_tokens(self, rng: np.random.Generator) -> list[np.ndarray]:
        """A chain draft's draw: a random next token at every context position of every case."""
        return [rng.integers(0, self.n_vocab, size=len(f)) for f in self.feats]


#: what :meth:`Pair.both` takes of each case's result: an attribute name, or a function of the result
Selector = str | Callable[[Any], Any]


@dataclass(frozen=True)
class Pair:
    """Both forwards on the same cases, for a variant's rows: ``refs`` (torch, the checkpoint), ``outs`` (numpy, the
    GGUF), the inputs, what the variant drew for them and the report's hyperparameters."""

    refs: list[Any]
    outs: list[Any]
    inputs: Inputs
    drawn: Any
    hparams: dict[str, Any] = field(default_factory=dict)   # what the variant's ``hparams`` read of the GGUF

    def both(self, attr: Selector) -> tuple[list[Any], list[Any]]:
        """``attr`` of every case, on each side (an attribute name, or a function of one case's result)."""
        pick = attr if callable(attr) else operator.attrgetter(attr)
        return [pick(r) for r in self.refs], [pick(x) for x in self.outs]

    def cases(self, name: str, attr: Selector, **kw: Any) -> OutputCheck:
        """:func:`~dspark_convert.reference.compare.compare_cases` of ``attr`` (:meth:`both`; keywords: ``bound``
        (default the exact-mode bound, None: graded), ``argmax``, ``layer``, ``by_energy``)."""
        return compare_cases(name, *self.both(attr), **kw)

    def tokens(self, name: str, logits: Selector) -> OutputCheck:
        """The chosen tokens (``tokens``) position by position, near-ties judged by the ``logits`` they came from
        (:meth:`both`)."""
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


#: (GGUF, target, inputs, drawn, the torch results) -> the numpy forward's result per case
Candidate = Callable[[GGUFWeights, TargetWeights, Inputs, Any, list[Any]], list[Any]]

#: the role of a variant's torch side (``variants/<v>/torch_forward.py``): see the module docstring
TORCH_SIDE = "torch_forward"


def checkpoint_config(hf_dir: Path) -> dict[str, Any]:
    """A checkpoint's ``config.json`` as a torch side's ``claims`` sees it: speculators' ``transformer_layer_config``
    merged over the top level ({} without a config). The file is read as every checkpoint file is
    (:func:`~dspark_convert.hf.checkpoint.read_config`): a member of the folder, bounded, one line naming it when it
    is not a JSON object."""
    raw = read_config(Path(hf_dir), required=False)
    layer = raw.get("transformer_layer_config")
    return {**raw, **layer} if isinstance(layer, dict) else raw


def names_a_class(hf_dir: Path, classes: Collection[str]) -> bool:
    """Whether the checkpoint's own ``config.json`` lists one of ``classes`` in its ``architectures`` (False without
    a config): the GGUF alone does not decide which torch side reads a checkpoint."""
    archs = checkpoint_config(hf_dir).get("architectures")
    return isinstance(archs, list) and any(a in classes for a in archs)


@dataclass(frozen=True)
class Forwards:
    """A variant proved by two forwards (see the module docstring): its torch side by convention, and by keyword
    the draw (``draw(inputs, rng)``, e.g. :meth:`Inputs.anchors`), the numpy forward (``candidate``), the rows, the
    variant's metadata rows (``metadata(g, checkpoint)``, the checkpoint its torch side opened), the hyperparameters
    the report shows and the draws' vocabulary (``n_vocab(g, checkpoint)``).

    ``arch``: the checkpoint is one the shared config reader opens (an ``HFDraft``), for GGUF architecture ``arch``;
    then :meth:`metadata_rows` starts with the ``general.architecture`` row and the common hyperparameter rows, and
    ``n_vocab`` / ``width`` default to the checkpoint's (:meth:`vocabulary`, :meth:`features_width`).
    ``width(g, checkpoint)`` is the features' width (None, without ``arch``: the GGUF's ``fc.weight`` input width);
    ``notes`` go into the report; ``steps``: the inputs and the report carry ``--steps`` (else 0: one block);
    ``needs_target``: the torch side gets the target folder (else None)."""

    draw: Callable[[Inputs, np.random.Generator], Any]
    candidate: Candidate
    hparams: Callable[[GGUFWeights, list[Any], Any], dict[str, Any]]
    rows: Callable[[Pair], list[OutputCheck]]
    quality_rows: Callable[[Pair], list[OutputCheck]]
    metadata: Callable[[GGUFWeights, Any], list[MetadataCheck]]
    n_vocab: Callable[[GGUFWeights, Any], int] | None = None
    width: Callable[[GGUFWeights, Any], int] | None = None
    notes: tuple[str, ...] = ()
    steps: bool = True
    needs_target: bool = True
    arch: str | None = None

    def metadata_rows(self, g: GGUFWeights, ck: Any) -> list[MetadataCheck]:
        """The metadata rows of ``g`` against checkpoint ``ck``: with ``arch``, :func:`hparam_rows` then the
        variant's (none when the architecture row fails); else the variant's alone."""
        if self.arch is None:
            return self.metadata(g, ck)
        return hparam_rows(g, self.arch, ck.hp, lambda: self.metadata(g, ck))

    def vocabulary(self, g: GGUFWeights, ck: Any) -> int:
        """The draws' vocabulary: ``n_vocab(g, ck)``; with ``arch`` and no ``n_vocab``, the checkpoint's
        ``vocab_size`` and the target's embedding rows, the smaller."""
        if self.n_vocab is not None:
            return self.n_vocab(g, ck)
        if self.arch is None:
            raise ConvertError("internal: a Forwards proof without n_vocab or arch")
        return int(min(x for x in (ck.hp.vocab_size, ck.target.shape(ck.target_embed_name())[0]) if x))

    def features_width(self, g: GGUFWeights, ck: Any) -> int:
        """The features' width: ``width(g, ck)``; else with ``arch`` the checkpoint's ``fc.weight`` input width,
        without it the GGUF's."""
        if self.width is not None:
            return self.width(g, ck)
        if self.arch is not None:
            return int(ck.weights.shape("fc.weight")[1])
        return int(g.shape("fc.weight")[1])


def hparam_rows(g: GGUFWeights, arch: str, hp: Any, own: Callable[[], list[MetadataCheck]]) -> list[MetadataCheck]:
    """The ``general.architecture`` row (the driver runs no forward when it fails), every common GGUF
    hyperparameter against the checkpoint's (``hp``: an :class:`~dspark_convert.reference.hf_draft.HFHParams`,
    read the way the numpy forwards read the GGUF), then the variant's ``own`` rows."""
    got = g.value("general.architecture")
    out = [MetadataCheck("general.architecture", got, arch, got == arch)]
    if not out[0].passed:
        return out
    try:
        c = CommonHParams.read(g, arch)
    except ConvertError as e:
        return out + [MetadataCheck(f"{arch}.* (required keys)", str(e), "present", False)]
    a = arch
    scaling = {"linear": "linear", "yarn": "yarn"}.get(hp.rope.type)
    out += [
        MetadataCheck.compare(f"{a}.block_count", c.n_layer, hp.n_layer),
        MetadataCheck.compare(f"{a}.embedding_length", c.n_embd, hp.n_embd),
        MetadataCheck.compare(f"{a}.feed_forward_length", c.n_ff, hp.n_ff),
        MetadataCheck.compare(f"{a}.attention.head_count", c.n_head, hp.n_head),
        MetadataCheck.compare(f"{a}.attention.head_count_kv", c.n_head_kv, hp.n_head_kv),
        MetadataCheck.compare(f"{a}.attention.key_length", c.head_dim, hp.head_dim),
        MetadataCheck.compare(f"{a}.rope.dimension_count", c.n_rot, int(hp.head_dim * hp.rope.partial)),
        MetadataCheck.compare(f"{a}.attention.layer_norm_rms_epsilon", c.eps, hp.eps),
        MetadataCheck.compare(f"{a}.rope.freq_base", c.rope_base, hp.rope.theta),
        MetadataCheck.compare(f"{a}.rope.scaling.type", c.rope_scaling_type, scaling),
    ]
    if scaling or c.rope_scaling_factor is not None:
        out.append(MetadataCheck.compare(f"{a}.rope.scaling.factor", c.rope_scaling_factor, hp.rope.factor if scaling else None))
    return out + own()


@dataclass(frozen=True)
class TensorChecks:
    """A variant without a reference forward: ``run(job)`` compares every tensor with the checkpoint and
    returns the proof (rows, notes and its accounting's ``compared`` sets); it reads any checkpoint folder and
    needs no target."""

    run: Callable[[Job], Proof]
    needs_target: bool = False
