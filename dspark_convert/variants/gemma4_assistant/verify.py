"""``verify`` for Gemma 4 assistant files: the numpy forward of the GGUF (:mod:`.numpy_forward`, llama.cpp's
``gemma4-assistant`` graph) against the independent torch forward of the checkpoint (:mod:`.torch_forward`,
transformers' ``Gemma4AssistantForCausalLM``), component by component over chained draft steps, the model keys, and
an account of every tensor on both sides (:mod:`dspark_convert.verify.accounting`, with the variant's drop rules:
the E2B/E4B ``masked_embedding`` tensors).

The file holds neither the target's token embeddings nor its KV cache, so both are seeded inputs and no target folder
is needed: per case, the target's hidden row (the features' last row, width ``backbone_hidden_size``), the last
accepted token, the target's embedding rows (``N(0, 1/backbone)`` per token, drawn from the case's seed and the token
id, so a drafted token fed back gets its own row) and the cache of its last sliding and last full-attention layers
(``N(0, 1)`` keys and values over the case's context positions, shaped by each side's own hyper-parameters: the GGUF's
keys on one side, the config on the other). The query sits at the position after the cache, as llama.cpp's MTP driver
puts it, for every chained step.

Exact mode: the torch side reads every checkpoint tensor rounded as the GGUF stores it, so every row must agree to
float32 round-off. The GGUF side's fed-back tokens and ``h`` rows are forced to the torch side's (a near-tie cannot
make later steps incomparable, and each step is compared on the same inputs); the ``drafted tokens`` row compares
the choices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import schema as S
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights, TargetWeights
from ...roles.proof import Forwards, Inputs, Pair
from .numpy_forward import FULL, SWA, AssistantCase, AssistantHParams, assistant_forward, read_hparams
from .seeded import cache, draw, embed_rows

A = S.ARCH_GEMMA4_ASSISTANT
NOTE = ("the target's embedding rows, hidden row and KV cache (its last sliding and last full-attention layers) are "
        "seeded inputs: the assistant file holds none of them, so no target folder is read")


def _candidate(g: GGUFWeights, target: TargetWeights, inputs: Inputs, drawn: list[tuple[int, int]],
               refs: list[Any]) -> list[Any]:
    """The numpy forward, its cache shaped by the GGUF's keys, its fed-back tokens and rows forced to the torch
    side's (``target`` is unused: None)."""
    hp = read_hparams(g)
    kinds = [k for k in (SWA, FULL) if k in {hp.kind(i) for i in range(hp.n_layer)}]
    cases = [AssistantCase(f[-1], tok, embed_rows(seed, f.shape[1]),
                           {k: cache(seed, k == FULL, f.shape[0], *hp.kv_shape(k)) for k in kinds})
             for f, (tok, seed) in zip(inputs.feats, drawn, strict=True)]
    return assistant_forward(g, cases, inputs.steps, [(r.inputs, r.h_in) for r in refs])


def _width(g: GGUFWeights, ck: Any) -> int:
    """The target's hidden width: the checkpoint's ``backbone_hidden_size``."""
    return int(ck.backbone)


def _n_vocab(g: GGUFWeights, ck: Any) -> int:
    return int(g.shape("token_embd.weight")[0])


# ---------------------------------------------------------------------------------------------- rows
def _step(attr: str, s: int) -> Callable[[Any], Any]:
    """Step ``s`` of a case's ``attr``."""
    return lambda case: getattr(case, attr)[s]


def _layer(il: int) -> Callable[[Any], Any]:
    """Layer ``il``'s output at step 0 of a case."""
    return lambda case: case.layers[0][il]


