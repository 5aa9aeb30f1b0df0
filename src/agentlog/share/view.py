"""What a shared file shows (docs/share.md): a session, one of its turns or one attempt, read from
the proof bundle's own frames and laid out by the projection, every text sanitised.

:func:`target` resolves the id and reads the projection's rows (sessions, turns, attempts, tool
calls); :func:`build` reads the events from the bundle's frame lines (so what is shown is what
the bundle proves), groups them into turns, pairs each tool call's start and end, attaches the
attempt (and its retries) and the edits' diffs, and runs every string through the
:class:`~agentlog.share.sanitize.Sanitizer`. The result is a plain dict the renderers lay out,
and the (log, seq, frame hash) of every frame shown.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from agentlog.core import AgentlogError
from agentlog.share.sanitize import Sanitizer

MAX_FIELD: Final = 20_000
"""The most characters of one input, output or message shown (the rest is said to be clipped)."""
HIDDEN_KINDS: Final = frozenset({"usage", "transcript_line"})
"""Event kinds a share does not show (token counts; the transcript's raw lines)."""
EDIT_TOOLS: Final = frozenset({"Edit", "MultiEdit", "Write", "apply_patch", "replace", "write_file", "edit_file"})


class NothingToShare(AgentlogError, LookupError):
    """The id names no session, turn or attempt with events (exit 1)."""


@dataclass
class Target:
    """The thing to share and the projection's rows of its session."""

    kind: str
    display: str
    session_id: str
    session: dict[str, Any]
    turns: list[dict[str, Any]]
    attempts: dict[str, dict[str, Any]]
    calls: list[dict[str, Any]]
    only_turn: str | None = None
    only_attempt: str | None = None
    hosts: set[str] = field(default_factory=set)
    root: str = ""
    """The data root it is read from (its sealed frames are opened with its key)."""


def target(root: str, ident: str) -> Target:
    """The session, turn or attempt ``ident`` names, the store and projection caught up first."""
    from agentlog.projection.current import bring_up_to_date
    from agentlog.query.engine import Engine
    from agentlog.query.views import UnknownId, resolve_id

    bring_up_to_date(root)
    with Engine(root) as engine:
        try:
            ref = resolve_id(engine, ident, ["session", "turn", "attempt"])
        except UnknownId as e:
            raise NothingToShare(str(e)) from None
        table = {"session": "sessions", "turn": "turns", "attempt": "attempts"}[ref.kind]
        col = f"{ref.kind}_id"
        (sid,) = engine.run(f"SELECT session_id FROM {table} WHERE {col} = ?", [ref.id]).rows[0]
        session = engine.run("SELECT * FROM sessions WHERE session_id = ?", [sid]).records()[0]
        turns = engine.run("SELECT * FROM turns WHERE session_id = ? AND NOT coalesce(retracted, false) "
                           "ORDER BY turn_index", [sid]).records()
        attempts = engine.run("SELECT * FROM attempts WHERE session_id = ? AND NOT coalesce(retracted, false) "
                              "ORDER BY turn_index, attempt_index", [sid]).records()
        calls = engine.run("SELECT * FROM tool_calls WHERE session_id = ? AND NOT coalesce(retracted, false) "
                           "ORDER BY started_at", [sid], max_rows=1_000_000).records()
        hosts = {str(h) for (h,) in engine.run(
            "SELECT DISTINCT host FROM events WHERE provider = ? AND host IS NOT NULL", [session["provider"]]).rows if h}
    t = Target(ref.kind, ref.display, str(sid), session, turns, {str(a["attempt_id"]): a for a in attempts}, calls,
               hosts=hosts, root=root)
    if ref.kind == "turn":
        t.only_turn = ref.id
    elif ref.kind == "attempt":
        if ref.id not in t.attempts:
            raise NothingToShare(f"{ref.display} was retracted; share its session instead")
        t.only_attempt = ref.id
        t.only_turn = str(t.attempts[ref.id]["turn_id"])
    return t


# -- reading the frames ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """One event and the frame it came from."""

    log: str
    seq: int
    frame_hash: str
    event: dict[str, Any]


def frames_events(bundle: dict[str, Any], root: str = "") -> list[Shown]:
    """The events of the bundle's frames with content, in time order (sealed ones opened with
    ``root``'s data key: the shared file binds what it shows to frame hashes, never to bytes)."""
    import orjson

    from agentlog.core.unsealing import Opener
    from agentlog.log.frame import event_bytes

    opened = Opener(root)
    out = []
    for e in bundle["entries"]:
        if e.get("frame") is None:
            continue
        ev = orjson.loads(opened(event_bytes((e["frame"] + "\n").encode("utf-8"))))
        if isinstance(ev, dict) and ev.get("kind") not in HIDDEN_KINDS:
            out.append(Shown(e["log"], int(e["seq"]), e["frame_hash"], ev))
    out.sort(key=lambda s: (int(s.event.get("observed_at") or 0), s.log, s.seq))
    return out


def _us(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1_000_000)
    return int(value or 0)


def _iso(us: Any) -> str:
    from agentlog.core.timefmt import format_us

    try:
        return format_us(int(us)) if us else ""
    except (TypeError, ValueError):
        return ""


def text_of(value: Any) -> str:
    """A content value as text for people: a string as it is; an object or list as indented
    ``key: value`` lines, multi-line strings as indented blocks (not JSON with ``\\n`` escapes)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    lines: list[str] = []
    _readable(value, 0, lines)
    return "\n".join(lines)


def _readable(value: Any, depth: int, out: list[str], head: str = "") -> None:
    pad = "  " * depth
    if depth > 40:
        out.append(f"{pad}{head}…")
    elif isinstance(value, dict):
        if head:
            out.append(f"{pad}{head}" + ("" if value else " {}"))
        for k, v in value.items():
            _readable(v, depth + (1 if head else 0), out, f"{k}:")
    elif isinstance(value, list):
        if head:
            out.append(f"{pad}{head}" + ("" if value else " []"))
        for v in value:
            _readable(v, depth + (1 if head else 0), out, "-")
    elif isinstance(value, str) and "\n" in value:
        out.append(f"{pad}{head} |")
        out.extend(f"{pad}  {line}" for line in value.split("\n"))
    else:
        shown = value if isinstance(value, str) else "null" if value is None else str(value).lower() \
            if isinstance(value, bool) else str(value)
        out.append(f"{pad}{head} {shown}" if head else f"{pad}{shown}")


def brief(tool_input: Any) -> str:
    """One line saying what a tool call was given: its command, path, pattern or description."""
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt"):
            if isinstance(tool_input.get(key), str) and tool_input[key].strip():
                first = str(tool_input[key]).strip().split("\n", 1)[0]
                return first[:117] + "…" if len(first) > 120 else first
    return ""


def _clip(text: str) -> str:
    if len(text) <= MAX_FIELD:
        return text
    return text[:MAX_FIELD] + f"\n… (clipped: {len(text) - MAX_FIELD} more characters)"


def edit_diffs(tool_input: Any, default_path: str = "file") -> list[tuple[str, str]]:
    """(path, unified diff) of each change an edit tool's input makes (``old_string``/``new_string``,
    a list of ``edits``, or a whole file's ``content``)."""
    inp: dict[str, Any] = tool_input if isinstance(tool_input, dict) else {}
    path = str(inp.get("file_path") or inp.get("path") or default_path)
    if isinstance(inp.get("edits"), list):
        pairs = [(str(e.get("old_string", "")), str(e.get("new_string", ""))) for e in inp["edits"] if isinstance(e, dict)]
    elif "old_string" in inp or "new_string" in inp:
        pairs = [(str(inp.get("old_string", "")), str(inp.get("new_string", "")))]
    elif "content" in inp:
        pairs = [("", str(inp.get("content", "")))]
    else:
        pairs = []
    return [(path, "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), fromfile=path, tofile=path, n=2,
                                                  lineterm=""))) for old, new in pairs]


