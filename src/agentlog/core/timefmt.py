"""Stored times (µs since the epoch, UTC) as text.

- :func:`format_us`: the canonical form, RFC 3339 UTC with ``Z`` and the
  microseconds only when non-zero: ``2026-11-30T15:00:00Z``,
  ``2026-11-30T15:00:00.123000Z``. Exact integer arithmetic (no float
  seconds, which lose microseconds beyond 2106).
- :func:`display_us`: the same instant for people, to the second:
  ``2026-11-30 15:00:00``.
- :func:`format_datetime`: a ``datetime`` (naive: UTC) as :func:`format_us`
  writes it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US: Final = timedelta(microseconds=1)
MIN_US: Final = (datetime(1, 1, 1, tzinfo=timezone.utc) - _EPOCH) // _ONE_US
"""The first µs :func:`format_us` can write (0001-01-01T00:00:00Z)."""
MAX_US: Final = (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc) - _EPOCH) // _ONE_US
"""The last µs :func:`format_us` can write (9999-12-31T23:59:59.999999Z)."""


def _head(us: int) -> tuple[str, int]:
    if not MIN_US <= us <= MAX_US:
        raise ValueError(f"{us} µs is out of range (years 1 to 9999)")
    dt = _EPOCH + timedelta(microseconds=us)
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}",
            dt.microsecond)


def format_us(us: int) -> str:
    """µs since the epoch as RFC 3339 UTC text (see the module). ValueError
    outside years 1 to 9999."""
    head, micro = _head(us)
    return head + (f".{micro:06d}Z" if micro else "Z")


def datetime_us(dt: datetime) -> int:
    """µs since the epoch of ``dt`` (a naive one is taken as UTC)."""
    return ((dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)) - _EPOCH) // _ONE_US


def format_datetime(dt: datetime) -> str:
    """``dt`` as :func:`format_us` writes it (a naive one is taken as UTC)."""
    return format_us(datetime_us(dt))


def display_us(us: int) -> str:
    """µs since the epoch as ``YYYY-MM-DD HH:MM:SS`` (UTC, the fraction cut off)."""
    return _head(us)[0].replace("T", " ")


__all__ = ["MAX_US", "MIN_US", "datetime_us", "display_us", "format_datetime", "format_us"]
