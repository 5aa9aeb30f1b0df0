"""The machine's chains: which session logs there are, what of each is shipped
and what is pending, checked locally before anything is sent.

A chain is one session log, ``logs/<provider>/<key>.jsonl`` with its sealed
segments; its id is ``<provider>~<key>``. What the ship pass knows of it lives
in ``<data root>/vault/chains/<chain>/`` (0700, files 0600):

    shipped    "<seq> <hash> <offset>\\n": the last frame the vault acknowledged
               and the chain's logical offset just after it (sealing keeps offsets)
    hashes     the SHA-256 of every shipped frame, 32 bytes each at seq * 32: how
               a later local rewrite is pinned to its first diverging seq
    chain.key  the chain's 32-byte key while the chain is open
    key.version  the recipient-set version that key was made for; a newer pinned
               set (an admin added or removed, or ``vault admin rekey``) makes the
               next batch start a new key epoch
    key.pending  present while the vault may not hold the key's wraps yet: every
               batch carries them until one carrying them is stored
    stopped    JSON {"reason", "seq", "at"}: shipping this chain stopped for good
               (a local rewrite, a divergence, a refused batch); never cleared
               automatically

Reading never holds the session's lock across a request: the segments module
takes the shared lock only for an instant per chunk.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Iterator, NamedTuple

from agentlog.core.fileio import read_small, unlink_if_present, write_atomic
from agentlog.core.paths import ensure_dir
from agentlog.log.frame import FrameError, genesis, parse_any
from agentlog.log.layout import head_path, iter_logs, split_log_path
from agentlog.log.segments import line_ending_at, lines_from, read_from
from agentlog.log.writer import parse_head
from agentlog.vault import VaultError, VaultProtocolError
from agentlog.vault.machine import chains_dir
from agentlog.vault.protocol import MAX_BATCH_BYTES, IndexEntry, PackedIndex, chain_id, iter_frames, scan_index



class Diverged(VaultError):
    """The local chain is not a continuation of what was shipped (a rewrite)."""

    def __init__(self, seq: int, why: str) -> None:
        super().__init__(f"the local log diverges at seq {seq}: {why}")
        self.seq = seq
        self.why = why


def local_chains(root: str) -> list[tuple[str, str]]:
    """(chain id, log file) of every session log whose name makes a valid chain id."""
    out = []
    for path in iter_logs(root):
        try:
            out.append((chain_id(*split_log_path(path)), path))
        except VaultProtocolError:
            continue
    return out


def read_head(log_file: str) -> tuple[int, str] | None:
    """(seq, hash) the log's head file names, None when there is none (or it is unreadable)."""
    try:
        data = read_small(head_path(log_file), 4096)
        if data is None:
            return None
        tip = parse_head(data)
    except (OSError, ValueError):
        return None
    return tip.seq, tip.hash


@dataclass(frozen=True)
class Shipped:
    seq: int
    hash: str
    offset: int

    def line(self) -> bytes:
        return f"{self.seq} {self.hash} {self.offset}\n".encode("ascii")


class Entry(NamedTuple):
    """One pending frame: its index entry and where its bytes are (logical offset, length)."""

    entry: IndexEntry
    offset: int
    length: int

    @property
    def seq(self) -> int:
        return self.entry.seq

    @property
    def hash(self) -> str:
        return self.entry.hash


