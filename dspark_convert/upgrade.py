"""``dspark-convert upgrade``: bring a draft GGUF made by an older converter up to upstream llama.cpp b11434's
layout without reconverting, and the staleness detector ``check FILE`` shares.

Three steps, each a documented function:

* :func:`detect_staleness` reads a GGUF header (plus, optionally, the target's config and tokenizer) and says
  which upstream revisions' layout the file matches and which items are stale (:class:`Stale`), each with the
  revision that changed it and what supplies the fix (the file itself, ``--target``, the checkpoint, or the
  user's word);
* :func:`plan_upgrade` turns that into the new header and the list of tensors, each copied byte for byte from
  the old file, permuted by rows (the double NeoX permutation of upstream b10662-b11104), or read from the
  checkpoint / target. What cannot be recovered is refused with one line naming the missing fact and the
  option that supplies it; nothing is written then;
* :func:`write_upgrade` writes the header and copies the data ranges with ``os.copy_file_range`` (kernel copy,
  no user-space buffer), atomically through :func:`dspark_convert.hf2gguf.writer.write_atomically`.

The revision timeline and what each change means for a file are in docs/upgrade.md (facts:
spec/upstream-b11434.md §1, §2.2, §2.3, §2.8).

Example:
    >>> result = upgrade("old.gguf", "new.gguf", target="Qwen3-8B/")  # doctest: +SKIP
    >>> [s.subject for s in result.changes]  # doctest: +SKIP
    ['dflash.has_confidence_head']
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from . import schema as S
from .errors import ConvertError
from .gguf_constants import QT, VT
from .gguffile.options import RemoteOptions
from .gguffile.reader import GGUFFile, ReaderTensor
from .plan import KV, Plan, TensorSpec

#: upstream revisions whose converter changed what a draft GGUF holds (spec/upstream-b11434.md §1), oldest first
REVISIONS: tuple[str, ...] = ("749f688", "b10644", "b10662", "b10705", "b10786", "b10878", "b11223", "b11334",
                              "b11401", "b11434")
#: the revisions whose DSpark converter permuted interleaved-RoPE q/k rows twice (§2.3): b10662 up to b11223
DOUBLE_NEOX = ("b10662", "b11223")  # [first affected, first fixed)

HAS_CONFIDENCE_HEAD = S.DFLASH_HAS_CONFIDENCE_HEAD  # b10705+ (§2.3)
DIMENSION_SECTIONS = S.ROPE_DIMENSION_SECTIONS.format(arch=S.ARCH_DFLASH)  # b10662+ for M-RoPE targets (§2.2)
EMBEDDING_SCALE = S.EMBEDDING_SCALE.format(arch=S.ARCH_DFLASH)  # b11401+ for Gemma targets (§2.2)
ADD_BOS, ADD_EOS = S.ADD_TOKEN_KEYS["bos"], S.ADD_TOKEN_KEYS["eos"]  # b11223+ (§2.8)
_SPECIAL_IDS = ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id")
_FILE_TYPE_QT = {file_type: qt for qt, file_type in S.OUTTYPES.values()}  # general.file_type -> tensor type
#: the dflash keys a checkpoint's config.json decides (upstream b10705+: SWA from dflash_config.use_swa, causal;
#: b11223+: use_swa without layer_types; b11334+: partial_rotary_factor, attention_value_scale, spec §2.2)
CONFIG_KEYS = (S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_DFLASH), S.ATTN_VALUE_SCALE.format(arch=S.ARCH_DFLASH),
               S.DFLASH_SLIDING_WINDOW, S.DFLASH_SLIDING_WINDOW_PATTERN, S.CAUSAL.format(arch=S.ARCH_DFLASH))
_ROPE_TENSORS = (".attn_q.weight", ".attn_k.weight", ".attn_q_norm.weight", ".attn_k_norm.weight")


def revision_index(rev: str, what: str = "--from-revision") -> float:
    """Position of ``rev`` in the timeline; any ``bNNNN`` tag is placed between the known ones.

    Example:
        >>> revision_index("b10900") == REVISIONS.index("b10878") + 0.5
        True
    """
    if rev in REVISIONS:
        return float(REVISIONS.index(rev))
    if rev.startswith("b") and rev[1:].isdigit():
        n = int(rev[1:])
        known = [int(r[1:]) for r in REVISIONS[1:]]
        below = sum(1 for k in known if k < n)
        return below + 0.5
    raise ConvertError(f"{what} {rev!r}: expected an upstream tag such as b10900 (or 749f688)")


# ------------------------------------------------------------------------------------------------ findings
@dataclass(frozen=True)
class Stale:
    """One item of an old file that upstream b11434 writes differently.

    ``needs`` says what supplies the fix: ``file`` (the file alone), ``target`` (``--target``), ``checkpoint``
    (``--hf CHECKPOINT``) or ``user`` (``--from-revision`` with ``--rope-interleaved``).
    """

    subject: str
    change: str
    since: str
    needs: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.subject}: {self.change} (upstream {self.since}+; fixed by upgrade with {self.needs})"

    def command(self, path: str | os.PathLike[str], target: str | None = None) -> str:
        """The ``upgrade`` command line that fixes this item (placeholders for what the user supplies; ``target``,
        when known, in place of ``TARGET``)."""
        extra = {"file": "", "target": f" --target {target or 'TARGET'}", "checkpoint": " --hf CHECKPOINT",
                 "user": " --from-revision bNNNN --rope-interleaved"}[self.needs]
        return f"dspark-convert upgrade {path} -o NEW.gguf{extra}"


@dataclass
class Staleness:
    """What :func:`detect_staleness` found: the revisions whose layout the header matches, the stale items, and
    what could not be decided without the target."""

    revisions: tuple[str, str | None]  # (oldest, newest or None = up to b11434) consistent with the header
    stale: list[Stale]
    unchecked: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return not self.stale

    def describe_revisions(self) -> str:
        lo, hi = self.revisions
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
        (a :class:`~dspark_convert.fit.Side`: nothing is read again): its config (a Hugging Face target) or its
        arch, embedding length and M-RoPE sections (a target GGUF), its tokenizer's ``add_bos`` / ``add_eos`` as the
        converter writes them, and whether it ties its head. Enough for :func:`detect_staleness`; its tensors are
        not reachable (:meth:`tensor` refuses)."""
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
        from .variants.kit.hparams import target_uses_mrope

        return target_uses_mrope(self.config)

    def is_gemma(self) -> bool:
        """A Gemma target: its text architecture starts with ``Gemma`` (a GGUF: its arch with ``gemma``)."""
        if self.gguf_arch is not None:
            return self.gguf_arch.startswith("gemma")
        from .variants.kit.hparams import target_text_architecture

        return (target_text_architecture(self.config) or "").startswith("Gemma")

    def hidden_size(self) -> Any:
        if self.gguf_arch is not None:
            return self.gguf.get(f"{self.gguf_arch}.embedding_length")
        from .variants.kit.hparams import target_text_config

        return target_text_config(self.config).get("hidden_size")

    def ties_embeddings(self) -> bool:
        """The target's head is its embedding (a GGUF: it has no ``output.weight``)."""
        if self.tied is not None:
            return self.tied
        if self.gguf_arch is not None:
            return S.T_OUTPUT not in self.gguf_tensors
        from .variants.kit.hparams import target_ties_embeddings

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
                from .tokenizer.special import SpecialVocab

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
                from .hf.hub import resolve_target

                folder = resolve_target(self.source, tensors=hf_names).path
            got_shape, data = _checkpoint_tensor(folder, hf_names, qt, what)
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


