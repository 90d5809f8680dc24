"""Execute a :class:`~dspark_convert.plan.Plan`: stream tensors one at a time into a GGUF file, atomically.

gguf's ``GGUFWriter`` serialises the header, KVs and tensor infos (so the byte layout is gguf-py's own); tensor
data is then streamed here by row chunks, because ``GGUFWriter.add_tensor`` keeps every tensor in memory until
the file is written (llama.cpp #29078). Same-dtype tensors are copied as bytes. The file is written to a
temporary name in the destination folder, fsynced, and renamed into place: an interrupted or failed conversion
(SIGINT, SIGTERM, full disk, bad tensor) leaves the destination exactly as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter
from gguf.gguf_writer import WriterState

from . import schema as S
from .checkpoint import Checkpoint
from .errors import ConvertError
from .plan import Plan, TensorSpec
from .transforms import convert_chunk, deinterleave_rope, eagle3_permute

ALIGNMENT = 32
CHUNK_BYTES = 16 * 1024 * 1024  # source bytes per chunk: bounds memory for any tensor size
Progress = Callable[[int, int], None]

TRANSFORMS: dict[str, Callable[..., np.ndarray]] = {
    "deinterleave_rope": deinterleave_rope,
    "eagle3_permute": eagle3_permute,
}


class _Terminated(BaseException):
    """Raised inside the writer when SIGTERM arrives, so the temporary file is removed."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _nonfinite(raw: np.ndarray, src_dtype: str) -> bool:
    """True if a chunk of source values holds NaN or Inf (checked on the raw bits: no float conversion)."""
    if src_dtype == "BF16":
        return bool(np.any((raw & 0x7F80) == 0x7F80))
    if src_dtype == "F16":
        return bool(np.any((raw.view(np.uint16) & 0x7C00) == 0x7C00))
    if src_dtype in ("F32", "F64"):
        return not bool(np.all(np.isfinite(raw)))
    return False


def tensor_chunks(spec: TensorSpec, sources: dict[str, Checkpoint], *, allow_nonfinite: bool = False) -> Iterator[np.ndarray]:
    """Yield the file bytes of one tensor as a sequence of arrays (row chunks of the source)."""
    if spec.data is not None:
        data = spec.data
        yield data.astype(np.int64) if spec.ggml_type == QT.I64 else convert_chunk(data.astype(np.float32), "F32", spec.ggml_type)
        return
    ck = sources[spec.origin]
    ref = ck.ref(spec.source or "")
    raw = ck.read(ref.name)
    if spec.transform is not None:
        raw = TRANSFORMS[spec.transform](np.asarray(raw), *spec.transform_args)
        chunks: Iterator[np.ndarray] = iter([raw])
    elif raw.ndim == 0 or raw.nbytes <= CHUNK_BYTES:
        chunks = iter([raw])
    else:
        rows = max(1, CHUNK_BYTES // max(1, raw.nbytes // raw.shape[0]))
        chunks = (raw[i:i + rows] for i in range(0, raw.shape[0], rows))
    for chunk in chunks:
        chunk = np.asarray(chunk)
        if not allow_nonfinite and _nonfinite(chunk, ref.dtype):
            raise ConvertError(f"{ref.file}: tensor '{ref.name}' contains NaN or Inf values "
                               "(pass --allow-nonfinite to convert it anyway)")
        yield convert_chunk(chunk, ref.dtype, spec.ggml_type)


def _pad(n: int) -> int:
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def write_plan(plan: Plan, sources: dict[str, Checkpoint], path: Path, *, force: bool = False,
               allow_nonfinite: bool = False, progress: Progress | None = None) -> int:
    """Write ``plan`` to ``path`` atomically; return the file size in bytes.

    ``sources`` maps a TensorSpec ``origin`` ("draft", "target") to its checkpoint. An existing ``path`` is
    replaced only with ``force``.

    Example:
        >>> write_plan(plan, {"draft": Checkpoint(Path("fixtures/dflash-zlab"))}, Path("out.gguf"))  # doctest: +SKIP
    """
    path = Path(path)
    if path.exists() and not force:
        raise ConvertError(f"{path}: already exists (pass --force to overwrite it)")
    if path.is_dir():
        raise ConvertError(f"{path}: is a folder, expected a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConvertError(f"{folder}: output folder does not exist")
    if plan.kvs[0].name != S.GENERAL_ARCHITECTURE or plan.kvs[0].value != plan.arch:
        raise ConvertError("internal: a plan must start with general.architecture")
    tmp = folder / f".{path.name}.{os.getpid()}.partial"
    total = plan.total_tensor_bytes()
    done = 0
    try:
        with _sigterm_raises():
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb", buffering=1024 * 1024) as f:
                w = GGUFWriter(path=None, arch=plan.arch)
                for kv in plan.kvs[1:]:
                    w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
                for t in plan.tensors:
                    w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.ggml_type)
                w.fout = [f]  # hand gguf-py our file object: it serialises header, KVs and tensor infos
                w.state = WriterState.EMPTY
                w.write_header_to_file()
                w.write_kv_data_to_file()
                w.write_ti_data_to_file()
                f.write(b"\0" * _pad(f.tell()))
                for t in plan.tensors:
                    n = 0
                    for chunk in tensor_chunks(t, sources, allow_nonfinite=allow_nonfinite):
                        b = memoryview(np.ascontiguousarray(chunk)).cast("B")
                        f.write(b)
                        n += b.nbytes
                        if progress is not None:
                            progress(done + n, total)
                    if n != t.nbytes:
                        raise ConvertError(f"internal: tensor '{t.name}' produced {n} bytes, planned {t.nbytes}")
                    f.write(b"\0" * _pad(n))
                    done += n
                w.fout = None
                f.flush()
                os.fsync(f.fileno())
            size = tmp.stat().st_size
            os.replace(tmp, path)
            with contextlib.suppress(OSError):
                dfd = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            return size
    except KeyboardInterrupt:
        _remove(tmp)
        raise ConvertError(f"{path}: interrupted; nothing was written (destination left as it was)") from None
    except _Terminated:
        _remove(tmp)
        raise ConvertError(f"{path}: terminated (SIGTERM); nothing was written (destination left as it was)") from None
    except OSError as e:
        _remove(tmp)
        if e.errno == errno.ENOSPC:
            raise ConvertError(f"{path}: no space left on device while writing; the partial file was removed and the destination left as it was") from None
        raise ConvertError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(p: Path) -> None:
    with contextlib.suppress(OSError):
        p.unlink()
