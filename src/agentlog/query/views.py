"""What the people's commands show: sessions, the timeline, failures, one entity.

Each function takes an open :class:`.engine.Engine` and a :class:`.scope.Scope`
and returns plain, JSON-ready values: ids carry their display prefix
(``att_0f3c…``, full length), times are RFC 3339 text in UTC, lists stay
lists. The CLI only renders them; the MCP server can return them as they are.

Retracted sessions, turns, attempts and tool calls are left out of the
timeline, failures and sessions lists; ``show`` still finds them and says so.

Ids are looked up by their full text or an unambiguous prefix of at least
:data:`MIN_PREFIX` hex digits, with or without the display prefix and the
hyphens; a session also by its provider's session id. :func:`resolve_id`
raises :class:`UnknownId`, :class:`AmbiguousId` or :class:`BadId`.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Iterable

import orjson

from agentlog.core import AgentlogError
from agentlog.core.timefmt import format_us
from agentlog.projection.ids import PREFIXES, display, split_display
from agentlog.query.scope import Scope

MIN_PREFIX: Final = 4
"""Hex digits an id prefix needs before it is looked up."""

# Entity type → (table, id column, columns a scope can filter on: project, session).
ENTITIES: Final[dict[str, tuple[str, str, str | None, str | None]]] = {
    "session": ("sessions", "session_id", "project_id", "session_id"),
    "turn": ("turns", "turn_id", "project_id", "session_id"),
    "attempt": ("attempts", "attempt_id", "project_id", "session_id"),
    "tool_call": ("tool_calls", "tool_call_id", "project_id", "session_id"),
    "work_unit": ("work_units", "work_unit_id", "project_id", None),
    "decision": ("decisions", "decision_id", "project_id", "session_id"),
    "commit": ("commits", "commit_id", "project_id", "session_id"),
    "conflict": ("conflicts", "conflict_id", "project_id", None),
    "event": ("events", "event_id", None, None),
}

# Column → entity type of the ids it holds (a list column: of each element),
# for turning stored bare ids into display ids.
ID_COLUMNS: Final[dict[str, str]] = {
    "session_id": "session", "from_session": "session", "to_session": "session", "sessions": "session",
    "turn_id": "turn", "turns": "turn",
    "attempt_id": "attempt", "attempts": "attempt", "attempt_ids": "attempt", "superseded_by": "attempt",
    "supersedes": "attempt", "selected": "attempt", "alternatives": "attempt", "last_attempt": "attempt",
    "tool_call_id": "tool_call", "tool_call_ids": "tool_call",
    "work_unit_id": "work_unit", "first_work_unit": "work_unit", "second_work_unit": "work_unit",
    "decision_id": "decision", "commit_id": "commit", "conflict_id": "conflict", "signal_id": "signal",
    "handoff_id": "edge", "project_id": "project",
    "agent_id": "agent", "parent_agent_id": "agent", "agents": "agent",
    "event_id": "event", "evidence": "event", "first_event_id": "event", "last_event_id": "event",
    "start_event_id": "event", "end_event_id": "event", "prompt_event_id": "event", "stop_event_id": "event",
    "failing_event_id": "event", "first_action_event_id": "event", "last_activity_event_id": "event",
    "objective_event_id": "event", "corrected_by": "event", "cleared_by": "event", "blocking_signal": "event",
    "retracted_events": "event",
}

# Event columns ``show`` prints for an event (the content and raw payload stay in the store).
EVENT_FIELDS: Final = (
    "event_id", "kind", "provider", "provider_event_name", "observed_at", "captured_at", "capture_mode",
    "provider_session_id", "provider_turn_id", "agent_id", "agent_type", "model", "tool_name", "tool_category",
    "tool_call_id", "paths", "outcome_status", "outcome_class", "exit_code", "duration_ms", "project_name",
    "project_root", "project_branch", "project_head", "attrs", "text", "log_provider", "log_key", "seq",
)
# What each evidence row carries.
EVIDENCE_FIELDS: Final = (
    "event_id", "observed_at", "kind", "provider_event_name", "tool_name", "tool_category", "outcome_status",
    "outcome_class", "exit_code", "paths",
)
FAILED_OUTCOMES: Final = ("failed", "superseded")


class IdError(AgentlogError, LookupError):
    """An id a person typed does not name exactly one entity (the message says why)."""


class UnknownId(IdError):
    """Nothing recorded has this id."""


class AmbiguousId(IdError):
    """The prefix matches several entities."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


