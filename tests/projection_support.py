"""Helpers for the projection tests (a test-support module, not a test file).

- wire events: :func:`wire` builds one wire-form event (validated by
  ``Event.from_wire``), :func:`deliver` appends wire events to their session
  logs under a data root the way the hook does;
- normalisation: :func:`batch_tables` (the batch ``project()`` over wire
  events) and :func:`view_tables` (every public view of the stored projection
  through the query engine) give the same shape — rows as dicts, sorted by
  their id columns, times as µs integers, lists as lists — so the two compare
  with ``==``;
- generation: :func:`streams`, a hypothesis strategy for a small random event
  stream over one to three sessions and one or two providers, with
  corrections and retractions aimed at ids the stream can produce.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

import orjson
from hypothesis import strategies as st

from agentlog.core import fastjson
from agentlog.log.writer import open_session_log
from agentlog.core.model import Event
from agentlog.projection import observe
from agentlog.projection.ids import derive
from agentlog.projection.projector import project
from agentlog.projection.tables import PUBLIC

US = 1_000_000
BASE_US = int(datetime(2026, 11, 2, 10, 0, 0, tzinfo=timezone.utc).timestamp()) * US
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
META_PROVIDER = "agentlog"
META_SESSION = "meta"

TABLES: tuple[str, ...] = tuple(PUBLIC)
"""The public views (and the batch tables of the same names)."""

ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "sessions": ("session_id",),
    "turns": ("turn_id",),
    "tool_calls": ("tool_call_id",),
    "attempts": ("attempt_id",),
    "edges": ("edge_kind", "from_type", "from_id", "to_type", "to_id"),
    "signals": ("signal_id",),
    "commits": ("commit_id",),
    "handoffs": ("handoff_id",),
    "work_units": ("work_unit_id",),
    "decisions": ("decision_id",),
    "conflicts": ("conflict_id",),
    "corrections": ("event_id",),
    "retractions": ("event_id",),
}


# -- wire events -------------------------------------------------------------------


def event_id(seed: int, n: int) -> str:
    """A UUID-shaped event id, different for each (seed, n)."""
    h = hashlib.sha1(f"{seed}:{n}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-7{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def wire(eid: str, kind: str, provider: str, psid: str | None, at: int, *, captured_at: int | None = None,
         name: str = "", **fields: Any) -> dict[str, Any]:
    """One wire-form event (keys in wire order; checked with ``Event.from_wire``)."""
    ev: dict[str, Any] = {
        "event_id": eid, "schema_version": 1, "kind": kind, "provider": provider,
        "provider_event_name": name or kind, "observed_at": at,
        "captured_at": at if captured_at is None else captured_at, "capture_mode": "full",
        "agentlog_version": "test",
    }
    if psid is not None:
        ev["provider_session_id"] = psid
    for key in ("provider_turn_id", "agent", "tool", "paths", "outcome", "duration_ms", "project", "attrs",
                "content"):
        v = fields.pop(key, None)
        if v is not None and v != [] and v != {}:
            ev[key] = v
    assert not fields, f"unknown wire fields {sorted(fields)}"
    Event.from_wire(ev)
    return ev


def session_id_of(provider: str, psid: str) -> str:
    return derive("session", provider, psid)


def attempt_id_of(provider: str, psid: str, turn_index: int, attempt_index: int) -> str:
    return derive("attempt", session_id_of(provider, psid), str(turn_index), str(attempt_index))


def turn_id_of(provider: str, psid: str, turn_index: int) -> str:
    return derive("turn", session_id_of(provider, psid), str(turn_index))


def deliver(root: str, events: Iterable[dict[str, Any]]) -> None:
    """Append each event (as is, duplicates included) to its session's log."""
    logs: dict[tuple[str, str | None], Any] = {}
    for ev in events:
        key = (ev["provider"], ev.get("provider_session_id"))
        log = logs.get(key)
        if log is None:
            log = logs[key] = open_session_log(root, key[0], key[1], durability="relaxed", capture_mode="full")
        log.append([fastjson.dumps_bytes(ev)])


# -- normalisation -------------------------------------------------------------------


def to_us(v: datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=timezone.utc)
    return (v - EPOCH) // timedelta(microseconds=1)


def _value(v: Any) -> Any:
    if isinstance(v, datetime):
        return to_us(v)
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return v


def _sort_key(table: str, row: dict[str, Any]) -> tuple[Any, ...]:
    ids = tuple("" if row.get(c) is None else str(row.get(c)) for c in ID_COLUMNS[table])
    return ids + (orjson.dumps(row, option=orjson.OPT_SORT_KEYS),)


