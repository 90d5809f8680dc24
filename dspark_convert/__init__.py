"""dspark-convert: DSpark / DFlash / EAGLE-3 draft checkpoints -> llama.cpp GGUF, with inspection and verification.

The public API (the same verbs as the command line)::

    from dspark_convert import convert, check_file, read_gguf
    result = convert("fixtures/dspark-qwen3", "fixtures/target-qwen3", "draft.gguf", outtype="bf16")
    findings = check_file("draft.gguf")          # llama.cpp loader rules; [] when it loads
    gguf = read_gguf("draft.gguf")               # header, KVs, lazily mapped tensors

``inspect_gguf`` (dspark_convert.inspect), ``diff_gguf`` (dspark_convert.diff) and ``verify``
(dspark_convert.verify) are imported from their modules; ``verify`` needs torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .check import Finding, check_file, check_plan
from .conversion import ConvertResult, convert, plan_conversion
from .errors import ConvertError, GGUFFormatError
from .reader import GGUFFile, plan_from_gguf, read_gguf

__all__ = ["ConvertError", "ConvertResult", "Finding", "GGUFFile", "GGUFFormatError", "__version__", "check_file",
           "check_plan", "convert", "plan_conversion", "plan_from_gguf", "read_gguf"]