def rows(p: Pair) -> list[OutputCheck]:
    """Step 0 component by component (pre projection, each layer, the post-norm row, the logits, ``h_nextn``), then
    each later step's logits and ``h_nextn``, then the drafted tokens of every step."""
    n_layer = min(len(p.refs[0].layers[0]), len(p.outs[0].layers[0]))
    o = [p.cases("pre-projection", _step("pre", 0))]
    o += [p.cases(f"layer {il} output", _layer(il), layer=il) for il in range(n_layer)]
    if len(p.refs[0].layers[0]) != len(p.outs[0].layers[0]):
        o.append(OutputCheck("layers", [], grade="missing", passed=False,
                             detail=f"{len(p.refs[0].layers[0])} layers in the checkpoint, "
                                    f"{len(p.outs[0].layers[0])} in the GGUF"))
    o.append(p.cases("hidden (post-norm)", _step("hidden", 0)))
    o.append(p.cases("logits", _step("logits", 0), argmax=True))
    o.append(p.cases("post-projection (h_nextn)", _step("h_next", 0)))
    for s in range(1, len(p.refs[0].logits)):
        o.append(p.cases(f"step {s} logits", _step("logits", s), argmax=True))
        o.append(p.cases(f"step {s} post-projection (h_nextn)", _step("h_next", s)))
    o.append(p.tokens("drafted tokens", lambda case: np.concatenate(case.logits)))
    return o


def quality_rows(p: Pair) -> list[OutputCheck]:
    """The first step's logits and ``h_nextn`` against the unrounded checkpoint (information; later steps follow each
    side's own choices, so they are not comparable once a choice differs)."""
    return [p.cases("logits", _step("logits", 0), bound=None, argmax=True),
            p.cases("post-projection (h_nextn)", _step("h_next", 0), bound=None)]


def _hparams(g: GGUFWeights, outs: list[Any], drawn: list[tuple[int, int]]) -> dict[str, Any]:
    hp = AssistantHParams.from_gguf(g)
    return {"n_layer": hp.n_layer, "backbone": hp.n_backbone, "sliding_window": hp.sliding_window,
            "swa_layers": hp.swa_layers, "head_dim": hp.head_dim, "head_dim_swa": hp.head_dim_swa, "n_rot": hp.n_rot,
            "n_rot_swa": hp.n_rot_swa, "rope_base": hp.rope_base, "rope_base_swa": hp.rope_base_swa,
            "tokens": [t for t, _ in drawn], "query_position": "after the cache, every step"}


def metadata(g: GGUFWeights, ck: Any) -> list[MetadataCheck]:
    """The model keys against what the checkpoint's config implies (the last layer is always full attention)."""
    t, cfg = ck.text, ck.cfg
    rp = t.get("rope_parameters") or {}
    types = list(t.get("layer_types") or [])
    want: dict[str, Any] = {
        "block_count": t.get("num_hidden_layers"), "nextn_predict_layers": t.get("num_hidden_layers"),
        "embedding_length": t.get("hidden_size"), "embedding_length_out": cfg.get("backbone_hidden_size"),
        "feed_forward_length": t.get("intermediate_size"), "attention.head_count": t.get("num_attention_heads"),
        "attention.key_length": t.get("global_head_dim") or 512, "attention.key_length_swa": t.get("head_dim"),
        "attention.sliding_window": t.get("sliding_window"),
        "attention.sliding_window_pattern": [x == "sliding_attention" for x in types[:-1]] + [False] if types else None,
        "attention.layer_norm_rms_epsilon": float(t.get("rms_norm_eps", 1e-6)),
        "rope.freq_base": float((rp.get("full_attention") or {}).get("rope_theta", 1000000.0)),
        "rope.freq_base_swa": float((rp.get("sliding_attention") or {}).get("rope_theta", 10000.0)),
    }
    return [MetadataCheck.compare(f"{A}.{k}", g.value(f"{A}.{k}"), v) for k, v in want.items()]


#: verify's role: one token and one input seed per case, chained draft steps (the torch side: :mod:`.torch_forward`)
PROOF = Forwards(draw=draw, candidate=_candidate, hparams=_hparams, rows=rows, quality_rows=quality_rows,
                 metadata=metadata, n_vocab=_n_vocab, width=_width, notes=(NOTE,), needs_target=False)
