"""The full-text index: SQLite FTS5, derived from the store, kept up to date by its commits.

``state/search.sqlite3`` holds one row per indexed event in ``docs`` (its
id, log, seq and byte offset in the log, time and the fields queries filter
on — no text) and a *contentless* FTS5 table ``fts`` (``content=''``) keyed by
the same rowid: the inverted index only, never a second copy of the text,
which a hit reads back from its log frame (:mod:`.service`).

**Following the store.** The events table is a Delta table; every ingest is a
commit whose JSON names the Parquet files it added. :func:`catch_up` reads the
commits after the version it last applied, reads the added files' rows
(``dataChange`` false — a compaction's rewrite — adds nothing new) and
indexes the rows whose ``(log, seq)`` it has not, all of one run in one
SQLite transaction with the new version: a crash leaves the index at the
previous version, and the next catch-up does that work again (``INSERT OR
IGNORE`` on the log position). A store dropped and rebuilt (another table id)
or commits no longer on disk make it rebuild. The daemon catches up after
each ingest, and every reader (the dashboard, MCP, ``agentlog search``)
before answering.

**Purge.** :func:`forget` takes rows out of the index before the store deletes
them: FTS5's contentless ``delete`` needs the text that was indexed, which
the store still has then; the index is then optimised and vacuumed so the
terms are gone from the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

from ..paths import FILE_MODE, ensure_dir, state_dir
from .text import body

DB_FILE: Final = "search.sqlite3"
COLUMNS: Final = ("event_id", "kind", "provider", "provider_session_id", "tool_name", "project_name", "paths",
                  "observed_at", "log_provider", "log_key", "seq", "log_offset", "text", "event")
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
  rowid INTEGER PRIMARY KEY, event_id TEXT NOT NULL, log TEXT NOT NULL, seq INTEGER NOT NULL, offset INTEGER,
  observed_at INTEGER NOT NULL, kind TEXT, provider TEXT, session TEXT, tool TEXT, project TEXT, paths TEXT,
  UNIQUE (log, seq)
);
CREATE INDEX IF NOT EXISTS docs_event ON docs(event_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, content='', tokenize='unicode61 remove_diacritics 2');
"""


def db_path(root: str) -> str:
    return os.path.join(state_dir(root), DB_FILE)


def connect(root: str, path: str | None = None) -> sqlite3.Connection:
    p = path or db_path(root)
    ensure_dir(os.path.dirname(p))
    if not os.path.exists(p):
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    con = sqlite3.connect(p, timeout=30, isolation_level=None, check_same_thread=False)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed: purged terms do not linger
    con.executescript(_SCHEMA)
    return con


def _meta(con: sqlite3.Connection, key: str) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row else None


def _set(con: sqlite3.Connection, key: str, value: Any) -> None:
    con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, str(value)))


# -- the store's commits ---------------------------------------------------------------------------


def _delta(root: str) -> tuple[str, str] | None:
    from ..store.schema import events_path

    path = events_path(root)
    log = os.path.join(path, "_delta_log")
    return (path, log) if os.path.isdir(log) else None


def _latest_version(log: str) -> int:
    best = -1
    for name in os.listdir(log):
        if name.endswith(".json") and name[:20].isdigit():
            best = max(best, int(name[:20]))
    return best


def _commit(log: str, version: int) -> list[dict[str, Any]] | None:
    try:
        with open(os.path.join(log, f"{version:020d}.json"), "rb") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return None


def _table_id(log: str) -> str | None:
    actions = _commit(log, 0)
    for a in actions or ():
        if "metaData" in a:
            return str(a["metaData"].get("id"))
    return None


BATCH: Final = 1000
"""Rows read, prepared and inserted together."""
PARALLEL_MIN_ROWS: Final = 20_000
"""At least this many rows to index: the texts are prepared by worker processes."""


