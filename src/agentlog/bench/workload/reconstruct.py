"""Canonical events from the Claude Code transcript lines the workload generator writes.

This handles **only the record shapes this generator emits** (below). It is
not a transcript importer: real transcripts have many more record types
(``progress``, ``attachment``, ``file-history-snapshot``, ``summary``,
compaction boundaries, thinking blocks, several blocks per record, legacy
inline sidechains, …). The full Claude transcript importer is issue 6.

What it maps, as attemptdb's reconstructions do (``attrs.reconstructed``,
``provider_event_name`` ``transcript:<record type>``, no ``raw``):

========================================================  =======================
record                                                    kind
========================================================  =======================
``user``, text content                                   ``prompt_submitted``
``assistant`` with a ``text`` block                       ``agent_message``
``assistant`` with a ``tool_use`` block                   ``tool_call_started``
``user`` with a ``tool_result`` block                     ``tool_call_finished``,
                                                          ``tool_call_failed``
                                                          (``is_error``), or
                                                          ``permission_denied``
                                                          (the rejection text)
``system`` ``turn_duration`` (main chain)                 ``turn_stopped``
``system`` ``stop_hook_summary`` (sidechain)              ``subagent_stopped``
anything else                                             ``unknown``
========================================================  =======================

A ``tool_result`` names only its ``tool_use_id``; the tool's name and input
come from the ``tool_use`` seen earlier in the same stream. Pass one
:class:`TranscriptState` for a whole stream, in order; without it (or for a
result whose ``tool_use`` was not seen) the tool is inferred from the shape of
``toolUseResult`` and the input is missing.

Categories, failure classes and content facts come from the capture path's
own helpers (``agentlog.capture.classify`` through the adapters' common
functions), content is redacted like the hook's, and the project comes from
the same git lookup.
"""

from __future__ import annotations

from typing import Any

from agentlog import __version__
from agentlog.api import adapter_helpers as c
from agentlog.api import attach_project, project_info, redact_into
from agentlog.core.fastjson import loads
from agentlog.bench.workload.generator import DENIED_TEXT

RECONSTRUCTED_FROM = "claude_code_transcript"

