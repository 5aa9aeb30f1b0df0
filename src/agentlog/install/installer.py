"""Install and uninstall agentlog's hooks in agents' config files.

For each agent: detect it (read-only), then edit its config under an
exclusive lock: timestamped backup, atomic replace, mode kept. A ledger in
the state directory remembers, per config file, the exact bytes before our
first edit and the SHA-256 of what we last wrote, so that uninstall restores
the original byte for byte when nobody touched the file since; otherwise it
removes only our entries. The library returns result objects and never
prints or exits.
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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from agentlog.core import paths
from agentlog.core.fileio import write_atomic
from agentlog.capture.command import hook_command
from agentlog.install.agents import SCOPES, AgentSpec, Detection, Scope, default_home, detect, resolve_agents
from agentlog.install.doctor import agent_notes
from agentlog.install.errors import InstallError, LockTimeoutError
from agentlog.install.jsonedit import (
    JSONObject,
    find_our_entries,
    merge,
    parse_config,
    serialise,
    unified_diff,
    unmerge,
)

Outcome = Literal["installed", "already_current", "updated", "removed", "not_installed", "skipped", "failed"]
Action = Literal["install", "uninstall"]

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


def _drop_own_backups(path: Path, entry: "LedgerEntry") -> None:
    """After a byte-for-byte restore: delete the backups install made that hold nothing else
    than the restored bytes or bytes agentlog wrote (a backup of anything else is kept)."""
    for old in list_backups(path):
        try:
            data = old.read_bytes()
        except OSError:
            continue
        if data == entry.original or _sha256(data) == entry.written_sha256:
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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now_iso() -> str:
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
            "original_sha256": _sha256(self.original) if self.original is not None else None,
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
            if obj.get("original_sha256") not in (None, _sha256(original)):
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


def _update_ledger(data_root: str | Path, key: str, entry: LedgerEntry | None) -> None:
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


# --------------------------------------------------------------------------
# Results


@dataclass
class InstallResult:
    """What happened (or, with ``dry_run``, would happen) to one agent's config."""

    agent: str
    action: Action
    outcome: Outcome
    scope: Scope
    config_path: Path | None
    reason: str = ""
    """One human sentence: why skipped/failed, or a summary of the change."""
    events_added: list[str] = field(default_factory=list)
    events_removed: list[str] = field(default_factory=list)
    events_updated: list[str] = field(default_factory=list)
    diff: str | None = None
    """Unified diff of the change (dry runs only)."""
    backup_path: Path | None = None
    restored_original: bool = False
    """Uninstall put back the exact bytes from before the first install (or deleted the file we created)."""
    dry_run: bool = False
    notes: list[str] = field(default_factory=list)
    """Things the user must do or know (Codex trust, Gemini hooks setting)."""

    @property
    def ok(self) -> bool:
        return self.outcome != "failed"

    def to_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "action": self.action,
            "outcome": self.outcome,
            "scope": self.scope,
            "config_path": str(self.config_path) if self.config_path else None,
            "reason": self.reason,
            "events_added": list(self.events_added),
            "events_removed": list(self.events_removed),
            "events_updated": list(self.events_updated),
            "diff": self.diff,
            "backup_path": str(self.backup_path) if self.backup_path else None,
            "restored_original": self.restored_original,
            "dry_run": self.dry_run,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class _Context:
    action: Action
    scope: Scope
    project_dir: Path | None
    dry_run: bool
    home: Path
    data_root: str
    environ: Mapping[str, str]
    explicit: bool


@contextmanager
def _maybe_locked(path: Path, dry_run: bool) -> Iterator[None]:
    if dry_run:
        yield
    else:
        with locked(path):
            yield


def _summary(added: list[str], removed: list[str], updated: list[str]) -> str:
    parts: list[str] = []
    if added:
        parts.append(f"{len(added)} event{'s' if len(added) != 1 else ''} added")
    if updated:
        parts.append(f"{len(updated)} updated")
    if removed:
        parts.append(f"{len(removed)} removed")
    return ", ".join(parts)


# --------------------------------------------------------------------------
# install / uninstall