# -- building the view ----------------------------------------------------------------------


def _turn_of(turns: list[dict[str, Any]], at: int) -> str | None:
    found = None
    for t in turns:
        if _us(t.get("started_at")) <= at:
            found = str(t["turn_id"])
    return found


def _attempt_labels(t: Target) -> dict[str, str]:
    return {aid: f"attempt {a.get('attempt_index')}" for aid, a in t.attempts.items()}


def build(t: Target, bundle: dict[str, Any], clean: Sanitizer) -> tuple[dict[str, Any], list[Shown]]:
    """(the sanitised view, the frames it shows) of target ``t`` from the proof bundle of its session."""
    events = frames_events(bundle, t.root)
    by_id = {str(s.event.get("event_id")): s for s in events}
    calls_by_event: dict[str, dict[str, Any]] = {}
    for c in t.calls:
        for key in ("start_event_id", "end_event_id"):
            if c.get(key):
                calls_by_event[str(c[key])] = c
    prompt_turn = {str(tr["prompt_event_id"]): str(tr["turn_id"]) for tr in t.turns if tr.get("prompt_event_id")}
    labels = _attempt_labels(t)
    clean.hosts |= t.hosts
    clean.learn(text_of(s.event.get("content")) for s in events)
    clean.learn(str(_sub(s.event, "project", "root") or "") for s in events)

    turns: dict[str | None, dict[str, Any]] = {}
    shown: list[Shown] = []
    tools: dict[str, dict[str, Any]] = {}
    for s in events:
        ev = s.event
        call = calls_by_event.get(str(ev.get("event_id")))
        at = int(ev.get("observed_at") or 0)
        turn_id = (str(call["turn_id"]) if call and call.get("turn_id") else
                   prompt_turn.get(str(ev.get("event_id"))) or _turn_of(t.turns, at))
        if t.only_turn is not None and turn_id != t.only_turn:
            continue
        if t.only_attempt is not None and ev.get("kind") != "prompt_submitted" and \
                (call is None or str(call.get("attempt_id")) != t.only_attempt):
            continue
        items = turns.setdefault(turn_id, {"items": []})["items"]
        shown.append(s)
        item = _item(ev, call, labels, tools, clean)
        if item is not None:
            items.append(item)
    view = {
        "kind": t.kind, "id": t.display,
        "title": clean(f"{t.kind.capitalize()} {t.display}"),
        "meta": _meta(t, clean),
        "turns": [_turn(t, turn_id, body["items"], clean) for turn_id, body in turns.items()],
    }
    if not shown:
        raise NothingToShare(f"{t.display} has no events to show")
    return view, shown


