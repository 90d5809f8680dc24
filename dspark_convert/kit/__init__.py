"""What the variants compose: the converter's shared pieces (no variant of its own).

- :mod:`.common`: base / expert keys, the backbone name tables (``NameTable``, ``BACKBONE_LAYER``), tensor specs,
  the outtype rule, ``finish_plan``;
- :mod:`.hparams`: ``HParams``, the typed config view (upstream's normalized config and its readers).

A lineage shared by several variants lives in its base variant's folder (``variants/<variant>/lineage.py``).
"""
