"""dspark-convert: DSpark / DFlash / EAGLE-3 draft checkpoints -> llama.cpp GGUF, with inspection and verification."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import ConvertError, GGUFFormatError

__all__ = ["ConvertError", "GGUFFormatError", "__version__"]
