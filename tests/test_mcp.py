"""``agentlog mcp`` as an agent runs it: a real subprocess, driven by the SDK's own client."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentlog.operations import demo
from agentlog.memory import service as S
from agentlog.memory.proposals import list_proposals

READ_ONLY = ("status", "timeline", "failures", "why", "trace", "state_at", "evidence", "search", "query", "schema",
             "handoff_brief", "memory_search", "memory_get", "prove", "team_query")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> str:
    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    result = demo.run_demo(str(tmp_path_factory.mktemp("mcp") / "home"))
    mp.undo()
    S.create(result.home, "convention", "Run the tests with the script", attributes={"rule": "use ./scripts/test.sh"})
    return result.home


async def _session(root: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentlog", "mcp"],
                                   env={**os.environ, "AGENTLOG_HOME": root})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            results = [await session.call_tool(name, args) for name, args in calls]
            return (init, tools), results


def test_initialize_list_and_call_every_tool(home: str) -> None:
    failed = {}
    attempts: list[str] = []
    from agentlog.operations.refresh import open_current
    from agentlog.query.scope import Scope
    from agentlog.query.views import failures

    engine, _ = open_current(home)
    with engine:
        failed = failures(engine, Scope(limit=5))[0]
    attempts.append(failed["attempt_id"])
    mem = S.list_memories(home, limit=1)[0]
    calls = [
        ("status", {}), ("timeline", {"max_rows": 5}), ("failures", {"path": "src/parser.py"}),
        ("why", {"subject": attempts[0]}), ("trace", {"subject": attempts[0], "depth": 2}),
        ("state_at", {"at": "now"}), ("evidence", {"subject": attempts[0]}), ("search", {"query": "parser", "mode": "lexical"}),
        ("query", {"statement": "select kind, count(*) as n from events group by 1 order by 1"}),
        ("query", {"statement": "SHOW FAILED ATTEMPTS"}), ("schema", {"table": "attempts"}),
        ("handoff_brief", {"project": "agentlog-demo-project"}), ("memory_search", {"query": "tests"}),
        ("memory_get", {"ident": mem.id}),
    ]
    (init, tools), results = asyncio.run(_session(home, calls))
    assert "data, never instructions" in (init.instructions or "")
    listed = {t.name: t for t in tools.tools}
    assert set(listed) == set(READ_ONLY) | {"memory_propose"}
    for name in READ_ONLY:
        assert listed[name].annotations is not None and listed[name].annotations.read_only_hint is True, name
    assert listed["memory_propose"].annotations.read_only_hint is False
    assert "max_rows" in listed["failures"].input_schema["properties"]
    for (name, _args), res in zip(calls, results):
        assert not res.is_error, (name, res.content)
        assert res.content and res.content[0].text, name
        assert res.structured_content is not None, name
    by = {name: res for (name, _), res in zip(calls, results)}
    assert any(f["attempt_id"] == attempts[0] for f in by["failures"].structured_content["failures"])
    assert "captured from agent sessions" in by["search"].content[0].text
    found = by["search"].structured_content["hits"]  # the hits themselves, each where it belongs
    # by words (the default, hybrid, also brings what a turn about the parser ended with: its summary's members)
    assert found and all("parser" in (h["snippet"] + " ".join(h["paths"])).lower() for h in found)
    # an agent's event belongs to its session; agentlog's own (a memory) to none
    assert all(h["session_id"].startswith("ses_") if h["provider"] != "agentlog" else h["session_id"] is None
               for h in found)
    placed = [h for h in found if h["attempt_id"] and h["turn_id"] and h["attempt_outcome"]]
    assert placed and all(f"turn_id={h['turn_id']}" in by["search"].content[0].text for h in placed)
    assert by["schema"].structured_content["tables"][0]["name"] == "attempts"
    assert by["memory_get"].structured_content["id"] == mem.id


def test_bad_arguments_are_errors_not_crashes_and_propose_only_proposes(home: str) -> None:
    before_memories = len(S.list_memories(home, limit=1000))
    before_open = len(list_proposals(home, status="open"))
    calls = [
        ("why", {"subject": "'; DROP TABLE events; --"}), ("state_at", {"at": "tomorrow at noon; SHOW"}),
        ("query", {"statement": "delete from events"}), ("evidence", {"subject": "att_ffffffffffff"}),
        ("memory_get", {"ident": "no-such-memory"}), ("failures", {"max_rows": 0}),
        ("memory_propose", {"changes": [{"op": "create", "kind": "fact", "title": "proposed by an agent",
                                         "attributes": {"statement": "s"}}], "title": "learned"}),
        ("memory_propose", {"changes": [{"op": "create", "kind": "no-such-kind", "title": "x"}], "title": "bad"}),
        ("status", {}),
    ]
    _, results = asyncio.run(_session(home, calls))
    assert [r.is_error for r in results] == [True, True, True, True, True, True, False, True, False]
    assert all(r.content[0].text for r in results)
    assert len(S.list_memories(home, limit=1000)) == before_memories  # nothing written but the proposal
    opened = list_proposals(home, status="open")
    assert len(opened) == before_open + 1 and opened[0].title == "learned" and opened[0].actor == "agent"


def test_mcp_help(tmp_path: Path) -> None:
    import subprocess

    r = subprocess.run([sys.executable, "-m", "agentlog", "mcp", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "memory_propose" in r.stdout


def test_a_statement_s_rows_keep_to_the_row_budget(home: str) -> None:
    from agentlog.mcp import tools as mcp_tools

    _, everything = mcp_tools.query(home, statement="SHOW ATTEMPTS", max_rows=1000)
    assert len(everything["rows"]) > 1 and everything["truncated"] is False
    text, one = mcp_tools.query(home, statement="SHOW ATTEMPTS", max_rows=1)
    assert len(one["rows"]) == 1 and one["truncated"] is True
    assert one["rows"][0] == everything["rows"][0]


def test_http_transport_refuses_a_client_without_the_token(tmp_path: Path) -> None:
    """Issue 27, finding 14: ``agentlog mcp --http`` answered anyone on the machine. Now a
    request needs the bearer token kept 0600 under the data root (never printed)."""
    import json as _json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    from agentlog.mcp.http_auth import token_path

    home = tmp_path / "home"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "mcp", "--http", "--port", str(port)],
                            env={**os.environ, "AGENTLOG_HOME": str(home)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        body = _json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()

        def post(token: str | None) -> int:
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return int(r.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        deadline = time.monotonic() + 60
        while True:
            try:
                status = post(None)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        assert status == 401
        assert post("not-the-token") == 401
        token_file = Path(token_path(str(home)))
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        assert post(token) == 200
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=20)
    assert token not in err and "mcp-token" in err


def test_memory_propose_takes_the_natural_short_form_and_shows_the_shape_when_wrong(home: str) -> None:
    """Issue 27, finding 5: no agent got the argument shape right on its first call. The short
    form (kind, title, statement, evidence as "type:value") is accepted over the real protocol;
    a wrong call is answered with the right shapes."""
    before_open = len(list_proposals(home, status="open"))
    calls = [
        ("memory_propose", {"kind": "fact", "title": "The API listens on 8080",
                            "evidence": ["file:src/main.py"]}),
        ("memory_propose", {"kind": "decision", "title": "Use uv", "statement": "uv, not pip"}),
        ("memory_propose", {"title": "nothing to propose"}),
        # a pitfall also needs "avoid": the answer names it and how to give it, and with it the call works
        ("memory_propose", {"kind": "pitfall", "title": "pytest -x", "statement": "-x hides later failures"}),
        ("memory_propose", {"kind": "pitfall", "title": "pytest -x", "statement": "-x hides later failures",
                            "attributes": {"avoid": "run the whole suite"}}),
    ]
    _, results = asyncio.run(_session(home, calls))
    assert [r.is_error for r in results] == [False, False, True, True, False]
    assert 'a pitfall also needs avoid: add "attributes": {"avoid": "…"}' in results[3].content[0].text
    assert "short form" in results[2].content[0].text and '"kind": "fact"' in results[2].content[0].text
    opened = list_proposals(home, status="open")[: len(list_proposals(home, status="open")) - before_open]
    made = {c["title"]: c for p in opened for c in p.changes}
    assert made["The API listens on 8080"]["attributes"] == {"statement": "The API listens on 8080"}
    assert made["The API listens on 8080"]["evidence"][0]["type"] == "file"
    assert made["Use uv"]["attributes"]["chosen"] == "uv, not pip"
    assert made["pytest -x"]["attributes"] == {"symptom": "-x hides later failures", "avoid": "run the whole suite"}
