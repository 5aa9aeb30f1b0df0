"""``agentlog otel …``: receive the agents' OpenTelemetry, export sessions as GenAI traces."""

from __future__ import annotations

import os

import click

from agentlog.cli.output import print_json, stderr
from agentlog.core.paths import data_root


@click.group(name="otel")
def otel() -> None:
    """OpenTelemetry in and out: an OTLP/HTTP receiver for the agents' telemetry,
    and every recorded session exported as a trace of GenAI spans (docs/otel.md).

    Example: agentlog otel serve

    Example: agentlog otel export --endpoint http://127.0.0.1:6006 --since -1d
    """


@otel.command(name="serve")
@click.option("--port", type=click.IntRange(0, 65535), default=4318, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one and prints it).")
@click.option("--max-body", type=click.IntRange(1024, 1 << 30), default=16 * 1024 * 1024, show_default=True,
              help="Largest request body accepted, in bytes, after gunzip.")
def serve_cmd(port: int, max_body: int) -> None:
    """Receive OTLP/HTTP (protobuf or JSON, gzip or not) on 127.0.0.1: /v1/logs,
    /v1/metrics, /v1/traces. Each log record, metric point and span becomes a
    `telemetry` event in its session's log (by the agent's session id; records
    without one go to the agent's `otel-telemetry` log), redacted like
    everything else. Runs until interrupted.

    Example: agentlog otel serve --port 4318
    """
    from agentlog.otel import require
    from agentlog.otel.server import make_server

    require()
    parent = os.environ.get("AGENTLOG_OTEL_PARENT", "")
    if parent.isdigit():  # started by the daemon: die with it
        from agentlog.capture.serve import die_with_parent

        if not die_with_parent(int(parent)):
            raise click.ClickException("the daemon that started this receiver is gone")
    server = make_server(data_root(), port=port, max_body=max_body)
    host, bound = str(server.server_address[0]), int(server.server_address[1])
    stderr().print(f"agentlog otel: listening on http://{host}:{bound} (/v1/logs, /v1/metrics, /v1/traces)",
                   markup=False, highlight=False)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.receiver.flush()
        c = server.receiver.counts
        stderr().print(f"agentlog otel: {c.records:,} records from {c.requests:,} requests "
                       f"({c.rejected:,} rejected)", markup=False, highlight=False)


@otel.command(name="export")
@click.option("--endpoint", default="http://127.0.0.1:4318", show_default=True, metavar="URL",
              help="OTLP/HTTP base URL (spans go to URL/v1/traces).")
@click.option("--session", "session", default=None, metavar="ID",
              help="One session (its id, ses_…, or the agent's own session id).")
@click.option("--since", "since", default=None, metavar="WHEN",
              help="Sessions active since then (a date, RFC 3339 time, '-7d' …).")
@click.option("--include-content", is_flag=True,
              help="Also send prompts, commands and tool output (redacted, as recorded).")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="An HTTP header to send (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print what was exported as JSON.")
@click.option("--no-ingest", is_flag=True, help="Do not catch the store up with the logs first.")
def export_cmd(endpoint: str, session: str | None, since: str | None, include_content: bool,
               headers: tuple[str, ...], as_json: bool, no_ingest: bool) -> None:
    """Send sessions to an OTLP/HTTP endpoint as traces: an invoke_agent span per
    session and per turn, a chat span per model request, an execute_tool span per
    tool call, failures as span status. Span and trace ids derive from agentlog's
    stable ids, so exporting twice sends the same spans. Without --session or
    --since, every session is sent.

    Example: agentlog otel export --endpoint http://127.0.0.1:6006 --session ses_0a1b2c
    """
    from agentlog.otel import require
    from agentlog.otel.export import export_sessions
    from agentlog.cli.scope_opts import current_engine, parse_time

    require()
    since_us = parse_time(since, "--since")
    extra: dict[str, str] = {}
    for h in headers:
        k, sep, v = h.partition("=")
        if not sep or not k.strip():
            raise click.BadParameter(f"{h!r} is not K=V", param_hint="--header")
        extra[k.strip()] = v
    with current_engine(no_ingest) as engine:
        res = export_sessions(engine, endpoint, session=session, since_us=since_us,
                              include_content=include_content, headers=extra)
    if as_json:
        print_json(res.to_dict())
        return
    stderr().print(f"exported {res.sessions:,} sessions as {res.spans:,} spans to {res.url} "
                   f"({res.seconds:.2f} s)", markup=False, highlight=False)
