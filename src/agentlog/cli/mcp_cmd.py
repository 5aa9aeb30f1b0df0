"""``agentlog mcp``: the MCP server agents use."""

from __future__ import annotations

import click

from agentlog.core.paths import data_root


@click.command(name="mcp")
@click.option("--http", is_flag=True, help="Serve streamable HTTP on loopback instead of stdio.")
@click.option("--port", type=click.IntRange(1, 65535), default=8766, show_default=True, help="Port for --http.")
def mcp_cmd(http: bool, port: int) -> None:
    """Serve agentlog's tools over MCP (stdio; --http for streamable HTTP on 127.0.0.1).

    Read-only tools: status, timeline, failures, why, trace, state_at, evidence,
    search, query, schema, handoff_brief, memory_search, memory_get; one write,
    memory_propose, which only opens a proposal a person approves.
    Register it with your agents: `agentlog install --mcp`.
    """
    from agentlog.mcp.server import serve

    serve(data_root(), http=http, host="127.0.0.1", port=port)
