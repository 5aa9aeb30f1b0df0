"""Deleting a memory for real: its content purged from the log, the store and the read model.

``memory delete`` writes a tombstone: the memory leaves every listing, its
events stay (so undo and history work). ``memory delete --purge`` removes
what it said, as ``agentlog purge`` removes captured content
(``log/purge.py``): every frame of the memory log that mentions the memory
— its own events, the proposals that created or changed it (their frames
name it, or are frames of a proposal that did), links to it from other
memories — becomes a purged frame with the same seq and hash, so the chain
still verifies; their rows leave the ``events`` table; and the read model is
rebuilt from what remains, so no SQLite page keeps the text.

Frames of a proposal may also hold changes to *other* memories. Before
anything is purged, one ``memory_purged`` event (no content of the purged
memory) records each such memory's exact current rows, less links to the
purged one; replaying it restores them, so those memories are exactly as
they were (their history shows ``restated`` where the purged proposal's
entry was). The purged memory keeps one history row, ``purged``, and the
purge record names every frame (its hashes kept).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from agentlog.memory.store import (
    LOG_KEY,
    PROVIDER,
    NotFound,
    locked,
    rebuild_locked,
    catch_up,
    connect,
    log_path,
    new_event,
    snapshot,
)


@dataclass
class MemoryPurge:
    """What purging a memory did (or, in a dry run, would do)."""

    memory_id: str
    slug: str
    dry_run: bool
    frames: int = 0
    proposals: list[str] = field(default_factory=list)
    restated: list[str] = field(default_factory=list)
    """Other memories changed by a purged proposal frame, restored exactly."""
    purge_id: str | None = None
    store_rows_deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "slug": self.slug, "dry_run": self.dry_run, "frames": self.frames,
                "proposals": self.proposals, "restated": self.restated, "purge_id": self.purge_id,
                "store_rows_deleted": self.store_rows_deleted}


def _mentioned(ev: dict[str, Any]) -> set[str]:
    """Every memory id an event of the memory log names."""
    a = ev.get("attrs") or {}
    c = ev.get("content") or {}
    out = {str(a.get("memory_id") or "")}
    for op in c.get("ops") or ():
        out.add(str(op.get("memory_id") or ""))
    for change in c.get("changes") or ():
        out.update((str(change.get("memory") or ""), str(change.get("target") or ""), str(change.get("id") or "")))
    for key in ("restore", "bases", "before", "after", "restate"):
        if isinstance(c.get(key), dict):
            out.update(map(str, c[key]))
    out.add(str(c.get("target") or ""))
    out.discard("")
    return out


def _frames(root: str, mid: str) -> tuple[int, set[str], set[str]]:
    """(frames that mention ``mid`` or belong to a proposal that does, those proposals, the
    memory ids those frames name) — two passes over the memory log."""
    import orjson

    from agentlog.log.frame import event_bytes, is_purged
    from agentlog.log.segments import lines_from

    path = log_path(root)
    if not os.path.exists(path):
        return 0, set(), set()
    needle = mid.encode()
    events: list[tuple[bytes, dict[str, Any]]] = []
    for _off, line in lines_from(path, 0):
        if not is_purged(line[:128]):
            blob = event_bytes(line)
            events.append((blob, orjson.loads(blob)))
    proposals = {str((ev.get("attrs") or {}).get("proposal_id") or "") for blob, ev in events if needle in blob}
    proposals.discard("")
    frames = 0
    named: set[str] = set()
    for blob, ev in events:
        if ev.get("provider_event_name") == "memory_purged":
            continue
        if needle in blob or str((ev.get("attrs") or {}).get("proposal_id") or "") in proposals:
            frames += 1
            named |= _mentioned(ev)
    return frames, proposals, named


def purge_memory(root: str, ident: str, *, actor: str = "person", dry_run: bool = False,
                 lock_timeout: float = 10.0) -> MemoryPurge:
    """Purge the memory ``ident`` (id or slug; a deleted one too). Raises
    :class:`~agentlog.memory.store.NotFound`, or ``store.purge.PurgeBusy``
    when an ingest, compaction, seal or purge holds the store."""
    from agentlog.log.purge import Selector
    from agentlog.log.writer import SessionLog
    from agentlog.operations.purge import purge

    with locked(root):
        con = connect(root)
        try:
            catch_up(root, con)
            row = con.execute("SELECT id, slug, version FROM memories WHERE id = ? OR slug = ? "
                              "ORDER BY deleted, id LIMIT 1", (ident, ident)).fetchone()
            if row is None:
                raise NotFound(f"no memory {ident!r}")
            mid, slug, version = str(row[0]), str(row[1]), int(row[2])
            frames, proposals, named = _frames(root, mid)
            others = sorted(o for o in named - {mid}
                            if con.execute("SELECT 1 FROM memories WHERE id = ?", (o,)).fetchone())
            result = MemoryPurge(mid, slug, dry_run, frames=frames, proposals=sorted(proposals), restated=others)
            if dry_run:
                return result
            restate: dict[str, Any] = {}
            for o in others:
                snap = snapshot(con, o)
                if snap is not None:
                    snap["links"] = [r for r in snap["links"] if r[2] != mid]
                    restate[o] = snap
            ev = new_event("memory_purged", mid, version + 1, actor,
                           {"restate": restate, "proposals": sorted(proposals)})
            import orjson

            SessionLog(root, PROVIDER, LOG_KEY, session_id=LOG_KEY).append([orjson.dumps(ev)])
        finally:
            con.close()
        done = purge(root, Selector(memory=mid, memory_proposals=tuple(sorted(proposals))),
                     lock_timeout=lock_timeout)
        result.purge_id = done.purge_id
        result.frames = done.frames
        result.store_rows_deleted = done.store_rows_deleted
        rebuild_locked(root)  # a fresh database file: no page of the old one keeps the text
        return result


__all__ = ["MemoryPurge", "purge_memory"]
