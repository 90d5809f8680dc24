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
import contextvars
import errno
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as QT

from .. import schema as S
from ..errors import ConvertError
from ..formats.transforms import convert_chunk
from ..gguffile.header import pad, write_header
from ..hf.checkpoint import Checkpoint, TensorRef
from ..notes import note
from ..plan import Plan, TensorSpec
from .atomic import write_atomically

CHUNK_BYTES = 2 * 1024 * 1024  # largest source (or output) bytes per chunk: bounds memory for any tensor size
IN_FLIGHT_BYTES = 16 * 1024 * 1024  # bytes of all chunks in flight together, whatever the core count
MIN_CHUNK_BYTES = 128 * 1024  # smallest chunk the in-flight budget shrinks chunks to (many cores)
THREADS_ENV = "DSPARK_CONVERT_THREADS"  # conversion threads: a positive integer (default: the usable cores)
MAX_WORKERS = 64
Progress = Callable[[int, int], None]


def _nonfinite(raw: np.ndarray, src_dtype: str) -> bool:
    """True if a chunk of source values holds NaN or Inf (checked on the raw bits: no float conversion).

    A value is NaN or Inf when its bits without the sign are at least the exponent mask ``e``: for the positive
    ones, the signed integer maximum reaches ``e``; for the negative ones, the unsigned maximum reaches
    ``sign | e``. Two reductions over the chunk, no temporary array.
    """
    if raw.size == 0:
        return False
    if src_dtype in ("BF16", "F16"):
        mask = 0x7F80 if src_dtype == "BF16" else 0x7C00
        return int(raw.view(np.int16).max()) >= mask or int(raw.view(np.uint16).max()) >= 0x8000 | mask
    if src_dtype == "F32":
        return int(raw.view(np.int32).max()) >= 0x7F800000 or int(raw.view(np.uint32).max()) >= 0xFF800000
    if src_dtype == "F64":
        return not bool(np.all(np.isfinite(raw)))
    if src_dtype == "MXFP4":  # encoded blocks: a NaN E8M0 scale (byte 255) in the first byte of a block
        return bool(np.any(raw.reshape(-1, GGML_QUANT_SIZES[QT.MXFP4][1])[:, 0] == 0xFF))
    return False


Job = Callable[[], np.ndarray]


