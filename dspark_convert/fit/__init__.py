"""Draft/target fit: will this draft work with my target? (``dspark-convert check DRAFT --target TARGET``).

``sides`` reads each side (GGUF header, or a Hugging Face target folder / repo id), ``vocab`` replays how
llama.cpp loads a vocabulary, ``rules`` holds the rule table and :func:`check_fit`.
"""

from __future__ import annotations

from .rules import RULES, FitReport, Rule, RuleResult, check_fit, fit_rules
from .sides import Side, open_target, side_from_gguf, side_from_hf

__all__ = ["RULES", "FitReport", "Rule", "RuleResult", "Side", "check_fit", "fit_rules", "open_target",
           "side_from_gguf", "side_from_hf"]
