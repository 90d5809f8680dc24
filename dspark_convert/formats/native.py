"""The compiled kernels (``formats/_native.c``: the tensor stream's and the tokenizer reader's), when the installed
package has them.

:func:`kernels` returns the extension module, or None where it was not built (no C compiler at install time) or
``DSPARK_CONVERT_KERNELS=0`` is set; the callers then run the numpy forms, which compute the same bytes. Every
kernel releases the GIL for its pass, so the conversion threads run them on every core.
"""

from __future__ import annotations

import os
from types import ModuleType

_built: ModuleType | None
try:
    from dspark_convert.formats import _native as _built
except ImportError:  # built without a C compiler: the numpy forms
    _built = None

ENV = "DSPARK_CONVERT_KERNELS"


def kernels() -> ModuleType | None:
    """The compiled kernels, or None when they are not built or ``DSPARK_CONVERT_KERNELS=0``."""
    if _built is None or os.environ.get(ENV) == "0":
        return None
    return _built


def built() -> bool:
    """Whether the installed package carries the compiled kernels (whatever ``DSPARK_CONVERT_KERNELS`` says)."""
    return _built is not None


def describe() -> str:
    """One line saying which kernels a conversion runs (``dspark-convert --version`` prints it)."""
    if _built is None:
        return "kernels: numpy forms (the compiled extension is not built: no C compiler at install time)"
    if kernels() is None:
        return f"kernels: numpy forms ({ENV}=0)"
    return "kernels: compiled (Q8_0, BF16 -> F16, NVFP4 repack, tokenizer reader)"
