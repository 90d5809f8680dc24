"""Head/embedding layouts of a full-vocabulary draft, and what llama.cpp b11434 runs each with.

For a draft of an arch whose loader duplicates ``token_embd`` as the head when ``output`` is absent
(``schema.EMBD_AS_HEAD_ARCHES``), three layouts of the same file matter (upstream-b11434.md §2.3):

========================  ===============================  ==============================================
layout                    tensors                          head llama.cpp b11434 scores with
========================  ===============================  ==============================================
``749f688``               neither ``token_embd`` nor       the target's ``output`` (shared through the
                          ``output``                       target context), embeddings the target's
``upstream-b11434``       ``token_embd`` only              ``token_embd`` (the loader duplicates it as
                                                           ``output`` when ``output`` is absent)
``with-output``           ``token_embd`` + ``output``      ``output``
========================  ===============================  ==============================================

For an untied target ``upstream-b11434`` drafts with the embedding matrix instead of the target's head.
:func:`dspark_convert.check.runtime_head` states the loader rule; :func:`relayout` rewrites a GGUF into any layout (gguf-py's writer),
so tests and benchmarks can build each one from a converted file whatever the converter's default is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quantize

from ..errors import ConvertError

LAYOUTS = ("749f688", "upstream-b11434", "with-output")
EMBD, OUTPUT = "token_embd.weight", "output.weight"


def _encode(values: np.ndarray, qtype: QT) -> np.ndarray:
    values = np.ascontiguousarray(values, dtype=np.float32)
    if qtype == QT.F32:
        return values
    if qtype == QT.F16:
        return values.astype(np.float16)
    return quantize(values, qtype)


def relayout(src: Path, dst: Path, *, drop: tuple[str, ...] = (), add: Mapping[str, np.ndarray] | None = None) -> Path:
    """Copy GGUF ``src`` to ``dst`` without tensors ``drop`` and with float32 tensors ``add`` (numpy order) stored
    in the type of the file's ``fc.weight``, appended after the others. Metadata is copied as is.

    Example:
        >>> relayout(Path("d.gguf"), Path("d2.gguf"), add={"output.weight": head})   # doctest: +SKIP
    """
    r = GGUFReader(src)
    arch_field = r.fields.get("general.architecture")
    if arch_field is None:
        raise ConvertError(f"{src}: no general.architecture")
    arch = str(arch_field.contents())
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == GGUFValueType.ARRAY and len(f.types) > 1 else None
        w.add_key_value(name, f.contents(), vtype, sub_type=sub)
    fc_type = next((QT(t.tensor_type) for t in r.tensors if t.name == "fc.weight"), QT.F32)
    for t in r.tensors:
        if t.name in drop:
            continue
        qt = QT(t.tensor_type)
        w.add_tensor(t.name, np.asarray(t.data), raw_shape=[int(x) for x in reversed(t.shape)] if qt in (QT.F32, QT.F16, QT.I64, QT.I32) else None,
                     raw_dtype=qt)
    for name, values in (add or {}).items():
        w.add_tensor(name, _encode(values, fc_type), raw_dtype=fc_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def make_layout(src: Path, dst: Path, layout: str, embed: np.ndarray, head: np.ndarray) -> Path:
    """``src`` (a full-vocabulary draft GGUF in any layout) rewritten in ``layout`` (:data:`LAYOUTS`),
    with ``embed`` / ``head`` (the target's embedding and head, float32) for the tensors the layout holds."""
    if layout not in LAYOUTS:
        raise ConvertError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    add = {} if layout == "749f688" else {EMBD: embed} if layout == "upstream-b11434" else {EMBD: embed, OUTPUT: head}
    return relayout(src, dst, drop=(EMBD, OUTPUT), add=add)
