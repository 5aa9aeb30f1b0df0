"""Memory that stays true: each memory checked against its evidence and against later outcomes.

A check looks at every evidence reference of a memory (file evidence through git,
:mod:`.drift`; recorded evidence — events, attempts, sessions, tool calls — in the projection;
a URL is never fetched) and runs the outcome rules of :mod:`.outcomes`. Each finding has a
status and a documented weight; the memory's *truth factor* is the product of the weights,
and its effective confidence is its decayed confidence times that factor (at most 1). A
memory is *doubtful* when some finding lowered it (a weight under 1); confirmations from new
successful activity (:mod:`.outcomes`) weigh over 1 and raise it, but never hide a doubt.

Without ``--all`` a run checks only what happened since the last run can touch
(:mod:`.touched`: its watermark, the events read since, the repositories' ``HEAD``).

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
    # rejected the rule's proposal, so the memory stands; ("confirmed": 1 + 0.05 per confirming
    # event, at most 4 of them: the finding carries its weight, outcomes.confirmation)
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
    pending: list[str] = field(default_factory=list)
    """Selected but not checked: the time budget ran out (the next run checks them first)."""
    events_read: int = 0
    """Recorded events read since the last run's watermark (an incremental run)."""
    store_read: bool = False
    """Whether the store was asked (a query engine opened): an incremental run whose memories'
    rule counts were kept, and whose recorded evidence nothing touched, reads only the new frames."""
    ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def factor_of(results: list[dict[str, Any]]) -> float:
    f = 1.0
    for r in results:
        f *= float(r["weight"]) if "weight" in r else WEIGHTS.get(str(r.get("status")), 1.0)
    return round(f, 6)


def _evidence_rows(con: sqlite3.Connection, mid: str) -> list[tuple[int, dict[str, Any], int]]:
    return [(int(s), loads_column(r), int(at)) for s, r, at in con.execute(
        "SELECT seq, ref, added_at FROM evidence WHERE memory_id = ? ORDER BY seq", (mid,))]


def _still_kept(was: dict[str, Any] | None, now: dict[str, Any]) -> bool:
    """Whether ``now`` (a lowering evidence finding) is what a person kept (:mod:`.keep`): the
    same status and detail as when kept (a file's detail names the commits that touched it
    since: another commit is a change again)."""
    if was is None or was.get("status") != "kept" or was.get("value") != now.get("value"):
        return False
    kept = was.get("kept") or {}
    return bool(kept.get("status") == now.get("status") and kept.get("detail") == now.get("detail"))


