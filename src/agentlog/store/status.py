"""``agentlog status``: what is recorded, what is in the store, how far behind.

Counts come from metadata, not from reading data: the number of events from
the Delta table's file statistics, sizes from the file system, the ingest lag
from each log's size against the position ingest has consumed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from agentlog.log.layout import is_capture_test, iter_logs, split_log_path
from agentlog.log.segments import SegmentError, logical_size
from agentlog.core.fileio import dir_usage
from agentlog.core.jsonio import read_json
from agentlog.core.paths import logs_dir, state_dir
from agentlog.core.atrest import derived_state_dir
from agentlog.store.ingest import BREAKS_NAME, IngestReport, load_positions, log_id
from agentlog.store.ingest import catch_up as _catch_up
from agentlog.store.schema import events_path, store_dir


@dataclass
class StoreStatus:
    """A snapshot of the data root."""

    data_root: str
    sessions: int = 0
    """Session logs on disk (not counting ``agentlog install``'s capture tests)."""
    capture_tests: int = 0
    """Logs of ``agentlog install``'s capture tests (one synthetic event each)."""
    events: int = 0
    """Rows in the events table."""
    table_version: int | None = None
    last_ingest_at: str | None = None
    """When the latest ingest commit was made (ISO 8601, UTC)."""
    lag_logs: int = 0
    """Logs with frames not yet in the store (incomplete last lines count too)."""
    lag_bytes: int = 0
    breaks: list[dict[str, Any]] = field(default_factory=list)
    """Logs ingest stopped at, and why."""
    bytes_by_component: dict[str, int] = field(default_factory=dict)
    files_by_component: dict[str, int] = field(default_factory=dict)
    caught_up: IngestReport | None = None
    """What the catch-up ingest before answering did (None with --no-ingest)."""
    verify: dict[str, Any] | None = None
    """With --verify: the live store compared with a rebuild of the same logs."""
    hook_server: dict[str, Any] = field(default_factory=dict)
    """The daemon's capture server (``capture.server.status``): whether its socket answers
    now, and the counters and server time per request (p50/p95 µs) it last wrote."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def status(root: str, *, catch_up: bool = True) -> StoreStatus:
    """Describe the data root; first ingest whatever is pending unless ``catch_up`` is False.

    A catch-up that finds another ingest running does not wait for it: the
    answer then reflects what is already committed.
    """
    out = StoreStatus(data_root=root)
    if catch_up:
        out.caught_up = _catch_up(root)
    logs = iter_logs(root)
    out.capture_tests = sum(1 for log in logs if is_capture_test(log))
    out.sessions = len(logs) - out.capture_tests
    positions, version, _cached = load_positions(root)
    out.table_version = version
    path = events_path(root)
    if version is not None:
        from deltalake import DeltaTable

        table = DeltaTable(path)
        out.events = int(table.count())
        last = table.history(1)
        if last and isinstance(last[0].get("timestamp"), int):
            out.last_ingest_at = datetime.fromtimestamp(last[0]["timestamp"] / 1000, tz=timezone.utc).isoformat()
    for log in logs:
        provider, key = split_log_path(log)
        pos = positions.get(log_id(provider, key))
        consumed = pos.offset if pos is not None else 0
        try:
            size = logical_size(log)
        except (OSError, SegmentError):
            continue
        if size > consumed:
            out.lag_logs += 1
            out.lag_bytes += size - consumed
    breaks = read_json(os.path.join(derived_state_dir(root), BREAKS_NAME), [])
    out.breaks = list(breaks.values()) if isinstance(breaks, dict) else list(breaks)
    txlog = dir_usage(os.path.join(path, "_delta_log"))
    store_all = dir_usage(store_dir(root))
    components = {
        "logs": dir_usage(logs_dir(root)),
        "store data": (store_all[0] - txlog[0], store_all[1] - txlog[1]),
        "store transaction log": txlog,
        "state": dir_usage(state_dir(root)),
    }
    out.bytes_by_component = {k: v[0] for k, v in components.items()}
    out.files_by_component = {k: v[1] for k, v in components.items()}
    from agentlog.capture.server import status as hook_server_status

    out.hook_server = hook_server_status(root)
    return out
