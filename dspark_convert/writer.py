"""Execute a :class:`~dspark_convert.plan.Plan`: stream tensors one at a time into a GGUF file, atomically.

gguf's ``GGUFWriter`` serialises the header, KVs and tensor infos (so the byte layout is gguf-py's own); tensor
data is then streamed here by row chunks, because ``GGUFWriter.add_tensor`` keeps every tensor in memory until
the file is written (llama.cpp #29078). Same-dtype tensors are copied as bytes. The file is written to a
temporary name in the destination folder, fsynced, and renamed into place: an interrupted or failed conversion
(SIGINT, SIGTERM, full disk, bad tensor) leaves the destination exactly as it was.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import io
import itertools
import os
import signal
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf import GGUFWriter
from gguf.gguf_writer import WriterState

from . import schema as S
from .checkpoint import Checkpoint
from .destination import new_partial, release
from .errors import ConvertError, Interrupted
from .plan import Plan, TensorSpec
from .transforms import convert_chunk, deinterleave_rope, eagle3_permute

ALIGNMENT = 32
CHUNK_BYTES = 4 * 1024 * 1024  # source bytes per chunk: bounds memory for any tensor size
Progress = Callable[[int, int], None]
_DISK_FULL = {errno.ENOSPC} | ({errno.EDQUOT} if hasattr(errno, "EDQUOT") else set())  # quota: same remedy

TRANSFORMS: dict[str, Callable[..., np.ndarray]] = {
    "deinterleave_rope": deinterleave_rope,
    "eagle3_permute": eagle3_permute,
}


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _nonfinite(raw: np.ndarray, src_dtype: str) -> bool:
    """True if a chunk of source values holds NaN or Inf (checked on the raw bits: no float conversion).

    ``max(bits & ~sign) >= exponent mask`` is one cheap integer pass plus a reduction, several times faster
    than comparing every value with the mask.
    """
    if raw.size == 0:
        return False
    if src_dtype in ("BF16", "F16"):
        mask = 0x7F80 if src_dtype == "BF16" else 0x7C00
        return int(np.bitwise_and(raw.view(np.uint16), 0x7FFF).max()) >= mask
    if src_dtype == "F32":
        return int(np.bitwise_and(raw.view(np.uint32), 0x7FFFFFFF).max()) >= 0x7F800000
    if src_dtype == "F64":
        return not bool(np.all(np.isfinite(raw)))
    return False


def _row_group(spec: TensorSpec, rows: int) -> int | None:
    """Rows a chunk must hold a multiple of for the spec's row transform to apply chunk by chunk.

    None when the rows do not split evenly: the transform then runs once on the whole tensor and raises its own
    error.
    """
    if spec.transform == "deinterleave_rope":  # a permutation inside each head of head_dim rows
        hd = int(spec.transform_args[0])
        return hd if hd > 0 and hd % 2 == 0 and rows % hd == 0 else None
    if spec.transform == "eagle3_permute":  # a permutation inside each of n groups of rows
        n_head, n_head_kv = spec.transform_args
        n = n_head_kv if n_head_kv != n_head else n_head
        return rows // n if n > 0 and rows % (2 * n) == 0 else None
    return 1


def _transform(spec: TensorSpec, chunk: np.ndarray, group: int) -> np.ndarray:
    if spec.transform == "eagle3_permute":
        heads = chunk.shape[0] // group
        return eagle3_permute(chunk, heads, heads)  # the same per-group permutation, on this chunk's groups
    return TRANSFORMS[spec.transform or ""](chunk, *spec.transform_args)


def chunk_jobs(spec: TensorSpec, sources: dict[str, Checkpoint], *,
               allow_nonfinite: bool = False) -> Iterator[Callable[[], np.ndarray]]:
    """Yield one job per row chunk of a tensor; calling a job reads, checks and converts that chunk.

    Each chunk holds about ``CHUNK_BYTES`` of source data (a whole number of transform groups) and is read with
    ``Checkpoint.read_rows`` into a new array, so memory stays bounded by the chunk size whatever the model
    size. Jobs are independent, so the writer runs them on worker threads, in any order, and writes the results
    in file order.
    """
    if spec.data is not None:
        data = spec.data
        yield lambda: (data.astype(np.int64) if spec.ggml_type == QT.I64
                       else convert_chunk(data.astype(np.float32), "F32", spec.ggml_type))
        return
    ck = sources[spec.origin]
    ref = ck.ref(spec.source or "")
    rows = ref.shape[0] if ref.shape else 1
    group = _row_group(spec, rows)

    def finish(chunk: np.ndarray) -> np.ndarray:
        if not allow_nonfinite and _nonfinite(chunk, ref.dtype):
            raise ConvertError(f"{ref.file}: tensor '{ref.name}' contains NaN or Inf values "
                               "(pass --allow-nonfinite to convert it anyway)")
        return convert_chunk(chunk, ref.dtype, spec.ggml_type)

    if group is None:  # rows that do not split evenly: the whole-tensor transform (normally raises its error)
        yield lambda: finish(TRANSFORMS[spec.transform or ""](np.asarray(ck.read(ref.name)), *spec.transform_args))
        return
    row_bytes = max(1, (ref.end - ref.start) // max(1, rows))
    step = max(group, CHUNK_BYTES // row_bytes // group * group)

    def job(start: int) -> np.ndarray:
        chunk = ck.read_rows(ref.name, start, min(rows, start + step))
        return finish(chunk if spec.transform is None else _transform(spec, chunk, group))

    for start in range(0, max(rows, 1), step):
        yield functools.partial(job, start)


def tensor_chunks(spec: TensorSpec, sources: dict[str, Checkpoint], *, allow_nonfinite: bool = False) -> Iterator[np.ndarray]:
    """Yield the file bytes of one tensor as a sequence of arrays (row chunks of the source), in order.

    Example:
        >>> b"".join(c.tobytes() for c in tensor_chunks(spec, {"draft": ck}))  # doctest: +SKIP
    """
    for job in chunk_jobs(spec, sources, allow_nonfinite=allow_nonfinite):
        yield job()


def _pad(n: int) -> int:
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


# ---------------------------------------------------------------------------------------------- KV block
_INT_DTYPES = {VT.UINT8: "<u1", VT.INT8: "<i1", VT.UINT16: "<u2", VT.INT16: "<i2", VT.UINT32: "<u4",
               VT.INT32: "<i4", VT.UINT64: "<u8", VT.INT64: "<i8"}
_U64 = struct.Struct("<Q")


def _pack_array_items(items: list | tuple, sub: VT) -> bytes | None:
    """The packed items of a GGUF array in bulk, or None where only gguf-py's per-item packer is sure to agree.

    Bulk paths take exactly the Python types gguf-py packs the obvious way (str/bytes, int, float, bool); any
    other item type, an out-of-range integer, a NaN or a float32 overflow goes back to gguf-py, which packs or
    raises as it always does.
    """
    if sub == VT.STRING:
        enc = []
        for v in items:
            if type(v) is str:
                enc.append(v.encode("utf-8"))
            elif type(v) is bytes:
                enc.append(v)
            else:
                return None
        return b"".join(itertools.chain.from_iterable(zip(map(_U64.pack, map(len, enc)), enc, strict=True)))
    if sub in _INT_DTYPES:
        if not all(type(v) is int for v in items):
            return None
        try:
            return np.array(items, dtype=_INT_DTYPES[sub]).tobytes()
        except OverflowError:  # numpy refuses out-of-range Python ints; struct.error is gguf-py's answer
            return None
    if sub in (VT.FLOAT32, VT.FLOAT64):
        if not all(type(v) is float for v in items):
            return None
        a = np.array(items, dtype=np.float64)
        if sub == VT.FLOAT64:
            return a.astype("<f8").tobytes()
        b = a.astype("<f4")  # the same C double -> float rounding as struct.pack("<f")
        if np.isnan(a).any() or np.any(np.isinf(b) & ~np.isinf(a)):
            return None
        return b.tobytes()
    if sub == VT.BOOL and all(type(v) is bool for v in items):
        return np.array(items, dtype=np.bool_).tobytes()
    return None


def pack_kv_value(w: GGUFWriter, value: object, vtype: VT, sub_type: VT | None = None) -> bytes:
    """The bytes ``w._pack_val(value, vtype, add_vtype=True, sub_type=sub_type)`` gives, with arrays in bulk.

    gguf-py packs arrays item by item (a 150k-token vocabulary is ~0.5M ``struct.pack`` calls, seconds);
    lists and tuples of plain str/int/float/bool are packed here in a few vectorised steps, everything else by
    gguf-py itself. tests/test_perf_equivalence.py compares the two byte for byte.

    Example:
        >>> pack_kv_value(GGUFWriter(None, "x"), ["a", "bc"], VT.ARRAY, VT.STRING).hex()
        '0900000008000000020000000000000001000000000000006102000000000000006263'
    """
    # exactly list or tuple (not a subclass); the isinstance only tells the type checker so
    if (vtype == VT.ARRAY and sub_type is not None and type(value) in (list, tuple) and isinstance(value, (list, tuple))
            and len(value) > 0):
        items = _pack_array_items(value, sub_type)
        if items is not None:
            return struct.pack("<IIQ", VT.ARRAY, sub_type, len(value)) + items
    return w._pack_val(value, vtype, add_vtype=True, sub_type=sub_type)


def _write_kv_data(w: GGUFWriter, f: BinaryIO) -> None:
    """``w.write_kv_data_to_file()``, byte for byte, with arrays packed by :func:`pack_kv_value`."""
    block = bytearray()
    for key, val in w.kv_data[0].items():
        block += w._pack_val(key, VT.STRING, add_vtype=False)
        block += pack_kv_value(w, val.value, val.type, val.sub_type)
    f.write(block)
    w.state = WriterState.KV_DATA


# ---------------------------------------------------------------------------------------------- tensor data
WORKERS = max(1, min(4, os.cpu_count() or 1))  # conversion threads (numpy releases the GIL)
LOOKAHEAD = WORKERS + 1  # chunks converted or in conversion ahead of the disk: bounds memory to a few chunks
KICK_BYTES = 32 * 1024 * 1024  # start the disk write-back every this many bytes (see _kick_writeback)


def _kick_writeback(f: BinaryIO, start: int) -> int:
    """Start writing ``[start, end of file)`` to disk now, without waiting; return the new start.

    Below the kernel's dirty-page limits nothing reaches the disk until the final fsync, so reading/converting
    and writing would take turns. ``POSIX_FADV_DONTNEED`` on Linux starts asynchronous write-back of the range
    (and lets its pages leave the page cache once written), so the disk works while the next chunks are
    converted; the final fsync then only waits for the tail.
    """
    f.flush()
    end = f.tell()
    if hasattr(os, "posix_fadvise") and end > start:
        with contextlib.suppress(OSError):
            os.posix_fadvise(f.fileno(), start, end - start, os.POSIX_FADV_DONTNEED)
    return end


def _trim_heap() -> None:
    """Hand memory freed by the tokenizer step back to the OS (glibc keeps it otherwise) before streaming."""
    with contextlib.suppress(Exception):  # not glibc (macOS, musl): nothing to do
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)


def _write_tensors(f: BinaryIO, plan: Plan, sources: dict[str, Checkpoint], *, allow_nonfinite: bool,
                   progress: Progress | None) -> None:
    """Write every tensor's data, each followed by its alignment padding.

    Chunk jobs (read + check + convert; file reads and numpy release the GIL) run on ``WORKERS`` threads, at
    most ``LOOKAHEAD`` ahead of the chunk being written, while this thread writes the results in file order:
    conversion uses the cores and overlaps with the disk, and memory stays bounded by a few chunks. A job's
    exception is raised here when its turn to be written comes, so errors surface in file order.
    """
    total = plan.total_tensor_bytes()
    jobs: Iterator[tuple[TensorSpec, Callable[[], np.ndarray] | None]] = (
        (t, job) for t in plan.tensors
        for job in itertools.chain(chunk_jobs(t, sources, allow_nonfinite=allow_nonfinite), [None]))  # None: end of t
    pending: collections.deque[tuple[TensorSpec, Future[np.ndarray] | None]] = collections.deque()
    done = n = unkicked = 0
    kicked = f.tell()
    _trim_heap()
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="dspark-convert")
    try:
        while True:
            while len(pending) < LOOKAHEAD:
                try:
                    nxt = next(jobs, None)
                except ConvertError as e:  # planning a chunk failed: raise it in its turn, after earlier chunks
                    failed: Future[np.ndarray] = Future()
                    failed.set_exception(e)
                    pending.append((plan.tensors[0], failed))
                    jobs = iter(())
                    continue
                if nxt is None:
                    break
                t, job = nxt
                pending.append((t, pool.submit(job) if job is not None else None))
            if not pending:
                break
            t, fut = pending.popleft()
            if fut is None:  # end of tensor t: check its size, pad to the alignment
                if n != t.nbytes:
                    raise ConvertError(f"internal: tensor '{t.name}' produced {n} bytes, planned {t.nbytes}")
                f.write(b"\0" * _pad(n))
                done, n = done + n, 0
                continue
            b = np.ascontiguousarray(fut.result()).data.cast("B")  # .data is memoryview(array), typed for mypy
            f.write(b)
            n += b.nbytes
            unkicked += b.nbytes
            if unkicked >= KICK_BYTES:
                kicked, unkicked = _kick_writeback(f, kicked), 0
            if progress is not None:
                progress(done + n, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def write_plan(plan: Plan, sources: dict[str, Checkpoint], path: Path, *, force: bool = False,
               allow_nonfinite: bool = False, progress: Progress | None = None) -> int:
    """Write ``plan`` to ``path`` atomically; return the file size in bytes.

    ``sources`` maps a TensorSpec ``origin`` ("draft", "target") to its checkpoint. An existing ``path`` is
    replaced only with ``force``.

    Example:
        >>> write_plan(plan, {"draft": Checkpoint(Path("fixtures/dflash-zlab"))}, Path("out.gguf"))  # doctest: +SKIP
    """
    path = Path(path)
    if path.is_dir():
        raise ConvertError(f"{path}: is a folder, expected a file name")
    if path.exists() and not force:
        raise ConvertError(f"{path}: already exists (pass --force to overwrite it)")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConvertError(f"{folder}: output folder does not exist")
    if plan.kvs[0].name != S.GENERAL_ARCHITECTURE or plan.kvs[0].value != plan.arch:
        raise ConvertError("internal: a plan must start with general.architecture")
    tmp = new_partial(path)  # also removes partial files left by killed conversions to the same destination
    created = committed = False  # what the except branches may remove / must report
    try:
        with _sigterm_raises():
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
            with os.fdopen(fd, "wb", buffering=1024 * 1024) as f:
                w = GGUFWriter(path=None, arch=plan.arch)
                for kv in plan.kvs[1:]:
                    w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
                for t in plan.tensors:
                    w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.ggml_type)
                # hand gguf-py our file object: it serialises header, KVs and tensor infos. os.fdopen with a
                # buffer size returns an io.BufferedWriter, but typeshed says so only for buffering -1 or 1.
                w.fout = [cast(io.BufferedWriter, f)]
                w.state = WriterState.EMPTY
                w.write_header_to_file()
                _write_kv_data(w, f)
                w.write_ti_data_to_file()
                f.write(b"\0" * _pad(f.tell()))
                _write_tensors(f, plan, sources, allow_nonfinite=allow_nonfinite, progress=progress)
                w.fout = None
                f.flush()
                os.fsync(f.fileno())
            size = tmp.stat().st_size
            os.replace(tmp, path)
            committed = True
            with contextlib.suppress(OSError):
                dfd = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            return size
    except (KeyboardInterrupt, Interrupted) as e:
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        what = Interrupted.describe(signum)
        if committed:  # the signal landed between the rename and the return: the file is complete
            raise Interrupted(signum, f"{path}: {what} after the file was complete; it was written in full") from None
        _remove(tmp, created)
        raise Interrupted(signum, f"{path}: {what}; nothing was written (destination left as it was)") from None
    except OSError as e:
        _remove(tmp, created)
        if e.errno in _DISK_FULL:
            raise ConvertError(f"{path}: no space left on device while writing ({e.strerror}); the partial file was "
                               "removed and the destination left as it was") from None
        raise ConvertError(f"{path}: cannot write ({e.strerror or e}); the destination was left as it was") from None
    except BaseException:
        _remove(tmp, created)
        raise
    finally:
        release(tmp)


def _remove(p: Path, created: bool) -> None:
    if created:  # never unlink a file this run did not create
        with contextlib.suppress(OSError):
            p.unlink()
