"""The ``dflash2`` GGUF variant (refines ``dflash``: a ``dflash`` file holding ``selector_hidden.weight``).

- :mod:`.dflash2`: the converter family; :mod:`.loader`: the loader rules; :mod:`.numpy_forward` /
  :mod:`.torch_forward`: the two forwards; :mod:`.verify`: verify's rows.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy checks the family modules against the Family protocol (nothing is imported at run time)
    from ..kit.base import Family
    from . import dflash2

    _FAMILIES: tuple[Family, ...] = (dflash2,)
