"""The GGUF variants: one package per variant, ``variants/<name>/``, one module per role.

Each package holds everything its variant knows: its converter family modules (:mod:`dspark_convert.roles.convert`),
``loader`` (:mod:`dspark_convert.roles.loader`), ``fit`` (:mod:`dspark_convert.roles.fit`), ``numpy_forward`` /
``torch_forward`` and ``verify`` (:mod:`dspark_convert.roles.proof`) and ``upgrade``
(:mod:`dspark_convert.roles.upgrade`); its reference for the three-way check against llama-server, a test tier, is
``tests/llama/refs/<name>.py``. A variant imports contracts (``roles/``), the converter's kit
(``kit/``), the shared numerics (``reference/``, ``formats/``) and the GGUF names (``schema/``), never a driver.
Its row in :data:`dspark_convert.registry.VARIANTS` says when a file is it; a verb imports the role it needs
(nothing is imported here).
"""