class BadId(IdError, ValueError):
    """Not something an id can be (too short, not hex): a usage error."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class Ref:
    """One resolved entity."""

    kind: str
    """Entity type: ``session``, ``turn``, ``attempt`` … ``event``."""
    id: str
    """The bare stored id."""

    @property
    def display(self) -> str:
        return display(self.kind, self.id)


# -- values ---------------------------------------------------------------------


def iso(value: Any) -> str | None:
    """RFC 3339 UTC text of a stored time (a datetime or µs)."""
    if value is None:
        return None
    if isinstance(value, int):
        return format_us(value)
    if isinstance(value, datetime):
        text = value.astimezone(timezone.utc).isoformat()
        return text.replace("+00:00", "Z")
    return str(value)


def _show_id(kind: str, value: Any) -> Any:
    if value is None or value == "":
        return value
    if isinstance(value, list):
        return [_show_id(kind, v) for v in value]
    return display(kind, str(value))


def plain(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as JSON-ready values: display ids, RFC 3339 times."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in ID_COLUMNS:
            out[k] = _show_id(ID_COLUMNS[k], v)
        elif isinstance(v, datetime):
            out[k] = iso(v)
        else:
            out[k] = v
    return out


def _rows(engine: Any, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = engine.run(sql, params or None).records()
    return records


# -- ids ----------------------------------------------------------------------------


def _hyphenated(hexpart: str) -> str:
    """A prefix of the hyphen-less id text, with the hyphens of the stored form put back."""
    out = []
    for i, c in enumerate(hexpart):
        if i in (8, 12, 16, 20):
            out.append("-")
        out.append(c)
    return "".join(out)


def resolve_id(engine: Any, text: str, kinds: Iterable[str] | None = None, scope: Scope | None = None) -> Ref:
    """The one entity ``text`` names (a display id, a bare id, an unambiguous prefix; a
    session also by its provider's session id), among ``kinds`` (default: every type
    in :data:`ENTITIES`), within ``scope``'s projects and session when given."""
    wanted = [k for k in (kinds or ENTITIES) if k in ENTITIES]
    typed, bare = split_display(text)
    raw = text.strip()
    if typed is not None:
        if typed not in wanted:
            raise BadId(f"{raw!r} is a {typed.replace('_', ' ')} id; expected "
                        + " or ".join(f"{PREFIXES[k]}_…" for k in wanted))
        wanted = [typed]
    hexpart = bare.replace("-", "")
    is_hex = bool(hexpart) and all(c in "0123456789abcdef" for c in hexpart) and len(hexpart) <= 32
    parts: list[str] = []
    params: list[Any] = []
    if is_hex and len(hexpart) >= MIN_PREFIX:
        lo = _hyphenated(hexpart)
        for kind in wanted:
            table, col, pcol, scol = ENTITIES[kind]
            cond = f"{col} >= ? AND {col} < ?"
            p: list[Any] = [lo, lo + "g"]  # every id character sorts before 'g'
            if kind == "commit":
                cond = f"({cond}) OR starts_with(sha, ?)"
                p.append(hexpart)
            if scope is not None:
                sw, sp = scope.where(None, project_column=pcol or "", session_column=scol)
                cond = f"({cond}) AND {sw}"
                p += sp
            parts.append(f"SELECT DISTINCT '{kind}' AS kind, {col} AS id FROM {table} WHERE {cond}")
            params += p
    if "session" in wanted and typed is None and raw:
        cond = "provider_session_id = ?"
        p = [raw]
        if scope is not None:
            sw, sp = scope.where(None, session_column="session_id")
            cond = f"{cond} AND {sw}"
            p += sp
        parts.append(f"SELECT DISTINCT 'session' AS kind, session_id AS id FROM sessions WHERE {cond}")
        params += p
    if not parts:
        if is_hex:
            raise BadId(f"{raw!r} is too short: give at least {MIN_PREFIX} hex digits of the id")
        raise BadId(f"{raw!r} is not an id (ids are hex, optionally with a prefix such as att_ or ses_)")
    found = {(r[0], r[1]) for r in engine.run(" UNION ".join(parts), params).rows}
    if not found and is_hex and len(hexpart) < MIN_PREFIX:
        raise BadId(f"{raw!r} is too short: give at least {MIN_PREFIX} hex digits of the id")
    if not found:
        from agentlog.query.id_hints import did_you_mean, near_ids

        hint = did_you_mean(near_ids(engine, raw, {k: (v[0], v[1]) for k, v in ENTITIES.items()}, wanted))
        raise UnknownId((f"no {' or '.join(k.replace('_', ' ') for k in wanted)} with id {raw!r} was recorded"
                         if len(wanted) <= 3 else f"nothing recorded has the id {raw!r}") + hint)
    if len(found) > 1:
        names = sorted(display(k, i) for k, i in found)
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise AmbiguousId(f"{raw!r} matches {len(names)} ids ({shown}); give more of it", names)
    kind, ident = found.pop()
    return Ref(kind, ident)


