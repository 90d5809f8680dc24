"""The ``dflash`` GGUF variant: DSpark and DFlash drafts (Qwen3 / Llama backbone; Markov and confidence heads
optional). Its descriptor is the ``dflash`` row of :data:`dspark_convert.registry.VARIANTS`.

- :mod:`.dspark`, :mod:`.dflash`, :mod:`.dflash_mimo`, :mod:`.muse_glimmer`: the converter families (each a ``Family`` module; the
  lineage's shared conversion is :mod:`.lineage`, its row transforms :mod:`.transforms`, the ``d2t`` map of
  reduced-vocabulary drafts, which the ``eagle3`` variant writes too, :mod:`.d2t`);
- :mod:`.loader`: llama.cpp's loader rules for the file (``check``);
- :mod:`.fit`: the fit facts (``check --target``);
- :mod:`.mask_embedding`: the reader of a MiMo-style draft's ``mask_embedding.pt`` (conversion, ``upgrade`` and the
  torch forward);
- :mod:`.numpy_forward`: the numpy forward from the GGUF, with the DSpark heads of :mod:`.heads` (the Gemma 4
  DSpark forward runs them too); :mod:`.torch_forward`: the independent torch forward of the Hugging Face folder;
  :mod:`.verify`: verify's rows and hints.

Nothing here is imported by ``import dspark_convert.variants``: a verb imports the role it needs.
"""
