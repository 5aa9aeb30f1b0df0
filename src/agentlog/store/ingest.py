"""Incremental ingest: new frames of every session log → the Delta table ``events``.

What has been consumed
----------------------
For every log (``<provider>/<key>``) ingest knows the byte offset just after
the last frame it ingested, that frame's ``seq`` and its hash. The *truth*
for these positions is the Delta table itself: every commit ingest makes
carries, in the commit's own metadata (``commitInfo`` key
``agentlog.ingest``), ``{"logs": {"<provider>/<key>": [offset, seq, hash]}}``
for each log that batch advanced. Data and positions therefore land in one
atomic step, the Delta commit: a commit either exists (rows *and* positions)
or it does not (neither).

``<root>/state/ingest-offsets.json`` is only a cache of those positions,
tagged with the table version it reflects. When that version is not the
table's latest (a crash after a commit and before the cache was rewritten,
the cache deleted, another writer's commit), ingest rebuilds the positions by
replaying the ``agentlog.ingest`` metadata of the table's history in version
order. So a kill at any instant neither loses nor duplicates a frame:

- before a commit: the Parquet files written so far are orphans no snapshot
  names (vacuum removes them); the positions did not move either;
- after a commit, before the cache write: the cache is stale by version and
  is rebuilt from the history, which includes the commit.

Commit files must therefore outlive log cleanup: the table is created with
``delta.logRetentionDuration`` of 100 years (checkpoints alone do not keep
custom commit metadata).

Checking as it reads
--------------------
Ingest reads only complete lines (a torn tail is left for later) and checks
each frame's hash (``frame.parse_envelope``), its link (``prev`` equals the
last ingested hash, the genesis value at ``seq`` 0) and its ``seq`` (one
more than the last). The first bad frame stops ingest of *that* log; the
break is reported and written to ``<root>/state/ingest-breaks.json``, and the
other logs go on. An edit of the already-ingested prefix is caught cheaply:
the frame ending at the saved offset must still carry the saved hash.

Batching and locking
--------------------
Rows from all logs accumulate until ``batch_bytes`` of frame bytes, then go
to the table in one append (one commit, a few Parquet files per day
partition). Concurrent ingests serialise on an exclusive ``flock`` of
``<root>/state/ingest.lock``; one that cannot get it within a few seconds
returns a report with ``busy`` set. Readers never take that lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from agentlog.log import frame as _frame
from agentlog.log.layout import iter_logs, split_log_path
from agentlog.log.layout import read_trailer
from agentlog.log.segments import Segment, SegmentError, line_ending_at, list_segments, read_from
from agentlog.integrity.leaf_ids import frame_key
from agentlog.integrity.tree import Fed, FrameTree, TreeDamaged
from agentlog.integrity.tree_worker import TreeWorker
from agentlog.core import AgentlogError
from agentlog.core.atrest import data_keys, derived_state_dir
from agentlog.core.fileio import write_atomic
from agentlog.core.jsonio import read_json
from agentlog.core.locks import open_locked
from agentlog.core.paths import ensure_dir, fsync_path, state_dir
from agentlog.store.schema import (
    COLUMNS,
    PARTITION_BY,
    STATS_COLUMNS,
    BatchTypeError,
    EventBatch,
    EventRowError,
    events_path,
    store_dir,
    writer_properties,
)

META_KEY: Final = "agentlog.ingest"
LOCK_NAME: Final = "ingest.lock"
COMPACT_LOCK_NAME: Final = "compact.lock"
OFFSETS_NAME: Final = "ingest-offsets.json"
BREAKS_NAME: Final = "ingest-breaks.json"
TABLE_CONFIG: Final = {
    "delta.logRetentionDuration": "interval 36500 days",
    "delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS),
}
_READ_CHUNK: Final = 8 << 20


@dataclass
class Position:
    """How far one log has been ingested: the offset after the last ingested
    frame, that frame's seq (-1: none) and hash (genesis: none)."""

    offset: int
    seq: int
    hash: str


