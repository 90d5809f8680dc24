"""Standard output for the commands' results: what a closed pipe or a full disk does to a command.

Imports only the standard library (``--help`` stays light). Rich consoles (:func:`dspark_convert.render.make_console`)
and the JSON documents write to :data:`STDOUT`, never to ``sys.stdout`` directly:

- a closed pipe (``dspark-convert check D --target T | head -1``, a pager quit early) ends the output quietly and
  does not change the exit code: the command exits with its own verdict;
- any other write failure (``>/dev/full``) is one ``error: cannot write to standard output: ...`` line, exit 2.
"""

from __future__ import annotations

import io
import os
import sys


class OutputError(Exception):
    """Standard output cannot be written (a full disk, ``>/dev/full``): the command ends with one line, exit 2."""


class GuardedStdout:
    """Standard output for the commands' results (Rich consoles and JSON write here, never to ``sys.stdout``
    directly).

    - A closed pipe (the reader is gone: ``| head -1``, a pager quit) ends the output quietly and does not change
      the exit code: the command still exits with its own verdict (``check``: 0 fits, 1 does not).
    - Any other write failure (``>/dev/full``) raises :class:`OutputError` (one ``error:`` line, exit 2).

    Either way the file descriptor is pointed at the null device, so the interpreter's last flush at exit cannot
    fail a second time. ``sys.stdout`` is looked up on every call (tests replace it); the stream that failed is
    the one that stays silent.
    """

    failed: object = None  # the sys.stdout that failed

    @property
    def closed(self) -> bool:
        return sys.stdout is GuardedStdout.failed

    def write(self, data: str) -> int:
        if not self.closed:
            try:
                sys.stdout.write(data)
            except OSError as e:
                self._failed(e)
        return len(data)

    def flush(self) -> None:
        if not self.closed:
            try:
                sys.stdout.flush()
            except OSError as e:
                self._failed(e)

    def isatty(self) -> bool:
        return sys.stdout.isatty()

    def fileno(self) -> int:
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"

    @staticmethod
    def _failed(e: OSError) -> None:
        GuardedStdout.failed = sys.stdout
        try:  # whatever is still buffered goes nowhere at exit instead of failing again
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
        if not isinstance(e, BrokenPipeError):
            raise OutputError(f"cannot write to standard output: {e.strerror or e}") from None


STDOUT = GuardedStdout()
