"""The outcome rules' counts per memory, so that a check costs by what is new, not by the history.

Each rule of :mod:`.outcomes` on a pitfall or a procedure is a function of the recorded
activity since the memory's anchor (its last confirmation, else its creation), kept here as a
small *state* that new events fold into:

- a pitfall: its edits' successes (how many, the latest :data:`KEEP`) and failures (how many,
  the first :data:`KEEP`; with the pitfall's ``failure_class`` when it names one);
- a procedure, per command: its first :data:`KEEP` successes, the failed runs since its latest
  run that succeeded or said nothing (how many, the latest :data:`KEEP`), its latest status.

A *full* check computes the states of every memory it checks in two statements over the
store (:func:`compute`: one for the pitfalls, one for the procedures — joins, not a query per
memory), up to the positions of the watermark it saves; an *incremental* check folds the
frames it read since that watermark (:class:`.touched.Activity` ``done``) into the states of
the memories they touched (:func:`fold`), with no query at all. The states live in the read
model's ``meta`` table beside the watermark (key ``rule:<memory id>``), saved with it in one
transaction; like it, a rebuild of the read model drops them and the next check is full.
A state names what it was computed for (:func:`key_of`: the memory's anchor, and its paths or
commands): a memory edited or confirmed since gets a new one.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final, Iterable

from agentlog.memory.rows import Memory

KEEP: Final = 5
"""Event ids kept per list (the evidence a finding names: ``outcomes._EVIDENCE_MAX``, ``CONFIRM_MAX + 1``)."""
PREFIX: Final = "rule:"
DONE: Final = "('tool_call_finished', 'tool_call_failed')"
EDITS: Final = ("file_edit", "file_write")

Done = tuple[int, str, str, tuple[str, ...], str, "str | None", "str | None"]
"""A finished tool call read from a log: (µs, event id, tool category, paths, command, status, class)."""


def pitfall_paths(m: Memory) -> list[str]:
    return [p for p in m.attributes.get("paths") or [] if isinstance(p, str) and p.strip()]


def procedure_commands(m: Memory) -> list[str]:
    cmd = m.attributes.get("command")
    if isinstance(cmd, str) and cmd.strip():
        return [cmd.strip()]
    return [s.strip() for s in m.attributes.get("steps") or [] if isinstance(s, str) and s.strip()]


def command_key(cmd: str) -> str:
    """The capture's key of a command line (blanks collapsed: ``make  test`` is ``make test``),
    which the store keeps in each shell call's ``attrs`` — matched on it, the rule reads no
    event's content (a shell call's output makes its ``event`` column kilobytes long)."""
    from agentlog.capture.adapters.common import command_key as key

    return key(cmd)


def anchor(m: Memory) -> int:
    return m.last_confirmed_at or m.created_at


def key_of(m: Memory) -> str | None:
    """What ``m``'s state is a function of (None: no rule counts for it)."""
    if m.kind == "pitfall" and pitfall_paths(m):
        what: Any = [pitfall_paths(m), m.attributes.get("failure_class") or None]
    elif m.kind == "procedure" and procedure_commands(m):
        what = procedure_commands(m)
    else:
        return None
    return json.dumps([m.kind, anchor(m), what], sort_keys=True)


def empty(m: Memory) -> dict[str, Any]:
    if m.kind == "pitfall":
        return {"key": key_of(m), "ok": 0, "ok_last": [], "bad": 0, "bad_first": []}
    return {"key": key_of(m), "commands": {c: {"first": [], "tail": 0, "tail_ids": [], "latest": None}
                                           for c in procedure_commands(m)}}


def _matches(path: str, name: str) -> bool:
    name = name.lstrip("/")
    return path == name or path.endswith("/" + name)


