"""Time travel over the projection: the state at an instant, what changed
between two instants, why something is blocked or failed, and causal traces.

Everything here is SQL over an open query engine (``query.engine.Engine``) —
the functions filter and aggregate inside DuckDB and bring back only the few
rows an answer needs, so they stay fast on a store of millions of events.
No function reads the wall clock: every instant is an argument, and callers
default "now" to the latest observed event time (:func:`latest_event_us`).

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
from datetime import date, datetime, timedelta, timezone
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Iterable, Literal, Protocol, Sequence

from ..query.timeexpr import format_us
from .assemble import BLOCKED_OPEN_FOR, STALE_AFTER, UNIT_IDLE_ABANDONED, UNIT_IDLE_DONE, _phase
from .ids import PREFIXES, split_display
from .session import MUTATING
from .session import coverage as coverage_grade

if TYPE_CHECKING:
    from ..query.engine import QueryResult
    from ..query.scope import Scope

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
    return None if us is None else format_us(us)


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
"""What :func:`_attempts_at` keeps of each attempt (lists such as evidence are left out:
carrying them through the aggregate costs more than fetching the few needed, see :func:`_evidence_of`)."""


def _attempts_at(engine: Runner, t: int, by: dict[str, Sequence[str]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per key (a session or work unit id; ``by`` maps the key column to the keys):
    ``last`` (the last attempt started ≤ t), ``ended`` (the last two ended by t,
    newest first) and ``fail`` (the last failures ended by t, newest first), each
    attempt with ``outcome_at`` and ``class_at`` masked to what was known at ``t``."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    parts = [(col, keys) for col, keys in by.items() if keys]
    if not parts:
        return out
    p = Params()
    tt = p.ts(t)
    tu = p(t)
    chosen = " UNION ALL ".join(
        f"SELECT a.{col} AS k, {_attempt_select('a')} FROM attempts a WHERE a.{col} IN {p.many(keys)} "
        f"AND NOT a.retracted AND a.started_at <= {tt}" for col, keys in parts)
    row = "{" + ", ".join(f"'{f}': {f}" for f in _ATTEMPT_FIELDS) + "}"
    order = "(e, s, turn_index, attempt_index)"
    sql = (
        f"WITH a AS ({chosen}), b AS (SELECT a.*, epoch_us(n.started_at) AS successor_s FROM a "
        "LEFT JOIN attempts n ON n.attempt_id = a.superseded_by) "
        f"SELECT k, arg_max({row}, (s, turn_index, attempt_index)) AS last, "
        f"arg_max({row}, {order}, 2) FILTER (WHERE e <= {tu}) AS ended, "
        f"arg_max({row}, {order}, 5) FILTER (WHERE e <= {tu} AND (outcome IN ('failed', 'superseded') "
        "OR corrected_by IS NOT NULL)) AS fail FROM b GROUP BY k"
    )
    rows = _q(engine, sql, p)
    picked = [x for r in rows for x in ([r["last"]] if r["last"] else []) + (r["ended"] or []) + (r["fail"] or [])]
    corrected = _dedup(x["attempt_id"] for x in picked if x["corrected_by"] is not None)
    corrections = _corrections_at(engine, corrected, t)
    for x in picked:
        x["outcome_at"], x["class_at"] = _mask(x, t, corrections.get(x["attempt_id"]))
    for r in rows:
        out[r["k"]] = {"last": [r["last"]] if r["last"] else [], "ended": list(r["ended"] or []),
                       "fail": [x for x in (r["fail"] or []) if x["outcome_at"] in FAILURES]}
    return out


def _evidence_of(engine: Runner, attempt_ids: Sequence[str]) -> dict[str, list[str]]:
    if not attempt_ids:
        return {}
    p = Params()
    return {r["attempt_id"]: list(r["evidence"] or []) for r in _q(engine, (
        f"SELECT attempt_id, evidence FROM attempts WHERE attempt_id IN {p.many(attempt_ids)}"), p)}


def _corrections_at(engine: Runner, attempt_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest applied outcome correction recorded by ``t``, per attempt."""
    if not attempt_ids:
        return {}
    p = Params()
    rows = _q(engine, "SELECT target, outcome, failure_class, event_id FROM corrections "
                      f"WHERE status = 'applied' AND correction_type = 'attempt_outcome' AND target IN "
                      f"{p.many(attempt_ids)} AND corrected_at <= {p.ts(t)} ORDER BY corrected_at, event_id", p)
    return {r["target"]: r for r in rows}


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