@dataclass
class IngestReport:
    logs_seen: int = 0
    logs_advanced: int = 0
    events: int = 0
    bytes: int = 0
    commits: int = 0
    commit_ms: list[float] = field(default_factory=list)
    """Wall time of each batch's Arrow conversion and Delta commit."""
    breaks: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    table_version: int | None = None
    busy: bool = False
    """Another ingest held the lock; nothing was done."""
    committed_events: int = 0
    committed_bytes: int = 0
    careful: bool = False
    """An event with a wrongly typed field sent the run to the careful path."""
    store_reset: str | None = None
    """Why the store was dropped and rebuilt from the logs (another version's format)."""
    tree_leaves: int = 0
    """Frames added to the Merkle tree (integrity/tree.py)."""
    tree_secs: float = 0.0
    """Wall time ingest spent on the tree: growing it on its main thread, or handing it
    to the tree worker and waiting for it at the end."""
    tree_worker: bool = False
    """Whether a child process grew the tree (a run that filled a batch:
    integrity/tree_worker.py)."""
    tree_cpu_secs: float = 0.0
    """The tree worker's CPU time (it reads and hashes the frames again)."""
    tree_error: str | None = None
    """Why the tree could not grow this time (the next ingest catches it up)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def log_id(provider: str, key: str) -> str:
    return f"{provider}/{key}"


# -- positions: cache and Delta history ------------------------------------------


def open_table(path: str) -> Any:
    """The Delta table at ``path``, or None when there is none yet."""
    from deltalake import DeltaTable

    return DeltaTable(path) if DeltaTable.is_deltatable(path) else None


def positions_from_history(path: str) -> dict[str, Position]:
    """Replay the ``agentlog.ingest`` metadata of every commit, oldest first."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return {}
    history = sorted(DeltaTable(path).history(), key=lambda c: int(c.get("version", 0)))
    out: dict[str, Position] = {}
    for commit in history:
        meta = commit.get(META_KEY)
        if not isinstance(meta, str):
            continue
        for name, (offset, seq, digest) in json.loads(meta)["logs"].items():
            out[name] = Position(int(offset), int(seq), str(digest))
    return out


def _read_cache(file: str) -> tuple[int | None, dict[str, Position]] | None:
    try:
        data = read_json(file)
        logs = {k: Position(int(v[0]), int(v[1]), str(v[2])) for k, v in data["logs"].items()}
        version = data["version"]
        return (None if version is None else int(version)), logs
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def cached_positions(root: str) -> dict[str, Position] | None:
    """The consumed positions as the cache holds them, without opening the table (None: no
    usable cache). Never ahead of the table (the cache is written after each commit); behind it
    only after a crash between a commit and the cache's write, or another writer's commit."""
    got = _read_cache(os.path.join(derived_state_dir(root), OFFSETS_NAME))
    return None if got is None else got[1]


def _state_json(value: Any) -> bytes:
    """A state file's text, as written since the first version (the standard library's,
    ASCII-only: ``\\u`` escapes, unlike :func:`agentlog.core.jsonio.dumps`)."""
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def load_positions(root: str, table: Any = None) -> tuple[dict[str, Position], int | None, bool]:
    """The consumed positions, the table version they reflect, and whether
    they came from a current cache (else from the Delta history).

    A cache a few versions behind (compaction commits beside ingest, a crash
    after a commit) is brought forward by replaying only the newer commits,
    so catching up costs what changed, not the whole history.

    ``table``: the events table already opened by the caller (else opened here)."""
    path = events_path(root)
    if table is None:
        table = open_table(path)
    version = None if table is None else int(table.version())
    cached = _read_cache(os.path.join(derived_state_dir(root), OFFSETS_NAME))
    if cached is not None and cached[0] == version:
        return cached[1], version, True
    if cached is not None and cached[0] is not None and version is not None and cached[0] < version:
        newer = _commits_after(path, cached[0], version)
        if newer is not None:
            positions = dict(cached[1])
            for meta in newer:
                for name, (offset, seq, digest) in json.loads(meta)["logs"].items():
                    positions[name] = Position(int(offset), int(seq), str(digest))
            return positions, version, False
    return positions_from_history(path), version, False


