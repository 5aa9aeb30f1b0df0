"""A person keeps a doubtful memory: it still holds, whatever its evidence or a rule says.

A memory is doubtful from its evidence alone when the last check (:mod:`.truth`) found a
citation changed, deleted, retracted, corrected or purged, and no rule contradicts it: there
is no proposal to reject. Keeping it writes a ``memory_kept`` event to the memory log naming
each lowering finding kept (its evidence seq, status and detail); the fold
(:func:`.store._apply_keep`) turns those findings into ``kept`` ones (weight 1), so a rebuild
of the read model from the log gives the same confidences and flags. The next check keeps a
kept finding while the evidence is as it was when kept — the same status and detail; for a
file, the detail names the commits that touched it since its cited commit, so another commit
of that file flags the memory again — and flags it again once it changed.

A rule's contradiction is kept as before, by rejecting the proposal the rule opened: keeping a
memory rejects its open rule proposals too (one click on the dashboard for both).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from agentlog.core import AgentlogError
from agentlog.memory.rows import Memory, last

REASON: Final = "kept after review"


class NothingToKeep(AgentlogError, ValueError):
    """The memory is not doubtful: its last check lowered nothing, and no rule proposal is open for it."""


def lowering(checked: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The evidence findings of a last check that lower the memory's confidence."""
    return [r for r in (checked or {}).get("results", [])
            if r.get("on") == "evidence" and float(r.get("weight", 1.0)) < 1.0]


def rule_proposals(con: sqlite3.Connection, mid: str) -> list[str]:
    """The open proposals an outcome rule opened for memory ``mid`` (:func:`.outcomes.open_proposals`)."""
    return [r[0] for r in con.execute("SELECT id FROM proposals WHERE status = 'open' AND instr(coalesce(note, ''), "
                                      "'[rule ') > 0 AND instr(note, ?) > 0 ORDER BY created_at",
                                      (f" on {mid}]",))]


def keep(root: str, ident: str, *, actor: str = "person", reason: str | None = None) -> Memory:
    """Keep memory ``ident`` (id, id prefix or slug): its lowering evidence findings become
    ``kept`` (a ``memory_kept`` event), and its open rule proposals are rejected. Raises
    :class:`NothingToKeep` when there is neither."""
    from agentlog.memory import proposals, service
    from agentlog.memory.store import connect, new_event, transact

    m = service.get(root, ident)
    con = connect(root)
    try:
        pids = rule_proposals(con, m.id)
    finally:
        con.close()
    wrote: list[dict[str, Any]] = []

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        found = lowering(last(con, m.id))  # (under the lock: the findings as they are now)
        if not found:
            return [], {}
        kept = [{"seq": r.get("seq"), "value": r.get("value"), "status": r.get("status"), "detail": r.get("detail")}
                for r in found]
        body: dict[str, Any] = {"kept": kept, **({"reason": reason} if reason else {})}
        wrote.append(body)
        return [new_event("memory_kept", m.id, m.version, actor, body)], {}

    transact(root, decide)
    if not wrote and not pids:
        raise NothingToKeep(f"memory {m.slug} is not doubtful: its last check lowered nothing and no rule proposal "
                            "is open for it (agentlog memory check checks it)")
    for pid in pids:
        proposals.reject(root, pid, reason=reason or REASON, actor=actor)
    return service.get(root, m.id)
