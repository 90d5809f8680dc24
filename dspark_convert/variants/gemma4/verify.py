"""``verify`` for Gemma4 DSpark files: the numpy forward of the GGUF (:mod:`.numpy_forward`) against the independent
torch forward of the checkpoint (:mod:`.torch_forward`), component by component, the Gemma 4 metadata, and an
account of every tensor on both sides (:mod:`dspark_convert.verify_accounting`, with the variant's drop rules).

Exact mode: the torch side reads every checkpoint tensor rounded as the GGUF stores it, so every row must agree to
float32 round-off (:data:`dspark_convert.verify_checks.EXACT_NMSE`). The GGUF side's Markov chain is forced to the
torch side's previous tokens (a near-tie cannot make the later rows incomparable); a separate row compares the
chosen tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ... import schema as S
from ...reference.weights import GGUFWeights, TargetWeights
from ...verify_checks import MetadataCheck, OutputCheck, OwnRows, compare_cases, compare_token_cases

A = S.ARCH_DFLASH


def _close(got: Any, want: Any) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if isinstance(want, str) or isinstance(got, str):
        return bool(got == want)
    return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-9)


def metadata(g: GGUFWeights, cfg: dict[str, Any]) -> list[MetadataCheck]:
    """The Gemma 4 keys against what the checkpoint's config implies."""
    dc = cfg.get("dflash_config") or {}
    rope = cfg.get("rope_parameters") or {"full_attention": {"rope_theta": 1000000.0}}
    rope = rope.get("full_attention", rope)
    want = {
        S.EMBEDDING_SCALE.format(arch=A): float(cfg["hidden_size"]) ** 0.5,
        S.ATTENTION_SCALE.format(arch=A): 1.0,
        S.KEY_LENGTH.format(arch=A): cfg.get("global_head_dim"),
        S.VALUE_LENGTH.format(arch=A): cfg.get("global_head_dim"),
        S.HEAD_COUNT_KV.format(arch=A): cfg.get("num_global_key_value_heads"),
        S.HIDDEN_ACTIVATION.format(arch=A): cfg.get("hidden_activation", "gelu_pytorch_tanh"),
        S.ROPE_FREQ_BASE.format(arch=A): rope.get("rope_theta", cfg.get("rope_theta")),
        S.DFLASH_BLOCK_SIZE: dc.get("block_size", cfg.get("block_size", 16)),
        S.TOKENIZER_MASK_ID: dc.get("mask_token_id", cfg.get("mask_token_id")),
        S.DFLASH_SAMPLE_FROM_ANCHOR: bool(cfg.get("sample_from_anchor", True)),
    }
    return [MetadataCheck(k, g.value(k), v, _close(g.value(k), v)) for k, v in want.items()]


