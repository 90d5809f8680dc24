"""Plan and write the three MTP cuts of a target GGUF: extract (sidecar), strip (trunk), graft (full).

Inputs are local files, single or split (``NAME-00001-of-000NN.gguf``: every shard is opened, the KVs come from the
first); remote inputs are :mod:`.remote`'s. A plan (:class:`CutPlan`) lists the output's KV records, in order (a
kept KV is its source record byte for byte), and its tensors, each a range of one source file; writing it
(:func:`write_cut`) copies the header and then each tensor with ``os.copy_file_range``, atomically.

The header rules (spec: drafts-beyond-dflash.md §1.8):

* extract: every KV kept (``block_count`` stays ``n + nextn``, ``nextn_predict_layers`` stays, per-layer arrays
  keep every entry) except the keys upstream's ``--mtp`` leaves out for the arch; tensors: the root tensors the MTP
  graph reads and every ``blk.{i}`` with ``i >= n``, in source order;
* strip: ``block_count = n``, ``nextn_predict_layers`` dropped, every per-layer array cut to its first ``n`` entries;
  tensors: everything but ``blk.{i >= n}``;
* graft: the trunk's KVs with ``block_count``, ``nextn_predict_layers`` and the per-layer arrays taken from the
  sidecar (whose first ``n`` entries must be the trunk's); tensors: the trunk's and the sidecar's MTP blocks, merged
  in the order upstream's full conversion writes them when the checkpoint stores the MTP tensors together;
* all three: ``split.*`` dropped (the output is one file); ``general.size_label`` and ``general.finetune`` as
  upstream writes them for the written tensors (:func:`_relabel`: gguf-py's computed label, or upstream's name
  heuristic re-run on the model id recovered from ``general.name``); a label neither explains is kept, with a note.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConvertError
from ..gguf_constants import VT
from ..gguffile.reader import GGUFFile, ReaderTensor, read_gguf
from ..safeio import kernel_copy
from ..schema import core as SC
from ..schema import nextn as SN
from ..variants.nextn import Layout, NextnArch, block_of, layout, nextn_arch, per_layer_keys, sidecar_drops

_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_SCALAR = {VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
           VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT32: "f", VT.FLOAT64: "d", VT.BOOL: "?"}
GGUF_VERSION = 3


@dataclass(frozen=True)
class Part:
    """One output tensor: tensor ``tensor`` of input ``src`` (an index into :attr:`CutPlan.inputs`)."""

    src: int
    tensor: ReaderTensor


@dataclass(frozen=True)
class KVOut:
    """One output KV record: ``fate`` is ``kept`` (the source record as stored), ``changed`` or ``added`` (``why``
    names the rule)."""

    name: str
    record: bytes
    fate: str
    why: str = ""


@dataclass
class CutPlan:
    """What a cut writes: the KVs in order, the tensors in order, and what it leaves out (with the rule)."""

    op: str
    arch: str
    inputs: list[GGUFFile]
    kvs: list[KVOut]
    tensors: list[Part]
    alignment: int
    layout: Layout
    dropped_kvs: list[tuple[str, str]] = field(default_factory=list)
    dropped_tensors: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def data_bytes(self) -> int:
        """Tensor bytes written (padding not counted)."""
        return sum(p.tensor.nbytes or 0 for p in self.tensors)

    def header(self) -> bytes:
        """Everything before the tensor data: magic, counts, KV records, tensor infos, padding."""
        out = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kvs))]
        out += [kv.record for kv in self.kvs]
        offset = 0
        for p in self.tensors:
            t = p.tensor
            name = t.name.encode("utf-8")
            out.append(struct.pack(f"<Q{len(name)}sI{len(t.ne)}QIQ", len(name), name, len(t.ne), *t.ne, t.ggml_type,
                                   offset))
            offset += _padded(t.nbytes or 0, self.alignment)
        n = sum(map(len, out))
        out.append(b"\0" * (_padded(n, self.alignment) - n))
        return b"".join(out)

    def offsets(self) -> list[int]:
        """Each output tensor's offset within the data section."""
        out, pos = [], 0
        for p in self.tensors:
            out.append(pos)
            pos += _padded(p.tensor.nbytes or 0, self.alignment)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"operation": self.op, "arch": self.arch, "kind": {"extract": "sidecar", "strip": "trunk",
                                                                   "graft": "full"}[self.op],
                "block_count": self.layout.block_count, "trunk_blocks": self.layout.n,
                "nextn_predict_layers": self.layout.nextn, "tensors": len(self.tensors),
                "tensor_bytes": self.data_bytes, "tensors_left_out": self.dropped_tensors,
                "kvs": {"kept": [k.name for k in self.kvs if k.fate == "kept"],
                        "changed": {k.name: k.why for k in self.kvs if k.fate == "changed"},
                        "added": {k.name: k.why for k in self.kvs if k.fate == "added"},
                        "dropped": dict(self.dropped_kvs)},
                "notes": self.notes}


