"""Explanations: why a session, a project or a work unit is blocked
(:func:`why_blocked`), why an attempt failed (:func:`why_failed`), and what is
being done now (:func:`what_is_doing_now`). Answers carry ``evidence`` (event
ids) and an ``uncertainty`` ``{confidence, reason, note}``; when the evidence
does not support a claim the answer is one row with reason
``insufficient_evidence`` — never a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, Sequence

from agentlog.query.timeexpr import format_us
from agentlog.query.state.common import (
    COVERAGE_CONFIDENCE,
    FAILURES,
    Params,
    Runner,
    _dedup,
    _q,
    _scope_conds,
    _short,
    _shown,
    _ts,
    coverage_note,
    latest_event_us,
)
from agentlog.query.state.resolve import ResolveError
from agentlog.query.state.facts import _core, _facts
from agentlog.query.state.attempts import _attempt_select, _attempts_at, _evidence_of, _open_signals, _signal_claim
from agentlog.query.state.at import STATE_COLUMNS, flatten_session, flatten_work_unit, state_at

if TYPE_CHECKING:
    from agentlog.query.scope import Scope


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
        call = _q(engine, ("SELECT tool_call_id, tool_name, tool_category, paths, outcome_status, exit_code, "
                           "result_summary, failure_evidence, fixed_by FROM tool_calls "
                           f"WHERE session_id = {p(a['session_id'])} AND (end_event_id = {ev} OR "
                           f"(end_event_id IS NULL AND start_event_id = {ev})) LIMIT 1"), p)
        if call:
            c = call[0]
            where = f" on {', '.join(c['paths'][:3])}" if c["paths"] else ""
            said = c["result_summary"] or c["failure_evidence"]
            parts.append(f"{c['tool_name'] or c['tool_category'] or 'a tool call'}{where} ended "
                         f"{c['outcome_status'] or 'failure'} ({cls or 'no class'}"
                         + (f", exit code {c['exit_code']}" if c["exit_code"] is not None else "")
                         + (f": {said}" if said else "") + f") at event {_short('event', a['failing_event_id'])}")
            if c["fixed_by"] and not a["superseded_by"]:
                p = Params()
                fix = _q(engine, ("SELECT tool_call_id, end_event_id, result_summary FROM tool_calls "
                                  f"WHERE tool_call_id = {p(c['fixed_by'])}"), p)
                if fix:
                    parts.append(f"the same command passed later ({_short('tool_call', fix[0]['tool_call_id'])}"
                                 + (f": {fix[0]['result_summary']}" if fix[0]["result_summary"] else "") + ")")
                    evidence.append(fix[0]["end_event_id"])
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
