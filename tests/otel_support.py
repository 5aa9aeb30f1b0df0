"""Helpers of the OpenTelemetry tests: a real receiver process, requests, the logs it wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from conftest import REPO

SENDER = Path(__file__).resolve().parent / "otel_send.py"


class Receiver:
    """``agentlog otel serve --port 0`` as a process, for one data root."""

    def __init__(self, home: Path, *extra: str) -> None:
        env = {**os.environ, "AGENTLOG_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen([sys.executable, "-m", "agentlog", "otel", "serve", "--port", "0", *extra],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m, f"the receiver did not say where it listens: {line!r}"
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self) -> str:
        self.proc.send_signal(2)  # SIGINT: the command's own shutdown
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=20)
        return err.decode()


def post(url: str, body: bytes, content_type: str = "application/x-protobuf", **headers: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def send_sdk(url: str, encoding: str, session: str, prompt_id: str, tool_use_id: str, count: int = 1) -> None:
    """The real OpenTelemetry SDK, in its own process, sending logs, metrics and traces."""
    r = subprocess.run([sys.executable, str(SENDER), url, encoding, session, prompt_id, tool_use_id, str(count)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "sent", r.stderr[-3000:]


def log_events(home: Path, provider: str = "claude_code") -> Iterator[tuple[str, dict[str, Any]]]:
    """(log file name, event) of every frame under the provider's logs."""
    for path in sorted((home / "logs" / provider).glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                yield path.name, json.loads(line)["event"]


def logs_request(records: list[dict[str, Any]], session: str | None = "s-1", service: str = "claude-code") -> bytes:
    """An ExportLogsServiceRequest (protobuf bytes) of records given as attribute dicts
    (``_body`` the body, ``_time`` µs)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    kv = rl.resource.attributes.add(key="service.name")
    kv.value.string_value = service
    sl = rl.scope_logs.add()
    for rec in records:
        lr = sl.log_records.add()
        lr.time_unix_nano = int(rec.get("_time", time.time_ns() // 1000)) * 1000
        lr.body.string_value = str(rec.get("_body", "claude_code.tool_result"))
        attrs = {k: v for k, v in rec.items() if not k.startswith("_")}
        if session is not None:
            attrs.setdefault("session.id", session)
        for k, v in attrs.items():
            item: KeyValue = lr.attributes.add(key=k)
            if isinstance(v, bool):
                item.value.bool_value = v
            elif isinstance(v, int):
                item.value.int_value = v
            elif isinstance(v, float):
                item.value.double_value = v
            else:
                item.value.string_value = str(v)
    return req.SerializeToString()


SESSION = "0b3c9a52-join-test"
PROMPT = "prompt-7f"


def _hook(cwd: Path, **payload: object) -> None:
    from conftest import run_hook

    body = {"session_id": SESSION, "transcript_path": str(cwd / "none.jsonl"), "cwd": str(cwd), **payload}
    r = run_hook(json.dumps(body).encode(), cwd=str(cwd))
    assert r.returncode == 0, r.stderr


def record_scenario(home: Path, tmp: Path) -> None:
    """One Claude Code session through the real hook (a prompt, a failing Bash call, a Read call),
    a transcript's usage row for it, and its telemetry through a real receiver: the SDK's records
    (keyed by prompt id and tool_use_id) and a Read tool_result without a tool_use_id."""
    from agentlog.core.jsonio import dumps
    from agentlog.log.writer import open_session_log

    work = tmp / "proj"
    work.mkdir()
    _hook(work, hook_event_name="SessionStart", source="startup")
    _hook(work, hook_event_name="UserPromptSubmit", prompt_id=PROMPT, prompt="make the file")
    bash_in = {"command": "exit 3"}
    _hook(work, hook_event_name="PreToolUse", prompt_id=PROMPT, tool_name="Bash", tool_input=bash_in,
          tool_use_id="toolu_01")
    _hook(work, hook_event_name="PermissionRequest", prompt_id=PROMPT, tool_name="Bash", tool_input=bash_in)
    _hook(work, hook_event_name="PostToolUseFailure", prompt_id=PROMPT, tool_name="Bash", tool_input=bash_in,
          tool_use_id="toolu_01", error="Exit code 3")
    read_in = {"file_path": str(work / "a.txt")}
    _hook(work, hook_event_name="PreToolUse", prompt_id=PROMPT, tool_name="Read", tool_input=read_in,
          tool_use_id="toolu_02")
    read_at = time.time_ns() // 1000
    _hook(work, hook_event_name="PostToolUse", prompt_id=PROMPT, tool_name="Read", tool_input=read_in,
          tool_use_id="toolu_02", tool_response={"type": "text", "file": {"content": "x"}})
    _hook(work, hook_event_name="Stop", prompt_id=PROMPT, stop_hook_active=False)
    # a transcript's usage for the same session, as `agentlog import` writes it: telemetry replaces it
    log = open_session_log(str(home), "claude_code", SESSION)
    log.append([dumps({"event_id": "01900000-0000-7000-8000-00000000abcd", "schema_version": 1, "kind": "usage",
                       "provider": "claude_code", "provider_event_name": "transcript:usage",
                       "observed_at": read_at, "captured_at": read_at, "capture_mode": "full",
                       "agentlog_version": "0", "provider_session_id": SESSION,
                       "attrs": {"model": "claude-sonnet-4-5", "message_id": "msg_1", "input_tokens": 100,
                                 "output_tokens": 20, "cache_read_tokens": 1000, "cache_write_tokens": 50}})])
    receiver = Receiver(home)
    try:
        send_sdk(receiver.url, "protobuf", SESSION, PROMPT, "toolu_01", count=2)
        status, _ = post(receiver.url + "/v1/logs", logs_request(
            [{"_body": "claude_code.tool_result", "event.name": "tool_result", "tool_name": "Read",
              "success": "true", "duration_ms": 3, "_time": read_at}], session=SESSION))
        assert status == 200
    finally:
        receiver.stop()
