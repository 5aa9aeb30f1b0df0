"""OTLP export requests (the official protobuf messages) → canonical ``telemetry`` events.

One event per log record, per metric data point and per span. The event says
which agent sent it (``provider``, from the resource's ``service.name`` or the
event name's prefix), the agent's own session id (``session.id``, Codex's
``conversation.id``), and in ``attrs`` the content-free facts the join and the
usage view read: the record's name (``otel_event``: ``api_request``,
``tool_result`` …), the exact join keys the agent sent (``prompt_id``,
``tool_use_id``, ``request_id``), model, token counts normalised as the
transcript importers normalise them (``input_tokens`` = input *not* read from a
cache), cost, decision, status. Texts the agent chose to send (a prompt, tool
parameters, an error message) go to ``content``; the whole record, attributes
and resource, to ``raw``. Both are redacted by the receiver before writing.

Attribute names are the agents' documented ones (docs/otel.md lists them and
where they come from); the GenAI semantic-convention names
(``gen_ai.usage.input_tokens`` …) are read as well, for any other sender.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Final, Iterator

from agentlog import __version__

#: ``service.name`` (lower-cased) → provider
SERVICES: Final = {
    "claude-code": "claude_code", "claude_code": "claude_code",
    "codex": "codex", "codex-cli": "codex", "codex_cli": "codex", "codex_exec": "codex", "codex-exec": "codex",
    "codex_cli_rs": "codex", "gemini-cli": "gemini_cli", "gemini_cli": "gemini_cli",
}
#: event-name prefix → provider (for a sender that leaves ``service.name`` at its default)
PREFIXES: Final = {"claude_code": "claude_code", "codex": "codex", "gemini_cli": "gemini_cli"}
#: the provider of records nobody claims
OTHER: Final = "otel"

SESSION_KEYS: Final = ("session.id", "conversation.id", "session_id", "gen_ai.conversation.id")
PROMPT_KEYS: Final = ("prompt.id", "prompt_id")
TOOL_USE_KEYS: Final = ("tool_use_id", "tool_use.id", "call_id", "gen_ai.tool.call.id", "tool.call.id")
REQUEST_KEYS: Final = ("request_id", "request.id", "gen_ai.response.id")
MODEL_KEYS: Final = ("model", "gen_ai.response.model", "gen_ai.request.model")
TOOL_NAME_KEYS: Final = ("tool_name", "function_name", "gen_ai.tool.name", "tool.name")
INPUT_KEYS: Final = ("input_tokens", "input_token_count", "gen_ai.usage.input_tokens")
OUTPUT_KEYS: Final = ("output_tokens", "output_token_count", "gen_ai.usage.output_tokens")
CACHE_READ_KEYS: Final = ("cache_read_tokens", "cached_token_count", "cached_content_token_count",
                          "gen_ai.usage.cache_read.input_tokens")
CACHE_WRITE_KEYS: Final = ("cache_creation_tokens", "cache_write_token_count",
                           "gen_ai.usage.cache_creation.input_tokens")
#: texts an agent may send, kept as content (never in attrs)
CONTENT_KEYS: Final = ("prompt", "tool_parameters", "tool_input", "function_args", "arguments", "output", "error", "error.message",
                       "bash_command", "full_command", "response_text", "gen_ai.input.messages",
                       "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
#: content-free attributes copied into attrs as they are
PLAIN_KEYS: Final = ("decision", "source", "status_code", "attempt", "speed", "tool_result_size_bytes",
                     "error.type", "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name",
                     "http.response.status_code", "mcp_server_scope", "prompt_length", "reasoning_token_count",
                     "tool_token_count", "total_token_count", "ttft_ms", "event.sequence", "content_length")
#: providers whose input count includes the cached part (OpenAI's and Google's APIs)
INPUT_INCLUDES_CACHED: Final = frozenset({"codex", "gemini_cli"})
MAX_TEXT: Final = 65536


def any_value(v: Any, depth: int = 0) -> Any:
    """An ``AnyValue`` message as a plain Python value (bytes as hex)."""
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x, depth + 1) for x in v.array_value.values] if depth < 8 else None
    if which == "kvlist_value":
        return attributes(v.kvlist_value.values, depth + 1) if depth < 8 else None
    if which == "bytes_value":
        return bytes(v.bytes_value).hex()
    return getattr(v, which)


def attributes(kvs: Any, depth: int = 0) -> dict[str, Any]:
    """Repeated ``KeyValue`` as a dict (a later duplicate key wins)."""
    return {kv.key: any_value(kv.value, depth) for kv in kvs}


def _first(keys: tuple[str, ...], *maps: dict[str, Any]) -> Any:
    for m in maps:
        for k in keys:
            v = m.get(k)
            if v is not None and v != "":
                return v
    return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**62:
        return int(v)
    if isinstance(v, str):
        try:
            return int(float(v))
        except (ValueError, OverflowError):
            return None
    return None


def _float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


def _text(v: Any) -> str:
    s = v if isinstance(v, str) else repr(v)
    return s[:MAX_TEXT]


def provider_of(resource: dict[str, Any], name: str) -> str:
    """The agent that sent a record: its ``service.name``, else its event name's prefix."""
    service = resource.get("service.name")
    if isinstance(service, str) and service.lower() in SERVICES:
        return SERVICES[service.lower()]
    prefix = name.split(".", 1)[0] if "." in name else ""
    return PREFIXES.get(prefix, OTHER)


