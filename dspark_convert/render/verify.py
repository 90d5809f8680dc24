"""Human output of ``verify``: the outputs table, metadata mismatches (or a count of matches), notes, verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from .base import Col, Row, emit_table, line, text

if TYPE_CHECKING:
    from ..verify import VerifyReport


def render_verify(report: VerifyReport, console: Console) -> None:
    """Print a :class:`~dspark_convert.verify.VerifyReport` (shapes and exact values: ``--json``)."""
    title = Text.assemble("verify ", text(report.gguf, limit=4096), f" ({report.family}, {report.layout} layout)")
    cols = [Col("output", wrap=True), Col("NMSE (dB)", "right"), Col("max abs", "right"), Col("argmax", "right"),
            Col("grade"), Col("result")]
    rows: list[Row] = []
    for c in report.outputs:
        agree = "" if c.total is None else f"{c.agree}/{c.total}" + (f" ({c.near_ties} tie)" if c.near_ties else "")
        nmse = "" if c.nmse is None else f"{c.nmse:.1e} ({c.nmse_db:.0f})"
        rows.append([text(c.name), nmse, "" if c.max_abs is None else f"{c.max_abs:.2g}", agree,
                     c.grade.replace("essentially identical", "identical"),
                     Text("PASS", style="green") if c.passed else Text("FAIL", style="bold red")])
    emit_table(console, title, cols, rows)
    for c in report.outputs:
        if c.detail:
            line(console, "  ", text(c.name), ": ", text(c.detail, limit=1000))
    bad = [m for m in report.metadata if not m.passed]
    if bad:
        emit_table(console, "metadata mismatches", [Col("key"), Col("GGUF", wrap=True), Col("expected from the HF config", wrap=True)],
                   [[text(m.key), text(repr(m.gguf)), text(repr(m.expected))] for m in bad])
    else:
        line(console, f"metadata: {len(report.metadata)} values match the HF config")
    if report.hparams.get("target_layers") is not None:
        line(console, text(f"target layers (input-of-layer ids): {report.hparams['target_layers']}"))
    for n in report.notes:
        line(console, ("note:", "cyan"), " ", text(n, limit=1000))
    line(console, Text("PASS", style="bold green") if report.passed else Text("FAIL", style="bold red"))
