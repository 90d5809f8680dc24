"""Gemma4 DSpark (DeepSpec ``Gemma4DSparkModel``): a ``dflash`` file on a Gemma 4 backbone.

What this variant knows lives here, one module per concern: ``convert`` (the converter family: name table,
requirements, keys, the generated ``rope_freqs``), ``fit`` (fit facts), ``loader`` (b11434 loader rules for
``check``), ``numpy_forward`` (the GGUF side of ``verify``), ``torch_forward`` (the checkpoint side, with its own
HF names) and ``verify`` (rows, tensor accounting). Its descriptor is the ``gemma4`` row of
:data:`dspark_convert.registry.VARIANTS`; nothing here is imported by ``import dspark_convert.variants``.

A ``dflash`` file is this variant when it has ``blk.0.layer_output_scale.weight``: only the Gemma 4 block has a
per-layer output scale (llama.cpp loads it as an optional tensor of every ``dflash`` layer).
"""
