"""A session as a conversation: its prompts, the assistant's text and each tool call, in order.

:func:`conversation` reads the session's turns, tool calls and assistant messages (cheap
columns only), nests each subagent's calls and messages under the call that started it
(:mod:`agentlog.query.subagents`, the rule the OpenTelemetry export uses), cuts the result
into pages of about :data:`PAGE_ITEMS` items and reads the content (prompt text, tool input
and output, edits) of the shown page's events only, each clipped to a preview; the call's own
page (:func:`call_detail`) holds the whole of it. The time strip is :mod:`.timestrip`'s.
Every string stays text here: the templates escape it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from agentlog.query.engine import Engine
from agentlog.query.scope import Scope
from agentlog.query.subagents import spawned_agents, spawning_call
from agentlog.query.views import iso, partition_days, plain, resolve_id

PAGE_ITEMS: Final = 80
"""Items a page shows (a subagent call counts as one); a turn may run over pages."""
CHILD_CAP: Final = 40
"""A subagent's calls and messages shown under its Task call; the call's page lists them all."""
PREVIEW: Final = 800
"""Characters of a tool input, output or message shown before "show all"."""
FULL: Final = 200_000
"""Characters of one input or output on a call's own page."""
DIFF_LINES: Final = 40
"""Diff lines shown before "show all"."""
EDIT_TOOLS: Final = frozenset({"Edit", "MultiEdit", "Write", "apply_patch", "replace", "write_file", "edit_file"})

_CALL_COLUMNS: Final = (
    "tool_call_id, turn_id, attempt_id, provider_agent_id, tool_name, tool_category, started_at, finished_at, "
    "duration_ms, outcome_status, outcome_class, exit_code, path_relative, start_event_id, end_event_id, "
    "failure_evidence, result_summary, first_error, test_runner, tests_passed, tests_failed, failing_tests, checker, "
    "check_errors, fixed_by, reclassified_from, epoch_us(started_at) AS started_us, epoch_us(finished_at) AS finished_us")


def _rows(engine: Engine, sql: str, params: list[Any], max_rows: int = 1_000_000) -> list[dict[str, Any]]:
    return engine.run(sql, params, max_rows=max_rows).records()


def bare(display_id: str) -> str:
    return display_id.split("_", 1)[1] if "_" in display_id else display_id


def session_rows(engine: Engine, ident: str) -> dict[str, Any]:
    """The session's header row (:func:`agentlog.query.views.timeline`'s, with its turns and
    attempts), its byte checks, and the raw rows the conversation and the strip are built from."""
    from agentlog.query import views

    ref = resolve_id(engine, ident, ["session"])
    (row,) = views.timeline(engine, Scope(session=ref.id, limit=1))
    row["byte_checks"] = _rows(engine, "SELECT seq, problem, failed FROM byte_checks WHERE session_id = ? "
                                       "ORDER BY seq, problem LIMIT 500", [ref.id])
    s, days, where = _span(engine, ref.id)
    calls = _rows(engine, f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE session_id = ? AND NOT retracted "
                          "ORDER BY started_at NULLS LAST, tool_call_id", [ref.id])
    for c in calls:
        if c["started_us"] is None:
            c["started_us"] = c["finished_us"] or 0
    spawned_agents(engine, calls)
    marks = _rows(engine, "SELECT event_id, kind, agent_id, tool_name, epoch_us(observed_at) AS us FROM events "
                          f"WHERE {where}provider = ? AND provider_session_id IS NOT DISTINCT FROM ? "
                          "AND kind IN ('agent_message', 'permission_requested', 'prompt_submitted') "
                          "ORDER BY observed_at, event_id",
                  [*days, s["provider"], s["provider_session_id"]])
    turns = _rows(engine, "SELECT turn_id, turn_index, status, failure_class, prompt_event_id, "
                          "epoch_us(started_at) AS started_us, epoch_us(ended_at) AS ended_us FROM turns "
                          "WHERE session_id = ? AND NOT retracted ORDER BY turn_index", [ref.id])
    attempts = _rows(engine, "SELECT attempt_id, attempt_index, turn_id, outcome, failure_class, superseded_by, "
                             "supersedes FROM attempts WHERE session_id = ? AND NOT retracted", [ref.id])
    return {"row": row, "id": ref.id, "days": days, "calls": calls, "marks": marks, "turns": turns,
            "attempts": {a["attempt_id"]: a for a in attempts}}


