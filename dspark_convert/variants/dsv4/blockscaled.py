"""DeepSeek-V4's block-scaled tensors, shared by its DSpark draft (:mod:`.dspark_dsv4`) and its MTP sidecar
(:mod:`dspark_convert.variants.mtp.deepseek4`): an F8_E4M3 weight with its F8_E8M0 scale per 128x128 tile
(dequantized and written as Q8_0, or F16 when a row is not a whole number of Q8_0 blocks: :func:`fp8_output_type`),
and per-expert FP4 e2m1 codes (two per I8 byte) with an F8_E8M0 scale per 32 values, stacked losslessly into one
MXFP4 tensor; every other tensor typed as upstream's DeepSeek-V4 converter types it (:func:`dsv4_tensor_spec`).
Upstream's DeepSeek-V4 chat templates, which both conversions embed, are packaged beside this module
(``chat_templates/``) and chosen by checkpoint name with :func:`packaged_template`.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as QT

from ... import schema as S
from ...errors import ConvertError
from ...formats.quant import fp4_shapes, fp8_scale_shape
from ...formats.transforms import Fp8BlockDequant
from ...hf.checkpoint import Checkpoint
from ...kit.common import tensor_type
from ...plan import TensorSpec
from .transforms import Mxfp4ExpertStack


def fp8_output_type(in_features: int) -> QT:
    """GGML type of a dequantized FP8 weight: Q8_0, or F16 when a row is not a whole number of Q8_0 blocks.

    Example:
        >>> fp8_output_type(4096).name, fp8_output_type(96 + 8).name
        ('Q8_0', 'F16')
    """
    return QT.Q8_0 if in_features % GGML_QUANT_SIZES[QT.Q8_0][0] == 0 else QT.F16


def _scale_of(src: str) -> str:
    """The name of the scale stored beside weight ``src`` (``x.weight`` -> ``x.scale``)."""
    return src.removesuffix(".weight") + ".scale"


def fp8_spec(ck: Checkpoint, src: str, name: str, ggml_type: QT | None = None) -> TensorSpec:
    """GGUF tensor ``name`` from the F8_E4M3 weight ``src`` and its tile scales (``<src>.scale``), dequantized to
    float32 rows and written as ``ggml_type`` (default Q8_0, or F16 when a row is not a multiple of 32). Refused
    in one line when the weight is not 2-D or its scale is missing or of another dtype / shape."""
    ref = ck.ref(src)
    if len(ref.shape) != 2:
        raise ConvertError(f"{ref.file}: tensor '{src}' is F8_E4M3 with shape {list(ref.shape)}, expected a 2-D weight")
    scale = fp8_scale(ck, src)
    return TensorSpec(name=name, shape=ref.shape, ggml_type=ggml_type or fp8_output_type(ref.shape[1]),
                      sources=(src, scale), transform=Fp8BlockDequant(), source_dtype=ref.dtype)


def dsv4_tensor_spec(ck: Checkpoint, src: str, name: str, out: QT, what: str) -> TensorSpec:
    """GGUF tensor ``name`` from checkpoint tensor ``src`` as upstream's DeepSeek-V4 converter types it (its
    ``tensor_force_quant``): FP8 (with its tile scales) dequantized -> Q8_0 (F16 when a row is not a multiple of
    32), F32 kept, BF16 matrices kept BF16; vectors and ``*_norm`` F32; an F16 source (forced by nothing) takes
    ``out``, the outtype's type (Q8_0 -> F16 fallback), except the router and indexer projections (F32). Any other
    dtype is refused in one line naming ``what`` stores it (``a DeepSeek-V4 MTP head``).

    Example:
        >>> from dspark_convert.hf.checkpoint import TensorRef
        >>> class Ck:  # a checkpoint of one F16 router
        ...     def ref(self, n): return TensorRef(n, Path("m.safetensors"), "F16", (4, 64), 0, 512)
        >>> dsv4_tensor_spec(Ck(), "r", "blk.0.ffn_gate_inp.weight", QT.Q8_0, "x").ggml_type.name
        'F32'
        >>> dsv4_tensor_spec(Ck(), "r", "blk.0.ffn_up_shexp.weight", QT.Q8_0, "x").ggml_type.name
        'Q8_0'
    """
    ref = ck.ref(src)
    vector = len(ref.shape) <= 1 or name.endswith("_norm.weight")
    if ref.dtype == "F8_E4M3":
        return fp8_spec(ck, src, name, QT.F32 if vector else None)
    if ref.dtype == "F32" or (ref.dtype == "BF16" and vector):
        ggml = QT.F32
    elif ref.dtype == "BF16":
        ggml = QT.BF16
    elif ref.dtype == "F16":
        ggml = QT.F32 if name.endswith((S.L_FFN_GATE_INP, S.L_INDEXER_PROJ)) else tensor_type(name, ref.shape, out)
    else:
        raise ConvertError(f"{ref.file}: tensor '{src}' has dtype {ref.dtype}; {what} stores it as F8_E4M3 "
                           "(+ scale), BF16, F16 or F32")
    return TensorSpec(name=name, shape=ref.shape, ggml_type=ggml, sources=(src,), source_dtype=ref.dtype)


def fp8_scale(ck: Checkpoint, src: str) -> str:
    """The name of the tile scales of the 2-D F8_E4M3 weight ``src`` (``<src>.scale``), checked: refused in one
    line when the checkpoint has none or it is not F8_E8M0 of one value per 128x128 tile."""
    ref = ck.ref(src)
    scale = _scale_of(src)
    if scale not in ck:
        raise ConvertError(f"{ref.file}: tensor '{src}' is F8_E4M3 but the checkpoint has no '{scale}' "
                           "(an F8_E8M0 scale per 128x128 tile)")
    shape = ref.shape
    sref = ck.ref(scale)
    want = fp8_scale_shape((shape[0], shape[1]))
    if sref.dtype != "F8_E8M0" or sref.shape != want:
        raise ConvertError(f"{sref.file}: tensor '{scale}' is {sref.dtype} {list(sref.shape)}, expected F8_E8M0 "
                           f"{list(want)} (one scale per 128x128 tile of {list(shape)})")
    return scale


def mxfp4_stack_spec(ck: Checkpoint, per: Mapping[int, str], experts: int, rows: int, cols: int,
                     name: str, what: str, count: str) -> TensorSpec:
    """GGUF tensor ``name``, MXFP4 ``(experts, rows, cols)``: the FP4 experts ``0 .. experts - 1`` of ``per``
    (expert -> weight; its scale is stored beside it, ``x.weight`` -> ``x.scale``) repacked and stacked. ``what`` names the per-expert tensors in messages
    (``mtp.1.ffn.experts.*.w3``), ``count`` says where the expert count comes from (``the config says 2 routed
    experts per stage``). Refused in one line when an expert is missing or beyond the count, when ``cols`` is not a
    multiple of 32, or when a weight or scale has another dtype or shape."""
    missing = sorted(set(range(experts)) - per.keys())
    extra = sorted(per.keys() - set(range(experts)))
    if missing or extra:
        e = (missing or extra)[0]
        state = "is missing" if missing else f"is beyond n_routed_experts {experts}"
        raise ConvertError(f"{ck.path}: expert {e} of {what} {state} ({count})")
    want_w, want_s = fp4_shapes(rows, cols)
    if cols % 32:
        raise ConvertError(f"{Path(ck.path) / 'config.json'}: {cols} input values per expert row of {what} is not a "
                           "multiple of 32 (FP4 experts have one scale per 32 values)")
    sources: list[str] = []
    for e in range(experts):
        wn = per[e]
        sn = _scale_of(wn)
        wr = ck.ref(wn)
        if sn not in ck:
            raise ConvertError(f"{wr.file}: tensor '{wn}' has no '{sn}' (an F8_E8M0 scale per 32 values)")
        sr = ck.ref(sn)
        if wr.dtype not in ("I8", "U8") or wr.shape != want_w:
            raise ConvertError(f"{wr.file}: tensor '{wn}' is {wr.dtype} {list(wr.shape)}, expected I8 {list(want_w)} "
                               f"(FP4 codes, two per byte, of a [{rows}, {cols}] expert)")
        if sr.dtype != "F8_E8M0" or sr.shape != want_s:
            raise ConvertError(f"{sr.file}: tensor '{sn}' is {sr.dtype} {list(sr.shape)}, expected F8_E8M0 {list(want_s)}")
        sources += [wn, sn]
    return TensorSpec(name=name, shape=(experts, rows, cols), ggml_type=QT.MXFP4, sources=tuple(sources),
                      transform=Mxfp4ExpertStack(experts), source_dtype="I8")


def packaged_template(folder: Path, templates: Mapping[str, str]) -> str:
    """The text of the chat template upstream's converter embeds for the checkpoint in ``folder``. ``templates``
    maps a keyword to a file of upstream's ``models/templates/`` packaged in ``chat_templates/``: the first keyword
    the checkpoint's name contains wins (``""``, last, is the fallback). The name is the one upstream sees
    (``dir_model.name``): the folder name, or for a Hugging Face cache snapshot (``models--org--name/snapshots/
    <commit>``) the repo's folder name.

    Example:
        >>> packaged_template(Path("x"), {"": "README.md"}).startswith("#")
        True
    """
    name = folder.name
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        name = folder.parent.parent.name
    filename = next((file for keyword, file in templates.items() if keyword in name), None)
    if filename is None:
        raise ValueError(f"no template of {sorted(templates)} matches checkpoint name {name!r}")
    return resources.files(__package__ or "").joinpath("chat_templates").joinpath(filename).read_text(encoding="utf-8")