def _commits_after(path: str, known: int, latest: int) -> list[str] | None:
    """The ``agentlog.ingest`` metadata of versions ``known+1 … latest``, oldest
    first; None if the history does not hold exactly those versions."""
    from deltalake import DeltaTable

    commits = DeltaTable(path).history(latest - known)
    versions = sorted(int(c.get("version", -1)) for c in commits)
    if versions != list(range(known + 1, latest + 1)):
        return None
    out = []
    for commit in sorted(commits, key=lambda c: int(c.get("version", 0))):
        meta = commit.get(META_KEY)
        if isinstance(meta, str):
            out.append(meta)
    return out


def _save_positions(root: str, positions: dict[str, Position], version: int | None) -> None:
    logs = {k: [p.offset, p.seq, p.hash] for k, p in sorted(positions.items())}
    # not durable: a cache of the table's commit history, replayed from it when lost or behind
    ensure_dir(derived_state_dir(root))
    write_atomic(os.path.join(derived_state_dir(root), OFFSETS_NAME), _state_json({"version": version, "logs": logs}),
                 durable=False)


# -- lock ------------------------------------------------------------------------


def acquire_lock(root: str, timeout: float, name: str = LOCK_NAME) -> int | None:
    """One of the store's writer locks, an fd to close (None on timeout).

    ``LOCK_NAME`` serialises ingests (and rebuilds); ``COMPACT_LOCK_NAME``
    serialises compactions, which run beside ingest (Delta's optimistic
    commits let an append and a compaction land in either order). A rebuild
    or a purge takes both."""
    ensure_dir(state_dir(root))
    return open_locked(os.path.join(state_dir(root), name), timeout)


# -- reading one log ---------------------------------------------------------------


def _prefix_unchanged(file: str, segments: list[Segment], pos: Position) -> bool:
    """Whether the frame ending at ``pos.offset`` still carries ``pos.hash``.

    Cheap in every common case: a position in the active file reads that one
    line back; a position at the end of a sealed segment compares the hash
    in the segment's trailer (segments never change once written, and
    ``verify`` checks them whole). Only a position inside a sealed segment
    decompresses to find the line."""
    for seg in segments:
        if seg.base_offset < pos.offset <= seg.end_offset:
            if seg.sealed and pos.offset == seg.end_offset:
                trailer = read_trailer(seg.path)
                return trailer is not None and trailer.get("last_hash") == pos.hash and seg.last_seq == pos.seq
            break
    line = line_ending_at(file, pos.offset)
    try:
        # (a frame purged since it was ingested keeps its hash)
        return bool(line) and _frame.parse_any(line, hashlib.sha256)[2] == pos.hash
    except _frame.FrameError:
        return False


def _line_ends(data: bytes) -> list[int]:
    """The index just after each newline in ``data``."""
    out: list[int] = []
    find = data.find
    i = find(b"\n")
    while i >= 0:
        out.append(i + 1)
        i = find(b"\n", i + 1)
    return out


def _hash_lines(data: bytes, ends: list[int]) -> list[bytes]:
    """SHA-256 (hex) of the hashed part of each line of ``data`` ending at ``ends``."""
    view = memoryview(data)
    sha = hashlib.sha256
    out: list[bytes] = []
    start = 0
    for end in ends:
        mark = end - _frame.TRAILER
        out.append(sha(view[start:mark]).hexdigest().encode("ascii") if mark > start else b"")
        start = end
    return out


def _hashed_here(data: bytes, ends: list[int]) -> Future[list[bytes]]:
    """:func:`_hash_lines` on this thread, as a finished future. With encryption at rest on, every
    event added opens through libsodium, which lets go of the GIL on each call: beside the hashing
    thread (whose SHA-256 of a frame over 2 KiB lets go of it too) that is two hand-overs of the GIL
    per frame, which cost more than hashing here first (SHA-256 runs at about 1 GB/s)."""
    done: Future[list[bytes]] = Future()
    done.set_result(_hash_lines(data, ends))
    return done


