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

Activity is read from the projection (``events``); commands are matched exactly, paths by
their end (``src/x.py`` matches ``/home/me/proj/src/x.py``); events of every project count
(memories name no project). A finding is ``contradicted`` (weight 0.5, :mod:`.truth`), or
``kept`` when a person rejected the proposal the rule opened for it, or ``confirmed``.
"""

from __future__ import annotations

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
_DONE: Final = "('tool_call_finished', 'tool_call_failed')"


@dataclass
class Activity:
    """The projection, asked through an engine opened on first use (None when there is none:
    ``failed`` says why), and the repository (a :class:`.drift.Repo` or None), for the rules."""

    root: str
    repo: Any
    _engine: Any = None
    failed: str | None = None

    def engine(self) -> Any:
        if self._engine is None and self.failed is None:
            from agentlog.core import AgentlogError
            from agentlog.query.engine import Engine

            try:
                self._engine = Engine(self.root)
            except AgentlogError as e:
                self.failed = str(e)
        return self._engine

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


def _proposal_status(con: sqlite3.Connection, rule: str, mid: str) -> str | None:
    """The status of the proposal a rule opened for a memory (None: none)."""
    row = con.execute("SELECT status FROM proposals WHERE instr(coalesce(note, ''), ?) > 0 ORDER BY created_at DESC "
                      "LIMIT 1", (_key(rule, mid),)).fetchone()
    return str(row[0]) if row else None


_SINCE: Final = ("provider != 'agentlog' AND observed_at >= to_timestamp(?::DOUBLE / 1e6 - 1) "
                  "AND epoch_us(observed_at) > ?")
"""After the memory's anchor: exactly (``epoch_us``), and on the column itself, a second
earlier, so that DuckDB skips the Parquet row groups before it by their statistics."""


def _pitfall(m: Memory, act: Activity, since: int) -> dict[str, Any] | None:
    paths = [p for p in m.attributes.get("paths") or [] if p.strip()]
    if not paths:
        return None
    match = " OR ".join("len(list_filter(paths, lambda x: x = ? OR ends_with(x, ?))) > 0" for _ in paths)
    args: list[Any] = [a for p in paths for a in (p, "/" + p.lstrip("/"))]
    fc = m.attributes.get("failure_class")
    failed = "st IS NOT NULL AND st != 'success'" + (" AND cls = ?" if fc else "")
    fc_args = [fc] if fc else []
    # counted and picked by the engine (a long history has more matching edits than a result's rows)
    rows = act.rows(f"WITH e AS (SELECT event_id, outcome_status AS st, outcome_class AS cls, observed_at AS ts "
                    f"FROM events WHERE kind IN {_DONE} AND tool_category IN ('file_edit', 'file_write') AND {_SINCE} "
                    f"AND ({match})) SELECT (SELECT count(*) FROM e WHERE st = 'success'), "
                    "(SELECT list(event_id ORDER BY ts, event_id) FROM (SELECT * FROM e WHERE st = 'success' "
                    f"ORDER BY ts DESC, event_id DESC LIMIT {_EVIDENCE_MAX})), "
                    f"(SELECT list(event_id ORDER BY ts, event_id) FROM (SELECT * FROM e WHERE {failed} "
                    f"ORDER BY ts, event_id LIMIT {CONFIRM_MAX + 1})), (SELECT count(*) FROM e WHERE {failed})",
                    [since, since, *args, *fc_args, *fc_args])
    n_ok, last_ok, first_failed, n_failed = rows[0] if rows else (0, [], [], 0)
    if n_failed:
        return confirmation("pitfall_recurred", list(first_failed or []),
                            f"edits of {', '.join(paths)} failed" + (f" with {fc}" if fc else ""))
    if n_ok < PITFALL_SUCCESSES:
        return None
    return {"rule": "pitfall_succeeded", "evidence": [f"event:{e}" for e in last_ok or []],
            "detail": f"edits of {', '.join(paths)} succeeded {n_ok} times since, none failed"
                      + (f" with {fc}" if fc else "")}


def _procedure(m: Memory, act: Activity, since: int) -> dict[str, Any] | None:
    cmd = m.attributes.get("command")
    commands = [cmd.strip()] if isinstance(cmd, str) and cmd.strip() else [s.strip() for s in m.attributes.get("steps")
                                                                          or [] if s.strip()]
    confirmed: dict[str, Any] | None = None  # (a contradiction of any step comes first)
    for command in commands:
        # the first successes (a confirmation's evidence), then the latest run that succeeded
        # (or says nothing) and every run after it — not the whole history
        rows = act.rows(f"WITH r AS (SELECT event_id, outcome_status AS st, observed_at AS ts FROM events "
                        f"WHERE kind IN {_DONE} AND tool_category = 'shell' AND {_SINCE} "
                        "AND trim(json_extract_string(content, '$.command')) = ?), "
                        "last_ok AS (SELECT max(ts) AS ts FROM r WHERE st IS NULL OR st = 'success') "
                        "SELECT 'first' AS part, event_id, st, ts FROM (SELECT * FROM r WHERE st = 'success' "
                        f"ORDER BY ts, event_id LIMIT {CONFIRM_MAX + 1}) UNION ALL SELECT 'tail', event_id, st, ts "
                        "FROM (SELECT * FROM r WHERE (SELECT ts FROM last_ok) IS NULL OR ts >= (SELECT ts FROM last_ok) "
                        "ORDER BY ts DESC, event_id DESC LIMIT 1000) ORDER BY part, ts, event_id", [since, since, command])
        first = [eid for part, eid, _, _ in rows if part == "first"]
        tail: list[str] = []  # the failed runs up to the latest
        latest: str | None = None
        for part, eid, status, _ in rows:
            if part == "tail":
                tail = [*tail, eid] if status not in ("success", None) else []
                latest = status
        if len(tail) >= PROCEDURE_FAILURES:
            return {"rule": "procedure_failed", "evidence": [f"event:{e}" for e in tail[-_EVIDENCE_MAX:]],
                    "detail": f"`{command}` failed its last {len(tail)} runs since"}
        if latest == "success" and first and confirmed is None:
            confirmed = confirmation("procedure_succeeded", first, f"`{command}` succeeded, its latest run too,")
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

    def where(word: str) -> list[str]:
        p = repo.git("grep", "-l", "-w", "-F", "-i", "-e", word.strip(), repo.head, "--")
        return [line.split(":", 1)[1] for line in p.stdout.splitlines()] if p.returncode == 0 else []

    if where(chosen):
        return None
    for alt in alts:
        files = where(alt)
        if files:
            return {"rule": "decision_replaced", "repo": repo.top,
                    "evidence": [f"file:{f}@{repo.head[:12]}" for f in files[:_EVIDENCE_MAX]],
                    "detail": f"the repository names {alt.strip()} ({', '.join(files[:3])}) and nowhere "
                              f"{chosen.strip()} (HEAD {repo.head[:12]})"}
    return None


def contradictions(root: str, con: sqlite3.Connection, m: Memory, act: Activity) -> list[dict[str, Any]]:
    """The rules' findings on ``m``: each ``{"rule", "status", "detail", "evidence"}`` (and
    ``weight``, a confirmation's)."""
    since = m.last_confirmed_at or m.created_at
    found = None
    if m.kind == "pitfall":
        found = _pitfall(m, act, since)
    elif m.kind == "procedure":
        found = _procedure(m, act, since)
    elif m.kind == "decision":
        found = _decision(m, act)
    if found is None:
        return []
    return [restate(con, m.id, found)]


