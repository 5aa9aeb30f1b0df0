"""What the hooks have recorded, as doctor reports it: the newest session log per
provider, and the payload shapes the hook did not recognise
(``<state_dir>/unrecognised.jsonl``). Read-only. Moved out of doctor.py, which
re-exports these names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from agentlog.core import paths
from agentlog.core.kinds import CAPTURE_TEST_PREFIX

UNRECOGNISED_FILE = "unrecognised.jsonl"
_UNRECOGNISED_TAIL_BYTES = 8 * 1024 * 1024


def last_event_time(data_root: str | Path, provider: str) -> tuple[datetime | None, int]:
    """Newest modification time among ``<data_root>/logs/<provider>/**/*.jsonl`` and the file count.

    Logs of our own capture tests do not count: they prove the wiring, not that
    the agent is sending events.
    """
    base = os.path.join(paths.logs_dir(str(data_root)), provider)
    newest: float | None = None
    count = 0
    stack = [base]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith(".jsonl") and entry.is_file():
                    if entry.name.startswith(CAPTURE_TEST_PREFIX):
                        continue  # our own wiring checks are not the agent's events
                    count += 1
                    mtime = entry.stat().st_mtime
                    if newest is None or mtime > newest:
                        newest = mtime
            except OSError:
                continue
    if newest is None:
        return None, count
    return datetime.fromtimestamp(newest, tz=timezone.utc), count


@dataclass(frozen=True)
class UnrecognisedShape:
    """Events the hook did not recognise, grouped by provider and event name."""

    provider: str
    event: str
    count: int
    last_at: str | None
    keys: tuple[str, ...]
    """Payload keys seen on the most recent occurrence."""

    def to_dict(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "event": self.event,
            "count": self.count,
            "last_at": self.last_at,
            "keys": list(self.keys),
        }


def _at_key(value: str | None) -> tuple[int, float, str]:
    if value is None:
        return (0, 0.0, "")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return (1, parsed.timestamp(), value)
    except ValueError:
        return (0, 0.0, value)


def _at_text(value: object) -> str | None:
    """An ``at`` value as ISO 8601 text: strings as they are, epoch numbers (s, ms or µs) converted."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    if seconds > 1e14:
        seconds /= 1e6
    elif seconds > 1e11:
        seconds /= 1e3
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def unrecognised_shapes(data_root: str | Path | None = None) -> list[UnrecognisedShape]:
    """Summary of ``<state_dir>/unrecognised.jsonl`` (empty when the file is absent).

    Only the last 8 MiB are read; malformed lines are skipped.
    """
    root = paths.data_root() if data_root is None else str(data_root)
    path = os.path.join(paths.state_dir(root), UNRECOGNISED_FILE)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            start = max(0, size - _UNRECOGNISED_TAIL_BYTES)
            fh.seek(start)
            blob = fh.read()
    except OSError:
        return []
    lines = blob.split(b"\n")
    if start > 0 and lines:
        lines = lines[1:]
    groups: dict[tuple[str, str], tuple[int, str | None, tuple[str, ...]]] = {}
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        provider = record.get("provider")
        event = record.get("event")
        if not isinstance(provider, str) or not isinstance(event, str):
            continue
        at_s = _at_text(record.get("at"))
        raw_keys = record.get("keys")
        keys = tuple(k for k in raw_keys if isinstance(k, str)) if isinstance(raw_keys, list) else ()
        n = record.get("count", 1)  # `agentlog import` writes one line per record type and file, with a count
        n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
        count, last, last_keys = groups.get((provider, event), (0, None, ()))
        if last is None or _at_key(at_s) >= _at_key(last):
            last, last_keys = at_s, keys
        groups[(provider, event)] = (count + n, last, last_keys)
    return [
        UnrecognisedShape(provider=p, event=e, count=c, last_at=last, keys=k)
        for (p, e), (c, last, k) in sorted(groups.items())
    ]
