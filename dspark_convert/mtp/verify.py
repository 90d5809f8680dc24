"""Prove an MTP cut: every output tensor byte-equal to its source, every KV accounted for.

:func:`verify_cut` re-reads the written file and its input(s) and checks, independently of the plan that wrote
it: each output tensor has a source tensor of the same name, type and shape whose bytes are equal (compared in
chunks, bounded memory); each source tensor left out is one the operation's rule leaves out (trunk blocks for
extract, MTP blocks for strip, the sidecar's copies of the shared tensors for graft, which must equal the trunk's);
each source KV is kept (the same record), changed by a named rule (with its expected new value), or dropped by a
named rule; and the output holds no other KV.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..gguf_constants import VT
from ..gguffile.reader import GGUFFile
from ..schema import core as SC
from ..schema import nextn as SN
from ..variants.nextn import block_of, layout, nextn_arch, per_layer_keys, sidecar_drops

CHUNK = 8 << 20


@dataclass
class CutReport:
    """The verdict: ``passed`` when ``problems`` is empty; the accounting of every KV and tensor."""

    op: str
    kept: list[str] = field(default_factory=list)
    changed: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    added: dict[str, str] = field(default_factory=dict)
    tensors_equal: int = 0
    tensors_left_out: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "operation": self.op, "tensors_byte_equal": self.tensors_equal,
                "tensors_left_out": self.tensors_left_out,
                "kvs": {"kept": len(self.kept), "changed": self.changed, "dropped": self.dropped,
                        "added": self.added}, "problems": self.problems}

    def line(self) -> str:
        verdict = "passed" if self.passed else f"FAILED ({len(self.problems)} problems; first: {self.problems[0]})"
        return (f"verify {verdict}: {self.tensors_equal} tensors byte-equal to their source; KVs {len(self.kept)} kept, "
                f"{len(self.changed)} changed, {len(self.dropped)} dropped, {len(self.added)} added, each by a rule")


def _equal_bytes(a: GGUFFile, an: str, b: GGUFFile, bn: str) -> bool:
    ta, tb = a.tensor(an), b.tensor(bn)
    if ta.nbytes != tb.nbytes or ta.nbytes is None:
        return False
    with open(a.path, "rb") as fa, open(b.path, "rb") as fb:
        done = 0
        while done < ta.nbytes:
            n = min(CHUNK, ta.nbytes - done)
            fa.seek(ta.offset + done)
            fb.seek(tb.offset + done)
            if fa.read(n) != fb.read(n):
                return False
            done += n
    return True


def verify_cut(op: str, inputs: list[list[GGUFFile]], out: GGUFFile) -> CutReport:
    """Check ``out`` against the ``inputs`` of operation ``op`` (``extract``/``strip``: one input, its shards;
    ``graft``: the trunk's shards, then the sidecar's)."""
    rep = CutReport(op)
    first = inputs[0][0]
    arch = first.arch or ""
    row = nextn_arch(arch)
    if row is None:
        rep.problems.append(f"{first.path}: arch '{arch}' has no MTP path")
        return rep
    sources = [f for group in inputs for f in group]
    src_layout = layout(row, first.value, [t.name for f in inputs[0] for t in f.tensors])
    n = src_layout.n if op != "graft" else src_layout.block_count
    # ---------------------------------------------------------------------------------------- tensors
    where: dict[str, GGUFFile] = {}
    for f in sources:
        for t in f.tensors:
            where.setdefault(t.name, f)
    out_names = {t.name for t in out.tensors}
    for t in out.tensors:
        src = where.get(t.name)
        if src is None:
            rep.problems.append(f"tensor {t.name}: in the output, in no input")
            continue
        s = src.tensor(t.name)
        if (s.ne, s.ggml_type) != (t.ne, t.ggml_type) or not _equal_bytes(src, t.name, out, t.name):
            rep.problems.append(f"tensor {t.name}: differs from {src.path}'s")
        else:
            rep.tensors_equal += 1
    for gi, group in enumerate(inputs):
        for f in group:
            for t in f.tensors:
                if t.name in out_names:
                    continue
                b = block_of(t.name)
                if op == "extract" and (b is not None and b < n or b is None and t.name not in SN.SIDECAR_ROOT_TENSORS):
                    why = "trunk tensor (not in a sidecar)"
                elif op == "strip" and b is not None and b >= n:
                    why = "MTP block tensor (not in a trunk)"
                elif op == "graft" and gi == 1 and t.name in where and where[t.name] is not f:
                    why = "the sidecar's copy of a trunk tensor"
                    if not _equal_bytes(where[t.name], t.name, f, t.name):
                        rep.problems.append(f"tensor {t.name}: the sidecar's copy differs from the trunk's")
                else:
                    rep.problems.append(f"tensor {t.name} of {f.path}: left out by no rule")
                    continue
                rep.tensors_left_out[why] = rep.tensors_left_out.get(why, 0) + 1
    # ---------------------------------------------------------------------------------------- KVs
    bc, nx = SC.BLOCK_COUNT.format(arch=arch), SN.NEXTN_PREDICT_LAYERS.format(arch=arch)
    per_layer = set(per_layer_keys(arch))
    side = inputs[1][0] if op == "graft" else None
    for name in first.kvs:
        if name in SN.SPLIT_KEYS:
            _expect_absent(rep, out, name, "split metadata (the output is one file)")
        elif op == "strip" and name == nx:
            _expect_absent(rep, out, name, "a trunk has no MTP blocks")
        elif op == "extract" and sidecar_drops(arch, name):
            _expect_absent(rep, out, name, "upstream's --mtp leaves it out of a sidecar")
        elif name not in out.kvs and name == SN.GENERAL_FINETUNE:
            rep.dropped[name] = "upstream's name rule for the written tensors gives no finetune"
        elif name not in out.kvs:
            rep.problems.append(f"KV {name}: dropped by no rule")
        elif first.record_bytes(name) == out.record_bytes(name):
            rep.kept.append(name)
        elif name == bc:
            want = src_layout.n if op == "strip" else (side.value(bc) if side is not None else None)
            _expect_value(rep, out, name, want, "block count of the written blocks")
        elif name in per_layer and first.kvs[name].type == VT.ARRAY:
            got = out.value(name)
            want = first.value(name)[:n] if op == "strip" else (side.value(name) if side is not None else None)
            ok = got == want and (op == "strip" or got[: len(first.value(name))] == first.value(name))
            _record(rep, name, ok, "per-layer array over the written blocks")
        elif name in (SC.GENERAL_SIZE_LABEL, SN.GENERAL_FINETUNE):
            rep.changed[name] = f"upstream's size / name rule for the written tensors ({first.value(name)} -> " \
                                f"{out.value(name)})"
        else:
            rep.problems.append(f"KV {name}: changed by no rule")
    for name in out.kvs:
        if name in first.kvs:
            continue
        if op == "graft" and name == nx and side is not None and side.record_bytes(nx) == out.record_bytes(nx):
            rep.added[name] = "the MTP block count, from the sidecar"
        elif name == SN.GENERAL_FINETUNE:
            rep.added[name] = f"upstream's name rule for the written tensors ('{out.value(name)}')"
        else:
            rep.problems.append(f"KV {name}: in the output, added by no rule")
    return rep


def _expect_absent(rep: CutReport, out: GGUFFile, name: str, why: str) -> None:
    if name in out.kvs:
        rep.problems.append(f"KV {name}: should be dropped ({why})")
    else:
        rep.dropped[name] = why


def _expect_value(rep: CutReport, out: GGUFFile, name: str, want: Any, why: str) -> None:
    _record(rep, name, out.value(name) == want, f"{why} ({want})")


def _record(rep: CutReport, name: str, ok: bool, why: str) -> None:
    if ok:
        rep.changed[name] = why
    else:
        rep.problems.append(f"KV {name}: changed, but not as the rule says ({why})")
