"""``agentlog team publish``: this data root's new events and its derived tables, appended
to the team's shared Delta tables.

**Events** are appended in commits of ``batch_rows``, each carrying an *application
transaction* (the Delta protocol's ``txn`` action, ``agentlog/<publisher>/events`` at
version *n*): the publisher's count of commits, committed atomically with the rows. A run
publishes every event after this root's per-log watermarks (the highest frame seq
published from each session log), streamed in the store's own order (one read, no sort),
and moves the watermarks only when it has published them all. It marks itself *running*
(``state/team/<digest>.json``, 0600) before its first commit; a run that finds the mark (the
last one was killed midway), or a table whose commit count is not the state's (the state
was lost), leaves out the events the table already holds by their ids. So nothing is
published twice, nothing is skipped, and a half-written commit is never visible (its
Parquet files are written first and named by no commit until the log entry appears).

**Derived tables** (sessions, turns, tool calls, attempts, usage) and approved memories
change as sessions go on, so each publish replaces this publisher's rows in one commit
(``overwrite`` with the predicate ``publisher = '<id>'``): idempotent by construction.

Many machines publish at once: appends never conflict, each publisher's replacement
touches only its own files, and delta-rs commits with S3's conditional writes (no lock
service). A commit that loses a race is retried (bounded, with jitter).
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from agentlog.core.fileio import write_atomic
from agentlog.core.jsonio import dumps, loads
from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir
from agentlog.team import TeamError
from agentlog.team.location import Location, describe_error
from agentlog.team.tables import DERIVED, PARTITION_BY, TABLES, memories_table, utc_day, with_team_columns

BATCH_ROWS = 50_000
"""Events per commit (a first publish of a million events is twenty commits)."""
COMMIT_TRIES = 12
_ID = re.compile(r"[a-z0-9][a-z0-9-]{2,63}")

Progress = Callable[[str], None]


@dataclass
class PublishResult:
    url: str
    publisher: str
    host: str
    events: int = 0
    """Events appended by this run."""
    commits: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    """Rows each replaced table holds for this publisher now."""
    unchanged: list[str] = field(default_factory=list)
    """Tables left as they were: nothing they hold changed since the last publish."""
    recovered: str = ""
    """What the run found of an earlier one that stopped midway ('' when nothing)."""
    metadata_only: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "publisher": self.publisher, "host": self.host, "events": self.events,
                "commits": self.commits, "tables": self.tables, "unchanged": self.unchanged, "recovered": self.recovered,
                "metadata_only": self.metadata_only, "seconds": round(self.seconds, 3)}


def identity(root: str) -> tuple[str, str]:
    """(publisher id, host name) of this data root: an id made once and kept in
    ``state/team-id`` (0600), so a root keeps its rows when the machine is renamed."""
    path = os.path.join(state_dir(root), "team-id")
    try:
        with open(path, encoding="ascii") as f:
            pid = f.read().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        pid = ""
    if not _ID.fullmatch(pid):
        ensure_dir(state_dir(root))
        pid = "m-" + os.urandom(8).hex()
        write_atomic(path, (pid + "\n").encode("ascii"), FILE_MODE)
    return pid, socket.gethostname()


class _State:
    """``state/team/<url digest>.json``: the events published (version ``n`` and each log's
    highest seq), whether a run is midway, the derived tables' version."""

    def __init__(self, root: str, url: str) -> None:
        import hashlib

        self.path = os.path.join(state_dir(root), "team", hashlib.sha256(url.encode()).hexdigest()[:24] + ".json")
        try:
            with open(self.path, "rb") as f:
                doc = loads(f.read())
        except (FileNotFoundError, ValueError):
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        self.url = url
        self.n = int(doc.get("n", 0))
        self.logs: dict[str, int] = {str(k): int(v) for k, v in dict(doc.get("logs") or {}).items()}
        self.running = bool(doc.get("running")) or isinstance(doc.get("pending"), dict)
        """A run began streaming and has not finished (``pending``: an older agentlog's word)."""
        replaced = doc.get("replaced")
        self.replaced: dict[str, str] = {str(k): str(v) for k, v in replaced.items()} if isinstance(replaced, dict) else {}
        """Table → the fingerprint of what was last published into it."""

    def save(self) -> None:
        ensure_dir(os.path.dirname(self.path))
        write_atomic(self.path, dumps({"url": self.url, "n": self.n, "logs": self.logs, "running": self.running,
                                       "replaced": self.replaced}), FILE_MODE)


