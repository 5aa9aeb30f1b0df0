"""``agentlog install --mcp``: register ``agentlog mcp`` with each agent, in its own format.

| agent | file (user scope) | entry |
|---|---|---|
| Claude Code | ``$CLAUDE_CONFIG_DIR/.claude.json``, else ``~/.claude.json`` | ``mcpServers.agentlog: {type: stdio, command, args, env}`` |
| Codex CLI | ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml`` | ``[mcp_servers.agentlog] command, args, env`` |
| Cursor | ``~/.cursor/mcp.json`` (its home variable honoured) | ``mcpServers.agentlog: {command, args, env}`` |
| Gemini CLI | ``~/.gemini/settings.json`` (its home variable honoured) | ``mcpServers.agentlog: {command, args, env}`` |

The command is this interpreter running ``-m agentlog mcp`` (what the hooks
run too, so a virtualenv install works without PATH), with ``AGENTLOG_HOME``
when it is set. Every other key of the file is kept as it was (JSON through the
installer's style-preserving editor, TOML through tomlkit), a backup of the
old file is written first, and registering again changes nothing.
``uninstall --mcp`` removes exactly our entry.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

from agentlog.install.config_edit import ConfigResult, apply_edit
from agentlog.install.errors import InstallError
from agentlog.install.jsonedit import parse_config, serialise

SERVER_NAME = "agentlog"


#: what registering did, per agent (registered, unchanged, removed, absent, skipped, failed)
McpResult = ConfigResult


def server_entry(environ: Mapping[str, str]) -> dict[str, Any]:
    """How an agent starts ``agentlog mcp``."""
    entry: dict[str, Any] = {"command": sys.executable, "args": ["-m", "agentlog", "mcp"]}
    if environ.get("AGENTLOG_HOME"):
        entry["env"] = {"AGENTLOG_HOME": os.path.abspath(environ["AGENTLOG_HOME"])}
    return entry


def config_file(agent: str, home: Path, environ: Mapping[str, str]) -> Path:
    if agent == "claude-code":
        base = environ.get("CLAUDE_CONFIG_DIR")
        return Path(base) / ".claude.json" if base else home / ".claude.json"
    from agentlog.install.agents import get_agent

    if agent == "codex":
        return get_agent(agent).agent_home(home, environ) / "config.toml"
    if agent == "cursor":
        return get_agent(agent).agent_home(home, environ) / "mcp.json"
    if agent == "gemini-cli":
        return get_agent(agent).agent_home(home, environ) / "settings.json"
    raise InstallError(f"unknown agent {agent!r}")


def _edit_json(raw: bytes | None, path: Path, entry: dict[str, Any] | None, agent: str) -> bytes | None:
    doc = parse_config(raw, path)
    servers = doc.data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError("mcpServers is not an object; left untouched", path)
    servers = dict(servers or {})
    if entry is None:
        if SERVER_NAME not in servers:
            return raw
        del servers[SERVER_NAME]
    else:
        want = {"type": "stdio", **entry} if agent == "claude-code" else dict(entry)
        if servers.get(SERVER_NAME) == want:
            return raw
        servers[SERVER_NAME] = want
    data = dict(doc.data)
    if servers or "mcpServers" in doc.data:
        data["mcpServers"] = servers
    return serialise(data, doc.style)


def _edit_toml(raw: bytes | None, path: Path, entry: dict[str, Any] | None) -> bytes | None:
    import tomlkit

    try:
        doc = tomlkit.parse((raw or b"").decode("utf-8"))
    except (UnicodeDecodeError, tomlkit.exceptions.ParseError) as e:
        raise InstallError(f"not valid TOML ({e}); left untouched", path) from None
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError("mcp_servers is not a table; left untouched", path)
    current = servers.get(SERVER_NAME) if servers is not None else None
    if entry is None:
        if current is None:
            return raw
        del servers[SERVER_NAME]  # type: ignore[union-attr]
    else:
        if current is not None and dict(current) == entry:
            return raw
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        table = tomlkit.table()
        for k, v in entry.items():
            table[k] = v
        servers[SERVER_NAME] = table
    return tomlkit.dumps(doc).encode("utf-8")


def register(agents: list[str], *, home: Path | None = None, environ: Mapping[str, str] | None = None,
             dry_run: bool = False, remove: bool = False) -> list[McpResult]:
    """Register (or with ``remove`` unregister) the MCP server with each of ``agents``."""
    from agentlog.install.agents import default_home, detect, get_agent

    env = os.environ if environ is None else environ
    home_dir = default_home(home, env)
    entry = None if remove else server_entry(env)
    out: list[McpResult] = []
    for agent in agents:
        path = config_file(agent, home_dir, env)
        if not remove and not detect(get_agent(agent), home_dir, env).detected:
            out.append(McpResult(agent, str(path), "skipped", "not detected"))
            continue

        def edit(raw: bytes | None, path: Path = path, agent: str = agent) -> bytes | None:
            return _edit_toml(raw, path, entry) if path.suffix == ".toml" else _edit_json(raw, path, entry, agent)

        out.append(apply_edit(agent, path, edit, dry_run=dry_run, remove=remove, changed="registered"))
    return out


__all__ = ["McpResult", "SERVER_NAME", "config_file", "register", "server_entry"]
