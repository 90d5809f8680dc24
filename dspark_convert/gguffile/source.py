"""Where a GGUF file lives, and :func:`open_gguf_source` to open it from there (header only when remote).

A reference is one of:

* a **local path** (an existing path always wins);
* a **Hub file**: ``hf://ORG/REPO/path/file.gguf``, optionally ``@REVISION`` after the file name (or the Hub's own
  ``hf://ORG/REPO@REVISION/path``), ``hf://datasets/...`` and ``hf://spaces/...`` for other repo types; a Hub
  URL (``https://huggingface.co/ORG/REPO/resolve|blob/REV/path``, or the ``HF_ENDPOINT`` host); or the plain
  ``ORG/REPO/path/file.gguf[@REVISION]`` when that is unambiguous: no such local path, no local folder ``ORG``,
  a valid repo id and a name ending in ``.gguf``;
* any other **http(s) URL**.

References are parsed by :mod:`.refs`. Remote files are read header-only over HTTP range requests (:mod:`.remote`, :mod:`.httpsource`); this module
imports neither (nor huggingface_hub) until a reference is remote, so local use stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConvertError
from .options import RemoteOptions
from .reader import GGUFFile, plan_from_file, read_gguf
from .refs import HubFile, classify_ref

if TYPE_CHECKING:
    from ..plan import Plan
    from .remote import SourceInfo


def open_gguf_source(ref: str | os.PathLike[str], remote: RemoteOptions | None = None) -> GGUFFile:
    """Open a GGUF file where it lives: a local path (:func:`~.reader.read_gguf`), or a Hub file or URL, whose
    header (KVs and tensor infos) is fetched with HTTP range requests and parsed by the same code.

    A remote file has ``f.source`` (url, revision, bytes fetched, ...) and ``f.header_only``: its tensor data is
    never fetched. Failures are one-line :class:`~dspark_convert.errors.ConvertError`\\ s naming ``ref``.

    Example:
        >>> with open_gguf_source("hf://org/draft-GGUF/draft-Q8_0.gguf") as f:  # doctest: +SKIP
        ...     f.arch, f.source.bytes_fetched
        ('dflash', 3145728)
    """
    where = classify_ref(ref)
    if isinstance(where, Path):
        if where.is_dir() and (where / "config.json").is_file():  # a checkpoint folder: name the verb that reads it
            raise ConvertError(f"{where}: is a model folder, not a GGUF file; if it is a draft checkpoint, convert "
                               f"it with 'dspark-convert hf2gguf {where} --target-model-dir TARGET'; if it is a target "
                               f"model, check a draft against it with 'dspark-convert check DRAFT.gguf --target {where}'")
        return read_gguf(where)
    from .remote import open_hub_file, open_url

    options = remote or RemoteOptions()
    return open_hub_file(where, options) if isinstance(where, HubFile) else open_url(where, options)


def plan_from_source(ref: str | os.PathLike[str],
                     remote: RemoteOptions | None = None) -> tuple[Plan, SourceInfo | None]:
    """The :class:`~dspark_convert.plan.Plan` of the GGUF file at ``ref`` (local or remote, see
    :func:`open_gguf_source`) and its remote source (None for a local file)."""
    with open_gguf_source(ref, remote) as f:
        return plan_from_file(f), f.source