def fold(m: Memory, state: dict[str, Any], events: Iterable[Done]) -> dict[str, Any]:
    """``state`` with ``events`` (in (time, id) order, after the state's own) folded in: those
    after ``m``'s anchor that its rule counts."""
    since = anchor(m)
    if m.kind == "pitfall":
        names = pitfall_paths(m)
        fc = m.attributes.get("failure_class") or None
        for us, eid, cat, paths, _cmd, st, cls in events:
            if us <= since or cat not in EDITS or not any(_matches(x, p) for p in names for x in paths):
                continue
            if st == "success":
                state["ok"] += 1
                state["ok_last"] = [*state["ok_last"], eid][-KEEP:]
            elif st is not None and (fc is None or cls == fc):
                state["bad"] += 1
                if len(state["bad_first"]) < KEEP:
                    state["bad_first"].append(eid)
        return state
    runs = state["commands"]
    by_key = {command_key(c): s for c, s in runs.items()}
    for us, eid, cat, _paths, cmd, st, _cls in events:
        s = by_key.get(command_key(cmd)) if cat == "shell" and us > since and cmd else None
        if s is None:
            continue
        if st is None or st == "success":
            s["tail"], s["tail_ids"] = 0, []
        else:
            s["tail"] += 1
            s["tail_ids"] = [*s["tail_ids"], eid][-KEEP:]
        s["latest"] = st
        if st == "success" and len(s["first"]) < KEEP:
            s["first"].append(eid)
    return state


def load(con: sqlite3.Connection, ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The kept states (of ``ids``; None: all)."""
    rows: Iterable[tuple[Any, ...]]
    if ids is None:
        rows = con.execute("SELECT key, value FROM meta WHERE key >= ? AND key < ?", (PREFIX, PREFIX[:-1] + ";"))
    else:
        rows = (r for i in range(0, len(ids), 500) for r in con.execute(
            f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * len(ids[i:i + 500]))})",
            [PREFIX + mid for mid in ids[i:i + 500]]))
    out: dict[str, dict[str, Any]] = {}
    for k, v in rows:
        try:
            out[str(k)[len(PREFIX):]] = json.loads(v)
        except ValueError:
            continue
    return out


def save(con: sqlite3.Connection, states: dict[str, dict[str, Any]], gone: Iterable[str] = ()) -> None:
    """Write ``states`` (and drop those of ``gone``) — in the caller's transaction."""
    con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [(PREFIX + mid, json.dumps(s, sort_keys=True)) for mid, s in states.items()])
    con.executemany("DELETE FROM meta WHERE key = ?", [(PREFIX + mid,) for mid in gone])


def drop_all(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM meta WHERE key >= ? AND key < ?", (PREFIX, PREFIX[:-1] + ";"))


def _register(engine: Any, name: str, columns: dict[str, list[Any]], types: dict[str, Any]) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]

    engine.register(name, pa.table({k: pa.array(v, types[k]) for k, v in columns.items()}))


def _upto(engine: Any, upto: dict[str, list[int]]) -> tuple[str, str]:
    """A join and a condition keeping the events up to the watermark's positions (``upto``: log
    id → [offset, seq]; a log it does not name — a pulled one — is kept whole)."""
    import pyarrow as pa

    names = sorted(upto)
    _register(engine, "_rule_upto", {"p": [n.partition("/")[0] for n in names],
                                     "k": [n.partition("/")[2] for n in names], "s": [int(upto[n][1]) for n in names]},
              {"p": pa.string(), "k": pa.string(), "s": pa.int64()})
    return ("LEFT JOIN _rule_upto u ON u.p = e.log_provider AND u.k = e.log_key", "AND (u.s IS NULL OR e.seq <= u.s)")


