"""The exception types of dspark-convert, and :func:`clip` for the values an error line names.

Every failure a user can cause (bad checkpoint, bad target, hostile GGUF file, unsafe output path) is raised
as :class:`ConvertError` with a single human-readable line naming the file, key or tensor, what was found and
what was expected. The CLI prints that line and exits with code 2.
"""

from __future__ import annotations

import os

PathLike = str | os.PathLike[str]


class ConvertError(Exception):
    """A user-facing error: one line, names the culprit, says what was expected.

    Example:
        >>> raise ConvertError("draft/config.json: key 'block_size' is 'x', expected an integer")
        Traceback (most recent call last):
        ...
        dspark_convert.errors.ConvertError: draft/config.json: key 'block_size' is 'x', expected an integer
    """

    exit_code = 2


class GGUFFormatError(ConvertError):
    """A GGUF file that cannot be read safely (truncated, wrong magic, absurd counts, ...)."""


class Interrupted(BaseException):
    """SIGINT (Ctrl-C) or SIGTERM, raised where the signal lands so that every cleanup runs.

    A ``BaseException`` like ``KeyboardInterrupt``: it is not an input error and must not be caught as one. The
    command line ends with one ``error:`` line (``message``, or what was being done) and exit code
    ``128 + signum`` (130 for SIGINT, 143 for SIGTERM). The writer raises it with the destination in
    ``message`` after removing its temporary file; a conversion interrupted from Python raises it too.
    """

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message or self.describe(signum))
        self.signum = int(signum)
        self.message = message

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @staticmethod
    def describe(signum: int) -> str:
        """``interrupted (SIGINT)`` or ``terminated (SIGTERM)``."""
        import signal

        name = signal.Signals(signum).name
        return f"interrupted ({name})" if name == "SIGINT" else f"terminated ({name})"


def clip(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters with the elided count (an error line names a value, never dumps it)."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"