class _Ingest:
    def __init__(self, root: str, batch_bytes: int, report: IngestReport, fast: bool = True,
                 durability: str = "strict", table: Any = None, tree: bool = True) -> None:
        self.fast = fast
        self.durability = durability
        self.root = root
        self.batch_bytes = max(1, batch_bytes)
        self.read_chunk = min(_READ_CHUNK, self.batch_bytes)
        """Batches are cut between chunks, so a chunk is at most a batch."""
        self.report = report
        self.path = events_path(root)
        # the table is opened once per run (~3 ms each time on a small store)
        self._dt: Any = table if table is not None else open_table(self.path)
        self.positions, self.version, self.cache_current = load_positions(root, self._dt)
        self.keys = data_keys(root) or None  # None while encryption at rest is off; AtRestLockedError when locked
        self.batch = EventBatch(fast=fast, keys=self.keys)
        self.pending: dict[str, Position] = {}
        self.advanced: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlog-commit")
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlog-hash")
        self._inflight: Future[None] | None = None
        self.tree = _open_tree(root, durability, report) if tree else None
        self.fed: list[Fed] = []
        """Frames checked since the tree last grew (the tree grows at each flush)."""
        self.worker: TreeWorker | None = None
        """The tree's process once the run has filled a batch (then ``tree`` is None)."""
        self.tree_dirty: set[str] = set()
        """Logs advanced since the worker was last told."""

    def brk(self, name: str, file: str, pos: Position, reason: str, offset: int | None = None) -> None:
        seq = pos.seq + 1
        self.report.breaks.append(
            {"log": name, "file": file, "line": seq + 1, "offset": pos.offset if offset is None else offset,
             "seq": seq, "reason": reason}
        )

    def run_log(self, file: str) -> None:
        """Ingest what is new in one session's chain (sealed segments, then the
        active file), by logical offset: sealing never moves a position."""
        provider, key = split_log_path(file)
        name = log_id(provider, key)
        pos = self.positions.get(name) or Position(0, -1, _frame.genesis(provider, key))
        try:
            segments = list_segments(file)
            size = segments[-1].end_offset
            if size < pos.offset:
                self.brk(name, file, Position(pos.offset, pos.seq - 1, pos.hash), "log_shorter_than_ingested")
                return
            if pos.offset > 0 and not _prefix_unchanged(file, segments, pos):
                line_len = len(line_ending_at(file, pos.offset))
                self.brk(name, file, Position(pos.offset - line_len, pos.seq - 1, pos.hash), "ingested_prefix_changed")
                return
            if size == pos.offset:
                return
            self.read_new(file, name, provider, key, pos)
        except FileNotFoundError:
            return
        except (OSError, SegmentError) as e:
            self.brk(name, file, pos, f"log_unreadable: {e}")

    def read_new(self, file: str, name: str, provider: str, key: str, pos: Position) -> None:
        """Check and add every complete frame after ``pos``.

        Per chunk of the chain: the frames' shape, link and seq are checked
        and their events added to the batch on this thread while another
        thread hashes them (OpenSSL releases the GIL); then the hashes are
        compared, and rows from the first bad hash on are dropped again.
        """
        check = _frame.check_frame_at
        offset = pos.offset
        carry = b""
        seq, prev_hex = pos.seq, pos.hash.encode("ascii")
        chunks = read_from(file, offset, self.read_chunk)
        while True:
            try:
                chunk_offset, chunk = next(chunks)
                if chunk_offset != offset + len(carry):
                    raise SegmentError(f"expected logical offset {offset + len(carry)}, read {chunk_offset}")
            except StopIteration:
                break
            except (OSError, SegmentError) as e:
                # what was read so far is checked and in the batch: keep it, stop here
                self._advance(name, offset, seq, prev_hex)
                self.brk(name, file, Position(offset, seq, prev_hex.decode("ascii")), f"log_unreadable: {e}")
                return
            data = carry + chunk if carry else chunk
            ends = _line_ends(data)
            if not ends:
                carry = data
                continue
            if self.keys is None:
                hashing = self._hasher.submit(_hash_lines, data, ends)
            else:  # (see _hashed_here)
                hashing = _hashed_here(data, ends)
            batch = self.batch
            rows0, bytes0 = batch.rows, batch.frame_bytes
            add = batch.add
            start = 0
            good: list[tuple[int, bytes]] = []  # (seq, hash) of each frame checked
            ev_starts: list[int] = []  # where each one's event starts in ``data`` (-1: purged)
            purged: set[int] = set()  # indexes in ``good`` of purged frames: no row, hash taken as given
            failure: tuple[int, str] | None = None
            for end in ends:
                try:
                    try:
                        got_seq, prev, digest, ev_start, ev_end = check(data, start, end)
                    except _frame.FrameError:
                        # A purged frame (agentlog purge) has no event left: its link
                        # and seq are checked, it advances the position, adds no row.
                        # ``verify`` checks that a purge record names it.
                        if not _frame.is_purged(data[start : min(end, start + 128)]):
                            raise
                        got_seq, prev_s, digest_s = _frame.parse_purged(data[start:end])
                        prev, digest, ev_start = prev_s.encode("ascii"), digest_s.encode("ascii"), -1
                    if prev != (good[-1][1] if good else prev_hex):
                        raise _frame.FrameError("broken_link")
                    if got_seq != (good[-1][0] if good else seq) + 1:
                        raise _frame.FrameError("sequence_gap")
                    if ev_start < 0:
                        purged.add(len(good))
                    else:
                        add(data[ev_start:ev_end], provider, key, got_seq, digest.decode("ascii"), offset + start,
                            end - start)
                except (_frame.FrameError, EventRowError) as e:
                    failure = (len(good), str(e))
                    break
                good.append((got_seq, digest))
                ev_starts.append(ev_start)
                start = end
            digests = hashing.result()
            for i, (_, claimed) in enumerate(good):
                if digests[i] != claimed and i not in purged:
                    failure = (i, "bad_hash")
                    break
            if failure is not None:
                n, reason = failure
                kept = n - sum(1 for i in purged if i < n)  # rows added by the first n frames
                batch.truncate(rows0 + kept, bytes0 + (ends[n - 1] if n else 0))
                bad_at = ends[n - 1] if n else 0
                if n:
                    seq, prev_hex = good[n - 1]
                self.report.events += kept
                self.report.bytes += bad_at
                self.brk(name, file, Position(offset + bad_at, seq, prev_hex.decode("ascii")), reason)
                self._advance(name, offset + bad_at, seq, prev_hex)
                return
            if good:
                seq, prev_hex = good[-1]
                if self.tree is not None:  # (in the worker's hands, it reads the frames itself)
                    self.fed.append(Fed(name, offset, good, ends, [frame_key(data, at) for at in ev_starts]))
            self.report.events += len(good) - len(purged)
            self.report.bytes += ends[-1]
            carry = data[ends[-1]:]
            offset += ends[-1]
            if self.batch.frame_bytes >= self.batch_bytes:
                self._advance(name, offset, seq, prev_hex)
                self.flush()
        self._advance(name, offset, seq, prev_hex)

    def _advance(self, name: str, offset: int, seq: int, digest: bytes) -> None:
        old = self.positions.get(name)
        if old is not None and old.offset == offset:
            return
        pos = Position(offset, seq, digest.decode("ascii"))
        self.positions[name] = pos
        self.pending[name] = pos
        self.advanced.add(name)
        self.tree_dirty.add(name)

    def grow_tree(self, upto: dict[str, int] | None = None, *, spawn: bool = False, last: bool = False) -> None:
        """Add the frames checked so far to the Merkle tree (and, with ``upto``, whatever
        the tree is behind on up to those offsets); ``last`` at the end of the run. With
        ``spawn`` (a full batch: a long run) the tree then goes to a worker process
        (integrity/tree_worker.py), told at each flush how far the logs were read. A
        tree that cannot grow never stops ingest: the report says why, and the next
        ingest catches it up."""
        fed, self.fed = self.fed, []
        started = time.perf_counter()
        try:
            if self.worker is not None:
                self._feed_worker(last)
            elif self.tree is not None:
                self.report.tree_leaves += self.tree.grow(fed, upto)
                if spawn and not last:
                    self._start_worker()
        except (AgentlogError, OSError, ValueError) as e:
            self.report.tree_error = f"{type(e).__name__}: {e}"
            self.tree = None
            if self.worker is not None:
                self.worker.kill()
                self.worker = None
        finally:
            self.report.tree_secs += time.perf_counter() - started

    def _start_worker(self) -> None:
        """Hand the tree to a worker process for the rest of this (long) run."""
        assert self.tree is not None
        self.worker = TreeWorker(self.root, durable=self.tree.durable)
        self.report.tree_worker = True
        self.tree = None
        self.tree_dirty.clear()

    def _feed_worker(self, last: bool) -> None:
        assert self.worker is not None
        self.worker.send({name: self.positions[name].offset for name in sorted(self.tree_dirty)})
        self.tree_dirty.clear()
        if last:
            worker, self.worker = self.worker, None
            added, error, cpu = worker.finish()
            self.report.tree_leaves += added
            self.report.tree_cpu_secs += cpu
            if error is not None:
                self.report.tree_error = error

    def flush(self, *, full: bool = True) -> None:
        """Hand the batch to the committer thread (waiting for the previous
        commit first: at most one batch is being built while one is written);
        grow the tree by the batch's frames. ``full``: the batch filled up (a long run,
        whose tree then goes to a worker process); False for the run's last batch."""
        self.grow_tree(spawn=full)
        if not self.batch.rows:
            return
        started = time.perf_counter()
        table = self.batch.to_arrow()
        meta = {"logs": {k: [p.offset, p.seq, p.hash] for k, p in sorted(self.pending.items())}}
        convert_ms = (time.perf_counter() - started) * 1000
        self.wait()
        create = self.version is None and not self.report.commits
        self.report.commits += 1
        self._inflight = self._pool.submit(self._commit, table, meta, create, convert_ms, self.batch.frame_bytes)
        self.batch = EventBatch(fast=self.fast, keys=self.keys)
        self.pending = {}

    def wait(self) -> None:
        """Wait for the commit in flight (re-raising its error)."""
        if self._inflight is not None:
            inflight, self._inflight = self._inflight, None
            inflight.result()

    def _commit(self, table: Any, meta: dict[str, Any], create: bool, convert_ms: float, frame_bytes: int) -> None:
        from deltalake import CommitProperties, write_deltalake

        started = time.perf_counter()
        ensure_dir(os.path.dirname(self.path))
        write_deltalake(
            self._dt if self._dt is not None else self.path,  # an open table skips re-reading the log: ~4 vs ~27 ms
            table,
            mode="append",
            partition_by=PARTITION_BY,
            configuration=TABLE_CONFIG if create else None,
            commit_properties=CommitProperties(custom_metadata={META_KEY: json.dumps(meta, separators=(",", ":"))}),
            writer_properties=writer_properties(),
        )
        if self._dt is None:
            from deltalake import DeltaTable

            self._dt = DeltaTable(self.path)
        if self.durability == "strict":
            _sync_commit(self.path, int(self._dt.version()))
        self.report.commit_ms.append(convert_ms + (time.perf_counter() - started) * 1000)
        self.report.committed_events += table.num_rows
        self.report.committed_bytes += frame_bytes


