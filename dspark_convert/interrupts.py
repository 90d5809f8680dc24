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

#: the signals the handler took, in order: kept even where the exception it raised was swallowed on its way up
#: (third-party code catching ``BaseException``, or CPython 3.11 wrapping it in a RuntimeError in ``__set_name__``)
RECEIVED: list[int] = []


def _raise(signum: int, frame: FrameType | None) -> None:
    RECEIVED.append(signum)
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` (main thread only; elsewhere this does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _raise)
        signal.signal(signal.SIGTERM, _raise)


def settle_signals() -> Interrupted | None:
    """End of a command: from here on SIGINT and SIGTERM take their default action (the process ends by the
    signal: 130 / 143 in a shell), so a signal during the interpreter's shutdown is never lost behind a verdict's
    exit code. Returned, for the caller to report: the first signal the handler took during the command (even one
    whose exception was swallowed on its way up) or one it took but had not yet raised; one that arrives while the
    handlers change waits, blocked, and ends the process when they are restored.
    Main thread only; elsewhere this does nothing and returns None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    both = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, both)
    try:
        # signal.signal runs any handler still pending before it changes the disposition
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except Interrupted as e:  # taken before the block: reported by the caller; later ones stay blocked
        return e
    signal.pthread_sigmask(signal.SIG_UNBLOCK, both)  # a blocked one is delivered now: the default action
    return Interrupted(RECEIVED[0]) if RECEIVED else None


def interrupted_line(e: Interrupted, doing: str = "starting", written: str | None = None) -> str:
    """The one line for an interrupt: the writer's own message, or what was being done."""
    if e.message:
        return e.message
    if written is not None:
        return f"{Interrupted.describe(e.signum)} after {written} was written in full"
    return f"{Interrupted.describe(e.signum)} while {doing}; nothing was written"