def _padded(n: int, alignment: int) -> int:
    return n + (-n) % alignment


# ------------------------------------------------------------------------------------------------ records
def _head(name: str, vt: int) -> bytes:
    key = name.encode("utf-8")
    return struct.pack("<Q", len(key)) + key + struct.pack("<I", vt)


def scalar_record(name: str, vt: VT, value: int | float | bool) -> bytes:
    """The GGUF record of a scalar KV (gguf-py's packing)."""
    return _head(name, vt) + struct.pack("<" + _SCALAR[vt], value)


def string_record(name: str, value: str) -> bytes:
    v = value.encode("utf-8")
    return _head(name, VT.STRING) + struct.pack("<Q", len(v)) + v


def array_prefix_record(f: GGUFFile, name: str, n: int) -> bytes:
    """The record of array ``name`` of ``f`` cut to its first ``n`` elements (numeric or bool elements)."""
    kv = f.kvs[name]
    assert kv.sub_type is not None and kv.sub_type in _SCALAR and kv.count is not None and n <= kv.count
    size = struct.calcsize("<" + _SCALAR[kv.sub_type])
    raw = bytes(f.raw_value(name))[: n * size]
    return _head(name, VT.ARRAY) + struct.pack("<IQ", kv.sub_type, n) + raw


# ------------------------------------------------------------------------------------------------ inputs
def split_names(path: Path) -> list[Path] | None:
    """The shard paths of a split file name (``NAME-00001-of-000NN.gguf``, any shard given), or None."""
    m = _SPLIT.match(path.name)
    if m is None:
        return None
    count = int(m.group("count"))
    width = len(m.group("count"))
    return [path.with_name(f"{m.group('stem')}-{i:0{width}d}-of-{m.group('count')}.gguf") for i in range(1, count + 1)]


def open_inputs(ref: str | os.PathLike[str]) -> list[GGUFFile]:
    """The local file ``ref`` as a list of opened GGUF files: one, or every shard of a split file (in order, each
    checked against ``split.no`` / ``split.count``)."""
    p = Path(ref)
    shards = split_names(p)
    if shards is None:
        return [read_gguf(p)]
    files: list[GGUFFile] = []
    try:
        for i, s in enumerate(shards):
            if not s.exists():
                raise ConvertError(f"{s}: shard {i + 1} of {len(shards)} of {p.name} is missing")
            f = read_gguf(s)
            files.append(f)
            no, count = f.value(SN.SPLIT_NO), f.value(SN.SPLIT_COUNT)
            if no != i or count != len(shards):
                raise ConvertError(f"{s}: split.no {no} / split.count {count}, expected {i} / {len(shards)} from "
                                   "the file name")
    except BaseException:
        for f in files:
            f.close()
        raise
    return files


