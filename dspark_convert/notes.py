"""Notes: what a user should know about a conversion that is not an error (a fallback taken, a value dropped, a
stale temporary file removed).

Library code calls :func:`note`. Inside :func:`collecting` (``convert`` wraps a conversion in it) the notes are
collected and end up in ``ConvertResult.findings`` with level ``note`` (printed as labelled ``note:`` lines, and in
``--json`` findings); outside, a note is a ``logging`` warning of the ``dspark_convert`` logger.

Example:
    >>> with collecting() as notes:
    ...     note("tokenizer.ggml.pre", "pre-tokenizer", "recognised by its regex")
    >>> notes[0].message
    'recognised by its regex'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

log = logging.getLogger("dspark_convert")


@dataclass(frozen=True)
class Note:
    """One note: what it is about (a GGUF key, a file), a short rule id, and the sentence itself."""

    subject: str
    rule: str
    message: str


_collector: ContextVar[list[Note] | None] = ContextVar("dspark_convert_notes", default=None)


def note(subject: str, rule: str, message: str) -> None:
    """Record a note (collected inside :func:`collecting`, else logged as a warning)."""
    notes = _collector.get()
    if notes is None:
        log.warning("%s", message)
    else:
        notes.append(Note(subject, rule, message))


@contextmanager
def collecting() -> Iterator[list[Note]]:
    """Collect the notes made inside the block (nested blocks collect into their own list)."""
    notes: list[Note] = []
    token = _collector.set(notes)
    try:
        yield notes
    finally:
        _collector.reset(token)
