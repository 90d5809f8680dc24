"""Number formats and row transforms shared by every GGUF variant (no family names, numpy only).

- :mod:`.quant`: block-scaled decodings (F8_E4M3 / F8_E8M0 tiles, FP4 e2m1, MXFP4 and NVFP4 blocks) and the
  lossless repacks into ggml's block types;
- :mod:`.transforms`: row transforms as objects (:class:`~.transforms.Transform`, registered in
  :data:`~.transforms.TRANSFORMS`), the dtype conversions and Q8_0;
- :mod:`.native`: the compiled kernels (``_native.c``: Q8_0, BF16 -> F16, the NVFP4 repack, the tokenizer
  reader's span lookups) when the package was built with them; the modules above fall back to their numpy forms;
- :mod:`.modelopt`: ModelOpt NVFP4 checkpoints: the quantization config, the per-tensor layout, and what the GGUF
  gets from them.
"""
