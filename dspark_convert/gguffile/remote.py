"""Remote GGUF headers: a Hub file or a URL, fetched by range requests and parsed by the local parser.

Hub files go through huggingface_hub: :func:`~huggingface_hub.hf_hub_url` (``HF_ENDPOINT``, read now),
:func:`~huggingface_hub.get_hf_file_metadata` (a ``HEAD`` that resolves the revision to a commit, the file size
and where the bytes live, raising the Hub's typed errors: private or missing repo, gated repo, unknown revision
or file) and :func:`~huggingface_hub.utils.build_hf_headers` (``HF_TOKEN`` or the stored login). The bytes are
then read from the location the Hub names (a CDN URL gets no token) or, for a file served by the Hub itself,
from the ``resolve`` URL of the resolved commit, so every window reads the same commit.

Offline mode (``HF_HUB_OFFLINE``): nothing is sent; a file in the local Hugging Face cache is read from there,
anything else is one error line. Plain URLs are not Hub traffic and are fetched regardless.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConvertError, GGUFFormatError, first_line
from ..units import size_text
from .httpsource import RangeReader, origin, split_userinfo
from .options import RemoteOptions
from .reader import GGUFFile, parse_gguf, read_gguf
from .records import HEADER_SIZE, RecordParser
from .refs import HubFile

T = TypeVar("T")


@dataclass(frozen=True)
class SourceInfo:
    """How a remote file was read: the ``source`` object of ``inspect``/``check``/``diff --json``.

    ``kind``: ``hub`` (Hub file over HTTP), ``url`` (any other URL) or ``hub-cache`` (offline mode, read from
    the local Hugging Face cache); ``url``: the Hub ``resolve`` URL or the URL given (never a signed CDN URL);
    ``revision``: as requested (None: the default branch); ``commit``: what it resolved to (Hub only);
    ``bytes_fetched``/``requests``: body bytes received and HTTP requests made for them (the metadata ``HEAD``
    not counted); ``range_requests``: whether the server honoured ``Range``; ``header_only``: tensor data was not
    fetched (false for a cached file, which is whole on disk, and for a file smaller than the first window); ``notes``: remarks, e.g. a server ignoring ``Range``.
    """

    kind: str
    url: str
    revision: str | None
    commit: str | None
    bytes_fetched: int
    requests: int
    range_requests: bool | None
    header_only: bool
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def open_url(url: str, options: RemoteOptions) -> GGUFFile:
    """The header of the GGUF file at ``url`` (range requests, no credentials)."""
    reader, source = url_reader(url, options)
    return _parse_remote(reader, reader.name, options, source)


def url_reader(url: str, options: RemoteOptions) -> tuple[RangeReader, Callable[[RangeReader], SourceInfo]]:
    """A :class:`RangeReader` of ``url`` (not started) and how to describe what it fetched."""
    from .. import __version__

    shown = split_userinfo(url)[0]  # the URL as messages and the report show it: never with user:password
    reader = RangeReader(url, shown, headers={"User-Agent": f"dspark-convert/{__version__}"}, options=options)
    return reader, lambda r: SourceInfo("url", shown, None, None, r.bytes_fetched, r.requests, r.range_supported,
                                        not r.whole, tuple(r.notes))


def open_hub_file(ref: HubFile, options: RemoteOptions) -> GGUFFile:
    """The header of a Hub file: metadata through huggingface_hub, then range requests (see module doc)."""
    from ..hf.hub import hub_cache_dir, hub_offline

    _validate(ref)
    if hub_offline():
        return _from_cache(ref, hub_cache_dir())
    reader, source = hub_reader(ref, options)
    return _parse_remote(reader, ref.display, options, source)


def hub_reader(ref: HubFile, options: RemoteOptions) -> tuple[RangeReader, Callable[[RangeReader], SourceInfo]]:
    """A :class:`RangeReader` of a Hub file (not started: the revision resolved to a commit, the bytes read
    where the Hub names them) and how to describe what it fetched."""
    import os

    from .. import __version__

    name = ref.display

    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    endpoint = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    kw = {"repo_type": ref.repo_type if ref.repo_type != "model" else None, "endpoint": endpoint}
    url = hf_hub_url(ref.repo_id, ref.filename, revision=ref.revision, **kw)
    lib, ver = "dspark-convert", __version__
    ends_at = options.ends_at()

    def head() -> Any:
        left = max(0.001, min(options.timeout, ends_at - time.monotonic()))
        return get_hf_file_metadata(url, timeout=left, library_name=lib, library_version=ver)

    meta = _with_retries(lambda: before_deadline(head, ends_at, name, options.deadline), options, ref, endpoint)
    headers = build_hf_headers(library_name=lib, library_version=ver)
    location = meta.location or url
    if origin(location) != origin(url):
        headers.pop("authorization", None)  # a CDN (signed URL): the token stays on the Hub
    elif location == url and meta.commit_hash:
        location = hf_hub_url(ref.repo_id, ref.filename, revision=meta.commit_hash, **kw)
    reader = RangeReader(location, name, headers=headers, options=options, ends_at=ends_at)
    return reader, lambda r: SourceInfo("hub", url, ref.revision, meta.commit_hash, r.bytes_fetched, r.requests,
                                        r.range_supported, not r.whole, tuple(r.notes))


def open_with_reader(ref: HubFile | str, options: RemoteOptions) -> tuple[GGUFFile, RangeReader,
                                                                          Callable[[RangeReader], SourceInfo]]:
    """The header of a remote file (a Hub file or a URL) and its reader, kept for reading tensor data with
    :meth:`RangeReader.read_range` from the same location (the same commit), under the same deadline; the third
    item describes what the reader fetched so far. Offline mode is refused (tensor data is fetched)."""
    if isinstance(ref, HubFile):
        from ..hf.hub import hub_offline

        _validate(ref)
        if hub_offline():
            raise ConvertError(f"{ref.display}: offline mode is on (HF_HUB_OFFLINE); download the file and give "
                               "the local copy")
        reader, source = hub_reader(ref, options)
        name = ref.display
    else:
        reader, source = url_reader(ref, options)
        name = reader.name
    f = _parse_remote(reader, name, options, source)
    return f, reader, source


def before_deadline(call: Callable[[], T], ends_at: float, name: str, deadline: float) -> T:
    """``call()``, or one ConvertError line once ``ends_at`` (``time.monotonic()``) has passed, whatever ``call``
    waits on: the call runs in a daemon thread (a client library's request, such as huggingface_hub's metadata
    ``HEAD``, cannot be bounded from outside otherwise); its exceptions are raised here."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name="dspark-convert-remote", daemon=True)
    t.start()
    t.join(max(0.0, ends_at - time.monotonic()))
    if t.is_alive():
        raise ConvertError(f"{name}: not read within the {deadline:g} s deadline (--deadline); the Hub's metadata "
                           "request had no answer")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _parse_remote(reader: RangeReader, name: str, options: RemoteOptions,
                  source: Callable[[RangeReader], SourceInfo]) -> GGUFFile:
    try:
        reader.start()
        assert reader.size is not None
        if reader.size < HEADER_SIZE:
            raise GGUFFormatError(f"{name}: header at byte 0: truncated: file has {size_text(reader.size)}, a GGUF "
                                  f"header needs {size_text(HEADER_SIZE)}")
        ps = RecordParser(reader.buf, reader.size, name, grow=reader.grow, limit=options.max_header_bytes)
        f = parse_gguf(ps, name)
    finally:
        reader.close()
    f.source = source(reader)
    return f


