"""Outcome contradiction: rules (no language model) that find recorded activity, or the
repository, contradicting a memory since it was last confirmed (else created).

- ``pitfall_succeeded``: a pitfall names ``paths``; edits or writes of those paths
  succeeded at least :data:`PITFALL_SUCCESSES` times since, and none failed (with the
  pitfall's ``failure_class`` when it names one). False-positive risk: medium — the
  successful edits may have followed the pitfall's advice (``avoid``), which is what made
  them succeed; a person reviewing the proposal keeps it (rejects the proposal).
- ``procedure_failed``: a procedure names a ``command`` (else its steps are taken as
  commands); that exact command ran at least :data:`PROCEDURE_FAILURES` times since and
  failed each of those times up to its latest run. False-positive risk: low to medium —
  a failing test suite fails ``make test`` without the procedure being wrong; requiring
  the latest run to have failed too keeps a passing command from being reported.
- ``decision_replaced``: a decision's ``chosen`` is one word (``uv``) and one of its
  ``alternatives`` is one word (``poetry``); at ``HEAD`` the repository names the
  alternative (``git grep -w``) and nowhere the chosen one. False-positive risk: medium
  for common words (``make``), low for tool names; a chosen tool that the repository never
  names (configured elsewhere) is reported as soon as an alternative appears, e.g. in docs.

Confirmations (the same rules, the other way): new activity that agrees with a memory
raises its truth factor by :data:`CONFIRM_STEP` per matching event, at most
:data:`CONFIRM_MAX` of them (×1.20 at most); a confirmation never hides a lowering finding
(a memory is doubtful when any finding weighs under 1) and opens no proposal.

- ``procedure_succeeded``: the procedure's command (else a step) ran and succeeded since,
  and its latest run succeeded. False-positive risk: low — the command working says the
  procedure works, not that it is the only or the best way; the same command in another
  project counts too.
- ``pitfall_recurred``: an edit or write of a pitfall's ``paths`` failed since (with its
  ``failure_class`` when it names one), and the pitfall is not contradicted. False-positive
  risk: medium without a ``failure_class`` (an edit of that path can fail for another
  reason), low with one. Successful edits do not confirm a pitfall: they may follow its
  advice or show it is gone, which is the contradiction rule's question.

The pitfall and procedure rules read their counts of the activity (:mod:`.rule_state`:
computed from the projection's ``events`` for many memories at once, or folded from the
frames an incremental check read); commands are matched with blanks collapsed (the capture's
``command_key``, kept in the store's ``attrs``: no event's content is read), paths by their end
(``src/x.py`` matches ``/home/me/proj/src/x.py``); events of every project count
(memories name no project). A finding is ``contradicted`` (weight 0.5, :mod:`.truth`), or
``kept`` when a person rejected the proposal the rule opened for it, or ``confirmed``.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any, Final

from agentlog.memory.rows import Memory, last

PITFALL_SUCCESSES: Final = 5
PROCEDURE_FAILURES: Final = 2
CONFIRM_STEP: Final = 0.05
"""What each confirming event adds to a memory's truth factor."""
CONFIRM_MAX: Final = 4
"""The confirming events that count (the factor is at most ``1 + CONFIRM_STEP · CONFIRM_MAX``)."""
_EVIDENCE_MAX: Final = 5


@dataclass
class Activity:
    """The projection, asked through an engine opened on first use (None when there is none:
    ``failed`` says why), and the repository (a :class:`.drift.Repo` or None), for the rules."""

    root: str
    repo: Any
    _engine: Any = None
    failed: str | None = None
    statuses: dict[tuple[str, str], str] | None = None
    """The rules' proposals' statuses (:func:`rule_statuses`), when read for the run."""

    def engine(self) -> Any:
        if self._engine is None and self.failed is None:
            from agentlog.core import AgentlogError
            from agentlog.query.engine import Engine

            try:
                self._engine = Engine(self.root)
            except AgentlogError as e:
                self.failed = str(e)
        return self._engine

    @property
    def opened(self) -> bool:
        """Whether the store was asked (an engine opened, or tried)."""
        return self._engine is not None or self.failed is not None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        engine = self.engine()
        if engine is None:
            return []
        return [tuple(r) for r in engine.run(sql, params).rows]


