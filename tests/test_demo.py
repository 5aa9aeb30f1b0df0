"""`agentlog demo`: real payloads through the real hook, then verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import demo
from agentlog.cli import cli
from agentlog.fixtures import claude_hook_fixtures


@pytest.mark.slow
def test_demo_replays_every_fixture_payload(tmp_path: Path) -> None:
    if not claude_hook_fixtures():
        pytest.fail("shared fixtures not found (set AGENTLOG_SHARED)")
    home = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["payloads"] == 518
    assert result["hook_failures"] == 0 and result["stderr_lines"] == 0
    assert sum(s["frames"] for s in result["sessions"]) == 518
    assert all(s["verify"] == "intact" for s in result["sessions"])
    kinds: dict[str, int] = {}
    for s in result["sessions"]:
        for k, v in s["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
    assert kinds.get("unknown", 0) == 0
    assert kinds["tool_call_failed"] == 10
    # the store holds every event, and DuckDB reads the tool calls back from it
    assert result["store_events"] == 518
    tools = {t["tool"]: t for t in result["store_tools"]}
    assert sum(t["failed"] for t in tools.values()) == 10
    assert sum(t["ok"] for t in tools.values()) == kinds["tool_call_finished"]
    assert tools["Bash"]["largest_content"] > 0


def test_demo_falls_back_to_the_shipped_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    result = demo.run_demo(str(tmp_path / "d"))
    assert "synthetic" in result.source
    (s,) = result.sessions
    assert s.frames == result.payloads == 16
    assert s.verify == "intact"
    assert s.redactions >= 1  # the AWS key in the prompt
    assert s.failures == 1
    assert result.store_events == 16
    # redacted before anything was written: not in the logs, not in the store
    files = [p for p in (tmp_path / "d").rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    assert b"AKIAIOSFODNN7EXAMPLE" not in b"".join(p.read_bytes() for p in files)


def test_demo_refuses_a_directory_it_did_not_create(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    r = CliRunner().invoke(cli, ["demo", "--home", str(tmp_path)])
    assert r.exit_code == 1
    assert "not created by" in r.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_demo_reruns_into_its_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    demo.run_demo(str(tmp_path / "d"))
    again = demo.run_demo(str(tmp_path / "d"))
    assert again.sessions[0].frames == 16  # wiped and recorded afresh, not appended


def test_a_local_clone_finds_the_fixtures_beside_its_origin(tmp_path: Path) -> None:
    from agentlog.fixtures import _local_origins

    origin = tmp_path / "work" / "main"
    (origin / ".git").mkdir(parents=True)
    clone = tmp_path / "ci" / "clone"
    module = clone / "src" / "agentlog" / "fixtures.py"
    module.parent.mkdir(parents=True)
    (clone / ".git").mkdir()
    (clone / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {origin}\n')
    assert _local_origins(module)[0] == tmp_path / "work"
    (clone / ".git" / "config").write_text('[remote "origin"]\n\turl = https://example.invalid/x.git\n')
    assert _local_origins(module) == []
