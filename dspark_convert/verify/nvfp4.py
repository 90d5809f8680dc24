"""``verify`` for ModelOpt NVFP4 drafts: what the forwards alone cannot see.

The forwards read the NVFP4 weights on both sides (the GGUF's ggml blocks times their ``.scale``; the checkpoint's
codes, block scales and ``weight_scale_2`` decoded by the torch side's own code), so a wrong ``.scale`` or swapped
nibbles fail the layer rows. Three things no forward reads are checked here:

- the ``general.tensor_extra.name`` / ``.prec_a4`` arrays against what the checkpoint's quantization config
  implies (every W4A16 NVFP4 tensor listed with ``false``, sorted): a dropped or altered array fails a metadata row
  (llama.cpp would run the W4A16 draft with 4-bit activations on Blackwell);
- each NVFP4 tensor's GGML type: a checkpoint NVFP4 weight stored as anything but NVFP4 fails;
- the ``input_scale`` tensors (loaded by llama.cpp, used by no graph of b11434): each GGUF ``.input_scale`` against
  the checkpoint's value, and each checkpoint ``input_scale`` other than 1.0 present in the GGUF (the root ``fc`` /
  ``markov_w2`` ones excepted: the loader cannot take them, the converter drops them unless ``--match-upstream``).

The rows' tensors go to the accounting's *compared* bins; the KV-cache scales (``.k_scale`` / ``.v_scale``) are
dropped by the variant's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..formats import modelopt
from ..hf.checkpoint import load_json
from ..reference.compare import MetadataCheck, OutputCheck
from ..roles.proof import Tensors

if TYPE_CHECKING:
    from ..reference.hf_draft import TorchCheckpoint
    from ..reference.weights import GGUFWeights


def _bare(name: str) -> str:
    name = name.replace("language_model.", "")
    return name[len("model."):] if name.startswith("model.") else name


@dataclass
class Nvfp4Rows:
    """The NVFP4 rows, and their share of the tensor accounting (compared tensors, companions read)."""

    metadata: list[MetadataCheck] = field(default_factory=list)
    outputs: list[OutputCheck] = field(default_factory=list)
    tensors: Tensors = field(default_factory=Tensors)


def nvfp4_rows(g: GGUFWeights, w: TorchCheckpoint, hf_dir: Path, counterpart: Callable[[str], str | None]) -> Nvfp4Rows:
    """The NVFP4 rows for GGUF ``g`` and checkpoint ``w`` (nothing when the checkpoint has no NVFP4 weight);
    ``counterpart``: the torch side's checkpoint name -> GGUF name table."""
    out = Nvfp4Rows()
    weights = [n for n in w.names if w.nvfp4_companions(n)]
    if not weights:
        return out
    cfg = load_json(hf_dir / "config.json")
    q = modelopt.read_quant_config(hf_dir, cfg, w.names, _bare)
    pairs = [(counterpart(_bare(n)) or n, _bare(n)) for n in weights]
    names, values = modelopt.prec_a4_arrays(pairs, q)
    got_names, got_values = g.value(modelopt.TENSOR_EXTRA_NAME), g.value(modelopt.TENSOR_EXTRA_PREC_A4)
    got_n = list(got_names) if isinstance(got_names, (list, tuple)) else got_names
    got_v = [bool(v) for v in got_values] if isinstance(got_values, (list, tuple)) else got_values
    out.metadata.append(MetadataCheck(modelopt.TENSOR_EXTRA_NAME, got_n, names or None, got_n == (names or None)))
    out.metadata.append(MetadataCheck(modelopt.TENSOR_EXTRA_PREC_A4, got_v, values or None, got_v == (values or None)))
    wrong_type = [(gn, g.qtype(gn)) for gn, _ in pairs if g.has(gn) and getattr(g.qtype(gn), "name", None) != "NVFP4"]
    out.metadata.append(MetadataCheck("NVFP4 tensor types", [f"{n}: {t.name if t else '?'}" for n, t in wrong_type]
                                      or "all NVFP4", "all NVFP4", not wrong_type))
    for n in weights:
        out.tensors.checkpoint_read.update(w.nvfp4_companions(n))
    # input scales: GGUF value vs checkpoint value (1.0 when the checkpoint has none)
    bad: list[str] = []
    for n, (gn, _) in zip(weights, pairs, strict=True):
        src = n.removesuffix(".weight") + ".input_scale"
        want = float(w.get(src, record=False).reshape(-1)[0]) if w.has(src) else None
        gname = gn.removesuffix(".weight") + ".input_scale"
        if w.has(src):
            out.tensors.checkpoint_compared.add(src)
        if g.has(gname):
            out.tensors.gguf_compared.add(gname)
            got = float(g.array(gname).reshape(-1)[0])
            if want is None or not np.float32(got) == np.float32(want):
                bad.append(f"{gname} = {got}, checkpoint {want}")
        elif not modelopt.scale_is_trivial(want) and gn.startswith("blk."):
            bad.append(f"{gname} missing, checkpoint {src} = {want}")
    out.outputs.append(OutputCheck("NVFP4 input scales", [], grade="exact" if not bad else "wrong", passed=not bad,
                                   detail="; ".join(bad) if bad else f"{len(out.tensors.gguf_compared)} in the GGUF, "
                                   f"{len(out.tensors.checkpoint_compared)} in the checkpoint, all equal or trivial"))
    g.read.difference_update(out.tensors.gguf_compared)  # compared, not read by the forward (g.array above records)
    return out
