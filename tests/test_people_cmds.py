"""`agentlog timeline`, `failures`, `sessions` and `show` on the reference scenario.

One data root per module: the reference scenario (a Claude session whose
failing edit of src/parser.rs is superseded by a retry, then a Codex session
three minutes later) plus a third session in another project (a failing
shell command, not retried), ingested and projected once. Every command runs
through the real CLI with AGENTLOG_HOME pointing at it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner, Result

from agentlog.cli import cli
from agentlog.projection.ids import derive
from agentlog.operations.refresh import open_current

from scenario import BASE_US, CLAUDE_ROLES, CODEX_ROLES, SECOND, Scenario, build_event, build_reference

OTHER_PROJECT = "notes-project"
OTHER_SESSION = "claude-other-session"
PROMPT = "Build the [red]notes[/red] [/]"


@dataclass
class World:
    sc: Scenario
    other_dir: str
    other_events: dict[str, str]


def _other_project(root: str, workdir: Path) -> tuple[str, dict[str, str]]:
    """A Claude session in a plain directory (no git): a prompt, a failing shell command, a stop."""
    from agentlog.capture import hook

    d = workdir / OTHER_PROJECT
    d.mkdir()
    base = {"session_id": OTHER_SESSION, "transcript_path": f"/home/dev/.claude/{OTHER_SESSION}.jsonl",
            "cwd": str(d)}
    cmd = {"command": "make notes", "description": "Build the notes"}
    payloads = [
        ("start", 1000, {"hook_event_name": "SessionStart", "source": "startup"}),
        ("prompt", 1005, {"hook_event_name": "UserPromptSubmit", "prompt": PROMPT}),
        ("make.start", 1010, {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_o1",
                              "tool_input": cmd}),
        ("make.fail", 1012, {"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": "toolu_o1",
                             "tool_input": cmd, "error": "Exit code 2\nmake: *** No rule to make target",
                             "is_interrupt": False}),
        ("stop", 1020, {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "It failed."}),
    ]
    ids = {}
    for role, t, p in payloads:
        captured = build_event("claude-code", {**base, **p}, BASE_US + t * SECOND, str(d))
        hook.record(captured, root, "relaxed")
        ids[role] = str(captured.event["event_id"])
    return str(d), ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("people-root")
    work = tmp_path_factory.mktemp("people-work")
    sc = build_reference(str(root), str(work))
    other_dir, other = _other_project(str(root), work)
    engine, _ = open_current(str(root))
    engine.close()
    return World(sc, other_dir, other)


@pytest.fixture()
def run(world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """``run(*args)``: the CLI with AGENTLOG_HOME set to the world, from a directory with nothing recorded."""
    monkeypatch.setenv("AGENTLOG_HOME", world.sc.root)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args))

    yield invoke


# Derived ids of the scenario (the projection's derivation, computed here independently of the store).
CLAUDE = derive("session", "claude_code", "claude-ref-session")
CODEX = derive("session", "codex", "codex-ref-session")
OTHER = derive("session", "claude_code", OTHER_SESSION)


def turn(session: str, index: int) -> str:
    return derive("turn", session, str(index))


def attempt(session: str, turn_index: int, index: int = 0) -> str:
    return derive("attempt", session, str(turn_index), str(index))


FAILED = attempt(CLAUDE, 1)
RETRY = attempt(CLAUDE, 2)


def short(prefix: str, ident: str) -> str:
    """An id as the CLI prints it: whole (issue 27, finding 6: never cut)."""
    return f"{prefix}_{ident}"


def js(r: Result) -> Any:
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# -- timeline -------------------------------------------------------------------------


def test_timeline_json_sessions_turns_attempts(run: Any) -> None:
    rows = js(run("timeline", "--project", "parser-project", "--json"))
    assert [s["session_id"] for s in rows] == [f"ses_{CODEX}", f"ses_{CLAUDE}"]  # newest first
    codex, claude = rows
    assert (claude["provider"], claude["project_name"], claude["liveness"], claude["coverage"]) == \
        ("claude_code", "parser-project", "closed", "full")
    assert (claude["started_at"], claude["ended_at"]) == ("2026-11-02T10:00:00Z", "2026-11-02T10:02:50Z")
    assert (claude["turn_count"], claude["tool_call_count"], claude["attempt_count"]) == (4, 6, 4)
    assert [t["objective"] for t in claude["turns"]] == [
        "Fix the parser crash on empty input", "Try again, the old_string has tabs", "Update the README", "Commit it"]
    attempts = [(a["attempt_id"], a["outcome"], a["failure_class"], a["approach"], a["paths"], a["superseded_by"])
                for t in claude["turns"] for a in t["attempts"]]
    assert attempts == [
        (f"att_{FAILED}", "superseded", "string_mismatch", "edit src/parser.rs · read", ["src/parser.rs"],
         f"att_{RETRY}"),
        (f"att_{RETRY}", "succeeded", None, "edit src/parser.rs · shell", ["src/parser.rs"], None),
        (f"att_{attempt(CLAUDE, 3)}", "succeeded", None, "edit README.md", ["README.md"], None),
        (f"att_{attempt(CLAUDE, 4)}", "succeeded", None, "shell", [], None),
    ]
    assert claude["turns"][1]["attempts"][0]["supersedes"] == f"att_{FAILED}"
    (ct,) = codex["turns"]
    assert (ct["status"], ct["objective"]) == ("in_progress", "Add a test for the empty-input case")
    assert [(a["outcome"], a["approach"]) for a in ct["attempts"]] == [("in_progress", "edit src/parser.rs")]
    assert codex["pending_signals"] == 1 and codex["liveness"] == "open"


def test_timeline_text(run: Any, world: World) -> None:
    r = run("timeline", "--project", "parser-project")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(
        f"{short('ses', CODEX)}  codex  parser-project  2026-11-02 10:05:50 → 10:06:10 UTC  open")
    i = lines.index(
        f"{short('ses', CLAUDE)}  claude_code  parser-project  2026-11-02 10:00:00 → 10:02:50 UTC  closed, "
        "coverage full  4 turns, 6 tool calls, 4 attempts, 1 failure")
    assert lines[i + 1:i + 9] == [
        f"  turn 1  {short('trn', turn(CLAUDE, 1))}  completed  Fix the parser crash on empty input",
        f"    {short('att', FAILED)}  superseded (string_mismatch)  edit src/parser.rs · read  src/parser.rs  "
        f"superseded by {short('att', RETRY)}",
        f"  turn 2  {short('trn', turn(CLAUDE, 2))}  completed  Try again, the old_string has tabs",
        f"    {short('att', RETRY)}  succeeded  edit src/parser.rs · shell  src/parser.rs",
        f"  turn 3  {short('trn', turn(CLAUDE, 3))}  completed  Update the README",
        f"    {short('att', attempt(CLAUDE, 3))}  succeeded  edit README.md  README.md",
        f"  turn 4  {short('trn', turn(CLAUDE, 4))}  completed  Commit it",
        f"    {short('att', attempt(CLAUDE, 4))}  succeeded  shell  commit {world.sc.sha_after[:7]}",
    ]
    assert OTHER_PROJECT not in r.stdout


def test_timeline_commit_sha(run: Any, world: World) -> None:
    rows = js(run("timeline", "--session", "claude-ref-session", "--json"))
    assert rows[0]["turns"][3]["attempts"][0]["commit_shas"] == [world.sc.sha_after]


def test_stored_text_is_printed_literally(run: Any) -> None:
    # a prompt that looks like rich markup is shown as typed, not styled away
    assert f"  completed  {PROMPT}" in run("timeline", "--all-projects").stdout
    assert PROMPT in run("show", f"trn_{turn(OTHER, 1)}").stdout


# -- failures -----------------------------------------------------------------------------


def test_failures_lists_the_superseded_attempt_with_its_retry(run: Any) -> None:
    rows = js(run("failures", "--project", "parser-project", "--json"))
    (f,) = rows
    assert (f["attempt_id"], f["outcome"], f["failure_class"], f["approach"], f["paths"]) == \
        (f"att_{FAILED}", "superseded", "string_mismatch", "edit src/parser.rs · read", ["src/parser.rs"])
    assert (f["session_id"], f["provider"], f["started_at"]) == (f"ses_{CLAUDE}", "claude_code", "2026-11-02T10:00:05Z")
    assert f["objective"] == "Fix the parser crash on empty input"
    assert f["retry"] == {"attempt_id": f"att_{RETRY}", "outcome": "succeeded", "how": "superseded",
                          "approach": "edit src/parser.rs · shell", "started_at": "2026-11-02T10:01:00Z",
                          "turn_index": 2, "attempt_index": 0}


def test_failures_text_and_all_projects(run: Any) -> None:
    r = run("failures", "--all-projects")
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if "att_" in ln]
    assert len(lines) == 2
    other, superseded = lines  # newest first
    assert short("att", attempt(OTHER, 1)) in other and "failed" in other and "build_error" in other
    for part in (short("att", FAILED), "superseded", "string_mismatch", "edit src/parser.rs · read", "src/parser.rs",
                 f"{short('att', RETRY)} (succeeded)", "2026-11-02 10:00:05", short("ses", CLAUDE)):
        assert part in superseded, part


# -- sessions ----------------------------------------------------------------------------------


def test_sessions_json_and_text(run: Any) -> None:
    rows = js(run("sessions", "--all-projects", "--json"))
    assert [(s["session_id"], s["provider"], s["project_name"]) for s in rows] == [
        (f"ses_{OTHER}", "claude_code", OTHER_PROJECT), (f"ses_{CODEX}", "codex", "parser-project"),
        (f"ses_{CLAUDE}", "claude_code", "parser-project")]
    claude = rows[2]
    assert (claude["event_count"], claude["turn_count"], claude["tool_call_count"], claude["failure_count"],
            claude["provider_session_id"]) == (22, 4, 6, 1, "claude-ref-session")
    r = run("sessions", "--all-projects")
    assert r.exit_code == 0
    for sid in (OTHER, CODEX, CLAUDE):
        assert short("ses", sid) in r.stdout


# -- scope ----------------------------------------------------------------------------------------


def _sessions(run: Any, *args: str) -> list[str]:
    return [s["session_id"][4:12] for s in js(run("sessions", "--json", *args))]


def test_scope_defaults_to_the_project_of_the_working_directory(run: Any, world: World,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert _sessions(run) == [OTHER[:8], CODEX[:8], CLAUDE[:8]]  # nothing recorded here: every project
    r = run("sessions")
    assert "showing all projects" in r.stderr
    monkeypatch.chdir(os.path.join(world.sc.repo, "src"))
    assert _sessions(run) == [CODEX[:8], CLAUDE[:8]]
    monkeypatch.chdir(world.other_dir)
    assert _sessions(run) == [OTHER[:8]]
    assert _sessions(run, "--all-projects") == [OTHER[:8], CODEX[:8], CLAUDE[:8]]
    # the filter says what it hides (issue 27, finding 7)
    for command in ("sessions", "timeline"):
        r = run(command)
        assert "2 sessions of other projects not shown (--all-projects)" in r.stderr, (command, r.stderr)
    assert "not shown" not in run("sessions", "--all-projects").stderr


def test_scope_project_by_name_id_and_path(run: Any, world: World) -> None:
    assert _sessions(run, "--project", OTHER_PROJECT) == [OTHER[:8]]
    assert _sessions(run, "--project", "parser-project") == [CODEX[:8], CLAUDE[:8]]
    assert _sessions(run, "--project", world.sc.repo) == [CODEX[:8], CLAUDE[:8]]
    r = run("sessions", "--project", "no-such-project", "--json")
    assert js(r) == []
    r = run("sessions", "--project", "no-such-project")
    assert "no recorded project matches" in r.stderr


def test_scope_session_by_prefix_and_provider_id(run: Any) -> None:
    for sel in (f"ses_{CLAUDE[:8]}", CLAUDE[:6], "claude-ref-session"):
        rows = js(run("timeline", "--session", sel, "--json"))
        assert [s["session_id"] for s in rows] == [f"ses_{CLAUDE}"], sel
    assert [f["attempt_id"] for f in js(run("failures", "--session", CODEX[:8], "--json"))] == []
    r = run("timeline", "--session", "ses_ffffffff")
    assert r.exit_code == 1 and "no session" in r.output
    r = run("timeline", "--session", "ab")
    assert r.exit_code == 2


def test_scope_since_until(run: Any) -> None:
    assert _sessions(run, "--all-projects", "--since", "2026-11-02T10:05:00Z") == [OTHER[:8], CODEX[:8]]
    assert _sessions(run, "--all-projects", "--until", "2026-11-02T10:04:00Z") == [CLAUDE[:8]]
    assert _sessions(run, "--all-projects", "--since", "2026-11-02T10:04:00Z", "--until", "2026-11-02T10:10:00Z") \
        == [CODEX[:8]]
    # turns outside the window are left out of a session that overlaps it
    rows = js(run("timeline", "--session", CLAUDE[:8], "--since", "2026-11-02T10:01:50Z", "--json"))
    assert [t["turn_index"] for t in rows[0]["turns"]] == [3, 4]
    assert js(run("failures", "--all-projects", "--since", "2026-11-02T10:01:00Z", "--until",
                  "2026-11-02T10:10:00Z", "--json")) == []
    assert [f["attempt_id"] for f in js(run("failures", "--all-projects", "--until", "2026-11-02T10:01:00Z",
                                            "--json"))] == [f"att_{FAILED}"]
    assert run("sessions", "--since", "yesterday-ish").exit_code == 2
    assert run("sessions", "--since", "2026-11-02T11:00:00Z", "--until", "2026-11-02T10:00:00Z").exit_code == 2


def test_limit(run: Any) -> None:
    assert len(js(run("timeline", "--all-projects", "--limit", "1", "--json"))) == 1
    assert _sessions(run, "--all-projects", "--limit", "2") == [OTHER[:8], CODEX[:8]]


def test_json_prints_only_json(run: Any) -> None:
    for cmd in ("timeline", "failures", "sessions"):
        r = run(cmd, "--json")  # from a directory with nothing recorded: the note goes nowhere
        assert r.exit_code == 0
        assert isinstance(json.loads(r.stdout), list)
        assert r.stderr == ""


# -- show ---------------------------------------------------------------------------------------------


def _evidence(found: dict[str, Any]) -> list[str]:
    return [e["event_id"][3:] for e in found["evidence"]]


def _ev(world: World, *roles: str) -> list[str]:
    return [world.sc.events[r] for r in roles]


def test_show_session_lists_all_its_events(run: Any, world: World) -> None:
    found = js(run("show", f"ses_{CLAUDE[:8]}", "--json"))
    assert (found["type"], found["id"]) == ("session", f"ses_{CLAUDE}")
    assert found["entity"]["provider_session_id"] == "claude-ref-session"
    assert _evidence(found) == _ev(world, *CLAUDE_ROLES)
    assert found["evidence_truncated"] is False
    short_list = js(run("show", "codex-ref-session", "--limit", "2", "--json"))
    assert _evidence(short_list) == _ev(world, *CODEX_ROLES[:2]) and short_list["evidence_truncated"] is True


def test_show_turn_and_attempt(run: Any, world: World) -> None:
    turn1 = ("claude.prompt1", "claude.read1.start", "claude.read1.end", "claude.edit1.start", "claude.edit1.fail",
             "claude.stop1")
    found = js(run("show", f"trn_{turn(CLAUDE, 1)[:10]}", "--json"))
    assert found["type"] == "turn" and found["entity"]["objective"] == "Fix the parser crash on empty input"
    assert _evidence(found) == _ev(world, *turn1)
    found = js(run("show", FAILED[:8], "--json"))  # no display prefix
    assert found["type"] == "attempt" and found["id"] == f"att_{FAILED}"
    e = found["entity"]
    assert (e["outcome"], e["failure_class"], e["superseded_by"], e["objective"]) == \
        ("superseded", "string_mismatch", f"att_{RETRY}", "Fix the parser crash on empty input")
    assert _evidence(found) == _ev(world, *turn1)
    kinds = [(x["kind"], x["tool_name"], x["outcome_status"], x["outcome_class"], x["paths"])
             for x in found["evidence"]]
    assert kinds[4] == ("tool_call_failed", "Edit", "failure", "string_mismatch", ["src/parser.rs"])


def test_show_tool_call_decision_commit_work_unit(run: Any, world: World) -> None:
    edit1 = derive("tool_call", CLAUDE, "call", "toolu_ref_edit1")
    found = js(run("show", f"tc_{edit1[:8]}", "--json"))
    assert found["type"] == "tool_call" and found["entity"]["tool_name"] == "Edit"
    assert _evidence(found) == _ev(world, "claude.edit1.start", "claude.edit1.fail")

    decision = derive("decision", "approach_change", FAILED, RETRY)
    found = js(run("show", f"dec_{decision[:8]}", "--json"))
    assert found["entity"]["selected"] == f"att_{RETRY}" and found["entity"]["alternatives"] == [f"att_{FAILED}"]
    assert _evidence(found) == _ev(world, "claude.edit1.fail", "claude.edit2.start")

    commit_call = derive("tool_call", CLAUDE, "call", "toolu_ref_commit1")
    commit = derive("commit", "session", CLAUDE, "call", commit_call)
    for ident in (world.sc.sha_after[:10], f"cmt_{commit[:8]}"):
        found = js(run("show", ident, "--json"))
        assert found["type"] == "commit", ident
        assert found["entity"]["sha"] == world.sc.sha_after
        assert _evidence(found) == _ev(world, "claude.commit.start", "claude.commit.end")

    units = js(run("sql", "select work_unit_id from work_units where project_name = 'parser-project'", "--json"))
    (unit,) = [r[0] for r in units["rows"]]
    found = js(run("show", f"wu_{unit}", "--json"))
    assert found["type"] == "work_unit" and found["entity"]["objective"] == "Fix the parser crash on empty input"
    ev = _evidence(found)
    assert world.sc.events["codex.permission1"] in ev and world.sc.events["claude.edit1.fail"] in ev
    times = [x["observed_at"] for x in found["evidence"]]
    assert times == sorted(times)


def test_show_event(run: Any, world: World) -> None:
    ev = world.sc.events["claude.edit1.fail"]
    found = js(run("show", f"ev_{ev}", "--json"))
    assert found["type"] == "event" and _evidence(found) == [ev]
    e = found["entity"]
    assert (e["kind"], e["tool_name"], e["outcome_class"], e["session_id"]) == \
        ("tool_call_failed", "Edit", "string_mismatch", f"ses_{CLAUDE}")
    assert isinstance(e["attrs"], dict)


def test_show_text(run: Any, world: World) -> None:
    r = run("show", f"att_{FAILED[:8]}")
    assert r.exit_code == 0, r.output
    assert f"attempt att_{FAILED}" in r.output
    assert "superseded" in r.stdout and "string_mismatch" in r.stdout
    assert "evidence: 6 events in observed order" in r.output
    assert f"ev_{world.sc.events['claude.edit1.fail']}" in r.stdout
    assert "tool_call_failed" in r.stdout


def test_show_unknown_ambiguous_and_bad_ids(run: Any, world: World) -> None:
    r = run("show", "att_ffffffff")
    assert r.exit_code == 1 and "no attempt" in r.output
    r = run("show", "ffffffff", "--json")
    assert r.exit_code == 1 and r.stdout == ""
    a, b = world.sc.events["claude.start"], world.sc.events["codex.start"]
    common = os.path.commonprefix([a, b])
    assert len(common.replace("-", "")) >= 4
    r = run("show", f"ev_{common}")
    assert r.exit_code == 1 and "matches" in r.output and "give more of it" in r.output
    assert run("show", "ab").exit_code == 2  # too short
    assert run("show", "not an id!").exit_code == 1  # could have been an agent's session id
    assert run("show", "prj_4964eb6b").exit_code == 2  # not something show lists


def test_piped_listings_print_whole_values_tab_separated(run: Any) -> None:
    """Issue 27, finding 6: piped (not a terminal), a listing was cut to 80 columns with
    ellipses and shortened ids. Now: a header, then tab-separated whole values; ids whole."""
    import re

    for args in (("sessions", "--all-projects"), ("failures", "--all-projects")):
        r = run(*args)
        assert r.exit_code == 0, r.output
        lines = r.stdout.splitlines()
        assert "\t" in lines[0] and "…" not in r.stdout, args
        width = len(lines[0].split("\t"))
        assert all(len(line.split("\t")) == width for line in lines), args
        ids = re.findall(r"\b(ses|att)_([0-9a-f-]+)", r.stdout)
        assert ids and all(len(rest) == 36 for _, rest in ids), (args, ids[:3])


def test_usage_and_memory_suggest_accept_all_projects(run: Any) -> None:
    """Issue 27, finding 12: both rejected the flag every other listing takes."""
    for args in (("usage", "--all-projects", "--json"), ("memory", "suggest", "--all-projects", "--dry-run", "--json")):
        r = run(*args)
        assert r.exit_code == 0, (args, r.output)
