"""Config files as the installer edits them: an exclusive lock, atomic replace,
timestamped backups, and the install ledger.

The ledger (``<state_dir>/install-ledger.json``) remembers, per config file,
the exact bytes before agentlog's first edit and the SHA-256 of what it last
wrote: uninstall restores the original byte for byte when nobody touched the
file since. Moved out of installer.py, which re-exports these names.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from agentlog.core import paths
from agentlog.core.fileio import write_atomic
from agentlog.install.errors import InstallError, LockTimeoutError

LEDGER_FILE = "install-ledger.json"
LEDGER_VERSION = 1

LOCK_SUFFIX = ".agentlog-lock"
BACKUP_MARK = ".agentlog-bak-"
KEEP_BACKUPS = 5
NEW_FILE_MODE = 0o644


def real_target(path: Path) -> Path:
    """The file to read and write for ``path``: a symlink's final target, else ``path``."""
    if path.is_symlink():
        return Path(os.path.realpath(path))
    return path


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InstallError("is a directory, expected a file", path) from None


def file_mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


@contextmanager
def locked(path: Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold an exclusive `flock` on ``<path>.agentlog-lock`` for the block.

    The lock file is deleted before release; a waiter that locked the old
    inode notices the path changed and retries, so two holders never overlap.
    """
    lock_path = str(path) + LOCK_SUFFIX
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            raise InstallError("directory does not exist", path.parent) from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                    if time.monotonic() >= deadline:
                        raise LockTimeoutError(
                            f"another agentlog process holds {lock_path} (waited {timeout:g} s)", path
                        ) from None
                    time.sleep(0.05)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same dir, fsync, rename).

    ``mode`` defaults to the existing file's mode, else 0644.
    """
    if mode is None:
        mode = file_mode(path)
    if mode is None:
        mode = NEW_FILE_MODE
    write_atomic(str(path), data, mode)


def remove_file(path: Path) -> None:
    """Delete ``path`` (never a directory) and sync its directory."""
    os.unlink(path)
    paths.fsync_path(str(path.parent))


def backup(path: Path, data: bytes, mode: int | None, now: float | None = None) -> Path:
    """Write ``<path>.agentlog-bak-<YYYYmmddTHHMMSS>`` (UTC) holding ``data``; keep the 5 newest."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    base = f"{path}{BACKUP_MARK}{stamp}"
    candidate = base
    n = 0
    while True:
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            n += 1
            candidate = f"{base}-{n}"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode if mode is not None else 0o600)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        try:
            os.unlink(candidate)
        except FileNotFoundError:
            pass
        raise
    prune_backups(path)
    return Path(candidate)


def list_backups(path: Path) -> list[Path]:
    """Backups of ``path``, oldest first."""
    prefix = path.name + BACKUP_MARK
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except FileNotFoundError:
        return []

    def key(name: str) -> tuple[str, int]:
        stamp = name[len(prefix) :]
        head, _, tail = stamp.partition("-")
        return (head, int(tail) if tail.isdigit() else 0)

    return [path.parent / n for n in sorted(names, key=key)]


def drop_own_backups(path: Path, entry: LedgerEntry) -> None:
    """After a byte-for-byte restore: delete the backups install made that hold nothing else
    than the restored bytes or bytes agentlog wrote (a backup of anything else is kept)."""
    for old in list_backups(path):
        try:
            data = old.read_bytes()
        except OSError:
            continue
        if data == entry.original or sha256_hex(data) == entry.written_sha256:
            try:
                os.unlink(old)
            except FileNotFoundError:
                pass


def prune_backups(path: Path, keep: int = KEEP_BACKUPS) -> None:
    backups = list_backups(path)
    for old in backups[: max(0, len(backups) - keep)]:
        try:
            os.unlink(old)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------
# Ledger: original bytes and what we wrote, per config file


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class LedgerEntry:
    """What a config file held before agentlog first edited it, and what agentlog last wrote."""

    agent: str
    scope: str
    original: bytes | None
    """Exact bytes before our first edit; None when the file did not exist."""
    written_sha256: str
    updated_at: str

    @property
    def existed(self) -> bool:
        return self.original is not None

    def to_json(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "scope": self.scope,
            "existed": self.existed,
            "original_b64": base64.b64encode(self.original).decode("ascii") if self.original is not None else None,
            "original_sha256": sha256_hex(self.original) if self.original is not None else None,
            "written_sha256": self.written_sha256,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_json(cls, obj: object) -> LedgerEntry | None:
        if not isinstance(obj, dict):
            return None
        written = obj.get("written_sha256")
        if not isinstance(written, str):
            return None
        original: bytes | None = None
        if obj.get("existed"):
            b64 = obj.get("original_b64")
            if not isinstance(b64, str):
                return None
            try:
                original = base64.b64decode(b64.encode("ascii"), validate=True)
            except ValueError:
                return None
            if obj.get("original_sha256") not in (None, sha256_hex(original)):
                return None
        return cls(
            agent=str(obj.get("agent", "")),
            scope=str(obj.get("scope", "")),
            original=original,
            written_sha256=written,
            updated_at=str(obj.get("updated_at", "")),
        )


def ledger_path(data_root: str | Path) -> Path:
    """``<state_dir>/install-ledger.json``."""
    return Path(paths.state_dir(str(data_root))) / LEDGER_FILE


def read_ledger(data_root: str | Path) -> dict[str, LedgerEntry]:
    """The ledger's entries keyed by the config file's real path (empty if absent or unreadable)."""
    path = ledger_path(data_root)
    try:
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    files = obj.get("files") if isinstance(obj, dict) else None
    out: dict[str, LedgerEntry] = {}
    if isinstance(files, dict):
        for key, value in files.items():
            entry = LedgerEntry.from_json(value)
            if entry is not None:
                out[key] = entry
    return out


def update_ledger(data_root: str | Path, key: str, entry: LedgerEntry | None) -> None:
    """Set (or with None, delete) one ledger entry, under the ledger's lock."""
    path = ledger_path(data_root)
    if entry is None and not path.exists():
        return
    paths.ensure_dir(str(path.parent))
    with locked(path):
        entries = read_ledger(data_root)
        if entry is None:
            if key not in entries:
                return
            del entries[key]
        else:
            entries[key] = entry
        doc = {"version": LEDGER_VERSION, "files": {k: v.to_json() for k, v in sorted(entries.items())}}
        atomic_write(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"), paths.FILE_MODE)