def normalise(table: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{k: _value(v) for k, v in r.items()} for r in rows]
    out.sort(key=lambda r: _sort_key(table, r))
    return out


def batch_tables(events: Iterable[dict[str, Any]], at: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """The batch projection of wire events, every public table normalised."""
    p = project(observe.from_wire(events), at)
    return {t: normalise(t, p.tables[t]) for t in TABLES}


def view_tables(root: str) -> dict[str, list[dict[str, Any]]]:
    """Every public view of the stored projection under ``root``, normalised (no catch-up)."""
    from agentlog.query.engine import Engine
    from agentlog.query.pulled import MACHINE_COLUMNS

    out: dict[str, list[dict[str, Any]]] = {}
    with Engine(root) as eng:
        for t in TABLES:
            # the machine a session was pulled from is the engine's (query/pulled.py), not the projection's
            cols = f"* EXCLUDE ({', '.join(MACHINE_COLUMNS)})" if t == "sessions" else "*"
            r = eng.run(f"SELECT {cols} FROM {t}", max_rows=1_000_000)
            assert not r.truncated
            out[t] = normalise(t, (dict(zip(r.columns, row)) for row in r.rows))
    return out


def diff(a: dict[str, list[dict[str, Any]]], b: dict[str, list[dict[str, Any]]]) -> str:
    """A short description of where two normalised projections differ ('' if equal)."""
    lines: list[str] = []
    for t in TABLES:
        ra, rb = a.get(t, []), b.get(t, [])
        if ra == rb:
            continue
        lines.append(f"{t}: {len(ra)} vs {len(rb)} rows")
        for x, y in zip(ra, rb):
            if x != y:
                keys = sorted(set(x) | set(y))
                lines.append("  first differing row: " + ", ".join(
                    f"{k}: {x.get(k)!r} != {y.get(k)!r}" for k in keys if x.get(k) != y.get(k)))
                break
    return "\n".join(lines)


def mask(tables: dict[str, list[dict[str, Any]]], table: str, column: str,
         where: Any = lambda r: True) -> dict[str, list[dict[str, Any]]]:
    """A copy of ``tables`` with ``column`` of the rows of ``table`` matching ``where`` set to None."""
    out = dict(tables)
    out[table] = [({**r, column: None} if where(r) else r) for r in tables[table]]
    return out


def known_divergences(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``tables`` as they are: the stored projection has no known divergence from the
    batch one (the places it used to differ are regression tests now)."""
    return tables


# -- generation ----------------------------------------------------------------------

PROVIDERS = ("claude_code", "codex")
PATHS = ("src/a.py", "src/b.py", "README.md")
PROJECTS = (
    {"root": "/work/repo", "name": "repo", "branch": "main"},
    {"root": "/work/other", "name": "other", "branch": "main"},
)
FAILURE_CLASSES = ("string_mismatch", "nonzero_exit", "timeout")
TOOLS = (  # (name, category, can fail)
    ("Read", "file_read", False),
    ("Grep", "search", False),
    ("Edit", "file_edit", True),
    ("Write", "file_write", True),
    ("Bash", "shell", True),
)
GAPS_S = (0, 1, 1, 7, 7, 90, 400, 2000, 8000)
"""Seconds between steps: ties, short, and across the 5 min / 30 min / 2 h thresholds."""
ACTIONS = ("prompt", "prompt", "call", "call", "call", "retry", "stop", "stop", "fail_turn", "start", "end",
           "permission", "notify", "denied", "commit", "correction", "retract")
PROMPTS = ("Fix the bug", "Add a test", "Try again", "<system-reminder>ctx</system-reminder>")


def sha(n: int) -> str:
    return hashlib.sha1(f"head {n}".encode()).hexdigest()


@st.composite
def streams(draw: Any, max_steps: int = 18, meta: bool = True) -> list[dict[str, Any]]:
    """A small random event stream (wire events, each event id once)."""
    seed = draw(st.integers(0, 2**32 - 1))
    providers = draw(st.sampled_from((PROVIDERS[:1], PROVIDERS[1:], PROVIDERS, PROVIDERS)))
    n_sessions = draw(st.integers(1, 3))
    sessions = []
    for i in range(n_sessions):
        prov = providers[i % len(providers)]  # with two providers, neighbouring sessions differ
        proj = PROJECTS[draw(st.sampled_from((0, 0, 0, 1)))]
        sessions.append((prov, f"s{i}", proj))
    actions = ACTIONS if meta else tuple(a for a in ACTIONS if a not in ("correction", "retract"))
    # Each step: how to move between sessions (mostly stay: sessions run in blocks, so that
    # one can hand off to the next; sometimes jump: concurrent sessions), the action, the gap.
    moves = st.sampled_from(("stay", "stay", "stay", "stay", "next", "jump"))
    steps = draw(st.lists(st.tuples(moves, st.sampled_from(actions), st.sampled_from(GAPS_S)),
                          min_size=1, max_size=max_steps))
    events: list[dict[str, Any]] = []
    n = 0
    t = BASE_US
    heads = {s[1]: 0 for s in sessions}
    prompts = {s[1]: 0 for s in sessions}  # turns opened so far: corrections mostly aim at real ones
    call_seq = 0

    def new(kind: str, si: int, at: int, **fields: Any) -> dict[str, Any]:
        nonlocal n
        prov, psid, proj = sessions[si]
        n += 1
        jitter = draw(st.integers(0, 2))
        ev = wire(event_id(seed, n), kind, prov, psid, at, captured_at=at + jitter,
                  project={**proj, "head": sha(heads[psid])}, **fields)
        events.append(ev)
        return ev

    def new_meta(kind: str, at: int, attrs: dict[str, Any], note: str | None) -> None:
        nonlocal n
        n += 1
        events.append(wire(event_id(seed, n), kind, META_PROVIDER, META_SESSION, at,
                           name=kind.capitalize(), attrs=attrs, content={"note": note} if note else None))

    si = 0
    for move, action, gap in steps:
        if move == "next":
            si = (si + 1) % n_sessions
        elif move == "jump":
            si = draw(st.integers(0, n_sessions - 1))
        t += gap * US
        prov, psid, _ = sessions[si]
        if action == "prompt":
            text = draw(st.sampled_from(PROMPTS))
            attrs = {"prompt_kind": "injected" if text.startswith("<") else "user", "prompt_chars": len(text)}
            prompts[psid] += not text.startswith("<")
            new("prompt_submitted", si, t, attrs=attrs, content={"prompt": text})
        elif action in ("call", "commit"):
            if action == "commit":
                tname, cat, can_fail = "Bash", "shell", True
                attrs = {"command_category": "git", "git_subcommand": "commit"}
                paths: list[str] = []
            else:
                tname, cat, can_fail = draw(st.sampled_from(TOOLS))
                attrs = {"command_category": "test"} if cat == "shell" and draw(st.booleans()) else {}
                paths = [] if cat == "shell" and draw(st.booleans()) else [draw(st.sampled_from(PATHS))]
            call_seq += 1
            cid = f"call_{call_seq}" if draw(st.booleans()) else None
            end_cid = cid if draw(st.integers(0, 5)) else f"call_other_{call_seq}"  # rarely: a different id
            has_start = draw(st.integers(0, 7)) > 0
            has_end = draw(st.integers(0, 5)) > 0
            outcome = "success"
            if can_fail:
                outcome = draw(st.sampled_from(("success", "success", "failure", "denied")))
            agent = {"agent_id": "sub1"} if draw(st.integers(0, 7)) == 0 else None
            tool = {"name": tname, "category": cat, "call_id": cid}
            if has_start:
                new("tool_call_started", si, t, tool=tool, paths=paths, attrs=attrs, agent=agent)
            if has_end:
                end_at = t + draw(st.sampled_from((0, 1, 3, 120))) * US
                if action == "commit" and outcome == "success" and draw(st.booleans()):
                    heads[psid] += 1
                fclass = draw(st.sampled_from(FAILURE_CLASSES)) if outcome != "success" else None
                kind = "tool_call_failed" if outcome == "failure" else "tool_call_finished"
                new(kind, si, end_at, tool={**tool, "call_id": end_cid if cid else None}, paths=paths, attrs=attrs,
                    agent=agent, outcome={"status": outcome, "class": fclass} if fclass or outcome != "success"
                    else {"status": "success"})
        elif action == "retry":  # a failing edit, then the same edit again, successful
            call_seq += 1
            path = draw(st.sampled_from(PATHS))
            cid = f"call_{call_seq}" if draw(st.booleans()) else None
            tool = {"name": "Edit", "category": "file_edit", "call_id": cid}
            new("tool_call_started", si, t, tool=tool, paths=[path])
            new("tool_call_failed", si, t + US, tool=tool, paths=[path],
                outcome={"status": "failure", "class": draw(st.sampled_from(FAILURE_CLASSES))})
            tool2 = {**tool, "call_id": f"call_{call_seq}b" if cid else None}
            new("tool_call_started", si, t + 2 * US, tool=tool2, paths=[path])
            new("tool_call_finished", si, t + 3 * US, tool=tool2, paths=[path], outcome={"status": "success"})
            t += 3 * US
        elif action == "stop":
            new("turn_stopped", si, t)
        elif action == "fail_turn":
            new("turn_failed", si, t, outcome={"status": "failure", "class": draw(st.sampled_from(FAILURE_CLASSES))})
        elif action == "start":
            new("session_started", si, t, attrs={"source": draw(st.sampled_from(("startup", "resume")))})
        elif action == "end":
            new("session_ended", si, t, attrs={"reason": "exit"})
        elif action == "permission":
            new("permission_requested", si, t, tool={"name": "Bash", "category": "shell"})
        elif action == "notify":
            ntype = draw(st.sampled_from(("permission_prompt", "idle_prompt", "auth_success")))
            new("notification", si, t, attrs={"notification_type": ntype})
        elif action == "denied":
            tname, cat = draw(st.sampled_from((("Bash", "shell"), ("Edit", "file_edit"))))
            new("permission_denied", si, t, tool={"name": tname, "category": cat}, outcome={"status": "denied"})
        elif action == "correction":
            ctype = draw(st.sampled_from(("attempt_outcome", "attempt_outcome", "attempt_note", "turn_objective",
                                          "bogus")))
            tp, tpsid, _ = sessions[draw(st.integers(0, n_sessions - 1))]
            ti = draw(st.sampled_from((prompts[tpsid], max(1, prompts[tpsid]), 0, 3)))
            ai = draw(st.sampled_from((0, 0, 0, 1, 2)))
            if ctype == "turn_objective":
                target = turn_id_of(tp, tpsid, ti)
                target = draw(st.sampled_from((target, "trn_" + target)))
            else:
                target = attempt_id_of(tp, tpsid, ti, ai)
                target = draw(st.sampled_from((target, "att_" + target)))
            attrs = {"correction_type": ctype, "target": target}
            if ctype == "attempt_outcome":
                attrs["outcome"] = draw(st.sampled_from(("succeeded", "failed", "abandoned", "superseded", "won")))
                if draw(st.booleans()):
                    attrs["failure_class"] = draw(st.sampled_from(FAILURE_CLASSES))
            note = draw(st.sampled_from((None, "checked by hand", "objective: ship it")))
            new_meta("correction", t, attrs, note)
        elif action == "retract":
            ttype = draw(st.sampled_from(("attempt", "attempt", "event", "session")))
            tp, tpsid, _ = sessions[draw(st.integers(0, n_sessions - 1))]
            if ttype == "attempt":
                ti = draw(st.sampled_from((prompts[tpsid], max(1, prompts[tpsid]), 0)))
                target = attempt_id_of(tp, tpsid, ti, draw(st.sampled_from((0, 0, 1))))
            elif ttype == "session":
                target = draw(st.sampled_from(("", "ses_"))) + session_id_of(tp, tpsid)
            else:
                regular = [e["event_id"] for e in events if e["provider"] != META_PROVIDER]
                target = draw(st.sampled_from(regular)) if regular and draw(st.integers(0, 4)) else event_id(seed, 9999)
            reason = draw(st.sampled_from(("test", "duplicate", "privacy", "nonsense")))
            new_meta("retraction", t, {"target_type": ttype, "target": target, "reason": reason},
                     draw(st.sampled_from((None, "oops"))))
    if not events:  # every step was a call with neither start nor end
        new("prompt_submitted", 0, t, attrs={"prompt_kind": "user"}, content={"prompt": PROMPTS[0]})
    return events


@st.composite
def deliveries(draw: Any, events: list[dict[str, Any]], max_chunks: int = 5) -> list[list[dict[str, Any]]]:
    """``events`` (plus some of them twice) in a random order, cut into 1 to ``max_chunks`` chunks."""
    dup = draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    items = list(events) + [e for e, d in zip(events, dup) if d and draw(st.integers(0, 3)) == 0]
    order = draw(st.permutations(range(len(items))))
    shuffled = [items[i] for i in order]
    k = draw(st.integers(1, min(max_chunks, len(shuffled))))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(shuffled) - 1)), min_size=k - 1, max_size=k - 1,
                                unique=True))) if len(shuffled) > 1 else []
    bounds = [0] + cuts + [len(shuffled)]
    return [shuffled[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
