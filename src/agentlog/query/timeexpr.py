"""Time expressions: the instants AttemptQL (and the CLI) accept, resolved to µs.

A time expression is text; :func:`resolve` turns it into microseconds since
the Unix epoch (UTC) against a ``now`` the caller passes in — this module
never reads the clock, so a statement resolves the same way twice.

Accepted forms:

- RFC 3339 / ISO 8601 date-time: ``2026-11-30T15:00:00Z``,
  ``2026-11-30 15:00``, ``2026-11-30T15:00:00.123+02:00``; seconds and the
  fraction are optional; ``Z`` or ``±hh:mm`` (``±hhmm``) offset; no offset
  means UTC;
- a date ``YYYY-MM-DD``: that day's 00:00 UTC;
- an integer epoch: seconds, or milliseconds above 1e11, or microseconds
  above 1e14;
- ``now``, ``today`` (00:00 UTC of now's day), ``yesterday`` (the day before);
- a relative offset from now: a sign, a count and a unit —
  ``-30s``, ``-15m``, ``-2h``, ``-1d``, ``-1w``, ``+2h``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Final

from agentlog.core import UsageError
from agentlog.core.timefmt import MAX_US, MIN_US
from agentlog.core.timefmt import format_us as _format_us

__all__ = ["TimeError", "resolve", "format_us", "ACCEPTED_FORMS"]

US_PER_SECOND: Final = 1_000_000
US_PER_DAY: Final = 86_400 * US_PER_SECOND

_UTC: Final = timezone.utc
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=_UTC)
_ONE_US: Final = timedelta(microseconds=1)
# MIN_US, MAX_US (imported above): the earliest and latest instants that can be represented
# (0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z)

_UNIT_SECONDS: Final[dict[str, int]] = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}

ACCEPTED_FORMS: Final = (
    "accepted: RFC 3339 ('2026-11-30T15:00:00Z', '2026-11-30 15:00', "
    "'2026-11-30T15:00:00.123+02:00'), a date 'YYYY-MM-DD', integer epoch seconds "
    "(or ms/µs), now, today, yesterday, or relative -30s, -15m, -2h, -1d, -1w (or +…)"
)
"""The accepted forms, as quoted in error messages."""

_RELATIVE: Final = re.compile(r"([+-])([0-9]{1,15})([smhdw])", re.IGNORECASE)
_EPOCH_NUMBER: Final = re.compile(r"[0-9]{1,20}")
_DATE: Final = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATETIME: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:[.,]([0-9]{1,9}))?)?"
    r"(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2}))?"
)


class TimeError(UsageError, ValueError):
    """A time expression that is not one of the accepted forms, or out of range."""


def _shown(text: str) -> str:
    """The expression as quoted in an error: at most 40 characters, printable."""
    cut = text[:40]
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return "'" + safe + ("…'" if len(text) > 40 else "'")


def _checked(us: int, text: str) -> int:
    if not MIN_US <= us <= MAX_US:
        raise TimeError(f"time {_shown(text)} is out of range (years 1 to 9999)")
    return us


def _datetime_us(m: re.Match[str], text: str) -> int:
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    fraction = m.group(7) or ""
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    offset = timedelta(0)
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise TimeError(f"invalid UTC offset in {_shown(text)}; {ACCEPTED_FORMS}")
        offset = timedelta(hours=oh, minutes=om)
        if m.group(9) == "-":
            offset = -offset
    try:
        local = datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone(offset))
        return (local - _EPOCH) // _ONE_US
    except (ValueError, OverflowError) as e:
        raise TimeError(f"invalid date or time {_shown(text)} ({e}); {ACCEPTED_FORMS}") from None


def resolve(text: str, now_us: int) -> int:
    """Resolve a time expression to microseconds since the epoch (UTC).

    ``now_us`` is the reference instant for ``now``, ``today``, ``yesterday``
    and relative offsets. Raises :class:`TimeError` (naming the accepted
    forms) when the text is none of them or the instant is out of range.
    """
    s = text.strip()
    low = s.lower()
    if not s:
        raise TimeError(f"empty time expression; {ACCEPTED_FORMS}")
    if low == "now":
        return _checked(now_us, text)
    if low in ("today", "yesterday"):
        midnight = now_us - now_us % US_PER_DAY
        return _checked(midnight - (US_PER_DAY if low == "yesterday" else 0), text)
    m = _RELATIVE.fullmatch(s)
    if m:
        delta = int(m.group(2)) * _UNIT_SECONDS[m.group(3).lower()] * US_PER_SECOND
        return _checked(now_us - delta if m.group(1) == "-" else now_us + delta, text)
    if _EPOCH_NUMBER.fullmatch(s):
        n = int(s)
        if n > 10**14:
            us = n
        elif n > 10**11:
            us = n * 1_000
        else:
            us = n * US_PER_SECOND
        return _checked(us, text)
    m = _DATE.fullmatch(s)
    if m:
        try:
            day = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=_UTC)
        except ValueError as e:
            raise TimeError(f"invalid date {_shown(text)} ({e}); {ACCEPTED_FORMS}") from None
        return _checked((day - _EPOCH) // _ONE_US, text)
    m = _DATETIME.fullmatch(s)
    if m:
        return _checked(_datetime_us(m, text), text)
    raise TimeError(f"not a time: {_shown(text)}; {ACCEPTED_FORMS}")


def format_us(us: int) -> str:
    """Format µs since the epoch as RFC 3339 UTC with ``Z``.

    Microseconds (six digits) appear only when non-zero:
    ``2026-11-30T15:00:00Z``, ``2026-11-30T15:00:00.123000Z``.
    """
    if not MIN_US <= us <= MAX_US:
        raise TimeError(f"{us} µs is out of range (years 1 to 9999)")
    return _format_us(us)
