"""Human output of ``inspect`` (metadata, tensors, statistics, summary) and ``diff`` (a legend, then one entry
per difference), and the ``source`` line of a remote file (any command that reads one)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from ..gguffile.reader import safe_text
from .base import (
    Col,
    Row,
    Section,
    count_text,
    emit_table,
    human_bytes,
    human_count,
    line,
    num,
    plural,
    size_text,
    text,
)

_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")
#: a string value longer than this (or with a line break) is printed below the metadata table with --full-arrays
BLOCK_STRING = 120


def value_preview(entry: dict[str, Any], width: int | None = 70) -> str:
    """One line for an inspect KV entry (arrays: items and the count), cut to ``width`` (None: never cut)."""
    value = entry.get("value")
    if "count" in entry:  # an array is cut between its items, never in one or in its count
        count = f" ({plural(entry['count'], 'item')})"
        shown = [safe_text(repr(v), 1 << 20) if isinstance(v, str) else num(v) for v in value or []]
        more = bool(entry.get("truncated"))
        while width is not None and shown and len("[" + ", ".join(shown) + (", ...]" if more else "]")) > width:
            shown.pop()
            more = True
        out = "[" + ", ".join(shown) + (", ...]" if more and shown else "...]" if more else "]") + count
        return out
    else:
        out = repr(value) if isinstance(value, str) else num(value)
    return safe_text(out, width if width is not None else len(out) * 8 + 8)


def _shortened(entry: dict[str, Any]) -> bool:
    return bool(entry.get("truncated")) or len(value_preview(entry, None)) > 70


def _block(entry: dict[str, Any]) -> bool:
    """A string shown in full below the table (--full-arrays): long, or more than one line."""
    v = entry.get("value")
    return "count" not in entry and isinstance(v, str) and (len(v) > BLOCK_STRING or "\n" in v)


def _shape(dims: list[int]) -> str:
    """numpy shape as a tuple: ``(4096, 64)``, ``(64,)``."""
    return str(tuple(dims))


def _ne(dims: list[int]) -> str:
    """ggml ne as a list: ``[64, 4096]``."""
    return "[" + ", ".join(str(d) for d in dims) + "]"


# ============================================================================================== inspect
def _kv_rows(kvs: dict[str, dict[str, Any]], full: bool) -> list[Row]:
    rows: list[Row] = []
    for name, e in kvs.items():
        if full and _block(e):
            value = Text(f"({plural(len(e['value']), 'character')}, in full below)", style="dim")
        else:
            value = Text(value_preview(e, None if full else 70))
        rows.append([text(name, limit=100), e["type"], value])
    return rows


def _grouped(rows: list[dict[str, Any]]) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    """(new group header or None, display name, row): one group per ``blk.N``, globals on their own."""
    group = None
    for r in rows:
        m = _BLK.match(r["name"])
        g = f"blk.{m.group(1)}" if m else ""
        yield (g if g != group else None), ("  " + m.group(2) if m else r["name"]), r
        group = g


TENSOR_COLS = [Col("name"), Col("type"), Col("shape (numpy)", drop=2), Col("ne (ggml)"),
               Col("elements", "right"), Col("bytes", "right"), Col("offset", "right", drop=1)]


def _tensor_cells(name: str, r: dict[str, Any]) -> Row:
    style = "red" if r["type"].startswith("UNKNOWN") else ""
    return [text(name, limit=100), Text(r["type"], style=style), _shape(r["shape"]), _ne(r["ne"]),
            human_count(r["n_elements"]), human_bytes(r["nbytes"]), str(r["offset"])]


def _tensor_table(rows: list[dict[str, Any]], console: Console) -> None:
    grouped: list[Row | Section] = []
    for header, name, r in _grouped(rows):
        if header:
            grouped.append(Section(header))
        grouped.append(_tensor_cells(name, r))
    emit_table(console, f"Tensors ({len(rows)})", TENSOR_COLS, grouped,
               plain_rows=[_tensor_cells(r["name"], r) for r in rows])


def _stats_table(rows: list[dict[str, Any]], console: Console) -> None:
    cols = [Col("name", wrap=True), *(Col(c, "right") for c in ("min", "max", "mean", "std", "NaN", "Inf"))]
    out: list[Row] = []
    for r in rows:
        s = r.get("stats")
        vals = ["-"] * 6 if s is None else [num(s["min"]), num(s["max"]), num(s["mean"]), num(s["std"]),
                                            str(s["nan"]), str(s["inf"])]
        out.append([text(r["name"], limit=100), *vals])
    emit_table(console, "Tensor statistics (dequantized)", cols, out)


def _tokenizer_text(tok: dict[str, Any]) -> str:
    parts = [str(tok["model"]), f"pre-tokenizer {tok['pre']}" if tok["pre"] else "no pre-tokenizer"]
    if tok["n_tokens"] is not None:
        parts.append(plural(tok["n_tokens"], "token"))
    if tok["n_merges"] is not None:
        parts.append(plural(tok["n_merges"], "merge"))
    parts.append("chat template" if tok["chat_template"] else "no chat template")
    return ", ".join(parts)


def _summary_table(info: dict[str, Any], console: Console) -> None:
    rows: list[Row] = [
        ["file", text(info["file"], limit=4096)], ["size", size_text(info["size"])],
        ["GGUF version", str(info["version"])], ["alignment", str(info["alignment"])],
        ["data offset", f"{info['data_offset']:,}"], ["KVs", str(info["kv_count"])],
        ["tensors", str(info["tensor_count"])], ["arch", text(info["arch"])],
        ["parameters", count_text(info["n_params"])], ["tensor data", size_text(info["tensor_bytes"])],
    ]
    for type_name, e in info["by_type"].items():
        rows.append([f"  {type_name}", f"{plural(e['tensors'], 'tensor')}, {human_count(e['n_elements'])} "
                                       f"elements, {human_bytes(e['nbytes'])}"])
    tok = info.get("tokenizer")
    if tok:
        rows.append(["tokenizer", text(_tokenizer_text(tok))])
        for kind, sp in tok["special"].items():
            shown = repr(sp["token"]) if sp["token"] is not None else "(out of range)"
            rows.append([f"  {kind}", text(f"{sp['id']} {shown}")])
    st = info.get("spec_type")
    if st:
        flags = " ".join([f"--spec-type {st['spec_type']}", *st["extra_flags"]])
        rows.append(["llama-server", text(f"{flags} ({'pass it' if st['flag_needed'] else 'auto-detected'}: "
                                          f"{st['reason']})", limit=1000)])
    hub = info.get("hf_name")
    if hub:
        rows.append(["-hf name", text(hub["problem"] or f"found by llama-server -hf as a {hub['found_as']} draft "
                                      f"({hub['keyword']!r} in the name)", limit=1000)])
    mtp = info.get("mtp")
    if mtp:
        kinds = {"full": "full target", "sidecar": "MTP sidecar", "trunk": "trunk (no MTP blocks)", "empty": "empty"}
        rows.append(["MTP", text(f"{kinds[mtp['kind']]}: {mtp['trunk_blocks']} trunk + {mtp['nextn_predict_layers']} "
                                 f"MTP block(s); {mtp['serve']}", limit=1000)])
    src = info.get("source")
    if src:  # remote files only
        rows.append(["source", text(source_text(src), limit=4096)])
        rows += [["note", text(n, limit=1000)] for n in src["notes"]]
    emit_table(console, "Summary", [Col("field"), Col("value", wrap=True)], rows, header=False)


def render_inspect(info: dict[str, Any], console: Console, *, full: bool = False, filter: str | None = None) -> None:
    """Print an :func:`~dspark_convert.inspect.inspect_gguf` result: metadata, tensors (grouped by ``blk.N`` on a
    terminal), statistics, summary. ``full`` (--full-arrays): whole values, long strings in full below the table.
    ``filter``: the glob used, named when nothing matched."""
    kvs = info["kvs"]
    if kvs or not filter:
        emit_table(console, f"Metadata ({plural(len(kvs), 'KV')})", [Col("key", wrap=True, last=True), Col("type"), Col("value", wrap=True)],
                   _kv_rows(kvs, full))
    if full:
        for name, e in kvs.items():
            if _block(e):
                line(console, text(name, style="bold", limit=100), f" ({e['type']}, "
                     f"{plural(len(e['value']), 'character')}):")
                # as written, line by line: line breaks kept, other control characters (ESC, ...) escaped
                lines = [safe_text(ln, len(ln) * 10 + 10) for ln in e["value"].split("\n")]
                console.print(Text("\n".join(lines)), soft_wrap=True)
                console.print()
    elif any(_shortened(e) for e in kvs.values()):
        line(console, ("note:", "cyan"), " long values are shortened; --full-arrays shows them in full (--json also "
                                         "gives each array's sha256)")
    if filter and not kvs:
        line(console, ("note:", "cyan"), " no KV name matches --filter ", text(repr(filter)))
    tensors = info["tensors"]
    if tensors is not None:
        if tensors:
            _tensor_table(tensors, console)
            if any("stats" in r for r in tensors):
                _stats_table(tensors, console)
        elif filter:
            line(console, ("note:", "cyan"), " no tensor name matches --filter ", text(repr(filter)))
        else:
            emit_table(console, "Tensors (0)", TENSOR_COLS, [])
    _summary_table(info, console)


# ============================================================================================== diff
LEGEND = "legend: - only in A, + only in B, ~ changed (A, then B)"


def _entry(sign: str, style: str, name: str, detail: str = "") -> Text:
    return Text.assemble("  ", (sign, style), " ", text(name, limit=200), detail)


def _kv_detail(e: dict[str, Any]) -> str:
    return f": {e['type']} {value_preview(e)}"


def _kv_changed(e: dict[str, Any], console: Console) -> None:
    first = e.get("first_difference")
    line(console, _entry("~", "yellow", e["name"], f" (first difference at item {first})" if first is not None else ""))
    line(console, "      A: ", text(f"{e['a']['type']} {value_preview(e['a'])}"))
    line(console, "      B: ", text(f"{e['b']['type']} {value_preview(e['b'])}"))


def _tensor_detail(e: dict[str, Any]) -> str:
    return f": {e['type']} {_shape(e['shape'])}"


def _tensor_changed(e: dict[str, Any], console: Console) -> None:
    a, b = e["a"], e["b"]
    stats = ""
    if e.get("max_abs_diff") is not None or e.get("nmse") is not None:
        stats = f"; max |a-b| {num(e.get('max_abs_diff'))}, NMSE {num(e.get('nmse'))}"
    line(console, _entry("~", "yellow", e["name"], f": {a['type']} {_shape(a['shape'])} -> {b['type']} "
                         f"{_shape(b['shape'])}{stats}"))


#: the two kinds of difference: result key, heading, the detail of a removed / added entry, a changed entry's lines
_DIFF_SECTIONS: tuple[tuple[str, str, Callable[[dict[str, Any]], str], Callable[[dict[str, Any], Console], None]], ...] = (
    ("kvs", "KV differences", _kv_detail, _kv_changed),
    ("tensors", "Tensor differences", _tensor_detail, _tensor_changed),
)


def render_diff(result: dict[str, Any], console: Console) -> None:
    """Print a :func:`~dspark_convert.diff.diff_gguf` result: the files, a legend, one entry per difference
    (changed values on their own ``A:`` / ``B:`` lines), and the verdict."""
    line(console, "A: ", text(result["a"], limit=4096))
    line(console, "B: ", text(result["b"], limit=4096))
    for side, src in (result.get("source") or {}).items():
        if src:
            render_source(src, console, label=f"{side.upper()} source: ")
    if result.get("note"):
        line(console, ("note:", "cyan"), " ", text(result["note"], limit=1000))
    kvs, tensors = result["kvs"], result["tensors"]
    differs = result["header"] or any(kvs[k] or tensors[k] for k in ("added", "removed", "changed"))
    if differs:
        line(console, LEGEND)
    for key, v in result["header"].items():
        line(console, ("~", "yellow"), f" header {key}: {v['a']} -> {v['b']}")
    for what, title, detail, changed in _DIFF_SECTIONS:
        group = result[what]
        n = len(group["removed"]) + len(group["added"]) + len(group["changed"])
        if n:
            line(console, (f"{title} ({n})", "bold"))
            for e in group["removed"]:
                line(console, _entry("-", "red", e["name"], detail(e)))
            for e in group["added"]:
                line(console, _entry("+", "green", e["name"], detail(e)))
            for e in group["changed"]:
                changed(e, console)
    for what in ("kvs", "tensors"):
        if result[what]["order_changed"]:
            line(console, ("~", "yellow"), f" {'KV' if what == 'kvs' else 'tensor'} order differs")
    verdict = "EQUAL" if result["equal"] else "DIFFERENT"
    same = plural(tensors["identical"], "identical tensor") if result.get("tensor_data_compared", True) else \
        f"{plural(tensors['identical'], 'tensor')} of the same type and shape; tensor data not compared"
    line(console, (f"{verdict} ({same})", "bold green" if result["equal"] else "bold red"))


# ============================================================================================== remote files
def source_text(src: dict[str, Any]) -> str:
    """One line on how a remote file was read (an ``inspect``/``check``/``diff`` ``source`` object)."""
    if src["kind"] == "hub-cache":
        return f"{src['url']}: read from the local Hugging Face cache (offline mode)"
    n = src["requests"]
    how = ("range " if src["range_requests"] else "") + ("request" if n == 1 else "requests")
    rev = ""
    if src["kind"] == "hub":
        commit = src["commit"][:12] if src["commit"] else "?"
        rev = f"; revision {src['revision'] or 'default branch'} (commit {commit})"
    what = "header only" if src["header_only"] else "whole file (smaller than the first window)"
    return f"{src['url']}: {what}, fetched {size_text(src['bytes_fetched'])} in {n} {how}{rev}"


def render_source(src: dict[str, Any], console: Console, label: str = "source: ") -> None:
    """Print :func:`source_text` and the notes of a remote read (URLs and notes only as literal text)."""
    line(console, (label, "dim"), text(source_text(src), style="dim", limit=4096))
    for note in src["notes"]:
        line(console, ("note:", "cyan"), " ", text(note, limit=1000))
