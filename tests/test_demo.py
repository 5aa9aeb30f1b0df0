"""`agentlog demo`: real payloads through the real hook, then verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.operations import demo
from agentlog.cli import cli
from agentlog.operations.fixtures import claude_hook_fixtures, missing


@pytest.mark.slow
def test_demo_replays_every_fixture_payload(tmp_path: Path) -> None:
    if not claude_hook_fixtures():
        pytest.fail(missing())
    home = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    # the 518 real payloads, then the synthetic session shipped with agentlog (20 payloads, 3 failed calls)
    shipped = len(demo.shipped_payloads())
    assert shipped == 20
    assert result["payloads"] == 518 + shipped
    assert result["hook_failures"] == 0 and result["stderr_lines"] == 0
    assert sum(s["frames"] for s in result["sessions"]) == 518 + shipped
    assert all(s["verify"] == "intact" for s in result["sessions"])
    kinds: dict[str, int] = {}
    for s in result["sessions"]:
        for k, v in s["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
    assert kinds.get("unknown", 0) == 0
    assert kinds["tool_call_failed"] == 10 + 3
    # the store holds every event, and DuckDB reads the tool calls back from it
    assert result["store_events"] == 518 + shipped
    tools = {t["tool"]: t for t in result["store_tools"]}
    assert sum(t["failed"] for t in tools.values()) == 10 + 3
    assert sum(t["ok"] for t in tools.values()) == kinds["tool_call_finished"]
    assert tools["Bash"]["largest_content"] > 0
    # the timeline covers every session recorded; the shipped session's failing edit is superseded by its retry
    assert len(result["timeline"]) == len(result["sessions"])
    superseded = [f for f in result["failures"] if f["outcome"] == "superseded"]
    assert superseded and all(f["retry"]["outcome"] == "succeeded" for f in superseded)


def test_demo_falls_back_to_the_shipped_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    result = demo.run_demo(str(tmp_path / "d"))
    assert "synthetic" in result.source
    (s,) = result.sessions
    assert s.frames == result.payloads == 20
    assert s.verify == "intact"
    assert s.redactions >= 1  # the AWS key in the prompt
    assert s.failures == 3  # the test run, the failing test alone, the edit whose old_string is not in the file
    assert result.store_events == 20
    # the timeline: one session, one turn, four attempts — the failed test runs, the failing edit
    # superseded by its retry, and the retry that succeeded
    (session,) = result.timeline
    assert session["provider"] == "claude_code" and session["project_name"] == "agentlog-demo-project"
    (turn,) = session["turns"]
    assert "[REDACTED:aws_access_key]" in turn["objective"]
    attempts = turn["attempts"]
    assert [(a["outcome"], a["failure_class"], a["approach"]) for a in attempts] == [
        ("failed", "test_failure", "shell"),
        ("failed", "test_failure", "shell"),
        ("superseded", "string_mismatch", "edit src/parser.py · read"),
        ("succeeded", None, "edit src/parser.py · shell ×2"),
    ]
    assert attempts[2]["superseded_by"] == attempts[3]["attempt_id"]
    first, second, superseded = sorted(result.failures, key=lambda f: f["started_at"])
    assert first["outcome"] == second["outcome"] == "failed" and first["retry"] is None
    assert superseded["attempt_id"] == attempts[2]["attempt_id"]
    assert superseded["retry"]["attempt_id"] == attempts[3]["attempt_id"]
    assert superseded["retry"]["outcome"] == "succeeded"
    # the activity suggests a memory: how to run the tests, with the two failed runs and the one that worked
    (sug,) = result.suggestions
    assert sug["kind"] == "procedure" and sug["title"] == "How to run python -m pytest in agentlog-demo-project"
    assert sug["attributes"]["command"] == "python -m pytest -q"
    assert [(e["note"], e["resolved"]["outcome_status"]) for e in sug["evidence"]] == [
        ("failed", "failure"), ("failed", "failure"), ("worked", "success")]
    from agentlog.memory.proposals import get as get_proposal

    assert get_proposal(result.home, sug["proposal_id"]).status == "open"  # a person approves it, or not
    # redacted before anything was written: not in the logs, not in the store
    files = [p for p in (tmp_path / "d").rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    assert b"AKIAIOSFODNN7EXAMPLE" not in b"".join(p.read_bytes() for p in files)


def test_demo_prints_the_timeline_and_the_superseded_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    monkeypatch.setenv("COLUMNS", "200")
    r = CliRunner().invoke(cli, ["demo", "--home", str(tmp_path / "d"), "--no-serve"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "timeline: sessions → turns → attempts" in out
    lines = out.splitlines()
    session = next(ln for ln in lines if ln.startswith("ses_"))
    assert "claude_code  agentlog-demo-project" in session and "4 attempts, 3 failures" in session
    attempts = [ln.strip() for ln in lines if ln.startswith("    att_")]
    assert len(attempts) == 4
    retry = attempts[3].split()[0]
    assert attempts[0].split()[1:3] == ["failed", "(test_failure:"]
    assert "1 of 5 tests failed: tests/test_parser.py::test_empty)  shell" in attempts[0]
    assert "superseded (string_mismatch)  edit src/parser.py · read  src/parser.py  superseded by " + retry \
        in attempts[2]
    assert attempts[3].split()[1] == "succeeded"
    assert "failed and superseded attempts" in r.output  # a table title: on stderr when piped
    table = [ln for ln in lines if "string_mismatch" in ln and "\t" in ln]  # piped: tab-separated
    assert len(table) == 1 and f"{retry} (succeeded)" in table[0]
    assert "suggested memories" in out and "How to run python -m pytest in agentlog-demo-project  [procedure]" in out
    assert sum("evidence tool_call" in ln for ln in lines) == 3
    assert "AKIAIOSFODNN7EXAMPLE" not in r.output


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
    assert again.sessions[0].frames == 20  # wiped and recorded afresh, not appended
    assert len(again.timeline) == 1
    assert len(again.suggestions) == 1  # the memory went with the rest: suggested afresh


def test_a_local_clone_finds_the_fixtures_beside_its_origin(tmp_path: Path) -> None:
    from agentlog.operations.fixtures import _local_origins

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


def test_demo_records_into_agentlog_home_when_it_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, finding 12: the demo ignored AGENTLOG_HOME and wrote ./agentlog-demo."""
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    home = tmp_path / "from-env"
    monkeypatch.setenv("AGENTLOG_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["demo", "--no-serve", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["home"] == str(home)
    assert (home / "logs").is_dir() and not (tmp_path / "agentlog-demo").exists()