def restate(con: sqlite3.Connection, mid: str, found: dict[str, Any]) -> dict[str, Any]:
    """``found`` with its status now: ``confirmed`` stays; a contradiction is ``kept`` when a
    person rejected its proposal, else ``contradicted``."""
    if found.get("status") == "confirmed":
        return found
    kept = _proposal_status(con, found["rule"], mid) == "rejected"
    return {**found, "status": "kept" if kept else "contradicted"}


def open_proposals(root: str, con: sqlite3.Connection, m: Memory) -> list[str]:
    """One proposal (to archive ``m``, with the evidence) per rule finding of its last check
    that has none yet; their ids. A second run opens none."""
    from agentlog.memory import proposals

    checked = last(con, m.id)
    out: list[str] = []
    for r in (checked or {}).get("results", []):
        if r.get("on") != "outcome" or r.get("status") != "contradicted":
            continue
        if _proposal_status(con, r["rule"], m.id) is not None:
            continue
        note = (f"{r['detail']}.\nevidence: {', '.join(r.get('evidence') or [])}\n"
                f"Approve to archive it; reject to keep it. {_key(r['rule'], m.id)}")
        p = proposals.open_proposal(root, [{"op": "archive", "memory": m.id}],
                                    title=f"Archive {m.slug}? ({r['rule'].replace('_', ' ')})", note=note,
                                    actor="agent")
        out.append(p.id)
    return out
