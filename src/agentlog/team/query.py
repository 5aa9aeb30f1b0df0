"""``agentlog team query``: SQL or a statement of the statement language over a team's tables.

Two engines answer with the same rows (docs/team.md, "Querying"):

- ``duckdb`` (:mod:`.duck`): each team table read through deltalake into an Arrow
  dataset and registered in an in-memory DuckDB locked down as ``agentlog sql``'s
  engine is (one SELECT or EXPLAIN by DuckDB's own parser, no file or network access
  inside the engine, the configuration locked, a timeout, a row cap, a memory limit);
- ``daft`` (:mod:`.daftq`): each table read with Daft's Delta Lake reader and the
  statement run by Daft's SQL, on the local (native) runner or on a Ray cluster.

A table is read only when the statement names it. A table no machine has published
yet reads as empty with the columns it would have (the local view's, plus the team's
``machine``, ``host``, ``day``, ``publisher``) — except ``memories``, whose columns only
a publisher knows: naming it before anyone published it is an error saying so. A view
the team tables do not hold (``edges``, ``work_units`` …) is an error naming the tables
that are there.

``events`` is the published table (the store's columns, ``event`` the event's JSON)
with ``content`` and ``raw`` derived from ``event`` as the local view derives them (when
``event`` was published: ``--metadata-only`` leaves it, and them, out).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

from agentlog.team import TeamError
from agentlog.team.location import Location
from agentlog.team.reading import LOCAL_ONLY, TABLES, TEAM_COLUMNS

if TYPE_CHECKING:
    from agentlog.query.aql import AqlResult
    from agentlog.query.engine import QueryResult

ENGINES: Final = ("duckdb", "daft")


class TeamRunner(Protocol):
    """What both engines give: the statement language's Runner, and close."""

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = ...,
            max_rows: int = ...) -> QueryResult: ...

    def close(self) -> None: ...


def open_engine(loc: Location, engine: str = "duckdb", ray: str | None = None) -> TeamRunner:
    """An engine over the team tables at ``loc``: ``duckdb``, or ``daft`` (on the Ray cluster at
    ``ray`` — ``auto`` for the one this machine is part of — else locally)."""
    if engine == "duckdb":
        if ray is not None:
            raise TeamError("--ray runs the daft engine on a cluster: add --engine daft")
        from agentlog.team.duck import TeamDuck

        return TeamDuck(loc)
    if engine == "daft":
        from agentlog.team.daftq import TeamDaft  # (Daft is imported only when chosen)

        return TeamDaft(loc, ray)
    raise TeamError(f"no engine {engine!r}: {' or '.join(ENGINES)}")


def ask(loc: Location, text: str, *, engine: str = "duckdb", ray: str | None = None, timeout: float = 30.0,
        max_rows: int = 10_000, now_us: int | None = None) -> QueryResult | AqlResult:
    """Answer ``text`` over the team tables: a statement of the statement language (an
    AqlResult; ``now_us`` is what ``now`` means, default the wall clock) or one SQL statement
    (a QueryResult, as ``agentlog sql`` gives)."""
    from agentlog.query.ask import language

    runner = open_engine(loc, engine, ray)
    try:
        if language(text, typos=True) == "sql":
            return runner.run(text, timeout=timeout, max_rows=max_rows)
        from agentlog.query.aql import execute

        now = now_us if now_us is not None else time.time_ns() // 1000
        return execute(runner, text, now_us=now, max_rows=max_rows, timeout=timeout)
    finally:
        runner.close()


def from_url(url: str | None) -> Location:
    """The team location: ``url``, else the ``team_url`` setting of this data root."""
    if not url:
        from agentlog.core.config import load
        from agentlog.core.paths import data_root

        root = data_root()
        url = str(load(root).get("team_url") or "") if os.path.isdir(root) else ""
    return Location.parse(url or "")


__all__ = ["ENGINES", "LOCAL_ONLY", "TABLES", "TEAM_COLUMNS", "TeamRunner", "ask", "from_url", "open_engine"]
