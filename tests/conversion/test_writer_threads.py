"""The writer's worker pool: any thread count and chunk size gives the bytes of gguf-py's own conversion.

Tensors of awkward shapes (one row, rows not a multiple of the chunk, 3-D, BF16 and F32 sources) are written
through ``write_plan`` with 1, 2 and 3 workers and chunks of a few rows, and each tensor's data is compared with
``gguf.quants.quantize(..., Q8_0)`` / numpy's F16 cast of the whole tensor. The pool shape (threads from the
usable cores or ``$DSPARK_CONVERT_THREADS``, chunks shrinking as threads grow) is checked on its numbers.
"""

from __future__ import annotations

import json
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, quants
from gguf import GGUFValueType as VT

from dspark_convert.errors import ConvertError
from dspark_convert.formats.transforms import to_float32
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.hf2gguf import writer
from dspark_convert.plan import KV, Plan, TensorSpec

# name -> (safetensors dtype, shape): one row, a prime number of rows, rows not a multiple of any chunk, 3-D
SHAPES = {"one_row": ("BF16", (1, 4096)), "prime": ("BF16", (37, 96)), "tall": ("F32", (1001, 64)),
          "cube": ("BF16", (3, 5, 64)), "wide": ("BF16", (13, 2080))}


def _save(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        b = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Checkpoint, dict[str, np.ndarray]]:
    rng = np.random.default_rng(39)
    folder = tmp_path_factory.mktemp("ck")
    raw: dict[str, tuple[str, np.ndarray]] = {}
    for name, (dtype, shape) in SHAPES.items():
        x = (rng.standard_normal(shape) * rng.uniform(1e-3, 10, shape[:-1] + (1,))).astype(np.float32)
        raw[name] = (dtype, (x.view(np.uint32) >> 16).astype(np.uint16) if dtype == "BF16" else x)
    _save(folder / "model.safetensors", raw)
    whole = {name: to_float32(arr, dtype) for name, (dtype, arr) in raw.items()}
    return Checkpoint(folder, need_config=False), whole