def _meta(t: Target, clean: Sanitizer) -> list[tuple[str, str]]:
    s = t.session
    from agentlog.projection.ids import display

    pairs = [("session", display("session", str(t.session_id))), ("agent", str(s.get("provider") or "")),
             ("project", str(s.get("project_name") or "")), ("started", _iso(_us(s.get("started_at")))),
             ("ended", _iso(_us(s.get("ended_at")))), ("model", str(s.get("model") or ""))]
    return [(k, clean(v)) for k, v in pairs if v]


def _turn(t: Target, turn_id: str | None, items: list[dict[str, Any]], clean: Sanitizer) -> dict[str, Any]:
    row = next((tr for tr in t.turns if str(tr["turn_id"]) == turn_id), None)
    if row is None:
        return {"title": "Before the first turn", "status": "", "attempts": [], "items": items}
    attempts = []
    for aid in row.get("attempt_ids") or []:
        a = t.attempts.get(str(aid))
        if a is None or (t.only_attempt is not None and str(aid) != t.only_attempt):
            continue
        note = ""
        if a.get("supersedes") and str(a["supersedes"]) in t.attempts:
            note = f"retry of attempt {t.attempts[str(a['supersedes'])].get('attempt_index')}"
        if a.get("superseded_by") and str(a["superseded_by"]) in t.attempts:
            note += ("; " if note else "") + f"superseded by attempt {t.attempts[str(a['superseded_by'])].get('attempt_index')}"
        attempts.append({"label": f"attempt {a.get('attempt_index')}", "outcome": clean(str(a.get("outcome") or "")),
                         "failure_class": clean(str(a.get("failure_class") or "")),
                         "approach": clean(str(a.get("approach") or "")), "note": note,
                         "tool_calls": int(a.get("tool_call_count") or 0)})
    return {"title": f"Turn {row.get('turn_index')}", "status": clean(str(row.get("status") or "")),
            "attempts": attempts, "items": items}


