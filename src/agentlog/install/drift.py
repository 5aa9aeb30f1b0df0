"""Payload keys on known hook events that agentlog does not read: the hooks' drift report.

The hook keeps every payload whole in its frame's ``raw`` and reads only the keys
in :data:`READ_KEYS` (no cost on the hook path for this report). ``agentlog
doctor`` reads the newest frames of each agent's session logs and counts, per
agent release and event, the keys outside that set: fields a new release added
(Claude Code's ``effort``, Codex's ``turn_id`` …) that nothing records yet.
Unknown event *names* are the hook's own ``state/unrecognised.jsonl``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

import orjson

from agentlog.core import paths
from agentlog.core.kinds import CAPTURE_TEST_PREFIX

_COMMON: Final = frozenset({
    "session_id", "transcript_path", "cwd", "hook_event_name", "agent_id", "agent_type", "model",
    "permission_mode", "timestamp", "metadata",
})
READ_KEYS: Final[dict[str, frozenset[str]]] = {
    "claude_code": _COMMON | {
        "prompt_id", "duration_ms", "duration", "tool_name", "tool_input", "tool_use_id", "tool_response", "error",
        "error_message", "is_interrupt", "tool_calls", "prompt", "source", "reason", "stop_hook_active",
        "last_assistant_message", "notification_type", "message", "title", "session_title", "task_id",
        "task_status", "status", "task_subject", "task_description", "teammate_name", "team_name", "trigger",
        "custom_instructions", "compact_summary", "file_path", "old_cwd", "previous_cwd", "new_cwd", "event",
        "worktree_path", "name", "trigger_file_path", "memory_type", "load_reason", "directory", "mcp_server_name",
        "action", "error_type", "matcher", "error_details", "description",
    },
    "codex": _COMMON | {
        "turn_id", "prompt_id", "tool_name", "tool_input", "tool_use_id", "tool_response", "prompt", "source",
        "reason", "stop_hook_active", "last_assistant_message", "trigger", "custom_instructions", "compact_summary",
        "description", "token_usage", "response_id", "status", "duration_ms", "codex_version", "cli_version",
        "version",
    },
    "gemini_cli": _COMMON | {
        "tool_name", "tool_input", "tool_args", "tool_response", "tool_use_id", "tool_call_id", "call_id", "error",
        "success", "exit_code", "duration_ms", "prompt", "prompt_response", "last_assistant_message",
        "stop_hook_active", "source", "reason", "trigger", "notification_type", "message", "details",
        "llm_request", "gemini_version", "cli_version", "version",
    },
}
#: frames read per agent: the newest logs' tails
MAX_LOGS: Final = 20
TAIL_BYTES: Final = 2 << 20


@dataclass(frozen=True)
class UnknownField:
    provider: str
    version: str
    event: str
    key: str
    count: int

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "event": self.event, "key": self.key, "count": self.count}


def _newest_logs(root: str, provider: str) -> list[str]:
    base = os.path.join(paths.logs_dir(root), provider)
    found: list[tuple[float, str]] = []
    for folder, _, files in os.walk(base):
        for name in files:
            if name.endswith(".jsonl") and not name.startswith(CAPTURE_TEST_PREFIX):
                full = os.path.join(folder, name)
                try:
                    found.append((os.stat(full).st_mtime, full))
                except OSError:
                    continue
    return [p for _, p in sorted(found, reverse=True)[:MAX_LOGS]]


def _events(path: str) -> list[dict[str, object]]:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return []
    out: list[dict[str, object]] = []
    for line in data.splitlines():
        if not line.startswith(b'{"v":1') or b',"event":' not in line:
            continue
        try:
            frame = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        ev = frame.get("event") if isinstance(frame, dict) else None
        if isinstance(ev, dict):
            out.append(ev)
    return out


def unknown_fields(root: str, provider: str) -> list[UnknownField]:
    """Keys of hook payloads on known events that agentlog does not read, most frequent first."""
    known = READ_KEYS.get(provider)
    if known is None:
        return []
    counts: dict[tuple[str, str, str], int] = {}
    for path in _newest_logs(root, provider):
        events = _events(path)
        # hooks rarely name the release; an imported transcript line of the same session does
        session_version = next((str(e["provider_version"]) for e in events if e.get("provider_version")), "?")
        for ev in events:
            raw = ev.get("raw")
            attrs = ev.get("attrs")
            if not isinstance(raw, dict) or (isinstance(attrs, dict) and (attrs.get("reconstructed") or
                                                                           attrs.get("unrecognised"))):
                continue
            name = str(ev.get("provider_event_name") or "")
            if not name or ev.get("kind") == "capture_test":
                continue
            version = str(ev.get("provider_version") or session_version)
            for key in raw:
                if key not in known and not key.startswith("_agentlog"):
                    k = (version, name, str(key))
                    counts[k] = counts.get(k, 0) + 1
    return [UnknownField(provider, v, e, k, n) for (v, e, k), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
