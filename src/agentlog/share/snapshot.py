"""Snapshots of a data root's truth (docs/share.md, "Snapshots"): one zstd-compressed tar of the
session logs (with their sealed segments and heads; the memory log and the purge records are logs
too), the tree's origin and signed checkpoints, the signing and witness keys, and ``config.toml``,
with a manifest of every file's size and SHA-256. Never derived data: the store, the projection,
the search index, the memory read model and the tree's levels are rebuilt from the logs
(``agentlog rebuild``; the tree grows again on the next ingest).

Consistent: the checkpoints are copied first, then each log under a shared ``flock`` (the lock the
hook's writer takes exclusively), so a log is never copied in the middle of an append, and every
frame a copied checkpoint covers is in the copied logs. Files are staged in a private directory
beside the snapshot, then written to the tar behind ``MANIFEST.json``.

A snapshot is untrusted input when read back: every member must be a regular file under one of
the kept places, listed in the manifest with that size and hash, and nothing listed may be
missing. :func:`verify` and :func:`restore` name the first file that fails; :func:`restore`
writes only into an empty data root, and only after the whole snapshot checked out.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Any, Final, Iterator

from agentlog.core import AgentlogError, UsageError
from agentlog.core.paths import config_file, logs_dir, state_dir

FORMAT: Final = "agentlog-snapshot/v1"
MANIFEST: Final = "MANIFEST.json"
SUFFIX: Final = ".tar.zst"
_CHUNK: Final = 1 << 20
_MAX_MANIFEST: Final = 256 << 20
_MAX_FILES: Final = 10_000_000


class SnapshotError(AgentlogError):
    """A snapshot that does not check out, or cannot be made or restored (exit 1)."""


@dataclass(frozen=True)
class Made:
    path: str
    files: int
    bytes_in: int
    bytes_out: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes_in, "compressed_bytes": self.bytes_out,
                "seconds": round(self.seconds, 3)}


def snapshots_dir(root: str) -> str:
    """Where ``snapshot create`` writes and ``snapshot list`` looks by default: ``<root>/snapshots``."""
    return os.path.join(root, "snapshots")


def _kept(root: str) -> Iterator[tuple[str, str]]:
    """(name in the snapshot, path) of every file kept, checkpoints and keys before the logs."""
    tree = os.path.join(state_dir(root), "tree")
    places = [(os.path.join(tree, "origin"), "state/tree/origin"), (os.path.join(tree, "checkpoints"), "state/tree/checkpoints"),
              (os.path.join(state_dir(root), "keys"), "state/keys"), (config_file(root), "config.toml")]
    for path, name in places:
        if os.path.isfile(path):
            yield name, path
        elif os.path.isdir(path):
            for d, _dirs, files in sorted(os.walk(path)):
                for f in sorted(files):
                    full = os.path.join(d, f)
                    if os.path.isfile(full) and not os.path.islink(full) and not f.endswith(".lock"):
                        yield name + "/" + os.path.relpath(full, path).replace(os.sep, "/"), full


def _log_files(root: str) -> Iterator[tuple[str, str, bool]]:
    """(name, path, is the log itself) of every log's files: its ``.jsonl`` first, then its head
    and sealed segments (which the copy of the ``.jsonl`` holds the lock for)."""
    base = logs_dir(root)
    if not os.path.isdir(base):
        return
    for d, dirs, files in sorted(os.walk(base)):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(d, f)
            if os.path.islink(full) or not os.path.isfile(full) or f.endswith(".lock") or f.startswith("."):
                continue
            yield "logs/" + os.path.relpath(full, base).replace(os.sep, "/"), full, f.endswith(".jsonl")


def _copy(src: str, dst: str, fd: int | None = None) -> tuple[int, str]:
    os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    with (os.fdopen(os.dup(fd), "rb") if fd is not None else open(src, "rb")) as fin, \
            open(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fout:
        fin.seek(0)
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _stage(root: str, stage: str) -> list[dict[str, Any]]:
    import fcntl

    files: list[dict[str, Any]] = []
    for name, path in _kept(root):
        size, digest = _copy(path, os.path.join(stage, name))
        files.append({"path": name, "size": size, "sha256": digest})
    logs = list(_log_files(root))
    by_log: dict[str, list[tuple[str, str]]] = {}
    for name, path, is_log in logs:
        stem = name.split(".sealed/")[0] if ".sealed/" in name else \
            name.removesuffix(".jsonl") if is_log else name.removesuffix(".head")
        by_log.setdefault(stem, []).append((name, path))
    for stem in sorted(by_log):
        members = by_log[stem]
        log = next((p for n, p in members if n == stem + ".jsonl"), None)
        fd = os.open(log, os.O_RDONLY) if log is not None else None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)
            for name, path in members:
                if not os.path.exists(path):
                    continue  # a segment sealed away meanwhile (not with the lock held)
                size, digest = _copy(path, os.path.join(stage, name), fd if path == log else None)
                files.append({"path": name, "size": size, "sha256": digest})
        finally:
            if fd is not None:
                os.close(fd)
    return files


def create(root: str, out: str | None = None) -> Made:
    """Snapshot ``root`` into ``out`` (default: a new file in :func:`snapshots_dir`), 0600."""
    import zstandard

    from agentlog.core.timefmt import format_us

    started = time.monotonic()
    now = time.time_ns() // 1000
    if out is None:
        os.makedirs(snapshots_dir(root), mode=0o700, exist_ok=True)
        out = os.path.join(snapshots_dir(root), "agentlog-" + format_us(now).replace(":", "").replace("-", "")[:15] + SUFFIX)
    out = os.path.abspath(out)
    if os.path.exists(out):
        raise UsageError(f"{out} exists; give another file")
    parent = os.path.dirname(out) or "."
    stage = tempfile.mkdtemp(prefix=".snapshot-", dir=parent)
    tmp = out + ".part"
    try:
        files = _stage(root, stage)
        manifest = {"format": FORMAT, "created_at": format_us(now), "files": files}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as raw, zstandard.ZstdCompressor(level=3, threads=0).stream_writer(raw) as z, \
                tarfile.open(fileobj=z, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            data = json.dumps(manifest, indent=1).encode("utf-8")
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode, info.mtime = len(data), 0o600, now // 1_000_000
            tar.addfile(info, io.BytesIO(data))
            for f in files:
                info = tarfile.TarInfo(f["path"])
                info.size, info.mode, info.mtime = f["size"], 0o600, now // 1_000_000
                with open(os.path.join(stage, f["path"]), "rb") as fh:
                    tar.addfile(info, fh)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Made(out, len(files), sum(int(f["size"]) for f in files), os.path.getsize(out), time.monotonic() - started)


# -- reading back -----------------------------------------------------------------------------


def _allowed(name: str) -> bool:
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return False
    return name == "config.toml" or name == "state/tree/origin" or \
        name.startswith(("logs/", "state/tree/checkpoints/", "state/keys/"))


def _manifest(tar: tarfile.TarFile, path: str) -> dict[str, dict[str, Any]]:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile() or first.size > _MAX_MANIFEST:
        raise SnapshotError(f"{path} does not start with its {MANIFEST}: not an agentlog snapshot")
    fh = tar.extractfile(first)
    assert fh is not None
    try:
        doc = json.loads(fh.read())
    except (ValueError, UnicodeDecodeError):
        raise SnapshotError(f"{path}: {MANIFEST} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), list):
        raise SnapshotError(f"{path}: {MANIFEST} is not an {FORMAT} manifest")
    out: dict[str, dict[str, Any]] = {}
    for f in doc["files"][:_MAX_FILES]:
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("size"), int)
                and isinstance(f.get("sha256"), str)) or not _allowed(f["path"]) or f["path"] in out:
            raise SnapshotError(f"{path}: {MANIFEST} lists a file it may not: {str(f)[:120]}")
        out[f["path"]] = f
    return out


def _walk(path: str, sink: str | None) -> dict[str, Any]:
    """Check the snapshot at ``path`` member by member (writing each under ``sink`` when given);
    the manifest's summary, or :class:`SnapshotError` naming the first file that fails."""
    import zstandard

    try:
        raw: IO[bytes] = open(path, "rb")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    seen: set[str] = set()
    with raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
        try:
            with tarfile.open(fileobj=z, mode="r|") as tar:
                files = _manifest(tar, path)
                while (member := tar.next()) is not None:
                    name = member.name
                    if not member.isfile() or not _allowed(name) or name not in files or name in seen:
                        raise SnapshotError(f"{path}: {name} is not a file the manifest lists")
                    seen.add(name)
                    want = files[name]
                    fh = tar.extractfile(member)
                    assert fh is not None
                    h = hashlib.sha256()
                    size = 0
                    out = None
                    if sink is not None:
                        dst = os.path.join(sink, *name.split("/"))
                        os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
                        out = open(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")
                    try:
                        while chunk := fh.read(_CHUNK):
                            h.update(chunk)
                            size += len(chunk)
                            if out is not None:
                                out.write(chunk)
                    finally:
                        if out is not None:
                            out.close()
                    if size != want["size"] or h.hexdigest() != want["sha256"]:
                        raise SnapshotError(f"{path}: {name} does not match the manifest "
                                            f"({size} bytes, sha256 {h.hexdigest()[:16]}…; the manifest says "
                                            f"{want['size']} bytes, {str(want['sha256'])[:16]}…)")
        except (tarfile.TarError, zstandard.ZstdError, EOFError) as e:
            raise SnapshotError(f"{path} is damaged after {len(seen)} files ({e})") from None
    missing = sorted(set(files) - seen)
    if missing:
        raise SnapshotError(f"{path}: {missing[0]} is in the manifest but not in the snapshot"
                            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return {"path": path, "files": len(files), "bytes": sum(int(f["size"]) for f in files.values()), "ok": True}


def verify(path: str) -> dict[str, Any]:
    """Check every file of the snapshot against its manifest."""
    return _walk(path, None)


def restore(path: str, root: str) -> dict[str, Any]:
    """Restore the snapshot into ``root``, which must be empty or not exist; then `agentlog rebuild`
    makes the derived data again."""
    if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
        raise UsageError(f"{root} is not an empty directory: restore only into an empty data root")
    if not os.path.isfile(path):
        raise UsageError(f"{path} is not a file")
    made = not os.path.exists(root)
    os.makedirs(root, mode=0o700, exist_ok=True)
    stage = tempfile.mkdtemp(prefix=".restore-", dir=root)
    try:
        got = _walk(path, stage)
        for name in os.listdir(stage):
            os.replace(os.path.join(stage, name), os.path.join(root, name))
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if made:
            shutil.rmtree(root, ignore_errors=True)
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return got | {"root": root}


def listing(directory: str) -> list[dict[str, Any]]:
    """The snapshots in ``directory`` (newest first): file, size, when made, how many files."""
    import zstandard

    out: list[dict[str, Any]] = []
    if not os.path.isdir(directory):
        return out
    for f in sorted(os.listdir(directory), reverse=True):
        if not f.endswith(SUFFIX):
            continue
        full = os.path.join(directory, f)
        row: dict[str, Any] = {"path": full, "bytes": os.path.getsize(full), "created_at": None, "files": None}
        try:
            with open(full, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z, \
                    tarfile.open(fileobj=z, mode="r|") as tar:
                first = tar.next()
                fh = tar.extractfile(first) if first is not None and first.name == MANIFEST else None
                doc = json.loads(fh.read(_MAX_MANIFEST)) if fh is not None else {}
                row["created_at"], row["files"] = doc.get("created_at"), len(doc.get("files") or [])
        except (OSError, ValueError, tarfile.TarError, zstandard.ZstdError, AttributeError):
            row["created_at"] = "unreadable"
        out.append(row)
    return out


__all__ = ["FORMAT", "MANIFEST", "Made", "SUFFIX", "SnapshotError", "create", "listing", "restore", "snapshots_dir",
           "verify"]
