"""One OTLP/HTTP request body → events in the session logs.

:func:`decode` checks the content type, inflates gzip within the size cap and
parses the body with the official ``opentelemetry-proto`` messages (binary
protobuf, or OTLP/JSON through ``google.protobuf.json_format`` after turning
its hex trace and span ids into the base64 protobuf's JSON mapping expects).
:class:`Receiver` turns the records into ``telemetry`` events
(:mod:`agentlog.otel.records`), redacts them as imports are redacted
(:func:`agentlog.capture.secret_gate.redact_serialized`) and appends them to
the log of the agent's session; records without a session id go to the
agent's telemetry log (:data:`TELEMETRY_LOG`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterator

from agentlog.otel import OtelError

#: the log key of an agent's records that carry no session id
TELEMETRY_LOG: Final = "otel-telemetry"
#: the largest body accepted, after inflating (bytes)
DEFAULT_MAX_BODY: Final = 16 * 1024 * 1024
SIGNALS: Final = ("logs", "metrics", "traces")
PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_ID_KEYS: Final = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


class RequestError(OtelError):
    """A request the receiver answers with a 4xx status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _messages(signal: str) -> tuple[Any, Any]:
    """The request and response message classes of a signal."""
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as m
        return m.ExportLogsServiceRequest, m.ExportLogsServiceResponse
    if signal == "metrics":
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as mm
        return mm.ExportMetricsServiceRequest, mm.ExportMetricsServiceResponse
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as t
    return t.ExportTraceServiceRequest, t.ExportTraceServiceResponse


def media_type(content_type: str | None) -> str:
    """``application/json; charset=utf-8`` → ``application/json``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def inflate(body: bytes, encoding: str | None, max_body: int) -> bytes:
    """The body, gunzipped when ``Content-Encoding: gzip``, never more than ``max_body`` bytes."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc not in ("gzip", "deflate"):
        raise RequestError(415, f"unsupported Content-Encoding {enc!r} (gzip or none)")
    d = zlib.decompressobj(wbits=31 if enc == "gzip" else 15)
    try:
        out = d.decompress(body, max_body + 1)
    except zlib.error as e:
        raise RequestError(400, f"body is not valid {enc}: {e}") from None
    if len(out) > max_body or d.unconsumed_tail:
        raise RequestError(413, f"body inflates to more than {max_body} bytes")
    return out


