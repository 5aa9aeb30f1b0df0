"""What in the memory waits for a person, and what a person's decision made.

A page that leads with what waits on a person (the dashboard's Now) shows how many proposals
are open and names the newest few, each a link to where it is approved or rejected
(:func:`waiting`); a merged proposal names the memories it wrote (:func:`merged_into`), so
that whoever approved it can open them. Reads of the read model only; nothing is written.
"""

from __future__ import annotations

import os
from typing import Any, Final

from agentlog.core.timefmt import format_us
from agentlog.memory.store import connect, db_path

SHOWN: Final = 5
"""Open proposals named by :func:`waiting` (the count covers them all)."""


def waiting(root: str, limit: int = SHOWN) -> dict[str, Any]:
    """``{"count": N, "newest": [{id, title, actor, opened_at, changes}]}``: how many proposals
    are open, and the newest ``limit`` of them (``opened_at`` as RFC 3339 UTC text,
    ``changes`` how many changes each holds). A data root without a memory yet has none (and
    is left without one)."""
    if not os.path.exists(db_path(root)):
        return {"count": 0, "newest": []}
    con = connect(root)
    try:
        (count,) = con.execute("SELECT count(*) FROM proposals WHERE status = 'open'").fetchone()
        rows = con.execute("SELECT id, title, actor, created_at, json_array_length(changes) FROM proposals "
                           "WHERE status = 'open' ORDER BY created_at DESC, id LIMIT ?", (limit,)).fetchall()
    finally:
        con.close()
    return {"count": int(count),
            "newest": [{"id": r[0], "title": r[1], "actor": r[2], "opened_at": format_us(int(r[3])),
                        "changes": int(r[4] or 0)} for r in rows]}


def merged_into(root: str, merged: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The memories a merged proposal wrote (its ``merged`` record's ``after``), as they are now:
    ``[{id, title, kind, gone}]`` (``gone``: deleted since), in id order."""
    ids = sorted((merged or {}).get("after") or {})
    if not ids:
        return []
    con = connect(root)
    try:
        rows = {r[0]: r for r in con.execute(
            f"SELECT id, title, kind, deleted FROM memories WHERE id IN ({', '.join('?' for _ in ids)})", ids)}
    finally:
        con.close()
    return [{"id": i, "title": rows[i][1], "kind": rows[i][2], "gone": bool(rows[i][3])} if i in rows
            else {"id": i, "title": None, "kind": None, "gone": True} for i in ids]


__all__ = ["SHOWN", "merged_into", "waiting"]
