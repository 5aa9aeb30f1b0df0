"""The OpenAI Responses API as Codex speaks it: ``POST /v1/responses`` with SSE.

Codex offers ``exec_command`` (a function) for commands and ``apply_patch``
(a custom, free-form tool: the call carries the raw patch text) for edits;
older releases offer ``shell`` / ``shell_command`` and a function-style
``apply_patch``. The model uses what the request offers.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from agentlog.bench.agents.scenarios import Action, Scenario
from agentlog.bench.agents.server import IssuedCall, Reply, Request, ToolResult, sse

_EXITED = re.compile(r"Process exited with code (-?\d+)")
_EXIT_HEADER = re.compile(r"^Exit code: (-?\d+)", re.M)


def outcome_of(text: str) -> tuple[bool, int | None]:
    """(is_error, exit code) of a Codex tool output, as the model reads it."""
    code: int | None = None
    m = _EXITED.search(text) or _EXIT_HEADER.search(text)
    if m:
        code = int(m.group(1))
    else:
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            c = obj["metadata"].get("exit_code")
            code = c if isinstance(c, int) else None
    if "apply_patch verification failed" in text or text.startswith("Failed to "):
        return True, code
    return (code is not None and code != 0), code


def _patch(action: Action) -> str:
    if action.verb == "write":
        body = "".join("+" + line + "\n" for line in action.extra.get("content", "").splitlines())
        return f"*** Begin Patch\n*** Add File: {action.arg}\n{body}*** End Patch\n"
    return (f"*** Begin Patch\n*** Update File: {action.arg}\n@@\n-{action.extra['old']}\n+{action.extra['new']}\n"
            "*** End Patch\n")


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or json.dumps(output))
    if isinstance(output, list):
        return "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return ""


class ResponsesProtocol:
    agent = "codex"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    def _item(self, action: Action, tools: dict[str, str], call_id: str) -> tuple[str, dict[str, Any]]:
        if action.verb in ("write", "edit") and "apply_patch" in tools:
            patch = _patch(action)
            if tools["apply_patch"] == "custom":
                return "apply_patch", {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": patch}
            return "apply_patch", {"type": "function_call", "call_id": call_id, "name": "apply_patch",
                                   "arguments": json.dumps({"input": patch})}
        if action.verb == "shell":
            cmd = action.arg
        elif action.verb == "read":
            cmd = f"cat {action.arg}"
        elif action.verb == "write":
            cmd = f"printf %s {json.dumps(action.extra.get('content', ''))} > {action.arg}"
        else:
            cmd = action.arg
        args: dict[str, Any]
        if "exec_command" in tools:
            name, args = "exec_command", {"cmd": cmd}
        elif "shell_command" in tools:
            name, args = "shell_command", {"command": cmd}
        else:
            name, args = "shell", {"command": ["bash", "-lc", cmd]}
        return name, {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}

    def respond(self, scenario: Scenario, request: Request, issued: dict[str, IssuedCall]) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if request.method != "POST" or not request.path.rstrip("/").endswith("/responses"):
            if request.path.rstrip("/").endswith("/models"):
                return Reply(200, "application/json", b'{"object":"list","data":[]}')
            return Reply(404, "application/json", b'{"error":{"message":"not here"}}')
        tools = {str(t.get("name")): str(t.get("type")) for t in body.get("tools") or [] if isinstance(t, dict)}
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        if not ({"exec_command", "shell", "shell_command"} & set(tools)):
            return self._reply([self._message("ok")])
        results = sum(1 for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output"))
        found = scenario.step_after(results)
        if found is None:
            return self._reply([self._message(scenario.final)])
        index, step = found
        out: list[dict[str, Any]] = []
        for i, action in enumerate(step):
            call_id = f"call_al{index:02d}{i:02d}"
            tool, item = self._item(action, tools, call_id)
            issued[call_id] = IssuedCall(call_id, tool, action, index)
            out.append(item)
        return self._reply(out)

    @staticmethod
    def _message(text: str) -> dict[str, Any]:
        return {"type": "message", "role": "assistant", "id": "msg_al" + os.urandom(6).hex(),
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    @staticmethod
    def _reply(items: list[dict[str, Any]]) -> Reply:
        rid = "resp_al" + os.urandom(6).hex()
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": {"id": rid}}),
        ]
        for n, item in enumerate(items):
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": n, "item": item}))
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append(("response.output_text.delta", {"type": "response.output_text.delta", "output_index": n,
                                                              "content_index": 0, "item_id": item["id"], "delta": text}))
            events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": n, "item": item}))
        usage = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 30,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 150}
        events.append(("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}))
        return Reply(200, "text/event-stream", sse(events))

    def results(self, requests: list[Request]) -> dict[str, ToolResult]:
        out: dict[str, ToolResult] = {}
        for req in requests:
            body = req.body if isinstance(req.body, dict) else {}
            for item in body.get("input") or []:
                if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
                    cid = str(item.get("call_id"))
                    text = _output_text(item.get("output"))
                    is_error, _ = outcome_of(text)
                    out[cid] = ToolResult(cid, text, is_error)
        return out
