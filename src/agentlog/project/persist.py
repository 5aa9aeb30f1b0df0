"""The projection kept on disk, and brought up to date incrementally.

Layout under ``<data root>/projection/``::

    manifest.json                     what is current (atomically replaced)
    obs-SS-G.arrow                    the observations of shard SS (the cache re-projection reads;
                                      Arrow IPC, lz4: written batch by batch, read whole)
    tool_calls-SS-G.parquet, edges-…, attempts_base-…, turns_base-…   per-session rows of shard SS
    facts-SS-G.json                   per session: what the cross-session stage reads
    meta-G.parquet                    every correction and retraction
    <table>-G.parquet                 the assembled tables (sessions, work_units, …)

Sessions are spread over :data:`SHARDS` shards by a CRC-32 of their key. A
refresh reads only the Delta files the store added since the manifest's
version (their ``add`` actions with ``dataChange``), finds the sessions they
touch, re-projects only those sessions (from their shard's observation
cache plus the new rows), rewrites only those shards, and re-runs the
cheap cross-session stage over every session's facts. A fresh process
therefore never recomputes history.

It falls back to a full build when it cannot prove the increment: no
manifest, another algorithm or format, another table (a rebuilt store), a
missing commit file, a commit that removed data (a purge), or a new
retraction of an event or a session (which changes what is projected, not
only how the results join). Each refresh writes new files and a new
manifest, then deletes the files neither it nor the previous manifest
names — a reader that loaded the previous manifest can still read.

Everything runs under ``state/projection.lock``.
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Final, Iterator

import orjson

from ..fileio import write_atomic
from ..paths import FILE_MODE, ensure_dir
from .assemble import ATTEMPT_OVERLAY, TURN_OVERLAY, Meta, Projection, assemble, light
from .observe import COLUMNS, META_KINDS, Obs, from_arrow, ordered
from .session import ALGORITHM_VERSION, SessionResult, build_session
from .tables import ASSEMBLED, SHARDED, to_arrow

FORMAT: Final = 2
SHARDS: Final = 16
LOCK_NAME: Final = "projection.lock"
OBS_COLUMNS: Final = list(COLUMNS) + ["text"]


def projection_dir(root: str) -> str:
    return os.path.join(root, "projection")


def shard_of(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % SHARDS


@dataclass
class Manifest:
    format: int = FORMAT
    algorithm_version: str = ALGORITHM_VERSION
    table_id: str | None = None
    """The Delta table's id: another id means the store was rebuilt."""
    store_version: int | None = None
    generation: int = 0
    at: int = 0
    """Reference time the assembled tables were computed at (latest observed time)."""
    events: int = 0
    shard_files: dict[str, list[str | None]] = field(default_factory=dict)
    """``obs``, ``facts`` and each per-session table → file of each shard (None: empty)."""
    files: dict[str, str] = field(default_factory=dict)
    """``meta`` and each assembled table → file."""
    counts: dict[str, int] = field(default_factory=dict)

    def referenced(self) -> set[str]:
        out = set(self.files.values())
        for files in self.shard_files.values():
            out.update(f for f in files if f)
        return out


@dataclass
class RefreshReport:
    mode: str
    """``none`` (already current), ``incremental`` or ``full``."""
    reason: str = ""
    new_events: int = 0
    sessions_rebuilt: int = 0
    shards_rewritten: int = 0
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


# Facts files already parsed by this process (absolute path → sessions' light
# results), keyed with the file's mtime and size: a long-lived process (the
# daemon, the dashboard) refreshes without parsing every shard's facts again.
_FACTS_CACHE: dict[tuple[str, int, int], dict[str, SessionResult]] = {}


def _cache_key(directory: str, name: str) -> tuple[str, int, int]:
    path = os.path.join(os.path.abspath(directory), name)
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


def _result_to_json(r: SessionResult) -> dict[str, Any]:
    return {"key": r.key, "session": r.session, "turns": r.turns, "attempts": r.attempts, "signals": r.signals,
            "commits": r.commits, "facts": r.facts}


def _result_from_json(d: dict[str, Any]) -> SessionResult:
    return SessionResult(d["key"], d["session"], d["turns"], d["attempts"], [], d["signals"], d["commits"], [],
                         d["facts"])


