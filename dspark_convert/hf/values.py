"""Typed config values: a value read from a Hugging Face ``config.json`` as an integer, a count or a number, or a
one-line refusal naming the file and the key. The converter (``kit.hparams.HParams``) and verify's torch sides read
configs through these, so both refuse a value of another type or range in the same words.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConvertError, clip_value


def as_u32(value: Any, key: str, where: str) -> int:
    """A config integer written as UINT32: refuse other types and out-of-range values here, by config key
    (the GGUF writer would fail later with a bare struct error).

    Example:
        >>> as_u32(7, "block_size", "config.json")
        7
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConvertError(f"{where}: key '{key}' is {value!r}, expected an integer")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ConvertError(f"{where}: key '{key}' is {value}, expected a non-negative integer below 2**32")
    return value


def as_positive(value: Any, key: str, where: str) -> int:
    """A config integer that is used as a divisor or a count of heads: a UINT32 of at least 1."""
    if as_u32(value, key, where) == 0:
        raise ConvertError(f"{where}: key '{key}' is 0, expected a positive integer")
    return int(value)


def as_float(value: Any, key: str, where: str) -> float:
    """A config number (int or float, not bool) as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{where}: key '{key}' is {clip_value(value)}, expected a number")
    try:
        return float(value)
    except OverflowError:  # an integer past the float range (10**400)
        raise ConvertError(f"{where}: key '{key}' is {clip_value(value)}, past the range of a float") from None


def as_fraction(value: Any, key: str, where: str) -> float:
    """A config number in (0, 1] (``partial_rotary_factor``): NaN, infinities, 0 and negatives are one line."""
    f = as_float(value, key, where)
    if not 0 < f <= 1:  # NaN fails every comparison
        raise ConvertError(f"{where}: key '{key}' is {clip_value(value)}, expected a number in (0, 1]")
    return f
