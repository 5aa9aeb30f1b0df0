"""Rebuilding the store from the logs, and checking the live store against a rebuild.

Everything under ``store/`` is derived from the logs: ``rebuild`` moves it
aside, forgets the consumed positions and ingests every log from the start;
``differential_verify`` ingests the same logs into a scratch data root and
compares the two row sets (engram's "differential verify"), so a store that
lost, duplicated or altered rows is caught without trusting it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agentlog.core.locks import Busy
from agentlog.core.paths import logs_dir, state_dir
from agentlog.store.ingest import COMPACT_LOCK_NAME, IngestReport, acquire_lock, ingest, reset_store
from agentlog.store.schema import read_events, store_dir

# What identifies a row and what it must hold: event, where it came from, its bytes' hash.
_KEY_COLUMNS = ["log_provider", "log_key", "seq", "event_id", "frame_hash"]


class RebuildBusy(Busy):
    """Another ingest holds the lock."""


def rebuild(root: str, *, lock_timeout: float = 30.0) -> IngestReport:
    """Drop the derived store and ingest every log again."""
    lock = acquire_lock(root, lock_timeout)
    if lock is None:
        raise RebuildBusy("another ingest is running; try again when it is done")
    compact_lock = acquire_lock(root, lock_timeout, COMPACT_LOCK_NAME)
    if compact_lock is None:
        os.close(lock)
        raise RebuildBusy("a compaction is running; try again when it is done")
    try:
        trash = reset_store(root)
    finally:
        os.close(compact_lock)
        os.close(lock)
    report = ingest(root, lock_timeout=lock_timeout)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    return report


@dataclass
class StoreComparison:
    """The live store against a fresh rebuild of the same logs."""

    ok: bool
    live_rows: int
    rebuilt_rows: int
    missing: int = 0
    """Rows a rebuild has and the live store does not (lost, or not ingested yet)."""
    extra: int = 0
    """Rows the live store has and a rebuild does not (duplicated or altered)."""
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _row_set(root: str) -> list[tuple[Any, ...]]:
    table = read_events(root, columns=_KEY_COLUMNS)
    cols = [table.column(c).to_pylist() for c in _KEY_COLUMNS]
    return list(zip(*cols))


def _differences(out: StoreComparison, problem: str, surplus: Counter[tuple[Any, ...]]) -> int:
    """How many rows ``surplus`` counts; the first ones (up to ten examples in all) noted."""
    for row in surplus:
        if len(out.examples) < 10:
            out.examples.append({"problem": problem, **dict(zip(_KEY_COLUMNS, row))})
    return sum(surplus.values())


def differential_verify(root: str) -> StoreComparison:
    """Ingest the same logs into a scratch root and compare the row sets.

    Run after a catch-up ingest, or rows appended since will show as missing.
    """
    live = _row_set(root)
    with tempfile.TemporaryDirectory(prefix="agentlog-verify-") as scratch:
        os.symlink(os.path.abspath(logs_dir(root)), os.path.join(scratch, "logs"))
        ingest(scratch)
        rebuilt = _row_set(scratch)
    live_count, rebuilt_count = Counter(live), Counter(rebuilt)
    out = StoreComparison(ok=True, live_rows=len(live), rebuilt_rows=len(rebuilt))
    # Counter subtraction keeps the positive differences, in the first counter's order
    out.missing = _differences(out, "missing", rebuilt_count - live_count)
    out.extra = _differences(out, "extra", live_count - rebuilt_count)
    out.ok = out.missing == 0 and out.extra == 0
    return out