def short_name(name: str) -> str:
    """``claude_code.api_request`` → ``api_request`` (the agents' prefixes dropped)."""
    for prefix in PREFIXES:
        if name.startswith(prefix + "."):
            return name[len(prefix) + 1:]
    return name


def _event_id(signal: str, digest_of: bytes, at_us: int) -> str:
    """A UUIDv7-shaped id from the record's bytes: a record sent twice (an exporter's
    retry) gets the same id, and ingest keeps one."""
    h = hashlib.blake2b(signal.encode() + b"\x1f" + digest_of, digest_size=10).hexdigest()
    ms = f"{(max(0, at_us) // 1000) & 0xFFFF_FFFF_FFFF:012x}"
    variant = "89ab"[int(h[4], 16) & 3]
    return f"{ms[:8]}-{ms[8:]}-7{h[1:4]}-{variant}{h[5:8]}-{h[8:]}"


def _usage(provider: str, merged: dict[str, Any], attrs: dict[str, Any]) -> None:
    inp, out = _int(_first(INPUT_KEYS, merged)), _int(_first(OUTPUT_KEYS, merged))
    cread, cwrite = _int(_first(CACHE_READ_KEYS, merged)), _int(_first(CACHE_WRITE_KEYS, merged))
    if inp is None and out is None:
        return
    if inp is not None and cread and provider in INPUT_INCLUDES_CACHED:
        inp = max(0, inp - cread)
    attrs.update(input_tokens=inp or 0, output_tokens=out or 0, cache_read_tokens=cread or 0,
                 cache_write_tokens=cwrite or 0)


def _call_facts(record: dict[str, Any], tool: Any, attrs: dict[str, Any]) -> None:
    """What tells one tool call from another where no call id is sent (Gemini CLI's
    ``tool_call``): the call's own start and end (``start_time``/``end_time``, epoch ms) as
    ``call_started_us``/``call_ended_us``, and, when the agent sends the arguments
    (``function_args``, a JSON text), the digest of tool and input its hooks carry
    (``input_key``, the same function as the hook adapter's)."""
    for src, dst in (("start_time", "call_started_us"), ("end_time", "call_ended_us")):
        ms = _int(record.get(src))
        if ms is not None and 0 < ms < 2**43:
            attrs[dst] = ms * 1000
    args = record.get("function_args")
    if tool is None or not isinstance(args, str) or not args:
        return
    import orjson

    from agentlog.capture.adapters.gemini_cli import input_key

    try:
        attrs["input_key"] = input_key(str(tool), orjson.loads(args))
    except orjson.JSONDecodeError:
        return


