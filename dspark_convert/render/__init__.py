"""Everything the command line shows people, and the strict-JSON form of its results.

The rules (literal text, markup-off consoles, tables for terminals and pipes) are in :mod:`.base`; one module per
kind of result: :mod:`.gguf` (``inspect``, ``diff``, a remote file's ``source`` line), :mod:`.hf2gguf`
(conversions, ``check``), :mod:`.fit` (``check --target``), :mod:`.verify`.
"""

from __future__ import annotations

from ..streams import STDOUT, OutputError
from .base import (
    Col,
    Section,
    byte_progress,
    count_text,
    dumps_json,
    emit_table,
    human_bytes,
    human_count,
    jsonable,
    line,
    make_console,
    plural,
    print_error,
    print_warning,
    size_text,
    text,
)
from .fit import render_fit
from .gguf import LEGEND, render_diff, render_inspect, render_source, source_text, value_preview
from .hf2gguf import (
    conversion_to_dict,
    kv_preview,
    plan_to_dict,
    render_conversion,
    render_findings,
    render_findings_lines,
    render_plan,
)
from .verify import render_verify

__all__ = [
    "LEGEND", "STDOUT", "Col", "OutputError", "Section", "byte_progress", "conversion_to_dict", "count_text", "dumps_json", "emit_table",
    "human_bytes", "human_count", "jsonable", "kv_preview", "line", "make_console", "plan_to_dict", "plural",
    "print_error", "print_warning", "render_conversion", "render_diff", "render_findings", "render_findings_lines", "render_fit",
    "render_inspect", "render_plan", "render_source", "render_verify", "size_text", "source_text", "text",
    "value_preview",
]