def publish(root: str, url: str, *, metadata_only: bool = False, progress: Progress | None = None,
            batch_rows: int = BATCH_ROWS) -> PublishResult:
    """Publish this data root to the team tables at ``url`` (see the module docstring)."""
    from agentlog.projection.current import bring_up_to_date

    started = time.perf_counter()
    loc = Location.parse(url)
    publisher, host = identity(root)
    res = PublishResult(loc.url, publisher, host, metadata_only=metadata_only)
    say = progress or (lambda _line: None)
    with _lock(root):
        bring_up_to_date(root)
        from agentlog.query.engine import Engine

        with Engine(root) as eng:
            events = _Events(root, loc, eng, res, metadata_only, say, batch_rows)
            events.run()
            state = events.state
            derived = _fingerprint(eng.manifest, metadata_only)
            for name in DERIVED:
                if state.replaced.get(name) == derived and _table(loc.table_uri(name), loc.storage_options()) is not None:
                    res.unchanged.append(name)
                    continue
                res.tables[name] = _replace(loc, name, _derived(eng, name, publisher, host), res, metadata_only)
                state.replaced[name] = derived
                state.save()
                say(f"{name}: {res.tables[name]:,} rows")
        memories = _memories(root, publisher, host)
        mfp = _fingerprint(memories[0].select(["memory_id", "version"]).to_pylist(), metadata_only)
        if state.replaced.get("memories") == mfp and _table(loc.table_uri("memories"), loc.storage_options()) is not None:
            res.unchanged.append("memories")
        else:
            res.tables["memories"] = _replace(loc, "memories", memories, res, metadata_only)
            state.replaced["memories"] = mfp
            state.save()
    res.seconds = time.perf_counter() - started
    return res


class _lock:
    """One publish at a time per data root (``state/team/publish.lock``)."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(state_dir(root), "team", "publish.lock")
        self.fd = -1

    def __enter__(self) -> None:
        ensure_dir(os.path.dirname(self.path))
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise TeamError("another `agentlog team publish` is running on this data root") from None

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _table(uri: str, opts: dict[str, str]) -> Any:
    """The Delta table at ``uri``, or None when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=opts)
    except TableNotFoundError:
        return None
    except OSError as e:
        raise TeamError(describe_error(e, uri)) from None


def _description(metadata_only: bool) -> str:
    return f"agentlog team table; content: {'metadata-only' if metadata_only else 'full'}"


def check_mode(dt: Any, uri: str, metadata_only: bool) -> None:
    """Refuse to write content into a metadata-only table (or the other way round): which
    one a team's tables are is set when each is created (its description)."""
    if dt is None:
        return
    got = str(dt.metadata().description or "")
    if got.startswith("agentlog team table; content: ") and got != _description(metadata_only):
        held = got.rpartition(": ")[2]
        raise TeamError(f"{uri} holds {held} rows: publish {'with' if held == 'metadata-only' else 'without'} "
                        "--metadata-only, or to another URL")


