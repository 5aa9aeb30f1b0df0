"""What agentlog knows about each supported agent's hook configuration.

One `AgentSpec` per agent: how to detect it without changing anything, where
its hook config lives per scope, which events we subscribe to, and the exact
handler object we write for each event. Timeouts follow each agent's unit:
Claude Code, Codex and Cursor count seconds, Gemini CLI milliseconds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentlog.install.errors import InstallError, UnknownAgentError

Scope = Literal["user", "project"]
Shape = Literal["nested", "flat"]
SCOPES: tuple[Scope, ...] = ("user", "project")


@dataclass(frozen=True)
class AgentSpec:
    """Static description of one agent's hook system."""

    name: str
    """CLI name: ``claude-code``, ``codex``, ``cursor``, ``gemini-cli``."""
    provider: str
    """Provider id used in the log layout (``logs/<provider>/``)."""
    display_name: str
    launchers: tuple[str, ...]
    """Executables whose presence on PATH means the agent is installed."""
    home_env: str | None
    """Environment variable that relocates the agent's home directory."""
    home_default: str
    """Home directory name under the user's home (``.claude``)."""
    config_name: str
    """Config file name inside the agent's home / project directory."""
    shape: Shape
    """``nested``: event → matcher groups → handlers; ``flat``: event → handlers."""
    events: tuple[str, ...]
    timeout_unit: Literal["seconds", "milliseconds"]
    default_timeout: int
    timeout_overrides: tuple[tuple[str, int], ...] = ()
    capture_event: str = "SessionStart"
    """Event name the capture test sends (the agent's session-start event)."""
    handler_name_prefix: str | None = None
    """Gemini CLI names each handler; ours are ``agentlog-<event lowercased>``."""
    needs_version_key: bool = False
    """Cursor's hooks.json carries ``"version": 1``."""

    @property
    def project_dir_name(self) -> str:
        return self.home_default

    def agent_home(self, home: Path, environ: Mapping[str, str]) -> Path:
        """The agent's home directory (honouring its relocation variable)."""
        if self.home_env:
            value = environ.get(self.home_env, "")
            if value:
                return Path(os.path.abspath(os.path.expanduser(value)))
        return home / self.home_default

    def config_path(
        self,
        scope: Scope,
        *,
        home: Path,
        project_dir: Path | None,
        environ: Mapping[str, str],
    ) -> Path:
        """Path of the hook config file for ``scope``."""
        if scope == "user":
            return self.agent_home(home, environ) / self.config_name
        if scope == "project":
            if project_dir is None:
                raise InstallError("project scope needs a project directory")
            return Path(os.path.abspath(project_dir)) / self.project_dir_name / self.config_name
        raise InstallError(f"unknown scope {scope!r} (expected 'user' or 'project')")

    def timeout_for(self, event: str) -> int:
        for name, value in self.timeout_overrides:
            if name == event:
                return value
        return self.default_timeout

    def handler_name(self, event: str) -> str | None:
        if self.handler_name_prefix is None:
            return None
        return self.handler_name_prefix + event.lower()

    def handler(self, event: str, command: str) -> dict[str, object]:
        """The handler object we write for ``event`` (key order is the written order)."""
        if self.shape == "flat":
            return {"command": command, "timeout": self.timeout_for(event)}
        out: dict[str, object] = {"type": "command", "command": command}
        name = self.handler_name(event)
        if name is not None:
            out["name"] = name
        out["timeout"] = self.timeout_for(event)
        return out

    def entry(self, event: str, command: str) -> dict[str, object]:
        """What goes into the event's array: a matcher group (nested) or a handler (flat)."""
        handler = self.handler(event, command)
        if self.shape == "flat":
            return handler
        return {"hooks": [handler]}


CLAUDE_CODE = AgentSpec(
    name="claude-code",
    provider="claude_code",
    display_name="Claude Code",
    launchers=("claude",),
    home_env="CLAUDE_CONFIG_DIR",
    home_default=".claude",
    config_name="settings.json",
    shape="nested",
    # Not WorktreeCreate (a hook there replaces native worktree creation),
    # not MessageDisplay (each piece of the reply's text), not FileChanged
    # (needs chosen watch paths). PostToolBatch is the only hook for a call
    # that fails input validation or is refused in headless mode.
    events=(
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "PermissionRequest",
        "PermissionDenied",
        "Notification",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "TaskCreated",
        "TaskCompleted",
        "PreCompact",
        "PostCompact",
        "ConfigChange",
        "CwdChanged",
        "WorktreeRemove",
    ),
    timeout_unit="seconds",
    default_timeout=10,
    # SessionEnd hooks share a 1.5 s budget unless a hook asks for more; a
    # larger timeout here would stretch every session's exit.
    timeout_overrides=(("SessionEnd", 1),),
)

