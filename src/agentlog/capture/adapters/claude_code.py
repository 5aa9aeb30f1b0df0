"""Claude Code hook payloads → partial canonical events.

The Claude-shaped mapping here is shared with Codex, whose hooks send the
same payload shape (``codex.py`` calls :func:`normalise_shaped`).
"""

from __future__ import annotations

from agentlog.capture.adapters import common as c

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROVIDER = "claude_code"

# Documented event names → canonical kind. Names mapped to "unknown" are
# documented but carry nothing the model represents (yet); they are kept
# without the `unrecognised` flag.
KINDS: dict[str, str] = {
    "SessionStart": "session_started",
    "SessionEnd": "session_ended",
    "UserPromptSubmit": "prompt_submitted",
    "PreToolUse": "tool_call_started",
    "PostToolUse": "tool_call_finished",
    "PostToolUseFailure": "tool_call_failed",
    "PermissionRequest": "permission_requested",
    "PermissionDenied": "permission_denied",
    "Notification": "notification",
    "Stop": "turn_stopped",
    "StopFailure": "turn_failed",
    "SubagentStart": "subagent_started",
    "SubagentStop": "subagent_stopped",
    "TaskCreated": "task_created",
    "TaskCompleted": "task_completed",
    "PreCompact": "compaction_started",
    "PostCompact": "compaction_finished",
    "ConfigChange": "config_changed",
    "CwdChanged": "cwd_changed",
    "FileChanged": "file_changed",
    "WorktreeCreate": "worktree_created",
    "WorktreeRemove": "worktree_removed",
    "InstructionsLoaded": "notification",
    "TeammateIdle": "notification",
    "DirectoryAdded": "notification",
    "Elicitation": "notification",
    "ElicitationResult": "notification",
    "Setup": "unknown",
    "UserPromptExpansion": "unknown",
    "MessageDisplay": "unknown",
    "PostToolBatch": "tool_batch_finished",
    "PreModelSwitch": "unknown",
    "PostModelSwitch": "unknown",
}

_TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied")


def normalise(payload: dict[str, Any], extra_args: list[str]) -> dict[str, Any]:
    return normalise_shaped(payload, extra_args, KINDS, codex=False)


def reply(event_name: str) -> bytes:
    """Claude Code: print nothing (plain stdout becomes context for some events)."""
    return b""


