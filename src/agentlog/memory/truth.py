"""Memory that stays true: each memory checked against its evidence and against later outcomes.

A check looks at every evidence reference of a memory (file evidence through git,
:mod:`.drift`; recorded evidence — events, attempts, sessions, tool calls — in the projection;
a URL is never fetched) and runs the outcome rules of :mod:`.outcomes`. Each finding has a
status and a documented weight; the memory's *truth factor* is the product of the weights,
and its effective confidence is its decayed confidence times that factor. A memory is
*doubtful* when its factor is under 1 (some finding lowered it).

A check whose findings differ from the memory's last is a ``memory_checked`` event in the
memory log (its findings, factor, doubt, and the citations that followed their lines), so a
rebuild of the read model from the log gives the same confidences and flags; a check that
finds what the last one found writes nothing.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.memory import confidence as conf
from agentlog.memory.model import RECORDED_EVIDENCE
from agentlog.memory.rows import Memory, annotate, last, loads_column

#: what each finding multiplies a memory's confidence by (1.0: it does not lower it)
WEIGHTS: Final[dict[str, float]] = {
    # file evidence (git)
    "unchanged": 1.0, "moved": 1.0, "present": 1.0, "unverifiable": 1.0, "changed": 0.5, "deleted": 0.25,
    # recorded evidence (the projection)
    "recorded": 1.0, "corrected": 0.75, "retracted": 0.5, "purged": 0.75,
    # a URL: never fetched, its age only
    "not_fetched": 1.0,
    # an outcome rule (.outcomes): recorded activity contradicts the memory; "kept": a person
    # rejected the rule's proposal, so the memory stands
    "contradicted": 0.5, "kept": 1.0,
}

WRITE_BATCH: Final = 500
"""``memory_checked`` events appended in one write (one lock, one transaction)."""

CHECKER: Final = "agentlog"
"""The actor of a ``memory_checked`` event."""


def _now() -> int:
    return time.time_ns() // 1000


@dataclass
class Report:
    """What a check run did: memories checked, ``memory_checked`` events written, the doubtful
    ones, citations moved, proposals opened (their ids)."""

    checked: int = 0
    written: int = 0
    doubtful: list[str] = field(default_factory=list)
    moved: int = 0
    proposals: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def factor_of(results: list[dict[str, Any]]) -> float:
    f = 1.0
    for r in results:
        f *= WEIGHTS.get(str(r.get("status")), 1.0)
    return round(f, 6)


def _recorded(root: str, refs: list[tuple[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Per evidence seq: ``recorded``, ``corrected``, ``retracted`` or ``purged``, with why."""
    if not refs:
        return {}
    from agentlog.core import AgentlogError
    from agentlog.log.purge_record import purged_events
    from agentlog.memory.service import current_engine
    from agentlog.query.engine import QueryError

    sql = {
        "event": "SELECT (SELECT count(*) FROM retractions WHERE list_contains(retracted_events, e.event_id)) > 0, "
                 "NULL, NULL FROM events e WHERE e.event_id = ?",
        "attempt": "SELECT coalesce(retracted, false), corrected_by, correction_type FROM attempts WHERE attempt_id = ?",
        "session": "SELECT coalesce(retracted, false), NULL, NULL FROM sessions WHERE session_id = ?",
        "tool_call": "SELECT coalesce(retracted, false), NULL, NULL FROM tool_calls WHERE tool_call_id = ?",
    }
    out: dict[int, dict[str, Any]] = {}
    purged = purged_events(root)
    try:
        engine = current_engine(root)
    except AgentlogError as e:  # (no usable projection: nothing can be said of them)
        return {seq: {"status": "unverifiable", "detail": f"the projection could not be read: {e}"} for seq, _ in refs}
    with engine:
        for seq, ref in refs:
            value = str(ref["value"])
            try:
                rows = engine.run(sql[ref["type"]], [value]).rows
            except QueryError as e:
                out[seq] = {"status": "unverifiable", "detail": f"the projection could not be asked: {e}"}
                continue
            if not rows:
                if value in purged:
                    out[seq] = {"status": "purged", "detail": f"its content was purged (purge {purged[value]})"}
                else:
                    out[seq] = {"status": "retracted", "detail": "no longer in the recorded history"}
            elif rows[0][0]:
                out[seq] = {"status": "retracted", "detail": "a person retracted it (agentlog retract)"}
            elif rows[0][1]:
                out[seq] = {"status": "corrected",
                            "detail": f"a person corrected it ({rows[0][2] or 'correction'} {rows[0][1]})"}
            else:
                out[seq] = {"status": "recorded", "detail": "as recorded"}
    return out


