"""Where a search hit belongs, found by its event id in a few small pages instead of whole parts.

A hit's place — its session, turn and attempt, and that attempt's outcome — is in the
projection: a tool call's row names its start and end events, a turn's its prompt, an
attempt's overlay row its outcome. Those parts are Parquet files of one row group of tens of
thousands of rows, sorted by session, so finding 20 event ids in them reads and compares whole
columns of ids (at 1.45 M events, most of a search's time).

So for each session part (its ``tool_calls`` and ``turns_base`` files together) and each
overlay file a *sidecar* is kept in ``state/search-places/``: their rows as ``key`` (an event
id, or an attempt id for the overlay) → the few columns a hit needs, sorted by key, in Arrow
IPC batches of :data:`GROUP_ROWS` rows (zstd; the file memory-mapped). Each row is one string,
its key and values joined by :data:`SEP` (``None`` as :data:`NULL`): a batch is then two
compressed buffers, not three per column — decompressing one took 140–230 µs with four
columns, 50–75 µs packed (and the files are 26 MiB instead of 37 at 1.45 M events). Each
batch's first and last key, kept in the schema's metadata, say which batch can hold a key: a
lookup of 20 keys decompresses at most 20 small batches.

A sidecar is derived from its projection files alone, and named after their names, sizes and
modification times: files the projection writes again get another sidecar, so a sidecar is
never stale; those not of the current projection are removed (:func:`prepare`). Sidecars are
made when the index is built or caught up and after the daemon's projection refresh
(:func:`prepare`), and by a search that finds one missing. Everything here is an
optimisation: the caller reads the projection's views when a lookup cannot answer.

Cost: a refresh's new part files get new sidecars; making all of them for the 1.45 M-event
bench store (17 sidecars, 37–38 MiB, 2.3 % of its compacted events) took 1.5–2.5 s.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from typing import Any, Final

import orjson

from agentlog.core.fileio import TMP_SUFFIX, atomic_writer
from agentlog.core.atrest import derived_state_dir
from agentlog.core.paths import FILE_MODE, ensure_dir

DIR: Final = "search-places"
GROUP_ROWS: Final = 256
"""Rows per batch of a sidecar: one batch is what a lookup of one key reads."""
RANGES: Final = "agentlog.key_ranges"
"""The schema metadata holding each batch's first and last key."""
NAMES: Final = "agentlog.columns"
"""The schema metadata naming what a row holds, in order (``key`` first)."""
SEP: Final = "\x1f"
NULL: Final = "\x00"
LAYOUT: Final = "packed"
"""In every sidecar's name: a sidecar of another layout is never read (and is pruned)."""
TABLES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "tool_calls": (("start_event_id", "end_event_id"), ("session_id", "turn_id", "attempt_id")),
    "turns_base": (("prompt_event_id",), ("session_id", "turn_id")),
    "attempts_overlay": (("attempt_id",), ("session_id", "outcome", "superseded_by")),
}
"""Per projection table: the columns whose values are the keys, and the columns a key finds."""


def places_dir(root: str) -> str:
    return os.path.join(derived_state_dir(root), DIR)


Parts = tuple[tuple[str, str], ...]
"""Projection files and their tables (``(path, table)``) one sidecar is made of: a session part's
``tool_calls`` and ``turns_base`` files together (one lookup for both), or an overlay file."""


