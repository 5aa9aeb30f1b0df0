"""The Anthropic Messages API as Claude Code speaks it: ``POST /v1/messages`` with SSE."""

from __future__ import annotations

import json
import os
from typing import Any

from agentlog.bench.agents.scenarios import Action, Scenario
from agentlog.bench.agents.server import IssuedCall, Reply, Request, ToolResult, sse

MODEL = "claude-sonnet-4-5"


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class AnthropicProtocol:
    agent = "claude-code"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    # -- the model's side -----------------------------------------------------
    def tool_call(self, action: Action, tools: set[str]) -> tuple[str, dict[str, Any]]:
        path = os.path.join(self.workdir, action.arg)
        if action.verb == "shell":
            return "Bash", {"command": action.arg, "description": "run a command"}
        if action.verb == "read":
            return "Read", {"file_path": path}
        if action.verb == "write":
            return "Write", {"file_path": path, "content": action.extra.get("content", "")}
        if action.verb == "edit":
            return "Edit", {"file_path": path, "old_string": action.extra["old"], "new_string": action.extra["new"]}
        name = "Agent" if "Agent" in tools else "Task"
        return name, {"description": action.arg, "prompt": action.extra.get("prompt", action.arg), "subagent_type": "general-purpose"}

    def respond(self, scenario: Scenario, request: Request, issued: dict[str, IssuedCall]) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if request.method != "POST" or "/messages" not in request.path:
            return Reply(200, "application/json", b"{}")
        if "count_tokens" in request.path:
            return Reply(200, "application/json", b'{"input_tokens": 100}')
        tools = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        first_user = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
        task_prompts = [a.extra.get("prompt", a.arg) for s in scenario.steps for a in s if a.verb == "task"]
        stream = bool(body.get("stream"))
        if "Bash" not in tools:
            return self._text("ok", stream)  # a side request (title, summary …)
        if any(p and p in first_user for p in task_prompts) and scenario.prompt not in first_user:
            return self._text(scenario.subagent_final, stream)
        results = sum(1 for m in messages for b in _blocks(m) if b.get("type") == "tool_result")
        found = scenario.step_after(results)
        if found is None:
            return self._text(scenario.final, stream)
        index, step = found
        blocks: list[dict[str, Any]] = []
        for i, action in enumerate(step):
            name, args = self.tool_call(action, tools)
            call_id = f"toolu_al{index:02d}{i:02d}" + "x" * 14
            issued[call_id] = IssuedCall(call_id, name, action, index)
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
        return self._message(blocks, "tool_use", stream)

    def _text(self, text: str, stream: bool) -> Reply:
        return self._message([{"type": "text", "text": text}], "end_turn", stream)

    def _message(self, blocks: list[dict[str, Any]], stop: str, stream: bool) -> Reply:
        msg_id = "msg_al" + os.urandom(6).hex()
        usage = {"input_tokens": 120, "output_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not stream:
            body = {"id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": blocks,
                    "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return Reply(200, "application/json", json.dumps(body).encode())
        events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}})]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}}))
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 30}}))
        events.append(("message_stop", {"type": "message_stop"}))
        return Reply(200, "text/event-stream", sse(events))

    # -- what came back -------------------------------------------------------
    def results(self, requests: list[Request]) -> dict[str, ToolResult]:
        out: dict[str, ToolResult] = {}
        for req in requests:
            body = req.body if isinstance(req.body, dict) else {}
            for m in body.get("messages") or []:
                for b in _blocks(m):
                    if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                        out[b["tool_use_id"]] = ToolResult(b["tool_use_id"], _text_of(b.get("content")), b.get("is_error") is True)
        return out
