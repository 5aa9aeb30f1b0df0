"""A session's last activity at or before an instant, when the projection's
came later: read from the events table, one query for many sessions and
instants, the scan kept to a day or two, answers memoised per engine.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone
from typing import Any, Final, Sequence

from agentlog.query.state.common import Params, Runner, _q, _remember
from agentlog.query.state.facts import _Core, _Facts, ActivityKey


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
