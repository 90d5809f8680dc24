"""Row transforms as objects: the registry, row groups, and a transform of two sources streamed by the writer.

No family uses a transform of several sources yet (DeepSeek-V4's FP8 weights with 128-row block scales will);
``BlockScale`` below is a toy of the same shape: output rows ``[a, b)`` read weight rows ``[a, b)`` and scale
rows ``[a // block, ceil(b / block))``. Writing it through ``writer.write_plan`` in chunks of one row group
proves that the writer streams a multi-source tensor by row chunks and writes the right bytes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf import GGUFValueType as VT

from dspark_convert.errors import ConvertError
from dspark_convert.formats.transforms import (
    TRANSFORMS,
    Fp8BlockDequant,
    Fp8ChannelDequant,
    Fp8TensorDequant,
    Nvfp4Repack,
    Shapes,
    Transform,
    register,
)
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.hf2gguf import writer
from dspark_convert.plan import KV, Plan, TensorSpec
from dspark_convert.variants.dflash.transforms import DeinterleaveRope, PatchRow
from dspark_convert.variants.dsv4.transforms import Mxfp4ExpertStack
from dspark_convert.variants.eagle3.transforms import Eagle3Permute
from dspark_convert.variants.gemma4_assistant.transforms import FirstRows
from dspark_convert.variants.mtp.transforms import (
    AddOne,
    ColumnConcat,
    ExpertStack,
    Fp8ScaleInvDequant,
    GateUpHalf,
    MlaKvBSplit,
    QkvConcat,
    TpQkvDequant,
)


@dataclass(frozen=True)
class BlockScale(Transform):
    """weight * scale, one scale per ``block`` x ``block`` tile (a float stand-in for an FP8 block dequant)."""

    name: ClassVar[str] = "toy_block_scale"
    n_sources: ClassVar[int] = 2
    block: int

    def row_group(self, rows: int) -> int | None:
        return self.block if rows % self.block == 0 else None

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        return (start, stop), (start // self.block, -(-stop // self.block))

    def out_dtype(self, dtypes: tuple[str, ...]) -> str:
        return "F32"

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        weight, scale = chunks
        tiles = np.repeat(np.repeat(scale, self.block, axis=0), self.block, axis=1)
        return (weight * tiles).astype(np.float32)


@dataclass(frozen=True)
class Stack3(Transform):
    """Three same-shape sources stacked on a new first axis (a stand-in for an expert stack): output rows are
    the sources' rows one source after the other, and a chunk of whole sources reads only those sources."""

    name: ClassVar[str] = "toy_stack"
    n_sources: ClassVar[int] = 3

    def out_rows(self, shapes: Shapes) -> int:
        return sum(s[0] for s in shapes)

    def row_group(self, rows: int) -> int | None:
        return rows // self.n_sources

    def source_rows(self, start: int, stop: int, shapes: Shapes) -> tuple[tuple[int, int], ...]:
        per = shapes[0][0]
        return tuple((0, per) if start <= i * per < stop else (0, 0) for i in range(len(shapes)))

    def apply(self, chunks: Sequence[np.ndarray], rows: int) -> np.ndarray:
        return np.concatenate([c for c in chunks if c.shape[0]])


def _safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        data = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


@pytest.fixture()
def toy(tmp_path: Path) -> tuple[Checkpoint, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((8, 64)).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, (2, 16)).astype(np.float32)  # block 4: 8 rows -> 2 scale rows, 64 cols -> 16
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    _safetensors(folder / "model.safetensors", {"w": weight, "w.scale": scale})
    return Checkpoint(folder), weight, scale


