"""Recorded evidence (events, attempts, sessions, tool calls) checked against the projection: is it
still as recorded, or was it corrected, retracted or purged? One statement per kind of evidence
for every memory a check looks at (their ids joined with the projection), not one per citation."""

from __future__ import annotations

from typing import Any, Final

_SQL: Final = {
    "attempt": "SELECT attempt_id, coalesce(retracted, false), corrected_by, correction_type FROM attempts "
               "WHERE attempt_id IN (SELECT id FROM _evidence_ids)",
    "session": "SELECT session_id, coalesce(retracted, false), NULL, NULL FROM sessions "
               "WHERE session_id IN (SELECT id FROM _evidence_ids)",
    "tool_call": "SELECT tool_call_id, coalesce(retracted, false), NULL, NULL FROM tool_calls "
                 "WHERE tool_call_id IN (SELECT id FROM _evidence_ids)",
}
_EVENTS: Final = ("SELECT DISTINCT event_id FROM events WHERE event_id IN (SELECT id FROM _evidence_ids)",
                  "SELECT DISTINCT x FROM (SELECT unnest(retracted_events) AS x FROM retractions) "
                  "WHERE x IN (SELECT id FROM _evidence_ids)")


def _rows(engine: Any, kind: str, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """Per id of ``kind`` the projection holds: (retracted, corrected by, correction type)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    engine.register("_evidence_ids", pa.table({"id": pa.array(sorted(set(ids)), pa.string())}))
    if kind == "event":
        present = set(engine.arrow(_EVENTS[0]).column(0).to_pylist())
        retracted = set(engine.arrow(_EVENTS[1]).column(0).to_pylist())
        return {i: (i in retracted, None, None) for i in present}
    out: dict[str, tuple[Any, ...]] = {}
    table = engine.arrow(_SQL[kind])
    for v in zip(*(table.column(i).to_pylist() for i in range(4))):
        out.setdefault(str(v[0]), v[1:])
    return out


def statuses(root: str, refs: list[tuple[str, int, dict[str, Any]]], act: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (memory id, evidence seq) of ``refs`` (recorded evidence): ``recorded``, ``corrected``,
    ``retracted`` or ``purged``, with why (``unverifiable`` when the projection cannot be read);
    asked through ``act``'s engine (:class:`.outcomes.Activity`)."""
    if not refs:
        return {}
    import duckdb

    from agentlog.log.purge_record import purged_events

    engine = act.engine() if act is not None else None
    if engine is None:  # (no usable projection: nothing can be said of them)
        why = act.failed if act is not None else "no projection asked"
        return {(mid, seq): {"status": "unverifiable", "detail": f"the projection could not be read: {why}"}
                for mid, seq, _ in refs}
    found: dict[str, dict[str, tuple[Any, ...]]] = {}
    failed: dict[str, str] = {}
    for kind in sorted({str(r["type"]) for _, _, r in refs}):
        try:
            found[kind] = _rows(engine, kind, [str(r["value"]) for _, _, r in refs if r["type"] == kind])
        except duckdb.Error as e:  # (the projection could not be asked)
            failed[kind] = str(e).splitlines()[0] if str(e) else type(e).__name__
    purged = purged_events(root)
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for mid, seq, ref in refs:
        kind, value = str(ref["type"]), str(ref["value"])
        if kind in failed:
            out[(mid, seq)] = {"status": "unverifiable", "detail": f"the projection could not be asked: {failed[kind]}"}
            continue
        row = found[kind].get(value)
        if row is None:
            if value in purged:
                out[(mid, seq)] = {"status": "purged", "detail": f"its content was purged (purge {purged[value]})"}
            else:
                out[(mid, seq)] = {"status": "retracted", "detail": "no longer in the recorded history"}
        elif row[0]:
            out[(mid, seq)] = {"status": "retracted", "detail": "a person retracted it (agentlog retract)"}
        elif row[1]:
            out[(mid, seq)] = {"status": "corrected",
                               "detail": f"a person corrected it ({row[2] or 'correction'} {row[1]})"}
        else:
            out[(mid, seq)] = {"status": "recorded", "detail": "as recorded"}
    return out