def _write(ck: Checkpoint, out: QT, path: Path) -> dict[str, bytes]:
    specs = [TensorSpec(name, shape, out, sources=(name,)) for name, (_, shape) in SHAPES.items()]
    plan = Plan("dflash", [KV("general.architecture", VT.STRING, "dflash")], specs)
    writer.write_plan(plan, {"draft": ck}, path)
    return {t.name: np.asarray(t.data).tobytes() for t in GGUFReader(path).tensors}


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("chunk", [1, 3 * 4096, 1 << 22])  # one row per chunk, a few rows, whole tensors
def test_q8_0_and_f16_through_the_pool_equal_gguf_whole_tensor(
        source: tuple[Checkpoint, dict[str, np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        workers: int, chunk: int) -> None:
    ck, whole = source
    monkeypatch.setattr(writer, "WORKERS", workers)
    monkeypatch.setattr(writer, "CHUNK_BYTES", chunk)
    got = _write(ck, QT.Q8_0, tmp_path / "q8.gguf")
    for name, x in whole.items():
        assert got[name] == quants.quantize(x, QT.Q8_0).tobytes(), name
    got = _write(ck, QT.F16, tmp_path / "f16.gguf")
    for name, x in whole.items():
        assert got[name] == x.astype(np.float16).tobytes(), name


def test_files_do_not_depend_on_the_thread_count(source: tuple[Checkpoint, dict[str, np.ndarray]],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, _ = source
    monkeypatch.setattr(writer, "CHUNK_BYTES", 5000)
    files = []
    for n in (1, 4):
        monkeypatch.setattr(writer, "WORKERS", n)
        _write(ck, QT.Q8_0, tmp_path / f"{n}.gguf")
        files.append((tmp_path / f"{n}.gguf").read_bytes())
    assert files[0] == files[1] and len(files[0]) > 100_000


def test_two_workers_convert_two_chunks_at_once(source: tuple[Checkpoint, dict[str, np.ndarray]],
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, whole = source
    both = threading.Barrier(2, timeout=20)  # passes only when two chunk conversions run at the same time
    real = writer.convert_chunk
    met: list[str] = []

    def meet(raw: np.ndarray, dtype: str, out: QT) -> np.ndarray:
        if len(met) < 2:
            met.append(threading.current_thread().name)
            both.wait()
        return real(raw, dtype, out)

    monkeypatch.setattr(writer, "convert_chunk", meet)
    monkeypatch.setattr(writer, "WORKERS", 2)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 1)
    got = _write(ck, QT.Q8_0, tmp_path / "q8.gguf")
    assert len(set(met)) == 2
    assert got["tall"] == quants.quantize(whole["tall"], QT.Q8_0).tobytes()


def test_thread_count_from_the_environment_or_the_cores() -> None:
    assert writer.thread_count({"DSPARK_CONVERT_THREADS": "3"}) == 3
    assert writer.thread_count({"DSPARK_CONVERT_THREADS": " 1 "}) == 1
    assert writer.thread_count({"DSPARK_CONVERT_THREADS": "100000"}) == writer.MAX_WORKERS
    assert writer.thread_count({}) == min(writer.usable_cores(), writer.MAX_WORKERS)
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ConvertError, match=f"DSPARK_CONVERT_THREADS='{bad}': expected a positive integer"):
            writer.thread_count({"DSPARK_CONVERT_THREADS": bad})


def test_chunks_in_flight_stay_within_the_budget_for_any_core_count(monkeypatch: pytest.MonkeyPatch) -> None:
    assert writer.chunk_bytes(4) == writer.CHUNK_BYTES == 2 << 20  # 2 cores: 4 chunks of 2 MiB
    assert writer.chunk_bytes(32) == 512 << 10  # 16 cores: 32 chunks of 512 KiB
    for workers in range(1, writer.MAX_WORKERS + 1):
        assert writer.chunk_bytes(2 * workers) * 2 * workers <= writer.IN_FLIGHT_BYTES == 16 << 20
    monkeypatch.setattr(writer, "WORKERS", 8)
    assert writer.pool_shape() == (8, 16) and writer.chunk_bytes() == 1 << 20


def test_chunks_hold_the_budget_of_source_or_of_wider_output(source: tuple[Checkpoint, dict[str, np.ndarray]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ck, whole = source
    monkeypatch.setattr(writer, "CHUNK_BYTES", 4 * 2080 * 2)  # 4 rows of 'wide' in BF16, 2 rows in F32
    sizes = {}
    for out in (QT.BF16, QT.F32, QT.Q8_0):
        spec = TensorSpec("wide", SHAPES["wide"][1], out, sources=("wide",))
        chunks = [job() for *_, job in writer.chunk_spans(spec, {"draft": ck})]
        sizes[out] = [c.shape[0] for c in chunks]
        assert b"".join(c.tobytes() for c in chunks) == (
            to_float32(ck.read_rows("wide", 0, 13), "BF16").tobytes() if out == QT.F32
            else quants.quantize(whole["wide"], QT.Q8_0).tobytes() if out == QT.Q8_0
            else ck.read_rows("wide", 0, 13).tobytes())
    # source rows bound BF16 and Q8_0 chunks (Q8_0 is narrower); the F32 output, twice as wide, halves them
    assert sizes == {QT.BF16: [4, 4, 4, 1], QT.Q8_0: [4, 4, 4, 1], QT.F32: [2] * 6 + [1]}


def test_a_bad_thread_count_leaves_nothing_behind(source: tuple[Checkpoint, dict[str, np.ndarray]],
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, _ = source
    monkeypatch.setenv("DSPARK_CONVERT_THREADS", "zero")
    with pytest.raises(ConvertError, match="DSPARK_CONVERT_THREADS='zero'"):
        _write(ck, QT.Q8_0, tmp_path / "out.gguf")
    assert list(tmp_path.iterdir()) == []
