"""Codex CLI hook payloads (Claude-shaped) and the legacy ``notify`` program → partial events."""

from __future__ import annotations

from agentlog.capture.adapters import claude_code
from agentlog.capture.adapters import common as c

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROVIDER = "codex"

# Codex sends Claude's payload shape; names it shares with Claude mean the
# same thing. `Interrupt` exists in Codex's sources but is not documented.
KINDS: dict[str, str] = dict(claude_code.KINDS)
KINDS["Interrupt"] = "unknown"
# Around each model request (0.171): PostModelRequest carries its token usage.
KINDS["PreModelRequest"] = "unknown"
KINDS["PostModelRequest"] = "usage"

NOTIFY_TYPE = "agent-turn-complete"

_JSON_REPLY_EVENTS = frozenset(("Stop", "SubagentStop"))


def normalise(payload: dict[str, Any], extra_args: list[str]) -> dict[str, Any]:
    if not isinstance(payload, dict):
        payload = {}
    if not payload and extra_args and isinstance(extra_args[-1], str) and extra_args[-1].lstrip().startswith("{"):
        # notify: Codex spawns `<cmd> '<json>'` with no stdin.
        ok, value = c.loads_or_none(extra_args[-1])
        if ok and isinstance(value, dict):
            payload = value
            extra_args = extra_args[:-1]
    if payload.get("type") == NOTIFY_TYPE and "hook_event_name" not in payload:
        return _notify(payload)
    ev = claude_code.normalise_shaped(payload, extra_args, KINDS, codex=True)
    if ev.get("provider_event_name") == "PostModelRequest":
        _usage(ev, payload)
    return ev


def _usage(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    """PostModelRequest's ``token_usage`` in the four numbers every agent's usage
    uses (query/usage.py): input not read from a cache, output (reasoning
    included, as OpenAI counts it), cache reads and cache writes."""
    attrs: dict[str, Any] = {}
    c.set_str(attrs, "model", payload.get("model"))
    c.set_str(attrs, "message_id", payload.get("response_id"))
    c.set_str(attrs, "status", payload.get("status"))
    usage = payload.get("token_usage")
    if isinstance(usage, dict):
        total_in = c.integer(usage.get("input_tokens")) or 0
        cached = c.integer(usage.get("cached_input_tokens")) or 0
        attrs["input_tokens"] = max(total_in - cached, 0)
        attrs["output_tokens"] = c.integer(usage.get("output_tokens")) or 0
        attrs["cache_read_tokens"] = cached
        attrs["cache_write_tokens"] = c.integer(usage.get("cache_write_input_tokens")) or 0
    if attrs:
        ev.setdefault("attrs", {}).update(attrs)


def reply(event_name: str) -> bytes:
    """Stop and SubagentStop require JSON on stdout when the hook exits 0."""
    return b"{}" if event_name in _JSON_REPLY_EVENTS else b""


def _notify(payload: dict[str, Any]) -> dict[str, Any]:
    """The legacy notify program's ``agent-turn-complete`` → ``turn_stopped``."""
    ev = c.new_event("turn_stopped", NOTIFY_TYPE)
    c.set_str(ev, "provider_session_id", payload.get("thread-id"))
    c.set_str(ev, "provider_turn_id", payload.get("turn-id"))
    cwd = c.text(payload.get("cwd"))
    if cwd is not None:
        ev["cwd"] = cwd
        ev["attrs"]["cwd"] = cwd
    c.copy_texts(ev, payload, (("last-assistant-message", "message"),))
    msgs = payload.get("input-messages")
    if isinstance(msgs, list) and msgs:
        ev["content"]["input_messages"] = msgs
    return c.finish(ev)
