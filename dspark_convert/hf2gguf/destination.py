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
import os
import re
import secrets
from pathlib import Path

from ..errors import ConvertError
from ..notes import note
from .naming import expand_output_template

#: temporary files this process is writing now (never removed as stale, even though their pid is ours)
_ACTIVE: set[Path] = set()


def check_destination(outfile: str | os.PathLike[str] | None, *, outtype: str, force: bool,
                      dry_run: bool = False) -> None:
    """Refuse an output name that cannot work, before any work: empty, ``-`` (stdout), a folder, a missing or
    read-only folder, or (without ``force``) an existing file. ``outfile`` None means the default name in the
    current folder. A dry run checks only the name's form. Templates (``{ftype}``) are checked as far as they
    can be before the outtype is resolved: with ``outtype="auto"`` the file name itself is checked after planning.
    """
    if outfile is None:
        if not dry_run:
            _check_folder(Path.cwd())
        return
    name = os.fspath(outfile)
    if name.strip() == "":
        raise ConvertError("-o '': the output file name is empty; give a file name, e.g. -o draft.gguf")
    if name == "-":
        raise ConvertError("-o -: a GGUF file is not streamed to stdout; give a file name, e.g. -o draft.gguf")
    path = Path(name)
    if name.endswith(("/", os.sep)) or path.is_dir():
        raise ConvertError(f"{path}: is a folder, expected a file name (e.g. {path / 'draft.gguf'})")
    if dry_run:
        return
    if "{" not in str(path.parent):
        _check_folder(path.parent if str(path.parent) else Path("."))
    if "{" in name and outtype == "auto":
        return  # the name depends on the resolved outtype: checked after planning
    expanded = Path(expand_output_template(name, outtype=outtype)) if "{" in name else path
    if expanded.is_dir():
        raise ConvertError(f"{expanded}: is a folder, expected a file name")
    if expanded.exists() and not force:
        raise ConvertError(f"{expanded}: already exists (pass --force to overwrite it)")


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
    """Partial files of ``path`` whose writer is gone: a process that no longer exists, or this process's own pid
    (a container restart reuses pids) for a file this process is not writing."""
    folder = path.parent if str(path.parent) else Path(".")
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _PARTIAL.match(entry.name)
            if m is None or m["name"] != path.name or not entry.is_file(follow_symlinks=False):
                continue
            pid, p = int(m["pid"]), folder / entry.name
            if (pid == os.getpid() and p not in _ACTIVE) or (pid != os.getpid() and not _alive(pid)):
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


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there: never call a file stale
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except OSError:
        return True  # cannot tell: keep the file
    return True
