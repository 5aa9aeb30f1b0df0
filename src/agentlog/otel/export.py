"""``agentlog otel export``: recorded sessions → spans (:mod:`.spans`) → an OTLP/HTTP endpoint.

Reads sessions, turns, tool calls and model requests through the query engine,
builds each span as the SDK's own ``ReadableSpan`` with the ids :mod:`.spans`
derives, and sends them with the SDK's OTLP/HTTP span exporter (protobuf), in
batches of :data:`BATCH`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Final

from agentlog.otel import OtelError
from agentlog.otel.spans import Plan, session_plans
from agentlog.query.subagents import spawned_agents

BATCH: Final = 512


@dataclass
class ExportResult:
    url: str
    sessions: int
    spans: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(engine: Any, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    res = engine.run(sql, params or [], max_rows=10_000_000)
    return [dict(zip(res.columns, r)) for r in res.rows]


def _us(col: str, alias: str | None = None) -> str:
    return f"epoch_us({col}) AS {alias or col.split('.')[-1].replace('_at', '_us')}"


def select_sessions(engine: Any, session: str | None, since_us: int | None) -> list[dict[str, Any]]:
    """The sessions to export (``session``: an id or the agent's own id)."""
    where: str = "TRUE"
    params: list[Any] = []
    if session is not None:
        where, params = "(session_id = ? OR provider_session_id = ?)", [session, session]
    elif since_us is not None:
        where, params = "epoch_us(coalesce(last_event_at, started_at)) >= ?", [since_us]
    rows = _rows(engine, "SELECT session_id, provider, provider_session_id, project_name, "
                         f"{_us('started_at')}, {_us('ended_at')}, {_us('last_event_at', 'last_us')} "
                         f"FROM sessions WHERE {where} ORDER BY started_at, session_id", params)
    if session is not None and not rows:
        raise OtelError(f"no session {session!r} (see `agentlog sessions`)")
    return rows


def session_rows(engine: Any, s: dict[str, Any], include_content: bool) -> list[Plan]:
    """The span plans of one session row."""
    sid = s["session_id"]
    turns = _rows(engine, "SELECT turn_id, turn_index, status, failure_class, objective, "
                          f"{_us('started_at')}, {_us('ended_at')} FROM turns WHERE session_id = ? "
                          "ORDER BY turn_index", [sid])
    calls = _rows(engine, "SELECT tool_call_id, turn_id, provider_agent_id, tool_name, tool_category, provider_call_id, "
                          "outcome_status, outcome_class, exit_code, start_event_id, end_event_id, "
                          f"{_us('started_at')}, {_us('finished_at')} FROM tool_calls WHERE session_id = ? "
                          "ORDER BY started_at, tool_call_id", [sid])
    requests = _rows(engine, "SELECT u.event_id, epoch_us(u.observed_at) AS observed_us, u.model, u.message_id, "
                             "u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd, "
                             "u.source, t.duration_ms, t.turn_id FROM usage u LEFT JOIN telemetry t USING (event_id) "
                             "WHERE u.provider = ? AND u.provider_session_id = ? ORDER BY u.observed_at, u.event_id",
                     [s["provider"], s["provider_session_id"]])
    errors = _rows(engine, "SELECT event_id, epoch_us(observed_at) AS observed_us, model, request_id AS message_id, "
                           "duration_ms, turn_id, 'telemetry' AS source, 'api_error' AS error FROM telemetry "
                           "WHERE session_id = ? AND record = 'api_error' ORDER BY observed_at, event_id", [sid])
    for r in requests:
        if r.get("turn_id") is None:  # a transcript's response: the turn that started last before it
            before = [t for t in turns if t["started_us"] is not None and t["started_us"] <= r["observed_us"]]
            r["turn_id"] = before[-1]["turn_id"] if before else None
    for c in calls:
        if c["started_us"] is None:
            c["started_us"] = c["finished_us"] or s["started_us"] or 0
    turns = [t for t in turns if t["started_us"] is not None]
    spawned_agents(engine, calls)
    content: dict[str, dict[str, Any]] | None = None
    if include_content:
        ids = sorted({i for c in calls for i in (c["start_event_id"], c["end_event_id"]) if i})
        content = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            marks = ", ".join("?" * len(part))
            for r in _rows(engine, f"SELECT event_id, event FROM events WHERE event_id IN ({marks})", part):
                ev = json.loads(r["event"])
                if isinstance(ev.get("content"), dict):
                    content[r["event_id"]] = ev["content"]
    return session_plans(s, turns, calls, requests + errors, content)


def to_sdk(plans: list[Plan]) -> list[Any]:
    """The plans as the SDK's ``ReadableSpan`` objects."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    from agentlog import __version__

    resource = Resource.create({"service.name": "agentlog", "service.version": __version__,
                                "openinference.project.name": "agentlog"})
    scope = InstrumentationScope("agentlog", __version__)
    flags = TraceFlags(TraceFlags.SAMPLED)
    out = []
    for p in plans:
        ctx = SpanContext(p.trace, p.span, is_remote=False, trace_flags=flags)
        parent = None if p.parent is None else SpanContext(p.trace, p.parent, is_remote=False, trace_flags=flags)
        attrs = dict(p.attributes)
        if p.error:
            attrs["error.type"] = p.error
        status = Status(StatusCode.ERROR, p.error) if p.error else Status(StatusCode.OK)
        kind = SpanKind.CLIENT if p.name.startswith("chat ") else SpanKind.INTERNAL
        out.append(ReadableSpan(name=p.name, context=ctx, parent=parent, resource=resource, attributes=attrs,
                                kind=kind, status=status, start_time=p.start_ns, end_time=max(p.end_ns, p.start_ns),
                                instrumentation_scope=scope))
    return out


def reachable(url: str, timeout: float = 3.0) -> None:
    """Raise :class:`OtelError` at once when nothing accepts a connection at ``url``'s host and
    port (the exporter would retry for its whole timeout)."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise OtelError(f"--endpoint {url!r} is not a usable URL ({e})") from None
    if not parts.hostname:
        raise OtelError(f"--endpoint {url!r} names no host")
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            pass
    except (OSError, UnicodeError) as e:
        raise OtelError(f"nothing answers at {parts.hostname}:{port} ({e}); is an OTLP/HTTP receiver running?") \
            from None


def send(spans: list[Any], endpoint: str, headers: dict[str, str] | None = None, timeout: float = 10.0) -> None:
    """POST spans to ``endpoint``/v1/traces with the SDK's OTLP/HTTP exporter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    reachable(url)
    exporter = OTLPSpanExporter(endpoint=url, headers=headers or None, timeout=timeout)
    try:
        for i in range(0, len(spans), BATCH):
            if exporter.export(spans[i:i + BATCH]) is not SpanExportResult.SUCCESS:
                raise OtelError(f"{url} did not accept the spans (is an OTLP/HTTP receiver listening there?)")
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]


def export_sessions(engine: Any, endpoint: str, *, session: str | None = None, since_us: int | None = None,
                    include_content: bool = False, headers: dict[str, str] | None = None) -> ExportResult:
    """Export the chosen sessions (all when neither ``session`` nor ``since_us``)."""
    if not endpoint.startswith(("http://", "https://")):
        raise OtelError(f"--endpoint must be an http:// or https:// URL, not {endpoint!r}")
    t0 = time.perf_counter()
    from urllib.parse import urlsplit

    try:
        urlsplit(endpoint).port
    except ValueError as e:
        raise OtelError(f"--endpoint {endpoint!r} is not a usable URL ({e})") from None
    chosen = select_sessions(engine, session, since_us)
    spans: list[Any] = []
    for s in chosen:
        spans.extend(to_sdk(session_rows(engine, s, include_content)))
    if spans:
        send(spans, endpoint, headers)
    return ExportResult(endpoint, len(chosen), len(spans), time.perf_counter() - t0)
