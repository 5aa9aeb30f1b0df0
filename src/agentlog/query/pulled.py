"""The machine of pulled sessions, and the frames that failed the pull's byte check, as SQL.

A data root made by ``agentlog vault admin pull`` says beside its logs which
machine each came from and which frames failed the check against their hash
and chain (:mod:`agentlog.log.pulled`). The engine reads that sidecar when it
opens — nothing of it is stored in the events table or the projection, so
ingest, ``rebuild`` and the Delta schema are untouched, and a sidecar written
after its logs were ingested still counts — and registers two small tables:

- ``_pulled_logs`` (log_provider, log_key, machine, host, chain): one row per pulled log;
- ``_byte_checks`` (log_provider, log_key, machine, host, seq, problem, failed).

The views then carry ``machine`` and ``host`` (null for sessions recorded on
this machine): ``events`` joins on its log, ``sessions`` on the log its
session id names (:func:`agentlog.log.layout.session_key`, here in SQL). The
view ``byte_checks`` lists the problems with their session. A frame that
failed is never in the store (the pull stops its chain at the batch holding
it), so a problem names a seq, not an event. A data root no pull made gets
the same columns as constants and an empty ``byte_checks``: no join, nothing
read.
"""

from __future__ import annotations

from typing import Any, Final

from agentlog.log.pulled import byte_checks, pulled_logs

MACHINE_COLUMNS: Final = ("machine", "host")


def log_key_sql(psid: str) -> str:
    """SQL for the log key (:func:`agentlog.log.layout.session_key`) of the session id in the
    column ``psid`` as the projection stores it ('unknown' for none)."""
    return (f"CASE WHEN {psid} IS NULL OR {psid} IN ('', 'unknown') THEN '_unknown' "
            f"WHEN length({psid}) <= 120 AND regexp_full_match({psid}, '[A-Za-z0-9][A-Za-z0-9._-]*') THEN {psid} "
            f"ELSE 'h-' || left(sha256({psid}), 40) END")


def register(con: Any, root: str) -> bool:
    """Register ``_pulled_logs`` and ``_byte_checks`` for ``root`` on the connection; False
    (nothing registered) when no pull wrote ``root``'s logs."""
    import pyarrow as pa  # type: ignore[import-untyped]

    logs = pulled_logs(root)
    if not logs:
        return False
    s = pa.string()
    con.register("_pulled_logs", pa.table({
        "log_provider": pa.array([p.provider for p in logs], s), "log_key": pa.array([p.key for p in logs], s),
        "machine": pa.array([p.machine_id for p in logs], s), "host": pa.array([p.host or None for p in logs], s),
        "chain": pa.array([p.chain for p in logs], s)}))
    checks = byte_checks(root)
    con.register("_byte_checks", pa.table({
        "log_provider": pa.array([b.provider for b in checks], s), "log_key": pa.array([b.key for b in checks], s),
        "machine": pa.array([b.machine_id for b in checks], s), "host": pa.array([b.host or None for b in checks], s),
        "seq": pa.array([b.seq for b in checks], pa.int64()), "problem": pa.array([b.problem for b in checks], s),
        "failed": pa.array([b.failed for b in checks], pa.bool_())}))
    return True


def events_view(pulled: bool) -> str:
    """The ``events`` view: the table's columns, ``content`` and ``raw`` from the event's JSON,
    ``machine`` and ``host``."""
    json_cols = "json_extract(e.event, '$.content') AS content, json_extract(e.event, '$.raw') AS raw"
    if not pulled:
        return f"CREATE VIEW events AS SELECT e.*, {json_cols}, {_nulls()} FROM _events e"
    return (f"CREATE VIEW events AS SELECT e.*, {json_cols}, p.machine, p.host FROM _events e "
            "LEFT JOIN _pulled_logs p ON p.log_provider = e.log_provider AND p.log_key = e.log_key")


def sessions_view(columns: str, pulled: bool) -> tuple[str, tuple[str, ...]]:
    """The ``sessions`` view over ``_sessions s`` (``columns``: its SELECT list) and the views it reads."""
    if not pulled:
        return f"CREATE VIEW sessions AS SELECT {columns}, {_nulls()} FROM _sessions s", ("_sessions",)
    return (f"CREATE VIEW sessions AS SELECT {columns}, p.machine, p.host FROM _sessions s "
            f"LEFT JOIN _pulled_logs p ON p.log_provider = s.provider AND p.log_key = {log_key_sql('s.provider_session_id')}",
            ("_sessions",))


BYTE_CHECK_COLUMNS: Final = (("machine", "VARCHAR"), ("host", "VARCHAR"), ("session_id", "VARCHAR"),
                             ("log_provider", "VARCHAR"), ("log_key", "VARCHAR"), ("seq", "BIGINT"),
                             ("problem", "VARCHAR"), ("failed", "BOOLEAN"))


def byte_checks_view(pulled: bool) -> tuple[str, tuple[str, ...]]:
    """The ``byte_checks`` view and the views it reads."""
    if not pulled:
        cols = ", ".join(f"NULL::{t} AS {n}" for n, t in BYTE_CHECK_COLUMNS)
        return f"CREATE VIEW byte_checks AS SELECT {cols} WHERE false", ()
    return ("CREATE VIEW byte_checks AS SELECT b.machine, b.host, s.session_id, b.log_provider, b.log_key, b.seq, "
            "b.problem, b.failed FROM _byte_checks b "
            f"LEFT JOIN (SELECT session_id, provider, {log_key_sql('provider_session_id')} AS log_key FROM _sessions) s "
            "ON s.provider = b.log_provider AND s.log_key = b.log_key",
            ("_byte_checks", "_sessions"))


def _nulls() -> str:
    return ", ".join(f"NULL::VARCHAR AS {c}" for c in MACHINE_COLUMNS)


__all__ = ["BYTE_CHECK_COLUMNS", "MACHINE_COLUMNS", "byte_checks_view", "events_view", "log_key_sql", "register",
           "sessions_view"]
