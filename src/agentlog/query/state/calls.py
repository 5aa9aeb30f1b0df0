"""The tool call index kept per engine (``_Calls``): per work unit, the calls'
first times and a small code of their category, status, git subcommand and
command category, packed into arrays; the names and ids only of the calls
that may run long (unfinished, or longer than :data:`SHORT_CALL`). Built by
:func:`_load_calls`; answers at an instant which calls were in flight
(:func:`_in_flight`) and a work unit's last calls (:func:`_unit_calls`),
fetching the rare rows the index does not hold.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Final, Sequence

from agentlog.projection.session import MUTATING
from agentlog.query.state.common import ALL_ROWS, MEMO_CAP, US, Params, Runner, _low, _q, _remember


SHORT_CALL: Final = 10 * US
"""A finished tool call at most this long (µs) is "short": the call index keeps only its times and
code, and fetches its names in the rare case that it is in flight at the instant asked about."""

_CallRow = tuple[int, "int | None", str, str, "str | None", "str | None", "str | None"]
"""(started µs, finished µs, session id, tool call id, tool name, tool category, start event id)."""

_CALL_ROW_SQL: Final = ("epoch_us(started_at) AS s, epoch_us(finished_at) AS f, session_id, tool_call_id, tool_name, "
                        "tool_category, start_event_id")


@dataclass
class _CallGroup:
    """The calls of one work unit (through its turns; key None: calls in no unit's turn), not retracted."""

    a: array[int]
    """First time of each call (its start, else its finish), ascending."""
    p: Sequence[int]
    """Aligned with ``a``: the call's finish and code, packed (see :meth:`_Calls.fin`, :meth:`_Calls.code`)."""
    mut: array[int]
    """First times of the calls that change files (categories in ``MUTATING``), ascending."""
    open: array[int]
    """First times of the calls that never finished, ascending."""
    span: int
    """The longest finished call (µs, at least 0): bounds how far back a call in flight can have started."""


@dataclass
class _Calls:
    """The tool calls, indexed once per engine."""

    groups: dict[str | None, _CallGroup]
    combos: list[tuple[str | None, ...]]
    """The (category, status, git subcommand, command category) a call code stands for."""
    first: dict[str, int]
    """Per session, the first time of its first call."""
    last: dict[str, int]
    """Per session, the latest time one of its calls started or finished."""
    open_rows: list[_CallRow]
    """Calls started and never finished, by start."""
    open_starts: list[int]
    long_rows: list[_CallRow]
    """Finished calls longer than ``SHORT_CALL``, by start."""
    long_starts: list[int]
    long_span: int
    short: dict[int, list[_CallRow]] = field(default_factory=dict)
    """Start → every short finished call started then (fetched when needed)."""
    ties: dict[tuple[str, int], list[tuple[Any, ...]]] = field(default_factory=dict)
    """(work unit, first time) → its calls with that first time, by tool call id (fetched when needed)."""

    def fin(self, g: _CallGroup, j: int) -> int | None:
        """The finish time of call ``j`` of ``g`` (None: not finished): ``p`` packs
        ``code + len(combos) * f`` where f is 0 (no finish), ``2d + 1`` (finished d µs after
        its first time) or ``2d + 2`` (d µs before it)."""
        f = g.p[j] // len(self.combos)
        if f == 0:
            return None
        return g.a[j] + (f - 1) // 2 if f & 1 else g.a[j] - (f - 2) // 2

    def code(self, g: _CallGroup, j: int) -> tuple[str | None, ...]:
        return self.combos[g.p[j] % len(self.combos)]


_CODED: Final = ("tool_category", "outcome_status", "git_subcommand", "command_category")
"""The tool call columns a call's code stands for (what a work unit's phase is read from)."""

_PACKED_LIMIT: Final = 2**63
"""Packed call values must stay below this (DuckDB's BIGINT)."""


def _load_calls(engine: Runner) -> _Calls:
    # The (category, status, git, command) combinations that occur, and each session's first call.
    combos = sorted((tuple(r) for r in engine.run(
        f"SELECT DISTINCT {', '.join(_CODED)} FROM tool_calls WHERE NOT retracted", max_rows=ALL_ROWS).rows),
        key=lambda c: tuple(_low(v) for v in c))
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    longest = 0
    for r in _q(engine, (
            "SELECT session_id, epoch_us(min(coalesce(started_at, finished_at))) AS first, "
            "max(greatest(epoch_us(started_at), epoch_us(finished_at))) AS last, "
            "max(abs(epoch_us(finished_at) - epoch_us(coalesce(started_at, finished_at)))) AS longest "
            "FROM tool_calls WHERE NOT retracted GROUP BY session_id")):
        if r["session_id"] is not None and r["first"] is not None:
            first[r["session_id"]] = int(r["first"])
            last[r["session_id"]] = int(r["last"])
        longest = max(longest, int(r["longest"] or 0))
    nc = max(1, len(combos))

    # A call's code: its combination's position. In SQL: a mixed-radix number over the columns'
    # values, mapped to that position through a list.
    p = Params()
    values = [sorted({c[i] for c in combos if c[i] is not None}) for i in range(len(_CODED))]
    radix_sql = "0"
    for col, vals in reversed(list(zip(_CODED, values))):
        radix_sql = f"coalesce(list_position({p(vals)}::VARCHAR[], x.{col}), 0) + {len(vals) + 1} * ({radix_sql})"
    position: dict[int, int] = {}
    for n, combo in enumerate(combos):
        radix = 0
        for i in reversed(range(len(_CODED))):
            radix = radix * (len(values[i]) + 1) + (values[i].index(combo[i]) + 1 if combo[i] is not None else 0)
        position[radix] = n
    size = 1
    for vals in values:
        size *= len(vals) + 1
    code_sql = f"list_extract({p([position.get(x, 0) for x in range(size)])}::BIGINT[], {radix_sql} + 1)"
    fenc_sql = "CASE WHEN f IS NULL THEN 0 WHEN f >= a THEN (f - a) * 2 + 1 ELSE (a - f) * 2 + 2 END"
    packed = (2 * longest + 3) * nc < _PACKED_LIMIT
    if packed:
        item, columns = f"{{'a': a, 'p': k + {nc} * ({fenc_sql})}}", "list_transform(l, lambda x: x.p) AS p"
    else:  # finish times too far from the first times to pack: carried apart, packed here
        item = f"{{'a': a, 'f': f, 'k': k}}"
        columns = "list_transform(l, lambda x: x.f) AS f, list_transform(l, lambda x: x.k) AS k"
    groups: dict[str | None, _CallGroup] = {}
    for r in _q(engine, (
            "WITH m AS (SELECT work_unit_id, unnest(turns) AS turn_id FROM work_units), "
            "c AS (SELECT m.work_unit_id AS u, epoch_us(coalesce(x.started_at, x.finished_at)) AS a, "
            f"epoch_us(x.finished_at) AS f, x.tool_category IN {p.many(sorted(MUTATING))} AS mut, {code_sql} AS k "
            "FROM tool_calls x LEFT JOIN m ON m.turn_id = x.turn_id "
            "WHERE NOT x.retracted AND coalesce(x.started_at, x.finished_at) IS NOT NULL), "
            f"g AS (SELECT u, list_sort(list({item})) AS l, list_sort(list(a) FILTER (WHERE mut)) AS mut, "
            "list_sort(list(a) FILTER (WHERE f IS NULL)) AS open, max(f - a) AS span FROM c GROUP BY u) "
            f"SELECT u, list_transform(l, lambda x: x.a) AS a, {columns}, mut, open, span FROM g"), p):
        a = array("q", r["a"])
        if packed:
            packs: Sequence[int] = array("q", r["p"])
        else:
            packs = [k + nc * (0 if f is None else (f - x) * 2 + 1 if f >= x else (x - f) * 2 + 2)
                     for x, f, k in zip(a, r["f"], r["k"])]
        groups[r["u"]] = _CallGroup(a, packs, array("q", r["mut"] or []), array("q", r["open"] or []),
                                    max(0, int(r["span"] or 0)))

    # The names of the calls that may be in flight for long: unfinished ones and long ones.
    p = Params()
    open_rows: list[_CallRow] = []
    long_rows: list[_CallRow] = []
    for row in engine.run(
            f"SELECT {_CALL_ROW_SQL} FROM tool_calls WHERE NOT retracted AND started_at IS NOT NULL AND "
            f"(finished_at IS NULL OR epoch_us(finished_at) - epoch_us(started_at) > {p(SHORT_CALL)}) "
            "ORDER BY started_at", p.values, max_rows=ALL_ROWS).rows:
        (open_rows if row[1] is None else long_rows).append(row)
    long_span = max((r[1] - r[0] for r in long_rows if r[1] is not None), default=0)
    return _Calls(groups, combos or [(None,) * len(_CODED)], first, last, open_rows, [r[0] for r in open_rows],
                  long_rows, [r[0] for r in long_rows], long_span)


def _fetch_short(engine: Runner, calls: _Calls, starts: Sequence[int]) -> None:
    """Every short finished call started at one of ``starts``, into ``calls.short``."""
    p = Params()
    found: dict[int, list[_CallRow]] = {s: [] for s in starts}
    for row in engine.run(
            f"SELECT {_CALL_ROW_SQL} FROM tool_calls WHERE NOT retracted AND started_at BETWEEN "
            f"{p.ts(min(starts))} AND {p.ts(max(starts))} AND finished_at IS NOT NULL AND "
            f"epoch_us(finished_at) - epoch_us(started_at) <= {p(SHORT_CALL)}", p.values, max_rows=ALL_ROWS).rows:
        found.setdefault(row[0], []).append(row)
    if len(calls.short) + len(found) > MEMO_CAP:
        calls.short.clear()
    for s, rows in found.items():
        calls.short.setdefault(s, rows)


def _in_flight(engine: Runner, calls: _Calls, t: int) -> list[_CallRow]:
    """Every call not retracted that had started by ``t`` and had not finished by then."""
    out = calls.open_rows[:bisect_right(calls.open_starts, t)]
    i = bisect_right(calls.long_starts, t) - 1
    while i >= 0 and calls.long_starts[i] > t - calls.long_span:
        row = calls.long_rows[i]
        if row[1] is not None and row[1] > t:
            out.append(row)
        i -= 1
    # A short call in flight started within SHORT_CALL of t; its group's arrays say which start it had.
    starts: set[int] = set()
    for g in calls.groups.values():
        j = bisect_right(g.a, t) - 1
        while j >= 0 and g.a[j] > t - SHORT_CALL:
            fin = calls.fin(g, j)
            if fin is not None and fin > t and fin - g.a[j] <= SHORT_CALL:
                starts.add(g.a[j])
            j -= 1
    if starts:
        missing = sorted(s for s in starts if s not in calls.short)
        if missing:
            _fetch_short(engine, calls, missing)
        for s in sorted(starts):
            out.extend(r for r in calls.short.get(s, []) if r[1] is not None and r[1] > t)
    return out


def _unit_calls(engine: Runner, calls: _Calls, unit_id: str, t: int) -> dict[str, Any] | None:
    """A work unit's calls by ``t`` (None: none): how many are in flight and change files, the latest
    time one started or finished, and the last five (``tail``: [category, status, git, command])."""
    g = calls.groups.get(unit_id)
    k = bisect_right(g.a, t) if g is not None else 0
    if g is None or k == 0:
        return None
    last = g.a[k - 1]
    flying = bisect_right(g.open, t)
    i = k - 1
    while i >= 0 and g.a[i] > last - g.span:  # only these can have finished after ``last`` or after t
        fin = calls.fin(g, i)
        if fin is not None:
            if fin > t:
                flying += 1
            elif fin > last:
                last = fin
        i -= 1
    lo = max(0, k - 5)
    if any(g.a[j] == g.a[j - 1] for j in range(max(1, lo), k)):
        tail = _tied_tail(engine, calls, g, unit_id, k, t)
    else:
        tail = []
        for j in range(lo, k):
            cat, status, git, cmd = calls.code(g, j)
            fin = calls.fin(g, j)
            tail.append([cat, status if fin is not None and fin <= t else None, git, cmd])
    return {"n_flying": flying, "n_mut": bisect_right(g.mut, t), "last_call": last, "tail": tail}


def _tied_tail(engine: Runner, calls: _Calls, g: _CallGroup, unit_id: str, k: int, t: int) -> list[list[Any]]:
    """The last five calls by t, by (first time, tool call id), when some share a first time (the
    arrays do not hold ids: the tied calls are read again, once)."""
    lowest = g.a[max(0, k - 5)]
    times = sorted({g.a[j] for j in range(bisect_left(g.a, lowest), k)})
    tied = [x for x in times if bisect_right(g.a, x) - bisect_left(g.a, x) > 1]
    missing = [x for x in tied if (unit_id, x) not in calls.ties]
    if missing:
        p = Params()
        found: dict[int, list[tuple[Any, ...]]] = {x: [] for x in missing}
        for r in _q(engine, (
                "SELECT x.tool_call_id, epoch_us(coalesce(x.started_at, x.finished_at)) AS a, "
                f"epoch_us(x.finished_at) AS f, {', '.join('x.' + c for c in _CODED)} FROM tool_calls x JOIN "
                f"(SELECT unnest(turns) AS turn_id FROM work_units WHERE work_unit_id = {p(unit_id)}) m "
                "ON m.turn_id = x.turn_id WHERE NOT x.retracted AND "
                f"epoch_us(coalesce(x.started_at, x.finished_at)) IN (SELECT unnest({p(missing)}::BIGINT[]))"), p):
            found.setdefault(r["a"], []).append((r["tool_call_id"], r["f"], *(r[c] for c in _CODED)))
        for x, rows in found.items():
            _remember(calls.ties, (unit_id, x), sorted(rows, key=lambda r: r[0]))
    seq: list[tuple[int | None, Sequence[str | None]]] = []
    for x in times:
        if x in tied:
            seq.extend((r[1], list(r[2:])) for r in calls.ties.get((unit_id, x), []))
        else:
            j = bisect_left(g.a, x)
            seq.append((calls.fin(g, j), calls.code(g, j)))
    return [[cat, status if fin is not None and fin <= t else None, git, cmd]
            for fin, (cat, status, git, cmd) in seq[-5:]]
