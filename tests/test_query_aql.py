"""AttemptQL statements answered over the reference scenario (agentlog.query.aql),
and the CLI commands around them (query, trace, why, state)."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.projection.ids import derive
from agentlog.query.state import ResolveError
from agentlog.query.aql import AqlResult, execute
from agentlog.query.attemptql import ParseError
from agentlog.query.engine import Engine, QueryError
from scenario import (BASE_US, CLAUDE, CODEX, FAILED_EDIT, RETRY, SECOND, SHA_AFTER, Scenario,
                      reference_engine)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, Engine]]:
    with reference_engine(tmp_path_factory.mktemp("aql-ref")) as r:
        yield r


def q(ref: tuple[Scenario, Engine], text: str, **kw: Any) -> AqlResult:
    return execute(ref[1], text, **kw)


def col(result: AqlResult, name: str) -> list[Any]:
    return [r[name] for r in result.records()]


def iso(offset_s: float) -> str:
    from agentlog.query.timeexpr import format_us

    return format_us(BASE_US + int(offset_s * SECOND))


# --------------------------------------------------------------------------- SHOW


def test_show_attempts(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "SHOW ATTEMPTS")
    assert r.statement_kind == "show" and len(r.rows) == 5
    assert col(r, "outcome") == ["in_progress", "succeeded", "succeeded", "succeeded", "superseded"]
    starts = col(r, "started_at")
    assert starts == sorted(starts, reverse=True)  # newest first by default
    assert "evidence" in r.columns and "confidence" in r.columns
    assert r.sql is not None and "LIMIT" in r.sql


def test_failed_and_superseded_attempts(ref: tuple[Scenario, Engine]) -> None:
    assert q(ref, "SHOW FAILED ATTEMPTS").rows == []  # the only failure was retried: superseded, not failed
    r = q(ref, "SHOW SUPERSEDED ATTEMPTS")
    [row] = r.records()
    assert row["attempt_id"] == FAILED_EDIT and row["superseded_by"] == RETRY
    assert row["successor_outcome"] == "succeeded" and row["failure_class"] == "string_mismatch"


def test_show_sessions_and_filters(ref: tuple[Scenario, Engine]) -> None:
    assert sorted(col(q(ref, "SHOW SESSIONS"), "provider")) == ["claude_code", "codex"]
    assert col(q(ref, "SHOW SESSIONS FOR status = open"), "session_id") == [CODEX]
    assert col(q(ref, "SHOW SESSIONS FOR provider = claude_code"), "session_id") == [CLAUDE]
    assert col(q(ref, f"SHOW SESSIONS FOR session = ses_{CODEX[:6]}"), "session_id") == [CODEX]
    assert len(q(ref, "SHOW SESSIONS FOR project = 'parser-project'").rows) == 2
    assert q(ref, "SHOW SESSIONS FOR project = 'elsewhere'").rows == []


def test_show_handoffs(ref: tuple[Scenario, Engine]) -> None:
    [h] = q(ref, "SHOW HANDOFFS").records()
    assert (h["from_provider"], h["to_provider"]) == ("claude_code", "codex")
    assert (h["from_session"], h["to_session"]) == (CLAUDE, CODEX)
    assert h["confidence"] == 0.8 and h["shared_paths"] == ["src/parser.rs"]
    for stmt in ("SHOW HANDOFFS BETWEEN provider = codex AND provider = claude_code",
                 "SHOW HANDOFFS BETWEEN agent = claude_code AND agent = codex",
                 "SHOW HANDOFFS FOR path = 'src/*'", "SHOW HANDOFFS FOR provider = codex"):
        assert len(q(ref, stmt).rows) == 1, stmt
    assert q(ref, "SHOW HANDOFFS BETWEEN provider = codex AND provider = cursor").rows == []


def test_show_other_targets(ref: tuple[Scenario, Engine]) -> None:
    sc, _ = ref
    [sig] = q(ref, "SHOW SIGNALS").records()
    assert sig["event_id"] == sc.events["codex.permission1"] and sig["pending"] is True
    assert len(q(ref, "SHOW SIGNALS FOR status = pending").rows) == 1
    assert q(ref, "SHOW SIGNALS FOR status = cleared").rows == []
    [commit] = q(ref, "SHOW COMMITS").records()
    assert commit["sha"] == SHA_AFTER and commit["linkage"] == "end_event"
    [edge] = q(ref, "SHOW EDGES FOR kind = superseded").records()
    assert (edge["from_id"], edge["to_id"]) == (FAILED_EDIT, RETRY)
    assert len(q(ref, "SHOW EDGES FOR kind = handed_off").rows) == 1
    [unit] = q(ref, "SHOW WORK UNITS").records()
    assert unit["phase"] == "blocked" and unit["actors"] == ["claude_code", "codex"]
    assert len(q(ref, "SHOW WORK UNITS FOR phase = blocked AND provider = codex").rows) == 1
    assert q(ref, "SHOW WORK UNITS FOR phase = deliver").rows == []
    [decision] = q(ref, "SHOW DECISIONS").records()
    assert decision["kind"] == "approach_change" and decision["selected"] == RETRY
    assert len(q(ref, "SHOW TURNS").rows) == 5
    assert len(q(ref, "SHOW TOOL CALLS").rows) == 7
    for target in ("CORRECTIONS", "RETRACTIONS", "CONFLICTS"):
        assert q(ref, f"SHOW {target}").rows == [], target


def test_show_filters_bind_values(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "SHOW TOOL CALLS FOR tool = Edit, outcome = failure")
    assert col(r, "attempt_id") == [FAILED_EDIT]
    assert "Edit" not in (r.sql or "") and "Edit" in r.params
    # A value is data, never SQL.
    assert q(ref, "SHOW ATTEMPTS FOR provider = 'x'' OR 1=1 --'").rows == []
    assert len(q(ref, "SHOW ATTEMPTS FOR path = 'src/*.rs'").rows) == 3
    assert len(q(ref, "SHOW ATTEMPTS FOR path = '*.md'").rows) == 1
    assert q(ref, "SHOW ATTEMPTS FOR path = 'src/parser_rs'").rows == []  # _ is not a wildcard
    assert len(q(ref, "SHOW ATTEMPTS FOR tool = Bash").rows) == 2
    assert col(q(ref, f"SHOW ATTEMPTS FOR turn = trn_{derive('turn', CLAUDE, '2')[:8]}"), "attempt_id") == [RETRY]
    assert len(q(ref, "SHOW ATTEMPTS FOR outcome = succeeded AND provider = claude_code").rows) == 3


def test_show_where_order_limit_since(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "SHOW ATTEMPTS WHERE approach LIKE '%shell%' ORDER BY started_at ASC")
    assert col(r, "attempt_id") == [RETRY, derive("attempt", CLAUDE, "4", "0")]
    r = q(ref, "SHOW TURNS ORDER BY turn_index DESC LIMIT 2")
    assert col(r, "turn_index") == [4, 3] and any("LIMIT 2" in n for n in r.notes)
    r = q(ref, f"SHOW ATTEMPTS SINCE '{iso(60)}' UNTIL '{iso(150)}'")
    assert len(r.rows) == 2
    # Relative times count back from the latest event (t+370s) by default.
    assert col(q(ref, "SHOW ATTEMPTS SINCE -1m"), "session_id") == [CODEX]
    r = q(ref, "SHOW ATTEMPTS SINCE -1m UNTIL now", now_us=BASE_US + 100 * SECOND)
    assert col(r, "attempt_id") == [RETRY]
    with pytest.raises(QueryError):
        q(ref, "SHOW ATTEMPTS WHERE no_such_column = 1")


def test_show_evidence_for(ref: tuple[Scenario, Engine]) -> None:
    sc, _ = ref
    r = q(ref, f"SHOW EVIDENCE FOR attempt {FAILED_EDIT[:8]}")
    roles = ["claude.prompt1", "claude.read1.start", "claude.read1.end", "claude.edit1.start", "claude.edit1.fail",
             "claude.stop1"]
    assert col(r, "event_id") == [sc.events[x] for x in roles]  # observed order
    assert "event" not in r.columns and "raw" not in r.columns
    assert len(q(ref, f"SHOW EVIDENCE FOR att_{RETRY} FOR kind = tool_call_started").rows) == 2
    [ev] = q(ref, f"SHOW EVIDENCE FOR '{sc.events['codex.permission1']}'").records()
    assert ev["kind"] == "permission_requested"


def test_show_semantic_errors(ref: tuple[Scenario, Engine]) -> None:
    with pytest.raises(ParseError) as e:
        q(ref, "SHOW SESSIONS FOR phase = blocked")
    assert e.value.code == "AQL0407" and e.value.position == 18 and "WORK UNITS" in e.value.message
    with pytest.raises(ParseError) as e:
        q(ref, "SHOW EDGES SINCE -1h")
    assert e.value.code == "AQL0412"
    with pytest.raises(ParseError) as e:
        q(ref, "SHOW ATTEMPS")
    assert e.value.code.startswith("AQL02")


def test_retracted_rows_are_hidden_and_counted(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "SHOW SESSIONS")
    assert not any("retracted" in n for n in r.notes)  # nothing retracted in the reference scenario
    assert "NOT retracted" in (r.sql or "")
    r = q(ref, "SHOW SESSIONS INCLUDING RETRACTED")
    assert "NOT retracted" not in (r.sql or "") and len(r.rows) == 2


# --------------------------------------------------------------------------- ids in statements


def test_id_prefixes_in_statements(ref: tuple[Scenario, Engine]) -> None:
    sc, _ = ref
    for subject in (f"attempt {RETRY[:4]}", f"att_{RETRY[:8]}", f"'{RETRY}'", RETRY[:6]):
        r = q(ref, f"TRACE {subject} CAUSES")
        assert [(x["edge_kind"], x["from_id"]) for x in r.records()] == [("superseded", FAILED_EDIT)], subject
    prefix = os.path.commonprefix([sc.events["claude.start"], sc.events["claude.prompt1"]])
    with pytest.raises(ResolveError) as e:
        q(ref, f"TRACE '{prefix}' CAUSES")
    assert e.value.code == "AQL0302" and e.value.position == 6 and "event" in e.value.message
    with pytest.raises(ResolveError) as e:
        q(ref, "TRACE attempt ffffffff CAUSES")
    assert e.value.code == "AQL0301" and e.value.position == 6
    with pytest.raises(ResolveError) as e:
        q(ref, f"TRACE session {RETRY[:8]} CAUSES")  # an attempt's id, asked as a session
    assert e.value.code == "AQL0301"


# --------------------------------------------------------------------------- the other statements


def test_trace_statement(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, f"TRACE attempt {FAILED_EDIT[:8]} CAUSES DIRECTION DOWN DEPTH 3")
    assert r.statement_kind == "trace"
    assert [(x["depth"], x["edge_kind"], x["to_id"]) for x in r.records()] == [(1, "superseded", RETRY)]
    assert "uncertainty" in r.columns and "evidence" in r.columns
    with pytest.raises(ParseError):
        q(ref, "TRACE project CAUSES")


def test_state_statement(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, f"STATE AT '{iso(25)}'")
    rows = r.records()
    assert [x["subject_type"] for x in rows] == ["session", "work_unit"]
    assert rows[0]["turn_status"] == "in_progress" and rows[0]["last_attempt_outcome"] == "failed"
    r = q(ref, f"STATE session {CODEX[:8]} AT '{iso(375)}'")
    assert [x["subject_id"] for x in r.records() if x["subject_type"] == "session"] == [CODEX]
    assert all(x["blocked"] for x in r.records())
    assert q(ref, f"STATE AT '{iso(200)}'").rows == []
    r = q(ref, f"STATE project AT '{iso(62)}'", current_project=["0000"])
    assert r.rows == []  # the current project is elsewhere
    assert q(ref, f"STATE project 'parser-project' AT '{iso(62)}'").rows


def test_diff_statement(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, f"DIFF STATE '{iso(62)}' '{iso(375)}'")
    changes = {(x["subject_id"], x["change"]) for x in r.records()}
    assert (CLAUDE, "removed") in changes and (CODEX, "added") in changes
    assert set(r.columns) >= {"change", "field", "before", "after", "evidence", "uncertainty"}
    with pytest.raises(ParseError) as e:
        q(ref, f"DIFF STATE '{iso(375)}' '{iso(62)}'")
    assert e.value.code == "AQL0408" and e.value.position == 11


def test_why_statements(ref: tuple[Scenario, Engine]) -> None:
    sc, _ = ref
    [row] = q(ref, "WHY project BLOCKED").records()
    assert "waiting on a permission request" in row["claim"] and row["evidence"] == [sc.events["codex.permission1"]]
    [row] = q(ref, f"WHY session {CLAUDE[:8]} BLOCKED").records()
    assert row["uncertainty"]["reason"] == "insufficient_evidence" and row["claim"] is None
    [row] = q(ref, f"WHY attempt {FAILED_EDIT[:8]} FAILED").records()
    assert row["rule"] == "failure" and sc.events["claude.edit1.fail"] in row["evidence"]
    [row] = q(ref, "WHY project FAILED").records()
    assert row["subject_id"] == FAILED_EDIT
    [row] = q(ref, f"WHY session {CODEX[:8]} FAILED").records()
    assert row["uncertainty"]["reason"] == "insufficient_evidence"
    # Asked about a normal turn's attempt: it did not fail.
    [row] = q(ref, f"WHY attempt {derive('attempt', CLAUDE, '3', '0')[:8]} FAILED").records()
    assert row["uncertainty"]["reason"] == "state_mismatch"


def test_what_is_doing_now_statement(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "WHAT IS project DOING NOW")
    assert r.statement_kind == "what_is"
    assert [(x["subject_type"], x["subject_id"]) for x in r.records()][-1] == ("session", CODEX)
    [row] = q(ref, "WHAT IS project DOING NOW", now_us=BASE_US + 200 * SECOND).records()
    assert row["uncertainty"]["reason"] == "insufficient_evidence"
    [row] = q(ref, f"WHAT IS session {CLAUDE[:8]} DOING NOW").records()
    assert row["subject_type"] == "none"


def test_explain(ref: tuple[Scenario, Engine]) -> None:
    r = q(ref, "EXPLAIN SHOW FAILED ATTEMPTS FOR provider = codex")
    items = dict(r.rows)
    assert r.statement_kind == "explain" and "Show(" in items["statement"]
    assert "$1" in items["sql"] and "codex" not in items["sql"] and json.loads(items["params"])[0] == "codex"
    assert items["plan"]
    r = q(ref, "EXPLAIN WHY project BLOCKED")
    keys = [k for k, _ in r.rows]
    assert "answered by" in keys and any(k.startswith("sql ") for k in keys)


# --------------------------------------------------------------------------- CLI


@pytest.fixture()
def runner(ref: tuple[Scenario, Engine], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("AGENTLOG_HOME", ref[0].root)
    return CliRunner()


def test_cli_query_json_and_errors(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["query", "SHOW SESSIONS", "--json", "--no-ingest"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert isinstance(rows, list) and len(rows) == 2 and all(isinstance(r, dict) for r in rows)
    assert rows[0]["started_at"].endswith("Z")
    assert all(r["session_id"].startswith("ses_") for r in rows)  # ids as every other command prints them
    res = runner.invoke(cli, ["query", "SHOW SESIONS", "--no-ingest"])
    assert res.exit_code == 2 and res.stdout == ""
    assert "AQL0201" in res.stderr and "^" in res.stderr
    res = runner.invoke(cli, ["query", "TRACE attempt ffffffff CAUSES", "--no-ingest"])
    assert res.exit_code == 1 and "AQL0301" in res.stderr and res.stdout == ""
    res = runner.invoke(cli, ["query", "SHOW SESSIONS FOR phase = blocked", "--no-ingest"])
    assert res.exit_code == 2
    res = runner.invoke(cli, ["query", "select count(*) as n from events", "--json", "--no-ingest"])
    assert res.exit_code == 0 and json.loads(res.stdout)["rows"] == [[27]]  # SQL: as `agentlog sql`
    res = runner.invoke(cli, ["query", "SHOW HANDOFFS", "--csv", "--no-ingest"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0].startswith("handoff_id,")
    res = runner.invoke(cli, ["query", "SHOW HANDOFFS", "--no-ingest"])
    assert res.exit_code == 0 and "claude_code" in res.stdout


def test_cli_trace_why_state(runner: CliRunner, ref: tuple[Scenario, Engine]) -> None:
    sc, _ = ref
    res = runner.invoke(cli, ["trace", f"att_{RETRY[:8]}", "--json", "--no-ingest"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.stdout)
    assert row["edge_kind"] == "superseded" and row["from_id"] == FAILED_EDIT
    res = runner.invoke(cli, ["trace", RETRY[:8], "--no-ingest"])
    assert res.exit_code == 0 and f"att_{FAILED_EDIT[:8]}" in res.stdout
    assert runner.invoke(cli, ["trace", "ffffffff", "--no-ingest"]).exit_code == 1
    assert runner.invoke(cli, ["trace", RETRY, "--direction", "sideways", "--no-ingest"]).exit_code == 2

    res = runner.invoke(cli, ["why", "--all-projects", "--now", iso(375), "--json", "--no-ingest"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.stdout)
    assert "waiting on a permission request" in row["claim"]
    res = runner.invoke(cli, ["why", FAILED_EDIT[:8], "--no-ingest"])
    assert res.exit_code == 0 and "string_mismatch" in res.stdout
    res = runner.invoke(cli, ["why", f"ses_{CLAUDE[:8]}", "--json", "--no-ingest"])
    assert json.loads(res.stdout)[0]["uncertainty"]["reason"] == "insufficient_evidence"
    assert runner.invoke(cli, ["why", "ffffffff", "--no-ingest"]).exit_code == 1

    res = runner.invoke(cli, ["state", "--at", iso(375), "--all-projects", "--json", "--no-ingest"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert isinstance(out, dict) and out["at"] == iso(375)
    assert [s["session_id"] for s in out["sessions"]] == [CODEX] and out["sessions"][0]["blocked"]
    res = runner.invoke(cli, ["state", "--at", iso(25), "--all-projects", "--no-ingest"])
    assert res.exit_code == 0 and f"ses_{CLAUDE[:8]}" in res.stdout and "in_progress" in res.stdout
    assert runner.invoke(cli, ["state", "--at", "not a time", "--no-ingest"]).exit_code == 2


def test_cli_prints_stored_text_verbatim(tmp_path_factory: pytest.TempPathFactory,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt that looks like rich markup, with a terminal escape, prints as plain text."""
    from scenario import make_repo, write

    base = tmp_path_factory.mktemp("aql-markup")
    root = str(base / "home")
    os.makedirs(root)
    repo = make_repo(str(base / "work"))
    body = {"session_id": "markup-session", "cwd": repo, "transcript_path": "/x/markup-session.jsonl"}
    write(root, "claude-code", {**body, "hook_event_name": "SessionStart", "source": "startup"}, BASE_US, repo)
    write(root, "claude-code", {**body, "hook_event_name": "UserPromptSubmit",
                                "prompt": "[bold red]boom[/bold red] \x1b[2J done"}, BASE_US + SECOND, repo)
    monkeypatch.setenv("AGENTLOG_HOME", root)
    res = CliRunner().invoke(cli, ["state", "--at", iso(2), "--all-projects"])
    assert res.exit_code == 0, res.output
    assert "[bold red]boom[/bold red]" in res.stdout and "\x1b" not in res.stdout
    res = CliRunner().invoke(cli, ["query", "SHOW TURNS", "--no-ingest"])
    assert res.exit_code == 0 and "[bold red]boom[/bold red]" in res.stdout and "\x1b" not in res.stdout
    from agentlog.cli import query_cmds

    assert query_cmds._cell({"a": [1, None]}) == '{"a": [1, null]}'


@pytest.mark.parametrize("command", ["query", "trace", "why", "state"])
def test_cli_help(command: str) -> None:
    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0 and "Usage:" in res.output
    assert "--json" in res.output
