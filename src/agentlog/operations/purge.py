"""``agentlog purge``: remove events' content from the logs *and* the store.

The logs part (selection, the purge record, rewriting frames in place) is
``log/purge.py``. This module runs it under the store's two writer locks
(``ingest.lock`` and ``compact.lock``, taken before anything is written), so
that no ingest reads a frame's content between the rewrite and the delete
and no compaction copies it, and then:

1. deletes the rows of every frame any purge record names (not only this
   purge's: a purge interrupted after rewriting the logs is finished here),
   found by their ``(log_provider, log_key, seq)``, with a Delta ``DELETE``
   (the files holding them are rewritten without them, a new version);
2. vacuums with no retention, so the Parquet files that held the content are
   deleted now, not after compaction's grace period. Nothing else in the
   store holds content: the Delta transaction log keeps min/max statistics
   only of id, time and position columns (``schema.STATS_COLUMNS``).

Readers that had an older table version open lose it (its files are gone):
they read again. Ingest later reads purged frames as such and adds no row,
so a rebuild agrees with the purged store (``status --verify``).

``retention_days`` (config, 0 = keep for ever) is applied by
``purge_retention``: a purge ``--before`` now minus that many days. The
daemon runs it with its background maintenance.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from agentlog.core import AgentlogError
from agentlog.core.locks import Busy
from agentlog.log.purge import LogPurge, LogsPurge, Selector, US_PER_DAY, purge_logs
from agentlog.store.ingest import COMPACT_LOCK_NAME, LOCK_NAME, acquire_lock
from agentlog.store.schema import COMPACT_ZSTD_LEVEL, events_path, read_events, writer_properties


class PurgeBusy(Busy):
    """An ingest, compaction, seal or other purge holds a lock purge needs."""


@dataclass
class PurgeResult:
    """What ``purge`` did (or, with ``dry_run``, would do)."""

    purge_id: str | None
    selector: dict[str, Any]
    dry_run: bool
    who: dict[str, Any]
    at: int
    logs: list[LogPurge] = field(default_factory=list)
    frames: int = 0
    bytes: int = 0
    pending: int = 0
    """Frames an earlier, interrupted purge had recorded, finished now."""
    skipped: int = 0
    """Logs not purged (broken, or changed under the purge): see their ``reason``."""
    store_rows_deleted: int = 0
    store_files_vacuumed: int = 0
    projection_dropped: bool = False
    """The projection (derived; it holds copies of prompts, objectives and outputs) was
    removed, to be rebuilt without the purged events by the next read."""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _ranges(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in sorted(set(seqs)):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def _sql_str(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def purge_store(root: str, purged: set[tuple[str, int]]) -> tuple[int, int]:
    """Delete the rows of the ``purged`` frames ``(log, seq)`` and vacuum the
    files that held them; the caller holds both store locks. Returns (rows
    deleted, files vacuumed)."""
    from deltalake import DeltaTable

    path = events_path(root)
    if not DeltaTable.is_deltatable(path):
        return 0, 0
    keys = read_events(root, columns=["log_provider", "log_key", "seq"])
    by_log: dict[tuple[str, str], list[int]] = {}
    for prov, key, seq in zip(*(keys.column(c).to_pylist() for c in ("log_provider", "log_key", "seq"))):
        if (f"{prov}/{key}", seq) in purged:
            by_log.setdefault((prov, key), []).append(seq)
    rows = 0
    table = DeltaTable(path)
    if by_log:
        terms = []
        for (prov, key), seqs in sorted(by_log.items()):
            spans = " OR ".join(f"seq = {a}" if a == b else f"(seq >= {a} AND seq <= {b})" for a, b in _ranges(seqs))
            terms.append(f"(log_provider = {_sql_str(prov)} AND log_key = {_sql_str(key)} AND ({spans}))")
        # a few hundred logs per DELETE keeps each predicate small
        for i in range(0, len(terms), 200):
            metrics = table.delete(" OR ".join(terms[i : i + 200]), writer_properties=writer_properties(COMPACT_ZSTD_LEVEL))
            rows += int(metrics.get("num_deleted_rows", 0))
            table = DeltaTable(path)
    vacuumed = table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    return rows, len(vacuumed)


def purge(
    root: str,
    selector: Selector,
    *,
    dry_run: bool = False,
    lock_timeout: float = 10.0,
    now_us: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> PurgeResult:
    """Purge the selected events from the logs and the store (see the module
    docstring and ``log/purge.py``). Raises PurgeBusy."""
    from agentlog.log.seal import SealBusy

    t0 = time.perf_counter()
    locks: list[int] = []
    try:
        if not dry_run:
            for name, what in ((COMPACT_LOCK_NAME, "a compaction"), (LOCK_NAME, "an ingest")):
                fd = acquire_lock(root, lock_timeout, name)
                if fd is None:
                    raise PurgeBusy(f"{what} is running; try again when it is done")
                locks.append(fd)
        try:
            done: LogsPurge = purge_logs(root, selector, dry_run=dry_run, lock_timeout=lock_timeout, now_us=now_us,
                                         progress=progress)
        except SealBusy as e:
            raise PurgeBusy("a seal or another purge is running; try again when it is done") from e
        out = PurgeResult(purge_id=done.purge_id, selector=done.selector, dry_run=dry_run, who=done.who, at=done.at,
                          logs=done.logs, frames=done.frames, bytes=done.bytes,
                          pending=sum(lg.pending for lg in done.logs if lg.status != "skipped"),
                          skipped=sum(lg.status == "skipped" for lg in done.logs))
        if not dry_run and done.purged_keys:
            from agentlog.search.index import forget

            forget(root, done.purged_keys)  # the index first: it needs the text the store still holds
            out.store_rows_deleted, out.store_files_vacuumed = purge_store(root, done.purged_keys)
            out.projection_dropped = drop_projection(root, lock_timeout=max(lock_timeout, 60.0))
    finally:
        for fd in reversed(locks):
            os.close(fd)
    out.seconds = round(time.perf_counter() - t0, 3)
    return out


def drop_projection(root: str, *, lock_timeout: float = 60.0) -> bool:
    """Remove the projection under its lock (the next read rebuilds it from the store, which no
    longer holds the purged events): its tables and caches hold copies of the events' text, so
    a purge that left them would leave the content on disk. True when there was one."""
    import shutil

    from agentlog.projection.persist import projection_dir
    from agentlog.projection.persist.refreshing import LOCK_NAME as PROJECTION_LOCK

    directory = projection_dir(root)
    if not os.path.exists(directory):
        return False
    fd = acquire_lock(root, lock_timeout, PROJECTION_LOCK)
    if fd is None:
        raise PurgeBusy(f"the projection is being refreshed for more than {lock_timeout:g} s; the logs and the store "
                        "are purged, but it still holds copies: run `agentlog project --full` when it is done")
    try:
        trash = f"{directory}.purged-{os.getpid()}-{time.time_ns()}"
        os.rename(directory, trash)
        shutil.rmtree(trash)
    finally:
        os.close(fd)
    return True


class NoSuchSession(AgentlogError):
    """``--session`` names no recorded session (exit 1)."""


def session_selector(root: str, ident: str) -> Selector:
    """A selector for one session named the way any listing prints it: our id (``ses_…``,
    whole or an unambiguous prefix), the provider's session id, or a log's ``provider/key``.
    Raises :class:`NoSuchSession` (with the reason) when it names none, or several."""
    from agentlog.log.layout import iter_logs, session_key

    text = ident.strip()
    keys = {(os.path.basename(os.path.dirname(p)), os.path.basename(p)[: -len(".jsonl")]) for p in iter_logs(root)}
    if "/" in text and tuple(text.split("/", 1)) in keys:
        return Selector(session=text)
    if any(key == session_key(text) for _, key in keys):
        return Selector(session=text)
    bare = text[4:] if text.startswith("ses_") else text
    if len(bare) >= 4 and all(ch in "0123456789abcdef-" for ch in bare):
        try:
            rows = _sessions_like(root, bare)
        except AgentlogError:
            rows = []
        if len(rows) == 1 and rows[0][0]:
            return Selector(session=str(rows[0][0]))
        if len(rows) > 1:
            raise NoSuchSession(f"{ident!r} matches several sessions: give more of its id")
    raise NoSuchSession(f"no recorded session is {ident!r} (give an id as `agentlog sessions` prints it, "
                        "the agent's own session id, or provider/key)")


def _sessions_like(root: str, bare: str) -> list[tuple[Any, ...]]:
    """The provider session ids of the sessions whose id starts with ``bare`` (hex digits and
    dashes only: checked by the caller, so it is safe inside the statement)."""
    from agentlog.operations.refresh import run_sql

    return list(run_sql(root, f"SELECT provider_session_id FROM sessions WHERE starts_with(session_id, '{bare}') "
                              "LIMIT 3", max_rows=3).rows)


def retention_selector(days: int, now_us: int | None = None) -> Selector:
    """The selector of the ``retention_days`` setting: events older than ``days``."""
    now = time.time_ns() // 1000 if now_us is None else now_us
    return Selector(before=now - days * US_PER_DAY, retention_days=days)


def purge_retention(root: str, *, dry_run: bool = False, lock_timeout: float = 10.0) -> PurgeResult | None:
    """Apply the ``retention_days`` setting (None when it is 0: keep for ever)."""
    from agentlog.core.config import load as load_config

    days = int(load_config(root).get("retention_days", 0))
    if days <= 0:
        return None
    return purge(root, retention_selector(days), dry_run=dry_run, lock_timeout=lock_timeout)


__all__ = ["PurgeBusy", "PurgeResult", "purge", "purge_retention", "purge_store", "retention_selector"]
