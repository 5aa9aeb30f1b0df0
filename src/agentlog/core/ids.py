"""Identifiers minted on the hook path.

`uuid7()` avoids the `uuid` module on purpose: importing it costs several
milliseconds per hook process (it imports `platform`), and a UUIDv7 is only
48 bits of milliseconds, version and variant bits, and randomness.
"""

from __future__ import annotations

from agentlog.core import oslite as os
import time


def uuid7(unix_ms: int | None = None) -> str:
    """Return a new RFC 9562 UUIDv7 as lower-case hyphenated text."""
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = (rand >> 64) & 0x0FFF
    rand_b = rand & 0x3FFF_FFFF_FFFF_FFFF
    value = (
        ((ms & 0xFFFF_FFFF_FFFF) << 80)
        | (0x7 << 76)
        | (rand_a << 64)
        | (0b10 << 62)
        | rand_b
    )
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid7_time_ms(event_id: str) -> int:
    """The millisecond timestamp embedded in a UUIDv7."""
    return int(event_id.replace("-", "")[:12], 16)