def _all_tensors(files: list[GGUFFile]) -> list[Part]:
    parts = [Part(i, t) for i, f in enumerate(files) for t in f.tensors]
    for p in parts:
        if p.tensor.nbytes is None:
            raise ConvertError(f"{files[p.src].path}: tensor '{p.tensor.name}' has unknown type "
                               f"{p.tensor.type_name}; its size is unknown, it cannot be copied")
    return parts


def _row(f: GGUFFile, op: str) -> NextnArch:
    arch = f.arch
    row = nextn_arch(arch)
    if row is None:
        raise ConvertError(f"{f.path}: general.architecture '{arch}' has no MTP (NextN) path in llama.cpp b11434; "
                           f"nothing to {op}")
    if row.checkpoint_only:
        raise ConvertError(f"{f.path}: {row.checkpoint_only}")
    if row.no_graph and op == "extract":
        raise ConvertError(f"{f.path}: '{arch}': {row.no_graph}; a sidecar would not run")
    return row


def _layout(f: GGUFFile, row: NextnArch, parts: list[Part]) -> Layout:
    return layout(row, f.value, [p.tensor.name for p in parts])


def _need_full(f: GGUFFile, lay: Layout, op: str) -> None:
    bc, nx = SC.BLOCK_COUNT.format(arch=lay.arch), SN.NEXTN_PREDICT_LAYERS.format(arch=lay.arch)
    if lay.nextn and not 0 < lay.nextn < lay.block_count:
        raise ConvertError(f"{f.path}: {nx} = {lay.nextn} with {bc} = {lay.block_count}: expected 0 < "
                           f"{nx} < {bc} (the MTP blocks follow at least one trunk block)")
    what = {"sidecar": "is an MTP sidecar (no trunk blocks)", "trunk": "holds no MTP layers (no "
            f"{SN.NEXTN_PREDICT_LAYERS.format(arch=lay.arch)}, or no blk.{{>= {lay.n}}} tensors)",
            "empty": f"has neither trunk nor MTP blocks (no {SN.T_TRUNK_PROBE})"}
    if lay.kind != "full":
        raise ConvertError(f"{f.path}: {what[lay.kind]}; {op} needs a full target file with MTP layers")


def _common_kvs(f: GGUFFile, plan_kvs: list[KVOut], dropped: list[tuple[str, str]],
                rule: Callable[[str], KVOut | str | None]) -> None:
    """Walk ``f``'s KVs in order: ``rule(name)`` returns a replacement record, a reason to drop it, or None (keep)."""
    for name in f.kvs:
        if name in SN.SPLIT_KEYS:
            dropped.append((name, "split metadata: the output is one file"))
            continue
        r = rule(name)
        if isinstance(r, str):
            dropped.append((name, r))
        elif r is None:
            plan_kvs.append(KVOut(name, f.record_bytes(name), "kept"))
        else:
            plan_kvs.append(r)


def size_label_of(names_shapes: list[tuple[str, tuple[int, ...]]]) -> str:
    """``general.size_label`` as gguf-py computes it from the written tensors."""
    import gguf

    from ..hf2gguf.metadata import param_counts

    return str(gguf.size_label(*param_counts(names_shapes)))


def _total(parts: list[Part]) -> int:
    from ..hf2gguf.metadata import param_counts

    return param_counts((p.tensor.name, p.tensor.shape) for p in parts)[0]


