"""Options of remote GGUF reads (no imports beyond the standard library: the CLI builds them at start-up)."""

from __future__ import annotations

import time
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class RemoteOptions:
    """How remote GGUF headers are fetched (``inspect``/``check``/``diff`` on ``hf://`` references and URLs).

    ``max_header_bytes``: a header larger than this is refused (CLI ``--max-header-mib``); ``timeout``: seconds
    per connect or read; ``retries``: further attempts after a timeout, a broken connection, 429 or 5xx;
    ``first_window``/``max_window``: the first range request and the largest one (windows double);
    ``backoff``: seconds before the first retry (doubling); ``deadline``: seconds for the whole read;
    ``min_rate``: the slowest transfer accepted, in bytes per second; ``started``: the ``time.monotonic()`` at
    which the deadline's clock started (the command line sets it when the command starts, so that ``deadline``
    bounds the whole command: every file, the Hub's metadata request included); None: each remote read starts its
    own clock.

    Example:
        >>> RemoteOptions(max_header_bytes=1 << 30).max_header_bytes
        1073741824
    """

    max_header_bytes: int = 512 * MiB
    timeout: float = 30.0
    retries: int = 2
    first_window: int = 1 * MiB
    max_window: int = 16 * MiB
    backoff: float = 0.5
    #: the whole remote read (every request, retries included) must end within this many seconds (``--deadline``)
    deadline: float = 300.0
    #: below this many bytes per second (averaged from ``timeout`` seconds into a response on), a response is
    #: abandoned: a server dripping bytes never keeps a command alive (``--timeout`` is per read)
    min_rate: float = 1024.0
    started: float | None = None

    def ends_at(self) -> float:
        """The ``time.monotonic()`` value by which a read that starts now must have ended."""
        return (time.monotonic() if self.started is None else self.started) + self.deadline
