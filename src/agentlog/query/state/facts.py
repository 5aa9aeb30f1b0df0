"""The projection's small tables kept per engine (``_Core``) and the memo that
holds them (``_Facts``, one per engine).

An engine's snapshot never changes, so what the time-travel questions read
of the projection is loaded once per engine into Python structures sorted
for "the latest … at or before t" lookups (bisection): the small tables
(sessions, turns, attempts, signals, corrections, work units: ``_Core``)
and a compact index of the tool calls (``_Calls``, :mod:`.calls`).
Answering at an instant then needs no SQL but for what the projection
does not hold: a session's last event before ``t`` when its last activity
came later (the events table, once per question, memoised: :mod:`.activity`),
the names of a short call found in flight (rare), attempts' evidence lists
(WHY), and the tool call ids of calls started at the same microsecond
(rarer still). A session whose state no longer changes but for its liveness
is kept too (``_Settled``).
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from agentlog.projection.rules import BLOCKED_OPEN_FOR, STALE_AFTER
from agentlog.query.state.common import FAILURES, Runner, _low, _q
from agentlog.query.state.calls import _Calls, _load_calls


@dataclass
class _AttemptIndex:
    """One session's (or work unit's) attempts that have a start, sorted for "the latest by t"."""

    by_start: list[dict[str, Any]]
    """By (start, turn index, attempt index)."""
    starts: list[int]
    by_end: list[dict[str, Any]]
    """Those with an end, by (end, start, turn index, attempt index)."""
    ends: list[int]
    fails: list[dict[str, Any]]
    """Those of ``by_end`` that failed, were superseded or were corrected, in the same order."""
    fail_ends: list[int]

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> _AttemptIndex:
        """From attempts sorted by (start, turn index, attempt index), None indexes first."""
        started = [r for r in rows if r["s"] is not None]
        ended = sorted((r for r in started if r["e"] is not None), key=lambda r: r["e"])  # stable: ties stay sorted
        fails = [r for r in ended if r["outcome"] in FAILURES or r["corrected_by"] is not None]
        return cls(started, [r["s"] for r in started], ended, [r["e"] for r in ended], fails,
                   [r["e"] for r in fails])


def _newest(rows: list[dict[str, Any]], ends: list[int], t: int, n: int) -> list[dict[str, Any]]:
    """The last ``n`` of ``rows`` (sorted by end) that ended by ``t`` and started by ``t``, newest first."""
    out: list[dict[str, Any]] = []
    i = bisect_right(ends, t) - 1
    while i >= 0 and len(out) < n:
        if rows[i]["s"] <= t:
            out.append(rows[i])
        i -= 1
    return out


@dataclass
class _Core:
    """The projection's small tables, as read once per engine."""

    sessions: list[dict[str, Any]]
    """Every session (retracted ones too), by (started, session id), started NULL last."""
    session_by_id: dict[str, dict[str, Any]]
    turns: dict[str, list[dict[str, Any]]]
    """Per session, its turns that are not retracted and have a start, by (start, turn index)."""
    turn_starts: dict[str, list[int]]
    turn_prompts: dict[str, list[int]]
    """Per session, how many of its first n turns (of ``turns``) had a prompt, for n = 0, 1, …"""
    turn_by_id: dict[str, list[dict[str, Any]]]
    """Turns not retracted, by id."""
    attempts_by_session: dict[str, _AttemptIndex]
    attempts_by_unit: dict[str, _AttemptIndex]
    attempt_starts: dict[str, int | None]
    """Every attempt's start (retracted ones too: a successor's start is read whatever it became)."""
    signals: dict[str, list[dict[str, Any]]]
    """Per session, its signals not retracted, newest first (raised, then event id)."""
    corrections: dict[str, list[dict[str, Any]]]
    """Per attempt, the applied outcome corrections, oldest first (corrected, then event id)."""
    units: list[dict[str, Any]]
    unit_by_id: dict[str, dict[str, Any]]
    unit_turns: dict[str, tuple[list[dict[str, Any]], list[int], list[dict[str, Any]], list[int]]] = field(
        default_factory=dict)
    """Per work unit (filled as asked): its member turns with a start, by (start, turn index), their
    starts, those with an end by end, and their ends."""
    settled: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Attempt row (by identity) → its masked copy, once nothing more can change it (see :func:`_masked`)."""
    settled_views: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Masked copy (by identity) in ``settled`` → its :func:`_attempt_view`."""


