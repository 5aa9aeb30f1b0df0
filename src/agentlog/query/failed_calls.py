"""Failed tool calls as a person reads them: the command (or the file an edit targeted), the
first error line or the runner's summary, the class, and what came after (the retry that
fixed it, the attempt that superseded it); and the failures that recur.

The projection keeps no content; the command, the error text and the output are read from
the calls' own log frames, found through the store by id within the days the calls ran (small
columns only: a bounded lookup whatever the store's size). The dashboard's Failures page and Now's "last hour" use them.

A **recurring failure** is the same command (the capture's ``command_key``: the command
line's digest, blanks collapsed) failing with the same class more than once, in one session
or several; edits and other calls without a command recur by tool and target file. Groups
are drawn from the newest :data:`GROUP_WINDOW` failures in scope, so the answer is bounded.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Final, Iterable

from agentlog.query.views import plain

GROUP_WINDOW: Final = 1000
"""Failures (newest first) the recurring groups are drawn from."""
ERROR_LINE_MAX: Final = 240
"""Characters of a first error line shown."""
_TEXT_MAX: Final = 20_000
"""Characters of an error or output read to find the first error line."""
_ERRORISH: Final = re.compile(
    r"error|exception|traceback|failed|failure|fatal|not found|no such|denied|cannot|can't|could not|invalid|"
    r"refused|panic|assert|undefined|unknown|missing|timed? ?out|permission", re.I)
_NOISE: Final = re.compile(r"^(exit code -?\d+|\$ .*|>.*)$", re.I)
_TAGS: Final = re.compile(r"</?tool_use_error>")
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TRACEBACK: Final = re.compile(r"^Traceback \(most recent call last\):")
_RAISED: Final = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failure)\b")

CALL_COLUMNS: Final = (
    "tool_call_id", "session_id", "attempt_id", "provider", "project_name", "tool_name", "tool_category",
    "path_relative", "started_at", "finished_at", "outcome_status", "outcome_class", "exit_code", "failure_evidence",
    "result_summary", "test_runner", "tests_failed", "tests_passed", "failing_tests", "checker", "check_errors",
    "first_error", "fixed_by", "start_event_id", "end_event_id",
)


def since_us_param(us: int) -> datetime:
    """µs since the epoch as the aware datetime a TIMESTAMPTZ parameter takes."""
    return datetime.fromtimestamp(us / 1_000_000, timezone.utc)


def first_error_line(error: str | None, output: str | None) -> str | None:
    """The first line of the error (else the output) that reads like an error, else the error's
    first line; without wrappers such as ``Exit code 1`` and ``<tool_use_error>``."""
    texts = [_ANSI.sub("", _TAGS.sub("", t[:_TEXT_MAX])) for t in (error, output) if isinstance(t, str) and t.strip()]
    lines = [[ln.strip() for ln in t.splitlines() if ln.strip() and not _NOISE.match(ln.strip())] for t in texts]
    for group in lines:
        for i, ln in enumerate(group):
            if _TRACEBACK.match(ln):  # a Python traceback: its last line says what was raised
                return _clip(next((x for x in group[i + 1:] if not x.startswith(("File ", "^", "~"))
                                   and _RAISED.match(x)), ln))
            if _ERRORISH.search(ln):
                return _clip(ln)
    for group in lines:
        if group:
            return _clip(group[0])
    return None


def _clip(s: str) -> str:
    return s if len(s) <= ERROR_LINE_MAX else s[: ERROR_LINE_MAX - 1] + "…"


def _days(refs: Iterable[tuple[str | None, Any]]) -> tuple[list[str], list[str]]:
    """(event ids, the UTC days they happened, or none at all when a time is unknown)."""
    ids: list[str] = []
    days: set[str] = set()
    every_day = False  # a time unknown: its day too, so no day is left out
    for ev, at in refs:
        if not ev:
            continue
        ids.append(ev)
        if isinstance(at, datetime):
            days.add(at.astimezone(timezone.utc).date().isoformat())
        else:
            every_day = True
    return sorted(set(ids)), ([] if every_day else sorted(days))


def _where_ids(ids: list[str], days: list[str]) -> str:
    by_day = f"observed_date IN ({', '.join('?' for _ in days)}) AND " if days else ""
    return f"{by_day}event_id IN ({', '.join('?' for _ in ids)})"


def _text(v: Any, limit: int = _TEXT_MAX) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def call_texts(engine: Any, root: str, refs: Iterable[tuple[str | None, Any]]) -> dict[str, dict[str, Any]]:
    """For each (event id, when it happened): the event's tool, first path, and from its own log
    frame its command, error, output head, message, reason and command key. The store gives
    where each frame is (small columns, the days the events happened only); the frames are
    read from the logs (a purged frame gives no text)."""
    from agentlog.log.lookup import event_at

    ids, days = _days(refs)
    if not ids:
        return {}
    rows = engine.run(f"SELECT event_id, tool_name, paths[1] AS target, log_provider, log_key, log_offset FROM events "
                      f"WHERE {_where_ids(ids, days)}", [*days, *ids], max_rows=len(ids) * 4).records()
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["event_id"] in out:
            continue
        ev = event_at(root, f"{r['log_provider']}/{r['log_key']}", r["log_offset"]) or {}
        c, a = ev.get("content"), ev.get("attrs")
        content: dict[str, Any] = c if isinstance(c, dict) else {}
        attrs: dict[str, Any] = a if isinstance(a, dict) else {}
        out[r["event_id"]] = {
            "tool_name": r["tool_name"], "target": r["target"], "command": _text(content.get("command")),
            "error": _text(content.get("error")), "output": _text(content.get("tool_output")),
            "message": _text(content.get("message"), 500), "reason": _text(content.get("reason"), 500),
            "command_key": _text(attrs.get("command_key"), 64),
        }
    return out


def command_keys(engine: Any, refs: Iterable[tuple[str | None, Any]]) -> dict[str, str]:
    """The capture's ``command_key`` of each (event id, when) that has one (from the store's
    ``attrs``, no frame read)."""
    ids, days = _days(refs)
    if not ids:
        return {}
    rows = engine.run(f"SELECT event_id, json_extract_string(attrs, '$.command_key') AS k FROM events "
                      f"WHERE {_where_ids(ids, days)}", [*days, *ids], max_rows=len(ids) * 4).rows
    return {eid: k for eid, k in rows if k}


def _page_sql(where: str, limit: int, offset: int) -> str:
    cols = ", ".join("c." + c for c in CALL_COLUMNS)
    return (f"WITH p AS (SELECT {cols}, c.project_id FROM tool_calls c WHERE c.outcome_status IN ('failure', 'denied') "
            f"AND NOT c.retracted AND {where} ORDER BY coalesce(c.finished_at, c.started_at) DESC NULLS LAST, "
            f"c.tool_call_id LIMIT {int(limit)} OFFSET {int(offset)}) "
            "SELECT p.*, a.outcome AS attempt_outcome, a.superseded_by, a.turn_index, "
            "fx.attempt_id AS fixed_attempt_id, fx.result_summary AS fixed_summary, fx.finished_at AS fixed_at "
            "FROM p LEFT JOIN attempts a ON a.attempt_id = p.attempt_id "
            "LEFT JOIN tool_calls fx ON fx.tool_call_id = p.fixed_by "
            "ORDER BY coalesce(p.finished_at, p.started_at) DESC NULLS LAST, p.tool_call_id")


def _scope(project_ids: list[str] | None, since_us: int | None) -> tuple[str, list[Any]]:
    parts, params = ["TRUE"], list[Any]()
    if project_ids is not None:
        parts.append("c.project_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(project_ids)
    if since_us is not None:
        parts.append("coalesce(c.finished_at, c.started_at) >= ?")
        params.append(since_us_param(since_us))
    return " AND ".join(parts), params


def failed_calls(engine: Any, root: str, *, limit: int = 25, offset: int = 0, project_ids: list[str] | None = None,
                 since_us: int | None = None) -> dict[str, Any]:
    """Failed (and denied) tool calls, newest first: ``failures`` (at most ``limit``, from
    ``offset``) and ``more`` (whether another page follows)."""
    where, params = _scope(project_ids, since_us)
    rows = engine.run(_page_sql(where, limit + 1, offset), params).records()
    more = len(rows) > limit
    rows = rows[:limit]
    texts = call_texts(engine, root, [(r["start_event_id"], r["started_at"]) for r in rows]
                       + [(r["end_event_id"], r["finished_at"]) for r in rows])
    return {"failures": [_present(r, texts) for r in rows], "more": more}


def failing_call(engine: Any, root: str, end_event_id: str) -> dict[str, Any] | None:
    """The failed call whose end is ``end_event_id`` (an attempt's ``failing_event_id``), presented
    as :func:`failed_calls` presents each, or None."""
    rows = engine.run(_page_sql("c.end_event_id = ?", 1, 0), [end_event_id]).records()
    if not rows:
        return None
    r = rows[0]
    texts = call_texts(engine, root, [(r["start_event_id"], r["started_at"]), (r["end_event_id"], r["finished_at"])])
    return _present(r, texts)


def _present(r: dict[str, Any], texts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    start = texts.get(r["start_event_id"] or "", {})
    end = texts.get(r["end_event_id"] or "", {})
    command = start.get("command") or end.get("command")
    error_line = first_error_line(end.get("error"), end.get("output")) or end.get("reason")
    item = plain({k: v for k, v in r.items() if k not in ("project_id", "fixed_attempt_id", "fixed_summary",
                                                         "fixed_at", "superseded_by")})
    item["command"] = command
    item["target"] = r["path_relative"] or start.get("target") or end.get("target")
    item["error_line"] = error_line
    item["summary"] = r["result_summary"] or (f"{r['tests_failed']} of {(r['tests_failed'] or 0) + (r['tests_passed'] or 0)} "
                                              "tests failed" if r["tests_failed"] else None)
    retry = None
    if r["fixed_by"]:
        retry = {"how": "fixed_by", **plain({"tool_call_id": r["fixed_by"], "attempt_id": r["fixed_attempt_id"],
                                             "at": r["fixed_at"]}), "summary": r["fixed_summary"]}
    elif r["superseded_by"]:
        retry = {"how": "superseded", **plain({"attempt_id": r["superseded_by"]})}
    item["retry"] = retry
    return item


def failure_groups(engine: Any, root: str, *, project_ids: list[str] | None = None, since_us: int | None = None,
                   limit: int = 20) -> list[dict[str, Any]]:
    """Recurring failures among the newest :data:`GROUP_WINDOW` in scope: the same command
    (else tool and target) with the same class, failed at least twice; most frequent first,
    each with its count, sessions, latest time, the command, the latest error line and the
    calls (up to 10, newest first, with their sessions)."""
    where, params = _scope(project_ids, since_us)
    rows = engine.run(
        "SELECT c.tool_call_id, c.session_id, c.tool_name, c.path_relative, c.outcome_class, c.outcome_status, "
        "c.result_summary, c.started_at, c.finished_at, c.start_event_id, c.end_event_id FROM tool_calls c "
        f"WHERE c.outcome_status IN ('failure', 'denied') AND NOT c.retracted AND {where} "
        f"ORDER BY coalesce(c.finished_at, c.started_at) DESC NULLS LAST, c.tool_call_id LIMIT {GROUP_WINDOW}",
        params).records()
    if len(rows) < 2:
        return []
    keys = command_keys(engine, [(r["start_event_id"], r["started_at"]) for r in rows])
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = keys.get(r["start_event_id"] or "") or (f"{r['tool_name']} {r['path_relative']}"
                                                       if r["path_relative"] else None)
        if not key:
            continue
        groups.setdefault((key, r["outcome_class"] or r["outcome_status"]), []).append(r)
    recurring = sorted(((k, v) for k, v in groups.items() if len(v) > 1),
                       key=lambda kv: (-len(kv[1]), -max(_ts(x) for x in kv[1]), kv[0]))[:limit]
    if not recurring:
        return []
    latest = [v[0] for _, v in recurring]
    texts = call_texts(engine, root, [(r["end_event_id"], r["finished_at"]) for r in latest]
                       + [(r["start_event_id"], r["started_at"]) for r in latest])
    out = []
    for (key, klass), calls in recurring:
        head = calls[0]
        end = texts.get(head["end_event_id"] or "", {})
        head["command"] = texts.get(head["start_event_id"] or "", {}).get("command") or end.get("command")
        out.append({
            "key": key, "failure_class": klass, "count": len(calls), "sessions": len({c["session_id"] for c in calls}),
            "tool_name": head["tool_name"], "command": head.get("command"), "target": head["path_relative"],
            "latest_at": plain({"t": head["finished_at"] or head["started_at"]})["t"],
            "error_line": head["result_summary"] or first_error_line(end.get("error"), end.get("output")),
            "calls": [plain({"tool_call_id": c["tool_call_id"], "session_id": c["session_id"],
                             "at": c["finished_at"] or c["started_at"]}) for c in calls[:10]],
        })
    return out


def _ts(r: dict[str, Any]) -> float:
    t = r["finished_at"] or r["started_at"]
    return t.timestamp() if isinstance(t, datetime) else 0.0


__all__ = ["CALL_COLUMNS", "ERROR_LINE_MAX", "GROUP_WINDOW", "call_texts", "command_keys", "failed_calls", "failing_call",
           "failure_groups",
           "first_error_line", "since_us_param"]