def _evidence_rows(con: sqlite3.Connection, mid: str) -> list[tuple[int, dict[str, Any], int]]:
    return [(int(s), loads_column(r), int(at)) for s, r, at in con.execute(
        "SELECT seq, ref, added_at FROM evidence WHERE memory_id = ? ORDER BY seq", (mid,))]


def findings(root: str, con: sqlite3.Connection, m: Memory, repo: Any,
             activity: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The findings of one memory (each ``{"on", "status", "detail", "weight"}`` and what it is
    about) and its moved citations (``{"seq", "ref"}``). ``repo``: a :class:`.drift.Repo` or
    None (no git repository: file evidence is unverifiable); ``activity``: the outcome rules'
    view of the projection (:class:`.outcomes.Activity`) or None."""
    from agentlog.memory import drift, outcomes

    results: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    rows = _evidence_rows(con, m.id)
    recorded = _recorded(root, [(s, r) for s, r, _ in rows if r["type"] in RECORDED_EVIDENCE])
    for seq, ref, added_at in rows:
        on = {"on": "evidence", "seq": seq, "type": ref["type"], "value": ref["value"]}
        if ref["type"] == "file":
            if repo is None:
                d = drift.Drift("unverifiable", "no git repository to check it against")
            else:
                d = drift.file_drift(repo, ref)
            if d.moved_to is not None:
                moves.append({"seq": seq, "ref": d.moved_to})
            results.append({**on, "status": d.status, "detail": d.detail})
        elif ref["type"] in RECORDED_EVIDENCE:
            results.append({**on, **recorded[seq]})
        elif ref["type"] in ("url", "uri"):
            results.append({**on, "status": "not_fetched", "detail": "a URL is never fetched: only its age is shown",
                            "added_at": added_at})
    if activity is not None:
        for found in outcomes.contradictions(root, con, m, activity):
            results.append({"on": "outcome", **found})
    for r in results:
        r["weight"] = WEIGHTS.get(str(r["status"]), 1.0)
    return results, moves


def explain(con: sqlite3.Connection, m: Memory, now_us: int | None = None) -> list[dict[str, Any]]:
    """Why ``m``'s effective confidence is what it is: each factor with its evidence."""
    now = now_us if now_us is not None else _now()
    anchor = m.last_confirmed_at or m.created_at
    half_life, threshold = conf.DECAY[m.kind]
    days = max((now - anchor) / conf.US_PER_DAY, 0.0)
    out: list[dict[str, Any]] = [
        {"factor": "confidence", "value": round(m.confidence, 6),
         "why": f"prior {conf.PRIORS.get(m.author, m.confidence):.2f} for a memory by {m.author}, "
                "moved by its confirmations and contradictions (see its history)"},
        {"factor": "decay", "value": round(2.0 ** (-days / half_life), 6),
         "why": f"{days:.1f} days since it was last confirmed (else created); a {m.kind} halves in "
                f"{half_life:.0f} days and is stale under {threshold:.2f}"},
    ]
    checked = last(con, m.id)
    if checked is None:
        out.append({"factor": "truth", "value": 1.0, "why": "never checked (agentlog memory check)"})
        return out
    for r in checked["results"]:
        if r.get("on") == "run":
            continue
        what = f"{r['type']} {r['value']}" if r["on"] == "evidence" else f"rule {r.get('rule')}"
        extra = ""
        if r["status"] == "not_fetched" and r.get("added_at"):
            extra = f" (cited {max((now - int(r['added_at'])) / conf.US_PER_DAY, 0.0):.0f} days ago)"
        out.append({"factor": f"{r['on']}: {r['status']}", "value": r["weight"], "on": what,
                    "why": f"{r['detail']}{extra}", **({"evidence": r["evidence"]} if r.get("evidence") else {})})
    out.append({"factor": "truth", "value": checked["factor"], "why": "the product of the findings' weights "
                f"(checked {time.strftime('%Y-%m-%d %H:%M', time.gmtime(checked['checked_at'] / 1e6))} UTC)"})
    return out


def _select(con: sqlite3.Connection, ids: list[str] | None, everything: bool, head: str | None,
            activity_mark: int | None) -> list[str]:
    """The memories a run checks: ``ids``; or every memory (``everything``); or those never
    checked, or last checked against another ``HEAD`` or before the last recorded activity."""
    if ids is not None:
        return ids
    rows = con.execute("SELECT m.id, t.results IS NULL, t.results FROM memories m LEFT JOIN truth t ON t.memory_id = m.id "
                       "WHERE m.deleted = 0 AND m.archived = 0 ORDER BY m.id").fetchall()
    if everything:
        return [r[0] for r in rows]
    marks = {mid: loads_column(res) for mid, never, res in rows if not never}
    out = []
    for mid, never, _ in rows:
        if never:
            out.append(mid)
            continue
        meta: dict[str, Any] = next((r for r in marks[mid] if r.get("on") == "run"), {})
        if meta.get("head") != head or (activity_mark is not None and meta.get("activity", -1) < activity_mark):
            out.append(mid)
    return out


def check(root: str, *, repo_dir: str | None = None, ids: list[str] | None = None, everything: bool = False,
          propose: bool = True) -> Report:
    """Check memories (see :func:`_select`) against their evidence and the outcome rules; write
    a ``memory_checked`` event for each whose findings changed, and open one proposal per new
    contradiction (:mod:`.outcomes`)."""
    import os

    from agentlog.memory import drift, outcomes, service
    from agentlog.memory.store import connect, new_event

    report = Report()
    repo = None
    try:
        repo = drift.open_repo(repo_dir or os.getcwd())
    except drift.GitUnavailable as e:
        report.skipped.append(str(e))
    activity = outcomes.Activity.load(root, repo)
    con = connect(root)
    try:
        wanted = [service.get(root, i, con=con).id for i in ids] if ids is not None else None
        events: list[dict[str, Any]] = []
        todo = _select(con, wanted, everything, repo.head if repo else None, activity.mark)
        for mid in todo:
            m = service.get(root, mid, con=con)
            results, moves = findings(root, con, m, repo, activity)
            report.checked += 1
            factor = factor_of(results)
            doubtful = factor < 1.0
            if doubtful:
                report.doubtful.append(m.id)
            before = last(con, m.id)
            same = before is not None and [r for r in before["results"] if r.get("on") != "run"] == results \
                and not moves
            if same:
                continue
            run = {"on": "run", "status": "checked", "head": repo.head if repo else None, "activity": activity.mark,
                   "weight": 1.0, "detail": ""}
            body = {"results": [*results, run], "factor": factor, "doubtful": doubtful, "moves": moves}
            events.append(new_event("memory_checked", m.id, m.version, CHECKER, body))
            report.written += 1
            report.moved += len(moves)
            if len(events) >= WRITE_BATCH:
                _write(root, events)
        _write(root, events)
        if propose:
            for mid in todo:
                m = service.get(root, mid, con=con)
                report.proposals += outcomes.open_proposals(root, con, m)
    finally:
        activity.close()
        con.close()
    return report


def _write(root: str, events: list[dict[str, Any]]) -> None:
    """Append and apply ``events`` (checks: based on no version, so never refused) in one write; empties the list."""
    from agentlog.memory.store import transact

    if events:
        batch = list(events)
        transact(root, lambda _con: (batch, {}))
        events.clear()


def doubtful(root: str, *, limit: int = 100, now_us: int | None = None) -> list[Memory]:
    """The doubtful memories (not archived, not deleted), least true first."""
    from agentlog.memory.rows import COLUMNS, memory_from_row
    from agentlog.memory.store import connect

    con = connect(root)
    try:
        rows = con.execute(f"SELECT {', '.join('m.' + c for c in COLUMNS)} FROM memories m JOIN truth t "
                           "ON t.memory_id = m.id WHERE t.doubtful = 1 AND m.deleted = 0 AND m.archived = 0 "
                           "ORDER BY t.factor, m.id LIMIT ?", (limit,)).fetchall()
        now = now_us if now_us is not None else _now()
        return annotate(con, [memory_from_row(r, now) for r in rows])
    finally:
        con.close()