def gemma4_rows(g: GGUFWeights, hf_dir: str | Path, target_dir: str | Path, feats: list[np.ndarray],
                anchors: list[int]) -> tuple[list[OutputCheck], list[MetadataCheck], dict[str, Any], set[str]]:
    """Both forwards on the same cases: (rows in forward order, metadata rows, hparams, checkpoint tensors read)."""
    from . import torch_forward as tf
    from .numpy_forward import Gemma4HParams, gemma4_forward

    hf, tgt = Path(hf_dir), Path(target_dir)
    cfg = json.loads((hf / "config.json").read_text())
    types = {t.name: t.qtype.name for t in g.file.tensors if t.qtype is not None}
    probe = tf.Gemma4Checkpoint(hf, tgt)
    storage = {n: types[c] for n in probe.w.names if (c := tf.gguf_counterpart(n)) is not None and c in types}
    ck = tf.Gemma4Checkpoint(hf, tgt, storage)
    refs = tf.gemma4_forward(ck, feats, anchors)
    rows: list[OutputCheck] = []
    try:
        outs = gemma4_forward(g, TargetWeights(tgt), feats, anchors, [r.prev_tokens for r in refs])
    except (ValueError, KeyError, IndexError) as e:
        rows.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=str(e)))
        return rows, metadata(g, cfg), {}, ck.w.read
    hp = Gemma4HParams.from_gguf(g)
    rows.append(compare_cases("context projection", [r.context for r in refs], [x.context for x in outs]))
    rows.append(compare_cases("block input (embeddings)", [r.block_input for r in refs], [x.block_input for x in outs]))
    for il in range(min(len(refs[0].layers), len(outs[0].layers))):
        rows.append(compare_cases(f"layer {il} output", [r.layers[il] for r in refs], [x.layers[il] for x in outs],
                                  layer=il))
    rows.append(compare_cases("block hidden (post-norm)", [r.hidden for r in refs], [x.hidden for x in outs]))
    rows.append(compare_cases("block logits", [r.logits for r in refs], [x.logits for x in outs], argmax=True))
    if all(r.markov_bias is not None for r in refs) or any(x.markov_bias is not None for x in outs):
        rows.append(_both("Markov bias W2 W1[prev]", [r.markov_bias for r in refs], [x.markov_bias for x in outs]))
        rows.append(_both("Markov-biased logits", [r.markov_logits for r in refs], [x.markov_logits for x in outs]))
    rows.append(compare_token_cases("chosen tokens", [r.tokens for r in refs], [x.tokens for x in outs],
                                    [r.markov_logits if r.markov_logits is not None else r.logits for r in refs],
                                    [x.markov_logits if x.markov_logits is not None else x.logits for x in outs]))
    if any(r.confidence_logits is not None for r in refs) or any(x.confidence_logits is not None for x in outs):
        rows.append(_both("confidence (logit)", [r.confidence_logits for r in refs],
                          [x.confidence_logits for x in outs]))
    hparams = {"block_size": hp.block_size, "head_dim": hp.head_dim, "n_rot": hp.n_rot,
               "rope_freqs": g.has("rope_freqs.weight"), "embedding_scale": hp.embedding_scale,
               "attention_scale": hp.attention_scale, "activation": hp.activation, "anchors": anchors}
    return rows, metadata(g, cfg), hparams, ck.w.read


def _both(name: str, refs: list[Any], outs: list[Any]) -> OutputCheck:
    """A component one side has and the other has not is a failing row; else the usual comparison."""
    if any(r is None for r in refs) or any(x is None for x in outs):
        side = "the checkpoint" if any(r is None for r in refs) else "the GGUF"
        return OutputCheck(name, [], grade="mismatch", passed=False, detail=f"{side} has no such head")
    return compare_cases(name, refs, outs)


#: the report's family and layout words
FAMILY = "dspark_gemma4"
LAYOUT = "DeepSpec Gemma4DSparkModel"


def accepts(hf_dir: Path) -> bool:
    """The checkpoint's own config names the class the Gemma4 torch forward reads (a checkpoint of another class
    goes the generic way, where the metadata row reports the mismatch)."""
    cfg = Path(hf_dir) / "config.json"
    archs = json.loads(cfg.read_text()).get("architectures") if cfg.is_file() else None
    return isinstance(archs, list) and S.GEMMA4_DSPARK_ARCHITECTURE in archs


def own_rows(g: GGUFWeights, hf_dir: str | Path, target_dir: str | Path, contexts: list[int],
             rng: np.random.Generator) -> OwnRows:
    """verify's seeded inputs (features per context, one anchor per case) and :func:`gemma4_rows`."""
    from ...reference.hf_draft import TorchCheckpoint

    feats = [rng.standard_normal((t, g.shape("fc.weight")[1])).astype(np.float32) for t in contexts]
    if g.has("token_embd.weight"):
        n_vocab = g.shape("token_embd.weight")[0]
    else:
        tw = TargetWeights(target_dir)
        n_vocab = tw.ckpt.shape(tw.embed_name)[0]
    anchors = [int(a) for a in rng.integers(0, n_vocab, size=len(feats))]
    outputs, metadata_rows, hparams, read = gemma4_rows(g, hf_dir, target_dir, feats, anchors)
    return OwnRows(hparams, outputs, metadata_rows, TorchCheckpoint(Path(hf_dir)).names, read)