def _key(rule: str, mid: str) -> str:
    return f"[rule {rule} on {mid}]"


_RULE_KEY: Final = re.compile(r"\[rule (\w+) on ([0-9a-f-]{36})\]")


def rule_statuses(con: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """Per (rule, memory id): the status of the latest proposal that rule opened for it (one
    read of the proposals, for a whole run)."""
    out: dict[tuple[str, str], str] = {}
    for note, status in con.execute("SELECT note, status FROM proposals WHERE instr(coalesce(note, ''), '[rule ') > 0 "
                                    "ORDER BY created_at, id"):
        for rule, mid in _RULE_KEY.findall(note or ""):
            out[(rule, mid)] = str(status)
    return out


def _proposal_status(con: sqlite3.Connection, rule: str, mid: str,
                     statuses: dict[tuple[str, str], str] | None = None) -> str | None:
    """The status of the proposal a rule opened for a memory (None: none); ``statuses``: as
    :func:`rule_statuses` gives them, read already."""
    if statuses is not None:
        return statuses.get((rule, mid))
    row = con.execute("SELECT status FROM proposals WHERE instr(coalesce(note, ''), ?) > 0 ORDER BY created_at DESC "
                      "LIMIT 1", (_key(rule, mid),)).fetchone()
    return str(row[0]) if row else None


def _pitfall(m: Memory, state: dict[str, Any]) -> dict[str, Any] | None:
    """The pitfall rule on ``m``'s counts (:mod:`.rule_state`)."""
    from agentlog.memory.rule_state import pitfall_paths

    paths = pitfall_paths(m)
    fc = m.attributes.get("failure_class")
    if state["bad"]:
        return confirmation("pitfall_recurred", list(state["bad_first"]),
                            f"edits of {', '.join(paths)} failed" + (f" with {fc}" if fc else ""))
    if state["ok"] < PITFALL_SUCCESSES:
        return None
    return {"rule": "pitfall_succeeded", "evidence": [f"event:{e}" for e in state["ok_last"][-_EVIDENCE_MAX:]],
            "detail": f"edits of {', '.join(paths)} succeeded {state['ok']} times since, none failed"
                      + (f" with {fc}" if fc else "")}


def _procedure(m: Memory, state: dict[str, Any]) -> dict[str, Any] | None:
    """The procedure rule on ``m``'s counts per command (:mod:`.rule_state`): a contradiction of
    any step comes first."""
    from agentlog.memory.rule_state import procedure_commands

    confirmed: dict[str, Any] | None = None
    for command in procedure_commands(m):
        s = state["commands"].get(command)
        if s is None:
            continue
        if s["tail"] >= PROCEDURE_FAILURES:
            return {"rule": "procedure_failed", "evidence": [f"event:{e}" for e in s["tail_ids"][-_EVIDENCE_MAX:]],
                    "detail": f"`{command}` failed its last {s['tail']} runs since"}
        if s["latest"] == "success" and s["first"] and confirmed is None:
            confirmed = confirmation("procedure_succeeded", list(s["first"]),
                                     f"`{command}` succeeded, its latest run too,")
    return confirmed


def confirmation(rule: str, events: list[str], what: str) -> dict[str, Any]:
    """A ``confirmed`` finding: its weight from the first :data:`CONFIRM_MAX` confirming events
    (the evidence: those, so the finding stays the same once there are that many)."""
    k = min(len(events), CONFIRM_MAX)
    times = f"{k} time{'s' if k != 1 else ''}" if len(events) <= k else f"more than {k} times"
    return {"rule": rule, "status": "confirmed", "weight": round(1.0 + CONFIRM_STEP * k, 6),
            "evidence": [f"event:{e}" for e in events[:k]], "detail": f"{what} {times} since"}


def _one_word(text: Any) -> bool:
    return isinstance(text, str) and 0 < len(text.strip()) <= 40 and len(text.split()) == 1


def _decision(m: Memory, act: Activity) -> dict[str, Any] | None:
    chosen = str(m.attributes.get("chosen") or "")
    repo = act.repo
    if repo is None or not _one_word(chosen):
        return None
    alts = [a for a in m.attributes.get("alternatives") or [] if _one_word(a) and a.strip() != chosen.strip()]
    if not alts:
        return None

    if repo.naming(chosen):
        return None
    for alt in alts:
        files = repo.naming(alt)
        if files:
            return {"rule": "decision_replaced", "repo": repo.top,
                    "evidence": [f"file:{f}@{repo.head[:12]}" for f in files[:_EVIDENCE_MAX]],
                    "detail": f"the repository names {alt.strip()} ({', '.join(files[:3])}) and nowhere "
                              f"{chosen.strip()} (HEAD {repo.head[:12]})"}
    return None


def contradictions(root: str, con: sqlite3.Connection, m: Memory, act: Activity,
                   state: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rules' findings on ``m``: each ``{"rule", "status", "detail", "evidence"}`` (and
    ``weight``, a confirmation's). ``state``: a pitfall's or procedure's counts
    (:mod:`.rule_state`; computed from the store when not given)."""
    from agentlog.memory import rule_state

    found = None
    if m.kind in ("pitfall", "procedure") and rule_state.key_of(m) is not None:
        if state is None:
            engine = act.engine()
            if engine is None:
                return []
            state = rule_state.compute(engine, [m])[m.id]
        found = _pitfall(m, state) if m.kind == "pitfall" else _procedure(m, state)
    elif m.kind == "decision":
        found = _decision(m, act)
    if found is None:
        return []
    return [restate(con, m.id, found, act.statuses)]


def restate(con: sqlite3.Connection, mid: str, found: dict[str, Any],
            statuses: dict[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """``found`` with its status now: ``confirmed`` stays; a contradiction is ``kept`` when a
    person rejected its proposal, else ``contradicted``."""
    if found.get("status") == "confirmed":
        return found
    kept = _proposal_status(con, found["rule"], mid, statuses) == "rejected"
    return {**found, "status": "kept" if kept else "contradicted"}


def open_proposals(root: str, con: sqlite3.Connection, ms: list[Memory],
                   statuses: dict[tuple[str, str], str] | None = None) -> list[str]:
    """One proposal (to archive the memory, with the evidence) per rule finding of the last
    check of each of ``ms`` that has none yet, all opened in one write; their ids. A second run
    opens none. A memory that cannot be archived now (archived or gone meanwhile) is left out."""
    from agentlog.core.ids import uuid7
    from agentlog.memory import proposals
    from agentlog.memory.model import validate_title
    from agentlog.memory.store import new_event, transact

    known = statuses if statuses is not None else rule_statuses(con)
    wanted: list[tuple[str, Memory, dict[str, Any]]] = []
    for m in ms:
        for r in (last(con, m.id) or {}).get("results", []):
            if r.get("on") == "outcome" and r.get("status") == "contradicted" and (r["rule"], m.id) not in known:
                wanted.append((uuid7(), m, r))
    opened: list[str] = []

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        events = []
        for pid, m, r in wanted:
            # (checked as proposals.open_proposal checks a change; no evidence to look up)
            checked, per, errors = proposals._all_checked(con, [{"op": "archive", "memory": m.id}])
            if errors:
                continue
            note = (f"{r['detail']}.\nevidence: {', '.join(r.get('evidence') or [])}\n"
                    f"Approve to archive it; reject to keep it. {_key(r['rule'], m.id)}")
            body = {"title": validate_title(f"Archive {m.slug}? ({r['rule'].replace('_', ' ')})"),
                    "note": note, "changes": checked, "bases": {mid: v for b in per for mid, v in b.items()}}
            events.append(new_event("proposal_opened", "", 0, "agent", body, proposal_id=pid))
            opened.append(pid)
            known[(r["rule"], m.id)] = "open"
        return events, {}

    if wanted:
        transact(root, decide)
    return opened
