"""The canonical event model: what every frame of a session log carries.

These frozen dataclasses are the schema. The hook path does not import them
(``dataclasses`` pulls in ``inspect`` and ``re``, several milliseconds per
hook); it builds the wire form, a plain dict, directly. ``Event.from_wire``
is strict, and the test suite runs every frame the adapters produce through
it, so the two forms cannot drift. ``docs/event.schema.json`` is generated
from these classes by ``agentlog.core.schema`` and checked by a test.

Wire form rules: compact JSON, keys in the order of the fields below, optional
fields omitted rather than ``null``, empty ``paths``/``attrs`` omitted, times
are integers in microseconds since the Unix epoch (UTC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from agentlog.core import AgentlogError
from agentlog.core.kinds import CAPTURE_MODES, EVENT_KINDS, OUTCOME_STATUSES, SCHEMA_VERSION, TOOL_CATEGORIES

EventKind = Literal[
    "session_started",
    "session_ended",
    "prompt_submitted",
    "tool_call_started",
    "tool_call_finished",
    "tool_call_failed",
    "tool_batch_finished",
    "permission_requested",
    "permission_denied",
    "notification",
    "agent_message",
    "usage",
    "turn_stopped",
    "turn_failed",
    "subagent_started",
    "subagent_stopped",
    "task_created",
    "task_completed",
    "compaction_started",
    "compaction_finished",
    "config_changed",
    "cwd_changed",
    "file_changed",
    "worktree_created",
    "worktree_removed",
    "correction",
    "retraction",
    "capture_test",
    "unknown",
    "capture_gap",
    "memory",
    "transcript_line",
    "purge",
    "telemetry",
]
ToolCategory = Literal[
    "shell", "file_read", "file_write", "file_edit", "search", "web", "mcp",
    "subagent", "plan", "notebook", "other",
]
OutcomeStatus = Literal["success", "failure", "denied", "cancelled", "unknown"]
CaptureMode = Literal["full", "metadata_only"]


class ModelError(AgentlogError, ValueError):
    """A wire-form event does not match the canonical model."""


@dataclass(frozen=True)
class ToolRef:
    """The tool an event is about."""

    name: str
    """Provider's tool name verbatim (``Bash``, ``run_shell_command``, ``mcp__x__y``)."""
    category: ToolCategory
    """Category from ``classify_tool``."""
    call_id: str | None = None
    """Provider's tool-call id (``tool_use_id``), when it sends one."""


@dataclass(frozen=True)
class AgentRef:
    """Which agent inside the session acted (subagents have an id)."""

    agent_id: str | None = None
    """Provider's subagent id; absent for the session's main agent."""
    agent_type: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Outcome:
    """How a tool call, permission request or turn ended."""

    status: OutcomeStatus
    failure_class: str | None = None
    """Content-free token (``string_mismatch``, ``nonzero_exit`` …); wire key ``class``."""
    exit_code: int | None = None


@dataclass(frozen=True)
class ProjectRef:
    """The project the event happened in, read from the file system (no git process)."""

    root: str
    """Git work-tree root, else the working directory."""
    name: str
    remote: str | None = None
    """``origin`` URL as configured (credentials stripped)."""
    branch: str | None = None
    head: str | None = None
    """Commit the work tree's HEAD pointed at when the hook ran."""