def test_two_source_transform_streams_by_row_chunks_through_the_writer(
        toy: tuple[Checkpoint, np.ndarray, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, weight, scale = toy
    reads: list[tuple[str, int, int]] = []
    real = ck.read_rows

    def spy(name: str, start: int, stop: int) -> np.ndarray:
        reads.append((name, start, stop))
        return real(name, start, stop)

    monkeypatch.setattr(ck, "read_rows", spy)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1)  # the smallest chunks: one row group (4 rows) each
    spec = TensorSpec("blk.0.ffn_up.weight", (8, 64), QT.F32, sources=("w", "w.scale"), transform=BlockScale(4))
    plan = Plan("dflash", [KV("general.architecture", VT.STRING, "dflash")], [spec])
    out = tmp_path / "toy.gguf"
    writer.write_plan(plan, {"draft": ck}, out)

    expected = weight * np.repeat(np.repeat(scale, 4, axis=0), 4, axis=1)
    got = GGUFReader(out).tensors[0]
    assert got.name == "blk.0.ffn_up.weight" and list(got.shape) == [64, 8]
    assert np.asarray(got.data).tobytes() == expected.astype("<f4").tobytes()
    # two chunks of 4 weight rows, each with the one scale row of its block (chunks run on worker threads)
    assert sorted(reads) == [("w", 0, 4), ("w", 4, 8), ("w.scale", 0, 1), ("w.scale", 1, 2)]


def test_two_source_transform_in_q8_0_equals_whole_tensor(toy: tuple[Checkpoint, np.ndarray, np.ndarray],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ck, weight, scale = toy
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1)
    spec = TensorSpec("t", (8, 64), QT.Q8_0, sources=("w", "w.scale"), transform=BlockScale(4))
    whole = writer.convert_chunk(BlockScale(4).apply_whole([weight, scale]), "F32", QT.Q8_0).tobytes()
    assert b"".join(job().tobytes() for *_, job in writer.chunk_spans(spec, {"draft": ck})) == whole


def test_stack_of_sources_streams_one_source_per_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "experts"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    experts = {f"e.{i}": np.full((4, 32), i + 0.5, np.float32) for i in range(3)}
    _safetensors(folder / "model.safetensors", experts)
    ck = Checkpoint(folder)
    reads: list[tuple[str, int, int]] = []
    real = ck.read_rows

    def spy(name: str, start: int, stop: int) -> np.ndarray:
        reads.append((name, start, stop))
        return real(name, start, stop)

    monkeypatch.setattr(ck, "read_rows", spy)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1)
    spec = TensorSpec("blk.0.ffn_up_exps.weight", (3, 4, 32), QT.Q8_0, sources=tuple(experts), transform=Stack3())
    got = b"".join(job().tobytes() for *_, job in writer.chunk_spans(spec, {"draft": ck}))
    whole = np.stack(list(experts.values()))
    assert got == writer.convert_chunk(whole, "F32", QT.Q8_0).tobytes() and len(got) == spec.nbytes
    # three chunks (one expert each), each asking every source, two of them for no rows: those are not read
    # (a stack of 256 experts would otherwise open its files 256 times per chunk)
    assert reads == [("e.0", 0, 4), ("e.1", 0, 4), ("e.2", 0, 4)]


def test_source_count_must_match_the_transform(toy: tuple[Checkpoint, np.ndarray, np.ndarray]) -> None:
    ck, _, _ = toy
    for spec in (TensorSpec("t", (8, 64), QT.F32, sources=("w", "w.scale")),  # two sources, no transform
                 TensorSpec("t", (8, 64), QT.F32, sources=("w",), transform=BlockScale(4))):
        with pytest.raises(ConvertError, match="internal: tensor 't' has [12] sources for"):
            [job() for *_, job in writer.chunk_spans(spec, {"draft": ck})]


def test_mla_kv_b_split_streams_whole_heads(toy: tuple[Checkpoint, np.ndarray, np.ndarray]) -> None:
    """``w`` (8 x 64) as kv_b_proj of 2 heads x (nope 3 + v 1) rows, kv_lora_rank 64: read in chunks of one head, the
    k and v halves equal upstream's view / split / transpose of the whole tensor."""
    ck, weight, _ = toy
    kv = weight.reshape(2, 4, 64)
    for part, shape, want in (("k", (2, 64, 3), kv[:, :3, :].transpose(0, 2, 1)), ("v", (2, 1, 64), kv[:, 3:, :])):
        spec = TensorSpec(f"attn_{part}_b.weight", shape, QT.F32, sources=("w",), transform=MlaKvBSplit(part, 2, 3, 1))
        chunks = [job() for *_, job in writer.chunk_spans(spec, {"draft": ck}, chunk=1)]
        assert len(chunks) == 2  # one head per chunk
        assert np.concatenate(chunks).reshape(shape).tobytes() == np.ascontiguousarray(want).tobytes()
    assert MlaKvBSplit("k", 2, 3, 1).row_group(128) == 64 and MlaKvBSplit("v", 3, 3, 1).row_group(4) is None