def _incompatible_store(table: Any) -> str | None:
    """Why the existing events table (None: no table yet) cannot take this
    version's rows (None: it can)."""
    if table is None:
        return None
    names = [f.name for f in table.schema().fields]
    if names != list(COLUMNS):
        return "the events table was written by another version of agentlog (its columns differ)"
    return None


def reset_store(root: str) -> str | None:
    """Move the derived store aside and forget the consumed positions; the
    caller holds the lock. Returns the moved directory (to delete once the
    new store is in place), or None if there was no store."""
    trash = None
    store = store_dir(root)
    if os.path.exists(store):
        trash = f"{store}.old-{os.getpid()}-{time.time_ns()}"
        os.rename(store, trash)
    for name in (OFFSETS_NAME, BREAKS_NAME):
        try:
            os.unlink(os.path.join(derived_state_dir(root), name))
        except FileNotFoundError:
            pass
    return trash


def _sync_commit(path: str, version: int) -> None:
    """fsync the data files commit ``version`` added, their directories and the commit itself."""
    commit = os.path.join(path, "_delta_log", f"{version:020d}.json")
    dirs = {os.path.join(path, "_delta_log")}
    with open(commit, "rb") as f:
        for line in f:
            action = json.loads(line)
            add = action.get("add")
            if add is not None:
                from urllib.parse import unquote

                file = os.path.join(path, unquote(add["path"]))
                fsync_path(file)
                dirs.add(os.path.dirname(file))
    fsync_path(commit)
    for d in sorted(dirs):
        fsync_path(d)


