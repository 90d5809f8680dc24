"""The ``eagle3`` GGUF variant (EAGLE-3 drafts, arch ``eagle3``).

- :mod:`.eagle3`: the converter family, with its row transform in :mod:`.transforms` (its ``d2t`` map is written
  with :mod:`dspark_convert.variants.dflash.d2t`, shared with DSpark); :mod:`.loader`: the loader rules;
  :mod:`.fit`: the fit facts; :mod:`.numpy_forward` / :mod:`.torch_forward`: the two forwards; :mod:`.verify`:
  verify's rows.
"""