def _model_id(f: GGUFFile, total: int, computed: str) -> str | None:
    """The id upstream's name heuristic read (a folder or repo name such as ``Qwen3.5-9B``), recovered from the
    ``general.*`` keys it wrote: the candidate is accepted only when gguf-py's own heuristic, run on it with the
    source's parameter count, gives back every key the source holds (name, organization, basename, finetune,
    version, size label; a label the heuristic does not give must be ``computed``, the one gguf-py computes)."""
    from gguf.metadata import Metadata

    name = f.value("general.name")
    if not isinstance(name, str):
        return None
    got = {k: f.value(f"general.{k}") for k in ("organization", "basename", "finetune", "version", "size_label")}
    candidates = [name.replace(" ", "-")]
    parts = [got["basename"], got["size_label"], got["finetune"], got["version"]]
    if all(isinstance(x, str) or x is None for x in parts) and got["basename"]:
        candidates.append("-".join(x for x in parts if x))
    for cid in dict.fromkeys(candidates):
        full, org, base, fine, ver, size = Metadata.get_model_id_components(cid, total)
        if full is None or Metadata.id_to_title(full) != name:
            continue
        if (org and Metadata.id_to_title(org)) != got["organization"] and not (org is None and got["organization"] is None):
            continue
        if (base, fine, ver) == (got["basename"], got["finetune"], got["version"]) and (
                size == got["size_label"] or size is None and got["size_label"] == computed):
            return cid
    return None


def _relabel(plan: CutPlan, source: list[Part]) -> None:
    """``general.size_label`` (and ``general.finetune``) as upstream writes them for the written tensors: gguf-py's
    computed label when the source's is the computed one; when the label came from the model's name (recovered by
    :func:`_model_id`), the name heuristic run again with the written parameter count (a size far from the new
    count becomes a lower-case finetune, and the label is then computed). Otherwise both are kept, with a note."""
    f = plan.inputs[0]
    old = f.value(SC.GENERAL_SIZE_LABEL)
    if SC.GENERAL_SIZE_LABEL not in f.kvs:
        return
    src_total, out_total = _total(source), _total(plan.tensors)
    computed_old = size_label_of([(p.tensor.name, p.tensor.shape) for p in source])
    computed_new = size_label_of([(p.tensor.name, p.tensor.shape) for p in plan.tensors])
    finetune: str | None = f.value(SN.GENERAL_FINETUNE)
    if old == computed_old and finetune is None:
        new_label, new_finetune, why = computed_new, None, "computed from the written tensors"
    else:
        cid = _model_id(f, src_total, computed_old)
        if cid is None:
            plan.notes.append(f"general.size_label '{old}' kept: it is neither the label computed from the source's "
                              "tensors nor one upstream's name rule gives for general.name (a model card or "
                              "--metadata chose it)")
            return
        from gguf.metadata import Metadata

        _, _, _, new_finetune, _, size = Metadata.get_model_id_components(cid, out_total)
        new_label = size if size is not None else computed_new
        why = f"upstream's name heuristic on '{cid}' with the written parameter count"
    kvs = plan.kvs
    names = [k.name for k in kvs]
    i = names.index(SC.GENERAL_SIZE_LABEL)
    if new_label != old:
        kvs[i] = KVOut(SC.GENERAL_SIZE_LABEL, string_record(SC.GENERAL_SIZE_LABEL, new_label), "changed",
                       f"{why} ({old} -> {new_label})")
    if new_finetune == finetune:
        return
    if finetune is not None:
        j = names.index(SN.GENERAL_FINETUNE)
        if new_finetune is None:
            del kvs[j]
            plan.dropped_kvs.append((SN.GENERAL_FINETUNE, f"{why}: no finetune"))
        else:
            kvs[j] = KVOut(SN.GENERAL_FINETUNE, string_record(SN.GENERAL_FINETUNE, new_finetune), "changed",
                           f"{why} ({finetune} -> {new_finetune})")
        return
    assert new_finetune is not None
    after = [n for n in ("general.name", "general.author", "general.version", "general.organization") if n in names]
    at = names.index(after[-1]) + 1 if after else i
    kvs.insert(at, KVOut(SN.GENERAL_FINETUNE, string_record(SN.GENERAL_FINETUNE, new_finetune), "added",
                         f"{why} ('{new_finetune}')"))


