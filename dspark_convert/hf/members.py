"""Files of a checkpoint or target folder: where they may live and how much of them is read.

A checkpoint folder is somebody else's content. Every file read from it (``config.json``, the index and its
shards, tokenizer files, chat templates, ``README.md``, ``hf_quant_config.json``, ``mask_embedding.pt``) is a
*member* of the folder:

- its name, as the folder or an index names it, is relative and has no ``..`` component;
- it is a regular file (or a symlink to one): a FIFO or a device is refused before it is opened;
- where it is a symlink, the link lands inside the folder, or inside the ``blobs/`` folder of the Hugging Face
  cache repository whose snapshot holds the folder (the cache stores every snapshot file as a link
  ``snapshots/<rev>/<name> -> ../../blobs/<hash>``); a link to ``/etc/passwd`` or ``/proc/self/environ`` is
  refused;
- it is read up to a size limit, and text is strict UTF-8.

Containment is judged on the name and on where the link lands, never on the cache's own layout.

Example:
    >>> member_file(Path("fixtures/dflash-zlab"), "config.json").name
    'config.json'
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConvertError, clip
from ..safeio import open_regular, require_regular
from ..units import size_text

#: the largest text file read from a folder that is not JSON (a chat template, ``merges.txt``): real chat
#: templates are under 100 KB, a 256k-vocabulary ``merges.txt`` about 5 MB
MAX_TEXT_BYTES = 64 * 1024 * 1024


def _cache_blobs(folder: Path) -> Path | None:
    """``<repo>/blobs`` when ``folder`` is (inside) a snapshot ``<repo>/snapshots/<rev>/...`` of a Hugging Face
    cache, judged on the folder's own path (lexically, symlinks not followed)."""
    folder = Path(os.path.abspath(folder))
    for anc in (folder, *folder.parents):
        if anc.parent.name == "snapshots" and anc.parent.parent != anc.parent:
            return anc.parent.parent / "blobs"
    return None


def _within(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def bad_name(name: str) -> str | None:
    """Why ``name`` cannot be the relative name of a file of a folder (None: it can)."""
    if not name:
        return "an empty name"
    if "\0" in name:
        return "a name with a NUL character"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "a name with a '..' component"
    return None


def lands_inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` (a file named inside ``folder``), once symlinks are resolved, is inside ``folder`` or inside
    the ``blobs/`` folder of the Hugging Face cache repository whose snapshot holds ``folder``."""
    real = Path(os.path.realpath(path))
    if _within(real, Path(os.path.realpath(folder))):
        return True
    blobs = _cache_blobs(folder)
    return blobs is not None and _within(real, Path(os.path.realpath(blobs)))


def _link_text(path: Path) -> str:
    """Where the link ``path`` (or the first link among its folders inside the named folder) points, clipped."""
    try:
        return clip(os.readlink(path))
    except OSError:
        return clip(os.path.realpath(path))


def member_file(folder: Path, name: str, *, what: str = "file") -> Path:
    """``folder / name`` after checking that it is a member of ``folder`` (see the module docstring); a missing
    file passes (the caller decides whether it is required). Raises a one-line ConvertError otherwise."""
    why = bad_name(name)
    if why is not None:
        raise ConvertError(f"{folder}: {what} '{clip(name)}' is {why}; expected a file name inside the folder")
    path = Path(folder) / name
    require_regular(path)  # a FIFO or a device (also through a link) is named as such first
    if os.path.lexists(path) and not lands_inside(folder, path):
        raise ConvertError(f"{path}: is a symlink to {_link_text(path)}, outside {folder}; only files "
                           "inside the folder (or the Hugging Face cache's blobs/) are read")
    return path


def member_dir(folder: Path, name: str) -> Path:
    """``folder / name``, a subfolder of ``folder`` (a link to it lands inside ``folder`` or the cache's blobs)."""
    why = bad_name(name)
    path = Path(folder) / name
    if why is not None or not lands_inside(folder, path):
        raise ConvertError(f"{path}: is {why or 'a symlink to ' + _link_text(path)}, outside {folder}; "
                           "only files inside the folder are read")
    return path


def member(path: Path) -> Path:
    """:func:`member_file` for ``path`` as a member of its parent folder."""
    path = Path(path)
    return member_file(path.parent, path.name)


def read_member(path: Path, limit: int, *, what: str = "file") -> bytes:
    """The bytes of the folder file ``path`` (a member of its parent folder), at most ``limit`` of them (one line
    naming the file past that)."""
    member(path)
    try:
        with open_regular(path) as f:
            raw = f.read(limit + 1)
    except FileNotFoundError:
        raise ConvertError(f"{path}: file not found") from None
    except OSError as e:
        raise ConvertError(f"{path}: cannot read ({e})") from None
    if len(raw) > limit:
        raise ConvertError(f"{path}: larger than the limit of {size_text(limit)} for a {what}")
    return raw


def read_member_text(path: Path, limit: int = MAX_TEXT_BYTES, *, what: str = "text file") -> str:
    """:func:`read_member` decoded as strict UTF-8 (a file that is not UTF-8 text is one line)."""
    raw = read_member(path, limit, what=what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConvertError(f"{path}: not UTF-8 text (byte {e.start:,}: {raw[e.start:e.start + 1]!r}); expected a "
                           f"UTF-8 {what}") from None
