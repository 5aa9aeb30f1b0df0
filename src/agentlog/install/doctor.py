"""Health of agentlog's hooks per agent, and the end-to-end capture test.

`diagnose` reads (never writes) each agent's config, our session logs'
modification times and the hook's record of unrecognised payload shapes
(install/recorded.py), and which hook path each agent runs: native or Python,
the native client current or stale, the daemon's capture server answering or
not (install/hook_client.py).
`capture_test` runs an installed hook command exactly as the agent would and
checks that the event reached the log.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from agentlog.core import paths
from agentlog.core.kinds import CAPTURE_TEST_PREFIX
from agentlog.capture.command import hook_command, is_native_client, native_command
from agentlog.install.agents import AgentSpec, Scope, default_home, detect, get_agent, resolve_agents
from agentlog.install.codex_trust import codex_trust_hash, codex_trust_notes  # noqa: F401 - doctor's API
from agentlog.install.drift import unknown_fields
from agentlog.install.versions import TESTED, installed_version, range_note
from agentlog.install.errors import ConfigError, InstallError
from agentlog.install.hook_client import CurrentClient, hook_report
from agentlog.install.jsonedit import (
    FoundEntry,
    JSONObject,
    expected_entry_matches,
    find_our_entries,
    parse_config,
)
from agentlog.install.recorded import (  # re-exported (`X as X`): doctor's API before recorded.py
    UNRECOGNISED_FILE as UNRECOGNISED_FILE,
    UnrecognisedShape as UnrecognisedShape,
    last_event_time as last_event_time,
    unrecognised_shapes as unrecognised_shapes,
)

HealthState = Literal["not_installed", "detected", "installed", "stale", "receiving"]

_SHELL = "/bin/sh" if os.path.exists("/bin/sh") else "sh"
_KIND_CAPTURE_TEST = re.compile(rb'"kind"\s*:\s*"capture_test"')


# --------------------------------------------------------------------------
# Agent-specific notes (also used by the installer)


def _get_path(data: JSONObject, *keys: str) -> object:
    node: object = data
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def gemini_hooks_notes(settings: list[tuple[Path, JSONObject]], spec: AgentSpec) -> list[str]:
    """Whether Gemini CLI's hooks system is enabled in ``settings`` (lowest precedence first)."""
    explicit: list[tuple[str, bool]] = []
    disabled_names: list[str] = []
    for path, data in settings:
        for keys in (("tools", "enableHooks"), ("hooks", "enabled"), ("hooksConfig", "enabled")):
            value = _get_path(data, *keys)
            if isinstance(value, bool):
                explicit.append((f"{'.'.join(keys)} = {str(value).lower()} in {path}", value))
        for keys in (("hooks", "disabled"), ("hooksConfig", "disabled")):
            value = _get_path(data, *keys)
            if isinstance(value, list):
                prefix = spec.handler_name_prefix or "agentlog-"
                disabled_names.extend(v for v in value if isinstance(v, str) and v.startswith(prefix))
    notes: list[str] = []
    off = [where for where, value in explicit if not value]
    if off:
        notes.append(
            "Gemini CLI hooks are disabled (" + "; ".join(off) + "): agentlog left this setting alone; "
            "enable hooks (/settings → Enable Hooks System) for events to be recorded"
        )
    # Unset means on: Gemini CLI 0.47–0.61 (the tested releases) run hooks by default.
    if disabled_names:
        notes.append("Gemini CLI disables these agentlog hooks by name: " + ", ".join(sorted(set(disabled_names))))
    return notes


def _read_settings(path: Path) -> JSONObject | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        return parse_config(raw, path).data
    except ConfigError:
        return None


def agent_notes(
    spec: AgentSpec,
    scope: Scope,
    config_path: Path,
    data: JSONObject,
    *,
    home: Path,
    environ: Mapping[str, str],
) -> list[str]:
    """Notes that need the user's attention for ``spec`` given its (new) config ``data``."""
    if not find_our_entries(data, config_path):
        return []
    if spec.name == "codex":
        return codex_trust_notes(config_path, data, spec.agent_home(home, environ))
    if spec.name == "gemini-cli":
        settings: list[tuple[Path, JSONObject]] = []
        user_path = spec.config_path("user", home=home, project_dir=None, environ=environ)
        if scope == "project":
            user_data = _read_settings(user_path)
            if user_data is not None:
                settings.append((user_path, user_data))
        settings.append((config_path, data))
        return gemini_hooks_notes(settings, spec)
    return []


# --------------------------------------------------------------------------
# diagnose


