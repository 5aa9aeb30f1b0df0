"""Bring the derived data up to date with the logs: the store, then the projection.

The one place where a reader's "catch up first" is written. The query engine
itself is read-only (nothing in ``query/`` imports this module); the readers
that answer from current data (search, memory's evidence, the surfaces through
``operations.refresh``) call :func:`bring_up_to_date` before they open one.
"""

from __future__ import annotations

from typing import Any


def bring_up_to_date(root: str) -> dict[str, Any]:
    """Catch the store up with the logs, then the projection with the store;
    what each did (``ingest`` and ``projection`` reports as dicts)."""
    from agentlog.projection.persist import refresh
    from agentlog.store.ingest import catch_up

    ingested = catch_up(root).to_dict()
    projected = refresh(root).to_dict()
    return {"ingest": ingested, "projection": projected}
