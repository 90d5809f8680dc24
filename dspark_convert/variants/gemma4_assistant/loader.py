"""Gemma 4 assistant loader rules for ``check`` (upstream b11434 ``src/models/gemma4-assistant.cpp``
``load_arch_hparams`` / ``load_arch_tensors``; spec/drafts-beyond-dflash.md §2.4).

Keys the loader requires: ``attention.sliding_window_pattern`` (one BOOL per layer), ``attention.sliding_window``,
``attention.layer_norm_rms_epsilon``, ``attention.key_length_swa`` / ``value_length_swa``, and
``embedding_length_out`` (the target's hidden size), which must differ from ``embedding_length``; K and V head
sizes must be equal (global and sliding). Tensors: ``token_embd`` {n_embd, n_vocab}, ``output_norm``,
``nextn.pre_projection`` {2 x n_embd_out, n_embd}, ``nextn.post_projection`` {n_embd, n_embd_out}, the generated
``rope_freqs`` {key_length / 2}, and per layer the Q-only attention (``attn_q`` / ``attn_q_norm`` /
``attn_output`` sized by the layer's head dim: ``key_length_swa`` for sliding layers, ``key_length`` for full
ones), the sandwich norms, ``layer_output_scale`` {1} and the GELU FFN.
"""

from __future__ import annotations

from ... import schema as S
from ...plan import as_int
from ...roles.loader import Checker, Dims

__all__ = ["GENERIC_LAYERS", "in_what", "rules"]

#: the layers are not the generic Qwen3 / Llama ones: :func:`rules` expects them
GENERIC_LAYERS = False


def in_what(dims: Dims) -> str:
    return f"hidden_size {dims.hidden}"


def _per_layer(value: object, n: int) -> list[int | None]:
    """A per-layer key's value for each layer: an array as given, a scalar repeated."""
    if isinstance(value, list):
        return [as_int(v) for v in value[:n]] + [None] * (n - len(value))
    return [as_int(value)] * n


def rules(c: Checker) -> int | None:
    """The rule builder of the ``gemma4-assistant`` loader (fills ``c.rules``, adds findings)."""
    d, r = c.dims, c.rules
    hidden = d.hidden
    out = as_int(c.val(S.EMBEDDING_LENGTH_OUT))
    for tpl in (S.SLIDING_WINDOW_PATTERN, S.SLIDING_WINDOW, S.KEY_LENGTH_SWA, S.VALUE_LENGTH_SWA,
                S.EMBEDDING_LENGTH_OUT):
        if c.key(tpl) not in c.kv:
            c.err(c.key(tpl), "required-key", "is missing (llama.cpp: \"key not found in model\")")
    if out is not None and hidden is not None and out == hidden:
        c.err(c.key(S.EMBEDDING_LENGTH_OUT), "gemma4-assistant", f"is {out}, equal to embedding_length: llama.cpp "
              "refuses it (the assistant's width must differ from its target's)")
    for a, b in ((S.KEY_LENGTH, S.VALUE_LENGTH), (S.KEY_LENGTH_SWA, S.VALUE_LENGTH_SWA)):
        ka, kb = c.val(a), c.val(b)
        if ka is not None and kb is not None and ka != kb:
            c.err(c.key(b), "gemma4-assistant", f"is {kb}, expected {c.key(a)} {ka} (the loader requires equal K "
                  "and V head sizes)")
    n_layer = c.layer_count(d.n_layer or 0)
    pattern = c.val(S.SLIDING_WINDOW_PATTERN)
    if isinstance(pattern, list) and len(pattern) != n_layer:
        c.err(c.key(S.SLIDING_WINDOW_PATTERN), "gemma4-assistant", f"has {len(pattern)} entries, expected one per "
              f"layer (block_count {n_layer})")
    nextn = c.val(S.NEXTN_PREDICT_LAYERS)
    if nextn is not None and nextn != n_layer:
        c.warn(c.key(S.NEXTN_PREDICT_LAYERS), "gemma4-assistant", f"is {nextn}, expected block_count {n_layer} "
               "(the loader creates layers 0 .. nextn_predict_layers - 1)")
    swa = [bool(p) for p in pattern] if isinstance(pattern, list) else [False] * n_layer
    swa += [False] * (n_layer - len(swa))
    hd_full, hd_swa = as_int(c.val(S.KEY_LENGTH)), as_int(c.val(S.KEY_LENGTH_SWA))
    ff = _per_layer(c.val(S.FEED_FORWARD_LENGTH), n_layer)
    n_head = d.n_head
    r.expect(S.T_TOKEN_EMBD, (d.n_tokens, hidden), f"ne[0] = hidden_size {hidden}", required=True)
    r.expect(S.T_OUTPUT_NORM, (hidden,), f"hidden_size {hidden}", required=True)
    r.expect(S.T_PRE_PROJECTION, (hidden, 2 * out if out else None),
             f"ne[0] = 2 x embedding_length_out {out}, ne[1] = hidden_size {hidden}", required=True)
    r.expect(S.T_POST_PROJECTION, (out, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = "
             f"embedding_length_out {out}", required=True)
    r.expect(S.T_ROPE_FREQS, (hd_full // 2 if hd_full else None,),
             f"key_length {hd_full} / 2 (one factor per rotary pair of the full-attention layers)",
             required=not all(swa))
    for i in range(n_layer):
        p = S.LAYER_PREFIX.format(bid=i)
        hd = hd_swa if swa[i] else hd_full
        hd_what = f"{'key_length_swa' if swa[i] else 'key_length'} {hd}"
        q = Dims.product(n_head, hd)
        rows = {S.L_ATTN_NORM: ((hidden,), f"hidden_size {hidden}"),
                S.L_ATTN_Q: ((q, hidden), f"ne[1] = head_count {n_head} x {hd_what}"),
                S.L_ATTN_Q_NORM: ((hd,), hd_what),
                S.L_ATTN_OUT: ((hidden, q), f"ne[0] = head_count {n_head} x {hd_what}"),
                S.L_ATTN_POST_NORM: ((hidden,), f"hidden_size {hidden}"),
                S.L_LAYER_OUT_SCALE: ((1,), "one scalar per layer"),
                S.L_FFN_NORM: ((hidden,), f"hidden_size {hidden}"),
                S.L_FFN_GATE: ((ff[i], hidden), f"ne[1] = feed_forward_length {ff[i]}"),
                S.L_FFN_UP: ((ff[i], hidden), f"ne[1] = feed_forward_length {ff[i]}"),
                S.L_FFN_DOWN: ((hidden, ff[i]), f"ne[0] = feed_forward_length {ff[i]}"),
                S.L_FFN_POST_NORM: ((hidden,), f"hidden_size {hidden}")}
        for short, (shape, why) in rows.items():
            r.expect(p + short, shape, why, required=True)
    return hidden
