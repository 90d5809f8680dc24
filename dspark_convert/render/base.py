"""The rendering rules shared by every command: literal text, consoles, one-line messages, tables that read at 80
columns and in pipes, the progress bar, strict JSON, and number wording.

One rule for all of it: text that comes from a file, a folder name, a Hub id or the user's own arguments reaches
Rich only inside a :class:`rich.text.Text` (see :func:`text`), never as a markup string, so a hostile value such as
``"[/]oops"`` is shown literally and never parsed; control characters are escaped. The consoles made here also
have markup off, so a plain string that slips through is still printed as it is. Styling is done with Text
styles, never with markup tags.

Tables (:func:`emit_table`) have two forms. On a terminal: a Rich table fitted to its width; columns that matter
least are dropped first when it is too narrow, numbers never wrap, long names and values fold without losing a
character, and a terminal too narrow for whole words gets each row stacked on its own lines instead. Anywhere else (a pipe, a file): plain aligned text, one row per line, nothing cut or wrapped, so that
``grep`` finds whole names.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..gguffile.reader import safe_text
from ..streams import STDOUT
from ..units import human_bytes as human_bytes  # the one number format (re-exported for the render modules)
from ..units import size_text as size_text


# ============================================================================================== text and consoles
def text(value: object, style: str = "", limit: int = 200) -> Text:
    """``value`` (file, folder or user text) as a literal :class:`Text`: never parsed as markup, control
    characters escaped, cut to ``limit`` characters.

    Example:
        >>> text("[/]oops").plain
        '[/]oops'
    """
    return Text(safe_text(str(value), limit), style=style)




def make_console(stderr: bool = False, width: int | None = None) -> Console:
    """The console every command prints through: markup, emoji codes and highlighting off, so only ``Text``
    styles colour the output and no file-derived string can be parsed. Standard output goes through
    :data:`STDOUT` (a closed pipe ends the output quietly, a full disk is one error line)."""
    return Console(stderr=stderr, file=None if stderr else STDOUT, markup=False, emoji=False, highlight=False,  # type: ignore[arg-type]
                   width=width)


def line(console: Console, *parts: str | Text | tuple[str, str]) -> None:
    """One logical line: on a terminal it wraps at the width between words, elsewhere it stays one line
    (``soft_wrap``). An indented line (an item under a heading) wraps with a hanging indent, two columns deeper than
    its own, so that its continuation never starts at the margin."""
    t = Text.assemble(*parts)
    indent = len(t.plain) - len(t.plain.lstrip(" "))
    if not console.is_terminal or not indent or cell_len(t.plain) <= console.width:
        console.print(t, soft_wrap=not console.is_terminal)
        return
    hang = indent + 2
    body = t[indent:]
    rows = body.wrap(console, max(8, console.width - hang))
    for i, row in enumerate(rows):
        row.rstrip()
        console.print(Text(" " * (indent if i == 0 else hang)) + row, soft_wrap=True, crop=False)


def print_error(message: str, con: Console | None = None) -> None:
    """One ``error: MESSAGE`` line on stderr (the message is printed literally, however long)."""
    (con or make_console(stderr=True)).print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def print_warning(message: str, con: Console | None = None) -> None:
    """One ``warning: MESSAGE`` line on stderr."""
    (con or make_console(stderr=True)).print(Text.assemble(("warning:", "yellow"), " ", message), soft_wrap=True)


@contextmanager
def byte_progress(enabled: bool, description: str) -> Iterator[Callable[[int, int], None] | None]:
    """A Rich progress bar on stderr (bytes, write rate, ETA) when stderr is a terminal; nothing otherwise.

    Yields the ``progress(done, total)`` callback, or None when there is no bar.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn

    class Done(ProgressColumn):
        """Bytes done of the total, in the one number format's units (KiB, MiB, GiB)."""

        def render(self, task: Task) -> Text:
            total = human_bytes(int(task.total)) if task.total is not None else "?"
            return Text(f"{human_bytes(int(task.completed))}/{total}", style="progress.download", no_wrap=True)

    class Rate(ProgressColumn):
        """The transfer rate, in the same units per second."""

        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{human_bytes(int(speed))}/s" if speed else "?", style="progress.data.speed", no_wrap=True)

    console = make_console(stderr=True)
    # the text columns take up to ~46 cells ("1023.9 MiB/1023.9 MiB 1023.9 MiB/s 0:00:00" and the gaps); the bar gets
    # what is left (never so little that a number is cut), and on a very narrow terminal gives way, with the rate
    room = console.width - cell_len(description) - 46
    columns: list[ProgressColumn] = [TextColumn("{task.description}", markup=False, style="progress.description")]
    columns += [BarColumn(bar_width=min(40, room)), Done(), Rate()] if room >= 5 else [Done()]
    # markup=False: a description naming a file or repo is shown as it is
    with Progress(*columns, TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# ============================================================================================== tables
@dataclass(frozen=True)
class Col:
    """A table column: ``wrap`` columns (names, values) may fold; ``drop`` > 0 columns are left out on a narrow
    terminal, lowest number first."""

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = False
    drop: int = 0
    #: a ``wrap`` column that folds only when the table cannot fit otherwise, and then no narrower than it must so
    #: that the other ``wrap`` columns keep ``room`` columns each (a metadata key gives way to its value)
    last: bool = False
    room: int = 20


@dataclass(frozen=True)
class Section:
    """A group header row (terminal form only, e.g. ``blk.3``); the plain form prints full names instead."""

    label: str


Row = Sequence[str | Text]


def emit_table(console: Console, title: str | Text, cols: Sequence[Col], rows: Sequence[Row | Section],
               plain_rows: Sequence[Row] | None = None, header: bool = True) -> None:
    """Print a table: fitted Rich table on a terminal, aligned plain text elsewhere (``plain_rows`` if given,
    else ``rows`` without their sections)."""
    if not console.is_terminal:
        _plain(console, title, cols, plain_rows if plain_rows is not None else [r for r in rows if not isinstance(r, Section)],
               header)
        return
    keep = list(range(len(cols)))
    for drop in sorted({c.drop for c in cols if c.drop}):
        if _natural_width(console, _rich_table(title, cols, rows, keep, header)) <= console.width:
            break
        keep = [i for i in keep if cols[i].drop != drop]
    if _readable_width(console, title, cols, rows, keep, header) > console.width:
        # stacked rows have room again for the text columns dropped to fit; a dropped number column stays out
        # (without its header, a bare number would not say what it is)
        _stacked(console, title, cols, rows, [i for i, c in enumerate(cols) if i in keep or c.justify == "left"],
                 header)
        return
    console.print(_rich_table(title, cols, rows, keep, header, _last_widths(console, title, cols, rows, keep, header)))


#: the narrowest a ``wrap`` column may fold to before the table is printed stacked instead (a longer word folds)
WORD = 16


def _words(cell: str | Text) -> list[str]:
    return (cell.plain if isinstance(cell, Text) else str(cell)).split()


def _readable_width(console: Console, title: str | Text, cols: Sequence[Col], rows: Sequence[Row | Section],
                    keep: list[int], header: bool) -> int:
    """The narrowest this table reads as a table: every word whole (a ``wrap`` column no narrower than its longest
    word, up to :data:`WORD`; ``room`` when a ``last`` column shares the table), other columns and ``last``
    columns whole. A terminal narrower than this gets the stacked form."""
    data = [r for r in rows if not isinstance(r, Section)]
    natural = _natural_width(console, _rich_table(title, cols, rows, keep, header))
    widths = {i: max([len(cols[i].header) if header else 0, *(_cell_width(r[i]) for r in data)]) for i in keep}
    overhead = natural - sum(widths.values())
    shared = any(cols[i].last for i in keep)
    total = overhead
    for i in keep:
        c = cols[i]
        if c.wrap and not c.last:
            word = max([len(c.header) if header else 0, *(cell_len(w) for r in data for w in _words(r[i]))])
            total += min(widths[i], c.room if shared else min(word, WORD))
        else:
            total += widths[i]
    return total


def _as_text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def _stacked(console: Console, title: str | Text, cols: Sequence[Col], rows: Sequence[Row | Section],
             keep: list[int], header: bool) -> None:
    """The table for a terminal too narrow for it: a row's first column and its other unwrapped cells on one
    line (moving to an indented line when the next one does not fit), then each ``wrap`` cell on its own indented
    line, labelled with its column's header; words stay whole, only a word longer than the line folds."""
    console.print(title if isinstance(title, Text) else Text(title, style="bold"))
    for r in rows:
        if isinstance(r, Section):
            console.print(Text(r.label, style="bold magenta"))
            continue
        inline = [keep[0], *(i for i in keep[1:] if not cols[i].wrap)]
        out = Text(" ")
        for i in inline:
            cell = _as_text(r[i])
            if not cell.plain:
                continue
            if out.plain.strip() and cell_len(out.plain) + 2 + cell_len(cell.plain) > console.width:
                console.print(out, overflow="fold")
                out = Text("   ")
            elif out.plain.strip():
                out.append("  ")
            out.append_text(cell)
        console.print(out, overflow="fold")
        for i in keep[1:]:
            if not cols[i].wrap:
                continue
            grid = Table.grid()
            grid.add_column(width=3, no_wrap=True)
            grid.add_column(overflow="fold")
            cell = _as_text(r[i])
            grid.add_row("", Text.assemble((f"{cols[i].header}: ", "dim"), cell) if header else cell)
            console.print(grid)
    console.print()


def _cell_width(cell: str | Text) -> int:
    return max((cell_len(ln) for ln in (cell.plain if isinstance(cell, Text) else str(cell)).split("\n")), default=0)


def _last_widths(console: Console, title: str | Text, cols: Sequence[Col], rows: Sequence[Row | Section],
                 keep: list[int], header: bool) -> dict[int, int]:
    """The widths the ``last`` columns fold at on this console (none when the table fits as it is)."""
    natural = _natural_width(console, _rich_table(title, cols, rows, keep, header))
    if natural <= console.width or not any(cols[i].last for i in keep):
        return {}
    data = [r for r in rows if not isinstance(r, Section)]
    widths = {i: max([len(cols[i].header) if header else 0, *(_cell_width(r[i]) for r in data)]) for i in keep}
    overhead = natural - sum(widths.values())
    others = sum(min(w, cols[i].room) if cols[i].wrap else w for i, w in widths.items() if not cols[i].last)
    last = [i for i in keep if cols[i].last]
    share = max(8, (console.width - overhead - others) // len(last))
    return {i: min(widths[i], share) for i in last}


def _natural_width(console: Console, table: Table) -> int:
    """The width ``table`` takes when nothing wraps (``console.measure`` is capped at the console width)."""
    return Measurement.get(console, console.options.update(width=1 << 20, max_width=1 << 20), table).maximum


def _rich_table(title: str | Text, cols: Sequence[Col], rows: Sequence[Row | Section], keep: list[int],
                header: bool, last: dict[int, int] | None = None) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
              show_header=header)
    for i in keep:
        c = cols[i]
        if c.last:  # whole unless ``last`` says how narrow it must fold
            width = (last or {}).get(i)
            t.add_column(c.header, justify=c.justify, no_wrap=width is None, overflow="fold", width=width)
            continue
        t.add_column(c.header, justify=c.justify, no_wrap=not c.wrap, overflow="fold",
                     min_width=None if c.wrap else len(c.header))
    first = True
    for r in rows:
        if isinstance(r, Section):
            if not first:
                t.add_section()
            t.add_row(Text(r.label, style="bold magenta"))
        else:
            t.add_row(*(r[i] for i in keep))
        first = False
    return t


def _plain(console: Console, title: str | Text, cols: Sequence[Col], rows: Sequence[Row], header: bool) -> None:
    cells = [*([[c.header for c in cols]] if header else []),
             *[[x.plain if isinstance(x, Text) else str(x) for x in r] for r in rows]]
    if not cells:
        cells = [[""] * len(cols)]
    widths = [max(cell_len(r[i]) for r in cells) for i in range(len(cols))]
    console.print(title if isinstance(title, Text) else Text(title), soft_wrap=True)
    for r in cells:
        pads = [" " * (w - cell_len(v)) for v, w in zip(r, widths, strict=True)]
        parts = [p + v if c.justify == "right" else v + p for v, p, c in zip(r, pads, cols, strict=True)]
        console.print(Text("  ".join(parts).rstrip()), soft_wrap=True)
    console.print()


# ============================================================================================== JSON
def jsonable(obj: Any) -> Any:
    """``obj`` with non-finite floats replaced by the strings ``"nan"``, ``"inf"``, ``"-inf"`` (strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def dumps_json(obj: Any) -> str:
    """Strict, indented JSON (UTF-8 text kept as is).

    Example:
        >>> dumps_json({"nmse": float("inf")})
        '{\\n  "nmse": "inf"\\n}'
    """
    return json.dumps(jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False)


# ============================================================================================== numbers and words
def human_count(n: int) -> str:
    """``1234567`` -> ``'1.23M'``."""
    for div, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            return f"{n / div:.2f}{suffix}"
    return str(n)


def count_text(n: int) -> str:
    """``128`` -> ``'128'``; ``1234567`` -> ``'1.23M (1,234,567)'``."""
    short = human_count(n)
    return short if short == str(n) else f"{short} ({n:,})"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``plural(1, "tensor")`` -> ``'1 tensor'``; ``plural(2, "tensor")`` -> ``'2 tensors'``."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def num(x: Any) -> str:
    """A number for a table cell: floats to 6 significant digits, None as ``-``."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)