# ------------------------------------------------------------------------------------------------ extract
def plan_extract(files: list[GGUFFile]) -> CutPlan:
    """The MTP sidecar of a full target file (``files``: its shards, or the one file). Raises ConvertError (one
    line) for a file without MTP layers, an arch without an MTP path, or one whose sidecar cannot run."""
    f = files[0]
    row = _row(f, "extract")
    parts = _all_tensors(files)
    lay = _layout(f, row, parts)
    _need_full(f, lay, "extract")
    kvs: list[KVOut] = []
    dropped: list[tuple[str, str]] = []

    def rule(name: str) -> str | None:
        if sidecar_drops(row.arch, name):
            return "upstream's --mtp writes no per-layer-embedding keys into a sidecar"
        return None

    _common_kvs(f, kvs, dropped, rule)
    kept = [p for p in parts if _in_sidecar(p.tensor.name, lay.n)]
    plan = CutPlan("extract", row.arch, files, kvs, kept, f.alignment, lay, dropped, len(parts) - len(kept))
    _relabel(plan, parts)
    return plan


def _in_sidecar(name: str, n: int) -> bool:
    b = block_of(name)
    return name in SN.SIDECAR_ROOT_TENSORS if b is None else b >= n


# ------------------------------------------------------------------------------------------------ strip
def plan_strip(files: list[GGUFFile]) -> CutPlan:
    """The trunk of a full target file: its MTP blocks and the header facts about them removed."""
    f = files[0]
    row = _row(f, "strip")
    parts = _all_tensors(files)
    lay = _layout(f, row, parts)
    _need_full(f, lay, "strip")
    arch = row.arch
    bc_key, nx_key = SC.BLOCK_COUNT.format(arch=arch), SN.NEXTN_PREDICT_LAYERS.format(arch=arch)
    per_layer = set(per_layer_keys(arch))
    kvs: list[KVOut] = []
    dropped: list[tuple[str, str]] = []
    for name in f.kvs:  # an array as long as block_count under a key no rule names: its layout is unknown
        kv = f.kvs[name]
        if (kv.type == VT.ARRAY and kv.count == lay.block_count and name.startswith(arch + ".")
                and name not in per_layer and name[len(arch) + 1:] not in SN.NOT_PER_LAYER_ARRAYS and lay.nextn):
            raise ConvertError(f"{f.path}: {name}: an array of {kv.count} entries (block_count) that is not a known "
                               "per-layer key; not cut, so the trunk would not load: please report it")

    def rule(name: str) -> KVOut | str | None:
        if name == nx_key:
            return "a trunk has no MTP blocks (a qwen35-style loader refuses it with the key)"
        if name == bc_key:
            return KVOut(name, scalar_record(name, f.kvs[name].type, lay.n), "changed",
                         f"trunk blocks only ({lay.block_count} -> {lay.n})")
        kv = f.kvs[name]
        if name in per_layer and kv.type == VT.ARRAY and kv.count == lay.block_count:
            return KVOut(name, array_prefix_record(f, name, lay.n), "changed",
                         f"per-layer array cut to the trunk's {lay.n} entries")
        return None

    _common_kvs(f, kvs, dropped, rule)
    kept = [p for p in parts if (b := block_of(p.tensor.name)) is None or b < lay.n]
    plan = CutPlan("strip", arch, files, kvs, kept, f.alignment, lay, dropped, len(parts) - len(kept))
    _relabel(plan, parts)
    return plan


