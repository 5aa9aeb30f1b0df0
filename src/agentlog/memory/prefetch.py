"""What a check run reads of the memories it checks, read for all of them at once: their rows,
evidence and last checks (a statement per 500 memories, not three per memory), the status of
their recorded evidence (:mod:`.recorded`) and their rules' counts (:mod:`.rule_state`)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final, Iterator

from agentlog.memory.rows import COLUMNS, Memory, loads_column, memory_from_row

CHUNK: Final = 500


@dataclass
class Batch:
    memories: dict[str, Memory] = field(default_factory=dict)
    evidence: dict[str, list[tuple[int, dict[str, Any], int]]] = field(default_factory=dict)
    """memory id → (seq, ref, added at) of each of its evidence references, by seq."""
    last: dict[str, dict[str, Any]] = field(default_factory=dict)
    """memory id → its last check (as :func:`.rows.last` gives it)."""
    recorded: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)


def _chunks(ids: list[str]) -> Iterator[tuple[list[str], str]]:
    for i in range(0, len(ids), CHUNK):
        part = ids[i:i + CHUNK]
        yield part, ", ".join("?" * len(part))


def read(con: sqlite3.Connection, ids: list[str], now_us: int) -> Batch:
    """The rows, evidence and last checks of ``ids``."""
    b = Batch()
    for part, marks in _chunks(ids):
        for row in con.execute(f"SELECT {', '.join(COLUMNS)} FROM memories WHERE id IN ({marks})", part):
            m = memory_from_row(row, now_us)
            b.memories[m.id] = m
        for mid, seq, ref, at in con.execute(f"SELECT memory_id, seq, ref, added_at FROM evidence WHERE memory_id IN "
                                             f"({marks}) ORDER BY memory_id, seq", part):
            b.evidence.setdefault(mid, []).append((int(seq), loads_column(ref), int(at)))
        for mid, at, f, d, res in con.execute(f"SELECT memory_id, checked_at, factor, doubtful, results FROM truth "
                                              f"WHERE memory_id IN ({marks})", part):
            b.last[mid] = {"checked_at": at, "factor": f, "doubtful": bool(d), "results": loads_column(res)}
    return b


def recorded_refs(b: Batch) -> list[tuple[str, int, dict[str, Any]]]:
    from agentlog.memory.model import RECORDED_EVIDENCE

    return [(mid, seq, ref) for mid, rows in b.evidence.items() for seq, ref, _ in rows
            if ref["type"] in RECORDED_EVIDENCE]
