"""A memory as the read model holds it: its columns and the row-to-:class:`Memory` decoding
(shared by the service and the search language, neither importing the other)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core import fastjson
from agentlog.memory import confidence as conf

COLUMNS: Final = ("id", "kind", "title", "slug", "content", "attributes", "tags", "confidence", "author",
                  "created_at", "updated_at", "last_confirmed_at", "lifetime", "visibility", "archived", "pinned",
                  "deleted", "version")


@dataclass
class Memory:
    """A memory as the read model holds it, with its effective confidence at ``now``."""

    id: str
    kind: str
    title: str
    slug: str
    content: str
    attributes: dict[str, Any]
    tags: list[str]
    confidence: float
    author: str
    created_at: int
    updated_at: int
    last_confirmed_at: int | None
    lifetime: dict[str, Any]
    visibility: dict[str, Any]
    archived: bool
    pinned: bool
    deleted: bool
    version: int
    effective_confidence: float = 0.0
    stale: bool = False
    evidence: list[dict[str, Any]] | None = None
    links: list[tuple[str, str]] | None = None
    truth_factor: float = 1.0
    """The last check's truth factor (:mod:`.truth`; 1.0 when never checked); already in ``effective_confidence``."""
    doubtful: bool = False
    doubts: list[dict[str, Any]] | None = None
    """The last check's findings that lowered its confidence (why it is doubtful)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def loads_column(text: str) -> Any:
    """A JSON column of the read model: parsed by the C scanner straight (:mod:`agentlog.core.fastjson`,
    a third of ``json.loads``'s time on these short texts — four of them per memory read),
    by ``json`` when strict JSON refuses it (``NaN``, which only a log written elsewhere and
    restored could have brought: every write serialises strictly)."""
    try:
        return fastjson.loads(text)
    except ValueError:
        return json.loads(text)


def memory_from_row(row: tuple[Any, ...], now_us: int, decoded: bool = False) -> Memory:
    """``decoded``: the row's JSON columns are given as their values (``service._as_created``)."""
    d = dict(zip(COLUMNS, row))
    if not decoded:
        for k in ("attributes", "tags", "lifetime", "visibility"):
            d[k] = loads_column(d[k])
    for k in ("archived", "pinned", "deleted"):
        d[k] = bool(d[k])
    m = Memory(**d)
    anchor = m.last_confirmed_at or m.created_at
    m.effective_confidence = round(conf.effective(m.confidence, m.kind, anchor, now_us), 6)
    m.stale = conf.is_stale(m.confidence, m.kind, anchor, now_us)
    return m


def last(con: sqlite3.Connection, mid: str) -> dict[str, Any] | None:
    """A memory's last check: ``checked_at``, ``factor``, ``doubtful``, ``results`` (None: never checked)."""
    row = con.execute("SELECT checked_at, factor, doubtful, results FROM truth WHERE memory_id = ?", (mid,)).fetchone()
    if row is None:
        return None
    return {"checked_at": row[0], "factor": row[1], "doubtful": bool(row[2]), "results": loads_column(row[3])}


def annotate(con: sqlite3.Connection, ms: list[Memory]) -> list[Memory]:
    """``ms`` with their last check: effective confidence times the truth factor, ``doubtful``
    and ``doubts`` (the findings that lowered it)."""
    if not ms:
        return ms
    got: dict[str, tuple[float, int, str]] = {}
    ids = [m.id for m in ms]
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for mid, f, d, res in con.execute(f"SELECT memory_id, factor, doubtful, results FROM truth WHERE memory_id IN "
                                          f"({', '.join('?' * len(part))})", part):
            got[mid] = (float(f), int(d), res)
    for m in ms:
        if m.id in got:
            f, d, res = got[m.id]
            m.truth_factor = f
            m.effective_confidence = round(min(m.effective_confidence * f, 1.0), 6)  # (confirmations raise it, to 1 at most)
            m.doubtful = bool(d)
            m.doubts = [r for r in loads_column(res) if r.get("weight", 1.0) < 1.0]
    return ms