def _commit(write: Callable[[], None], uri: str) -> None:
    """Run one deltalake write, again when it lost a race with another publisher's commit."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    for attempt in range(COMMIT_TRIES):
        try:
            write()
            return
        except CommitFailedError as e:
            if attempt == COMMIT_TRIES - 1:
                raise TeamError(f"{uri}: the commit lost {COMMIT_TRIES} races with other publishers ({e})") from None
            time.sleep(min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random()))
        except (OSError, DeltaError) as e:
            raise TeamError(describe_error(e, uri)) from None


class _Events:
    def __init__(self, root: str, loc: Location, eng: Any, res: PublishResult, metadata_only: bool,
                 say: Progress, batch_rows: int) -> None:
        self.root, self.loc, self.eng, self.res, self.say = root, loc, eng, res, say
        self.metadata_only, self.batch_rows = metadata_only, batch_rows
        self.uri = loc.table_uri("events")
        self.opts = loc.storage_options()
        self.app = f"agentlog/{res.publisher}/events"
        self.state = _State(root, loc.url)

    def run(self) -> None:
        """Stream the new events in the store's own order (no sort: a whole store's JSON does not
        fit a sort's memory, and one read is the cost of a publish), ``batch_rows`` a commit."""
        recover = self._reconcile()
        st = self.state
        machines = _machines(self.root)
        marks = [{"p": k.partition("/")[0], "k": k.partition("/")[2], "s": v} for k, v in st.logs.items()]
        new = ("FROM _events e LEFT JOIN (SELECT unnest($1::STRUCT(p VARCHAR, k VARCHAR, s BIGINT)[], "
               "recursive := true)) w ON w.p = e.log_provider AND w.k = e.log_key WHERE (w.s IS NULL OR e.seq > w.s)")
        params: list[Any] = [marks]
        if recover:  # the last run stopped midway: exactly once by event id
            new += " AND e.event_id NOT IN (SELECT unnest($2::VARCHAR[]))"
            params.append(self._published_ids())
        # the watermarks once every event of this snapshot of the store is in the table
        ends = self.eng.arrow("SELECT log_provider, log_key, max(seq) AS seq FROM _events GROUP BY ALL")
        done = dict(st.logs)
        for p, k, s in zip(*(ends.column(c).to_pylist() for c in ("log_provider", "log_key", "seq"))):
            done[f"{p}/{k}"] = max(int(s), done.get(f"{p}/{k}", -1))
        st.running = True
        st.save()
        reader = self.eng.arrow_reader(f"SELECT e.* {new}", params, min(self.batch_rows, _READ_ROWS))
        # the next rows are read while a commit is written (both mostly outside the GIL), two batches ahead
        with _Prefetch(reader, 2) as batches:
            for rows in _day_cut(batches, self.batch_rows):
                self._append(rows, reader.schema, machines)
        st.logs, st.running = done, False
        st.save()

    def _published_ids(self) -> list[str]:
        """The ids of every event this publisher has in the table."""
        import pyarrow.dataset as pds  # type: ignore[import-untyped]

        dt = _table(self.uri, self.opts)
        if dt is None:
            return []
        data = dt.to_pyarrow_dataset().to_table(columns=["event_id"], filter=pds.field("publisher") == self.res.publisher)
        return [str(i) for i in data.column("event_id").to_pylist()]

    def _remote_version(self) -> int | None:
        dt = _table(self.uri, self.opts)
        check_mode(dt, self.uri, self.metadata_only)
        return None if dt is None else dt.transaction_version(self.app)

    def _reconcile(self) -> bool:
        """Make the local state agree with the table; True when this run must leave out the
        events the table already holds by their ids (a run stopped midway, or the state was
        lost or is behind the table)."""
        st = self.state
        remote = self._remote_version() or 0
        recover = False
        if st.running:
            recover = True
            self.res.recovered = (f"the last run stopped after batch {remote}; its published events are kept, "
                                  "the rest published now")
        if remote != st.n:
            if not st.running:
                st.logs = {}  # not this state's batches: trust only the table's event ids
                self.res.recovered = f"local state rebuilt from the table (batch {remote})"
            recover = True
            st.n = remote
        st.save()
        return recover

    def _append(self, batches: list[Any], schema: Any, machines: dict[str, tuple[str, str]]) -> None:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        table = pa.Table.from_batches(batches, schema)
        pub, host = self.res.publisher, self.res.host
        if machines:  # a vault admin's root: each log's own machine
            keys = [f"{p}/{k}" for p, k in zip(table.column("log_provider").to_pylist(),
                                              table.column("log_key").to_pylist())]
            machine: Any = [machines.get(k, (pub, host))[0] for k in keys]
            hosts: Any = [machines.get(k, (pub, host))[1] for k in keys]
        else:
            machine, hosts = pub, host
        rows = with_team_columns(table, TABLES["events"], machine, hosts, pub, self.metadata_only)
        st = self.state
        props = CommitProperties(app_transactions=[Transaction(app_id=self.app, version=st.n + 1)],
                                 custom_metadata={"agentlog.publisher": pub, "agentlog.rows": str(rows.num_rows)})
        _commit(lambda: write_deltalake(self.uri, rows, mode="append", partition_by=PARTITION_BY, schema_mode="merge",
                                        storage_options=self.opts, commit_properties=props, name="events",
                                        description=_description(self.metadata_only),
                                        writer_properties=writer_properties()), self.uri)
        st.n += 1
        st.save()
        self.res.events += rows.num_rows
        self.res.commits += 1
        self.say(f"events: {self.res.events:,} published")


