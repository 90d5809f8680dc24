"""Rich rendering of ``inspect`` and ``diff`` results, and their strict-JSON form.

Everything taken from a file (names, strings) is wrapped in :class:`rich.text.Text`, so a hostile value such
as ``"[red]"`` is shown literally and never parsed as markup; control characters are escaped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .gguffile.reader import safe_text

_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")


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
        t.add_row(key, Text(safe_text(value, 200)))
    return t


def _kv_table(kvs: dict[str, dict[str, Any]]) -> Table:
    t = Table(title=f"Metadata ({len(kvs)} KVs)", title_justify="left")
    t.add_column("key", style="cyan", no_wrap=True)
    t.add_column("type")
    t.add_column("value", overflow="fold")
    for name, e in kvs.items():
        t.add_row(Text(safe_text(name, 100)), e["type"], Text(value_preview(e)))
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
        t.add_row(Text(safe_text(name, 60)), Text(r["type"], style=style), _shape(r["shape"]), _ne(r["ne"]),
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
            t.add_row(Text(safe_text(r["name"], 60)), "-", "-", "-", "-", "-", "-")
        else:
            t.add_row(Text(safe_text(r["name"], 60)), _num(s["min"]), _num(s["max"]), _num(s["mean"]),
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
            t.add_row(Text("-", style="red"), Text(safe_text(e["name"], 100)), Text(f"{e['type']} {value_preview(e)}"), "")
        for e in kvs["added"]:
            t.add_row(Text("+", style="green"), Text(safe_text(e["name"], 100)), "", Text(f"{e['type']} {value_preview(e)}"))
        for e in kvs["changed"]:
            a, b = e["a"], e["b"]
            note = f" (first difference at [{e['first_difference']}])" if e.get("first_difference") is not None else ""
            t.add_row(Text("~", style="yellow"), Text(safe_text(e["name"], 100) + note),
                      Text(f"{a['type']} {value_preview(a)}"), Text(f"{b['type']} {value_preview(b)}"))
        console.print(t)
    if tensors["added"] or tensors["removed"] or tensors["changed"]:
        t = Table(title="Tensor differences", title_justify="left")
        for col in ("", "tensor", "A", "B", "max |a-b|", "NMSE"):
            t.add_column(col)
        for e in tensors["removed"]:
            t.add_row(Text("-", style="red"), Text(safe_text(e["name"], 100)), f"{e['type']} {_shape(e['shape'])}", "", "", "")
        for e in tensors["added"]:
            t.add_row(Text("+", style="green"), Text(safe_text(e["name"], 100)), "", f"{e['type']} {_shape(e['shape'])}", "", "")
        for e in tensors["changed"]:
            a, b = e["a"], e["b"]
            t.add_row(Text("~", style="yellow"), Text(safe_text(e["name"], 100)), f"{a['type']} {_shape(a['shape'])}",
                      f"{b['type']} {_shape(b['shape'])}", _num(e.get("max_abs_diff")), _num(e.get("nmse")))
        console.print(t)
    for what in ("kvs", "tensors"):
        if result[what]["order_changed"]:
            console.print(Text(f"{what[:-1].upper()} order differs", style="yellow"))
    verdict = "EQUAL" if result["equal"] else "DIFFERENT"
    console.print(Text(f"{verdict} ({tensors['identical']} identical tensors)",
                       style="bold green" if result["equal"] else "bold red"))


_STATUS_STYLE = {"pass": "green", "fail": "bold red", "info": "cyan", "skip": "dim"}


def _fit_value(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {_num(x)}" for k, x in v.items())
    if isinstance(v, str):
        return v
    return _num(v) if not isinstance(v, list) else "[" + ", ".join(_num(x) for x in v) + "]"


def render_fit(report: Any, console: Console) -> None:
    """Print a :class:`~dspark_convert.fit.FitReport`: the loader findings (if any), one row per fit rule
    (status, draft value, target value, the finding), and the verdict."""
    d, t = report.draft, report.target
    console.print(Text(f"draft:  {safe_text(d.source, 200)} ({d.arch}, {d.family})\n"
                       f"target: {safe_text(t.source, 200)} ({t.kind}, {safe_text(t.arch, 60)})"))
    if report.loader_findings:
        lt = Table(title="Draft loader rules", title_justify="left")
        for col in ("level", "key / tensor", "rule", "message"):
            lt.add_column(col, overflow="fold")
        for f in report.loader_findings:
            lt.add_row(Text(f.level, style="red" if f.level == "error" else "yellow"), Text(safe_text(f.subject, 100)),
                       f.rule, Text(safe_text(f.message, 400)))
        console.print(lt)
    table = Table(title="Will this draft work with this target?", title_justify="left")
    table.add_column("rule", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("draft", overflow="fold", max_width=28)
    table.add_column("target", overflow="fold", max_width=28)
    table.add_column("finding", overflow="fold")
    for r in report.results:
        table.add_row(r.id, Text(r.status, style=_STATUS_STYLE.get(r.status, "")),
                      Text(safe_text(_fit_value(r.draft), 120)), Text(safe_text(_fit_value(r.target), 120)),
                      Text(safe_text(r.message, 600)))
    console.print(table)
    c = report.counts()
    n_err = sum(f.level == "error" for f in report.loader_findings)
    summary = f"{c['pass']} passed, {c['fail']} failed, {c['info']} info, {c['skip']} skipped"
    if n_err:
        summary += f"; {n_err} loader error(s)"
    verdict = "FITS" if report.ok else "DOES NOT FIT"
    console.print(Text(f"{verdict}: {summary}", style="bold green" if report.ok else "bold red"))
