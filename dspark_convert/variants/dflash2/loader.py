"""llama.cpp's loader rules for a DFlash2 file (``check``): the ``dflash`` rules plus the conv / selector ones."""

from __future__ import annotations

from ... import schema as S
from ...plan import as_int
from ...roles.loader import Checker
from ..dflash.loader import in_what
from ..dflash.loader import rules as dflash_rules

__all__ = ["in_what", "rules"]



def rules(c: Checker) -> int | None:
    """DFlash2 (spec/upstream-b11434.md §2.1; b11434 ``src/models/dflash.cpp``): the DFlash rules, plus the conv /
    selector keys (present and positive, ``hidden % group == 0``, ``hidden >= top_k (top_k + 1)``), the
    selector and per-layer conv tensors, and a full vocabulary (no d2t)."""
    hidden = dflash_rules(c)
    keys = {}
    for key in (S.DFLASH_BLOCK_SIZE, S.DFLASH_CONV_KERNEL_SIZE, S.DFLASH_CONV_GROUP_SIZE, S.DFLASH_SELECTOR_RANK,
                S.DFLASH_SELECTOR_TOP_K):
        v = as_int(c.val(key))
        if not v or v <= 0:
            c.err(key, "required-key", "is missing or 0 (llama.cpp: \"DFlash2 model is missing conv/selector metadata\")")
        keys[key] = v if v and v > 0 else None
    group, top_k = keys[S.DFLASH_CONV_GROUP_SIZE], keys[S.DFLASH_SELECTOR_TOP_K]
    kernel, rank = keys[S.DFLASH_CONV_KERNEL_SIZE], keys[S.DFLASH_SELECTOR_RANK]
    if hidden and group and hidden % group:
        c.err(S.DFLASH_CONV_GROUP_SIZE, "dflash2", f"is {group}; hidden_size {hidden} is not a multiple of it "
              "(llama.cpp: \"DFlash2 hidden size must be divisible by conv_group_size\")")
    if hidden and top_k and hidden < top_k * (top_k + 1):
        c.err(S.DFLASH_SELECTOR_TOP_K, "dflash2", f"is {top_k}; hidden_size {hidden} is below top_k x (top_k + 1) = "
              f"{top_k * (top_k + 1)} (llama.cpp: \"DFlash2 hidden size is too small for the selector lattice\")")
    if S.T_D2T in c.tensors:
        c.err(S.T_D2T, "dflash2", "is present; DFlash2's selector scores the full vocabulary (no reduced vocabulary)")
    n_tokens = c.dims.n_tokens
    r = c.rules
    for name in (S.T_SELECTOR_PREV, S.T_SELECTOR_NEXT):
        r.expect(name, (n_tokens or None, rank), f"ne[0] = selector_rank {rank}, ne[1] = {n_tokens} tokens",
                 required=True)
    r.expect(S.T_SELECTOR_HIDDEN, (rank, hidden), f"ne[0] = hidden_size {hidden}, ne[1] = selector_rank {rank}",
             required=True)
    projected = 2 * kernel * hidden // group if kernel and hidden and group and not hidden % group else None
    for i in range(c.layer_count(c.dims.n_layer or 0)):
        p = S.LAYER_PREFIX.format(bid=i)
        for base, proj in ((S.L_ATTN_CONV_BASE, S.L_ATTN_CONV_PROJ), (S.L_FFN_CONV_BASE, S.L_FFN_CONV_PROJ)):
            r.expect(p + base, (2, kernel, hidden), f"ne = [hidden_size {hidden}, conv_kernel_size {kernel}, 2]",
                     required=True)
            r.expect(p + proj, (projected, hidden), f"ne[1] = 2 x conv_kernel_size {kernel} x hidden_size "
                     f"{hidden} / conv_group_size {group}", required=True)
    return hidden
