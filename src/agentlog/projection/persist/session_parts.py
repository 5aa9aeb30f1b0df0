"""``session`` parts: the store's rows split by session (and shard), projected, and written as a part."""

from __future__ import annotations

from typing import Any

from agentlog.projection.assemble import light
from agentlog.projection.observe import IGNORED_KINDS, META_KINDS, Obs, from_arrow, ordered
from agentlog.projection.persist.parts import _write_facts, _write_obs, _write_table, shard_of
from agentlog.projection.session import SessionResult, build_session, only_capture_test
from agentlog.projection.tables import SHARDED, to_arrow

def _session_keys(table: Any) -> tuple[Any, list[str]]:
    """Per row, the index of its session key in the returned list of keys."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    keys = pc.binary_join_element_wise(table.column("provider"),
                                       pc.fill_null(table.column("provider_session_id"), "unknown"), "\x1f")
    enc = pc.dictionary_encode(keys).combine_chunks() if isinstance(keys, pa.ChunkedArray) \
        else pc.dictionary_encode(keys)
    return enc.indices, enc.dictionary.to_pylist()


def _by_shard(table: Any) -> dict[int, Any]:
    """The rows of ``table`` split by their session's shard."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return {}
    indices, keys = _session_keys(table)
    shard_of_key = pa.array([shard_of(k) for k in keys], type=pa.int32())
    shards = pc.take(shard_of_key, indices)
    out: dict[int, Any] = {}
    for s in sorted(set(shard_of_key.to_pylist())):
        out[s] = table.filter(pc.equal(shards, s))
    return out


def _by_session(rows: Any) -> list[tuple[str, Any]]:
    """The rows of each session key (sorted by key), as slices of one sorted table."""
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return []
    indices, all_keys = _session_keys(rows)
    order = pc.sort_indices(indices)
    grouped = rows.take(order)
    runs = indices.take(order).to_pylist()
    out: list[tuple[str, Any]] = []
    start, n = 0, len(runs)
    while start < n:
        end = start + 1
        while end < n and runs[end] == runs[start]:
            end += 1
        out.append((all_keys[runs[start]], grouped.slice(start, end - start)))
        start = end
    out.sort(key=lambda kv: kv[0])
    return out


def _not_meta(table: Any) -> Any:
    """The rows sessions are projected from: not corrections or retractions, and not
    the kinds the projection never reads (the memory's events)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.invert(pc.is_in(table.column("kind"), value_set=pa.array(sorted(META_KINDS | IGNORED_KINDS))))


def _meta_obs(table: Any) -> list[Obs]:
    import pyarrow.compute as pc

    import pyarrow as pa

    if table.num_rows == 0:
        return []
    return list(from_arrow(table.filter(pc.is_in(table.column("kind"), value_set=pa.array(sorted(META_KINDS))))))


def _project_sessions(sessions: list[tuple[str, Any]], gone: frozenset[str],
                      observed: dict[str, list[Obs]] | None = None) -> dict[str, SessionResult]:
    """Each session's result (one session's observations alive at a time; those of
    ``observed``, a session's rows already read as observations, are not read again)."""
    out: dict[str, SessionResult] = {}
    for key, rows in sessions:
        all_obs = observed[key] if observed is not None and key in observed else from_arrow(rows)
        obs = [o for o in all_obs if o.kind not in META_KINDS and o.event_id not in gone]
        evs = ordered(obs)
        if evs and not only_capture_test(evs):
            out[key] = build_session(key, evs)
    return out


def _rows(results: dict[str, SessionResult], table: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in sorted(results):
        r = results[k]
        if table == "tool_calls":
            out.extend(r.tool_calls)
        elif table == "edges":
            sid = r.session["session_id"]
            out.extend(e | {"session_id": sid} for e in r.edges)
        elif table == "attempts_base":
            out.extend(r.attempts)
        elif table == "turns_base":
            out.extend(r.turns)
    return out


def _write_session_part(directory: str, tag: str, sessions: list[tuple[str, Any]],
                        results: dict[str, SessionResult]) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """A ``session`` part: the observations, facts and per-session rows of ``sessions``."""
    files: dict[str, str | None] = {}
    files["obs"], batches = _write_obs(directory, f"obs-{tag}.arrow", sessions)
    for name, schema in SHARDED.items():
        files[name] = _write_table(directory, f"{name}-{tag}.parquet", to_arrow(_rows(results, name), schema))
    files["facts"] = _write_facts(directory, f"facts-{tag}.json", {k: light(r) for k, r in results.items()})
    return {"tag": tag, "files": files, "stale": [], "delta": True}, batches


def _entry(key: str, r: SessionResult | None, old: list[Any] | None) -> tuple[str | None, str | None]:
    """A session's id and project key: from its new result, else from the index."""
    if r is not None:
        return r.session["session_id"], r.session["project_id"] or ""
    if old is not None:
        return old[0], old[1]
    return None, None
