from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .gguffile.reader import safe_text

if TYPE_CHECKING:
    from .check import Finding
    from .conversion import ConvertResult
    from .plan import KV, Plan
    from .verify import VerifyReport

_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")


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
    styles colour the output and no file-derived string can be parsed."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, width=width)


def print_error(message: str, con: Console | None = None) -> None:
    """One ``error: MESSAGE`` line on stderr (the message is printed literally, however long)."""
    (con or make_console(stderr=True)).print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def print_warning(message: str, con: Console | None = None) -> None:
    """One ``warning: MESSAGE`` line on stderr."""
    (con or make_console(stderr=True)).print(Text.assemble(("warning:", "yellow"), " ", message), soft_wrap=True)


@contextmanager
def byte_progress(enabled: bool, description: str) -> Iterator[Callable[[int, int], None] | None]:
    """A Rich progress bar on stderr (bytes, throughput, ETA) when stderr is a terminal; nothing otherwise.

    Yields the ``progress(done, total)`` callback, or None when there is no bar.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    # markup=False: a description naming a file or repo is shown as it is
    with Progress(TextColumn("{task.description}", markup=False, style="progress.description"), BarColumn(),
                  DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(), console=make_console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


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


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``'1.5 KiB'``; None -> ``'?'``."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def human_count(n: int) -> str:
    """``1234567`` -> ``'1.23M'``."""
    for div, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            return f"{n / div:.2f}{suffix}"
    return str(n)


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def value_preview(entry: dict[str, Any], width: int = 70) -> str:
    """One-line preview of an inspect KV entry (arrays: first items and the count)."""
    value = entry.get("value")
    if "count" in entry:
        items = ", ".join(repr(v) if isinstance(v, str) else _num(v) for v in value or [])
        more = ", ..." if entry.get("truncated") else ""
        return safe_text(f"[{items}{more}] ({entry['count']} items)", width)
    return safe_text(repr(value) if isinstance(value, str) else _num(value), width)


def _shape(dims: list[int]) -> str:
    """numpy shape as a tuple: ``(4096, 64)``, ``(64,)``."""
    return str(tuple(dims))


def _ne(dims: list[int]) -> str:
    """ggml ne as a list: ``[64, 4096]``."""
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _summary_table(info: dict[str, Any]) -> Table:
    t = Table(title="Summary", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    rows = [
        ("file", info["file"]), ("size", f"{human_bytes(info['size'])} ({info['size']} bytes)"),
        ("GGUF version", str(info["version"])), ("alignment", str(info["alignment"])),
        ("data offset", str(info["data_offset"])), ("KVs", str(info["kv_count"])),
        ("tensors", str(info["tensor_count"])), ("arch", str(info["arch"])),
        ("parameters", f"{human_count(info['n_params'])} ({info['n_params']})"),
        ("tensor data", human_bytes(info["tensor_bytes"])),
    ]
    for type_name, e in info["by_type"].items():
        rows.append((f"  {type_name}", f"{e['tensors']} tensors, {human_count(e['n_elements'])} elements, "
                                       f"{human_bytes(e['nbytes'])}"))
    tok = info.get("tokenizer")
    if tok:
        rows.append(("tokenizer", f"model={tok['model']} pre={tok['pre']} tokens={tok['n_tokens']} "
                                  f"merges={tok['n_merges']} chat_template={tok['chat_template']}"))
        for kind, sp in tok["special"].items():
            shown = repr(sp["token"]) if sp["token"] is not None else "(out of range)"
            rows.append((f"  {kind}", f"{sp['id']} {shown}"))
    for key, value in rows:
        t.add_row(key, text(value))
    return t


def _kv_table(kvs: dict[str, dict[str, Any]]) -> Table:
    t = Table(title=f"Metadata ({len(kvs)} KVs)", title_justify="left")
    t.add_column("key", style="cyan", no_wrap=True)
    t.add_column("type")
    t.add_column("value", overflow="fold")
    for name, e in kvs.items():
        t.add_row(text(name, limit=100), e["type"], Text(value_preview(e)))
    return t


def _grouped(rows: list[dict[str, Any]]) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    """(new group header or None, display name, row): one group per ``blk.N``, globals on their own."""
    group = None
    for r in rows:
        m = _BLK.match(r["name"])
        g = f"blk.{m.group(1)}" if m else ""
        yield (g if g != group else None), ("  " + m.group(2) if m else r["name"]), r
        group = g


def _tensor_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title=f"Tensors ({len(rows)})", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("type", no_wrap=True)
    t.add_column("shape (numpy)", no_wrap=True)
    t.add_column("ne (ggml)", no_wrap=True)
    for col in ("elements", "bytes", "offset"):
        t.add_column(col, justify="right")
    first = True
    for header, name, r in _grouped(rows):
        if header is not None:
            if not first:
                t.add_section()
            if header:
                t.add_row(Text(header, style="bold magenta"))
        first = False
        style = "red" if r["type"].startswith("UNKNOWN") else ""
        t.add_row(text(name, limit=60), Text(r["type"], style=style), _shape(r["shape"]), _ne(r["ne"]),
                  human_count(r["n_elements"]), human_bytes(r["nbytes"]), str(r["offset"]))
    return t


def _stats_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="Tensor statistics (dequantized)", title_justify="left")
    t.add_column("name", no_wrap=True)
    for col in ("min", "max", "mean", "std", "NaN", "Inf"):
        t.add_column(col, justify="right")
    for r in rows:
        s = r.get("stats")
        if s is None:
            t.add_row(text(r["name"], limit=60), "-", "-", "-", "-", "-", "-")
        else:
            t.add_row(text(r["name"], limit=60), _num(s["min"]), _num(s["max"]), _num(s["mean"]),
                      _num(s["std"]), str(s["nan"]), str(s["inf"]))
    return t


def render_inspect(info: dict[str, Any], console: Console) -> None:
    """Print an :func:`~dspark_convert.inspect.inspect_gguf` result as a metadata table, a tensor table
    (grouped by ``blk.N``) and a summary."""
    console.print(_kv_table(info["kvs"]))
    if info["tensors"] is not None:
        console.print(_tensor_table(info["tensors"]))
        if any("stats" in r for r in info["tensors"]):
            console.print(_stats_table(info["tensors"]))
    console.print(_summary_table(info))


def render_diff(result: dict[str, Any], console: Console) -> None:
    """Print a :func:`~dspark_convert.diff.diff_gguf` result: header, KV and tensor differences, verdict."""
    console.print(Text(f"A: {safe_text(result['a'], 200)}\nB: {safe_text(result['b'], 200)}"))
    for key, v in result["header"].items():
        console.print(Text(f"header {key}: {v['a']} -> {v['b']}", style="yellow"))
    kvs, tensors = result["kvs"], result["tensors"]
    if kvs["added"] or kvs["removed"] or kvs["changed"]:
        t = Table(title="KV differences", title_justify="left")
        for col in ("", "key", "A", "B"):
            t.add_column(col, overflow="fold")
        for e in kvs["removed"]:
            t.add_row(Text("-", style="red"), text(e["name"], limit=100), Text(f"{e['type']} {value_preview(e)}"), "")
        for e in kvs["added"]:
            t.add_row(Text("+", style="green"), text(e["name"], limit=100), "", Text(f"{e['type']} {value_preview(e)}"))
        for e in kvs["changed"]:
            a, b = e["a"], e["b"]
            note = f" (first difference at [{e['first_difference']}])" if e.get("first_difference") is not None else ""
            t.add_row(Text("~", style="yellow"), text(safe_text(e["name"], 100) + note),
                      Text(f"{a['type']} {value_preview(a)}"), Text(f"{b['type']} {value_preview(b)}"))
        console.print(t)
    if tensors["added"] or tensors["removed"] or tensors["changed"]:
        t = Table(title="Tensor differences", title_justify="left")
        for col in ("", "tensor", "A", "B", "max |a-b|", "NMSE"):
            t.add_column(col)
        for e in tensors["removed"]:
            t.add_row(Text("-", style="red"), text(e["name"], limit=100), f"{e['type']} {_shape(e['shape'])}", "", "", "")
        for e in tensors["added"]:
            t.add_row(Text("+", style="green"), text(e["name"], limit=100), "", f"{e['type']} {_shape(e['shape'])}", "", "")
        for e in tensors["changed"]:
            a, b = e["a"], e["b"]
            t.add_row(Text("~", style="yellow"), text(e["name"], limit=100), f"{a['type']} {_shape(a['shape'])}",
                      f"{b['type']} {_shape(b['shape'])}", _num(e.get("max_abs_diff")), _num(e.get("nmse")))
        console.print(t)
    for what in ("kvs", "tensors"):
        if result[what]["order_changed"]:
            console.print(Text(f"{what[:-1].upper()} order differs", style="yellow"))
    verdict = "EQUAL" if result["equal"] else "DIFFERENT"
    console.print(Text(f"{verdict} ({tensors['identical']} identical tensors)",
                       style="bold green" if result["equal"] else "bold red"))


# ============================================================================================== hf2gguf
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
                     "origin": t.origin, "transform": t.transform} for t in plan.tensors],
        "tensor_bytes": plan.total_tensor_bytes(),
        "notes": plan.notes,
    }


def conversion_to_dict(r: ConvertResult) -> dict[str, Any]:
    """The ``hf2gguf --json`` document (schema in docs/json-schemas.md)."""
    return {"output": str(r.path) if r.path else None, "dry_run": r.dry_run, "family": r.family, "outtype": r.outtype,
            "bytes_written": r.bytes_written, "seconds": round(r.seconds, 3),
            "findings": [f.to_dict() for f in r.findings], "plan": plan_to_dict(r.plan)}


def render_plan(plan: Plan, console: Console) -> None:
    """The dry-run plan: a metadata table and a tensor table."""
    kt = Table(title="metadata", show_lines=False)
    for col in ("key", "type", "value"):
        kt.add_column(col, overflow="fold")
    for k in plan.kvs:
        kt.add_row(text(k.name), k.describe(), text(kv_preview(k), limit=400))
    console.print(kt)
    tt = Table(title="tensors")
    for col in ("name", "type", "ggml shape", "bytes", "source", "transform"):
        tt.add_column(col, overflow="fold")
    for t in plan.tensors:
        src = t.source if t.origin == "draft" else f"{t.origin}:{t.source or ''}"
        tt.add_row(text(t.name), t.ggml_type.name, str(list(t.ne)), f"{t.nbytes:,}", text(src or ""),
                   t.transform or "")
    console.print(tt)


def render_conversion(r: ConvertResult, console: Console) -> None:
    """Human summary of a conversion; a dry run prints the whole plan."""
    if r.dry_run:
        render_plan(r.plan, console)
    for note in r.notes:
        console.print(Text.assemble("  ", text(note, limit=400)), soft_wrap=True)
    for f in r.findings:
        console.print(Text.assemble("  ", ("warning", "yellow"), ": ", text(f, limit=400)), soft_wrap=True)
    n, size = len(r.plan.tensors), r.plan.total_tensor_bytes()
    what = f"{r.plan.arch}, {len(r.plan.kvs)} keys, {n} tensors"
    if r.dry_run:
        console.print(Text.assemble(("dry run", "bold"), ": would write ", text(r.path, limit=4096),
                                    f" ({what}, {size:,} tensor bytes)"), soft_wrap=True)
    else:
        mbps = r.bytes_written / r.seconds / 1e6 if r.seconds else 0.0
        console.print(Text.assemble(("wrote", "bold green"), " ", text(r.path, limit=4096),
                                    f" ({what}, {r.bytes_written:,} bytes in {r.seconds:.2f} s, {mbps:.0f} MB/s)"),
                      soft_wrap=True)


# ============================================================================================== check
def render_findings(file: Path, arch: str, findings: list[Finding], console: Console) -> None:
    """Human output of ``check``: ``ok`` in one line, or a table of findings and a count."""
    if not findings:
        console.print(Text.assemble(("ok", "bold green"), ": ", text(file, limit=4096), " (", text(arch),
                                    ") passes every loader rule"), soft_wrap=True)
        return
    t = Table(title=Text.assemble(text(file, limit=4096), " (", text(arch), ")"), title_justify="left")
    for col in ("level", "key / tensor", "rule", "message"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(Text(f.level, style="red" if f.level == "error" else "yellow"), text(f.subject), text(f.rule),
                  text(f.message, limit=1000))
    console.print(t)
    n = sum(f.level == "error" for f in findings)
    console.print(f"{n} error(s), {len(findings) - n} warning(s)")


# ============================================================================================== verify
def render_verify(report: VerifyReport, console: Console) -> None:
    """The ``verify`` report: an outputs table, then metadata mismatches (or a count of matches), notes, verdict."""
    title = Text.assemble("verify ", text(report.gguf, limit=4096), f" ({report.family}, {report.layout} layout)")
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("output", "NMSE (dB)", "max abs", "argmax", "grade", "result"):   # fits 80 columns; shapes: --json
        t.add_column(col, justify="right" if col in ("NMSE (dB)", "max abs", "argmax") else "left", no_wrap=True)
    for c in report.outputs:
        agree = "" if c.total is None else f"{c.agree}/{c.total}" + (f" ({c.near_ties} tie)" if c.near_ties else "")
        nmse = "" if c.nmse is None else f"{c.nmse:.1e} ({c.nmse_db:.0f})"
        t.add_row(text(c.name), nmse, "" if c.max_abs is None else f"{c.max_abs:.2g}", agree,
                  c.grade.replace("essentially identical", "identical"),
                  Text("PASS", style="green") if c.passed else Text("FAIL", style="bold red"))
    console.print(t)
    for c in report.outputs:
        if c.detail:
            console.print(Text.assemble("  ", text(c.name), ": ", text(c.detail, limit=1000)), soft_wrap=True)
    bad = [m for m in report.metadata if not m.passed]
    if bad:
        mt = Table(title="metadata mismatches", title_justify="left")
        for col in ("key", "GGUF", "expected from the HF config"):
            mt.add_column(col)
        for m in bad:
            mt.add_row(text(m.key), text(repr(m.gguf)), text(repr(m.expected)))
        console.print(mt)
    else:
        console.print(f"metadata: {len(report.metadata)} values match the HF config")
    if report.hparams.get("target_layers") is not None:
        console.print(text(f"target layers (input-of-layer ids): {report.hparams['target_layers']}"))
    for n in report.notes:
        console.print(Text.assemble("note: ", text(n, limit=1000)), soft_wrap=True)
    console.print(Text("PASS", style="bold green") if report.passed else Text("FAIL", style="bold red"))