def _span(engine: Engine, session_id: str) -> tuple[dict[str, Any], list[str], str]:
    """The session's provider and ids, the days its events are stored under, and the ``WHERE``
    head that keeps a query of the events to those days (its ``?``s: the days, in order)."""
    (s,) = _rows(engine, "SELECT provider, provider_session_id, started_at, coalesce(ended_at, last_event_at) AS ended_at "
                         "FROM sessions WHERE session_id = ?", [session_id])
    days = partition_days(s["started_at"], s["ended_at"])
    return s, days, (f"observed_date IN ({', '.join('?' for _ in days)}) AND " if days else "")


def _nest(rows: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The top-level items in time order (prompts, main-agent messages and calls, and any
    subagent whose starting call is unknown) and each starting call's nested items."""
    calls = rows["calls"]
    items: list[dict[str, Any]] = []
    asked_by = {m["event_id"]: m.get("agent_id") for m in rows["marks"] if m["kind"] == "prompt_submitted"}
    # each subagent (turn, agent id) → the call that started it
    spans: dict[tuple[str | None, str], list[int]] = {}
    for c in calls:
        aid = c.get("provider_agent_id")
        if aid:
            lo_hi = spans.setdefault((c.get("turn_id"), aid), [c["started_us"], c["finished_us"] or c["started_us"]])
            lo_hi[0] = min(lo_hi[0], c["started_us"])
            lo_hi[1] = max(lo_hi[1], c["finished_us"] or c["started_us"])
    spawner = {key: spawning_call(calls, key[0], key[1], lo, hi) for key, (lo, hi) in spans.items()}
    by_agent = {aid: sp for (_, aid), sp in spawner.items() if sp}
    children: dict[str, list[dict[str, Any]]] = {}
    for c in calls:
        aid = c.get("provider_agent_id")
        parent = spawner.get((c.get("turn_id"), aid)) if aid else None
        item = {"type": "call", "us": c["started_us"], "call": c, "agent": aid}
        (children.setdefault(parent, []) if parent else items).append(item)
    for m in rows["marks"]:
        if m["kind"] != "agent_message":
            continue
        aid = m.get("agent_id")
        parent = by_agent.get(aid) if aid else None
        item = {"type": "message", "us": m["us"], "event_id": m["event_id"], "agent": aid}
        (children.setdefault(parent, []) if parent else items).append(item)
    for t in rows["turns"]:  # a subagent's own prompt goes with its steps
        if t["started_us"] is None:
            continue
        aid = asked_by.get(t["prompt_event_id"])
        parent = by_agent.get(aid) if aid else None
        item = {"type": "prompt", "us": t["started_us"], "turn": t, "event_id": t["prompt_event_id"], "agent": aid}
        (children.setdefault(parent, []) if parent else items).append(item)
    order = {"prompt": 0, "message": 1, "call": 2}
    items.sort(key=lambda i: (i["us"], order[i["type"]]))
    for kids in children.values():
        kids.sort(key=lambda i: (i["us"], order[i["type"]]))
    return items, children


def _pages(items: list[dict[str, Any]], children: dict[str, list[dict[str, Any]]]) -> list[int]:
    """The index of the first item of each page."""
    starts, weight = [0], 0
    for i, it in enumerate(items):
        w = 1 + (min(len(children.get(it["call"]["tool_call_id"], [])), CHILD_CAP) if it["type"] == "call" else 0)
        if weight and weight + w > PAGE_ITEMS:
            starts.append(i)
            weight = 0
        weight += w
    return starts


def _where(items: list[dict[str, Any]], children: dict[str, list[dict[str, Any]]], starts: list[int]) -> dict[str, int]:
    """Call id → the page it is on (a subagent's call: its starting call's page)."""
    out: dict[str, int] = {}
    for p, first in enumerate(starts):
        last = starts[p + 1] if p + 1 < len(starts) else len(items)
        for it in items[first:last]:
            if it["type"] == "call":
                cid = it["call"]["tool_call_id"]
                out[cid] = p
                for kid in children.get(cid, []):
                    if kid["type"] == "call":
                        out[kid["call"]["tool_call_id"]] = p
    return out


def conversation(engine: Engine, ident: str, page: int = 0) -> dict[str, Any]:
    """The session ``ident`` as a conversation, page ``page`` (from 0) of it, with its time strip."""
    from agentlog.web.timestrip import time_strip

    rows = session_rows(engine, ident)
    items, children = _nest(rows)
    starts = _pages(items, children)
    page = max(0, min(page, len(starts) - 1))
    end = starts[page + 1] if page + 1 < len(starts) else len(items)
    shown = items[starts[page]:end]
    where_is = _where(items, children, starts)
    kids = {it["call"]["tool_call_id"]: children.get(it["call"]["tool_call_id"], [])[:CHILD_CAP]
            for it in shown if it["type"] == "call"}
    content = _content(engine, rows["days"], [*shown, *(k for ks in kids.values() for k in ks)])
    sid = plain({"session_id": rows["id"]})["session_id"]
    ctx = _Ctx(sid, rows["attempts"], where_is, content, page)
    out_items = []
    for it in shown:
        d = ctx.item(it)
        if it["type"] == "call":
            cid = it["call"]["tool_call_id"]
            d["children"] = [ctx.item(k) for k in kids[cid]]
            d["children_more"] = len(children.get(cid, [])) - len(kids[cid])
            d["subagents"] = sorted({str(k["agent"]) for k in children.get(cid, []) if k.get("agent")})
        out_items.append(d)
    row: dict[str, Any] = rows["row"]
    row["items"] = out_items
    row["page"] = page
    row["pages"] = len(starts)
    row["item_count"] = len(items)
    row["strip"] = time_strip(engine, rows)
    return row


class _Ctx:
    """What every item of one page is rendered with."""

    def __init__(self, sid: str, attempts: dict[str, dict[str, Any]], where_is: dict[str, int],
                 content: dict[str, dict[str, Any]], page: int) -> None:
        self.sid, self.attempts, self.where_is, self.content, self.page = sid, attempts, where_is, content, page

    def link(self, call_id: str) -> str:
        """Where a call of this session is: its anchor on its page of the conversation."""
        p = self.where_is.get(call_id)
        anchor = f"#c-{call_id}"
        if p is None:
            return f"/sessions/{self.sid}/calls/tc_{call_id}"
        return anchor if p == self.page else f"/sessions/{self.sid}?page={p}{anchor}"

    def text_href(self, event_id: Any) -> str | None:
        """Where a prompt or message of this session is whole (its own page, which leads back here)."""
        if not event_id:
            return None
        return f"/sessions/{self.sid}/texts/ev_{event_id}?page={max(self.page, 0)}"

    def item(self, it: dict[str, Any]) -> dict[str, Any]:
        if it["type"] == "prompt":
            t = it["turn"]
            text = _text(self.content.get(str(it.get("event_id")), {}), ("prompt",))
            return {"type": "prompt", "turn_index": t["turn_index"], "status": t["status"], "agent": it.get("agent"),
                    "failure_class": t["failure_class"], **_cut(text, PREVIEW), **self._at(it)}
        if it["type"] == "message":
            text = _text(self.content.get(str(it["event_id"]), {}), ("message",))
            return {"type": "message", "agent": it.get("agent"), **_cut(text, PREVIEW), **self._at(it)}
        return call_item(it["call"], self, PREVIEW)

    def _at(self, it: dict[str, Any]) -> dict[str, Any]:
        eid = it.get("event_id")
        return {"anchor": f"e-{eid}" if eid else None, "href": self.text_href(eid)}


def call_item(c: dict[str, Any], ctx: _Ctx, limit: int) -> dict[str, Any]:
    """One tool call as the page shows it: what it was given and returned (the first ``limit``
    characters), the edit's diffs, and for a failure its class, evidence, summary and retry."""
    from agentlog.share.view import brief

    start = ctx.content.get(str(c.get("start_event_id")), {})
    end = ctx.content.get(str(c.get("end_event_id")), {})
    given = start.get("tool_input", end.get("tool_input"))
    result = end.get("tool_output", end.get("error", end.get("output")))
    cid = str(c["tool_call_id"])
    status = c.get("outcome_status")
    d: dict[str, Any] = {
        "type": "call", "id": f"tc_{cid}", "anchor": f"c-{cid}", "href": f"/sessions/{ctx.sid}/calls/tc_{cid}",
        "tool": c.get("tool_name") or "?", "agent": c.get("provider_agent_id"), "brief": brief(given),
        "path": c.get("path_relative"), "status": status or "running", "class": c.get("outcome_class"),
        "failed": status in ("failure", "denied"), "exit_code": c.get("exit_code"),
        "duration_ms": c.get("duration_ms"), "started_at": iso(c.get("started_at")),
        "evidence": c.get("failure_evidence"), "summary": c.get("result_summary") or c.get("first_error"),
        "failing_tests": c.get("failing_tests"), "reclassified_from": c.get("reclassified_from"),
        "input": _cut(_readable(given), limit), "output": _cut(_readable(result), limit), "diffs": [],
        "fixed_by": None, "attempt": None, "retry": None,
    }
    if c.get("fixed_by"):
        d["fixed_by"] = {"id": f"tc_{c['fixed_by']}", "href": ctx.link(str(c["fixed_by"]))}
    a = ctx.attempts.get(str(c.get("attempt_id")))
    if a is not None:
        d["attempt"] = {"id": f"att_{a['attempt_id']}", "index": a["attempt_index"], "outcome": a["outcome"]}
        nxt = ctx.attempts.get(str(a.get("superseded_by")))
        if d["failed"] and nxt is not None:
            d["retry"] = {"id": f"att_{nxt['attempt_id']}", "index": nxt["attempt_index"], "outcome": nxt["outcome"]}
    if c.get("tool_name") in EDIT_TOOLS and given is not None:
        d["diffs"] = diffs(given, str(c.get("path_relative") or "file"), DIFF_LINES if limit == PREVIEW else 20_000)
    return d


def diffs(given: Any, path: str, max_lines: int) -> list[dict[str, Any]]:
    """Each change of an edit as lines (kind, text): ``add``, ``del``, ``hunk``, ``file`` or ``ctx``."""
    from agentlog.share.view import edit_diffs

    out = []
    for p, text in edit_diffs(given, path):
        lines = text.split("\n") if text else []
        marked = [(_line_kind(line), line) for line in lines[:max_lines]]
        out.append({"path": p, "lines": marked, "more": max(0, len(lines) - max_lines)})
    return out


def _line_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


def _readable(value: Any) -> str:
    from agentlog.share.view import text_of

    return text_of(value)


def _text(content: dict[str, Any], keys: tuple[str, ...]) -> str:
    for k in keys:
        if k in content:
            return _readable(content[k])
    return _readable(content) if content else ""


def _cut(text: str, limit: int) -> dict[str, Any]:
    """``text`` (the first ``limit`` characters) and how many more there are."""
    return {"text": text[:limit], "more": max(0, len(text) - limit)}


def _content(engine: Engine, days: list[str], items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The content of the events behind ``items`` (event id → content object)."""
    ids: list[str] = []
    for it in items:
        if it["type"] == "call":
            ids += [str(i) for i in (it["call"].get("start_event_id"), it["call"].get("end_event_id")) if i]
        elif it.get("event_id"):
            ids.append(str(it["event_id"]))
    return event_content(engine, days, ids)


def event_content(engine: Engine, days: list[str], ids: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    ids = sorted(set(ids))
    where = (f"observed_date IN ({', '.join('?' for _ in days)}) AND " if days else "")
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        res = engine.run(f"SELECT event_id, json_extract(event, '$.content') AS content FROM events WHERE {where}"
                         f"event_id IN ({', '.join('?' for _ in part)})", [*days, *part], max_rows=len(part) + 1)
        for event_id, text in res.rows:
            try:
                got = orjson.loads(text) if text else None
            except orjson.JSONDecodeError:
                got = None
            if isinstance(got, dict):
                out[str(event_id)] = got
    return out


def call_detail(engine: Engine, ident: str, call_ident: str) -> dict[str, Any]:
    """One call of session ``ident`` whole: its input and output (up to :data:`FULL` characters
    each), its diffs, and every call and message of the subagent it started."""
    rows = session_rows(engine, ident)
    ref = resolve_id(engine, call_ident, ["tool_call"])
    calls = {c["tool_call_id"]: c for c in rows["calls"]}
    if ref.id not in calls:
        from agentlog.query.views import UnknownId

        raise UnknownId(f"{ref.display} is not a call of this session")
    items, children = _nest(rows)
    starts = _pages(items, children)
    where_is = _where(items, children, starts)
    kids = children.get(ref.id, [])[:2000]
    me = {"type": "call", "call": calls[ref.id]}
    content = _content(engine, rows["days"], [me, *kids])
    sid = plain({"session_id": rows["id"]})["session_id"]
    ctx = _Ctx(sid, rows["attempts"], where_is, content, -1)
    d = call_item(calls[ref.id], ctx, FULL)
    d["children"] = [ctx.item(k) for k in kids]
    d["children_more"] = len(children.get(ref.id, [])) - len(kids)
    d["session_id"] = sid
    d["back"] = ctx.link(ref.id)
    d["whole"] = True
    return {"call": d}


TEXT_KINDS: Final = {"prompt_submitted": "prompt", "agent_message": "message"}
"""The events whose text the conversation shows as a prompt or a message."""


def text_detail(engine: Engine, ident: str, event_ident: str, page: int = 0) -> dict[str, Any]:
    """One prompt or assistant message of session ``ident`` whole (up to :data:`FULL`
    characters), as the conversation shows it, with the way back to page ``page`` of it."""
    from agentlog.projection.ids import split_display
    from agentlog.query.views import BadId, UnknownId

    typed, bare = split_display(event_ident)
    if typed not in (None, "event") or not bare or not all(c in "0123456789abcdef-" for c in bare):
        raise BadId(f"{event_ident!r} is not an event id (ev_ and the whole id)")
    ref = resolve_id(engine, ident, ["session"])
    s, days, where = _span(engine, ref.id)
    found = _rows(engine, "SELECT event_id, kind, agent_id, observed_at FROM events "
                          f"WHERE {where}provider = ? AND provider_session_id IS NOT DISTINCT FROM ? AND event_id = ? "
                          "AND kind IN ('agent_message', 'prompt_submitted')",
                  [*days, s["provider"], s["provider_session_id"], bare], max_rows=2)
    if not found:
        raise UnknownId(f"{event_ident} is not a prompt or message of this session")
    ev = found[0]
    sid = plain({"session_id": ref.id})["session_id"]
    ctx = _Ctx(sid, {}, {}, event_content(engine, days, [bare]), page)
    kind = TEXT_KINDS[ev["kind"]]
    it: dict[str, Any] = {"type": kind, "event_id": ev["event_id"], "agent": ev.get("agent_id")}
    if kind == "prompt":
        turns = _rows(engine, "SELECT turn_index, status, failure_class FROM turns WHERE session_id = ? "
                              "AND prompt_event_id = ? AND NOT retracted", [ref.id, bare], max_rows=2)
        it["turn"] = turns[0] if turns else {"turn_index": "?", "status": None, "failure_class": None}
    d = ctx.item(it)
    d.update(_cut(_text(ctx.content.get(bare, {}), (kind,)), FULL))
    d.update(href=None, whole=True, session_id=sid, event_id=f"ev_{bare}", at=iso(ev.get("observed_at")),
             back=f"/sessions/{sid}?page={page}#e-{bare}")
    return {"text": d}


__all__ = ["CHILD_CAP", "DIFF_LINES", "FULL", "PAGE_ITEMS", "PREVIEW", "TEXT_KINDS", "call_detail", "call_item",
           "conversation", "diffs", "event_content", "session_rows", "text_detail"]
