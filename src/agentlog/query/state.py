"""Time travel over the projection: the state at an instant, what changed
between two instants, why something is blocked or failed, and causal traces.

Everything here reads an open query engine (``query.engine.Engine``). The
time-travel answers (state, DIFF, WHY, WHAT IS … NOW) read the projection
through facts loaded once per engine — its snapshot never changes — and
sorted for "the latest … by t" lookups, so an answer at an instant costs
Python over the few sessions and units concerned, plus at most one query of
the events table (a session's last event before ``t`` when it went on after
``t``); the rest (ids, traces, WHY FAILED) filter and aggregate inside DuckDB
and bring back only the few rows an answer needs. No function reads the wall
clock: every instant is an argument, and callers default "now" to the latest
observed event time (:func:`latest_event_us`).

State at ``t`` (:func:`state_at`) is the projection seen as it was known at
``t``: only entities observed at or before ``t``, outcomes masked to what was
known then — an attempt that had not ended is ``in_progress``; a failed
attempt whose retry had not started yet is ``failed``, not ``superseded``;
corrections recorded after ``t`` are ignored; a signal not cleared by ``t``
blocks; a turn whose end came later is ``in_progress``.

Answers carry ``evidence`` (event ids) and an ``uncertainty``
``{confidence, reason, note}``; when the evidence does not support a claim
the answer is one row with reason ``insufficient_evidence`` — never a guess.

Ids are bare UUID text, as stored; :func:`resolve_id` turns what a person
typed (``att_…``, a bare id, an unambiguous prefix of four or more hex
digits, a provider's session id) into ``(kind, id)`` or raises
:class:`ResolveError`.

TRACE (:func:`trace`) walks causal edges — ``caused``, ``triggered``,
``superseded``, ``handed_off`` (and ``blocked``, ``resolved``,
``contradicted`` should the projection emit them). UP follows edges
backwards, towards causes; DOWN forwards, towards effects; BOTH does each
from the start, each direction keeping to itself (up stays up), so BOTH is
"causes and effects", not "everything connected". Structural containment
(``parent_of``: work unit → turn, session → turn, turn → tool call) is
followed only DOWN: containment is not causation, and walking it upwards and
back down would flood a trace with siblings. The causal edges are loaded once
per engine into an adjacency index (the huge ``evidence_for`` and
``parent_of`` sets stay in DuckDB); containment children are fetched per
level, batched.
"""

from __future__ import annotations

import re
import weakref
from array import array
from bisect import bisect_left, bisect_right
from datetime import date, datetime, timedelta, timezone
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Iterable, Literal, Protocol, Sequence

from agentlog.query.timeexpr import format_us
from agentlog.projection.assemble import (
    BLOCKED_OPEN_FOR,
    STALE_AFTER,
    UNIT_IDLE_ABANDONED,
    UNIT_IDLE_DONE,
    _phase,
)
from agentlog.projection.ids import PREFIXES, split_display
from agentlog.projection.session import MUTATING
from agentlog.projection.session import coverage as coverage_grade

if TYPE_CHECKING:
    from agentlog.query.engine import QueryResult
    from agentlog.query.scope import Scope

__all__ = [
    "Runner",
    "Params",
    "ResolveError",
    "StateError",
    "StateAt",
    "ID_SPACES",
    "TRACE_KINDS",
    "CAUSAL_EDGES",
    "resolve_id",
    "latest_event_us",
    "state_at",
    "diff_state",
    "why_blocked",
    "why_failed",
    "what_is_doing_now",
    "trace",
    "flatten_session",
    "flatten_work_unit",
    "coverage_note",
]


class Runner(Protocol):
    """What these functions need of an engine: ``run`` one read-only statement."""

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = ...,
            max_rows: int = ...) -> QueryResult: ...