def _validate(ref: HubFile) -> None:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(ref.repo_id)
    except HFValidationError as e:
        raise ConvertError(f"{ref.display}: not a valid Hugging Face repo id: {first_line(e)}") from None


def _from_cache(ref: HubFile, cache: Any) -> GGUFFile:
    """Offline mode: the file from the local Hugging Face cache, or one line saying it is not there."""
    from huggingface_hub import try_to_load_from_cache

    from ..hf.hub import hub_command

    path = try_to_load_from_cache(ref.repo_id, ref.filename, cache_dir=str(cache), revision=ref.revision,
                                  repo_type=ref.repo_type)
    if not isinstance(path, str):
        command = f"{hub_command()} download {ref.repo_id} {ref.filename}" + (
            f" --revision {ref.revision}" if ref.revision else "")
        raise ConvertError(f"{ref.display}: offline mode is on (HF_HUB_OFFLINE) and the file is not in the local "
                           f"Hugging Face cache ({cache}); unset HF_HUB_OFFLINE or run `{command}`")
    f = read_gguf(path)
    parts = Path(path).parts  # .../snapshots/<commit>/<filename>
    commit = parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None
    f.source = SourceInfo("hub-cache", ref.display, ref.revision, commit, 0, 0, None, False,
                          ("offline mode: read from the local Hugging Face cache",))
    return f


