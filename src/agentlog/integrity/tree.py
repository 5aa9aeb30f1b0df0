"""The Merkle tree over every frame of every session log (issue 28).

One RFC 6962 tree for the whole data root, its leaves the frames in the order
ingest checked them (one global append order; docs/proofs.md). A leaf binds a
frame's place as well as its content::

    leaf data = b"agentlog/frame/v1\\n" + log id + b"\\n" + seq + b"\\n" + frame hash + b"\\n"

where the log id is ``provider/key`` (the log's path under ``logs/``), seq the
frame's decimal sequence number and the frame hash its 64 lowercase hex digits
(the chain hash, which a purge keeps: a proof made before a purge still
verifies after it). The leaf hash is SHA-256(0x00 ‖ leaf data).

Under ``state/tree/``:

- the hashes (:class:`~agentlog.integrity.tiles.TileStore`: ``level/<L>``, a file
  per tile level, and ``tree-size``, the commit point);
- ``leaves``: 8 bytes a leaf, big-endian (log number, seq), so that a proof can
  find an event's leaf and ``verify`` can check every leaf against its log;
  records beyond the committed size are leftovers of a crash, overwritten;
- ``logs``: the log ids, one a line; the line number is the log number;
- ``cursors``: for the committed size, each log's position in the tree (its
  next frame's logical offset, the last seq and hash added), written as
  ``cursors.next`` before the tiles commit and renamed after: whichever of the
  two names the committed size is the one in force;
- ``ids/``: which leaf holds an event (:mod:`~agentlog.integrity.leaf_ids`), a run
  per commit written before it, merged after.

The tree grows in ingest (``store``), never in the hook. Ingest hands over the
frames it has just checked (:class:`Fed`); a log the tree is behind on (a crash
between the store's commit and the tree's, or a data root from before the tree)
is read from the tree's own cursor and checked again, so the tree never holds a
frame whose hash or link did not verify, and never holds one twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter, methodcaller
from typing import Final

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.locks import Busy, open_locked
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.integrity import merkle
from agentlog.integrity.leaf_ids import LeafIds, frame_key, id_key
from agentlog.integrity.tiles import TileStore
from agentlog.log import frame as log_frame
from agentlog.log.layout import iter_logs, log_path, split_log_path
from agentlog.log.segments import SegmentError, list_segments, read_from

LEAF_PREFIX: Final = b"agentlog/frame/v1\n"

RECORD: Final = struct.Struct(">II")
"""A leaf's record in ``leaves``: log number, seq."""
CURSORS: Final = "cursors"
CURSORS_NEXT: Final = "cursors.next"
GROW_LOCK: Final = "grow.lock"
GROW_WAIT_S: Final = 120.0
"""How long a writer waits for another to finish growing the tree."""


class TreeDamaged(AgentlogError, RuntimeError):
    """The tree's files disagree with each other (edited, or a disk fault)."""


class TreeBusy(Busy):
    """Another process grew the tree for longer than a writer waits."""


def tree_dir(root: str) -> str:
    return os.path.join(state_dir(root), "tree")


def leaf_data(log: str, seq: int, frame_hash: str) -> bytes:
    """The bytes a frame's leaf commits to (see the module docstring)."""
    return b"".join((LEAF_PREFIX, log.encode("utf-8"), b"\n", str(seq).encode("ascii"), b"\n",
                     frame_hash.encode("ascii"), b"\n"))


def frame_leaf_hash(log: str, seq: int, frame_hash: str) -> bytes:
    return hashlib.sha256(b"\x00" + leaf_data(log, seq, frame_hash)).digest()


@dataclass(frozen=True)
class Fed:
    """Frames ingest has just checked, in a row of one log: the log, where the first
    starts (logical offset), and for each its seq and hash (ASCII hex), where it ends
    (relative to ``start``) and its event id's key (:func:`~agentlog.integrity.leaf_ids.frame_key`)."""

    log: str
    start: int
    frames: list[tuple[int, bytes]]
    ends: list[int]
    keys: list[int | None]


@dataclass(frozen=True)
class Segment:
    """Frames of one log on their way into the tree, in order: (seq, hash), event id keys and
    where each starts in the log (logical offset)."""

    log: str
    frames: list[tuple[int, bytes]]
    keys: list[int | None]
    starts: list[int]


@dataclass
class Cursor:
    """Where the tree is in one log: the offset after its last frame in the tree, that
    frame's seq and hash (seq -1 and the genesis hash before any)."""

    number: int
    offset: int
    seq: int
    hash: str