#: what a target GGUF's header must give an upgrade (scalars only: the vocabulary is not decoded)
def _target_gguf_keys(arch: str) -> tuple[str, ...]:
    return (S.ROPE_DIMENSION_SECTIONS.format(arch=arch), f"{arch}.embedding_length", ADD_BOS, ADD_EOS)


def load_target(ref: str | os.PathLike[str], remote: RemoteOptions | None = None) -> TargetInfo:
    """TARGET as the user gave it, header only: an existing file, an ``hf://`` reference or a URL is a target GGUF
    (its header: KVs and tensor infos); a folder (``config.json``) or an ``org/name[@rev]`` Hub id is a Hugging Face
    target (a repo's config and tokenizer files are fetched, no weights)."""
    from .gguffile.refs import is_remote_ref
    from .hf.hub import is_repo_id

    text = str(ref)
    p = Path(text).expanduser()
    if p.is_file() or (not p.is_dir() and is_remote_ref(text)):
        from .gguffile.source import open_gguf_source

        with open_gguf_source(text, remote) as g:
            arch = g.arch or ""
            if arch in (S.ARCH_DFLASH, S.ARCH_EAGLE3):
                raise ConvertError(f"--target {text}: is a draft GGUF (general.architecture '{arch}'), not a target "
                                   "model; pass the target model the draft was made for")
            kvs = {k: g.value(k) for k in _target_gguf_keys(arch) if k in g.kvs}
            tensors = {t.name: t for t in g.tensors if t.name in (S.T_TOKEN_EMBD, S.T_OUTPUT)}
            local = None if g.header_only else Path(g.path)
        return TargetInfo(text, gguf_arch=arch, gguf=kvs, gguf_tensors=tensors, gguf_path=local)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ConvertError(f"--target {text}: no config.json in the folder; expected a target model folder, a "
                               "target GGUF or a Hub repo id")
        folder = p
    elif text.lower().endswith(".gguf"):
        raise ConvertError(f"--target {text}: no such file (expected a target GGUF, a target model folder or a Hub "
                           "repo id)")
    elif is_repo_id(text):
        from .hf.hub import resolve_target

        folder = resolve_target(text).path
    else:
        raise ConvertError(f"--target {text}: no such folder or file, and not a Hub repo id (org/name[@rev])")
    from .hf.checkpoint import load_json

    return TargetInfo(text, folder=folder, config=load_json(folder / "config.json"))


# ------------------------------------------------------------------------------------------------ detection
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


PREC_A4 = "general.tensor_extra.prec_a4"  # b11223+: NVFP4 tensors of a W4A16 checkpoint (spec §2.4)


def _nvfp4_unmarked(f: Header) -> bool:
    """NVFP4 tensors and no ``general.tensor_extra.prec_a4``: right for a W4A4 checkpoint, stale for a W4A16 one."""
    return PREC_A4 not in f.kvs and any(getattr(t, "type_name", None) == "NVFP4" or
                                        getattr(getattr(t, "ggml_type", None), "name", None) == "NVFP4"
                                        for t in f.tensors)


def _refuse_w4a16(f: GGUFFile, hf: Path) -> None:
    """A W4A16 NVFP4 checkpoint (``quant_algo`` in config.json or hf_quant_config.json) behind a file without
    ``prec_a4``: refused (upgrade does not rebuild the per-tensor quantization facts)."""
    texts = [json.dumps(_hf_config(hf).get("quantization_config", {}))]
    if (hf / "hf_quant_config.json").is_file():
        texts.append((hf / "hf_quant_config.json").read_text(encoding="utf-8", errors="replace"))
    if any("W4A16" in t for t in texts):
        raise ConvertError(f"{f.path}: {PREC_A4}: --hf {hf} quantizes W4A16_NVFP4, and upstream b11223+ marks those "
                           "tensors prec_a4 = false (else llama.cpp runs them W4A4 on Blackwell); upgrade does not "
                           "rebuild that list: reconvert with 'dspark-convert hf2gguf'")


SINKS = "blk.*.attn_sinks.weight"  # b10705+: '.weight' added to any tensor named '*sink*' (spec §2.2)


def _unsuffixed_sinks(f: Header) -> list[str]:
    """Attention-sink tensors as converters before upstream b10705 named them: gguf-py's name map gives
    ``blk.N.attn_sinks`` for ``self_attn.sinks`` / ``attention_sink_bias`` (no suffix to keep), a name llama.cpp
    b11434's DFlash loader does not know; b10705+ appends ``.weight``."""
    return [t.name for t in f.tensors if "sink" in t.name and not t.name.endswith((".weight", ".bias"))]


def _variant_name(f: Header) -> str | None:
    """The registry's variant of the file (``dflash``, ``dflash2``, ``gemma4``, ``dsv4``, ``eagle3``), or None."""
    from .variants import gguf_variant

    v = gguf_variant(lambda k: f.value(k), (t.name for t in f.tensors))
    return v.name if v is not None else None


def _own_keys(f: Header) -> bool:
    """A file of a variant whose converter writes its own ``dflash.*`` keys from its own config schema (Gemma4
    DSpark, upstream b11223+, the class arriving with its keys; DeepSeek-V4 DSpark, not a DFlashModel upstream):
    the generic DFlash config rules do not apply."""
    return _variant_name(f) in ("gemma4", "dsv4")


def _is_dspark(f: Header) -> bool:
    """A file of upstream's DSpark class (it alone writes ``dflash.sample_from_anchor``)."""
    return f.arch == S.ARCH_DFLASH and S.DFLASH_SAMPLE_FROM_ANCHOR in f.kvs


def _has(f: Header, name: str) -> bool:
    return any(t.name == name for t in f.tensors)