class TranscriptState:
    """What a reconstruction must remember across lines: tool_use id → (name, input)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.calls: dict[str, tuple[str, Any]] = {}
        self.limit = limit

    def remember(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        if len(self.calls) >= self.limit:
            self.calls.pop(next(iter(self.calls)))
        self.calls[tool_use_id] = (name, tool_input)

    def take(self, tool_use_id: str) -> tuple[str, Any] | None:
        return self.calls.pop(tool_use_id, None)


def _infer_tool(result: Any) -> str:
    """The tool that produced a ``toolUseResult`` of this shape (for unpaired results)."""
    if isinstance(result, list):
        return "mcp__unknown__unknown"
    if not isinstance(result, dict):
        return "unknown"
    if "stdout" in result:
        return "Bash"
    if "file" in result and result.get("type") == "text":
        return "Read"
    if "oldString" in result:
        return "Edit"
    if result.get("type") in ("create", "update"):
        return "Write"
    if "mode" in result and "numLines" in result:
        return "Grep"
    if "filenames" in result:
        return "Glob"
    if "codeText" in result:
        return "WebFetch"
    if "query" in result:
        return "WebSearch"
    if "agentId" in result:
        return "Task"
    if "newTodos" in result:
        return "TodoWrite"
    if "commandName" in result:
        return "Skill"
    return "unknown"


def _block_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(str(b.get("text", "")) for b in v if isinstance(b, dict))
    return ""


def transcript_events(
    sample: dict[str, Any], state: TranscriptState | None = None, event_id: str | None = None
) -> list[dict[str, Any]]:
    """Canonical wire events (here always one) for one transcript sample of the generator."""
    if state is None:
        state = TranscriptState()
    rec = loads(sample["line"])
    typ = str(rec.get("type", ""))
    name = "transcript:" + typ
    side = rec.get("isSidechain") is True
    message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
    content = message.get("content") if isinstance(message, dict) else None
    ev: dict[str, Any] = c.new_event("unknown", name)
    attrs: dict[str, Any] = ev["attrs"]
    body: dict[str, Any] = ev["content"]
    agent: dict[str, Any] = {}
    agent_id = c.text(rec.get("agentId"))
    if agent_id is not None:
        agent["agent_id"] = agent_id
        attrs["is_subagent"] = True
    turn_id: str | None = None

    if typ == "user" and isinstance(content, str):
        ev["kind"] = "prompt_submitted"
        c.prompt_facts(ev, content)
        turn_id = c.text(rec.get("promptId"))
    elif typ == "user" and isinstance(content, list) and content and isinstance(content[0], dict) \
            and content[0].get("type") == "tool_result":
        block = content[0]
        tid = str(block.get("tool_use_id", ""))
        known = state.take(tid)
        result = rec.get("toolUseResult")
        tname, tinput = known if known is not None else (_infer_tool(result), None)
        category = c.set_tool(ev, tname, tid) or "other"
        c.input_facts(ev, tinput, category, tname)
        text = _block_text(block.get("content"))
        if block.get("is_error") is True:
            if text == DENIED_TEXT:
                ev["kind"] = "permission_denied"
                ev["outcome"] = {"status": "denied"}
                body["reason"] = text
            else:
                ev["kind"] = "tool_call_failed"
                err = text
                if err.startswith("<tool_use_error>") and err.endswith("</tool_use_error>"):
                    err = err[len("<tool_use_error>"):-len("</tool_use_error>")]
                c.set_failure(ev, err)
        else:
            ev["kind"] = "tool_call_finished"
            c.set_tool_output(ev, result if result is not None else text)
            ev["outcome"] = {"status": "success"}
    elif typ == "assistant" and isinstance(content, list) and content and isinstance(content[0], dict):
        block = content[0]
        model = c.text(message.get("model")) if isinstance(message, dict) else None
        if model is not None:
            agent["model"] = model
        if block.get("type") == "tool_use":
            ev["kind"] = "tool_call_started"
            tid = str(block.get("id", ""))
            tname = str(block.get("name", ""))
            tinput = block.get("input")
            state.remember(tid, tname, tinput)
            category = c.set_tool(ev, tname, tid) or "other"
            c.input_facts(ev, tinput, category, tname)
        elif block.get("type") == "text":
            ev["kind"] = "agent_message"
            text = str(block.get("text", ""))
            body["message"] = text
            attrs["message_chars"] = len(text)
            c.set_str(attrs, "stop_reason", message.get("stop_reason") if isinstance(message, dict) else None)
        else:
            attrs["unrecognised"] = True
    elif typ == "system" and rec.get("subtype") == "turn_duration" and not side:
        ev["kind"] = "turn_stopped"
        d = c.duration(rec.get("durationMs"))
        if d is not None:
            ev["duration_ms"] = d
    elif typ == "system" and rec.get("subtype") == "stop_hook_summary" and side:
        ev["kind"] = "subagent_stopped"
        c.set_bool(attrs, "prevented_continuation", rec.get("preventedContinuation"))
    else:
        attrs["unrecognised"] = True

    session_id = c.text(rec.get("sessionId"))
    cwd = c.text(rec.get("cwd"))
    if cwd is not None:
        attrs["cwd"] = cwd
    attrs["reconstructed"] = True
    attrs["reconstructed_from"] = RECONSTRUCTED_FROM
    attrs["transcript_entry_type"] = typ
    attrs["is_sidechain"] = side
    observed = c.timestamp_us(rec.get("timestamp")) or int(sample["t"])

    partial = c.finish(ev)
    out: dict[str, Any] = {
        "event_id": event_id or "",
        "schema_version": 1,
        "kind": partial["kind"],
        "provider": "claude_code",
        "provider_event_name": name,
        "observed_at": observed,
        "captured_at": int(sample["t"]),
        "capture_mode": "full",
        "agentlog_version": __version__,
    }
    fields: dict[str, Any] = {
        "provider_version": c.text(rec.get("version")),
        "provider_session_id": session_id,
        "provider_turn_id": turn_id,
        "agent": agent or None,
        "tool": partial.get("tool"),
        "paths": partial.get("paths"),
        "outcome": partial.get("outcome"),
        "duration_ms": partial.get("duration_ms"),
    }
    c.put_optional(out, fields)
    if cwd is not None:
        attach_project(out, project_info(cwd), cwd)
    attrs_out: dict[str, Any] = dict(partial.get("attrs") or {})
    (body_out,) = redact_into(attrs_out, partial.get("content") or None)
    out["attrs"] = attrs_out
    if body_out:
        out["content"] = body_out
    return [out]