def scoped(engine: Any, scope: Scope) -> Scope:
    """``scope`` with its session (a prefix or a provider's session id) resolved to the full id."""
    if not scope.session:
        return scope
    ref = resolve_id(engine, scope.session, ["session"], dataclasses.replace(scope, session=None))
    return dataclasses.replace(scope, session=ref.id)


def _window(scope: Scope, start: str, end: str) -> tuple[str, list[Any]]:
    """Rows whose [start, end] span overlaps the scope's window (end null: still going)."""
    parts: list[str] = []
    params: list[Any] = []
    if scope.until_us is not None:
        parts.append(f"{start} < make_timestamptz(?)")
        params.append(scope.until_us)
    if scope.since_us is not None:
        parts.append(f"({end} IS NULL OR {end} >= make_timestamptz(?))")
        params.append(scope.since_us)
    return (" AND ".join(parts) if parts else "TRUE"), params


def _where(scope: Scope, alias: str, start: str, end: str) -> tuple[str, list[Any]]:
    sw, sp = scope.where(None, project_column=f"{alias}.project_id", session_column=f"{alias}.session_id")
    ww, wp = _window(scope, f"{alias}.{start}", f"{alias}.{end}")
    return f"{sw} AND {ww} AND NOT {alias}.retracted", sp + wp


# -- sessions ------------------------------------------------------------------------

SESSION_COLUMNS: Final = (
    "session_id", "provider", "provider_session_id", "project_id", "project_name", "project_root", "started_at",
    "ended_at", "end_reason", "last_activity_at", "last_event_at", "state", "liveness", "coverage", "event_count",
    "turn_count", "prompt_count", "tool_call_count", "failure_count", "in_flight_calls", "confidence", "machine", "host",
)
"""``machine`` and ``host``: where a session pulled from a vault was recorded (null for this machine's)."""


def sessions(engine: Any, scope: Scope) -> list[dict[str, Any]]:
    """One row per session active in the scope, newest first (at most ``scope.limit``)."""
    scope = scoped(engine, scope)
    where, params = _where(scope, "s", "started_at", "last_event_at")
    sql = (f"SELECT {', '.join('s.' + c for c in SESSION_COLUMNS)}, "
           "(SELECT count(*) FROM attempts a WHERE a.session_id = s.session_id AND NOT a.retracted) AS attempt_count, "
           "(SELECT count(*) FROM signals g WHERE g.session_id = s.session_id AND g.pending) AS pending_signals, "
           # frames of a pulled session that failed the pull's byte check (query/pulled.py)
           "(SELECT count(*) FROM byte_checks b WHERE b.session_id = s.session_id AND b.failed) AS byte_check_failures "
           f"FROM sessions s WHERE {where} ORDER BY s.started_at DESC, s.session_id")
    if scope.limit:
        sql += f" LIMIT {int(scope.limit)}"
    if scope.offset:
        sql += f" OFFSET {int(scope.offset)}"
    return [plain(r) for r in _rows(engine, sql, params)]


# -- timeline --------------------------------------------------------------------------

TURN_COLUMNS: Final = (
    "turn_id", "session_id", "turn_index", "started_at", "ended_at", "status", "failure_class", "objective",
    "prompt_chars", "tool_call_count", "corrected_by", "inferred_objective",
)
ATTEMPT_COLUMNS: Final = (
    "attempt_id", "session_id", "turn_id", "turn_index", "attempt_index", "started_at", "ended_at", "outcome",
    "failure_class", "approach", "paths", "tool_call_count", "superseded_by", "supersedes", "commit_shas",
    "work_unit_id", "confidence", "corrected_by", "corrected_at", "correction_type", "inferred_outcome",
    "inferred_failure_class", "note",
)


