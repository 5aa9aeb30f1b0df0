"""What the dashboard's team pages show, read from the team's tables (issue 31, docs/team.md).

The pages exist only while the data root's ``team_url`` setting names the tables
(:func:`team_url`). Every answer is read through the team's DuckDB engine
(:class:`agentlog.team.duck.TeamDuck`: read-only at the engine) with fixed statements:
a filter picks constant clauses and binds its values as parameters (``$1``, ``$2`` …),
so nothing a person types is ever written into SQL. Only the metadata columns
(``team/tables.py``) are read, so the pages work on ``--metadata-only`` tables too.

The tables are remote and may be slow or unreachable: each answer is remembered for
:data:`TTL` seconds (:class:`TeamCache`; a failure for :data:`ERROR_TTL`), so a page
view does not read every table again, and any failure to read them is a
:class:`TeamUnavailable` whose message the page shows.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Final, Mapping

from agentlog.core import AgentlogError, UsageError
from agentlog.web.data import PAGE

TTL: Final = 30.0
"""Seconds an answer read from the team tables is shown again without reading them."""
ERROR_TTL: Final = 5.0
"""Seconds a failure to read them is shown again without trying."""
TIMEOUT: Final = 20.0
"""Seconds a page waits for the team tables (each statement's budget too)."""
MAX_FILTER: Final = 200
_DAY: Final = re.compile(r"^\d{4}-\d\d-\d\d$")


class TeamUnavailable(AgentlogError):
    """The team tables cannot be read or did not answer (the message says why)."""


class BadFilter(UsageError, ValueError):
    """A filter the team pages do not take (the message says which)."""


def team_url(root: str) -> str:
    """The data root's ``team_url`` setting ('' when unset or the config cannot be read)."""
    from agentlog.core.config import ConfigError, load

    try:
        return str(load(root).get("team_url") or "").strip()
    except (ConfigError, OSError):
        return ""


# -- filters --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """What a team page is narrowed to (each None: everything)."""

    machine: str | None = None
    provider: str | None = None
    project: str | None = None
    since: str | None = None
    """The first day (YYYY-MM-DD), inclusive."""
    until: str | None = None
    """The last day (YYYY-MM-DD), inclusive."""

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        """The filters of a request's query string; a day that is not YYYY-MM-DD, or a value
        longer than :data:`MAX_FILTER`, is a :class:`BadFilter`."""
        got: dict[str, str | None] = {}
        for name in ("machine", "provider", "project", "since", "until"):
            value = (query.get(name) or "").strip()
            if len(value) > MAX_FILTER:
                raise BadFilter(f"{name} is at most {MAX_FILTER} characters")
            if value and name in ("since", "until") and not _valid_day(value):
                raise BadFilter(f"{name} is a day, YYYY-MM-DD, not {value!r}")
            got[name] = value or None
        return cls(**got)

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)

    def where(self, alias: str = "", *, project: str = "project_name") -> tuple[str, list[Any]]:
        """The SQL condition these filters make on a team table (``alias.`` before its
        columns) and the values it binds, in order, as ``$1``, ``$2`` …; the clauses are
        constants of this function, the values only ever parameters."""
        clauses = {"machine": "{a}machine = ${n}", "provider": "{a}provider = ${n}",
                   "project": "{a}" + project + " = ${n}", "since": "{a}day >= CAST(${n} AS DATE)",
                   "until": "{a}day <= CAST(${n} AS DATE)"}
        parts: list[str] = []
        params: list[Any] = []
        for name, clause in clauses.items():
            value = getattr(self, name)
            if value is not None:
                params.append(value)
                parts.append(clause.format(a=alias + "." if alias else "", n=len(params)))
        return (" AND ".join(parts) or "TRUE"), params


def _valid_day(text: str) -> bool:
    from datetime import date

    if not _DAY.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


# -- reading, remembered ----------------------------------------------------------------------------


