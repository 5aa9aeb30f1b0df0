"""AttemptQL execution: a statement (``attemptql.parse``) answered over the engine.

``SHOW target …`` becomes one SQL statement over the projection's views —
``SELECT * FROM (<target>) AS t WHERE <filters> ORDER BY … LIMIT …`` — with
every ``FOR`` value bound as a parameter, never spliced into the text. A
``WHERE`` predicate is SQL by design: it is run, in parentheses, inside the
locked-down engine (read-only, no file access), against the target's
columns. Defaults: ``ORDER BY`` the target's primary time, newest first
(``EVIDENCE FOR`` in observed order), ``LIMIT 100``. ``SINCE``/``UNTIL``
apply to the primary time (``started_at``, ``handoff_at``, ``raised_at``,
``decided_at``, ``corrected_at``, ``retracted_at``, ``committed_at``,
``observed_at``; ``EDGES`` have none). Sessions, turns, tool calls and
attempts that were retracted are hidden unless ``INCLUDING RETRACTED`` (a
note says how many); for the other targets the clause changes nothing.

``TRACE``, ``STATE``, ``DIFF STATE``, ``WHY`` and ``WHAT IS … DOING NOW`` are
answered by :mod:`agentlog.query.state`. ``EXPLAIN`` returns the parsed
statement and the SQL it runs (for a SHOW, DuckDB's plan too; for the
others, the statement is run to record the queries it makes).

Answers are a pure function of the data: "now" (``now``, ``today``,
relative times, WHAT IS … NOW, WHY) defaults to the latest observed event
time in the store; the CLI passes the wall clock instead.

Errors: :class:`~agentlog.query.attemptql.ParseError` for statements that
cannot be parsed or make no sense (a filter the target does not have, DIFF
with t1 ≥ t2; codes ``AQL01xx``/``02xx``/``04xx``, with a position);
:class:`~agentlog.query.state.ResolveError` for ids (``AQL03xx``; it
carries ``position`` too); :class:`~agentlog.query.engine.QueryError` from
the engine (a bad WHERE predicate, a timeout).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Final, Sequence

from agentlog.query import state as st
from agentlog.projection.ids import split_display
from agentlog.query import timeexpr
from agentlog.query.attemptql import (
    Diff,
    Explain,
    Filter,
    ParseError,
    Show,
    State,
    Statement,
    Subject,
    Time,
    Trace,
    WhatIs,
    Why,
    parse,
)

if TYPE_CHECKING:
    from agentlog.query.engine import QueryResult
    from agentlog.query.scope import Scope

__all__ = ["AqlResult", "execute", "execute_statement", "DEFAULT_LIMIT", "TARGET_TABLES"]

DEFAULT_LIMIT: Final = 100
Params = st.Params


@dataclass
class AqlResult:
    """One answer: ``columns`` and ``rows`` (tuples in column order), ``notes``
    for people (hidden rows, truncation, what was not listed), the kind of
    statement, and the SQL a SHOW ran (with its bound ``params``)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    notes: list[str] = field(default_factory=list)
    statement_kind: str = "show"
    sql: str | None = None
    params: list[Any] = field(default_factory=list)
    truncated: bool = False
    seconds: float = 0.0

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts (column → value)."""
        return [dict(zip(self.columns, r)) for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {"statement_kind": self.statement_kind, "columns": self.columns, "rows": self.records(),
                "notes": self.notes, "sql": self.sql, "params": self.params, "truncated": self.truncated}


# --------------------------------------------------------------------------- SHOW targets

Builder = Callable[[Params, str], str]


def _bare(value: str) -> str:
    return split_display(value)[1]


def _like(glob: str) -> str:
    """A ``*`` glob as a LIKE pattern (``\\`` escapes ``%`` and ``_``)."""
    return glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")


def _hex_prefix(value: str) -> str | None:
    b = _bare(value)
    return b if re.fullmatch(r"[0-9a-f-]+", b) and len(b.replace("-", "")) >= 4 else None


def _eq(col: str) -> Builder:
    return lambda p, v: f"{col} = {p(v)}"


def _prefix(*cols: str) -> Builder:
    def build(p: Params, v: str) -> str:
        ph = p(_bare(v))
        return "(" + " OR ".join(f"starts_with({c}, {ph})" for c in cols) + ")"
    return build


def _list_prefix(col: str) -> Builder:
    return lambda p, v: f"len(list_filter({col}, lambda x: starts_with(x, {p(_bare(v))}))) > 0"


def _list_glob(col: str) -> Builder:
    return lambda p, v: f"len(list_filter({col}, lambda x: x LIKE {p(_like(v))} ESCAPE '\\')) > 0"


def _project_match(p: Params, v: str, id_col: str = "project_id", name_col: str = "project_name") -> str:
    parts = [f"{name_col} = {p(v)}"]
    hexp = _hex_prefix(v)
    if hexp is not None:
        parts.append(f"starts_with({id_col}, {p(hexp)})")
    return "(" + " OR ".join(parts) + ")"


def _project_direct(p: Params, v: str) -> str:
    return _project_match(p, v)


def _project_via(col: str) -> Builder:
    return lambda p, v: f"{col} IN (SELECT session_id FROM sessions WHERE {_project_match(p, v)})"


def _agent(provider_col: str, session_col: str) -> Builder:
    def build(p: Params, v: str) -> str:
        return (f"({provider_col} = {p(v)} OR {session_col} IN (SELECT session_id FROM sessions "
                f"WHERE list_contains(agents, {p(_bare(v))})))")
    return build


def _via_calls(col: str, cond: Callable[[Params, str], str]) -> Builder:
    return lambda p, v: f"{col} IN (SELECT {col} FROM tool_calls WHERE {cond(p, v)})"


_TOOL: Final = _eq("tool_name")
_PATHS: Final = _list_glob("paths")


@dataclass(frozen=True)
class _Spec:
    base: str
    time: str | None
    order_id: str
    project: str | None
    """How a project scope applies: ``direct`` (project_id column), ``session:<col>`` (via sessions), or None."""
    session: tuple[str, ...]
    retractable: bool
    filters: dict[str, Builder]
    ascending: bool = False


def _attempt_filters() -> dict[str, Builder]:
    return {
        "project": _project_direct, "provider": _eq("provider"), "agent": _agent("provider", "session_id"),
        "session": _prefix("session_id"), "turn": _prefix("turn_id"), "path": _PATHS, "outcome": _eq("outcome"),
        "status": _eq("outcome"), "tool": _via_calls("attempt_id", _TOOL),
    }


# An attempt with its class as ``class`` and what its failing call said (docs/failures.md):
# ``SHOW FAILED ATTEMPTS WHERE class = 'test_failure' AND tests_failed > 3``.
_ATTEMPTS: Final = (
    "SELECT a.*, a.failure_class AS class, f.failure_evidence, f.result_summary, f.tests_failed, f.tests_passed, "
    "f.failing_tests, f.checker, f.check_errors, f.first_error, f.fixed_by FROM attempts a LEFT JOIN tool_calls f "
    "ON f.end_event_id = a.failing_event_id AND f.session_id = a.session_id"
)

_SPECS: Final[dict[str, _Spec]] = {
    "attempts": _Spec(f"SELECT * FROM ({_ATTEMPTS})", "started_at", "attempt_id", "direct", ("session_id",), True,
                      _attempt_filters()),
    "failed_attempts": _Spec(f"SELECT * FROM ({_ATTEMPTS}) WHERE outcome = 'failed'", "started_at", "attempt_id",
                             "direct", ("session_id",), True, _attempt_filters()),
    "superseded_attempts": _Spec(
        "SELECT a.*, s.outcome AS successor_outcome, s.approach AS successor_approach, "
        "s.started_at AS successor_started_at FROM attempts a LEFT JOIN attempts s ON s.attempt_id = a.superseded_by "
        "WHERE a.superseded_by IS NOT NULL", "started_at", "attempt_id", "direct", ("session_id",), True,
        _attempt_filters()),
    "sessions": _Spec("SELECT * FROM sessions", "started_at", "session_id", "direct", ("session_id",), True, {
        "project": _project_direct, "provider": _eq("provider"),
        "agent": lambda p, v: f"(provider = {p(v)} OR list_contains(agents, {p(_bare(v))}))",
        "session": _prefix("session_id"),
        "turn": lambda p, v: f"session_id IN (SELECT session_id FROM turns WHERE starts_with(turn_id, {p(_bare(v))}))",
        "path": _via_calls("session_id", _PATHS), "tool": _via_calls("session_id", _TOOL),
        "status": lambda p, v: f"(state = {p(v)} OR liveness = {p(v)})",
    }),
    "turns": _Spec("SELECT * FROM turns", "started_at", "turn_id", "direct", ("session_id",), True, {
        "project": _project_direct, "provider": _eq("provider"), "agent": _agent("provider", "session_id"),
        "session": _prefix("session_id"), "turn": _prefix("turn_id"), "path": _via_calls("turn_id", _PATHS),
        "tool": _via_calls("turn_id", _TOOL), "status": _eq("status"), "outcome": _eq("status"),
    }),
    "tool_calls": _Spec("SELECT * FROM tool_calls", "coalesce(started_at, finished_at)", "tool_call_id", "direct",
                        ("session_id",), True, {
        "project": _project_direct, "provider": _eq("provider"),
        "agent": lambda p, v: f"(provider = {p(v)} OR starts_with(agent_id, {p(_bare(v))}))",
        "session": _prefix("session_id"), "turn": _prefix("turn_id"), "path": _PATHS, "tool": _TOOL,
        "outcome": _eq("outcome_status"), "status": _eq("outcome_status"), "kind": _eq("tool_category"),
    }),
    "handoffs": _Spec("SELECT * FROM handoffs", "handoff_at", "handoff_id", "direct", ("from_session", "to_session"),
                      False, {
        "project": _project_direct,
        "provider": lambda p, v: f"(from_provider = {p(v)} OR to_provider = {p(v)})",
        "agent": lambda p, v: (f"(from_provider = {p(v)} OR to_provider = {p(v)} OR from_session IN (SELECT session_id "
                               f"FROM sessions WHERE list_contains(agents, {p(_bare(v))})) OR to_session IN (SELECT "
                               f"session_id FROM sessions WHERE list_contains(agents, {p(_bare(v))})))"),
        "session": _prefix("from_session", "to_session"), "path": _list_glob("shared_paths"),
    }),
    "work_units": _Spec("SELECT * FROM work_units", "started_at", "work_unit_id", "direct", (), False, {
        "project": _project_direct, "provider": lambda p, v: f"list_contains(actors, {p(v)})",
        "agent": lambda p, v: f"list_contains(actors, {p(v)})", "session": _list_prefix("sessions"),
        "turn": _list_prefix("turns"), "path": _PATHS, "status": _eq("status"), "phase": _eq("phase"),
    }),
    "decisions": _Spec("SELECT * FROM decisions", "decided_at", "decision_id", "direct", ("session_id",), False, {
        "project": _project_direct, "provider": _eq("provider"), "agent": _agent("provider", "session_id"),
        "session": _prefix("session_id"), "turn": _prefix("turn_id"), "kind": _eq("kind"),
    }),
    "corrections": _Spec("SELECT * FROM corrections", "corrected_at", "event_id", "session:session_id",
                         ("session_id",), False, {
        "project": _project_via("session_id"), "session": _prefix("session_id"), "status": _eq("status"),
        "kind": _eq("correction_type"), "outcome": _eq("outcome"),
    }),
    "retractions": _Spec("SELECT * FROM retractions", "retracted_at", "event_id", None, (), False, {
        "kind": _eq("target_type"),
        "status": lambda p, v: f"(CASE WHEN matched THEN 'matched' ELSE 'unmatched' END) = {p(v)}",
    }),
    "edges": _Spec("SELECT * FROM edges", None, "edge_kind, from_id, to_id", "edges", ("session_id", "from_id",
                                                                                   "to_id"), False, {
        "kind": _eq("edge_kind"), "session": _prefix("session_id", "from_id", "to_id"),
        "project": lambda p, v: (f"(session_id IN (SELECT session_id FROM sessions WHERE {_project_match(p, v)}) OR "
                                 f"from_id IN (SELECT session_id FROM sessions WHERE {_project_match(p, v)}) OR "
                                 f"from_id IN (SELECT work_unit_id FROM work_units WHERE {_project_match(p, v)}))"),
    }, ascending=True),
    "signals": _Spec("SELECT * FROM signals", "raised_at", "signal_id", "direct", ("session_id",), False, {
        "project": _project_direct, "provider": _eq("provider"), "agent": _agent("provider", "session_id"),
        "session": _prefix("session_id"), "kind": lambda p, v: f"(kind = {p(v)} OR signal_type = {p(v)})",
        "status": lambda p, v: f"(CASE WHEN pending THEN 'pending' ELSE 'cleared' END) = {p(v)}",
    }),
    "commits": _Spec("SELECT * FROM commits", "committed_at", "commit_id", "direct", ("session_id",), False, {
        "project": _project_direct, "provider": _eq("provider"), "agent": _agent("provider", "session_id"),
        "session": _prefix("session_id"), "turn": _prefix("turn_id"), "kind": _eq("linkage"),
    }),
    "conflicts": _Spec("SELECT * FROM conflicts", "started_at", "conflict_id", "direct", (), False, {
        "project": _project_direct, "path": _PATHS,
        "session": lambda p, v: (f"(first_work_unit IN (SELECT work_unit_id FROM work_units WHERE len(list_filter("
                                 f"sessions, lambda x: starts_with(x, {p(_bare(v))}))) > 0) OR second_work_unit IN "
                                 f"(SELECT work_unit_id FROM work_units WHERE len(list_filter(sessions, lambda x: "
                                 f"starts_with(x, {p(_bare(v))}))) > 0))"),
    }),
}
_EVIDENCE_FILTERS: Final[dict[str, Builder]] = {
    "project": lambda p, v: f"project_name = {p(v)}", "provider": _eq("provider"), "kind": _eq("kind"),
    "tool": _TOOL, "path": _PATHS, "outcome": _eq("outcome_status"), "status": _eq("outcome_status"),
}

TARGET_TABLES: Final[dict[str, str]] = {
    "attempts": "attempts", "failed_attempts": "attempts", "superseded_attempts": "attempts",
    "sessions": "sessions", "turns": "turns", "tool_calls": "tool_calls", "handoffs": "handoffs",
    "work_units": "work_units", "decisions": "decisions", "corrections": "corrections",
    "retractions": "retractions", "edges": "edges", "signals": "signals", "commits": "commits",
    "conflicts": "conflicts", "evidence": "events",
}
"""The view each SHOW target reads."""

_TARGET_WORDS: Final[dict[str, str]] = {
    "failed_attempts": "FAILED ATTEMPTS", "superseded_attempts": "SUPERSEDED ATTEMPTS", "tool_calls": "TOOL CALLS",
    "work_units": "WORK UNITS", "evidence": "EVIDENCE FOR",
}

# Where each entity's evidence list lives, for EVIDENCE FOR.
_EVIDENCE_OF: Final[dict[str, tuple[str, str]]] = {k: v for k, v in st.ID_SPACES.items() if k != "event"}


def _target_name(target: str) -> str:
    return _TARGET_WORDS.get(target, target.upper())


# --------------------------------------------------------------------------- context


@dataclass
class _Ctx:
    engine: st.Runner
    now: int
    scope: Scope | None
    current_project: list[str] | None
    max_rows: int
    timeout: float


def _time(ctx: _Ctx, t: Time) -> int:
    try:
        return timeexpr.resolve(t.text, ctx.now)
    except timeexpr.TimeError as e:
        raise ParseError(f"{e} at {t.position}", t.position, "AQL0210") from None


def _resolve(ctx: _Ctx, subject: Subject, kinds: Sequence[str]) -> tuple[str, str]:
    """``(kind, id)`` of an entity subject (kind checked against ``kinds``)."""
    if subject.kind in ("project", "agent"):
        raise ParseError(f"{subject.kind} is not an entity id here at {subject.position}; expected "
                         + ", ".join(k.replace("_", " ") for k in kinds), subject.position, "AQL0411")
    wanted = list(kinds) if subject.kind == "id" else [subject.kind]
    if subject.kind != "id" and subject.kind not in kinds:
        raise ParseError(f"a {subject.kind.replace('_', ' ')} cannot be used here at {subject.position}; expected "
                         + ", ".join(k.replace("_", " ") for k in kinds), subject.position, "AQL0411")
    try:
        return st.resolve_id(ctx.engine, subject.value or "", wanted)
    except st.ResolveError as e:
        e.position = subject.position
        raise


def _projects(ctx: _Ctx, subject: Subject) -> list[str] | None:
    """Project ids a ``project [name]`` subject names (None: every project)."""
    if subject.value is None:
        if ctx.current_project is not None:
            return ctx.current_project
        return ctx.scope.project_ids if ctx.scope is not None else None
    from agentlog.query.scope import resolve_projects

    found = resolve_projects(ctx.engine, subject.value, False)
    if not found.project_ids:
        err = st.ResolveError(f"no recorded project matches {subject.value[:40]!r}", "AQL0301")
        err.position = subject.position
        raise err
    return found.project_ids


@dataclass
class _Focus:
    """What a subject narrows a STATE / DIFF / WHAT IS to."""

    scope: Scope | None
    session_ids: list[str] | None = None
    work_unit_ids: list[str] | None = None
    provider: str | None = None
    label: str = "everything in scope"


def _session_of(ctx: _Ctx, kind: str, ident: str) -> str:
    p = Params()
    if kind == "event":
        sql = (f"SELECT s.session_id FROM events e JOIN sessions s ON s.provider = e.provider AND "
               f"s.provider_session_id = coalesce(e.provider_session_id, 'unknown') WHERE e.event_id = {p(ident)}")
    else:
        table, col = st.ID_SPACES[kind]
        sql = f"SELECT session_id FROM {table} WHERE {col} = {p(ident)}"
    rows = ctx.engine.run(sql + " LIMIT 1", p.values).rows
    if not rows or rows[0][0] is None:
        raise st.ResolveError(f"the {kind.replace('_', ' ')} {ident[:13]}… belongs to no session", "AQL0305")
    return str(rows[0][0])


def _focus(ctx: _Ctx, subject: Subject | None) -> _Focus:
    from agentlog.query.scope import Scope

    if subject is None:
        return _Focus(ctx.scope)
    if subject.kind == "project":
        ids = _projects(ctx, subject)
        base = ctx.scope or Scope()
        return _Focus(Scope(project_ids=ids, session=base.session), label=f"project {subject.value or '(current)'}")
    if subject.kind == "agent":
        v = subject.value or ""
        providers = {r[0] for r in ctx.engine.run("SELECT DISTINCT provider FROM sessions").rows}
        if v in providers:
            return _Focus(ctx.scope, provider=v, label=f"agent {v}")
        p = Params()
        rows = ctx.engine.run(f"SELECT session_id FROM sessions WHERE list_contains(agents, {p(_bare(v))})",
                              p.values).rows
        if not rows:
            err = st.ResolveError(f"no provider or agent {v[:40]!r}", "AQL0301")
            err.position = subject.position
            raise err
        return _Focus(ctx.scope, session_ids=[r[0] for r in rows], label=f"agent {v}")
    kind, ident = _resolve(ctx, subject, ("session", "work_unit", "attempt", "turn", "tool_call", "event"))
    if kind == "work_unit":
        p = Params()
        rows = ctx.engine.run(f"SELECT sessions FROM work_units WHERE work_unit_id = {p(ident)}", p.values).rows
        return _Focus(ctx.scope, session_ids=list(rows[0][0] or []) if rows else [], work_unit_ids=[ident],
                      label=f"work unit {ident}")
    sid = ident if kind == "session" else _session_of(ctx, kind, ident)
    return _Focus(ctx.scope, session_ids=[sid], label=f"session {sid}")


def _rows(columns: Sequence[str], records: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(c) for c in columns) for r in records]


# --------------------------------------------------------------------------- execution


def execute(engine: st.Runner, text: str, *, now_us: int | None = None, scope: Scope | None = None,
            current_project: list[str] | None = None, max_rows: int = 10_000, timeout: float = 30.0) -> AqlResult:
    """Parse and answer one AttemptQL statement.

    ``now_us`` is what ``now`` and relative times mean (default: the latest
    observed event time, so answers depend on the data only); ``scope``
    restricts every answer (projects, session, and for SHOW since/until and
    the default LIMIT); ``current_project`` is what a bare ``project`` names
    (default: the scope's projects, else every project).
    """
    return execute_statement(engine, parse(text), now_us=now_us, scope=scope, current_project=current_project,
                             max_rows=max_rows, timeout=timeout)


def execute_statement(engine: st.Runner, stmt: Statement, *, now_us: int | None = None, scope: Scope | None = None,
                      current_project: list[str] | None = None, max_rows: int = 10_000,
                      timeout: float = 30.0) -> AqlResult:
    """Answer an already parsed statement (see :func:`execute`)."""
    started = time.perf_counter()
    now = now_us if now_us is not None else (st.latest_event_us(engine) or 0)
    ctx = _Ctx(engine, now, scope, current_project, max_rows, timeout)
    result = _explain(ctx, stmt.statement) if isinstance(stmt, Explain) else _answer(ctx, stmt)
    result.seconds = time.perf_counter() - started
    return result


def _answer(ctx: _Ctx, stmt: Statement) -> AqlResult:
    if isinstance(stmt, Show):
        sql, params, notes, count_sql = _show_sql(ctx, stmt)
        return _run_show(ctx, stmt, sql, params, notes, count_sql)
    if isinstance(stmt, Trace):
        return _trace(ctx, stmt)
    if isinstance(stmt, State):
        return _state(ctx, stmt)
    if isinstance(stmt, Diff):
        return _diff(ctx, stmt)
    if isinstance(stmt, Why):
        return _why(ctx, stmt)
    if isinstance(stmt, WhatIs):
        return _what_is(ctx, stmt)
    raise ParseError("EXPLAIN cannot be nested", 0, "AQL0202")


# -- SHOW


def _show_sql(ctx: _Ctx, stmt: Show) -> tuple[str, list[Any], list[str], str | None]:
    """(sql, params, notes, sql counting hidden retracted rows or None)."""
    p = Params()
    notes: list[str] = []
    if stmt.target == "evidence":
        assert stmt.subject is not None
        spec = _evidence_spec(ctx, stmt.subject, p)
        notes.append(f"the events' JSON ({', '.join(EVIDENCE_OMITTED)}) is left out; "
                     "`agentlog sql` reads it from the events table")
    else:
        spec = _SPECS[stmt.target]
    conds: list[str] = []
    for f in stmt.filters:
        conds.append(_filter(spec, stmt, f, p))
    if stmt.between is not None:
        conds.append(_between(stmt.between, p))
    if stmt.where:
        conds.append(f"({stmt.where})")
    time_col = spec.time
    if (stmt.since is not None or stmt.until is not None) and time_col is None:
        pos = (stmt.since or stmt.until).position  # type: ignore[union-attr]
        raise ParseError(f"SHOW {_target_name(stmt.target)} has no time column for SINCE/UNTIL at {pos}", pos,
                         "AQL0412")
    if stmt.since is not None:
        conds.append(f"{time_col} >= make_timestamptz({p(_time(ctx, stmt.since))})")
    if stmt.until is not None:
        conds.append(f"{time_col} < make_timestamptz({p(_time(ctx, stmt.until))})")
    conds += _show_scope(ctx, spec, p, notes)
    hidden_conds = list(conds)
    if spec.retractable and not stmt.including_retracted:
        conds.append("NOT retracted")
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    if stmt.order_by is not None:
        direction = "DESC" if stmt.descending else "ASC"
        order = f'"{stmt.order_by}" {direction} NULLS LAST, {spec.order_id}'
    elif time_col is not None:
        direction = "ASC" if spec.ascending else "DESC"
        order = f"{time_col} {direction} NULLS LAST, {spec.order_id}"
    else:
        order = spec.order_id
    limit = stmt.limit or (ctx.scope.limit if ctx.scope is not None and ctx.scope.limit else None) or DEFAULT_LIMIT
    sql = f"SELECT * FROM ({spec.base}) AS t{where} ORDER BY {order} LIMIT {p(limit)}"
    count_sql = None
    if spec.retractable and not stmt.including_retracted:
        hw = " AND ".join([*hidden_conds, "retracted"])
        count_sql = f"SELECT count(*) FROM ({spec.base}) AS t WHERE {hw}"
    return sql, p.values, notes, count_sql


# The sessions an entity's evidence comes from (SQL with one ``{id}`` placeholder), to bound the
# events scanned by day: the events table is partitioned by observed_date.
_SESSIONS_OF: Final[dict[str, str]] = {
    "session": "SELECT {id} AS session_id",
    "work_unit": "SELECT unnest(sessions) FROM work_units WHERE work_unit_id = {id}",
    "conflict": ("SELECT unnest(sessions) FROM work_units WHERE work_unit_id IN (SELECT first_work_unit FROM "
                 "conflicts WHERE conflict_id = {id} UNION ALL SELECT second_work_unit FROM conflicts "
                 "WHERE conflict_id = {id})"),
}
EVIDENCE_OMITTED: Final = ("event", "content", "raw")
"""Columns SHOW EVIDENCE FOR leaves out: the event's JSON (read them with SQL)."""


def _evidence_spec(ctx: _Ctx, subject: Subject, p: Params) -> _Spec:
    kind, ident = _resolve(ctx, subject, tuple(st.ID_SPACES))
    cols = f"SELECT * EXCLUDE ({', '.join(EVIDENCE_OMITTED)}) FROM events"
    if kind == "event":
        base = f"{cols} WHERE event_id = {p(ident)}"
    else:
        table, col = _EVIDENCE_OF[kind]
        base = f"{cols} WHERE event_id IN (SELECT unnest(evidence) FROM {table} WHERE {col} = {p(ident)})"
        q = Params()
        of = _SESSIONS_OF.get(kind, f"SELECT session_id FROM {table} WHERE {col} = {{id}}").format(id=q(ident))
        days = ctx.engine.run(
            "SELECT min(started_at)::DATE - 1, max(coalesce(ended_at, last_event_at))::DATE + 1 FROM sessions "
            f"WHERE session_id IN ({of})", q.values).rows
        if days and days[0][0] is not None:
            base += f" AND observed_date BETWEEN {p(days[0][0])} AND {p(days[0][1])}"
    return _Spec(base, "observed_at", "seq, event_id", "events", (), False, _EVIDENCE_FILTERS, ascending=True)


def _filter(spec: _Spec, stmt: Show, f: Filter, p: Params) -> str:
    build = spec.filters.get(f.field)
    if build is None:
        applies = sorted(_target_name(t) for t, s in _SPECS.items() if f.field in s.filters)
        raise ParseError(f"filter {f.field!r} does not apply to SHOW {_target_name(stmt.target)} at {f.position}"
                         + (f"; it applies to {', '.join(applies)}" if applies else ""), f.position, "AQL0407",
                         sorted(spec.filters))
    return build(p, f.value)


def _between(between: tuple[tuple[str, str], tuple[str, str]], p: Params) -> str:
    def side(end: str, fv: tuple[str, str]) -> str:
        field_, value = fv
        if field_ == "provider":
            return f"{end}_provider = {p(value)}"
        return (f"({end}_provider = {p(value)} OR {end}_session IN (SELECT session_id FROM sessions "
                f"WHERE list_contains(agents, {p(_bare(value))})))")

    a, b = between
    return f"(({side('from', a)} AND {side('to', b)}) OR ({side('from', b)} AND {side('to', a)}))"


def _show_scope(ctx: _Ctx, spec: _Spec, p: Params, notes: list[str]) -> list[str]:
    scope = ctx.scope
    out: list[str] = []
    if scope is None:
        return out
    if scope.project_ids is not None:
        ids = p.many(scope.project_ids)
        if spec.project == "direct":
            out.append(f"project_id IN {ids}")
        elif spec.project and spec.project.startswith("session:"):
            column = spec.project.split(":", 1)[1]
            out.append(f"{column} IN (SELECT session_id FROM sessions WHERE project_id IN {ids})")
        elif spec.project == "edges":
            out.append(f"(session_id IN (SELECT session_id FROM sessions WHERE project_id IN {ids}) OR from_id IN "
                       f"(SELECT session_id FROM sessions WHERE project_id IN {ids}) OR from_id IN "
                       f"(SELECT work_unit_id FROM work_units WHERE project_id IN {ids}))")
        elif spec.project == "events":
            out.append(f"project_name IN (SELECT DISTINCT project_name FROM sessions WHERE project_id IN {ids})")
        else:
            notes.append("this target has no project: the project scope does not apply")
    if scope.session:
        if spec.session:
            ph = p(split_display(scope.session)[1])
            out.append("(" + " OR ".join(f"starts_with({c}, {ph})" for c in spec.session) + ")")
        elif "session" in spec.filters:
            out.append(spec.filters["session"](p, scope.session))
    if spec.time is not None:
        if scope.since_us is not None:
            out.append(f"{spec.time} >= make_timestamptz({p(scope.since_us)})")
        if scope.until_us is not None:
            out.append(f"{spec.time} < make_timestamptz({p(scope.until_us)})")
    return out


def _run_show(ctx: _Ctx, stmt: Show, sql: str, params: list[Any], notes: list[str],
              count_sql: str | None) -> AqlResult:
    limit = stmt.limit or (ctx.scope.limit if ctx.scope is not None and ctx.scope.limit else None) or DEFAULT_LIMIT
    cap = min(limit, ctx.max_rows)
    res: QueryResult = ctx.engine.run(sql, params or None, timeout=ctx.timeout, max_rows=cap)
    notes = list(notes)
    if res.truncated:
        notes.append(f"cut at {cap} rows (max rows)")
    elif len(res.rows) == limit:
        notes.append(f"showing the first {limit} rows (LIMIT {limit}); there may be more")
    if count_sql is not None:
        hidden = ctx.engine.run(count_sql, params[:-1] or None, timeout=ctx.timeout).rows[0][0]
        if hidden:
            notes.append(f"{hidden} retracted row{'s' if hidden != 1 else ''} hidden (INCLUDING RETRACTED shows "
                         f"{'them' if hidden != 1 else 'it'})")
    return AqlResult(res.columns, list(res.rows), notes, "show", sql, params, res.truncated)


# -- the others


def _trace(ctx: _Ctx, stmt: Trace) -> AqlResult:
    kinds = st.TRACE_KINDS if stmt.subject.kind == "id" else (stmt.subject.kind,)
    if stmt.subject.kind in ("project", "agent") or stmt.subject.kind not in (*st.TRACE_KINDS, "id"):
        raise ParseError(f"TRACE starts from an entity id (attempt, event, session, turn, tool call, work unit), not "
                         f"a {stmt.subject.kind.replace('_', ' ')} at {stmt.subject.position}", stmt.subject.position,
                         "AQL0411")
    depth = stmt.depth or 10
    try:
        rows = st.trace(ctx.engine, stmt.subject.value or "", depth, stmt.direction or "up", kinds=kinds)
    except st.ResolveError as e:
        e.position = stmt.subject.position
        raise
    notes = []
    cut = [r for r in rows if r["edge_kind"] == "depth_limit"]
    if cut:
        notes.append(f"the trace continues past DEPTH {depth} at {len(cut)} node{'s' if len(cut) != 1 else ''} "
                     "(depth_limit rows)")
    if not rows:
        notes.append("no causal edge touches this entity in that direction")
    return AqlResult(list(st.TRACE_COLUMNS), _rows(st.TRACE_COLUMNS, rows), notes, "trace")


def _state(ctx: _Ctx, stmt: State) -> AqlResult:
    at = _time(ctx, stmt.at)
    focus = _focus(ctx, stmt.subject)
    snap = st.state_at(ctx.engine, at, focus.scope, session_ids=focus.session_ids,
                       work_unit_ids=focus.work_unit_ids, provider=focus.provider)
    records = [st.flatten_session(s) for s in snap.sessions] + [st.flatten_work_unit(u) for u in snap.work_units]
    notes = [f"state at {timeexpr.format_us(at)}", *snap.notes]
    if not records:
        notes.append("no session had started and not ended, and no work unit was open, at that instant")
    return AqlResult(list(st.STATE_COLUMNS), _rows(st.STATE_COLUMNS, records), notes, "state")


def _diff(ctx: _Ctx, stmt: Diff) -> AqlResult:
    t1, t2 = _time(ctx, stmt.first), _time(ctx, stmt.second)
    if t1 >= t2:
        raise ParseError(f"DIFF STATE needs the first time before the second at {stmt.first.position} "
                         f"({timeexpr.format_us(t1)} is not before {timeexpr.format_us(t2)})", stmt.first.position,
                         "AQL0408")
    focus = _focus(ctx, stmt.subject)
    rows = st.diff_state(ctx.engine, t1, t2, focus.scope, session_ids=focus.session_ids,
                         work_unit_ids=focus.work_unit_ids, provider=focus.provider)
    notes = [f"from {timeexpr.format_us(t1)} to {timeexpr.format_us(t2)}"]
    if not rows:
        notes.append("nothing changed")
    return AqlResult(list(st.DIFF_COLUMNS), _rows(st.DIFF_COLUMNS, rows), notes, "diff")


_FAILED_LIMIT: Final = 20


def _why(ctx: _Ctx, stmt: Why) -> AqlResult:
    subject = stmt.subject
    if stmt.state == "blocked":
        if subject.kind == "project":
            rows = st.why_blocked(ctx.engine, "project", _projects(ctx, subject), now_us=ctx.now)
        elif subject.kind == "agent":
            raise ParseError(f"WHY … BLOCKED takes a project, a session or a work unit at {subject.position}",
                             subject.position, "AQL0411")
        else:
            kind, ident = _resolve(ctx, subject, ("session", "work_unit", "attempt", "turn", "tool_call"))
            if kind == "work_unit":
                rows = st.why_blocked(ctx.engine, "work_unit", ident, now_us=ctx.now)
            else:
                sid = ident if kind == "session" else _session_of(ctx, kind, ident)
                rows = st.why_blocked(ctx.engine, "session", sid, now_us=ctx.now)
        return AqlResult(list(st.WHY_COLUMNS), _rows(st.WHY_COLUMNS, rows), [], "why")
    # FAILED
    if subject.kind == "agent":
        raise ParseError(f"WHY … FAILED takes an attempt, a turn, a session or a project at {subject.position}",
                         subject.position, "AQL0411")
    p = Params()
    if subject.kind == "project":
        ids = _projects(ctx, subject)
        cond = f"project_id IN {p.many(ids)}" if ids is not None else "TRUE"
        label = "the project" if ids is not None else "any project"
    else:
        kind, ident = _resolve(ctx, subject, ("attempt", "turn", "session"))
        if kind == "attempt":
            rows = st.why_failed(ctx.engine, ident)
            return AqlResult(list(st.WHY_COLUMNS), _rows(st.WHY_COLUMNS, rows), [], "why")
        cond = f"{kind}_id = {p(ident)}"
        label = f"the {kind}"
    found = ctx.engine.run(f"SELECT attempt_id FROM attempts WHERE {cond} AND NOT retracted AND outcome IN "
                           f"('failed', 'superseded') ORDER BY started_at DESC, attempt_id LIMIT {_FAILED_LIMIT + 1}",
                           p.values or None).rows
    notes: list[str] = []
    if len(found) > _FAILED_LIMIT:
        notes.append(f"the {_FAILED_LIMIT} latest failed attempts of {label}; name one attempt for the rest")
        found = found[:_FAILED_LIMIT]
    rows = [r for (aid,) in found for r in st.why_failed(ctx.engine, str(aid))]
    if not rows:
        rows = [{"subject_type": subject.kind, "subject_id": subject.value, "session_id": None, "claim": None,
                 "confidence": None, "uncertainty": {"reason": "insufficient_evidence",
                                                     "note": f"no failed or superseded attempt in {label}"},
                 "evidence": [], "rule": None}]
    return AqlResult(list(st.WHY_COLUMNS), _rows(st.WHY_COLUMNS, rows), notes, "why")


def _what_is(ctx: _Ctx, stmt: WhatIs) -> AqlResult:
    focus = _focus(ctx, stmt.subject)
    rows = st.what_is_doing_now(ctx.engine, ctx.now, focus.scope, session_ids=focus.session_ids,
                                work_unit_ids=focus.work_unit_ids, provider=focus.provider)
    return AqlResult(list(st.STATE_COLUMNS), _rows(st.STATE_COLUMNS, rows),
                     [f"now = {timeexpr.format_us(ctx.now)}"], "what_is")


# -- EXPLAIN


class _Recorder:
    """An engine that records every statement it runs (EXPLAIN of non-SHOW statements)."""

    def __init__(self, engine: st.Runner) -> None:
        self.__wrapped__ = getattr(engine, "__wrapped__", engine)
        self._engine = engine
        self.queries: list[tuple[str, list[Any]]] = []

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = 30.0,
            max_rows: int = 10_000) -> QueryResult:
        self.queries.append((sql, list(params or [])))
        return self._engine.run(sql, params, timeout=timeout, max_rows=max_rows)


