"""What the vault keeps: SQLite (WAL) for everything readable, blob files for ciphertext.

``DIR/vault.db`` holds machines, enrolment and bootstrap tokens (a BLAKE3 hash of
the secret only), signed recipient sets, chains and their heads, one row per
batch and per index entry, chain-key wraps per (chain, epoch, admin), security
events and receipts. A batch's index is one packed column of its row
(``protocol.PackedIndex``: 72 bytes a frame), not a row a frame: one insert per
batch, and a tenth of the bytes. Each batch's ciphertext is a file under ``DIR/blobs``
(0600, directories 0700) reached only through :class:`BatchBlobs` — put, get,
delete by key — so object storage can replace the files later.

Crash safety: a batch's blob is written and fsynced (temp file + rename) before
the transaction that records it and moves the head commits (``synchronous=FULL``).
A crash in between leaves an orphan blob and the old head; the machine re-sends,
the blob key (a hash of the batch) is the same, and :meth:`Storage.sweep_orphans`
removes leftovers at start. Nothing ever points at a blob that is not there.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

import blake3

from agentlog.core.fileio import unlink_if_present, write_atomic
from agentlog.core.paths import FILE_MODE, ensure_dir
from agentlog.vault import VaultProtocolError
from agentlog.vault.protocol import IndexEntry, PackedIndex

__all__ = ["BatchBlobs", "FileBlobs", "Storage", "Head", "StoredBatch", "secret_hash", "blob_key"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS machines (
  machine_id TEXT PRIMARY KEY, host TEXT NOT NULL UNIQUE, public_key BLOB NOT NULL,
  enrolled_at INTEGER NOT NULL, rotated_at INTEGER);
CREATE TABLE IF NOT EXISTS tokens (
  secret_hash TEXT PRIMARY KEY, kind TEXT NOT NULL, set_fp TEXT, created_by TEXT,
  created_at INTEGER NOT NULL, expires_at INTEGER, used_at INTEGER, used_by TEXT);
CREATE TABLE IF NOT EXISTS recipients (
  version INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, signed TEXT NOT NULL, set_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chains (
  machine_id TEXT NOT NULL, chain TEXT NOT NULL, head_seq INTEGER NOT NULL, head_hash TEXT NOT NULL,
  epoch INTEGER NOT NULL, bytes INTEGER NOT NULL, last_receipt INTEGER NOT NULL,
  PRIMARY KEY (machine_id, chain));
CREATE TABLE IF NOT EXISTS batches (
  id INTEGER PRIMARY KEY, machine_id TEXT NOT NULL, chain TEXT NOT NULL, first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL, epoch INTEGER NOT NULL, nonce BLOB NOT NULL, blob_key TEXT NOT NULL,
  size INTEGER NOT NULL, received_at INTEGER NOT NULL, idx BLOB,
  UNIQUE (machine_id, chain, first_seq));
CREATE TABLE IF NOT EXISTS wraps (
  machine_id TEXT NOT NULL, chain TEXT NOT NULL, epoch INTEGER NOT NULL, admin_fp TEXT NOT NULL,
  wrap TEXT NOT NULL, PRIMARY KEY (machine_id, chain, epoch, admin_fp)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, machine_id TEXT, chain TEXT,
  seq INTEGER, vault_hash TEXT, sent_hash TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS receipts (
  id INTEGER PRIMARY KEY, at INTEGER NOT NULL, machine_id TEXT NOT NULL, chain TEXT NOT NULL,
  first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL, status INTEGER NOT NULL, outcome TEXT NOT NULL);
"""


def secret_hash(secret: str) -> str:
    """What the vault keeps of a token's secret."""
    return blake3.blake3(secret.encode("utf-8")).hexdigest()


