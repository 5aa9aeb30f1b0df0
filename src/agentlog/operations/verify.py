"""The last verification result of each log (``state/verify.json``), for the dashboard's
Integrity page: written by ``agentlog verify`` and the dashboard's "verify now"."""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir

FILE = "verify.json"


def _path(root: str) -> str:
    return os.path.join(state_dir(root), FILE)


def load(root: str) -> dict[str, dict[str, Any]]:
    """``provider/session`` → its last result (status, frames, purged, breaks, gaps, verified_at µs)."""
    import orjson

    try:
        with open(_path(root), "rb") as fh:
            data = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def save(root: str, reports: Iterable[Any], at_us: int | None = None) -> None:
    """Record these :class:`~agentlog.log.verify.LogReport` results (others kept)."""
    import orjson

    at = at_us if at_us is not None else time.time_ns() // 1000
    data = load(root)
    for r in reports:
        data[f"{r.provider}/{r.session}"] = {
            "provider": r.provider, "session": r.session, "status": r.status, "frames": r.frames,
            "purged": r.purged, "bytes": r.bytes, "verified_at": at,
            "breaks": [{"line": b.line, "frame": b.frame, "reason": b.reason, "detail": b.detail} for b in r.breaks][:20],
            "gaps": len(r.gaps),
        }
    ensure_dir(state_dir(root))
    tmp = f"{_path(root)}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
    finally:
        os.close(fd)
    os.replace(tmp, _path(root))


__all__ = ["load", "save"]