class StateError(ValueError):
    """A question that cannot be asked as put (``code`` is an ``AQL04xx`` code)."""

    def __init__(self, message: str, code: str = "AQL0409") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class ResolveError(LookupError):
    """An id that names nothing (``AQL0301``), several things (``AQL0302``) or
    is not an id of the expected kind (``AQL0303``/``AQL0304``)."""

    def __init__(self, message: str, code: str, matches: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.matches: dict[str, int] = matches or {}
        self.position: int | None = None
        """Where the id is in a statement (set by the statement executor)."""

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------- basics

US: Final = 1_000_000
FAILURES: Final = frozenset({"failed", "superseded"})
ALL_ROWS: Final = 100_000_000
"""Row cap for internal queries (each is already bounded by its SQL)."""

COVERAGE_CONFIDENCE: Final[dict[str, float]] = {"full": 0.9, "partial": 0.6, "minimal": 0.4, "unknown": 0.4}

_COVERAGE_NOTES: Final[dict[str, str]] = {
    "full": "the session's start, end, prompts and tool calls were observed; a reply or an action outside "
            "the hook surface (another terminal, the agent's own UI) would not be captured",
    "partial": "the session's start or its end was not observed (it may still be running), so what happened "
               "outside the observed span is unknown; a reply outside the hook surface would not be captured",
    "minimal": "neither the session's start nor its end was observed, only prompts and tool calls; waits, "
               "replies and anything outside the hook surface are invisible",
    "unknown": "no prompt and no tool call of the session was observed: hooks saw only lifecycle events, "
               "so nothing can be said about what it did",
}


def coverage_note(coverage: str | None) -> str:
    """What hooks could not see, given a session's coverage grade."""
    return _COVERAGE_NOTES.get(coverage or "unknown", _COVERAGE_NOTES["unknown"])


def _ts(us: int | None) -> str | None:
    return None if us is None else _format_us(us)


_format_us = lru_cache(maxsize=1 << 16)(format_us)
"""format_us, remembered: an answer formats the same stored times over and over."""


def _shown(text: str) -> str:
    cut = text[:40]
    safe = "".join(c if c.isprintable() else "?" for c in cut)
    return "'" + safe + ("…'" if len(text) > 40 else "'")


def _short(kind: str, value: str | None) -> str:
    if value is None:
        return "?"
    return f"{PREFIXES.get(kind, kind)}_{value[:8]}"


class Params:
    """Numbered parameters (``$1``, ``$2`` …) collected while a statement is built."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"

    def ts(self, us: int) -> str:
        return f"make_timestamptz({self(us)})"

    def many(self, values: Iterable[Any]) -> str:
        """An ``IN`` list: one parameter per value, or one list parameter when there are many."""
        vals = list(values)
        if not vals:
            return "(NULL)"
        if len(vals) > 32 and all(isinstance(v, str) for v in vals):
            return f"(SELECT unnest({self(vals)}::VARCHAR[]))"
        return "(" + ", ".join(self(v) for v in vals) + ")"


def _q(engine: Runner, sql: str, p: Params | None = None) -> list[dict[str, Any]]:
    res = engine.run(sql, p.values if p is not None and p.values else None, max_rows=ALL_ROWS)
    return [dict(zip(res.columns, r)) for r in res.rows]


def _dedup(ids: Iterable[str | None]) -> list[str]:
    out: dict[str, None] = {}
    for i in ids:
        if i:
            out[i] = None
    return list(out)


_LATEST: weakref.WeakKeyDictionary[Any, int | None] = weakref.WeakKeyDictionary()


def latest_event_us(engine: Runner) -> int | None:
    """The latest observed time in the store (µs), the default "now" of every answer
    (computed once per engine: its snapshot does not change)."""
    owner = getattr(engine, "__wrapped__", engine)
    try:
        return _LATEST[owner]
    except (KeyError, TypeError):
        pass
    rows = _q(engine, "SELECT epoch_us(max(observed_at)) AS t FROM events")
    latest = rows[0]["t"] if rows else None
    try:
        _LATEST[owner] = latest
    except TypeError:
        pass
    return latest


def _scope_conds(p: Params, scope: Scope | None, *, project_col: str | None = "project_id",
                 session_col: str | None = "session_id") -> list[str]:
    out: list[str] = []
    if scope is None:
        return out
    if scope.project_ids is not None and project_col:
        out.append(f"{project_col} IN {p.many(scope.project_ids)}")
    if scope.session and session_col:
        out.append(f"starts_with({session_col}, {p(split_display(scope.session)[1])})")
    return out


# --------------------------------------------------------------------------- ids

ID_SPACES: Final[dict[str, tuple[str, str]]] = {
    "attempt": ("attempts", "attempt_id"),
    "session": ("sessions", "session_id"),
    "turn": ("turns", "turn_id"),
    "tool_call": ("tool_calls", "tool_call_id"),
    "work_unit": ("work_units", "work_unit_id"),
    "decision": ("decisions", "decision_id"),
    "commit": ("commits", "commit_id"),
    "signal": ("signals", "signal_id"),
    "conflict": ("conflicts", "conflict_id"),
    "event": ("events", "event_id"),
}
"""Entity kind → (table, id column): every id space :func:`resolve_id` searches."""

MIN_PREFIX: Final = 4
_HEXISH: Final = re.compile(r"[0-9a-f-]+")


def resolve_id(engine: Runner, text: str, kinds: Sequence[str] | None = None) -> tuple[str, str]:
    """``(kind, full bare id)`` of an id as a person typed it.

    Accepts a display prefix (``att_…``: only that kind is searched), a bare
    id, an unambiguous prefix of at least four hex digits (hyphens optional),
    or — for sessions — the provider's own session id. An exact id wins over
    prefixes. Raises :class:`ResolveError` when nothing matches, when several
    entities match (listing how many of each kind; never a guess), or when a
    display prefix names a kind outside ``kinds``.
    """
    raw = text.strip()
    if not raw:
        raise ResolveError("an empty id", "AQL0303")
    allowed = list(kinds) if kinds else list(ID_SPACES)
    for k in allowed:
        if k not in ID_SPACES:
            raise ValueError(f"unknown id kind {k!r}")
    typed, bare = split_display(raw)
    if typed is not None:
        if typed not in allowed:
            raise ResolveError(f"{_shown(raw)} is a {typed} id; expected {_kinds_text(allowed)}", "AQL0304")
        allowed = [typed]
    # 1. Exact ids in the small tables (events, the big one, only in step 2).
    small = [k for k in allowed if k != "event"]
    if small:
        p = Params()
        ph = p(bare)
        sql = " UNION ALL ".join(
            f"(SELECT '{k}' AS kind, {ID_SPACES[k][1]} AS id FROM {ID_SPACES[k][0]} WHERE {ID_SPACES[k][1]} = {ph} "
            "LIMIT 1)" for k in small)
        hits = _q(engine, sql, p)
        if len(hits) == 1:
            return str(hits[0]["kind"]), str(hits[0]["id"])
        if len(hits) > 1:
            dup = {str(h["kind"]): 1 for h in hits}
            raise ResolveError(f"id {_shown(raw)} is ambiguous: {_counts_text(dup)}", "AQL0302", dup)
    # 2. Prefixes (and exact event ids).
    hexdigits = bare.replace("-", "")
    counts: dict[str, int] = {}
    found: dict[str, str] = {}
    prefix_ok = bool(_HEXISH.fullmatch(bare)) and len(hexdigits) >= MIN_PREFIX
    if prefix_ok or "event" in allowed:
        p = Params()
        parts = []
        for k in allowed:
            table, col = ID_SPACES[k]
            if prefix_ok:
                if "-" in bare or len(bare) <= 8:
                    cond = f"starts_with({col}, {p(bare)})"
                else:
                    cond = f"starts_with(replace({col}, '-', ''), {p(hexdigits)})"
            elif k == "event":
                cond = f"{col} = {p(bare)}"
            else:
                continue
            parts.append(f"SELECT '{k}' AS kind, count(*) AS n, min({col}) AS id, "
                         f"count(*) FILTER (WHERE {col} = {p(bare)}) AS exact FROM {table} WHERE {cond}")
        if parts:
            for h in _q(engine, " UNION ALL ".join(parts), p):
                if h["n"]:
                    counts[str(h["kind"])] = int(h["n"])
                    found[str(h["kind"])] = str(h["id"])
                    if h["exact"]:
                        return str(h["kind"]), bare
    if sum(counts.values()) == 1:
        k = next(iter(counts))
        return k, found[k]
    if counts:
        raise ResolveError(f"id prefix {_shown(raw)} is ambiguous: {_counts_text(counts)}; type more of it "
                           "or add a display prefix (att_, ses_, …)", "AQL0302", counts)
    # 3. A provider's own session id.
    if "session" in allowed:
        p = Params()
        rows = _q(engine, f"SELECT DISTINCT session_id FROM sessions WHERE provider_session_id = {p(raw)} LIMIT 3", p)
        if len(rows) == 1:
            return "session", str(rows[0]["session_id"])
        if len(rows) > 1:
            raise ResolveError(f"provider session id {_shown(raw)} is ambiguous: {len(rows)} sessions "
                               "(two providers use it); use the session id", "AQL0302", {"session": len(rows)})
    if not prefix_ok and not _HEXISH.fullmatch(bare):
        raise ResolveError(f"no {_kinds_text(allowed)} has the id {_shown(raw)}", "AQL0301")
    if not prefix_ok:
        raise ResolveError(f"id prefix {_shown(raw)} is too short: give at least {MIN_PREFIX} hex digits",
                           "AQL0303")
    raise ResolveError(f"no {_kinds_text(allowed)} has an id starting with {_shown(raw)}", "AQL0301")


def _kinds_text(kinds: Sequence[str]) -> str:
    names = [k.replace("_", " ") for k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k.replace('_', ' ')}{'s' if n != 1 else ''}" for k, n in
                     sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# --------------------------------------------------------------------------- facts kept per engine
#
# An engine's snapshot never changes, so what the time-travel questions read
# of the projection is loaded once per engine into Python structures sorted
# for "the latest … at or before t" lookups (bisection): the small tables
# (sessions, turns, attempts, signals, corrections, work units: ``_Core``)
# and a compact index of the tool calls (``_Calls``: per work unit, the
# calls' times and a small code of their category, status, git subcommand and
# command category; the names and ids only of the calls that may run long).
# Answering at an instant then needs no SQL but for what the projection
# does not hold: a session's last event before ``t`` when its last activity
# came later (the events table, once per question, memoised), the names of a
# short call found in flight (rare), attempts' evidence lists (WHY), and the
# tool call ids of calls started at the same microsecond (rarer still).


MEMO_CAP: Final = 20_000
"""Most entries a per-engine memo (activities, evidence, short calls) holds before it starts over."""

SHORT_CALL: Final = 10 * US
"""A finished tool call at most this long (µs) is "short": the call index keeps only its times and
code, and fetches its names in the rare case that it is in flight at the instant asked about."""

_CallRow = tuple[int, "int | None", str, str, "str | None", "str | None", "str | None"]
"""(started µs, finished µs, session id, tool call id, tool name, tool category, start event id)."""

_CALL_ROW_SQL: Final = ("epoch_us(started_at) AS s, epoch_us(finished_at) AS f, session_id, tool_call_id, tool_name, "
                        "tool_category, start_event_id")


def _low(value: Any) -> tuple[bool, Any]:
    """A sort key placing None below every value (as DuckDB's NULLS LAST does in a descending order)."""
    return (value is not None, value if value is not None else 0)


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


@dataclass
class _CallGroup:
    """The calls of one work unit (through its turns; key None: calls in no unit's turn), not retracted."""

    a: array[int]
    """First time of each call (its start, else its finish), ascending."""
    p: Sequence[int]
    """Aligned with ``a``: the call's finish and code, packed (see :meth:`_Calls.fin`, :meth:`_Calls.code`)."""
    mut: array[int]
    """First times of the calls that change files (categories in ``MUTATING``), ascending."""
    open: array[int]
    """First times of the calls that never finished, ascending."""
    span: int
    """The longest finished call (µs, at least 0): bounds how far back a call in flight can have started."""


@dataclass
class _Calls:
    """The tool calls, indexed once per engine."""

    groups: dict[str | None, _CallGroup]
    combos: list[tuple[str | None, ...]]
    """The (category, status, git subcommand, command category) a call code stands for."""
    first: dict[str, int]
    """Per session, the first time of its first call."""
    last: dict[str, int]
    """Per session, the latest time one of its calls started or finished."""
    open_rows: list[_CallRow]
    """Calls started and never finished, by start."""
    open_starts: list[int]
    long_rows: list[_CallRow]
    """Finished calls longer than ``SHORT_CALL``, by start."""
    long_starts: list[int]
    long_span: int
    short: dict[int, list[_CallRow]] = field(default_factory=dict)
    """Start → every short finished call started then (fetched when needed)."""
    ties: dict[tuple[str, int], list[tuple[Any, ...]]] = field(default_factory=dict)
    """(work unit, first time) → its calls with that first time, by tool call id (fetched when needed)."""

    def fin(self, g: _CallGroup, j: int) -> int | None:
        """The finish time of call ``j`` of ``g`` (None: not finished): ``p`` packs
        ``code + len(combos) * f`` where f is 0 (no finish), ``2d + 1`` (finished d µs after
        its first time) or ``2d + 2`` (d µs before it)."""
        f = g.p[j] // len(self.combos)
        if f == 0:
            return None
        return g.a[j] + (f - 1) // 2 if f & 1 else g.a[j] - (f - 2) // 2

    def code(self, g: _CallGroup, j: int) -> tuple[str | None, ...]:
        return self.combos[g.p[j] % len(self.combos)]


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


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= MEMO_CAP:
        memo.clear()
    memo[key] = value


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


_CODED: Final = ("tool_category", "outcome_status", "git_subcommand", "command_category")
"""The tool call columns a call's code stands for (what a work unit's phase is read from)."""

_PACKED_LIMIT: Final = 2**63
"""Packed call values must stay below this (DuckDB's BIGINT)."""


def _load_calls(engine: Runner) -> _Calls:
    # The (category, status, git, command) combinations that occur, and each session's first call.
    combos = sorted((tuple(r) for r in engine.run(
        f"SELECT DISTINCT {', '.join(_CODED)} FROM tool_calls WHERE NOT retracted", max_rows=ALL_ROWS).rows),
        key=lambda c: tuple(_low(v) for v in c))
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    longest = 0
    for r in _q(engine, (
            "SELECT session_id, epoch_us(min(coalesce(started_at, finished_at))) AS first, "
            "max(greatest(epoch_us(started_at), epoch_us(finished_at))) AS last, "
            "max(abs(epoch_us(finished_at) - epoch_us(coalesce(started_at, finished_at)))) AS longest "
            "FROM tool_calls WHERE NOT retracted GROUP BY session_id")):
        if r["session_id"] is not None and r["first"] is not None:
            first[r["session_id"]] = int(r["first"])
            last[r["session_id"]] = int(r["last"])
        longest = max(longest, int(r["longest"] or 0))
    nc = max(1, len(combos))

    # A call's code: its combination's position. In SQL: a mixed-radix number over the columns'
    # values, mapped to that position through a list.
    p = Params()
    values = [sorted({c[i] for c in combos if c[i] is not None}) for i in range(len(_CODED))]
    radix_sql = "0"
    for col, vals in reversed(list(zip(_CODED, values))):
        radix_sql = f"coalesce(list_position({p(vals)}::VARCHAR[], x.{col}), 0) + {len(vals) + 1} * ({radix_sql})"
    position: dict[int, int] = {}
    for n, combo in enumerate(combos):
        radix = 0
        for i in reversed(range(len(_CODED))):
            radix = radix * (len(values[i]) + 1) + (values[i].index(combo[i]) + 1 if combo[i] is not None else 0)
        position[radix] = n
    size = 1
    for vals in values:
        size *= len(vals) + 1
    code_sql = f"list_extract({p([position.get(x, 0) for x in range(size)])}::BIGINT[], {radix_sql} + 1)"
    fenc_sql = "CASE WHEN f IS NULL THEN 0 WHEN f >= a THEN (f - a) * 2 + 1 ELSE (a - f) * 2 + 2 END"
    packed = (2 * longest + 3) * nc < _PACKED_LIMIT
    if packed:
        item, columns = f"{{'a': a, 'p': k + {nc} * ({fenc_sql})}}", "list_transform(l, lambda x: x.p) AS p"
    else:  # finish times too far from the first times to pack: carried apart, packed here
        item = f"{{'a': a, 'f': f, 'k': k}}"
        columns = "list_transform(l, lambda x: x.f) AS f, list_transform(l, lambda x: x.k) AS k"
    groups: dict[str | None, _CallGroup] = {}
    for r in _q(engine, (
            "WITH m AS (SELECT work_unit_id, unnest(turns) AS turn_id FROM work_units), "
            "c AS (SELECT m.work_unit_id AS u, epoch_us(coalesce(x.started_at, x.finished_at)) AS a, "
            f"epoch_us(x.finished_at) AS f, x.tool_category IN {p.many(sorted(MUTATING))} AS mut, {code_sql} AS k "
            "FROM tool_calls x LEFT JOIN m ON m.turn_id = x.turn_id "
            "WHERE NOT x.retracted AND coalesce(x.started_at, x.finished_at) IS NOT NULL), "
            f"g AS (SELECT u, list_sort(list({item})) AS l, list_sort(list(a) FILTER (WHERE mut)) AS mut, "
            "list_sort(list(a) FILTER (WHERE f IS NULL)) AS open, max(f - a) AS span FROM c GROUP BY u) "
            f"SELECT u, list_transform(l, lambda x: x.a) AS a, {columns}, mut, open, span FROM g"), p):
        a = array("q", r["a"])
        if packed:
            packs: Sequence[int] = array("q", r["p"])
        else:
            packs = [k + nc * (0 if f is None else (f - x) * 2 + 1 if f >= x else (x - f) * 2 + 2)
                     for x, f, k in zip(a, r["f"], r["k"])]
        groups[r["u"]] = _CallGroup(a, packs, array("q", r["mut"] or []), array("q", r["open"] or []),
                                    max(0, int(r["span"] or 0)))

    # The names of the calls that may be in flight for long: unfinished ones and long ones.
    p = Params()
    open_rows: list[_CallRow] = []
    long_rows: list[_CallRow] = []
    for row in engine.run(
            f"SELECT {_CALL_ROW_SQL} FROM tool_calls WHERE NOT retracted AND started_at IS NOT NULL AND "
            f"(finished_at IS NULL OR epoch_us(finished_at) - epoch_us(started_at) > {p(SHORT_CALL)}) "
            "ORDER BY started_at", p.values, max_rows=ALL_ROWS).rows:
        (open_rows if row[1] is None else long_rows).append(row)
    long_span = max((r[1] - r[0] for r in long_rows if r[1] is not None), default=0)
    return _Calls(groups, combos or [(None,) * len(_CODED)], first, last, open_rows, [r[0] for r in open_rows],
                  long_rows, [r[0] for r in long_rows], long_span)


def _fetch_short(engine: Runner, calls: _Calls, starts: Sequence[int]) -> None:
    """Every short finished call started at one of ``starts``, into ``calls.short``."""
    p = Params()
    found: dict[int, list[_CallRow]] = {s: [] for s in starts}
    for row in engine.run(
            f"SELECT {_CALL_ROW_SQL} FROM tool_calls WHERE NOT retracted AND started_at BETWEEN "
            f"{p.ts(min(starts))} AND {p.ts(max(starts))} AND finished_at IS NOT NULL AND "
            f"epoch_us(finished_at) - epoch_us(started_at) <= {p(SHORT_CALL)}", p.values, max_rows=ALL_ROWS).rows:
        found.setdefault(row[0], []).append(row)
    if len(calls.short) + len(found) > MEMO_CAP:
        calls.short.clear()
    for s, rows in found.items():
        calls.short.setdefault(s, rows)


def _in_flight(engine: Runner, calls: _Calls, t: int) -> list[_CallRow]:
    """Every call not retracted that had started by ``t`` and had not finished by then."""
    out = calls.open_rows[:bisect_right(calls.open_starts, t)]
    i = bisect_right(calls.long_starts, t) - 1
    while i >= 0 and calls.long_starts[i] > t - calls.long_span:
        row = calls.long_rows[i]
        if row[1] is not None and row[1] > t:
            out.append(row)
        i -= 1
    # A short call in flight started within SHORT_CALL of t; its group's arrays say which start it had.
    starts: set[int] = set()
    for g in calls.groups.values():
        j = bisect_right(g.a, t) - 1
        while j >= 0 and g.a[j] > t - SHORT_CALL:
            fin = calls.fin(g, j)
            if fin is not None and fin > t and fin - g.a[j] <= SHORT_CALL:
                starts.add(g.a[j])
            j -= 1
    if starts:
        missing = sorted(s for s in starts if s not in calls.short)
        if missing:
            _fetch_short(engine, calls, missing)
        for s in sorted(starts):
            out.extend(r for r in calls.short.get(s, []) if r[1] is not None and r[1] > t)
    return out


def _unit_calls(engine: Runner, calls: _Calls, unit_id: str, t: int) -> dict[str, Any] | None:
    """A work unit's calls by ``t`` (None: none): how many are in flight and change files, the latest
    time one started or finished, and the last five (``tail``: [category, status, git, command])."""
    g = calls.groups.get(unit_id)
    k = bisect_right(g.a, t) if g is not None else 0
    if g is None or k == 0:
        return None
    last = g.a[k - 1]
    flying = bisect_right(g.open, t)
    i = k - 1
    while i >= 0 and g.a[i] > last - g.span:  # only these can have finished after ``last`` or after t
        fin = calls.fin(g, i)
        if fin is not None:
            if fin > t:
                flying += 1
            elif fin > last:
                last = fin
        i -= 1
    lo = max(0, k - 5)
    if any(g.a[j] == g.a[j - 1] for j in range(max(1, lo), k)):
        tail = _tied_tail(engine, calls, g, unit_id, k, t)
    else:
        tail = []
        for j in range(lo, k):
            cat, status, git, cmd = calls.code(g, j)
            fin = calls.fin(g, j)
            tail.append([cat, status if fin is not None and fin <= t else None, git, cmd])
    return {"n_flying": flying, "n_mut": bisect_right(g.mut, t), "last_call": last, "tail": tail}


def _tied_tail(engine: Runner, calls: _Calls, g: _CallGroup, unit_id: str, k: int, t: int) -> list[list[Any]]:
    """The last five calls by t, by (first time, tool call id), when some share a first time (the
    arrays do not hold ids: the tied calls are read again, once)."""
    lowest = g.a[max(0, k - 5)]
    times = sorted({g.a[j] for j in range(bisect_left(g.a, lowest), k)})
    tied = [x for x in times if bisect_right(g.a, x) - bisect_left(g.a, x) > 1]
    missing = [x for x in tied if (unit_id, x) not in calls.ties]
    if missing:
        p = Params()
        found: dict[int, list[tuple[Any, ...]]] = {x: [] for x in missing}
        for r in _q(engine, (
                "SELECT x.tool_call_id, epoch_us(coalesce(x.started_at, x.finished_at)) AS a, "
                f"epoch_us(x.finished_at) AS f, {', '.join('x.' + c for c in _CODED)} FROM tool_calls x JOIN "
                f"(SELECT unnest(turns) AS turn_id FROM work_units WHERE work_unit_id = {p(unit_id)}) m "
                "ON m.turn_id = x.turn_id WHERE NOT x.retracted AND "
                f"epoch_us(coalesce(x.started_at, x.finished_at)) IN (SELECT unnest({p(missing)}::BIGINT[]))"), p):
            found.setdefault(r["a"], []).append((r["tool_call_id"], r["f"], *(r[c] for c in _CODED)))
        for x, rows in found.items():
            _remember(calls.ties, (unit_id, x), sorted(rows, key=lambda r: r[0]))
    seq: list[tuple[int | None, Sequence[str | None]]] = []
    for x in times:
        if x in tied:
            seq.extend((r[1], list(r[2:])) for r in calls.ties.get((unit_id, x), []))
        else:
            j = bisect_left(g.a, x)
            seq.append((calls.fin(g, j), calls.code(g, j)))
    return [[cat, status if fin is not None and fin <= t else None, git, cmd]
            for fin, (cat, status, git, cmd) in seq[-5:]]


# --------------------------------------------------------------------------- attempts at t


def _attempt_select(alias: str = "a") -> str:
    return (f"{alias}.attempt_id, {alias}.session_id, {alias}.turn_id, {alias}.turn_index, {alias}.attempt_index, "
            f"{alias}.approach, {alias}.paths, epoch_us({alias}.started_at) AS s, epoch_us({alias}.ended_at) AS e, "
            f"{alias}.outcome, {alias}.failure_class, {alias}.inferred_outcome, {alias}.inferred_failure_class, "
            f"{alias}.corrected_by, {alias}.superseded_by, {alias}.failing_event_id, {alias}.first_action_event_id, "
            f"{alias}.evidence, {alias}.confidence, {alias}.work_unit_id")


_ATTEMPT_FIELDS: Final = (
    "attempt_id", "session_id", "turn_id", "turn_index", "attempt_index", "approach", "s", "e", "outcome",
    "failure_class", "inferred_outcome", "inferred_failure_class", "corrected_by", "superseded_by",
    "failing_event_id", "first_action_event_id", "confidence", "work_unit_id", "successor_s",
)
"""What :func:`_attempts_at` keeps of each attempt (lists such as evidence are left out: few are
needed, see :func:`_evidence_of`); ``successor_s`` is the start of the attempt that superseded it."""


def _attempts_at(core: _Core, t: int, by: dict[str, Sequence[str]],
                 parts: Sequence[str] = ("last", "ended", "fail")) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per key (a session or work unit id; ``by`` maps ``session_id`` or ``work_unit_id`` to the keys)
    that had an attempt started by ``t``, the ``parts`` asked for: ``last`` (the last attempt
    started ≤ t), ``ended`` (the last two ended by t, newest first) and ``fail`` (the latest
    failure ended by t among the last five that failed, were superseded or corrected), each attempt
    a copy with ``outcome_at`` and ``class_at`` masked to what was known at ``t``."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for col, keys in by.items():
        index = core.attempts_by_session if col == "session_id" else core.attempts_by_unit
        for key in keys:
            ix = index.get(key)
            n = bisect_right(ix.starts, t) if ix is not None else 0
            if ix is None or n == 0:
                continue
            found: dict[str, list[dict[str, Any]]] = {}
            if "last" in parts:
                found["last"] = [_masked(core, ix.by_start[n - 1], t)]
            if "ended" in parts:
                found["ended"] = [_masked(core, x, t) for x in _newest(ix.by_end, ix.ends, t, 2)]
            if "fail" in parts:
                found["fail"] = []
                for x in _newest(ix.fails, ix.fail_ends, t, 5):
                    m = _masked(core, x, t)
                    if m["outcome_at"] in FAILURES:
                        found["fail"].append(m)
                        break
            out[key] = found
    return out


def _masked(core: _Core, a: dict[str, Any], t: int) -> dict[str, Any]:
    """A copy of attempt ``a`` with its outcome and class as known at ``t``.

    Once an uncorrected attempt has ended and its successor (if any) has started, what is known
    of it no longer changes: that copy is made once and shared (answers must not change it)."""
    settled = (a["corrected_by"] is None and a["e"] is not None and a["e"] <= t
               and (a["successor_s"] is None or a["successor_s"] <= t))
    if settled:
        found = core.settled.get(id(a))
        if found is not None:
            return found
    correction = (_corrections_at(core, [a["attempt_id"]], t).get(a["attempt_id"])
                  if a["corrected_by"] is not None else None)
    outcome, cls = _mask(a, t, correction)
    masked = {**a, "outcome_at": outcome, "class_at": cls}
    if settled:
        core.settled[id(a)] = masked
        view = _attempt_view(masked, t)
        if view is not None:
            core.settled_views[id(masked)] = view
    return masked


def _evidence_of(engine: Runner, facts: _Facts, core: _Core, attempt_ids: Sequence[str]) -> dict[str, list[str]]:
    """Each attempt's evidence list (memoised per engine)."""
    if not attempt_ids:
        return {}
    memo = facts.evidence
    missing = [a for a in _dedup(attempt_ids) if a not in memo]
    if missing:
        p = Params()
        conds = [f"attempt_id IN {p.many(missing)}"]
        starts = [s for a in missing if (s := core.attempt_starts.get(a)) is not None]
        if len(starts) == len(missing):
            # A range on the start lets the scan skip most rows before it reads the (long) evidence lists.
            conds.append(f"started_at BETWEEN {p.ts(min(starts))} AND {p.ts(max(starts))}")
        for r in _q(engine, f"SELECT attempt_id, evidence FROM attempts WHERE {' AND '.join(conds)}", p):
            _remember(memo, r["attempt_id"], list(r["evidence"] or []))
    return {a: memo[a] for a in attempt_ids if a in memo}


def _corrections_at(core: _Core, attempt_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest applied outcome correction recorded by ``t``, per attempt."""
    out: dict[str, dict[str, Any]] = {}
    for a in attempt_ids:
        for c in reversed(core.corrections.get(a, [])):
            if c["at"] <= t:
                out[a] = c
                break
    return out


def _mask(a: dict[str, Any], t: int, correction: dict[str, Any] | None) -> tuple[str, str | None]:
    """An attempt's outcome and failure class as known at ``t``."""
    if a["e"] is None or a["e"] > t:
        return "in_progress", None
    if a["corrected_by"] is not None and a["inferred_outcome"] is not None:
        outcome, cls = str(a["inferred_outcome"]), a["inferred_failure_class"]
    else:
        outcome, cls = str(a["outcome"]), a["failure_class"]
    if outcome == "superseded" and (a["successor_s"] is None or a["successor_s"] > t):
        outcome = "failed"
    if correction is not None and correction["outcome"]:
        outcome = str(correction["outcome"])
        if correction["failure_class"]:
            cls = correction["failure_class"]
        elif outcome not in FAILURES:
            cls = None
    return outcome, cls


def _view(core: _Core, a: dict[str, Any] | None, t: int) -> dict[str, Any] | None:
    """:func:`_attempt_view`, a copy of the one kept for a settled attempt (see :func:`_masked`)."""
    kept = core.settled_views.get(id(a)) if a is not None else None
    return dict(kept) if kept is not None else _attempt_view(a, t)


def _attempt_view(a: dict[str, Any] | None, t: int) -> dict[str, Any] | None:
    if a is None:
        return None
    succ = a["superseded_by"] if (a["outcome_at"] == "superseded" and a["successor_s"] is not None
                                  and a["successor_s"] <= t) else None
    return {
        "attempt_id": a["attempt_id"], "turn_id": a["turn_id"], "outcome": a["outcome_at"],
        "failure_class": a["class_at"], "approach": a["approach"], "started_at": _ts(a["s"]),
        "ended_at": _ts(a["e"]) if a["e"] is not None and a["e"] <= t else None,
        "superseded_by": succ,
        "failing_event_id": a["failing_event_id"] if a["e"] is not None and a["e"] <= t else None,
    }


def _open_signals(core: _Core, session_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest signal raised by ``t`` and not cleared by ``t``, per session."""
    out: dict[str, dict[str, Any]] = {}
    for sid in session_ids:
        for sig in core.signals.get(sid, ()):
            if sig["raised"] <= t and (sig["cleared"] is None or sig["cleared"] > t):
                out[sid] = sig
                break
    return out


def _signal_claim(sig: dict[str, Any]) -> str:
    if sig["kind"] == "permission_requested" or sig["signal_type"] in ("permission_request", "permission_prompt"):
        what = "a permission request"
    else:
        kind = str(sig["signal_type"] or "input")
        what = f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} notification"
    return f"waiting on {what} (raised {_ts(sig['raised'])})"


# --------------------------------------------------------------------------- state at t


@dataclass
class StateAt:
    """What :func:`state_at` found: session states, work units open at ``t``, notes."""

    at_us: int
    sessions: list[dict[str, Any]] = field(default_factory=list)
    work_units: list[dict[str, Any]] = field(default_factory=list)
    closed_work_units: list[dict[str, Any]] = field(default_factory=list)
    """Units examined and found completed/abandoned (or unknown) at ``t`` (not every closed unit)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"at": format_us(self.at_us), "sessions": self.sessions, "work_units": self.work_units,
                "notes": self.notes}


def state_at(engine: Runner, at_us: int, scope: Scope | None = None, *, session_ids: Sequence[str] | None = None,
             work_unit_ids: Sequence[str] | None = None, provider: str | None = None) -> StateAt:
    """The state at ``at_us``: every session in scope that had started and not
    ended before then, and the work units open at that instant.

    ``scope`` restricts projects and the session (its since/until/limit do not
    apply: the instant is the filter); ``session_ids``, ``work_unit_ids`` and
    ``provider`` restrict further (sessions and units separately: a unit is
    kept when one of its sessions is among ``session_ids``).
    """
    return _states_at(engine, [at_us], scope, session_ids, work_unit_ids, provider)[0]


@dataclass
class _Plan:
    """What :func:`_states_at` gathered for one instant before asking the events table."""

    result: StateAt
    units: list[dict[str, Any]]
    closed_counts: dict[str, int]
    members: list[str]
    sess: list[dict[str, Any]]
    live: list[dict[str, Any]]


def _states_at(engine: Runner, times: Sequence[int], scope: Scope | None, session_ids: Sequence[str] | None,
               work_unit_ids: Sequence[str] | None, provider: str | None) -> list[StateAt]:
    """:func:`state_at` at each of ``times`` (the events table is asked once for all of them)."""
    facts = _facts(engine)
    core = _core(engine, facts)
    plans: list[_Plan] = []
    for t in times:
        units, closed_counts = _unit_candidates(core, t, scope, session_ids, work_unit_ids, provider)
        members = _dedup(s for u in units for s in (u["sessions"] or []))
        sess = _sessions_at(core, t, scope, session_ids, provider, members)
        plans.append(_Plan(StateAt(t), units, closed_counts, members, sess, [s for s in sess if s["in_state"]]))
    # A session's last activity before t when its last activity came later: from the events table.
    activities = _activities(engine, facts, core, [
        (plan.result.at_us, [s for s in plan.live if s["activity_us"] is None or s["activity_us"] > plan.result.at_us])
        for plan in plans])
    calls = _calls(engine, facts) if any(plan.live or plan.units for plan in plans) else None
    out: list[StateAt] = []
    for plan, activity in zip(plans, activities):
        t, result = plan.result.at_us, plan.result
        settled = {s["session_id"]: k for s in plan.live
                   if (k := facts.settled.get(s["session_id"])) is not None and t >= k.since}
        todo = [s for s in plan.live if s["session_id"] not in settled]
        ids = [s["session_id"] for s in todo]
        uids = [u["work_unit_id"] for u in plan.units]
        signals = _open_signals(core, _dedup([*ids, *plan.members]), t)
        attempts = _attempts_at(core, t, {"session_id": ids, "work_unit_id": uids}, ("last", "fail"))
        if calls is not None:
            made: dict[str, dict[str, Any]] = {}
            for s, state in zip(todo, _session_states(engine, core, calls, t, todo, attempts, signals, activity)):
                made[s["session_id"]] = state
                since = _settled_since(core, calls, s)
                if since is not None and t >= since:
                    _remember(facts.settled, s["session_id"], _Settled(since, _copy_state(state), s["activity_us"]))
            result.sessions = [made[sid] if sid in made else settled[sid].at(t)
                               for sid in (s["session_id"] for s in plan.live)]
            if plan.units:
                info = {s["session_id"]: s for s in plan.sess}
                for u in _units_at(engine, core, calls, plan.units, t, info, attempts, signals):
                    if u["status"] == "open":
                        result.work_units.append(u)
                    else:
                        result.closed_work_units.append(u)
                        plan.closed_counts[u["status"]] = plan.closed_counts.get(u["status"], 0) + 1
        done = [f"{n} {status}" for status, n in sorted(plan.closed_counts.items()) if n]
        if done:
            result.notes.append(f"work units already closed by {format_us(t)}: {', '.join(done)} (not listed)")
        out.append(result)
    return out


def _sessions_at(core: _Core, t: int, scope: Scope | None, session_ids: Sequence[str] | None,
                 provider: str | None, also: Sequence[str]) -> list[dict[str, Any]]:
    """Sessions in the state at ``t`` (``in_state``), plus the sessions ``also`` (work unit members),
    by (started, session id)."""
    projects = set(scope.project_ids) if scope is not None and scope.project_ids is not None else None
    prefix = split_display(scope.session)[1] if scope is not None and scope.session else None
    wanted = set(session_ids) if session_ids is not None else None
    extra = set(also)
    out: list[dict[str, Any]] = []
    for s in core.sessions:
        sid = s["session_id"]
        ok = (s["retracted"] is False and s["started_us"] is not None and s["started_us"] <= t
              and (s["ended_us"] is None or s["ended_us"] >= t)
              and (projects is None or s["project_id"] in projects)
              and (prefix is None or (sid is not None and sid.startswith(prefix)))
              and (wanted is None or sid in wanted)
              and (not provider or s["provider"] == provider))
        if ok or sid in extra:
            out.append({**s, "in_state": ok})
    return out


def _session_states(engine: Runner, core: _Core, calls: _Calls, t: int, sess: list[dict[str, Any]],
                    attempts: dict[str, dict[str, list[dict[str, Any]]]], signals: dict[str, dict[str, Any]],
                    activity: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    if not sess:
        return []
    # Tool calls in flight at t, by session, by (start, tool call id).
    flying: dict[str, list[_CallRow]] = {}
    for row in _in_flight(engine, calls, t):
        flying.setdefault(row[2], []).append(row)
    for found in flying.values():
        found.sort(key=lambda r: (r[0], r[3]))

    out: list[dict[str, Any]] = []
    for s in sess:
        sid = s["session_id"]
        ended = s["ended_us"] is not None and s["ended_us"] <= t
        # Current turn (the last started by t) and how many prompted turns had begun.
        starts = core.turn_starts.get(sid)
        n = bisect_right(starts, t) if starts else 0
        turn = core.turns[sid][n - 1] if n else None
        prompts = core.turn_prompts[sid][n] if n else 0
        # Coverage asks only whether a call had been observed by t.
        first_call = calls.first.get(sid)
        observed_calls = 1 if first_call is not None and first_call <= t else 0
        cov = coverage_grade(s["start_event_id"] is not None, ended, prompts, observed_calls)
        if s["activity_us"] is not None and s["activity_us"] <= t:
            act_us, act_ev = s["activity_us"], s["last_activity_event_id"]
        else:
            act_us, act_ev = activity.get(sid, (s["started_us"], s["start_event_id"] or s["first_event_id"]))
        sig = signals.get(sid)
        silence = t - act_us
        if ended:
            liveness = "closed"
        elif silence <= STALE_AFTER or (sig is not None and silence <= BLOCKED_OPEN_FOR):
            liveness = "open"
        else:
            liveness = "stale"
        groups = attempts.get(sid, {})
        last = groups["last"][0] if groups.get("last") else None
        fail = groups["fail"][0] if groups.get("fail") else None
        cur = None
        if turn is not None:
            status = "in_progress" if turn["e"] is None or turn["e"] > t else turn["status"]
            cur = {"turn_id": turn["turn_id"], "turn_index": turn["turn_index"], "status": status,
                   "started_at": _ts(turn["s"]), "objective": turn["objective"],
                   "opening_event_id": turn["opening_event"]}
        flights = [{"tool_call_id": r[3], "tool_name": r[4], "tool_category": r[5], "started_at": _ts(r[0]),
                    "start_event_id": r[6]} for r in flying.get(sid, [])]
        evidence = _dedup([
            s["start_event_id"] or s["first_event_id"], cur["opening_event_id"] if cur else None,
            *(f["start_event_id"] for f in flights), fail["failing_event_id"] if fail else None,
            sig["event_id"] if sig else None, s["end_event_id"] if ended else None, act_ev,
        ])
        out.append({
            "subject_type": "session", "session_id": sid, "provider": s["provider"],
            "provider_session_id": s["provider_session_id"], "project_id": s["project_id"],
            "project_name": s["project_name"], "state": "closed" if ended else "open", "liveness": liveness,
            "coverage": cov, "started_at": _ts(s["started_us"]), "ended_at": _ts(s["ended_us"]) if ended else None,
            "current_turn": cur, "in_flight": flights, "last_attempt": _view(core, last, t),
            "last_failure": _view(core, fail, t), "last_failure_class": fail["class_at"] if fail else None,
            "last_activity_at": _ts(act_us), "last_activity_event_id": act_ev,
            "blocked": sig is not None, "explanation": _signal_claim(sig) if sig else None,
            "blocking_signal": {"signal_id": sig["signal_id"], "event_id": sig["event_id"], "kind": sig["kind"],
                                "signal_type": sig["signal_type"], "raised_at": _ts(sig["raised"])} if sig else None,
            "evidence": evidence, "confidence": COVERAGE_CONFIDENCE.get(cov, 0.4),
            "uncertainty": {"reason": "deterministic", "note": coverage_note(cov)},
        })
    return out


def _day(us: int) -> date:
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)).date()


_ACTIVE_KINDS_SQL: Final = "kind NOT IN ('session_ended', 'correction', 'retraction')"


def _activities(engine: Runner, facts: _Facts, core: _Core,
                requests: Sequence[tuple[int, list[dict[str, Any]]]]) -> list[dict[str, tuple[int, str]]]:
    """Per request ``(t, sessions)``: (µs, event id) of each session's last event other than its end,
    at or before ``t`` and not before the earliest start among ``sessions``.

    One query for every request: each session's window starts at the latest time the projection
    already places an event of it by ``t`` (its last turn, attempt or signal), so the scan reads a
    day or two of the events table; a session with no event in that window is asked again over the
    whole window (rare). Answers are memoised per engine."""
    results: list[dict[str, tuple[int, str]]] = [{} for _ in requests]
    earliest: dict[int, int] = {}
    pending: list[tuple[int, dict[str, Any], int]] = []  # (request, session, window start)
    for n, (t, sessions) in enumerate(requests):
        if not sessions:
            continue
        earliest[n] = first = min(s["started_us"] for s in sessions)
        for s in sessions:
            key = _activity_key(s, t, first)
            if key not in facts.activity:
                pending.append((n, s, max(first, _known_activity(core, s, t))))
                continue
            known = facts.activity[key]
            if known is not None:
                results[n][s["session_id"]] = known
    if not pending:
        return results
    p = Params()
    columns: list[str] = []
    days: list[str] = []
    keys: dict[tuple[str, str], None] = {}
    for n in sorted({item[0] for item in pending}):
        t = requests[n][0]
        items = [item for item in pending if item[0] == n]
        window = " OR ".join(
            f"(provider = {p(s['provider'])} AND coalesce(provider_session_id, 'unknown') = "
            f"{p(s['provider_session_id'] or 'unknown')} AND observed_at >= {p.ts(lo)})" for _, s, lo in items)
        cond = f"observed_at <= {p.ts(t)} AND ({window})"
        columns.append(f"epoch_us(max(observed_at) FILTER (WHERE {cond})) AS at{n}, "
                       f"arg_max(event_id, observed_at) FILTER (WHERE {cond}) AS ev{n}")
        # observed_date is the UTC day of observed_at (the table's partitions: prunes files)
        days.append(f"observed_date BETWEEN {p(_day(min(lo for _, _, lo in items)))} AND {p(_day(t))}")
        for _, s, _lo in items:
            keys[(s["provider"], s["provider_session_id"] or "unknown")] = None
    ors = " OR ".join(f"(provider = {p(a)} AND coalesce(provider_session_id, 'unknown') = {p(b)})" for a, b in keys)
    rows = _q(engine, (
        f"SELECT provider, coalesce(provider_session_id, 'unknown') AS psid, {', '.join(columns)} FROM events "
        f"WHERE ({' OR '.join(days)}) AND observed_at >= {p.ts(min(lo for _, _, lo in pending))} "
        f"AND observed_at <= {p.ts(max(requests[n][0] for n, _, _ in pending))} AND {_ACTIVE_KINDS_SQL} "
        f"AND ({ors}) GROUP BY 1, 2"), p)
    by_key = {(r["provider"], r["psid"]): r for r in rows}
    again: dict[int, list[dict[str, Any]]] = {}
    for n, s, lo in pending:
        t = requests[n][0]
        r = by_key.get((s["provider"], s["provider_session_id"] or "unknown"))
        if r is not None and r[f"at{n}"] is not None:
            hit = (int(r[f"at{n}"]), str(r[f"ev{n}"]))
            results[n][s["session_id"]] = hit
            _remember(facts.activity, _activity_key(s, t, earliest[n]), hit)
        elif lo <= earliest[n]:
            _remember(facts.activity, _activity_key(s, t, earliest[n]), None)  # the whole window had nothing
        else:
            again.setdefault(n, []).append(s)
    for n, sessions in again.items():
        t = requests[n][0]
        found = _activity_in_window(engine, sessions, t, earliest[n])
        for s in sessions:
            hit2 = found.get(s["session_id"])
            if hit2 is not None:
                results[n][s["session_id"]] = hit2
            _remember(facts.activity, _activity_key(s, t, earliest[n]), hit2)
    return results


def _activity_key(s: dict[str, Any], t: int, first: int) -> ActivityKey:
    return (s["provider"], s["provider_session_id"] or "unknown", t, first)


def _known_activity(core: _Core, s: dict[str, Any], t: int) -> int:
    """The latest time by ``t`` at which the projection places something of session ``s`` (its start
    at the least): where the search for its last event before ``t`` can begin."""
    sid = s["session_id"]
    best = int(s["started_us"])
    starts = core.turn_starts.get(sid)
    if starts:
        n = bisect_right(starts, t)
        for turn in core.turns[sid][max(0, n - 2):n]:
            best = max(best, turn["s"], turn["e"] if turn["e"] is not None and turn["e"] <= t else best)
    ix = core.attempts_by_session.get(sid)
    if ix is not None:
        n = bisect_right(ix.starts, t)
        if n:
            best = max(best, ix.starts[n - 1])
        n = bisect_right(ix.ends, t)
        if n:
            best = max(best, ix.ends[n - 1])
    for sig in core.signals.get(sid, ()):
        if sig["raised"] <= t:
            best = max(best, sig["raised"])
            break
    return best


def _activity_in_window(engine: Runner, sessions: list[dict[str, Any]], t: int,
                        earliest: int) -> dict[str, tuple[int, str]]:
    """(µs, event id) of each session's last event other than its end, in [earliest, t]."""
    p = Params()
    ors = " OR ".join(f"(provider = {p(s['provider'])} AND coalesce(provider_session_id, 'unknown') = "
                      f"{p(s['provider_session_id'] or 'unknown')})" for s in sessions)
    first_day, last_day = _day(earliest) - timedelta(days=1), _day(t) + timedelta(days=1)
    rows = _q(engine, (
        "SELECT provider, coalesce(provider_session_id, 'unknown') AS psid, epoch_us(max(observed_at)) AS at, "
        "arg_max(event_id, observed_at) AS ev FROM events "
        f"WHERE observed_date BETWEEN {p(first_day)} AND {p(last_day)} "  # the table's partitions: prunes files
        f"AND observed_at <= {p.ts(t)} AND observed_at >= {p.ts(earliest)} "
        f"AND {_ACTIVE_KINDS_SQL} AND ({ors}) GROUP BY 1, 2"), p)
    by_key = {(r["provider"], r["psid"]): (int(r["at"]), str(r["ev"])) for r in rows}
    out: dict[str, tuple[int, str]] = {}
    for s in sessions:
        hit = by_key.get((s["provider"], s["provider_session_id"] or "unknown"))
        if hit is not None:
            out[s["session_id"]] = hit
    return out


def _unit_candidates(core: _Core, t: int, scope: Scope | None, session_ids: Sequence[str] | None,
                     work_unit_ids: Sequence[str] | None, provider: str | None,
                     ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Work units started by ``t`` that may be open then (to recompute at ``t``), and
    how many units had closed long before (idle over 2 h at ``t``: their status then is
    their status now), by status."""
    projects = set(scope.project_ids) if scope is not None and scope.project_ids is not None else None
    prefix = split_display(scope.session)[1] if scope is not None and scope.session else None
    wanted = set(session_ids) if session_ids is not None else None
    unit_ids = set(work_unit_ids) if work_unit_ids is not None else None
    window = t - UNIT_IDLE_ABANDONED
    units: list[dict[str, Any]] = []
    old: dict[str, int] = {}
    for u in core.units:
        members = u["sessions"]
        if (u["s"] is None or u["s"] > t
                or (projects is not None and u["project_id"] not in projects)
                or (prefix is not None and not any(x is not None and x.startswith(prefix) for x in members or []))
                or (wanted is not None and not any(x in wanted for x in members or [] if x is not None))
                or (unit_ids is not None and u["work_unit_id"] not in unit_ids)
                or (provider and provider not in (u["actors"] or []))):
            continue
        if u["e"] is None or u["e"] >= window:
            units.append(u)
        else:
            old[str(u["status"])] = old.get(str(u["status"]), 0) + 1
    units.sort(key=lambda r: (-(r["u"] or 0), r["work_unit_id"]))
    return units, old


def _last_turn(core: _Core, unit: dict[str, Any], t: int) -> dict[str, Any] | None:
    """The unit's member turn started last by ``t``, with the latest member turn end by ``t``."""
    uid = unit["work_unit_id"]
    member = core.unit_turns.get(uid)
    if member is None:
        rows = [x for tid in unit["turns"] or [] for x in core.turn_by_id.get(tid, ()) if x["s"] is not None]
        by_start = sorted(rows, key=lambda x: (x["s"], _low(x["turn_index"])))
        by_end = sorted((x for x in rows if x["e"] is not None), key=lambda x: x["e"])
        member = core.unit_turns[uid] = (by_start, [x["s"] for x in by_start], by_end, [x["e"] for x in by_end])
    by_start, starts, by_end, ends = member
    n = bisect_right(starts, t)
    if n == 0:
        return None
    best = by_start[n - 1]
    last_end: int | None = None
    i = bisect_right(ends, t) - 1
    while i >= 0:
        if by_end[i]["s"] <= t:
            last_end = by_end[i]["e"]
            break
        i -= 1
    return {"turn_id": best["turn_id"], "session_id": best["session_id"], "s": best["s"], "e": best["e"],
            "status": best["status"], "last_end": last_end}


def _units_at(engine: Runner, core: _Core, calls: _Calls, units: list[dict[str, Any]], t: int,
              sess: dict[str, dict[str, Any]], attempts: dict[str, dict[str, list[dict[str, Any]]]],
              signals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for u in units:
        uid = u["work_unit_id"]
        lt = _last_turn(core, u, t)
        if lt is None:
            continue  # no member turn had started by t
        members = [sid for sid in (u["sessions"] or []) if sid in sess and sess[sid]["started_us"] <= t]
        # By t: the last five calls (the phase window), calls in flight, mutating calls, the last call time.
        agg = _unit_calls(engine, calls, uid, t)
        tail: list[list[Any]] = agg["tail"] if agg else []
        n_mut = int(agg["n_mut"]) if agg else 0
        edited_before = n_mut - sum(1 for r in tail if r[0] in MUTATING) > 0
        flying = int(agg["n_flying"]) if agg else 0
        sig = next((signals[s] for s in members if s in signals), None)
        if u["u"] is not None and u["u"] <= t:
            updated = int(u["u"])
        else:
            candidates = [lt["s"], lt["last_end"], agg["last_call"] if agg else None,
                          sig["raised"] if sig else None]
            updated = max(int(c) for c in candidates if c is not None)
        idle = t - updated
        groups = attempts.get(uid, {})
        last = groups["last"][0] if groups.get("last") else None
        la = last["outcome_at"] if last else None
        turn_status = "in_progress" if lt["e"] is None or lt["e"] > t else lt["status"]
        ended_all = bool(members) and all(sess[s]["ended_us"] is not None and sess[s]["ended_us"] <= t
                                          for s in members)
        if members and all(sess[s]["coverage"] == "unknown" for s in members):
            status, reason = "unknown", "no prompt or tool call was observed"
        elif turn_status == "completed" and la == "succeeded" and flying == 0 and (ended_all or idle > UNIT_IDLE_DONE):
            status = "completed"
            reason = ("last turn completed and its session ended" if ended_all
                      else "last turn completed; idle for more than 30 minutes")
        elif la in ("failed", "superseded", "abandoned") and idle > UNIT_IDLE_ABANDONED:
            status, reason = "abandoned", f"last attempt {la}; idle for more than 2 hours"
        else:
            status = "open"
            reason = "a tool call is still running" if flying else "activity within the idle window"
        phase, phase_reason = _phase(tail, edited_before, sig is not None)
        conf = min(float(u["confidence"] or 0.7), 0.7)
        cov = [sess[s]["coverage"] for s in members]
        worst = min(cov, key=lambda c: COVERAGE_CONFIDENCE.get(c, 0.4)) if cov else "unknown"
        evidence = _dedup([u["objective_event_id"], last["first_action_event_id"] if last else None,
                           last["failing_event_id"] if last and la in FAILURES else None,
                           sig["event_id"] if sig else None])
        out.append({
            "subject_type": "work_unit", "work_unit_id": uid, "project_id": u["project_id"],
            "project_name": u["project_name"], "objective": u["objective"], "status": status,
            "status_reason": reason, "phase": phase, "phase_reason": phase_reason,
            "started_at": _ts(u["s"]), "updated_at": _ts(updated), "ended_at": _ts(updated) if status in (
                "completed", "abandoned") else None,
            "sessions": members, "actors": _dedup(sess[s]["provider"] for s in members),
            "current_turn": {"turn_id": lt["turn_id"], "session_id": lt["session_id"], "status": turn_status},
            "in_flight": flying, "last_attempt": _view(core, last, t), "blocked": sig is not None,
            "explanation": _signal_claim(sig) if sig else None,
            "blocking_signal": sig["event_id"] if sig else None,
            "evidence": evidence or list((u["evidence"] or [])[:1]),
            "confidence": conf, "uncertainty": {"reason": "heuristic", "note": coverage_note(worst)},
        })
    return out


# --------------------------------------------------------------------------- flattening


STATE_COLUMNS: Final = (
    "subject_type", "subject_id", "session_id", "provider", "project_name", "state", "liveness", "coverage",
    "phase", "status", "turn_id", "turn_status", "in_flight", "last_attempt_id", "last_attempt_outcome",
    "last_failure_id", "last_failure_outcome", "last_failure_class", "last_activity_at", "blocked", "explanation",
    "confidence", "uncertainty", "evidence",
)


def flatten_session(s: dict[str, Any]) -> dict[str, Any]:
    """One row of :data:`STATE_COLUMNS` for a session state."""
    cur = s["current_turn"] or {}
    last = s["last_attempt"] or {}
    fail = s["last_failure"] or {}
    return {
        "subject_type": "session", "subject_id": s["session_id"], "session_id": s["session_id"],
        "provider": s["provider"], "project_name": s["project_name"], "state": s["state"],
        "liveness": s["liveness"], "coverage": s["coverage"], "phase": None, "status": None,
        "turn_id": cur.get("turn_id"), "turn_status": cur.get("status"),
        "in_flight": [f["tool_call_id"] for f in s["in_flight"]], "last_attempt_id": last.get("attempt_id"),
        "last_attempt_outcome": last.get("outcome"), "last_failure_id": fail.get("attempt_id"),
        "last_failure_outcome": fail.get("outcome"), "last_failure_class": s["last_failure_class"],
        "last_activity_at": s["last_activity_at"], "blocked": s["blocked"], "explanation": s["explanation"],
        "confidence": s["confidence"], "uncertainty": s["uncertainty"], "evidence": s["evidence"],
    }


def flatten_work_unit(u: dict[str, Any]) -> dict[str, Any]:
    """One row of :data:`STATE_COLUMNS` for a work unit state."""
    cur = u["current_turn"] or {}
    last = u["last_attempt"] or {}
    return {
        "subject_type": "work_unit", "subject_id": u["work_unit_id"], "session_id": cur.get("session_id"),
        "provider": ", ".join(u["actors"]) or None, "project_name": u["project_name"],
        "state": "open" if u["status"] == "open" else "closed", "liveness": None, "coverage": None,
        "phase": u["phase"], "status": u["status"], "turn_id": cur.get("turn_id"), "turn_status": cur.get("status"),
        "in_flight": u["in_flight"], "last_attempt_id": last.get("attempt_id"),
        "last_attempt_outcome": last.get("outcome"),
        "last_failure_id": last.get("attempt_id") if last.get("outcome") in FAILURES else None,
        "last_failure_outcome": last.get("outcome") if last.get("outcome") in FAILURES else None,
        "last_failure_class": last.get("failure_class") if last.get("outcome") in FAILURES else None,
        "last_activity_at": u["updated_at"], "blocked": u["blocked"], "explanation": u["explanation"],
        "confidence": u["confidence"], "uncertainty": u["uncertainty"], "evidence": u["evidence"],
    }


# --------------------------------------------------------------------------- diff


DIFF_COLUMNS: Final = ("subject_type", "subject_id", "session_id", "provider", "change", "field", "before", "after",
                       "confidence", "uncertainty", "evidence")
SESSION_DIFF_FIELDS: Final = ("state", "liveness", "coverage", "turn_id", "turn_status", "in_flight",
                              "last_attempt_id", "last_attempt_outcome", "last_failure_id",
                              "last_failure_outcome", "last_failure_class", "blocked", "explanation")
UNIT_DIFF_FIELDS: Final = ("status", "phase", "turn_id", "turn_status", "in_flight", "last_attempt_id",
                           "last_attempt_outcome", "last_failure_class", "blocked", "explanation")


def diff_state(engine: Runner, t1: int, t2: int, scope: Scope | None = None, *,
               session_ids: Sequence[str] | None = None, work_unit_ids: Sequence[str] | None = None,
               provider: str | None = None) -> list[dict[str, Any]]:
    """What changed between ``t1`` and ``t2``: :func:`state_at` at both, joined by
    subject (sessions, work units); one row per changed field, a subject that
    appeared is ``added``, one that left ``removed`` (a session leaves by
    ending; a unit by completing or being abandoned — ``after`` says which).
    Unchanged subjects and fields are omitted; ``last_activity_at`` is not
    compared (it moves with every event). ``t1 >= t2`` raises :class:`StateError`.
    """
    if t1 >= t2:
        raise StateError(f"DIFF STATE needs the first time before the second ({format_us(t1)} is not before "
                         f"{format_us(t2)})", "AQL0408")
    a, b = _states_at(engine, [t1, t2], scope, session_ids, work_unit_ids, provider)
    core = _core(engine, _facts(engine))
    rows: list[dict[str, Any]] = []

    before = {s["session_id"]: flatten_session(s) for s in a.sessions}
    after = {s["session_id"]: flatten_session(s) for s in b.sessions}
    gone = [sid for sid in before if sid not in after]
    for sid, row in before.items():
        if sid not in after:
            end = core.session_by_id.get(sid, {})
            rows.append(_diff_row(row, "removed", "state", row["state"],
                                  "closed" if end.get("ended_us") is not None and end["ended_us"] <= t2 else None,
                                  _dedup([end.get("end_event_id"), *row["evidence"]])))
    rows.extend(_added_or_changed(before, after, "state", SESSION_DIFF_FIELDS))

    ub = {u["work_unit_id"]: flatten_work_unit(u) for u in a.work_units}
    ua = {u["work_unit_id"]: flatten_work_unit(u) for u in b.work_units}
    closed_b = {u["work_unit_id"]: u for u in b.closed_work_units}
    for uid, row in ub.items():
        if uid in ua:
            continue
        if uid in closed_b:
            final = closed_b[uid]
            rows.append(_diff_row(row, "removed", "status", row["status"], final["status"],
                                  _dedup([*final["evidence"], *row["evidence"]])))
        else:
            st = core.unit_by_id.get(uid, {})
            rows.append(_diff_row(row, "removed", "status", row["status"], st.get("status"),
                                  _dedup([*(st.get("evidence") or []), *row["evidence"]])))
    rows.extend(_added_or_changed(ub, ua, "status", UNIT_DIFF_FIELDS))
    return rows


def _added_or_changed(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], headline: str,
                      fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Diff rows for what is in ``after``: added (told by its ``headline`` field), or each field changed."""
    rows: list[dict[str, Any]] = []
    for key, row in after.items():
        old = before.get(key)
        if old is None:
            rows.append(_diff_row(row, "added", headline, None, row[headline], row["evidence"]))
            continue
        for f in fields:
            if old[f] != row[f]:
                rows.append(_diff_row(row, "changed", f, old[f], row[f], row["evidence"]))
    return rows


def _diff_row(flat: dict[str, Any], change: str, fieldname: str, before: Any, after: Any,
              evidence: list[str]) -> dict[str, Any]:
    return {
        "subject_type": flat["subject_type"], "subject_id": flat["subject_id"], "session_id": flat["session_id"],
        "provider": flat["provider"], "change": change, "field": fieldname, "before": before, "after": after,
        "confidence": flat["confidence"], "uncertainty": flat["uncertainty"], "evidence": evidence,
    }


# --------------------------------------------------------------------------- why


MAX_WHY_SESSIONS: Final = 1000
"""Most sessions a project's WHY … BLOCKED examines (the most recently active)."""

WHY_COLUMNS: Final = ("subject_type", "subject_id", "session_id", "claim", "confidence", "uncertainty", "evidence",
                      "rule")


def _why_row(subject_type: str, subject_id: str | None, session_id: str | None, claim: str | None,
             confidence: float | None, reason: str, note: str, evidence: list[str],
             rule: str | None = None) -> dict[str, Any]:
    return {"subject_type": subject_type, "subject_id": subject_id, "session_id": session_id, "claim": claim,
            "confidence": confidence, "uncertainty": {"reason": reason, "note": note}, "evidence": evidence,
            "rule": rule}


def _repeating(ended: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The last two ended attempts when both failed with the same non-null class."""
    if len(ended) < 2:
        return None
    x, y = ended[0], ended[1]
    if x["outcome_at"] in FAILURES and y["outcome_at"] in FAILURES and x["class_at"] and x["class_at"] == y["class_at"]:
        return x, y
    return None


def why_blocked(engine: Runner, kind: Literal["session", "project", "work_unit"],
                ident: str | Sequence[str] | None = None, *, now_us: int | None = None) -> list[dict[str, Any]]:
    """Why a session, a project (``ident``: a project id, several, or None for
    every project) or a work unit is blocked, as of ``now_us`` (default: the
    latest observed event).

    Rule 1: the latest signal raised and not cleared — "waiting on a permission
    request" / "a <type> notification", confidence 0.85 with full coverage,
    else 0.65. Rule 2: the last two ended attempts both failed (or were
    superseded) with the same class — "repeating itself", 0.7 / 0.5. A
    project answers with every matching session, strongest first. Nothing
    matching: one ``insufficient_evidence`` row saying what was checked.
    """
    t = now_us if now_us is not None else latest_event_us(engine)
    if t is None:
        return [_why_row(kind, _one(ident), None, None, None, "insufficient_evidence",
                         "the store holds no events", [])]
    if kind == "work_unit":
        return _why_unit(engine, str(ident), t)
    p = Params()
    if kind == "session":
        conds = [f"session_id = {p(str(ident))}"]
        tt = ""
    else:
        tt = p.ts(t)
        conds = ["NOT retracted", f"started_at <= {tt}"]
        if ident is not None:
            conds.append(f"project_id IN {p.many([ident] if isinstance(ident, str) else list(ident))}")
    scope_sql = " AND ".join(conds)
    live_sql = scope_sql if kind == "session" else f"{scope_sql} AND (ended_at IS NULL OR ended_at > {tt})"
    sess = _q(engine, (
        "SELECT session_id, provider, project_id, project_name, coverage, retracted, epoch_us(ended_at) AS e, "
        "end_event_id, last_activity_event_id, epoch_us(last_event_at) AS last FROM sessions "
        f"WHERE {live_sql} ORDER BY last_event_at DESC, session_id LIMIT {MAX_WHY_SESSIONS}"), p)
    if kind == "session" and not sess:
        raise ResolveError(f"no session {_shown(str(ident))}", "AQL0301")
    live = [s for s in sess if not (s["e"] is not None and s["e"] <= t)]
    rows = _why_sessions(engine, live, t, kind)
    if rows:
        return rows
    if kind == "session":
        s = sess[0]
        if s["e"] is not None and s["e"] <= t:
            note = (f"the session ended at {_ts(s['e'])}: an ended session is not waiting on anything; "
                    + coverage_note(s["coverage"]))
            return [_why_row("session", s["session_id"], s["session_id"], None, None, "insufficient_evidence", note,
                             _dedup([s["end_event_id"]]))]
        note = ("no pending permission request or input notification, and the last two ended attempts did not "
                f"fail the same way, as of {format_us(t)}; " + coverage_note(s["coverage"]))
        return [_why_row("session", s["session_id"], s["session_id"], None, None, "insufficient_evidence", note,
                         _dedup([s["last_activity_event_id"]]))]
    summary = _q(engine, (
        f"SELECT count(*) FILTER (WHERE ended_at <= {tt}) AS ended, arg_max(last_event_id, last_event_at) AS ev "
        f"FROM sessions WHERE {scope_sql}"), p)[0]
    subject = _one(ident)
    more = " (the most recent ones)" if len(sess) >= MAX_WHY_SESSIONS else ""
    note = (f"{len(live)} session{'s' if len(live) != 1 else ''} not ended as of {format_us(t)} checked{more}, "
            f"{summary['ended'] or 0} ended: none has a pending permission request or input notification, "
            "and none failed twice in a row the same way; hooks cannot see a wait that raised no hook event")
    return [_why_row("project", subject, None, None, None, "insufficient_evidence", note,
                     _dedup([summary["ev"]]))]


def _one(ident: str | Sequence[str] | None) -> str | None:
    if ident is None or isinstance(ident, str):
        return ident
    return ident[0] if len(ident) == 1 else None


def _why_sessions(engine: Runner, sessions: list[dict[str, Any]], t: int, kind: str) -> list[dict[str, Any]]:
    if not sessions:
        return []
    ids = [s["session_id"] for s in sessions]
    facts = _facts(engine)
    core = _core(engine, facts)
    signals = _open_signals(core, ids, t)
    attempts = _attempts_at(core, t, {"session_id": ids}, ("ended",))
    found: list[tuple[float, int, dict[str, Any]]] = []
    for s in sessions:
        sid = s["session_id"]
        full = s["coverage"] == "full"
        note = coverage_note(s["coverage"])
        subject_type, subject_id = ("session", sid) if kind == "session" else ("project", s["project_id"])
        sig = signals.get(sid)
        if sig is not None:
            conf = 0.85 if full else 0.65
            claim = f"session {_short('session', sid)} ({s['provider']}) is {_signal_claim(sig)}"
            found.append((conf, sig["raised"], _why_row(subject_type, subject_id, sid, claim, conf, "heuristic", note,
                                                        list(sig["evidence"] or [sig["event_id"]]),
                                                        "pending_signal")))
            continue
        pair = _repeating(attempts.get(sid, {}).get("ended", []))
        if pair is not None:
            x, y = pair
            conf = 0.7 if full else 0.5
            claim = (f"session {_short('session', sid)} ({s['provider']}) is repeating itself: its last two attempts "
                     f"({_short('attempt', y['attempt_id'])}, {_short('attempt', x['attempt_id'])}) both failed with "
                     f"{x['class_at']}")
            found.append((conf, x["e"], _why_row(subject_type, subject_id, sid, claim, conf, "heuristic", note,
                                                 [y["attempt_id"], x["attempt_id"]], "repeated_failure")))
    pairs = [a for f in found if f[2]["rule"] == "repeated_failure" for a in f[2]["evidence"]]
    if pairs:
        ev = _evidence_of(engine, facts, core, pairs)
        for f in found:
            if f[2]["rule"] == "repeated_failure":
                f[2]["evidence"] = _dedup(e for a in f[2]["evidence"] for e in ev.get(a, []))
    found.sort(key=lambda f: (-f[0], -f[1]))
    return [f[2] for f in found]


def _why_unit(engine: Runner, unit_id: str, t: int) -> list[dict[str, Any]]:
    p = Params()
    units = _q(engine, ("SELECT work_unit_id, status, phase, sessions, evidence FROM work_units "
                        f"WHERE work_unit_id = {p(unit_id)}"), p)
    if not units:
        raise ResolveError(f"no work unit {_shown(unit_id)}", "AQL0301")
    u = units[0]
    p = Params()
    sess = _q(engine, (
        "SELECT session_id, provider, project_id, coverage, epoch_us(ended_at) AS e, last_activity_event_id "
        f"FROM sessions WHERE session_id IN {p.many(u['sessions'] or [])} AND NOT retracted"), p)
    live = [s for s in sess if not (s["e"] is not None and s["e"] <= t)]
    rows = []
    for r in _why_sessions(engine, live, t, "session"):
        if r["rule"] == "pending_signal":
            rows.append({**r, "subject_type": "work_unit", "subject_id": unit_id})
    if rows:
        return rows
    facts = _facts(engine)
    core = _core(engine, facts)
    groups = _attempts_at(core, t, {"work_unit_id": [unit_id]}, ("ended",)).get(unit_id, {})
    pair = _repeating(groups.get("ended", []))
    covs = [s["coverage"] for s in sess]
    worst = min(covs, key=lambda c: COVERAGE_CONFIDENCE.get(c, 0.4)) if covs else "unknown"
    if pair is not None:
        x, y = pair
        conf = 0.7 if worst == "full" else 0.5
        claim = (f"work unit {_short('work_unit', unit_id)} is repeating itself: its last two attempts "
                 f"({_short('attempt', y['attempt_id'])}, {_short('attempt', x['attempt_id'])}) both failed with "
                 f"{x['class_at']}")
        ev = _evidence_of(engine, facts, core, [y["attempt_id"], x["attempt_id"]])
        return [_why_row("work_unit", unit_id, x["session_id"], claim, conf, "heuristic", coverage_note(worst),
                         _dedup([*ev.get(y["attempt_id"], []), *ev.get(x["attempt_id"], [])]), "repeated_failure")]
    note = (f"the work unit is {u['status']} (phase {u['phase']}): no member session has a pending permission "
            "request or input notification and its last two ended attempts did not fail the same way; "
            + coverage_note(worst))
    return [_why_row("work_unit", unit_id, None, None, None, "insufficient_evidence", note,
                     list((u["evidence"] or [])[:1]))]


def why_failed(engine: Runner, attempt_id: str) -> list[dict[str, Any]]:
    """Why an attempt failed: its failing event (the call that failed, or the
    turn's failure), the attempt that superseded it and any correction. An
    attempt that did not fail: one ``state_mismatch`` row with its outcome."""
    p = Params()
    rows = _q(engine, (
        f"SELECT {_attempt_select('a')}, a.correction_type, a.note, epoch_us(a.corrected_at) AS corrected_us, "
        "t.stop_event_id, t.status AS turn_status, t.failure_class AS turn_failure_class, s.coverage "
        "FROM attempts a LEFT JOIN turns t ON t.turn_id = a.turn_id "
        "LEFT JOIN sessions s ON s.session_id = a.session_id "
        f"WHERE a.attempt_id = {p(attempt_id)}"), p)
    if not rows:
        raise ResolveError(f"no attempt {_shown(attempt_id)}", "AQL0301")
    a = rows[0]
    note = coverage_note(a["coverage"])
    inferred = a["inferred_outcome"] if a["corrected_by"] is not None else a["outcome"]
    if a["outcome"] not in FAILURES and inferred not in FAILURES:
        return [_why_row("attempt", a["attempt_id"], a["session_id"], None, None, "state_mismatch",
                         f"the attempt did not fail: its outcome is {a['outcome']}; " + note,
                         _dedup([a["first_action_event_id"], *(a["evidence"] or [])[:1]]))]
    parts: list[str] = []
    evidence: list[str | None] = []
    cls = a["failure_class"] if a["outcome"] in FAILURES else (a["inferred_failure_class"] or a["failure_class"])
    if a["failing_event_id"]:
        p = Params()
        ev = p(a["failing_event_id"])
        call = _q(engine, ("SELECT tool_call_id, tool_name, tool_category, paths, outcome_status FROM tool_calls "
                           f"WHERE session_id = {p(a['session_id'])} AND (end_event_id = {ev} OR "
                           f"(end_event_id IS NULL AND start_event_id = {ev})) LIMIT 1"), p)
        if call:
            c = call[0]
            where = f" on {', '.join(c['paths'][:3])}" if c["paths"] else ""
            parts.append(f"{c['tool_name'] or c['tool_category'] or 'a tool call'}{where} ended "
                         f"{c['outcome_status'] or 'failure'} ({cls or 'no class'}) at event "
                         f"{_short('event', a['failing_event_id'])}")
        else:
            parts.append(f"it failed ({cls or 'no class'}) at event {_short('event', a['failing_event_id'])}")
        evidence.append(a["failing_event_id"])
    else:
        parts.append(f"its turn ended {a['turn_status']} ({a['turn_failure_class'] or cls or 'no class'})")
        evidence.append(a["stop_event_id"])
    if a["superseded_by"]:
        p = Params()
        succ = _q(engine, ("SELECT attempt_id, outcome, approach, first_action_event_id FROM attempts "
                           f"WHERE attempt_id = {p(a['superseded_by'])}"), p)
        if succ:
            parts.append(f"superseded by attempt {_short('attempt', succ[0]['attempt_id'])} "
                         f"({succ[0]['approach']}), which {_outcome_verb(succ[0]['outcome'])}")
            evidence.append(succ[0]["first_action_event_id"])
    reason = "deterministic"
    if a["corrected_by"] is not None and a["correction_type"] == "attempt_outcome":
        parts.append(f"corrected to {a['outcome']} by event {_short('event', a['corrected_by'])} (the projection had "
                     f"inferred {a['inferred_outcome']})")
        evidence.append(a["corrected_by"])
        reason = "corrected"
    claim = f"attempt {_short('attempt', a['attempt_id'])} failed: " + "; ".join(parts)
    return [_why_row("attempt", a["attempt_id"], a["session_id"], claim, float(a["confidence"]), reason, note,
                     _dedup(evidence), "failure")]


def _outcome_verb(outcome: str | None) -> str:
    return {"succeeded": "succeeded", "failed": "failed too", "superseded": "was superseded in turn",
            "in_progress": "is still in progress", "abandoned": "was abandoned"}.get(outcome or "", f"ended {outcome}")


# --------------------------------------------------------------------------- what is … doing now


def what_is_doing_now(engine: Runner, now_us: int | None = None, scope: Scope | None = None, *,
                      session_ids: Sequence[str] | None = None, work_unit_ids: Sequence[str] | None = None,
                      provider: str | None = None) -> list[dict[str, Any]]:
    """The state at ``now_us`` (default: the latest observed event) restricted
    to live sessions (open, not stale) and the open work units they belong to, newest activity
    first, as :data:`STATE_COLUMNS` rows. Nothing active: one
    ``insufficient_evidence`` row naming the last event time in scope."""
    t = now_us if now_us is not None else latest_event_us(engine)
    if t is None:
        return [_nothing_row(None, "the store holds no events")]
    st = state_at(engine, t, scope, session_ids=session_ids, work_unit_ids=work_unit_ids, provider=provider)
    live = [s for s in st.sessions if s["liveness"] == "open"]
    live_ids = {s["session_id"] for s in live}
    # A unit is active when one of its sessions is live (open units of stale sessions are not "doing" anything).
    rows = [flatten_work_unit(u) for u in st.work_units if live_ids.intersection(u["sessions"])]
    rows += [flatten_session(s) for s in live]
    if work_unit_ids is not None:
        rows = [r for r in rows if r["subject_type"] == "work_unit" or
                any(r["session_id"] in u["sessions"] for u in st.work_units)]
    rows.sort(key=lambda r: (r["last_activity_at"] or "", r["subject_type"] == "work_unit"), reverse=True)
    if rows:
        return rows
    p = Params()
    conds = ["NOT retracted", f"last_event_at <= {p.ts(t)}"] + _scope_conds(p, scope)
    if session_ids is not None:
        conds.append(f"session_id IN {p.many(session_ids)}")
    if provider:
        conds.append(f"provider = {p(provider)}")
    last = _q(engine, ("SELECT epoch_us(last_event_at) AS at, last_event_id FROM sessions "
                       f"WHERE {' AND '.join(conds)} ORDER BY last_event_at DESC LIMIT 1"), p)
    if last:
        note = (f"nothing is open at {format_us(t)}: no live session and no open work unit; the last event in "
                f"scope was at {_ts(last[0]['at'])}")
        return [_nothing_row(last[0]["last_event_id"], note)]
    return [_nothing_row(None, f"nothing in scope had been recorded by {format_us(t)}")]


def _nothing_row(event_id: str | None, note: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(STATE_COLUMNS)
    row.update({"subject_type": "none", "in_flight": [], "blocked": False,
                "uncertainty": {"reason": "insufficient_evidence", "note": note},
                "evidence": [event_id] if event_id else []})
    return row


# --------------------------------------------------------------------------- trace


CAUSAL_EDGES: Final = ("caused", "triggered", "superseded", "handed_off", "blocked", "resolved", "contradicted")
"""Edge kinds TRACE follows in both directions (loaded once per engine)."""
CONTAINMENT_FROM: Final = ("work_unit", "session", "turn")
"""Node types whose ``parent_of`` children TRACE follows DOWN (fetched per level)."""
TRACE_KINDS: Final = ("attempt", "event", "session", "turn", "tool_call", "work_unit")
"""Id spaces a TRACE may start from."""
TRACE_COLUMNS: Final = ("depth", "direction", "edge_kind", "from_type", "from_id", "to_type", "to_id", "evidence",
                        "confidence", "uncertainty")

Edge = tuple[str, str, str, str, str, tuple[str, ...], float | None]


@dataclass
class _Graph:
    edges: list[Edge]
    out: dict[str, list[int]]
    inc: dict[str, list[int]]
    types: dict[str, str]
    """Node id → entity type, for every node a causal edge touches (resolves full ids without SQL)."""


_GRAPHS: weakref.WeakKeyDictionary[Any, _Graph] = weakref.WeakKeyDictionary()


def _graph(engine: Runner) -> _Graph:
    """The causal edges as an adjacency index, built once per engine (its snapshot never changes)."""
    owner = getattr(engine, "__wrapped__", engine)
    g = _GRAPHS.get(owner)
    if g is not None:
        return g
    p = Params()
    res = engine.run("SELECT edge_kind, from_type, from_id, to_type, to_id, evidence, confidence FROM edges "
                     f"WHERE edge_kind IN {p.many(CAUSAL_EDGES)}", p.values, max_rows=ALL_ROWS)
    edges: list[Edge] = []
    out: dict[str, list[int]] = {}
    inc: dict[str, list[int]] = {}
    types: dict[str, str] = {}
    for i, (kind, ft, fid, tt, tid, ev, conf) in enumerate(res.rows):
        edges.append((kind, ft, fid, tt, tid, tuple(ev or ()), conf))
        out.setdefault(fid, []).append(i)
        inc.setdefault(tid, []).append(i)
        types[fid] = ft
        types[tid] = tt
    g = _Graph(edges, out, inc, types)
    try:
        _GRAPHS[owner] = g
    except TypeError:
        pass  # not weak-referenceable: no cache
    return g


def _children(engine: Runner, nodes: Sequence[str]) -> dict[str, list[Edge]]:
    """``parent_of`` edges out of these work units, sessions and turns."""
    if not nodes:
        return {}
    p = Params()
    rows = _q(engine, ("SELECT edge_kind, from_type, from_id, to_type, to_id, evidence, confidence FROM edges "
                       f"WHERE edge_kind = 'parent_of' AND from_type IN {p.many(CONTAINMENT_FROM)} "
                       f"AND from_id IN {p.many(nodes)} ORDER BY from_id, to_type, to_id"), p)
    out: dict[str, list[Edge]] = {}
    for r in rows:
        out.setdefault(r["from_id"], []).append((r["edge_kind"], r["from_type"], r["from_id"], r["to_type"],
                                                 r["to_id"], tuple(r["evidence"] or ()), r["confidence"]))
    return out


def trace(engine: Runner, id: str, depth: int = 10, direction: str = "up", *,
          kinds: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Causal edges from the entity ``id`` (any id space of :data:`TRACE_KINDS`,
    as :func:`resolve_id` reads it), breadth first, at most ``depth`` edges
    away. Rows (:data:`TRACE_COLUMNS`) in order of depth; each edge once; a
    node reached twice is not expanded again (cycles are cut); when edges
    continue past ``depth``, one ``depth_limit`` row per node where the walk
    stopped."""
    if depth < 1:
        raise StateError(f"DEPTH must be at least 1, not {depth}", "AQL0403")
    if direction not in ("up", "down", "both"):
        raise StateError(f"DIRECTION must be up, down or both, not {direction!r}", "AQL0409")
    allowed = tuple(kinds or TRACE_KINDS)
    g = _graph(engine)
    typed, bare = split_display(id)
    known = g.types.get(bare)
    if known is not None and known in allowed and typed in (None, known):
        start_kind, start = known, bare  # a full id the causal index knows: no lookup needed
    else:
        start_kind, start = resolve_id(engine, id, allowed)
    dirs = ["up", "down"] if direction == "both" else [direction]
    visited = {(start, d) for d in dirs}
    seen: set[tuple[str, str, str]] = set()
    frontier: list[tuple[str, str, str]] = [(start, start_kind, d) for d in dirs]
    rows: list[dict[str, Any]] = []

    def edges_of(frontier: list[tuple[str, str, str]]) -> list[tuple[str, str, str, Edge]]:
        kids = _children(engine, _dedup(n for n, k, d in frontier if d == "down" and k in CONTAINMENT_FROM))
        found: list[tuple[str, str, str, Edge]] = []
        for n, k, d in frontier:
            idx = g.inc.get(n, []) if d == "up" else g.out.get(n, [])
            for e in [g.edges[i] for i in idx] + (kids.get(n, []) if d == "down" else []):
                if (e[0], e[2], e[4]) not in seen:
                    found.append((n, k, d, e))
        return found

    for level in range(1, depth + 1):
        if not frontier:
            break
        nxt: list[tuple[str, str, str]] = []
        for _n, _k, d, e in edges_of(frontier):
            key = (e[0], e[2], e[4])
            if key in seen:
                continue
            seen.add(key)
            rows.append(_trace_row(level, d, e))
            other, otype = (e[2], e[1]) if d == "up" else (e[4], e[3])
            if (other, d) not in visited:
                visited.add((other, d))
                nxt.append((other, otype, d))
        frontier = nxt
    if frontier:
        pending: dict[tuple[str, str, str], int] = {}
        for n, k, d, _e in edges_of(frontier):
            pending[(n, k, d)] = pending.get((n, k, d), 0) + 1
        for (n, k, d), count in pending.items():
            rows.append({
                "depth": depth + 1, "direction": d, "edge_kind": "depth_limit", "from_type": k, "from_id": n,
                "to_type": None, "to_id": None, "evidence": [], "confidence": None,
                "uncertainty": {"reason": "depth_limit",
                                "note": f"{count} more edge{'s' if count != 1 else ''} {d} from here, past DEPTH "
                                        f"{depth}; trace from this node or raise DEPTH to follow them"},
            })
    return rows


def _trace_row(level: int, direction: str, e: Edge) -> dict[str, Any]:
    kind = e[0]
    heuristic = kind == "handed_off"
    return {
        "depth": level, "direction": direction, "edge_kind": kind, "from_type": e[1], "from_id": e[2],
        "to_type": e[3], "to_id": e[4], "evidence": list(e[5]), "confidence": e[6],
        "uncertainty": {"reason": "heuristic" if heuristic else "deterministic",
                        "note": "a handoff is inferred from timing and shared paths" if heuristic
                        else "a projection rule over the cited events"},
    }
