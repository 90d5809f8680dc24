"""The upgrade rules of Gemma4 DSpark files: the ``dflash`` lineage's (:mod:`..dflash.upgrade`: sinks, the
target's M-RoPE sections and embedding scale, the DSpark head and q/k rows) without its config-key rules.
Upstream's class arrived with its own keys (b11223: its own ``embedding_scale`` and proportional rotary count),
so a file of today is copied byte for byte, with or without ``--hf``.
"""

from ..dflash.upgrade import DFlashRules

#: the rules of a ``gemma4`` file: its converter writes its own keys from its own config schema
RULES = DFlashRules(lineage_config=False)
