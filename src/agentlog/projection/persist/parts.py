"""The projection's files: the manifest, the index and the parts — read, written, merged and collected.

The layout, the parts and their families are described in :mod:`agentlog.projection.persist`.
Parsed facts and index files are cached per process (:data:`_FILE_CACHE`).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Final, Iterable

import orjson

from agentlog.core.atrest import derived_root
from agentlog.core.paths import FILE_MODE
from agentlog.projection.observe import COLUMNS, Obs, from_arrow
from agentlog.projection.session import ALGORITHM_VERSION, SessionResult
from agentlog.projection.tables import (
    GLOBAL_FAMILY,
    GROUP_COLUMN,
    PROJECT_FAMILY,
    SESSION_FAMILY,
    SHARDED,
    STORED_ASSEMBLED,
    to_arrow,
)

FORMAT: Final = 3
SHARDS: Final = 16
MAX_DELTAS: Final = 12
"""Parts of a family written by refreshes before they are merged into one."""
OBS_COLUMNS: Final = list(COLUMNS) + ["text"]
SESSION_TABLES: Final = tuple(SHARDED)
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "session": SESSION_TABLES, "asession": SESSION_FAMILY, "aproject": PROJECT_FAMILY,
}


def projection_dir(root: str) -> str:
    return os.path.join(derived_root(root), "projection")


def shard_of(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % SHARDS


def stored_schema(table: str) -> Any:
    return SHARDED.get(table) or STORED_ASSEMBLED[table]


@dataclass
class Manifest:
    format: int = FORMAT
    algorithm_version: str = ALGORITHM_VERSION
    table_id: str | None = None
    """The Delta table's id: another id means the store was rebuilt."""
    store_version: int | None = None
    generation: int = 0
    at: int = 0
    """Reference time of the time-dependent columns (latest observed time)."""
    events: int = 0
    parts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Family → its parts: ``{"tag", "files": {table: file or None}, "stale": [group keys], "delta": bool}``
    (the ``session`` family's files include ``obs`` and ``facts``)."""
    files: dict[str, str] = field(default_factory=dict)
    """``index``, ``meta``, ``corrections`` and ``retractions`` → file."""
    counts: dict[str, int] = field(default_factory=dict)

    def referenced(self) -> set[str]:
        out = set(self.files.values())
        for parts in self.parts.values():
            for part in parts:
                out.update(f for f in part["files"].values() if f)
        return out

    def part(self, family: str, tag: str) -> dict[str, Any]:
        for p in self.parts[family]:
            if p["tag"] == tag:
                return p
        raise KeyError(f"{family} part {tag}")


@dataclass
class Index:
    """Where every session's and project's rows are (``index-G.json``)."""

    sessions: dict[str, list[Any]] = field(default_factory=dict)
    """Session key → [session id, project key, ``session`` part tag, first batch in that part's obs file,
    number of batches, ``asession`` part tag, digest of its ``asession`` rows, its attempts' work units]."""
    projects: dict[str, list[Any]] = field(default_factory=dict)
    """Project key ('' for none) → [``aproject`` part tag, counts of its last cross-session pass, digest of
    its ``aproject`` rows]."""

    def project_keys(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key, entry in self.sessions.items():
            out.setdefault(entry[1], []).append(key)
        return out


def load_manifest(root: str) -> Manifest | None:
    try:
        with open(os.path.join(projection_dir(root), "manifest.json"), "rb") as fh:
            d = orjson.loads(fh.read())
        return Manifest(**d)
    except (FileNotFoundError, orjson.JSONDecodeError, TypeError):
        return None


# -- files ------------------------------------------------------------------------

# Parsed facts and index files of this process (absolute path, mtime, size →
# content): a long-lived process (the daemon, the dashboard) refreshes without
# parsing them again.
_FILE_CACHE: dict[tuple[str, int, int], Any] = {}
#: below this many rows a table is written with snappy, above with zstd (smaller files)
SMALL_TABLE_ROWS: Final = 20_000


def _cache_key(directory: str, name: str) -> tuple[str, int, int]:
    path = os.path.join(os.path.abspath(directory), name)
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


def _no_gc_loads(raw: bytes) -> Any:
    import gc

    enabled = gc.isenabled()
    gc.disable()  # parsing allocates many containers and makes no cycles
    try:
        return orjson.loads(raw)
    finally:
        if enabled:
            gc.enable()


def _result_to_json(r: SessionResult) -> dict[str, Any]:
    return {"key": r.key, "session": r.session, "turns": r.turns, "attempts": r.attempts, "signals": r.signals,
            "commits": r.commits, "facts": r.facts}


def _result_from_json(d: dict[str, Any]) -> SessionResult:
    return SessionResult(d["key"], d["session"], d["turns"], d["attempts"], [], d["signals"], d["commits"], [],
                         d["facts"])


def _read_facts(directory: str, name: str) -> dict[str, SessionResult]:
    key = _cache_key(directory, name)
    cached = _FILE_CACHE.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    with open(os.path.join(directory, name), "rb") as fh:
        raw = fh.read()
    out = {k: _result_from_json(v) for k, v in _no_gc_loads(raw).items()}
    _FILE_CACHE[key] = out
    return out


def _write_facts(directory: str, name: str, facts: dict[str, SessionResult]) -> str:
    data = orjson.dumps({k: _result_to_json(facts[k]) for k in sorted(facts)})
    _write_file(os.path.join(directory, name), data)
    _FILE_CACHE[_cache_key(directory, name)] = facts
    return name


def _index_data(directory: str, name: str) -> dict[str, Any]:
    """``index-G.json`` as parsed (kept per process; callers must not change it)."""
    key = _cache_key(directory, name)
    cached: dict[str, Any] | None = _FILE_CACHE.get(key)
    if cached is None:
        with open(os.path.join(directory, name), "rb") as fh:
            cached = _FILE_CACHE[key] = _no_gc_loads(fh.read())
    return cached


def _read_index(directory: str, name: str | None) -> Index:
    if not name:
        return Index()
    cached = _index_data(directory, name)
    # entries are copied: a refresh edits them in place, and the cache must keep what the file says
    return Index(sessions={k: list(v) for k, v in cached["sessions"].items()},
                 projects={k: list(v) for k, v in cached["projects"].items()})


def _write_index(directory: str, name: str, index: Index) -> str:
    d = {"sessions": index.sessions, "projects": index.projects}
    _write_file(os.path.join(directory, name), orjson.dumps(d))
    _FILE_CACHE[_cache_key(directory, name)] = d
    return name


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _write_table(directory: str, name: str, table: Any) -> str | None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if table.num_rows == 0:
        return None
    path = os.path.join(directory, name)
    if table.num_rows < SMALL_TABLE_ROWS:
        # a refresh's small parts: snappy writes them in two thirds of zstd's time
        pq.write_table(table, path, compression="snappy")
    else:
        pq.write_table(table, path, compression="zstd", compression_level=1)
    os.chmod(path, FILE_MODE)
    return name


def _read_table(directory: str, name: str | None, schema: Any) -> Any:
    import pyarrow.parquet as pq

    if name is None:
        return schema.empty_table()
    return pq.read_table(os.path.join(directory, name), schema=schema)


def _ipc_options() -> Any:
    import pyarrow as pa

    return pa.ipc.IpcWriteOptions(compression="lz4")


def _obs_schema() -> Any:
    from agentlog.store.schema import EVENTS_SCHEMA

    import pyarrow as pa

    return pa.schema([EVENTS_SCHEMA.field(n) for n in OBS_COLUMNS])


def _write_obs(directory: str, name: str,
               sessions: list[tuple[str, Any]]) -> tuple[str | None, dict[str, list[int]]]:
    """Each session's observations as consecutive record batches (one, unless huge) of a
    new file; per key, [its first batch, how many]."""
    import pyarrow as pa

    sessions = [(k, t) for k, t in sessions if t.num_rows]
    if not sessions:
        return None, {}
    path = os.path.join(directory, name)
    schema = _obs_schema()
    batches: dict[str, list[int]] = {}
    n = 0
    with pa.ipc.new_file(path, schema, options=_ipc_options()) as w:
        for key, table in sessions:
            parts = table.cast(schema).combine_chunks().to_batches()
            for batch in parts:
                w.write_batch(batch)
            batches[key] = [n, len(parts)]
            n += len(parts)
    os.chmod(path, FILE_MODE)
    return name, batches


def _obs_batches(directory: str, name: str, first: int, count: int) -> list[Any]:
    import pyarrow as pa

    with pa.ipc.open_file(pa.memory_map(os.path.join(directory, name))) as r:
        return [r.get_batch(i) for i in range(first, first + count)]


def _read_raw(directory: str, name: str) -> Any:
    import pyarrow as pa

    with pa.ipc.open_file(os.path.join(directory, name)) as r:
        return r.read_all()


# -- stored results, meta events, groups, corrections and retractions -----------------


def _load_results(directory: str, m: Manifest, index: Index, keys: Iterable[str]) -> dict[str, SessionResult]:
    """The light results of session ``keys`` from their ``session`` parts' facts."""
    files = {p["tag"]: p["files"]["facts"] for p in m.parts["session"]}
    out: dict[str, SessionResult] = {}
    for key in keys:
        facts = _read_facts(directory, files[index.sessions[key][2]])
        r = facts.get(key)
        if r is not None:
            out[key] = r
    return out


def _read_meta(directory: str, manifest: Manifest) -> list[Obs]:
    name = manifest.files.get("meta")
    if not name:
        return []
    return list(from_arrow(_read_table(directory, name, _obs_schema())))


def _write_meta(directory: str, gen: int, m: Manifest, meta_obs: list[Obs]) -> None:
    m.files.pop("meta", None)
    if meta_obs:
        f = _write_table(directory, f"meta-{gen}.parquet", _obs_rows(meta_obs))
        if f:
            m.files["meta"] = f


def _write_group_part(directory: str, tag: str, family: str,
                      groups: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    files: dict[str, str | None] = {}
    for name in FAMILIES[family]:
        rows = [row for key in sorted(groups) for row in groups[key].get(name, ())]
        files[name] = _write_table(directory, f"{name}-{tag}.parquet", to_arrow(rows, STORED_ASSEMBLED[name]))
    return {"tag": tag, "files": files, "stale": [], "delta": True}


def _digest(group: dict[str, list[dict[str, Any]]]) -> str:
    """A digest of a group's stored rows: a refresh rewrites a group only when it changed."""
    return hashlib.blake2b(orjson.dumps(group), digest_size=16).hexdigest()


def _read_global(directory: str, manifest: Manifest) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name in GLOBAL_FAMILY:
        t = _read_table(directory, manifest.files.get(name), STORED_ASSEMBLED[name])
        rows = t.to_pylist()
        for r in rows:
            for k, v in r.items():
                if hasattr(v, "timestamp"):
                    r[k] = _us(v)
        out[name] = rows
    return out


def _us(v: Any) -> int:
    from datetime import datetime, timezone

    delta = v - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _write_global(directory: str, gen: int, m: Manifest, tables: dict[str, list[dict[str, Any]]]) -> None:
    for name in GLOBAL_FAMILY:
        m.files.pop(name, None)
        f = _write_table(directory, f"{name}-{gen}.parquet", to_arrow(tables[name], STORED_ASSEMBLED[name]))
        if f:
            m.files[name] = f


# -- merging parts ---------------------------------------------------------------------------


def _merge_deltas(directory: str, gen: int, m: Manifest, index: Index) -> None:
    """Merge a family's parts written by refreshes into one when there are more than
    :data:`MAX_DELTAS` (their stale rows dropped), and drop parts with no live rows."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    live: dict[str, dict[str, int]] = {"session": {}, "asession": {}, "aproject": {}}
    for e in index.sessions.values():
        live["session"][e[2]] = live["session"].get(e[2], 0) + 1
        if e[5] is not None:
            live["asession"][e[5]] = live["asession"].get(e[5], 0) + 1
    for e in index.projects.values():
        live["aproject"][e[0]] = live["aproject"].get(e[0], 0) + 1
    for family in FAMILIES:
        m.parts[family] = [p for p in m.parts[family] if live[family].get(p["tag"])]
        deltas = [p for p in m.parts[family] if p["delta"]]
        if len(deltas) <= MAX_DELTAS:
            continue
        tag = f"g{gen}m{family[:2]}"
        tags = {p["tag"] for p in deltas}
        files: dict[str, str | None] = {}
        for name in FAMILIES[family]:
            schema = stored_schema(name)
            column = GROUP_COLUMN[name]
            assert column is not None
            tables = []
            for p in deltas:
                t = _read_table(directory, p["files"].get(name), schema)
                if p["stale"] and t.num_rows:
                    keys = pc.fill_null(t.column(column), "")
                    t = t.filter(pc.invert(pc.is_in(keys, value_set=pa.array(sorted(set(p["stale"]))))))
                tables.append(t)
            files[name] = _write_table(directory, f"{name}-{tag}.parquet", pa.concat_tables(tables))
        if family == "session":
            obs_of = {p["tag"]: p["files"]["obs"] for p in deltas}
            facts_of = {p["tag"]: p["files"]["facts"] for p in deltas}
            moving = sorted(k for k, e in index.sessions.items() if e[2] in tags)
            sessions = []
            facts: dict[str, SessionResult] = {}
            for k in moving:
                e = index.sessions[k]
                before = _obs_batches(directory, obs_of[e[2]], e[3], e[4])
                sessions.append((k, pa.Table.from_batches(before, schema=_obs_schema())))
                r = _read_facts(directory, facts_of[e[2]]).get(k)
                if r is not None:
                    facts[k] = r
            files["obs"], batches = _write_obs(directory, f"obs-{tag}.arrow", sessions)
            files["facts"] = _write_facts(directory, f"facts-{tag}.json", facts)
            for k in moving:
                e = index.sessions[k]
                e[2], e[3], e[4] = tag, *batches[k]
        elif family == "asession":
            for e in index.sessions.values():
                if e[5] in tags:
                    e[5] = tag
        else:
            for e in index.projects.values():
                if e[0] in tags:
                    e[0] = tag
        m.parts[family] = [p for p in m.parts[family] if p["tag"] not in tags] + [
            {"tag": tag, "files": files, "stale": [], "delta": True}]


# -- counting and collecting -------------------------------------------------------------------


def _rows_in(directory: str, name: str | None) -> int:
    import pyarrow.parquet as pq

    if not name:
        return 0
    return int(pq.ParquetFile(os.path.join(directory, name)).metadata.num_rows)


def _obs_rows(obs: list[Obs]) -> Any:
    import pyarrow as pa

    schema = _obs_schema()
    rows = []
    for o in obs:
        rows.append({
            "event_id": o.event_id, "kind": o.kind, "provider": o.provider, "observed_at": o.observed_at,
            "captured_at": o.captured_at, "provider_session_id": o.provider_session_id,
            "provider_turn_id": o.provider_turn_id, "agent_id": o.agent_id, "agent_type": o.agent_type,
            "tool_name": o.tool_name, "tool_category": o.tool_category, "tool_call_id": o.call_id,
            "paths": list(o.paths), "outcome_status": o.status, "outcome_class": o.failure_class,
            "exit_code": o.exit_code, "duration_ms": o.duration_ms, "project_root": o.project_root,
            "project_name": o.project_name, "project_remote": o.project_remote, "project_branch": o.branch,
            "project_head": o.head, "attrs": orjson.dumps(o.attrs).decode() if o.attrs else None, "text": o.text,
        })
    cols = []
    for f in schema:
        values = [r[f.name] for r in rows]
        if pa.types.is_timestamp(f.type):
            cols.append(pa.array(values, type=pa.int64()).cast(f.type))
        else:
            cols.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _collect(directory: str, m: Manifest, previous: Manifest | None) -> None:
    """Delete files neither this manifest nor the previous one names."""
    keep = m.referenced() | (previous.referenced() if previous else set()) | {"manifest.json"}
    for name in os.listdir(directory):
        if name in keep or name.startswith("."):
            continue
        if name.endswith((".parquet", ".json", ".arrow")):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
            gone_path = os.path.join(os.path.abspath(directory), name)
            for key in [k for k in _FILE_CACHE if k[0] == gone_path]:
                del _FILE_CACHE[key]
