"""``verify`` for DFlash2 files (issue 22): the numpy forward of the GGUF (:mod:`.reference.dflash2_np`) against the
independent torch forward of the checkpoint (:mod:`.reference.dflash2_torch`), component by component, plus the
conv / selector metadata; the driver's tensor accounting (``verify_accounting``) accounts for every tensor.

Exact mode only: the torch side reads every checkpoint tensor rounded as the GGUF stores it, so every row must
agree to float32 round-off (:data:`.verify_checks.EXACT_NMSE`). The numpy selector scores the torch side's
candidate sets (so that a near-tie cannot make the score rows incomparable); a separate row checks that the
GGUF's own top-k candidates are the same sets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...reference.weights import GGUFWeights, TargetWeights
from ...verify_checks import MetadataCheck, OutputCheck, OwnRows, compare_cases

#: the report's family and layout words
FAMILY = "dflash2"
LAYOUT = "z-lab DFlash2"


def accepts(hf_dir: Path) -> bool:
    """The checkpoint's own config names a class the DFlash2 torch forward reads (the GGUF alone does not decide
    which forwards run)."""
    from .torch_forward import ARCHITECTURES

    cfg = hf_dir / "config.json"
    archs = json.loads(cfg.read_text()).get("architectures") if cfg.is_file() else None
    return isinstance(archs, list) and any(a in ARCHITECTURES for a in archs)


def own_rows(g: GGUFWeights, hf_dir: str | Path, target_dir: str | Path, contexts: list[int],
             rng: np.random.Generator) -> OwnRows:
    """verify's inputs for DFlash2 (features per context, then one anchor per case), and :func:`dflash2_rows`."""
    feats = [rng.standard_normal((t, g.shape("fc.weight")[1])).astype(np.float32) for t in contexts]
    anchors = [int(a) for a in rng.integers(0, g.shape("selector_successor.weight")[0], size=len(feats))]
    return dflash2_rows(g, hf_dir, target_dir, feats, anchors)


def _storage(g: GGUFWeights, hf_dir: Path, names: list[str]) -> dict[str, str]:
    """Checkpoint name -> GGML type of the GGUF tensor it became (the torch side's own name table)."""
    from .torch_forward import gguf_counterpart

    types = {t.name: t.qtype.name for t in g.file.tensors if t.qtype is not None}
    out = {}
    for n in names:
        gg = gguf_counterpart(n)
        if gg is not None and gg in types:
            out[n] = types[gg]
    return out


#: dflash_config key -> GGUF key of the conv / selector settings (verify's own spelling)
_CONV_KEYS = (("conv_kernel_size", "dflash.conv_kernel_size"), ("conv_group_size", "dflash.conv_group_size"),
              ("selector_rank", "dflash.selector_rank"), ("selector_top_k", "dflash.selector_top_k"))


def _metadata(g: GGUFWeights, cfg: dict[str, Any]) -> list[MetadataCheck]:
    dc = cfg.get("dflash_config") or {}
    rows = []
    for key, gkey in _CONV_KEYS:
        rows.append(MetadataCheck(gkey, g.value(gkey), dc.get(key), g.value(gkey) == dc.get(key)))
    for key, gkey in (("output_multiplier", "dflash.logit_scale"), ("input_embedding_scale", "dflash.embedding_scale"),
                      ("final_logit_softcapping", "dflash.final_logit_softcapping")):
        want = dc.get(key, cfg.get(key))
        if key == "final_logit_softcapping" and want is not None and float(want) <= 0:
            want = None
        got = g.value(gkey)
        ok = (got is None and want is None) or (got is not None and want is not None
                                                  and abs(float(got) - float(want)) <= 1e-6 * max(1.0, abs(float(want))))
        rows.append(MetadataCheck(gkey, got, want, ok))
    return rows


def dflash2_rows(g: GGUFWeights, hf_dir: str | Path, target_dir: str | Path, feats: list[np.ndarray],
                 anchors: list[int]) -> OwnRows:
    """Run both forwards on the same cases; one row per compared quantity, in forward order."""
    from . import torch_forward as tf
    from .numpy_forward import DFlash2HParams, dflash2_forward, top_k

    hf, tgt = Path(hf_dir), Path(target_dir)
    cfg = json.loads((hf / "config.json").read_text())
    probe = tf.DFlash2Checkpoint(hf, tgt)
    ck = tf.DFlash2Checkpoint(hf, tgt, _storage(g, hf, probe.w.names))
    rows = OwnRows(metadata=_metadata(g, cfg), checkpoint_names=ck.w.names, checkpoint_read=ck.w.read)
    refs = tf.dflash2_forward(ck, feats, anchors)
    try:
        outs = dflash2_forward(g, TargetWeights(tgt), feats, anchors, [r.candidates for r in refs])
    except (ValueError, KeyError, IndexError) as e:
        rows.outputs.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=str(e)))
        return rows
    hp = DFlash2HParams.from_gguf(g)
    rows.hparams = {"block_size": hp.base.block_size, "conv_kernel_size": hp.kernel, "conv_group_size": hp.group,
                    "selector_rank": hp.rank, "selector_top_k": hp.top_k, "logit_scale": hp.logit_scale,
                    "final_logit_softcapping": hp.softcap, "embedding_scale": hp.embedding_scale, "anchors": anchors}
    o = rows.outputs
    o.append(compare_cases("context projection", [r.context for r in refs], [x.context for x in outs]))
    o.append(compare_cases("block input (embeddings)", [r.block_input for r in refs], [x.block_input for x in outs]))
    for il in range(min(len(refs[0].layers), len(outs[0].layers))):
        o.append(compare_cases(f"layer {il} output", [r.layers[il] for r in refs], [x.layers[il] for x in outs], layer=il))
    o.append(compare_cases("block hidden (post-norm)", [r.hidden for r in refs], [x.hidden for x in outs]))
    o.append(compare_cases("block logits (scaled, capped)", [r.logits for r in refs], [x.logits for x in outs],
                           argmax=True))
    own = [np.stack([top_k(x.logits[p], hp.top_k) for p in range(1, x.logits.shape[0])]) for x in outs]
    agree = [bool(set(a[p].tolist()) == set(r.candidates[p].tolist())) for a, r in zip(own, refs, strict=True)
             for p in range(a.shape[0])]
    o.append(OutputCheck("selector candidates (top-k sets)", [len(agree)], grade="tokens", agree=sum(agree),
                         total=len(agree), agree_by_position=agree, passed=all(agree)))
    o.append(compare_cases("selector scores", [r.scores for r in refs], [x.scores for x in outs]))
    return rows