@dataclass
class AgentHealth:
    """State of agentlog's hooks for one agent."""

    agent: str
    provider: str
    state: HealthState
    detected: bool
    detection: str
    """Why the agent counts as detected (or not)."""
    config_path: Path
    config_exists: bool
    events_installed: list[str] = field(default_factory=list)
    events_missing: list[str] = field(default_factory=list)
    events_obsolete: list[str] = field(default_factory=list)
    events_duplicated: list[str] = field(default_factory=list)
    events_outdated: list[str] = field(default_factory=list)
    """Events whose entry differs from what this version installs (timeout, shape…)."""
    problems: list[str] = field(default_factory=list)
    """Why the state is ``stale`` (human sentences)."""
    last_event_at: datetime | None = None
    log_files: int = 0
    unrecognised: list[UnrecognisedShape] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    version: str | None = None
    """The installed release, when it can be told (install/versions.py)."""
    tested: str | None = None
    """The releases agentlog is tested with (``first–last``)."""
    unknown_fields: list[dict[str, object]] = field(default_factory=list)
    """Payload keys on known events that agentlog does not read (install/drift.py)."""
    hook: dict[str, object] = field(default_factory=dict)
    """Which path the hooks take (native, python, other), the native client's state and whether the
    daemon's capture server answers (install/hook_client.py ``HookReport.to_dict``); ``hook_label``
    is the short form."""
    hook_label: str = "—"

    def to_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "provider": self.provider,
            "state": self.state,
            "detected": self.detected,
            "detection": self.detection,
            "config_path": str(self.config_path),
            "config_exists": self.config_exists,
            "events_installed": list(self.events_installed),
            "events_missing": list(self.events_missing),
            "events_obsolete": list(self.events_obsolete),
            "events_duplicated": list(self.events_duplicated),
            "events_outdated": list(self.events_outdated),
            "problems": list(self.problems),
            "last_event_at": self.last_event_at.isoformat() if self.last_event_at else None,
            "log_files": self.log_files,
            "unrecognised": [u.to_dict() for u in self.unrecognised],
            "notes": list(self.notes),
            "version": self.version,
            "tested": self.tested,
            "unknown_fields": list(self.unknown_fields),
            "hook": dict(self.hook),
        }


def _executable_exists(program: str, environ: Mapping[str, str]) -> bool:
    if os.sep in program or (os.altsep and os.altsep in program):
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program, path=environ.get("PATH", os.defpath)) is not None


