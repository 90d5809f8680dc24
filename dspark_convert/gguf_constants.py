"""gguf-py's constants (value types, GGML types, block sizes) without importing the rest of the ``gguf`` package.

``import gguf`` runs its ``__init__``, which imports numpy, PyYAML, sentencepiece, its reader, writer and
quantizers: ~0.4 s, most of ``inspect``'s wall time. Everything that only reads GGUF headers (``inspect``,
``check``, ``diff`` without data) needs just ``gguf/constants.py``, which imports nothing but ``enum``. This module
loads that one file and registers it as ``gguf.constants``, so a later ``import gguf`` reuses it: there is one
``GGUFValueType`` class either way (``gguf.GGUFValueType is VT``).

Example:
    >>> from dspark_convert.gguf_constants import GGML_QUANT_SIZES, QT, VT
    >>> VT.STRING.value, GGML_QUANT_SIZES[QT.Q8_0]
    (8, (32, 34))
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING


def _load() -> ModuleType:
    if "gguf" in sys.modules or "gguf.constants" in sys.modules:  # already there: the ordinary import is free
        import gguf.constants

        return gguf.constants
    spec = importlib.util.find_spec("gguf")  # finds the package without running its __init__
    path = next(iter(spec.submodule_search_locations or []), None) if spec is not None else None
    file_spec = importlib.util.spec_from_file_location("gguf.constants", f"{path}/constants.py") if path else None
    if file_spec is None or file_spec.loader is None:  # an unusual install (zip, frozen): import it whole
        import gguf.constants

        return gguf.constants
    module = importlib.util.module_from_spec(file_spec)
    sys.modules["gguf.constants"] = module
    try:
        file_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gguf.constants"]
        raise
    return module


if TYPE_CHECKING:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

    VT = GGUFValueType
    QT = GGMLQuantizationType
else:
    _constants = _load()
    VT = GGUFValueType = _constants.GGUFValueType
    QT = GGMLQuantizationType = _constants.GGMLQuantizationType
    GGML_QUANT_SIZES = _constants.GGML_QUANT_SIZES

