"""Gemma4 DSpark loader rules for ``check`` (upstream b11434 ``src/models/dflash.cpp`` ``load_arch_hparams`` /
``load_arch_tensors`` and the decoder graph).

A ``dflash`` file is loaded with the DFlash / DSpark key and global-tensor rules and the generic layer, plus what
the b11223+ loader creates for every non-DSV4 ``dflash`` layer as optional and this variant uses:
``attn_post_norm`` / ``ffn_post_norm`` {n_embd}, ``layer_output_scale`` {1}, one ``rope_freqs`` {key_length / 2}
(shared by every layer), and ``attn_v`` optional (without it the graph uses K, RMS-normed without a weight, as V).

Errors are what the loader or the graph refuses (an unknown ``hidden_activation`` throws; ``key_length`` must equal
``value_length``, a graph assertion), or a file that is half one block and half another (a layer output scale,
a sandwich norm in some layers only). Warnings are files that load but do not compute a Gemma 4 block: no
``embedding_scale``, an attention scale other than 1, a SiLU MLP, proportional RoPE without ``rope_freqs``.
"""

from __future__ import annotations

from ... import schema as S
from ...roles.loader import Checker
from ..dflash.loader import in_what
from ..dflash.loader import rules as dflash_rules

__all__ = ["GENERIC_LAYERS", "in_what", "rules"]

#: the generic layer rules are applied here (with attn_v optional), not by the driver
GENERIC_LAYERS = False

#: activations llama.cpp's ``dflash`` loader accepts (anything else throws "unsupported DFlash hidden activation")
ACTIVATIONS = ("silu", "gelu", "gelu_pytorch_tanh")
#: per-layer tensors this variant expects in every layer when blk.0 has them
_PER_LAYER = (S.L_ATTN_POST_NORM, S.L_FFN_POST_NORM, S.L_LAYER_OUT_SCALE)


def rules(c: Checker) -> int | None:
    """The rule builder of the ``gemma4-dspark`` loader variant (fills ``c.rules``, adds findings)."""
    hidden = dflash_rules(c)
    c.layer_rules(hidden, f"hidden_size {hidden}")
    d, r = c.dims, c.rules
    n_layer = min(d.n_layer or 0, len(c.plan.tensors))
    for i in range(n_layer):
        p = S.LAYER_PREFIX.format(bid=i)
        r.required.discard(p + S.L_ATTN_V)  # optional since b11223: K doubles as V
        r.expect(p + S.L_ATTN_POST_NORM, (hidden,), f"hidden_size {hidden}")
        r.expect(p + S.L_FFN_POST_NORM, (hidden,), f"hidden_size {hidden}")
        r.expect(p + S.L_LAYER_OUT_SCALE, (1,), "one scalar per layer")
    r.expect(S.T_ROPE_FREQS, (d.head_dim // 2 if d.head_dim else None,),
             f"key_length {d.head_dim} / 2 (one factor per rotary pair)")
    for short in _PER_LAYER:
        if S.LAYER_PREFIX.format(bid=0) + short not in c.tensors:
            continue
        missing = [i for i in range(n_layer) if S.LAYER_PREFIX.format(bid=i) + short not in c.tensors]
        if missing:
            c.err(S.LAYER_PREFIX.format(bid=missing[0]) + short, "gemma4-dspark",
                  f"is missing but blk.0.{short} is present; a Gemma4 DSpark file has it in every layer")
    with_v = [i for i in range(n_layer) if S.LAYER_PREFIX.format(bid=i) + S.L_ATTN_V in c.tensors]
    if with_v and len(with_v) != n_layer:
        c.warn(S.LAYER_PREFIX.format(bid=with_v[0]) + S.L_ATTN_V, "gemma4-dspark",
               f"is present in {len(with_v)} of {n_layer} layers; layers without it use K as V")
    elif with_v:
        c.warn(S.LAYER_PREFIX.format(bid=0) + S.L_ATTN_V, "gemma4-dspark",
               "is present: llama.cpp uses it as V, whereas a Gemma4 DSpark (attention_k_eq_v) uses the RMS-normed K")
    _key_rules(c)
    return hidden


def _key_rules(c: Checker) -> None:
    act = c.val(S.HIDDEN_ACTIVATION)
    if act is not None and act not in ACTIVATIONS:
        c.err(c.key(S.HIDDEN_ACTIVATION), "hidden-activation", f"is {act!r}; llama.cpp accepts {', '.join(ACTIVATIONS)} "
              "(it fails with \"unsupported DFlash hidden activation\")")
    elif act in (None, "silu"):
        c.warn(c.key(S.HIDDEN_ACTIVATION), "gemma4-dspark", f"is {act!r}: llama.cpp runs a SiLU MLP; a Gemma 4 block "
               "is GELU (tanh), expected 'gelu_pytorch_tanh'")
    k_len, v_len = c.val(S.KEY_LENGTH), c.val(S.VALUE_LENGTH)
    if k_len is not None and v_len is not None and k_len != v_len:
        c.err(c.key(S.VALUE_LENGTH), "gemma4-dspark", f"is {v_len}, expected key_length {k_len} (the graph asserts "
              "equal K and V head sizes)")
    scale = c.val(S.ATTENTION_SCALE)
    if scale != 1.0:
        c.warn(c.key(S.ATTENTION_SCALE), "gemma4-dspark", f"is {scale!r}: a Gemma 4 block scales attention scores by 1 "
               "(its q/k norms do the scaling); without the key llama.cpp uses 1/sqrt(head_dim)")
    if c.val(S.EMBEDDING_SCALE) is None:
        c.warn(c.key(S.EMBEDDING_SCALE), "gemma4-dspark", "is missing: llama.cpp does not scale the token embeddings, "
               "a Gemma 4 block multiplies them by sqrt(hidden_size)")
    rot = c.val(S.ROPE_DIMENSION_COUNT)
    if S.T_ROPE_FREQS not in c.tensors and isinstance(rot, int) and rot == c.dims.head_dim:
        c.warn(S.T_ROPE_FREQS, "gemma4-dspark", "is missing: every rotary pair of the head rotates (default RoPE); "
               "a proportional-RoPE draft needs it to leave the unrotated pairs in place")