# ------------------------------------------------------------------------------------------------ graft
def plan_graft(trunk: list[GGUFFile], sidecar: list[GGUFFile]) -> CutPlan:
    """The full file from a trunk and its sidecar. Refused (one line) when the sidecar does not belong to the trunk:
    another arch, other trunk hyperparameters, another vocabulary, or a trunk block count that is not the
    sidecar's ``n``."""
    t, s = trunk[0], sidecar[0]
    row = _row(t, "graft")
    if s.arch != t.arch:
        raise ConvertError(f"{s.path}: general.architecture '{s.arch}', the trunk {t.path} is '{t.arch}'")
    tparts, sparts_all = _all_tensors(trunk), _all_tensors(sidecar)
    tl, sl = _layout(t, row, tparts), _layout(s, row, sparts_all)
    if tl.kind != "trunk" or tl.nextn:
        raise ConvertError(f"{t.path}: is not a trunk ({'it holds MTP blocks' if tl.kind == 'full' else tl.kind}; "
                           "expected a file made by mtp-strip or upstream's --no-mtp)")
    if sl.kind != "sidecar":
        raise ConvertError(f"{s.path}: is not an MTP sidecar (kind {sl.kind}; expected a file made by mtp-extract "
                           "or upstream's --mtp)")
    if sl.n != tl.block_count:
        raise ConvertError(f"{s.path}: follows a trunk of {sl.n} blocks (block_count {sl.block_count} - "
                           f"nextn_predict_layers {sl.nextn}); the trunk {t.path} has {tl.block_count}")
    arch = row.arch
    bc_key, nx_key = SC.BLOCK_COUNT.format(arch=arch), SN.NEXTN_PREDICT_LAYERS.format(arch=arch)
    per_layer = set(per_layer_keys(arch))
    _match_headers(t, s, arch, sl, {bc_key, nx_key} | per_layer)
    kvs: list[KVOut] = []
    dropped: list[tuple[str, str]] = []

    def rule(name: str) -> KVOut | str | None:
        if name == bc_key:
            return KVOut(name, s.record_bytes(name), "changed", f"trunk + MTP blocks ({tl.block_count} -> "
                                                                 f"{sl.block_count}), from the sidecar")
        if name in per_layer and s.kvs.get(name) is not None and s.kvs[name].count == sl.block_count:
            return KVOut(name, s.record_bytes(name), "changed", "per-layer array with the MTP entries, from the "
                                                                "sidecar")
        return None

    _common_kvs(t, kvs, dropped, rule)
    if nx_key not in s.kvs:
        raise ConvertError(f"{s.path}: no {nx_key}")
    _insert_after_predecessor(kvs, KVOut(nx_key, s.record_bytes(nx_key), "added", "the MTP block count, from the "
                                         "sidecar"), list(s.kvs))
    mtp = [Part(p.src + len(trunk), p.tensor) for p in sparts_all if (block_of(p.tensor.name) or -1) >= sl.n]
    merged = _merge_order(tparts, mtp, [p.tensor.name for p in sparts_all])
    plan = CutPlan("graft", arch, [*trunk, *sidecar], kvs, merged, t.alignment, sl, dropped)
    plan.dropped_tensors = len(sparts_all) - len(mtp)  # the sidecar's copies of the embedding, norm and head
    _relabel(plan, tparts)
    return plan


def _match_headers(t: GGUFFile, s: GGUFFile, arch: str, sl: Layout, rules: set[str]) -> None:
    """Every trunk KV outside ``general.*``/``split.*`` and the rules' keys equals the sidecar's, record for record
    (the vocabulary included); a rule's per-layer array must begin with the trunk's entries."""
    for name in t.kvs:
        if name.startswith(("general.", "split.")) or name in (SC.BLOCK_COUNT.format(arch=arch),):
            continue
        if name not in s.kvs:
            raise ConvertError(f"{s.path}: has no {name}; the trunk {t.path} has it: not this trunk's sidecar")
        if name in rules and t.kvs[name].type == VT.ARRAY and s.kvs[name].count == sl.block_count:
            if s.array_head(name, t.kvs[name].count or 0) != t.value(name):
                raise ConvertError(f"{s.path}: {name}: the first {t.kvs[name].count} entries differ from the trunk's "
                                   f"({t.path}): not this trunk's sidecar")
            continue
        if t.record_bytes(name) != s.record_bytes(name):
            what = "vocabulary" if name.startswith("tokenizer.") else "header"
            raise ConvertError(f"{s.path}: {name} differs from the trunk's ({t.path}): another {what}, not this "
                               "trunk's sidecar")
    extra = [n for n in s.kvs if n not in t.kvs and not n.startswith(("general.", "split."))
             and n != SN.NEXTN_PREDICT_LAYERS.format(arch=arch)]
    if extra:
        raise ConvertError(f"{s.path}: has {extra[0]}, which the trunk {t.path} lacks: not this trunk's sidecar")