def chunk_spans(spec: TensorSpec, sources: dict[str, Checkpoint], *, allow_nonfinite: bool = False,
                chunk: int | None = None) -> Iterator[tuple[int, int, Job]]:
    """Yield ``(offset, size, job)`` per row chunk of a tensor: calling a job reads, checks and converts that chunk,
    whose converted bytes are ``size`` bytes at ``offset`` in the tensor's data (known before any is converted:
    every output row of a tensor has ``spec.nbytes / rows`` bytes).

    Each chunk holds about ``chunk`` bytes (default :func:`chunk_bytes`) of source data, or of output data
    when the outtype is wider than the source (BF16 -> F32: half as many source bytes), and always a whole
    number of the transform's row groups: the rows of each source the transform asks for
    (``Transform.source_rows``), each read with ``Checkpoint.read_rows`` into a new array, so memory stays
    bounded by the chunk size whatever the model size. Jobs are independent, so the writer runs them on worker
    threads, in any order, and each writes its result at its own place in the file.
    """
    if spec.data is not None:
        data = spec.data
        yield 0, spec.nbytes, lambda: (data.astype(np.int64) if spec.ggml_type == QT.I64
                                       else convert_chunk(data.astype(np.float32), "F32", spec.ggml_type))
        return
    ck = sources[spec.origin]
    refs = [ck.ref(name) for name in spec.sources]
    t = spec.transform
    if not refs or not (t.sources_ok(len(refs)) if t is not None else len(refs) == 1):
        raise ConvertError(f"internal: tensor '{spec.name}' has {len(refs)} sources for "
                           f"{t.describe() if t is not None else 'no transform'}")
    first = refs[0]
    shapes = tuple(r.shape for r in refs)
    rows = t.out_rows(shapes) if t is not None else (first.shape[0] if first.shape else 1)
    group = t.row_group(rows) if t is not None else 1
    dtype = t.out_dtype(tuple(r.dtype for r in refs)) if t is not None else first.dtype

    noted: list[bool] = []  # --allow-nonfinite: one note per tensor, at its first chunk holding NaN/Inf

    def finish(chunk: np.ndarray) -> np.ndarray:
        if _nonfinite(chunk, dtype):
            if not allow_nonfinite:
                raise ConvertError(f"{first.file}: tensor '{first.name}' contains NaN or Inf values "
                                   "(pass --allow-nonfinite to convert it anyway)")
            if not noted:
                noted.append(True)
                note(spec.name, "nonfinite-written", f"{first.file}: tensor '{first.name}' contains NaN or Inf "
                     f"values, written as they are to '{spec.name}' (--allow-nonfinite)")
        return convert_chunk(chunk, dtype, spec.ggml_type)

    if t is not None and group is None:  # rows that do not split evenly: the whole-tensor transform (normally raises)
        yield 0, spec.nbytes, lambda: finish(t.apply_whole([np.asarray(ck.read(r.name)) for r in refs]))
        return
    group = group or 1
    # source bytes per output row, or output bytes per row when the output is wider
    row_bytes = max(1, max(sum(r.end - r.start for r in refs), spec.nbytes) // max(1, rows))
    step = max(group, (chunk or chunk_bytes()) // row_bytes // group * group)

    def read(r: TensorRef, a: int, b: int) -> np.ndarray:  # an empty span (a source this chunk does not use): no I/O
        return ck.read_rows(r.name, a, b) if b > a else np.empty((0, *r.shape[1:]), r.numpy_dtype)

    def job(start: int) -> np.ndarray:
        stop = min(rows, start + step)
        if t is None:
            return finish(ck.read_rows(first.name, start, stop))
        spans = t.source_rows(start, stop, shapes)
        return finish(t.apply_at([read(r, a, b) for r, (a, b) in zip(refs, spans, strict=True)], rows, start))

    if rows > 0 and spec.nbytes % rows:
        raise ConvertError(f"internal: tensor '{spec.name}' has {spec.nbytes:,} bytes, not a whole number per row "
                           f"of its {rows:,} rows")
    out_row = spec.nbytes // max(rows, 1)
    for start in range(0, max(rows, 1), step):
        size = (min(rows, start + step) - start) * out_row if rows > 0 else spec.nbytes
        yield start * out_row, size, functools.partial(job, start)


# ---------------------------------------------------------------------------------------------- tensor data
def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under ``taskset`` or a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def thread_count(env: dict[str, str] | None = None) -> int:
    """Conversion threads: ``$DSPARK_CONVERT_THREADS`` when set, else the usable cores; at most ``MAX_WORKERS``.

    Example:
        >>> thread_count({"DSPARK_CONVERT_THREADS": "1"})
        1
    """
    raw = (os.environ if env is None else env).get(THREADS_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ConvertError(f"{THREADS_ENV}={raw!r}: expected a positive integer (conversion threads)")
        return min(n, MAX_WORKERS)
    return min(usable_cores(), MAX_WORKERS)


WORKERS: int | None = None  # conversion threads; None: thread_count() at each conversion
LOOKAHEAD: int | None = None  # chunks converted or in conversion ahead of the disk; None: two per worker


def pool_shape() -> tuple[int, int]:
    """(worker threads, chunks in flight) of the next conversion."""
    workers = WORKERS or thread_count()
    return workers, LOOKAHEAD or 2 * workers


def chunk_bytes(lookahead: int | None = None) -> int:
    """Source bytes per chunk: ``CHUNK_BYTES``, smaller when ``lookahead`` chunks of it (default: the next
    conversion's) would exceed ``IN_FLIGHT_BYTES``, never below ``MIN_CHUNK_BYTES`` unless ``CHUNK_BYTES`` is.

    Memory in flight is then about ``IN_FLIGHT_BYTES`` on any machine up to ``MAX_WORKERS`` cores: 1-4 cores
    convert 2 MiB chunks, 16 cores 512 KiB ones (docs/performance.md).
    """
    ahead = lookahead if lookahead is not None else pool_shape()[1]
    return min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, IN_FLIGHT_BYTES // max(1, ahead)))
KICK_BYTES = 32 * 1024 * 1024  # start the disk write-back every this many bytes (see _kick_writeback)


def _kick_writeback(fd: int, start: int, end: int) -> int:
    """Start writing ``[start, end)`` of file ``fd`` to disk now, without waiting; return ``end``.

    Below the kernel's dirty-page limits nothing reaches the disk until the final fsync, so reading/converting
    and writing would take turns. ``POSIX_FADV_DONTNEED`` on Linux starts asynchronous write-back of the range
    (and lets its pages leave the page cache once written), so the disk works while the next chunks are
    converted; the final fsync then only waits for the tail.
    """
    if hasattr(os, "posix_fadvise") and end > start:
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
    return end


def _trim_heap() -> None:
    """Hand memory freed by the tokenizer step back to the OS (glibc keeps it otherwise) before streaming."""
    with contextlib.suppress(Exception):  # not glibc (macOS, musl): nothing to do
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of file ``fd`` (``os.pwrite`` may write less than asked)."""
    while data.nbytes:
        n = os.pwrite(fd, data, offset)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        data, offset = data[n:], offset + n


def _convert_and_write(fd: int, offset: int, size: int, job: Job, name: str) -> int:
    """Run a chunk job and write its bytes at ``offset`` of file ``fd``; return their count (``size``)."""
    b = np.ascontiguousarray(job()).data.cast("B")  # .data is memoryview(array), typed for mypy
    if b.nbytes != size:
        raise ConvertError(f"internal: a chunk of tensor '{name}' produced {b.nbytes:,} bytes, planned {size:,}")
    _pwrite_all(fd, b, offset)
    return size


def _write_tensors(f: BinaryIO, plan: Plan, sources: dict[str, Checkpoint], *, allow_nonfinite: bool,
                   progress: Progress | None) -> None:
    """Write every tensor's data, each followed by its alignment padding, after the header already in ``f``.

    Every chunk's place in the file is known before it is converted (the header fixes each tensor's offset,
    :func:`chunk_spans` each chunk's offset in its tensor), so each chunk job (read + check + convert + write;
    file reads and writes and numpy release the GIL) writes its own bytes with ``os.pwrite`` on one of the
    threads (one per usable core, :func:`pool_shape`): conversion and the kernel's copy into the page cache run
    on every core, in any order, and the file is the same byte for byte whatever the thread count. This thread
    keeps at most ``lookahead`` chunks in flight (memory stays bounded by ``IN_FLIGHT_BYTES`` of chunks,
    :func:`chunk_bytes`, whatever the core count) and collects them in file order: it writes the padding,
    reports progress, starts the write-back of the data written so far, and raises a job's exception when its
    turn comes, so errors surface in file order. On return ``f`` is positioned at the end of the data.
    """
    total = plan.total_tensor_bytes()
    workers, lookahead = pool_shape()
    chunk = chunk_bytes(lookahead)
    f.flush()
    fd, base = f.fileno(), f.tell()

    # a tensor's chunk jobs, then the tensor itself: the marker for "end of its data"
    def all_jobs() -> Iterator[tuple[int, int, Job, str] | TensorSpec]:
        at = base
        for t in plan.tensors:
            for offset, size, job in chunk_spans(t, sources, allow_nonfinite=allow_nonfinite, chunk=chunk):
                yield at + offset, size, job, t.name
            yield t
            at += t.nbytes + pad(t.nbytes)

    jobs = all_jobs()
    pending: collections.deque[Future[int] | TensorSpec] = collections.deque()
    done = n = 0
    at = kicked = base  # end of the data collected so far; start of the range not yet handed to write-back
    _trim_heap()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dspark-convert")
    try:
        while True:
            while len(pending) < lookahead:
                try:
                    nxt = next(jobs, None)
                except ConvertError as e:  # planning a chunk failed: raise it in its turn, after earlier chunks
                    failed: Future[int] = Future()
                    failed.set_exception(e)
                    pending.append(failed)
                    jobs = iter(())
                    continue
                if nxt is None:
                    break
                if isinstance(nxt, TensorSpec):
                    pending.append(nxt)
                    continue
                offset, size, job, name = nxt
                # each chunk runs in a copy of this context: a note it makes reaches the conversion's collector
                pending.append(pool.submit(contextvars.copy_context().run, _convert_and_write, fd, offset, size, job,
                                           name))
            if not pending:
                break
            fut = pending.popleft()
            if isinstance(fut, TensorSpec):  # end of this tensor: pad to the alignment
                if pad(n):
                    _pwrite_all(fd, memoryview(b"\0" * pad(n)), at)
                at += pad(n)
                done, n = done + n, 0
                continue
            size = fut.result()
            del fut
            n += size
            at += size
            if at - kicked >= KICK_BYTES:
                kicked = _kick_writeback(fd, kicked, at)
            if progress is not None:
                progress(done + n, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    f.seek(at)


def write_plan(plan: Plan, sources: dict[str, Checkpoint], path: Path, *, force: bool = False,
               allow_nonfinite: bool = False, progress: Progress | None = None) -> int:
    """Write ``plan`` to ``path`` atomically; return the file size in bytes.

    ``sources`` maps a TensorSpec ``origin`` ("draft", "target") to its checkpoint. An existing ``path`` is
    replaced only with ``force``.

    Example:
        >>> write_plan(plan, {"draft": Checkpoint(Path("fixtures/dflash-zlab"))}, Path("out.gguf"))  # doctest: +SKIP
    """
    if plan.kvs[0].name != S.GENERAL_ARCHITECTURE or plan.kvs[0].value != plan.arch:
        raise ConvertError("internal: a plan must start with general.architecture")
    pool_shape()  # a bad $DSPARK_CONVERT_THREADS fails here, before the destination folder is touched

    def body(f: BinaryIO) -> None:
        write_header(f, plan.arch, plan.kvs[1:], plan.tensors)
        _write_tensors(f, plan, sources, allow_nonfinite=allow_nonfinite, progress=progress)

    return write_atomically(path, body, force=force)
