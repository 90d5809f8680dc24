"""ModelOpt NVFP4 checkpoints: the quantization config, the per-tensor layout, and what the GGUF gets from them.

A ModelOpt NVFP4 linear ``X`` is stored as ``X.weight`` (U8 ``[out, in/2]``: two e2m1 codes per byte, value ``2m``
in the low nibble), ``X.weight_scale`` (F8_E4M3 ``[out, in/16]``: one scale per 16 values), ``X.weight_scale_2``
(a float32 scalar: the per-tensor scale) and, for W4A4 layers (``NVFP4``), ``X.input_scale`` (a scalar activation
scale). The value of weight ``(i, j)`` is ``e2m1(code) * e4m3(weight_scale[i, j // 16]) * weight_scale_2``.

The quantization config is the config's ``quantization_config`` (``quant_algo``, ``quantized_layers``), completed
from ``hf_quant_config.json`` (its ``quantization`` object) when either is missing, as upstream b11434 reads it
(``conversion/base.py`` ``prepare_tensors``). ``quant_algo`` ``NVFP4`` (W4A4), ``W4A16_NVFP4`` (4-bit weights,
16-bit activations) or ``MIXED_PRECISION`` with per-layer ``quantized_layers[module].quant_algo``.

What the GGUF gets (upstream b11434, spec/upstream-b11434.md §2.4): each NVFP4 linear becomes a ggml NVFP4 tensor
(repacked losslessly, :func:`~dspark_convert.formats.quant.nvfp4_repack`), followed by ``<name>.scale`` (the
``weight_scale_2``) and ``<name>.input_scale`` as F32 ``[1]`` tensors, each only when it is not 1.0; these come
first in the file, in checkpoint order. A tensor whose effective algo (its closest ``quantized_layers`` module,
else the global one) is ``W4A16_NVFP4`` is listed in ``general.tensor_extra.name`` (sorted GGUF names) with
``general.tensor_extra.prec_a4`` false (parallel BOOL array), written right after ``general.quantization_version``:
without it llama.cpp runs the draft with 4-bit activations on Blackwell. With an outtype of f32 / f16 / bf16,
``general.file_type`` is 39 (MOSTLY_NVFP4); q8_0 keeps 7. Nothing here knows a draft family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConvertError, clip, clip_value
from .quant import NVFP4_BLOCK, NVFP4_SUB, nvfp4_bad_scales
from .transforms import Fp8ChannelDequant, Fp8TensorDequant, Transform

HF_QUANT_CONFIG = "hf_quant_config.json"
NVFP4_ALGOS = ("NVFP4", "W4A16_NVFP4")  #: per-tensor NVFP4 algos (W4A4 and W4A16)
W4A16 = "W4A16_NVFP4"
MIXED = "MIXED_PRECISION"
FP8 = "FP8"  #: a MIXED_PRECISION layer stored FP8: F8_E4M3 codes times a scalar ``weight_scale`` (dequantized)
FILE_TYPE_MOSTLY_NVFP4 = 39  #: ``general.file_type`` of an NVFP4 file converted at f32 / f16 / bf16
FLOAT_OUTTYPE_FILE_TYPES = (0, 1, 32)  #: f32, f16, bf16: the file types upstream replaces by MOSTLY_NVFP4
TENSOR_EXTRA_NAME = "general.tensor_extra.name"
TENSOR_EXTRA_PREC_A4 = "general.tensor_extra.prec_a4"
DROPPED_SUFFIXES = (".k_scale", ".v_scale")  #: KV-cache scales, dropped as upstream does


@dataclass(frozen=True)
class QuantConfig:
    """The ModelOpt quantization of a checkpoint: the global ``quant_algo``, the per-module algos (module paths
    as the family's bare names, e.g. ``layers.0.mlp.down_proj``), and where they were read (for messages)."""

    algo: str | None
    layers: Mapping[str, str | None]
    where: str
    compressed: bool = False  #: compressed-tensors NVFP4 (:func:`compressed_tensors_names` gives its ModelOpt names)

    @property
    def nvfp4(self) -> bool:
        """Upstream's rule: the global algo is an NVFP4 one, or some per-layer algo ends in ``NVFP4``."""
        return self.algo in NVFP4_ALGOS or any(str(a).endswith("NVFP4") for a in self.layers.values())

    def algo_of(self, module: str) -> str | None:
        """The effective algo of ``module`` (a weight name without ``.weight``): its closest listed ancestor's,
        else the global one.

        Example:
            >>> QuantConfig(MIXED, {"layers.1": W4A16}, "x").algo_of("layers.1.mlp.down_proj")
            'W4A16_NVFP4'
        """
        name = module
        while name:
            if name in self.layers:
                return self.layers[name]
            name = name.rpartition(".")[0]
        return self.algo

    def activations_16bit(self, weight: str) -> bool:
        """Whether the NVFP4 weight ``weight`` (bare name) is W4A16: its GGUF name gets ``prec_a4 = false``."""
        return self.algo_of(weight.removesuffix(".weight").removesuffix(".bias")) == W4A16


def read_hf_quant_config(folder: Path) -> Any:
    """``folder``'s ``hf_quant_config.json`` (the quantization file a ModelOpt export writes beside ``config.json``)
    as parsed JSON, any value; None when the folder has no such regular file. It is read as a small configuration
    file: a member of the folder, at most :data:`~dspark_convert.hf.checkpoint.MAX_CONFIG_BYTES`, nesting past the
    recursion limit one line.

    Example:
        >>> read_hf_quant_config(Path("fixtures/dflash-zlab")) is None
        True
    """
    path = folder / HF_QUANT_CONFIG
    if not path.is_file():
        return None
    from ..hf.checkpoint import MAX_CONFIG_BYTES, read_json

    return read_json(path, limit=MAX_CONFIG_BYTES)


def read_quant_config(folder: Path, config: Mapping[str, Any], tensor_names: list[str],
                      bare: Callable[[str], str]) -> QuantConfig | None:
    """The checkpoint's ModelOpt NVFP4 quantization, None when it declares none (or another method).

    ``bare`` maps checkpoint names to the family's names (the ``model.`` prefix dropped), applied to tensor names
    and to ``quantized_layers`` keys alike. A ModelOpt FP8 checkpoint (``quant_algo`` FP8, or MIXED_PRECISION
    with FP8 entries only) is one too: its FP8 linears are dequantized (:func:`fp8_dequant`), as upstream does.
    A compressed-tensors NVFP4 checkpoint (format ``nvfp4-pack-quantized``, or ``mixed-precision`` of such groups)
    is NVFP4 W4A4 with ``compressed`` set: its tensors are read under ModelOpt's names
    (:func:`adopt_compressed_tensors`). Refused with one line: a compressed-tensors mixed-precision checkpoint with
    another group format, a ModelOpt ``quant_algo`` other than NVFP4 / W4A16_NVFP4 / FP8 / MIXED_PRECISION, a
    ``quantized_layers`` entry with another algo than NVFP4 / W4A16_NVFP4 / FP8 or naming no module of the
    checkpoint.
    """
    qc = config.get("quantization_config") or {}
    if not isinstance(qc, dict):
        raise ConvertError(f"{folder / 'config.json'}: key 'quantization_config' is {clip_value(qc)}, expected a JSON object")
    where = str(folder / "config.json")
    algo, method, fmt = qc.get("quant_algo"), qc.get("quant_method"), qc.get("format")
    layers = qc.get("quantized_layers") or {}
    hf = folder / HF_QUANT_CONFIG
    data = read_hf_quant_config(folder) if not algo or not layers else None
    if data is not None:
        if not isinstance(data, dict):
            raise ConvertError(f"{hf}: expected a JSON object")
        q = data.get("quantization") or {}
        producer = data.get("producer") or {}
        if not isinstance(q, dict) or not isinstance(producer, dict):
            raise ConvertError(f"{hf}: keys 'quantization' / 'producer' must be JSON objects")
        if method is None:
            method = str(producer.get("name") or "").lower()
        algo, method, fmt = q.get("quant_algo", algo), q.get("quant_method", method), q.get("format", fmt)
        layers = q.get("quantized_layers", layers) or {}
        where = str(hf)
    if method == "compressed-tensors" and fmt in ("nvfp4-pack-quantized", "mixed-precision"):
        return _compressed_tensors(fmt, qc.get("config_groups"), where)
    if not isinstance(layers, dict):
        raise ConvertError(f"{where}: key 'quantized_layers' is {type(layers).__name__}, expected a JSON object")
    per_layer = {k: v.get("quant_algo") for k, v in layers.items() if isinstance(v, dict)}
    if method != "modelopt" and algo not in NVFP4_ALGOS and not any(str(a).endswith("NVFP4") for a in per_layer.values()):
        return None  # not a ModelOpt NVFP4 checkpoint: the family's ordinary dtype rules apply
    if algo not in NVFP4_ALGOS + (MIXED, FP8):
        raise ConvertError(f"{where}: quant_algo is {clip_value(algo)}; expected NVFP4, W4A16_NVFP4, FP8 or "
                           "MIXED_PRECISION (ModelOpt NVFP4)")
    modules: set[str] = set()
    for n in tensor_names:
        name = bare(n)
        while name := name.rpartition(".")[0]:
            modules.add(name)
    mapped: dict[str, str | None] = {}
    for layer, layer_algo in per_layer.items():
        if layer_algo not in NVFP4_ALGOS + (FP8,):
            raise ConvertError(f"{where}: quantized_layers entry '{clip(layer)}' has quant_algo {clip_value(layer_algo)}; expected "
                               "NVFP4, W4A16_NVFP4 or FP8")
        name = bare(layer)
        if name not in modules:
            raise ConvertError(f"{where}: quantized_layers entry '{clip(layer)}' names no module of the checkpoint "
                               "(no tensor starts with it)")
        mapped[name] = layer_algo
    q = QuantConfig(algo=algo, layers=mapped, where=where)
    if not q.nvfp4 and algo != FP8 and FP8 not in mapped.values():
        raise ConvertError(f"{where}: quant_algo is {clip_value(algo)} but no quantized_layers entry is NVFP4 or FP8")
    return q


def _compressed_tensors(fmt: str, groups: Any, where: str) -> QuantConfig | None:
    """Upstream's rule for compressed-tensors: NVFP4 (W4A4, whatever its groups' input activations) when the format
    is ``nvfp4-pack-quantized``, or ``mixed-precision`` with every config group ``nvfp4-pack-quantized``; another
    mixed-precision checkpoint is refused (upstream cannot convert one either)."""
    if fmt == "mixed-precision":
        if not isinstance(groups, dict) or not groups:
            raise ConvertError(f"{where}: compressed-tensors 'mixed-precision' without config_groups; expected an object "
                               "of groups of format 'nvfp4-pack-quantized'")
        for key, g in groups.items():
            if isinstance(g, dict) and g.get("format") != "nvfp4-pack-quantized":
                raise ConvertError(f"{where}: compressed-tensors config group '{clip(str(key))}' has format "
                                   f"{clip_value(g.get('format'))}; expected 'nvfp4-pack-quantized' (only NVFP4 "
                                   "mixed-precision checkpoints are supported)")
    return QuantConfig(algo=NVFP4_ALGOS[0], layers={}, where=where, compressed=True)


#: compressed-tensors suffix -> (ModelOpt suffix, whether the value is the reciprocal of ModelOpt's)
COMPRESSED_SUFFIXES = {".weight_packed": (".weight", False), ".weight_global_scale": (".weight_scale_2", True),
                       ".input_global_scale": (".input_scale", True)}


#: the plan note of a compressed-tensors NVFP4 conversion (the plan's sources are the ModelOpt names)
COMPRESSED_NOTE = ("compressed-tensors NVFP4: tensors read under ModelOpt's names, as upstream b11434 reads them "
                   "(X.weight_packed as X.weight; X.weight_global_scale and X.input_global_scale as their reciprocals "
                   "X.weight_scale_2 and X.input_scale); every NVFP4 layer counts as W4A4, so no prec_a4 arrays")


def reciprocal(raw: np.ndarray, dtype: str, row0: int = 0) -> np.ndarray:
    """``1 / value`` in float32 (a compressed-tensors global scale -> ModelOpt's per-tensor scale)."""
    from .transforms import to_float32

    with np.errstate(divide="ignore", over="ignore"):
        return np.float32(1.0) / to_float32(raw, dtype)


def compressed_tensors_names(names: list[str]) -> dict[str, tuple[str, bool]]:
    """The ModelOpt name of each compressed-tensors NVFP4 tensor of ``names`` (``X.weight_packed`` -> ``X.weight``;
    ``X.weight_global_scale`` / ``X.input_global_scale`` -> ``X.weight_scale_2`` / ``X.input_scale``, read as their
    reciprocal), with whether it is read as its reciprocal; a name the checkpoint already holds stays unmapped, as
    upstream b11434 leaves it (``conversion/base.py`` ``prepare_tensors``).

    Example:
        >>> compressed_tensors_names(["a.weight_packed", "a.weight_global_scale", "a.weight_scale", "b.weight"])
        {'a.weight_packed': ('a.weight', False), 'a.weight_global_scale': ('a.weight_scale_2', True)}
    """
    have = set(names)
    out: dict[str, tuple[str, bool]] = {}
    for n in names:
        for suffix, (to, inverse) in COMPRESSED_SUFFIXES.items():
            if n.endswith(suffix) and (new := n.removesuffix(suffix) + to) not in have:
                out[n] = (new, inverse)
    return out


def stored_name(ck: Any, name: str) -> str:
    """The name tensor ``name`` of checkpoint ``ck`` has in its files (its compressed-tensors name once
    :func:`adopt_compressed_tensors` renamed it)."""
    return str(ck.stored_name(name)) if hasattr(ck, "stored_name") else name


def adopt_compressed_tensors(ck: Any) -> None:
    """Let checkpoint ``ck`` (a :class:`~dspark_convert.hf.checkpoint.Checkpoint`) read its compressed-tensors NVFP4
    tensors under their ModelOpt names (:func:`compressed_tensors_names`), moved to the end of its order as
    upstream's renaming moves them. Each global scale must be a finite float whose reciprocal is finite and
    non-zero (refused in one line naming the stored tensor)."""
    names = compressed_tensors_names(ck.names)
    for old, (_, inverse) in names.items():
        if not inverse:
            continue
        ref = ck.ref(old)
        if not ref.is_float or math.prod(ref.shape) != 1:
            raise ConvertError(f"{ref.file}: tensor '{old}' is {ref.dtype} {list(ref.shape)}, expected a float32 scalar "
                               "(a compressed-tensors global scale)")
        from .transforms import to_float32

        raw = np.asarray(ck.read(old))
        v = float(reciprocal(raw, ref.dtype).reshape(-1)[0])
        if not math.isfinite(v) or v == 0:
            raise ConvertError(f"{ref.file}: tensor '{old}' is {float(to_float32(raw, ref.dtype).reshape(-1)[0])}, "
                               "expected a finite non-zero global scale whose reciprocal (the per-tensor scale) is "
                               "finite")
    ck.rename({old: (new, reciprocal if inverse else None) for old, (new, inverse) in names.items()})


@dataclass(frozen=True)
class Nvfp4Linear:
    """One NVFP4 linear of a checkpoint: its source tensors, logical shape and per-tensor scales."""

    weight: str
    scale: str
    scale2: str
    input_scale: str | None
    shape: tuple[int, int]
    scale2_value: float
    input_scale_value: float | None

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.weight, self.scale, self.scale2) + ((self.input_scale,) if self.input_scale else ())


