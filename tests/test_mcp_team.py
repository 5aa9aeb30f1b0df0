"""The MCP server's ``team_query`` tool (issue 31, part 3), as an agent calls it: ``agentlog mcp`` in a
real subprocess driven by the SDK's client, over team tables published from two recorded machines
(team_support.publish_two_machines). Its rows are ``agentlog team query``'s; it reads only the data
root's ``team_url``; it is read-only."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from team_support import dashboard_team
from test_mcp import _session

SQL = "SELECT machine, provider, count(*) AS n, min(started_at) AS first FROM sessions GROUP BY ALL ORDER BY ALL"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    team = dashboard_team(tmp_path_factory.mktemp("mcp-team"))
    return {**team, "root": team["roots"]["machine-a"], "unset": team["roots"]["machine-b"]}


def _cli(root: str, statement: str) -> Any:
    r = CliRunner().invoke(cli, ["team", "query", statement, "--json"], env={"AGENTLOG_HOME": root},
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _when(v: Any) -> Any:
    from datetime import datetime

    try:
        return datetime.fromisoformat(v) if isinstance(v, str) and v[:4].isdigit() else v
    except ValueError:
        return v


def test_rows_are_the_clis(team: dict[str, Any]) -> None:
    calls = [("team_query", {"query": SQL}), ("team_query", {"query": "SHOW SUPERSEDED ATTEMPTS"}),
             ("team_query", {"query": "SELECT machine, count(*) AS n FROM events GROUP BY 1 ORDER BY 1",
                             "max_rows": 1})]
    (_init, tools), results = asyncio.run(_session(team["root"], calls))
    listed = {t.name: t for t in tools.tools}
    assert listed["team_query"].annotations.read_only_hint is True
    assert set(listed["team_query"].input_schema["properties"]) == {"query", "engine", "max_rows", "max_chars"}
    assert "url" not in json.dumps(listed["team_query"].input_schema).lower()  # nowhere else to point it
    assert not any(r.is_error for r in results), [r.content for r in results]
    sql, aql, capped = (r.structured_content for r in results)

    cli_sql = _cli(team["root"], SQL)
    assert sql["columns"] == cli_sql["columns"] and sql["engine"] == "duckdb"
    # the same rows; a time is RFC 3339 text in the tool (as the query tool gives it), Python's in the CLI's JSON
    assert [[_when(v) for v in r.values()] for r in sql["rows"]] == [[_when(v) for v in r] for r in cli_sql["rows"]]
    assert {r["machine"] for r in sql["rows"]} == {"machine-a", "machine-b"}
    assert "captured from agent sessions" in results[0].content[0].text  # quoted text is data

    cli_aql = _cli(team["root"], "SHOW SUPERSEDED ATTEMPTS")
    assert [{k: _when(v) for k, v in r.items()} for r in aql["rows"]] == [
        {k: _when(v) for k, v in r.items()} for r in cli_aql]
    assert len(aql["rows"]) == 2

    assert len(capped["rows"]) == 1 and capped["truncated"] is True


@pytest.mark.skipif(importlib.util.find_spec("daft") is None, reason="the team extra (daft) is not installed")
def test_daft_gives_duckdbs_rows(team: dict[str, Any]) -> None:
    query = "SELECT machine, count(*) AS n FROM sessions GROUP BY machine ORDER BY machine"
    _, (duck, daft) = asyncio.run(_session(team["root"], [("team_query", {"query": query}),
                                                          ("team_query", {"query": query, "engine": "daft"})]))
    assert not daft.is_error, daft.content
    assert daft.structured_content["rows"] == duck.structured_content["rows"]
    assert daft.structured_content["engine"] == "daft"


def test_refusals_are_errors(team: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "copied.csv"
    calls = [("team_query", {"query": "DROP TABLE sessions"}),
             ("team_query", {"query": f"COPY (SELECT * FROM sessions) TO '{target}'"}),
             ("team_query", {"query": "SELECT * FROM edges"}),
             ("team_query", {"query": "SHOW ATEMPTS"}),
             ("team_query", {"query": "SELECT 1", "engine": "spark"}),
             ("team_query", {"query": "  "})]
    _, results = asyncio.run(_session(team["root"], calls))
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results), texts
    assert "read-only" in texts[0] and not target.exists()
    assert "edges is not a team table" in texts[2]
    assert "duckdb or daft" in texts[4]
    assert all("Traceback" not in t for t in texts)


def test_without_team_url_it_says_so(team: dict[str, Any]) -> None:
    _, (res,) = asyncio.run(_session(team["unset"], [("team_query", {"query": "SELECT 1"})]))
    assert res.is_error and "team_url" in res.content[0].text and "agentlog config set" in res.content[0].text
