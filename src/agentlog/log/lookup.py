"""One event read straight from its log frame, by the logical offset the store keeps.

What a hit or an attempt's evidence needs of an event's content is cheaper to
read from the frame itself (a ``pread`` in the active file, a short
decompression in a sealed segment) than from the store's ``event`` column,
whose Parquet pages hold thousands of other events' JSON.
"""

from __future__ import annotations

from typing import Any


def event_at(root: str, log: str, offset: int | None) -> dict[str, Any] | None:
    """The event of the frame at logical ``offset`` of ``log`` (``provider/key``); None when
    the frame is purged, missing or not a frame."""
    import orjson

    from agentlog.log.frame import event_bytes, is_purged
    from agentlog.core.unsealing import Opener
    from agentlog.log.layout import log_path
    from agentlog.log.segments import SegmentError, line_at

    if offset is None:
        return None
    provider, _, key = log.partition("/")
    try:
        line = line_at(log_path(root, provider, key), int(offset))
    except (OSError, SegmentError):
        return None
    if not line.endswith(b"\n") or is_purged(line[:128]):
        return None
    try:
        ev = orjson.loads(Opener(root)(event_bytes(line)))  # (sealed content opened: docs/encryption.md)
    except orjson.JSONDecodeError:
        return None
    return ev if isinstance(ev, dict) else None


__all__ = ["event_at"]
