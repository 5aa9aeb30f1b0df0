"""``agentlog otel serve``: OTLP/HTTP on loopback (``/v1/logs``, ``/v1/metrics``, ``/v1/traces``).

The standard library's HTTP server, with at most :data:`MAX_WORKERS` requests
handled at once (the accept loop waits for a free worker, so a flood queues in
the kernel's backlog instead of in memory), a body cap checked on
``Content-Length`` before anything is read, and every failure answered with a
status: 4xx for what the sender got wrong (garbage, a wrong content type, a
body over the cap, an unknown path), 500 when the log could not be written.
A request never takes the server down.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from agentlog.otel import OtelError
from agentlog.otel.receiver import DEFAULT_MAX_BODY, Receiver, RequestError, response_body

HOST: Final = "127.0.0.1"
PORT: Final = 4318
MAX_WORKERS: Final = 8
PATHS: Final = {"/v1/logs": "logs", "/v1/metrics": "metrics", "/v1/traces": "traces"}


class _Handler(BaseHTTPRequestHandler):
    server: OtlpServer
    protocol_version = "HTTP/1.1"
    server_version = "agentlog-otlp"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return  # one line per request would drown the terminal; counts are in the receipts

    def _answer(self, status: int, body: bytes, content_type: str, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, close: bool = False) -> None:
        import json

        self._answer(status, json.dumps({"code": status, "message": message[:500]}).encode(), "application/json",
                     close)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path in ("/", "/healthz"):
            self._answer(200, b"agentlog OTLP/HTTP receiver: POST /v1/logs, /v1/metrics, /v1/traces\n",
                         "text/plain")
            return
        self._error(405 if self.path in PATHS else 404, "POST OTLP requests to /v1/logs, /v1/metrics or /v1/traces")

    def do_POST(self) -> None:  # noqa: N802
        signal = PATHS.get(self.path.split("?", 1)[0])
        receiver = self.server.receiver
        length_text = self.headers.get("Content-Length")
        if signal is None:
            self._error(404, f"no OTLP endpoint at {self.path[:100]!r}", close=True)
            return
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body_or_error = _read_chunked(self.rfile, receiver.max_body)  # Node's OTLP exporters send chunks
            if isinstance(body_or_error, tuple):
                self._error(*body_or_error, close=True)
                return
            body = body_or_error
        elif length_text is None:
            self._error(411, "Content-Length (or chunked transfer encoding) is required", close=True)
            return
        else:
            try:
                length = int(length_text)
            except ValueError:
                self._error(400, "Content-Length is not a number", close=True)
                return
            if length < 0 or length > receiver.max_body:
                self._error(413, f"body of {length} bytes is over the cap of {receiver.max_body}", close=True)
                return
            body = self.rfile.read(length)
            if len(body) != length:
                self.close_connection = True
                return
        content_type = self.headers.get("Content-Type")
        try:
            receiver.take(signal, content_type, self.headers.get("Content-Encoding"), body)
        except RequestError as e:
            self._error(e.status, str(e))
            return
        except Exception as e:  # noqa: BLE001 - a failed write answers 500 and the server lives on
            print(f"agentlog otel: could not record a {signal} request: {type(e).__name__}: {e}", file=sys.stderr)
            self._error(500, f"could not record the request: {type(e).__name__}")
            return
        out, kind = response_body(signal, content_type)
        self._answer(200, out, kind)


def _read_chunked(rfile: Any, cap: int) -> bytes | tuple[int, str]:
    """A chunked body, or (status, message) when it is malformed or over ``cap`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(1026)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            return 400, "malformed chunked body"
        if size < 0:
            return 400, "malformed chunked body"
        if size == 0:
            while rfile.readline(1026) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        total += size
        if total > cap:
            return 413, f"chunked body over the cap of {cap} bytes"
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.readline(3) not in (b"\r\n", b"\n"):
            return 400, "malformed chunked body"
        parts.append(chunk)


class OtlpServer(ThreadingHTTPServer):
    """A threading HTTP server with a bounded number of request threads."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, receiver: Receiver, host: str = HOST, port: int = PORT, workers: int = MAX_WORKERS) -> None:
        self.receiver = receiver
        self._slots = threading.BoundedSemaphore(workers)
        super().__init__((host, port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        print(f"agentlog otel: a connection from {client_address[0]} failed: {sys.exc_info()[1]!r}",
              file=sys.stderr)


def make_server(root: str, host: str = HOST, port: int = PORT, max_body: int = DEFAULT_MAX_BODY,
                workers: int = MAX_WORKERS) -> OtlpServer:
    """A bound (not yet serving) receiver; port 0 picks a free one (``server.server_address``)."""
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise OtelError(f"the receiver listens on loopback only, not {host!r}")
    try:
        return OtlpServer(Receiver(root, max_body), host, port, workers)
    except OSError as e:
        raise OtelError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