CODEX = AgentSpec(
    name="codex",
    provider="codex",
    display_name="Codex CLI",
    launchers=("codex",),
    home_env="CODEX_HOME",
    home_default=".codex",
    config_name="hooks.json",
    shape="nested",
    # SessionEnd closes the session (Codex 0.14x+). PostToolUse has no exit code
    # and a failed apply_patch fires no end hook: Stop and SessionEnd bring those
    # outcomes in from the rollout (docs/agents.md), and with them each model
    # request's token usage (so not PostModelRequest, which would count it twice
    # and cost a process per request; its payload is still read when subscribed).
    events=(
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "SubagentStart",
        "SubagentStop",
        "Stop",
    ),
    timeout_unit="seconds",
    default_timeout=5,
    # Codex caps SessionEnd (and Interrupt) hooks at 3 s and says so on stdout.
    timeout_overrides=(("SessionEnd", 3),),
)

CURSOR = AgentSpec(
    name="cursor",
    provider="cursor",
    display_name="Cursor",
    launchers=("cursor", "cursor-agent"),
    home_env=None,
    home_default=".cursor",
    config_name="hooks.json",
    shape="flat",
    events=(
        "sessionStart",
        "sessionEnd",
        "beforeSubmitPrompt",
        "preToolUse",
        "postToolUse",
        "postToolUseFailure",
        "subagentStart",
        "subagentStop",
        "preCompact",
        "stop",
        "afterAgentResponse",
    ),
    timeout_unit="seconds",
    default_timeout=10,
    capture_event="sessionStart",
    needs_version_key=True,
)

GEMINI_CLI = AgentSpec(
    name="gemini-cli",
    provider="gemini_cli",
    display_name="Gemini CLI",
    launchers=("gemini",),
    home_env=None,
    home_default=".gemini",
    config_name="settings.json",
    shape="nested",
    events=(
        "SessionStart",
        "SessionEnd",
        "BeforeAgent",
        "AfterAgent",
        "BeforeTool",
        "AfterTool",
        "PreCompress",
        "Notification",
    ),
    timeout_unit="milliseconds",
    default_timeout=5000,
    handler_name_prefix="agentlog-",
)

AGENTS: dict[str, AgentSpec] = {spec.name: spec for spec in (CLAUDE_CODE, CODEX, CURSOR, GEMINI_CLI)}
AGENT_NAMES: tuple[str, ...] = tuple(AGENTS)


def get_agent(name: str) -> AgentSpec:
    """The spec for ``name``; raises `UnknownAgentError` for anything else."""
    try:
        return AGENTS[name]
    except KeyError:
        raise UnknownAgentError(
            f"unknown agent {name!r} (known: {', '.join(AGENT_NAMES)})"
        ) from None


def resolve_agents(names: list[str] | None) -> list[AgentSpec]:
    """Specs for ``names`` in the given order without duplicates; all agents if None/empty."""
    if not names:
        return list(AGENTS.values())
    out: list[AgentSpec] = []
    for name in names:
        spec = get_agent(name)
        if spec not in out:
            out.append(spec)
    return out


@dataclass(frozen=True)
class Detection:
    """Result of looking for an agent (read-only: nothing is created)."""

    agent: str
    detected: bool
    agent_home: Path
    home_exists: bool
    launcher: str | None
    """Absolute path of the launcher found on PATH, if any."""
    reason: str


def default_home(home: Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """``home`` if given, else ``$HOME`` from ``environ``, else `Path.home()`."""
    if home is not None:
        return Path(home)
    env = os.environ if environ is None else environ
    value = env.get("HOME", "")
    if value:
        return Path(value)
    return Path.home()


def detect(spec: AgentSpec, home: Path, environ: Mapping[str, str]) -> Detection:
    """Whether ``spec``'s agent is present: its home dir exists or a launcher is on PATH."""
    agent_home = spec.agent_home(home, environ)
    home_exists = agent_home.is_dir()
    launcher: str | None = None
    search_path = environ.get("PATH", os.defpath)
    for name in spec.launchers:
        found = shutil.which(name, path=search_path)
        if found:
            launcher = found
            break
    if home_exists and launcher:
        reason = f"{agent_home} exists; {launcher} on PATH"
    elif home_exists:
        reason = f"{agent_home} exists"
    elif launcher:
        reason = f"{launcher} on PATH"
    else:
        reason = f"{agent_home} does not exist and no {'/'.join(spec.launchers)} on PATH"
    return Detection(
        agent=spec.name,
        detected=home_exists or launcher is not None,
        agent_home=agent_home,
        home_exists=home_exists,
        launcher=launcher,
        reason=reason,
    )