def _run(root: str, batch_bytes: int, report: IngestReport, fast: bool, durability: str, table: Any = None,
         tree: bool = True) -> _Ingest:
    job = _Ingest(root, batch_bytes, report, fast, durability, table, tree)
    logs = iter_logs(root)
    report.logs_seen = len(logs)
    try:
        for file in logs:
            job.run_log(file)
        job.flush(full=False)
        job.wait()
        job.grow_tree({name: pos.offset for name, pos in job.positions.items()}, last=True)
    finally:
        if job.worker is not None:
            job.worker.kill()  # the run failed: the next ingest catches the tree up
        job._pool.shutdown(wait=True)
        job._hasher.shutdown(wait=True)
    return job


def _open_tree(root: str, durability: str, report: IngestReport) -> FrameTree | None:
    """The data root's Merkle tree, to grow as frames are checked (None, with the reason in
    the report, when it cannot be opened)."""
    try:
        return FrameTree(root, durable=durability == "strict")
    except (OSError, TreeDamaged, ValueError) as e:
        report.tree_error = f"{type(e).__name__}: {e}"
        return None


def ingest(root: str, *, batch_bytes: int = 64 << 20, lock_timeout: float = 5.0, careful: bool = False,
           durability: str | None = None, tree: bool = True) -> IngestReport:
    """Ingest every new complete frame of every log under ``root`` (see the module docstring).

    ``careful`` parses every event whole and checks every field row by row
    (slower); without it, a wrong type anywhere in a batch makes the run
    start again carefully from what is committed, so the result is the same.
    ``durability`` (default: the ``durability`` setting) ``strict`` fsyncs
    each commit's data files and the commit before the next batch;
    ``relaxed`` leaves flushing to the OS (a power cut may then lose recent
    commits, never the logs they came from, so the next ingest redoes them).

    Files it creates are private (0600/0700), whatever the umask. ``tree`` grows the Merkle
    tree (integrity/tree.py) with the frames checked; off only to measure what it costs
    (``agentlog bench proofs``): the next ingest with it catches the tree up.
    """
    from agentlog.core.fileio import private_files

    with private_files():
        return _ingest(root, batch_bytes=batch_bytes, lock_timeout=lock_timeout, careful=careful, durability=durability,
                       tree=tree)


