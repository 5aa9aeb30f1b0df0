"""The `telemetry` view and `usage`: telemetry records sent by the real OpenTelemetry SDK to a real
receiver, joined to the turn and tool calls the real hook recorded for the same session — by the
exact keys where the records carry them, by time where not, saying which — and token usage
taken from telemetry for that session, the transcript's counts left out (no token counted twice)."""

from __future__ import annotations

import json
import time

import pytest
from pathlib import Path

from otel_support import record_scenario

def _rows(home: Path, sql: str) -> list[dict]:
    from agentlog.operations.refresh import run_sql

    res = run_sql(str(home), sql)
    return [dict(zip(res.columns, r)) for r in res.rows]


def test_telemetry_joins_turns_and_tool_calls_and_usage_counts_once(agentlog_home: Path, tmp_path: Path) -> None:
    record_scenario(agentlog_home, tmp_path)

    calls = {r["tool_name"]: r for r in _rows(agentlog_home, "select tool_call_id, tool_name, turn_id, "
                                                             "provider_call_id from tool_calls")}
    assert set(calls) == {"Bash", "Read"}
    (turn,) = [r for r in _rows(agentlog_home, "select turn_id, turn_index from turns") if r["turn_index"] == 1]
    rows = _rows(agentlog_home, "select record, tool_name, tool_call_id, turn_id, call_join, turn_join, joined_by, "
                                "session_id from telemetry order by record, observed_at")
    by = {(r["record"], r["tool_name"]): r for r in rows}
    assert all(r["session_id"] is not None for r in rows)
    assert by[("tool_result", "Bash")]["tool_call_id"] == calls["Bash"]["tool_call_id"]
    assert by[("tool_result", "Bash")]["joined_by"] == "tool_use_id"
    assert by[("tool_decision", "Bash")]["tool_call_id"] == calls["Bash"]["tool_call_id"]
    assert by[("tool_decision", "Bash")]["joined_by"] == "tool_use_id"
    read = by[("tool_result", "Read")]
    assert (read["tool_call_id"], read["call_join"], read["joined_by"]) == (calls["Read"]["tool_call_id"], "time",
                                                                            "time")
    assert read["turn_id"] == turn["turn_id"] and read["turn_join"] == "time"
    requests = [r for r in rows if r["record"] == "api_request"]
    assert len(requests) == 2
    assert all(r["turn_id"] == turn["turn_id"] and r["joined_by"] == "prompt_id" and r["tool_call_id"] is None
               for r in requests)
    (error,) = [r for r in rows if r["record"] == "api_error"]
    assert error["turn_id"] == turn["turn_id"] and error["turn_join"] == "prompt_id"

    (lat,) = _rows(agentlog_home, "select * from turn_latency where turn_index = 1")
    assert lat["model_ms"] == 1500 + 1500 + 300 and lat["model_requests"] == 3 and lat["tool_calls"] == 2
    assert lat["permission_ms"] is not None and lat["permission_ms"] >= 0 and lat["wall_ms"] >= lat["tool_ms"]

    usage = _rows(agentlog_home, "select source, cost_source, input_tokens, output_tokens, cost_usd from usage")
    assert [u["source"] for u in usage] == ["telemetry", "telemetry"]  # the transcript's row is not counted too
    assert sum(u["input_tokens"] for u in usage) == 100 + 101 and sum(u["output_tokens"] for u in usage) == 40
    assert {u["cost_source"] for u in usage} == {"telemetry"}

    from click.testing import CliRunner

    from agentlog.cli import cli

    out = CliRunner().invoke(cli, ["usage", "--by", "session", "--json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)["rows"]
    assert row["source"] == "telemetry" and row["responses"] == 2 and row["input_tokens"] == 201


GEMINI_SESSION = "6f1e2d3c-gemini-parallel"


def _gemini_hook(cwd: Path, **payload: object) -> None:
    from conftest import run_hook

    body = {"session_id": GEMINI_SESSION, "transcript_path": str(cwd / "none.json"), "cwd": str(cwd), **payload}
    r = run_hook(json.dumps(body).encode(), "gemini-cli", cwd=str(cwd))
    assert r.returncode == 0, r.stderr


def _gemini_parallel_calls(home: Path, tmp: Path, mode: str) -> dict[str, str]:
    """Gemini CLI's way with two calls of one tool in one reply: both hooks' starts, then both ends
    (no call id anywhere), the quick second call ending first; then its ``tool_call`` records, no
    call id either, both at the same log time, after all calls ended. What else they carry is
    ``mode``'s:

    - ``start``: each call's ``start_time`` and ``end_time`` (ms), sent in the reverse order;
    - ``args``: ``function_args`` (prompt logging on), the same ``start_time`` on both, reversed;
    - ``content``: ``content_length`` (the length of the result the model got), reversed;
    - ``order``: nothing more (Gemini CLI 0.61), in the reply's order, as it sends them.

    Returns command → call id."""
    from otel_support import Receiver, logs_request, post

    work = tmp / "proj"
    work.mkdir()
    _gemini_hook(work, hook_event_name="SessionStart", source="startup")
    _gemini_hook(work, hook_event_name="BeforeAgent", prompt="run both")
    commands = ["sleep 0.3; echo first", "echo second"]
    results = {cmd: f"Output: {cmd}\nProcess Group PGID: 1" for cmd in commands}
    starts = {}
    for cmd in commands:
        starts[cmd] = time.time_ns() // 1_000_000
        _gemini_hook(work, hook_event_name="BeforeTool", tool_name="run_shell_command",
                     tool_input={"command": cmd, "description": "d"})
    for cmd in reversed(commands):  # the quick one ends first
        _gemini_hook(work, hook_event_name="AfterTool", tool_name="run_shell_command",
                     tool_input={"command": cmd, "description": "d"},
                     tool_response={"llmContent": results[cmd], "returnDisplay": cmd})
    ended = time.time_ns() // 1000
    _gemini_hook(work, hook_event_name="AfterAgent", prompt="run both", prompt_response="done")
    records = []
    for cmd in (commands if mode == "order" else list(reversed(commands))):
        rec: dict[str, object] = {
            "_body": "Tool call: run_shell_command. Success: true.", "event.name": "gemini_cli.tool_call",
            "function_name": "run_shell_command", "success": True, "duration_ms": 300 + len(cmd),
            "prompt_id": "p-1", "_time": ended}
        if mode == "start":
            rec.update(start_time=starts[cmd], end_time=ended // 1000)
        elif mode == "args":
            rec.update(start_time=starts[commands[0]], end_time=ended // 1000,
                       function_args=json.dumps({"command": cmd, "description": "d"}, indent=2))
        elif mode == "content":
            rec["content_length"] = len(results[cmd])
        records.append(rec)
    receiver = Receiver(home)
    try:
        status, _ = post(receiver.url + "/v1/logs", logs_request(records, session=GEMINI_SESSION,
                                                                 service="gemini-cli"))
        assert status == 200
    finally:
        receiver.stop()
    calls = _rows(home, "select c.tool_call_id, json_extract_string(e.content, '$.tool_input.command') as cmd "
                        "from tool_calls c join events e on e.event_id = c.start_event_id")
    return {c["cmd"]: c["tool_call_id"] for c in calls}


@pytest.mark.parametrize("mode", ["start", "args", "content", "order"])
def test_gemini_parallel_calls_of_one_tool_join_their_own_call(agentlog_home: Path, tmp_path: Path,
                                                                 mode: str) -> None:
    """Each of the two records goes to its own call: by the call's start, by its arguments, by the
    length of its result, or, with none of those (agentlog's install turns Gemini's prompt
    logging off; 0.61 sends no start), by its place among the reply's calls."""
    by_cmd = _gemini_parallel_calls(agentlog_home, tmp_path, mode)
    assert len(set(by_cmd.values())) == 2
    rows = _rows(agentlog_home, "select t.tool_call_id, t.call_join, t.turn_id, e.raw from telemetry t "
                                "join events e using (event_id) where t.record = 'tool_call'")
    assert len(rows) == 2 and all(r["call_join"] == "time" and r["turn_id"] is not None for r in rows)
    sent = [json.loads(r["raw"])["attributes"] for r in rows]
    if mode == "args":
        got = {json.loads(a["function_args"])["command"]: r["tool_call_id"] for a, r in zip(sent, rows)}
    else:
        # which record is which: the one sent first is the second command (reversed), except in order mode
        seq = _rows(agentlog_home, "select t.tool_call_id from telemetry t join events e using (event_id) "
                                   "where t.record = 'tool_call' order by e.seq")
        cmds = ["sleep 0.3; echo first", "echo second"]
        got = dict(zip(cmds if mode == "order" else list(reversed(cmds)), [r["tool_call_id"] for r in seq]))
    assert got == by_cmd


def test_usage_takes_the_transcript_where_the_telemetry_does_not_reach(agentlog_home: Path) -> None:
    """Telemetry turned on an hour into a session: the transcript's earlier responses still count,
    the one the telemetry also reported does not (no token counted twice, none lost)."""
    from otel_support import Receiver, logs_request, post

    from agentlog.core.jsonio import dumps
    from agentlog.log.writer import open_session_log

    sid = "5a5a5a5a-late-telemetry"
    now = time.time_ns() // 1000
    log = open_session_log(str(agentlog_home), "claude_code", sid)
    for n, at in ((1, now - 3_600_000_000), (2, now - 3_000_000_000), (3, now)):
        log.append([dumps({"event_id": f"01900000-0000-7000-8000-0000000000{n:02d}", "schema_version": 1,
                           "kind": "usage", "provider": "claude_code", "provider_event_name": "transcript:usage",
                           "observed_at": at, "captured_at": at, "capture_mode": "full", "agentlog_version": "0",
                           "provider_session_id": sid,
                           "attrs": {"model": "claude-sonnet-4-5", "message_id": f"msg_{n}", "input_tokens": 10 * n,
                                     "output_tokens": n, "cache_read_tokens": 0, "cache_write_tokens": 0}})])
    receiver = Receiver(agentlog_home)
    try:
        status, _ = post(receiver.url + "/v1/logs", logs_request(
            [{"_body": "claude_code.api_request", "event.name": "api_request", "model": "claude-sonnet-4-5",
              "input_tokens": 30, "output_tokens": 3, "cost_usd": 0.01, "duration_ms": 900, "_time": now + 1_000_000}],
            session=sid))
        assert status == 200
    finally:
        receiver.stop()
    rows = _rows(agentlog_home, "select source, message_id, input_tokens from usage order by observed_at")
    assert [(r["source"], r["input_tokens"]) for r in rows] == [("transcript", 10), ("transcript", 20),
                                                                ("telemetry", 30)]
