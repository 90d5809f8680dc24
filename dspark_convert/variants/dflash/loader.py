"""llama.cpp's loader rules for a ``dflash`` file (DFlash / DSpark; ``check``): keys, the global tensors and the
Markov / confidence heads. The layers are the generic Qwen3 / Llama ones of ``check.layer_rules``."""

from __future__ import annotations

from ... import schema as S
from ...gguf_constants import VT
from ...roles.loader import Checker, Dims


def rules(c: Checker) -> int | None:
    """DFlash / DSpark (contract §7.1, §7.3): keys, the global tensors and the Markov / confidence heads.

    Returns the input width of the layers' q/k/v projections (the hidden size).
    """
    hidden, n_tokens = c.dims.hidden, c.dims.n_tokens
    taps = c.val(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or not taps:
        c.err(S.DFLASH_TARGET_LAYERS, "required-key", "is missing (llama.cpp: \"DFlash model requires 'target_layers'\")")
    window = c.val(S.DFLASH_SLIDING_WINDOW)
    if isinstance(window, int) and window > 0:
        pattern = c.kv.get(S.DFLASH_SLIDING_WINDOW_PATTERN)
        if pattern is None or pattern.type != VT.ARRAY:
            c.err(S.DFLASH_SLIDING_WINDOW_PATTERN, "required-key", "must be an array when sliding_window > 0")
        elif c.dims.n_layer is not None and len(pattern.value) != c.dims.n_layer:
            c.err(S.DFLASH_SLIDING_WINDOW_PATTERN, "shape",
                  f"has {len(pattern.value)} entries, expected block_count {c.dims.n_layer}")
    if S.TOKENIZER_MASK_ID not in c.kv:
        c.warn(S.TOKENIZER_MASK_ID, "mask", "is missing: the draft's block is filled with token -1")
    n_taps = len(taps) if isinstance(taps, (list, tuple)) else None
    w1 = c.tensors.get(S.T_MARKOV_W1)
    markov_rank = w1.shape[1] if w1 is not None and len(w1.shape) == 2 else None
    d2t = c.tensors.get(S.T_D2T)
    n_draft_vocab = d2t.shape[0] if d2t is not None else n_tokens
    vocab_what = f"{n_draft_vocab} draft tokens (d2t entries)" if d2t is not None else f"{n_draft_vocab} tokens"
    r = c.rules
    r.expect(S.T_FC, (hidden, Dims.product(n_taps, hidden)), f"ne[0] = {n_taps} target layers x hidden_size {hidden}",
             required=True)
    r.expect(S.T_ENC_NORM, (hidden,), required=True)
    r.expect(S.T_OUTPUT_NORM, (hidden,), required=True)
    r.expect(S.T_TOKEN_EMBD, (n_tokens or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {n_tokens} tokens")
    r.expect(S.T_OUTPUT, (n_draft_vocab or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {vocab_what}")
    r.expect(S.T_D2T, None)
    r.expect(S.T_FC_SCALE, (1,))
    r.why[S.T_MARKOV_W1] = f"ne[0] = Markov rank {markov_rank}, ne[1] = {n_tokens} tokens"
    r.why[S.T_MARKOV_W2] = f"ne[0] = Markov rank {markov_rank}, ne[1] = {vocab_what}"
    r.why[S.T_CONF_W] = f"ne[0] = hidden_size {hidden} + Markov rank {markov_rank}"
    if w1 is not None:
        if S.DFLASH_BLOCK_SIZE not in c.kv:
            c.err(S.DFLASH_BLOCK_SIZE, "required-key", "is missing; the DSpark graph asserts it when Markov tensors exist")
        r.expect(S.T_MARKOV_W1, (n_tokens or None, markov_rank))
        r.expect(S.T_MARKOV_W2, (n_draft_vocab or None, markov_rank), required=True)
        # optional since upstream b10705 (vanilla-Markov exports ship without a confidence head)
        r.expect(S.T_CONF_W, (1, hidden + markov_rank if hidden and markov_rank else None))
        r.expect(S.T_CONF_B, (1,))
    else:
        for name in (S.T_MARKOV_W2, S.T_CONF_W, S.T_CONF_B):
            if name in c.tensors:
                c.err(name, "extra-tensor", "is present without markov_w1.weight; llama.cpp would not create it")
    return hidden


def in_what(d: Dims) -> str:
    return f"hidden_size {d.hidden}"
