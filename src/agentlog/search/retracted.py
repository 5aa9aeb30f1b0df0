"""What the semantic index must not hold: the events of retracted sessions, and retracted events.

A retraction is an event of the store (kind ``retraction``, its ``attrs`` naming a target type and
id, ``agentlog retract``). The semantic index reads them as it follows the store: a row of a
retracted session or a retracted event is not embedded, and when a retraction arrives the
vectors already held for its target are removed (:func:`.semantic.catch_up`). The retracted ids
are kept in the index's manifest, so the rows that come later are checked without reading the
store again. Attempt retractions keep their events (the projection drops the attempt, not its
text): their vectors stay, as their lexical hits do.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Retracted:
    """Bare ids of the retracted sessions and events."""

    sessions: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.sessions or self.events)

    def add(self, row: dict[str, Any]) -> bool:
        """Take the target of a store row that is a retraction (False: not one, or nothing new)."""
        if row.get("kind") != "retraction":
            return False
        from agentlog.projection.ids import split_display

        try:
            attrs = (json.loads(row.get("event") or "{}") or {}).get("attrs") or {}
        except (ValueError, AttributeError):
            return False
        target, kind = attrs.get("target"), attrs.get("target_type")
        if not isinstance(target, str) or kind not in ("session", "event"):
            return False
        bare = split_display(target)[1]
        ids = self.sessions if kind == "session" else self.events
        if bare in ids:
            return False
        ids.add(bare)
        return True

    def holds(self, row: dict[str, Any]) -> bool:
        """Whether a store row is retracted content (its session or itself)."""
        if row.get("event_id") in self.events:
            return True
        return bool(self.sessions) and row.get("provider") is not None and _session(
            str(row["provider"]), str(row.get("provider_session_id") or "unknown")) in self.sessions

    def to_json(self) -> dict[str, list[str]]:
        return {"sessions": sorted(self.sessions), "events": sorted(self.events)}

    @classmethod
    def from_json(cls, value: Any) -> Retracted:
        value = value if isinstance(value, dict) else {}
        return cls({str(s) for s in value.get("sessions") or ()}, {str(e) for e in value.get("events") or ()})


@functools.lru_cache(maxsize=65_536)
def _session(provider: str, provider_session_id: str) -> str:
    from agentlog.projection.ids import derive

    return derive("session", provider, provider_session_id)


KEY_COLUMNS = ("event_id", "kind", "provider", "provider_session_id", "log_provider", "log_key", "seq")


def in_store(table_path: str, files: Iterable[str]) -> Retracted:
    """Every retraction among the files' rows (only the retractions' ``event`` column is read)."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    out = Retracted()
    for rel in files:
        table = pq.read_table(os.path.join(table_path, unquote(rel)), columns=["kind", "event"],
                              filters=[("kind", "=", "retraction")])
        for row in table.to_pylist():
            out.add(row)
    return out


def keys_in_store(table_path: str, files: Iterable[str], gone: Retracted) -> set[tuple[str, int]]:
    """The ``(log, seq)`` of the files' rows that ``gone`` retracts."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    keys: set[tuple[str, int]] = set()
    for rel in files:
        with pq.ParquetFile(os.path.join(table_path, unquote(rel))) as f:
            for batch in f.iter_batches(batch_size=65_536, columns=list(KEY_COLUMNS)):
                for r in batch.to_pylist():
                    if gone.holds(r):
                        keys.add((f"{r['log_provider']}/{r['log_key']}", int(r["seq"])))
    return keys


__all__ = ["Retracted", "in_store", "keys_in_store"]
