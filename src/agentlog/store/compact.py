"""Compaction and vacuum of the events table.

Every ingest batch adds at least one Parquet file per date partition, so a
store fed by frequent small ingests (the daemon, reads catching up) collects
many small files, which every reader pays for. ``compact`` rewrites the small
files of each partition into few large ones (Delta ``OPTIMIZE``: a new commit;
readers of older versions are unaffected) and then vacuums: files that the
current version no longer references are deleted once they have been
unreferenced for ``grace_hours`` (a reader that opened an older version just
before still finds its files).

The transaction log itself is never cleaned: ingest keeps its consumed
positions in the commits' metadata (``store.ingest``), and the table is
created with a 100-year log retention for that reason.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from agentlog.core.locks import Busy
from agentlog.store.ingest import COMPACT_LOCK_NAME, acquire_lock
from agentlog.store.schema import COMPACT_ZSTD_LEVEL, events_path, writer_properties

TARGET_FILE_BYTES = 128 << 20


class CompactBusy(Busy):
    """Another compaction holds the lock (or, with no grace period, an ingest)."""


@dataclass
class CompactReport:
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    files_rewritten: int = 0
    files_added: int = 0
    files_vacuumed: int = 0
    dry_run: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _live_files(table: Any) -> tuple[int, int]:
    actions = table.get_add_actions(flatten=True)
    sizes = actions.column("size_bytes").to_pylist()
    return len(sizes), int(sum(sizes))


def compact(root: str, *, dry_run: bool = False, grace_hours: int = 1, lock_timeout: float = 30.0) -> CompactReport:
    """Compact small files and vacuum unreferenced ones older than ``grace_hours``.

    Files it creates are private (0600/0700), whatever the umask.
    """
    from agentlog.core.fileio import private_files

    with private_files():
        return _compact(root, dry_run=dry_run, grace_hours=grace_hours, lock_timeout=lock_timeout)


def _compact(root: str, *, dry_run: bool = False, grace_hours: int = 1, lock_timeout: float = 30.0) -> CompactReport:
    """The body of :func:`compact`."""
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    report = CompactReport(dry_run=dry_run)
    path = events_path(root)
    if not DeltaTable.is_deltatable(path):
        return report
    lock = acquire_lock(root, lock_timeout, COMPACT_LOCK_NAME)
    if lock is None:
        raise CompactBusy("another compaction is running; try again when it is done")
    # Without a grace period, vacuum could delete the files of an ingest
    # batch written but not yet committed: then ingest must wait.
    ingest_lock = acquire_lock(root, lock_timeout) if grace_hours <= 0 and not dry_run else None
    if grace_hours <= 0 and not dry_run and ingest_lock is None:
        os.close(lock)
        raise CompactBusy("an ingest is running and --grace-hours 0 must not run beside it; try again")
    try:
        table = DeltaTable(path)
        report.files_before, report.bytes_before = _live_files(table)
        if dry_run:
            report.files_vacuumed = len(table.vacuum(retention_hours=grace_hours, dry_run=True, enforce_retention_duration=False))
            report.files_after, report.bytes_after = report.files_before, report.bytes_before
            return report
        metrics = table.optimize.compact(
            target_size=TARGET_FILE_BYTES,
            writer_properties=writer_properties(COMPACT_ZSTD_LEVEL),
        )
        report.files_rewritten = int(metrics.get("numFilesRemoved", 0))
        report.files_added = int(metrics.get("numFilesAdded", 0))
        table = DeltaTable(path)
        report.files_vacuumed = len(table.vacuum(retention_hours=grace_hours, dry_run=False, enforce_retention_duration=False))
        report.files_after, report.bytes_after = _live_files(table)
        return report
    finally:
        if ingest_lock is not None:
            os.close(ingest_lock)
        os.close(lock)
        report.seconds = time.perf_counter() - t0
