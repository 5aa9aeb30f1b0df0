"""Cursor hook payloads (camelCase events) → partial canonical events.

Cursor differs from Claude: the session id is ``conversation_id``, the turn
id ``generation_id``, there is no ``cwd`` in the common fields (use
``workspace_roots``), the specialised events (shell, MCP, read, file edit)
carry their details at the top level with no ``tool_name``, and tool results
arrive as JSON *strings*.
"""

from __future__ import annotations

from agentlog.capture.adapters import common as c

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROVIDER = "cursor"

KINDS: dict[str, str] = {
    "sessionStart": "session_started",
    "sessionEnd": "session_ended",
    "preToolUse": "tool_call_started",
    "postToolUse": "tool_call_finished",
    "postToolUseFailure": "tool_call_failed",
    "subagentStart": "subagent_started",
    "subagentStop": "subagent_stopped",
    "beforeShellExecution": "tool_call_started",
    "afterShellExecution": "tool_call_finished",
    "beforeMCPExecution": "tool_call_started",
    "afterMCPExecution": "tool_call_finished",
    "beforeReadFile": "tool_call_started",
    "afterFileEdit": "tool_call_finished",
    "beforeSubmitPrompt": "prompt_submitted",
    "preCompact": "compaction_started",
    "stop": "turn_stopped",
    "afterAgentResponse": "agent_message",
    "afterAgentThought": "agent_message",
    # Tab (inline completion) events: documented, not agent activity.
    "beforeTabFileRead": "unknown",
    "afterTabFileEdit": "unknown",
}

SHELL_TOOL = "Shell"
READ_TOOL = "Read"
EDIT_TOOL = "Edit"


def normalise(payload: dict[str, Any], extra_args: list[str]) -> dict[str, Any]:
    if not isinstance(payload, dict):
        payload = {}
    name = c.event_name(payload, extra_args)
    kind = KINDS.get(name, "unknown") if name is not None else "unknown"
    ev = c.new_event(kind, name)
    attrs: dict[str, Any] = ev["attrs"]
    content: dict[str, Any] = ev["content"]
    if name is not None and name not in KINDS:
        attrs["unrecognised"] = True
    c.common(ev, payload, session_keys=("conversation_id", "session_id"))
    if "cwd" not in ev:
        roots = payload.get("workspace_roots")
        if isinstance(roots, list):
            for r in roots:
                root = c.text(r)
                if root is not None:
                    ev["cwd"] = root
                    break
    gen = c.text(payload.get("generation_id"))
    if gen is not None:
        ev["provider_turn_id"] = gen
        attrs["generation_id"] = gen
    c.set_str(ev, "provider_version", payload.get("cursor_version"))
    d = c.duration(payload.get("duration"))
    if d is None:
        d = c.duration(payload.get("duration_ms"))
    if d is not None:
        ev["duration_ms"] = d

    if name in ("preToolUse", "postToolUse", "postToolUseFailure"):
        category = c.set_tool(ev, payload.get("tool_name"), payload.get("tool_use_id")) or "other"
        raw_name = payload.get("tool_name")
        tname = raw_name if isinstance(raw_name, str) else ""
        c.input_facts(ev, _decoded(payload.get("tool_input")), category, tname)
        if name == "postToolUse":
            _output(ev, payload.get("tool_output"))
            ev["outcome"] = {"status": "success"}
            code = c.response_exit_code(content.get("tool_output"))
            if code is not None and code != 0:
                ev["kind"] = "tool_call_failed"
                c.set_failure(ev, None, code, cls="nonzero_exit")
        elif name == "postToolUseFailure":
            _tool_failure(ev, payload)
    elif name in ("beforeShellExecution", "afterShellExecution"):
        c.set_tool(ev, SHELL_TOOL, payload.get("tool_use_id"), category="shell")
        cmd = c.command_text(payload.get("command"))
        if cmd is not None:
            c.command_facts(ev, cmd, c.shell_line(payload.get("command")))
        if name == "afterShellExecution":
            out = payload.get("output")
            if out is not None:
                c.set_tool_output(ev, out)
            ev["outcome"] = {"status": "success"}
            code = c.integer(payload.get("exit_code"))
            if code is not None and code != 0:
                ev["kind"] = "tool_call_failed"
                c.set_failure(ev, None, code, cls="nonzero_exit")
    elif name in ("beforeMCPExecution", "afterMCPExecution"):
        mcp_name = payload.get("tool_name")
        tname = mcp_name if isinstance(mcp_name, str) and mcp_name else "unknown"
        if not tname.startswith("MCP:"):
            tname = "MCP:" + tname
        c.set_tool(ev, tname, payload.get("tool_use_id"), category="mcp")
        c.input_facts(ev, _decoded(payload.get("tool_input")), "mcp", tname)
        c.set_str(content, "url", payload.get("url"))
        if name == "afterMCPExecution":
            _output(ev, payload.get("result_json"))
            ev["outcome"] = {"status": "success"}
            result = content.get("tool_output")
            if isinstance(result, dict) and result.get("isError") is True:
                ev["kind"] = "tool_call_failed"
                c.set_failure(ev, _mcp_error_text(result))
    elif name in ("beforeReadFile", "beforeTabFileRead"):
        if name == "beforeReadFile":
            c.set_tool(ev, READ_TOOL, payload.get("tool_use_id"), category="file_read")
        if c.add_path(ev, payload.get("file_path")):
            c.set_file_facts(ev, ev["paths"][0])
        _attachments(ev, payload)
    elif name in ("afterFileEdit", "afterTabFileEdit"):
        fp = payload.get("file_path")
        edits = payload.get("edits")
        if name == "afterFileEdit":
            c.set_tool(ev, EDIT_TOOL, payload.get("tool_use_id"), category="file_edit")
            tool_input: dict[str, Any] = {}
            if isinstance(fp, str):
                tool_input["file_path"] = fp
            if edits is not None:
                tool_input["edits"] = edits
            if tool_input:
                c.input_facts(ev, tool_input, "file_edit", EDIT_TOOL)
            ev["outcome"] = {"status": "success"}
        elif c.add_path(ev, fp):
            c.set_file_facts(ev, ev["paths"][0])
            c.edits_facts(ev, edits)
    elif name == "beforeSubmitPrompt":
        c.prompt_facts(ev, payload.get("prompt"))
        _attachments(ev, payload)
    elif name in ("afterAgentResponse", "afterAgentThought"):
        c.copy_texts(ev, payload, (("text", "message"),))
        if name == "afterAgentThought":
            attrs["thought"] = True
    elif name == "stop":
        _stop(ev, payload)
    elif name == "sessionEnd":
        c.set_str(attrs, "reason", payload.get("reason"))
        c.set_str(attrs, "status", payload.get("final_status"))
        c.copy_texts(ev, payload, (("error_message", "error"),))
    elif name == "sessionStart":
        c.set_str(attrs, "source", payload.get("composer_mode"))
    elif name in ("subagentStart", "subagentStop"):
        _subagent(ev, payload, name)
    elif name == "preCompact":
        c.set_str(attrs, "trigger", payload.get("trigger"))
    return c.finish(ev)


