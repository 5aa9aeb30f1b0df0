"""The read-only SQL engine: DuckDB in process over the store.

What makes it read-only is the engine, not string checks:

- DuckDB's own parser classifies the text (``extract_statements``); exactly
  one statement of type SELECT or EXPLAIN is run — ``COPY``, ``ATTACH``,
  ``INSTALL``/``LOAD``, ``CREATE``, ``INSERT``/``UPDATE``/``DELETE``,
  ``SET``/``RESET``/``USE``, ``PRAGMA``, ``CALL``, ``EXPORT`` are refused
  by type, and so is more than one statement;
- the tables are views over the Parquet files of the store's current
  snapshot and of the projection (DuckDB's own reader, twice as fast as a
  pyarrow dataset); then ``allowed_directories`` is set to exactly those two
  directories, ``enable_external_access`` switched off and the configuration
  locked, so ``read_csv('/etc/passwd')``, the logs, the config, ``glob``
  and any attempt to switch access back on fail inside DuckDB;
- a timeout interrupts the query, a row cap truncates the answer (and says
  so), and a memory limit bounds it.

Error messages are DuckDB's, with any quoted text that does not appear in
the statement itself replaced by ``'…'``: a conversion error must not echo
stored content (a secret that escaped redaction, a private file) back.

Views: ``events`` — every column of the store's ``events`` table plus
``content`` and ``raw`` (JSON, read from the event's bytes) and ``machine``
and ``host`` (a pulled data root's: :mod:`.pulled`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Final, Self

from agentlog.core import AgentlogError

if TYPE_CHECKING:
    import duckdb

ALLOWED: Final = frozenset({"SELECT", "EXPLAIN"})
DEFAULT_TIMEOUT_S: Final = 30.0
MAX_TIMEOUT_S: Final = 86_400.0 * 365
"""A longer timeout is taken as this one (a year: no limit in practice); the watchdog's wait cannot hold
much more (an OverflowError in its thread, and the statement no longer watched)."""
DEFAULT_MAX_ROWS: Final = 10_000
#: the most rows any caller may ask a statement for (a larger ask is this; the CLI refuses it)
MAX_ROWS_CAP: Final = 1_000_000_000
MEMORY_LIMIT: Final = "2GB"



# The projection's public tables, as views over what ``project.persist`` stores:
# per-session rows joined with what the cross-session stage decided, tool
# calls marked retracted with their attempt or session, the edges the tables
# already state (parent_of, triggered, evidence_for) derived here rather than
# stored (``projection.session.structural_edges`` is the same rule), and the
# columns that depend on the reference time computed at the manifest's
# instant (``projection.assemble.liveness`` and ``unit_status`` are the same
# rules; a conflict is an answer while both its work units are open).
def projection_views(at: int, pulled: bool = False) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each public view of the projection: its CREATE statement and the views it reads
    (``pulled``: the data root's logs came from a vault pull, :mod:`.pulled`)."""
    from agentlog.query.pulled import byte_checks_view, sessions_view

    from agentlog.projection.rules import (
        BLOCKED_OPEN_FOR,
        STALE_AFTER,
        UNIT_IDLE_ABANDONED,
        UNIT_IDLE_DONE,
    )
    from agentlog.projection.tables import PUBLIC

    def cols(table: str, replace: dict[str, str] | None = None) -> str:
        replace = replace or {}
        return ", ".join(f"{replace[f.name]} AS {f.name}" if f.name in replace else f.name for f in PUBLIC[table])

    closed = f"(ended_at IS NOT NULL AND epoch_us(ended_at) <= {at})"
    silence = f"({at} - epoch_us(last_activity_at))"
    liveness = (f"CASE WHEN {closed} THEN 'closed' WHEN {silence} <= {STALE_AFTER} OR (_blocked AND {silence} <= "
                f"{BLOCKED_OPEN_FOR}) THEN 'open' ELSE 'stale' END")
    state = f"CASE WHEN {closed} THEN 'closed' ELSE 'open' END"
    ended = f"(_sessions_ended_at IS NOT NULL AND epoch_us(_sessions_ended_at) <= {at})"
    idle = f"({at} - epoch_us(updated_at))"
    completed = f"(_completable AND ({ended} OR {idle} > {UNIT_IDLE_DONE}))"
    abandoned = f"(_la_outcome IN ('failed', 'superseded', 'abandoned') AND {idle} > {UNIT_IDLE_ABANDONED})"
    status = (f"CASE WHEN _unknown THEN 'unknown' WHEN {completed} THEN 'completed' WHEN {abandoned} "
              "THEN 'abandoned' ELSE 'open' END")
    reason = ("CASE WHEN _unknown THEN 'no prompt or tool call was observed' "
              f"WHEN {completed} THEN CASE WHEN {ended} THEN 'last turn completed and its session ended' "
              "ELSE 'last turn completed; idle for more than 30 minutes' END "
              f"WHEN {abandoned} THEN 'last attempt ' || _la_outcome || '; idle for more than 2 hours' "
              "WHEN _in_flight <> 0 THEN 'a tool call is still running' ELSE 'activity within the idle window' END")
    unit_ended = f"CASE WHEN NOT _unknown AND ({completed} OR {abandoned}) THEN updated_at END"
    unit_cols = {"status": status, "status_reason": reason, "ended_at": unit_ended}
    edge_cols = "session_id, edge_kind, from_type, from_id, to_type, to_id, evidence, confidence, edge_source"
    views = {
        "sessions": sessions_view(cols("sessions", {"liveness": liveness, "state": state}), pulled),
        "byte_checks": byte_checks_view(pulled),
        "turns": ("CREATE VIEW turns AS SELECT b.turn_id, b.session_id, b.provider, b.project_id, b.project_name, "
                  "b.turn_index, o.objective, b.started_at, b.ended_at, b.status, b.failure_class, b.prompt_event_id, "
                  "b.stop_event_id, b.tool_call_ids, b.tool_call_count, b.attempt_ids, b.prompt_chars, "
                  "b.first_event_id, b.last_event_id, b.evidence, b.confidence, o.corrected_by, o.corrected_at, "
                  "o.inferred_objective, coalesce(o.retracted, false) AS retracted "
                  "FROM _turns_base b LEFT JOIN _turns_overlay o USING (turn_id)", ("_turns_base", "_turns_overlay")),
        "attempts": ("CREATE VIEW attempts AS SELECT b.attempt_id, b.session_id, b.provider, b.project_id, "
                     "b.project_name, b.turn_id, b.turn_index, b.attempt_index, "
                     "coalesce(o.objective, b.objective) AS objective, b.approach, b.started_at, b.ended_at, "
                     "o.outcome, o.failure_class, o.superseded_by, o.supersedes, b.tool_call_ids, b.tool_call_count, "
                     "b.paths, o.commit_shas, b.failing_event_id, b.first_action_event_id, o.work_unit_id, "
                     "b.evidence, b.confidence, b.algorithm_version, o.corrected_by, o.corrected_at, "
                     "o.correction_type, o.inferred_outcome, o.inferred_failure_class, o.note, o.retracted "
                     "FROM _attempts_base b JOIN _attempts_overlay o USING (attempt_id)",
                     ("_attempts_base", "_attempts_overlay")),
        "tool_calls": ("CREATE VIEW tool_calls AS SELECT t.*, (t.session_id IN (SELECT session_id FROM _sessions "
                       "WHERE retracted) OR coalesce(t.attempt_id IN (SELECT id FROM _retracted_ids), false)) "
                       "AS retracted FROM _tool_calls t", ("_tool_calls", "_sessions", "_retracted_ids")),
        "edges": ("CREATE VIEW edges AS SELECT * FROM ("
                  f"SELECT {edge_cols} FROM _edges "
                  "UNION ALL SELECT session_id, 'parent_of', 'session', session_id, 'turn', turn_id, "
                  "[coalesce(prompt_event_id, first_event_id)], 0.9, 'projection' FROM _turns_base "
                  "UNION ALL SELECT session_id, 'triggered', 'event', prompt_event_id, 'turn', turn_id, "
                  "[prompt_event_id], 0.9, 'projection' FROM _turns_base WHERE prompt_event_id IS NOT NULL "
                  "UNION ALL SELECT session_id, 'parent_of', 'turn', turn_id, 'tool_call', tool_call_id, evidence, "
                  "0.9, 'projection' FROM _tool_calls "
                  "UNION ALL SELECT session_id, 'evidence_for', 'event', ev, 'attempt', attempt_id, [ev], "
                  "confidence, 'projection' FROM (SELECT session_id, attempt_id, confidence, unnest(evidence) AS ev "
                  f"FROM _attempts_base) UNION ALL SELECT {edge_cols} FROM _edges_cross) e "
                  # a retracted attempt's edges, and every edge of a retracted session, are not answers
                  "WHERE from_id NOT IN (SELECT id FROM _retracted_ids) AND to_id NOT IN (SELECT id FROM "
                  "_retracted_ids) AND (e.session_id IS NULL OR e.session_id NOT IN (SELECT session_id FROM "
                  "_sessions WHERE retracted))",
                  ("_edges", "_turns_base", "_tool_calls", "_attempts_base", "_edges_cross", "_retracted_ids",
                   "_sessions")),
        "work_units": (f"CREATE VIEW work_units AS SELECT {cols('work_units', unit_cols)} FROM _work_units",
                       ("_work_units",)),
        "conflicts": (f"CREATE VIEW conflicts AS SELECT {cols('conflicts')} FROM _conflicts WHERE first_work_unit "
                      "IN (SELECT work_unit_id FROM work_units WHERE status = 'open') AND second_work_unit IN "
                      "(SELECT work_unit_id FROM work_units WHERE status = 'open')", ("_conflicts", "work_units")),
    }
    for t in ("signals", "commits", "handoffs", "decisions", "corrections", "retractions"):
        views[t] = (f"CREATE VIEW {t} AS SELECT {cols(t)} FROM _{t}", (f"_{t}",))
    return views


