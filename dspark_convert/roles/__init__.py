"""The contracts a variant plugs into, one module per role (what ``variants/<v>/<role>.py`` receives and provides).

- :mod:`.convert`: ``Family`` (a converter family module), ``Context``, ``TargetFacts``, ``TargetTensor``,
  ``ConvertOptions``;
- :mod:`.loader`: ``Checker`` (with ``layer_rules``), ``Dims``, ``Rules`` (a ``loader`` module: llama.cpp's loader
  rules);
- :mod:`.fit`: ``Rule``, ``Outcome``, ``Pair``, ``Side`` and the vocabulary facts (a ``fit`` module);
- :mod:`.proof`: ``Forwards`` / ``TensorChecks``, ``Inputs``, ``Pair``, ``Proof``, ``Job`` (a ``verify`` module's
  ``PROOF``);
- :mod:`.upgrade`: ``UpgradeRules``, ``Detection``, ``Upgrading``, ``Piece``, ``Stale`` (an ``upgrade`` module's
  ``RULES``).

The three-way check against llama-server is a test tier: its per-variant references and their contract live
outside the wheel, in ``tests/llama/refs/``.

The helpers a role module works with are methods of what it is handed (``Checker.layer_count``, ``Pair.fc_width``,
``Inputs.anchors``, ``Upgrading.checkpoint_tensor``, ...), so a variant imports the types it names and nothing else.
The drivers (``check``, ``fit``, ``verify``, ``staleness`` / ``upgrade``, ``hf2gguf``) import these; no contract
imports a driver or the registry.
"""
