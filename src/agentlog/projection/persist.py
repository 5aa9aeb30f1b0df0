"""The projection kept on disk, and brought up to date incrementally.

Layout under ``<data root>/projection/``::

    manifest.json              what is current (atomically replaced)
    index-G.json               per session: its id, project and where its rows are;
                               per project: where its rows are and its counts
    obs-TAG.arrow              observations, one record batch per session (Arrow
                               IPC, lz4; the cache re-projection reads)
    facts-TAG.json             per session: what the cross-session stage reads
    tool_calls-TAG.parquet, edges-…, attempts_base-…, turns_base-…
                               the per-session rows
    sessions-TAG.parquet, turns_overlay-…, attempts_overlay-…, signals-…,
    commits-…, decisions-…     what the cross-session stage decided, per session
    handoffs-TAG.parquet, work_units-…, conflicts-…, edges_cross-…,
    retracted_ids-…            … per project
    corrections-G.parquet, retractions-G.parquet, meta-G.parquet
                               every correction and retraction

Rows are stored in **parts**, three families of them: ``session`` (the
observations, facts and per-session tables of some sessions), ``asession``
(the cross-session stage's per-session rows) and ``aproject`` (its
per-project rows). A full build writes one ``session`` part per shard (a
CRC-32 of the session key, :data:`SHARDS`) and one part of each other
family. A refresh reads only the Delta files the store added since the
manifest's version (their ``add`` actions with ``dataChange``), re-projects
only the sessions they touch (from their observations, read batch by batch,
plus the new rows) and writes them as one new ``session`` part; the older
rows of those sessions stay where they are and are listed as *stale* in
their part, which the engine's views skip. The cross-session stage then runs
again only for the projects those sessions belong to (work units, handoffs
and conflicts never cross projects) and writes the groups whose rows
changed as new ``asession``/``aproject`` parts. Columns that depend on the
reference time (a session's liveness, a work unit's status) are computed by
the views at the manifest's instant, so time moving on rewrites nothing.
When a family has more than :data:`MAX_DELTAS` parts written by refreshes,
those are merged into one (their stale rows dropped).

A fresh process therefore never recomputes history, and a refresh writes in
proportion to what changed. It falls back to a full build when it cannot
prove the increment: no manifest, another algorithm or format, another table
(a rebuilt store), a missing commit file, a commit that removed data (a
purge), or a new retraction of an event or a session (which changes what is
projected, not only how the results join); a new correction or attempt
retraction re-runs the cross-session stage for every project. Each refresh
writes new files and a new manifest, then deletes the files neither it nor
the previous manifest names — a reader that loaded the previous manifest can
still read.

Everything runs under ``state/projection.lock``.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Final, Iterable, Iterator

import orjson

from agentlog.core.fileio import write_atomic
from agentlog.core.paths import FILE_MODE, ensure_dir
from agentlog.projection.assemble import (
    ATTEMPT_OVERLAY,
    TURN_OVERLAY,
    Memo,
    Meta,
    Projection,
    assemble,
    light,
)
from agentlog.projection.observe import COLUMNS, IGNORED_KINDS, META_KINDS, Obs, from_arrow, ordered
from agentlog.projection.session import ALGORITHM_VERSION, SessionResult, build_session
from agentlog.projection.tables import (
    AT_DEPENDENT,
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
LOCK_NAME: Final = "projection.lock"
OBS_COLUMNS: Final = list(COLUMNS) + ["text"]
SESSION_TABLES: Final = tuple(SHARDED)
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "session": SESSION_TABLES, "asession": SESSION_FAMILY, "aproject": PROJECT_FAMILY,
}


def projection_dir(root: str) -> str:
    return os.path.join(root, "projection")


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


@dataclass
class RefreshReport:
    mode: str
    """``none`` (already current), ``incremental`` or ``full``."""
    reason: str = ""
    new_events: int = 0
    sessions_rebuilt: int = 0
    projects_reassembled: int = 0
    parts_written: int = 0
    seconds: float = 0.0
    store_version: int | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProjectionBusy(RuntimeError):
    """Another process holds the projection lock for longer than the timeout."""


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
#: per projection directory, what the cross-session stage of this process's earlier
#: refreshes computed (see assemble.Memo: self-checking, so never wrong, only unused)
_MEMOS: dict[str, Memo] = {}
#: per projection directory, the observations of the sessions the last refresh of this
#: process rebuilt, with where they are stored ((part tag, first batch, batches))
_OBSERVED: dict[str, dict[str, tuple[tuple[Any, ...], list[Obs]]]] = {}


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


# -- rows by session ----------------------------------------------------------------


def _session_keys(table: Any) -> tuple[Any, list[str]]:
    """Per row, the index of its session key in the returned list of keys."""
    import pyarrow as pa
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
        if evs:
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


# -- refresh --------------------------------------------------------------------------


def refresh(root: str, *, lock_timeout: float = 60.0, full: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
    """Bring the stored projection up to date with the store (the caller catches
    the store up first). ``full`` re-projects everything."""
    from agentlog.store.ingest import acquire_lock

    started = time.perf_counter()
    ensure_dir(projection_dir(root))
    fd = acquire_lock(root, lock_timeout, LOCK_NAME)
    if fd is None:
        raise ProjectionBusy(f"another process has held {LOCK_NAME} for more than {lock_timeout:g} s")
    import gc

    enabled = gc.isenabled()
    gc.disable()  # a refresh builds many containers and no cycles: collections would only walk them
    try:
        report = _refresh_locked(root, full, progress)
    finally:
        if enabled:
            gc.enable()
        os.close(fd)
    report.seconds = time.perf_counter() - started
    return report


_TABLE_IDS: dict[tuple[str, int, int], str | None] = {}


def _table_state(root: str) -> tuple[int | None, str | None]:
    """The store's latest version and its table id, from the Delta log itself (the
    store keeps every commit file; opening the table costs tens of ms)."""
    from agentlog.store.ingest import open_table
    from agentlog.store.schema import events_path

    log = os.path.join(events_path(root), "_delta_log")
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None, None
    versions = [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]
    first = os.path.join(log, f"{0:020d}.json")
    if versions and os.path.exists(first):
        st = os.stat(first)
        key = (first, st.st_ino, st.st_mtime_ns)
        if key not in _TABLE_IDS:
            table_id = None
            with open(first, "rb") as fh:
                for line in fh:
                    if b'"metaData"' in line:
                        table_id = orjson.loads(line).get("metaData", {}).get("id")
                        break
            _TABLE_IDS[key] = table_id
        if _TABLE_IDS[key] is not None:
            return max(versions), _TABLE_IDS[key]
    table = open_table(events_path(root))
    if table is None:
        return None, None
    return table.version(), table.metadata().id


def _new_files(root: str, since: int, until: int) -> list[str] | None:
    """Files the store's commits ``since+1 … until`` added with new data; None when
    that cannot be read or a commit removed data."""
    from agentlog.store.schema import events_path

    log = os.path.join(events_path(root), "_delta_log")
    out: list[str] = []
    for v in range(since + 1, until + 1):
        try:
            with open(os.path.join(log, f"{v:020d}.json"), "rb") as fh:
                lines = fh.read().splitlines()
        except FileNotFoundError:
            return None
        for line in lines:
            if not line.strip():
                continue
            action = orjson.loads(line)
            if "add" in action and action["add"].get("dataChange", True):
                out.append(action["add"]["path"])
            elif "remove" in action and action["remove"].get("dataChange", True):
                return None
    return out


def _read_files(root: str, files: list[str]) -> Any:
    import pyarrow.dataset as ds  # type: ignore[import-untyped]
    import pyarrow.fs as pafs  # type: ignore[import-untyped]
    from urllib.parse import unquote

    from agentlog.store.schema import events_path

    base = os.path.abspath(events_path(root))
    fs = pafs.SubTreeFileSystem(base, pafs.LocalFileSystem())
    dataset = ds.dataset([unquote(f) for f in files], format="parquet", filesystem=fs, schema=_obs_schema())
    return dataset.to_table(columns=OBS_COLUMNS)


def _refresh_locked(root: str, full: bool,
                    progress: Callable[[str, int, int], None] | None) -> RefreshReport:
    directory = projection_dir(root)
    version, table_id = _table_state(root)
    manifest = load_manifest(root)
    reason = ""
    if full:
        reason = "asked for"
    elif manifest is None:
        reason = "no projection yet"
    elif manifest.format != FORMAT or manifest.algorithm_version != ALGORITHM_VERSION:
        reason = "projected by another version of agentlog"
    elif manifest.table_id != table_id:
        reason = "the store was rebuilt"
    elif manifest.store_version == version:
        return RefreshReport("none", "already current", store_version=version, counts=manifest.counts)
    new_rows = None
    new_meta: list[Obs] = []
    if not reason:
        assert manifest is not None and manifest.store_version is not None and version is not None
        files = _new_files(root, manifest.store_version, version)
        if files is None:
            reason = "the store's history since the last projection cannot be followed (purged or cleaned up)"
        else:
            try:
                new_rows = _read_files(root, files)
            except (FileNotFoundError, OSError) as e:
                reason = f"a file the store added is gone ({type(e).__name__})"
    if new_rows is not None:
        new_meta = _meta_obs(new_rows)
        if any(o.kind == "retraction" and o.attrs.get("target_type") in ("event", "session") for o in new_meta):
            reason = "a retraction of an event or session changes what is projected"
            new_rows = None
    if new_rows is None:
        return _full(root, directory, version, table_id, manifest if manifest and manifest.format == FORMAT
                     else None, reason or "full", progress)
    assert manifest is not None
    return _incremental(root, directory, manifest, version, new_rows, new_meta)


# -- full build ---------------------------------------------------------------------------


def _full(root: str, directory: str, version: int | None, table_id: str | None,
          previous: Manifest | None, reason: str,
          progress: Callable[[str, int, int], None] | None) -> RefreshReport:
    """Project everything: one streaming pass spreads the store's rows over the
    shards' raw observation files (memory bounded by a batch, not the store),
    then each shard is projected — in worker processes on a large store."""
    import pyarrow as pa

    from agentlog.store.schema import events_dataset

    gen = (previous.generation + 1) if previous else 1
    # what this process remembers of earlier refreshes is of parts about to go
    _OBSERVED.pop(os.path.abspath(directory), None)
    _MEMOS.pop(os.path.abspath(directory), None)
    dataset = events_dataset(root)
    m = Manifest(table_id=table_id, store_version=version, generation=gen)
    schema = _obs_schema()
    writers: dict[int, Any] = {}
    raw: dict[int, str] = {}
    sizes: dict[int, int] = {}
    meta_obs: list[Obs] = []
    total = 0
    try:
        # little readahead: the pass's memory is a few batches, not a prefetched store
        batches = dataset.to_batches(columns=OBS_COLUMNS, batch_size=131_072, batch_readahead=2,
                                     fragment_readahead=1) if dataset is not None else []
        for batch in batches:
            tab = pa.Table.from_batches([batch]).cast(schema)
            total += tab.num_rows
            meta_obs.extend(_meta_obs(tab))
            for s, part in _by_shard(tab.filter(_not_meta(tab))).items():
                w = writers.get(s)
                if w is None:
                    raw[s] = f"obsraw-{s:02d}-{gen}.arrow"
                    w = writers[s] = pa.ipc.new_file(os.path.join(directory, raw[s]), schema,
                                                     options=_ipc_options())
                w.write_table(part)
                sizes[s] = sizes.get(s, 0) + part.num_rows
            if progress:
                progress("read", total, total)
    finally:
        for w in writers.values():
            w.close()
    for name in raw.values():
        os.chmod(os.path.join(directory, name), FILE_MODE)
    m.events = total
    gone = _meta_of(meta_obs).retracted_events()
    seen_events: set[str] = set()
    if gone:
        for s in sizes:
            ids = _read_raw(directory, raw[s]).column("event_id")
            seen_events.update(gone.intersection(ids.to_pylist()))
    index = Index()
    results_all: dict[str, SessionResult] = {}
    m.parts = {"session": [], "asession": [], "aproject": []}
    done = 0
    jobs = [(s, raw[s]) for s in sorted(sizes, key=lambda x: -sizes[x])]
    workers = _workers(total)
    try:
        if workers > 1:
            finished: Iterator[tuple[int, dict[str, Any]]] = _run_jobs(directory, gen, jobs, sorted(gone), workers)
        else:
            finished = ((s, _shard_job(directory, gen, s, name, sorted(gone))) for s, name in jobs)
        for s, out in finished:
            tag = out["tag"]
            m.parts["session"].append({"tag": tag, "files": out["files"], "stale": [], "delta": False})
            for key, (sid, project, first, count) in out["sessions"].items():
                index.sessions[key] = [sid, project, tag, first, count, None, None, None]
            results_all.update(_read_facts(directory, out["files"]["facts"]))
            done += sizes[s]
            if progress:
                progress("project", done, total)
    finally:
        for name in raw.values():
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    m.parts["session"].sort(key=lambda p: p["tag"])
    meta = _meta_of(meta_obs)
    cross = _assemble_all(directory, gen, m, index, results_all, meta, None, seen_events.__contains__)
    _write_meta(directory, gen, m, meta_obs)
    return _finish(directory, m, previous, index, "full", reason, total, len(results_all), len(index.projects),
                   cross + len(m.parts["session"]))


# A full build of at least this many events runs its shards in worker processes.
PARALLEL_MIN_EVENTS: Final = 200_000


def _workers(events: int) -> int:
    env = os.environ.get("AGENTLOG_PROJECT_WORKERS")
    if env is not None:
        return max(1, int(env))
    if events < PARALLEL_MIN_EVENTS:
        return 1
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))


def _run_jobs(directory: str, gen: int, jobs: list[tuple[int, str]], gone: list[str],
              workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Run :func:`_shard_job` for each (shard, raw observation file) in up to ``workers``
    child processes (``python -m agentlog.projection.persist``: a plain subprocess
    needs nothing from the caller's ``__main__``); yields each shard's result."""
    import subprocess
    import sys
    import tempfile

    queue = list(jobs)
    running: list[tuple[int, Any, Any]] = []
    failed: list[str] = []
    while queue or running:
        while queue and len(running) < workers:
            s, raw = queue.pop(0)
            spec = orjson.dumps({"directory": directory, "gen": gen, "shard": s, "raw": raw, "gone": gone})
            errors = tempfile.TemporaryFile()
            proc = subprocess.Popen([sys.executable, "-m", "agentlog.projection.persist"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=errors)
            assert proc.stdin is not None
            proc.stdin.write(spec)
            proc.stdin.close()
            running.append((s, proc, errors))
        s, proc, errors = running.pop(0)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        proc.wait()
        errors.seek(0)
        err = errors.read()
        errors.close()
        if proc.returncode != 0 or not out:
            failed.append(f"shard {s}: exit {proc.returncode}, {len(out)} bytes out: "
                          f"{err.decode('utf-8', 'replace')[-2000:]}")
            continue
        yield s, orjson.loads(out)
    if failed:
        raise RuntimeError("projecting in worker processes failed: " + "; ".join(failed))


def _shard_job(directory: str, gen: int, s: int, raw: str, gone: list[str]) -> dict[str, Any]:
    """Project one shard from its raw observation file and write its part (in a worker
    process): the tag, the files and, per session key, [id, project, first batch, batches]."""
    sessions = _by_session(_read_raw(directory, raw))
    results = _project_sessions(sessions, frozenset(gone))
    tag = f"g{gen}s{s:02d}"
    part, batches = _write_session_part(directory, tag, sessions, results)
    out: dict[str, list[Any]] = {}
    for key, _ in sessions:
        sid, project = _entry(key, results.get(key), None)
        out[key] = [sid, project, *batches[key]]
    return {"tag": tag, "files": part["files"], "sessions": out}


def _meta_of(obs: list[Obs]) -> Meta:
    meta = Meta()
    for o in ordered(obs):
        (meta.corrections if o.kind == "correction" else meta.retractions).append(o)
    return meta


# -- incremental --------------------------------------------------------------------------


def _incremental(root: str, directory: str, manifest: Manifest, version: int | None, new_rows: Any,
                 new_meta: list[Obs]) -> RefreshReport:
    import pyarrow as pa

    gen = manifest.generation + 1
    index = _read_index(directory, manifest.files.get("index"))
    m = Manifest(table_id=manifest.table_id, store_version=version, generation=gen,
                 events=manifest.events + new_rows.num_rows, at=manifest.at,
                 parts={f: [dict(p, stale=list(p["stale"])) for p in ps] for f, ps in manifest.parts.items()},
                 files=dict(manifest.files))
    old_meta = _read_meta(directory, manifest)
    meta_obs = old_meta + new_meta
    meta = _meta_of(meta_obs)
    gone = meta.retracted_events()
    sessions: list[tuple[str, Any]] = []
    observed: dict[str, list[Obs]] = {}
    remembered = _OBSERVED.pop(os.path.abspath(directory), {})
    for key, rows in _by_session(new_rows.filter(_not_meta(new_rows))):
        old = index.sessions.get(key)
        new_obs = list(from_arrow(rows))
        if old is not None:
            obs_file = m.part("session", old[2])["files"]["obs"]
            before = pa.Table.from_batches(_obs_batches(directory, obs_file, old[3], old[4]), schema=rows.schema)
            rows = pa.concat_tables([before, rows])
            was = remembered.get(key)
            new_obs = (was[1] if was is not None and was[0] == (old[2], old[3], old[4])
                       else list(from_arrow(before))) + new_obs
        sessions.append((key, rows))
        observed[key] = new_obs
    results = _project_sessions(sessions, gone, observed)
    touched: set[str] = set()
    parts_written = 0
    if sessions:
        tag = f"g{gen}d"
        part, batches = _write_session_part(directory, tag, sessions, results)
        m.parts["session"].append(part)
        parts_written += 1
        for key, _ in sessions:
            old = index.sessions.get(key)
            sid, project = _entry(key, results.get(key), old)
            if old is not None:
                if old[0] is not None:
                    m.part("session", old[2])["stale"].append(old[0])
                if old[1] is not None:
                    touched.add(old[1])
            if project is not None:
                touched.add(project)
            index.sessions[key] = [sid, project, tag, *batches[key], *(old[5:] if old else [None, None, None])]
        # the observations of the sessions rebuilt now, for the next refresh of this process
        _OBSERVED[os.path.abspath(directory)] = {
            key: ((tag, *batches[key]), observed[key]) for key, _ in sessions if key in batches}
    for r in results.values():
        m.at = max(m.at, r.session["last_event_at"])
    for o in new_meta:
        m.at = max(m.at, o.observed_at)
    event_exists = _known_targets(directory, manifest, gone, new_rows)
    reassembled = len(touched)
    if new_meta:
        # a correction or an attempt's retraction: every project joins again
        keys = [k for k, e in index.sessions.items() if e[0] is not None]
        everything = _load_results(directory, m, index, keys)
        cross = _assemble_all(directory, gen, m, index, everything, meta, None, event_exists)
        _write_meta(directory, gen, m, meta_obs)
        reassembled = len(index.projects)
    else:
        cross = _assemble_projects(directory, gen, manifest, m, index, touched, {k for k, _ in sessions}, meta,
                                   event_exists)
    _merge_deltas(directory, gen, m, index)
    return _finish(directory, m, manifest, index, "incremental", "", new_rows.num_rows, len(results),
                   reassembled, cross + parts_written)


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


def _known_targets(directory: str, manifest: Manifest, gone: frozenset[str], new_rows: Any) -> Callable[[str], bool]:
    """Which retracted event ids are in the event set: those earlier refreshes
    matched, and those among the new rows (a retracted event may arrive after
    its retraction)."""
    known = set(previous_known_targets(manifest, directory))
    if gone:
        known.update(gone.intersection(new_rows.column("event_id").to_pylist()))
    return known.__contains__


def previous_known_targets(previous: Manifest | None, directory: str) -> list[str]:
    """Event ids earlier retractions matched (an incremental refresh adds no
    event retraction: those force a full build)."""
    if previous is None or "retractions" not in previous.files:
        return []
    t = _read_table(directory, previous.files["retractions"], STORED_ASSEMBLED["retractions"])
    out = []
    for ttype, target, matched in zip(t.column("target_type").to_pylist(), t.column("target").to_pylist(),
                                      t.column("matched").to_pylist()):
        if ttype == "event" and matched:
            out.append(target)
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


# -- the cross-session stage, stored --------------------------------------------------------

def _unit_signatures(p: Projection) -> dict[str, str]:
    """Per session, the work units its attempts belong to, in order: the only thing the
    cross-session stage decides about a session from other sessions while no
    correction or retraction is new."""
    out: dict[str, list[str]] = {}
    for a in p.tables["attempts"]:
        sid = a["session_id"]
        units = out.get(sid)
        if units is None:
            units = out[sid] = []
        units.append(a["work_unit_id"] or "")
    return {sid: "\x1f".join(units) for sid, units in out.items()}


def _stored_rows(p: Projection, sessions: set[str] | None = None) -> tuple[
        dict[str, dict[str, list[dict[str, Any]]]], dict[str, dict[str, list[dict[str, Any]]]]]:
    """The cross-session stage's rows as stored, by session id (only ``sessions``,
    default all) and by project key."""
    by_session: dict[str, dict[str, list[dict[str, Any]]]] = {}
    by_project: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def put(groups: dict[str, dict[str, list[dict[str, Any]]]], key: str, table: str, row: dict[str, Any]) -> None:
        g = groups.get(key)
        if g is None:
            g = groups[key] = {}
        rows = g.get(table)
        if rows is None:
            rows = g[table] = []
        rows.append(row)

    def wanted(rows: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        return rows if sessions is None else (r for r in rows if r["session_id"] in sessions)

    for s in wanted(p.tables["sessions"]):
        put(by_session, s["session_id"], "sessions", s | dict.fromkeys(AT_DEPENDENT["sessions"]))
    for t in wanted(p.tables["turns"]):
        put(by_session, t["session_id"], "turns_overlay", {k: t[k] for k in TURN_OVERLAY} | {"session_id": t["session_id"]})
    for a in wanted(p.tables["attempts"]):
        put(by_session, a["session_id"], "attempts_overlay",
            {k: a[k] for k in ATTEMPT_OVERLAY} | {"commit_shas": a["commit_shas"], "session_id": a["session_id"]})
    for name in ("signals", "commits", "decisions"):
        for row in wanted(p.tables[name]):
            put(by_session, row["session_id"], name, row)
    for name in ("handoffs", "conflicts", "edges_cross", "retracted_ids"):
        for row in p.tables[name]:
            put(by_project, row["project_id"] or "", name, row)
    for u in p.tables["work_units"]:
        put(by_project, u["project_id"] or "", "work_units", u | dict.fromkeys(AT_DEPENDENT["work_units"]))
    return by_session, by_project


def _project_stats(p: Projection) -> dict[str, dict[str, int]]:
    from collections import Counter

    out: dict[str, dict[str, int]] = {}
    for name, what in (("sessions", "sessions"), ("turns", "turns"), ("attempts", "attempts"),
                       ("handoffs", "handoffs"), ("work_units", "work_units"), ("decisions", "decisions"),
                       ("conflicts", "conflicts"), ("retracted_ids", "retracted_attempts")):
        for project, n in Counter(row["project_id"] for row in p.tables[name]).items():
            out.setdefault(project or "", {})[what] = n
    return out


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


def _assemble_all(directory: str, gen: int, m: Manifest, index: Index, results: dict[str, SessionResult],
                  meta: Meta, at: int | None, event_exists: Callable[[str], bool]) -> int:
    """The cross-session stage over every session: one new part of each family
    replaces the old ones. Returns the parts written."""
    p = assemble(results.values(), meta, at, event_exists)
    m.at = p.at
    by_session, by_project = _stored_rows(p)
    tag = f"g{gen}a"
    m.parts["asession"] = [_write_group_part(directory, tag, "asession", by_session) | {"delta": False}]
    m.parts["aproject"] = [_write_group_part(directory, tag, "aproject", by_project) | {"delta": False}]
    signatures = _unit_signatures(p)
    for entry in index.sessions.values():
        group = by_session.get(entry[0]) if entry[0] is not None else None
        entry[5:] = [tag, _digest(group), signatures.get(entry[0], "")] if group is not None else [None, None, None]
    stats = _project_stats(p)
    index.projects = {key: [tag, stats.get(key, {}), _digest(by_project.get(key, {}))]
                      for key in sorted(set(stats) | set(by_project))}
    _write_global(directory, gen, m, {"corrections": p.tables["corrections"],
                                      "retractions": p.tables["retractions"]})
    return 2


def _assemble_projects(directory: str, gen: int, previous: Manifest, m: Manifest, index: Index,
                       projects: set[str], rebuilt: set[str], meta: Meta, event_exists: Callable[[str], bool]) -> int:
    """The cross-session stage over the sessions of ``projects`` only (work units,
    handoffs and conflicts never cross projects); writes the sessions and projects
    whose stored rows changed (their digests tell) as new parts. With no project,
    only the corrections and retractions are looked at again (a retracted event
    may have arrived). Only the sessions ``rebuilt`` (keys) and those whose attempts
    changed work unit can have other rows than stored: the others are not looked
    at. Returns the parts written."""
    by_project_keys = index.project_keys()
    keys = [k for pk in sorted(projects) for k in by_project_keys.get(pk, []) if index.sessions[k][0] is not None]
    results = _load_results(directory, m, index, keys)
    memo = _MEMOS.setdefault(os.path.abspath(directory), Memo())
    p = assemble(results.values(), meta, m.at, event_exists, memo)
    key_of_sid = {index.sessions[k][0]: k for k in keys}
    signatures = _unit_signatures(p)
    look = {sid for sid, k in key_of_sid.items()
            if k in rebuilt or index.sessions[k][7] != signatures.get(sid, "")}
    by_session, by_project = _stored_rows(p, look)
    written = 0
    tag = f"g{gen}a"
    changed: dict[str, dict[str, list[dict[str, Any]]]] = {}
    digests: dict[str, str] = {}
    for sid, group in by_session.items():
        digest = _digest(group)
        entry = index.sessions[key_of_sid[sid]]
        entry[7] = signatures.get(sid, "")
        if entry[6] != digest:
            changed[sid] = group
            digests[sid] = digest
    if changed:
        m.parts["asession"].append(_write_group_part(directory, tag, "asession", changed))
        written += 1
        for sid in changed:
            entry = index.sessions[key_of_sid[sid]]
            if entry[5] is not None:
                m.part("asession", entry[5])["stale"].append(sid)
            entry[5:7] = [tag, digests[sid]]
    stats = _project_stats(p)
    changed_projects: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for pk in sorted(projects):
        group = by_project.get(pk, {})
        digest = _digest(group)
        old = index.projects.get(pk)
        if old is None or old[2] != digest:
            changed_projects[pk] = group
            if old is not None:
                m.part("aproject", old[0])["stale"].append(pk)
            index.projects[pk] = [tag, stats.get(pk, {}), digest]
        else:
            index.projects[pk] = [old[0], stats.get(pk, {}), digest]
    if changed_projects:
        m.parts["aproject"].append(_write_group_part(directory, tag, "aproject", changed_projects))
        written += 1
    # corrections and retractions: a row is the one this pass made when its target
    # is in these projects (or nowhere before), else the one stored
    previous_rows = _read_global(directory, previous)
    merged: dict[str, list[dict[str, Any]]] = {}
    for name in GLOBAL_FAMILY:
        before = {r["event_id"]: r for r in previous_rows[name]}
        rows = []
        for row in p.tables[name]:
            old_row = before.get(row["event_id"])
            if row["_project"] is None and old_row is not None and old_row["_project"] is not None \
                    and old_row["_project"] not in projects:
                row = old_row
            rows.append(row)
        merged[name] = rows
    if merged != previous_rows:
        _write_global(directory, gen, m, merged)
    return written


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
    import pyarrow.compute as pc

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


def _finish(directory: str, m: Manifest, previous: Manifest | None, index: Index, mode: str, reason: str,
            new_events: int, rebuilt: int, projects: int, parts: int) -> RefreshReport:
    m.files["index"] = _write_index(directory, f"index-{m.generation}.json", index)
    counts: dict[str, int] = {}
    for _, stats, _ in index.projects.values():
        for k, v in stats.items():
            counts[k] = counts.get(k, 0) + v
    for name in GLOBAL_FAMILY:
        counts[name] = _rows_in(directory, m.files.get(name))
    m.counts = counts | {"events": m.events}
    write_atomic(os.path.join(directory, "manifest.json"), orjson.dumps(asdict(m)), FILE_MODE)
    _collect(directory, m, previous)
    return RefreshReport(mode, reason, new_events, rebuilt, projects, parts, store_version=m.store_version,
                         counts=m.counts)


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


@dataclass
class TableSource:
    """Where a stored table's rows are: files, and per file the groups to skip."""

    group_column: str | None
    files: list[tuple[str, list[str]]]
    """(absolute path, stale group keys)."""


def session_files(root: str, manifest: Manifest, keys: Iterable[str], table: str) -> list[str] | None:
    """The files holding the current rows of these sessions (keys ``provider \x1f provider session
    id``) in ``table`` — a ``session`` family table (``tool_calls``, ``turns_base`` …) or an
    ``asession`` one (``turns_overlay``, ``attempts_overlay`` …) — as absolute paths, each once: what
    a reader of a few sessions reads instead of every part. None when a key is not in the index
    (the caller reads the views)."""
    family = "session" if table in SESSION_TABLES else "asession" if table in SESSION_FAMILY else None
    if family is None:
        raise ValueError(f"{table} is not stored per session")
    if not manifest.files.get("index"):
        return None
    directory = os.path.abspath(projection_dir(root))
    sessions = _index_data(directory, manifest.files["index"])["sessions"]
    out: list[str] = []
    for key in keys:
        entry = sessions.get(key)
        if entry is None:
            return None
        tag = entry[2] if family == "session" else entry[5]
        try:
            name = manifest.part(family, tag)["files"].get(table)
        except KeyError:
            return None
        if name:  # None: the part holds no row of this table
            path = os.path.join(directory, name)
            if path not in out:
                out.append(path)
    return out


def sources(root: str, manifest: Manifest | None = None) -> dict[str, TableSource]:
    """Every stored table's files as of ``manifest`` (default: the current one)."""
    directory = os.path.abspath(projection_dir(root))
    m = manifest if manifest is not None else load_manifest(root)
    out: dict[str, TableSource] = {}
    for family, tables in FAMILIES.items():
        for name in tables:
            files = []
            for p in (m.parts.get(family, []) if m else []):
                f = p["files"].get(name)
                if f:
                    files.append((os.path.join(directory, f), sorted(set(p["stale"]))))
            out[name] = TableSource(GROUP_COLUMN[name], files)
    for name in GLOBAL_FAMILY:
        f = m.files.get(name) if m else None
        out[name] = TableSource(None, [(os.path.join(directory, f), [])] if f else [])
    return out


def _worker_main() -> None:
    """``python -m agentlog.projection.persist``: one shard job, spec on stdin, result on stdout."""
    import sys

    spec = orjson.loads(sys.stdin.buffer.read())
    out = _shard_job(spec["directory"], spec["gen"], spec["shard"], spec["raw"], spec["gone"])
    sys.stdout.buffer.write(orjson.dumps(out))


if __name__ == "__main__":
    _worker_main()
