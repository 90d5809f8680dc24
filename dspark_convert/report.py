"""Rendering of ``hf2gguf`` results and ``check`` findings, for people (Rich) and scripts (dicts for JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from .check import Finding
from .plan import KV, Plan

if TYPE_CHECKING:
    from .conversion import ConvertResult


def kv_preview(kv: KV, limit: int = 8) -> Any:
    """A KV value for display: long arrays shortened to their first items and a count."""
    v = kv.value
    if isinstance(v, (list, tuple)) and len(v) > limit:
        return {"first": list(v[:limit]), "count": len(v)}
    if isinstance(v, str) and len(v) > 120:
        return v[:117] + "..."
    return v


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


def conversion_to_dict(r: ConvertResult) -> dict[str, Any]:
    """The ``hf2gguf --json`` document (schema in docs/json-schemas.md)."""
    return {"output": str(r.path) if r.path else None, "dry_run": r.dry_run, "family": r.family, "outtype": r.outtype,
            "bytes_written": r.bytes_written, "seconds": round(r.seconds, 3),
            "findings": [f.to_dict() for f in r.findings], "plan": plan_to_dict(r.plan)}


def render_plan(plan: Plan, console: Console) -> None:
    kt = Table(title="metadata", show_lines=False)
    for col in ("key", "type", "value"):
        kt.add_column(col, overflow="fold")
    for k in plan.kvs:
        kt.add_row(k.name, k.describe(), str(kv_preview(k)))
    console.print(kt)
    tt = Table(title="tensors")
    for col in ("name", "type", "ggml shape", "bytes", "source", "transform"):
        tt.add_column(col, overflow="fold")
    for t in plan.tensors:
        src = t.source if t.origin == "draft" else f"{t.origin}:{t.source or ''}"
        tt.add_row(t.name, t.ggml_type.name, str(list(t.ne)), f"{t.nbytes:,}", src or "", t.transform_name or "")
    console.print(tt)


def render_conversion(r: ConvertResult, console: Console) -> None:
    """Human summary of a conversion; a dry run prints the whole plan."""
    if r.dry_run:
        render_plan(r.plan, console)
    for note in r.notes:
        console.print(f"  {note}")
    for f in r.findings:
        console.print(f"  [yellow]warning[/]: {f}")
    n, size = len(r.plan.tensors), r.plan.total_tensor_bytes()
    if r.dry_run:
        console.print(f"[bold]dry run[/]: would write {r.path} ({r.plan.arch}, {len(r.plan.kvs)} keys, {n} tensors, {size:,} tensor bytes)")
    else:
        mbps = r.bytes_written / r.seconds / 1e6 if r.seconds else 0.0
        console.print(f"[bold green]wrote[/] {r.path} ({r.plan.arch}, {len(r.plan.kvs)} keys, {n} tensors, "
                      f"{r.bytes_written:,} bytes in {r.seconds:.2f} s, {mbps:.0f} MB/s)")


def render_findings(file: Path, arch: str, findings: list[Finding], console: Console) -> None:
    """Human output of ``check``."""
    if not findings:
        console.print(f"[bold green]ok[/]: {file} ({arch}) passes every loader rule")
        return
    t = Table(title=f"{file} ({arch})")
    for col in ("level", "key / tensor", "rule", "message"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(f"[red]{f.level}[/]" if f.level == "error" else f"[yellow]{f.level}[/]", f.subject, f.rule, f.message)
    console.print(t)
    n = sum(f.level == "error" for f in findings)
    console.print(f"{n} error(s), {len(findings) - n} warning(s)")