_READ_ROWS = 10_000
"""Rows a read from the store hands over at a time."""


def _day_cut(batches: Iterator[Any], batch_rows: int, open_days: int = 2) -> Iterator[list[Any]]:
    """The stream's batches grouped into commits of whole days (the day of ``observed_at``, the
    table's partition), at least ``batch_rows`` rows each but the last, so each day's rows land
    in one file rather than in two commits' files (half the files a query opens). The store
    streams day after day, but its parallel scan hands over rows of neighbouring days out of
    order, so the ``open_days`` newest days seen are held back until a newer day shows up; the
    rows of days before those are committed once they reach ``batch_rows``. A day of more
    than twice ``batch_rows`` is cut there (memory)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    by_day: dict[int, list[Any]] = {}
    rows_of: dict[int, int] = {}
    for batch in batches:
        days = _days(batch).cast("int32")
        low, high = pc.min_max(days).values()
        parts = [(int(low.as_py()), batch)] if low == high else _split_by_day(batch, days)
        for day, part in parts:
            by_day.setdefault(day, []).append(part)
            rows_of[day] = rows_of.get(day, 0) + part.num_rows
        ready = sorted(by_day)[:-open_days] if len(by_day) > open_days else []
        if sum(rows_of[d] for d in ready) >= batch_rows:
            yield [p for d in ready for p in by_day.pop(d)]
            for d in ready:
                del rows_of[d]
        for day in [d for d, n in rows_of.items() if n >= 2 * batch_rows]:
            yield by_day.pop(day)
            del rows_of[day]
    if by_day:
        yield [p for d in sorted(by_day) for p in by_day.pop(d)]


_MAX_RUNS = 64
"""Runs of one day a batch is cut into by slices; more (days interleaved row by row) and it is
sorted by day once instead."""


def _split_by_day(batch: Any, days: Any) -> list[tuple[int, Any]]:
    """``batch``'s rows as (day, rows) parts, without copying them when each day's rows come in
    a few runs (as the store's scan hands them over: a batch crosses midnight once or twice).
    A filter per day would copy every row's JSON (~10 kB an event) into a growing buffer: that
    copy was most of a publish's time. Rows of a day keep their order."""
    import pyarrow.compute as pc

    runs = pc.run_end_encode(days)
    ends = runs.run_ends.to_pylist()
    if len(ends) > _MAX_RUNS:  # interleaved: one copy in day order, then slices of it
        order = pc.sort_indices(days)  # stable: a day's rows keep their order
        batch, days = batch.take(order), days.take(order)
        runs = pc.run_end_encode(days)
        ends = runs.run_ends.to_pylist()
    parts: list[tuple[int, Any]] = []
    start = 0
    for end, day in zip(ends, runs.values.to_pylist()):
        parts.append((int(day), batch.slice(start, end - start)))
        start = end
    return parts


def _days(batch: Any) -> Any:
    """The ``day`` partition of each of ``batch``'s events."""
    return utc_day(batch.column(batch.schema.get_field_index("observed_at")))


class _Prefetch:
    """A record-batch reader read ahead by a thread, at most ``ahead`` batches: iterate inside
    ``with``; leaving the block early stops the thread (an error in the read is raised here)."""

    def __init__(self, reader: Any, ahead: int) -> None:
        import queue
        import threading

        self._reader = reader
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="agentlog-publish-read", daemon=True)

    def _pump(self) -> None:
        item: Any = None
        while not self._stop.is_set() and item is not _END:
            try:
                item = self._reader.read_next_batch()
            except StopIteration:
                item = _END
            except BaseException as e:  # handed to the consumer, raised there
                self._offer(e)
                return
            self._offer(item)

    def _offer(self, item: Any) -> None:
        import queue

        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def __enter__(self) -> Iterator[Any]:
        self._thread.start()
        return self._items()

    def _items(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def __exit__(self, *exc: object) -> None:
        import queue

        self._stop.set()
        while self._thread.is_alive():  # unblock a pending put, then wait for the thread
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)


