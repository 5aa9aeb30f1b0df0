"""The batch projector: an event set in, every projection table out.

``project(observations)`` is the reference the incremental projector
(:mod:`.incremental`) must equal: group by session, split off corrections
and retractions, build each session (:mod:`.session`), join them
(:mod:`.assemble`).
"""

from __future__ import annotations

from typing import Any, Iterable

from agentlog.projection.assemble import ATTEMPT_OVERLAY, TURN_OVERLAY, Meta, Projection, assemble
from agentlog.projection.observe import IGNORED_KINDS, META_KINDS, Obs, ordered
from agentlog.projection.session import SessionResult, build_session, only_capture_test, structural_edges


def split(observations: Iterable[Obs]) -> tuple[dict[str, list[Obs]], Meta]:
    """Ordered observations grouped by session key, and the corrections/retractions."""
    meta = Meta()
    sessions: dict[str, list[Obs]] = {}
    for o in ordered(observations):
        if o.kind in IGNORED_KINDS:
            continue
        if o.kind in META_KINDS:
            (meta.corrections if o.kind == "correction" else meta.retractions).append(o)
        else:
            sessions.setdefault(o.session_key, []).append(o)
    return sessions, meta


def build_all(sessions: dict[str, list[Obs]], meta: Meta) -> list[SessionResult]:
    gone = meta.retracted_events()
    out = []
    for key in sorted(sessions):
        evs = [o for o in sessions[key] if o.event_id not in gone] if gone else sessions[key]
        if evs and not only_capture_test(evs):
            out.append(build_session(key, evs))
    return out


def project(observations: Iterable[Obs], at: int | None = None) -> Projection:
    """Every projection table of an event set, at reference time ``at`` (default: the
    latest observed time in the set), with every column (per-session rows joined
    with what the cross-session stage decided)."""
    sessions, meta = split(observations)
    results = build_all(sessions, meta)
    known = {o.event_id for evs in sessions.values() for o in evs}
    p = assemble(results, meta, at, known.__contains__)
    return merge(p, results)


def merge(p: Projection, results: list[SessionResult]) -> Projection:
    """``p`` with the full per-session rows: attempts and turns with their overlay,
    tool calls (``retracted`` from their attempt) and the per-session edges."""
    attempt_over = {a["attempt_id"]: a for a in p.tables["attempts"]}
    turn_over = {t["turn_id"]: t for t in p.tables["turns"]}
    retracted = {a["attempt_id"] for a in p.tables["attempts"] if a["retracted"]}
    retracted_sessions = {s["session_id"] for s in p.tables["sessions"] if s["retracted"]}
    attempts, turns, tool_calls, edges = [], [], [], []
    for r in results:
        for a in r.attempts:
            o = attempt_over[a["attempt_id"]]
            attempts.append(a | {k: o[k] for k in ATTEMPT_OVERLAY} | {"commit_shas": o["commit_shas"],
                                                                   "objective": o["objective"] or a["objective"]})
        for t in r.turns:
            o = turn_over[t["turn_id"]]
            turns.append(t | {k: o[k] for k in TURN_OVERLAY})
        gone_session = r.session["session_id"] in retracted_sessions
        for c in r.tool_calls:
            tool_calls.append(c | {"retracted": gone_session or c["attempt_id"] in retracted})
        sid = r.session["session_id"]
        if gone_session:
            continue  # a retracted session's edges are not answers
        for e in r.edges + structural_edges(r.turns, r.tool_calls, r.attempts):
            if e["from_id"] in retracted or e["to_id"] in retracted:
                continue
            edges.append(e | {"session_id": sid})
    edges.extend({k: v for k, v in e.items() if k != "project_id"} | {"session_id": None}
                 for e in p.tables["edges_cross"])
    tables = {name: [public(r) for r in rows] for name, rows in p.tables.items() if name != "edges_cross"}
    tables.update(attempts=attempts, turns=turns, tool_calls=tool_calls, edges=edges)
    return Projection(p.at, tables, p.stats)


def public(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` without the columns only the store keeps (named with a leading ``_``)."""
    if not any(k[:1] == "_" for k in row):
        return row
    return {k: v for k, v in row.items() if k[:1] != "_"}