def _open_signals(engine: Runner, session_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest signal raised by ``t`` and not cleared by ``t``, per session."""
    if not session_ids:
        return {}
    p = Params()
    tt = p.ts(t)
    rows = _q(engine, "SELECT session_id, signal_id, event_id, kind, signal_type, epoch_us(raised_at) AS raised, "
                      f"evidence, confidence FROM signals WHERE session_id IN {p.many(session_ids)} "
                      f"AND NOT retracted AND raised_at <= {tt} AND (cleared_at IS NULL OR cleared_at > {tt}) "
                      "QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY raised_at DESC, event_id DESC) = 1",
              p)
    return {r["session_id"]: r for r in rows}


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
    t = at_us
    result = StateAt(t)
    units, closed_counts = _unit_candidates(engine, t, scope, session_ids, work_unit_ids, provider)
    members = _dedup(s for u in units for s in (u["sessions"] or []))
    sess = _sessions_at(engine, t, scope, session_ids, provider, members)
    live = [s for s in sess if s["in_state"]]
    ids = [s["session_id"] for s in live]
    uids = [u["work_unit_id"] for u in units]
    signals = _open_signals(engine, _dedup([*ids, *members]), t)
    attempts = _attempts_at(engine, t, {"session_id": ids, "work_unit_id": uids})
    result.sessions = _session_states(engine, t, live, attempts, signals)
    if units:
        info = {s["session_id"]: s for s in sess}
        for u in _units_at(engine, units, t, info, attempts, signals):
            if u["status"] == "open":
                result.work_units.append(u)
            else:
                result.closed_work_units.append(u)
                closed_counts[u["status"]] = closed_counts.get(u["status"], 0) + 1
    done = [f"{n} {status}" for status, n in sorted(closed_counts.items()) if n]
    if done:
        result.notes.append(f"work units already closed by {format_us(t)}: {', '.join(done)} (not listed)")
    return result


def _sessions_at(engine: Runner, t: int, scope: Scope | None, session_ids: Sequence[str] | None,
                 provider: str | None, also: Sequence[str]) -> list[dict[str, Any]]:
    """Sessions in the state at ``t`` (``in_state``), plus the sessions ``also`` (work unit members)."""
    p = Params()
    tt = p.ts(t)
    conds = ["NOT retracted", f"started_at <= {tt}", f"(ended_at IS NULL OR ended_at >= {tt})"]
    conds += _scope_conds(p, scope)
    if session_ids is not None:
        conds.append(f"session_id IN {p.many(session_ids)}")
    if provider:
        conds.append(f"provider = {p(provider)}")
    cond = " AND ".join(conds)
    where = f"({cond})" + (f" OR session_id IN {p.many(also)}" if also else "")
    return _q(engine, "SELECT session_id, provider, provider_session_id, project_id, project_name, coverage, "
                      "epoch_us(started_at) AS started_us, epoch_us(ended_at) AS ended_us, "
                      "epoch_us(last_activity_at) AS activity_us, last_activity_event_id, start_event_id, "
                      f"first_event_id, end_event_id, coalesce({cond}, false) AS in_state "
                      f"FROM sessions WHERE {where} ORDER BY started_at, session_id", p)


def _session_states(engine: Runner, t: int, sess: list[dict[str, Any]],
                    attempts: dict[str, dict[str, list[dict[str, Any]]]],
                    signals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    if not sess:
        return []
    ids = [s["session_id"] for s in sess]

    # Current turn (the last started by t) and how many prompted turns had begun.
    p = Params()
    turns = {r["session_id"]: r for r in _q(engine, (
        "SELECT session_id, turn_id, turn_index, epoch_us(started_at) AS s, epoch_us(ended_at) AS e, status, "
        "objective, coalesce(prompt_event_id, first_event_id) AS opening_event, "
        "count(prompt_event_id) OVER (PARTITION BY session_id) AS prompts FROM turns "
        f"WHERE session_id IN {p.many(ids)} AND NOT retracted AND started_at <= {p.ts(t)} "
        "QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY started_at DESC, turn_index DESC) = 1"), p)}

    # Tool calls observed by t, and those in flight at t.
    p = Params()
    tt = p.ts(t)
    calls = {r["session_id"]: r for r in _q(engine, (
        "SELECT session_id, count(*) AS n, list({'tool_call_id': tool_call_id, 'tool_name': tool_name, "
        "'tool_category': tool_category, 's': epoch_us(started_at), 'start_event_id': start_event_id} "
        f"ORDER BY started_at, tool_call_id) FILTER (WHERE started_at <= {tt} AND (finished_at IS NULL OR "
        f"finished_at > {tt})) AS flying FROM tool_calls WHERE session_id IN {p.many(ids)} AND NOT retracted "
        f"AND coalesce(started_at, finished_at) <= {tt} GROUP BY session_id"), p)}

    activity = _activity_at(engine, [s for s in sess if s["activity_us"] is None or s["activity_us"] > t], t)

    out: list[dict[str, Any]] = []
    for s in sess:
        sid = s["session_id"]
        ended = s["ended_us"] is not None and s["ended_us"] <= t
        turn = turns.get(sid)
        call = calls.get(sid)
        cov = coverage_grade(s["start_event_id"] is not None, ended, int(turn["prompts"]) if turn else 0,
                             int(call["n"]) if call else 0)
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
        flights = [{"tool_call_id": f["tool_call_id"], "tool_name": f["tool_name"],
                    "tool_category": f["tool_category"], "started_at": _ts(f["s"]),
                    "start_event_id": f["start_event_id"]} for f in ((call["flying"] or []) if call else [])]
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
            "current_turn": cur, "in_flight": flights, "last_attempt": _attempt_view(last, t),
            "last_failure": _attempt_view(fail, t), "last_failure_class": fail["class_at"] if fail else None,
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


def _activity_at(engine: Runner, sessions: list[dict[str, Any]], t: int) -> dict[str, tuple[int, str]]:
    """(µs, event id) of each session's last event other than its end, at or before ``t``."""
    if not sessions:
        return {}
    p = Params()
    ors = " OR ".join(f"(provider = {p(s['provider'])} AND coalesce(provider_session_id, 'unknown') = "
                      f"{p(s['provider_session_id'] or 'unknown')})" for s in sessions)
    earliest = min(s["started_us"] for s in sessions)
    first_day, last_day = _day(earliest) - timedelta(days=1), _day(t) + timedelta(days=1)
    rows = _q(engine, (
        "SELECT provider, coalesce(provider_session_id, 'unknown') AS psid, epoch_us(max(observed_at)) AS at, "
        "arg_max(event_id, observed_at) AS ev FROM events "
        f"WHERE observed_date BETWEEN {p(first_day)} AND {p(last_day)} "  # the table's partitions: prunes files
        f"AND observed_at <= {p.ts(t)} AND observed_at >= {p.ts(earliest)} "
        f"AND kind NOT IN ('session_ended', 'correction', 'retraction') AND ({ors}) GROUP BY 1, 2"), p)
    by_key = {(r["provider"], r["psid"]): (int(r["at"]), str(r["ev"])) for r in rows}
    out: dict[str, tuple[int, str]] = {}
    for s in sessions:
        hit = by_key.get((s["provider"], s["provider_session_id"] or "unknown"))
        if hit is not None:
            out[s["session_id"]] = hit
    return out


def _unit_candidates(engine: Runner, t: int, scope: Scope | None, session_ids: Sequence[str] | None,
                     work_unit_ids: Sequence[str] | None, provider: str | None,
                     ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Work units started by ``t`` that may be open then (to recompute at ``t``), and
    how many units had closed long before (idle over 2 h at ``t``: their status then is
    their status now), by status."""
    p = Params()
    conds = [f"started_at <= {p.ts(t)}"]
    conds += _scope_conds(p, scope, session_col=None)
    if scope is not None and scope.session:
        conds.append(f"len(list_filter(sessions, lambda x: starts_with(x, {p(split_display(scope.session)[1])}))) > 0")
    if session_ids is not None:
        conds.append(f"list_has_any(sessions, {p(list(session_ids))}::VARCHAR[])")
    if work_unit_ids is not None:
        conds.append(f"work_unit_id IN {p.many(work_unit_ids)}")
    if provider:
        conds.append(f"list_contains(actors, {p(provider)})")
    base = " AND ".join(conds)
    window = p.ts(t - UNIT_IDLE_ABANDONED)
    rows = _q(engine, (
        "SELECT 'unit' AS role, work_unit_id, project_id, project_name, objective, objective_event_id, phase, status, "
        "epoch_us(started_at) AS s, epoch_us(updated_at) AS u, epoch_us(ended_at) AS e, sessions, turns, actors, "
        f"evidence, confidence, NULL::BIGINT AS n FROM work_units WHERE {base} AND (ended_at IS NULL OR "
        f"ended_at >= {window}) UNION ALL SELECT 'old', NULL, NULL, NULL, NULL, NULL, NULL, status, NULL, NULL, "
        f"NULL, NULL, NULL, NULL, NULL, NULL, count(*) FROM work_units WHERE {base} AND ended_at < {window} "
        "GROUP BY status"), p)
    units = sorted((r for r in rows if r["role"] == "unit"), key=lambda r: (-(r["u"] or 0), r["work_unit_id"]))
    return units, {str(r["status"]): int(r["n"]) for r in rows if r["role"] == "old"}


def _units_at(engine: Runner, units: list[dict[str, Any]], t: int, sess: dict[str, dict[str, Any]],
              attempts: dict[str, dict[str, list[dict[str, Any]]]],
              signals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    uids = [u["work_unit_id"] for u in units]
    # The last member turn started by t, and the latest member turn end by t.
    p = Params()
    tt = p.ts(t)
    last_turns = {r["work_unit_id"]: r for r in _q(engine, (
        f"WITH m AS (SELECT work_unit_id, unnest(turns) AS turn_id FROM work_units WHERE work_unit_id IN "
        f"{p.many(uids)}) SELECT m.work_unit_id, x.turn_id, x.session_id, epoch_us(x.started_at) AS s, "
        "epoch_us(x.ended_at) AS e, x.status, "
        f"max(CASE WHEN x.ended_at <= {tt} THEN epoch_us(x.ended_at) END) OVER (PARTITION BY m.work_unit_id) AS "
        "last_end FROM m JOIN turns x USING (turn_id) "
        f"WHERE x.started_at <= {tt} AND NOT x.retracted QUALIFY row_number() OVER "
        "(PARTITION BY m.work_unit_id ORDER BY x.started_at DESC, x.turn_index DESC) = 1"), p)}
    # Per unit, by t: the last five calls (the phase window), calls in flight, mutating calls, the last call time.
    p = Params()
    tt = p.ts(t)
    calls = {r["work_unit_id"]: r for r in _q(engine, (
        f"WITH m AS (SELECT work_unit_id, unnest(turns) AS turn_id FROM work_units WHERE work_unit_id IN "
        f"{p.many(uids)}), c AS (SELECT m.work_unit_id, x.tool_category AS cat, "
        f"CASE WHEN x.finished_at <= {tt} THEN x.outcome_status END AS status, x.git_subcommand AS git, "
        "x.command_category AS cmd, epoch_us(coalesce(x.started_at, x.finished_at)) AS first_at, "
        f"CASE WHEN x.finished_at <= {tt} THEN epoch_us(x.finished_at) END AS fin, "
        f"(x.finished_at IS NULL OR x.finished_at > {tt}) AS flying, x.tool_call_id "
        f"FROM m JOIN tool_calls x USING (turn_id) WHERE coalesce(x.started_at, x.finished_at) <= {tt} "
        "AND NOT x.retracted) "
        "SELECT work_unit_id, count(*) FILTER (WHERE flying) AS n_flying, "
        f"count(*) FILTER (WHERE cat IN {p.many(sorted(MUTATING))}) AS n_mut, "
        "max(coalesce(fin, first_at)) AS last_call, "
        "arg_max({'cat': cat, 'status': status, 'git': git, 'cmd': cmd, 'first_at': first_at, 'id': tool_call_id}, "
        "(first_at, tool_call_id), 5) AS tail FROM c GROUP BY work_unit_id"), p)}

    out: list[dict[str, Any]] = []
    for u in units:
        uid = u["work_unit_id"]
        lt = last_turns.get(uid)
        if lt is None:
            continue  # no member turn had started by t
        members = [sid for sid in (u["sessions"] or []) if sid in sess and sess[sid]["started_us"] <= t]
        agg = calls.get(uid)
        tail_rows = sorted((agg["tail"] or []) if agg else [], key=lambda r: (r["first_at"], r["id"]))
        tail = [[r["cat"], r["status"], r["git"], r["cmd"]] for r in tail_rows]
        n_mut = int(agg["n_mut"]) if agg else 0
        edited_before = n_mut - sum(1 for r in tail_rows if r["cat"] in MUTATING) > 0
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
            "in_flight": flying, "last_attempt": _attempt_view(last, t), "blocked": sig is not None,
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
    a = state_at(engine, t1, scope, session_ids=session_ids, work_unit_ids=work_unit_ids, provider=provider)
    b = state_at(engine, t2, scope, session_ids=session_ids, work_unit_ids=work_unit_ids, provider=provider)
    rows: list[dict[str, Any]] = []

    before = {s["session_id"]: flatten_session(s) for s in a.sessions}
    after = {s["session_id"]: flatten_session(s) for s in b.sessions}
    gone = [sid for sid in before if sid not in after]
    ends: dict[str, dict[str, Any]] = {}
    if gone:
        p = Params()
        ends = {r["session_id"]: r for r in _q(engine, (
            "SELECT session_id, end_event_id, epoch_us(ended_at) AS e, retracted FROM sessions "
            f"WHERE session_id IN {p.many(gone)}"), p)}
    for sid, row in before.items():
        if sid not in after:
            end = ends.get(sid, {})
            rows.append(_diff_row(row, "removed", "state", row["state"],
                                  "closed" if end.get("e") is not None and end["e"] <= t2 else None,
                                  _dedup([end.get("end_event_id"), *row["evidence"]])))
    for sid, row in after.items():
        old = before.get(sid)
        if old is None:
            rows.append(_diff_row(row, "added", "state", None, row["state"], row["evidence"]))
            continue
        for f in SESSION_DIFF_FIELDS:
            if old[f] != row[f]:
                rows.append(_diff_row(row, "changed", f, old[f], row[f], row["evidence"]))

    ub = {u["work_unit_id"]: flatten_work_unit(u) for u in a.work_units}
    ua = {u["work_unit_id"]: flatten_work_unit(u) for u in b.work_units}
    closed_b = {u["work_unit_id"]: u for u in b.closed_work_units}
    missing = [uid for uid in ub if uid not in ua and uid not in closed_b]
    stored: dict[str, dict[str, Any]] = {}
    if missing:
        p = Params()
        stored = {r["work_unit_id"]: r for r in _q(engine, (
            f"SELECT work_unit_id, status, evidence FROM work_units WHERE work_unit_id IN {p.many(missing)}"), p)}
    for uid, row in ub.items():
        if uid in ua:
            continue
        if uid in closed_b:
            final = closed_b[uid]
            rows.append(_diff_row(row, "removed", "status", row["status"], final["status"],
                                  _dedup([*final["evidence"], *row["evidence"]])))
        else:
            st = stored.get(uid, {})
            rows.append(_diff_row(row, "removed", "status", row["status"], st.get("status"),
                                  _dedup([*(st.get("evidence") or []), *row["evidence"]])))
    for uid, row in ua.items():
        old = ub.get(uid)
        if old is None:
            rows.append(_diff_row(row, "added", "status", None, row["status"], row["evidence"]))
            continue
        for f in UNIT_DIFF_FIELDS:
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
    signals = _open_signals(engine, ids, t)
    attempts = _attempts_at(engine, t, {"session_id": ids})
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
        ev = _evidence_of(engine, pairs)
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
    groups = _attempts_at(engine, t, {"work_unit_id": [unit_id]}).get(unit_id, {})
    pair = _repeating(groups.get("ended", []))
    covs = [s["coverage"] for s in sess]
    worst = min(covs, key=lambda c: COVERAGE_CONFIDENCE.get(c, 0.4)) if covs else "unknown"
    if pair is not None:
        x, y = pair
        conf = 0.7 if worst == "full" else 0.5
        claim = (f"work unit {_short('work_unit', unit_id)} is repeating itself: its last two attempts "
                 f"({_short('attempt', y['attempt_id'])}, {_short('attempt', x['attempt_id'])}) both failed with "
                 f"{x['class_at']}")
        ev = _evidence_of(engine, [y["attempt_id"], x["attempt_id"]])
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