class TeamCache:
    """Answers read from the team tables, each kept for :data:`TTL` seconds (a failure for
    :data:`ERROR_TTL`), keyed by the tables' URL and what was asked. Two requests for the same
    answer meanwhile may both read it: the tables are read-only here, so that costs time only."""

    def __init__(self, ttl: float = TTL, error_ttl: float = ERROR_TTL) -> None:
        self.ttl = ttl
        self.error_ttl = error_ttl
        self._lock = threading.Lock()
        self._items: dict[tuple[Any, ...], tuple[float, Any, str | None]] = {}
        """key → (when read, the answer, or the failure's message)"""

    def get(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """The answer under ``key``, remembered, else ``compute()`` (a :class:`TeamUnavailable`
        from it is remembered and raised again)."""
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and time.monotonic() - hit[0] < (self.ttl if hit[2] is None else self.error_ttl):
            if hit[2] is not None:
                raise TeamUnavailable(hit[2])
            return hit[1]
        try:
            value = compute()
        except TeamUnavailable as e:
            self._put(key, (time.monotonic(), None, str(e)))
            raise
        self._put(key, (time.monotonic(), value, None))
        return value

    def _put(self, key: tuple[Any, ...], item: tuple[float, Any, str | None]) -> None:
        with self._lock:
            if len(self._items) > 500:  # many distinct filters: forget the old ones
                now = time.monotonic()
                self._items = {k: v for k, v in self._items.items() if now - v[0] < max(self.ttl, self.error_ttl)}
            self._items[key] = item


def read(url: str, fn: Callable[[Any], Any]) -> Any:
    """``fn(runner)`` on a fresh DuckDB engine over the team tables at ``url``; any failure to
    reach or read them, or a statement out of time, is a :class:`TeamUnavailable`."""
    from agentlog.query.engine import QueryError
    from agentlog.team import TeamError
    from agentlog.team.location import Location
    from agentlog.team.query import open_engine

    try:
        runner = open_engine(Location.parse(url), "duckdb")
    except TeamError as e:
        raise TeamUnavailable(str(e)) from None
    try:
        return fn(runner)
    except TeamError as e:
        raise TeamUnavailable(str(e)) from None
    except QueryError as e:
        raise TeamUnavailable(f"the team tables did not answer: {e}") from None
    finally:
        runner.close()


def _rows(runner: Any, sql: str, params: list[Any] | None = None, max_rows: int = 10_000) -> list[dict[str, Any]]:
    from agentlog.query.ask import cell

    res = runner.run(sql, params or [], timeout=TIMEOUT, max_rows=max_rows)
    return [{c: cell(v) for c, v in zip(res.columns, r)} for r in res.rows]


# -- the pages ------------------------------------------------------------------------------------


def overview(runner: Any) -> dict[str, Any]:
    """Every machine that published: its host, sessions (by agent), events, failures and
    when it was last active."""
    sessions = _rows(runner, "SELECT machine, any_value(host) AS host, count(*) AS sessions, "
                             "sum(failure_count) AS failures, min(started_at) AS first_session_at, "
                             "max(coalesce(last_activity_at, started_at)) AS last_activity_at, "
                             "string_agg(DISTINCT provider, ', ' ORDER BY provider) AS agents, "
                             "count(DISTINCT project_name) AS projects "
                             "FROM sessions WHERE NOT retracted GROUP BY machine")
    events = _rows(runner, "SELECT machine, count(*) AS events, max(observed_at) AS last_event_at "
                           "FROM events GROUP BY machine")
    by: dict[str, dict[str, Any]] = {}
    for r in sessions:
        by[r["machine"]] = {**r, "events": 0, "last_event_at": None}
    for r in events:
        row = by.setdefault(r["machine"], {"machine": r["machine"], "host": None, "sessions": 0, "failures": 0,
                                           "first_session_at": None, "last_activity_at": None, "agents": "",
                                           "projects": 0})
        row.update(events=r["events"], last_event_at=r["last_event_at"])
    machines = sorted(by.values(), key=lambda r: str(r.get("last_event_at") or r.get("last_activity_at") or ""),
                      reverse=True)
    totals = {"machines": len(machines), "sessions": sum(r["sessions"] or 0 for r in machines),
              "events": sum(r["events"] or 0 for r in machines)}
    return {"machines": machines, "totals": totals}


def choices(runner: Any) -> dict[str, list[str]]:
    """The machines, agents and projects there are (for the filter forms)."""
    rows = _rows(runner, "SELECT DISTINCT machine, provider, project_name FROM sessions WHERE NOT retracted",
                 max_rows=5000)
    return {k: sorted({str(r[c]) for r in rows if r[c] is not None})[:500]
            for k, c in (("machines", "machine"), ("providers", "provider"), ("projects", "project_name"))}


def sessions(runner: Any, filters: Filters, page: int = 0) -> dict[str, Any]:
    """A page of sessions, newest first, narrowed by ``filters``."""
    where, params = filters.where()
    n = len(params)
    rows = _rows(runner, "SELECT machine, host, session_id, provider, project_name, started_at, last_activity_at, "
                         "liveness, event_count, turn_count, tool_call_count, failure_count, day "
                         f"FROM sessions WHERE NOT retracted AND {where} "
                         f"ORDER BY started_at DESC NULLS LAST, machine, session_id LIMIT ${n + 1} OFFSET ${n + 2}",
                 [*params, PAGE + 1, page * PAGE])
    return {"sessions": rows[:PAGE], "page": page, "more": len(rows) > PAGE, "filters": filters.to_dict()}


_BREAKDOWNS: Final = ("machine", "provider", "model", "project", "day")
# grouping() over the five keys has a bit set for each key not grouped on (machine 16 … day 1)
_GROUPING: Final = {31 - (1 << (4 - i)): k for i, k in enumerate(_BREAKDOWNS)}


def _split(rows: list[dict[str, Any]], sort: Callable[[dict[str, Any]], Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``GROUPING SETS`` over :data:`_BREAKDOWNS` as one list per key (each row keyed ``key``)."""
    by: dict[str, list[dict[str, Any]]] = {k: [] for k in _BREAKDOWNS}
    for r in rows:
        name = _GROUPING[r.pop("g")]
        key = r[name]
        for k in _BREAKDOWNS:
            r.pop(k, None)
        by[name].append({"key": key if key is not None else "?", **r})
    return {k: (sorted(v, key=lambda r: str(r["key"]))[-60:] if k == "day" else sorted(v, key=sort)[:30])
            for k, v in by.items()}


_SESSION_MODEL: Final = (
    # each session's model: the one its events name most often (a hook payload names it now and then)
    "m AS (SELECT machine, provider_session_id, mode(model) AS model FROM events "
    "WHERE model IS NOT NULL GROUP BY machine, provider_session_id), "
    "s AS (SELECT s.machine, s.session_id, m.model FROM sessions s LEFT JOIN m "
    "ON m.machine = s.machine AND m.provider_session_id = s.provider_session_id)"
)


def failures(runner: Any, filters: Filters) -> dict[str, Any]:
    """Attempts and tool calls, and how many failed, by machine, agent, model, project and day;
    the failure classes and the command categories that fail most; the latest failed attempts."""
    aw, params = filters.where("a")
    cw, _ = filters.where("c")
    rows = _rows(runner, f"WITH {_SESSION_MODEL}, x AS ("
                         "SELECT a.machine, a.provider, s.model, a.project_name AS project, a.day, 'attempt' AS what, "
                         "a.outcome = 'failed' AS failed, a.outcome = 'superseded' AS superseded FROM attempts a "
                         f"LEFT JOIN s ON s.machine = a.machine AND s.session_id = a.session_id "
                         f"WHERE NOT a.retracted AND {aw} "
                         "UNION ALL SELECT c.machine, c.provider, s.model, c.project_name, c.day, 'call', "
                         "c.outcome_status = 'failure', FALSE FROM tool_calls c "
                         f"LEFT JOIN s ON s.machine = c.machine AND s.session_id = c.session_id "
                         f"WHERE NOT c.retracted AND {cw}) "
                         "SELECT machine, provider, model, project, CAST(day AS VARCHAR) AS day, "
                         "grouping(machine, provider, model, project, day) AS g, "
                         "count(*) FILTER (WHERE what = 'attempt') AS attempts, "
                         "count(*) FILTER (WHERE what = 'attempt' AND failed) AS failed_attempts, "
                         "count(*) FILTER (WHERE what = 'attempt' AND superseded) AS superseded_attempts, "
                         "count(*) FILTER (WHERE what = 'call') AS tool_calls, "
                         "count(*) FILTER (WHERE what = 'call' AND failed) AS failed_tool_calls "
                         "FROM x GROUP BY GROUPING SETS ((machine), (provider), (model), (project), (day))",
                 params, max_rows=100_000)
    classes = _rows(runner, "SELECT 'attempt' AS what, a.failure_class AS failure_class, count(*) AS n "
                            "FROM attempts a WHERE NOT a.retracted AND a.outcome IN ('failed', 'superseded') "
                            f"AND a.failure_class IS NOT NULL AND {aw} GROUP BY ALL "
                            "UNION ALL SELECT 'tool call', c.outcome_class, count(*) FROM tool_calls c "
                            "WHERE NOT c.retracted AND c.outcome_status = 'failure' AND c.outcome_class IS NOT NULL "
                            f"AND {cw} GROUP BY ALL ORDER BY n DESC, what, failure_class LIMIT 20", params)
    commands = _rows(runner, "SELECT c.tool_name, coalesce(c.command_category, '') AS command_category, "
                             "count(*) AS failed, count(DISTINCT c.machine) AS machines, "
                             "count(DISTINCT c.project_name) AS projects FROM tool_calls c "
                             f"WHERE NOT c.retracted AND c.outcome_status = 'failure' AND {cw} "
                             "GROUP BY ALL ORDER BY failed DESC, tool_name, command_category LIMIT 20", params)
    latest = _rows(runner, "SELECT a.machine, a.attempt_id, a.provider, a.project_name, a.started_at, a.outcome, "
                           "a.failure_class, a.tool_call_count FROM attempts a WHERE NOT a.retracted "
                           f"AND a.outcome IN ('failed', 'superseded') AND {aw} "
                           f"ORDER BY a.started_at DESC NULLS LAST, a.attempt_id LIMIT {PAGE}", params)
    by = _split(rows, lambda r: (-(r["failed_attempts"] + r["failed_tool_calls"]), str(r["key"])))
    return {"by": by, "classes": classes, "commands": commands, "latest": latest, "filters": filters.to_dict()}


def cost(runner: Any, filters: Filters) -> dict[str, Any]:
    """Tokens and cost (USD) by machine, agent, model, project and day, and the totals."""
    where, params = filters.where()
    rows = _rows(runner, "SELECT machine, provider, coalesce(model, '?') AS model, project_name AS project, "
                         "CAST(day AS VARCHAR) AS day, grouping(machine, provider, coalesce(model, '?'), project_name, "
                         "CAST(day AS VARCHAR)) AS g, sum(total_tokens) AS tokens, sum(input_tokens) AS input, "
                         "sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read, "
                         "round(sum(cost_usd), 4) AS cost_usd, count(*) AS responses, "
                         "count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced FROM usage "
                         f"WHERE {where} GROUP BY GROUPING SETS ((machine), (provider), (coalesce(model, '?')), "
                         "(project_name), (CAST(day AS VARCHAR)))", params, max_rows=100_000)
    (totals,) = _rows(runner, "SELECT coalesce(sum(total_tokens), 0) AS tokens, round(sum(cost_usd), 4) AS cost_usd, "
                              f"count(*) AS responses FROM usage WHERE {where}", params)
    by = _split(rows, lambda r: (-(r["cost_usd"] if r["cost_usd"] is not None else -1.0), -(r["tokens"] or 0),
                                 str(r["key"])))
    return {"by": by, "totals": totals, "filters": filters.to_dict()}


__all__ = ["ERROR_TTL", "TIMEOUT", "TTL", "BadFilter", "Filters", "TeamCache", "TeamUnavailable", "choices", "cost",
           "failures", "overview", "read", "sessions", "team_url"]
