"""Human output of ``hf2gguf`` (the dry-run plan, labelled notes and warnings, the summary), its JSON document,
and ``check``'s findings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from .. import schema as S
from ..gguffile.packed import PackedStrings
from .base import Col, Row, emit_table, human_bytes, line, plural, size_text, text
from .gguf import value_preview

if TYPE_CHECKING:
    from ..findings import Finding
    from ..hf2gguf.results import ConvertResult
    from ..plan import KV, Plan

#: array items shown in a dry run and in the JSON plan
PLAN_PREVIEW = 8
LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def kv_preview(kv: KV, limit: int = PLAN_PREVIEW) -> Any:
    """A KV value for the JSON plan: long arrays shortened to their first items and a count."""
    v = kv.value
    if isinstance(v, (list, tuple, PackedStrings)) and len(v) > limit:
        return {"first": list(v[:limit]), "count": len(v)}
    if isinstance(v, str) and len(v) > 120:
        return v[:117] + "..."
    return list(v) if isinstance(v, PackedStrings) else v


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """A plan as JSON-able data (arrays shortened)."""
    return {
        "arch": plan.arch,
        "kvs": [{"name": k.name, "type": k.describe(), "value": kv_preview(k)} for k in plan.kvs],
        "tensors": [{"name": t.name, "type": t.ggml_type.name, "ne": list(t.ne), "nbytes": t.nbytes, "source": t.source,
                     "origin": t.origin, "transform": t.transform_name} for t in plan.tensors],
        "tensor_bytes": plan.total_tensor_bytes(),
        "notes": plan.notes,
    }


def reference_to_dict(plan: Plan | None = None) -> dict[str, Any]:
    """The upstream converter whose output our files match (``reference`` in the JSON documents); ``differs``
    names what the file holds on purpose that upstream's does not (empty: byte-identical to upstream's)."""
    return {"converter": "llama.cpp convert_hf_to_gguf.py", "revision": S.UPSTREAM_REFERENCE,
            "date": S.UPSTREAM_REFERENCE_DATE, "differs": list(plan.differs_from_upstream) if plan else []}


def reference_line(plan: Plan | None = None) -> str:
    """The summary's last line: which upstream release the file matches, and what it adds on purpose."""
    ref = f"{S.UPSTREAM_REFERENCE_NAME} ({S.UPSTREAM_REFERENCE_DATE}) convert_hf_to_gguf.py"
    if plan is not None and plan.differs_from_upstream:
        return (f"matches {ref} except {', '.join(plan.differs_from_upstream)} (written on purpose, see above; "
                "--match-upstream writes upstream's bytes)")
    return f"matches {ref}"


def conversion_to_dict(r: ConvertResult) -> dict[str, Any]:
    """The ``hf2gguf --json`` document (schema in docs/json-schemas.md)."""
    return {"output": str(r.path) if r.path else None, "dry_run": r.dry_run, "family": r.family,
            "reference": reference_to_dict(r.plan), "architecture": r.architecture, "outtype": r.outtype,
            "bytes_written": r.bytes_written, "seconds": round(r.seconds, 3), "write_seconds": round(r.write_seconds, 3),
            "findings": [f.to_dict() for f in r.findings], "spec_type": r.spec_type, "plan": plan_to_dict(r.plan)}


def _entry(kv: KV) -> dict[str, Any]:
    """A plan KV as an inspect KV entry, so a dry run shows values exactly as ``inspect`` does."""
    v = kv.value
    if isinstance(v, (list, tuple, PackedStrings)):  # (a vocabulary: only the items shown are decoded)
        return {"type": kv.describe(), "value": list(v[:PLAN_PREVIEW]), "count": len(v), "truncated": len(v) > PLAN_PREVIEW}
    return {"type": kv.describe(), "value": v}


def render_plan(plan: Plan, console: Console) -> None:
    """The dry-run plan: a metadata and a tensor table, titled and shown as ``inspect`` shows a file."""
    emit_table(console, f"Metadata ({len(plan.kvs)} KVs)", [Col("key"), Col("type"), Col("value", wrap=True)],
               [[text(k.name, limit=100), k.describe(), Text(value_preview(_entry(k)))] for k in plan.kvs])
    with_transform = any(t.transform is not None for t in plan.tensors)
    cols = [Col("name"), Col("type"), Col("ne (ggml)"), Col("bytes", "right"), Col("source", wrap=True),
            *([Col("transform", drop=1)] if with_transform else [])]
    rows: list[Row] = []
    for t in plan.tensors:
        src = t.source if t.origin == "draft" else f"{t.origin}:{t.source or ''}"
        rows.append([text(t.name, limit=100), t.ggml_type.name, "[" + ", ".join(map(str, t.ne)) + "]", human_bytes(t.nbytes),
                     text(src or "", limit=200), *([t.transform_name or ""] if with_transform else [])])
    emit_table(console, f"Tensors ({len(plan.tensors)})", cols, rows)


def render_findings_lines(findings: list[Finding], console: Console) -> None:
    """One labelled line per finding: ``note: …`` / ``warning: …`` (subject, message, rule)."""
    for f in findings:
        where = Text() if f.level == "note" else Text.assemble(" (", text(f.subject), ", rule ", text(f.rule), ")")
        line(console, (f"{f.level}:", LEVEL_STYLES.get(f.level, "")), " ", text(f.message, limit=2000), where)


def render_conversion(r: ConvertResult, console: Console) -> None:
    """Human summary of a conversion: a dry run's plan first, then the labelled notes and warnings, then the
    result line with the plan's details indented under it."""
    if r.dry_run:
        render_plan(r.plan, console)
    render_findings_lines(r.findings, console)
    what = f"{r.plan.arch}, {plural(len(r.plan.kvs), 'key')}, {plural(len(r.plan.tensors), 'tensor')}"
    if r.dry_run:
        line(console, ("dry run", "bold"), ": would write ", text(r.path, limit=4096),
             f": {what}, {size_text(r.plan.total_tensor_bytes())} of tensor data")
    else:
        rate = r.bytes_written / r.write_seconds / (1 << 20) if r.write_seconds else 0.0  # MiB/s, as sizes are
        line(console, ("wrote", "bold green"), " ", text(r.path, limit=4096), f": {what}, {size_text(r.bytes_written)},"
             f" converted in {r.seconds:.2f} s (start-up not counted); writing took {r.write_seconds:.2f} s ({rate:.1f} MiB/s)")
    for note in r.notes:
        line(console, "  ", text(note, limit=400))
    line(console, "  ", reference_line(r.plan))


# ============================================================================================== check
def render_findings(file: str | Path, arch: str, findings: list[Finding], console: Console) -> None:
    """Human output of ``check``: ``ok`` in one line, or a table of findings and a count."""
    if not findings:
        line(console, ("ok", "bold green"), ": ", text(file, limit=4096), " (", text(arch), ") passes every loader rule")
        return
    cols = [Col("level"), Col("key / tensor"), Col("rule", drop=1), Col("message", wrap=True)]
    rows: list[Row] = [[Text(f.level, style=LEVEL_STYLES.get(f.level, "")), text(f.subject), text(f.rule),
                        text(f.message, limit=1000)] for f in findings]
    emit_table(console, Text.assemble(text(file, limit=4096), " (", text(arch), ")"), cols, rows)
    n = sum(f.level == "error" for f in findings)
    notes = sum(f.level == "note" for f in findings)
    line(console, f"{plural(n, 'error')}, {plural(len(findings) - n - notes, 'warning')}"
         + (f", {plural(notes, 'note')}" if notes else ""))
