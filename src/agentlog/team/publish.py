"""``agentlog team publish``: this data root's new events and its derived tables, appended
to the team's shared Delta tables.

**Events** are appended in batches, each one Delta commit carrying an *application
transaction* (the Delta protocol's ``txn`` action, ``agentlog/<publisher>/events`` at
version *n*): the publisher's sequence number is committed atomically with the rows.
Which events a batch holds is fixed before it is written: every event after this
root's per-log watermark (the highest frame seq published from each session log), in
log and seq order. The batch's watermarks are saved as *pending* (a 0600 file under
``state/team/``) before the commit and made current after it; so after a crash the next
run knows whether the commit happened (the table's transaction version is at least the
pending one) and either keeps it or publishes the same rows again. Nothing is ever
published twice, and a half-written commit is never visible (its Parquet files are
written first and named by no commit until the log entry appears). A lost local state is
rebuilt from the table itself (this publisher's highest seq per log).

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
from typing import Any, Callable

from agentlog.core.fileio import write_atomic
from agentlog.core.jsonio import dumps, loads
from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir
from agentlog.team import TeamError
from agentlog.team.location import Location, describe_error
from agentlog.team.tables import DERIVED, PARTITION_BY, TABLES, memories_table, with_team_columns

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
    highest seq), a pending batch, the derived tables' version."""

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
        pending = doc.get("pending")
        self.pending: dict[str, Any] | None = pending if isinstance(pending, dict) else None
        replaced = doc.get("replaced")
        self.replaced: dict[str, str] = {str(k): str(v) for k, v in replaced.items()} if isinstance(replaced, dict) else {}
        """Table → the fingerprint of what was last published into it."""

    def save(self) -> None:
        ensure_dir(os.path.dirname(self.path))
        write_atomic(self.path, dumps({"url": self.url, "n": self.n, "logs": self.logs, "pending": self.pending,
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
        self._reconcile()
        machines = _machines(self.root)
        marks = [{"p": k.partition("/")[0], "k": k.partition("/")[2], "s": v} for k, v in self.state.logs.items()]
        new = ("FROM _events e LEFT JOIN (SELECT unnest($1::STRUCT(p VARCHAR, k VARCHAR, s BIGINT)[], "
               "recursive := true)) w ON w.p = e.log_provider AND w.k = e.log_key WHERE (w.s IS NULL OR e.seq > w.s)")
        order = " ORDER BY e.log_provider, e.log_key, e.seq"
        # Two passes, so that no sort holds the events' JSON (a whole store's does not fit in the
        # engine's memory): the new events' keys in log and seq order cut into batches, then each
        # batch's rows read by its key range (plain column ranges, which the Parquet scan prunes by).
        keys = self.eng.arrow(f"SELECT e.log_provider, e.log_key, e.seq {new}{order}", [marks])
        for start in range(0, keys.num_rows, self.batch_rows):
            end = min(start + self.batch_rows, keys.num_rows) - 1
            lo = [keys.column(c)[start].as_py() for c in ("log_provider", "log_key", "seq")]
            hi = [keys.column(c)[end].as_py() for c in ("log_provider", "log_key", "seq")]
            rows = self.eng.arrow(f"SELECT e.* {new} AND {_key_range(lo, hi)}{order}", [marks, *lo, *hi])
            if rows.num_rows:
                self._append(rows, machines)

    def _remote_version(self) -> int | None:
        dt = _table(self.uri, self.opts)
        check_mode(dt, self.uri, self.metadata_only)
        return None if dt is None else dt.transaction_version(self.app)

    def _reconcile(self) -> None:
        """Make the local state agree with the table: keep a pending batch the table holds,
        drop one it does not, rebuild the watermarks when the table is ahead of them."""
        st = self.state
        remote = self._remote_version() or 0
        if st.pending is not None:
            if remote >= int(st.pending["n"]):
                st.n, st.logs = int(st.pending["n"]), {str(k): int(v) for k, v in st.pending["logs"].items()}
                self.res.recovered = f"the last run's batch {st.n} was committed; kept"
            else:
                self.res.recovered = f"the last run's batch {st.pending['n']} was not committed; published again"
            st.pending = None
            st.save()
        if remote != st.n:
            st.n, st.logs = remote, self._marks_from_table() if remote else {}
            st.save()
            self.res.recovered = self.res.recovered or f"local state rebuilt from the table (batch {remote})"

    def _marks_from_table(self) -> dict[str, int]:
        """This publisher's highest seq per log, read from the events table."""
        import pyarrow.compute as pc  # type: ignore[import-untyped]
        import pyarrow.dataset as pds  # type: ignore[import-untyped]

        dt = _table(self.uri, self.opts)
        if dt is None:
            return {}
        data = dt.to_pyarrow_dataset().to_table(columns=["log_provider", "log_key", "seq"],
                                                filter=pds.field("publisher") == self.res.publisher)
        grouped = data.group_by(["log_provider", "log_key"]).aggregate([("seq", "max")])
        return {f"{p}/{k}": int(s) for p, k, s in zip(grouped.column("log_provider").to_pylist(),
                                                      grouped.column("log_key").to_pylist(),
                                                      pc.cast(grouped.column("seq_max"), "int64").to_pylist())}

    def _append(self, table: Any, machines: dict[str, tuple[str, str]]) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        keys = [f"{p}/{k}" for p, k in zip(table.column("log_provider").to_pylist(), table.column("log_key").to_pylist())]
        seqs = table.column("seq").to_pylist()
        logs = dict(self.state.logs)
        for key, seq in zip(keys, seqs):
            if seq > logs.get(key, -1):
                logs[key] = seq
        pub, host = self.res.publisher, self.res.host
        machine = [machines.get(k, (pub, host))[0] for k in keys]
        hosts = [machines.get(k, (pub, host))[1] for k in keys]
        rows = with_team_columns(table, TABLES["events"], machine, hosts, pub, self.metadata_only)
        st = self.state
        st.pending = {"n": st.n + 1, "logs": logs}
        st.save()
        props = CommitProperties(app_transactions=[Transaction(app_id=self.app, version=st.n + 1)],
                                 custom_metadata={"agentlog.publisher": pub, "agentlog.rows": str(rows.num_rows)})
        _commit(lambda: write_deltalake(self.uri, rows, mode="append", partition_by=PARTITION_BY, schema_mode="merge",
                                        storage_options=self.opts, commit_properties=props, name="events",
                                        description=_description(self.metadata_only)), self.uri)
        st.n, st.logs, st.pending = st.n + 1, logs, None
        st.save()
        self.res.events += rows.num_rows
        self.res.commits += 1
        self.say(f"events: {self.res.events:,} published")


def _key_range(lo: list[Any], hi: list[Any]) -> str:
    """SQL for ``lo <= (log_provider, log_key, seq) <= hi`` in that order, over parameters $2..$7
    (lo's three, then hi's); led by the plain ranges a Parquet scan can prune row groups by."""
    plain = "e.log_provider BETWEEN $2 AND $5"
    if lo[0] == hi[0]:
        plain += " AND e.log_key BETWEEN $3 AND $6"
    above = "(e.log_provider > $2 OR (e.log_provider = $2 AND (e.log_key > $3 OR (e.log_key = $3 AND e.seq >= $4))))"
    below = "(e.log_provider < $5 OR (e.log_provider = $5 AND (e.log_key < $6 OR (e.log_key = $6 AND e.seq <= $7))))"
    return f"{plain} AND {above} AND {below}"


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
