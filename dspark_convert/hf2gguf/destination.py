"""Where ``hf2gguf`` writes: the checks made before any work, and the temporary files of the atomic write.

:func:`check_destination` runs before anything is read or downloaded, so that a typo in ``-o`` or a read-only
folder is reported at once, not after planning (for Hub inputs: after downloading). The writer
(:mod:`dspark_convert.hf2gguf.writer`) writes to :func:`new_partial`, a hidden ``.NAME.PID.RANDOM.partial`` file beside the
destination, and renames it into place when complete. A conversion killed with SIGKILL (or by the OOM killer)
cannot remove its partial file; the next conversion to the same destination removes it once its writer process
is gone (:func:`remove_stale_partials`).

Example:
    >>> check_destination("out/draft.gguf", outtype="bf16", force=False)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from pathlib import Path

from ..errors import ConvertError
from ..notes import note

#: temporary files this process is writing now (never removed as stale, even though their pid is ours)
_ACTIVE: set[Path] = set()


def check_destination(outfile: str | os.PathLike[str] | None, *, outtype: str, force: bool) -> None:
    """Refuse an output name that cannot work, before any work: empty, ``-`` (stdout), a folder, a missing or
    read-only folder, or (without ``force``) an existing file. ``outfile`` None means the default name in the
    current folder. A dry run makes the same checks (it says what the real run would do). Templates
    (``{ftype}``) are checked as far as they can be before the outtype is resolved: with ``outtype="auto"`` the
    file name itself is checked after planning (:func:`check_planned_name`).
    """
    if outfile is None:
        _check_folder(Path.cwd())
        return
    name = os.fspath(outfile)
    if name.strip() == "":
        raise ConvertError("-o '': the output file name is empty; give a file name, e.g. -o draft.gguf")
    if name == "-":
        raise ConvertError("-o -: a GGUF file is not streamed to stdout; give a file name, e.g. -o draft.gguf")
    path = Path(name)
    if name.endswith(("/", os.sep)) and not path.is_dir() and "{" not in name:
        raise ConvertError(f"{name}: no such folder (and -o takes a file name, e.g. {path / 'draft.gguf'})")
    if name.endswith(("/", os.sep)) or path.is_dir():
        raise ConvertError(f"{path}: is a folder, expected a file name (e.g. {path / 'draft.gguf'})")
    if "{" not in str(path.parent):
        _check_folder(path.parent if str(path.parent) else Path("."))
    if "{" in name and outtype == "auto":
        return  # the name depends on the resolved outtype: checked after planning
    expanded = path
    if "{" in name:
        from .naming import expand_output_template  # (imports gguf: only for a template, so upgrade starts fast)

        expanded = Path(expand_output_template(name, outtype=outtype))
    check_planned_name(expanded, force=force)


def check_planned_name(path: Path, *, force: bool) -> None:
    """The checks on the final file name (a template expanded with the resolved outtype): not a folder, its folder
    exists and, without ``force``, no file there (the writer checks again, and commits without clobbering)."""
    if path.is_dir():
        raise ConvertError(f"{path}: is a folder, expected a file name")
    refuse_non_regular(path)
    if os.path.lexists(path) and not force:
        raise ConvertError(f"{path}: already exists (pass --force to overwrite it)")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConvertError(f"{folder}: output folder does not exist")


def refuse_non_regular(path: Path) -> None:
    """The destination rule of every verb that writes a file: ``path`` is absent or a regular file (the only thing
    ``--force`` may replace). Anything else there is refused in one line: a symbolic link (even one to a regular
    file: it is neither followed nor replaced; give the path it points to), a device node, a FIFO, a socket.
    Checked before any work and again just before the rename (:func:`commit`)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ConvertError(f"{path}: cannot inspect the destination ({e.strerror or e})") from None
    if stat.S_ISREG(st.st_mode):
        return
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        raise ConvertError(f"{path}: is a symbolic link (to {to}); only a regular file is replaced, a link is neither "
                           "followed nor replaced: give the file it points to, or remove the link")
    kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a character device" if stat.S_ISCHR(st.st_mode)
            else "a block device" if stat.S_ISBLK(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    raise ConvertError(f"{path}: is {kind}, not a regular file; only a regular file is replaced (even with --force)")


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise ConvertError(f"{folder}: output folder does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConvertError(f"{folder}: output folder is not writable (no write permission, or a read-only file "
                           "system)")


# ------------------------------------------------------------------------------------------- temporary files
_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.(?P<rand>[0-9a-f]{8})\.partial$")


def new_partial(path: Path) -> Path:
    """A fresh temporary name beside ``path`` (``.NAME.PID.RANDOM.partial``), registered as this process's own
    until :func:`release`. Stale partial files of ``path`` are removed first."""
    remove_stale_partials(path)
    # pid + random part: a stale temp file of a killed run (same pid after a container restart) never collides
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial"
    _ACTIVE.add(tmp)
    return tmp


def release(tmp: Path) -> None:
    """``tmp`` is no longer being written by this process."""
    _ACTIVE.discard(tmp)


def stale_partials(path: Path) -> list[Path]:
    """Partial files of ``path`` whose writer is gone: a process that no longer exists or is a zombie (killed, not
    yet reaped), a process that started after the file was last written (its pid was reused), or this process's
    own pid (a container restart reuses pids) for a file this process is not writing."""
    folder = path.parent if str(path.parent) else Path(".")
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _PARTIAL.match(entry.name)
            if m is None or m["name"] != path.name or not entry.is_file(follow_symlinks=False):
                continue
            pid, p = int(m["pid"]), folder / entry.name
            try:
                since: float | None = entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                since = None
            if (pid == os.getpid() and p not in _ACTIVE) or (pid != os.getpid() and not _alive(pid, since)):
                out.append(p)
    return sorted(out)


def remove_stale_partials(path: Path) -> list[Path]:
    """Remove :func:`stale_partials` of ``path`` (each with a note); returns what was removed."""
    removed = []
    for p in stale_partials(path):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p)
            pid = _PARTIAL.match(p.name)["pid"]  # type: ignore[index]
            note(str(path), "stale-partial-removed", f"{p}: removed, a temporary file left by an earlier conversion "
                                                     f"to the same destination that was killed (process {pid})")
    return removed


def _alive(pid: int, since: float | None = None) -> bool:
    """Whether the process that wrote a partial file may still be writing it: it exists, is not a zombie (killed,
    not yet reaped by its parent), and (where ``/proc`` tells) started before ``since``, the file's modification
    time; a process that started later holds a reused pid. Anything it cannot tell keeps the file."""
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there: never call a file stale
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    except OSError:
        return True  # cannot tell: keep the file
    state, started = _proc_state(pid)
    if state in ("Z", "X"):
        return False
    return not (since is not None and started is not None and started > since + 1.0)


def _proc_state(pid: int) -> tuple[str | None, float | None]:
    """``(state letter, start time as a Unix time)`` of ``pid`` from Linux's ``/proc``; ``(None, None)`` elsewhere
    or when unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, starttime field 22
        ticks = int(fields[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return fields[0], boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None, None


# ------------------------------------------------------------------------------------------- the commit
_RENAME_NOREPLACE = 1  # linux/fs.h


def _renameat2_noreplace(src: Path, dst: Path) -> bool | None:
    """``renameat2(src, dst, RENAME_NOREPLACE)`` through libc: True when renamed, None when the call or the file
    system does not support it (then the caller falls back to ``os.link``). Raises ``FileExistsError`` when
    ``dst`` exists."""
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # no libc symbol (glibc < 2.28, musl without it)
        return None
    at_fdcwd = -100
    rc = fn(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise FileExistsError(err, os.strerror(err), str(dst))
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return None  # kernel or file system without RENAME_NOREPLACE
    raise OSError(err, os.strerror(err), str(dst))


def commit(tmp: Path, path: Path, *, force: bool) -> None:
    """Put the complete temporary file ``tmp`` in place at ``path``.

    With ``force``: ``os.replace`` (atomic; an existing file is replaced). Without: a no-clobber operation, so a
    file that appeared at ``path`` while converting (another conversion to the same ``-o``, a user's copy) is
    never replaced: ``renameat2(RENAME_NOREPLACE)`` where the kernel and file system have it, else ``os.link``
    of the temporary file then its unlink (both fail if ``path`` exists). A file system with neither (no hard
    links) gets an exclusive placeholder (``O_CREAT | O_EXCL``) that the temporary file then replaces.
    Raises ConvertError (one line) if ``path`` exists; ``tmp`` is then left for the caller to remove.

    Where an interrupt lands does not matter for the truth of the report: :func:`holds` tells afterwards
    whether ``path`` is the new file.
    """
    if force:
        refuse_non_regular(path)  # again, just before the rename: what appeared there since the first check
        os.replace(tmp, path)
        return
    try:
        if _renameat2_noreplace(tmp, path):
            return
        try:
            os.link(tmp, path)
        except OSError as e:
            if isinstance(e, FileExistsError) or e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP,
                                                               errno.EMLINK, errno.ENOSYS):
                raise
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))  # reserve the name, then fill it
            placeholder = identity(path)
            try:
                os.replace(tmp, path)
            except BaseException:
                if holds(path, placeholder):  # never leave the empty placeholder behind
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                raise
            return
        os.unlink(tmp)
    except FileExistsError:
        raise ConvertError(f"{path}: a file appeared there while converting (another conversion to the same "
                           "destination?); it was not overwritten (pass --force to replace it) and the new file "
                           "was removed") from None


#: the destination this process is committing (or committed) and the identity of its new file: an interrupt that
#: lands anywhere after the commit (even after the writer returned) is reported from what the destination holds
_COMMIT: list[tuple[Path, tuple[int, int]]] = []


def expect_commit(path: Path | None, ident: tuple[int, int] | None = None) -> None:
    """Record that ``path`` is about to receive the file ``ident`` (None: forget any earlier commit)."""
    _COMMIT.clear()
    if path is not None and ident is not None:
        _COMMIT.append((path, ident))


def written_here() -> Path | None:
    """The destination of :func:`expect_commit` if it now holds the new file, else None."""
    return next((p for p, ident in _COMMIT if holds(p, ident)), None)


def identity(p: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``p`` (not following a final symlink), or None if absent."""
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def holds(path: Path, ident: tuple[int, int] | None) -> bool:
    """True if ``path`` is now the file whose identity is ``ident`` (the new file was committed)."""
    return ident is not None and identity(path) == ident