def _with_retries(call: Callable[[], T], options: RemoteOptions, ref: HubFile, endpoint: str) -> T:
    """``call()`` (a Hub request), retried on 429/5xx and network errors; failures as one ConvertError line."""
    from huggingface_hub.errors import HfHubHTTPError

    from ..hf.hub import network_errors

    attempts = options.retries + 1
    for attempt in range(attempts):
        try:
            return call()
        except Exception as e:  # mapped below; anything unexpected is re-raised unchanged
            status = getattr(getattr(e, "response", None), "status_code", None)
            transient = (isinstance(e, HfHubHTTPError) and status is not None and (status >= 500 or status == 429)) \
                or (not isinstance(e, HfHubHTTPError) and isinstance(e, network_errors())
                    and not _is_offline_error(e))
            if isinstance(e, ConvertError):
                raise
            if not transient or attempt + 1 == attempts:
                raise _hub_error(e, ref, endpoint, attempts if transient else 1) from None
        time.sleep(options.backoff * 2**attempt)
    raise AssertionError("unreachable")


def _is_offline_error(e: BaseException) -> bool:
    from huggingface_hub.errors import OfflineModeIsEnabled

    return isinstance(e, OfflineModeIsEnabled)


def _hub_error(e: Exception, ref: HubFile, endpoint: str, attempts: int) -> Exception:
    what = _hub_problem(e, ref, endpoint, attempts)
    if what is None:
        return e
    if ref.plain:  # ORG/REPO/file.gguf was looked for on disk first: say so
        return ConvertError(f"{ref.given}: no such local file, and on the Hugging Face Hub ({ref.display}): {what}")
    return ConvertError(f"{ref.display}: {what}")


def _hub_problem(e: Exception, ref: HubFile, endpoint: str, attempts: int) -> str | None:
    """What went wrong with a Hub request, as the end of one line (None: not a Hub or network error)."""
    from huggingface_hub.errors import (
        DisabledRepoError,
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from ..hf.hub import hub_command, network_errors

    repo, login = ref.repo_id, f"`{hub_command()} auth login` or HF_TOKEN"
    if isinstance(e, GatedRepoError):
        return f"gated repository; accept its conditions on {endpoint}/{repo} and log in ({login})"
    if isinstance(e, RepositoryNotFoundError):
        return f"no repository {repo}, or it is private (log in with {login})"
    if isinstance(e, RevisionNotFoundError):
        return f"revision '{ref.revision}' not found in {repo}"
    if isinstance(e, EntryNotFoundError):
        at = f" at revision '{ref.revision}'" if ref.revision else ""
        return f"no file '{ref.filename}' in {repo}{at}"
    if isinstance(e, DisabledRepoError):
        return "the repository is disabled on the Hugging Face Hub"
    if _is_offline_error(e):
        return "offline mode is on (HF_HUB_OFFLINE); unset it to read Hub files"
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    if isinstance(e, HfHubHTTPError):
        status = getattr(getattr(e, "response", None), "status_code", "?")
        return f"Hugging Face Hub error (HTTP {status}){tries}: {first_line(e)}"
    if isinstance(e, network_errors()):
        return f"cannot reach the Hugging Face Hub ({endpoint}){tries}: {type(e).__name__}: {first_line(e)}"
    return None