def findings(root: str, con: sqlite3.Connection, m: Memory, repo: Any, activity: Any,
             before: dict[str, Any] | None = None, *, rows: list[tuple[int, dict[str, Any], int]] | None = None,
             recorded: dict[tuple[str, int], dict[str, Any]] | None = None,
             state: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The findings of one memory (each ``{"on", "status", "detail", "weight"}`` and what it is
    about) and its moved citations (``{"seq", "ref"}``). ``repo``: a :class:`.drift.Repo` or
    None (no git repository: file evidence is unverifiable); ``activity``: the outcome rules'
    view of the projection (:class:`.outcomes.Activity`) or None; ``before``: its last check;
    ``rows``, ``recorded``, ``state``: its evidence, the status of its recorded evidence and its
    rule's counts when read already for many memories (:mod:`.prefetch`).

    What one repository cannot see, another may have: a citation whose commit this repository
    lacks (or no repository at all) keeps the finding of the last check that could verify it,
    and a decision's finding made in another repository (or with none) stands — so a check run
    from another project, or by the daemon for another project, neither clears nor flips them.
    A lowering finding a person kept (:mod:`.keep`) stays kept while it is the same."""
    from agentlog.memory import drift, outcomes
    from agentlog.memory.recorded import statuses

    results: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    old = before["results"] if before else []
    old_evidence = {r.get("seq"): r for r in old if r.get("on") == "evidence"}
    if rows is None:
        rows = _evidence_rows(con, m.id)
    if recorded is None:
        recorded = statuses(root, [(m.id, s, r) for s, r, _ in rows if r["type"] in RECORDED_EVIDENCE], activity)
    for seq, ref, added_at in rows:
        on = {"on": "evidence", "seq": seq, "type": ref["type"], "value": ref["value"]}
        was = old_evidence.get(seq)
        if ref["type"] == "file":
            if repo is None:
                d = drift.Drift("unverifiable", "no git repository to check it against")
            else:
                d = drift.file_drift(repo, ref)
            if d.status == "unverifiable" and was is not None and was.get("value") == ref["value"] \
                    and was.get("status") != "unverifiable":
                results.append(dict(was))
                continue
            if d.moved_to is not None:
                moves.append({"seq": seq, "ref": d.moved_to})
            found = {**on, "status": d.status, "detail": d.detail}
        elif ref["type"] in RECORDED_EVIDENCE:
            found = {**on, **recorded[(m.id, seq)]}
        elif ref["type"] in ("url", "uri"):
            found = {**on, "status": "not_fetched", "detail": "a URL is never fetched: only its age is shown",
                     "added_at": added_at}
        else:
            continue
        kept = was is not None and WEIGHTS.get(found["status"], 1.0) < 1.0 and _still_kept(was, found)
        results.append(dict(was) if was is not None and kept else found)
    old_rules = [r for r in old if r.get("on") == "outcome"]
    if m.kind == "decision" and old_rules and (repo is None or any(r.get("repo") not in (None, repo.top)
                                                                   for r in old_rules)):
        results.extend({**outcomes.restate(con, m.id, r, getattr(activity, "statuses", None)), "on": "outcome"}
                       for r in old_rules)
    elif activity is not None:
        for found in outcomes.contradictions(root, con, m, activity, state):
            results.append({"on": "outcome", **found})
    for r in results:
        r["weight"] = r["weight"] if "weight" in r and r.get("status") == "confirmed" else \
            WEIGHTS.get(str(r["status"]), 1.0)
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
    product = out[0]["value"] * out[1]["value"] * checked["factor"]
    if product > 1.0:  # (confirmations: an effective confidence is at most 1)
        out.append({"factor": "cap", "value": round(1.0 / product, 6), "why": "an effective confidence is at most 1"})
    return out


def _live(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT id FROM memories WHERE deleted = 0 AND archived = 0 ORDER BY id")]


@dataclass
class _Selection:
    todo: list[str]
    mark: Any = None
    """The watermark to keep once they are checked (None: a run of given memories keeps the old one)."""
    delta: Any = None
    """What the frames since the old watermark touched (:class:`.touched.Activity`; None: the
    rules' counts are computed again from the store, for every memory)."""
    fresh: set[str] = field(default_factory=set)
    """Memories whose rule counts are computed again whatever the delta (changed since the last run)."""


def _select(root: str, con: sqlite3.Connection, everything: bool, repo: Any, report: Report) -> _Selection:
    """The memories an incremental run checks (:mod:`.touched`; every one with ``everything``
    or when there is no usable watermark), and the watermark to keep once they are checked."""
    from agentlog.core import AgentlogError
    from agentlog.memory import touched

    old = touched.load(con)
    try:
        logs = touched.positions(root)
    except (AgentlogError, OSError, ValueError) as e:  # (no store: no activity to read)
        report.skipped.append(f"the store's positions could not be read: {e}")
        logs = dict(old.logs) if old else {}
    now = touched.Watermark(logs=logs, heads=dict(old.heads) if old else {}, purges=touched.purge_size(root),
                            at=_now())
    if repo is not None:
        now.heads[repo.top] = repo.head
    live = _live(con)
    if everything or old is None:
        return _Selection(live, now)
    act = touched.read_since(root, old.logs, now.logs)
    report.events_read = act.events
    if act.unreadable:
        return _Selection(live, now)
    act.recorded = act.recorded or old.purges != now.purges
    changed = touched.by_state(con, old.at)
    chosen = set(old.pending) | changed | touched.by_activity(con, act)
    if repo is not None and old.heads.get(repo.top) != repo.head:
        chosen |= touched.by_head(con, repo, old.heads.get(repo.top))
    return _Selection([mid for mid in live if mid in chosen], now, None if act.overflow else act, changed)


def _rule_states(con: sqlite3.Connection, sel: _Selection, ms: list[Memory],
                 activity: Any) -> dict[str, dict[str, Any]]:
    """The rules' counts of ``ms`` (:mod:`.rule_state`): the kept ones with the frames read since
    folded in, the others computed from the store (in one statement per kind)."""
    from agentlog.memory import rule_state

    need = [m for m in ms if rule_state.key_of(m) is not None]
    if not need:
        return {}
    kept = rule_state.load(con, [m.id for m in need]) if sel.mark is not None and sel.delta is not None else {}
    done = sorted(sel.delta.done, key=lambda d: (d[0], d[1])) if sel.delta is not None else []
    out: dict[str, dict[str, Any]] = {}
    fresh = []
    for m in need:
        st = kept.get(m.id)
        if st is not None and st.get("key") == rule_state.key_of(m) and m.id not in sel.fresh:
            out[m.id] = rule_state.fold(m, st, done)
        else:
            fresh.append(m)
    engine = activity.engine() if fresh else None
    if engine is not None:
        out.update(rule_state.compute(engine, fresh, sel.mark.logs if sel.mark is not None else None))
    return out


def check(root: str, *, repo_dir: str | None = None, ids: list[str] | None = None, everything: bool = False,
          propose: bool = True, use_repo: bool = True, catch_up: bool = True,
          budget_s: float | None = None) -> Report:
    """Check memories against their evidence and the outcome rules; write a ``memory_checked``
    event for each whose findings changed, and open one proposal per new contradiction
    (:mod:`.outcomes`). ``ids``: those (the watermark stays); else every memory
    (``everything``) or those what happened since the last run touched (:mod:`.touched`).
    ``repo_dir``: the repository file evidence is checked against (default: the current
    directory's; none with ``use_repo=False``); ``catch_up``: bring the store and the
    projection up to date first (the daemon has just done so); ``budget_s``: stop checking
    after that long, the rest kept for the next run (``Report.pending``).

    What the memories need is read for all of them first (:mod:`.prefetch`): their rows,
    evidence and last checks, their recorded evidence's status and their rules' counts, in a
    few statements whatever their number."""
    import os

    from agentlog.core import AgentlogError
    from agentlog.memory import drift, outcomes, prefetch, rule_state, service, touched
    from agentlog.memory.recorded import statuses
    from agentlog.memory.store import connect, new_event

    started = time.monotonic()
    report = Report()
    repo = None
    if use_repo:
        try:
            repo = drift.open_repo(repo_dir or os.getcwd())
        except drift.GitUnavailable as e:
            report.skipped.append(str(e))
    if catch_up:
        from agentlog.projection.current import bring_up_to_date

        try:
            bring_up_to_date(root)
        except AgentlogError as e:
            report.skipped.append(f"the store could not be brought up to date: {e}")
    activity = outcomes.Activity(root, repo)
    con = connect(root)
    try:
        if ids is not None:
            sel = _Selection([service.get(root, i, con=con).id for i in ids])
        else:
            sel = _select(root, con, everything, repo, report)
        todo = sel.todo
        activity.statuses = outcomes.rule_statuses(con)
        batch = prefetch.read(con, todo, _now())
        ms = [batch.memories[mid] for mid in todo if mid in batch.memories]
        batch.recorded = statuses(root, prefetch.recorded_refs(batch), activity)
        batch.states = _rule_states(con, sel, ms, activity)
        if repo is not None:  # the cited files at their commits, and their diffs since, read in few git processes
            cited = [(c, drift.relative(repo, r["value"])) for rows in batch.evidence.values() for _, r, _ in rows
                     if r["type"] == "file" and r.get("commit") and (c := repo.commit(str(r["commit"])))]
            repo.prefetch(cited)
            for c in sorted({c for c, _ in cited}):
                repo.prefetch_hunks(c, [p for cc, p in cited if cc == c])
        events: list[dict[str, Any]] = []
        contradicted: list[Memory] = []
        done = 0
        for m in ms:
            if budget_s is not None and done and time.monotonic() - started > budget_s:
                break  # (one memory at least: a run whose selection alone outlasts its budget still progresses)
            done += 1
            before = batch.last.get(m.id)
            results, moves = findings(root, con, m, repo, activity, before, rows=batch.evidence.get(m.id, []),
                                      recorded=batch.recorded, state=batch.states.get(m.id))
            report.checked += 1
            factor = factor_of(results)
            doubtful = any(float(r["weight"]) < 1.0 for r in results)
            if doubtful:
                report.doubtful.append(m.id)
            if any(r.get("on") == "outcome" and r.get("status") == "contradicted" for r in results):
                contradicted.append(m)
            same = before is not None and [r for r in before["results"] if r.get("on") != "run"] == results \
                and not moves
            if same:
                continue
            run = {"on": "run", "status": "checked", "head": repo.head if repo else None, "weight": 1.0, "detail": ""}
            body = {"results": [*results, run], "factor": factor, "doubtful": doubtful, "moves": moves}
            events.append(new_event("memory_checked", m.id, m.version, CHECKER, body))
            report.written += 1
            report.moved += len(moves)
            if len(events) >= WRITE_BATCH:
                _write(root, events)
        _write(root, events)
        report.pending = [m.id for m in ms[done:]]
        if propose and contradicted:
            report.proposals += outcomes.open_proposals(root, con, contradicted, activity.statuses)
        if sel.mark is not None:
            sel.mark.pending = report.pending
            con.execute("BEGIN IMMEDIATE")
            try:
                if sel.delta is None:
                    rule_state.drop_all(con)
                rule_state.save(con, batch.states)
                touched.save(con, sel.mark)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
    finally:
        report.store_read = activity.opened
        activity.close()
        con.close()
    report.ms = round((time.monotonic() - started) * 1000, 1)
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