@dataclass(frozen=True)
class Event:
    """One thing an agent did or reported, as captured."""

    event_id: str
    """UUIDv7 minted at capture; the idempotency key."""
    kind: EventKind
    provider: str
    """``claude_code``, ``codex``, ``cursor``, ``gemini_cli`` or ``agentlog``."""
    provider_event_name: str
    """The provider's own event name verbatim (``PostToolUse``, ``afterShellExecution``)."""
    observed_at: int
    """When it happened, µs: the provider's timestamp if it sent one, else ``captured_at``."""
    captured_at: int
    """When the hook process started, µs."""
    capture_mode: CaptureMode = "full"
    agentlog_version: str = ""
    schema_version: int = SCHEMA_VERSION
    provider_version: str | None = None
    provider_session_id: str | None = None
    provider_turn_id: str | None = None
    agent: AgentRef | None = None
    tool: ToolRef | None = None
    paths: tuple[str, ...] = ()
    """Paths the event touches: repo-relative when inside the project, else as reported."""
    outcome: Outcome | None = None
    duration_ms: int | None = None
    project: ProjectRef | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """Content-free metadata (counts, classes, flags)."""
    content: Mapping[str, Any] | None = None
    """Normalised text: prompt, command, message, error, tool_input, tool_output …"""
    raw: Any = None
    """The provider's payload as received, after redaction."""

    # -- wire form -------------------------------------------------------
    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> Event:
        """Parse the wire form strictly: unknown keys and bad values raise ``ModelError``."""
        if not isinstance(d, Mapping):
            raise ModelError("event is not an object")
        unknown = set(d) - _EVENT_KEYS
        if unknown:
            raise ModelError(f"unknown event keys: {sorted(unknown)}")
        try:
            kind = d["kind"]
            if kind not in EVENT_KINDS:
                raise ModelError(f"unknown kind {kind!r}")
            mode = d.get("capture_mode", "full")
            if mode not in CAPTURE_MODES:
                raise ModelError(f"unknown capture_mode {mode!r}")
            tool = d.get("tool")
            outcome = d.get("outcome")
            project = d.get("project")
            agent = d.get("agent")
            ev = cls(
                event_id=_str(d["event_id"], "event_id"),
                kind=kind,
                provider=_str(d["provider"], "provider"),
                provider_event_name=_str(d["provider_event_name"], "provider_event_name"),
                observed_at=_int(d["observed_at"], "observed_at"),
                captured_at=_int(d["captured_at"], "captured_at"),
                capture_mode=mode,
                agentlog_version=_str(d.get("agentlog_version", ""), "agentlog_version"),
                schema_version=_int(d.get("schema_version", SCHEMA_VERSION), "schema_version"),
                provider_version=_opt_str(d.get("provider_version"), "provider_version"),
                provider_session_id=_opt_str(d.get("provider_session_id"), "provider_session_id"),
                provider_turn_id=_opt_str(d.get("provider_turn_id"), "provider_turn_id"),
                agent=None if agent is None else _agent(agent),
                tool=None if tool is None else _tool(tool),
                paths=tuple(_str(p, "paths[]") for p in d.get("paths", ())),
                outcome=None if outcome is None else _outcome(outcome),
                duration_ms=None if d.get("duration_ms") is None else _int(d["duration_ms"], "duration_ms"),
                project=None if project is None else _project(project),
                attrs=_obj(d.get("attrs", {}), "attrs"),
                content=None if d.get("content") is None else _obj(d["content"], "content"),
                raw=d.get("raw"),
            )
        except KeyError as e:
            raise ModelError(f"missing required key {e.args[0]!r}") from None
        return ev

    def to_wire(self) -> dict[str, Any]:
        """The wire form (a plain dict in canonical key order)."""
        out: dict[str, Any] = {
            "event_id": self.event_id,
            "schema_version": self.schema_version,
            "kind": self.kind,
            "provider": self.provider,
            "provider_event_name": self.provider_event_name,
            "observed_at": self.observed_at,
            "captured_at": self.captured_at,
            "capture_mode": self.capture_mode,
            "agentlog_version": self.agentlog_version,
        }
        for key in ("provider_version", "provider_session_id", "provider_turn_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.agent is not None:
            out["agent"] = _drop_none(
                {"agent_id": self.agent.agent_id, "agent_type": self.agent.agent_type, "model": self.agent.model}
            )
        if self.tool is not None:
            out["tool"] = _drop_none(
                {"name": self.tool.name, "category": self.tool.category, "call_id": self.tool.call_id}
            )
        if self.paths:
            out["paths"] = list(self.paths)
        if self.outcome is not None:
            out["outcome"] = _drop_none(
                {"status": self.outcome.status, "class": self.outcome.failure_class, "exit_code": self.outcome.exit_code}
            )
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.project is not None:
            p = self.project
            out["project"] = _drop_none(
                {"root": p.root, "name": p.name, "remote": p.remote, "branch": p.branch, "head": p.head}
            )
        if self.attrs:
            out["attrs"] = dict(self.attrs)
        if self.content is not None:
            out["content"] = dict(self.content)
        if self.raw is not None:
            out["raw"] = self.raw
        return out


# The order the hook writes keys in (also `to_wire`'s order).
WIRE_KEY_ORDER: tuple[str, ...] = (
    "event_id", "schema_version", "kind", "provider", "provider_event_name",
    "observed_at", "captured_at", "capture_mode", "agentlog_version",
    "provider_version", "provider_session_id", "provider_turn_id", "agent", "tool",
    "paths", "outcome", "duration_ms", "project", "attrs", "content", "raw",
)
_EVENT_KEYS = frozenset(WIRE_KEY_ORDER)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _str(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise ModelError(f"{name} must be a string, got {type(v).__name__}")
    return v


def _opt_str(v: Any, name: str) -> str | None:
    return None if v is None else _str(v, name)


def _int(v: Any, name: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ModelError(f"{name} must be an integer, got {type(v).__name__}")
    return v


def _obj(v: Any, name: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ModelError(f"{name} must be an object")
    return v


def _check_keys(d: Mapping[str, Any], allowed: set[str], name: str) -> None:
    extra = set(d) - allowed
    if extra:
        raise ModelError(f"unknown {name} keys: {sorted(extra)}")


def _agent(d: Any) -> AgentRef:
    d = _obj(d, "agent")
    _check_keys(d, {"agent_id", "agent_type", "model"}, "agent")
    return AgentRef(
        agent_id=_opt_str(d.get("agent_id"), "agent.agent_id"),
        agent_type=_opt_str(d.get("agent_type"), "agent.agent_type"),
        model=_opt_str(d.get("model"), "agent.model"),
    )


def _tool(d: Any) -> ToolRef:
    d = _obj(d, "tool")
    _check_keys(d, {"name", "category", "call_id"}, "tool")
    cat = d.get("category")
    if cat not in TOOL_CATEGORIES:
        raise ModelError(f"unknown tool category {cat!r}")
    return ToolRef(name=_str(d.get("name"), "tool.name"), category=cat, call_id=_opt_str(d.get("call_id"), "tool.call_id"))


def _outcome(d: Any) -> Outcome:
    d = _obj(d, "outcome")
    _check_keys(d, {"status", "class", "exit_code"}, "outcome")
    status = d.get("status")
    if status not in OUTCOME_STATUSES:
        raise ModelError(f"unknown outcome status {status!r}")
    code = d.get("exit_code")
    return Outcome(
        status=status,
        failure_class=_opt_str(d.get("class"), "outcome.class"),
        exit_code=None if code is None else _int(code, "outcome.exit_code"),
    )


def _project(d: Any) -> ProjectRef:
    d = _obj(d, "project")
    _check_keys(d, {"root", "name", "remote", "branch", "head"}, "project")
    return ProjectRef(
        root=_str(d.get("root"), "project.root"),
        name=_str(d.get("name"), "project.name"),
        remote=_opt_str(d.get("remote"), "project.remote"),
        branch=_opt_str(d.get("branch"), "project.branch"),
        head=_opt_str(d.get("head"), "project.head"),
    )
