"""The refresh: under the projection lock, a full or an incremental build, and its report.

The algorithm, and when it falls back to a full build, is described in :mod:`agentlog.projection.persist`.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Final, Iterator

import orjson

from agentlog.core.fileio import write_atomic
from agentlog.core.locks import Busy
from agentlog.core.paths import FILE_MODE, ensure_dir
from agentlog.projection.assemble import Meta
from agentlog.projection.observe import Obs, from_arrow, ordered
from agentlog.projection.persist import reclassify
from agentlog.projection.persist.cross_session import _MEMOS, _assemble_all, _assemble_projects
from agentlog.projection.persist.parts import (
    FORMAT,
    OBS_COLUMNS,
    Index,
    Manifest,
    _collect,
    _ipc_options,
    _load_results,
    _merge_deltas,
    _obs_batches,
    _obs_schema,
    _read_facts,
    _read_index,
    _read_meta,
    _read_raw,
    _read_table,
    _rows_in,
    _write_index,
    _write_meta,
    load_manifest,
    projection_dir,
)
from agentlog.projection.persist.session_parts import (
    _by_session,
    _by_shard,
    _entry,
    _meta_obs,
    _not_meta,
    _project_sessions,
    _write_session_part,
)
from agentlog.projection.persist.workers import _run_jobs, _shard_job, _workers
from agentlog.projection.session import ALGORITHM_VERSION, SessionResult
from agentlog.projection.tables import GLOBAL_FAMILY, STORED_ASSEMBLED

LOCK_NAME: Final = "projection.lock"


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


class ProjectionBusy(Busy):
    """Another process holds the projection lock for longer than the timeout."""


#: per projection directory, the observations of the sessions the last refresh of this
#: process rebuilt, with where they are stored ((part tag, first batch, batches))
_OBSERVED: dict[str, dict[str, tuple[tuple[Any, ...], list[Obs]]]] = {}


def refresh(root: str, *, lock_timeout: float = 60.0, full: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
    """Bring the stored projection up to date with the store (the caller catches
    the store up first). ``full`` re-projects everything.

    Files it creates are private (0600/0700), whatever the umask.
    """
    from agentlog.core.fileio import private_files

    with private_files():
        return _refresh(root, lock_timeout=lock_timeout, full=full, progress=progress)


def _refresh(root: str, *, lock_timeout: float = 60.0, full: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
    """The body of :func:`refresh`."""
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


def _files_dataset(root: str, files: list[str], schema: Any = None) -> Any:
    import pyarrow.dataset as ds  # type: ignore[import-untyped]
    import pyarrow.fs as pafs  # type: ignore[import-untyped]
    from urllib.parse import unquote

    from agentlog.store.schema import events_path

    base = os.path.abspath(events_path(root))
    fs = pafs.SubTreeFileSystem(base, pafs.LocalFileSystem())
    return ds.dataset([unquote(f) for f in files], format="parquet", filesystem=fs, schema=schema)


def _read_files(root: str, files: list[str]) -> Any:
    """The observation columns of the store's files ``files``, failure classes re-derived
    where an older classifier gave them (:mod:`.reclassify`)."""
    table = _files_dataset(root, files, _obs_schema()).to_table(columns=OBS_COLUMNS)
    stale = reclassify.stale_ids(table)
    if stale:
        table = reclassify.apply(table, reclassify.read_changes(root, _files_dataset(root, files), stale))
    return table


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
    stale: list[str] = []
    total = 0
    try:
        # little readahead: the pass's memory is a few batches, not a prefetched store
        batches = dataset.to_batches(columns=OBS_COLUMNS, batch_size=131_072, batch_readahead=2,
                                     fragment_readahead=1) if dataset is not None else []
        for batch in batches:
            tab = pa.Table.from_batches([batch]).cast(schema)
            total += tab.num_rows
            stale.extend(reclassify.stale_ids(tab))
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
    if stale:  # events an older classifier classified: today's class, before anything reads them
        changes = reclassify.read_changes(root, dataset, stale)
        for name in raw.values():
            before = _read_raw(directory, name)
            after = reclassify.apply(before, changes)
            if after is not before:
                with pa.ipc.new_file(os.path.join(directory, name), schema, options=_ipc_options()) as w:
                    w.write_table(after)
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
