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

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (bounded_line(args[0]),)
        super().__init__(*args)


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


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (its type name when empty), at most 200 characters."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def clip_value(value: object, limit: int = 120) -> str:
    """``repr(value)`` through :func:`clip`, for any value an input holds: an integer too long for ``repr``
    (Python refuses past 4300 digits) is shown by its digit count.

    Example:
        >>> clip_value(10**5000)
        '<an integer of 5001 digits>'
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 13000:
        return f"<an integer of {len(str(value)) if value.bit_length() < 14000 else _digits(value)} digits>"
    try:
        return clip(repr(value), limit)
    except ValueError:
        return f"<a {type(value).__name__} too large to show>"


def _digits(value: int) -> int:
    import math

    n = abs(value)
    d = int(n.bit_length() * math.log10(2))
    return d + 1 if n >= 10**d else d


#: the longest error line: the sources clip every value they quote (:func:`clip`); this is the net under them
MAX_LINE_CHARS = 2000


def bounded_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` on one line of at most about ``limit`` characters: a word (a run without spaces) longer than 120
    characters is clipped (:func:`clip`), then a line still too long keeps its start and its end (what was
    expected) around an elision mark.

    Example:
        >>> len(bounded_line("tensor '" + "x" * 10**6 + "' is bad"))
        162
    """
    if len(text) <= limit and "\n" not in text:
        return text
    words = [clip(w) if len(w) > 120 else w for w in text.replace("\n", " ").split(" ")]
    text = " ".join(words)
    if len(text) > limit:
        head, tail = text[: limit * 2 // 3], text[-limit // 4:]
        text = f"{head} ... ({len(text) - len(head) - len(tail)} characters elided) ... {tail}"
    return text