def timeline(engine: Any, scope: Scope) -> list[dict[str, Any]]:
    """Sessions (newest first, at most ``scope.limit``) → their turns → each turn's attempts.

    Each session is a :func:`sessions` row with ``turns``; each turn has
    ``attempts``. Turns are those overlapping the scope's time window.
    """
    rows = sessions(engine, scope)
    if not rows:
        return rows
    ids = [split_display(r["session_id"])[1] for r in rows]
    marks = ", ".join("?" for _ in ids)
    tw, tp = _window(scope, "t.started_at", "t.ended_at")
    turns = _rows(engine, f"SELECT {', '.join('t.' + c for c in TURN_COLUMNS)} FROM turns t "
                          f"WHERE t.session_id IN ({marks}) AND NOT t.retracted AND {tw} "
                          "ORDER BY t.session_id, t.turn_index", ids + tp)
    # The attempt's objective is its turn's prompt (or its correction).
    attempts = _rows(engine, f"SELECT {', '.join('a.' + c for c in ATTEMPT_COLUMNS if c != 'objective')}, "
                             "coalesce(a.objective, t.objective) AS objective, "
                             "f.result_summary AS failure_detail, f.fixed_by "
                             "FROM attempts a JOIN turns t USING (turn_id) "
                             "LEFT JOIN tool_calls f ON f.end_event_id = a.failing_event_id "
                             "AND f.session_id = a.session_id "
                             f"WHERE a.session_id IN ({marks}) AND NOT a.retracted "
                             "ORDER BY a.turn_index, a.attempt_index", ids)
    by_turn: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        by_turn.setdefault(a["turn_id"], []).append(plain(a))
    by_session: dict[str, list[dict[str, Any]]] = {}
    for t in turns:
        tt = plain(t)
        tt["attempts"] = by_turn.get(t["turn_id"], [])
        by_session.setdefault(t["session_id"], []).append(tt)
    for r, sid in zip(rows, ids):
        r["turns"] = by_session.get(sid, [])
    return rows


# -- failures -----------------------------------------------------------------------------


