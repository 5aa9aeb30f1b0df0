"""The real agent CLIs (current pinned releases) with their OpenTelemetry pointed at a real
`agentlog otel serve` by `agentlog install --otel`, driven by the scripted model
(src/agentlog/bench/agents): their telemetry lands in the session the hooks recorded, each tool
record is attached to the tool call the model issued (by its id where the agent sends one, by time
where not), token usage comes from the telemetry, and importing the transcripts afterwards counts
no token twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.bench.agents import npm
from agentlog.bench.agents.drivers import RELEASES, import_transcripts, run_scenario
from agentlog.bench.agents.npm import Release
from agentlog.bench.agents.scenarios import load_all

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not npm.npm_available(), reason="node and npm are needed (scripts/test.sh installs them)"),
]

CURRENT = {r.agent: r for r in reversed(RELEASES)}  # the first listed release of each agent is its current one
#: the tool records each agent sends, and whether they carry the call's id
TOOL_RECORDS = {"claude-code": ("tool_result", True), "codex": ("tool_result", True), "gemini-cli": ("tool_call", False)}


def _rows(root: Path, sql: str) -> list[dict]:
    from agentlog.operations.refresh import run_sql

    res = run_sql(str(root), sql)
    return [dict(zip(res.columns, r)) for r in res.rows]


#: tool records an agent release does not send (every other fact still checked)
UNDELIVERED: dict[tuple[str, str], str] = {
    ("claude-code", "edit_missing_file"): "Claude Code 2.1.332 sends no tool_result or tool_decision for a call "
                                          "that fails its input validation (Edit of a missing file)",
}
SCENARIOS = ("success", "nonzero_exit", "parallel_calls", "subagent", "edit_missing_file")


CASES = [pytest.param(CURRENT[a], s, id=f"{CURRENT[a].label}-{s}") for a in ("claude-code", "codex", "gemini-cli")
         for s in SCENARIOS]
CASES += [pytest.param(r, "success", id=f"{r.label}-success") for r in RELEASES if CURRENT[r.agent] is not r]


@pytest.mark.parametrize(("release", "scenario"), CASES)
def test_real_agent_telemetry_joins_the_hooks_record(release: Release, scenario: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    agent = release.agent
    run = run_scenario(release, load_all()[scenario], tmp_path / "run", otel=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "rejected" in run.extra["otel"] and "(0 rejected)" in run.extra["otel"], run.extra["otel"]
    monkeypatch.setenv("AGENTLOG_HOME", str(run.data_root))
    root = run.data_root
    issued = run.model.issued
    assert issued, "the scripted model issued no tool call"

    sessions = _rows(root, "select session_id, provider_session_id from sessions")
    assert len(sessions) == 1
    rows = _rows(root, "select * from telemetry")
    assert rows and all(r["session_id"] == sessions[0]["session_id"] for r in rows if r["provider_session_id"])
    calls = _rows(root, "select tool_call_id, tool_name, provider_call_id, turn_id from tool_calls")
    by_id = {c["provider_call_id"]: c for c in calls}
    record, with_ids = TOOL_RECORDS[agent]
    tool_rows = [r for r in rows if r["record"] == record and r["signal"] == "logs"]
    assert len(tool_rows) == (0 if (agent, scenario) in UNDELIVERED else len(issued))
    for r in tool_rows:
        assert r["tool_call_id"] is not None and r["turn_id"] is not None, r
        if with_ids:
            assert r["tool_use_id"] in issued and r["joined_by"] == "tool_use_id"
            assert r["tool_call_id"] == by_id[r["tool_use_id"]]["tool_call_id"]
        else:
            assert r["call_join"] == "time"
            call = next(c for c in calls if c["tool_call_id"] == r["tool_call_id"])
            assert call["tool_name"] == r["tool_name"]
    # each call once: Gemini CLI's parallel calls of one tool (no call id) by their start and order
    assert len({r["tool_call_id"] for r in tool_rows}) == len(tool_rows)
    if not with_ids:  # and the right one: the result length the record reports is its call's
        for r in _rows(root, "select t.tool_call_id, json_extract(e.raw, '$.attributes.content_length') as n, "
                             "json_extract_string(x.raw, '$.tool_response.llmContent') as text from telemetry t "
                             "join events e using (event_id) join tool_calls c on c.tool_call_id = t.tool_call_id "
                             f"join events x on x.event_id = c.end_event_id where t.record = '{record}' "
                             "and c.outcome_status = 'success'"):  # an error's length is not its text's
            if r["n"] is not None and r["text"] is not None:
                assert int(r["n"]) == len(r["text"].encode("utf-16-le")) // 2, r

    usage = _rows(root, "select source, input_tokens, output_tokens from usage")
    assert usage and {u["source"] for u in usage} == {"telemetry"}
    before = (len(usage), sum(u["input_tokens"] for u in usage), sum(u["output_tokens"] for u in usage))
    imported = import_transcripts(run)
    assert imported is not None
    after_rows = _rows(root, "select source, input_tokens, output_tokens from usage")
    after = (len(after_rows), sum(u["input_tokens"] for u in after_rows), sum(u["output_tokens"] for u in after_rows))
    assert after == before  # the transcript's usage is not added to the telemetry's
    transcript = _rows(root, "select count(*) as n from events where kind = 'usage'")[0]["n"]
    assert transcript > 0 or agent == "gemini-cli", "the import brought no usage to leave out"
