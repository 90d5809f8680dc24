"""Human output of ``bench``: what ran, one row per draft (lossless, acceptance, mean accepted length, tokens per
second, speed-up), acceptance by draft position as bars, and the same bars as an SVG picture (:func:`bench_svg`,
written by this module: no plotting library)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html import escape
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from .base import Col, Row, emit_table, human_bytes, line, make_console, text

if TYPE_CHECKING:
    from ..llamacpp.bench import BenchReport, Run

#: the width of a full bar, in terminal cells
BAR = 32
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(rate: float, width: int = BAR) -> str:
    """``rate`` (0..1) as a bar of ``width`` cells, in eighths of a cell.

    Example:
        >>> bar(0.5, 8), bar(1.0, 4), bar(0.0, 4)
        ('████    ', '████', '    ')
    """
    eighths = round(max(0.0, min(1.0, rate)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(width)


def _f(x: float | None, fmt: str = ".3f", none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _lossless(run: Run) -> Text:
    if run.error is not None:
        return Text("error", style="bold red")
    if run.lossless is None:
        return Text("-")
    return Text("yes", style="green") if run.lossless else Text("NO", style="bold red")


def render_bench(report: BenchReport, console: Console) -> None:
    """Print a :class:`~dspark_convert.llamacpp.bench.BenchReport`."""
    s, t = report.settings, report.target
    line(console, "llama-server: ", text(report.binary.path, limit=4096), f" ({report.binary.found_by}; ",
         text(report.binary.version, limit=200), ")")
    line(console, "target: ", text(t.path.name, limit=4096), f" ({t.arch}, {t.outtype}, {human_bytes(t.size)})",
         *((" from ", text(t.source, limit=4096)) if t.source else ()))
    kinds = sorted({p.kind for p in report.prompts if p.kind})
    line(console, f"prompts: {len(report.prompts)}" + (f" ({', '.join(kinds)})" if kinds else "") +
         f", {s['prompt_format']}; {s['n_predict']} tokens each, greedy; {s['repeat']} round(s); "
         f"ctx {s['ctx_size']}, {s['threads']} threads")
    p = report.plain
    line(console, f"plain: {_f(p.tokens_per_second, '.1f')} tokens/s ({p.predicted} tokens generated)")
    rows: list[Row] = []
    for d in report.drafts:
        assert d.file is not None
        sp = d.speedup(p)
        rows.append([text(d.file.path.name, limit=200), text(d.file.arch or "?"), text(d.file.outtype or "?"),
                     text(d.spec_type or "?"), str(d.n_max), _lossless(d), _f(d.acceptance),
                     _f(d.mean_accepted, ".2f"), _f(d.tokens_per_second, ".1f"),
                     Text(_f(sp, ".2f") + "x" if sp is not None else "-",
                          style="" if sp is None else "green" if sp > 1.0 else "red")])
    emit_table(console, "Drafts", [Col("draft", wrap=True), Col("arch", drop=2), Col("outtype", drop=3),
                                   Col("spec type", drop=1), Col("n-max", "right", drop=1), Col("lossless"),
                                   Col("accept", "right"), Col("accepted/step", "right"), Col("tokens/s", "right"),
                                   Col("speed-up", "right")], rows)
    for d in report.drafts:
        pos = d.by_position()
        if not pos:
            continue
        assert d.file is not None
        line(console, ("acceptance by draft position", "bold"), " (accepted / reached) ",
             text(d.file.path.name, limit=400))
        for k, (a, n) in enumerate(pos):
            rate = a / n if n else None
            line(console, f"  {k:>2} ", (bar(rate or 0.0), "cyan"), f" {_f(rate, '.3f', '  -  ')}  {a}/{n}")
        console.print()
    for d in report.drafts:
        name = d.file.path.name if d.file else "?"
        if d.error is not None:
            line(console, ("error:", "bold red"), " ", text(name), ": ", text(d.error, limit=4000))
        for m in d.mismatches[:5]:
            line(console, ("NOT LOSSLESS:", "bold red"), " ", text(name), f": prompt {m.prompt} (round {m.repeat}) "
                 f"differs from the plain run at generated token {m.index} (plain {m.plain}, with the draft {m.draft})")
        if len(d.mismatches) > 5:
            line(console, ("NOT LOSSLESS:", "bold red"), " ", text(name), f": {len(d.mismatches) - 5} more prompts differ")
    if report.interrupted:
        line(console, ("interrupted:", "bold yellow"), f" {report.interrupted}; the figures above are what was "
             "measured until then")


@contextmanager
def count_progress(enabled: bool, description: str) -> Iterator[Callable[[int, int, str], None] | None]:
    """A Rich progress bar on stderr (requests done of all, what runs now, time left) when stderr is a terminal;
    nothing otherwise. Yields the ``progress(done, total, what)`` callback, or None."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=make_console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"{description} {what}")

        yield update


# ---------------------------------------------------------------------------------------------- SVG
_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")


def bench_svg(report: BenchReport) -> str:
    """Acceptance by draft position (accepted / reached) of every draft as grouped bars, with each draft's overall
    acceptance and speed-up in the legend: an SVG document (text)."""
    drafts = [d for d in report.drafts if d.by_position()]
    npos = max((len(d.by_position()) for d in drafts), default=0)
    left, top, plot_h, right = 56, 40, 240, 20
    group = max(24, 14 * max(1, len(drafts)) + 10)
    plot_w = max(300, npos * group)
    legend_h = 20 * len(drafts) + 10
    title = f"Acceptance by draft position (accepted / reached), target {report.target.path.name}"
    labels = []
    for d in drafts:
        sp = d.speedup(report.plain)
        labels.append(f"{d.file.path.name if d.file else '?'}: acceptance {_f(d.acceptance)}, "
                      f"{_f(d.mean_accepted, '.2f')} accepted/step, speed-up {_f(sp, '.2f')}x"
                      + ("" if d.lossless or d.lossless is None else ", NOT LOSSLESS"))
    text_w = max([len(title) * 8, *(len(x) * 7 + 18 for x in labels)])  # about 7 px a character at 12 px
    width, height = left + max(plot_w, text_w) + right, top + plot_h + 40 + legend_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i in range(6):  # y grid 0, 0.2, ... 1.0
        v = i / 5
        y = top + plot_h - v * plot_h
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.1f}</text>')
    bar_w = (group - 10) / max(1, len(drafts))
    for k in range(npos):
        gx = left + k * group + 5
        out.append(f'<text x="{gx + (group - 10) / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{k}</text>')
        for j, d in enumerate(drafts):
            pos = d.by_position()
            if k >= len(pos) or not pos[k][1]:
                continue
            a, n = pos[k]
            h = a / n * plot_h
            x = gx + j * bar_w
            out.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{max(1.0, bar_w - 1):.1f}" '
                       f'height="{h:.1f}" fill="{_COLOURS[j % len(_COLOURS)]}"><title>{escape(d.file.path.name if d.file else "")}'
                       f' position {k}: {a}/{n}</title></rect>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" text-anchor="middle">draft position</text>')
    for j, label in enumerate(labels):
        y = top + plot_h + 48 + 20 * j
        out.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{_COLOURS[j % len(_COLOURS)]}"/>')
        out.append(f'<text x="{left + 18}" y="{y}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
