"""Re-deriving failure classes of stored events with the installed classifier.

A failed call's class is computed at capture and stored in its event, with the
classifier's version (``attrs.classified_by``). Events an older version
classified (or none did) are re-classified here, from the stored event itself
(its error, output, command, exit code: the raw material is kept), before the
projection reads them: the projection then holds today's class, its evidence
and summary, and ``reclassified_from`` says what the stored event said. It
costs nothing when every event is current: the stale ones are found in the
``attrs`` the projection reads anyway, and only they are read again, whole.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from agentlog.capture.failures import CLASSIFIER_VERSION, reclassify_event

KINDS: Final = frozenset({"tool_call_failed", "tool_batch_finished"})
_CURRENT: Final = f'"classified_by":{CLASSIFIER_VERSION}'


def stale_ids(table: Any) -> list[str]:
    """Event ids of ``table``'s failed calls and outcome batches not classified by this version
    (the kinds are filtered in Arrow first: only those rows' attrs become Python strings)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    rows = table.filter(pc.is_in(table.column("kind"), value_set=pa.array(sorted(KINDS))))
    if rows.num_rows == 0:
        return []
    out = []
    for a, eid in zip(rows.column("attrs").to_pylist(), rows.column("event_id").to_pylist()):
        if not a or _CURRENT not in a.replace(" ", ""):
            out.append(eid)
    return out


def read_changes(root: str, dataset: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The changes of events ``ids``: each read from its own log frame (where the store says
    it is: a ``pread``, or a short decompression in a sealed segment), not from the store's
    bulky ``event`` column, whose pages hold every other event too."""
    if not ids or dataset is None:
        return {}
    import pyarrow as pa
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    from agentlog.log.lookup import event_at

    out: dict[str, dict[str, Any]] = {}
    wanted = pa.array(sorted(set(ids)), type=pa.string())
    columns = ["event_id", "log_provider", "log_key", "log_offset"]
    for batch in dataset.to_batches(columns=columns, filter=ds.field("event_id").isin(wanted), batch_size=8192):
        for eid, provider, key, offset in zip(*(batch.column(c).to_pylist() for c in columns)):
            ev = event_at(root, f"{provider}/{key}", offset)
            if ev is None:  # purged or gone: the stored class stays
                continue
            try:
                change = reclassify_event(ev)
            except Exception:  # a classifier bug keeps the stored class
                change = None
            if change is not None:
                out[eid] = change
    return out


def apply(table: Any, changes: dict[str, dict[str, Any]]) -> Any:
    """``table`` (observation columns) with ``outcome_class``, ``exit_code`` and ``attrs`` of
    the changed events replaced."""
    if not changes:
        return table
    import pyarrow as pa

    ids = table.column("event_id").to_pylist()
    if not any(eid in changes for eid in ids):
        return table
    classes = table.column("outcome_class").to_pylist()
    codes = table.column("exit_code").to_pylist()
    attrs = table.column("attrs").to_pylist()
    for i, eid in enumerate(ids):
        change = changes.get(eid)
        if change is None:
            continue
        if "class" in change:
            classes[i] = change["class"]
            codes[i] = change.get("exit_code")
        try:
            current = orjson.loads(attrs[i]) if attrs[i] else {}
        except orjson.JSONDecodeError:
            current = {}
        for k, v in change.get("attrs", {}).items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v
        attrs[i] = orjson.dumps(current).decode() if current else None
    for name, values in (("outcome_class", classes), ("exit_code", codes), ("attrs", attrs)):
        at = table.schema.get_field_index(name)
        table = table.set_column(at, table.schema.field(at), pa.array(values, type=table.schema.field(at).type))
    return table
