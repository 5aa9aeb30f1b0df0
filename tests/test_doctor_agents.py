"""doctor on the real agents' facts: tested releases, payload keys agentlog does not read,
Codex's hook trust records (the real binary's check is in tests/test_real_agents.py)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from agentlog.install import drift, versions
from agentlog.install.codex_trust import our_trust_keys, trust_our_hooks, untrusted
from tests.conftest import run_hook


def test_tested_range_warns_outside_only() -> None:
    assert versions.range_note("codex", "0.171.0") is None
    assert versions.range_note("codex", "0.150.3") is None
    older = versions.range_note("codex", "0.99.0")
    newer = versions.range_note("gemini-cli", "0.70.1")
    assert older is not None and "older" in older and "0.142.2–0.171.0" in older
    assert newer is not None and "newer" in newer
    assert versions.range_note("codex", None) is None and versions.range_note("cursor", "1.0.0") is None


def test_installed_version_from_the_package_beside_the_launcher(tmp_path: Path) -> None:
    pkg = tmp_path / "lib" / "node_modules" / "@openai" / "codex"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "@openai/codex", "version": "0.171.0"}))
    exe = pkg / "bin" / "codex.js"
    exe.write_text("#!/bin/sh\nexit 9\n")  # never run: the package says it
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").symlink_to(exe)
    assert versions.installed_version("codex", ("codex",), {"PATH": str(bindir)}) == "0.171.0"
    # no package.json: `--version` is asked
    other = tmp_path / "other"
    other.mkdir()
    (other / "gemini").write_text("#!/bin/sh\necho 0.61.0\n")
    (other / "gemini").chmod(0o755)
    assert versions.installed_version("gemini-cli", ("gemini",), {"PATH": str(other)}) == "0.61.0"
    assert versions.installed_version("gemini-cli", ("gemini",), {"PATH": str(tmp_path / "none")}) is None


def test_unknown_payload_keys_are_reported_per_event(agentlog_home: Path) -> None:
    base = {"session_id": "s-drift", "transcript_path": "/t", "cwd": str(agentlog_home)}
    run_hook(json.dumps({**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t1",
                         "tool_input": {"command": "ls"}, "effort": {"level": "high"}}).encode())
    run_hook(json.dumps({**base, "hook_event_name": "Stop", "stop_hook_active": False,
                         "session_crons": [], "prompt_id": "p"}).encode())
    found = {(f.event, f.key) for f in drift.unknown_fields(str(agentlog_home), "claude_code")}
    assert found == {("PreToolUse", "effort"), ("Stop", "session_crons")}


def _hooks_file(home: Path) -> tuple[Path, dict[str, object]]:
    from agentlog.capture.command import hook_command

    cmd = hook_command("codex")
    data = {"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "/usr/bin/other-tool"}]},
                 {"hooks": [{"type": "command", "command": cmd, "timeout": 5}]}],
        "PreToolUse": [{"hooks": [{"type": "command", "command": cmd, "timeout": 5}]}],
    }}
    path = home / ".codex" / "hooks.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path, data


def test_codex_trust_records_only_for_our_hooks(tmp_path: Path) -> None:
    path, data = _hooks_file(tmp_path)
    codex_home = path.parent
    (codex_home / "config.toml").write_text('model = "gpt-5.5"\n\n[projects."/w"]\ntrust_level = "trusted"\n')
    os.chmod(codex_home / "config.toml", 0o640)
    keys = our_trust_keys(path, data)  # type: ignore[arg-type]
    assert [k.split(":")[-3:] for k, _ in keys] == [["stop", "1", "0"], ["pre_tool_use", "0", "0"]]
    assert untrusted(path, data, codex_home) == (2, 2)  # type: ignore[arg-type]
    assert trust_our_hooks(path, data, codex_home) == 2  # type: ignore[arg-type]
    assert untrusted(path, data, codex_home) == (0, 2)  # type: ignore[arg-type]
    assert trust_our_hooks(path, data, codex_home) == 0  # type: ignore[arg-type]
    conf = tomllib.loads((codex_home / "config.toml").read_text())
    assert conf["model"] == "gpt-5.5" and conf["projects"]["/w"] == {"trust_level": "trusted"}
    assert len(conf["hooks"]["state"]) == 2  # the other tool's hook is not trusted on its behalf
    assert stat.S_IMODE(os.stat(codex_home / "config.toml").st_mode) == 0o640
    assert list(codex_home.glob("config.toml.agentlog-bak-*"))


def test_codex_trust_refuses_a_broken_config(tmp_path: Path) -> None:
    from agentlog.install.errors import InstallError

    path, data = _hooks_file(tmp_path)
    (path.parent / "config.toml").write_text("model = [unclosed\n")
    with pytest.raises(InstallError, match="not valid TOML"):
        trust_our_hooks(path, data, path.parent)  # type: ignore[arg-type]
