"""The ``dflash2`` GGUF variant (refines ``dflash``: a ``dflash`` file holding ``selector_hidden.weight``).

- :mod:`.dflash2`: the converter family; :mod:`.loader`: the loader rules; :mod:`.numpy_forward` /
  :mod:`.torch_forward`: the two forwards; :mod:`.verify`: verify's rows.
"""
