"""The `telemetry` view and `usage`: telemetry records sent by the real OpenTelemetry SDK to a real
receiver, joined to the turn and tool calls the real hook recorded for the same session — by the
exact keys where the records carry them, by time where not, saying which — and token usage
taken from telemetry for that session, the transcript's counts left out (no token counted twice)."""

from __future__ import annotations

import json
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
