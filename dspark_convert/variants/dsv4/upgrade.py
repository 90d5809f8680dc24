"""The upgrade rules of DeepSeek-V4 DSpark files: the ``dflash`` lineage's (:mod:`..dflash.upgrade`: sinks, the
target's M-RoPE sections and embedding scale) without its config-key rules: upstream's converter is not a
``DFlashModel`` and writes its own keys. b10786 dropped ``ffn.gate.bias_vl``: nothing to do for files without it;
a file of today is copied byte for byte, with or without ``--hf``.
"""

from ..dflash.upgrade import DFlashRules

#: the rules of a ``dsv4`` file: its converter writes its own keys from its own config schema
RULES = DFlashRules(lineage_config=False)