def detect_staleness(f: Header, target: TargetInfo | None = None) -> Staleness:
    """Which upstream revisions' layout ``f``'s header has, and what is stale against b11434.

    Rules (spec/upstream-b11434.md): a DSpark file (``dflash.sample_from_anchor``) without
    ``dflash.has_confidence_head`` predates b10705, and so does a full-vocabulary one (no ``d2t``) without
    ``token_embd.weight`` (b10705 keeps the draft's ``embed_tokens``); with ``target``: an M-RoPE target needs
    ``dflash.rope.dimension_sections`` (b10662), a Gemma target ``dflash.embedding_scale`` (b11401), and the
    tokenizer's ``add_bos`` / ``add_eos`` follow the post-processor (b11223).
    """
    stale: list[Stale] = []
    lo, hi = 0, len(REVISIONS)  # [lo, hi): revisions consistent with the header

    def seen(present: bool, since: str) -> None:
        nonlocal lo, hi
        i = REVISIONS.index(since)
        if present:
            lo = max(lo, i)
        else:
            hi = min(hi, i)

    unchecked: list[str] = []
    if _is_dspark(f):
        has_conf_tensor = _has(f, S.T_CONF_W)
        present = HAS_CONFIDENCE_HEAD in f.kvs
        seen(present, "b10705")
        if not present:
            stale.append(Stale(HAS_CONFIDENCE_HEAD, f"missing; b10705+ writes it ({str(has_conf_tensor).lower()}: "
                               f"{'a' if has_conf_tensor else 'no'} confidence head in the file)", "b10705", "file"))
        if not _has(f, S.T_D2T):
            kept = _has(f, S.T_TOKEN_EMBD)
            if kept:
                seen(True, "b10705")
            elif not present:  # older than b10705 (no has_confidence_head): its embed_tokens may have been dropped
                stale.append(Stale(S.T_TOKEN_EMBD, "missing if the checkpoint stores embed_tokens; b10705+ keeps a "
                                   "full-vocabulary DSpark draft's own embed_tokens, older converters dropped it",
                                   "b10705", "checkpoint"))
    if f.arch == S.ARCH_DFLASH and (bare := _unsuffixed_sinks(f)):
        seen(False, "b10705")
        stale.append(Stale(SINKS, f"{', '.join(bare[:2])}{' ...' if len(bare) > 2 else ''} without '.weight'; b10705+ "
                           "names attention sinks blk.N.attn_sinks.weight (the name llama.cpp loads)", "b10705", "file"))
    if _nvfp4_unmarked(f):
        unchecked.append(f"{PREC_A4} (NVFP4 tensors: whether they are W4A16 is in the checkpoint's quant_algo; --hf)")
    if f.arch == S.ARCH_DFLASH and not _own_keys(f):
        unchecked.append("config keys " + ", ".join(k.removeprefix("dflash.") for k in CONFIG_KEYS) + " (--hf)")
    if f.arch == S.ARCH_DFLASH and not _is_dspark(f) and not _own_keys(f):
        if not _has(f, S.T_TOKEN_EMBD):
            unchecked.append(f"{S.T_TOKEN_EMBD} + {S.T_OUTPUT} of a MiMo draft (b11334+: built from the checkpoint's "
                             "mask_embedding.pt; --hf)")
        unchecked.append("q/k row order of an interleaved-RoPE draft (rope_is_neox_style: false; --hf)")
    if f.arch == S.ARCH_DFLASH:
        if target is None:
            unchecked += [DIMENSION_SECTIONS + " (M-RoPE target?)", EMBEDDING_SCALE + " (Gemma target?)"]
        else:
            head_dim = f.value("dflash.attention.key_length")
            if target.uses_mrope():
                present = DIMENSION_SECTIONS in f.kvs
                seen(present, "b10662")
                want = [int(head_dim) // 2, 0, 0, 0] if isinstance(head_dim, int) else None
                if not present or (want is not None and list(f.value(DIMENSION_SECTIONS)) != want):
                    stale.append(Stale(DIMENSION_SECTIONS, f"{'missing' if not present else 'differs'}; b10662+ writes "
                                       f"{want} for an M-RoPE target", "b10662", "target"))
            if target.is_gemma() and EMBEDDING_SCALE not in f.kvs:
                seen(False, "b11401")
                stale.append(Stale(EMBEDDING_SCALE, "missing; b11401+ writes sqrt(target hidden_size) for a Gemma "
                                   "target", "b11401", "target"))
    if "tokenizer.ggml.model" in f.kvs:
        if target is None:
            unchecked.append("tokenizer add_bos/add_eos (post-processor rule)")
        else:
            for typ, value in target.add_tokens().items():
                key = ADD_BOS if typ == "bos" else ADD_EOS
                if f.value(key) != value:
                    seen(False, "b11223")
                    stale.append(Stale(key, f"{'missing' if key not in f.kvs else repr(f.value(key))}; b11223+ writes "
                                       f"{value} (the target tokenizer's post-processor rule)", "b11223", "target"))
    if lo >= hi:  # contradictory features (a hand-edited file, or a fork): name the newest seen
        hi = len(REVISIONS)
    return Staleness((REVISIONS[lo], REVISIONS[hi] if hi < len(REVISIONS) else None), stale, unchecked)


def staleness_findings(path: str | os.PathLike[str], f: Header | None = None,
                       target: TargetInfo | None = None) -> list[Any]:
    """The ``stale-layout`` findings of ``check FILE`` and of ``check FILE --target TARGET`` (one function for
    both): one ``warning`` per item :func:`detect_staleness` finds (the same items ``upgrade --dry-run`` lists with
    the same target), naming what is stale, the upstream revision that changed it and the ``upgrade`` command that
    fixes it. With ``target`` the items that need it (M-RoPE sections, a Gemma target's embedding scale, the
    tokenizer flags) are decided too, and the command names it. Empty for a current file. ``f`` is the file's
    header when the caller has read it (any source), else ``path`` is read."""
    from .check import Finding

    if f is None:
        from .gguffile.source import open_gguf_source

        with open_gguf_source(path) as g:
            st = detect_staleness(g, target)
    else:
        st = detect_staleness(f, target)
    ref = target.source if target is not None else None
    return [Finding("warning", s.subject, "stale-layout", f"{s.change} (upstream {s.since}+, file made by "
                    f"{st.describe_revisions()}); fix: '{s.command(path, ref)}', or reconvert with hf2gguf")
            for s in st.stale]


# ------------------------------------------------------------------------------------------------ planning
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
class UpgradePlan:
    """The upgraded file: arch, KVs in order (``general.architecture`` first), tensors, and what changed."""

    arch: str
    kvs: list[KV]
    pieces: list[Piece]
    changes: list[Stale]
    staleness: Staleness
    notes: list[str] = field(default_factory=list)
    #: the KVs as read from the old file (by name): one still in ``kvs`` is written as its stored record
    kept: dict[str, KV] = field(default_factory=dict)

    def total_bytes(self) -> int:
        return sum(p.spec.nbytes for p in self.pieces)


def _kv_of(f: GGUFFile, name: str) -> KV:
    from .gguffile.reader import _plan_value

    r = f.kvs[name]
    return KV(r.name, r.type, _plan_value(f, r), r.sub_type)


def _insert_after(kvs: list[KV], kv: KV, after: tuple[str, ...]) -> None:
    """Put ``kv`` after the last of ``after`` present (else at the end); replace it in place if present."""
    names = [k.name for k in kvs]
    if kv.name in names:
        kvs[names.index(kv.name)] = kv
        return
    pos = max((names.index(a) + 1 for a in after if a in names), default=len(kvs))
    kvs.insert(pos, kv)


def _neox_inverse_rows(n_rows: int, head_dim: int) -> Any:
    """Row order that undoes one NeoX permutation (``reshape(-1, hd/2, 2).transpose(1, 2)``) of ``n_rows`` rows."""
    import numpy as np

    idx = np.arange(n_rows).reshape(-1, head_dim // 2, 2).transpose(0, 2, 1).reshape(-1)  # new[i] = old[idx[i]]
    inv = np.empty_like(idx)
    inv[idx] = np.arange(n_rows)
    return inv


def _checkpoint_tensor(hf: Path, names: tuple[str, ...], qt: QT, what: str) -> tuple[tuple[int, ...], Callable[[], bytes]]:
    """Shape and a byte producer of the first of ``names`` in checkpoint ``hf``, converted to ``qt``."""
    from .hf.checkpoint import Checkpoint
    from .transforms import convert_chunk

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


def _config_keys(f: GGUFFile, kvs: list[KV], changes: list[Stale], hf: Path, target: TargetInfo | None) -> None:
    """The :data:`CONFIG_KEYS` a DFlash / DFlash2 / DSpark draft's config gives today (``variants.kit.common.base_kvs`` and
    ``variants.kit.dflash_base.dflash_kvs``, the keys ``hf2gguf`` writes; a key written twice keeps its first place),
    set where the file lacks them or holds another value, in that order: after the nearest key of that list the
    file has (else before the nearest following one)."""
    from typing import cast

    from .variants.kit.base import Context, ConvertOptions
    from .variants.kit.common import base_kvs
    from .variants.kit.dflash_base import dflash_config, dflash_kvs
    from .variants.kit.hparams import normalize_hparams

    where = str(hf / "config.json")
    if _is_dspark(f):  # upstream's DSparkModel extends DFlashModel: the same keys, from its normalized schema
        from .variants import variant_of_family

        hp, _ = variant_of_family("dspark").role("dspark").normalize_schema(_hf_config(hf), where)
    else:
        hp = normalize_hparams(_hf_config(hf), where)
    taps = f.value(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, list):
        raise ConvertError(f"{f.path}: no {S.DFLASH_TARGET_LAYERS}; not a DFlash draft upgrade can complete")
    from types import SimpleNamespace

    ctx = Context(draft=cast(Any, SimpleNamespace(path=hf)), target_dir=target.path if target else hf,
                  target_config=target.config if target is not None else {}, options=ConvertOptions())
    ft = f.value(S.GENERAL_FILE_TYPE, 0)
    written = base_kvs(S.ARCH_DFLASH, hp, ft if isinstance(ft, int) else 0, where)
    written += dflash_kvs(ctx, hp, dflash_config(hp, where), list(taps))
    last = {kv.name: kv for kv in written}  # a key written twice keeps its first place, with the second value
    order = list(dict.fromkeys(kv.name for kv in written))
    want = [last[n] for n in order]
    for i, kv in enumerate(want):
        if kv.name not in CONFIG_KEYS:
            continue
        old = f.kvs.get(kv.name)
        if old is not None and old.type == kv.type and f.value(kv.name) == kv.value:
            continue
        names = [k.name for k in kvs]
        if kv.name in names:
            kvs[names.index(kv.name)] = kv
        else:
            before = [n for n in order[:i] if n in names]
            after = [n for n in order[i + 1:] if n in names]
            pos = names.index(before[-1]) + 1 if before else names.index(after[0]) if after else len(kvs)
            kvs.insert(pos, kv)
        changes.append(Stale(kv.name, f"{'missing' if old is None else repr(f.value(kv.name))}; hf2gguf (upstream "
                             f"b11434) writes {kv.value!r} from --hf {hf}'s config", "b10705", "checkpoint"))


def _n_vocab(f: GGUFFile) -> int:
    """The draft's vocabulary size: its tokenizer's token count (hf2gguf pads it to the config's vocab_size)."""
    kv = f.kvs.get("tokenizer.ggml.tokens")
    if kv is None or kv.count is None:
        raise ConvertError(f"{f.path}: no tokenizer.ggml.tokens; cannot tell the vocabulary size token_embd.weight needs")
    return int(kv.count)


def _hf_config(hf: Path) -> dict[str, Any]:
    try:
        v = json.loads((hf / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConvertError(f"--hf {hf}: cannot read config.json ({e})") from None
    return v if isinstance(v, dict) else {}


def plan_upgrade(f: GGUFFile, *, target: TargetInfo | None = None, hf: Path | None = None,
                 match_upstream: bool = False, from_revision: str | None = None,
                 rope_interleaved: bool = False, no_embed_tokens: bool = False,
                 embed_tokens_from_target: bool = False) -> UpgradePlan:
    """The upgraded file for ``f`` (see the module doc). ``match_upstream`` gives upstream b11434's layout
    exactly; without it a file that keeps ``token_embd`` on an untied target also gets ``output.weight`` (as
    ``hf2gguf`` does). ``from_revision`` + ``rope_interleaved`` (or ``hf``'s config and tensors) decide whether the
    q/k rows carry upstream b10662-b11104's double NeoX permutation. ``no_embed_tokens`` is the user's word that the
    draft checkpoint stores no ``embed_tokens`` (``hf`` tells it otherwise). Raises ConvertError (one line) for what
    cannot be recovered.
    """
    where = str(f.path)
    if f.header_only:
        raise ConvertError(f"{where}: a remote file's tensor data is not fetched; download it, then upgrade the "
                           "local copy")
    st = detect_staleness(f, target)
    kvs = [_kv_of(f, name) for name in f.kvs]
    kept = {kv.name: kv for kv in kvs}
    pieces = [Piece(TensorSpec(t.name, t.shape, t.qtype, origin="file"), copy=t) for t in f.tensors
              if t.qtype is not None]
    if len(pieces) != len(f.tensors):
        bad = next(t for t in f.tensors if t.qtype is None)
        raise ConvertError(f"{where}: tensor '{bad.name}' has unknown type {bad.type_name}; cannot be copied")
    changes: list[Stale] = []
    notes: list[str] = []
    file_qt = _FILE_TYPE_QT.get(f.value(S.GENERAL_FILE_TYPE, -1))

    for s in st.stale:
        if s.subject == HAS_CONFIDENCE_HEAD:
            _insert_after(kvs, KV(HAS_CONFIDENCE_HEAD, VT.BOOL, _has(f, S.T_CONF_W)), (S.DFLASH_SAMPLE_FROM_ANCHOR,))
        elif s.subject == S.T_TOKEN_EMBD:
            if no_embed_tokens:
                continue
            if hf is None and not embed_tokens_from_target:
                raise ConvertError(f"{where}: token_embd.weight: upstream b10705+ keeps a full-vocabulary DSpark "
                                   "draft's own embed_tokens, and the file does not say whether its checkpoint had one; "
                                   "pass --hf CHECKPOINT (the draft's folder), --embed-tokens-from-target with --target "
                                   "if it stores the target's (frozen) copy, --no-embed-tokens if it has none, or "
                                   "reconvert with 'dspark-convert hf2gguf'")
            if file_qt is None:
                raise ConvertError(f"{where}: general.file_type {f.value(S.GENERAL_FILE_TYPE)!r}: cannot tell which "
                                   "type token_embd.weight takes; reconvert with 'dspark-convert hf2gguf'")
            if hf is not None:
                from .hf.checkpoint import Checkpoint

                emb = ("embed_tokens.weight", "model.embed_tokens.weight")
                if not any(n in Checkpoint(hf, select=set(emb).__contains__) for n in emb):
                    continue  # the checkpoint has none: upstream b11434 writes none either
                shape, data = _checkpoint_tensor(hf, emb, file_qt, "token_embd.weight")
            else:
                if target is None:
                    raise ConvertError(f"{where}: --embed-tokens-from-target needs --target TARGET (the target whose "
                                       "embedding the draft stores)")
                from .hf.checkpoint import EMBED_NAMES

                shape = (_n_vocab(f), int(f.value(f"{f.arch}.embedding_length", 0)))
                data = target.tensor(S.T_TOKEN_EMBD, EMBED_NAMES, file_qt, shape, "token_embd.weight")
                notes.append(f"token_embd.weight from the target {target.source} (--embed-tokens-from-target: the "
                             "checkpoint's embed_tokens is the target's frozen copy)")
            # upstream writes it in the checkpoint's (sorted) order: after conf_proj.*, before fc.weight
            pos = next((i for i, p in enumerate(pieces) if not p.spec.name.startswith("conf_proj.")), len(pieces))
            pieces.insert(pos, Piece(TensorSpec(S.T_TOKEN_EMBD, shape, file_qt, origin="draft"), data=data))
            _add_output_head(pieces, f, target, hf, file_qt, notes, where, match_upstream=match_upstream)
        elif s.subject == SINKS:
            bare = set(_unsuffixed_sinks(f))
            names = {t.name for t in f.tensors}
            for p in pieces:
                if p.spec.name in bare:
                    if p.spec.name + ".weight" in names:
                        raise ConvertError(f"{where}: tensors '{p.spec.name}' and '{p.spec.name}.weight' both present; "
                                           "reconvert with 'dspark-convert hf2gguf'")
                    p.spec = TensorSpec(p.spec.name + ".weight", p.spec.shape, p.spec.ggml_type, origin="file")
        elif s.subject == DIMENSION_SECTIONS:
            hd = int(f.value("dflash.attention.key_length"))
            after = [k.name for k in kvs if k.name.startswith("dflash.") and k.name not in
                     (S.DFLASH_SAMPLE_FROM_ANCHOR, HAS_CONFIDENCE_HEAD)]
            _insert_after(kvs, KV(DIMENSION_SECTIONS, VT.ARRAY, [hd // 2, 0, 0, 0], VT.INT32), tuple(after))
        elif s.subject == EMBEDDING_SCALE:
            assert target is not None
            hidden = target.hidden_size()
            if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden <= 0:
                raise ConvertError(f"--target {target.source}: hidden size {hidden!r}, expected a positive integer")
            _insert_after(kvs, KV(EMBEDDING_SCALE, VT.FLOAT32, float(math.sqrt(hidden))),
                          (S.DFLASH_BLOCK_SIZE, "dflash.logit_scale", "dflash.final_logit_softcapping"))
        elif s.subject in (ADD_BOS, ADD_EOS):
            assert target is not None
            typ = "bos" if s.subject == ADD_BOS else "eos"
            value = target.add_tokens()[typ]
            _insert_after(kvs, KV(s.subject, VT.BOOL, value), _SPECIAL_IDS + ((ADD_BOS,) if typ == "eos" else ()))
        changes.append(s)

    if hf is not None and _nvfp4_unmarked(f):
        _refuse_w4a16(f, hf)
    if hf is not None and f.arch == S.ARCH_DFLASH and not _is_dspark(f) and not _has(f, S.T_TOKEN_EMBD):
        from .hf.mask_embedding import MASK_FILE

        if (hf / MASK_FILE).is_file():
            raise ConvertError(f"{where}: {S.T_TOKEN_EMBD}: --hf {hf} has {MASK_FILE}, and upstream b11334+ writes the "
                               f"target's embedding with its mask row replaced as {S.T_TOKEN_EMBD} (and the target "
                               f"head as {S.T_OUTPUT}); upgrade does not build them: reconvert with 'dspark-convert "
                               "hf2gguf'")
    if hf is not None and f.arch == S.ARCH_DFLASH and not _own_keys(f):
        _config_keys(f, kvs, changes, hf, target)
    if hf is not None and f.arch == S.ARCH_DFLASH and not _is_dspark(f):
        _dflash_neox(f, pieces, changes, hf)
    _double_neox(f, pieces, changes, hf=hf, from_revision=from_revision, rope_interleaved=rope_interleaved)
    if (_is_dspark(f) and _has(f, S.T_TOKEN_EMBD) and not _has(f, S.T_D2T)
            and not any(c.subject == S.T_TOKEN_EMBD for c in changes)):  # a b10705+ file: its head as hf2gguf has it
        n = len(pieces)
        _add_output_head(pieces, f, target, hf, f.tensor(S.T_TOKEN_EMBD).qtype or QT.F32, notes, where,
                         match_upstream=match_upstream)
        if len(pieces) > n:
            changes.append(Stale(S.T_OUTPUT, "missing on an untied target; hf2gguf adds the draft's or the target's "
                                 "head (llama.cpp b11223+ would draft with token_embd as the head)", "b11223", "target"))
    _resize_label(kvs, f, pieces)
    return UpgradePlan(f.arch or "", kvs, pieces, changes, st, notes, kept)


def _resize_label(kvs: list[KV], f: GGUFFile, pieces: list[Piece]) -> None:
    """``general.size_label`` follows added tensors when the old label was the computed one (gguf-py's rule over
    the file's tensors, as hf2gguf writes it); a label the user chose is kept."""
    label = f.value("general.size_label")
    if not isinstance(label, str) or len(pieces) == len(f.tensors):
        return
    import gguf

    from .hf2gguf.metadata import param_counts

    if label != gguf.size_label(*param_counts((t.name, t.shape) for t in f.tensors)):
        return
    new = gguf.size_label(*param_counts((p.spec.name, p.spec.shape) for p in pieces))
    _insert_after(kvs, KV("general.size_label", VT.STRING, new), ())


def _add_output_head(pieces: list[Piece], f: GGUFFile, target: TargetInfo | None, hf: Path | None, qt: QT,
                     notes: list[str], where: str, *, match_upstream: bool) -> None:
    """The output head of a file that keeps ``token_embd``, as ``hf2gguf`` decides it
    (:func:`dspark_convert.variants.kit.dflash_base.choose_head_layout`): on an untied target, by default, the draft's
    ``lm_head`` (from ``hf``) or else the target's head is added as ``output.weight``, or llama.cpp b11223+ drafts
    with token_embd as the head; ``match_upstream`` keeps upstream b11434's layout (none)."""
    from typing import cast

    from .hf.checkpoint import EMBED_NAMES, OUTPUT_NAMES
    from .variants.kit.base import Context, ConvertOptions
    from .variants.kit.dflash_base import choose_head_layout

    if _has(f, S.T_OUTPUT) or match_upstream:
        return
    if target is None:
        raise ConvertError(f"{where}: output.weight: whether the target ties its embeddings decides it; pass --target "
                           "TARGET (or --match-upstream for upstream b11434's layout)")
    head_in_draft = False
    if hf is not None:
        from .hf.checkpoint import Checkpoint

        head_in_draft = "lm_head.weight" in Checkpoint(hf, select={"lm_head.weight"}.__contains__)
    config = target.config if target.folder is not None else {"tie_word_embeddings": target.ties_embeddings()}
    ctx = Context(draft=cast(Any, None), target_dir=target.path, target_config=config,
                  options=ConvertOptions(match_upstream=match_upstream))
    layout = choose_head_layout(ctx, keeps_embedding=True, head_in_draft=head_in_draft, upstream_drops_head=True)
    if layout not in ("keep", "from-target"):
        return
    embd = next(p for p in pieces if p.spec.name == S.T_TOKEN_EMBD)
    shape = tuple(embd.spec.shape)
    if layout == "keep":
        assert hf is not None
        got, data = _checkpoint_tensor(hf, ("lm_head.weight",), qt, "output.weight")
        if tuple(got) != shape:
            raise ConvertError(f"--hf {hf}: lm_head.weight has shape {list(got)}, expected {list(shape)} (as "
                               "token_embd.weight)")
        # source order: lm_head sorts after layers.*, before markov_head.* / norm
        pos = next((i for i, p in enumerate(pieces) if p.spec.name.startswith(("markov_", "output_norm"))), len(pieces))
    else:
        data = target.tensor(S.T_OUTPUT, OUTPUT_NAMES + EMBED_NAMES, qt, shape, "output.weight")
        pos = len(pieces) - (1 if pieces and pieces[-1].spec.name == S.T_D2T else 0)  # before d2t (last)
    pieces.insert(pos, Piece(TensorSpec(S.T_OUTPUT, shape, qt, origin="draft" if layout == "keep" else "target"),
                             data=data))
    notes.append(f"output.weight from the {'draft' if layout == 'keep' else 'target'}'s head: the file keeps token_embd "
                 "and the target is untied (--match-upstream leaves it out, as upstream b11434 does)")


def _double_neox(f: GGUFFile, pieces: list[Piece], changes: list[Stale], *, hf: Path | None,
                 from_revision: str | None, rope_interleaved: bool) -> None:
    """Undo upstream b10662-b11104's second NeoX permutation of q/k rows and norms when the user says the file
    came from there (``from_revision`` + ``rope_interleaved``, or ``hf``'s ``rope_is_neox_style: false``), or
    when ``hf``'s tensors prove it."""
    if not _is_dspark(f):
        if from_revision is not None:
            revision_index(from_revision)
        return
    affected = None
    if from_revision is not None:
        i = revision_index(from_revision)
        affected = REVISIONS.index(DOUBLE_NEOX[0]) <= i < REVISIONS.index(DOUBLE_NEOX[1])
    interleaved = rope_interleaved or (hf is not None and _hf_config(hf).get("rope_is_neox_style", True) is False)
    hd = f.value("dflash.attention.key_length")
    if not isinstance(hd, int) or hd < 2 or hd % 2:
        return
    if affected and not interleaved:
        if hf is None:
            raise ConvertError(f"{f.path}: --from-revision {from_revision}: that revision permuted q/k twice only for "
                               "interleaved-RoPE drafts (rope_is_neox_style: false), which the file does not record; "
                               "add --rope-interleaved if the checkpoint says so, or pass --hf CHECKPOINT")
        return
    if hf is not None and interleaved:
        proven = _prove_double(f, hf, hd)
        if affected is False and proven:
            raise ConvertError(f"{f.path}: --from-revision {from_revision} says one permutation, but the checkpoint's "
                               "q_proj shows two (upstream b10662-b11104); drop --from-revision")
        affected = proven
    if not affected:
        return
    for p in pieces:
        if p.copy is not None and p.spec.name.endswith(_ROPE_TENSORS):
            rows = int(p.copy.shape[0])
            p.perm = _neox_inverse_rows(rows, hd)
    changes.append(Stale("blk.*.attn_{q,k}{,_norm}.weight", "q/k rows permuted to NeoX order twice; one permutation "
                         "undone", DOUBLE_NEOX[1], "user" if hf is None else "checkpoint"))


def _prove_double(f: GGUFFile, hf: Path, hd: int) -> bool:
    """Whether ``blk.0.attn_q.weight`` equals the checkpoint's q_proj permuted twice (True) or once (False);
    anything else is refused."""
    return _neox_permutations(f, hf, hd, (1, 2)) == 2


def _neox_permutations(f: GGUFFile, hf: Path, hd: int, choices: tuple[int, ...]) -> int:
    """How many NeoX permutations (one of ``choices``) turn the checkpoint's ``q_proj`` into the file's
    ``blk.0.attn_q.weight`` (to the file's rounding); anything else is refused in one line."""
    import numpy as np

    from .hf.checkpoint import Checkpoint

    names = ("layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight")
    ck = Checkpoint(hf, select=set(names).__contains__)
    src = next((n for n in names if n in ck), None)
    if src is None or not _has(f, "blk.0.attn_q.weight"):
        raise ConvertError(f"--hf {hf}: no layers.0.self_attn.q_proj.weight to compare with blk.0.attn_q.weight")
    from .transforms import convert_chunk

    w = np.asarray(convert_chunk(np.asarray(ck.read(src)), ck.ref(src).dtype, QT.F32), dtype=np.float32)
    got = f.tensor_array("blk.0.attn_q.weight").astype(np.float32)
    if w.size != got.size:
        raise ConvertError(f"--hf {hf}: {src} has {w.size} values, blk.0.attn_q.weight {got.size}; not the same draft")
    w = w.reshape(got.shape)
    idx = np.arange(len(w)).reshape(-1, hd // 2, 2).transpose(0, 2, 1).reshape(-1)
    candidates = {0: w, 1: w[idx], 2: w[idx][idx]}
    err = {n: float(np.abs(got - candidates[n]).max()) for n in choices}
    best = min(choices, key=lambda n: err[n])
    tol = 0.02 * float(np.abs(w).max()) + 1e-6
    if err[best] > tol:
        words = " nor ".join({0: "no", 1: "one", 2: "two"}[n] for n in choices)
        raise ConvertError(f"{f.path}: blk.0.attn_q.weight matches neither {words} NeoX permutation of --hf "
                           f"{hf}'s q_proj (max diff {err[best]:.3g}); is it the same draft?")
    return best


def _dflash_neox(f: GGUFFile, pieces: list[Piece], changes: list[Stale], hf: Path) -> None:
    """A DFlash (not DSpark) draft with interleaved RoPE (``rope_is_neox_style: false``) converted before upstream
    b10662 kept the checkpoint's q/k row order; b10662+ (and hf2gguf) permute the rows to NeoX order once. The
    checkpoint's q_proj tells which the file has; a file without the permutation gets it (a row permutation of the
    stored bytes)."""
    if _hf_config(hf).get("rope_is_neox_style", True) is not False:
        return
    hd = f.value("dflash.attention.key_length")
    if not isinstance(hd, int) or hd < 4 or hd % 2 or _neox_permutations(f, hf, hd, (0, 1)) == 1:
        return
    import numpy as np

    for p in pieces:
        if p.copy is not None and p.spec.name.endswith(_ROPE_TENSORS):
            p.perm = np.arange(int(p.copy.shape[0])).reshape(-1, hd // 2, 2).transpose(0, 2, 1).reshape(-1)
    changes.append(Stale("blk.*.attn_{q,k}{,_norm}.weight", "q/k rows in the checkpoint's interleaved order; upstream "
                         "b10662+ permutes them to NeoX order once (llama.cpp ropes NeoX-style)", "b10662", "checkpoint"))


# ------------------------------------------------------------------------------------------------ writing
COPY_CHUNK = 8 * 1024 * 1024  # bytes per pread/pwrite where the kernel copy is not available
_KERNEL_CHUNK = 1 << 30  # bytes per copy_file_range call
_SCALAR_FORMAT = {VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
                  VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT32: "f", VT.FLOAT64: "d", VT.BOOL: "?"}
GGUF_VERSION = 3


def _pack_kv(kv: KV) -> bytes | None:
    """The GGUF record of a KV the upgrade adds (bool, number, string, array of numbers), as gguf-py packs it;
    None for anything else (the caller then lets gguf-py write the whole header)."""
    import struct

    key = kv.name.encode("utf-8")
    head = struct.pack("<Q", len(key)) + key
    try:
        if kv.type in _SCALAR_FORMAT and type(kv.value) in (bool, int, float):
            return head + struct.pack("<I" + _SCALAR_FORMAT[kv.type], kv.type, kv.value)
        if kv.type == VT.STRING and isinstance(kv.value, str):
            v = kv.value.encode("utf-8")
            return head + struct.pack("<IQ", VT.STRING, len(v)) + v
        if (kv.type == VT.ARRAY and kv.sub_type in _SCALAR_FORMAT and type(kv.value) in (list, tuple)
                and all(type(x) in (bool, int, float) for x in kv.value)):
            n = len(kv.value)
            return head + struct.pack(f"<IIQ{n}{_SCALAR_FORMAT[kv.sub_type]}", VT.ARRAY, kv.sub_type, n, *kv.value)
    except struct.error:
        return None
    return None


def header_bytes(plan: UpgradePlan, f: GGUFFile, old_header: bytes) -> bytes | None:
    """Everything before the tensor data of the upgraded file, without gguf-py: each KV kept from the old file is
    its record copied byte for byte from ``old_header`` (a vocabulary is neither decoded nor re-encoded), each new
    one packed by :func:`_pack_kv`, then the tensor infos and the padding to ``f``'s alignment. None when a new KV
    is of a kind only gguf-py packs (:func:`write_upgrade` then uses :func:`~dspark_convert.gguffile.header.write_header`,
    which gives the same bytes: tests/test_upgrade.py compares them)."""
    import struct

    out = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(plan.pieces), len(plan.kvs))]
    for kv in plan.kvs:
        old = f.kvs.get(kv.name)
        if old is not None and plan.kept.get(kv.name) is kv:
            out.append(old_header[old.offset:old.end])
        else:
            rec = _pack_kv(kv)
            if rec is None:
                return None
            out.append(rec)
    offset = 0
    for p in plan.pieces:
        name = p.spec.name.encode("utf-8")
        ne = tuple(reversed(p.spec.shape))
        out.append(struct.pack(f"<Q{len(name)}sI{len(ne)}QIQ", len(name), name, len(ne), *ne, p.spec.ggml_type, offset))
        offset += p.spec.nbytes + _pad(p.spec.nbytes, f.alignment)
    n = sum(map(len, out))
    out.append(b"\0" * _pad(n, f.alignment))
    return b"".join(out)


def _pad(n: int, alignment: int) -> int:
    return (alignment - n % alignment) % alignment


def _kernel_copy(src_fd: int, dst_fd: int, offset: int, n: int, pos: int) -> None:
    """Copy ``n`` bytes at ``offset`` of ``src_fd`` to ``pos`` of ``dst_fd``: ``os.copy_file_range`` (in the kernel:
    no user-space buffer), else chunked pread/pwrite."""
    done = 0
    if hasattr(os, "copy_file_range"):
        with contextlib.suppress(OSError):
            while done < n:
                k = os.copy_file_range(src_fd, dst_fd, min(n - done, _KERNEL_CHUNK), offset + done, pos + done)
                if k <= 0:
                    break
                done += k
    while done < n:
        b = os.pread(src_fd, min(COPY_CHUNK, n - done), offset + done)
        if not b:
            raise ConvertError(f"source file ended at byte {offset + done}, {n - done} bytes early")
        os.pwrite(dst_fd, b, pos + done)
        done += len(b)


def _permuted(f: GGUFFile, p: Piece) -> bytes:
    import numpy as np

    assert p.copy is not None and p.copy.nbytes is not None
    raw = np.asarray(f.tensor_bytes(p.copy.name))
    return bytes(np.ascontiguousarray(raw.reshape(len(p.perm), -1)[p.perm]).tobytes())


def _runs(plan: UpgradePlan, f: GGUFFile) -> list[tuple[int, int, list[Piece]]]:
    """The pieces grouped into runs copied with one kernel call: consecutive unchanged tensors that also follow
    each other in the old file (their padding between them copied along). Each run: (old offset, bytes, pieces);
    a piece with new or permuted bytes is a run of its own with offset -1."""
    runs: list[tuple[int, int, list[Piece]]] = []
    for p in plan.pieces:
        if p.data is not None or p.perm is not None or p.copy is None:
            runs.append((-1, p.spec.nbytes, [p]))
            continue
        if runs and runs[-1][0] >= 0:
            start, n, group = runs[-1]
            end = start + n
            if p.copy.offset == end + _pad(end - f.data_offset, f.alignment):
                runs[-1] = (start, p.copy.offset + p.spec.nbytes - start, group + [p])
                continue
        runs.append((p.copy.offset, p.spec.nbytes, [p]))
    return runs


def write_upgrade(plan: UpgradePlan, f: GGUFFile, path: Path, *, force: bool = False) -> int:
    """Write ``plan`` to ``path`` atomically (nothing left behind on failure); return the file size.

    The header is spliced from the old one (:func:`header_bytes`); unchanged tensor data is copied in the kernel,
    one ``copy_file_range`` per run of tensors contiguous in the old file (for a file with only new keys: the
    whole data section in one call), written at explicit offsets (no user-space buffer, no seek per tensor).
    """
    from .hf2gguf.atomic import write_atomically

    def body(out: BinaryIO) -> None:
        with open(f.path, "rb") as src:
            sfd = src.fileno()
            head = header_bytes(plan, f, os.pread(sfd, f.data_offset, 0))
            if head is None:  # a new KV only gguf-py packs
                from .gguffile.header import ALIGNMENT, write_header

                if f.alignment != ALIGNMENT:
                    raise ConvertError(f"{f.path}: general.alignment {f.alignment} with a key only gguf-py writes; "
                                       "reconvert with 'dspark-convert hf2gguf'")
                write_header(out, plan.arch, plan.kvs[1:], [p.spec for p in plan.pieces])
            else:
                out.write(head)
            out.flush()
            dfd, pos = out.fileno(), out.tell()
            data0 = pos
            for offset, n, group in _runs(plan, f):
                if offset >= 0:
                    _kernel_copy(sfd, dfd, offset, n, pos)
                else:
                    p = group[0]
                    b = p.data() if p.data is not None else _permuted(f, p)
                    if len(b) != p.spec.nbytes:
                        raise ConvertError(f"internal: {p.spec.name}: {len(b)} bytes, planned {p.spec.nbytes}")
                    os.pwrite(dfd, b, pos)
                pos += n
                tail = _pad(pos - data0, f.alignment)
                if tail:
                    os.pwrite(dfd, b"\0" * tail, pos)
                    pos += tail
            out.seek(pos)

    return write_atomically(path, body, force=force)


# ------------------------------------------------------------------------------------------------ entry point
@dataclass
class UpgradeResult:
    """What :func:`upgrade` did (or, for a dry run, would do)."""

    source: str
    path: Path | None
    staleness: Staleness
    changes: list[Stale]
    notes: list[str]
    size: int | None = None
    #: a dry run of an upgrade that would be refused: the one-line reason (what is missing, which option gives it)
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "output": str(self.path) if self.path else None,
                "revisions": self.staleness.describe_revisions(), "changes": [c.to_dict() for c in self.changes],
                "unchecked": self.staleness.unchecked, "notes": self.notes, "bytes": self.size,
                "refused": self.refused}


def upgrade(old: str | os.PathLike[str], outfile: str | os.PathLike[str] | None = None, *,
            target: str | os.PathLike[str] | None = None, hf: str | os.PathLike[str] | None = None,
            match_upstream: bool = False, dry_run: bool = False, force: bool = False,
            from_revision: str | None = None, rope_interleaved: bool = False,
            no_embed_tokens: bool = False, embed_tokens_from_target: bool = False,
            remote: RemoteOptions | None = None) -> UpgradeResult:
    """``dspark-convert upgrade OLD.gguf [-o NEW.gguf]``: plan (and unless ``dry_run``, write) the upgrade.

    ``outfile`` defaults to ``OLD.upgraded.gguf`` beside the input; the input itself is never overwritten.
    Raises ConvertError (one line, nothing written) when the upgrade cannot be done in full; a dry run then
    returns the stale items (the same :func:`detect_staleness` list ``check FILE`` shows) with ``refused`` set.
    A dry run reads only the header, so ``old`` may be an ``hf://`` file or a URL (``remote`` tunes the reads).
    """
    from .gguffile.source import open_gguf_source
    from .hf2gguf.destination import check_destination

    out = Path(outfile) if outfile is not None else Path(str(old)).with_suffix(".upgraded.gguf")
    if not dry_run:
        check_destination(out, outtype="auto", force=force)
        if Path(str(old)).exists() and out.exists() and out.resolve() == Path(str(old)).resolve():
            raise ConvertError(f"{out}: is the input file; upgrade writes a new file (give -o NEW.gguf)")
    tinfo = load_target(target, remote) if target is not None else None
    hf_path = Path(hf) if hf is not None else None
    if hf_path is not None and not (hf_path / "config.json").is_file():
        raise ConvertError(f"--hf {hf}: expected the draft checkpoint folder (config.json + safetensors)")
    with open_gguf_source(old, remote) as f:
        try:
            plan = plan_upgrade(f, target=tinfo, hf=hf_path, match_upstream=match_upstream,
                                from_revision=from_revision, rope_interleaved=rope_interleaved,
                                no_embed_tokens=no_embed_tokens, embed_tokens_from_target=embed_tokens_from_target)
        except ConvertError as e:
            if not dry_run:
                raise
            st = detect_staleness(f, tinfo)  # a dry run still lists what is stale, and what the upgrade needs
            return UpgradeResult(str(old), None, st, st.stale, [], refused=str(e))
        if dry_run:
            return UpgradeResult(str(old), None, plan.staleness, plan.changes, plan.notes)
        if not plan.changes and not plan.notes:
            plan.notes.append("already current: the copy is byte-identical to the input")
        size = write_upgrade(plan, f, out, force=force)
    return UpgradeResult(str(old), out, plan.staleness, plan.changes, plan.notes, size)
