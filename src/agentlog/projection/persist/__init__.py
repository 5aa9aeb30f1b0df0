"""The projection kept on disk, and brought up to date incrementally.

Layout under ``<data root>/projection/``::

    manifest.json              what is current (atomically replaced)
    index-G.json               per session: its id, project and where its rows are;
                               per project: where its rows are and its counts
    obs-TAG.arrow              observations, one record batch per session (Arrow
                               IPC, lz4; the cache re-projection reads)
    facts-TAG.json             per session: what the cross-session stage reads
    tool_calls-TAG.parquet, edges-…, attempts_base-…, turns_base-…
                               the per-session rows
    sessions-TAG.parquet, turns_overlay-…, attempts_overlay-…, signals-…,
    commits-…, decisions-…     what the cross-session stage decided, per session
    handoffs-TAG.parquet, work_units-…, conflicts-…, edges_cross-…,
    retracted_ids-…            … per project
    corrections-G.parquet, retractions-G.parquet, meta-G.parquet
                               every correction and retraction

Rows are stored in **parts**, three families of them: ``session`` (the
observations, facts and per-session tables of some sessions), ``asession``
(the cross-session stage's per-session rows) and ``aproject`` (its
per-project rows). A full build writes one ``session`` part per shard (a
CRC-32 of the session key, :data:`SHARDS`) and one part of each other
family. A refresh reads only the Delta files the store added since the
manifest's version (their ``add`` actions with ``dataChange``), re-projects
only the sessions they touch (from their observations, read batch by batch,
plus the new rows) and writes them as one new ``session`` part; the older
rows of those sessions stay where they are and are listed as *stale* in
their part, which the engine's views skip. The cross-session stage then runs
again only for the projects those sessions belong to (work units, handoffs
and conflicts never cross projects) and writes the groups whose rows
changed as new ``asession``/``aproject`` parts. Columns that depend on the
reference time (a session's liveness, a work unit's status) are computed by
the views at the manifest's instant, so time moving on rewrites nothing.
When a family has more than :data:`MAX_DELTAS` parts written by refreshes,
those are merged into one (their stale rows dropped).

A fresh process therefore never recomputes history, and a refresh writes in
proportion to what changed. It falls back to a full build when it cannot
prove the increment: no manifest, another algorithm or format, another table
(a rebuilt store), a missing commit file, a commit that removed data (a
purge), or a new retraction of an event or a session (which changes what is
projected, not only how the results join); a new correction or attempt
retraction re-runs the cross-session stage for every project. Each refresh
writes new files and a new manifest, then deletes the files neither it nor
the previous manifest names — a reader that loaded the previous manifest can
still read.

Everything runs under ``state/projection.lock``.

The package, by concern:

- ``parts``: the files on disk: manifest, index, parts; read, written, merged, collected
- ``session_parts``: the store's rows split by session and shard, projected into ``session`` parts
- ``cross_session``: the cross-session stage's rows, stored as ``asession``/``aproject`` parts
- ``workers``: a full build's shards in worker processes (``python -m agentlog.projection.persist``)
- ``refreshing``: :func:`refresh`, the full and the incremental build
- ``reading``: where each stored table's current rows are (the engine's views, search)

Importing the package loads none of them: each public name is imported from its module
when first used (so the query engine's reads load no refresh code, a worker no read code).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentlog.projection.persist.parts import (
        FAMILIES,
        FORMAT,
        MAX_DELTAS,
        OBS_COLUMNS,
        SESSION_TABLES,
        SHARDS,
        SMALL_TABLE_ROWS,
        Index,
        Manifest,
        load_manifest,
        projection_dir,
        shard_of,
        stored_schema,
    )
    from agentlog.projection.persist.reading import TableSource, session_files, sources
    from agentlog.projection.persist.refreshing import (
        LOCK_NAME,
        ProjectionBusy,
        RefreshReport,
        previous_known_targets,
        refresh,
    )
    from agentlog.projection.persist.workers import PARALLEL_MIN_EVENTS

#: each public name → the module of this package that defines it (as imported above)
_HOMES: dict[str, str] = {
    "FAMILIES": "parts",
    "FORMAT": "parts",
    "LOCK_NAME": "refreshing",
    "MAX_DELTAS": "parts",
    "OBS_COLUMNS": "parts",
    "PARALLEL_MIN_EVENTS": "workers",
    "SESSION_TABLES": "parts",
    "SHARDS": "parts",
    "SMALL_TABLE_ROWS": "parts",
    "Index": "parts",
    "Manifest": "parts",
    "ProjectionBusy": "refreshing",
    "RefreshReport": "refreshing",
    "TableSource": "reading",
    "load_manifest": "parts",
    "previous_known_targets": "refreshing",
    "projection_dir": "parts",
    "refresh": "refreshing",
    "session_files": "reading",
    "shard_of": "parts",
    "sources": "reading",
    "stored_schema": "parts",
}

__all__ = [
    "FAMILIES",
    "FORMAT",
    "LOCK_NAME",
    "MAX_DELTAS",
    "OBS_COLUMNS",
    "PARALLEL_MIN_EVENTS",
    "SESSION_TABLES",
    "SHARDS",
    "SMALL_TABLE_ROWS",
    "Index",
    "Manifest",
    "ProjectionBusy",
    "RefreshReport",
    "TableSource",
    "load_manifest",
    "previous_known_targets",
    "projection_dir",
    "refresh",
    "session_files",
    "shard_of",
    "sources",
    "stored_schema",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept here (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