def _prepare(
    action: Action,
    agents: list[str] | None,
    scope: str,
    project_dir: Path | str | None,
    dry_run: bool,
    home: Path | None,
    data_root: str | Path | None,
    environ: Mapping[str, str] | None,
) -> tuple[list[AgentSpec], _Context]:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected 'user' or 'project')")
    env: Mapping[str, str] = os.environ if environ is None else environ
    project: Path | None = None
    if scope == "project":
        project = Path(os.path.abspath(project_dir if project_dir is not None else os.getcwd()))
        if not project.is_dir():
            raise InstallError("project directory does not exist", project)
    specs = resolve_agents(agents)
    root = paths.data_root(dict(env)) if data_root is None else os.path.abspath(str(data_root))
    ctx = _Context(
        action=action,
        scope="project" if scope == "project" else "user",
        project_dir=project,
        dry_run=dry_run,
        home=default_home(home, env),
        data_root=root,
        environ=env,
        explicit=bool(agents),
    )
    return specs, ctx


def install(
    agents: list[str] | None = None,
    scope: Scope = "user",
    project_dir: Path | str | None = None,
    dry_run: bool = False,
    home: Path | None = None,
    *,
    data_root: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[InstallResult]:
    """Install agentlog's hooks for ``agents`` (all detected agents when None or empty).

    Raises `InstallError` only for bad arguments (unknown agent or scope,
    missing project directory); per-agent problems become ``failed`` results.
    """
    specs, ctx = _prepare("install", agents, scope, project_dir, dry_run, home, data_root, environ)
    return [_run_one(spec, ctx) for spec in specs]


def uninstall(
    agents: list[str] | None = None,
    scope: Scope = "user",
    project_dir: Path | str | None = None,
    dry_run: bool = False,
    home: Path | None = None,
    *,
    data_root: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[InstallResult]:
    """Remove agentlog's hooks for ``agents`` (all when None or empty).

    When the config still holds exactly the bytes agentlog last wrote, the
    bytes from before the first install are restored (or the file is deleted
    if it did not exist); otherwise only our entries are removed.
    """
    specs, ctx = _prepare("uninstall", agents, scope, project_dir, dry_run, home, data_root, environ)
    return [_run_one(spec, ctx) for spec in specs]


def _run_one(spec: AgentSpec, ctx: _Context) -> InstallResult:
    path = spec.config_path(ctx.scope, home=ctx.home, project_dir=ctx.project_dir, environ=ctx.environ)
    result = InstallResult(
        agent=spec.name,
        action=ctx.action,
        outcome="failed",
        scope=ctx.scope,
        config_path=path,
        dry_run=ctx.dry_run,
    )
    try:
        if ctx.action == "install":
            found = detect(spec, ctx.home, ctx.environ)
            skip = _skip_reason(spec, found, ctx)
            if skip is not None:
                result.outcome = "skipped"
                result.reason = skip
                return result
            _install_one(spec, path, ctx, result)
        else:
            _uninstall_one(spec, path, ctx, result)
    except InstallError as exc:
        result.outcome = "failed"
        result.reason = str(exc)
    except OSError as exc:
        result.outcome = "failed"
        where = exc.filename or path
        result.reason = f"{where}: {exc.strerror or exc}"
    return result


def _skip_reason(spec: AgentSpec, found: Detection, ctx: _Context) -> str | None:
    if not found.detected:
        if ctx.explicit:
            return f"{spec.display_name} was named but is not installed here ({found.reason})"
        return f"{spec.display_name} not detected ({found.reason})"
    if ctx.scope == "user" and not found.home_exists:
        return (
            f"{found.launcher} is on PATH but {found.agent_home} does not exist; agentlog never creates "
            f"an agent's home directory: start {spec.launchers[0]} once, then install again"
        )
    return None


def _install_one(spec: AgentSpec, path: Path, ctx: _Context, result: InstallResult) -> None:
    if ctx.scope == "project" and not ctx.dry_run and not path.parent.exists():
        path.parent.mkdir(mode=0o755)
    real = real_target(path)
    command = hook_command(spec.name)
    with _maybe_locked(real, ctx.dry_run):
        raw = read_bytes(real)
        doc = parse_config(raw, path)
        edit = merge(doc.data, spec, command, path)
        result.events_added = edit.events_added
        result.events_removed = edit.events_removed
        result.events_updated = edit.events_updated
        result.notes = agent_notes(spec, ctx.scope, path, edit.data, home=ctx.home, environ=ctx.environ)
        if not edit.changed:
            result.outcome = "already_current"
            result.reason = "hooks already current"
            return
        new = serialise(edit.data, doc.style)
        result.outcome = "updated" if edit.had_ours else "installed"
        summary = _summary(edit.events_added, edit.events_removed, edit.events_updated)
        result.reason = summary or "entries rewritten"
        if ctx.dry_run:
            result.diff = unified_diff(raw, new, path)
            return
        mode = file_mode(real)
        _record_install(ctx, spec, str(real), raw, new, bool(edit.had_ours))
        if raw is not None:
            result.backup_path = backup(real, raw, mode)
        atomic_write(real, new, mode)


def _record_install(ctx: _Context, spec: AgentSpec, key: str, raw: bytes | None, new: bytes, had_ours: bool) -> None:
    entry = read_ledger(ctx.data_root).get(key)
    new_sha = _sha256(new)
    if entry is not None and raw is not None and _sha256(raw) == entry.written_sha256:
        entry.written_sha256 = new_sha
        entry.updated_at = _now_iso()
        _update_ledger(ctx.data_root, key, entry)
    elif not had_ours:
        fresh = LedgerEntry(
            agent=spec.name, scope=ctx.scope, original=raw, written_sha256=new_sha, updated_at=_now_iso()
        )
        _update_ledger(ctx.data_root, key, fresh)
    else:
        # Our entries are there but not in bytes we wrote: the pre-install
        # bytes are unknown, so uninstall will fall back to structural removal.
        _update_ledger(ctx.data_root, key, None)


def _trivially_empty(data: JSONObject, spec: AgentSpec) -> bool:
    return not data or (spec.needs_version_key and data == {"version": 1})


def _uninstall_one(spec: AgentSpec, path: Path, ctx: _Context, result: InstallResult) -> None:
    real = real_target(path)
    key = str(real)
    with _maybe_locked(real, ctx.dry_run or not real.parent.is_dir()):
        raw = read_bytes(real)
        entry = read_ledger(ctx.data_root).get(key)
        if raw is None:
            if entry is not None and not ctx.dry_run:
                _update_ledger(ctx.data_root, key, None)
            result.outcome = "not_installed"
            result.reason = "no config file"
            return
        if entry is not None and _sha256(raw) == entry.written_sha256:
            try:
                events = [e.event for e in find_our_entries(parse_config(raw, path).data, path)]
            except InstallError:
                events = []
            result.events_removed = list(dict.fromkeys(events))
            result.outcome = "removed"
            result.restored_original = True
            result.reason = (
                "restored the file as it was before install"
                if entry.original is not None
                else "deleted the file agentlog had created"
            )
            if ctx.dry_run:
                result.diff = unified_diff(raw, entry.original, path)
                return
            mode = file_mode(real)
            if entry.original is None:
                remove_file(real)
            else:  # the file is byte for byte what it was: no backup of our own bytes is kept either
                atomic_write(real, entry.original, mode)
            _drop_own_backups(real, entry)
            _update_ledger(ctx.data_root, key, None)
            return
        doc = parse_config(raw, path)
        edit = unmerge(doc.data, path)
        if not edit.had_ours:
            if entry is not None and not ctx.dry_run:
                _update_ledger(ctx.data_root, key, None)
            result.outcome = "not_installed"
            result.reason = "no agentlog hooks in the config"
            return
        result.events_removed = list(edit.had_ours)
        result.outcome = "removed"
        delete = entry is not None and entry.original is None and _trivially_empty(edit.data, spec)
        new: bytes | None = None if delete else serialise(edit.data, doc.style)
        result.reason = "removed agentlog's entries; everything else left as it is"
        if delete:
            result.reason = "deleted the file agentlog had created (nothing else was left in it)"
        if ctx.dry_run:
            result.diff = unified_diff(raw, new, path)
            return
        mode = file_mode(real)
        result.backup_path = backup(real, raw, mode)
        if new is None:
            remove_file(real)
        else:
            atomic_write(real, new, mode)
        _update_ledger(ctx.data_root, key, None)