def _batches(table_path: str, files: Iterable[str]) -> Iterator[list[dict[str, Any]]]:
    """The files' rows, :data:`BATCH` at a time (memory stays bounded by a batch)."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    for rel in files:
        with pq.ParquetFile(os.path.join(table_path, unquote(rel))) as f:
            for batch in f.iter_batches(batch_size=BATCH, columns=list(COLUMNS)):
                yield batch.to_pylist()


def _prepare(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each row as the ``docs`` values and its indexed text (in a worker process for big runs)."""
    out = []
    for r in rows:
        observed = r["observed_at"]
        us = int(observed.timestamp() * 1_000_000) if hasattr(observed, "timestamp") else int(observed or 0)
        paths = r.get("paths") or []
        out.append((r["event_id"], f"{r['log_provider']}/{r['log_key']}", int(r["seq"]), r.get("log_offset"), us,
                    r.get("kind"), r.get("provider"), r.get("provider_session_id"), r.get("tool_name"),
                    r.get("project_name"), json.dumps(paths) if paths else None, _body_of(r)))
    return out


def _insert(con: sqlite3.Connection, prepared: list[tuple[Any, ...]]) -> int:
    n = 0
    for *doc, text in prepared:
        cur = con.execute("INSERT OR IGNORE INTO docs (event_id, log, seq, offset, observed_at, kind, provider, session, "
                          "tool, project, paths) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", doc)
        if cur.rowcount:
            con.execute("INSERT INTO fts (rowid, body) VALUES (?, ?)", (cur.lastrowid, text))
            n += 1
    return n


def _index_files(con: sqlite3.Connection, table_path: str, files: list[str], rows_hint: int) -> int:
    """Index the files' rows: prepared by two worker processes when there are many (a bounded
    window of batches in flight), inserted here in order."""
    workers = min(2, os.cpu_count() or 1)
    if rows_hint < PARALLEL_MIN_ROWS or workers < 2:
        return sum(_insert(con, _prepare(rows)) for rows in _batches(table_path, files))
    import multiprocessing
    from collections import deque
    from concurrent.futures import Future, ProcessPoolExecutor

    n = 0
    window: deque[Future[list[tuple[Any, ...]]]] = deque()
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        for rows in _batches(table_path, files):
            window.append(pool.submit(_prepare, rows))
            if len(window) >= 2 * workers:
                n += _insert(con, window.popleft().result())
        while window:
            n += _insert(con, window.popleft().result())
    return n


def _rows_in(actions: list[dict[str, Any]]) -> int:
    total = 0
    for a in actions:
        stats = (a.get("add") or {}).get("stats")
        if stats:
            try:
                total += int(json.loads(stats).get("numRecords", 0))
            except (ValueError, TypeError):
                pass
    return total


def _body_of(r: dict[str, Any]) -> str:
    import orjson

    content: Any = None
    event = r.get("event")
    if event:
        try:
            content = orjson.loads(event).get("content")
        except (orjson.JSONDecodeError, AttributeError):
            content = None
    return body(r.get("text"), content, r.get("paths"), r.get("tool_name"))


def catch_up(root: str, *, con: sqlite3.Connection | None = None) -> dict[str, Any]:
    """Index what the store committed since the index's version; what was done."""
    started = time.perf_counter()
    found = _delta(root)
    own = con is None
    con = con or connect(root)
    try:
        if found is None:
            return {"indexed": 0, "version": None, "seconds": 0.0}
        table_path, log = found
        latest = _latest_version(log)
        done = _meta(con, "version")
        table_id = _table_id(log)
        if done is not None and (_meta(con, "table_id") != table_id or int(done) > latest):
            return rebuild(root, con=con)
        start = -1 if done is None else int(done)
        if start >= latest:
            return {"indexed": 0, "version": latest, "seconds": round(time.perf_counter() - started, 3)}
        indexed = 0
        con.execute("BEGIN IMMEDIATE")
        try:
            for version in range(start + 1, latest + 1):
                actions = _commit(log, version)
                if actions is None:  # cleaned up: read the current snapshot instead
                    con.execute("ROLLBACK")
                    return rebuild(root, con=con)
                adds = [a for a in actions if "add" in a and a["add"].get("dataChange", True)]
                indexed += _index_files(con, table_path, [a["add"]["path"] for a in adds], _rows_in(adds))
            _set(con, "version", latest)
            _set(con, "table_id", table_id)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return {"indexed": indexed, "version": latest, "seconds": round(time.perf_counter() - started, 3)}
    finally:
        if own:
            con.close()