def command_problems(command: str, spec: AgentSpec, environ: Mapping[str, str]) -> list[str]:
    """What is wrong with one of our hook commands (missing interpreter/script, wrong agent)."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return [f"cannot parse hook command {command!r}"]
    problems: list[str] = []
    agent_arg: str | None = None
    for i, part in enumerate(parts):
        if is_native_client(part):
            if not _executable_exists(part, environ):
                problems.append(f"native hook client {part} no longer exists (`agentlog doctor --fix` rebuilds it)")
            agent_arg = parts[i + 1] if i + 1 < len(parts) else None
            break
        if part.replace("\\", "/").endswith("agentlog/_hook.py"):
            if i == 0 or not _executable_exists(parts[0], environ):
                interp = parts[0] if i > 0 else "(none)"
                problems.append(f"hook interpreter {interp} no longer exists")
            if not os.path.isfile(part):
                problems.append(f"hook script {part} no longer exists")
            agent_arg = parts[i + 1] if i + 1 < len(parts) else None
            break
        if os.path.basename(part) == "agentlog" and i + 1 < len(parts) and parts[i + 1] == "hook":
            if not _executable_exists(part, environ):
                problems.append(f"hook program {part} no longer exists")
            agent_arg = parts[i + 2] if i + 2 < len(parts) else None
            break
    if agent_arg != spec.name:
        problems.append(f"hook command records as {agent_arg or '(no agent)'} instead of {spec.name}")
    return problems


def _assess(
    spec: AgentSpec, entries: list[FoundEntry], current_command: str, environ: Mapping[str, str], health: AgentHealth
) -> None:
    per_event: dict[str, int] = {}
    for entry in entries:
        per_event[entry.event] = per_event.get(entry.event, 0) + 1
    health.events_installed = list(per_event)
    health.events_missing = [e for e in spec.events if e not in per_event]
    health.events_obsolete = [e for e in per_event if e not in spec.events]
    health.events_duplicated = [e for e, n in per_event.items() if n > 1]
    commands: list[str] = []
    for entry in entries:
        if entry.command not in commands:
            commands.append(entry.command)
    for entry in entries:
        if entry.event in spec.events and per_event[entry.event] == 1:
            if not expected_entry_matches(entry, spec, entry.command) and entry.event not in health.events_outdated:
                health.events_outdated.append(entry.event)
    if health.events_missing:
        health.problems.append("missing events: " + ", ".join(health.events_missing))
    if health.events_obsolete:
        health.problems.append("obsolete events: " + ", ".join(health.events_obsolete))
    if health.events_duplicated:
        health.problems.append("duplicate entries: " + ", ".join(health.events_duplicated))
    if health.events_outdated:
        health.problems.append("entries differ from this version's: " + ", ".join(health.events_outdated))
    seen: set[str] = set()
    for command in commands:
        for problem in command_problems(command, spec, environ):
            if problem not in seen:
                seen.add(problem)
                health.problems.append(problem)
    if len(commands) > 1:
        health.problems.append(f"{len(commands)} different agentlog commands are installed")
    elif commands and commands[0] != current_command and not seen:
        health.notes.append(f"hooks run another agentlog installation: {commands[0]}")


def diagnose(
    home: Path | None = None,
    data_root: str | Path | None = None,
    *,
    agents: list[str] | None = None,
    scope: Scope = "user",
    project_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[AgentHealth]:
    """Health of each agent's hooks (read-only)."""
    env = os.environ if environ is None else environ
    home_path = default_home(home, env)
    root = paths.data_root(dict(env)) if data_root is None else str(data_root)
    shapes = unrecognised_shapes(root)
    current = CurrentClient(root, env)
    out: list[AgentHealth] = []
    for spec in resolve_agents(agents):
        found = detect(spec, home_path, env)
        config_path = spec.config_path(scope, home=home_path, project_dir=project_dir, environ=env)
        health = AgentHealth(
            agent=spec.name,
            provider=spec.provider,
            state="not_installed",
            detected=found.detected,
            detection=found.reason,
            config_path=config_path,
            config_exists=config_path.is_file(),
        )
        health.last_event_at, health.log_files = last_event_time(root, spec.provider)
        if spec.name in TESTED:
            health.tested = "–".join(TESTED[spec.name])
            if found.detected:
                health.version = installed_version(spec.name, spec.launchers, env)
                outside = range_note(spec.name, health.version)
                if outside is not None:
                    health.notes.append(outside)
        health.unknown_fields = [f.to_dict() for f in unknown_fields(root, spec.provider)]
        health.unrecognised = [s for s in shapes if s.provider == spec.provider]
        entries: list[FoundEntry] = []
        data: JSONObject = {}
        if health.config_exists:
            try:
                doc = parse_config(config_path.read_bytes(), config_path)
                data = doc.data
                entries = find_our_entries(data, config_path)
            except (ConfigError, OSError) as exc:
                health.notes.append(f"cannot read {config_path}: {exc}")
        report = hook_report([e.command for e in entries], current)
        health.hook, health.hook_label = report.to_dict(), report.label()
        if entries:
            expected = hook_command(spec.name)
            if report.binary is not None and report.in_data_root:  # stale or not: said apart
                expected = native_command(report.binary, spec.name)
            _assess(spec, entries, expected, env, health)
            health.problems.extend(report.problems)
            health.notes.extend(report.notes)
            health.notes.extend(agent_notes(spec, scope, config_path, data, home=home_path, environ=env))
            if health.problems:
                health.state = "stale"
            elif health.last_event_at is not None:
                health.state = "receiving"
            else:
                health.state = "installed"
        elif found.detected:
            health.state = "detected"
        out.append(health)
    return out


# --------------------------------------------------------------------------
# capture test


@dataclass
class CaptureTestResult:
    """Outcome of running an installed hook with a synthetic session-start payload."""

    agent: str
    ok: bool
    session_id: str
    command: str | None
    exit_code: int | None
    stderr: str
    duration_ms: float | None
    log_path: Path | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "ok": self.ok,
            "session_id": self.session_id,
            "command": self.command,
            "exit_code": self.exit_code,
            "stderr": self.stderr,
            "duration_ms": self.duration_ms,
            "log_path": str(self.log_path) if self.log_path else None,
            "reason": self.reason,
        }


def _last_line(path: str) -> bytes:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - 65536))
        tail = fh.read().rstrip(b"\r\n")
    return tail.rsplit(b"\n", 1)[-1]