def failures(engine: Any, scope: Scope) -> list[dict[str, Any]]:
    """Failed and superseded attempts in the scope, newest first (at most ``scope.limit``),
    each with its session, turn objective and — when superseded — its ``retry``."""
    scope = scoped(engine, scope)
    sw, sp = scope.where(None, project_column="a.project_id", session_column="a.session_id")
    ww, wp = _window(scope, "a.started_at", "a.ended_at")
    cols = ", ".join("a." + c for c in ATTEMPT_COLUMNS)
    # the failing call (its evidence and summary) and, when the same command later passed,
    # that call and its attempt: the retry that fixed it
    facts = ", ".join(f"f.{c} AS failing_{c}" for c in FAILING_CALL_COLUMNS)
    sql = (f"SELECT {cols}, a.provider, a.project_id, a.project_name, a.failing_event_id, a.evidence, "
           "coalesce(a.objective, t.objective) AS objective, s.provider_session_id, "
           f"{facts}, fx.tool_call_id AS fixed_by, fx.result_summary AS fixed_summary, "
           "coalesce(r.attempt_id, rx.attempt_id) AS retry_id, "
           "CASE WHEN r.attempt_id IS NOT NULL THEN 'superseded' WHEN rx.attempt_id IS NOT NULL "
           "THEN 'fixed_by' END AS retry_how, "
           "coalesce(r.outcome, rx.outcome) AS retry_outcome, coalesce(r.approach, rx.approach) AS retry_approach, "
           "coalesce(r.started_at, rx.started_at) AS retry_started_at, "
           "coalesce(r.turn_index, rx.turn_index) AS retry_turn_index, "
           "coalesce(r.attempt_index, rx.attempt_index) AS retry_attempt_index "
           "FROM attempts a JOIN turns t ON t.turn_id = a.turn_id "
           "JOIN sessions s ON s.session_id = a.session_id "
           "LEFT JOIN attempts r ON r.attempt_id = a.superseded_by AND NOT r.retracted "
           "LEFT JOIN tool_calls f ON f.end_event_id = a.failing_event_id AND f.session_id = a.session_id "
           "LEFT JOIN tool_calls fx ON fx.tool_call_id = f.fixed_by "
           "LEFT JOIN attempts rx ON rx.attempt_id = fx.attempt_id AND rx.attempt_id <> a.attempt_id "
           "AND NOT rx.retracted "
           f"WHERE a.outcome IN ('failed', 'superseded') AND NOT a.retracted AND NOT s.retracted "
           f"AND {sw} AND {ww} ORDER BY a.started_at DESC, a.attempt_id")
    if scope.limit:
        sql += f" LIMIT {int(scope.limit)}"
    if scope.offset:
        sql += f" OFFSET {int(scope.offset)}"
    out = []
    for row in _rows(engine, sql, sp + wp):
        retry = None
        if row["retry_id"] and row["retry_outcome"] is not None:
            retry = {"attempt_id": display("attempt", row["retry_id"]), "outcome": row["retry_outcome"],
                     "how": row["retry_how"], "approach": row["retry_approach"],
                     "started_at": iso(row["retry_started_at"]),
                     "turn_index": row["retry_turn_index"], "attempt_index": row["retry_attempt_index"]}
        if row["fixed_by"]:
            fixed = {"tool_call_id": display("tool_call", row["fixed_by"]), "result_summary": row["fixed_summary"]}
            if retry is None:
                retry = {"attempt_id": None, "outcome": "succeeded", "how": "fixed_by", "approach": None,
                         "started_at": None, "turn_index": None, "attempt_index": None}
            retry["fixed_by"] = fixed
        failing = {c: row.pop(f"failing_{c}") for c in FAILING_CALL_COLUMNS}
        if failing["tool_call_id"]:
            failing["tool_call_id"] = display("tool_call", failing["tool_call_id"])
        for k in ("retry_id", "retry_how", "retry_outcome", "retry_approach", "retry_started_at", "retry_turn_index",
                  "retry_attempt_index", "fixed_by", "fixed_summary"):
            del row[k]
        item = plain(row)
        item["failing_call"] = failing if failing["tool_call_id"] else None
        item["retry"] = retry
        out.append(item)
    return out


FAILING_CALL_COLUMNS: Final = (
    "tool_call_id", "tool_name", "exit_code", "failure_evidence", "result_summary", "tests_failed", "tests_passed",
    "failing_tests", "first_error", "reclassified_from",
)
RECLASSIFIED_COLUMNS: Final = (
    "tool_call_id", "session_id", "provider", "tool_name", "finished_at", "outcome_class", "reclassified_from",
    "failure_evidence", "result_summary",
)


def reclassified(engine: Any, scope: Scope) -> list[dict[str, Any]]:
    """Failed tool calls whose class the installed classifier re-derived differently from what
    their events said (``agentlog project --full`` after an upgrade), newest first: ``class``,
    ``reclassified_from``, the evidence and summary."""
    scope = scoped(engine, scope)
    sw, sp = scope.where(None, project_column="c.project_id", session_column="c.session_id")
    ww, wp = _window(scope, "c.started_at", "c.finished_at")
    sql = (f"SELECT {', '.join('c.' + x for x in RECLASSIFIED_COLUMNS)} FROM tool_calls c "
           f"WHERE c.reclassified_from IS NOT NULL AND {sw} AND {ww} "
           "ORDER BY c.finished_at DESC NULLS LAST, c.tool_call_id")
    if scope.limit:
        sql += f" LIMIT {int(scope.limit)}"
    out = []
    for row in _rows(engine, sql, sp + wp):
        item = plain(row)
        item["class"] = item.pop("outcome_class")
        out.append(item)
    return out


# -- show -------------------------------------------------------------------------------------


def partition_days(start: Any, end: Any) -> list[str]:
    """The UTC dates (the store's ``observed_date`` partitions) from a day before ``start`` to
    a day after ``end`` (now, for what has not ended): where the events of an entity that ran
    from ``start`` to ``end`` are. Empty (read every partition) for an unknown start or a span
    of more than a month."""
    if not isinstance(start, datetime):
        return []
    last = end if isinstance(end, datetime) else datetime.now(timezone.utc)
    first_day = (start.astimezone(timezone.utc) - timedelta(days=1)).date()
    last_day = (last.astimezone(timezone.utc) + timedelta(days=1)).date()
    if (last_day - first_day).days > 31:
        return []
    return [(first_day + timedelta(days=i)).isoformat() for i in range((last_day - first_day).days + 1)]