def _insert_after_predecessor(kvs: list[KVOut], new: KVOut, order: list[str]) -> None:
    """Insert ``new`` after the nearest key that precedes it in ``order`` and is present in ``kvs``."""
    names = [k.name for k in kvs]
    i = order.index(new.name)
    for prev in reversed(order[:i]):
        if prev in names:
            kvs.insert(names.index(prev) + 1, new)
            return
    kvs.insert(1, new)


def _merge_order(trunk: list[Part], mtp: list[Part], sidecar_order: list[str]) -> list[Part]:
    """The trunk's tensors and the MTP blocks in one order: each MTP tensor goes where the sidecar puts it
    relative to the tensors both files hold (anchors), after every trunk tensor that precedes that anchor in the
    trunk."""
    tnames = [p.tensor.name for p in trunk]
    anchors = [n for n in sidecar_order if n in set(tnames)]
    groups: dict[str | None, list[Part]] = {}
    by_name = {p.tensor.name: p for p in mtp}
    pending: list[Part] = []
    for name in sidecar_order:
        if name in by_name:
            pending.append(by_name[name])
        elif name in anchors:
            groups[name] = pending
            pending = []
    groups[None] = pending
    out: list[Part] = []
    for p in trunk:
        out += groups.get(p.tensor.name, [])
        out.append(p)
    return out + groups[None]


# ------------------------------------------------------------------------------------------------ writing
def _runs(plan: CutPlan) -> Iterator[tuple[int, int, int, int]]:
    """(input, source offset, bytes, output data offset) of each copy: tensors that follow each other in the same
    input and in the output, padding included, are one run."""
    run: list[int] | None = None
    for p, out_off in zip(plan.tensors, plan.offsets(), strict=True):
        t = p.tensor
        n = t.nbytes or 0
        if run is not None and run[0] == p.src and t.offset - run[1] == out_off - run[3]:
            run[2] = out_off - run[3] + n
            continue
        if run is not None:
            yield run[0], run[1], run[2], run[3]
        run = [p.src, t.offset, n, out_off]
    if run is not None:
        yield run[0], run[1], run[2], run[3]


def write_cut(plan: CutPlan, path: Path, *, force: bool = False,
              progress: Callable[[int], None] | None = None) -> int:
    """Write ``plan`` to ``path`` atomically (nothing left behind on failure); return the file size.
    ``progress(n)`` is called with each run's byte count."""
    from ..hf2gguf.atomic import write_atomically

    for f in plan.inputs:
        if f.header_only:
            raise ConvertError(f"{f.path}: a remote file; its tensors are fetched by mtp-extract's remote path only")

    def body(out: BinaryIO) -> None:
        head = plan.header()
        out.write(head)
        out.flush()
        dfd = out.fileno()
        total = len(head) + sum(_padded(p.tensor.nbytes or 0, plan.alignment) for p in plan.tensors)
        fds: dict[int, int] = {}
        try:
            for src, off, n, out_off in _runs(plan):
                if src not in fds:
                    fds[src] = os.open(plan.inputs[src].path, os.O_RDONLY)
                kernel_copy(fds[src], dfd, off, n, len(head) + out_off)
                if progress is not None:
                    progress(n)
        finally:
            for fd in fds.values():
                os.close(fd)
        os.ftruncate(dfd, total)  # the padding after the last tensor (zeros)
        out.seek(total)

    return write_atomically(path, body, force=force)
