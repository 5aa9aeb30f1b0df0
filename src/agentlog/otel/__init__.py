"""OpenTelemetry in and out (docs/otel.md).

In: an OTLP/HTTP receiver (``server``) that turns every log record, metric data
point and span the agents send into a canonical ``telemetry`` event
(``records``) and appends it to the session's log (``receiver``). Out: each
recorded session as a trace of GenAI spans (``spans``), sent with the
OpenTelemetry SDK's OTLP exporter (``export``).

The wire format is the official ``opentelemetry-proto`` messages, parsed by
protobuf (binary, or JSON through ``google.protobuf.json_format``); nothing
here reads OTLP by hand. The packages come with the ``otel`` extra.
"""

from __future__ import annotations

from agentlog.core import AgentlogError


class OtelError(AgentlogError):
    """An OpenTelemetry receive or export failed (a message for the user)."""


class OtelMissing(OtelError):
    """The ``otel`` extra is not installed."""


def require() -> None:
    """Raise :class:`OtelMissing` unless the OpenTelemetry packages import."""
    try:
        import google.protobuf  # noqa: F401
        import opentelemetry.proto.collector.logs.v1.logs_service_pb2  # noqa: F401
    except ImportError:
        raise OtelMissing("OpenTelemetry support needs the otel extra: pip install 'agentlog[otel]'") from None
