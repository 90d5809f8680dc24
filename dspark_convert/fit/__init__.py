"""Draft/target fit: will this draft work with my target? (``dspark-convert check DRAFT --target TARGET``).

``sides`` reads each side (GGUF header, or a Hugging Face target folder / repo id), ``rules`` holds the rule table
and :func:`check_fit`; the rule and side types and the vocabulary facts are the fit role's contract
(:mod:`dspark_convert.roles.fit`).
"""

from __future__ import annotations

from .rules import FitReport, check_fit
from .sides import open_target

__all__ = ["FitReport", "check_fit", "open_target"]
