"""MTP sidecars from the GGUF files users already have: ``mtp-extract``, ``mtp-strip``, ``mtp-graft``.

A target GGUF with MTP (NextN) layers splits into the two files llama.cpp b11434 also writes from the checkpoint:

* :func:`~.run.extract`: the **sidecar** (``convert_hf_to_gguf.py --mtp``): the embedding, final norm and head plus
  the MTP blocks, with the full header; run it with ``llama-server -m TARGET -md mtp-X.gguf --spec-type draft-mtp``;
* :func:`~.run.strip`: the **trunk** (``--no-mtp``): every block below the MTP blocks, ``block_count = n``, no
  ``nextn_predict_layers``, per-layer arrays ``n`` long;
* :func:`~.run.graft`: trunk + sidecar back into the **full** file.

Tensor data is never decoded: each tensor is copied byte for byte (kernel copy for local files, HTTP range
requests of exactly its bytes for remote ones, :mod:`.remote`), whatever its type (K-quants included). Only the
header changes, by the rules of :mod:`dspark_convert.variants.nextn` (spec: drafts-beyond-dflash.md §1.8), and
:func:`~.verify.verify_cut` proves it afterwards: every tensor byte-equal to its source, every KV kept, changed by a
named rule, or dropped by one.
"""
