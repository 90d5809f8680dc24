"""The ``eagle3`` GGUF variant (EAGLE-3 drafts, arch ``eagle3``).

- :mod:`.eagle3`: the converter family; :mod:`.loader`: the loader rules; :mod:`.fit`: the fit facts;
  :mod:`.numpy_forward` / :mod:`.torch_forward`: the two forwards; :mod:`.verify`: verify's rows.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy checks the family modules against the Family protocol (nothing is imported at run time)
    from ..kit.base import Family
    from . import eagle3

    _FAMILIES: tuple[Family, ...] = (eagle3,)
