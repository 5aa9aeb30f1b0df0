"""``agentlog install --otel``: point each agent's OpenTelemetry at ``agentlog otel serve``.

| agent | file (user scope) | what is set |
|---|---|---|
| Claude Code | ``$CLAUDE_CONFIG_DIR/settings.json``, else ``~/.claude/settings.json`` | ``env``: ``CLAUDE_CODE_ENABLE_TELEMETRY=1``, ``OTEL_LOGS_EXPORTER``/``OTEL_METRICS_EXPORTER=otlp``, ``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` |
| Codex CLI | ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml`` | ``[otel]``: ``exporter`` and ``trace_exporter`` = ``otlp-http`` (binary) to ``/v1/logs`` and ``/v1/traces``, ``log_user_prompt = false`` |
| Gemini CLI | ``~/.gemini/settings.json`` | ``telemetry``: ``enabled``, ``target = "local"``, ``otlpEndpoint``, ``otlpProtocol = "http"``, ``logPrompts = false`` |

Cursor sends no OpenTelemetry and is skipped. A setting the user already has
with another value is not overwritten: that agent fails with the reason, the
file untouched. Every other key is kept (JSON through the installer's
style-preserving editor, TOML through tomlkit), a backup is written first,
and installing again changes nothing. ``uninstall --otel`` removes exactly
the settings whose values are still ours.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from agentlog.install.config_edit import ConfigResult, apply_edit
from agentlog.install.errors import InstallError
from agentlog.install.files import read_bytes
from agentlog.install.jsonedit import parse_config, serialise

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
AGENTS = ("claude-code", "codex", "gemini-cli")


#: what configuring did, per agent (configured, unchanged, removed, absent, skipped, failed)
OtelResult = ConfigResult


def claude_env(endpoint: str) -> dict[str, str]:
    return {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}


def codex_otel(endpoint: str) -> dict[str, Any]:
    return {"log_user_prompt": False,
            "exporter": {"otlp-http": {"endpoint": endpoint + "/v1/logs", "protocol": "binary"}},
            "trace_exporter": {"otlp-http": {"endpoint": endpoint + "/v1/traces", "protocol": "binary"}}}


def gemini_telemetry(endpoint: str) -> dict[str, Any]:
    return {"enabled": True, "target": "local", "otlpEndpoint": endpoint, "otlpProtocol": "http", "logPrompts": False}


def config_file(agent: str, home: Path, environ: Mapping[str, str]) -> Path:
    from agentlog.install.agents import get_agent

    name = {"claude-code": "settings.json", "codex": "config.toml", "gemini-cli": "settings.json"}.get(agent)
    if name is None:
        raise InstallError(f"{agent} sends no OpenTelemetry")
    return get_agent(agent).agent_home(home, environ) / name


def _edit_claude(raw: bytes | None, path: Path, endpoint: str, remove: bool) -> bytes | None:
    doc = parse_config(raw, path)
    env = doc.data.get("env")
    if env is not None and not isinstance(env, dict):
        raise InstallError("env is not an object; left untouched", path)
    env = dict(env or {})
    ours = claude_env(endpoint)
    if remove:
        kept = {k: v for k, v in env.items() if ours.get(k) != v}
        if kept == env:
            return raw
        env = kept
    else:
        clash = [f"{k}={env[k]!r}" for k in ours if k in env and env[k] != ours[k]]
        if clash:
            raise InstallError("env already sets " + ", ".join(clash) + "; left untouched", path)
        if all(env.get(k) == v for k, v in ours.items()):
            return raw
        env.update(ours)
    data = dict(doc.data)
    if env:
        data["env"] = env
    else:
        data.pop("env", None)
    return serialise(data, doc.style)


def _edit_gemini(raw: bytes | None, path: Path, endpoint: str, remove: bool) -> bytes | None:
    doc = parse_config(raw, path)
    current = doc.data.get("telemetry")
    ours = gemini_telemetry(endpoint)
    data = dict(doc.data)
    if remove:
        if current != ours:
            return raw
        del data["telemetry"]
        return serialise(data, doc.style)
    if current == ours:
        return raw
    if current is not None and current != {}:
        raise InstallError(f"telemetry is already set ({current!r}); left untouched", path)
    data["telemetry"] = ours
    return serialise(data, doc.style)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value.unwrap() if hasattr(value, "unwrap") else value


def _edit_codex(raw: bytes | None, path: Path, endpoint: str, remove: bool) -> bytes | None:
    import tomlkit

    try:
        doc = tomlkit.parse((raw or b"").decode("utf-8"))
    except (UnicodeDecodeError, tomlkit.exceptions.ParseError) as e:
        raise InstallError(f"not valid TOML ({e}); left untouched", path) from None
    current = doc.get("otel")
    ours = codex_otel(endpoint)
    if current is not None and not isinstance(current, dict):
        raise InstallError("otel is not a table; left untouched", path)
    if remove:
        if current is None or _plain(current) != ours:
            return raw
        del doc["otel"]
        text = tomlkit.dumps(doc)
        return ((text.rstrip("\n") + "\n") if text.strip() else "").encode("utf-8")  # the blank line it left
    if current is not None and _plain(current) == ours:
        return raw
    if current:
        raise InstallError("[otel] is already configured; left untouched", path)
    table = tomlkit.table()
    table["log_user_prompt"] = False
    for key in ("exporter", "trace_exporter"):
        inner = tomlkit.inline_table()
        inner.update(ours[key]["otlp-http"])
        outer = tomlkit.inline_table()
        outer["otlp-http"] = inner
        table[key] = outer
    doc["otel"] = table
    return tomlkit.dumps(doc).encode("utf-8")


EDITS: dict[str, Callable[[bytes | None, Path, str, bool], bytes | None]] = {
    "claude-code": _edit_claude, "codex": _edit_codex, "gemini-cli": _edit_gemini,
}


def configure(agents: list[str], *, endpoint: str = DEFAULT_ENDPOINT, home: Path | None = None,
              environ: Mapping[str, str] | None = None, dry_run: bool = False,
              remove: bool = False) -> list[OtelResult]:
    """Point (or with ``remove`` stop pointing) each of ``agents``' telemetry at ``endpoint``."""
    from agentlog.install.agents import default_home, detect, get_agent

    env = os.environ if environ is None else environ
    home_dir = default_home(home, env)
    out: list[OtelResult] = []
    for agent in agents:
        if agent not in EDITS:
            out.append(ConfigResult(agent, "", "skipped", "it sends no OpenTelemetry"))
            continue
        path = config_file(agent, home_dir, env)
        if not remove and not detect(get_agent(agent), home_dir, env).detected:
            out.append(ConfigResult(agent, str(path), "skipped", "not detected"))
            continue

        def edit(raw: bytes | None, path: Path = path, agent: str = agent) -> bytes | None:
            return EDITS[agent](raw, path, endpoint.rstrip("/"), remove)

        out.append(apply_edit(agent, path, edit, dry_run=dry_run, remove=remove, changed="configured"))
    return out


def configured(agent: str, *, endpoint: str = DEFAULT_ENDPOINT, home: Path | None = None,
               environ: Mapping[str, str] | None = None) -> bool:
    """Whether the agent's config points its telemetry at ``endpoint`` (ours)."""
    from agentlog.install.agents import default_home

    if agent not in EDITS:
        return False
    env = os.environ if environ is None else environ
    path = config_file(agent, default_home(home, env), env)
    raw = read_bytes(path)
    if raw is None:
        return False
    try:
        return EDITS[agent](raw, path, endpoint, False) == raw
    except InstallError:
        return False


def arrivals(root: str) -> dict[str, Any]:
    """What ``agentlog otel serve`` last noted arriving, per provider ({} when it never ran)."""
    import json

    from agentlog.core.paths import otel_receipts

    try:
        with open(otel_receipts(root), "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    agents = data.get("agents") if isinstance(data, dict) else None
    return agents if isinstance(agents, dict) else {}


__all__ = ["AGENTS", "DEFAULT_ENDPOINT", "OtelResult", "arrivals", "configure", "configured"]
