"""The first bytes of a file over HTTP: range requests in growing windows, for reading GGUF headers remotely.

:class:`RangeReader` is the growing byte source behind a remote :class:`~.records.RecordParser`: the parser
asks for bytes ``[0, end)`` and the reader fetches the next window (``Range: bytes=START-STOP``; windows double
from :attr:`RemoteOptions.first_window` up to :attr:`RemoteOptions.max_window`), so what is fetched is the
header plus at most one window, never the tensor data behind it. A server that ignores ``Range`` (``200`` with
the whole file) is read only as far as the parser asks, then the connection is closed; :attr:`notes` says so.

The client is the standard library's ``urllib``: huggingface_hub uses requests, httpx or httpx2 depending on
its version (all allowed by our ``huggingface_hub>=0.24``), while urllib is the same everywhere and lets us
stop reading a ``200`` body at any byte. Proxies come from the usual environment variables. Redirects are
followed; the ``Authorization`` header is dropped when a redirect leaves the origin (as huggingface_hub and
requests do), so a Hub token never reaches a CDN.

Every failure is one :class:`~dspark_convert.errors.ConvertError` line naming the file: HTTP errors,
timeouts (``timeout`` seconds per connect or read), and connection failures or truncated bodies after
``retries`` further attempts (with a doubling ``backoff``). ``429``/``5xx``, timeouts and broken connections
are retried; other statuses are not.
"""

from __future__ import annotations

import http.client
import io
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import ConvertError, clip
from ..units import size_text
from .options import RemoteOptions

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
_CHUNK = 1 << 20  # bytes read from a socket at a time


class _Transient(Exception):
    """A failure worth another attempt (timeout, broken connection, 429/5xx); its text ends the error line."""


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``http://user:pw@host/x`` -> (``http://host/x``, ``Basic base64(user:pw)``); a URL without userinfo is
    returned as is with None. The credentials go in an ``Authorization`` header (dropped on a redirect to another
    origin), never into the host name (it would be resolved by DNS), a message or a log."""
    import base64

    u = urlsplit(url)
    if "@" not in u.netloc:
        return url, None
    userinfo, _, hostport = u.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(u._replace(netloc=hostport)), f"Basic {token}"


def origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, with the scheme's default port."""
    u = urlsplit(url)
    return u.scheme.lower(), (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme, 0)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http(s) URLs only, dropping credentials when the redirect leaves the origin."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        if urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise urllib.error.HTTPError(req.full_url, code, f"redirect to a non-HTTP URL refused: {newurl[:100]}",
                                         headers, fp)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(newurl) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


class DeadlinePassed(TimeoutError):
    """The command's deadline passed while waiting for the server (raised from inside a socket read)."""


class _DeadlineRaw(io.RawIOBase):
    """A socket's byte stream whose every read waits at most ``min(timeout, time left before the deadline)``:
    a server that trickles its status line or headers one byte at a time, or answers ``100 Continue`` forever,
    cannot outlive the deadline (a per-read timeout alone never fires on such a server)."""

    def __init__(self, sock: socket.socket, ends_at: float, timeout: float) -> None:
        super().__init__()
        self._sock, self._ends_at, self._timeout = sock, ends_at, timeout
        self._io = sock.makefile("rb", buffering=0)  # holds the socket open after urllib drops the connection

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        left = self._ends_at - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("deadline passed")
        self._sock.settimeout(min(self._timeout, left))
        n = self._io.readinto(b)
        return 0 if n is None else n

    def close(self) -> None:
        self._io.close()
        super().close()


def _deadline_connection(base: type[http.client.HTTPConnection], ends_at: float,
                         timeout: float) -> type[http.client.HTTPConnection]:
    """``base`` (HTTP or HTTPS) whose responses read the socket through :class:`_DeadlineRaw`."""

    class Response(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            self.fp = io.BufferedReader(_DeadlineRaw(sock, ends_at, timeout))

    class Connection(base):  # type: ignore[valid-type, misc]
        response_class = Response

    return Connection


class _DeadlineHTTP(urllib.request.HTTPHandler):
    def __init__(self, ends_at: float, timeout: float) -> None:
        super().__init__()
        self._conn = _deadline_connection(http.client.HTTPConnection, ends_at, timeout)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._conn, req)


