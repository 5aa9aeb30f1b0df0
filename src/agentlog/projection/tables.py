"""Arrow schemas of the projection tables, and rows → Arrow.

Times are ``timestamp(µs, UTC)`` like the events table; ids are bare UUID
text (surfaces add display prefixes); lists of ids are ``list<string>``.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]

TS: Final = pa.timestamp("us", tz="UTC")
S: Final = pa.string()
L: Final = pa.list_(pa.string())
I: Final = pa.int64()
F: Final = pa.float64()
B: Final = pa.bool_()


def _schema(*fields: tuple[str, Any]) -> Any:
    return pa.schema([pa.field(n, t) for n, t in fields])


SESSIONS: Final = _schema(
    ("session_id", S), ("provider", S), ("provider_session_id", S), ("project_id", S), ("project_name", S),
    ("project_root", S), ("state", S), ("liveness", S), ("started_at", TS), ("ended_at", TS), ("end_reason", S),
    ("start_source", S), ("event_count", I), ("turn_count", I), ("prompt_count", I), ("tool_call_count", I),
    ("failure_count", I), ("agents", L), ("coverage", S), ("first_event_id", S), ("last_event_id", S),
    ("last_event_at", TS), ("last_activity_at", TS), ("last_activity_event_id", S), ("start_event_id", S),
    ("end_event_id", S), ("in_flight_calls", I), ("unpaired_tool_starts", I), ("unpaired_tool_finishes", I),
    ("fifo_pairings", I), ("evidence", L), ("confidence", F), ("retracted", B),
)
TURNS_BASE: Final = _schema(
    ("turn_id", S), ("session_id", S), ("provider", S), ("project_id", S), ("project_name", S), ("turn_index", I),
    ("started_at", TS), ("ended_at", TS), ("status", S), ("failure_class", S), ("prompt_event_id", S),
    ("stop_event_id", S), ("tool_call_ids", L), ("tool_call_count", I), ("objective", S), ("prompt_chars", I),
    ("first_event_id", S), ("last_event_id", S), ("attempt_ids", L), ("evidence", L), ("confidence", F),
)
TURNS_OVERLAY: Final = _schema(
    ("turn_id", S), ("objective", S), ("corrected_by", S), ("corrected_at", TS), ("inferred_objective", S),
    ("retracted", B),
)
ATTEMPTS_BASE: Final = _schema(
    ("attempt_id", S), ("session_id", S), ("provider", S), ("project_id", S), ("project_name", S), ("turn_id", S),
    ("turn_index", I), ("attempt_index", I), ("objective", S), ("approach", S), ("started_at", TS),
    ("ended_at", TS), ("outcome", S), ("failure_class", S), ("tool_call_ids", L), ("tool_call_count", I),
    ("paths", L), ("commit_shas", L), ("superseded_by", S), ("supersedes", S), ("failing_event_id", S),
    ("first_action_event_id", S), ("evidence", L), ("confidence", F), ("algorithm_version", S),
)
ATTEMPTS_OVERLAY: Final = _schema(
    ("attempt_id", S), ("outcome", S), ("failure_class", S), ("superseded_by", S), ("supersedes", S),
    ("work_unit_id", S), ("corrected_by", S), ("corrected_at", TS), ("correction_type", S),
    ("inferred_outcome", S), ("inferred_failure_class", S), ("note", S), ("objective", S), ("commit_shas", L),
    ("retracted", B),
)
TOOL_CALLS: Final = _schema(
    ("tool_call_id", S), ("session_id", S), ("provider", S), ("project_id", S), ("project_name", S),
    ("turn_id", S), ("attempt_id", S), ("agent_id", S), ("parent_agent_id", S), ("provider_agent_id", S),
    ("tool_name", S), ("tool_category", S), ("provider_call_id", S), ("started_at", TS), ("finished_at", TS),
    ("duration_ms", I), ("outcome_status", S), ("outcome_class", S), ("exit_code", I), ("path_relative", S),
    ("paths", L), ("command_category", S), ("git_subcommand", S), ("lines_added", I), ("lines_removed", I),
    ("start_event_id", S), ("end_event_id", S), ("pairing", S), ("evidence", L), ("confidence", F),
    ("failure_evidence", S), ("result_summary", S), ("test_runner", S), ("tests_passed", I), ("tests_failed", I),
    ("tests_skipped", I), ("tests_errors", I), ("failing_tests", S), ("checker", S), ("check_errors", I),
    ("first_error", S), ("reclassified_from", S), ("fixed_by", S),
)
EDGES: Final = _schema(
    ("session_id", S), ("edge_kind", S), ("from_type", S), ("from_id", S), ("to_type", S), ("to_id", S), ("evidence", L),
    ("confidence", F), ("edge_source", S),
)
SIGNALS: Final = _schema(
    ("signal_id", S), ("session_id", S), ("provider", S), ("project_id", S), ("project_name", S), ("event_id", S),
    ("raised_at", TS), ("kind", S), ("signal_type", S), ("cleared_at", TS), ("cleared_by", S), ("pending", B),
    ("evidence", L), ("confidence", F), ("retracted", B),
)
COMMITS: Final = _schema(
    ("commit_id", S), ("session_id", S), ("provider", S), ("project_id", S), ("project_name", S), ("turn_id", S),
    ("attempt_id", S), ("tool_call_id", S), ("sha", S), ("previous_sha", S), ("branch", S), ("committed_at", TS),
    ("linkage", S), ("evidence", L), ("confidence", F), ("algorithm_version", S), ("retracted", B),
)
HANDOFFS: Final = _schema(
    ("handoff_id", S), ("from_session", S), ("to_session", S), ("from_provider", S), ("to_provider", S),
    ("project_id", S), ("project_name", S), ("handoff_at", TS), ("gap_ms", I), ("shared_paths", L),
    ("evidence", L), ("confidence", F),
)
WORK_UNITS: Final = _schema(
    ("work_unit_id", S), ("version", I), ("project_id", S), ("project_name", S), ("objective_event_id", S),
    ("objective", S), ("phase", S), ("phase_reason", S), ("status", S), ("status_reason", S), ("started_at", TS),
    ("updated_at", TS), ("ended_at", TS), ("sessions", L), ("session_count", I), ("turns", L), ("turn_count", I),
    ("attempts", L), ("attempt_count", I), ("failed_attempt_count", I), ("paths", L), ("commit_shas", L),
    ("actors", L), ("last_attempt", S), ("blocking_signal", S), ("evidence", L), ("confidence", F),
    ("algorithm_version", S),
)
DECISIONS: Final = _schema(
    ("decision_id", S), ("kind", S), ("work_unit_id", S), ("session_id", S), ("provider", S), ("project_id", S),
    ("project_name", S), ("turn_id", S), ("selected", S), ("alternatives", L), ("rationale", S),
    ("rationale_source", S), ("decided_at", TS), ("evidence", L), ("confidence", F), ("algorithm_version", S),
)
CONFLICTS: Final = _schema(
    ("conflict_id", S), ("project_id", S), ("project_name", S), ("first_work_unit", S), ("second_work_unit", S),
    ("first_started_at", TS), ("second_started_at", TS), ("started_at", TS), ("updated_at", TS), ("paths", L),
    ("path_count", I), ("overlapping", B), ("first_committed", B), ("second_committed", B),
    ("first_lines_added", I), ("first_lines_removed", I), ("second_lines_added", I), ("second_lines_removed", I),
    ("evidence", L), ("confidence", F), ("algorithm_version", S),
)
CORRECTIONS: Final = _schema(
    ("event_id", S), ("corrected_at", TS), ("session_id", S), ("correction_type", S), ("target_type", S),
    ("target", S), ("outcome", S), ("failure_class", S), ("note", S), ("note_chars", I), ("status", S),
    ("evidence", L), ("confidence", F),
)
RETRACTIONS: Final = _schema(
    ("event_id", S), ("retracted_at", TS), ("target_type", S), ("target", S), ("reason", S), ("note", S),
    ("note_chars", I), ("matched", B), ("retracted_events", L), ("evidence", L), ("confidence", F),
)
RETRACTED_IDS: Final = _schema(("id", S), ("kind", S))

# Table name → schema, for the per-session (sharded) and the assembled tables.
SHARDED: Final[dict[str, Any]] = {
    "tool_calls": TOOL_CALLS, "edges": EDGES, "attempts_base": ATTEMPTS_BASE, "turns_base": TURNS_BASE,
}
ASSEMBLED: Final[dict[str, Any]] = {
    "sessions": SESSIONS, "turns_overlay": TURNS_OVERLAY, "attempts_overlay": ATTEMPTS_OVERLAY,
    "signals": SIGNALS, "commits": COMMITS, "handoffs": HANDOFFS, "work_units": WORK_UNITS,
    "decisions": DECISIONS, "conflicts": CONFLICTS, "corrections": CORRECTIONS, "retractions": RETRACTIONS,
    "edges_cross": EDGES, "retracted_ids": RETRACTED_IDS,
}
# How each assembled table is stored: its public schema plus the columns the
# engine's views need and a person never sees — the session or project a row
# belongs to (a refresh replaces rows group by group), and the inputs of the
# columns that depend on the reference time (a session's liveness, a work
# unit's status), which the views compute at the manifest's instant so that a
# refresh need not rewrite every row whenever time moves on. Those columns are
# stored empty.
AT_DEPENDENT: Final[dict[str, tuple[str, ...]]] = {
    "sessions": ("state", "liveness"),
    "work_units": ("status", "status_reason", "ended_at"),
}
UNIT_STATUS_INPUTS: Final = (("_unknown", B), ("_completable", B), ("_la_outcome", S), ("_sessions_ended_at", TS),
                             ("_in_flight", I))


def _plus(schema: Any, *fields: tuple[str, Any]) -> Any:
    out = schema
    for n, t in fields:
        out = out.append(pa.field(n, t))
    return out


STORED_ASSEMBLED: Final[dict[str, Any]] = {
    "sessions": _plus(SESSIONS, ("_blocked", B)),
    "turns_overlay": _plus(TURNS_OVERLAY, ("session_id", S)),
    "attempts_overlay": _plus(ATTEMPTS_OVERLAY, ("session_id", S)),
    "signals": SIGNALS, "commits": COMMITS, "decisions": DECISIONS,
    "handoffs": HANDOFFS, "work_units": _plus(WORK_UNITS, *UNIT_STATUS_INPUTS), "conflicts": CONFLICTS,
    "edges_cross": _plus(EDGES, ("project_id", S)), "retracted_ids": _plus(RETRACTED_IDS, ("project_id", S)),
    "corrections": _plus(CORRECTIONS, ("_project", S)), "retractions": _plus(RETRACTIONS, ("_project", S)),
}
# The column a stored table is replaced by: a refresh writes the new rows of
# some sessions (or projects) to a new file and hides their older rows in the
# files before (None: the table is rewritten whole).
GROUP_COLUMN: Final[dict[str, str | None]] = {
    "tool_calls": "session_id", "edges": "session_id", "attempts_base": "session_id", "turns_base": "session_id",
    "sessions": "session_id", "turns_overlay": "session_id", "attempts_overlay": "session_id",
    "signals": "session_id", "commits": "session_id", "decisions": "session_id",
    "handoffs": "project_id", "work_units": "project_id", "conflicts": "project_id", "edges_cross": "project_id",
    "retracted_ids": "project_id", "corrections": None, "retractions": None,
}
SESSION_FAMILY: Final = ("sessions", "turns_overlay", "attempts_overlay", "signals", "commits", "decisions")
PROJECT_FAMILY: Final = ("handoffs", "work_units", "conflicts", "edges_cross", "retracted_ids")
GLOBAL_FAMILY: Final = ("corrections", "retractions")

# What a person queries (views over the stored tables), in catalog order.
PUBLIC: Final[dict[str, Any]] = {
    "sessions": SESSIONS, "turns": None, "tool_calls": None, "attempts": None, "edges": EDGES,
    "signals": SIGNALS, "commits": COMMITS, "handoffs": HANDOFFS, "work_units": WORK_UNITS,
    "decisions": DECISIONS, "conflicts": CONFLICTS, "corrections": CORRECTIONS, "retractions": RETRACTIONS,
}


def to_arrow(rows: list[dict[str, Any]], schema: Any) -> Any:
    """Rows (dicts; times as µs integers, extra keys ignored) as an Arrow table of ``schema``."""
    struct = pa.struct([pa.field(f.name, I if f.type == TS else f.type) for f in schema])
    arr = pa.array(rows, type=struct)
    columns = [c.cast(TS) if f.type == TS else c for f, c in zip(schema, arr.flatten())]
    return pa.Table.from_arrays(columns, schema=schema)
