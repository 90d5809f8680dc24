"""The ``dflash`` GGUF variant: DSpark and DFlash drafts (Qwen3 / Llama backbone; Markov and confidence heads
optional). Its descriptor is the ``dflash`` row of :data:`dspark_convert.registry.VARIANTS`.

- :mod:`.dspark`, :mod:`.dflash`, :mod:`.dflash_mimo`: the converter families (each a ``Family`` module; the
  lineage's shared conversion is :mod:`.lineage`);
- :mod:`.loader`: llama.cpp's loader rules for the file (``check``);
- :mod:`.fit`: the fit facts (``check --target``);
- :mod:`.numpy_forward`: the numpy forward from the GGUF; :mod:`.torch_forward`: the independent torch forward of
  the Hugging Face folder; :mod:`.verify`: verify's rows and hints.

Nothing here is imported by ``import dspark_convert.variants``: a verb imports the role it needs.
"""