def event_of(signal: str, name: str, resource: dict[str, Any], scope: str, record: dict[str, Any],
             at_us: int, digest_of: bytes, extra: dict[str, Any] | None = None,
             body: Any = None, received_us: int | None = None) -> dict[str, Any]:
    """The wire-form ``telemetry`` event of one record (``record``: its attributes)."""
    provider = provider_of(resource, name)
    merged = {**resource, **record}
    attrs: dict[str, Any] = {"signal": signal, "otel_event": short_name(name) or "(unnamed)"}
    if extra:
        attrs.update(extra)
    for key, keys in (("prompt_id", PROMPT_KEYS), ("tool_use_id", TOOL_USE_KEYS), ("request_id", REQUEST_KEYS)):
        v = _first(keys, record, resource)
        if v is not None:
            attrs[key] = str(v)
    model = _first(MODEL_KEYS, record, resource)
    if model is not None:
        attrs["model"] = str(model)
    tool = _first(TOOL_NAME_KEYS, record)
    if tool is not None:
        attrs["tool_name"] = str(tool)
    _usage(provider, merged, attrs)
    cost = _float(_first(("cost_usd", "cost"), record))
    if cost is not None:
        attrs["cost_usd"] = cost
    for k in PLAIN_KEYS:
        v = record.get(k)
        if isinstance(v, (str, int, float, bool)):
            attrs[k.replace(".", "_")] = v if not isinstance(v, str) else v[:200]
    _call_facts(record, tool, attrs)
    success = _bool(record.get("success"))
    session = _first(SESSION_KEYS, record, resource)
    version = _first(("app.version", "service.version"), resource, record)
    ev: dict[str, Any] = {
        "event_id": _event_id(signal, digest_of, at_us),
        "schema_version": 1,
        "kind": "telemetry",
        "provider": provider,
        "provider_event_name": name[:200] or "(unnamed)",
        "observed_at": at_us,
        "captured_at": received_us if received_us is not None else time.time_ns() // 1000,
        "capture_mode": "full",
        "agentlog_version": __version__,
    }
    if version is not None:
        ev["provider_version"] = str(version)[:100]
    if session is not None:
        ev["provider_session_id"] = str(session)
    if attrs.get("prompt_id") is not None:
        ev["provider_turn_id"] = attrs["prompt_id"]
    if model is not None:
        ev["agent"] = {"model": str(model)}
    if tool is not None:
        ev["tool"] = {"name": str(tool), "category": "other", **({"call_id": attrs["tool_use_id"]}
                                                                  if "tool_use_id" in attrs else {})}
    status = record.get("status")
    if success is not None or short_name(name) == "api_error":
        ev["outcome"] = {"status": "success" if success else "failure"}
        if short_name(name) == "api_error":
            ev["outcome"]["class"] = "api_error"
    elif isinstance(status, str) and status in ("ok", "error"):
        ev["outcome"] = {"status": "success" if status == "ok" else "failure"}
    duration = _int(_first(("duration_ms", "duration"), record))
    if duration is not None and duration >= 0:
        ev["duration_ms"] = duration
    ev["attrs"] = attrs
    content = {k: _text(record[k]) for k in CONTENT_KEYS if record.get(k) not in (None, "")}
    if isinstance(body, str) and body and body != name:
        content["body"] = _text(body)
    if content:
        ev["content"] = content
    ev["raw"] = {"resource": resource, "scope": scope, "attributes": record,
                 **({"body": body} if body is not None else {})}
    return ev


# -- the three signals ------------------------------------------------------------------------------

def _scope_name(scope: Any) -> str:
    return str(scope.scope.name) if scope.HasField("scope") else ""


