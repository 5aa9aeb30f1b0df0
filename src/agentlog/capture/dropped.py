"""Hook payloads lost to a full disk, counted where counting needs no space, and recorded as
a ``capture_gap`` by the next hook that can write.

A full disk makes a hook's append fail (ENOSPC/EDQUOT): the hook still exits 0, but its
event is gone. So that the loss is not silent, ``state/dropped-payloads`` is a 64-byte
record reserved while there is space (the first hook that writes makes it) and rewritten in
place when a payload is dropped (``pwrite`` of the same 64 bytes needs no new block):
``v1 <count> <first µs> <last µs>``. The next hook that appends successfully writes a
``capture_gap`` frame into its session's log saying how many payloads were dropped and
when, and resets the record. Standard library only (hook path).
"""

from __future__ import annotations

from agentlog.core import oslite as os
from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "dropped-payloads"
SIZE = 64
_EMPTY = b"v1 0 0 0".ljust(SIZE - 1) + b"\n"
FULL_DISK_ERRNOS = (28, 122)  # ENOSPC, EDQUOT


def path(root: str) -> str:
    return os.path.join(state_dir(root), NAME)


def _parse(data: bytes) -> tuple[int, int, int]:
    parts = data.split()
    try:
        if len(parts) == 4 and parts[0] == b"v1":
            return int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        pass
    return 0, 0, 0


def _record(count: int, first: int, last: int) -> bytes:
    return f"v1 {count} {first} {last}".encode().ljust(SIZE - 1) + b"\n"


def read(root: str) -> tuple[int, int, int]:
    """(payloads dropped, first µs, last µs); zeros when none or no record."""
    try:
        fd = os.open(path(root), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return 0, 0, 0
    try:
        return _parse(os.pread(fd, SIZE, 0))
    finally:
        os.close(fd)


def count_drop(root: str, at_us: int) -> bool:
    """Count one dropped payload in the reserved record (rewritten in place); False when
    there is no record to count in."""
    try:
        fd = os.open(path(root), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        count, first, _ = _parse(os.pread(fd, SIZE, 0))
        os.pwrite(fd, _record(count + 1, first or at_us, at_us), 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def take(root: str) -> tuple[int, int, int]:
    """After a successful append: reserve the record if it does not exist yet, and return
    (and reset) what it counted."""
    p = path(root)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:
            ensure_dir(state_dir(root))
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
            try:
                os.pwrite(fd, _EMPTY, 0)
            finally:
                os.close(fd)
        except OSError:
            pass
        return 0, 0, 0
    except OSError:
        return 0, 0, 0
    try:
        got = _parse(os.pread(fd, SIZE, 0))
        if got[0]:
            os.pwrite(fd, _EMPTY, 0)
        return got
    except OSError:
        return 0, 0, 0
    finally:
        os.close(fd)


def gap_event(provider: str, session_id: str | None, capture_mode: str, version: str, event_id: str, now_us: int,
              dropped: tuple[int, int, int]) -> dict[str, Any]:
    """The ``capture_gap`` event that records dropped payloads (keys in wire order: verify
    recognises a gap by its head)."""
    count, first, last = dropped
    ev: dict[str, Any] = {
        "event_id": event_id, "schema_version": 1, "kind": "capture_gap", "provider": provider,
        "provider_event_name": "agentlog.capture_gap", "observed_at": now_us, "captured_at": now_us,
        "capture_mode": capture_mode, "agentlog_version": version,
    }
    if session_id:
        ev["provider_session_id"] = session_id
    ev["attrs"] = {"capture_gap": True, "reason": "disk_full", "dropped_payloads": count, "first_dropped_at": first,
                   "last_dropped_at": last}
    return ev
