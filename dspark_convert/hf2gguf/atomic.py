"""Write a file atomically: a fresh temporary file beside the destination, fsynced and renamed into place, removed
on any failure or interrupt. Shared by ``hf2gguf`` (:func:`dspark_convert.hf2gguf.writer.write_plan`) and
``upgrade``; it imports neither numpy nor gguf, so a command that only copies bytes starts fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import ConvertError, Interrupted
from .destination import check_planned_name, commit, expect_commit, holds, new_partial, release

_DISK_FULL = {errno.ENOSPC} | ({errno.EDQUOT} if hasattr(errno, "EDQUOT") else set())  # quota: same remedy


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


def write_atomically(path: Path, write: Callable[[BinaryIO], None], *, force: bool = False) -> int:
    """Run ``write(f)`` on a fresh temporary file beside ``path``, fsync it and rename it into place; return the
    file size. ``path`` must pass :func:`~dspark_convert.hf2gguf.destination.check_planned_name`: absent or a
    regular file (never a link, device, FIFO or socket, even with ``force``) in an existing folder. On any failure
    or interrupt (SIGINT, SIGTERM, full disk) the temporary file is removed and ``path`` is left as it was. Used by
    :func:`~dspark_convert.hf2gguf.writer.write_plan` and by ``upgrade``."""
    path = Path(path)
    check_planned_name(path, force=force)
    folder = path.parent if str(path.parent) else Path(".")
    expect_commit(None)
    tmp = new_partial(path)  # also removes partial files left by killed conversions to the same destination
    created = False  # what the except branches may remove
    ours: tuple[int, int] | None = None  # identity of the complete temporary file, once fsynced
    try:
        with _sigterm_raises():
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
            with os.fdopen(fd, "wb", buffering=1024 * 1024) as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
                st = os.fstat(f.fileno())
            size, ours = st.st_size, (st.st_dev, st.st_ino)
            expect_commit(path, ours)
            commit(tmp, path, force=force)
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
        # the truth is what the destination holds now, wherever the signal landed (before, inside or after the
        # rename or link): never a flag set after the call returns
        done = holds(path, ours)
        _remove(tmp, created)
        if done:
            raise Interrupted(signum, f"{path}: {what} after the file was complete; it was written in full") from None
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