ActivityKey = tuple[str, str, int, int]


@dataclass
class _Settled:
    """A session's state at any instant from ``since`` on: by then every time the answer reads
    (its turns, attempts and their successors and corrections, calls, signals, activity, end) has
    passed, so only its liveness changes — with the silence since its last activity."""

    since: int
    state: dict[str, Any]
    activity_us: int

    def at(self, t: int) -> dict[str, Any]:
        out = _copy_state(self.state)
        silence = t - self.activity_us
        if out["state"] == "closed":
            out["liveness"] = "closed"
        elif silence <= STALE_AFTER or (out["blocked"] and silence <= BLOCKED_OPEN_FOR):
            out["liveness"] = "open"
        else:
            out["liveness"] = "stale"
        return out


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of a session state that shares nothing mutable with it."""
    out = dict(state)
    for key in ("current_turn", "last_attempt", "last_failure", "blocking_signal", "uncertainty"):
        if out[key] is not None:
            out[key] = dict(out[key])
    out["in_flight"] = [dict(f) for f in state["in_flight"]]
    out["evidence"] = list(state["evidence"])
    return out


def _settled_since(core: _Core, calls: _Calls, s: dict[str, Any]) -> int | None:
    """The time from which session ``s``'s state changes only with its liveness (None: never known)."""
    sid = s["session_id"]
    if s["activity_us"] is None or s["started_us"] is None:
        return None
    times: list[int | None] = [s["started_us"], s["ended_us"], s["activity_us"], s["last_us"],
                               calls.first.get(sid), calls.last.get(sid)]
    turns = core.turns.get(sid, [])
    times += [x["s"] for x in turns[-1:]] + [x["e"] for x in turns]
    ix = core.attempts_by_session.get(sid)
    if ix is not None:
        times += ix.starts[-1:] + ix.ends[-1:] + [a["successor_s"] for a in ix.by_start]
        times += [c["at"] for a in ix.by_start if a["corrected_by"] is not None
                  for c in core.corrections.get(a["attempt_id"], [])]
    for sig in core.signals.get(sid, ()):
        times += [sig["raised"], sig["cleared"]]
    return max(x for x in times if x is not None)


@dataclass
class _Facts:
    core: _Core | None = None
    calls: _Calls | None = None
    activity: dict[ActivityKey, tuple[int, str] | None] = field(default_factory=dict)
    """(provider, provider session id, t, window start) → a session's last activity by t (None: none)."""
    evidence: dict[str, list[str]] = field(default_factory=dict)
    """Attempt id → its evidence list."""
    settled: dict[str, _Settled] = field(default_factory=dict)
    """Session id → its state once nothing but the passing of time changes it (see :class:`_Settled`)."""


_FACTS: weakref.WeakKeyDictionary[Any, _Facts] = weakref.WeakKeyDictionary()


def _facts(engine: Runner) -> _Facts:
    """What is kept for this engine (a fresh, unkept one if the engine cannot be weakly referenced)."""
    owner = getattr(engine, "__wrapped__", engine)
    try:
        facts = _FACTS.get(owner)
        if facts is None:
            facts = _FACTS[owner] = _Facts()
    except TypeError:
        return _Facts()
    return facts


def _core(engine: Runner, facts: _Facts) -> _Core:
    if facts.core is None:
        facts.core = _load_core(engine)
    return facts.core


def _calls(engine: Runner, facts: _Facts) -> _Calls:
    if facts.calls is None:
        facts.calls = _load_calls(engine)
    return facts.calls