def scale_is_trivial(value: float | None) -> bool:
    """Upstream's rule for a per-tensor scale: not written when it is 1.0 within 1e-6 (or absent).

    Example:
        >>> scale_is_trivial(1.0), scale_is_trivial(1.0000001), scale_is_trivial(0.5), scale_is_trivial(None)
        (True, True, False, True)
    """
    return value is None or abs(value - 1.0) < 1e-6


def _scalar(read: Callable[[str], np.ndarray], ref: Any, name: str) -> float:
    if not ref.is_float:
        raise ConvertError(f"{ref.file}: tensor '{name}' has dtype {ref.dtype}, expected a float32 scalar")
    n = math.prod(ref.shape)
    if n != 1:
        raise ConvertError(f"{ref.file}: tensor '{name}' has shape {list(ref.shape)}, expected a scalar (one "
                           "per-tensor scale; llama.cpp loads {1})")
    from .transforms import to_float32

    v = to_float32(np.asarray(read(name)), ref.dtype).reshape(-1)  # BF16 scalars come as their bits
    if not np.isfinite(v[0]) or v[0] == 0:
        raise ConvertError(f"{ref.file}: tensor '{name}' is {float(v[0])}, expected a finite non-zero scale")
    return float(v[0])


SCALE_CHECK_BYTES = 1 << 20  #: bytes of block scales checked at a time while planning