def _sidecar_name(parts: Parts) -> str:
    h = hashlib.sha256()
    for part, table in parts:
        st = os.stat(part)
        h.update(f"{os.path.basename(part)}\0{table}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return f"{os.path.basename(parts[0][0]).removesuffix('.parquet')}-{LAYOUT}-{h.hexdigest()[:16]}.arrow"


def build(root: str, parts: Parts) -> str:
    """The sidecar of ``parts``, written if missing; its path."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    import pyarrow.ipc  # type: ignore[import-untyped]  # noqa: F401
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    directory = places_dir(root)
    path = os.path.join(directory, _sidecar_name(parts))
    if os.path.exists(path):
        return path
    columns = list(dict.fromkeys(c for _, table in parts for c in TABLES[table][1]))
    pieces = []
    for part, table in parts:
        keys, values = TABLES[table]
        t = pq.read_table(part, columns=list(dict.fromkeys([*keys, *values])))
        for k in keys:
            piece = pa.table({"key": t.column(k), **{
                c: t.column(c) if c in values else pa.nulls(t.num_rows, pa.string()) for c in columns}})
            pieces.append(piece.filter(pc.is_valid(piece.column("key"))))
    out = pa.concat_tables(pieces).sort_by([("key", "ascending")]).combine_chunks()
    names = ["key", *columns]
    packed = pc.binary_join_element_wise(*(pc.fill_null(out.column(c).cast(pa.string()), NULL) for c in names),
                                      SEP)
    if len(packed) and pc.min(pc.count_substring(packed, SEP)).as_py() != pc.max(
            pc.count_substring(packed, SEP)).as_py():
        raise ValueError("a value holds the sidecar's separator")  # the caller reads the views
    rows = pa.table({"row": packed})
    batches = rows.to_batches(max_chunksize=GROUP_ROWS)
    ranges = [(b.column(0)[0].as_py().split(SEP, 1)[0], b.column(0)[b.num_rows - 1].as_py().split(SEP, 1)[0])
              for b in batches if b.num_rows]
    schema = rows.schema.with_metadata({RANGES: orjson.dumps(ranges), NAMES: orjson.dumps(names)})
    ensure_dir(directory)
    # not durable: derived from the projection's files, made again when missing
    with atomic_writer(path, FILE_MODE, durable=False) as fh, pa.ipc.new_file(
            fh, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        for b in batches:
            if b.num_rows:
                w.write_batch(b)
    return path


class _Sidecar:
    """An open sidecar (memory-mapped) and each batch's key range."""

    def __init__(self, path: str) -> None:
        import pyarrow as pa

        self.file = pa.ipc.open_file(pa.memory_map(path))
        meta = self.file.schema.metadata or {}
        ranges = orjson.loads(meta.get(RANGES.encode(), b"[]"))
        self.names: list[str] = orjson.loads(meta.get(NAMES.encode(), b"[]"))
        self.mins = [lo for lo, _ in ranges]
        self.maxs = [hi for _, hi in ranges]

    def groups(self, key: str) -> range:
        """The batches whose range holds ``key`` (sorted keys: one, or a few when it repeats)."""
        return range(bisect.bisect_left(self.maxs, key), bisect.bisect_right(self.mins, key))

    def find(self, keys: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        groups: dict[int, list[str]] = {}
        for k in sorted(set(keys)):
            for g in self.groups(k):
                groups.setdefault(g, []).append(k)
        for g, wanted in sorted(groups.items()):
            rows: list[str] = self.file.get_batch(g).column(0).to_pylist()
            for key in wanted:  # rows are in key order: a key's rows follow the first not below it
                lead = key + SEP
                i = bisect.bisect_left(rows, lead)
                while i < len(rows) and rows[i].startswith(lead):
                    out.append({n: None if v == NULL else v for n, v in zip(self.names, rows[i].split(SEP))})
                    i += 1
        return out


_OPEN: dict[str, _Sidecar] = {}
_LOCK = threading.Lock()
OPEN_MAX: Final = 256


def lookup(root: str, parts: Parts, keys: list[str]) -> list[dict[str, Any]]:
    """The rows of ``parts`` whose key columns hold one of ``keys``, as ``{"key", <the tables'
    value columns>}`` (a row once per key column that matched; a column its table lacks is None)."""
    path = build(root, parts)
    with _LOCK:
        side = _OPEN.get(path)
    if side is None:
        side = _Sidecar(path)
        with _LOCK:
            if len(_OPEN) >= OPEN_MAX:
                _OPEN.clear()
            _OPEN[path] = side
    return side.find(keys)


def prepare(root: str) -> int:
    """A sidecar for every part of the current projection that has none (how many were made),
    and none for a part that is gone."""
    from agentlog.projection.persist import load_manifest, projection_dir

    m = load_manifest(root)
    if m is None:
        return 0
    directory = os.path.abspath(projection_dir(root))
    made = 0
    wanted: set[str] = set()
    for family, tables in (("session", ("tool_calls", "turns_base")), ("asession", ("attempts_overlay",))):
        for p in m.parts.get(family, []):
            parts = tuple((os.path.join(directory, p["files"][t]), t) for t in tables if p["files"].get(t))
            if not parts:
                continue
            try:
                existed = os.path.exists(os.path.join(places_dir(root), _sidecar_name(parts)))
                wanted.add(os.path.basename(build(root, parts)))
            except FileNotFoundError:  # the projection moved on meanwhile
                continue
            made += not existed
    prune(root, keep=wanted)
    return made


def prune(root: str, *, keep: set[str]) -> None:
    """Remove the sidecars not in ``keep`` (one being written is kept)."""
    directory = places_dir(root)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name not in keep and not name.endswith(TMP_SUFFIX):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass


def remove(root: str) -> None:
    import shutil

    shutil.rmtree(places_dir(root), ignore_errors=True)


__all__ = ["DIR", "GROUP_ROWS", "TABLES", "build", "lookup", "places_dir", "prepare", "prune", "remove"]
