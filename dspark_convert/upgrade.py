"""``dspark-convert upgrade``: bring a draft GGUF made by an older converter up to upstream llama.cpp b11434's
layout without reconverting. The driver: it knows no draft family; what is stale in a variant's files and how
to rewrite it are the variant's ``upgrade`` role (``variants/<variant>/upgrade.py``, an
:class:`~dspark_convert.roles.upgrade.UpgradeRules`), asked through the registry. The shared ground (the revision
timeline, ``Stale``, ``TargetInfo``: :mod:`dspark_convert.roles.upgrade`; the detector ``check FILE`` uses:
:mod:`dspark_convert.staleness`) sits below ``check``.

Three steps, each a documented function:

* :func:`~dspark_convert.staleness.detect_staleness` reads a GGUF header (plus, optionally, the target's config and tokenizer) and says
  which upstream revisions' layout the file matches and which items are stale (:class:`Stale`), each with the
  revision that changed it and what supplies the fix (the file itself, ``--target``, the checkpoint, or the
  user's word);
* :func:`plan_upgrade` turns that into the new header and the list of tensors, each copied byte for byte from
  the old file, permuted by rows (e.g. undoing a double NeoX permutation of q/k rows), or read from the
  checkpoint / target: the items of every file here, the variant's through its rules' ``fix`` and ``complete``.
  What cannot be recovered is refused with one line naming the missing fact and the option that supplies it;
  nothing is written then;
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

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from . import schema as S
from .errors import ConvertError
from .findings import Finding
from .gguf_constants import VT
from .gguffile.options import RemoteOptions
from .gguffile.reader import GGUFFile
from .plan import KV, TensorSpec
from .roles.upgrade import (
    REVISIONS,
    Piece,
    Stale,
    Staleness,
    TargetInfo,
    Upgrading,
    checkpoint_config,
    insert_after,
    revision_index,
)
from .safeio import kernel_copy
from .staleness import (
    ADD_BOS,
    ADD_EOS,
    PREC_A4,
    detect_staleness,
    nvfp4_unmarked,
    rules_for,
    variant_rules,
)

_SPECIAL_IDS = ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id")


def config_keys() -> tuple[str, ...]:
    """The keys a checkpoint's ``config.json`` decides, over every variant's upgrade rules (each variant's
    ``config_keys``, in registry order, once each; imports the roles)."""
    from .registry import VARIANTS

    return tuple(dict.fromkeys(k for v in VARIANTS for k in variant_rules(v.name).config_keys))


# ------------------------------------------------------------------------------------------------ targets
#: what a target GGUF's header must give an upgrade (scalars only: the vocabulary is not decoded)
def _target_gguf_keys(arch: str) -> tuple[str, ...]:
    return (S.ROPE_DIMENSION_SECTIONS.format(arch=arch), f"{arch}.embedding_length", ADD_BOS, ADD_EOS)


def load_target(ref: str | os.PathLike[str], remote: RemoteOptions | None = None) -> TargetInfo:
    """TARGET as the user gave it, header only: an existing file, an ``hf://`` reference or a URL is a target GGUF
    (its header: KVs and tensor infos); a folder (``config.json``) or an ``org/name[@rev]`` Hub id is a Hugging Face
    target (a repo's config and tokenizer files are fetched, no weights)."""
    from .gguffile.refs import is_remote_ref
    from .registry import VARIANTS

    text = str(ref)
    p = Path(text).expanduser()
    if p.is_file() or (not p.is_dir() and is_remote_ref(text)):
        from .gguffile.source import open_gguf_source

        with open_gguf_source(text, remote) as g:
            arch = g.arch or ""
            if any(v.arch == arch and v.by_arch for v in VARIANTS):  # an arch only drafts write
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
        from .hf.checkpoint import load_json
        from .registry.families import refuse_draft_as_target

        refuse_draft_as_target(load_json(folder / "config.json"), folder, "--target")
    elif text.lower().endswith(".gguf"):
        raise ConvertError(f"--target {text}: no such file (expected a target GGUF, a target model folder or a Hub "
                           "repo id)")
    else:  # a Hub repo id, or the one line hf2gguf and check give for a path that names nothing
        from .hf.hub import resolve_target

        try:
            folder = resolve_target(text).path
        except ConvertError as e:
            raise ConvertError(f"--target {e}") from None
    from .hf.checkpoint import load_json

    return TargetInfo(text, folder=folder, config=load_json(folder / "config.json"))


# ------------------------------------------------------------------------------------------------ planning
def _refuse_w4a16(f: GGUFFile, hf: Path) -> None:
    """A W4A16 NVFP4 checkpoint (``quant_algo`` in config.json or hf_quant_config.json) behind a file without
    ``prec_a4``: refused (upgrade does not rebuild the per-tensor quantization facts)."""
    from .formats.modelopt import read_hf_quant_config

    texts = [json.dumps(checkpoint_config(hf).get("quantization_config", {}))]
    side_file = read_hf_quant_config(hf)
    if side_file is not None:
        texts.append(json.dumps(side_file))
    if any("W4A16" in t for t in texts):
        raise ConvertError(f"{f.path}: {PREC_A4}: --hf {hf} quantizes W4A16_NVFP4, and upstream b11223+ marks those "
                           "tensors prec_a4 = false (else llama.cpp runs them W4A4 on Blackwell); upgrade does not "
                           "rebuild that list: reconvert with 'dspark-convert hf2gguf'")



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


def _kv_of(f: GGUFFile, name: str) -> KV:
    from .gguffile.reader import plan_value

    r = f.kvs[name]
    return KV(r.name, r.type, plan_value(f, r), r.sub_type)


def plan_upgrade(f: GGUFFile, *, target: TargetInfo | None = None, hf: Path | None = None,
                 match_upstream: bool = False, from_revision: str | None = None,
                 rope_interleaved: bool = False, no_embed_tokens: bool = False,
                 embed_tokens_from_target: bool = False, dry_run: bool = False) -> UpgradePlan:
    """The upgraded file for ``f`` (see the module doc). ``match_upstream`` gives upstream b11434's layout
    exactly (without it, where ``hf2gguf`` writes more than upstream, e.g. an output head on an untied target, the
    upgrade does too). ``from_revision`` + ``rope_interleaved`` are the user's word on where the file came from
    (e.g. whether its q/k rows carry upstream b10662-b11104's double NeoX permutation; ``hf``'s config and tensors
    can tell it too). ``no_embed_tokens`` is the user's word that the draft checkpoint stores no ``embed_tokens``
    (``hf`` tells it otherwise); ``embed_tokens_from_target`` that it stores the target's. Raises ConvertError
    (one line) for what cannot be recovered. ``dry_run``: the plan is only listed, so a header-only (remote)
    ``f`` is planned too; otherwise its tensor data, which the write copies, is required.

    The order: each stale item's fix (the tokenizer flags here, the others by the variant's rules), then an
    NVFP4 checkpoint's W4A16 refusal, then what the variant's rules take from ``hf`` or the user's word
    (:meth:`~dspark_convert.staleness.UpgradeRules.complete`), then ``general.size_label``.
    """
    where = str(f.path)
    if f.header_only and not dry_run:
        raise ConvertError(f"{where}: a remote file's tensor data is not fetched; download it, then upgrade the "
                           "local copy")
    st = _detect(f, target, hf)
    kvs = [_kv_of(f, name) for name in f.kvs]
    kept = {kv.name: kv for kv in kvs}
    pieces = [Piece(TensorSpec(t.name, t.shape, t.qtype, origin="file"), copy=t) for t in f.tensors
              if t.qtype is not None]
    if len(pieces) != len(f.tensors):
        bad = next(t for t in f.tensors if t.qtype is None)
        raise ConvertError(f"{where}: tensor '{bad.name}' has unknown type {bad.type_name}; cannot be copied")
    u = Upgrading(f, kvs, pieces, target=target, hf=hf, match_upstream=match_upstream, from_revision=from_revision,
                  rope_interleaved=rope_interleaved, no_embed_tokens=no_embed_tokens,
                  embed_tokens_from_target=embed_tokens_from_target)
    rules = rules_for(f)
    for s in st.stale:
        if s.subject in (ADD_BOS, ADD_EOS):
            _add_token(u, s)
        elif not rules.fix(s, u):
            continue
        u.changes.append(s)
    if hf is not None and nvfp4_unmarked(f):
        _refuse_w4a16(f, hf)
    rules.complete(u)
    if from_revision is not None:
        revision_index(from_revision)  # a bad tag is refused even where no rule reads it
    _resize_label(kvs, f, pieces)
    return UpgradePlan(f.arch or "", kvs, pieces, u.changes, st, u.notes, kept)


def _detect(f: GGUFFile, target: TargetInfo | None, hf: Path | None) -> Staleness:
    """:func:`detect_staleness`; with ``hf``, the facts only the checkpoint tells (``... --hf)``) are no longer
    "not checked": the rules' ``complete`` checks and fixes them from it."""
    st = detect_staleness(f, target)
    if hf is not None:
        st.unchecked = [item for item in st.unchecked if not item.endswith("--hf)")]
    return st


def _check_revision_options(from_revision: str | None, rope_interleaved: bool) -> None:
    """``--from-revision``: a known upstream tag no later than b11434 (what upgrade brings files to);
    ``--rope-interleaved`` only with it (alone it decides nothing)."""
    if from_revision is not None:
        if revision_index(from_revision) > len(REVISIONS) - 1:
            raise ConvertError(f"--from-revision {from_revision}: later than {REVISIONS[-1]}, the layout upgrade writes; "
                               "a file made by that revision needs no upgrade (check it with 'dspark-convert check')")
    elif rope_interleaved:
        raise ConvertError("--rope-interleaved: needs --from-revision bNNNN (the upstream revision that made the "
                           "file); alone it changes nothing (--hf CHECKPOINT tells both by itself)")


def _check_draft(f: GGUFFile, where: str) -> None:
    """Upgrade rewrites draft files only: a file no variant loads (a target model's GGUF) is refused."""
    from .registry import gguf_variant

    if gguf_variant(lambda k: f.arch if k == S.GENERAL_ARCHITECTURE else f.value(k), (t.name for t in f.tensors)) is None:
        raise ConvertError(f"{where}: is not a draft GGUF (general.architecture {f.arch!r}, no draft variant loads it); "
                           "upgrade rewrites draft files made by older converters")


def _loader_errors(plan: UpgradePlan, match_upstream: bool) -> tuple[list[Finding], list[Finding]]:
    """The loader-rule errors of the upgraded file, in two lists: those of a key the upgrade could not decide from
    what it was given (an item of ``staleness.unchecked`` names it: a run with the fact the item names repairs it),
    and every other one. With ``match_upstream``, not those upstream b11434 writes itself (as ``hf2gguf
    --match-upstream``)."""
    from .check import check_plan, upstream_writes_unloadable
    from .plan import Plan

    errors = [f for f in check_plan(Plan(plan.arch, plan.kvs, [p.spec for p in plan.pieces]))
              if f.level == "error" and not (match_upstream and upstream_writes_unloadable(f))]
    undecided = [e for e in errors if any(u.startswith(f"{e.subject} ") for u in plan.staleness.unchecked)]
    return undecided, [e for e in errors if e not in undecided]


def _joined(findings: list[Finding]) -> str:
    return "; ".join(f"{e.subject}: {e.message}" for e in findings)


def _check_hf(f: GGUFFile, hf: Path) -> None:
    """``--hf``: a draft checkpoint folder (not a target model's, see
    :func:`~dspark_convert.registry.families.draft_checkpoint_family`) of a family that writes ``f``'s variant; the
    variant's rules then check what only they know (:meth:`~dspark_convert.staleness.UpgradeRules.refuses_checkpoint`)."""
    from .registry import gguf_variant
    from .registry.families import draft_checkpoint_family, family_name, family_variant

    if not hf.is_dir():
        raise ConvertError(f"--hf {hf}: no such folder; expected the draft checkpoint folder (config.json + "
                           "safetensors)")
    family = draft_checkpoint_family(hf, "--hf")
    variant = gguf_variant(lambda k: f.arch if k == S.GENERAL_ARCHITECTURE else f.value(k), (t.name for t in f.tensors))
    if variant is not None and family_variant(family) != variant.name:
        raise ConvertError(f"--hf {hf}: a checkpoint of family {family_name(family)} (its files are "
                           f"'{family_variant(family)}' GGUFs), but {f.path} is a '{variant.name}' file; pass the checkpoint the file was "
                           "converted from")
    reason = rules_for(f).refuses_checkpoint(f, family_name(family))
    if reason is not None:
        raise ConvertError(f"--hf {hf}: {reason}")


def _add_token(u: Upgrading, s: Stale) -> None:
    """``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` as the target's tokenizer gives them (b11223+), after
    the special token ids."""
    assert u.target is not None
    typ = "bos" if s.subject == ADD_BOS else "eos"
    value = u.target.add_tokens()[typ]
    u.insert_kv(KV(s.subject, VT.BOOL, value), _SPECIAL_IDS + ((ADD_BOS,) if typ == "eos" else ()))


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
    insert_after(kvs, KV("general.size_label", VT.STRING, new), ())



# ------------------------------------------------------------------------------------------------ writing
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


def header_bytes(plan: UpgradePlan, f: GGUFFile, old_header: bytes, *, padded: bool = True) -> bytes | None:
    """Everything before the tensor data of the upgraded file, without gguf-py: each KV kept from the old file is
    its record copied byte for byte from ``old_header`` (a vocabulary is neither decoded nor re-encoded), each new
    one packed by :func:`_pack_kv`, then the tensor infos and the padding to ``f``'s alignment. None when a new KV
    is of a kind only gguf-py packs (:func:`write_upgrade` then uses :func:`~dspark_convert.gguffile.header.write_header`,
    which gives the same bytes: tests/check/test_upgrade.py compares them). ``padded=False`` leaves the padding out
    (the writer leaves it as a hole: an alignment of 2^31 is never materialised in memory)."""
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
    if padded:
        out.append(b"\0" * _pad(sum(map(len, out)), f.alignment))
    return b"".join(out)


def _pad(n: int, alignment: int) -> int:
    return (alignment - n % alignment) % alignment


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
            head = header_bytes(plan, f, os.pread(sfd, f.header_end, 0), padded=False)
            if head is None:  # a new KV only gguf-py packs
                from .gguffile.header import ALIGNMENT, write_header

                if f.alignment != ALIGNMENT:
                    raise ConvertError(f"{f.path}: general.alignment {f.alignment} with a key only gguf-py writes; "
                                       "reconvert with 'dspark-convert hf2gguf'")
                write_header(out, plan.arch, plan.kvs[1:], [p.spec for p in plan.pieces])
            else:
                out.write(head)
            out.flush()
            # the padding (to the data section, after each tensor) is left as a hole of the new file: zeros that
            # are never held in memory, whatever general.alignment says (llama.cpp's rule: a power of two, u32)
            dfd, pos = out.fileno(), out.tell()
            pos += _pad(pos, f.alignment)
            data0 = pos
            for offset, n, group in _runs(plan, f):
                if offset >= 0:
                    kernel_copy(sfd, dfd, offset, n, pos)
                else:
                    p = group[0]
                    b = p.data() if p.data is not None else _permuted(f, p)
                    if len(b) != p.spec.nbytes:
                        raise ConvertError(f"internal: {p.spec.name}: {len(b):,} bytes, planned {p.spec.nbytes:,}")
                    os.pwrite(dfd, b, pos)
                pos += n
                pos += _pad(pos - data0, f.alignment)
            if os.fstat(dfd).st_size < pos:
                os.ftruncate(dfd, pos)
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
    #: a dry run that would write: the file it would write (``path`` stays None: nothing was written)
    would_write: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        output = self.path or self.would_write
        return {"source": self.source, "output": str(output) if output else None,
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
    returns the stale items (the same :func:`detect_staleness` list ``check FILE`` shows) with ``refused`` set,
    except for a file whose upgrade would still fail llama.cpp's loader rules: that raises in a dry run too.
    A dry run reads only the header, so ``old`` may be an ``hf://`` file or a URL (``remote`` tunes the reads).
    """
    from .gguffile.refs import is_remote_ref
    from .gguffile.source import open_gguf_source
    from .hf2gguf.destination import check_destination

    _check_revision_options(from_revision, rope_interleaved)
    if not dry_run and not Path(str(old)).exists() and is_remote_ref(str(old)):
        raise ConvertError(f"{old}: a remote file is upgraded only with --dry-run (its header is read, the tensor data "
                           "is not fetched); download it, then upgrade the local copy")
    out = Path(outfile) if outfile is not None else Path(str(old)).with_suffix(".upgraded.gguf")
    if not dry_run:
        check_destination(out, outtype="auto", force=force)
        if Path(str(old)).exists() and out.exists() and out.resolve() == Path(str(old)).resolve():
            raise ConvertError(f"{out}: is the input file; upgrade writes a new file (give -o NEW.gguf)")
    hf_path = Path(hf) if hf is not None else None
    with open_gguf_source(old, remote) as f:
        _check_draft(f, str(old))
        tinfo = load_target(target, remote) if target is not None else None
        if target is not None:
            from .fit.rules import target_vocabulary_misfit

            misfit = target_vocabulary_misfit(old, target, remote=remote)
            if misfit is not None:
                raise ConvertError(f"--target {target}: its vocabulary does not fit {old} ({misfit}); upgrade takes "
                                   "tokenizer facts only from the target the draft was made for")
        if hf_path is not None:
            _check_hf(f, hf_path)
        try:
            plan = plan_upgrade(f, target=tinfo, hf=hf_path, match_upstream=match_upstream,
                                from_revision=from_revision, rope_interleaved=rope_interleaved,
                                no_embed_tokens=no_embed_tokens, embed_tokens_from_target=embed_tokens_from_target,
                                dry_run=dry_run)
        except ConvertError as e:
            if not dry_run:
                raise
            st = _detect(f, tinfo, hf_path)  # a dry run still lists what is stale, and what the upgrade needs
            return UpgradeResult(str(old), None, st, st.stale, [], refused=str(e))
        undecided, broken = _loader_errors(plan, match_upstream)
        if undecided and not broken:  # a fact the upgrade was not given: say which
            needs = [u for u in plan.staleness.unchecked if any(u.startswith(f"{e.subject} ") for e in undecided)]
            refusal = (f"{old}: the upgraded file would fail llama.cpp's loader rules ({_joined(undecided)}) unless "
                       f"the upgrade is given what it cannot read from the file: {'; '.join(needs)}")
            if not dry_run:
                raise ConvertError(refusal)
            return UpgradeResult(str(old), None, plan.staleness, plan.changes, plan.notes, refused=refusal)
        if broken:
            # a dry run too: no listing of stale items (nor "nothing stale") for a file no upgrade makes loadable
            raise ConvertError(f"{old}: the upgraded file would fail llama.cpp's loader rules ({_joined(broken)}); "
                               f"upgrade does not repair that: see 'dspark-convert check {old}', then reconvert with "
                               "'dspark-convert hf2gguf'")
        if dry_run:  # the file a real run would write: -o, else OLD.upgraded.gguf beside a local input
            would = out if outfile is not None or not is_remote_ref(str(old)) or Path(str(old)).exists() else None
            return UpgradeResult(str(old), None, plan.staleness, plan.changes, plan.notes, would_write=would)
        if not plan.changes and not plan.notes:
            plan.notes.append("already current: the copy is byte-identical to the input")
        size = write_upgrade(plan, f, out, force=force)
    return UpgradeResult(str(old), out, plan.staleness, plan.changes, plan.notes, size)
