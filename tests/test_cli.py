"""The CLI surface: help everywhere, --json shapes, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agentlog import __version__
from agentlog.cli import cli
from agentlog.log.writer import open_session_log


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((prefix + (name,), cmd))
        if isinstance(cmd, click.Group):
            out += all_commands(cmd, prefix + (name,))
    return out


@pytest.mark.parametrize("path, cmd", all_commands(cli), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_help(path: tuple[str, ...], cmd: click.Command) -> None:
    assert cmd.help and cmd.help.strip(), path
    r = CliRunner().invoke(cli, [*path, "--help"])
    assert r.exit_code == 0
    assert "Usage:" in r.output


def test_version() -> None:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and __version__ in r.output


def test_paths_json(agentlog_home: Path) -> None:
    r = CliRunner().invoke(cli, ["paths", "--json"])
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["data_root"] == str(agentlog_home)
    assert data["logs"] == str(agentlog_home / "logs")


def _log(home: Path, sid: str, n: int = 3) -> str:
    log = open_session_log(str(home), "claude_code", sid)
    for i in range(n):
        log.append([json.dumps({"i": i}).encode()])
    return log.path


def test_verify_ok_and_broken(agentlog_home: Path) -> None:
    good = _log(agentlog_home, "good")
    bad = _log(agentlog_home, "bad")
    r = CliRunner().invoke(cli, ["verify", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ok"] and data["sessions"] == 2 and data["frames"] == 6
    assert "rewrite" in data["caveat"]
    raw = bytearray(Path(bad).read_bytes())
    raw[120] ^= 1
    Path(bad).write_bytes(bytes(raw))
    r = CliRunner().invoke(cli, ["verify", "--json"])
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    (broken,) = [x for x in data["reports"] if x["status"] == "broken"]
    assert broken["path"] == bad
    assert broken["breaks"][0]["line"] == 1 and broken["breaks"][0]["frame"] == 0
    r = CliRunner().invoke(cli, ["verify", "--session", "good"])
    assert r.exit_code == 0
    assert good  # the good log alone is intact


def test_verify_unknown_session_is_a_usage_error() -> None:
    r = CliRunner().invoke(cli, ["verify", "--session", "nope"])
    assert r.exit_code == 2


def test_config_set_and_show(agentlog_home: Path) -> None:
    r = CliRunner().invoke(cli, ["config", "set", "capture_mode", "metadata_only"])
    assert r.exit_code == 0
    r = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert json.loads(r.stdout)["capture_mode"] == "metadata_only"
    r = CliRunner().invoke(cli, ["config", "set", "durability", "sometimes"])
    assert r.exit_code == 2
    assert (agentlog_home / "config.toml").stat().st_mode & 0o777 == 0o600


def test_an_unknown_command_gets_a_did_you_mean() -> None:
    """Issue 27, finding 8."""
    from click.testing import CliRunner

    from agentlog.cli import cli

    r = CliRunner().invoke(cli, ["sesions"])
    assert r.exit_code == 2 and "did you mean sessions?" in r.output
    r = CliRunner().invoke(cli, ["qwertyuiop"])
    assert r.exit_code == 2 and "did you mean" not in r.output


def test_an_id_that_names_nothing_gets_a_did_you_mean(agentlog_home: Path) -> None:
    """Issue 27, finding 8: an id with its last digit wrong (a paste gone wrong) is answered
    with the recorded id it is closest to, by `show` (views) and `why` (the statement
    language) alike; an id close to nothing gets no guess."""
    import os
    import subprocess

    from agentlog.capture.command import hook_argv

    base = {"session_id": "s-typo", "cwd": str(agentlog_home), "tool_name": "Bash", "tool_use_id": "tu-1",
            "tool_input": {"command": "false"}}
    for payload in ({**base, "hook_event_name": "PreToolUse"},
                    {**base, "hook_event_name": "PostToolUseFailure", "error": "Exit code 1"}):
        subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), check=True, timeout=60,
                       env={**os.environ, "AGENTLOG_HOME": str(agentlog_home)})
    runner = CliRunner()
    (session,) = json.loads(runner.invoke(cli, ["sessions", "--all-projects", "--json"]).stdout)
    (attempt,) = json.loads(runner.invoke(cli, ["failures", "--all-projects", "--json"]).stdout)
    sid, aid = session["session_id"], attempt["attempt_id"]
    typo = sid[:-1] + ("0" if sid[-1] != "0" else "1")
    r = runner.invoke(cli, ["show", typo])
    assert r.exit_code == 1 and f"did you mean {sid}?" in r.output, r.output
    typo = aid[:-1] + ("0" if aid[-1] != "0" else "1")
    r = runner.invoke(cli, ["why", typo])
    assert r.exit_code != 0 and f"did you mean {aid}?" in r.output, r.output
    r = runner.invoke(cli, ["show", "ses_ffffffff-ffff-ffff-ffff-ffffffffffff"])
    assert r.exit_code == 1 and "did you mean" not in r.output


@pytest.mark.quick
def test_a_huge_max_rows_is_a_clear_usage_error_and_the_engine_caps_it(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli
    from agentlog.operations.refresh import run_sql

    for cmd in (["sql"], ["query"], ["team", "query", "--from", "file:///nowhere"]):
        out = CliRunner().invoke(cli, [*cmd, "--max-rows", str(10**20), "select 1"])
        assert out.exit_code == 2 and "not in the range" in out.output, (cmd, out.output)
    assert run_sql(str(agentlog_home), "select 1 as n", max_rows=10**20).rows == [(1,)]