def _read_facts(directory: str, name: str | None) -> dict[str, SessionResult]:
    if name is None:
        return {}
    key = _cache_key(directory, name)
    cached = _FACTS_CACHE.get(key)
    if cached is not None:
        return cached
    import gc

    with open(os.path.join(directory, name), "rb") as fh:
        raw = fh.read()
    enabled = gc.isenabled()
    gc.disable()  # parsing allocates many containers and makes no cycles
    try:
        out = {k: _result_from_json(v) for k, v in orjson.loads(raw).items()}
    finally:
        if enabled:
            gc.enable()
    _FACTS_CACHE[key] = out
    return out


def _write_facts(directory: str, name: str, facts: dict[str, SessionResult]) -> None:
    data = orjson.dumps({k: _result_to_json(facts[k]) for k in sorted(facts)})
    _write_file(os.path.join(directory, name), data)
    _FACTS_CACHE[_cache_key(directory, name)] = facts


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _write_table(directory: str, name: str, table: Any) -> str | None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if table.num_rows == 0:
        return None
    path = os.path.join(directory, name)
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


def _write_obs(directory: str, name: str, table: Any) -> str | None:
    import pyarrow as pa

    if table.num_rows == 0:
        return None
    path = os.path.join(directory, name)
    with pa.ipc.new_file(path, table.schema, options=_ipc_options()) as w:
        w.write_table(table)
    os.chmod(path, FILE_MODE)
    return name


def _read_obs(directory: str, name: str | None) -> Any:
    import pyarrow as pa

    if name is None:
        return _obs_schema().empty_table()
    with pa.ipc.open_file(os.path.join(directory, name)) as r:
        return r.read_all()


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
        mask = pc.equal(shards, s)
        out[s] = table.filter(mask)
    return out


def _obs_schema() -> Any:
    from ..store.schema import EVENTS_SCHEMA

    import pyarrow as pa

    return pa.schema([EVENTS_SCHEMA.field(n) for n in OBS_COLUMNS])


def _meta_obs(table: Any) -> list[Obs]:
    import pyarrow.compute as pc
    import pyarrow as pa

    if table.num_rows == 0:
        return []
    mask = pc.is_in(table.column("kind"), value_set=pa.array(sorted(META_KINDS)))
    return list(from_arrow(table.filter(mask)))


def _build(rows: Any, keys: set[str] | None, gone: frozenset[str]) -> dict[str, SessionResult]:
    """Session results of the observations in ``rows`` (only sessions in ``keys``).

    Rows are grouped by session in Arrow first and turned into observations one
    session at a time, so only one session's observations are alive at once."""
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return {}
    indices, all_keys = _session_keys(rows)
    order = pc.sort_indices(indices)
    grouped = rows.take(order)
    runs = indices.take(order).to_pylist()
    out: dict[str, SessionResult] = {}
    start = 0
    n = len(runs)
    while start < n:
        end = start + 1
        while end < n and runs[end] == runs[start]:
            end += 1
        k = all_keys[runs[start]]
        if keys is None or k in keys:
            obs = [o for o in from_arrow(grouped.slice(start, end - start))
                   if o.kind not in META_KINDS and o.event_id not in gone]
            evs = ordered(obs)
            if evs:
                out[k] = build_session(k, evs)
        start = end
    return dict(sorted(out.items()))


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


class _Writer:
    """Writes one generation's files."""

    def __init__(self, directory: str, generation: int) -> None:
        self.dir = directory
        self.gen = generation

    def shard_table(self, table: str, shard: int, data: Any) -> str | None:
        return _write_table(self.dir, f"{table}-{shard:02d}-{self.gen}.parquet", data)

    def table(self, table: str, data: Any) -> str | None:
        return _write_table(self.dir, f"{table}-{self.gen}.parquet", data)


