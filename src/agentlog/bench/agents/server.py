"""A scripted model server on 127.0.0.1: answers an agent CLI from a scenario.

The server is protocol-neutral: a :class:`ModelProtocol` turns each request
into a reply (usually a server-sent-event stream) and says which tool results
the CLI sent back. Every request is kept (method, path, JSON body) so a test
can read the truth afterwards: what each tool call really returned.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from agentlog.bench.agents.scenarios import Action, Scenario


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content_type: str = "text/event-stream"
    body: bytes = b""


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class IssuedCall:
    """A tool call the scripted model made: its id and the agent's own tool name."""

    call_id: str
    tool: str
    action: Action
    step: int


@dataclass(frozen=True)
class ToolResult:
    """What the CLI sent back to the model for one call."""

    call_id: str
    text: str
    is_error: bool


class ModelProtocol(Protocol):
    agent: str

    def respond(self, scenario: Scenario, request: Request, issued: dict[str, IssuedCall]) -> Reply:
        """The reply to one request (records the calls it makes in ``issued``)."""

    def results(self, requests: list[Request]) -> dict[str, ToolResult]:
        """The tool results the CLI sent back, by call id."""


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    """Server-sent events: ``event:`` lines where named, ``data:`` JSON."""
    out: list[str] = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append("data: " + json.dumps(data, separators=(",", ":")) + "\n\n")
    return "".join(out).encode()


@dataclass
class ScriptedModel:
    """The running server: its URL, the requests it saw and the calls it made."""

    protocol: ModelProtocol
    scenario: Scenario
    requests: list[Request] = field(default_factory=list)
    issued: dict[str, IssuedCall] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> ScriptedModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with model._lock:
                    model.requests.append(req)
                    reply = model.protocol.respond(model.scenario, req, model.issued)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)

            do_GET = do_POST = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def results(self) -> dict[str, ToolResult]:
        with self._lock:
            return self.protocol.results(list(self.requests))
