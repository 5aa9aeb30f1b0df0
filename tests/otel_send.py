"""Send OpenTelemetry to an OTLP/HTTP endpoint with the real opentelemetry-sdk (run as a subprocess).

    python otel_send.py URL ENCODING SESSION PROMPT_ID TOOL_USE_ID [COUNT]

ENCODING is ``protobuf`` (the SDK's own OTLP/HTTP exporters) or ``json`` (the SDK's
records, encoded by the exporter package's own OTLP encoders into the protobuf
messages and written as OTLP/JSON: hex trace and span ids, POSTed with
``Content-Type: application/json``). It sends, as Claude Code does: log records
``claude_code.api_request``, ``claude_code.tool_decision``, ``claude_code.tool_result``
and ``claude_code.api_error`` with ``session.id``, ``prompt.id``, ``tool_use_id`` and
``request_id``; a counter and a histogram; and two spans (a parent and a child).
COUNT repeats the api_request record (default 1). Prints ``sent`` on success.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.request
from typing import Any, Sequence


def _hexify(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else _hexify(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_hexify(v) for v in value]
    return value


def post_json(url: str, message: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    body = json.dumps(_hexify(MessageToDict(message))).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, resp.status


def main(argv: Sequence[str]) -> int:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import Status, StatusCode

    url, encoding, session, prompt_id, tool_use_id = argv[:5]
    count = int(argv[5]) if len(argv) > 5 else 1
    resource = Resource.create({"service.name": "claude-code", "service.version": "2.1.332",
                                "session.id": session})
    if encoding == "protobuf":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        log_exp: Any = OTLPLogExporter(endpoint=url + "/v1/logs")
        metric_exp: Any = OTLPMetricExporter(endpoint=url + "/v1/metrics")
        span_exp: Any = OTLPSpanExporter(endpoint=url + "/v1/traces")
    else:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        class JsonLogs(LogRecordExporter):
            def export(self, batch: Any) -> Any:
                post_json(url + "/v1/logs", encode_logs(batch))
                return LogRecordExportResult.SUCCESS

            def force_flush(self, timeout_millis: int = 30_000) -> bool:
                return True

            def shutdown(self) -> None:
                pass

        class JsonMetrics(MetricExporter):
            def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kw: Any) -> Any:
                post_json(url + "/v1/metrics", encode_metrics(metrics_data))
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kw: Any) -> None:
                pass

        class JsonSpans(SpanExporter):
            def export(self, spans: Any) -> Any:
                post_json(url + "/v1/traces", encode_spans(spans))
                return SpanExportResult.SUCCESS

        log_exp, metric_exp, span_exp = JsonLogs(), JsonMetrics(), JsonSpans()

    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(log_exp))
    logger = logs.get_logger("com.anthropic.claude_code.events")
    common = {"session.id": session, "prompt.id": prompt_id, "event.timestamp": "2026-12-07T12:00:00Z"}
    for i in range(count):
        logger.emit(body="claude_code.api_request", attributes={
            **common, "event.name": "api_request", "model": "claude-sonnet-4-5", "input_tokens": 100 + i,
            "output_tokens": 20, "cache_read_tokens": 1000, "cache_creation_tokens": 50, "cost_usd": 0.0123,
            "duration_ms": 1500, "request_id": f"req_{i:04d}"})
    logger.emit(body="claude_code.tool_decision", attributes={
        **common, "event.name": "tool_decision", "tool_name": "Bash", "decision": "accept", "source": "user_temporary",
        "tool_use_id": tool_use_id})
    logger.emit(body="claude_code.tool_result", attributes={
        **common, "event.name": "tool_result", "tool_name": "Bash", "success": "false", "duration_ms": 40,
        "tool_use_id": tool_use_id, "error": "Exit code 3 GITHUB_TOKEN=ghp_" + "a" * 36})
    logger.emit(body="claude_code.api_error", attributes={
        **common, "event.name": "api_error", "model": "claude-sonnet-4-5", "error": "overloaded",
        "status_code": "529", "attempt": 1, "duration_ms": 300})
    logs.shutdown()

    reader = PeriodicExportingMetricReader(metric_exp, export_interval_millis=60_000)
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meters.get_meter("com.anthropic.claude_code")
    meter.create_counter("claude_code.token.usage", unit="tokens").add(120, {"session.id": session, "type": "input",
                                                                             "model": "claude-sonnet-4-5"})
    meter.create_histogram("claude_code.tool.duration", unit="ms").record(40.0, {"session.id": session})
    meters.shutdown()

    traces = TracerProvider(resource=resource)
    traces.add_span_processor(SimpleSpanProcessor(span_exp))
    tracer = traces.get_tracer("com.anthropic.claude_code")
    with tracer.start_as_current_span("claude_code.interaction", attributes={"session.id": session,
                                                                              "prompt.id": prompt_id}):
        with tracer.start_as_current_span("claude_code.tool", attributes={
                "session.id": session, "tool_name": "Bash", "tool_use_id": tool_use_id}) as child:
            time.sleep(0.001)
            child.set_status(Status(StatusCode.ERROR, "exit 3"))
    traces.shutdown()
    print("sent")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