def reply(event_name: str) -> bytes:
    """Cursor: no output (exit 0 with nothing lets the action through)."""
    return b""


def _decoded(v: Any) -> Any:
    """A JSON-stringified value decoded when it parses, else as it came."""
    if isinstance(v, str):
        head = v.lstrip()[:1]
        if head in ("{", "["):
            ok, value = c.loads_or_none(v)
            if ok:
                return value
    return v


def _output(ev: dict[str, Any], v: Any) -> None:
    if isinstance(v, str):
        decoded = _decoded(v)
        c.set_tool_output(ev, decoded, as_text=v)
    else:
        c.set_tool_output(ev, v)


def _attachments(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    atts = payload.get("attachments")
    if isinstance(atts, list):
        for a in atts:
            if isinstance(a, dict):
                c.add_path(ev, a.get("file_path"))


def _mcp_error_text(result: dict[str, Any]) -> str | None:
    blocks = result.get("content")
    if isinstance(blocks, list):
        for b in blocks:
            if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"].strip():
                return str(b["text"])
    return c.error_text(result)


def _tool_failure(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    attrs: dict[str, Any] = ev["attrs"]
    err = c.error_text(payload.get("error_message")) or c.error_text(payload.get("error"))
    ftype = c.text(payload.get("failure_type"))
    if ftype is not None:
        attrs["failure_type"] = ftype
    cls: str | None = None
    if payload.get("is_interrupt") is True:
        attrs["interrupted"] = True
        cls = "interrupted"
    c.set_failure(ev, err, cls=cls)
    if cls is None and ev["outcome"]["class"] == "unknown" and ftype is not None and c.is_token(ftype):
        fcls = c.snake(ftype)
        if fcls != "error":
            ev["outcome"]["class"] = attrs["error_class"] = fcls


def _stop(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    attrs: dict[str, Any] = ev["attrs"]
    status = c.text(payload.get("status"))
    if status is not None:
        attrs["status"] = status
    c.set_int(attrs, "loop_count", payload.get("loop_count"))
    if status == "aborted":
        ev["kind"] = "turn_failed"
        c.set_failure(ev, None, cls="interrupted", status="cancelled")
    elif status == "error":
        ev["kind"] = "turn_failed"
        err = c.error_text(payload.get("error_message")) or c.error_text(payload.get("error"))
        c.set_failure(ev, err)
        if ev["outcome"]["class"] == "unknown":
            ev["outcome"]["class"] = attrs["error_class"] = "turn_failed"


def _subagent(ev: dict[str, Any], payload: dict[str, Any], name: str) -> None:
    attrs: dict[str, Any] = ev["attrs"]
    agent: dict[str, Any] = ev["agent"]
    sid = c.text(payload.get("subagent_id"))
    if sid is not None:
        agent["agent_id"] = sid
    attrs["is_subagent"] = True
    stype = c.text(payload.get("subagent_type"))
    if stype is not None:
        agent["agent_type"] = stype
        attrs["subagent_type"] = stype
    c.set_str(agent, "model", payload.get("subagent_model"))
    c.copy_texts(ev, payload, (("task", "task"), ("description", "description"), ("summary", "message")))
    if name == "subagentStop":
        status = c.text(payload.get("status"))
        if status is not None:
            attrs["status"] = status
        c.set_int(attrs, "loop_count", payload.get("loop_count"))
        files = payload.get("modified_files")
        if isinstance(files, list):
            for f in files:
                c.add_path(ev, f)
        if status == "completed":
            ev["outcome"] = {"status": "success"}
        elif status == "aborted":
            c.set_failure(ev, None, cls="interrupted", status="cancelled")
        elif status == "error":
            c.set_failure(ev, c.error_text(payload.get("error_message")))