def blob_key(machine_id: str, chain: str, first_seq: int, last_seq: int, nonce: bytes, ciphertext: bytes) -> str:
    """A batch's blob key: the same batch re-sent after a crash lands on the same key."""
    h = blake3.blake3(f"{machine_id}\n{chain}\n{first_seq}\n{last_seq}\n".encode("utf-8"))
    h.update(nonce)
    h.update(ciphertext)
    return h.hexdigest()


class BatchBlobs(Protocol):
    """Where batch ciphertext lives (files today, object storage later)."""

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` durably under ``key`` (replacing any earlier value) before returning."""

    def get(self, key: str) -> bytes:
        """The bytes stored under ``key`` (KeyError when there are none)."""

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is absent)."""

    def keys(self) -> Iterator[str]:
        """Every stored key (for sweeping orphans)."""


class FileBlobs:
    """Blobs as files ``<dir>/<key[:2]>/<key>``, 0600 in 0700 directories, written
    through a temp file, fsynced, renamed, the directory fsynced."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        ensure_dir(directory)

    def _path(self, key: str) -> str:
        if len(key) < 3 or not key.isalnum() or not key.isascii():
            raise KeyError(key)
        return os.path.join(self.directory, key[:2], key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        ensure_dir(os.path.dirname(path))
        write_atomic(path, data, FILE_MODE, durable=True)

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            raise KeyError(key) from None

    def delete(self, key: str) -> None:
        unlink_if_present(self._path(key))

    def keys(self) -> Iterator[str]:
        for sub in sorted(os.listdir(self.directory)):
            d = os.path.join(self.directory, sub)
            if len(sub) == 2 and os.path.isdir(d):
                for name in sorted(os.listdir(d)):
                    if name.startswith(sub) and name.isalnum():
                        yield name
                    elif name.startswith("."):  # a temp file a crash left behind
                        unlink_if_present(os.path.join(d, name))


class Head:
    """A chain's last acknowledged frame and its current key epoch."""

    __slots__ = ("seq", "hash", "epoch")

    def __init__(self, seq: int, hash: str, epoch: int) -> None:
        self.seq, self.hash, self.epoch = seq, hash, epoch


class StoredBatch:
    __slots__ = ("id", "first_seq", "last_seq", "epoch", "nonce", "blob_key", "received_at", "idx")

    def __init__(self, id: int, first_seq: int, last_seq: int, epoch: int, nonce: bytes, blob_key: str,
                 received_at: int, idx: bytes) -> None:
        self.id, self.first_seq, self.last_seq, self.epoch = id, first_seq, last_seq, epoch
        self.nonce, self.blob_key, self.received_at, self.idx = nonce, blob_key, received_at, idx

    def index(self) -> PackedIndex:
        return PackedIndex.unpack(self.first_seq, self.idx)


class Storage:
    """The vault's database and blobs. One writer at a time (``self.lock``); every
    method that changes several rows does it in one transaction."""

    def __init__(self, directory: str, blobs: BatchBlobs | None = None) -> None:
        ensure_dir(directory)
        self.directory = directory
        self.path = os.path.join(directory, "vault.db")
        if not os.path.exists(self.path):  # created 0600; SQLite gives -wal/-shm the same mode
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
        self.blobs: BatchBlobs = blobs if blobs is not None else FileBlobs(os.path.join(directory, "blobs"))
        self.lock = threading.RLock()
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        self._migrate()
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', '2')")

    def _migrate(self) -> None:
        """Schema 1 (stop 43) kept a row per frame in ``frames``: pack each batch's rows into
        its ``idx`` and drop the table, in one transaction."""
        with self.transaction() as db:
            if "idx" not in {str(r[1]) for r in db.execute("PRAGMA table_info(batches)")}:
                db.execute("ALTER TABLE batches ADD COLUMN idx BLOB")
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'frames'").fetchone() is None:
                return
            for bid, first in db.execute("SELECT id, first_seq FROM batches WHERE idx IS NULL").fetchall():
                rows = db.execute("SELECT seq, prev, hash, at FROM frames WHERE batch_id = ? ORDER BY seq", (bid,))
                packed = PackedIndex.of([IndexEntry(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows])
                if packed.first_seq != first:
                    raise VaultProtocolError(f"batch {bid}: its index does not start at its first seq")
                db.execute("UPDATE batches SET idx = ? WHERE id = ?", (packed.pack(), bid))
            db.execute("DROP TABLE frames")
            db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")

    def close(self) -> None:
        with self.lock:
            self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.db.execute(sql, args).fetchall())

    # -- tokens ---------------------------------------------------------------------
    def add_token(self, kind: str, secret: str, now: int, expires_at: int | None, *, set_fp: str | None = None,
                  created_by: str | None = None) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO tokens (secret_hash, kind, set_fp, created_by, created_at, expires_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (secret_hash(secret), kind, set_fp, created_by, now, expires_at))

    @staticmethod
    def take_token(db: sqlite3.Connection, kind: str, secret: str, now: int, used_by: str) -> bool:
        """Inside a transaction: mark an unused, unexpired token of ``kind`` used; whether there was one."""
        cur = db.execute("UPDATE tokens SET used_at = ?, used_by = ? WHERE secret_hash = ? AND kind = ? AND "
                         "used_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
                         (now, used_by, secret_hash(secret), kind, now))
        return cur.rowcount == 1

    def drop_unused_tokens(self, kind: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM tokens WHERE kind = ? AND used_at IS NULL", (kind,))

    # -- recipients -----------------------------------------------------------------
    def current_recipients(self) -> tuple[int, str] | None:
        """(version, signed set as JSON text) of the newest recipient set, or None."""
        rows = self.query("SELECT version, signed FROM recipients ORDER BY version DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    @staticmethod
    def put_recipients(db: sqlite3.Connection, version: int, fingerprint: str, signed_json: str,
                       admin_fps: list[str], now: int) -> int:
        """Inside a transaction: record a new set; delete the wraps of admins not in it (their count)."""
        db.execute("INSERT INTO recipients VALUES (?, ?, ?, ?)", (version, fingerprint, signed_json, now))
        marks = ",".join("?" * len(admin_fps))
        cur = db.execute(f"DELETE FROM wraps WHERE admin_fp NOT IN ({marks})", tuple(admin_fps))
        return int(cur.rowcount)

    # -- machines -------------------------------------------------------------------
    def machine_key(self, machine_id: str) -> bytes | None:
        rows = self.query("SELECT public_key FROM machines WHERE machine_id = ?", (machine_id,))
        return bytes(rows[0][0]) if rows else None

    # -- chains ---------------------------------------------------------------------
    def head(self, machine_id: str, chain: str) -> Head | None:
        rows = self.query("SELECT head_seq, head_hash, epoch FROM chains WHERE machine_id = ? AND chain = ?",
                          (machine_id, chain))
        return Head(int(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None

    def stored_index(self, machine_id: str, chain: str, first: int, last: int) -> list[IndexEntry]:
        """The index entries the vault holds for seqs ``first``..``last``."""
        out: list[IndexEntry] = []
        for start, idx in self.query("SELECT first_seq, idx FROM batches WHERE machine_id = ? AND chain = ? AND "
                                     "last_seq >= ? AND first_seq <= ? ORDER BY first_seq", (machine_id, chain, first, last)):
            out.extend(e for e in PackedIndex.unpack(int(start), bytes(idx)).entries() if first <= e.seq <= last)
        return out

    def store_batch(self, machine_id: str, chain: str, index: PackedIndex, epoch: int, nonce: bytes,
                    ciphertext: bytes, wraps: dict[str, str] | None, now: int, expect: Head | None) -> bool:
        """Write the blob, then in one transaction the batch with its index, its wraps and the
        new head — only if the head is still ``expect`` (False otherwise, nothing recorded)."""
        first, last = index.first_seq, index.last_seq
        key = blob_key(machine_id, chain, first, last, nonce, ciphertext)
        self.blobs.put(key, ciphertext)
        with self.transaction() as db:
            now_head = db.execute("SELECT head_seq, head_hash FROM chains WHERE machine_id = ? AND chain = ?",
                                  (machine_id, chain)).fetchone()
            if (now_head is None) != (expect is None) or (
                    now_head is not None and expect is not None and tuple(now_head) != (expect.seq, expect.hash)):
                # another request moved the head meanwhile: drop this blob unless a batch holds it
                if db.execute("SELECT 1 FROM batches WHERE blob_key = ?", (key,)).fetchone() is None:
                    self.blobs.delete(key)
                return False
            db.execute("INSERT INTO batches (machine_id, chain, first_seq, last_seq, epoch, nonce, blob_key, "
                       "size, received_at, idx) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (machine_id, chain, first, last, epoch, nonce, key, len(ciphertext), now, index.pack()))
            if wraps:
                db.executemany("INSERT OR REPLACE INTO wraps VALUES (?, ?, ?, ?, ?)",
                               [(machine_id, chain, epoch, fp, w) for fp, w in wraps.items()])
            db.execute("INSERT INTO chains VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (machine_id, chain) DO UPDATE SET "
                       "head_seq = excluded.head_seq, head_hash = excluded.head_hash, epoch = excluded.epoch, "
                       "bytes = chains.bytes + excluded.bytes, last_receipt = excluded.last_receipt",
                       (machine_id, chain, last, index.hash(len(index) - 1), epoch, len(ciphertext), now))
        return True

    def batches(self, machine_id: str, chain: str, after: int, max_bytes: int) -> tuple[list[StoredBatch], bool]:
        """Batches whose first seq is after ``after``, up to ``max_bytes`` of ciphertext
        (at least one); and whether more follow."""
        rows = self.query("SELECT id, first_seq, last_seq, epoch, nonce, blob_key, received_at, size, idx FROM batches "
                          "WHERE machine_id = ? AND chain = ? AND first_seq > ? ORDER BY first_seq",
                          (machine_id, chain, after))
        out: list[StoredBatch] = []
        total = 0
        for r in rows:
            if out and total + int(r[7]) > max_bytes:
                return out, True
            out.append(StoredBatch(int(r[0]), int(r[1]), int(r[2]), int(r[3]), bytes(r[4]), str(r[5]), int(r[6]),
                                   bytes(r[8])))
            total += int(r[7])
        return out, False

    def wrap(self, machine_id: str, chain: str, epoch: int, admin_fp: str) -> str | None:
        rows = self.query("SELECT wrap FROM wraps WHERE machine_id = ? AND chain = ? AND epoch = ? AND admin_fp = ?",
                          (machine_id, chain, epoch, admin_fp))
        return str(rows[0][0]) if rows else None

    # -- events and receipts --------------------------------------------------------
    def add_event(self, now: int, kind: str, machine_id: str | None = None, chain: str | None = None,
                  seq: int | None = None, vault_hash: str | None = None, sent_hash: str | None = None,
                  detail: str | None = None) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO events (at, kind, machine_id, chain, seq, vault_hash, sent_hash, detail) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (now, kind, machine_id, chain, seq, vault_hash, sent_hash, detail))

    def add_receipt(self, now: int, machine_id: str, chain: str, first: int, last: int, status: int, outcome: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO receipts (at, machine_id, chain, first_seq, last_seq, status, outcome) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (now, machine_id, chain, first, last, status, outcome))

    def sweep_orphans(self) -> int:
        """Delete blobs no batch row names (left by a crash between blob and commit)."""
        with self.lock:
            known = {str(r[0]) for r in self.db.execute("SELECT blob_key FROM batches")}
            orphans = [k for k in self.blobs.keys() if k not in known]
            for k in orphans:
                self.blobs.delete(k)
        return len(orphans)