def test_column_concat_streams_whole_tiles() -> None:
    """DeepSeek-V4's eh_proj: an FP8 part (weight + tile scales) and a BF16 part side by side; chunks of whole 128-row
    tiles read their scale rows and give the rows of the whole concatenation."""
    from dspark_convert.formats.quant import fp8_block_dequant

    rng = np.random.default_rng(3)
    e = rng.integers(0, 0x7E, (200, 64), dtype=np.uint8)
    es = rng.integers(120, 130, (2, 1), dtype=np.uint8)
    h = rng.integers(0, 0x3F00, (200, 32), dtype=np.uint16)
    t = ColumnConcat(("F8_E4M3", "BF16"))
    whole = np.concatenate([fp8_block_dequant(e, es), (h.astype(np.uint32) << 16).view(np.float32)], axis=1)
    assert t.sources_ok(3) and not t.sources_ok(2) and t.row_group(200) == 128 and t.out_dtype(("F8_E4M3",)) == "F32"
    shapes = ((200, 64), (2, 1), (200, 32))
    assert t.source_rows(128, 200, shapes) == ((128, 200), (1, 2), (128, 200))
    got = [t.apply([e[a:b], es[sa:sb], h[a:b]], b - a)
           for a, b in ((0, 128), (128, 200)) for (_, _), (sa, sb), _ in [t.source_rows(a, b, shapes)]]
    assert np.concatenate(got).tobytes() == whole.tobytes()
    assert ColumnConcat(("BF16", "F32")).row_group(7) == 1


def test_registry_and_row_groups() -> None:
    assert TRANSFORMS == {"deinterleave_rope": DeinterleaveRope, "eagle3_permute": Eagle3Permute,
                          "fp8_block_dequant": Fp8BlockDequant, "fp8_tensor_dequant": Fp8TensorDequant,
                          "fp8_channel_dequant": Fp8ChannelDequant,
                          "mxfp4_expert_stack": Mxfp4ExpertStack,
                          "nvfp4_repack": Nvfp4Repack, "patch_row": PatchRow, "first_rows": FirstRows,
                          "add_one": AddOne, "gate_up_half": GateUpHalf, "expert_stack": ExpertStack,
                          "mla_kv_b_split": MlaKvBSplit,
                          "column_concat": ColumnConcat,
                          "fp8_scale_inv_dequant": Fp8ScaleInvDequant, "tp_qkv_dequant": TpQkvDequant,
                          "qkv_concat": QkvConcat}
    assert DeinterleaveRope(16).row_group(64) == 16 and DeinterleaveRope(16).row_group(24) is None
    assert DeinterleaveRope(3).row_group(6) is None  # an odd head_dim never splits
    assert Eagle3Permute(8, 2).row_group(32) == 16  # n = n_head_kv (2) groups of 16 rows
    assert Eagle3Permute(8, 8).row_group(64) == 8 and Eagle3Permute(8, 8).row_group(24) is None
    assert Eagle3Permute(8, 2).describe() == "eagle3_permute(8, 2)" and Eagle3Permute(8, 2).args == (8, 2)
    assert DeinterleaveRope(16) == DeinterleaveRope(16) != DeinterleaveRope(8)
    assert GateUpHalf("gate").describe() == "gate_up_half(gate)" and GateUpHalf("up").args == ("up",)
    with pytest.raises(ValueError, match="unique name"):
        register(DeinterleaveRope)


@pytest.mark.parametrize(("r", "c", "rows", "cols", "row0"), [(512, 512, 128, 128, 0), (100, 512, 128, 128, 300),
                                                            (37, 1000, 128, 128, 5), (5, 7, 2, 3, 3), (3, 96, 1, 32, 7)])
@pytest.mark.parametrize("scale_dtype", ["F32", "BF16"])
def test_fp8_scale_inv_dequant_is_the_per_value_product(r: int, c: int, rows: int, cols: int, row0: int,
                                                        scale_dtype: str) -> None:
    """Every value times the scale of its block, as one float32 product (whole blocks and a ragged last block,
    chunks starting mid-block, every E4M3 code including NaN), bit for bit."""
    from dspark_convert.formats.quant import E4M3_VALUES, fp8_scale_inv_dequant

    rng = np.random.default_rng(r * 1000 + c)
    w = rng.integers(0, 256, (r, c), dtype=np.uint8)
    first = row0 % rows
    s32 = (rng.random((-(-(first + r) // rows), -(-c // cols)), dtype=np.float32) * 4).astype(np.float32)
    scale = s32 if scale_dtype == "F32" else (s32.view(np.uint32) >> 16).astype(np.uint16)
    s = s32 if scale_dtype == "F32" else (scale.astype(np.uint32) << 16).view(np.float32)
    want = np.empty((r, c), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(r):
            want[i] = E4M3_VALUES[w[i]] * s[(first + i) // rows][np.arange(c) // cols]
    got = fp8_scale_inv_dequant(w, scale, rows, cols, scale_dtype, row0=row0)
    assert got.dtype == np.float32 and got.shape == (r, c)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
