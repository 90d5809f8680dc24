"""llama.cpp's loader rules for an ``eagle3`` file (``check``): keys, one layer, the global tensors."""

from __future__ import annotations

from ... import schema as S
from ...plan import as_int
from ...roles.loader import Checker, Dims


def rules(c: Checker) -> int | None:
    """EAGLE-3 (contract §7.2): keys, one layer, the global tensors.

    Returns the input width of the layer's q/k/v projections (2 x hidden: embedding and hidden state).
    """
    hidden = c.dims.hidden
    taps = c.val(S.EAGLE3_TARGET_LAYERS)
    if not isinstance(taps, (list, tuple)) or len(taps) != 3:
        found = "none" if taps is None else len(taps) if isinstance(taps, (list, tuple)) else f"the scalar {taps!r}"
        c.err(S.EAGLE3_TARGET_LAYERS, "required-key", f"must have exactly 3 entries, found {found}")
    if c.val(S.EAGLE3_TARGET_HIDDEN_SIZE) is None:
        c.err(S.EAGLE3_TARGET_HIDDEN_SIZE, "required-key", "is missing (llama.cpp requires it)")
    target_hidden = as_int(c.val(S.EAGLE3_TARGET_HIDDEN_SIZE))
    if c.val(S.BLOCK_COUNT) not in (None, 1):
        c.err(c.key(S.BLOCK_COUNT), "eagle3", f"is {c.val(S.BLOCK_COUNT)}; the EAGLE-3 graph needs exactly 1 layer")
    d2t = c.tensors.get(S.T_D2T)
    n_draft_vocab = d2t.shape[0] if d2t is not None else None
    norm_before_fc = bool(c.val(S.EAGLE3_NORM_BEFORE_FC))
    n_rot = as_int(c.val(S.ROPE_DIMENSION_COUNT)) if c.val(S.ROPE_DIMENSION_COUNT) else c.dims.head_dim
    r = c.rules
    r.expect(S.T_FC, (hidden, Dims.product(3, target_hidden)) if hidden else None,
             f"ne[0] = 3 target layers x target_hidden_size {target_hidden}", required=True)
    r.expect(S.T_OUTPUT_NORM, (hidden,), required=True)
    r.expect(S.T_OUTPUT, (n_draft_vocab or None, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = {n_draft_vocab} d2t entries")
    r.expect(S.T_TOKEN_EMBD, None)
    r.expect(S.T_D2T, None)
    r.expect(S.T_ROPE_FREQS, (n_rot // 2 if n_rot else None,))
    if norm_before_fc:
        r.expect(S.T_ENC_NORM, (Dims.product(3, target_hidden),), required=True)
    out = c.tensors.get(S.T_OUTPUT)
    if out is not None and d2t is None and c.dims.n_tokens and out.shape[0] != c.dims.n_tokens:
        c.err(S.T_OUTPUT, "d2t", f"has {out.shape[0]} rows (a reduced vocabulary) but there is no d2t tensor")
    embd = c.tensors.get(S.T_TOKEN_EMBD)
    if embd is not None and hidden and embd.shape[-1] != hidden:
        c.err(S.T_TOKEN_EMBD, "shape", f"has shape {list(embd.ne)}, expected ne[0] = {hidden}")
    return 2 * hidden if hidden is not None else None


def in_what(d: Dims) -> str:
    return f"2 x hidden_size {d.hidden}"
