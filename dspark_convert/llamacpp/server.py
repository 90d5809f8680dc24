"""Run llama-server on 127.0.0.1 for a bounded time, ask it for greedy completions, and read back what it drafted.

:class:`LlamaServer` starts the binary (always with ``--no-repack``: on CPUs that advertise AMX the repacked q8_0
kernels fault), waits for ``/health``, and always kills the process (its whole process group) on exit. With
``verbose=True`` the server runs with ``-v`` and its log is kept (:meth:`LlamaServer.log_text`): llama.cpp b11434
logs every draft candidate there (the test tier reads the draft blocks from it: ``tests/llama/drafts_log.py``).

Example:
    >>> with LlamaServer(binary, target, draft=draft, spec_type="draft-dspark", n_max=7) as srv:  # doctest: +SKIP
    ...     c = srv.complete([1, 2, 3], n_predict=8)
    >>> c.tokens, c.draft_n                                                                        # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import ConvertError
from ..registry.spectype import SPEC_TYPES

HOST = "127.0.0.1"

#: the slot's INFO line that ends a request (logged after every draft line of it)
_DONE = "stop processing: n_tokens"
@dataclass
class Completion:
    """A greedy completion: generated token ids and the server's draft counters (``timings.draft_n`` /
    ``draft_n_accepted``; 0 without a draft)."""

    tokens: list[int]
    draft_n: int
    draft_n_accepted: int

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens (None when nothing was drafted)."""
        return self.draft_n_accepted / self.draft_n if self.draft_n else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


#: environment variable every started server carries (value: the starting process's pid), so that a test can find
#: any llama-server left running by scanning ``/proc/*/environ``
OWNER_ENV = "DSPARK_CONVERT_SERVER_OWNER"
#: the log line of a port another process holds (``tools/server/server-http.cpp``)
_BIND_FAILED = "couldn't bind HTTP server socket"
#: log lines that say why llama-server stopped, most specific first (``src/llama.cpp``, ``common/``, the server)
_REASONS = (re.compile(r"error loading model: (.+)"),
            re.compile(r"(?i)\b(?:error|failed|couldn't|cannot|can't|invalid|unknown|not supported|mismatch|"
                       r"incompatible|abort)\b.*"))
#: generic lines that only say that it stopped (the reason is on an earlier line)
_GENERIC = re.compile(r"(?i)exiting due to|failed to load model\s*(?:'[^']*')?\s*$|llama_model_load_from_file_impl: "
                      r"failed to load model|^main: error: failed to load")
_LIVE: weakref.WeakSet[LlamaServer] = weakref.WeakSet()


def server_reason(log: str) -> str | None:
    """llama-server's own reason for stopping, as one line, from its log: the loader's ``error loading model:``
    message when there is one, else the first line that names an error (not a generic "exiting" line), with the
    logger's prefix (``srv  load_model: ``, ``llama_model_load: ``) left on. None when no line says.

    Example:
        >>> server_reason("llama_model_load: error loading model: tensor 'fc.weight' has wrong shape\\n"
        ...               "common_init_from_params: failed to load model 'd.gguf'\\n")
        "tensor 'fc.weight' has wrong shape"
        >>> server_reason("main: loading model\\nsrv    operator(): couldn't bind HTTP server socket, port: 8080\\n")
        "srv    operator(): couldn't bind HTTP server socket, port: 8080"
    """
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    m = next((m for ln in lines if (m := _REASONS[0].search(ln))), None)
    if m:
        return m.group(1).strip()
    specific = [ln for ln in lines if _REASONS[1].search(ln) and not _GENERIC.search(ln)]
    if specific:
        return specific[0][:400]
    generic = [ln for ln in lines if _GENERIC.search(ln)]
    return generic[0][:400] if generic else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGKILL when the process that started it dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@atexit.register
def _stop_all() -> None:
    for srv in list(_LIVE):
        srv.stop()


