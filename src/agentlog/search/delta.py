"""The store's events table as the search indexes follow it: its Delta commits, their files'
rows in batches, and a row's event content (shared by :mod:`.index` and :mod:`.semantic`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, Final

COLUMNS: Final = ("event_id", "kind", "provider", "provider_session_id", "tool_name", "project_name", "paths",
                  "observed_at", "log_provider", "log_key", "seq", "log_offset", "text", "event")


def delta(root: str) -> tuple[str, str] | None:
    from agentlog.store.schema import events_path

    path = events_path(root)
    log = os.path.join(path, "_delta_log")
    return (path, log) if os.path.isdir(log) else None


def latest_version(log: str) -> int:
    best = -1
    for name in os.listdir(log):
        if name.endswith(".json") and name[:20].isdigit():
            best = max(best, int(name[:20]))
    return best


def commit(log: str, version: int) -> list[dict[str, Any]] | None:
    try:
        with open(os.path.join(log, f"{version:020d}.json"), "rb") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return None


def table_id(log: str) -> str | None:
    actions = commit(log, 0)
    for a in actions or ():
        if "metaData" in a:
            return str(a["metaData"].get("id"))
    return None


BATCH: Final = 1000
"""Rows read, prepared and indexed together."""


def batches(table_path: str, files: Iterable[str]) -> Iterator[list[dict[str, Any]]]:
    """The files' rows, :data:`BATCH` at a time (memory stays bounded by a batch)."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    for rel in files:
        with pq.ParquetFile(os.path.join(table_path, unquote(rel))) as f:
            for batch in f.iter_batches(batch_size=BATCH, columns=list(COLUMNS)):
                yield batch.to_pylist()


def content_of(r: dict[str, Any]) -> Any:
    """A store row's event content (its ``event`` JSON's; None when it has none or is not JSON)."""
    import orjson

    event = r.get("event")
    if not event:
        return None
    try:
        return orjson.loads(event).get("content")
    except (orjson.JSONDecodeError, AttributeError):
        return None


__all__ = ["BATCH", "COLUMNS", "batches", "commit", "content_of", "delta", "latest_version", "table_id"]
