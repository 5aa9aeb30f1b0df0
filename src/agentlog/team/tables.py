"""What a team table holds: which local view each is read from, the day it is
partitioned by, and the columns ``--metadata-only`` keeps.

Every team table is the local view's rows (``agentlog sql 'select * from <view>'``)
with three columns of the team's: ``machine`` (the machine the row was recorded on: a
pulled root's own, else this data root's), ``host`` and ``day`` (the UTC day of the
row's time; partitioned by ``machine`` and ``day``), and ``publisher`` (the data root
that published it: one machine publishes itself; a vault admin publishes the machines
it pulled). ``events`` is the store's table (every event's JSON in ``event``; the
query engines derive ``content`` and ``raw`` from it as the local view does).

``--metadata-only`` keeps an allowlist per table: ids, kinds, names, times, counts,
outcomes, costs — never a prompt, command, output, path, message, objective or memory
text. A column missing from the list is absent from the team table, not null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

TEAM_COLUMNS: Final = ("machine", "host", "day", "publisher")
TEAM_DERIVED: Final = ("command_key",)
"""Columns the team's ``events`` table adds to the store's (not with ``--metadata-only``): see
:func:`command_keys`."""
PARTITION_BY: Final = ["machine", "day"]


@dataclass(frozen=True)
class TeamTable:
    name: str
    time: str
    """The column whose UTC day is ``day`` (null: the epoch's day)."""
    metadata: tuple[str, ...]
    """The columns ``--metadata-only`` keeps (besides the team's own)."""


_EVENT_META = (
    "event_id", "schema_version", "kind", "provider", "provider_event_name", "observed_at", "captured_at",
    "capture_mode", "agentlog_version", "provider_version", "provider_session_id", "provider_turn_id", "agent_id",
    "agent_type", "model", "tool_name", "tool_category", "tool_call_id", "outcome_status", "outcome_class", "exit_code",
    "duration_ms", "project_name", "log_provider", "log_key", "seq", "frame_hash", "log_offset", "observed_date",
)
_SESSION_META = (
    "session_id", "provider", "provider_session_id", "project_id", "project_name", "state", "liveness", "started_at",
    "ended_at", "end_reason", "start_source", "event_count", "turn_count", "prompt_count", "tool_call_count",
    "failure_count", "agents", "coverage", "first_event_id", "last_event_id", "last_event_at", "last_activity_at",
    "last_activity_event_id", "start_event_id", "end_event_id", "in_flight_calls", "unpaired_tool_starts",
    "unpaired_tool_finishes", "fifo_pairings", "evidence", "confidence", "retracted",
)
_TURN_META = (
    "turn_id", "session_id", "provider", "project_id", "project_name", "turn_index", "started_at", "ended_at",
    "status", "failure_class", "prompt_event_id", "stop_event_id", "tool_call_ids", "tool_call_count", "attempt_ids",
    "prompt_chars", "first_event_id", "last_event_id", "evidence", "confidence", "corrected_by", "corrected_at",
    "retracted",
)
_CALL_META = (
    "tool_call_id", "session_id", "provider", "project_id", "project_name", "turn_id", "attempt_id", "agent_id",
    "parent_agent_id", "provider_agent_id", "tool_name", "tool_category", "provider_call_id", "started_at",
    "finished_at", "duration_ms", "outcome_status", "outcome_class", "exit_code", "command_category",
    "git_subcommand", "lines_added", "lines_removed", "start_event_id", "end_event_id", "pairing", "evidence",
    "confidence", "test_runner", "tests_passed", "tests_failed", "tests_skipped", "tests_errors", "checker",
    "check_errors", "reclassified_from", "fixed_by", "retracted",
)
_ATTEMPT_META = (
    "attempt_id", "session_id", "provider", "project_id", "project_name", "turn_id", "turn_index", "attempt_index",
    "started_at", "ended_at", "outcome", "failure_class", "superseded_by", "supersedes", "tool_call_ids",
    "tool_call_count", "commit_shas", "failing_event_id", "first_action_event_id", "work_unit_id", "evidence",
    "confidence", "algorithm_version", "corrected_by", "corrected_at", "correction_type", "inferred_outcome",
    "inferred_failure_class", "retracted",
)
_USAGE_META = (
    "event_id", "provider", "provider_session_id", "agent_id", "project_name", "observed_at", "model", "message_id",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd",
    "price_model", "price_as_of", "source", "cost_source",
)
_MEMORY_META = ("memory_id", "kind", "tags", "confidence", "created_at", "updated_at", "pinned", "version")

TABLES: Final = {t.name: t for t in (
    TeamTable("events", "observed_at", _EVENT_META),
    TeamTable("sessions", "started_at", _SESSION_META),
    TeamTable("turns", "started_at", _TURN_META),
    TeamTable("tool_calls", "started_at", _CALL_META),
    TeamTable("attempts", "started_at", _ATTEMPT_META),
    TeamTable("usage", "observed_at", _USAGE_META),
    TeamTable("memories", "created_at", _MEMORY_META),
)}
TEAM_TABLES: Final = tuple(TABLES)
DERIVED: Final = ("sessions", "turns", "tool_calls", "attempts", "usage")


def memories_table(root: str) -> Any:
    """This data root's memories (every approved one, archived ones left out) as Arrow."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import orjson

    from agentlog.memory.service import list_memories

    rows: list[Any] = []
    offset = 0
    while True:
        page = list_memories(root, limit=1000, offset=offset)
        rows.extend(page)
        if len(page) < 1000:
            break
        offset += 1000
    ts = pa.timestamp("us", tz="UTC")
    return pa.table({
        "memory_id": pa.array([m.id for m in rows], pa.string()),
        "kind": pa.array([m.kind for m in rows], pa.string()),
        "title": pa.array([m.title for m in rows], pa.string()),
        "content": pa.array([m.content for m in rows], pa.large_string()),
        "tags": pa.array([list(m.tags) for m in rows], pa.list_(pa.string())),
        "confidence": pa.array([float(m.confidence) for m in rows], pa.float64()),
        "author": pa.array([m.author for m in rows], pa.string()),
        "created_at": pa.array([m.created_at for m in rows], ts),
        "updated_at": pa.array([m.updated_at for m in rows], ts),
        "pinned": pa.array([bool(m.pinned) for m in rows], pa.bool_()),
        "version": pa.array([int(m.version) for m in rows], pa.int64()),
        "evidence": pa.array([orjson.dumps(m.evidence or []).decode() for m in rows], pa.large_string()),
    })


def with_team_columns(table: Any, spec: TeamTable, machine: Any, host: Any, publisher: str,
                      metadata_only: bool) -> Any:
    """``table`` (a local view's rows) as the team table holds them: the local ``machine`` and
    ``host`` replaced by ``machine``/``host`` (arrays, one value a row), ``day`` from the
    table's time column, ``publisher``; only the metadata columns with ``metadata_only``."""
    import pyarrow as pa

    keep = [c for c in table.column_names if c not in TEAM_COLUMNS and c not in TEAM_DERIVED
            and (not metadata_only or c in spec.metadata)]
    out = table.select(keep)
    if spec.name == "events" and not metadata_only and "attrs" in table.column_names:
        out = out.append_column("command_key", command_keys(table.column("attrs")))
    when = table.column(spec.time) if spec.time in table.column_names else pa.nulls(table.num_rows, pa.timestamp("us"))
    day = utc_day(when)
    n = table.num_rows
    return (out.append_column("machine", _column(machine, n)).append_column("host", _column(host, n))
            .append_column("day", day).append_column("publisher", pa.array([publisher] * n, pa.string())))


def command_keys(attrs: Any) -> Any:
    """Each event's ``attrs.command_key`` (the capture's digest of a shell command; null when it
    has none): the events table keeps it as a column of its own, so "which commands fail
    most" groups a short column instead of matching every failed call's ``attrs`` JSON.
    Read from the JSON text as the store writes it (compact, keys quoted, no blanks)."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    if isinstance(attrs, pa.ChunkedArray):
        attrs = attrs.combine_chunks() if attrs.num_chunks != 1 else attrs.chunk(0)
    if len(attrs) == 0:
        return pa.array([], pa.string())
    found = pc.extract_regex(pc.cast(attrs, pa.large_string()), r'"command_key":"(?P<k>[0-9a-f]{1,64})"')
    keys = pc.struct_field(found, [0])
    return pc.if_else(pc.is_valid(found), pc.cast(keys, pa.string()), pa.scalar(None, pa.string()))


def utc_day(when: Any) -> Any:
    """The ``day`` partition of each time: its UTC date (a null time: the epoch's day)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(when.type) and when.type.tz is not None:
        when = pc.cast(when, pa.timestamp("us"))  # the UTC wall time, then its day
    return pc.fill_null(pc.cast(when, pa.date32()), pa.scalar(0, pa.date32()))


def _column(value: Any, n: int) -> Any:
    import pyarrow as pa

    if isinstance(value, str) or value is None:
        return pa.array([value] * n, pa.string())
    return pa.array(value, pa.string()) if not isinstance(value, (pa.Array, pa.ChunkedArray)) else value
