"""``verify`` for Gemma4 DSpark files: the numpy forward of the GGUF (:mod:`.numpy_forward`) against the independent
torch forward of the checkpoint (:mod:`.torch_forward`), component by component, the Gemma 4 metadata, and an
account of every tensor on both sides (:mod:`dspark_convert.verify.accounting`, with the variant's drop rules).

Exact mode: the torch side reads every checkpoint tensor rounded as the GGUF stores it, so every row must agree to
float32 round-off (:data:`dspark_convert.reference.compare.EXACT_NMSE`). The GGUF side's Markov chain is forced to the
torch side's previous tokens (a near-tie cannot make the later rows incomparable); a separate row compares the
chosen tokens.
"""

from __future__ import annotations

import math
from typing import Any

from ... import schema as S
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights, TargetWeights
from ...roles.proof import Forwards, Inputs, Pair
from .numpy_forward import Gemma4HParams
from .numpy_forward import gemma4_forward as numpy_forward

A = S.ARCH_DFLASH


def _close(got: Any, want: Any) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if isinstance(want, str) or isinstance(got, str):
        return bool(got == want)
    return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-9)


def metadata(g: GGUFWeights, ck: Any) -> list[MetadataCheck]:
    """The Gemma 4 keys against what the checkpoint's config implies."""
    cfg = ck.cfg
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


def _n_vocab(g: GGUFWeights, ck: Any) -> int:
    """The anchors' vocabulary: the GGUF's token_embd, else the target's embeddings."""
    if g.has("token_embd.weight"):
        return int(g.shape("token_embd.weight")[0])
    tw = TargetWeights(ck.target)
    return int(tw.ckpt.shape(tw.embed_name)[0])


def _candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, anchors: list[int],
               refs: list[Any]) -> list[Any]:
    """The GGUF's forward, its Markov chain forced to the torch side's previous tokens."""
    return numpy_forward(g, target, inputs.feats, anchors, [r.prev_tokens for r in refs])


def _hparams(g: GGUFWeights, outs: list[Any], anchors: list[int]) -> dict[str, Any]:
    hp = Gemma4HParams.from_gguf(g)
    return {"block_size": hp.block_size, "head_dim": hp.head_dim, "n_rot": hp.n_rot,
            "rope_freqs": g.has("rope_freqs.weight"), "embedding_scale": hp.embedding_scale,
            "attention_scale": hp.attention_scale, "activation": hp.activation, "anchors": anchors}


def rows(p: Pair) -> list[OutputCheck]:
    """Both forwards on the same cases, one row per compared quantity in forward order; the chosen tokens by the
    Markov-biased logits where a case has them."""
    refs, outs = p.refs, p.outs
    o = [*p.block_trunk(), p.cases("block logits", "logits", argmax=True)]
    if all(r.markov_bias is not None for r in refs) or any(x.markov_bias is not None for x in outs):
        o.append(_both(p, "Markov bias W2 W1[prev]", "markov_bias"))
        o.append(_both(p, "Markov-biased logits", "markov_logits"))
    o.append(p.tokens("chosen tokens", lambda c: c.markov_logits if c.markov_logits is not None else c.logits))
    if any(r.confidence_logits is not None for r in refs) or any(x.confidence_logits is not None for x in outs):
        o.append(_both(p, "confidence (logit)", "confidence_logits"))
    return o


def quality_rows(p: Pair) -> list[OutputCheck]:
    """The logits against the unrounded checkpoint (information)."""
    q = [p.cases("block logits", "logits", bound=None, argmax=True)]
    if all(r.markov_logits is not None for r in p.refs) and all(x.markov_logits is not None for x in p.outs):
        q.append(p.cases("Markov-biased logits", "markov_logits", bound=None, argmax=True))
    return q


def _both(p: Pair, name: str, attr: str) -> OutputCheck:
    """A component one side has and the other has not is a failing row; else the usual comparison."""
    refs, outs = p.both(attr)
    if any(r is None for r in refs) or any(x is None for x in outs):
        side = "the checkpoint" if any(r is None for r in refs) else "the GGUF"
        return OutputCheck(name, [], grade="mismatch", passed=False, detail=f"{side} has no such head")
    return p.cases(name, attr)


#: verify's role: one random anchor per case, the two Gemma 4 block forwards (the torch side: :mod:`.torch_forward`)
PROOF = Forwards(draw=Inputs.anchors, candidate=_candidate, hparams=_hparams, rows=rows, quality_rows=quality_rows,
                 metadata=metadata, n_vocab=_n_vocab, steps=False)
