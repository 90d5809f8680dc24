"""The ``dsv4`` GGUF variant: DeepSeek-V4 DSpark (a ``dflash`` file with hyper-connections; refines ``dflash``).

- :mod:`.dspark_dsv4`: the converter family, with its name tables in :mod:`.names`; :mod:`.blockscaled`: the FP8 /
  FP4 tensor specs (the FP4 expert stack's row transform in :mod:`.transforms`) and upstream's chat templates
  (``chat_templates/``), shared with the MTP sidecar (:mod:`dspark_convert.variants.mtp.deepseek4`);
  :mod:`.loader`: the loader rules; :mod:`.tensors`: the torch tensor-by-tensor checks (verify proves the file
  tensor by tensor: it has no reference forward); :mod:`.verify`: verify's rows.
"""