class _DeadlineHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, ends_at: float, timeout: float) -> None:
        super().__init__()
        self._conn = _deadline_connection(http.client.HTTPSConnection, ends_at, timeout)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._conn, req, context=getattr(self, "_context", None))


def deadline_opener(ends_at: float, timeout: float) -> urllib.request.OpenerDirector:
    """A urllib opener whose every socket read ends by ``ends_at`` (``time.monotonic()``), whatever the server
    sends: status line, headers, ``100 Continue`` answers and bodies alike; redirects as :class:`_Redirects`."""
    return urllib.request.build_opener(_Redirects, _DeadlineHTTP(ends_at, timeout), _DeadlineHTTPS(ends_at, timeout))


def _status_text(code: int, reason: str) -> str:
    lines = str(reason).strip().splitlines()  # urllib's redirect-loop reason spans lines; errors are one line
    return f"HTTP {code} {lines[0][:200] if lines else ''}".rstrip()


class RangeReader:
    """The first bytes of ``url``, fetched on demand; ``buf`` holds bytes ``[0, len(buf))`` of the file.

    Call :meth:`start` (first window; learns the file size), then :meth:`grow` as the parser needs more, then
    :meth:`close`. ``name`` is how messages name the file; ``headers`` go with every request (credentials
    only for the origin of ``url``).
    """

    def __init__(self, url: str, name: str, *, headers: dict[str, str] | None = None,
                 options: RemoteOptions | None = None, ends_at: float | None = None) -> None:
        url, auth = split_userinfo(url)
        if split_userinfo(name)[1] is not None:
            name = split_userinfo(name)[0]
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise ConvertError(f"{name}: only http:// and https:// locations can be read, not {url[:100]!r}")
        self.url, self.name = url, name
        self.headers = {**(headers or {}), "Accept-Encoding": "identity"}
        if auth is not None:
            self.headers["Authorization"] = auth
        self.options = options or RemoteOptions()
        self._deadline = self.options.ends_at() if ends_at is None else ends_at
        self.buf = bytearray()
        self.size: int | None = None
        self.bytes_fetched = 0
        self.requests = 0
        self.range_supported: bool | None = None
        self.etag: str | None = None
        self._window = max(1, min(self.options.first_window, self.options.max_header_bytes))
        self._stream: http.client.HTTPResponse | None = None  # an open 200 body (server ignoring Range)
        self._opener = deadline_opener(self._deadline, self.options.timeout)

    # ----------------------------------------------------------------------------------------- public
    def start(self) -> None:
        """Fetch the first window; afterwards :attr:`size` is the file size."""
        self._fetch(0, self._window)

    def grow(self, end: int) -> bytearray:
        """Make :attr:`buf` hold at least ``[0, end)``: fetch the next window (larger than needed, so the
        next few reads are served from memory). ``end`` never exceeds the file size or the header limit."""
        assert self.size is not None, "start() first"
        cap = min(self.size, max(self.options.max_header_bytes, end))
        while len(self.buf) < end:
            self._window = min(self._window * 2, self.options.max_window)
            stop = min(max(end, len(self.buf) + self._window), cap)
            self._fetch(len(self.buf), stop)
        return self.buf

    def read_range(self, start: int, stop: int, sink: Callable[[bytes], None]) -> None:
        """Pass bytes ``[start, stop)`` of the file to ``sink``, in order, in chunks of at most 1 MiB (nothing is
        kept in :attr:`buf`). A broken or timed-out connection resumes at the first byte not yet passed on
        (``retries`` further attempts without progress, then one error line); the deadline, the minimum rate
        and the file's size and ETag are checked as for the header. A server ignoring ``Range`` is refused."""
        pos, failures = start, 0
        while pos < stop:
            try:
                resp = self._request(pos, stop)
                try:
                    if resp.status != 206:
                        raise ConvertError(f"{self.name}: the server ignores Range requests ({_status_text(resp.status, resp.reason)}); "
                                           "download the file, then run the command on the local copy")
                    raw = resp.headers.get("Content-Range", "")
                    m = _CONTENT_RANGE.match(raw)
                    if m is None or m.group(3) == "*" or int(m.group(1)) != pos:
                        raise ConvertError(f"{self.name}: asked for bytes from {pos:,}, the server sent Content-Range "
                                           f"{raw!r}")
                    self._check_file(int(m.group(3)), resp)
                    t0, got = time.monotonic(), 0
                    while pos < stop:
                        chunk = self._recv(resp, min(_CHUNK, stop - pos))
                        if not chunk:
                            raise _Transient(f"connection closed at byte {pos:,} of [{start:,}, {stop:,})")
                        sink(chunk)
                        pos += len(chunk)
                        got += len(chunk)
                        failures = 0
                        self._received(len(chunk), got, t0, more=pos < stop)
                finally:
                    resp.close()
            except _Transient as e:
                failures += 1
                if failures > self.options.retries:
                    raise ConvertError(f"{self.name}: {e} ({failures} attempts without progress)") from None
                time.sleep(self.options.backoff * 2 ** (failures - 1))

    @property
    def whole(self) -> bool:
        """Every byte of the file was fetched (a file smaller than what the header reading asked for)."""
        return self.size is not None and self.bytes_fetched >= self.size

    @property
    def notes(self) -> list[str]:
        """Remarks on how the file was read (a server ignoring ``Range``)."""
        if self.range_supported is False and not self.whole:
            return [f"the server ignores Range requests (it answered 200 with the whole {size_text(self.size or 0)}): read "
                    f"the first {size_text(self.bytes_fetched)} of the body, then closed the connection"]
        if self.range_supported is False:
            return [f"the server ignores Range requests (it answered 200 with the whole {size_text(self.size or 0)}): the "
                    f"file is smaller than the first window, so all of it was read"]
        return []

    def close(self) -> None:
        """Close a ``200`` body still open (the rest of the file is never read)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    # -------------------------------------------------------------------------------------- internals
    def _fetch(self, start: int, stop: int) -> None:
        """Append bytes ``[start, stop)`` (``start == len(buf)``), retrying transient failures."""
        attempts = self.options.retries + 1
        for attempt in range(attempts):
            try:
                self._fetch_once(start, stop)
                return
            except _Transient as e:
                self.close()
                del self.buf[start:]  # a partial window is fetched again
                last = e
            self._check_deadline()
            if attempt + 1 < attempts:
                time.sleep(min(self.options.backoff * 2**attempt, max(0.0, self._deadline - time.monotonic())))
                self._check_deadline()
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        raise ConvertError(f"{self.name}: {last}{tries}")

    def _fetch_once(self, start: int, stop: int) -> None:
        if self._stream is None:
            resp = self._request(start, stop)
            if resp.status == 206:
                try:
                    self._read_range(resp, start, stop)
                finally:
                    resp.close()
                return
            if resp.status != 200:
                resp.close()
                raise ConvertError(f"{self.name}: unexpected {_status_text(resp.status, resp.reason)} for a "
                                   f"range request")
            self._start_stream(resp, start)
        assert self._stream is not None and self.size is not None
        self._read(self._stream, min(stop, self.size) - len(self.buf))  # a body shorter than the window ends early

    def _received(self, n: int, got: int, t0: float, *, more: bool) -> None:
        """Count ``n`` more bytes fetched; refused (one line) past the deadline, or when ``more`` is to come and the
        transfer (``got`` bytes since ``t0``) has run longer than the timeout below the minimum rate."""
        self.bytes_fetched += n
        self._check_deadline()
        elapsed = time.monotonic() - t0
        if more and elapsed > self.options.timeout and got / elapsed < self.options.min_rate:
            raise ConvertError(f"{self.name}: transfer too slow: {size_text(got)} in {elapsed:.0f} s, below the minimum of "
                               f"{self.options.min_rate:,g} bytes/s")

    def _check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            raise ConvertError(f"{self.name}: not read within the {self.options.deadline:g} s deadline (--deadline); "
                               f"{size_text(self.bytes_fetched)} fetched")

    def _request(self, start: int, stop: int) -> http.client.HTTPResponse:
        self._check_deadline()
        req = urllib.request.Request(self.url, headers={**self.headers, "Range": f"bytes={start}-{stop - 1}"})
        self.requests += 1
        try:
            return self._opener.open(req, timeout=max(0.001, min(self.options.timeout,
                                                                   self._deadline - time.monotonic())))
        except urllib.error.HTTPError as e:
            e.close()
            status = _status_text(e.code, str(e.reason))
            if e.code == 429 or e.code >= 500 or e.code == 408:
                raise _Transient(status) from None
            if e.code in (401, 403):
                raise ConvertError(f"{self.name}: {status}: access denied (the server wants credentials this "
                                   f"request does not carry)") from None
            if e.code == 416:
                raise ConvertError(f"{self.name}: {status} for bytes {start:,}-{stop - 1:,}") from None
            raise ConvertError(f"{self.name}: {status}") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLError):
                raise ConvertError(f"{self.name}: TLS error: {reason}") from None
            if isinstance(reason, TimeoutError):
                raise _Transient(f"timed out after {self.options.timeout:g} s") from None
            raise _Transient(f"cannot connect: {reason}") from None
        except TimeoutError:
            raise _Transient(f"timed out after {self.options.timeout:g} s") from None
        except (http.client.HTTPException, ConnectionError) as e:
            raise _Transient(f"connection failed: {type(e).__name__}: {e}") from None
        except ValueError as e:  # e.g. an unknown URL scheme
            raise ConvertError(f"{self.name}: {e}") from None

    def _read_range(self, resp: http.client.HTTPResponse, start: int, stop: int) -> None:
        """A 206 answer: check its Content-Range, then read what it holds of ``[start, stop)``."""
        raw = resp.headers.get("Content-Range", "")
        m = _CONTENT_RANGE.match(raw)
        if m is None or m.group(3) == "*":
            raise ConvertError(f"{self.name}: the server answered 206 with Content-Range {clip(repr(raw))}, expected "
                               f"'bytes {start}-{stop - 1}/SIZE'")
        first, last, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if first != start or last < first or last >= total:
            raise ConvertError(f"{self.name}: asked for bytes from {start:,}, the server sent {clip(repr(raw))}")
        self._check_file(total, resp)
        self.range_supported = True
        self._read(resp, min(last + 1, stop) - start)

    def _start_stream(self, resp: http.client.HTTPResponse, start: int) -> None:
        """A 200 answer (Range ignored): keep the body open and read it as far as needed."""
        length = resp.headers.get("Content-Length")
        if length is None or not length.strip().isdigit():
            resp.close()
            raise ConvertError(f"{self.name}: the server ignores Range requests and sends no Content-Length: "
                               f"the file size is unknown")
        self._check_file(int(length), resp)
        self.range_supported = False
        self._stream = resp
        skipped = 0
        while skipped < start:  # a retry after the body broke: the bytes held already come again
            chunk = self._recv(resp, min(_CHUNK, start - skipped))
            if not chunk:
                raise _Transient(f"connection closed after {skipped:,} of {start:,} bytes")
            skipped += len(chunk)
        self.bytes_fetched += skipped

    def _check_file(self, total: int, resp: http.client.HTTPResponse) -> None:
        etag = resp.headers.get("ETag")
        if self.size is None:
            self.size, self.etag = total, etag
        elif total != self.size or (etag and self.etag and etag != self.etag):
            raise ConvertError(f"{self.name}: the file changed on the server while its header was read "
                               f"(size {self.size} -> {total}, ETag {self.etag} -> {etag})")

    def _read(self, resp: http.client.HTTPResponse, n: int) -> None:
        """Append exactly ``n`` bytes of ``resp``'s body to :attr:`buf`."""
        got = 0
        t0 = time.monotonic()
        while got < n:
            chunk = self._recv(resp, min(_CHUNK, n - got))
            if not chunk:
                raise _Transient(f"connection closed after {got:,} of {n:,} bytes (truncated response)")
            self.buf += chunk
            got += len(chunk)
            self._received(len(chunk), got, t0, more=got < n)

    def _recv(self, resp: http.client.HTTPResponse, n: int) -> bytes:
        try:
            return resp.read1(n)  # what has arrived (at most n): a slow server cannot hold one call for long
        except TimeoutError:
            raise _Transient(f"timed out after {self.options.timeout:g} s while reading") from None
        except (http.client.HTTPException, ConnectionError) as e:
            raise _Transient(f"connection broke while reading: {type(e).__name__}") from None
