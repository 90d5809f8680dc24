"""Human output of ``verify``: the exact-mode table (the verdict) and the first divergence, the quality table
(information), the storage rounding, the tensor accounting, metadata mismatches (or a count of matches), notes, verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from .base import Col, Row, emit_table, line, text

if TYPE_CHECKING:
    from ..reference.compare import OutputCheck
    from ..verify import VerifyReport


def _rows(checks: list[OutputCheck], verdict: bool) -> list[Row]:
    rows: list[Row] = []
    for c in checks:
        agree = "" if c.total is None else f"{c.agree}/{c.total}" + (f" ({c.near_ties} tie)" if c.near_ties else "")
        nmse = "" if c.nmse is None else f"{c.nmse:.1e} ({c.nmse_db:.0f})"
        row: list[str | Text] = [text(c.name), nmse, "" if c.max_abs is None else f"{c.max_abs:.2g}", agree,
                                 c.grade.replace("essentially identical", "identical")]
        if verdict:
            row.append(Text("PASS", style="green") if c.passed else Text("FAIL", style="bold red"))
        rows.append(row)
    return rows


def _cols(verdict: bool) -> list[Col]:
    cols = [Col("component", wrap=True), Col("NMSE (dB)", "right"), Col("max abs", "right", drop=1),
            Col("argmax", "right"), Col("grade")]
    return cols + [Col("result")] if verdict else cols


def render_verify(report: VerifyReport, console: Console) -> None:
    """Print a :class:`~dspark_convert.verify.VerifyReport` (shapes and exact values: ``--json``)."""
    line(console, "verify ", text(report.gguf, limit=4096), f" ({report.family}, {report.layout} layout)")
    emit_table(console, Text.assemble(("exact mode, the verdict", "bold"),
                                      f" (NMSE < {report.bound:.0e} vs the checkpoint as stored)"),
               _cols(True), _rows(report.outputs, True))
    for c in report.outputs:
        if c.detail and not c.passed:
            line(console, "  ", text(c.name), ": ", text(c.detail, limit=1000))
    first = report.first_divergence
    if first is not None:
        case = first["case"]
        where = f" (case {case}, context {report.contexts[case]})" if case is not None and case < len(report.contexts) else ""
        line(console, ("first divergence:", "bold red"), " ", text(first["component"]), where)
        if first["look_at"]:
            line(console, "  look at: ", text(first["look_at"], limit=400))
    if report.quality:
        emit_table(console, Text.assemble(("quality, information only", "bold"), " (vs the unrounded checkpoint)"),
                   _cols(False), _rows(report.quality, False))
    if report.quality_note and not report.quality_note.startswith("GGUF forward vs"):
        line(console, "  ", text(report.quality_note, limit=400))
    if report.storage:
        line(console, "storage rounding applied to the checkpoint: ", ", ".join(
            f"{k} {v['tensors']} tensors ({v['changed']:,} of {v['values']:,} values changed)" for k, v in report.storage.items()))
    acc = report.accounting
    if acc is not None and report.tensors:
        counts = "; ".join(f"{'GGUF' if side == 'gguf' else side} {n['total']}: {n['read_by_forward']} read by a forward, "
                           f"{n['compared']} compared, {n['dropped']} dropped by a rule, {n['unaccounted']} unaccounted"
                           for side, n in report.tensors["counts"].items())
        line(console, Text("tensor accounting: ", style="" if acc.passed else "bold red"), text(counts, limit=400))
        if not acc.passed:
            line(console, "  ", text(acc.detail, limit=2000))
    bad = [m for m in report.metadata if not m.passed]
    if bad:
        emit_table(console, "metadata mismatches", [Col("key"), Col("GGUF", wrap=True), Col("expected from the HF config", wrap=True)],
                   [[text(m.key), text(repr(m.gguf)), text(repr(m.expected))] for m in bad])
    else:
        line(console, f"metadata: {len(report.metadata)} values match the HF config")
    if report.hparams.get("target_layers") is not None:
        line(console, text(f"target layers (input-of-layer ids): {report.hparams['target_layers']}; "
                           f"contexts {report.contexts}, seed {report.seed}", limit=400))
    for n in report.notes:
        line(console, ("note:", "cyan"), " ", text(n, limit=1000))
    line(console, Text("PASS", style="bold green") if report.passed else Text("FAIL", style="bold red"))
