"""The one exception type of dspark-convert.

Every failure a user can cause (bad checkpoint, bad target, hostile GGUF file, unsafe output path) is raised
as :class:`ConvertError` with a single human-readable line naming the file, key or tensor, what was found and
what was expected. The CLI prints that line and exits with code 2.
"""

from __future__ import annotations


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
