"""`agentlog install --otel` / `uninstall --otel`: each agent's own telemetry settings, written
structurally and reversibly; and `agentlog doctor` saying whether telemetry arrives."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner

from otel_support import Receiver, logs_request, post
from test_install import Sandbox, sb, snapshot  # noqa: F401 - the fixture

AGENTS = ["claude-code", "codex", "gemini-cli"]


def _cli(*args: str, env: dict[str, str]) -> tuple[int, str]:
    from agentlog.cli import cli

    r = CliRunner().invoke(cli, list(args), env=env)
    return r.exit_code, r.stdout


def test_install_otel_sets_each_agents_telemetry_and_uninstall_takes_it_out(sb: Sandbox) -> None:  # noqa: F811
    for d in (".claude", ".codex", ".cursor", ".gemini"):
        (sb.home / d).mkdir()
    claude = sb.home / ".claude" / "settings.json"
    claude.write_text(json.dumps({"model": "opus", "env": {"FOO": "1"}}, indent=2) + "\n")
    codex = sb.home / ".codex" / "config.toml"
    codex.write_text('model = "o3"  # mine\n')
    gemini = sb.home / ".gemini" / "settings.json"
    gemini.write_text('{\n    "theme": "dark"\n}\n')
    before = snapshot(sb.home)

    code, out = _cli("install", "--otel", "--yes", "--json", env=sb.env)
    assert code == 0, out
    assert {r["agent"]: r["outcome"] for r in json.loads(out)} == {
        "claude-code": "configured", "codex": "configured", "cursor": "skipped", "gemini-cli": "configured"}
    c = json.loads(claude.read_text())
    assert c["model"] == "opus" and c["env"]["FOO"] == "1"
    assert c["env"]["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1"
    assert c["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
    assert c["env"]["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" and c["env"]["OTEL_LOGS_EXPORTER"] == "otlp"
    t = codex.read_text()
    otel = tomllib.loads(t)["otel"]
    assert "# mine" in t and otel["exporter"]["otlp-http"]["endpoint"] == "http://127.0.0.1:4318/v1/logs"
    assert otel["trace_exporter"]["otlp-http"]["protocol"] == "binary" and otel["log_user_prompt"] is False
    g = json.loads(gemini.read_text())
    assert g["theme"] == "dark" and g["telemetry"]["otlpEndpoint"] == "http://127.0.0.1:4318"
    assert g["telemetry"]["enabled"] is True and g["telemetry"]["otlpProtocol"] == "http"

    code, out = _cli("install", "--otel", "--yes", "--json", env=sb.env)
    assert code == 0 and {r["outcome"] for r in json.loads(out)} == {"unchanged", "skipped"}

    code, out = _cli("uninstall", "--otel", "--json", env=sb.env)
    assert code == 0, out
    assert {r["agent"]: r["outcome"] for r in json.loads(out)}["codex"] == "removed"
    after = {k: v for k, v in snapshot(sb.home).items() if "agentlog-bak" not in k}
    assert after == before  # every file as it was (the JSON files' own layout included)


def test_a_setting_of_the_users_own_is_not_overwritten(sb: Sandbox) -> None:  # noqa: F811
    (sb.home / ".claude").mkdir()
    claude = sb.home / ".claude" / "settings.json"
    claude.write_text(json.dumps({"env": {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318"}}))
    raw = claude.read_bytes()
    code, out = _cli("install", "--otel", "claude-code", "--yes", "--json", env=sb.env)
    assert code == 1
    (r,) = json.loads(out)
    assert r["outcome"] == "failed" and "OTEL_EXPORTER_OTLP_ENDPOINT" in r["reason"]
    assert claude.read_bytes() == raw


def test_doctor_shows_telemetry_configured_and_arriving(sb: Sandbox) -> None:  # noqa: F811
    (sb.home / ".claude").mkdir()
    code, _ = _cli("install", "--otel", "claude-code", "--yes", env=sb.env)
    assert code == 0
    code, out = _cli("doctor", "--json", env=sb.env)
    tel = {d["agent"]: d["telemetry"] for d in json.loads(out)}
    assert tel["claude-code"]["configured"] is True and tel["claude-code"]["last_at"] is None
    assert tel["codex"]["configured"] is False and tel["cursor"]["supported"] is False
    receiver = Receiver(sb.data)
    try:
        assert post(receiver.url + "/v1/logs", logs_request([{"tool_name": "Read"}, {"tool_name": "Bash"}]))[0] == 200
    finally:
        receiver.stop()  # writes its receipts as it stops
    code, out = _cli("doctor", "--json", env=sb.env)
    tel = {d["agent"]: d["telemetry"] for d in json.loads(out)}
    assert tel["claude-code"]["records"] == 2 and tel["claude-code"]["last_at"] is not None
    assert tel["codex"]["records"] == 0
    Path(sb.data).exists()
