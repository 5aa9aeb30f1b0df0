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

- the tiles (:class:`~agentlog.integrity.tiles.TileStore`: ``tile/…`` and
  ``tree-size``, the commit point);
- ``leaves``: 8 bytes a leaf, big-endian (log number, seq), so that a proof can
  find an event's leaf and ``verify`` can check every leaf against its log;
  records beyond the committed size are leftovers of a crash, overwritten;
- ``logs``: the log ids, one a line; the line number is the log number;
- ``cursors``: for the committed size, each log's position in the tree (its
  next frame's logical offset, the last seq and hash added), written as
  ``cursors.next`` before the tiles commit and renamed after: whichever of the
  two names the committed size is the one in force.

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
from typing import Final

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.integrity import merkle
from agentlog.integrity.tiles import TileStore
from agentlog.log import frame as log_frame
from agentlog.log.layout import iter_logs, log_path, split_log_path
from agentlog.log.segments import SegmentError, read_from

LEAF_PREFIX: Final = b"agentlog/frame/v1\n"
RECORD: Final = struct.Struct(">II")
"""A leaf's record in ``leaves``: log number, seq."""
CURSORS: Final = "cursors"
CURSORS_NEXT: Final = "cursors.next"


class TreeDamaged(AgentlogError, RuntimeError):
    """The tree's files disagree with each other (edited, or a disk fault)."""


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
    """A frame ingest has just checked: its log, where it starts and ends (logical
    offsets), its seq and its hash (hex)."""

    log: str
    start: int
    end: int
    seq: int
    hash: str


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
        self.logs: list[str] = self._read_logs()
        self.numbers = {name: i for i, name in enumerate(self.logs)}
        self.cursors: dict[str, Cursor] = self._read_cursors()

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

    def leaves(self) -> Iterator[tuple[int, str, int]]:
        """(index, log id, seq) of every leaf of the committed tree, in order."""
        with open(os.path.join(self.directory, "leaves"), "rb") as fh:
            data = fh.read(self.size * RECORD.size)
        for i, (number, seq) in enumerate(RECORD.iter_unpack(data)):
            yield i, self.logs[number], seq

    # -- growing ------------------------------------------------------------------------

    def grow(self, fed: Iterable[Fed] = (), upto: dict[str, int] | None = None) -> int:
        """Add ``fed`` frames (in order) and commit; first, for any log the tree is behind
        on, the frames between its cursor and where ingest's frames start (read from the
        log and checked). With ``upto`` (log id → logical offset ingest has reached), also
        catch every log up to there. Returns the leaves added."""
        pending: list[tuple[str, int, str, int]] = []  # (log, seq, hash, end offset)
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
            for seq, digest, end in _checked_frames(self.root, log, c.offset, c.seq, c.hash, until):
                pending.append((log, seq, digest, end))
                c.offset, c.seq, c.hash = end, seq, digest

        for f in fed:
            c = cursor(f.log)
            if f.end <= c.offset:
                continue  # in the tree already
            if f.start > c.offset:
                catch_up(f.log, f.start)
                if f.start != c.offset:
                    continue  # the log could not be read up to it: left for the next catch-up
            if f.seq != c.seq + 1:
                continue  # not the frame that follows (checked by ingest against its own position)
            pending.append((f.log, f.seq, f.hash, f.end))
            c.offset, c.seq, c.hash = f.end, f.seq, f.hash
        for log, offset in sorted((upto or {}).items()):
            if cursor(log).offset < offset:
                catch_up(log, offset)
        return self._commit(pending, heads)

    def catch_up_all(self) -> int:
        """Read every log from the tree's cursor to its end (a data root recorded before the
        tree, or one whose ingest runs without it): the leaves added."""
        ends = {}
        for path in iter_logs(self.root):
            provider, key = split_log_path(path)
            ends[f"{provider}/{key}"] = 1 << 62
        return self.grow((), ends)

    def _commit(self, pending: list[tuple[str, int, str, int]], heads: dict[str, Cursor]) -> int:
        if not pending:
            return 0
        new_logs = []
        for log, _seq, _h, _e in pending:
            if log not in self.numbers:
                self.numbers[log] = len(self.logs)
                self.logs.append(log)
                new_logs.append(log)
        if new_logs:
            with open(os.path.join(self.directory, "logs"), "ab") as fh:
                fh.write(b"".join(name.encode("utf-8") + b"\n" for name in new_logs))
                if self.durable:
                    os.fsync(fh.fileno())
        records = b"".join(RECORD.pack(self.numbers[log], seq) for log, seq, _h, _e in pending)
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
        new_size = self.size + len(pending)
        doc = {"size": new_size, "logs": {log: [c.number, c.offset, c.seq, c.hash] for log, c in cursors.items()}}
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
        write_atomic(os.path.join(self.directory, CURSORS_NEXT), body, durable=self.durable)
        self.tiles.append(_leaf_hashes(pending))
        os.replace(os.path.join(self.directory, CURSORS_NEXT), os.path.join(self.directory, CURSORS))
        self.cursors = cursors
        return len(pending)


def _leaf_hashes(pending: list[tuple[str, int, str, int]]) -> list[bytes]:
    """:func:`frame_leaf_hash` of each pending frame, with each log's part of the leaf built
    once (the tree's cost is mostly this loop: ~1 µs a frame)."""
    sha = hashlib.sha256
    heads: dict[str, bytes] = {}
    out = []
    for log, seq, digest, _end in pending:
        head = heads.get(log)
        if head is None:
            head = heads[log] = b"\x00" + LEAF_PREFIX + log.encode("utf-8") + b"\n"
        out.append(sha(b"%s%d\n%s\n" % (head, seq, digest.encode("ascii"))).digest())
    return out


def _checked_frames(root: str, log: str, offset: int, seq: int, prev: str,
                    until: int) -> Iterator[tuple[int, str, int]]:
    """(seq, hash, end offset) of each complete frame of ``log`` from ``offset`` to ``until``
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
                    else:
                        got, link_b, digest_b, _s, _e = log_frame.check_frame_at(data, start, end)
                        mark = end - log_frame.TRAILER
                        if hashlib.sha256(data[start:mark]).hexdigest().encode("ascii") != digest_b:
                            return
                except log_frame.FrameError:
                    return
                if link_b != prev_b or got != seq + 1:
                    return
                seq, prev_b, at = got, digest_b, base + end
                yield seq, digest_b.decode("ascii"), at
                start = end
            if base + start >= until:
                return
            carry = data[start:]
    except (OSError, SegmentError):
        return


__all__ = ["Cursor", "Fed", "FrameTree", "LEAF_PREFIX", "TreeDamaged", "frame_leaf_hash", "leaf_data", "tree_dir"]
