"""The Gemini API as Gemini CLI speaks it: ``…:streamGenerateContent?alt=sse``."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from agentlog.bench.agents.scenarios import Action, Scenario
from agentlog.bench.agents.server import IssuedCall, Reply, Request, ToolResult, sse

MODEL = "gemini-2.5-flash"
_EXIT = re.compile(r"^Exit Code: (-?\d+)", re.M)


def outcome_of(response: Any) -> tuple[str, bool, int | None]:
    """(text, is_error, exit code) of a ``functionResponse.response``."""
    if not isinstance(response, dict):
        return str(response), False, None
    if response.get("error"):
        return str(response.get("error")), True, None
    text = response.get("output")
    text = text if isinstance(text, str) else json.dumps(response)
    m = _EXIT.search(text)
    code = int(m.group(1)) if m else None
    return text, code is not None and code != 0, code


def _declarations(body: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for tool in body.get("tools") or []:
        for fn in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if not isinstance(fn, dict):
                continue
            schema = fn.get("parametersJsonSchema") or fn.get("parameters") or {}
            props = schema.get("properties") if isinstance(schema, dict) else None
            out[str(fn.get("name"))] = set(props) if isinstance(props, dict) else set()
    return out


class GeminiProtocol:
    agent = "gemini-cli"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    def _call(self, action: Action, decl: dict[str, set[str]]) -> tuple[str, dict[str, Any]]:
        path = os.path.join(self.workdir, action.arg)
        if action.verb == "shell":
            return "run_shell_command", {"command": action.arg, "description": "run a command"}
        key = "absolute_path" if "absolute_path" in decl.get("read_file", set()) else "file_path"
        if action.verb == "read":
            return "read_file", {key: path}
        if action.verb == "write":
            return "write_file", {"file_path": path, "content": action.extra.get("content", "")}
        if action.verb == "edit":
            args = {"file_path": path, "old_string": action.extra["old"], "new_string": action.extra["new"]}
            if "instruction" in decl.get("replace", set()):
                args["instruction"] = "replace the text"
            return "replace", args
        return "run_shell_command", {"command": f"echo {json.dumps(action.arg)}"}

    def respond(self, scenario: Scenario, request: Request, issued: dict[str, IssuedCall]) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        path = request.path
        if "countTokens" in path:
            return Reply(200, "application/json", b'{"totalTokens": 100}')
        if request.method != "POST" or "generatecontent" not in path.lower():
            return Reply(404, "application/json", b'{"error":{"code":404,"message":"not here"}}')
        stream = "streamGenerateContent" in path
        decl = _declarations(body)
        if "run_shell_command" not in decl:
            cfg = body.get("generationConfig") or body.get("config") or {}
            if isinstance(cfg, dict) and cfg.get("responseMimeType") == "application/json":
                return self._reply([{"text": json.dumps({"next_speaker": "user", "reasoning": "the turn is done"})}], stream)
            return self._reply([{"text": "ok"}], stream)
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        results = sum(1 for c in contents for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p)
        found = scenario.step_after(results)
        if found is None:
            return self._reply([{"text": scenario.final}], stream)
        index, step = found
        parts: list[dict[str, Any]] = []
        for i, action in enumerate(step):
            name, args = self._call(action, decl)
            call_id = f"fc_al{index:02d}{i:02d}"
            issued[call_id] = IssuedCall(call_id, name, action, index)
            parts.append({"functionCall": {"name": name, "args": args, "id": call_id}})
        return self._reply(parts, stream)

    @staticmethod
    def _reply(parts: list[dict[str, Any]], stream: bool) -> Reply:
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 30, "totalTokenCount": 150},
            "modelVersion": MODEL, "responseId": "al" + os.urandom(6).hex(),
        }
        if not stream:
            return Reply(200, "application/json", json.dumps(chunk).encode())
        return Reply(200, "text/event-stream", sse([(None, chunk)]))

    def results(self, requests: list[Request]) -> dict[str, ToolResult]:
        out: dict[str, ToolResult] = {}
        for req in requests:
            body = req.body if isinstance(req.body, dict) else {}
            for c in body.get("contents") or []:
                for p in (c.get("parts") or []) if isinstance(c, dict) else []:
                    fr = p.get("functionResponse") if isinstance(p, dict) else None
                    if isinstance(fr, dict):
                        cid = str(fr.get("id") or fr.get("name"))
                        text, is_error, _ = outcome_of(fr.get("response"))
                        out[cid] = ToolResult(cid, text, is_error)
        return out