class LlamaServer:
    """llama-server with ``target`` (and optionally ``draft`` under ``spec_type``), on 127.0.0.1, one slot.

    ``n_max`` is ``--spec-draft-n-max``; ``p_min`` is ``--spec-draft-p-min`` (default 0: every drafted position
    is kept, no early stop, so that drafts are comparable position by position; None: llama-server's default).
    ``metrics`` enables ``/metrics``; ``env`` adds environment variables (``LLAMA_TRACE=1`` makes llama-server log
    one ``accepted k/n draft tokens`` line per verification step). ``port`` None picks a free loopback port; a
    port taken between picking and binding is picked again (3 attempts).

    The process runs in its own process group, gets SIGKILL if this process dies (Linux), is stopped by
    :meth:`stop` (also at interpreter exit, on errors and on :class:`~dspark_convert.errors.Interrupted`: leave the
    ``with`` block). A server that exits or does not answer ``/health`` within ``timeout`` seconds raises
    ConvertError with llama-server's reason (:func:`server_reason`) and the end of its log; the log is a file in
    a temporary folder (``log_path``) removed by :meth:`close`. Readiness also requires ``/props`` to name
    ``target``: a server of someone else on the same port is never taken for this one.
    """

    def __init__(self, binary: Path, target: Path, *, draft: Path | None = None, spec_type: str | None = None,
                 n_max: int | None = None, verbose: bool = False, ctx: int = 512, threads: int = 1,
                 timeout: float = 120.0, extra: list[str] | None = None, p_min: float | None = 0.0,
                 metrics: bool = False, env: dict[str, str] | None = None, port: int | None = None,
                 request_timeout: float | None = None) -> None:
        if draft is not None and spec_type not in SPEC_TYPES:
            raise ConvertError(f"spec_type {spec_type!r}: expected one of {', '.join(SPEC_TYPES)}")
        self.binary, self.target, self.draft, self.spec_type = binary, target, draft, spec_type
        self.fixed_port = port
        self.port = port if port is not None else free_port()
        self.timeout = timeout
        self.request_timeout = timeout if request_timeout is None else request_timeout
        self.log_wait = 10.0
        self.env = {**os.environ, **(env or {}), OWNER_ENV: str(os.getpid())}
        self._tmp = tempfile.TemporaryDirectory(prefix="dspark-convert-llama-")
        self.log_path = Path(self._tmp.name) / "server.log"
        args = ["-m", str(target), "-c", str(ctx), "-np", "1", "-t", str(threads), "--no-repack", "--no-warmup"]
        if draft is not None:
            args += ["-md", str(draft), "--spec-type", str(spec_type)]
            if p_min is not None:
                args += ["--spec-draft-p-min", f"{p_min:g}"]
            if n_max is not None:
                args += ["--spec-draft-n-max", str(n_max)]
        if metrics:
            args.append("--metrics")
        if verbose:
            args.append("-v")
        self._args = args + list(extra or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    @property
    def args(self) -> list[str]:
        """The command line (with the current port)."""
        return [str(self.binary), *self._args, "--host", HOST, "--port", str(self.port)]

    # ------------------------------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until it answers (see the class docstring); on any failure it is stopped."""
        for attempt in range(3):
            try:
                self._start_once()
                return
            except _PortTaken:
                if self.fixed_port is not None or attempt == 2:
                    raise self.failure(f"llama-server could not listen on {HOST}:{self.port} loading "
                                       f"{self._what()}: {self.reason('port in use')}") from None
                self.port = free_port()
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self) -> None:
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=self.env,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        except OSError as e:
            raise ConvertError(f"{self.binary}: cannot run llama-server: {e.strerror or e}") from None
        finally:
            log.close()
        self.pid = self.proc.pid
        _LIVE.add(self)
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    if _BIND_FAILED in self.log_text():
                        raise _PortTaken
                    raise self.failure(f"llama-server exited with code {self.proc.returncode} loading "
                                       f"{self._what()}: {self.reason()}")
                if self._healthy() and self._ours():
                    return
                if time.monotonic() > deadline:
                    raise self.failure(f"llama-server did not become ready in {self.timeout:g} s loading "
                                       f"{self._what()}: {self.reason('no answer on /health')}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def reason(self, default: str = "no reason in its log") -> str:
        """llama-server's reason for failing (:func:`server_reason`), one line."""
        return server_reason(self.log_text()) or default

    def failure(self, message: str) -> ServerError:
        """A :class:`ServerError` with ``message`` and the last lines of the log."""
        return ServerError(message, self.log_lines())

    def log_lines(self, n: int = 12) -> list[str]:
        """The last ``n`` non-empty lines of the log."""
        return [ln for ln in self.log_text().splitlines() if ln.strip()][-n:]

    def stop(self) -> None:
        """Kill the server (SIGTERM to its process group, SIGKILL after 5 s) and reap it; idempotent. A second
        interrupt while waiting does not leave it running: the group is killed before the interrupt goes on."""
        p, self.proc = self.proc, None
        _LIVE.discard(self)
        if p is None:
            return
        try:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
            else:  # the leader is gone; kill whatever else of its group is left
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        """Stop the server and delete its log."""
        self.stop()
        self._tmp.cleanup()

    def _what(self) -> str:
        return f"{self.target.name}" + (f" with draft {self.draft.name} ({self.spec_type})" if self.draft else "")

    def _get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}{path}", timeout=timeout) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as e:
            return int(e.code), b""
        except (urllib.error.URLError, OSError):
            return 0, b""

    def _healthy(self) -> bool:
        return self._get("/health")[0] == 200

    def _ours(self) -> bool:
        """``/props`` names this server's target (a foreign server on the port does not); a server without
        ``/props`` is taken as ours."""
        status, body = self._get("/props")
        if status != 200:
            return status == 404
        try:
            path = json.loads(body).get("model_path")
        except (ValueError, AttributeError):
            return False
        return path is None or Path(str(path)).name == self.target.name

    # ------------------------------------------------------------------------------------------ use
    def log_text(self) -> str:
        """The server's log so far."""
        try:
            return self.log_path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n: int = 1500) -> str:
        return self.log_text()[-n:].strip().replace("\n", " | ")

    def get_json(self, path: str) -> Any:
        """``GET path`` as JSON (ConvertError naming the server when it fails)."""
        status, body = self._get(path, timeout=self.request_timeout)
        if status != 200:
            raise self.failure(f"llama-server GET {path} failed ({self._what()}): status {status}; {self.reason()}")
        return json.loads(body)

    def get_text(self, path: str) -> str:
        """``GET path`` as text (``/metrics``)."""
        status, body = self._get(path, timeout=self.request_timeout)
        if status != 200:
            raise self.failure(f"llama-server GET {path} failed ({self._what()}): status {status}; {self.reason()}")
        return body.decode("utf-8", errors="replace")

    def post(self, path: str, payload: dict[str, Any]) -> Any:
        """``POST path`` with a JSON body; the JSON answer. An error status, a dead server or no answer within
        ``request_timeout`` raises ConvertError with llama-server's reason."""
        req = urllib.request.Request(f"http://{HOST}:{self.port}{path}", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.request_timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", errors="replace")[:300]
            raise self.failure(f"llama-server {path} failed ({self._what()}): HTTP {e.code} {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            dead = self.proc is not None and self.proc.poll() is not None
            what = f"llama-server exited with code {self.proc.returncode}" if dead and self.proc else str(e)
            raise self.failure(f"llama-server {path} failed ({self._what()}): {what}; {self.reason()}") from None

    def complete(self, prompt: list[int], n_predict: int) -> Completion:
        """Greedy completion of token ids ``prompt`` (temperature 0, no prompt cache reuse, EOS ignored).

        llama.cpp logs from a worker thread, so the response can arrive before the log has the request's last
        lines: this returns only once the log shows the slot's ``stop processing`` line for this request (or
        after ``log_wait`` seconds), so that :meth:`log_text` then holds every draft block of the request."""
        done_before = self.log_text().count(_DONE)
        doc = self.post("/completion", {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "top_k": 1,
                                        "cache_prompt": False, "return_tokens": True, "ignore_eos": True})
        deadline = time.monotonic() + self.log_wait
        while self.log_text().count(_DONE) <= done_before and time.monotonic() < deadline:
            time.sleep(0.05)
        t = doc.get("timings", {})
        return Completion([int(x) for x in doc.get("tokens", [])], int(t.get("draft_n", 0) or 0),
                          int(t.get("draft_n_accepted", 0) or 0))


class ServerError(ConvertError):
    """llama-server failed: the message is one line with its reason; ``log_tail`` holds the last lines of its log
    (the log file itself is removed with the server's temporary folder)."""

    def __init__(self, message: str, log_tail: list[str]) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class _PortTaken(Exception):
    """llama-server could not bind its port (another process took it)."""
