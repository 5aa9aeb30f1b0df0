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