def _scales_checked(ck: Any, name: str, rows: int, cols: int, read: Callable[[str], np.ndarray]) -> str | None:
    """:func:`nvfp4_bad_scales` of the block scales ``name`` (``[rows, cols]`` bytes), read ``SCALE_CHECK_BYTES`` at a
    time with ``ck.read_rows`` when ``ck`` has it: a whole-tensor read of a memory map would leave its pages
    resident (1/8 of the weight's bytes per linear, tens of MiB of peak RSS for a release-size draft)."""
    if not hasattr(ck, "read_rows"):
        return nvfp4_bad_scales(read(name))
    step = max(1, SCALE_CHECK_BYTES // max(1, cols))
    first = None  # NaN scales anywhere are named before negative ones, as for the whole tensor
    for start in range(0, rows, step):
        bad = nvfp4_bad_scales(ck.read_rows(name, start, min(rows, start + step)))
        if bad is not None and "NaN" in bad:
            return bad
        first = first or bad
    return first


def nvfp4_linear(ck: Any, weight: str, read: Callable[[str], np.ndarray]) -> Nvfp4Linear:
    """The NVFP4 linear whose packed weight is ``weight`` (its ``weight_scale`` exists), validated: U8 ``[out, c]``
    codes, F8_E4M3 ``[out, c/8]`` scales, ``in = 2c`` a multiple of 64 (ggml super-blocks), scalar
    ``weight_scale_2`` (required) and optional scalar ``input_scale``; block scales neither NaN nor negative."""
    base = weight.removesuffix(".weight")
    w, s = ck.ref(weight), ck.ref(base + ".weight_scale")
    stored = stored_name(ck, weight)  # (messages name the tensors as the checkpoint stores them)
    if w.dtype != "U8" or len(w.shape) != 2:
        raise ConvertError(f"{w.file}: tensor '{stored}' is {w.dtype} {list(w.shape)}, expected U8 [out, in/2] "
                           "(NVFP4 codes, two per byte)")
    out, half = w.shape
    cols = 2 * half
    if s.dtype != "F8_E4M3" or tuple(s.shape) != (out, cols // NVFP4_SUB) or cols % NVFP4_SUB:
        raise ConvertError(f"{s.file}: tensor '{base}.weight_scale' is {s.dtype} {list(s.shape)}, expected F8_E4M3 "
                           f"{[out, cols // NVFP4_SUB]} (one scale per 16 of the {cols} values of a row of '{stored}')")
    if cols % NVFP4_BLOCK:
        raise ConvertError(f"{w.file}: tensor '{stored}' has {cols} in-features, not a multiple of {NVFP4_BLOCK} "
                           "(ggml NVFP4 blocks hold 64 values)")
    bad = _scales_checked(ck, base + ".weight_scale", out, cols // NVFP4_SUB, read)  # before anything is written
    if bad is not None:
        raise ConvertError(f"{s.file}: tensor '{base}.weight_scale' {bad}")
    scale2 = base + ".weight_scale_2"
    if scale2 not in ck:
        if stored.endswith(".weight_packed"):
            raise ConvertError(f"{w.file}: tensor '{stored}' is NVFP4 but the checkpoint has no '{base}.weight_global_scale' "
                               "(the global scale compressed-tensors writes)")
        raise ConvertError(f"{w.file}: tensor '{stored}' is NVFP4 but the checkpoint has no '{scale2}' (the "
                           "per-tensor scale ModelOpt writes)")
    v2 = _scalar(read, ck.ref(scale2), scale2)
    inp = base + ".input_scale"
    vi = _scalar(read, ck.ref(inp), inp) if inp in ck else None
    return Nvfp4Linear(weight=weight, scale=base + ".weight_scale", scale2=scale2,
                       input_scale=inp if inp in ck else None, shape=(out, cols), scale2_value=v2,
                       input_scale_value=vi)


def fp8_dequant(ck: Any, weight: str, read: Callable[[str], np.ndarray]) -> tuple[str, Transform, tuple[str, ...]] | None:
    """For a ModelOpt FP8 linear (an F8_E4M3 ``weight`` ``[out, in]`` beside a ``weight_scale``): the scale's name, the
    transform that dequantizes the weight by it and the transform's sources. Upstream multiplies the codes by the
    scale in float32 (one row per output channel for a per-channel scale) and stores the product at the outtype.
    The scale is one finite non-zero float (the transform holds its value), or a float vector of one scale per
    output row (read with the weight's rows); any other shape is refused. None for any other tensor."""
    scale = weight.removesuffix(".weight") + ".weight_scale"
    w = ck.ref(weight)
    if w.dtype != "F8_E4M3" or scale not in ck:
        return None
    ref = ck.ref(scale)
    if math.prod(ref.shape) == 1:
        return scale, Fp8TensorDequant(_scalar(read, ref, scale)), (weight,)
    if len(w.shape) != 2 or tuple(ref.shape) != (w.shape[0],):
        raise ConvertError(f"{ref.file}: tensor '{scale}' has shape {list(ref.shape)}, expected a scalar or one scale "
                           f"per row of '{weight}' {list(w.shape)[:1]} (ModelOpt FP8)")
    if not ref.is_float:
        raise ConvertError(f"{ref.file}: tensor '{scale}' has dtype {ref.dtype}, expected float per-channel scales "
                           f"(one per row of '{weight}')")
    return scale, Fp8ChannelDequant(ref.dtype), (weight, scale)


def file_type(q: QuantConfig | None, outtype_file_type: int) -> int:
    """``general.file_type``: 39 (MOSTLY_NVFP4) for an NVFP4 checkpoint at f32 / f16 / bf16, else the outtype's."""
    return FILE_TYPE_MOSTLY_NVFP4 if q is not None and q.nvfp4 and outtype_file_type in FLOAT_OUTTYPE_FILE_TYPES \
        else outtype_file_type


def prec_a4_arrays(pairs: list[tuple[str, str]], q: QuantConfig | None) -> tuple[list[str], list[bool]]:
    """The ``general.tensor_extra`` arrays for NVFP4 tensors ``pairs`` (GGUF name, bare weight name): the
    sorted GGUF names of the W4A16 ones, each with ``prec_a4 = False``; empty when there are none."""
    if q is None:
        return [], []
    names = sorted(g for g, w in pairs if q.activations_16bit(w))
    return names, [False] * len(names)
