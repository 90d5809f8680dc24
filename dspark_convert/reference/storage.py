"""How a GGUF stores a checkpoint's values, reproduced on the checkpoint side of ``verify`` (exact mode).

- :func:`gguf_counterpart`: the GGUF tensor that stores a checkpoint tensor (this module's own copy of the
  contract's backbone name table, which each variant's torch side extends with its own rows; used only to look up
  the GGML type).
- :func:`round_values`: a float32 array after the rounding of a GGML type: round-to-nearest-even for F16 (numpy's
  cast), gguf-py's reference quantizer then dequantizer for BF16 and the block types (Q8_0, MXFP4, ...), nothing
  for F32. numpy and gguf-py only: no torch, and none of the converter's code (not its fast Q8_0), so it is an
  independent account of what the file stores. A variant proved tensor by tensor (``proof="tensors"``) uses it as is;
- :func:`round_to_storage`: the same rounding of a torch tensor (the torch forward's weights).
- :func:`widen`: a checkpoint tensor as float32 (BF16 by a bit shift).

torch is imported inside the functions that take or make tensors, so importing this module costs no torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from gguf import GGMLQuantizationType, quants

from ..errors import ConvertError

if TYPE_CHECKING:
    import torch

#: checkpoint name (bare, per layer) -> GGUF name of the Qwen3 / Llama decoder layer; the torch side's own copy of
#: the contract's table (a variant's torch side adds its own rows)
_LAYER_GGUF = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}
#: the backbone's globals: final norm, input embedding, output head
_GLOBAL_GGUF = {
    "norm.weight": "output_norm.weight", "embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight",
}
_LAYER = re.compile(r"^(?:model\.)?layers\.(\d+)\.(.+)$")
#: checkpoint dtype (``str`` of the torch dtype) -> the GGML type that holds its values exactly (rounding to it
#: changes nothing)
SAME_TYPE = {"torch.bfloat16": "BF16", "torch.float16": "F16"}
#: values rounded at once by a block quantizer (bounds gguf-py's temporaries to a few hundred MB)
_ROUND_CHUNK = 1 << 22


def gguf_counterpart(name: str, prefix: str = "", layer: Mapping[str, str] | None = None,
                     top: Mapping[str, str] | None = None) -> str | None:
    """The GGUF tensor that stores checkpoint tensor ``name`` in the backbone's table (``prefix``: a one-layer draft's
    layer prefix, whose layer is ``blk.0``; ``layer`` and ``top``: a torch side's own layer and global names over the
    backbone's, e.g. a sandwich-norm layer's or a draft's context projection).

    Example:
        >>> gguf_counterpart("layers.1.self_attn.o_proj.weight"), gguf_counterpart("mid.mlp.up_proj.weight", "mid.")
        ('blk.1.attn_output.weight', 'blk.0.ffn_up.weight')
        >>> gguf_counterpart("layers.2.layer_scalar", layer={"layer_scalar": "layer_output_scale.weight"})
        'blk.2.layer_output_scale.weight'
        >>> gguf_counterpart("fc.weight"), gguf_counterpart("fc.weight", top={"fc.weight": "fc.weight"})
        (None, 'fc.weight')
    """
    table = _LAYER_GGUF if layer is None else {**_LAYER_GGUF, **layer}
    if prefix and name.startswith(prefix):
        rest = table.get(name[len(prefix):])
        return None if rest is None else "blk.0." + rest
    m = _LAYER.match(name)
    if m:
        rest = table.get(m.group(2))
        return None if rest is None else f"blk.{int(m.group(1))}.{rest}"
    return _GLOBAL_GGUF.get(name) if top is None else {**_GLOBAL_GGUF, **top}.get(name)


def round_values(a: np.ndarray, ggml_type: str) -> np.ndarray:
    """``a`` (float32) after the rounding of GGML type ``ggml_type``, as float32 (numpy and gguf-py only).

    Block types are rounded in row chunks (blocks run along the last axis, so chunks round as the whole would);
    a type gguf-py cannot quantize raises ConvertError.

    Example:
        >>> round_values(np.array([1.00390625, 1 / 3], np.float32), "BF16").tolist()   # halfway rounds to even
        [1.0, 0.333984375]
    """
    if ggml_type == "F32":
        return a
    try:
        qt = GGMLQuantizationType[ggml_type]
    except KeyError:
        raise ConvertError(f"verify cannot reproduce the rounding of GGML type {ggml_type} (unknown type)") from None
    a = np.ascontiguousarray(a, dtype=np.float32)
    if qt == GGMLQuantizationType.F16:
        with np.errstate(over="ignore"):                    # beyond the F16 range: inf, as the file stores it
            return a.astype(np.float16).astype(np.float32)
    rows = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
    out = np.empty_like(rows)
    step = max(1, _ROUND_CHUNK // max(1, rows.shape[1]))
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(0, rows.shape[0], step):
                out[i:i + step] = quants.dequantize(quants.quantize(rows[i:i + step], qt), qt)
    except (NotImplementedError, ValueError) as e:
        raise ConvertError(f"verify cannot reproduce the rounding of GGML type {ggml_type} ({e})") from None
    return out.reshape(a.shape)


def round_to_storage(t: torch.Tensor, ggml_type: str) -> torch.Tensor:
    """``t`` (float32) after the rounding of GGML type ``ggml_type``, as float32 (:func:`round_values`).

    Example:
        >>> import torch
        >>> round_to_storage(torch.tensor([1.00390625, 1 / 3]), "BF16").tolist()   # halfway rounds to even
        [1.0, 0.333984375]
    """
    import torch

    if ggml_type == "F32":
        return t
    return torch.from_numpy(round_values(t.numpy(), ggml_type))


def widen(t: torch.Tensor) -> torch.Tensor:
    """A floating-point checkpoint tensor as float32; BF16 widens by a 16-bit shift of its bits (exact, and several
    times faster than torch's CPU cast)."""
    import torch

    if t.dtype == torch.bfloat16:
        bits = t.contiguous().view(torch.int16).numpy().view(np.uint16)
        return torch.from_numpy(np.left_shift(bits, 16, dtype=np.uint32).view(np.float32))
    return t.float()


@dataclass
class Rounding:
    """What storage rounding did to one tensor: its GGML type, how many values it read and changed, and the
    largest change."""

    ggml_type: str
    values: int = 0
    changed: int = 0
    max_change: float = 0.0
