"""The tensor-planning pieces the MTP family modules (:mod:`.qwen`, :mod:`.glm`, :mod:`.glm_dsa`, :mod:`.nemotron`)
share: the NextN and attention name rows, the float-only source check, block-scaled FP8 weights read as float32
(:func:`adopt_fp8`), a layer tensor's spec, the per-expert tensors gathered into stacks, the layer indices a checkpoint
holds (:func:`layer_indices`) and the reverse name lookup for messages. Each family keeps its own names, tables and
refusal words; these helpers only take the words they put in a message as arguments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT

from ... import schema as S
from ...errors import ConvertError, clip_value
from ...formats.modelopt import read_hf_quant_config
from ...formats.quant import float_values, fp8_scale_inv_dequant, fp8_scaled
from ...hf.checkpoint import Checkpoint, TensorRef
from ...kit.common import tensor_type
from ...plan import TensorSpec
from ...tokenizer.targets import target_rows
from .transforms import ExpertStack

#: a NextN block's own tensors (after the block prefix) -> their GGUF names (after ``blk.{n+i}.``), by gguf-py's
#: tensor map: the same rows in every family whose checkpoint spells them this way (GLM-4.5, GLM-5, MiMo-V2)
NEXTN_ROWS: dict[str, str] = {
    "eh_proj.weight": S.L_NEXTN_EH_PROJ,
    "enorm.weight": S.L_NEXTN_ENORM,
    "hnorm.weight": S.L_NEXTN_HNORM,
    "embed_tokens.weight": S.L_NEXTN_EMBED_TOKENS,
    "shared_head.head.weight": S.L_NEXTN_SHARED_HEAD_HEAD,
    "shared_head.norm.weight": S.L_NEXTN_SHARED_HEAD_NORM,
}
#: a Qwen / GLM attention block with its sandwich norm (``post_attention_layernorm`` -> ``post_attention_norm``)
ATTENTION: dict[str, str] = {
    "input_layernorm.weight": S.L_ATTN_NORM,
    "post_attention_layernorm.weight": S.L_POST_ATTENTION_NORM,
    "self_attn.q_proj.weight": S.L_ATTN_Q,
    "self_attn.k_proj.weight": S.L_ATTN_K,
    "self_attn.v_proj.weight": S.L_ATTN_V,
    "self_attn.o_proj.weight": S.L_ATTN_OUT,
    "self_attn.q_norm.weight": S.L_ATTN_Q_NORM,
    "self_attn.k_norm.weight": S.L_ATTN_K_NORM,
}
#: the float dtypes an MTP head is converted from
FLOAT_DTYPES = ("BF16", "F16", "F32")
#: the end of the refusal of any other dtype (after ``has dtype X; ``)
FLOAT_WORDS = ("an MTP head is converted from BF16, F16 or F32 weights, or F8_E4M3 ones with their weight_scale_inv "
               "blocks (quantization_config quant_method 'fp8')")


def float_ref(ck: Checkpoint, src: str, words: str = FLOAT_WORDS) -> TensorRef:
    """The ref of checkpoint tensor ``src``, refused in one line (``... has dtype X; <words>``) unless it is BF16, F16
    or F32."""
    ref = ck.ref(src)
    if ref.dtype not in FLOAT_DTYPES:
        raise ConvertError(f"{ref.file}: tensor '{src}' has dtype {ref.dtype}; {words}")
    return ref


#: the suffix of a block-scaled FP8 weight's scales (``quant_method: fp8``)
SCALE_INV = "_scale_inv"
#: FP8 companions upstream drops unread (``conversion/base.py`` ``dequant_model``)
UNUSED_FP8 = (".activation_scale", "_activation_scale")
#: a ModelOpt FP8 weight's scale, and the scales upstream drops from a ModelOpt checkpoint unread
MODELOPT_SCALE = ".weight_scale"
MODELOPT_UNUSED = (".input_scale", ".k_scale", ".v_scale")


def fp8_block(config: Mapping[str, Any], where: str) -> tuple[int, int] | None:
    """``quantization_config.weight_block_size`` of a ``quant_method: fp8`` checkpoint, None for any other (or none);
    refused in one line unless it is two positive integers (the rows and columns one scale covers)."""
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping) or qc.get("quant_method") != "fp8":
        return None
    bs = qc.get("weight_block_size")
    if not (isinstance(bs, list) and len(bs) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in bs)):
        raise ConvertError(f"{where}: quantization_config weight_block_size is {clip_value(bs)}, expected two "
                           "positive integers (the rows and columns each weight_scale_inv value covers)")
    return bs[0], bs[1]


def quant_method(ck: Checkpoint) -> str | None:
    """The checkpoint's ``quantization_config.quant_method``, else (a ModelOpt export that declares it only there)
    the lower-cased producer name of its ``hf_quant_config.json``, as upstream b11434 completes it; a value that is
    not a string as its ``repr``."""
    qc = ck.config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, Mapping) else None
    if method is None:
        data = read_hf_quant_config(ck.path)
        producer = data.get("producer") if isinstance(data, dict) else None
        method = str(producer.get("name") or "").lower() if isinstance(producer, dict) else None
    return None if method is None else method if isinstance(method, str) else clip_value(method)


def adopt_fp8(ck: Checkpoint, where: str) -> int:
    """Read the FP8 weights of checkpoint ``ck`` as float32, as upstream's ``dequant_model`` does before any family
    rule; returns how many weights were adopted.

    - ``quant_method: fp8`` (block-scaled): each F8_E4M3 ``X`` with its float ``X_scale_inv`` (one per
      ``weight_block_size`` block) becomes ``e4m3(x) * scale`` (one float32 product) in ``X``'s place; refused in one
      line: a scale without its weight, of a weight that is not F8_E4M3 [rows, cols], or not float
      [ceil(rows / block rows), ceil(cols / block cols)], and an F8_E4M3 tensor without its scale.
    - ``quant_method: modelopt`` (ModelOpt FP8): each F8_E4M3 ``X.weight`` with its ``X.weight_scale``, one float
      (per tensor) or one per output row (per channel), becomes codes times scale; refused in one line: another
      scale shape or dtype, a scale beside a weight that is not F8_E4M3 (an NVFP4 head is not converted here).

    The scales and the unused activation / KV-cache scales leave :attr:`Checkpoint.names`. Any other declared
    ``quant_method`` is refused in one line, as upstream's ``dequant_model`` refuses it."""
    method = quant_method(ck)
    if method == "modelopt":
        return _adopt_modelopt_fp8(ck)
    if method not in (None, "fp8"):
        raise ConvertError(f"{where}: quantization_config quant_method {clip_value(method)}: an MTP head is converted "
                           "from float weights, block-scaled FP8 ('fp8') or ModelOpt FP8 ('modelopt')")
    block = fp8_block(ck.config, where)
    if block is None:
        return 0
    br, bc = block
    scales = [n for n in ck.names if n.endswith(SCALE_INV)]
    for sname in scales:
        wname = sname.removesuffix(SCALE_INV)
        if wname not in ck:
            raise ConvertError(f"{ck.ref(sname).file}: tensor '{sname}' scales '{wname}', which the checkpoint does "
                               "not hold")
        w, sc = ck.ref(wname), ck.ref(sname)
        if w.dtype != "F8_E4M3" or len(w.shape) != 2:
            raise ConvertError(f"{w.file}: tensor '{wname}' is {w.dtype} {list(w.shape)} beside '{sname}'; expected "
                               "an F8_E4M3 matrix (block-scaled FP8)")
        want = (-(-w.shape[0] // br), -(-w.shape[1] // bc))
        if sc.dtype not in FLOAT_DTYPES or tuple(sc.shape) != want:
            raise ConvertError(f"{sc.file}: tensor '{sname}' is {sc.dtype} {list(sc.shape)}; expected a float scale "
                               f"per {br}x{bc} block of '{wname}' {list(w.shape)}: {list(want)}")

        def dequant(raw: np.ndarray, dtype: str, row0: int, sname: str = sname, sdtype: str = sc.dtype) -> np.ndarray:
            rows = raw.shape[0]
            s = ck.read(sname)[row0 // br: -(-(row0 + rows) // br)]
            return fp8_scale_inv_dequant(raw, s, br, bc, sdtype, row0=row0)

        ck.derive(wname, dequant)
    scaled = {n.removesuffix(SCALE_INV) for n in scales}
    lone = next((n for n in ck.names if n not in scaled and ck.ref(n).dtype == "F8_E4M3"), None)
    if lone is not None:
        raise ConvertError(f"{ck.ref(lone).file}: tensor '{lone}' has dtype F8_E4M3 but the checkpoint has no "
                           f"'{lone}{SCALE_INV}' (block-scaled FP8: one scale per {br}x{bc} block)")
    ck.hide(set(scales) | {n for n in ck.names if n.endswith(UNUSED_FP8)})
    return len(scales)


def _adopt_modelopt_fp8(ck: Checkpoint) -> int:
    scales = [n for n in ck.names if n.endswith(MODELOPT_SCALE)]
    for sname in scales:
        wname = sname.removesuffix("_scale")
        if wname not in ck:
            continue  # upstream drops a scale without its weight
        w, sc = ck.ref(wname), ck.ref(sname)
        if w.dtype != "F8_E4M3" or len(w.shape) != 2:
            raise ConvertError(f"{w.file}: tensor '{wname}' is {w.dtype} {list(w.shape)} beside '{sname}'; expected an "
                               "F8_E4M3 matrix (ModelOpt FP8; NVFP4 MTP heads are not converted)")
        per_tensor = math.prod(sc.shape) == 1
        if sc.dtype not in FLOAT_DTYPES or not (per_tensor or tuple(sc.shape) == (w.shape[0],)):
            raise ConvertError(f"{sc.file}: tensor '{sname}' is {sc.dtype} {list(sc.shape)}; expected one float "
                               f"scale, or one per row of '{wname}' [{w.shape[0]}] (ModelOpt FP8)")

        def dequant(raw: np.ndarray, dtype: str, row0: int, sname: str = sname, sdtype: str = sc.dtype,
                    per_tensor: bool = per_tensor) -> np.ndarray:
            s = float_values(np.asarray(ck.read(sname)), sdtype).reshape(-1)
            rows = s[:1] if per_tensor else s[row0: row0 + raw.shape[0]]
            return fp8_scaled(raw, rows.reshape(-1, 1))

        ck.derive(wname, dequant)
    ck.hide(set(scales) | {n for n in ck.names if n.endswith(MODELOPT_UNUSED)})
    return len(scales)


def layer_spec(ck: Checkpoint, src: str, name: str, out: QT) -> TensorSpec:
    """GGUF tensor ``name`` copied from ``src`` (checked by :func:`float_ref`): F32 when its short name (after
    ``blk.{i}.``) is one of :data:`schema.F32_LAYER_TENSORS`, else :func:`kit.common.tensor_type`; no transform."""
    ref = float_ref(ck, src)
    short = name.split(".", 2)[-1] if name.startswith("blk.") else name
    ggml = QT.F32 if short in S.F32_LAYER_TENSORS else tensor_type(name, ref.shape, out)
    return TensorSpec(name=name, shape=ref.shape, ggml_type=ggml, sources=(src,), source_dtype=ref.dtype)


class ExpertGroups:
    """Per-expert checkpoint tensors gathered by block until a block has all ``per_block`` of them (projections x
    experts), which is where upstream emits that block's stacks."""

    def __init__(self, per_block: int) -> None:
        self.per_block = per_block
        self.tensors: dict[int, dict[str, dict[int, str]]] = {}
        self.count: dict[int, int] = {}

    def add(self, bid: int, proj: str, xid: int, src: str) -> dict[str, dict[int, str]] | None:
        """Record ``src`` as expert ``xid`` of projection ``proj`` of block ``bid``; the block's tensors (projection ->
        expert -> source) when this is its ``per_block``-th, else None."""
        self.tensors.setdefault(bid, {}).setdefault(proj, {})[xid] = src
        self.count[bid] = self.count.get(bid, 0) + 1
        return self.tensors[bid] if self.count[bid] == self.per_block else None

    def incomplete(self) -> list[tuple[int, int]]:
        """(block, tensors seen) of every block that got some expert tensors but not ``per_block``, in arrival
        order."""
        return [(bid, c) for bid, c in self.count.items() if c != self.per_block]


def stack_spec(ck: Checkpoint, per: Mapping[int, str], experts: int, what: str, name: str, out: QT, *,
               count_key: str, words: str = FLOAT_WORDS) -> TensorSpec:
    """GGUF tensor ``name``, ``(experts, rows, cols)``: experts ``0 .. experts - 1`` of ``per`` (expert -> source)
    stacked. ``what`` names the per-expert tensors in messages (``model.layers.3.mlp.experts.*.up_proj.weight``);
    refused in one line when an expert is missing or beyond ``count_key`` ``experts``, when their shapes or dtypes
    differ or are not 2-D, or (:func:`float_ref` with ``words``) when the dtype is not a float one."""
    missing = sorted(set(range(experts)) - per.keys())
    extra = sorted(per.keys() - set(range(experts)))
    if missing or extra:
        state = "is missing" if missing else f"is beyond {count_key} {experts}"
        raise ConvertError(f"{ck.path}: expert {(missing or extra)[0]} of {what} {state}")
    srcs = tuple(per[e] for e in range(experts))
    refs = [ck.ref(s) for s in srcs]
    shapes = {r.shape for r in refs}
    dtypes = {r.dtype for r in refs}
    if len(shapes) != 1 or len(refs[0].shape) != 2 or len(dtypes) != 1:
        raise ConvertError(f"{refs[0].file}: the experts of {what} differ in shape or dtype ({sorted(shapes)}, "
                           f"{sorted(dtypes)}); expected one 2-D shape and dtype")
    float_ref(ck, srcs[0], words)
    rows, cols = refs[0].shape
    shape = (experts, rows, cols)
    return TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out), sources=srcs,
                      transform=ExpertStack(experts), source_dtype=refs[0].dtype)


def hf_names_of(gguf: str, roots: Mapping[str, str], layer: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The checkpoint names that become GGUF tensor ``gguf``, for messages: the ``roots`` (checkpoint name -> GGUF
    name) that do, else for a ``blk.{i}.<short>`` tensor every ``layer`` pattern (checkpoint pattern, short name)
    whose short name is ``<short>``, in ``layer``'s order."""
    found = tuple(hf for hf, name in roots.items() if name == gguf)
    if found or not gguf.startswith("blk."):
        return found
    short = gguf.split(".", 2)[-1]
    return tuple(hf for hf, name in layer if name == short)


def layer_indices(match: Callable[[str], re.Match[str] | None], names: Iterable[str]) -> list[int]:
    """The distinct layer indices (group 1 of ``match``'s result) of the checkpoint names ``match`` accepts, in
    ascending order."""
    return sorted({int(m.group(1)) for m in map(match, names) if m})


def target_archs(classes: tuple[str, ...]) -> dict[str, str]:
    """HF class -> GGUF arch: every target architecture the target table registers to one of ``classes`` with an
    MTP arch (:data:`~dspark_convert.schema.MTP_ARCHES`)."""
    return {row.name: row.gguf_arch for row in target_rows()
            if row.model_class in classes and row.gguf_arch is not None and row.gguf_arch in S.MTP_ARCHES}
