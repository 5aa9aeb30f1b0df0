"""Gemini CLI hook payloads → partial canonical events."""

from __future__ import annotations

from agentlog.capture.adapters import common as c

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROVIDER = "gemini_cli"

KINDS: dict[str, str] = {
    "SessionStart": "session_started",
    "SessionEnd": "session_ended",
    "BeforeAgent": "prompt_submitted",
    "AfterAgent": "turn_stopped",
    "BeforeTool": "tool_call_started",
    "AfterTool": "tool_call_finished",
    "PreCompress": "compaction_started",
    "Notification": "notification",
    # Model-level events: documented, nothing in the model represents them.
    "BeforeModel": "unknown",
    "AfterModel": "unknown",
    "BeforeToolSelection": "unknown",
}


def normalise(payload: dict[str, Any], extra_args: list[str]) -> dict[str, Any]:
    if not isinstance(payload, dict):
        payload = {}
    name = c.event_name(payload, extra_args)
    kind = KINDS.get(name, "unknown") if name is not None else "unknown"
    ev = c.new_event(kind, name)
    attrs: dict[str, Any] = ev["attrs"]
    if name is not None and name not in KINDS:
        attrs["unrecognised"] = True
    c.common(ev, payload)
    for k in ("gemini_version", "cli_version", "version"):
        v = c.text(payload.get(k))
        if v is not None:
            ev["provider_version"] = v
            break
    d = c.duration(payload.get("duration_ms"))
    if d is not None:
        ev["duration_ms"] = d

    if name in ("BeforeTool", "AfterTool"):
        _tool(ev, payload, name)
    elif name == "SessionStart":
        c.set_str(attrs, "source", payload.get("source"))
    elif name == "SessionEnd":
        c.set_str(attrs, "reason", payload.get("reason"))
    elif name == "BeforeAgent":
        c.prompt_facts(ev, payload.get("prompt"))
    elif name == "AfterAgent":
        c.set_bool(attrs, "stop_hook_active", payload.get("stop_hook_active"))
        c.copy_texts(ev, payload, (("prompt_response", "message"), ("last_assistant_message", "message")))
    elif name == "PreCompress":
        c.set_str(attrs, "trigger", payload.get("trigger"))
        if attrs.get("trigger") == "auto":
            # 0.61 fires an automatic PreCompress before every model request, whether
            # or not it then compresses: not a compaction by itself.
            ev["kind"] = "unknown"
    elif name == "Notification":
        c.set_str(attrs, "notification_type", payload.get("notification_type"))
        c.copy_texts(ev, payload, (("message", "message"),))
        details = payload.get("details")
        if isinstance(details, (dict, list)) and details or isinstance(details, str) and details:
            ev["content"]["details"] = details
    elif name in ("BeforeModel", "AfterModel", "BeforeToolSelection"):
        req = payload.get("llm_request")
        if isinstance(req, dict):
            c.set_str(ev["agent"], "model", req.get("model"))
    return c.finish(ev)


def reply(event_name: str) -> bytes:
    """Gemini CLI requires stdout to be JSON only on exit 0."""
    return b"{}"


def _tool(ev: dict[str, Any], payload: dict[str, Any], name: str) -> None:
    call_id = None
    for k in ("tool_use_id", "tool_call_id", "call_id"):
        if c.text(payload.get(k)) is not None:
            call_id = payload.get(k)
            break
    tool_name = payload.get("tool_name")
    category = c.set_tool(ev, tool_name, call_id) or "other"
    args = payload.get("tool_args")
    if args is None:
        args = payload.get("tool_input")
    if call_id is None and args is not None:
        # No call id in Gemini's tool hooks: start and end carry the same input,
        # which pairs them where calls of one tool overlap (parallel calls).
        ev["attrs"]["input_key"] = input_key(tool_name, args)
    c.input_facts(ev, args, category, tool_name if isinstance(tool_name, str) else "")
    if name != "AfterTool":
        return
    resp = payload.get("tool_response")
    c.set_tool_output(ev, resp)
    text = resp.get("llmContent") if isinstance(resp, dict) else None
    if isinstance(text, str):
        # the length Gemini CLI's telemetry reports as the call's content_length (JavaScript's
        # string length: UTF-16 code units), which tells its parallel calls' records apart
        ev["attrs"]["llm_content_units"] = len(text.encode("utf-16-le", "surrogatepass")) // 2
    ev["outcome"] = {"status": "success"}
    failed, err, code = _failure(payload, resp, category)
    if failed:
        ev["kind"] = "tool_call_failed"
        c.set_failure(ev, err, code)


def input_key(tool_name: Any, args: Any) -> str:
    """A short digest of a call's tool and input, the same at its start and end."""
    import zlib

    return "%08x" % zlib.crc32(c.dumps_text([tool_name, args]).encode("utf-8", "surrogatepass"))


def _failure(payload: dict[str, Any], resp: Any, category: str) -> tuple[bool, str | None, int | None]:
    """Whether an AfterTool call failed, its error text and exit code.

    Failure signals: a non-empty top-level ``error``; ``success: false``;
    ``tool_response.error`` that is a non-empty string, a non-empty object or
    ``true``; ``tool_response.status`` ``error``/``failed``;
    ``tool_response.success: false``; an explicit non-zero exit code. A
    ``false``/empty/``null`` error is *not* a failure.
    """
    failed = False
    err: str | None = None
    top = payload.get("error")
    if top is True or (isinstance(top, str) and top.strip()) or (isinstance(top, dict) and top):
        failed = True
        err = c.error_text(top)
    if payload.get("success") is False:
        failed = True
    code: int | None = c.integer(payload.get("exit_code"))
    if isinstance(resp, dict):
        e = resp.get("error")
        if e is True or (isinstance(e, str) and e.strip()) or (isinstance(e, dict) and e):
            failed = True
            err = err or c.error_text(e)
        status = resp.get("status")
        if isinstance(status, str) and status.lower() in ("error", "failed"):
            failed = True
            err = err or c.error_text(resp.get("message"))
        if resp.get("success") is False:
            failed = True
            err = err or c.error_text(resp.get("message"))
        rc = c.response_exit_code(resp)
        if rc is None and category == "shell":
            llm = resp.get("llmContent")
            if isinstance(llm, str):
                rc = _shell_exit_code(llm)
        if code is None:
            code = rc
    if code is not None and code != 0:
        failed = True
    return failed, err, code


def _shell_exit_code(text: str) -> int | None:
    """``Exit Code: N`` from run_shell_command's text result (``(none)`` → None)."""
    for line in text.splitlines():
        if line.startswith("Exit Code:"):
            return c.header_exit_code(line, "exit code", 1)
    return None
