"""The cross-session stage: liveness, handoffs, work units, decisions, conflicts,
corrections and retractions.

Input: every session's :class:`.session.SessionResult` (rows and facts) and
the corrections/retractions, plus a reference time (``at``): the latest
observed time of the event set unless a caller asks for another instant —
never the wall clock. Cost is linear in sessions + turns + attempts; no
event is read again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterable

from agentlog.projection.ids import derive, split_display
from agentlog.projection.observe import Obs
from agentlog.projection.session import ALGORITHM_VERSION, MUTATING, SessionResult, edge
from agentlog.projection import rules
from agentlog.projection.rules import (
    BLOCKED_OPEN_FOR as BLOCKED_OPEN_FOR,  # "as": also read from here (query/engine.py)
    CONFLICT_WINDOW,
    HANDOFF_ANY_GAP,
    HANDOFF_PATHS_GAP,
    STALE_AFTER as STALE_AFTER,
    UNIT_IDLE_ABANDONED as UNIT_IDLE_ABANDONED,
    UNIT_IDLE_DONE as UNIT_IDLE_DONE,
    UNIT_TURN_GAP,
)

CORRECTION_OUTCOMES: Final = frozenset({"succeeded", "failed", "abandoned", "superseded"})
RETRACTION_REASONS: Final = frozenset({"benchmark", "test", "duplicate", "mistaken_import", "privacy", "revoked", "other"})


@dataclass
class Meta:
    """Corrections and retractions, split off the stream before projecting."""

    corrections: list[Obs] = field(default_factory=list)
    retractions: list[Obs] = field(default_factory=list)

    def retracted_sessions(self) -> set[str]:
        out = set()
        for r in self.retractions:
            if r.attrs.get("target_type") == "session":
                out.add(_bare(r.attrs.get("target")))
        return out

    def retracted_events(self) -> frozenset[str]:
        return frozenset(_bare(r.attrs.get("target")) for r in self.retractions
                         if r.attrs.get("target_type") == "event")


def _bare(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    return split_display(value)[1]


@dataclass
class Projection:
    """Every projection table as lists of row dicts, plus counts."""

    at: int
    tables: dict[str, list[dict[str, Any]]]
    stats: dict[str, int]


@dataclass
class Memo:
    """What earlier assembles of the same store computed, for the next one to reuse
    (the incremental refresh of a process keeps one per store). Every entry is
    checked before use against the identity of the session results it came from
    (a result object is never changed: a rebuilt session is a new object), and a
    project's work units are replaced whole whenever its sessions are assembled.
    Used only while the event set has no correction or retraction: those change
    rows after they are copied."""

    #: session id → (its result, its session row, turn rows, attempt rows, signal rows, commit rows)
    sessions: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: project id → {a unit's turn ids: (the results of its sessions, the handoffs inside it, its row, its edges)}
    units: dict[str, dict[frozenset[str], tuple[Any, ...]]] = field(default_factory=dict)
    #: session id → (its result, the work units of its attempts, its decision rows)
    decisions: dict[str, tuple[Any, ...]] = field(default_factory=dict)


def liveness(s: dict[str, Any], blocked: bool, at: int) -> str:
    if s["ended_at"] is not None and s["ended_at"] <= at:
        return "closed"
    silence = at - s["last_activity_at"]
    if silence <= STALE_AFTER or (blocked and silence <= BLOCKED_OPEN_FOR):
        return "open"
    return "stale"


# Attempt columns the cross-session stage reads or sets (the rest — evidence,
# tool call ids, objective text — stays in the per-session rows).
ATTEMPT_LIGHT: Final = (
    "attempt_id", "session_id", "provider", "project_id", "project_name", "turn_id", "turn_index",
    "attempt_index", "approach", "started_at", "ended_at", "outcome", "failure_class", "tool_call_count",
    "commit_shas", "superseded_by", "supersedes", "failing_event_id", "first_action_event_id", "confidence",
)
# What the cross-session stage decides about each attempt and turn (joined onto
# the per-session rows by id).
ATTEMPT_OVERLAY: Final = (
    "attempt_id", "outcome", "failure_class", "superseded_by", "supersedes", "work_unit_id", "corrected_by",
    "corrected_at", "correction_type", "inferred_outcome", "inferred_failure_class", "note", "objective",
    "retracted",
)
TURN_LIGHT: Final = ("turn_id", "session_id", "turn_index", "objective", "attempt_ids", "started_at")
TURN_OVERLAY: Final = ("turn_id", "objective", "corrected_by", "corrected_at", "inferred_objective", "retracted")


def light(result: SessionResult) -> SessionResult:
    """The parts of a session's result the cross-session stage reads (what the
    incremental projector keeps in memory for every session)."""
    facts = {k: v for k, v in result.facts.items() if k != "event_ids"}
    return SessionResult(
        result.key, result.session, [{k: t[k] for k in TURN_LIGHT} for t in result.turns],
        [{k: a[k] for k in ATTEMPT_LIGHT} | {"objective": None} for a in result.attempts], [],
        result.signals, result.commits, [], facts)


def assemble(results: Iterable[SessionResult], meta: Meta, at: int | None = None,
             event_exists: Callable[[str], bool] | None = None, memo: Memo | None = None) -> Projection:
    """Join the sessions into one projection at reference time ``at`` (see :func:`_assemble`).
    With a ``memo`` (and no correction or retraction), what it holds for unchanged
    sessions and work units is reused and what this call computes is put in it: the
    projection is the same as without one. The returned rows may be the memo's: a
    later call with the same memo changes them.

    The cyclic garbage collector is paused meanwhile: this stage allocates
    hundreds of thousands of small containers and creates no cycles, and on a
    large history each full collection walks every per-session fact (a third
    of the stage's time at 1.45 M events)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _assemble(results, meta, at, event_exists, memo if not (meta.corrections or meta.retractions) else None)
    finally:
        if enabled:
            gc.enable()


def _assemble(results: Iterable[SessionResult], meta: Meta, at: int | None = None,
              event_exists: Callable[[str], bool] | None = None, memo: Memo | None = None) -> Projection:
    """Join the sessions into one projection at reference time ``at``.

    ``results`` may be light (:func:`light`): the attempts and turns tables
    come out with the columns this stage reads and sets. ``event_exists``
    answers whether a retracted event id is in the event set (default: the
    ids of the results' facts, when they carry them)."""
    results = sorted(results, key=lambda r: r.session["session_id"])
    if at is None:
        at = max([r.session["last_event_at"] for r in results]
                 + [o.observed_at for o in meta.corrections + meta.retractions] + [0])
    retracted_sessions = meta.retracted_sessions()
    live: list[SessionResult] = []
    sessions: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    signals: list[dict[str, Any]] = []
    commits: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for r in results:
        sid = r.session["session_id"]
        cached = memo.sessions.get(sid) if memo is not None else None
        if cached is not None and cached[0] is r:
            _, srow, t_rows, a_rows, s_rows, c_rows = cached
            srow["liveness"] = liveness(srow, srow["_blocked"], at)
            srow["state"] = "closed" if srow["liveness"] == "closed" else "open"
            sessions.append(srow)
            turns.extend(t_rows)
            attempts.extend(a_rows)
            signals.extend(s_rows)
            commits.extend(c_rows)
            live.append(r)  # a memo holds no retracted session
            continue
        gone = sid in retracted_sessions
        blocked = any(sg["pending"] for sg in r.signals)
        srow = dict(r.session)
        srow["liveness"] = liveness(srow, blocked, at)
        srow["state"] = "closed" if srow["liveness"] == "closed" else "open"
        srow["retracted"] = gone
        srow["_blocked"] = blocked
        sessions.append(srow)
        t_rows = [{k: t[k] for k in TURN_LIGHT} | {"retracted": gone, "corrected_by": None, "corrected_at": None,
                                                   "inferred_objective": None, "project_id": r.session["project_id"]}
                  for t in r.turns]
        # a copy of each whole row (faster than picking ATTEMPT_LIGHT; other columns are ignored)
        a_rows = [{**a, "commit_shas": list(a["commit_shas"]), "objective": a.get("objective"), "retracted": gone,
                   "work_unit_id": None, "corrected_by": None, "corrected_at": None, "correction_type": None,
                   "inferred_outcome": None, "inferred_failure_class": None, "note": None} for a in r.attempts]
        s_rows = [{**x, "retracted": gone} for x in r.signals]
        c_rows = [{**c, "retracted": gone} for c in r.commits]
        turns.extend(t_rows)
        attempts.extend(a_rows)
        signals.extend(s_rows)
        commits.extend(c_rows)
        if memo is not None:
            memo.sessions[sid] = (r, srow, t_rows, a_rows, s_rows, c_rows)
        if not gone:
            live.append(r)
    by_session = {s["session_id"]: s for s in sessions}
    attempt_by_id = {a["attempt_id"]: a for a in attempts}
    turn_by_id = {t["turn_id"]: t for t in turns}

    # -- retracted attempts: removed after projecting (siblings keep their ids) ----
    retraction_rows: list[dict[str, Any]] = []
    retracted_attempts: set[str] = set()
    if event_exists is None:
        known = {e for x in results for e in x.facts.get("event_ids", ())}
        event_exists = known.__contains__
    for ro in sorted(meta.retractions, key=Obs.sort_key):
        ttype = ro.attrs.get("target_type")
        target = _bare(ro.attrs.get("target"))
        matched = False
        events_gone: list[str] = []
        resolved_in: str | None = None
        if ttype == "attempt":
            ra = attempt_by_id.get(target)
            if ra is not None:
                matched = True
                resolved_in = ra["project_id"] or ""
                retracted_attempts.add(target)
                ra["retracted"] = True
                events_gone = [x for x in (ra["first_action_event_id"], ra["failing_event_id"]) if x]
        elif ttype == "session":
            matched = target in by_session
            if matched:
                resolved_in = by_session[target]["project_id"] or ""
        elif ttype == "event":
            matched = event_exists(target)
            events_gone = [target]
        reason = ro.attrs.get("reason")
        retraction_rows.append({
            "event_id": ro.event_id, "retracted_at": ro.observed_at, "target_type": ttype, "target": target,
            "reason": reason if reason in RETRACTION_REASONS else "other", "note": ro.text,
            "note_chars": ro.attrs.get("note_chars"), "matched": matched, "retracted_events": events_gone,
            "evidence": [ro.event_id], "confidence": 1.0, "_project": resolved_in,
        })
    for a in attempts:
        if a["superseded_by"] in retracted_attempts:
            a["superseded_by"] = None
            if a["outcome"] == "superseded":
                a["outcome"] = "failed"
        if a["supersedes"] in retracted_attempts:
            a["supersedes"] = None
    if retracted_attempts:
        for srow in sessions:
            dropped = [a for a in attempts
                       if a["session_id"] == srow["session_id"] and a["attempt_id"] in retracted_attempts]
            if dropped:
                srow["tool_call_count"] -= sum(a["tool_call_count"] for a in dropped)
                srow["failure_count"] = max(0, srow["failure_count"] - sum(1 for a in dropped if a["failing_event_id"]))

    # -- handoffs ----------------------------------------------------------------
    handoffs = _handoffs(live, by_session)
    for h in handoffs:
        edges.append(edge("handed_off", "session", h["from_session"], "session", h["to_session"], h["evidence"],
                          h["confidence"]) | {"project_id": h["project_id"]})

    # -- corrections (in stream order; latest wins) --------------------------------
    correction_rows = _apply_corrections(meta.corrections, attempt_by_id, turn_by_id, attempts,
                                         retracted_attempts, retracted_sessions)

    # -- work units, decisions, conflicts -------------------------------------------
    units, unit_edges = _work_units(live, by_session, attempt_by_id, turn_by_id, handoffs, signals, at,
                                    retracted_attempts, memo)
    edges.extend(unit_edges)
    decisions = _decisions(live, attempt_by_id, retracted_attempts, memo)
    conflicts = _conflicts(units, live)

    stats = {
        "sessions": len(sessions), "turns": len(turns), "attempts": len(attempts),
        "handoffs": len(handoffs), "work_units": len(units), "decisions": len(decisions),
        "conflicts": len(conflicts), "corrections": len(correction_rows), "retractions": len(retraction_rows),
        "retracted_attempts": len(retracted_attempts),
    }
    tables = {
        "sessions": sessions, "turns": turns, "attempts": attempts, "signals": signals, "commits": commits,
        "handoffs": handoffs, "work_units": units, "decisions": decisions, "conflicts": conflicts,
        "corrections": correction_rows, "retractions": retraction_rows, "edges_cross": edges,
        "retracted_ids": [{"id": x, "kind": "attempt", "project_id": attempt_by_id[x]["project_id"]}
                          for x in sorted(retracted_attempts)],
    }
    return Projection(at, tables, stats)


def _handoffs(live: list[SessionResult], by_session: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    active = [r for r in live if r.facts["active"]]
    by_project: dict[str, list[SessionResult]] = {}
    for r in active:
        by_project.setdefault(r.session["project_id"], []).append(r)
    out: list[dict[str, Any]] = []
    for group in by_project.values():
        if len({r.session["provider"] for r in group}) < 2:
            continue
        group.sort(key=lambda r: r.session["started_at"])
        # The sessions that can hand off to one starting at t ended their activity
        # (or ended) within HANDOFF_PATHS_GAP before t: look only at those.
        by_last = sorted(range(len(group)), key=lambda i: group[i].session["last_activity_at"])
        last_keys = [group[i].session["last_activity_at"] for i in by_last]
        by_end = sorted((g.session["ended_at"], i) for i, g in enumerate(group) if g.session["ended_at"] is not None)
        end_keys = [e for e, _ in by_end]
        for b in group:
            bs = b.session
            best: tuple[Any, ...] | None = None
            start, earliest = bs["started_at"], bs["started_at"] - HANDOFF_PATHS_GAP
            near = set(by_last[bisect_left(last_keys, earliest):bisect_right(last_keys, start)])
            near.update(i for _, i in by_end[bisect_left(end_keys, earliest):bisect_right(end_keys, start)])
            for i in sorted(near):
                a = group[i]
                as_ = a.session
                if a is b or as_["provider"] == bs["provider"]:
                    continue
                if as_["last_activity_at"] > bs["started_at"]:
                    continue
                if as_["ended_at"] is not None and as_["ended_at"] <= bs["started_at"]:
                    a_last = max(as_["ended_at"], as_["last_activity_at"])
                else:
                    a_last = as_["last_activity_at"]
                gap = bs["started_at"] - a_last
                if gap < 0 or gap > HANDOFF_PATHS_GAP:
                    continue  # too long a gap for either rule: skip the path comparison
                shared = sorted(set(a.facts["touches"]).intersection(b.facts["touches"]))
                if shared and gap <= HANDOFF_PATHS_GAP:
                    conf = 0.8
                elif gap <= HANDOFF_ANY_GAP:
                    conf = 0.5
                else:
                    continue
                rank = (0 if shared else 1, gap, as_["session_id"])
                if best is None or rank < best[0]:
                    best = (rank, a, gap, shared, conf)
            if best is None:
                continue
            _, a, gap, shared, conf = best
            as_ = a.session
            evidence = [as_["last_activity_event_id"], bs["first_event_id"]]
            if shared:
                evidence += [a.facts["touches"][shared[0]][2], b.facts["touches"][shared[0]][0]]
            out.append({
                "handoff_id": derive("edge", "handoff", as_["session_id"], bs["session_id"]),
                "from_session": as_["session_id"], "to_session": bs["session_id"],
                "from_provider": as_["provider"], "to_provider": bs["provider"],
                "project_id": bs["project_id"], "project_name": bs["project_name"],
                "handoff_at": bs["started_at"], "gap_ms": gap // 1000, "shared_paths": shared,
                "evidence": list(dict.fromkeys(evidence)), "confidence": conf,
            })
    out.sort(key=lambda h: (h["handoff_at"], h["to_session"], h["from_session"]))
    return out


def _apply_corrections(corrections: list[Obs], attempt_by_id: dict[str, dict[str, Any]],
                       turn_by_id: dict[str, dict[str, Any]], attempts: list[dict[str, Any]],
                       retracted_attempts: set[str], retracted_sessions: set[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for c in sorted(corrections, key=Obs.sort_key):
        ctype = c.attrs.get("correction_type")
        target = _bare(c.attrs.get("target"))
        status = "applied"
        session_id = None
        resolved_in: str | None = None
        target_type = "attempt" if ctype in ("attempt_outcome", "attempt_note") else "turn"
        outcome = c.attrs.get("outcome")
        fclass = c.attrs.get("failure_class")
        if ctype not in ("attempt_outcome", "attempt_note", "turn_objective"):
            status = "invalid"
        elif ctype == "attempt_outcome" and outcome not in CORRECTION_OUTCOMES:
            status = "invalid"
        elif target_type == "attempt":
            a = attempt_by_id.get(target)
            if a is not None:
                resolved_in = a["project_id"] or ""
            if a is None:
                status = "target_not_found"
            elif target in retracted_attempts or a["session_id"] in retracted_sessions:
                status = "target_retracted"
            else:
                session_id = a["session_id"]
                if a["corrected_by"] is None:
                    a["inferred_outcome"] = a["outcome"]
                    a["inferred_failure_class"] = a["failure_class"]
                a["corrected_by"], a["corrected_at"], a["correction_type"] = c.event_id, c.observed_at, ctype
                if ctype == "attempt_outcome":
                    a["outcome"] = outcome
                    if isinstance(fclass, str):
                        a["failure_class"] = fclass
                    elif outcome not in ("failed", "superseded"):
                        a["failure_class"] = None
                    else:
                        a["failure_class"] = a["inferred_failure_class"]
                if c.text is not None:
                    a["note"] = c.text
        else:
            t = turn_by_id.get(target)
            if t is not None:
                resolved_in = t["project_id"] or ""
            if t is None:
                status = "target_not_found"
            elif t["session_id"] in retracted_sessions:
                status = "target_retracted"
            else:
                session_id = t["session_id"]
                if t["corrected_by"] is None:
                    t["inferred_objective"] = t["objective"]
                t["corrected_by"], t["corrected_at"] = c.event_id, c.observed_at
                if c.text is not None:
                    t["objective"] = c.text
                    for a in attempts:
                        if a["turn_id"] == target:
                            a["objective"] = c.text
        rows.append({
            "event_id": c.event_id, "corrected_at": c.observed_at, "session_id": session_id,
            "correction_type": ctype, "target_type": target_type, "target": target,
            "outcome": outcome if isinstance(outcome, str) else None,
            "failure_class": fclass if isinstance(fclass, str) else None, "note": c.text,
            "note_chars": c.attrs.get("note_chars"), "status": status, "evidence": [c.event_id], "confidence": 1.0,
            "_project": resolved_in,
        })
    return rows


def unit_status(inputs: dict[str, Any], updated_at: int, at: int) -> tuple[str, str, int | None]:
    """A work unit's status, the reason and its end at reference time ``at``, from
    what its turns, attempts and sessions say (``inputs``: the ``_``-prefixed
    columns the store keeps; the engine's ``work_units`` view computes the same
    in SQL). A unit that is completed or abandoned at ``at`` stays so at every
    later instant until it changes — conflicts rely on that."""
    if inputs["_unknown"]:
        return "unknown", "no prompt or tool call was observed", None
    ended = inputs["_sessions_ended_at"]
    session_ended = ended is not None and ended <= at
    idle = at - updated_at
    la_outcome = inputs["_la_outcome"]
    if inputs["_completable"] and (session_ended or idle > UNIT_IDLE_DONE):
        reason = "last turn completed and its session ended" if session_ended \
            else "last turn completed; idle for more than 30 minutes"
        return "completed", reason, updated_at
    if la_outcome in ("failed", "superseded", "abandoned") and idle > UNIT_IDLE_ABANDONED:
        return "abandoned", f"last attempt {la_outcome}; idle for more than 2 hours", updated_at
    return "open", ("a tool call is still running" if inputs["_in_flight"] else "activity within the idle window"), None


def _local_units(r: SessionResult) -> tuple[list[int], dict[str, int]]:
    """A session's turns joined within the session — consecutive turns less than
    UNIT_TURN_GAP apart, turns touching the same path — as (the local root of each
    turn, the local root of the turns touching each path). A pure function of the
    session's facts, kept on the result while it is in memory."""
    memo = r.derived.get("local_units")
    if memo is not None:
        return memo  # type: ignore[no-any-return]
    turns = r.facts["turns"]
    parent = list(range(len(turns)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first: dict[str, int] = {}
    for j, tf in enumerate(turns):
        if j and turns[j - 1]["ended_at"] is not None \
                and tf["started_at"] - turns[j - 1]["ended_at"] <= UNIT_TURN_GAP:
            union(j - 1, j)
        for p in tf["mpaths"]:
            k = first.get(p)
            if k is None:
                first[p] = j
            else:
                union(k, j)
    out = ([find(j) for j in range(len(turns))], {p: find(j) for p, j in first.items()})
    r.derived["local_units"] = out
    return out


def _work_units(live: list[SessionResult], by_session: dict[str, dict[str, Any]],
                attempt_by_id: dict[str, dict[str, Any]], turn_by_id: dict[str, dict[str, Any]],
                handoffs: list[dict[str, Any]],
                signals: list[dict[str, Any]], at: int,
                retracted_attempts: set[str], memo: Memo | None = None
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    # The graph is joined at the level of each session's local units (turns joined
    # within the session: see _local_units); node = base of its session + local root.
    turn_info: dict[str, tuple[SessionResult, dict[str, Any]]] = {}
    by_project: dict[str, list[int]] = {}
    base: list[int] = []
    local: list[tuple[list[int], dict[str, int]]] = []
    nodes = 0
    for i, r in enumerate(live):
        by_project.setdefault(r.session["project_id"], []).append(i)
        base.append(nodes)
        lu = _local_units(r)
        local.append(lu)
        nodes += len(lu[0])
        for tf in r.facts["turns"]:
            turn_info[tf["turn_id"]] = (r, tf)
    parent = list(range(nodes))

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union_all(items: list[int]) -> None:
        root = find(items[0])
        for x in items[1:]:
            r = find(x)
            if r != root:
                if r < root:
                    parent[root] = r
                    root = r
                else:
                    parent[r] = root

    started = [r.session["started_at"] for r in live]
    active_until = [r.session["last_activity_at"] for r in live]
    for members_of_project in by_project.values():
        # path → (session, its node touching the path through mutating/shell calls).
        by_path: dict[str, list[tuple[int, int]]] = {}
        for i in members_of_project:
            b = base[i]
            for p, lr in local[i][1].items():
                per = by_path.get(p)
                if per is None:
                    by_path[p] = [(i, b + lr)]
                else:
                    per.append((i, b + lr))
        for per in by_path.values():
            if len(per) < 2:
                continue
            # Sessions whose active spans do not overlap link; overlapping ones are
            # concurrent actors (separate units, possibly a conflict). Taken in
            # order of start, a session links with every session whose activity
            # ended before it started: so every session that ended before the
            # last start, and every one that started after the first end, is in
            # one unit — and no other.
            first_end = min([active_until[i] for i, _ in per])
            last_start = max([started[i] for i, _ in per])
            if first_end >= last_start:
                continue
            linked = [node for i, node in per if active_until[i] < last_start or started[i] > first_end]
            if len(linked) > 1:
                union_all(linked)
    index_of = {r.session["session_id"]: i for i, r in enumerate(live)}
    for h in handoffs:
        gi = index_of.get(h["from_session"])
        ri = index_of.get(h["to_session"])
        if gi is not None and ri is not None and local[gi][0] and local[ri][0]:
            union_all([base[gi] + local[gi][0][-1], base[ri] + local[ri][0][0]])

    members: dict[int, list[str]] = {}
    for i, r in enumerate(live):
        b, comp = base[i], local[i][0]
        for j, tf in enumerate(r.facts["turns"]):
            root = find(b + comp[j])
            tids = members.get(root)
            if tids is None:
                members[root] = [tf["turn_id"]]
            else:
                tids.append(tf["turn_id"])
    pending_by_session: dict[str, dict[str, Any]] = {}
    for s in signals:
        if s["pending"]:
            pending_by_session[s["session_id"]] = s
    commits_by_attempt: dict[str, list[str]] = {}  # filled per unit built, from its sessions
    commits_read: set[str] = set()
    handoffs_from: dict[str, list[dict[str, Any]]] = {}
    for h in {(h["from_session"], h["to_session"]): h for h in handoffs}.values():
        handoffs_from.setdefault(h["from_session"], []).append(h)
    units: list[dict[str, Any]] = []
    unit_edges: list[dict[str, Any]] = []
    remembered: dict[str, dict[frozenset[str], tuple[Any, ...]]] = {}
    for tids in members.values():
        if memo is not None:
            project_id = turn_info[tids[0]][0].session["project_id"]
            key = frozenset(tids)
            hit = memo.units.get(project_id, {}).get(key)
            if hit is not None and _unit_unchanged(hit, live, index_of, handoffs_from):
                _, _, row, row_edges = hit
                row["status"], row["status_reason"], row["ended_at"] = unit_status(row, row["updated_at"], at)
                for aid in row["attempts"]:
                    attempt_by_id[aid]["work_unit_id"] = row["work_unit_id"]
                units.append(row)
                unit_edges.extend(row_edges)
                remembered.setdefault(project_id, {})[key] = hit
                continue
        tids.sort(key=lambda t: (turn_info[t][1]["started_at"], t))
        first_r, first_tf = turn_info[tids[0]]
        project_id = first_r.session["project_id"]
        unit_id = derive("work_unit", project_id, first_tf["opening_event"])
        first_edge = len(unit_edges)
        sessions_seen: dict[str, None] = {}
        attempts_in: list[str] = []
        paths_seen: dict[str, None] = {}
        evidence: dict[str, None] = {}
        updated_at = first_tf["last_at"]
        in_flight = 0
        for t in tids:
            r, tf = turn_info[t]
            evidence[tf["opening_event"]] = None
            sessions_seen[r.session["session_id"]] = None
            paths_seen.update(dict.fromkeys(tf["mpaths"]))
            if tf["last_at"] > updated_at:
                updated_at = tf["last_at"]
            in_flight += tf["in_flight"]
        sessions_in = list(sessions_seen)
        paths = list(paths_seen)
        ordered_turns = sorted(tids, key=lambda t: (turn_info[t][1]["last_at"], t))
        # The unit's last five calls (its turns' tails, in order of their last activity),
        # and whether it changed something before them: a turn said so, or a call of an
        # earlier turn's tail (each tail is whole in the window after its turn) did.
        tails: list[list[Any]] = []
        for t in reversed(ordered_turns):
            tail = turn_info[t][1]["tail"]
            if tail:
                tails = tail + tails
                if len(tails) >= 5:
                    break
        tails = tails[-5:]
        edited_before = any(turn_info[t][1]["decisive_before"] for t in ordered_turns) or any(
            c[0] in MUTATING for t in ordered_turns[:-1] for c in turn_info[t][1]["tail"])
        confidences = []
        failure_count = 0
        last_attempt: dict[str, Any] | None = None
        for t in tids:
            for aid in turn_by_id[t]["attempt_ids"]:
                if aid in retracted_attempts:
                    continue
                aa = attempt_by_id[aid]
                attempts_in.append(aa["attempt_id"])
                aa["work_unit_id"] = unit_id
                confidences.append(aa["confidence"])
                if aa["outcome"] in ("failed", "superseded"):
                    failure_count += 1
                    if aa["failing_event_id"]:
                        evidence[aa["failing_event_id"]] = None
                if last_attempt is None or (aa["started_at"], aa["attempt_id"]) >= (
                        last_attempt["started_at"], last_attempt["attempt_id"]):
                    last_attempt = aa
        blocking = next((pending_by_session[s] for s in sessions_in if s in pending_by_session), None)
        inside = _handoffs_inside(sessions_in, handoffs_from)
        for _, _, hf_evidence in inside:
            evidence.update(dict.fromkeys(hf_evidence))
        if blocking is not None:
            evidence[blocking["event_id"]] = None
        phase, phase_reason = rules.phase(tails, edited_before, blocking is not None)
        last_r, last_tf = turn_info[ordered_turns[-1]]
        ends = [by_session[s]["ended_at"] for s in sessions_in]
        la_outcome = last_attempt["outcome"] if last_attempt else None
        inputs = {
            "_unknown": all(by_session[s]["coverage"] == "unknown" for s in sessions_in),
            "_completable": last_tf["status"] == "completed" and la_outcome == "succeeded" and in_flight == 0,
            "_la_outcome": la_outcome,
            "_sessions_ended_at": None if any(e is None for e in ends) else max(ends),
            "_in_flight": in_flight,
        }
        status, status_reason, unit_ended = unit_status(inputs, updated_at, at)
        objective_tf = next((turn_info[t][1] for t in tids if turn_info[t][1]["objective_event"]), None)
        objective = None
        if objective_tf is not None:
            objective = turn_by_id[objective_tf["turn_id"]]["objective"]
        for sid in sessions_in:
            if sid in commits_read:
                continue
            commits_read.add(sid)
            for c in live[index_of[sid]].commits:
                if c["sha"] and c["attempt_id"]:
                    commits_by_attempt.setdefault(c["attempt_id"], []).append(c["sha"])
        shas: list[str] = []
        for att in attempts_in:
            for sha in commits_by_attempt.get(att, []):
                if sha not in shas:
                    shas.append(sha)
        actors: list[str] = []
        for sid in sessions_in:
            prov = by_session[sid]["provider"]
            if prov not in actors:
                actors.append(prov)
        units.append({
            "work_unit_id": unit_id, "version": 1, "project_id": project_id,
            "project_name": first_r.session["project_name"],
            "objective_event_id": objective_tf["objective_event"] if objective_tf else None,
            "objective": objective, "phase": phase, "phase_reason": phase_reason, "status": status,
            "status_reason": status_reason, "started_at": first_tf["started_at"], "updated_at": updated_at,
            "ended_at": unit_ended,
            "sessions": sessions_in, "session_count": len(sessions_in), "turns": tids, "turn_count": len(tids),
            "attempts": attempts_in, "attempt_count": len(attempts_in), "failed_attempt_count": failure_count,
            "paths": paths, "commit_shas": shas, "actors": actors,
            "last_attempt": last_attempt["attempt_id"] if last_attempt else None,
            "blocking_signal": blocking["event_id"] if blocking else None,
            "evidence": list(evidence) or [first_tf["opening_event"]],
            "confidence": min(confidences + [0.7]), "algorithm_version": ALGORITHM_VERSION,
        } | inputs)
        for t in tids:
            unit_edges.append(edge("parent_of", "work_unit", unit_id, "turn", t, [turn_info[t][1]["opening_event"]],
                                   0.7) | {"project_id": project_id})
        if memo is not None:
            remembered.setdefault(project_id, {})[frozenset(tids)] = (
                tuple(live[index_of[sid]] for sid in sessions_in), inside, units[-1], unit_edges[first_edge:])
    if memo is not None:
        # every unit of the projects joined now, and only those
        for project_id in by_project:
            memo.units[project_id] = remembered.get(project_id, {})
    units.sort(key=lambda u: (u["started_at"], u["work_unit_id"]))
    return units, unit_edges


def _handoffs_inside(sessions_in: list[str], handoffs_from: dict[str, list[dict[str, Any]]]) -> list[tuple[int, int, list[str]]]:
    """The handoffs between a unit's sessions, in the order of its sessions."""
    if len(sessions_in) < 2:
        return []
    position = {sid: i for i, sid in enumerate(sessions_in)}
    return sorted((position[a_s], position[hf["to_session"]], hf["evidence"])
                  for a_s in sessions_in for hf in handoffs_from.get(a_s, ()) if hf["to_session"] in position)


def _unit_unchanged(hit: tuple[Any, ...], live: list[SessionResult], index_of: dict[str, int],
                    handoffs_from: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether a remembered unit with the same turns is still what it was: every
    one of its sessions the same result, the same handoffs between them (nothing
    else a unit's row reads comes from outside its sessions)."""
    results, inside, row, _ = hit
    for sid, was in zip(row["sessions"], results):
        i = index_of.get(sid)
        if i is None or live[i] is not was:
            return False
    return bool(inside == _handoffs_inside(row["sessions"], handoffs_from))


def _decisions(live: list[SessionResult], attempt_by_id: dict[str, dict[str, Any]],
               retracted_attempts: set[str], memo: Memo | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in live:
        if memo is None:
            out.extend(_session_decisions(r, attempt_by_id, retracted_attempts))
            continue
        # a session's decisions read its own attempts, and the work units they are in
        units = tuple([attempt_by_id[a["attempt_id"]]["work_unit_id"] for a in r.attempts])
        sid = r.session["session_id"]
        hit = memo.decisions.get(sid)
        if hit is None or hit[0] is not r or hit[1] != units:
            hit = memo.decisions[sid] = (r, units, _session_decisions(r, attempt_by_id, retracted_attempts))
        out.extend(hit[2])
    out.sort(key=lambda d: (d["decided_at"], d["decision_id"]))
    return out


def _session_decisions(r: SessionResult, attempt_by_id: dict[str, dict[str, Any]],
                       retracted_attempts: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for dec in r.facts["approach_changes"]:
        alt, sel = dec["alternatives"][0], dec["selected"]
        if sel in retracted_attempts or alt in retracted_attempts \
                or attempt_by_id[alt]["superseded_by"] != sel:
            continue
        out.append(dec | {"work_unit_id": attempt_by_id[sel]["work_unit_id"]})
    for d in r.facts["denials"]:
        if not d["next_event"] or not d["next_tool"] or d["next_tool"] == d["tool"]:
            continue
        sel = d["next_attempt"]
        if sel is None or sel in retracted_attempts:
            continue
        b = attempt_by_id[sel]
        alts = [d["attempt"]] if d["attempt"] and d["attempt"] != sel else []
        conf = min([b["confidence"]] + [attempt_by_id[x]["confidence"] for x in alts] + [0.7])
        out.append({
            "decision_id": derive("decision", "human_intervention", d["event_id"], d["next_event"]),
            "kind": "human_intervention", "work_unit_id": b["work_unit_id"], "session_id": b["session_id"],
            "provider": b["provider"], "project_id": b["project_id"], "project_name": b["project_name"],
            "turn_id": b["turn_id"], "selected": sel, "alternatives": alts,
            "rationale": f"permission denied for {d['tool'] or 'a tool'}; continued with {d['next_tool']}"
                         f" ({d['next_category'] or 'other'})",
            "rationale_source": "derived", "decided_at": d["at"], "evidence": [d["event_id"], d["next_event"]],
            "confidence": conf, "algorithm_version": ALGORITHM_VERSION,
        })
    return out


def _conflicts(units: list[dict[str, Any]], live: list[SessionResult]) -> list[dict[str, Any]]:
    by_id = {r.session["session_id"]: r for r in live}
    open_units = [u for u in units if u["status"] == "open"]
    by_project: dict[str, list[dict[str, Any]]] = {}
    for u in open_units:
        by_project.setdefault(u["project_id"], []).append(u)
    # A unit's edits per path, merged over its sessions — only for the paths another
    # open unit of its project edits too (most units share none: no merge at all).
    paths_of: dict[str, set[str]] = {}
    for group in by_project.values():
        if len(group) > 1:
            for u in group:
                paths_of[u["work_unit_id"]] = set().union(*(by_id[s].facts["edits"] for s in u["sessions"]))
    edits_of: dict[str, dict[str, list[Any]]] = {}

    def merged_edits(u: dict[str, Any], paths: list[str]) -> dict[str, list[Any]]:
        cache = edits_of.setdefault(u["work_unit_id"], {})
        for p in paths:
            if p in cache:
                continue
            m: list[Any] | None = None
            for s in u["sessions"]:
                e = by_id[s].facts["edits"].get(p)
                if e is None:
                    continue
                if m is None:
                    m = [e[0], e[1], e[2], e[3], list(e[4]), e[5]]  # [first, last, +, -, evidence, committed]
                else:
                    if e[0] < m[0]:
                        m[0] = e[0]
                    if e[1] > m[1]:
                        m[1] = e[1]
                    m[2] += e[2]
                    m[3] += e[3]
                    m[4] = (m[4] + e[4])[:3]
                    m[5] = m[5] and e[5]
            assert m is not None  # p is among this unit's edited paths
            cache[p] = m
        return cache

    out: list[dict[str, Any]] = []
    for group in by_project.values():
        for i, u in enumerate(group):
            for v in group[i + 1:]:
                if set(u["sessions"]) & set(v["sessions"]):
                    continue
                shared = sorted(paths_of[u["work_unit_id"]] & paths_of[v["work_unit_id"]])
                if not shared:
                    continue
                eu, ev = merged_edits(u, shared), merged_edits(v, shared)
                hits = []
                for p in shared:
                    a, b = eu[p], ev[p]
                    overlap = a[0] <= b[1] and b[0] <= a[1]
                    near = overlap or min(abs(a[0] - b[1]), abs(b[0] - a[1])) <= CONFLICT_WINDOW
                    if near:
                        hits.append((p, a, b, overlap))
                if not hits:
                    continue
                first, second = sorted((u, v), key=lambda x: (x["started_at"], x["work_unit_id"]))
                ef, es = edits_of[first["work_unit_id"]], edits_of[second["work_unit_id"]]
                overlapping = any(h[3] for h in hits)
                fc = all(ef[h[0]][5] for h in hits)
                sc = all(es[h[0]][5] for h in hits)
                evidence: list[str] = []
                for p, _, _, _ in hits:
                    evidence += ef[p][4] + es[p][4]
                out.append({
                    "conflict_id": derive("conflict", first["work_unit_id"], second["work_unit_id"]),
                    "project_id": first["project_id"], "project_name": first["project_name"],
                    "first_work_unit": first["work_unit_id"], "second_work_unit": second["work_unit_id"],
                    "first_started_at": first["started_at"], "second_started_at": second["started_at"],
                    "started_at": max(first["started_at"], second["started_at"]),
                    "updated_at": max(first["updated_at"], second["updated_at"]),
                    "paths": [h[0] for h in hits], "path_count": len(hits), "overlapping": overlapping,
                    "first_committed": fc, "second_committed": sc,
                    "first_lines_added": sum(ef[h[0]][2] for h in hits),
                    "first_lines_removed": sum(ef[h[0]][3] for h in hits),
                    "second_lines_added": sum(es[h[0]][2] for h in hits),
                    "second_lines_removed": sum(es[h[0]][3] for h in hits),
                    "evidence": list(dict.fromkeys(evidence)),
                    "confidence": 0.7 if overlapping and not fc and not sc else 0.5,
                    "algorithm_version": ALGORITHM_VERSION,
                })
    out.sort(key=lambda c: (c["started_at"], c["conflict_id"]))
    return out