def _ingest(root: str, *, batch_bytes: int = 64 << 20, lock_timeout: float = 5.0, careful: bool = False,
           durability: str | None = None, tree: bool = True) -> IngestReport:
    """The body of :func:`ingest`."""
    if durability is None:
        from agentlog.core.config import load as load_config

        durability = str(load_config(root).get("durability", "strict"))
    t0 = time.perf_counter()
    data_keys(root)  # encryption at rest on and its key locked: AtRestLockedError says so before anything is read
    report = IngestReport()
    lock = acquire_lock(root, lock_timeout)
    if lock is None:
        report.busy = True
        report.seconds = time.perf_counter() - t0
        return report
    trash = None
    try:
        table = open_table(events_path(root))
        reason = _incompatible_store(table)
        if reason is not None:
            trash = reset_store(root)
            report.store_reset = reason
            table = None
        try:
            job = _run(root, batch_bytes, report, not careful, durability, table, tree)
        except BatchTypeError:
            # Nothing of the failed batch was committed; what was is kept.
            report.careful = True
            report.events, report.bytes, report.breaks = report.committed_events, report.committed_bytes, []
            job = _run(root, batch_bytes, report, False, durability, tree=tree)
        report.logs_advanced = len(job.advanced)
        version = int(job._dt.version()) if report.commits else job.version
        if report.commits or not job.cache_current:
            _save_positions(root, job.positions, version)
        report.table_version = version
        # not durable: a report, written again by every ingest
        ensure_dir(derived_state_dir(root))
        write_atomic(os.path.join(derived_state_dir(root), BREAKS_NAME), _state_json(report.breaks), durable=False)
    finally:
        os.close(lock)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    report.seconds = time.perf_counter() - t0
    return report


def catch_up(root: str) -> IngestReport:
    """What every read does before answering: ingest whatever is pending,
    without waiting for an ingest already running (the answer then reflects
    what is committed; ``busy`` is set in the report)."""
    return ingest(root, lock_timeout=0.0)