def _load_core(engine: Runner) -> _Core:
    sessions = _q(engine, (
        "SELECT session_id, provider, provider_session_id, project_id, project_name, coverage, "
        "epoch_us(started_at) AS started_us, epoch_us(ended_at) AS ended_us, epoch_us(last_activity_at) AS activity_us, "
        "last_activity_event_id, start_event_id, first_event_id, end_event_id, retracted, "
        "epoch_us(last_event_at) AS last_us, last_event_id FROM sessions ORDER BY started_at, session_id"))
    session_by_id: dict[str, dict[str, Any]] = {}
    for s in sessions:
        session_by_id.setdefault(s["session_id"], s)

    turns: dict[str, list[dict[str, Any]]] = {}
    turn_by_id: dict[str, list[dict[str, Any]]] = {}
    for r in _q(engine, (
            "SELECT session_id, turn_id, turn_index, epoch_us(started_at) AS s, epoch_us(ended_at) AS e, status, "
            "objective, coalesce(prompt_event_id, first_event_id) AS opening_event, "
            "prompt_event_id IS NOT NULL AS prompted FROM turns WHERE NOT retracted "
            "ORDER BY started_at, turn_index NULLS FIRST")):
        turn_by_id.setdefault(r["turn_id"], []).append(r)
        if r["s"] is not None and r["session_id"] is not None:
            turns.setdefault(r["session_id"], []).append(r)  # by (start, turn index)
    turn_starts: dict[str, list[int]] = {}
    turn_prompts: dict[str, list[int]] = {}
    for sid, rows in turns.items():
        turn_starts[sid] = [r["s"] for r in rows]
        counts = [0]
        for r in rows:
            counts.append(counts[-1] + (1 if r["prompted"] else 0))
        turn_prompts[sid] = counts

    rows = _q(engine, (
        "SELECT attempt_id, session_id, turn_id, turn_index, attempt_index, approach, epoch_us(started_at) AS s, "
        "epoch_us(ended_at) AS e, outcome, failure_class, inferred_outcome, inferred_failure_class, corrected_by, "
        "superseded_by, failing_event_id, first_action_event_id, confidence, work_unit_id, retracted FROM attempts "
        "ORDER BY started_at, turn_index NULLS FIRST, attempt_index NULLS FIRST"))
    attempt_starts = {r["attempt_id"]: r["s"] for r in rows}
    by_session: dict[str, list[dict[str, Any]]] = {}
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for a in rows:  # by (start, turn index, attempt index): the order _AttemptIndex keeps
        if a.pop("retracted") is not False:
            continue
        succ = a["superseded_by"]
        a["successor_s"] = attempt_starts.get(succ) if succ is not None else None
        if a["session_id"] is not None:
            by_session.setdefault(a["session_id"], []).append(a)
        if a["work_unit_id"] is not None:
            by_unit.setdefault(a["work_unit_id"], []).append(a)

    signals: dict[str, list[dict[str, Any]]] = {}
    for r in _q(engine, (
            "SELECT session_id, signal_id, event_id, kind, signal_type, epoch_us(raised_at) AS raised, "
            "epoch_us(cleared_at) AS cleared, evidence, confidence FROM signals "
            "WHERE NOT retracted AND raised_at IS NOT NULL")):
        signals.setdefault(r["session_id"], []).append(r)
    for found in signals.values():
        found.sort(key=lambda r: (r["raised"], _low(r["event_id"])), reverse=True)

    corrections: dict[str, list[dict[str, Any]]] = {}
    for r in _q(engine, (
            "SELECT target, outcome, failure_class, event_id, epoch_us(corrected_at) AS at FROM corrections "
            "WHERE status = 'applied' AND correction_type = 'attempt_outcome' AND corrected_at IS NOT NULL")):
        corrections.setdefault(r["target"], []).append(r)
    for found in corrections.values():
        found.sort(key=lambda r: (r["at"], r["event_id"] is None, r["event_id"] or ""))  # NULLS LAST

    units = _q(engine, (
        "SELECT work_unit_id, project_id, project_name, objective, objective_event_id, phase, status, "
        "epoch_us(started_at) AS s, epoch_us(updated_at) AS u, epoch_us(ended_at) AS e, sessions, turns, actors, "
        "evidence, confidence FROM work_units"))
    unit_by_id: dict[str, dict[str, Any]] = {}
    for u in units:
        unit_by_id.setdefault(u["work_unit_id"], u)

    return _Core(sessions, session_by_id, turns, turn_starts, turn_prompts, turn_by_id,
                 {k: _AttemptIndex.of(v) for k, v in by_session.items()},
                 {k: _AttemptIndex.of(v) for k, v in by_unit.items()}, attempt_starts, signals, corrections,
                 units, unit_by_id)
