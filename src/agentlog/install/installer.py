"""Install and uninstall agentlog's hooks in agents' config files.

For each agent: detect it (read-only), then edit its config under an
exclusive lock: timestamped backup, atomic replace, mode kept. A ledger in
the state directory remembers, per config file, the exact bytes before our
first edit and the SHA-256 of what we last wrote, so that uninstall restores
the original byte for byte when nobody touched the file since; otherwise it
removes only our entries (install/files.py). The hook command written is the
native client where it can be built, else the Python hook
(install/hook_client.py). The library returns result objects and never
prints or exits.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentlog.core import paths
from agentlog.install.agents import SCOPES, AgentSpec, Detection, Scope, default_home, detect, resolve_agents
from agentlog.install.doctor import agent_notes
from agentlog.install.errors import InstallError
from agentlog.install.files import (  # re-exported (`X as X`): the installer's file API before files.py
    BACKUP_MARK as BACKUP_MARK,
    KEEP_BACKUPS as KEEP_BACKUPS,
    LEDGER_FILE as LEDGER_FILE,
    LEDGER_VERSION as LEDGER_VERSION,
    LOCK_SUFFIX as LOCK_SUFFIX,
    NEW_FILE_MODE as NEW_FILE_MODE,
    LedgerEntry as LedgerEntry,
    atomic_write as atomic_write,
    backup as backup,
    drop_own_backups as drop_own_backups,
    file_mode as file_mode,
    ledger_path as ledger_path,
    list_backups as list_backups,
    locked as locked,
    now_iso as now_iso,
    prune_backups as prune_backups,
    read_bytes as read_bytes,
    read_ledger as read_ledger,
    real_target as real_target,
    remove_file as remove_file,
    sha256_hex as sha256_hex,
    update_ledger as update_ledger,
)
from agentlog.install.hook_client import HookChoice, choose_hook
from agentlog.install.hook_refs import record_config
from agentlog.install.jsonedit import (
    JSONObject,
    find_our_entries,
    merge,
    parse_config,
    serialise,
    unified_diff,
    unmerge,
)
from agentlog.install.native_build import remove_unused

Outcome = Literal["installed", "already_current", "updated", "removed", "not_installed", "skipped", "failed"]
Action = Literal["install", "uninstall"]

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
    hook: HookChoice | None = None
    """The hook command form written (install of a detected agent only)."""

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
            "hook": self.hook.to_dict() if self.hook is not None else None,
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
    hook: Callable[[], HookChoice] = lambda: HookChoice("python")
    """The form to write, chosen (and the client built) when the first detected agent needs it."""


class _Chooser:
    """Calls ``make`` once, on first use: no build when every agent is skipped."""

    def __init__(self, make: Callable[[], HookChoice]) -> None:
        self._make = make
        self.choice: HookChoice | None = None

    def __call__(self) -> HookChoice:
        if self.choice is None:
            self.choice = self._make()
        return self.choice


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
    hook: HookChoice | None = None,
    python_hook: bool | None = None,
) -> list[InstallResult]:
    """Install agentlog's hooks for ``agents`` (all detected agents when None or empty).

    The command written is ``hook``'s; without one it is chosen when the first detected agent
    needs it: the native client, built (a dry run builds nothing), unless ``python_hook`` (None:
    the setting ``hook_client`` decides) or no compiler. Afterwards the data root's client
    binaries that no config has named for a while are removed (native_build.remove_unused).
    Raises `InstallError` only for bad arguments (unknown agent or scope,
    missing project directory); per-agent problems become ``failed`` results.
    """
    specs, ctx = _prepare("install", agents, scope, project_dir, dry_run, home, data_root, environ)
    chooser = _Chooser(lambda: hook if hook is not None else
                       choose_hook(ctx.data_root, ctx.environ, python_hook=python_hook, build=not dry_run))
    ctx = dataclasses.replace(ctx, hook=chooser)
    results = [_run_one(spec, ctx) for spec in specs]
    chosen = chooser.choice
    if chosen is not None and not dry_run:  # binaries the configs stopped naming start their grace period
        remove_unused(ctx.data_root, os.path.basename(chosen.binary or ""), ctx.environ)
    return results


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
    result.hook = ctx.hook()
    command = result.hook.command(spec.name)
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
        if result.hook.path == "native":  # so that every later cleanup reads this config (hook_refs.py)
            record_config(ctx.data_root, real)
        atomic_write(real, new, mode)


def _record_install(ctx: _Context, spec: AgentSpec, key: str, raw: bytes | None, new: bytes, had_ours: bool) -> None:
    entry = read_ledger(ctx.data_root).get(key)
    new_sha = sha256_hex(new)
    if entry is not None and raw is not None and sha256_hex(raw) == entry.written_sha256:
        entry.written_sha256 = new_sha
        entry.updated_at = now_iso()
        update_ledger(ctx.data_root, key, entry)
    elif not had_ours:
        fresh = LedgerEntry(
            agent=spec.name, scope=ctx.scope, original=raw, written_sha256=new_sha, updated_at=now_iso()
        )
        update_ledger(ctx.data_root, key, fresh)
    else:
        # Our entries are there but not in bytes we wrote: the pre-install
        # bytes are unknown, so uninstall will fall back to structural removal.
        update_ledger(ctx.data_root, key, None)


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
                update_ledger(ctx.data_root, key, None)
            result.outcome = "not_installed"
            result.reason = "no config file"
            return
        if entry is not None and sha256_hex(raw) == entry.written_sha256:
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
            drop_own_backups(real, entry)
            update_ledger(ctx.data_root, key, None)
            return
        doc = parse_config(raw, path)
        edit = unmerge(doc.data, path)
        if not edit.had_ours:
            if entry is not None and not ctx.dry_run:
                update_ledger(ctx.data_root, key, None)
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
        update_ledger(ctx.data_root, key, None)