def _hex_ids(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids in hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _ID_KEYS and isinstance(v, str):
                try:
                    v = base64.b64encode(bytes.fromhex(v)).decode()
                except ValueError:
                    raise RequestError(400, f"{k} is not hex: {v[:40]!r}") from None
            else:
                v = _hex_ids(v)
            out[k] = v
        return out
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def decode(signal: str, content_type: str | None, body: bytes) -> Any:
    """The export request message of ``body`` (already inflated)."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    request_cls, _ = _messages(signal)
    kind = media_type(content_type)
    msg = request_cls()
    if kind == PROTOBUF:
        try:
            msg.ParseFromString(body)
        except (DecodeError, ValueError, RecursionError) as e:
            raise RequestError(400, f"body is not an OTLP {signal} protobuf message: {e}") from None
        return msg
    if kind == JSON:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise RequestError(400, f"body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise RequestError(400, "body is not a JSON object")
        try:
            json_format.ParseDict(_hex_ids(data), msg, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError, RecursionError) as e:
            raise RequestError(400, f"body is not an OTLP/JSON {signal} request: {str(e)[:300]}") from None
        return msg
    raise RequestError(415, f"Content-Type must be {PROTOBUF} or {JSON}, not {kind or 'none'!r}")


def response_body(signal: str, content_type: str | None) -> tuple[bytes, str]:
    """An empty export response (full success) in the request's encoding."""
    _, response_cls = _messages(signal)
    if media_type(content_type) == JSON:
        return b"{}", JSON
    return response_cls().SerializeToString(), PROTOBUF


def events_of(signal: str, msg: Any, received_us: int) -> Iterator[dict[str, Any]]:
    """The ``telemetry`` events of a parsed request."""
    from agentlog.otel import records

    if signal == "logs":
        return records.log_events(msg, received_us)
    if signal == "metrics":
        return records.metric_events(msg, received_us)
    return records.span_events(msg, received_us)


@dataclass
class Counts:
    """What a receiver took since it started."""

    requests: int = 0
    records: int = 0
    rejected: int = 0
    by_provider: dict[str, int] = field(default_factory=dict)
    last_at: dict[str, int] = field(default_factory=dict)
    """Provider → µs of its last record's arrival."""


class Receiver:
    """Decode, convert, redact and append; safe to call from many threads."""

    def __init__(self, root: str, max_body: int = DEFAULT_MAX_BODY,
                 on_write: Callable[[int], None] | None = None) -> None:
        from agentlog.core.config import load

        self.root = root
        self.max_body = max_body
        self.capture_mode = str(load(root).get("capture_mode", "full"))
        """``metadata_only`` (the setting): no content and no raw payload is written."""
        self.counts = Counts()
        self._lock = threading.Lock()
        self._receipts_at = 0.0
        self._on_write = on_write

    def take(self, signal: str, content_type: str | None, encoding: str | None, body: bytes) -> int:
        """Handle one request body; the number of records written. Raises :class:`RequestError`."""
        if signal not in SIGNALS:
            raise RequestError(404, f"no such OTLP signal {signal!r}")
        try:
            msg = decode(signal, content_type, inflate(body, encoding, self.max_body))
            received = time.time_ns() // 1000
            events = list(events_of(signal, msg, received))
        except RequestError:
            with self._lock:
                self.counts.rejected += 1
            raise
        self.write(events)
        return len(events)

    def write(self, events: list[dict[str, Any]]) -> None:
        """Redact ``events`` and append them to their sessions' logs."""
        from agentlog.capture.secret_gate import redact_serialized
        from agentlog.log.writer import open_session_log

        now = time.time_ns() // 1000
        with self._lock:
            self.counts.requests += 1
            if events:
                if self.capture_mode == "metadata_only":
                    for ev in events:
                        ev["capture_mode"] = "metadata_only"
                        ev.pop("content", None)
                        ev.pop("raw", None)
                blobs = redact_serialized(events)
                groups: dict[tuple[str, str], list[bytes]] = {}
                for ev, blob in zip(events, blobs, strict=True):
                    key = (ev["provider"], ev.get("provider_session_id") or TELEMETRY_LOG)
                    groups.setdefault(key, []).append(blob)
                    self.counts.by_provider[ev["provider"]] = self.counts.by_provider.get(ev["provider"], 0) + 1
                    self.counts.last_at[ev["provider"]] = now
                for (provider, session), lines in groups.items():
                    log = open_session_log(self.root, provider, session, durability="relaxed",
                                           capture_mode=self.capture_mode, hasher=hashlib.sha256)
                    log.append(lines)
                self.counts.records += len(events)
            self._note_receipts(now)
        if self._on_write is not None and events:
            self._on_write(len(events))

    def _note_receipts(self, now_us: int, force: bool = False) -> None:
        if not force and time.monotonic() - self._receipts_at < 1.0:
            return
        self._receipts_at = time.monotonic()
        write_receipts(self.root, self.counts, now_us)

    def flush(self) -> None:
        """Write the receipts now (at shutdown)."""
        with self._lock:
            self._note_receipts(time.time_ns() // 1000, force=True)


def write_receipts(root: str, counts: Counts, now_us: int) -> None:
    """Note what arrived, per agent, for ``agentlog doctor`` (0600, replaced atomically)."""
    from agentlog.core.fileio import write_atomic
    from agentlog.core.paths import ensure_dir, otel_receipts, state_dir

    ensure_dir(state_dir(root))
    path = otel_receipts(root)
    data = {"updated_at": now_us, "records": counts.records, "requests": counts.requests,
            "rejected": counts.rejected,
            "agents": {p: {"records": n, "last_at": counts.last_at.get(p)} for p, n in sorted(counts.by_provider.items())}}
    write_atomic(path, json.dumps(data, indent=1).encode(), durable=False)
