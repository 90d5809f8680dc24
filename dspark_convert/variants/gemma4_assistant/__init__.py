"""Gemma 4 assistant (``Gemma4AssistantForCausalLM``, ``Gemma4UnifiedAssistantForCausalLM``): arch
``gemma4-assistant``, a multi-token-prediction head llama.cpp runs with ``--spec-type draft-mtp`` against a
Gemma 4 target whose KV cache, token embeddings and last hidden row it reads.

What this variant knows lives here, one module per concern: ``gemma4_assistant`` (the converter family: the
transformers view of the config, keys in upstream's order, tensors; its embedding cut in ``transforms``),
``loader`` (b11434 loader rules for ``check``), ``fit`` (``check --target`` rows against a Gemma 4 target),
``numpy_forward`` (the GGUF side of ``verify``: llama.cpp's graph), ``torch_forward`` (the checkpoint side, with its
own HF names), ``verify`` (rows, metadata, the seeded target-side inputs) and ``llama`` (the three-way check's
reference against llama-server). Its descriptor is the ``gemma4_assistant`` row of
:data:`dspark_convert.registry.VARIANTS`; nothing here is imported by ``import dspark_convert.variants``.
"""
