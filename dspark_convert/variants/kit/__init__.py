"""What the variants compose: the converter's shared pieces (no variant of its own).

- :mod:`.common`: base / expert keys, the backbone name tables (``NameTable``, ``BACKBONE_LAYER``), tensor specs,
  the outtype rule, ``finish_plan``;
- :mod:`.hparams`: ``normalize_hparams`` and the typed config readers;
- :mod:`.dflash_base`: the DFlash lineage's shared conversion (name table, target facts, target tensors, the
  ``dflash.*`` keys), used by the ``dflash`` and ``dflash2`` variants.
"""
