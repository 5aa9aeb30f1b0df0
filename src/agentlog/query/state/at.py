"""The state at an instant (:func:`state_at`): the sessions in scope that had
started and not ended, and the work units open then, as known at ``t`` —
only entities observed at or before ``t``, outcomes masked, a signal not
cleared by ``t`` blocks, a turn whose end came later is ``in_progress`` —
and their flat rows (:data:`STATE_COLUMNS`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Sequence

from agentlog.query.timeexpr import format_us
from agentlog.projection import rules
from agentlog.projection.rules import BLOCKED_OPEN_FOR, STALE_AFTER, UNIT_IDLE_ABANDONED, UNIT_IDLE_DONE
from agentlog.projection.ids import split_display
from agentlog.projection.session import MUTATING, coverage as coverage_grade
from agentlog.query.state.common import (
    COVERAGE_CONFIDENCE,
    FAILURES,
    Runner,
    _dedup,
    _low,
    _remember,
    _ts,
    coverage_note,
)
from agentlog.query.state.calls import _CallRow, _Calls, _in_flight, _unit_calls
from agentlog.query.state.facts import _Core, _Settled, _calls, _copy_state, _core, _facts, _settled_since
from agentlog.query.state.attempts import _attempts_at, _open_signals, _signal_claim, _view
from agentlog.query.state.activity import _activities

if TYPE_CHECKING:
    from agentlog.query.scope import Scope


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
        phase, phase_reason = rules.phase(tail, edited_before, sig is not None)
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