class FrameTree:
    """The data root's tree: its committed size and root, the leaf of each frame, and growth."""

    def __init__(self, root: str, *, durable: bool = True) -> None:
        self.root = root
        self.directory = tree_dir(root)
        ensure_dir(self.directory)
        self.durable = durable
        self.tiles = TileStore(self.directory, durable=durable)
        self.ids = LeafIds(self.directory, durable=durable)
        self.logs: list[str] = self._read_logs()
        self.numbers = {name: i for i, name in enumerate(self.logs)}
        self.cursors: dict[str, Cursor] = self._read_cursors()
        self._seen_size = self.tiles.size  # the size logs and cursors were read at

    # -- reading ------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.tiles.size

    def root_hash(self, size: int | None = None) -> bytes:
        return self.tiles.root(size)

    def _read_logs(self) -> list[str]:
        try:
            with open(os.path.join(self.directory, "logs"), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return []
        # the last piece is empty, or a name a crash cut before its newline (never numbered)
        return [line.decode("utf-8") for line in data.split(b"\n")[:-1]]

    def _read_cursors(self) -> dict[str, Cursor]:
        size = self.tiles.size
        for name in (CURSORS, CURSORS_NEXT):
            try:
                with open(os.path.join(self.directory, name), "rb") as fh:
                    doc = json.loads(fh.read())
            except FileNotFoundError:
                continue
            except ValueError as e:
                raise TreeDamaged(f"{os.path.join(self.directory, name)} is not JSON: {e}") from None
            if doc.get("size") == size:
                return {log: Cursor(*c) for log, c in doc["logs"].items()}
        if size == 0:
            return {}
        raise TreeDamaged(f"no cursor record in {self.directory} names the committed tree size {size}")

    def leaf_at(self, index: int) -> tuple[str, int]:
        """(log id, seq) of leaf ``index`` of the committed tree."""
        if not 0 <= index < self.size:
            raise IndexError(index)
        with open(os.path.join(self.directory, "leaves"), "rb") as fh:
            record = os.pread(fh.fileno(), RECORD.size, index * RECORD.size)
        number, seq = RECORD.unpack(record)
        return self.logs[number], seq

    def leaf_index(self, log: str, seq: int) -> int | None:
        """The leaf of frame ``seq`` of ``log`` in the committed tree, or None."""
        number = self.numbers.get(log)
        if number is None:
            return None
        want = RECORD.pack(number, seq)
        with open(os.path.join(self.directory, "leaves"), "rb") as fh:
            data = fh.read(self.size * RECORD.size)
        at = data.find(want)
        while at >= 0 and at % RECORD.size:
            at = data.find(want, at + 1)
        return at // RECORD.size if at >= 0 else None

    def leaves(self, start: int = 0) -> Iterator[tuple[int, str, int]]:
        """(index, log id, seq) of every leaf of the committed tree from ``start``, in order."""
        with open(os.path.join(self.directory, "leaves"), "rb") as fh:
            data = os.pread(fh.fileno(), (self.size - start) * RECORD.size, start * RECORD.size)
        for i, (number, seq) in enumerate(RECORD.iter_unpack(data), start):
            yield i, self.logs[number], seq

    def event_leaves(self, event_id: str) -> list[tuple[int, int]] | None:
        """(leaf, offset of its frame in its log) of the leaves that may hold event
        ``event_id`` (the caller reads their frames: two events can share an index key), or
        None when the index cannot say: the id is not shaped as the writer's, or the index
        does not cover the tree."""
        key = id_key(event_id)
        if key is None or self.ids.covered(self.size) < self.size:
            return None
        return self.ids.lookup(key, self.size)

    def current(self) -> bool:
        """Whether the tree holds every frame of every log (each log ends where its cursor is):
        then nothing needs ingesting before a proof."""
        for path in iter_logs(self.root):
            provider, key = split_log_path(path)
            c = self.cursors.get(f"{provider}/{key}")
            try:
                end = list_segments(path)[-1].end_offset
            except (OSError, SegmentError):
                return False
            if end != (c.offset if c is not None else 0):
                return False
        return True

    # -- growing ------------------------------------------------------------------------

    def grow(self, fed: Iterable[Fed] = (), upto: dict[str, int] | None = None) -> int:
        """Add ``fed`` frames (in order) and commit; first, for any log the tree is behind
        on, the frames between its cursor and where ingest's frames start (read from the
        log and checked). With ``upto`` (log id → logical offset ingest has reached), also
        catch every log up to there. Returns the leaves added.

        Holds the tree's writer lock (``grow.lock``) throughout, and first reads the tree
        again if another writer committed since: an ingest's tree worker that outlived its
        ingest and the next ingest never write at once."""
        fd = open_locked(os.path.join(self.directory, GROW_LOCK), GROW_WAIT_S)
        if fd is None:
            raise TreeBusy(f"another process held {os.path.join(self.directory, GROW_LOCK)} for {GROW_WAIT_S:.0f} s")
        try:
            if self.tiles.refresh() != self._seen_size:
                self.logs = self._read_logs()
                self.numbers = {name: i for i, name in enumerate(self.logs)}
                self.cursors = self._read_cursors()
            added = self._grow(fed, upto)
            self._seen_size = self.size
            return added
        finally:
            os.close(fd)

    def _grow(self, fed: Iterable[Fed], upto: dict[str, int] | None) -> int:
        pending: list[Segment] = []
        heads: dict[str, Cursor] = {}

        def cursor(log: str) -> Cursor:
            if log in heads:
                return heads[log]
            c = self.cursors.get(log)
            if c is None:
                provider, key = log.split("/", 1)
                c = Cursor(-1, 0, -1, log_frame.genesis(provider, key))
            heads[log] = Cursor(c.number, c.offset, c.seq, c.hash)
            return heads[log]

        def catch_up(log: str, until: int) -> None:
            c = cursor(log)
            segment = Segment(log, [], [], [])
            for seq, digest, end, key in _checked_frames(self.root, log, c.offset, c.seq, c.hash, until):
                segment.frames.append((seq, digest))
                segment.keys.append(key)
                segment.starts.append(c.offset)
                c.offset, c.seq, c.hash = end, seq, digest.decode("ascii")
            if segment.frames:
                pending.append(segment)

        for f in fed:
            c = cursor(f.log)
            if not f.frames:
                continue
            if f.start == c.offset and f.frames[0][0] == c.seq + 1:
                # the usual case: the row follows the tree's cursor (ingest checked its links)
                starts = [f.start, *map(f.start.__add__, f.ends[: len(f.frames) - 1])]
                pending.append(Segment(f.log, f.frames, f.keys, starts))
                c.offset, c.seq, c.hash = f.start + f.ends[len(f.frames) - 1], f.frames[-1][0], \
                    f.frames[-1][1].decode("ascii")
                continue
            begin = 0
            for (seq, digest), end, key in zip(f.frames, f.ends, f.keys):
                start, begin = f.start + begin, end
                end += f.start
                if end <= c.offset:
                    continue  # in the tree already
                if start > c.offset:
                    catch_up(f.log, start)
                    if start != c.offset:
                        break  # the log could not be read up to it: left for the next catch-up
                if seq != c.seq + 1:
                    break  # not the frame that follows (checked by ingest against its own position)
                pending.append(Segment(f.log, [(seq, digest)], [key], [start]))
                c.offset, c.seq, c.hash = end, seq, digest.decode("ascii")
        for log, offset in sorted((upto or {}).items()):
            if cursor(log).offset < offset:
                catch_up(log, offset)
        if self.ids.covered(self.size) < self.size:
            self._index_ids()
        return self._commit(pending, heads)

    def _index_ids(self) -> None:
        """Index the event ids of the leaves the index does not cover (a tree grown before
        it existed): each of their logs is read once from its start."""
        size = self.size
        start = self.ids.covered(size)
        wanted: dict[str, dict[int, int]] = {}
        for leaf, log, seq in self.leaves(start):
            wanted.setdefault(log, {})[seq] = leaf
        keys: list[int | None] = [None] * (size - start)
        offsets = [0] * (size - start)
        for log, seqs in wanted.items():
            provider, key = log.split("/", 1)
            last, at = max(seqs), 0
            for seq, _digest, end, event_key in _checked_frames(self.root, log, 0, -1,
                                                                 log_frame.genesis(provider, key), 1 << 62):
                found = seqs.get(seq)
                if found is not None:
                    keys[found - start], offsets[found - start] = event_key, at
                if seq >= last:
                    break
                at = end
        self.ids.prepare(size)
        self.ids.write(start, size, keys, offsets)
        self.ids.merge()

    def catch_up_all(self) -> int:
        """Read every log from the tree's cursor to its end (a data root recorded before the
        tree, or one whose ingest runs without it): the leaves added."""
        ends = {}
        for path in iter_logs(self.root):
            provider, key = split_log_path(path)
            ends[f"{provider}/{key}"] = 1 << 62
        return self.grow((), ends)

    def _commit(self, pending: list[Segment], heads: dict[str, Cursor]) -> int:
        added = sum(len(seg.frames) for seg in pending)
        if not added:
            return 0
        new_logs = []
        for seg in pending:
            if seg.log not in self.numbers:
                self.numbers[seg.log] = len(self.logs)
                self.logs.append(seg.log)
                new_logs.append(seg.log)
        if new_logs:
            with open(os.path.join(self.directory, "logs"), "ab") as fh:
                fh.write(b"".join(name.encode("utf-8") + b"\n" for name in new_logs))
                if self.durable:
                    os.fsync(fh.fileno())
        records = b"".join(_records(self.numbers[seg.log], seg.frames) for seg in pending)
        fd = os.open(os.path.join(self.directory, "leaves"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.pwrite(fd, records, self.size * RECORD.size)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        cursors = dict(self.cursors)
        for log, c in heads.items():
            c.number = self.numbers[log] if log in self.numbers else c.number
            if c.number >= 0:
                cursors[log] = c
        new_size = self.size + added
        doc = {"size": new_size, "logs": {log: [c.number, c.offset, c.seq, c.hash] for log, c in cursors.items()}}
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
        write_atomic(os.path.join(self.directory, CURSORS_NEXT), body, durable=self.durable)
        self.ids.prepare(self.size)
        self.ids.write(self.size, new_size, list(chain.from_iterable(seg.keys for seg in pending)),
                       list(chain.from_iterable(seg.starts for seg in pending)))
        self.tiles.append(_leaf_hashes(pending))
        os.replace(os.path.join(self.directory, CURSORS_NEXT), os.path.join(self.directory, CURSORS))
        self.cursors = cursors
        self.ids.merge()
        return added


def _records(number: int, frames: list[tuple[int, bytes]]) -> bytes:
    """The ``leaves`` records of one log's frames (packed in C: no Python loop a frame)."""
    flat = chain.from_iterable(zip(repeat(number), map(itemgetter(0), frames)))
    return struct.pack(f">{2 * len(frames)}I", *flat)


def _leaf_hashes(pending: list[Segment]) -> list[bytes]:
    """:func:`frame_leaf_hash` of each pending frame, with each log's part of the leaf built
    once and the loop over frames in C (the tree's cost is mostly this: ~0.6 µs a frame)."""
    out: list[bytes] = []
    digest = methodcaller("digest")
    for seg in pending:
        form = b"\x00" + LEAF_PREFIX + seg.log.encode("utf-8").replace(b"%", b"%%") + b"\n%d\n%s\n"
        out.extend(map(digest, map(hashlib.sha256, map(form.__mod__, seg.frames))))
    return out


def _checked_frames(root: str, log: str, offset: int, seq: int, prev: str,
                    until: int) -> Iterator[tuple[int, bytes, int, int | None]]:
    """(seq, hash, end offset, event id key) of each complete frame of ``log`` from ``offset`` to ``until``
    whose link, seq and hash check out; stops at the first that does not, or at an
    unreadable log (the tree then stays behind there, as ingest does)."""
    provider, key = log.split("/", 1)
    path = log_path(root, provider, key)
    carry = b""
    at = offset
    prev_b = prev.encode("ascii")
    try:
        for chunk_offset, chunk in read_from(path, offset):
            data = carry + chunk if carry else chunk
            base = chunk_offset - len(carry)
            start = 0
            while True:
                nl = data.find(b"\n", start)
                if nl < 0 or base + nl + 1 > until:
                    break
                end = nl + 1
                line = data[start:end]
                try:
                    if log_frame.is_purged(line[:128]):
                        got, link, digest = log_frame.parse_purged(line)
                        link_b, digest_b = link.encode("ascii"), digest.encode("ascii")
                        id_of: int | None = None
                    else:
                        got, link_b, digest_b, ev_start, _e = log_frame.check_frame_at(data, start, end)
                        id_of = frame_key(data, ev_start)
                        mark = end - log_frame.TRAILER
                        if hashlib.sha256(data[start:mark]).hexdigest().encode("ascii") != digest_b:
                            return
                except log_frame.FrameError:
                    return
                if link_b != prev_b or got != seq + 1:
                    return
                seq, prev_b, at = got, digest_b, base + end
                yield seq, digest_b, at, id_of
                start = end
            if base + start >= until:
                return
            carry = data[start:]
    except (OSError, SegmentError):
        return


__all__ = ["Cursor", "Fed", "FrameTree", "LEAF_PREFIX", "TreeBusy", "TreeDamaged", "frame_leaf_hash", "leaf_data", "tree_dir"]