class ChainState:
    """The files of one chain under ``vault/chains/<chain>/``."""

    def __init__(self, root: str, chain: str) -> None:
        self.chain = chain
        self.dir = os.path.join(chains_dir(root), chain)

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _read(self, name: str, limit: int = 4096) -> bytes | None:
        return read_small(self._path(name), limit)  # a line or a key (the stop reason may be longer)

    def _write(self, name: str, data: bytes) -> None:
        ensure_dir(self.dir)
        write_atomic(self._path(name), data)

    def shipped(self) -> Shipped | None:
        data = self._read("shipped")
        if data is None:
            return None
        parts = data.decode("ascii", "replace").split()
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit() or len(parts[1]) != 64:
            raise VaultError(f"{self._path('shipped')}: not '<seq> <hash> <offset>'")
        return Shipped(int(parts[0]), parts[1], int(parts[2]))

    def record_shipped(self, entries: list[Entry]) -> Shipped:
        """The vault holds ``entries`` (dense, in order): keep their hashes, then move ``shipped``."""
        last = entries[-1]
        return self.record(entries[0].seq, b"".join(bytes.fromhex(e.hash) for e in entries), last.offset + last.length)

    def record_batch(self, batch: Batch, count: int) -> Shipped:
        """The vault holds the first ``count`` frames of ``batch``."""
        end = batch.offsets()[count] if count < len(batch.index) else batch.end
        return self.record(batch.first, batch.index.hashes[: 32 * count], end)

    def record(self, first_seq: int, hashes: bytes, end: int) -> Shipped:
        """The vault holds the frames from ``first_seq`` whose SHA-256s are ``hashes`` (32
        bytes each), the last ending at logical offset ``end``: keep the hashes (fsynced),
        then move ``shipped``."""
        ensure_dir(self.dir)
        fd = os.open(self._path("hashes"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.pwrite(fd, hashes, first_seq * 32)
            os.fsync(fd)
        finally:
            os.close(fd)
        s = Shipped(first_seq + len(hashes) // 32 - 1, hashes[-32:].hex(), end)
        self._write("shipped", s.line())
        return s

    def shipped_hash(self, seq: int) -> str | None:
        try:
            fd = os.open(self._path("hashes"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            data = os.pread(fd, 32, seq * 32)
        finally:
            os.close(fd)
        return data.hex() if len(data) == 32 else None

    def chain_key(self) -> bytes | None:
        return self._read("chain.key")

    def key_version(self) -> int:
        """The recipient-set version the chain's key was made for (0: unknown, an older state)."""
        data = self._read("key.version")
        text = data.decode("ascii", "replace").strip() if data is not None else ""
        return int(text) if text.isdigit() else 0

    def key_pending(self) -> bool:
        """Whether the vault may not hold this key's wraps yet (no batch carrying them was stored)."""
        return os.path.exists(self._path("key.pending"))

    def new_chain_key(self, key: bytes, version: int = 0) -> bytes:
        """Make ``key`` the chain's key, made for recipient-set ``version`` and pending
        until the vault stores a batch carrying its wraps. The marker goes first, the
        version last: a crash in between leaves a pending key or an older version, and
        either only leads to another new key."""
        self._write("key.pending", b"")
        self._write("chain.key", key)
        self._write("key.version", f"{version}\n".encode("ascii"))
        return key

    def key_acknowledged(self) -> None:
        """The vault stored a batch carrying this key's wraps: later batches go without."""
        unlink_if_present(self._path("key.pending"))

    def drop_chain_key(self) -> None:
        for name in ("chain.key", "key.version", "key.pending"):
            unlink_if_present(self._path(name))

    def stopped(self) -> dict[str, object] | None:
        data = self._read("stopped", 1 << 20)
        if data is None:
            return None
        try:
            d = json.loads(data)
        except ValueError:
            d = None
        return d if isinstance(d, dict) else {"reason": data.decode("utf-8", "replace").strip(), "seq": None}

    def stop(self, reason: str, seq: int | None) -> None:
        self._write("stopped", json.dumps({"reason": reason, "seq": seq, "at": int(time.time())}).encode() + b"\n")


def first_divergence(log_file: str, state: ChainState, upto: int) -> int:
    """The first seq <= ``upto`` whose local hash differs from the shipped one (``upto`` if none differs
    before it, e.g. when the frame is gone)."""
    expect = 0
    for _off, line in lines_from(log_file, 0):
        try:
            seq, _prev, digest, _p = parse_any(line, hashlib.sha256)
        except FrameError:
            return expect
        if seq != expect or seq > upto:
            return min(expect, upto)
        if state.shipped_hash(seq) != digest:
            return seq
        expect += 1
    return min(expect, upto)


def _resume(log_file: str, state: ChainState, shipped: Shipped | None) -> tuple[int, str, int]:
    """(logical offset, prev, seq) where the frames after ``shipped`` start; Diverged when
    the frame the vault acknowledged last is no longer in the log as it was."""
    provider, key = split_log_path(log_file)
    if shipped is None:
        return 0, genesis(provider, key), 0
    last = line_ending_at(log_file, shipped.offset)
    try:
        ok = bool(last) and parse_any(last, hashlib.sha256)[::2] == (shipped.seq, shipped.hash)
    except FrameError:
        ok = False
    if not ok:
        at = first_divergence(log_file, state, shipped.seq)
        raise Diverged(at, f"frame {shipped.seq} is no longer the one the vault acknowledged")
    return shipped.offset, shipped.hash, shipped.seq + 1


@dataclass(frozen=True)
class Batch:
    """Consecutive pending frames: their packed index, where the first starts in the log
    (its logical offset), and their bytes, exactly the bytes that were checked (nothing is
    read twice)."""

    index: PackedIndex
    start: int
    data: bytes

    @property
    def first(self) -> int:
        return self.index.first_seq

    @property
    def last(self) -> int:
        return self.index.last_seq

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def offsets(self) -> list[int]:
        """Where each frame starts (logical offsets), found again in the batch's bytes."""
        return [self.start + s for s, _e in iter_frames(self.data)]

    @property
    def entries(self) -> list[Entry]:
        offsets = self.offsets()
        ends = offsets[1:] + [self.end]
        return [Entry(e, off, stop - off) for e, off, stop in zip(self.index.entries(), offsets, ends)]


class _BatchBuilder:
    """The frames of the batch being read: their hashes (hex, as the lines hold them) and
    ``at`` values; the bytes as runs of the read buffers."""

    def __init__(self, first_prev: bytes, start: int) -> None:
        self.first_prev = first_prev
        self.start = start
        self.hashes: list[bytes] = []
        self.ats: list[int | None] = []
        self.pieces: list[bytes] = []
        self.size = 0

    def take(self, first_seq: int) -> Batch:
        hashes = binascii.unhexlify(b"".join(self.hashes))
        prevs = binascii.unhexlify(self.first_prev) + hashes[:-32]  # each prev was checked to be the hash before it
        return Batch(PackedIndex(first_seq, prevs, hashes, tuple(self.ats)), self.start, b"".join(self.pieces))


def pending_batches(log_file: str, state: ChainState, shipped: Shipped | None, upto: int | None,
                    limit: int = MAX_BATCH_BYTES) -> Iterator[Batch]:
    """The frames after ``shipped`` up to seq ``upto`` (all complete ones when None) in
    batches of at most ``limit`` bytes (a larger frame is a batch of its own), read
    once in chunks and each checked as it is read: its hash over its bytes (a purged
    frame's is taken as given), dense seqs, each ``prev`` the hash before it, the
    first continuing what the vault holds. Raises Diverged at the first frame that
    fails, naming its seq (a local rewrite after shipping); the batches before it
    have been yielded. Never writes anything."""
    start, prev_hex, expect = _resume(log_file, state, shipped)
    if upto is not None and upto < expect:
        return
    prev = prev_hex.encode("ascii")
    cur = _BatchBuilder(prev, start)
    first = expect
    carry = b""
    base = start
    for off, data in read_from(log_file, start):
        buf = carry + data if carry else data
        if not carry:
            base = off
        pos = run = 0  # run: where this buffer's part of the current batch starts
        hashes, ats = cur.hashes, cur.ats
        try:
            for _, end, seq, p, digest, at in scan_index(buf, 0):
                if seq != expect:
                    raise Diverged(expect, f"expected seq {expect}, found {seq}")
                if p != prev:
                    raise Diverged(seq, "its prev is not the hash of the frame before it")
                if cur.size + (end - pos) > limit and hashes:
                    cur.pieces.append(buf[run:pos])
                    yield cur.take(first)
                    cur, first, run = _BatchBuilder(prev, base + pos), seq, pos
                    hashes, ats = cur.hashes, cur.ats
                hashes.append(digest)
                ats.append(at)
                cur.size += end - pos
                prev, expect, pos = digest, expect + 1, end
                if upto is not None and seq >= upto:
                    cur.pieces.append(buf[run:pos])
                    yield cur.take(first)
                    return
        except VaultProtocolError as e:
            raise Diverged(expect, f"not a valid frame ({e})") from None
        if hashes and run < pos:
            cur.pieces.append(buf[run:pos])
        carry = buf[pos:]
        base += pos
    if cur.hashes:
        yield cur.take(first)


def pending(log_file: str, state: ChainState, shipped: Shipped | None, upto: int | None) -> list[Entry]:
    """The entries of :func:`pending_batches` (their bytes dropped as each batch is read)."""
    return [e for b in pending_batches(log_file, state, shipped, upto) for e in b.entries]
