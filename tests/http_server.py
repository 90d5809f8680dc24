"""A local HTTP server for the remote-read tests and benchmark: files with or without Range support, truncated
bodies, error statuses, slow answers, redirects and the Hub's ``/{repo}/resolve/{revision}/{path}`` layout.

Every request is logged (method, path, headers), and the body bytes each GET sent, so tests can assert exactly
what was asked for and what crossed the wire. Runs in a daemon thread on 127.0.0.1; nothing leaves the machine.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_CHUNK = 1 << 16


@dataclass
class Route:
    """What one path serves. ``data`` is bytes or a file path (served with seeks: a sparse multi-GB file works)."""

    data: bytes | Path = b""
    ranges: bool = True  # honour Range (206); False: always 200 with the whole body
    status: int | None = None  # answer every request with this status instead
    headers: dict[str, str] = field(default_factory=dict)  # sent with every answer (e.g. X-Repo-Commit, X-Error-Code)
    delay: float = 0.0  # seconds before answering
    truncate_at: int | None = None  # close the connection after this many body bytes (Content-Length promises more)
    redirect: str | None = None  # 302 to this URL
    token: str | None = None  # required "Authorization: Bearer <token>", else 401 RepoNotFound (a private repo)
    drip: float = 0.0  # seconds between body bytes: the body is sent one byte at a time (a dripping server)

    @property
    def size(self) -> int:
        return len(self.data) if isinstance(self.data, bytes) else self.data.stat().st_size

    def read(self, start: int, stop: int) -> bytes:
        if isinstance(self.data, bytes):
            return self.data[start:stop]
        with open(self.data, "rb") as fh:
            fh.seek(start)
            return fh.read(stop - start)


@dataclass
class Logged:
    method: str
    path: str
    headers: dict[str, str]
    sent: int = 0  # body bytes written (GET)


class FileServer:
    """``with FileServer() as s: s.routes["/f.gguf"] = Route(data); urlopen(s.url + "/f.gguf")``."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_HEAD(self) -> None:
                server._answer(self, head=True)

            def do_GET(self) -> None:
                server._answer(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_hub_file(self, repo: str, filename: str, data: bytes | Path, *, revision: str = "main",
                     commit: str = "c0ffee" + "0" * 34, **kw: Any) -> Route:
        """Serve ``data`` at ``/{repo}/resolve/{revision}/{filename}`` and at the commit's URL, as the Hub does."""
        route = Route(data, headers={"X-Repo-Commit": commit, "ETag": f'"{commit[:8]}"'}, **kw)
        for rev in {revision, commit}:
            self.routes[f"/{repo}/resolve/{rev}/{filename}"] = route
        return route

    def gets(self, path: str | None = None) -> list[Logged]:
        """The GET requests (to ``path``, if given)."""
        return [e for e in self.log if e.method == "GET" and (path is None or e.path == path)]

    def sent(self) -> int:
        """Body bytes sent by all GETs."""
        return sum(e.sent for e in self.log)

    # ------------------------------------------------------------------------------------------ internals
    def _answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = h.path.split("?", 1)[0]
        entry = Logged("HEAD" if head else "GET", path, {k.lower(): v for k, v in h.headers.items()})
        with self._lock:
            self.log.append(entry)
        route = self.routes.get(path)
        if route is None:
            return self._status(h, 404, {"X-Error-Code": "EntryNotFound"} if "/resolve/" in path else {})
        if route.delay:
            time.sleep(route.delay)
        if route.redirect:
            return self._status(h, 302, {"Location": route.redirect, **route.headers})
        if route.token and h.headers.get("Authorization") != f"Bearer {route.token}":
            return self._status(h, 401, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
        if route.status:
            return self._status(h, route.status, route.headers)
        size = route.size
        start, stop, status = 0, size, 200
        m = _RANGE.match(h.headers.get("Range", "")) if route.ranges else None
        if m is not None:
            start = int(m.group(1))
            stop = min(int(m.group(2)) + 1 if m.group(2) else size, size)
            if start >= size:
                return self._status(h, 416, {"Content-Range": f"bytes */{size}"})
            status = 206
        h.send_response(status)
        for k, v in route.headers.items():
            h.send_header(k, v)
        h.send_header("Accept-Ranges", "bytes" if route.ranges else "none")
        h.send_header("Content-Length", str(stop - start))
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        h.end_headers()
        if head:
            return None
        limit = stop if route.truncate_at is None else min(stop, start + route.truncate_at)
        try:
            step = 1 if route.drip else _CHUNK
            for pos in range(start, limit, step):
                if route.drip:
                    time.sleep(route.drip)
                    h.wfile.flush()
                chunk = route.read(pos, min(pos + step, limit))
                entry.sent += len(chunk)  # counted before the client can have it: no race with the test's asserts
                h.wfile.write(chunk)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: expected for 200 bodies
            pass
        if route.truncate_at is not None:
            h.close_connection = True
            h.connection.shutdown(2)
        return None

    @staticmethod
    def _status(h: BaseHTTPRequestHandler, code: int, headers: dict[str, str]) -> None:
        body = f"status {code}\n".encode()
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)


def sparse_gguf(path: Path, header: bytes, size: int) -> Path:
    """``header`` followed by a hole up to ``size`` bytes (no disk blocks behind the hole)."""
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(size)
    os.utime(path)
    return path