def refresh(root: str, *, lock_timeout: float = 60.0, full: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
    """Bring the stored projection up to date with the store (the caller catches
    the store up first). ``full`` re-projects everything."""
    from ..store.ingest import acquire_lock

    started = time.perf_counter()
    ensure_dir(projection_dir(root))
    fd = acquire_lock(root, lock_timeout, LOCK_NAME)
    if fd is None:
        raise ProjectionBusy(f"another process has held {LOCK_NAME} for more than {lock_timeout:g} s")
    try:
        report = _refresh_locked(root, full, progress)
    finally:
        os.close(fd)
    report.seconds = time.perf_counter() - started
    return report


def _table_state(root: str) -> tuple[Any, int | None, str | None]:
    from ..store.ingest import open_table
    from ..store.schema import events_path

    table = open_table(events_path(root))
    if table is None:
        return None, None, None
    return table, table.version(), table.metadata().id


def _new_files(root: str, since: int, until: int) -> list[str] | None:
    """Files the store's commits ``since+1 … until`` added with new data; None when
    that cannot be read or a commit removed data."""
    from ..store.schema import events_path

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

    from ..store.schema import events_path

    base = os.path.abspath(events_path(root))
    fs = pafs.SubTreeFileSystem(base, pafs.LocalFileSystem())
    dataset = ds.dataset([unquote(f) for f in files], format="parquet", filesystem=fs, schema=_obs_schema())
    return dataset.to_table(columns=OBS_COLUMNS)


def _refresh_locked(root: str, full: bool,
                    progress: Callable[[str, int, int], None] | None) -> RefreshReport:
    import pyarrow as pa

    directory = projection_dir(root)
    table, version, table_id = _table_state(root)
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
        return _full(root, directory, table, version, table_id, manifest, reason or "full", progress)
    assert manifest is not None
    return _incremental(root, directory, manifest, version, new_rows, new_meta)


def _full(root: str, directory: str, table: Any, version: int | None, table_id: str | None,
          previous: Manifest | None, reason: str,
          progress: Callable[[str, int, int], None] | None) -> RefreshReport:
    """Project everything: one streaming pass spreads the store's rows over the
    shards' observation files (memory bounded by a batch, not the store), then
    each shard is projected — in worker processes on a large store."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..store.schema import events_dataset

    gen = (previous.generation + 1) if previous else 1
    writer = _Writer(directory, gen)
    dataset = events_dataset(root)
    m = Manifest(table_id=table_id, store_version=version, generation=gen)
    m.shard_files = {name: [None] * SHARDS for name in ["obs", "facts", *SHARDED]}
    schema = _obs_schema()
    writers: dict[int, Any] = {}
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
            for s, part in _by_shard(tab).items():
                w = writers.get(s)
                if w is None:
                    name = f"obs-{s:02d}-{gen}.arrow"
                    w = writers[s] = pa.ipc.new_file(os.path.join(directory, name), schema, options=_ipc_options())
                    m.shard_files["obs"][s] = name
                w.write_table(part)
                sizes[s] = sizes.get(s, 0) + part.num_rows
            if progress:
                progress("read", total, total)
    finally:
        for w in writers.values():
            w.close()
    for obs_file in m.shard_files["obs"]:
        if obs_file:
            os.chmod(os.path.join(directory, obs_file), FILE_MODE)
    m.events = total
    gone = _meta_of(meta_obs).retracted_events()
    seen_events: set[str] = set()
    if gone:
        for s in sizes:
            ids = _read_obs(directory, m.shard_files["obs"][s]).column("event_id")
            seen_events.update(gone.intersection(ids.to_pylist()))
    results_all: dict[str, SessionResult] = {}
    done = 0
    jobs = [(s, str(m.shard_files["obs"][s])) for s in sorted(sizes, key=lambda x: -sizes[x])]
    workers = _workers(total)
    if workers > 1:
        finished: Iterator[tuple[int, dict[str, str | None]]] = _run_jobs(directory, gen, jobs, sorted(gone), workers)
    else:
        finished = ((s, _shard_job(directory, gen, s, obs, sorted(gone))) for s, obs in jobs)
    for s, files in finished:
        for name, f in files.items():
            m.shard_files[name][s] = f
        results_all.update(_read_facts(directory, files["facts"]))
        done += sizes[s]
        if progress:
            progress("project", done, total)
    return _finish(root, directory, writer, m, previous, results_all, meta_obs, "full", reason, total,
                   len(results_all), SHARDS, seen_events.__contains__)


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
              workers: int) -> Iterator[tuple[int, dict[str, str | None]]]:
    """Run :func:`_shard_job` for each (shard, observation file) in up to ``workers``
    child processes (``python -m agentlog.project.persist``: a plain subprocess
    needs nothing from the caller's ``__main__``); yields each shard's files."""
    import subprocess
    import sys
    import tempfile

    queue = list(jobs)
    running: list[tuple[int, Any, Any]] = []
    failed: list[str] = []
    while queue or running:
        while queue and len(running) < workers:
            s, obs = queue.pop(0)
            spec = orjson.dumps({"directory": directory, "gen": gen, "shard": s, "obs": obs, "gone": gone})
            errors = tempfile.TemporaryFile()
            proc = subprocess.Popen([sys.executable, "-m", "agentlog.project.persist"], stdin=subprocess.PIPE,
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


def _shard_job(directory: str, gen: int, s: int, obs_name: str, gone: list[str]) -> dict[str, str | None]:
    """Project one shard from its observation file and write its files (in a worker process)."""
    part = _read_obs(directory, obs_name)
    results = _build(part, None, frozenset(gone))
    writer = _Writer(directory, gen)
    files: dict[str, str | None] = {}
    for name, schema in SHARDED.items():
        files[name] = writer.shard_table(name, s, to_arrow(_rows(results, name), schema))
    facts = f"facts-{s:02d}-{gen}.json"
    _write_facts(directory, facts, {k: light(r) for k, r in results.items()})
    files["facts"] = facts
    return files


def _meta_of(obs: list[Obs]) -> Meta:
    meta = Meta()
    for o in ordered(obs):
        (meta.corrections if o.kind == "correction" else meta.retractions).append(o)
    return meta


def _incremental(root: str, directory: str, manifest: Manifest, version: int | None, new_rows: Any,
                 new_meta: list[Obs]) -> RefreshReport:
    import pyarrow as pa
    import pyarrow.compute as pc

    gen = manifest.generation + 1
    writer = _Writer(directory, gen)
    m = Manifest(table_id=manifest.table_id, store_version=version, generation=gen,
                 events=manifest.events + new_rows.num_rows,
                 shard_files={k: list(v) for k, v in manifest.shard_files.items()}, files=dict(manifest.files))
    old_meta = _read_meta(directory, manifest)
    meta_obs = old_meta + new_meta
    gone = _meta_of(meta_obs).retracted_events()
    not_meta = pc.invert(pc.is_in(new_rows.column("kind"), value_set=pa.array(sorted(META_KINDS))))
    regular = new_rows.filter(not_meta)
    rebuilt = 0
    shards = _by_shard(regular)
    results_all: dict[str, SessionResult] = {}
    for s in range(SHARDS):
        facts = _read_facts(directory, manifest.shard_files["facts"][s])
        part = shards.get(s)
        if part is None:
            results_all.update(facts)
            continue
        old_obs = _read_obs(directory, manifest.shard_files["obs"][s])
        obs_rows = pa.concat_tables([old_obs, part.cast(old_obs.schema)]) if old_obs.num_rows else part
        _, keys_list = _session_keys(part)
        keys = set(keys_list)
        results = _build(_rows_of_sessions(obs_rows, keys), keys, gone)
        rebuilt += len(results)
        m.shard_files["obs"][s] = _write_obs(directory, f"obs-{s:02d}-{gen}.arrow", obs_rows)
        session_ids = {r.session["session_id"] for r in results.values()}
        for name, schema in SHARDED.items():
            old = _read_table(directory, manifest.shard_files[name][s], schema)
            if old.num_rows:
                keep = pc.invert(pc.is_in(old.column("session_id"), value_set=pa.array(sorted(session_ids))))
                old = old.filter(keep)
            fresh = to_arrow(_rows(results, name), schema)
            m.shard_files[name][s] = writer.shard_table(name, s, pa.concat_tables([old, fresh]))
        merged = dict(facts)
        merged.update({k: light(r) for k, r in results.items()})
        name = f"facts-{s:02d}-{gen}.json"
        _write_facts(directory, name, merged)
        m.shard_files["facts"][s] = name
        results_all.update(merged)
    return _finish(root, directory, writer, m, manifest, results_all, meta_obs, "incremental", "",
                   new_rows.num_rows, rebuilt, len(shards), _known_targets(directory, manifest, gone, new_rows))


def _rows_of_sessions(rows: Any, keys: set[str]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    indices, all_keys = _session_keys(rows)
    wanted = pa.array([k in keys for k in all_keys], type=pa.bool_())
    return rows.filter(pc.take(wanted, indices))


def _read_meta(directory: str, manifest: Manifest) -> list[Obs]:
    name = manifest.files.get("meta")
    if not name:
        return []
    return list(from_arrow(_read_table(directory, name, _obs_schema())))


def _finish(root: str, directory: str, writer: _Writer, m: Manifest, previous: Manifest | None,
            results: dict[str, SessionResult], meta_obs: list[Obs], mode: str, reason: str, new_events: int,
            rebuilt: int, shards: int, event_exists: Callable[[str], bool] | None) -> RefreshReport:
    meta = _meta_of(meta_obs)
    if event_exists is None:
        known = set(previous_known_targets(previous, directory))
        event_exists = known.__contains__
    projection = assemble(results.values(), meta, None, event_exists)
    write_assembled(writer, m, projection, meta_obs)
    m.at = projection.at
    m.counts = dict(projection.stats) | {"events": m.events}
    write_atomic(os.path.join(directory, "manifest.json"), orjson.dumps(asdict(m)), FILE_MODE)
    _collect(directory, m, previous)
    return RefreshReport(mode, reason, new_events, rebuilt, shards, store_version=m.store_version,
                         counts=m.counts)


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
    from .tables import RETRACTIONS

    t = _read_table(directory, previous.files["retractions"], RETRACTIONS)
    out = []
    for ttype, target, matched in zip(t.column("target_type").to_pylist(), t.column("target").to_pylist(),
                                      t.column("matched").to_pylist()):
        if ttype == "event" and matched:
            out.append(target)
    return out


def write_assembled(writer: _Writer, m: Manifest, p: Projection, meta_obs: list[Obs]) -> None:
    import pyarrow as pa

    from .tables import ATTEMPTS_OVERLAY, TURNS_OVERLAY

    rows = dict(p.tables)
    rows["attempts_overlay"] = [{k: a[k] for k in ATTEMPT_OVERLAY} | {"commit_shas": a["commit_shas"]}
                                for a in rows.pop("attempts")]
    rows["turns_overlay"] = [{k: t[k] for k in TURN_OVERLAY} for t in rows.pop("turns")]
    m.files = {}
    for name, schema in ASSEMBLED.items():
        f = writer.table(name, to_arrow(rows[name], schema))
        if f:
            m.files[name] = f
    if meta_obs:
        table = _obs_rows(meta_obs)
        f = writer.table("meta", table)
        if f:
            m.files["meta"] = f


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
            for key in [k for k in _FACTS_CACHE if k[0] == gone_path]:
                del _FACTS_CACHE[key]


def source_files(root: str, manifest: Manifest | None = None) -> dict[str, list[str]]:
    """Every stored projection table's files (absolute paths; empty: no rows), by
    name, as of ``manifest`` (default: the current one)."""
    directory = os.path.abspath(projection_dir(root))
    m = manifest if manifest is not None else load_manifest(root)
    out: dict[str, list[str]] = {}
    for name in SHARDED:
        out[name] = [os.path.join(directory, f) for f in (m.shard_files.get(name, []) if m else []) if f]
    for name in ASSEMBLED:
        f = m.files.get(name) if m else None
        out[name] = [os.path.join(directory, f)] if f else []
    return out


def _worker_main() -> None:
    """``python -m agentlog.project.persist``: one shard job, spec on stdin, files on stdout."""
    import sys

    spec = orjson.loads(sys.stdin.buffer.read())
    files = _shard_job(spec["directory"], spec["gen"], spec["shard"], spec["obs"], spec["gone"])
    sys.stdout.buffer.write(orjson.dumps(files))


if __name__ == "__main__":
    _worker_main()