def _parts_sql(columns: str, source: Any, first_part: int) -> str:
    """A SELECT over a stored table's files that skips each file's stale groups (listed
    in ``_stale`` under part numbers from ``first_part`` on, one per file with any)."""
    clean = [path for path, stale in source.files if not stale]
    branches = [f"SELECT {columns} FROM read_parquet({sql_list(clean)})"] if clean else []
    part = first_part
    for path, stale in source.files:
        if stale:
            branches.append(f"SELECT {columns} FROM read_parquet({sql_list([path])}) "
                            f"WHERE coalesce({source.group_column}, '') NOT IN "
                            f"(SELECT key FROM _stale WHERE part = {part})")
            part += 1
    return " UNION ALL ".join(branches)


class QueryError(AgentlogError):
    """A statement was refused, failed or timed out (the message is safe to show)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind
        """refused | error | timeout"""
        self.exit_code = 2 if kind == "refused" else 1


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    """More rows than the cap: only the first ``max_rows`` are here."""
    seconds: float = 0.0
    caught_up: dict[str, Any] | None = field(default=None)
    """What the catch-up ingest before answering did (None with no catch-up)."""

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column name."""
        return [dict(zip(self.columns, r)) for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"] = [list(r) for r in self.rows]
        return out


def sanitize(message: str, statement: str) -> str:
    """DuckDB's message with quoted text not taken from the statement replaced by '…'."""
    out: list[str] = []
    i = 0
    while i < len(message):
        c = message[i]
        if c in "'\"":
            j = message.find(c, i + 1)
            if j > i:
                inner = message[i + 1 : j]
                out.append(c + (inner if inner and inner in statement else "…") + c)
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _private_temp_dir(root: str) -> str | None:
    """``<data root>/state/duckdb-tmp`` (0700), or None when it cannot be made (spilling is then off)."""
    from agentlog.core.atrest import derived_state_dir
    from agentlog.core.paths import ensure_dir

    path = os.path.join(os.path.abspath(derived_state_dir(root)), "duckdb-tmp")
    try:
        ensure_dir(path)
    except OSError:
        return None
    return path + os.sep


def check_allowed(con: Any, bases: list[str], what: str = "the data root") -> None:
    """Every directory DuckDB may read is under one of ``bases`` (asserted, not assumed: DuckDB
    adds its temp directory to the list on its own); none at all with no ``bases``."""
    value = con.execute("SELECT current_setting('allowed_directories')").fetchall()[0][0]
    entries = value if isinstance(value, list) else []
    prefixes = [os.path.abspath(b).rstrip(os.sep) + os.sep for b in bases]
    outside = [d for d in entries if not any((os.path.abspath(str(d)) + os.sep).startswith(p) for p in prefixes)]
    if outside:
        con.close()
        raise QueryError(f"the SQL engine would be allowed to read outside {what}: {', '.join(map(str, outside))}",
                         "error")


def lock_down(con: Any, allowed: list[str]) -> None:
    """Make ``con`` read-only at the engine: only ``allowed`` directories readable (none when
    empty), the memory limit, UTC, external access off and the configuration locked (nothing
    can switch any of it back). Views and registered Arrow objects made before or after stay
    readable: they are not files."""
    if allowed:
        con.execute(f"SET allowed_directories = {sql_list(allowed)}")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def check_statement(con: Any, sql: str) -> None:
    """Refuse anything but exactly one SELECT or EXPLAIN (DuckDB's parser on ``con`` decides)."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(sanitize(str(e), sql), "error") from None
    if len(statements) != 1:
        raise QueryError(f"one statement per call, got {len(statements)}", "refused")
    kind = statements[0].type.name
    if kind not in ALLOWED:
        raise QueryError(f"{kind} statements are not allowed: the engine is read-only (SELECT or EXPLAIN)",
                         "refused")


def sql_string(value: str) -> str:
    """A SQL string literal (quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def sql_list(values: list[str]) -> str:
    """A SQL list literal of strings (quotes doubled)."""
    return "[" + ", ".join(sql_string(v) for v in values) + "]"


def _store_files(root: str) -> list[str]:
    """The Parquet files of the events table's current snapshot (absolute paths), by path: so
    by day (the partition), and a scan in file order reads the days in order (``team
    publish`` streams the store so, and its commits then touch a day or two each)."""
    from urllib.parse import unquote

    from deltalake import DeltaTable

    from agentlog.store.schema import events_path

    path = events_path(root)
    if not DeltaTable.is_deltatable(path):
        return []
    return sorted(unquote(u[len("file://"):]) if u.startswith("file://") else u for u in DeltaTable(path).file_uris())


_PLACEHOLDER: Final = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?")
"""A quoted string or identifier (kept), or a ``?`` placeholder outside them."""


def _unbound(m: re.Match[str]) -> str:
    return "NULL" if m.group(0) == "?" else m.group(0)


class LockedEngine:
    """A locked-down DuckDB connection (:func:`lock_down`) whose views are made when a
    statement first names them (``_views``: name → (make it, the views it reads)), and
    runs one checked statement at a time with a timeout and a row cap. :class:`Engine`
    is the store's; ``agentlog.team`` has one over a team's tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._views: dict[str, tuple[Callable[[], object], tuple[str, ...]]] = {}
        self._created: set[str] = set()

    def _create(self, name: str) -> None:
        if name in self._created or name not in self._views:
            return
        make, deps = self._views[name]
        for dep in deps:
            self._create(dep)
        make()
        self._created.add(name)

    def _prepare(self, sql: str) -> None:
        """Create the views ``sql`` names (all of them when that cannot be told)."""
        if len(self._created) == len(self._views):
            return
        import duckdb

        try:
            # parsed on DuckDB's default connection, where no view exists to expand; a statement
            # with ``?`` placeholders cannot be (a binder error), so each is read as NULL there
            # (creating every view instead cost 0.15 s of a rule's 0.2 s in memory checks)
            names = {n.lower() for n in duckdb.get_table_names(_PLACEHOLDER.sub(_unbound, sql))}
        except Exception:
            names = set()
        if not names or not names <= self._views.keys() | self._created:
            names = set(self._views)
        for name in sorted(names):
            self._create(name)

    def arrow(self, sql: str, params: list[Any] | None = None) -> Any:
        """The whole answer of a statement agentlog wrote itself (never a user's text) as an
        Arrow table, the views it names created first: no check, no row cap, no watchdog
        (``team publish`` reads whole views with it)."""
        self._prepare(sql)
        rel = self._con.sql(sql, params=params) if params else self._con.sql(sql)
        return rel.to_arrow_table()

    def arrow_reader(self, sql: str, params: list[Any] | None, batch_rows: int) -> Any:
        """:meth:`arrow` as a stream of record batches of at most ``batch_rows`` rows."""
        self._prepare(sql)
        rel = self._con.sql(sql, params=params) if params else self._con.sql(sql)
        return rel.to_arrow_reader(batch_rows)

    def register(self, name: str, table: Any) -> None:
        """Make the Arrow ``table`` readable as ``name`` (replacing one of that name): what agentlog
        joins the store with (e.g. the memories a check asks about), not a file."""
        self._con.register(name, table)
        self._created.add(name)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, sql: str) -> None:
        """Refuse anything but exactly one SELECT or EXPLAIN (DuckDB's parser decides)."""
        check_statement(self._con, sql)

    def internal(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of a statement agentlog wrote itself (never a user's text): no check, no view
        created for it, no watchdog — e.g. a ``read_parquet`` of files the projection names."""
        return self._con.execute(sql, params or []).fetchall()

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
            max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
        """Run one read-only statement (``?`` placeholders bound to ``params``).

        Per statement this costs little beyond DuckDB's own work: a text that passed
        :meth:`check` is remembered (the check depends on the text alone; a refused text
        is checked, and refused, every time), and the timeout is kept by one watchdog
        thread per engine — started when needed, ended after a minute with nothing to
        watch — rather than by a timer thread per statement."""
        import duckdb

        if not timeout > 0:  # (NaN too)
            raise QueryError(f"a timeout is a positive number of seconds, not {timeout!r}", "refused")
        timeout = min(timeout, MAX_TIMEOUT_S)
        state = self.__dict__
        checked: dict[str, None] = state.setdefault("_checked_sql", {})
        if sql not in checked:
            self.check(sql)
            if len(checked) >= 1024:
                checked.clear()
            checked[sql] = None

        # The watchdog: deadlines by statement serial; the one past its deadline is marked
        # fired and the connection interrupted (DuckDB raises in the running statement).
        watch: dict[str, Any] | None = state.get("_watch")
        if watch is None:
            watch = state.setdefault("_watch", {"cond": threading.Condition(), "deadlines": {}, "fired": set(),
                                                "serial": 0, "thread": None})
        cond: threading.Condition = watch["cond"]
        deadlines: dict[int, float] = watch["deadlines"]
        fired: set[int] = watch["fired"]
        with cond:
            watch["serial"] += 1
            serial: int = watch["serial"]
            deadlines[serial] = time.monotonic() + timeout
            thread: threading.Thread | None = watch["thread"]
            if thread is None or not thread.is_alive():
                con = self._con

                def watchdog() -> None:
                    with cond:
                        while True:
                            if not deadlines:
                                if not cond.wait(60.0) and not deadlines:
                                    watch["thread"] = None  # idle: the next statement starts another
                                    return
                                continue
                            first = min(deadlines, key=deadlines.__getitem__)
                            left = deadlines[first] - time.monotonic()
                            if left > 0:
                                cond.wait(left)
                                continue
                            del deadlines[first]
                            fired.add(first)
                            con.interrupt()

                watch["thread"] = threading.Thread(target=watchdog, name="agentlog-query-timeout", daemon=True)
                watch["thread"].start()
            else:
                cond.notify()
        started = time.perf_counter()
        failed: duckdb.Error | None = None
        timed_out = False
        try:
            self._prepare(sql)
            cur = self._con.execute(sql, params) if params else self._con.execute(sql)
            columns = [d[0] for d in cur.description or []]
            types = [str(d[1]) for d in cur.description or []]
            rows = cur.fetchmany(min(max_rows, MAX_ROWS_CAP) + 1)
        except duckdb.Error as e:
            failed = e
        finally:
            with cond:
                deadlines.pop(serial, None)
                timed_out = serial in fired
                fired.discard(serial)
        if failed is not None:
            if timed_out:
                raise QueryError(f"the statement ran longer than {timeout:g} s and was stopped", "timeout") from None
            raise QueryError(sanitize(str(failed), sql), "error") from None
        truncated = len(rows) > max_rows
        return QueryResult(columns, types, [tuple(r) for r in rows[:max_rows]], truncated,
                           time.perf_counter() - started)


class Engine(LockedEngine):
    """One DuckDB connection over the store's current snapshot, locked down."""

    def __init__(self, root: str, *, projection: bool = True) -> None:
        """Open a connection; the views are created when a statement first names them
        (a statement over ``attempts`` never lists the store's files)."""
        import duckdb

        self.manifest: Any = None
        """The projection manifest the views read (None: no projection yet)."""

        from agentlog.store.schema import EVENTS_SCHEMA, events_path

        super().__init__(duckdb.connect(":memory:"))
        # DuckDB allows its temp directory (default: .tmp in the working directory) besides
        # allowed_directories: point it at a private one under the data root, or nowhere.
        private_tmp = _private_temp_dir(root)
        self._con.execute("SET temp_directory = " + sql_string(private_tmp or ""))
        allowed: list[str] = []
        store = events_path(root)
        if os.path.isdir(os.path.join(store, "_delta_log")):
            self._views["_events"] = (lambda: self._events_view(root), ())
            allowed.append(os.path.abspath(store) + os.sep)
        else:
            self._con.register("_events", EVENTS_SCHEMA.empty_table())
        from agentlog.query.pulled import events_view, register

        pulled = register(self._con, root)
        self._views["events"] = (partial(self._con.execute, events_view(pulled)), ("_events",))
        from agentlog.query.usage import USAGE_VIEW, prices_table

        self._views["_prices"] = (lambda: self._con.register("_prices", prices_table(root)), ())
        self._views["usage"] = (partial(self._con.execute, USAGE_VIEW), ("events", "_prices"))
        if projection:
            from agentlog.projection.persist import load_manifest, projection_dir, sources, stored_schema

            import pyarrow as pa  # type: ignore[import-untyped]

            self.manifest = load_manifest(root)
            stale_parts: list[int] = []
            stale_keys: list[str] = []
            numbered = 0
            for name, source in sources(root, self.manifest).items():
                schema = stored_schema(name)
                if source.files:
                    first = numbered
                    for _, stale in source.files:
                        if stale:
                            stale_parts.extend([numbered] * len(stale))
                            stale_keys.extend(stale)
                            numbered += 1
                    sql = f"CREATE VIEW _{name} AS {_parts_sql(', '.join(schema.names), source, first)}"
                    self._views[f"_{name}"] = (partial(self._con.execute, sql), ("_stale",))
                else:
                    self._con.register(f"_{name}", schema.empty_table())
            self._con.register("_stale", pa.table({"part": pa.array(stale_parts, pa.int32()),
                                                   "key": pa.array(stale_keys, pa.string())}))
            allowed.append(os.path.abspath(projection_dir(root)) + os.sep)
            for view, (sql, deps) in projection_views(self.manifest.at if self.manifest else 0, pulled).items():
                self._views[view] = (partial(self._con.execute, sql), deps)
            from agentlog.query.telemetry import TELEMETRY_VIEW, TURN_LATENCY_VIEW

            self._views["telemetry"] = (partial(self._con.execute, TELEMETRY_VIEW),
                                        ("events", "sessions", "turns", "tool_calls"))
            self._views["turn_latency"] = (partial(self._con.execute, TURN_LATENCY_VIEW),
                                           ("telemetry", "events", "sessions", "turns", "tool_calls"))
        lock_down(self._con, allowed)
        from agentlog.core.atrest import derived_root

        check_allowed(self._con, [root, derived_root(root)])  # (the same but with encryption at rest on)

    def _events_view(self, root: str) -> None:
        from agentlog.store.schema import EVENTS_SCHEMA

        files = _store_files(root)
        if not files:
            self._con.register("_events", EVENTS_SCHEMA.empty_table())
            return
        # DuckDB's own Parquet reader (twice as fast as scanning a pyarrow dataset);
        # external access is off, so only the allowed directories are readable.
        columns = ", ".join(f.name for f in EVENTS_SCHEMA)
        self._con.execute(f"CREATE VIEW _events AS SELECT {columns} FROM read_parquet({sql_list(files)}, "
                          "hive_partitioning = true, hive_types = {'observed_date': DATE})")