def _sub(ev: dict[str, Any], part: str, key: str) -> Any:
    got = ev.get(part)
    return got.get(key) if isinstance(got, dict) else None


def _item(ev: dict[str, Any], call: dict[str, Any] | None, labels: dict[str, str], tools: dict[str, dict[str, Any]],
          clean: Sanitizer) -> dict[str, Any] | None:
    """The view item of one event; None when it completes a tool call shown already (its start)."""
    kind = str(ev.get("kind") or "")
    got = ev.get("content")
    content: dict[str, Any] = got if isinstance(got, dict) else {}
    at = _iso(ev.get("observed_at"))
    if kind == "prompt_submitted":
        return {"type": "prompt", "at": at, "text": clean(_clip(text_of(content.get("prompt", content))))}
    if kind == "agent_message":
        return {"type": "message", "at": at, "text": clean(_clip(text_of(content.get("message", content))))}
    if kind.startswith("tool_call_"):
        tool_name = _sub(ev, "tool", "name")
        key = str(call["tool_call_id"]) if call else str(_sub(ev, "tool", "call_id") or ev.get("event_id"))
        item = tools.get(key)
        fresh = item is None
        if item is None:
            item = tools[key] = {"type": "tool", "at": at, "name": clean(str(tool_name or "?")),
                                 "attempt": labels.get(str(call.get("attempt_id"))) if call else None,
                                 "status": "", "outcome_class": "", "exit_code": "", "duration_ms": "", "brief": "",
                                 "input": "", "output": "", "diffs": []}
        if not item["input"] and "tool_input" in content:
            item["input"] = clean(_clip(text_of(content["tool_input"])))
            item["brief"] = clean(brief(content["tool_input"]))
            if tool_name in EDIT_TOOLS:
                item["diffs"] = [{"path": clean(p), "diff": clean(_clip(d))} for p, d in edit_diffs(content["tool_input"])]
        if kind != "tool_call_started":
            out = content.get("tool_output", content.get("error", content.get("output")))
            item["output"] = clean(_clip(text_of(out)))
            status = _sub(ev, "outcome", "status") or ("failure" if kind == "tool_call_failed" else "")
            item["status"] = clean(str(status))
            item["outcome_class"] = clean(str(_sub(ev, "outcome", "class") or ""))
            code = _sub(ev, "outcome", "exit_code")
            item["exit_code"] = "" if code is None else str(code)
            item["duration_ms"] = "" if ev.get("duration_ms") is None else str(ev.get("duration_ms"))
        return item if fresh else None
    body = {k: v for k, v in content.items()} if content else {}
    return {"type": "event", "at": at, "kind": clean(kind), "text": clean(_clip(text_of(body) if body else ""))}


__all__ = ["EDIT_TOOLS", "HIDDEN_KINDS", "MAX_FIELD", "NothingToShare", "Shown", "Target", "build", "edit_diffs",
           "brief",
           "frames_events", "target", "text_of"]
