"""dspark-convert: speculative-decoding draft checkpoints -> llama.cpp GGUF, with inspection and verification.

The draft families it converts are the variants' (``dspark_convert.variants``; the README lists them).

The public API (the same verbs as the command line)::

    from dspark_convert import convert, check_file, read_gguf, inspect_gguf, diff_gguf
    result = convert("path/to/draft", "path/to/target", "draft.gguf", outtype="bf16")  # folders or Hub repo ids
    findings = check_file("draft.gguf")          # llama.cpp loader rules; [] when it loads
    fit = check_fit("draft.gguf", "target.gguf")  # will this draft work with that target? fit.ok, fit.results
    gguf = read_gguf("draft.gguf")               # header, KVs, lazily mapped tensors
    info = inspect_gguf("draft.gguf")            # the `inspect --json` document
    delta = diff_gguf("a.gguf", "b.gguf")        # the `diff --json` document
    remote = open_gguf_source("hf://org/repo/draft.gguf@v1")  # header only, over HTTP range requests

``dspark_convert.verify.verify`` needs torch. Names are imported lazily, so ``import dspark_convert`` (and the
``inspect`` command) stays fast and never loads the conversion stack or torch unless asked.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "convert": "hf2gguf.conversion", "plan_conversion": "hf2gguf.conversion", "ConvertResult": "hf2gguf.results",
    "PlannedConversion": "hf2gguf.results",
    "check_file": "check", "check_plan": "check", "Finding": "check", "check_fit": "fit", "FitReport": "fit",
    "read_gguf": "gguffile.reader", "plan_from_gguf": "gguffile.reader", "GGUFFile": "gguffile.reader",
    "inspect_gguf": "inspect", "diff_gguf": "diff",
    "open_gguf_source": "gguffile.source", "RemoteOptions": "gguffile.options",
    "ConvertError": "errors", "GGUFFormatError": "errors",
}
__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dspark_convert' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