def rebuild(root: str, *, con: sqlite3.Connection | None = None) -> dict[str, Any]:
    """Index the store's current snapshot from scratch."""
    from deltalake import DeltaTable

    started = time.perf_counter()
    own = con is None
    con = con or connect(root)
    try:
        found = _delta(root)
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("DELETE FROM docs")
            con.execute("DELETE FROM meta")
            con.execute("INSERT INTO fts(fts) VALUES ('delete-all')")
            indexed = 0
            if found is not None:
                table_path, log = found
                dt = DeltaTable(table_path)
                import pyarrow.parquet as pq

                files = [u.removeprefix("file://") for u in dt.file_uris()]
                rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)  # footers only
                indexed = _index_files(con, table_path, files, rows)
                _set(con, "version", dt.version())
                _set(con, "table_id", _table_id(log))
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        con.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        return {"indexed": indexed, "version": _meta(con, "version"), "rebuilt": True,
                "seconds": round(time.perf_counter() - started, 3)}
    finally:
        if own:
            con.close()


def forget(root: str, keys: set[tuple[str, int]]) -> int:
    """Take the events at these ``(log, seq)`` out of the index (before the store deletes them),
    then optimise and vacuum so their terms are gone from the file. How many were indexed."""
    if not keys or not os.path.exists(db_path(root)):
        return 0
    con = connect(root)
    try:
        wanted = {}
        for log, seq in keys:
            row = con.execute("SELECT rowid FROM docs WHERE log = ? AND seq = ?", (log, seq)).fetchone()
            if row:
                wanted[(log, seq)] = int(row[0])
        if not wanted:
            return 0
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        from ..store.schema import events_dataset

        dataset = events_dataset(root)
        if dataset is None:
            return 0
        logs = sorted({log.split("/", 1)[1] for log, _ in wanted})
        table = dataset.to_table(columns=list(COLUMNS), filter=pc.field("log_key").isin(logs)
                                 & pc.field("seq").isin(sorted({s for _, s in wanted})))
        con.execute("BEGIN IMMEDIATE")
        for r in table.to_pylist():
            rowid = wanted.get((f"{r['log_provider']}/{r['log_key']}", int(r["seq"])))
            if rowid is not None:
                con.execute("INSERT INTO fts (fts, rowid, body) VALUES ('delete', ?, ?)", (rowid, _body_of(r)))
                con.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
        con.execute("COMMIT")
        con.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        con.execute("VACUUM")  # a new file without the freed pages
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # and no copy of the old ones left in the WAL
        return len(wanted)
    finally:
        con.close()


def check(root: str) -> dict[str, Any]:
    """The index compared with the store: events only one side has (``ok`` when none)."""
    from ..store.schema import read_events

    catch_up(root)
    con = connect(root)
    try:
        indexed = {(r[0], int(r[1])) for r in con.execute("SELECT log, seq FROM docs")}
        con.execute("INSERT INTO fts(fts) VALUES ('integrity-check')")  # raises when the index is damaged
        integrity = True
    except sqlite3.DatabaseError as e:
        return {"ok": False, "error": str(e)}
    finally:
        con.close()
    stored: set[tuple[str, int]] = set()
    if _delta(root) is not None:
        t = read_events(root, columns=["log_provider", "log_key", "seq"])
        stored = {(f"{p}/{k}", int(s)) for p, k, s in zip(*(t.column(c).to_pylist() for c in ("log_provider", "log_key",
                                                                                                "seq")))}
    return {"ok": indexed == stored and bool(integrity), "indexed": len(indexed), "stored": len(stored),
            "only_indexed": len(indexed - stored), "only_stored": len(stored - indexed)}


__all__ = ["DB_FILE", "catch_up", "check", "connect", "db_path", "forget", "rebuild"]
