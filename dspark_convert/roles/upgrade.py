"""The ``upgrade`` role's contract: what a variant's ``variants/<v>/upgrade.py`` builds on.

An upgrade module holds ``RULES``, an :class:`UpgradeRules` (a variant without the module has the rules of the
variant it refines, and one that refines none the base rules: none). ``check`` and ``upgrade`` ask it through the
registry (:func:`dspark_convert.staleness.rules_for`):

* the revision timeline: :data:`REVISIONS`, :func:`revision_index` (a rule asks
  :meth:`Upgrading.from_revision_in`);
* :class:`Stale` (one item, with the revision that changed it and what supplies the fix) and :class:`Staleness`
  (what detection found);
* :class:`TargetInfo`: the facts of a target an item may need; :class:`Header` / :class:`PlanHeader`: what
  detection reads;
* :class:`UpgradeRules`: ``detect`` adds the variant's stale items and unchecked facts to a :class:`Detection`;
  ``fix`` and ``complete`` rewrite an :class:`Upgrading` (the file's KVs and :class:`Piece` list being planned;
  the checkpoint given with ``--hf`` is read through it: :meth:`Upgrading.checkpoint_config`,
  :meth:`Upgrading.checkpoint_tensor`).

The revision timeline and what each change means for a file are in docs/upgrade.md (facts:
spec/upstream-b11434.md §1, §2.2, §2.3, §2.8).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import schema as S
from ..errors import ConvertError, clip
from ..findings import JsonRow
from ..gguf_constants import QT
from ..gguffile.reader import GGUFFile, ReaderTensor
from ..plan import KV, Plan, TensorSpec

ADD_BOS, ADD_EOS = S.ADD_TOKEN_KEYS["bos"], S.ADD_TOKEN_KEYS["eos"]  # b11223+ (§2.8)
#: upstream revisions whose converter changed what a draft GGUF holds (spec/upstream-b11434.md §1), oldest first
REVISIONS: tuple[str, ...] = ("749f688", "b10644", "b10662", "b10705", "b10786", "b10878", "b11223", "b11334",
                              "b11401", "b11434")


_FILE_TYPE_QT = {file_type: qt for qt, file_type in S.OUTTYPES.values()}  # general.file_type -> tensor type


def revision_index(rev: str, what: str = "--from-revision") -> float:
    """Position of ``rev`` in the timeline; any ``bNNNN`` tag is placed between the known ones.

    Example:
        >>> revision_index("b10900") == REVISIONS.index("b10878") + 0.5
        True
    """
    if rev in REVISIONS:
        return float(REVISIONS.index(rev))
    if rev.startswith("b") and rev[1:].isascii() and rev[1:].isdigit():  # 'b²' is a digit to str.isdigit
        n = int(rev[1:])
        known = [int(r[1:]) for r in REVISIONS[1:]]
        below = sum(1 for k in known if k < n)
        return below + 0.5
    raise ConvertError(f"{what} {clip(repr(rev))}: expected an upstream tag such as b10900 (or 749f688)")


# ------------------------------------------------------------------------------------------------ findings
@dataclass(frozen=True)
class Stale(JsonRow):
    """One item of an old file that upstream b11434 writes differently.

    ``needs`` says what supplies the fix: ``file`` (the file alone), ``target`` (``--target``), ``checkpoint``
    (``--hf CHECKPOINT``) or ``user`` (``--from-revision`` with ``--rope-interleaved``).
    """

    subject: str
    change: str
    since: str
    needs: str

    def __str__(self) -> str:
        how = {"file": "from the file alone", "target": "given --target", "checkpoint": "given --hf CHECKPOINT",
               "user": "given --from-revision bNNNN --rope-interleaved"}.get(self.needs, f"with {self.needs}")
        return f"{self.subject}: {self.change} (upstream {self.since}+; upgrade fixes it {how})"

    def command(self, path: str | os.PathLike[str], target: str | None = None) -> str:
        """The ``upgrade`` command line that fixes this item (placeholders for what the user supplies; ``target``,
        when known, in place of ``TARGET``)."""
        extra = {"file": "", "target": f" --target {target or 'TARGET'}", "checkpoint": " --hf CHECKPOINT",
                 "user": " --from-revision bNNNN --rope-interleaved"}[self.needs]
        return f"dspark-convert upgrade {path} -o NEW.gguf{extra}"


@dataclass
class Staleness:
    """What :func:`staleness.detect_staleness` found: the revisions whose layout the header matches, the stale
    items, and what could not be decided without the target."""

    revisions: tuple[str, str | None]  # (oldest, newest or None = up to b11434) consistent with the header
    stale: list[Stale]
    unchecked: list[str] = field(default_factory=list)
    #: the header's features contradict each other (no revision wrote them all: another tool, or a hand edit)
    mixed: bool = False

    @property
    def current(self) -> bool:
        return not self.stale

    def describe_revisions(self) -> str:
        lo, hi = self.revisions
        if self.mixed:
            return (f"no single revision (features of {lo} or later next to older ones: another tool, or a hand "
                    "edit)")
        return f"{lo} or later" if hi is None else f"{lo} up to before {hi}"

    def to_dict(self) -> dict[str, Any]:
        return {"revisions": self.describe_revisions(), "current": self.current,
                "stale": [s.to_dict() for s in self.stale], "unchecked": self.unchecked}


@dataclass
class TargetInfo:
    """The facts of a target model an upgrade may need, from a target folder (local, or a Hub repo's config and
    tokenizer files) or a target GGUF (local, ``hf://`` or a URL; header only).

    ``folder`` is the Hugging Face folder (None for a GGUF target); ``gguf`` the target GGUF's decoded scalar KVs
    with ``gguf_arch`` and its tensor infos (``gguf_tensors``); ``gguf_path`` the local file its tensors can be
    copied from (None when remote: header only).
    """

    source: str
    folder: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    gguf_arch: str | None = None
    gguf: dict[str, Any] = field(default_factory=dict)
    gguf_tensors: dict[str, ReaderTensor] = field(default_factory=dict)
    gguf_path: Path | None = None
    #: whether the target ties its head, when known otherwise than from ``config`` / ``gguf_tensors``
    tied: bool | None = None
    _add: dict[str, bool] | None = field(default=None, repr=False)

    @classmethod
    def from_side(cls, side: Any) -> TargetInfo:
        """The header facts of a target already read for ``check DRAFT --target TARGET``
        (a :class:`~dspark_convert.roles.fit.Side`: nothing is read again): its config (a Hugging Face target) or its
        arch, embedding length and M-RoPE sections (a target GGUF), its tokenizer's ``add_bos`` / ``add_eos`` as the
        converter writes them, and whether it ties its head. Enough for :func:`staleness.detect_staleness`; its
        tensors are not reachable (:meth:`tensor` refuses)."""
        add = {typ: v for typ, key in (("bos", ADD_BOS), ("eos", ADD_EOS)) if isinstance(v := side.kvs.get(key), bool)}
        if side.kind == "gguf":
            kvs = {f"{side.arch}.embedding_length": side.hp.get("embedding_length")}
            if side.hp.get("rope_dimension_sections") is not None:
                kvs[S.ROPE_DIMENSION_SECTIONS.format(arch=side.arch)] = side.hp["rope_dimension_sections"]
            return cls(side.source, gguf_arch=side.arch, gguf=kvs, tied=side.tied, _add=add)
        return cls(side.source, config=dict(side.config), tied=side.tied, _add=add)

    @property
    def path(self) -> Path:
        """The folder, or the GGUF path, for messages."""
        return self.folder if self.folder is not None else Path(self.source)

    def uses_mrope(self) -> bool:
        """An M-RoPE target: ``mrope_section`` in its config's RoPE parameters (a GGUF: the
        ``{arch}.rope.dimension_sections`` upstream's converter writes from it)."""
        if self.gguf_arch is not None:
            return S.ROPE_DIMENSION_SECTIONS.format(arch=self.gguf_arch) in self.gguf
        from ..kit.hparams import target_uses_mrope

        return target_uses_mrope(self.config)

    def is_gemma(self) -> bool:
        """A Gemma target: its text architecture starts with ``Gemma`` (a GGUF: its arch with ``gemma``)."""
        if self.gguf_arch is not None:
            return self.gguf_arch.startswith("gemma")
        from ..kit.hparams import target_text_architecture

        return (target_text_architecture(self.config) or "").startswith("Gemma")

    def hidden_size(self) -> Any:
        if self.gguf_arch is not None:
            return self.gguf.get(f"{self.gguf_arch}.embedding_length")
        from ..kit.hparams import target_text_config

        return target_text_config(self.config).get("hidden_size")

    def ties_embeddings(self) -> bool:
        """The target's head is its embedding (a GGUF: it has no ``output.weight``)."""
        if self.tied is not None:
            return self.tied
        if self.gguf_arch is not None:
            return S.T_OUTPUT not in self.gguf_tensors
        from ..kit.hparams import target_ties_embeddings

        return target_ties_embeddings(self.config)

    def add_tokens(self) -> dict[str, bool]:
        """``add_bos`` / ``add_eos`` of the target's tokenizer as upstream b11434 writes them (§2.8): a folder's
        through :class:`~dspark_convert.tokenizer.special.SpecialVocab` (the post-processor rule), a GGUF's as
        its ``tokenizer.ggml.add_*_token`` keys say (a target GGUF made before b11223 carries the older rule)."""
        if self._add is None:
            if self.gguf_arch is not None:
                self._add = {typ: v for typ, key in (("bos", ADD_BOS), ("eos", ADD_EOS))
                             if isinstance(v := self.gguf.get(key), bool)}
            else:
                assert self.folder is not None
                from ..tokenizer.special import SpecialVocab

                flags = SpecialVocab(self.folder).add_flags
                self._add = {typ: flags[typ] for typ in ("bos", "eos") if typ in flags}
        return self._add

    def tensor(self, gguf_name: str, hf_names: tuple[str, ...], qt: QT, shape: tuple[int, ...],
               what: str) -> Callable[[], bytes]:
        """A byte producer of the target's ``gguf_name`` (a GGUF target: its bytes as stored, which must have type
        ``qt`` and ``shape``) or of the first of ``hf_names`` in its safetensors (converted to ``qt``)."""
        if self.gguf_arch is None:
            if self.folder is None:
                raise ConvertError(f"--target {self.source}: only its header facts were read; {what} needs its "
                                   "tensors: pass the target to 'dspark-convert upgrade --target'")
            folder = self.folder
            if not any(folder.glob("*.safetensors")):
                from ..hf.hub import resolve_target

                folder = resolve_target(self.source, tensors=hf_names).path
            got_shape, data = checkpoint_tensor(folder, hf_names, qt, what)
            if tuple(got_shape) != tuple(shape):
                raise ConvertError(f"--target {self.source}: {hf_names[0]} has shape {list(got_shape)}, {what} needs "
                                   f"{list(shape)}; is it the draft's target?")
            return data
        t = self.gguf_tensors.get(gguf_name)
        if t is None:
            raise ConvertError(f"--target {self.source}: no tensor '{gguf_name}'; {what} cannot be taken from it")
        if t.qtype != qt or tuple(t.shape) != tuple(shape):
            raise ConvertError(f"--target {self.source}: tensor '{gguf_name}' is {t.type_name} {list(t.shape)}, {what} "
                               f"needs {qt.name} {list(shape)} (the draft's type); give the target folder instead")
        if self.gguf_path is None:
            raise ConvertError(f"--target {self.source}: a remote GGUF's tensor data is not fetched; {what} needs "
                               f"its '{gguf_name}': download the file, or give the target folder or Hub id")
        path, offset, n = self.gguf_path, t.offset, int(t.nbytes or 0)

        def stored() -> bytes:
            with open(path, "rb") as fh:
                b = os.pread(fh.fileno(), n, offset)
            if len(b) != n:
                raise ConvertError(f"--target {path}: tensor '{gguf_name}' ends past the end of the file")
            return b

        return stored


# ------------------------------------------------------------------------------------------------ headers
class Header(Protocol):
    """What staleness detection reads: a :class:`GGUFFile` or :class:`PlanHeader` (a plan read from any source)."""

    @property
    def arch(self) -> str | None: ...
    @property
    def kvs(self) -> Mapping[str, Any]: ...
    @property
    def tensors(self) -> Sequence[Any]: ...
    def value(self, key: str, default: Any = None) -> Any: ...


@dataclass
class PlanHeader:
    """A :class:`~dspark_convert.plan.Plan` (e.g. a remote file's header, read for ``check``) as a :class:`Header`."""

    plan: Plan

    @property
    def arch(self) -> str | None:
        return self.plan.arch

    @property
    def kvs(self) -> Mapping[str, Any]:
        return {k.name: k for k in self.plan.kvs}

    @property
    def tensors(self) -> Sequence[Any]:
        return self.plan.tensors

    def value(self, key: str, default: Any = None) -> Any:
        return self.plan.value(key, default)


def has_tensor(f: Header, name: str) -> bool:
    """Whether the file has a tensor of that name."""
    return any(t.name == name for t in f.tensors)


def checkpoint_config(hf: Path) -> dict[str, Any]:
    """The ``config.json`` of checkpoint folder ``hf`` (``--hf``), read as every checkpoint file is
    (:func:`~dspark_convert.hf.checkpoint.read_config`); one line naming it when it is missing, unreadable or not
    a JSON object."""
    from ..hf.checkpoint import read_config

    return read_config(hf)


def checkpoint_tensor(hf: Path, names: tuple[str, ...], qt: QT, what: str) -> tuple[tuple[int, ...], Callable[[], bytes]]:
    """Shape and a byte producer of the first of ``names`` in checkpoint ``hf``, converted to ``qt``."""
    from ..formats.transforms import convert_chunk
    from ..hf.checkpoint import Checkpoint

    ck = Checkpoint(hf, select=set(names).__contains__)
    src = next((n for n in names if n in ck), None)
    if src is None:
        raise ConvertError(f"{hf}: no tensor {' / '.join(names)}; {what} cannot be taken from it")
    ref = ck.ref(src)

    def data() -> bytes:
        import numpy as np

        arr = np.asarray(ck.read(src))
        return np.ascontiguousarray(convert_chunk(arr, ref.dtype, qt)).tobytes()

    return tuple(ref.shape), data


# ------------------------------------------------------------------------------------------------ the rules' interface
@dataclass
class Detection:
    """What :func:`staleness.detect_staleness` has found so far in ``f`` (with ``target``, when given): the stale
    items, the facts it could not decide, and the revisions still consistent with the header (narrowed by
    :meth:`seen`)."""

    f: Header
    target: TargetInfo | None = None
    stale: list[Stale] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    lo: int = 0
    hi: int = len(REVISIONS)  # [lo, hi): revisions consistent with the header

    def has_tensor(self, name: str) -> bool:
        """Whether the file has a tensor of that name."""
        return has_tensor(self.f, name)

    def seen(self, present: bool, since: str) -> None:
        """The header has (``present``) or lacks what upstream ``since`` introduced: the file is at least, or
        older than, that revision."""
        i = REVISIONS.index(since)
        if present:
            self.lo = max(self.lo, i)
        else:
            self.hi = min(self.hi, i)

    def result(self) -> Staleness:
        """The :class:`Staleness` found; contradictory features (a hand-edited file, or a fork) name the newest
        revision seen."""
        hi = self.hi if self.lo < self.hi else len(REVISIONS)
        return Staleness((REVISIONS[self.lo], REVISIONS[hi] if hi < len(REVISIONS) else None), self.stale,
                         self.unchecked, mixed=self.lo >= self.hi)


@dataclass
class Piece:
    """One tensor of the upgraded file: its header entry and where its bytes come from.

    ``copy`` is the old file's tensor copied as is; ``rows`` a permutation of its rows (``perm``); ``data`` new
    bytes (a tensor read from the checkpoint or target and converted).
    """

    spec: TensorSpec
    copy: ReaderTensor | None = None
    perm: Any = None  # numpy row index array for a row-permuted copy
    data: Callable[[], bytes] | None = None


@dataclass
class Upgrading:
    """An upgrade being planned: the old file, what the user gave (``--target``, ``--hf``, the options), and the
    new file's KVs (in order) and pieces, the changes made and the notes, which the rules' hooks edit in place."""

    f: GGUFFile
    kvs: list[KV]
    pieces: list[Piece]
    target: TargetInfo | None = None
    hf: Path | None = None
    match_upstream: bool = False
    from_revision: str | None = None
    rope_interleaved: bool = False
    no_embed_tokens: bool = False
    embed_tokens_from_target: bool = False
    changes: list[Stale] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        """The old file's path, for messages."""
        return str(self.f.path)

    @property
    def file_qt(self) -> QT | None:
        """The tensor type the file's ``general.file_type`` names (None when it names none)."""
        return _FILE_TYPE_QT.get(self.f.value(S.GENERAL_FILE_TYPE, -1))

    def insert_kv(self, kv: KV, after: tuple[str, ...]) -> None:
        """Put ``kv`` after the last of ``after`` present (else at the end); replace it in place if present."""
        insert_after(self.kvs, kv, after)

    def add_tensor(self, pos: int, spec: TensorSpec, data: Callable[[], bytes]) -> None:
        """Insert a new tensor at ``pos`` of :attr:`pieces`: its header entry ``spec``, its bytes from ``data``."""
        self.pieces.insert(pos, Piece(spec, data=data))

    def has_tensor(self, name: str) -> bool:
        """Whether the old file has a tensor of that name."""
        return has_tensor(self.f, name)

    def from_revision_in(self, first: str, end: str) -> bool | None:
        """Whether the user's ``--from-revision`` lies in the revisions from ``first`` up to before ``end`` (two
        tags of :data:`REVISIONS`); None without ``--from-revision``."""
        if self.from_revision is None:
            return None
        return REVISIONS.index(first) <= revision_index(self.from_revision) < REVISIONS.index(end)

    def checkpoint_config(self) -> dict[str, Any]:
        """The ``config.json`` of the ``--hf`` checkpoint (:func:`checkpoint_config`)."""
        if self.hf is None:
            raise ConvertError("internal: the checkpoint's config.json read without --hf")
        return checkpoint_config(self.hf)

    def checkpoint_tensor(self, names: tuple[str, ...], qt: QT, what: str) -> tuple[tuple[int, ...], Callable[[], bytes]]:
        """Shape and a byte producer of the first of ``names`` in the ``--hf`` checkpoint, converted to ``qt``
        (:func:`checkpoint_tensor`)."""
        if self.hf is None:
            raise ConvertError(f"internal: {what} read from the checkpoint without --hf")
        return checkpoint_tensor(self.hf, names, qt, what)


def insert_after(kvs: list[KV], kv: KV, after: tuple[str, ...]) -> None:
    """Put ``kv`` after the last of ``after`` present (else at the end); replace it in place if present."""
    names = [k.name for k in kvs]
    if kv.name in names:
        kvs[names.index(kv.name)] = kv
        return
    pos = max((names.index(a) + 1 for a in after if a in names), default=len(kvs))
    kvs.insert(pos, kv)


class UpgradeRules:
    """A variant's upgrade rules: its ``upgrade`` role's ``RULES`` (``variants/<variant>/upgrade.py``).

    This base has none (a variant whose files upstream's converter has not changed: only the items of every file
    apply, which the driver handles). A subclass overrides the hooks, each called once per file of its variant:

    * :meth:`detect` (``check`` and ``upgrade``): add the variant's stale items and unchecked facts, from the header
      (and the target) alone;
    * :meth:`fix` (``upgrade``): rewrite the planned file for one stale item :meth:`detect` found;
    * :meth:`complete` (``upgrade``): what only ``--hf`` or the user's word decides, after the file's own items;
    * :meth:`refuses_checkpoint` (``upgrade --hf``): a checkpoint of the variant's families that is not the file's.
    """

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The keys a checkpoint's ``config.json`` decides (invisible in the file), in the order the converter
        writes them (none here)."""
        return ()

    def detect(self, d: Detection) -> None:
        """Add this variant's stale items and unchecked facts of ``d.f`` to ``d`` (none here)."""

    def fix(self, s: Stale, u: Upgrading) -> bool:
        """Apply the fix of ``s`` (an item of this variant's :meth:`detect`) to ``u``; False when nothing is to be
        changed after all (``s`` is then not listed as a change)."""
        raise ConvertError(f"internal: {s.subject}: no upgrade rule fixes it")

    def complete(self, u: Upgrading) -> None:
        """Rewrite ``u`` for what the checkpoint (``u.hf``) or the user's word decides (nothing here)."""

    def refuses_checkpoint(self, f: Header, family: str) -> str | None:
        """Why a ``--hf`` checkpoint of draft family ``family`` (of this variant) cannot be ``f``'s, or None (the
        base accepts any family of the variant)."""
        return None