_END = object()


def writer_properties() -> Any:
    """Parquet as the local store writes it: zstd, and no dictionary tried on the columns whose
    values are all different (the event's JSON, its hash and id): a dictionary attempt there
    costs time and is thrown away."""
    from deltalake import ColumnProperties, WriterProperties

    plain = ColumnProperties(dictionary_enabled=False)
    return WriterProperties(compression="ZSTD", compression_level=1,
                            column_properties={c: plain for c in ("event", "attrs", "frame_hash", "event_id")})


def _fingerprint(what: Any, metadata_only: bool) -> str:
    """A digest of what a replaced table is made from (the projection's manifest, the
    memories' ids and versions) and of the publish mode."""
    import dataclasses
    import hashlib

    if dataclasses.is_dataclass(what) and not isinstance(what, type):
        what = dataclasses.asdict(what)
    return hashlib.sha256(dumps({"what": what, "metadata_only": metadata_only})).hexdigest()


def _machines(root: str) -> dict[str, tuple[str, str]]:
    """``provider/key`` → (machine, host) of the logs a vault pull brought into this root."""
    from agentlog.log.pulled import pulled_logs

    return {f"{p.provider}/{p.key}": (p.machine_id, p.host) for p in pulled_logs(root)}


_OWNER = {  # how a derived row finds the machine it was recorded on (a pulled root's sessions say)
    "sessions": ("SELECT v.*, v.machine AS _machine, v.host AS _host FROM sessions v", ()),
    "turns": ("SELECT v.*, s.machine AS _machine, s.host AS _host FROM turns v "
              "LEFT JOIN sessions s ON s.session_id = v.session_id", ()),
    "tool_calls": ("SELECT v.*, s.machine AS _machine, s.host AS _host FROM tool_calls v "
                   "LEFT JOIN sessions s ON s.session_id = v.session_id", ()),
    "attempts": ("SELECT v.*, s.machine AS _machine, s.host AS _host FROM attempts v "
                 "LEFT JOIN sessions s ON s.session_id = v.session_id", ()),
    "usage": ("SELECT v.*, e.machine AS _machine, e.host AS _host FROM usage v "
              "LEFT JOIN events e ON e.event_id = v.event_id", ()),
}


def _derived(eng: Any, name: str, publisher: str, host: str) -> Any:
    """The local view ``name`` with the machine each row was recorded on."""
    sql, _ = _OWNER[name]
    data = eng.arrow(sql)
    machine = [m or publisher for m in data.column("_machine").to_pylist()]
    hosts = [h if m else host for m, h in zip(data.column("_machine").to_pylist(), data.column("_host").to_pylist())]
    data = data.drop_columns(["_machine", "_host"])
    return data, machine, hosts


def _memories(root: str, publisher: str, host: str) -> Any:
    data = memories_table(root)
    return data, publisher, host


def _replace(loc: Location, name: str, got: Any, res: PublishResult, metadata_only: bool) -> int:
    """Replace this publisher's rows of table ``name`` with ``got`` in one commit."""
    from deltalake import CommitProperties, write_deltalake

    data, machine, hosts = got
    rows = with_team_columns(data, TABLES[name], machine, hosts, res.publisher, metadata_only)
    uri, opts = loc.table_uri(name), loc.storage_options()
    props = CommitProperties(custom_metadata={"agentlog.publisher": res.publisher, "agentlog.rows": str(rows.num_rows)})
    predicate = f"publisher = '{res.publisher}'"  # an id of [a-z0-9-] (identity()): nothing to escape
    dt = _table(uri, opts)
    check_mode(dt, uri, metadata_only)
    if dt is None:
        _commit(lambda: write_deltalake(uri, rows, mode="append", partition_by=PARTITION_BY, schema_mode="merge",
                                        storage_options=opts, commit_properties=props, name=name,
                                        description=_description(metadata_only)), uri)
    else:
        _commit(lambda: write_deltalake(uri, rows, mode="overwrite", predicate=predicate, partition_by=PARTITION_BY,
                                        schema_mode="merge", storage_options=opts, commit_properties=props), uri)
    res.commits += 1
    return int(rows.num_rows)