def normalise_shaped(
    payload: dict[str, Any], extra_args: list[str], kinds: dict[str, str], codex: bool
) -> dict[str, Any]:
    """Map one Claude-shaped payload (Claude Code or Codex hooks)."""
    if not isinstance(payload, dict):
        payload = {}
    name = c.event_name(payload, extra_args)
    kind = kinds.get(name, "unknown") if name is not None else "unknown"
    ev = c.new_event(kind, name)
    attrs: dict[str, Any] = ev["attrs"]
    content: dict[str, Any] = ev["content"]
    if name is not None and name not in kinds:
        attrs["unrecognised"] = True
    c.common(ev, payload)
    turn_keys = ("turn_id", "prompt_id") if codex else ("prompt_id",)
    for k in turn_keys:
        tid = c.text(payload.get(k))
        if tid is not None:
            ev["provider_turn_id"] = tid
            break
    if codex:
        for k in ("codex_version", "cli_version", "version"):
            v = c.text(payload.get(k))
            if v is not None:
                ev["provider_version"] = v
                break
    d = c.duration(payload.get("duration_ms"))
    if d is None:
        d = c.duration(payload.get("duration"))
    if d is not None:
        ev["duration_ms"] = d

    if name in _TOOL_EVENTS:
        _tool_event(ev, payload, name, codex)
    elif name == "PostToolBatch":
        _tool_batch(ev, payload)
    elif name == "SessionStart":
        c.set_str(attrs, "source", payload.get("source"))
        c.copy_texts(ev, payload, (("session_title", "title"),))
    elif name == "SessionEnd":
        c.set_str(attrs, "reason", payload.get("reason"))
    elif name == "UserPromptSubmit":
        c.prompt_facts(ev, payload.get("prompt"))
    elif name == "Notification":
        nt = c.text(payload.get("notification_type")) or c.text(payload.get("type"))
        if nt is not None:
            attrs["notification_type"] = nt
        c.copy_texts(ev, payload, (("message", "message"), ("title", "title")))
    elif name in ("Stop", "SubagentStop", "SubagentStart"):
        c.set_bool(attrs, "stop_hook_active", payload.get("stop_hook_active"))
        c.copy_texts(ev, payload, (("last_assistant_message", "message"),))
    elif name == "StopFailure":
        _stop_failure(ev, payload)
    elif name in ("TaskCreated", "TaskCompleted"):
        c.set_str(attrs, "task_id", payload.get("task_id"))
        status = c.text(payload.get("task_status")) or c.text(payload.get("status"))
        if status is not None:
            attrs["status"] = status
        c.copy_texts(
            ev,
            payload,
            (
                ("task_subject", "task_subject"),
                ("task_description", "task_description"),
                ("teammate_name", "teammate_name"),
                ("team_name", "team_name"),
            ),
        )
    elif name in ("PreCompact", "PostCompact"):
        c.set_str(attrs, "trigger", payload.get("trigger"))
        c.copy_texts(
            ev, payload, (("custom_instructions", "custom_instructions"), ("compact_summary", "compact_summary"))
        )
    elif name == "ConfigChange":
        c.set_str(attrs, "config_source", payload.get("source"))
        c.add_path(ev, payload.get("file_path"))
    elif name == "CwdChanged":
        prev = c.text(payload.get("old_cwd")) or c.text(payload.get("previous_cwd"))
        if prev is not None:
            attrs["previous_cwd"] = prev
        c.add_path(ev, payload.get("new_cwd"))
    elif name == "FileChanged":
        if c.add_path(ev, payload.get("file_path")):
            c.set_file_facts(ev, ev["paths"][0])
        # "change" | "add" | "unlink": why the watcher fired.
        c.set_str(attrs, "reason", payload.get("event"))
    elif name in ("WorktreeCreate", "WorktreeRemove"):
        wt = c.text(payload.get("worktree_path"))
        if wt is not None:
            attrs["worktree_path"] = wt
            c.add_path(ev, wt)
        c.copy_texts(ev, payload, (("name", "name"),))
    elif name == "InstructionsLoaded":
        c.add_path(ev, payload.get("file_path"))
        c.add_path(ev, payload.get("trigger_file_path"))
        c.set_str(attrs, "source", payload.get("memory_type"))
        c.set_str(attrs, "reason", payload.get("load_reason"))
    elif name == "TeammateIdle":
        c.copy_texts(ev, payload, (("teammate_name", "teammate_name"), ("team_name", "team_name")))
    elif name == "DirectoryAdded":
        c.add_path(ev, payload.get("directory"))
        c.set_str(attrs, "source", payload.get("source"))
    elif name in ("Elicitation", "ElicitationResult"):
        c.copy_texts(
            ev, payload, (("message", "message"), ("mcp_server_name", "mcp_server_name"), ("action", "action"))
        )
    elif name in ("Setup", "UserPromptExpansion"):
        c.set_str(attrs, "trigger", payload.get("trigger"))
        if name == "UserPromptExpansion" and isinstance(payload.get("prompt"), str):
            c.prompt_facts(ev, payload.get("prompt"))
    return c.finish(ev)


def _tool_event(ev: dict[str, Any], payload: dict[str, Any], name: str, codex: bool) -> None:
    attrs: dict[str, Any] = ev["attrs"]
    tool_name = payload.get("tool_name")
    call_id = payload.get("tool_use_id")
    category = c.set_tool(ev, tool_name, call_id)
    if category is None:
        category = "other"
    tname = tool_name if isinstance(tool_name, str) else ""
    tool_input = payload.get("tool_input")
    c.input_facts(ev, tool_input, category, tname)

    if name == "PostToolUse":
        resp = payload.get("tool_response")
        c.set_tool_output(ev, resp)
        ev["outcome"] = {"status": "success"}
        code = c.response_exit_code(resp)
        if code is None and codex and isinstance(resp, str):
            code = c.codex_text_exit_code(resp)
        if code is not None and code != 0:
            ev["kind"] = "tool_call_failed"
            err = None
            if isinstance(resp, dict):
                err = c.text(resp.get("stderr"))
            c.set_failure(ev, err, code, cls="nonzero_exit")
        elif isinstance(resp, dict) and resp.get("interrupted") is True:
            ev["kind"] = "tool_call_failed"
            attrs["interrupted"] = True
            c.set_failure(ev, None, cls="interrupted")
    elif name == "PostToolUseFailure":
        err = c.error_text(payload.get("error")) or c.error_text(payload.get("error_message"))
        interrupted = payload.get("is_interrupt") is True
        if interrupted:
            attrs["interrupted"] = True
        c.set_failure(ev, err, cls="interrupted" if interrupted else None)
    elif name == "PermissionDenied":
        ev["outcome"] = {"status": "denied"}
        reason = c.text(payload.get("reason"))
        if reason is not None:
            ev["content"]["reason"] = reason
    elif name == "PermissionRequest":
        c.copy_texts(ev, payload, (("description", "description"),))