def find_capture_log(
    data_root: str | Path, provider: str, session_id: str, since: float
) -> tuple[Path | None, str | None]:
    """Find the session log whose last line is this capture test's event.

    Returns ``(path, None)`` on success, else ``(None, why)`` where ``why``
    describes a log found for the session that does not end as expected.
    """
    base = os.path.join(paths.logs_dir(str(data_root)), provider)
    needle = session_id.encode("utf-8")
    why: str | None = None
    for directory, _dirs, files in os.walk(base):
        for name in files:
            if not name.endswith(".jsonl"):
                continue
            full = os.path.join(directory, name)
            named = session_id in name
            try:
                if not named and os.stat(full).st_mtime < since:
                    continue
                last = _last_line(full)
            except OSError:
                continue
            if not (named or needle in last):
                continue
            if _KIND_CAPTURE_TEST.search(last):
                return Path(full), None
            kind = re.search(rb'"kind"\s*:\s*"([^"]*)"', last)
            found = kind.group(1).decode("utf-8", "replace") if kind else "no kind"
            why = f"{full} ends with an event of kind {found!r}, not 'capture_test'"
    return None, why


def capture_test(
    agent: str,
    *,
    scope: Scope = "user",
    project_dir: Path | None = None,
    home: Path | None = None,
    data_root: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> CaptureTestResult:
    """Run ``agent``'s installed hook (``sh -c <command>``) with a synthetic payload and check the log.

    The payload is the agent's session-start event with
    ``"_agentlog_capture_test": true``, which makes the hook record kind
    ``capture_test``. The hook runs with ``AGENTLOG_HOME`` set to the data
    root checked here, cwd the project (project scope) or home.
    """
    spec = get_agent(agent)
    env = dict(os.environ if environ is None else environ)
    home_path = default_home(home, env)
    root = paths.data_root(env) if data_root is None else str(data_root)
    session_id = f"{CAPTURE_TEST_PREFIX}{os.getpid()}-{time.time_ns() // 1_000_000}"
    config_path = spec.config_path(scope, home=home_path, project_dir=project_dir, environ=env)

    def fail(reason: str, command: str | None = None) -> CaptureTestResult:
        return CaptureTestResult(spec.name, False, session_id, command, None, "", None, None, reason)

    try:
        raw = config_path.read_bytes()
    except OSError:
        return fail(f"{config_path} does not exist (install first)")
    try:
        entries = find_our_entries(parse_config(raw, config_path).data, config_path)
    except InstallError as exc:
        return fail(str(exc))
    commands = [e.command for e in entries if e.event == spec.capture_event]
    if not commands:
        return fail(f"no agentlog hook for {spec.capture_event} in {config_path}")
    command = commands[0]
    cwd = Path(os.path.abspath(project_dir)) if scope == "project" and project_dir is not None else home_path
    payload: dict[str, object] = {
        "hook_event_name": spec.capture_event,
        "session_id": session_id,
        "cwd": str(cwd),
        "_agentlog_capture_test": True,
    }
    if spec.name == "cursor":
        payload["conversation_id"] = session_id
        payload["workspace_roots"] = [str(cwd)]
        env["CURSOR_PROJECT_DIR"] = str(cwd)
    elif spec.name == "claude-code":
        env["CLAUDE_PROJECT_DIR"] = str(cwd)
    elif spec.name == "gemini-cli":
        env["GEMINI_PROJECT_DIR"] = str(cwd)
        env["GEMINI_SESSION_ID"] = session_id
    env["AGENTLOG_HOME"] = root
    started_wall = time.time()
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [_SHELL, "-c", command],
            input=json.dumps(payload).encode("utf-8"),
            capture_output=True,
            cwd=str(cwd) if cwd.is_dir() else None,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"").decode("utf-8", errors="replace")
        return CaptureTestResult(
            spec.name, False, session_id, command, None, stderr, timeout * 1000.0, None,
            f"hook did not finish within {timeout:g} s",
        )
    except OSError as exc:
        return fail(f"cannot run sh: {exc}", command)
    duration_ms = (time.monotonic() - started) * 1000.0
    stderr = proc.stderr.decode("utf-8", errors="replace")
    log_path, why = find_capture_log(root, spec.provider, session_id, started_wall - 1.0)
    if log_path is not None:
        ok, reason = True, "capture_test event recorded"
        if proc.returncode != 0:
            reason += f" (but the hook exited {proc.returncode})"
            ok = False
    elif proc.returncode != 0:
        ok, reason = False, f"hook exited {proc.returncode} and recorded nothing"
    elif why is not None:
        ok, reason = False, f"hook exited 0 but {why}"
    else:
        ok = False
        reason = (
            f"hook exited 0 but wrote no log for session {session_id} under "
            f"{os.path.join(paths.logs_dir(root), spec.provider)}"
        )
    return CaptureTestResult(spec.name, ok, session_id, command, proc.returncode, stderr, duration_ms, log_path, reason)
