"""Canary for the ``gguf`` pin: the GGUFWriter private members that ``dspark_convert/gguffile/header.py`` uses.

``header.py`` is the only module of the package that touches GGUFWriter internals (``_pack_val``, ``kv_data``,
``fout``, ``state``, ``WriterState``). If a ``gguf`` upgrade renames or changes one of them, these tests fail
with a message that names header.py, instead of conversions failing (or writing different bytes) somewhere
downstream.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import io
import re
from pathlib import Path

import gguf
import gguf.gguf_writer as gw
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf import GGUFWriter

from dspark_convert.gguffile import header
from dspark_convert.plan import KV, TensorSpec

ROOT = Path(__file__).resolve().parents[2]
FIX = ("dspark_convert/gguffile/header.py relies on GGUFWriter private members of gguf " + header.GGUF_PINNED
       + "; after a gguf upgrade, adapt header.py (the only module touching them) and its GGUF_PINNED")


def test_installed_gguf_is_the_pinned_one() -> None:
    pinned = re.search(r'"gguf==([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pinned is not None, "pyproject.toml must pin gguf exactly (gguf==X.Y.Z): " + FIX
    assert pinned.group(1) == header.GGUF_PINNED, f"pyproject.toml pins gguf {pinned.group(1)}: {FIX}"
    # gguf has no __version__ attribute; the distribution metadata is the installed version
    installed = getattr(gguf, "__version__", None) or importlib.metadata.version("gguf")
    assert installed == header.GGUF_PINNED, f"gguf {installed} is installed: {FIX}"


def test_writer_private_members_exist() -> None:
    w = GGUFWriter(None, "dflash")
    for attr in ("kv_data", "fout", "state", "_pack_val"):
        assert hasattr(w, attr), f"GGUFWriter has no '{attr}': {FIX}"
    assert isinstance(w.kv_data, list) and len(w.kv_data) == 1 and isinstance(w.kv_data[0], dict), FIX
    for state in ("NO_FILE", "EMPTY", "HEADER", "KV_DATA", "TI_DATA"):
        assert hasattr(gw.WriterState, state), f"gguf.gguf_writer.WriterState has no {state}: {FIX}"
    params = list(inspect.signature(GGUFWriter._pack_val).parameters)
    assert params[:5] == ["self", "val", "vtype", "add_vtype", "sub_type"], f"_pack_val{params}: {FIX}"
    w.add_key_value("a.b", [1, 2], VT.ARRAY, sub_type=VT.INT32)
    val = w.kv_data[0]["a.b"]
    assert (val.value, val.type, val.sub_type) == ([1, 2], VT.ARRAY, VT.INT32), f"kv_data entries changed: {FIX}"
    assert w._pack_val("ab", VT.STRING, add_vtype=False) == b"\x02" + b"\0" * 7 + b"ab", FIX


def test_write_header_equals_gguf_writer_end_to_end(tmp_path: Path) -> None:
    """header.write_header (our file object, bulk KV packing) == GGUFWriter writing its own file."""
    kvs = [KV("general.type", VT.STRING, "model"), KV("dflash.block_count", VT.UINT32, 1),
           KV("tokenizer.ggml.tokens", VT.ARRAY, ["a", "b", "c"], VT.STRING)]
    tensors = [TensorSpec("fc.weight", (2, 64), QT.BF16), TensorSpec("d2t", (3,), QT.I64)]
    ours = io.BytesIO()
    header.write_header(ours, "dflash", kvs, tensors)
    w = header.header_writer("dflash", kvs, tensors)
    theirs = io.BytesIO()
    w.fout = [theirs]  # type: ignore[list-item]
    w.state = gw.WriterState.EMPTY
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    theirs.write(b"\0" * header.pad(theirs.tell()))
    assert ours.getvalue() == theirs.getvalue(), f"header bytes differ from GGUFWriter's: {FIX}"
    assert len(ours.getvalue()) % header.ALIGNMENT == 0 and ours.getvalue()[:4] == b"GGUF"
    path = tmp_path / "h.gguf"  # the header plus zero tensor data is a complete file gguf-py reads back
    path.write_bytes(ours.getvalue() + b"".join(b"\0" * (t.nbytes + header.pad(t.nbytes)) for t in tensors))
    reader = gguf.GGUFReader(path)
    assert [(t.name, t.tensor_type) for t in reader.tensors] == [("fc.weight", QT.BF16), ("d2t", QT.I64)]
    assert bytes(reader.fields["tokenizer.ggml.tokens"].parts[-1]) == b"c"


def test_header_is_the_only_module_touching_writer_internals() -> None:
    """No other package module names a GGUFWriter private member or WriterState."""
    private = {"_pack_val", "kv_data", "fout", "WriterState", "gguf_writer"}
    offenders = []
    for path in sorted((ROOT / "dspark_convert").rglob("*.py")):
        if path.name == "header.py" and path.parent.name == "gguffile":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if isinstance(node, ast.ImportFrom) and node.module and "gguf_writer" in node.module:
                name = "gguf_writer"
            if name in private:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not offenders, "GGUFWriter internals outside gguffile/header.py: " + ", ".join(offenders)
