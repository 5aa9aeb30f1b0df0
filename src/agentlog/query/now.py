"""What is happening at this moment: the dashboard's Now page (and ``/api/now``).

Every answer here is measured against the wall clock (``now_us``), not the
projection's reference time (the newest event seen): a session that went quiet
an hour ago is not running, whatever the last refresh thought.

- **running**: sessions with no end whose last activity is at most
  :data:`RUNNING_SILENCE` old (or that wait on a person, see below), each with
  its project, its current (or latest) tool call, that call's command or target
  and since when;
- **needs you**: a permission request or needs-input notification still
  pending (nothing but background events followed it), in a session that has
  not ended and in which something was recorded in the last
  :data:`NEEDS_YOU_WITHIN`; one row per session (its latest request, how many
  are pending), with the tool call that asked and its command;
- **failures of the last hour**: failed tool calls (:mod:`.failed_calls`);
- **today**: tokens and cost of the model responses since UTC midnight.

Each query is bounded (``LIMIT``, a time window, ids looked up by key in the
days they happened), so the page stays cheap on a large store.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Final

from agentlog.projection.rules import STALE_AFTER, US
from agentlog.query.failed_calls import call_texts, failed_calls, since_us_param
from agentlog.query.views import plain

RUNNING_SILENCE: Final = STALE_AFTER
"""A session with no end and no activity for longer than this (30 minutes) is not running."""
NEEDS_YOU_WITHIN: Final = 2 * 60 * 60 * US
"""A pending request whose session recorded nothing for longer than this (2 hours) has left
"Needs you": the agent was most likely closed without an end being recorded."""
LIMIT: Final = 50
"""Rows per section at most."""
FAILURES_WITHIN: Final = 60 * 60 * US
"""The failures Now lists: those of the last hour."""


def now(engine: Any, root: str, now_us: int | None = None) -> dict[str, Any]:
    """The Now page's answer over the data root ``root`` (its logs hold the commands and errors)
    at ``now_us`` (default: the wall clock)."""
    at = int(time.time() * US) if now_us is None else int(now_us)
    needs, waiting = _needs_you(engine, root, at)
    return {
        "at": _iso(at),
        "needs_you": needs,
        "live": running(engine, root, at, waiting),
        "failures": failed_calls(engine, root, limit=LIMIT, since_us=at - FAILURES_WITHIN)["failures"],
        "today": today(engine, at),
        "bounds": {"running_silence_s": RUNNING_SILENCE // US, "needs_you_within_s": NEEDS_YOU_WITHIN // US,
                   "failures_within_s": FAILURES_WITHIN // US},
    }


def needs_you(engine: Any, root: str, at: int) -> list[dict[str, Any]]:
    """One row per session still waiting on a person (see the module docstring), newest first."""
    return _needs_you(engine, root, at)[0]


def _needs_you(engine: Any, root: str, at: int) -> tuple[list[dict[str, Any]], set[str]]:
    """:func:`needs_you`, and the stored ids of those sessions."""
    rows = engine.run(
        "SELECT g.session_id, any_value(s.provider) AS provider, any_value(s.project_name) AS project_name, "
        "count(*) AS pending, min(g.raised_at) AS first_raised_at, max(g.raised_at) AS raised_at, "
        "arg_max(g.signal_type, g.raised_at) AS signal_type, arg_max(g.kind, g.raised_at) AS kind, "
        "arg_max(g.event_id, g.raised_at) AS event_id, any_value(s.last_event_at) AS last_event_at "
        "FROM signals g JOIN sessions s ON s.session_id = g.session_id "
        "WHERE g.pending AND NOT s.retracted AND s.ended_at IS NULL "
        "AND epoch_us(s.last_event_at) >= ? GROUP BY g.session_id ORDER BY raised_at DESC LIMIT ?",
        [at - NEEDS_YOU_WITHIN, LIMIT]).records()
    if not rows:
        return [], set()
    # the call that asked: the request's own tool (a permission request names it), else the
    # session's latest call started before it
    asking = engine.run(
        "SELECT g.session_id, c.tool_call_id, c.tool_name, c.path_relative, c.start_event_id, c.started_at, "
        "c.finished_at, c.outcome_status FROM (SELECT unnest(?::VARCHAR[]) AS session_id, "
        "unnest(?::TIMESTAMPTZ[]) AS raised_at) g "
        "JOIN tool_calls c ON c.session_id = g.session_id AND c.started_at <= g.raised_at AND NOT c.retracted "
        "QUALIFY row_number() OVER (PARTITION BY g.session_id ORDER BY c.started_at DESC) = 1",
        [[r["session_id"] for r in rows], [r["raised_at"] for r in rows]]).records()
    by_session = {a["session_id"]: a for a in asking}
    texts = call_texts(engine, root, [(r["event_id"], r["raised_at"]) for r in rows]
                       + [(a["start_event_id"], a["started_at"]) for a in asking if a["start_event_id"]])
    out = []
    for r in rows:
        own = texts.get(r["event_id"], {})
        call = by_session.get(r["session_id"])
        call_text = texts.get(call["start_event_id"], {}) if call else {}
        item = plain({k: v for k, v in r.items() if k != "last_event_at"})
        item["tool_name"] = own.get("tool_name") or (call or {}).get("tool_name")
        item["command"] = own.get("command") or call_text.get("command") or own.get("target") or \
            (call or {}).get("path_relative")
        item["message"] = own.get("message")
        item["tool_call_id"] = plain({"tool_call_id": call["tool_call_id"]})["tool_call_id"] if call else None
        out.append(item)
    return out, {r["session_id"] for r in rows}


def running(engine: Any, root: str, at: int, waiting: set[str] | None = None) -> list[dict[str, Any]]:
    """Sessions running at ``at``, most recently active first, each with its latest tool call
    (``doing``: the tool, its command or target, since when, and whether it is still in flight);
    ``waiting``: the stored ids of the sessions waiting on a person (running too)."""
    waiting = waiting or set()
    ids = sorted(waiting)
    rows = engine.run(
        "SELECT s.session_id, s.provider, s.project_name, s.started_at, s.last_activity_at, s.tool_call_count, "
        "s.failure_count, s.in_flight_calls FROM sessions s WHERE NOT s.retracted AND s.ended_at IS NULL "
        "AND (epoch_us(s.last_activity_at) >= ? OR s.session_id IN (SELECT unnest(?::VARCHAR[]))) "
        "ORDER BY s.last_activity_at DESC LIMIT ?", [at - RUNNING_SILENCE, ids, LIMIT]).records()
    if not rows:
        return []
    sids = [r["session_id"] for r in rows]
    latest = engine.run(
        "SELECT session_id, tool_call_id, tool_name, path_relative, coalesce(started_at, finished_at) AS started_at, "
        "finished_at, outcome_status, coalesce(start_event_id, end_event_id) AS start_event_id FROM tool_calls "
        "WHERE NOT retracted AND session_id IN (SELECT unnest(?::VARCHAR[])) "
        "QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY coalesce(started_at, finished_at) DESC NULLS "
        "LAST, tool_call_id DESC) = 1",
        [sids]).records()
    calls = {c["session_id"]: c for c in latest}
    turns = engine.run(
        "SELECT session_id, objective FROM turns WHERE NOT retracted AND session_id IN (SELECT unnest(?::VARCHAR[])) "
        "QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY turn_index DESC) = 1", [sids]).records()
    objective = {t["session_id"]: t["objective"] for t in turns}
    texts = call_texts(engine, root, [(c["start_event_id"], c["started_at"]) for c in latest if c["start_event_id"]])
    out = []
    for r in rows:
        item = plain(r)
        item["waiting"] = r["session_id"] in waiting
        item["objective"] = objective.get(r["session_id"])
        c = calls.get(r["session_id"])
        if c is not None:
            t = texts.get(c["start_event_id"], {})
            item["doing"] = {"tool_call_id": plain({"tool_call_id": c["tool_call_id"]})["tool_call_id"],
                             "tool_name": c["tool_name"], "command": t.get("command") or c["path_relative"],
                             "since": _iso_dt(c["started_at"]), "finished_at": _iso_dt(c["finished_at"]),
                             "status": c["outcome_status"] or "running"}
        else:
            item["doing"] = None
        out.append(item)
    return out


def today(engine: Any, at: int) -> dict[str, Any]:
    """Tokens and cost of the model responses since the UTC midnight before ``at``."""
    day = datetime.fromtimestamp(at / US, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    (row,) = engine.run(
        "SELECT count(*) AS responses, coalesce(sum(total_tokens), 0) AS tokens, round(sum(cost_usd), 4) AS cost_usd, "
        "count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced FROM usage WHERE observed_at >= ?",
        [since_us_param(int(day.timestamp()) * US)]).records()
    return {"day": day.date().isoformat(), **row}


def _iso(us: int) -> str:
    return datetime.fromtimestamp(us / US, timezone.utc).isoformat().replace("+00:00", "Z")


def _iso_dt(v: Any) -> str | None:
    return plain({"t": v})["t"] if v is not None else None


__all__ = ["FAILURES_WITHIN", "LIMIT", "NEEDS_YOU_WITHIN", "RUNNING_SILENCE", "needs_you", "now", "running",
           "today"]
