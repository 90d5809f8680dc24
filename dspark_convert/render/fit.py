"""Human output of ``check DRAFT --target TARGET``: both sides, the draft's loader findings (if any), one row per
fit rule (result, the value on each side, the finding) and the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from .base import Col, Row, emit_table, line, num, text

if TYPE_CHECKING:
    from ..fit import FitReport

STATUS_STYLES = {"pass": "green", "fail": "bold red", "info": "cyan", "skip": "dim"}


def fit_value(v: Any) -> str:
    """A rule's draft / target value as one short string (lists in brackets, dicts as ``key value`` pairs)."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {num(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(num(x) for x in v) + "]"
    return v if isinstance(v, str) else num(v)


def render_fit(report: FitReport, console: Console) -> None:
    """Print a :class:`~dspark_convert.fit.FitReport`."""
    d, t = report.draft, report.target
    line(console, "draft:  ", text(d.source, limit=4096), f" ({d.arch}, {d.family})")
    line(console, "target: ", text(t.source, limit=4096), f" ({t.kind}, ", text(t.arch, limit=60), ")")
    for n in report.notes:
        line(console, ("note:", "cyan"), " ", text(n.message, limit=1000))
    if report.loader_findings:
        emit_table(console, "Draft loader rules", [Col("level"), Col("key / tensor"), Col("rule", drop=1),
                                                    Col("message", wrap=True)],
                   [[Text(f.level, style="red" if f.level == "error" else "yellow"), text(f.subject), text(f.rule),
                     text(f.message, limit=1000)] for f in report.loader_findings])
    rows: list[Row] = [[r.id, Text(r.status, style=STATUS_STYLES.get(r.status, "")), text(fit_value(r.draft), limit=120),
                        text(fit_value(r.target), limit=120), text(r.message, limit=1000)] for r in report.results]
    emit_table(console, "Will this draft work with this target?",
               [Col("rule"), Col("result"), Col("draft", wrap=True), Col("target", wrap=True),
                Col("finding", wrap=True)], rows)
    c = report.counts()
    n_err = sum(f.level == "error" for f in report.loader_findings)
    summary = f"{c['pass']} passed, {c['fail']} failed, {c['info']} info, {c['skip']} skipped"
    if n_err:
        summary += f"; {n_err} loader error(s)"
    line(console, ("FITS" if report.ok else "DOES NOT FIT", "bold green" if report.ok else "bold red"), ": ", summary)