def compute(engine: Any, ms: list[Memory], upto: dict[str, list[int]] | None = None) -> dict[str, dict[str, Any]]:
    """The states of ``ms`` (pitfalls and procedures; others are left out) from the store, up to
    ``upto``'s positions (None: all of it): one statement per kind, whatever their number."""
    import pyarrow as pa

    out = {m.id: empty(m) for m in ms if key_of(m) is not None}
    pits = [m for m in ms if m.kind == "pitfall" and m.id in out]
    procs = [m for m in ms if m.kind == "procedure" and m.id in out]
    join, keep = _upto(engine, upto) if upto is not None else ("", "")
    if pits:
        rows: dict[str, list[Any]] = {"mid": [], "path": [], "base": [], "tail": [], "since": [], "fc": []}
        for m in pits:
            for p in dict.fromkeys(pitfall_paths(m)):
                name = p.lstrip("/")
                rows["mid"].append(m.id)
                rows["path"].append(name)
                rows["base"].append(name.rsplit("/", 1)[-1])
                rows["tail"].append("/" + name)
                rows["since"].append(anchor(m))
                rows["fc"].append(m.attributes.get("failure_class") or None)
        _register(engine, "_rule_pits", rows, {"mid": pa.string(), "path": pa.string(), "base": pa.string(),
                                               "tail": pa.string(), "since": pa.int64(), "fc": pa.string()})
        low = min(rows["since"])
        table = engine.arrow(
            "WITH x AS (SELECT e.event_id, e.outcome_status AS st, e.outcome_class AS cls, e.observed_at AS ts, "
            "epoch_us(e.observed_at) AS us, unnest(e.paths) AS path FROM events e " + join +
            f" WHERE e.kind IN {DONE} AND e.tool_category IN ('file_edit', 'file_write') AND e.provider != 'agentlog' "
            f"AND e.observed_at >= to_timestamp({int(low)}::DOUBLE / 1e6 - 1) {keep}), "
            "y AS (SELECT DISTINCT p.mid, x.event_id, x.st, x.cls, x.ts, p.fc FROM x JOIN _rule_pits p "
            "ON regexp_extract(x.path, '[^/]*$') = p.base AND (x.path = p.path OR ends_with(x.path, p.tail)) "
            "AND x.us > p.since), "
            "z AS (SELECT *, (st IS NOT NULL AND st != 'success' AND (fc IS NULL OR cls = fc)) AS bad FROM y) "
            "SELECT mid, count(*) FILTER (WHERE st = 'success') AS ok, "
            f"list(event_id ORDER BY ts DESC, event_id DESC) FILTER (WHERE st = 'success')[1:{KEEP}] AS ok_last, "
            "count(*) FILTER (WHERE bad) AS bad, "
            f"list(event_id ORDER BY ts, event_id) FILTER (WHERE bad)[1:{KEEP}] AS bad_first FROM z GROUP BY mid")
        for r in table.to_pylist():
            s = out[r["mid"]]
            s.update(ok=int(r["ok"]), ok_last=list(reversed(r["ok_last"] or [])), bad=int(r["bad"]),
                     bad_first=list(r["bad_first"] or []))
    if procs:
        rows = {"mid": [], "command": [], "key": [], "since": []}
        for m in procs:
            for c in dict.fromkeys(procedure_commands(m)):
                rows["mid"].append(m.id)
                rows["command"].append(c)
                rows["key"].append(command_key(c))
                rows["since"].append(anchor(m))
        _register(engine, "_rule_procs", rows, {"mid": pa.string(), "command": pa.string(), "key": pa.string(),
                                                "since": pa.int64()})
        low = min(rows["since"])
        table = engine.arrow(
            "WITH r AS (SELECT c.mid, c.command, e.event_id, e.outcome_status AS st, e.observed_at AS ts "
            "FROM events e " + join + " JOIN _rule_procs c "
            "ON json_extract_string(e.attrs, '$.command_key') = c.key "
            f"WHERE e.kind IN {DONE} AND e.tool_category = 'shell' AND e.provider != 'agentlog' "
            f"AND e.observed_at >= to_timestamp({int(low)}::DOUBLE / 1e6 - 1) AND epoch_us(e.observed_at) > c.since "
            f"{keep}), "
            "n AS (SELECT *, row_number() OVER (PARTITION BY mid, command ORDER BY ts DESC, event_id DESC) AS rn "
            "FROM r), "
            "k AS (SELECT mid, command, min(rn) FILTER (WHERE st IS NULL OR st = 'success') AS ok_rn "
            "FROM n GROUP BY mid, command) "
            f"SELECT n.mid, n.command, list(event_id ORDER BY ts, event_id) FILTER (WHERE st = 'success')[1:{KEEP}] "
            "AS first, count(*) FILTER (WHERE k.ok_rn IS NULL OR rn < k.ok_rn) AS tail, "
            "list(event_id ORDER BY ts DESC, event_id DESC) FILTER (WHERE k.ok_rn IS NULL OR rn < k.ok_rn)"
            f"[1:{KEEP}] AS tail_ids, any_value(st) FILTER (WHERE rn = 1) AS latest "
            "FROM n JOIN k ON k.mid = n.mid AND k.command = n.command GROUP BY n.mid, n.command")
        for r in table.to_pylist():
            out[r["mid"]]["commands"][r["command"]] = {
                "first": list(r["first"] or []), "tail": int(r["tail"]),
                "tail_ids": list(reversed(r["tail_ids"] or [])),
                "latest": r["latest"]}
    return out
