"""The DuckDB engine over a team's tables (:mod:`agentlog.team.query`).

Each team table is opened with deltalake (its own S3 client: DuckDB's network
extensions are not used, and cannot be installed here) and registered as an Arrow
dataset when a statement first names it; DuckDB scans it with the statement's columns
and filters pushed down. The connection is locked down exactly as ``agentlog sql``'s
(:func:`agentlog.query.engine.lock_down`): no directory is readable at all, external
access is off and the configuration locked, so ``COPY``, ``ATTACH``, ``read_csv`` or
``SET`` cannot reach a file or switch anything back; the statement is checked (one
SELECT or EXPLAIN, by DuckDB's parser), timed and capped by the same
:class:`~agentlog.query.engine.LockedEngine`. Spilling to disk is off (no temp
directory): a query larger than the memory limit fails rather than writes.
"""

from __future__ import annotations

from functools import partial

from agentlog.query.engine import LockedEngine, check_allowed, lock_down
from agentlog.team import TeamError
from agentlog.team.location import Location
from agentlog.team.reading import TABLES, empty_table, events_columns, named_tables, open_table


class TeamDuck(LockedEngine):
    """A locked-down in-memory DuckDB whose views are the team tables at ``loc``."""

    def __init__(self, loc: Location) -> None:
        import duckdb

        super().__init__(duckdb.connect(":memory:"))
        self.loc = loc
        self._con.execute("SET temp_directory = ''")
        for name in TABLES:
            if name == "events":
                self._views["_events"] = (lambda: self._register("events", "_events"), ())
                self._views["events"] = (self._events_view, ("_events",))
            else:
                self._views[name] = (partial(self._register, name, name), ())
        lock_down(self._con, [])
        check_allowed(self._con, [], "nothing (a team query reads no file)")

    def _register(self, table: str, as_name: str) -> None:
        dt = open_table(self.loc, table)
        data = empty_table(table) if dt is None else dt.to_pyarrow_dataset()
        self._con.register(as_name, data)

    def _events_view(self) -> None:
        names = [d[0] for d in self._con.execute("SELECT * FROM _events LIMIT 0").description or []]
        derived = {"content": "json_extract(e.event, '$.content') AS content",
                   "raw": "json_extract(e.event, '$.raw') AS raw"}
        cols = ", ".join(derived.get(c, f'e."{c}"') for c in events_columns(names))
        self._con.execute(f"CREATE VIEW events AS SELECT {cols} FROM _events e")

    def _prepare(self, sql: str) -> None:
        """Register the tables ``sql`` names (all when that cannot be told); a view only the
        local store has is an error naming it."""
        names = named_tables(sql)
        for name in sorted(names if names is not None else TABLES):
            try:
                self._create(name)
            except TeamError:
                if names is not None or name != "memories":
                    raise


__all__ = ["TeamDuck"]
