"""Opening an input safely: only regular files are read (a FIFO blocks forever, ``/dev/zero`` never ends, a folder
is not a file), refused with one line naming the path, through symlinks too. Copying a byte range between two open
files in bounded memory (:func:`kernel_copy`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import BinaryIO

from .errors import ConvertError, PathLike
from .units import size_text

COPY_CHUNK = 8 << 20  # bytes per pread/pwrite where the kernel copy is not available
_KERNEL_CHUNK = 1 << 30  # bytes per copy_file_range call


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: PathLike, mode: int) -> ConvertError:
    """The one line for an input that is not a regular file (a FIFO, a device, a socket; through symlinks too)."""
    link = ""
    if os.path.islink(os.fspath(path)):
        link = f" (a symlink to {os.path.realpath(os.fspath(path))})"
    return ConvertError(f"{path}: is {_kind(mode)}{link}, not a regular file; only regular files are read")


def require_regular(path: PathLike) -> None:
    """Refuse ``path`` unless it is (or a symlink resolves to) a regular file; a missing file passes (the caller
    reports it). Reading a FIFO blocks forever and ``/dev/zero`` never ends: nothing is opened here (``stat``
    only)."""
    try:
        st = os.stat(os.fspath(path))
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(path, st.st_mode)


def open_regular(path: PathLike) -> BinaryIO:
    """Open ``path`` for reading, refusing (one line) anything but a regular file without blocking on it: the
    file is opened ``O_NONBLOCK`` (a FIFO without a writer does not hang the open) and checked with ``fstat`` on
    the open descriptor (no race between the check and the read)."""
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    # the file object owns the descriptor from here: closing it here too could close a file opened later
    return os.fdopen(fd, "rb")


def kernel_copy(src_fd: int, dst_fd: int, offset: int, n: int, pos: int) -> None:
    """Copy ``n`` bytes at ``offset`` of ``src_fd`` to ``pos`` of ``dst_fd``: ``os.copy_file_range`` (in the kernel:
    no user-space buffer), else chunked pread/pwrite (bounded memory either way). A source that ends early is
    refused with one line naming the byte it ended at."""
    done = 0
    if hasattr(os, "copy_file_range"):
        with contextlib.suppress(OSError):
            while done < n:
                k = os.copy_file_range(src_fd, dst_fd, min(n - done, _KERNEL_CHUNK), offset + done, pos + done)
                if k <= 0:
                    break
                done += k
    while done < n:
        b = os.pread(src_fd, min(COPY_CHUNK, n - done), offset + done)
        if not b:
            raise ConvertError(f"source file ended at byte {offset + done:,}, {size_text(n - done)} early")
        os.pwrite(dst_fd, b, pos + done)
        done += len(b)
