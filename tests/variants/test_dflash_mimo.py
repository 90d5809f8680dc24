"""Issue 22, MiMo-style DFlash: the patched ``token_embd`` is streamed by row chunks like every other tensor.

``PatchRow`` gets each chunk with the row it starts at, so the mask row is replaced inside whichever chunk holds
it. These tests write an embedding table of 14 or 16 rows through the writer in chunks of 4 rows, with the mask
row at the first, a middle and the last row of a chunk, on both sides of a chunk boundary, in a last partial
chunk, and compare the bytes with the whole table patched with numpy and converted by gguf-py, for every
outtype and every source dtype (Q8_0: the 34-byte blocks of the patched row).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants

from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.hf2gguf import writer
from dspark_convert.plan import TensorSpec
from dspark_convert.variants.dflash.transforms import PatchRow

HIDDEN = 64
CHUNK_ROWS = 4
OUT = {"f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0}
_RNG = np.random.default_rng(22)
_VEC = np.linspace(-3.3, 2.9, HIDDEN, dtype=np.float32) + np.float32(1e-3)  # not exact in BF16 / F16


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits rounded to nearest even (torch's ``.to(bfloat16)``), written out independently."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _table(rows: int, dtype: str) -> tuple[bytes, np.ndarray]:
    """Raw little-endian bytes of a ``[rows, HIDDEN]`` table and its float32 values."""
    x = _RNG.standard_normal((rows, HIDDEN)).astype(np.float32)
    if dtype == "BF16":
        bits = _bf16_rne(x)
        return bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        h = x.astype(np.float16)
        return h.tobytes(), h.astype(np.float32)
    return x.tobytes(), x


def _checkpoint(folder: Path, rows: int, dtype: str) -> tuple[Checkpoint, np.ndarray]:
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    data, values = _table(rows, dtype)
    header = json.dumps({"model.embed_tokens.weight": {"dtype": dtype, "shape": [rows, HIDDEN],
                                                       "data_offsets": [0, len(data)]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + data)
    return Checkpoint(folder), values


def _expected(values: np.ndarray, row: int, dtype: str, out: QT) -> bytes:
    """The whole table with ``row`` replaced (cast to the source dtype first), converted by gguf-py."""
    w = values.copy()
    if dtype == "BF16":
        w[row] = (_bf16_rne(_VEC).astype(np.uint32) << 16).view(np.float32)
    elif dtype == "F16":
        w[row] = _VEC.astype(np.float16).astype(np.float32)
    else:
        w[row] = _VEC
    if out == QT.F32:
        return w.tobytes()
    if out == QT.F16 and dtype != "BF16":
        return w.astype(np.float16).tobytes()
    return bytes(quants.quantize(w, out).tobytes())


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("outtype", sorted(OUT))
@pytest.mark.parametrize(("rows", "row"), [
    (16, 0),   # first row of the first chunk
    (16, 3),   # last row of a chunk, just before a boundary
    (16, 4),   # first row of a chunk, just after a boundary
    (16, 6),   # middle of a chunk
    (16, 15),  # last row of the last chunk
    (14, 13),  # last row of a last, partial chunk
    (14, 12),  # first row of that partial chunk
])
def test_patched_row_lands_in_its_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, outtype: str,
                                        rows: int, row: int) -> None:
    ck, values = _checkpoint(tmp_path / "t", rows, dtype)
    reads: list[tuple[int, int]] = []
    real = ck.read_rows

    def spy(name: str, start: int, stop: int) -> np.ndarray:
        reads.append((start, stop))
        return real(name, start, stop)

    monkeypatch.setattr(ck, "read_rows", spy)
    # chunks are sized by the larger of a row's source and output bytes (F32 output: 4 bytes a value)
    monkeypatch.setattr(writer, "CHUNK_BYTES", CHUNK_ROWS * HIDDEN * (4 if "F32" in (dtype, OUT[outtype].name) else 2))
    patch = PatchRow(row, tuple(float(v) for v in _VEC), dtype)
    spec = TensorSpec("token_embd.weight", (rows, HIDDEN), OUT[outtype], sources=("model.embed_tokens.weight",),
                      transform=patch, source_dtype=dtype)
    got = b"".join(job().tobytes() for *_, job in writer.chunk_spans(spec, {"draft": ck}))
    want = _expected(values, row, dtype, OUT[outtype])
    assert len(got) == len(want) == spec.nbytes
    assert got == want
    # streamed: chunks of 4 rows, never the whole table at once
    assert sorted(reads) == [(a, min(rows, a + CHUNK_ROWS)) for a in range(0, rows, CHUNK_ROWS)]
    # the patch changed exactly that row's bytes (one row of Q8_0 blocks, 2 x 34 bytes at hidden 64)
    plain = TensorSpec("token_embd.weight", (rows, HIDDEN), OUT[outtype], sources=("model.embed_tokens.weight",),
                       source_dtype=dtype)
    unpatched = b"".join(job().tobytes() for *_, job in writer.chunk_spans(plain, {"draft": ck}))
    per_row = len(got) // rows
    differing = {i // per_row for i in range(len(got)) if got[i] != unpatched[i]}
    assert differing == {row}


def test_patch_row_outside_the_chunk_is_the_chunk_itself() -> None:
    chunk = np.arange(8, dtype=np.float32).reshape(4, 2)
    t = PatchRow(11, (7.0, 7.0), "F32")
    assert t.apply_at([chunk], 12, 4) is chunk  # rows 4..7: nothing copied
    assert t.apply_at([chunk], 12, 8).tolist() == [[0, 1], [2, 3], [4, 5], [7, 7]]
    assert t.row_group(12) == 1


@pytest.mark.parametrize("case", ["mimo-mask-eval-pickle", "mimo-mask-hostile-pickle"])
def test_code_in_mask_embedding_never_runs(tmp_path: Path, case: str) -> None:
    """A mask_embedding.pt whose load would call eval / os.system is refused before the call: the marker file the
    eval payload would create does not exist, and nothing is written."""
    from bad_inputs_cases import CASES, build

    from dspark_convert import convert
    from dspark_convert.errors import ConvertError

    inp = build(CASES[case], tmp_path)
    with pytest.raises(ConvertError, match=r"mask_embedding\.pt: refused to load: it references '(eval|posix\.system)'"):
        convert(inp.draft, inp.target, tmp_path / "out.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]  # no marker "ran", no output


def test_mimo_verify_accounts_for_every_tensor(tmp_path: Path) -> None:
    """verify on a MiMo conversion reads every GGUF tensor (token_embd and output included) and every checkpoint
    tensor, drops none; a tensor no forward reads added to the file fails the accounting row alone."""
    import shutil

    import torch
    from conftest import FIXTURES, TARGET
    from test_mutations import add_gguf_tensors

    from dspark_convert import convert
    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.verify import verify

    draft = tmp_path / "draft"
    shutil.copytree(FIXTURES / "dflash-zlab", draft)
    torch.save({"mask_token_id": 1016, "embedding": torch.linspace(-1, 1, 64)}, draft / "mask_embedding.pt")
    good = tmp_path / "good.gguf"
    convert(draft, TARGET, good, outtype="bf16")
    f = read_gguf(good)
    names = [t.name for t in f.tensors]
    f.close()
    assert names[:2] == ["output.weight", "token_embd.weight"]
    r = verify(good, draft, TARGET, context=8, quality=False)
    counts = r.tensors["counts"]
    assert r.passed and r.accounting is not None and r.accounting.passed
    assert counts["gguf"] == {"total": len(names), "read_by_forward": len(names), "compared": 0, "dropped": 0,
                              "unaccounted": 0}
    assert counts["checkpoint"]["unaccounted"] == 0 and counts["checkpoint"]["dropped"] == 0
    bad = add_gguf_tensors(good, tmp_path / "extra.gguf", ("selector_hidden_x.weight",))
    r = verify(bad, draft, TARGET, context=8, quality=False)
    assert not r.passed and r.accounting is not None and not r.accounting.passed
    assert r.tensors["unaccounted"]["gguf"] == ["selector_hidden_x.weight"]
    assert all(o.passed for o in r.outputs)  # the forwards still agree: only the accounting catches it


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_plain_mask_embedding_is_read_without_torch_as_torch_reads_it(tmp_path: Path, dtype: str,
                                                                      as_tensor: bool) -> None:
    """The torch-free reader gives torch.load's values bit for bit (every float dtype, an int or 0-d tensor mask id,
    a view that starts inside its storage) and says it read the file itself."""
    torch = pytest.importorskip("torch")
    from dspark_convert.variants.dflash import mask_embedding as M

    base = torch.linspace(-3.0, 5.0, 40, dtype=torch.float64).to(getattr(torch, dtype))
    emb = base[8:8 + 24]  # offset 8 into its storage
    mask = torch.tensor(31, dtype=torch.int64) if as_tensor else 31
    path = tmp_path / "mask_embedding.pt"
    torch.save({"mask_token_id": mask, "embedding": emb}, path)
    mask_id, vec = M._read_plain(path)
    want = emb.to(torch.float32).numpy()
    assert mask_id == 31 and vec.dtype == np.float32 and vec.shape == (24,)
    assert vec.tobytes() == want.tobytes()
    assert M.read_mask_embedding(path)[1].tobytes() == want.tobytes()


def test_unusual_mask_embedding_goes_to_torch(tmp_path: Path) -> None:
    """A file outside the plain shape (a 2-D embedding, a strided view, an extra key) is not read by the torch-free
    reader: torch's path refuses it with the usual one line."""
    torch = pytest.importorskip("torch")
    from dspark_convert.errors import ConvertError
    from dspark_convert.variants.dflash import mask_embedding as M

    cases = {"2d": {"mask_token_id": 3, "embedding": torch.zeros(2, 4)},
             "strided": {"mask_token_id": 3, "embedding": torch.arange(8.0)[::2]},
             "extra": {"mask_token_id": 3, "embedding": torch.zeros(4), "x": 1}}
    for name, obj in cases.items():
        path = tmp_path / f"{name}.pt"
        torch.save(obj, path)
        with pytest.raises(M._NotPlain):
            M._read_plain(path)
        if name != "strided":
            with pytest.raises(ConvertError, match=r"expected a dict of 'mask_token_id'"):
                M.read_mask_embedding(path)
    assert M.read_mask_embedding(tmp_path / "strided.pt")[1].tolist() == [0.0, 2.0, 4.0, 6.0]


def test_plain_mask_embedding_needs_no_torch(tmp_path: Path) -> None:
    """Reading a plain mask_embedding.pt does not import torch (a MiMo conversion stays torch-free)."""
    import subprocess
    import sys

    torch = pytest.importorskip("torch")
    path = tmp_path / "mask_embedding.pt"
    torch.save({"mask_token_id": 7, "embedding": torch.ones(16, dtype=torch.bfloat16)}, path)
    code = ("import sys; from pathlib import Path; "
            "from dspark_convert.variants.dflash.mask_embedding import read_mask_embedding; "
            f"m, v = read_mask_embedding(Path({str(path)!r})); print(m, v.sum(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["7", "16.0", "False"]
