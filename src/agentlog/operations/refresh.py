"""Keep everything derived from the logs current, and open readers over it.

- :func:`bring_up_to_date`: the store and the projection (what every read does first);
- :func:`open_current` and :func:`run_sql`: a read-only engine over them, brought up to
  date first unless told not to;
- :func:`project_and_index`: the daemon's step after an ingest that found events —
  the full-text index, then the projection and the search hits' place sidecars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentlog.projection.current import bring_up_to_date
from agentlog.query.engine import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Engine, QueryResult

__all__ = ["bring_up_to_date", "open_current", "run_sql", "project_and_index"]


def open_current(root: str, *, catch_up: bool = True) -> tuple[Engine, dict[str, Any] | None]:
    """An engine over the store and projection, brought up to date first unless
    ``catch_up`` is False; and what bringing it up to date did."""
    caught = bring_up_to_date(root) if catch_up else None
    return Engine(root), caught


def run_sql(root: str, sql: str, *, catch_up: bool = True, timeout: float = DEFAULT_TIMEOUT_S,
            max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
    """Bring the store and projection up to date (unless ``catch_up`` is False),
    then run one read-only statement."""
    engine, caught = open_current(root, catch_up=catch_up)
    with engine:
        result = engine.run(sql, timeout=timeout, max_rows=max_rows)
    result.caught_up = caught
    return result


def project_and_index(root: str, log: Callable[[str], None]) -> None:
    """After an ingest that brought events: the full-text index first (a hook's text is
    searchable within a second), then the projection, then — when it changed — the
    search hits' place sidecars. Each step's failure is logged and stops nothing:
    a bug in a derived view must not stop capture's ingest."""
    from agentlog.projection.persist import ProjectionBusy, refresh
    from agentlog.search.index import catch_up
    from agentlog.search.places import prepare

    try:
        catch_up(root)
    except Exception as e:
        log(f"search index catch-up failed: {type(e).__name__}: {e}")
    try:
        r = refresh(root, lock_timeout=0.0)
    except ProjectionBusy:
        return
    except Exception as e:
        log(f"projection refresh failed: {type(e).__name__}: {e}")
        return
    if r.mode == "none":
        return
    log(f"projection {r.mode}: {r.sessions_rebuilt} sessions in {r.seconds:.2f} s")
    try:
        prepare(root)
    except Exception as e:
        log(f"search place sidecars failed: {type(e).__name__}: {e}")
