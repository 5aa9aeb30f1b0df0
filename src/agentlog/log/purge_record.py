"""Purge records: which frames a purge removed, read back from the record log.

The purge itself (selecting frames, writing the record, rewriting the logs) is
:mod:`agentlog.log.purge`; verify and seal read the records through this module,
so neither needs the purge (the order is frame < layout < segments < writer <
purge_record < verify < seal < purge).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from agentlog.log.frame import PREV_END, TRAILER, FrameError, event_bytes, is_purged, parse_any
from agentlog.log.layout import log_path, sealed_segments

PURGE_PROVIDER = "agentlog"
PURGE_KEY = "purges"
PURGE_LOG = f"{PURGE_PROVIDER}/{PURGE_KEY}"
MEMORY_LOG = "agentlog/memory"


def root_of(log_file: str) -> str:
    """The data root of ``<root>/logs/<provider>/<key>.jsonl``."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(log_file))))


def purge_log_path(root: str) -> str:
    """The log of purge records, ``<root>/logs/agentlog/purges.jsonl``."""
    return log_path(root, PURGE_PROVIDER, PURGE_KEY)


# -- reading a chain line by line ---------------------------------------------------


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(logical offset, complete line) of every complete line of a session's
    chain: sealed segments, then the active file (a torn tail is left out)."""
    from agentlog.log.segments import lines_from

    return lines_from(path, 0)


def _loads(data: bytes) -> Any:
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


_CONTENT_KEY = b',"content":'
_RAW_KEY = b',"raw":'


def _event_head(event: bytes) -> dict[str, Any]:
    """The event's fields before its bulky tail (``content``, ``raw``: last in
    canonical order), else the whole event; {} when it is not a JSON object."""
    for key in (_CONTENT_KEY, _RAW_KEY):
        cut = event.find(key)
        if cut > 0:
            head = _loads(event[:cut] + b"}")
            if isinstance(head, dict):
                return head
    ev = _loads(event)
    return ev if isinstance(ev, dict) else {}


# -- purge records --------------------------------------------------------------------


def iter_records(root: str) -> Iterator[dict[str, Any]]:
    """The ``attrs`` of every purge record, oldest first (purged or unreadable
    lines of the record log are skipped; ``verify`` reports them)."""
    path = purge_log_path(root)
    if not os.path.exists(path) and not sealed_segments(path):
        return
    for _off, line in _lines(path):
        try:
            _seq, _prev, _digest, purged = parse_any(line)
        except FrameError:
            continue
        if purged:
            continue
        ev = _loads(event_bytes(line))
        if isinstance(ev, dict) and ev.get("kind") == "purge" and isinstance(ev.get("attrs"), dict):
            yield ev["attrs"]


_records_cache: dict[str, tuple[Any, dict[tuple[str, int, str], str]]] = {}


def _records_stamp(root: str) -> Any:
    path = purge_log_path(root)
    try:
        st = os.stat(path)
        active: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        active = None
    return active, tuple(r.path for r in sealed_segments(path))


def recorded_frames(root: str) -> dict[tuple[str, int, str], str]:
    """Every frame a purge record names, ``(log, seq, hash) -> purge_id``
    (cached per process until the record log changes)."""
    stamp = _records_stamp(root)
    cached = _records_cache.get(root)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    out: dict[tuple[str, int, str], str] = {}
    for rec in iter_records(root):
        pid = str(rec.get("purge_id", ""))
        for item in rec.get("frames") or ():
            if isinstance(item, list) and len(item) == 3:
                out[(str(item[0]), int(item[1]), str(item[2]))] = pid
    _records_cache[root] = (stamp, out)
    return out


_purged_cache: dict[str, tuple[Any, dict[str, str]]] = {}


def purged_events(root: str) -> dict[str, str]:
    """``event_id -> purge_id`` of every purged frame whose stub still names its
    event (all but events too short for it), read from the logs the purge
    records name (cached per process until the record log changes). Lets a
    reference to an event say "purged" rather than "not found"."""
    from agentlog.log.frame import PURGED_MARK

    stamp = _records_stamp(root)
    cached = _purged_cache.get(root)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    logs = {str(item[0]) for rec in iter_records(root) for item in rec.get("frames") or ()
            if isinstance(item, list) and len(item) == 3}
    out: dict[str, str] = {}
    for name in sorted(logs):
        provider, _, key = name.partition("/")
        path = log_path(root, provider, key)
        if not os.path.exists(path) and not sealed_segments(path):
            continue
        for _off, line in _lines(path):
            if not is_purged(line[:128]):
                continue
            j = line.find(PURGED_MARK, PREV_END)
            stub = _loads(line[j + len(PURGED_MARK) : len(line) - TRAILER].rstrip(b" ")) if j > 0 else None
            if isinstance(stub, dict) and isinstance(stub.get("event_id"), str):
                out[stub["event_id"]] = str(stub.get("purge_id") or "")
    _purged_cache[root] = (stamp, out)
    return out