def log_events(req: Any, received_us: int) -> Iterator[dict[str, Any]]:
    """Events of an ``ExportLogsServiceRequest``."""
    for rl in req.resource_logs:
        resource = attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            scope = _scope_name(sl)
            for lr in sl.log_records:
                record = attributes(lr.attributes)
                body = any_value(lr.body) if lr.HasField("body") else None
                # the event.name attribute first: Codex fills the record's event_name field with its
                # tracing call site ("event otel/src/events/session_telemetry.rs:837")
                name = (record.get("event.name") or getattr(lr, "event_name", "")
                        or (body if isinstance(body, str) and len(body) < 200 else "") or "log")
                if isinstance(name, str) and "." not in name and isinstance(body, str) and body.endswith("." + name):
                    name = body  # Claude Code: body claude_code.api_request, event.name api_request
                nanos = lr.time_unix_nano or lr.observed_time_unix_nano
                at = nanos // 1000 if nanos else received_us
                extra: dict[str, Any] = {}
                if lr.severity_text:
                    extra["severity"] = lr.severity_text[:40]
                if lr.trace_id:
                    extra["trace_id"] = bytes(lr.trace_id).hex()
                    extra["span_id"] = bytes(lr.span_id).hex()
                yield event_of("logs", str(name), resource, scope, record, at, lr.SerializeToString(deterministic=True)
                               + rl.resource.SerializeToString(deterministic=True), extra, body, received_us)


def _points(metric: Any) -> tuple[str, Any]:
    which = metric.WhichOneof("data")
    if which is None:
        return "none", []
    return which, getattr(metric, which).data_points


def metric_events(req: Any, received_us: int) -> Iterator[dict[str, Any]]:
    """Events of an ``ExportMetricsServiceRequest``: one per data point."""
    for rm in req.resource_metrics:
        resource = attributes(rm.resource.attributes)
        for sm in rm.scope_metrics:
            scope = _scope_name(sm)
            for metric in sm.metrics:
                kind, points = _points(metric)
                for dp in points:
                    record = attributes(dp.attributes)
                    extra: dict[str, Any] = {"metric_type": kind, "unit": metric.unit[:40]}
                    if kind in ("sum", "gauge"):
                        extra["value"] = dp.as_double if dp.WhichOneof("value") == "as_double" else dp.as_int
                    elif kind in ("histogram", "exponential_histogram", "summary"):
                        extra["count"] = dp.count
                        extra["sum"] = dp.sum
                    if kind == "sum":
                        extra["monotonic"] = metric.sum.is_monotonic
                        extra["temporality"] = ("delta" if metric.sum.aggregation_temporality == 1
                                                else "cumulative")
                    nanos = dp.time_unix_nano
                    at = nanos // 1000 if nanos else received_us
                    yield event_of("metrics", metric.name, resource, scope, record, at,
                                   dp.SerializeToString(deterministic=True) + metric.name.encode()
                                   + rm.resource.SerializeToString(deterministic=True), extra, None, received_us)


#: span status codes
_STATUS: Final = {0: "unset", 1: "ok", 2: "error"}


def span_events(req: Any, received_us: int) -> Iterator[dict[str, Any]]:
    """Events of an ``ExportTraceServiceRequest``: one per span."""
    for rs in req.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = _scope_name(ss)
            for span in ss.spans:
                record = attributes(span.attributes)
                status = _STATUS.get(span.status.code, "unset")
                record.setdefault("status", status)
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                if end and start and "duration_ms" not in record:
                    record["duration_ms"] = (end - start) // 1_000_000
                extra: dict[str, Any] = {"trace_id": bytes(span.trace_id).hex(), "span_id": bytes(span.span_id).hex(),
                                         "span_status": status}
                if span.parent_span_id:
                    extra["parent_span_id"] = bytes(span.parent_span_id).hex()
                if span.status.message:
                    record.setdefault("error", span.status.message)
                at = start // 1000 if start else received_us
                yield event_of("traces", span.name, resource, scope, record, at,
                               span.SerializeToString(deterministic=True), extra, None, received_us)
