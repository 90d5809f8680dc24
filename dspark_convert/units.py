"""The one number format of every line the tool shows, errors included: sizes as ``486.3 KiB (497,984 bytes)``
(:func:`size_text`; under 1 KiB the grouped count alone), byte positions and counts grouped (``byte 1,048,576``).
Standard library only, so that the readers at the bottom of the package format their errors as the verbs do."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``'1.5 KiB'``; None -> ``'?'``."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def size_text(n: int) -> str:
    """``768`` -> ``'768 bytes'``; ``1536`` -> ``'1.5 KiB (1,536 bytes)'`` (the exact count once)."""
    return f"{n:,} bytes" if n < 1024 else f"{human_bytes(n)} ({n:,} bytes)"
