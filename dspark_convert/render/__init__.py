"""Everything the command line shows people, and the strict-JSON form of its results.

The rules (literal text, markup-off consoles, tables for terminals and pipes) are in :mod:`.base`; one module per
kind of result: :mod:`.gguf` (``inspect``, ``diff``, a remote file's ``source`` line), :mod:`.hf2gguf`
(conversions, ``check``), :mod:`.fit` (``check --target``), :mod:`.verify`.
"""

from __future__ import annotations

from .base import (
    byte_progress,
    dumps_json,
    jsonable,
    line,
    make_console,
    print_error,
    print_warning,
    size_text,
    text,
)
from .fit import render_fit
from .gguf import render_diff, render_inspect, render_source, value_preview
from .hf2gguf import conversion_to_dict, render_conversion, render_findings
from .verify import render_verify

__all__ = [
    "byte_progress", "conversion_to_dict", "dumps_json", "jsonable", "line", "make_console", "print_error",
    "print_warning", "render_conversion", "render_diff", "render_findings", "render_fit", "render_inspect",
    "render_source", "render_verify", "size_text", "text", "value_preview",
]