def _explain(ctx: _Ctx, stmt: Statement) -> AqlResult:
    rows: list[tuple[Any, ...]] = [("statement", repr(stmt)), ("kind", type(stmt).__name__.lower())]
    notes: list[str] = []
    if isinstance(stmt, Show):
        sql, params, show_notes, count_sql = _show_sql(ctx, stmt)
        rows.append(("sql", sql))
        rows.append(("params", json.dumps(params, default=str)))
        if count_sql is not None:
            rows.append(("sql (hidden retracted rows)", count_sql))
        plan = ctx.engine.run("EXPLAIN " + sql, params or None, timeout=ctx.timeout)
        rows.append(("plan", "\n".join(str(r[-1]) for r in plan.rows)))
        notes.extend(show_notes)
        return AqlResult(["item", "value"], rows, notes, "explain", sql, params)
    recorder = _Recorder(ctx.engine)
    inner = _answer(_Ctx(recorder, ctx.now, ctx.scope, ctx.current_project, ctx.max_rows, ctx.timeout), stmt)
    rows.append(("answered by", f"agentlog.query.state ({inner.statement_kind}): {len(inner.rows)} rows"))
    for i, (sql, params) in enumerate(recorder.queries, 1):
        rows.append((f"sql {i}", sql))
        if params:
            rows.append((f"params {i}", json.dumps(params, default=str)))
    notes.append("EXPLAIN ran the statement to list the queries it makes")
    return AqlResult(["item", "value"], rows, notes, "explain", None)
