"""`agentlog demo`: real payloads through the real hook, then verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.operations import demo
from agentlog.cli import cli
from agentlog.operations.fixtures import claude_hook_fixtures, missing


def _synthetic_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay the shipped synthetic session alone (no shared captures, no real-shaped sessions)."""
    monkeypatch.setattr(demo, "claude_hook_fixtures", lambda: [])
    monkeypatch.setattr(demo, "real_shaped_payloads", list)


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


def test_the_shipped_synthetic_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _synthetic_only(monkeypatch)
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
    _synthetic_only(monkeypatch)
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
    _synthetic_only(monkeypatch)
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
    _synthetic_only(monkeypatch)
    home = tmp_path / "from-env"
    monkeypatch.setenv("AGENTLOG_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["demo", "--no-serve", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["home"] == str(home)
    assert (home / "logs").is_dir() and not (tmp_path / "agentlog-demo").exists()


def test_without_the_shared_fixtures_the_demo_tells_the_same_story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, finding 11: an installed package (no shared fixtures) replays the real-shaped sessions it ships:
    several sessions in two projects, failures with their reasons, superseded attempts and suggested memories."""
    empty = tmp_path / "no-shared"
    empty.mkdir()
    monkeypatch.setenv("AGENTLOG_SHARED", str(empty))
    monkeypatch.setenv("COLUMNS", "200")
    r = CliRunner().invoke(cli, ["demo", "--home", str(tmp_path / "d"), "--no-serve", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert "real captures were not found" in result["source"]
    shaped = len(demo.real_shaped_payloads())
    assert shaped == 81 and result["payloads"] == shaped + 20
    assert result["hook_failures"] == 0 and result["stderr_lines"] == 0
    assert len(result["sessions"]) == 5 and all(s["verify"] == "intact" for s in result["sessions"])
    kinds: dict[str, int] = {}
    for s in result["sessions"]:
        for k, v in s["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
    assert kinds.get("unknown", 0) == 0
    for kind in ("subagent_started", "subagent_stopped", "compaction_started", "notification", "permission_requested",
                 "session_ended", "turn_stopped"):
        assert kinds.get(kind, 0) >= 1, kind
    assert {t["tool"] for t in result["store_tools"]} >= {"Bash", "Read", "Edit", "Write", "Grep", "Task"}
    assert sorted(s["project_name"] for s in result["timeline"]) == [
        "agentlog-demo-project", "harbor-web", "harbor-web", "tidewater", "tidewater"]
    # failures with their reasons: a missing runner, pytest and jest verdicts, edits whose text is gone, an interrupt
    why = {(f["project_name"], f["failure_class"], f["failing_call"]["result_summary"] or f["failing_call"]["failure_evidence"])
           for f in result["failures"]}
    assert ("tidewater", "dependency_missing", "exit code 127 (command not found)") in why
    assert ("tidewater", "test_failure", "1 of 12 tests failed: tests/test_cli.py::test_forecast_metric") in why
    assert ("harbor-web", "test_failure", "2 of 6 tests failed: formatDay › prints the weekday in the user's locale, "
            "formatDay › falls back to English for an unknown locale") in why
    assert ("harbor-web", "interrupted", "agent") in why
    superseded = [f for f in result["failures"] if f["outcome"] == "superseded"]
    assert {f["project_name"] for f in superseded} == {"agentlog-demo-project", "tidewater", "harbor-web"}
    assert all(f["retry"]["outcome"] == "succeeded" for f in superseded)
    # memories suggested from the activity: how to run the tests (two projects) and a file whose edits keep failing
    assert sorted((s["kind"], s["title"]) for s in result["suggestions"]) == [
        ("pitfall", "Edits to src/tidewater/units.py fail with string_mismatch"),
        ("procedure", "How to run npm test in harbor-web"),
        ("procedure", "How to run python -m pytest in agentlog-demo-project"),
    ]


def test_the_real_shaped_sessions_are_what_their_script_writes() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "scripts" / "make_demo_sessions.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_real_shaped_sessions_use_the_fields_of_real_claude_code_2_1_payloads() -> None:
    """Every field of every shipped payload is one the real Claude Code 2.1 captures have for that hook;
    SessionEnd and Stop's ``last_assistant_message`` (not captured there) have the fields Claude Code's
    hook reference gives them. Each tool's response has fields the real captures have for that tool
    (a Task that waits for its subagent was captured only from Claude Code 1.0.70; 2.1's are async)."""
    from agentlog.operations.fixtures import payload_stdin

    captures = claude_hook_fixtures()
    if not captures:
        pytest.skip(missing())
    fields: dict[str, set[str]] = {"SessionEnd": {"session_id", "transcript_path", "cwd", "hook_event_name", "reason"}}
    responses: dict[str, set[str]] = {}
    for f in captures:
        for element in json.loads(f.read_text(encoding="utf-8")):
            wrapped = element.get("raw_input")  # the logger's wrapper of PostToolUseFailure (fixtures README)
            p = wrapped if isinstance(wrapped, dict) else json.loads(payload_stdin(element))
            if isinstance(p.get("tool_response"), dict):
                responses.setdefault(p["tool_name"], set()).update(p["tool_response"])
            if f.name.startswith("claude-agentic-framework__"):  # Claude Code 2.1.x
                fields.setdefault(p["hook_event_name"], set()).update(p)
    fields["PreToolUse"] = fields["PostToolUse"] - {"tool_response"}
    fields["Stop"] |= {"last_assistant_message"}
    for key in ("SessionStart", "SubagentStart", "PostToolUseFailure"):
        fields[key] -= {"logged_at"}  # the logger's own
    fields["SessionStart"] |= {"transcript_path", "cwd"}  # one real SessionStart lacks them; the others have them
    seen: set[str] = set()
    for line in demo.real_shaped_payloads():
        p = json.loads(line)
        event = p["hook_event_name"]
        seen.add(event)
        assert set(p) <= fields[event], (event, set(p) - fields[event])
        if "tool_response" in p:
            assert set(p["tool_response"]) <= responses[p["tool_name"]], p["tool_name"]
    assert seen == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                    "PermissionRequest", "Notification", "SubagentStart", "SubagentStop", "PreCompact", "Stop",
                    "SessionEnd"}
