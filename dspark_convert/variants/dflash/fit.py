"""The fit facts of the ``dflash`` variant (``check --target``): the family word fit's rules are keyed by.

Example:
    >>> family_word({"fc.weight": (8, 4)}), family_word({"markov_w1.weight": (4, 8)})
    ('dflash', 'dspark')
"""

from __future__ import annotations

from collections.abc import Collection

from ... import schema as S


def family_word(tensor_names: Collection[str]) -> str:
    """``dspark`` for a ``dflash`` file with Markov tensors (DSpark), else ``dflash``."""
    return "dspark" if S.T_MARKOV_W1 in tensor_names else "dflash"
