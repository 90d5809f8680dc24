"""The upgrade rules of DFlash2 files: the ``dflash`` lineage's (:mod:`..dflash.upgrade`), config keys included.
Its own keys and tensors need nothing: upstream's class arrived with them (b10662), so every DFlash2 file has
them; a file made before upstream read SWA, causal, value scale and partial rotary from the config gets those keys
from ``--hf`` (in ``hf2gguf``'s order: a key written twice, such as ``causal``, keeps its first place).
"""

from ..dflash.upgrade import DFlashRules

#: the rules of a ``dflash2`` file
RULES = DFlashRules()
