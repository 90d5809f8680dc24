"""The interrupt rule's two pieces: SIGINT and SIGTERM raise :class:`~dspark_convert.errors.Interrupted`, and
:func:`interrupted_line` says in one line what was interrupted.

Standard library and ``errors`` only, so :mod:`.entry` can install the handlers before anything heavy is imported,
and :mod:`.cli` uses the same pieces without importing the entry point.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from .errors import Interrupted


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` (main thread only; elsewhere this does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _raise)
        signal.signal(signal.SIGTERM, _raise)


def interrupted_line(e: Interrupted, doing: str = "starting", written: str | None = None) -> str:
    """The one line for an interrupt: the writer's own message, or what was being done."""
    if e.message:
        return e.message
    if written is not None:
        return f"{Interrupted.describe(e.signum)} after {written} was written in full"
    return f"{Interrupted.describe(e.signum)} while {doing}; nothing was written"
