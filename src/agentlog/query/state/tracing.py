"""Causal traces (:func:`trace`) over the projection's edges.

TRACE walks causal edges — ``caused``, ``triggered``, ``superseded``,
``handed_off`` (and ``blocked``, ``resolved``, ``contradicted`` should the
projection emit them). UP follows edges backwards, towards causes; DOWN
forwards, towards effects; BOTH does each from the start, each direction
keeping to itself (up stays up), so BOTH is "causes and effects", not
"everything connected". Structural containment (``parent_of``: work unit →
turn, session → turn, turn → tool call) is followed only DOWN: containment
is not causation, and walking it upwards and back down would flood a trace
with siblings. The causal edges are loaded once per engine into an adjacency
index (the huge ``evidence_for`` and ``parent_of`` sets stay in DuckDB);
containment children are fetched per level, batched.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Final, Sequence

from agentlog.projection.ids import split_display
from agentlog.query.state.common import ALL_ROWS, Params, Runner, StateError, _dedup, _q
from agentlog.query.state.resolve import resolve_id


CAUSAL_EDGES: Final = ("caused", "triggered", "superseded", "handed_off", "blocked", "resolved", "contradicted")
"""Edge kinds TRACE follows in both directions (loaded once per engine)."""
CONTAINMENT_FROM: Final = ("work_unit", "session", "turn")
"""Node types whose ``parent_of`` children TRACE follows DOWN (fetched per level)."""
TRACE_KINDS: Final = ("attempt", "event", "session", "turn", "tool_call", "work_unit")
"""Id spaces a TRACE may start from."""
TRACE_COLUMNS: Final = ("depth", "direction", "edge_kind", "from_type", "from_id", "to_type", "to_id", "evidence",
                        "confidence", "uncertainty")

Edge = tuple[str, str, str, str, str, tuple[str, ...], float | None]


@dataclass
class _Graph:
    edges: list[Edge]
    out: dict[str, list[int]]
    inc: dict[str, list[int]]
    types: dict[str, str]
    """Node id → entity type, for every node a causal edge touches (resolves full ids without SQL)."""


_GRAPHS: weakref.WeakKeyDictionary[Any, _Graph] = weakref.WeakKeyDictionary()


def _graph(engine: Runner) -> _Graph:
    """The causal edges as an adjacency index, built once per engine (its snapshot never changes)."""
    owner = getattr(engine, "__wrapped__", engine)
    g = _GRAPHS.get(owner)
    if g is not None:
        return g
    p = Params()
    res = engine.run("SELECT edge_kind, from_type, from_id, to_type, to_id, evidence, confidence FROM edges "
                     f"WHERE edge_kind IN {p.many(CAUSAL_EDGES)}", p.values, max_rows=ALL_ROWS)
    edges: list[Edge] = []
    out: dict[str, list[int]] = {}
    inc: dict[str, list[int]] = {}
    types: dict[str, str] = {}
    for i, (kind, ft, fid, tt, tid, ev, conf) in enumerate(res.rows):
        edges.append((kind, ft, fid, tt, tid, tuple(ev or ()), conf))
        out.setdefault(fid, []).append(i)
        inc.setdefault(tid, []).append(i)
        types[fid] = ft
        types[tid] = tt
    g = _Graph(edges, out, inc, types)
    try:
        _GRAPHS[owner] = g
    except TypeError:
        pass  # not weak-referenceable: no cache
    return g


def _children(engine: Runner, nodes: Sequence[str]) -> dict[str, list[Edge]]:
    """``parent_of`` edges out of these work units, sessions and turns."""
    if not nodes:
        return {}
    p = Params()
    rows = _q(engine, ("SELECT edge_kind, from_type, from_id, to_type, to_id, evidence, confidence FROM edges "
                       f"WHERE edge_kind = 'parent_of' AND from_type IN {p.many(CONTAINMENT_FROM)} "
                       f"AND from_id IN {p.many(nodes)} ORDER BY from_id, to_type, to_id"), p)
    out: dict[str, list[Edge]] = {}
    for r in rows:
        out.setdefault(r["from_id"], []).append((r["edge_kind"], r["from_type"], r["from_id"], r["to_type"],
                                                 r["to_id"], tuple(r["evidence"] or ()), r["confidence"]))
    return out


def trace(engine: Runner, id: str, depth: int = 10, direction: str = "up", *,
          kinds: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Causal edges from the entity ``id`` (any id space of :data:`TRACE_KINDS`,
    as :func:`resolve_id` reads it), breadth first, at most ``depth`` edges
    away. Rows (:data:`TRACE_COLUMNS`) in order of depth; each edge once; a
    node reached twice is not expanded again (cycles are cut); when edges
    continue past ``depth``, one ``depth_limit`` row per node where the walk
    stopped."""
    if depth < 1:
        raise StateError(f"DEPTH must be at least 1, not {depth}", "AQL0403")
    if direction not in ("up", "down", "both"):
        raise StateError(f"DIRECTION must be up, down or both, not {direction!r}", "AQL0409")
    allowed = tuple(kinds or TRACE_KINDS)
    g = _graph(engine)
    typed, bare = split_display(id)
    known = g.types.get(bare)
    if known is not None and known in allowed and typed in (None, known):
        start_kind, start = known, bare  # a full id the causal index knows: no lookup needed
    else:
        start_kind, start = resolve_id(engine, id, allowed)
    dirs = ["up", "down"] if direction == "both" else [direction]
    visited = {(start, d) for d in dirs}
    seen: set[tuple[str, str, str]] = set()
    frontier: list[tuple[str, str, str]] = [(start, start_kind, d) for d in dirs]
    rows: list[dict[str, Any]] = []

    def edges_of(frontier: list[tuple[str, str, str]]) -> list[tuple[str, str, str, Edge]]:
        kids = _children(engine, _dedup(n for n, k, d in frontier if d == "down" and k in CONTAINMENT_FROM))
        found: list[tuple[str, str, str, Edge]] = []
        for n, k, d in frontier:
            idx = g.inc.get(n, []) if d == "up" else g.out.get(n, [])
            for e in [g.edges[i] for i in idx] + (kids.get(n, []) if d == "down" else []):
                if (e[0], e[2], e[4]) not in seen:
                    found.append((n, k, d, e))
        return found

    for level in range(1, depth + 1):
        if not frontier:
            break
        nxt: list[tuple[str, str, str]] = []
        for _n, _k, d, e in edges_of(frontier):
            key = (e[0], e[2], e[4])
            if key in seen:
                continue
            seen.add(key)
            rows.append(_trace_row(level, d, e))
            other, otype = (e[2], e[1]) if d == "up" else (e[4], e[3])
            if (other, d) not in visited:
                visited.add((other, d))
                nxt.append((other, otype, d))
        frontier = nxt
    if frontier:
        pending: dict[tuple[str, str, str], int] = {}
        for n, k, d, _e in edges_of(frontier):
            pending[(n, k, d)] = pending.get((n, k, d), 0) + 1
        for (n, k, d), count in pending.items():
            rows.append({
                "depth": depth + 1, "direction": d, "edge_kind": "depth_limit", "from_type": k, "from_id": n,
                "to_type": None, "to_id": None, "evidence": [], "confidence": None,
                "uncertainty": {"reason": "depth_limit",
                                "note": f"{count} more edge{'s' if count != 1 else ''} {d} from here, past DEPTH "
                                        f"{depth}; trace from this node or raise DEPTH to follow them"},
            })
    return rows


def _trace_row(level: int, direction: str, e: Edge) -> dict[str, Any]:
    kind = e[0]
    heuristic = kind == "handed_off"
    return {
        "depth": level, "direction": direction, "edge_kind": kind, "from_type": e[1], "from_id": e[2],
        "to_type": e[3], "to_id": e[4], "evidence": list(e[5]), "confidence": e[6],
        "uncertainty": {"reason": "heuristic" if heuristic else "deterministic",
                        "note": "a handoff is inferred from timing and shared paths" if heuristic
                        else "a projection rule over the cited events"},
    }