# What Claude Code tells the model when a call needed an approval nobody could
# give (headless ``-p`` runs in the default permission mode): the call never ran.
_DENIAL_PHRASES = ("requires approval", "needs approval", "was blocked", "permission to use", "has been denied",
                   "permission denied by", "not allowed to")
_VALIDATION = "<tool_use_error>"


def batch_outcome(response: Any) -> tuple[str, str | None]:
    """(status, error text) of one call's result as PostToolBatch gives it (the
    string the model sees): ``failure`` for an input-validation error (the tool
    never started: ``<tool_use_error>…``), ``denied`` for a refused approval,
    else ``success`` (a call that ran and failed also fired PostToolUseFailure,
    whose event carries that failure)."""
    if isinstance(response, list):
        response = "\n".join(str(b.get("text", "")) for b in response if isinstance(b, dict))
    if not isinstance(response, str):
        return "success", None
    head = response[:2000]
    if head.lstrip().startswith(_VALIDATION):
        inner = head.strip()[len(_VALIDATION):]
        end = inner.find("</tool_use_error>")
        return "failure", (inner[:end] if end >= 0 else inner).strip() or response[:500]
    low = head.lower()
    if any(p in low for p in _DENIAL_PHRASES):
        return "denied", head[:500]
    return "success", None


def _tool_batch(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    """PostToolBatch: each call's outcome in ``attrs.calls`` (JSON text of a list of
    ids, tools, status, class; no output: PostToolUse has it) and the error texts in ``content.errors``.
    The calls that failed validation or were denied fire no other hook."""
    calls: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    entries = payload.get("tool_calls")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        cid = c.text(entry.get("tool_use_id"))
        name = c.text(entry.get("tool_name"))
        if cid is None or name is None:
            continue
        status, err = batch_outcome(entry.get("tool_response"))
        item: dict[str, Any] = {"call_id": cid, "tool": name, "category": c.tool_category(name), "status": status}
        if err is not None:
            probe: dict[str, Any] = {"attrs": {}, "content": {}, "paths": []}
            c.set_tool(probe, name, cid)
            c.input_facts(probe, entry.get("tool_input"), item["category"], name)
            c.set_failure(probe, err, cls="policy_denied" if status == "denied" else None, status=status)
            item["class"] = probe["outcome"]["class"]
            if "exit_code" in probe["outcome"]:
                item["exit_code"] = probe["outcome"]["exit_code"]
            errors[cid] = err
        calls.append(item)
    if calls:
        # attrs hold scalars: the list is kept as compact JSON text.
        ev["attrs"]["calls"] = c.dumps_text(calls)
    if errors:
        ev["content"]["errors"] = errors


def _stop_failure(ev: dict[str, Any], payload: dict[str, Any]) -> None:
    """StopFailure: class from ``error_type``/``matcher``, or ``error`` when a short token."""
    klass: str | None = None
    for k in ("error_type", "matcher"):
        t = c.text(payload.get(k))
        if t is not None and c.is_token(t):
            klass = c.snake(t)
            break
    err = payload.get("error")
    detail = None
    if isinstance(err, str) and c.is_token(err):
        if klass is None:
            klass = c.snake(err)
    else:
        detail = c.error_text(err)
    for k in ("error_details", "error_message", "message"):
        if detail is not None:
            break
        detail = c.error_text(payload.get(k))
    if klass is None and detail is None:
        klass = "turn_failed"
    c.set_failure(ev, detail, cls=klass)
    if klass is None and ev["outcome"].get("class") == "unknown":
        ev["outcome"]["class"] = ev["attrs"]["error_class"] = "turn_failed"
    c.copy_texts(ev, payload, (("last_assistant_message", "message"),))
