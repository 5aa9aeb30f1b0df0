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
from typing import Any

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
        data = empty_table(table) if dt is None else coalesced(dt.to_pyarrow_dataset())
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


#: gaps between the column chunks a scan needs that one read still spans (the small columns of an
#: events file sit together before the event's JSON, which most scans leave out)
HOLE_BYTES = 4 << 20
#: the largest single read (the JSON column of a day's file is tens of MB)
RANGE_BYTES = 64 << 20


def coalesced(dataset: Any) -> Any:
    """``dataset`` (deltalake's Arrow dataset) with its files read in as few requests as will do:
    the column chunks a scan needs, when less than :data:`HOLE_BYTES` apart, in one ranged read
    (pyarrow's default, 8 KiB, makes a scan of three small columns three requests a file). On
    object storage each request costs a round trip (and moto's server copies the whole object
    per request)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.dataset as pds  # type: ignore[import-untyped]

    fmt = pds.ParquetFileFormat(default_fragment_scan_options=pds.ParquetFragmentScanOptions(
        pre_buffer=True, cache_options=pa.CacheOptions(hole_size_limit=HOLE_BYTES, range_size_limit=RANGE_BYTES)))
    fragments = [fmt.make_fragment(f.path, filesystem=dataset.filesystem, partition_expression=f.partition_expression)
                 for f in dataset.get_fragments()]
    return pds.FileSystemDataset(fragments, dataset.schema, fmt, dataset.filesystem)


__all__ = ["TeamDuck", "coalesced"]