def _event_rows(engine: Any, where: str, params: list[Any], scope: Scope | None,
                limit: int | None) -> tuple[list[dict[str, Any]], bool]:
    tw, tp = "TRUE", list[Any]()
    if scope is not None:
        tw, tp = scope.where("observed_at", project_column="", session_column=None)
    sql = (f"SELECT {', '.join(EVIDENCE_FIELDS)} FROM events WHERE ({where}) AND {tw} "
           "ORDER BY observed_at, captured_at, event_id")
    if limit:
        sql += f" LIMIT {int(limit) + 1}"
    rows = _rows(engine, sql, params + tp)
    more = bool(limit) and len(rows) > int(limit or 0)
    return [plain(r) for r in rows[: limit or None]], more


def show(engine: Any, text: str, scope: Scope | None = None, *, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """One entity by id or unambiguous prefix: ``{"type", "id", "entity", "evidence",
    "evidence_truncated"}``. ``evidence`` lists the events behind it in observed order
    (a session: all its events); ``scope`` narrows which entities match (its project
    and session), which evidence is listed (its time window) and how much (its limit)."""
    ref = resolve_id(engine, text, kinds, scope)
    table, col, _, _ = ENTITIES[ref.kind]
    limit = scope.limit if scope is not None else None
    if ref.kind == "event":
        entity = _rows(engine, f"SELECT {', '.join(EVENT_FIELDS)} FROM events WHERE event_id = ? LIMIT 1",
                       [ref.id])[0]
        attrs = entity.get("attrs")
        if isinstance(attrs, str):
            try:
                entity["attrs"] = orjson.loads(attrs)
            except orjson.JSONDecodeError:
                pass
        from agentlog.projection.ids import derive

        entity["session_id"] = derive("session", entity["provider"], entity["provider_session_id"] or "unknown")
        evidence, more = _event_rows(engine, "event_id = ?", [ref.id], None, None)
        return {"type": ref.kind, "id": ref.display, "entity": plain(entity), "evidence": evidence,
                "evidence_truncated": False}
    row = _rows(engine, f"SELECT * FROM {table} WHERE {col} = ? LIMIT 1", [ref.id])[0]
    if ref.kind == "attempt" and row.get("objective") is None:
        t = _rows(engine, "SELECT objective FROM turns WHERE turn_id = ?", [row["turn_id"]])
        row["objective"] = t[0]["objective"] if t else None
    if ref.kind == "session":
        where = "provider = ? AND " + ("provider_session_id = ?" if row["provider_session_id"] != "unknown"
                                       else "(provider_session_id IS NULL OR provider_session_id = ?)")
        params: list[Any] = [row["provider"], row["provider_session_id"]]
    else:
        ids = list(row.get("evidence") or [])
        if ref.kind == "turn":
            for a in _rows(engine, "SELECT evidence FROM attempts WHERE turn_id = ?", [ref.id]):
                ids += a["evidence"] or []
        corrections = [row[k] for k in ("corrected_by",) if row.get(k)]
        ids = list(dict.fromkeys(ids + corrections))
        if not ids:
            return {"type": ref.kind, "id": ref.display, "entity": plain(row), "evidence": [],
                    "evidence_truncated": False}
        where = f"event_id IN ({', '.join('?' for _ in ids)})"
        params = ids
        # the events of an attempt, a turn or a tool call lie within its span: read only those
        # days' partitions (a correction can come any time later: then every partition)
        span = [] if corrections else partition_days(row.get("started_at"), row.get("ended_at"))
        if span:
            where = f"observed_date IN ({', '.join('?' for _ in span)}) AND {where}"
            params = [*span, *ids]
    evidence, more = _event_rows(engine, where, params, scope, limit)
    return {"type": ref.kind, "id": ref.display, "entity": plain(row), "evidence": evidence,
            "evidence_truncated": more}


__all__ = [
    "AmbiguousId", "BadId", "ENTITIES", "IdError", "Ref", "UnknownId", "failures", "iso", "plain",
    "resolve_id", "scoped", "sessions", "show", "timeline",
]
