"""Encryption at rest (issue 34 part 3) under the dashboard and the MCP server: with the key they
show what was recorded; serving writes no captured text under the data root; without the key they
answer with a clear message naming ``agentlog keys unlock`` (never a traceback or a 500 page),
and verifying needs no key. Both servers are real processes (``agentlog serve`` on loopback,
``agentlog mcp`` over stdio); the hook runs as an agent runs it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.core import atrest
from browser_support import serving
from test_at_rest import CANARIES, OUTPUT, PASS, PROMPT, SID, _found, session_payloads

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def runtime(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path_factory.mktemp("runtime")
    monkeypatch.setenv(atrest.RUNTIME_ENV, str(d))
    return d


def _cli(*args: str, stdin: str | None = None) -> Any:
    r = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=True)
    assert r.exit_code == 0, (args, r.output[-3000:], r.exception)
    return r


def _hook(payload: bytes) -> None:
    from agentlog.capture.command import hook_argv

    r = subprocess.run(hook_argv("claude-code"), input=payload, capture_output=True, timeout=60, env=dict(os.environ))
    assert r.returncode == 0 and r.stdout == b"", r.stderr


def _record() -> None:
    for payload in session_payloads():
        _hook(payload)


def _pages(url: str, paths: list[str]) -> dict[str, tuple[int, str]]:
    """Each path's (status, body) from the real server, signed in through its one-time token URL."""
    import httpx

    base = url.split("/?", 1)[0]
    with httpx.Client(follow_redirects=True, timeout=60) as c:
        assert c.get(url).status_code in (200, 503)  # (signed in; / itself is locked without the key)
        return {p: (r.status_code, r.text) for p in paths for r in [c.get(base + p)]}


async def _mcp(root: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "agentlog", "mcp"],
                                   env={**os.environ, "AGENTLOG_HOME": root})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return [await session.call_tool(name, args) for name, args in calls]


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def test_the_dashboard_and_mcp_with_encryption_at_rest(agentlog_home: Path, runtime: Path) -> None:
    _cli("keys", "init", "--at-rest", "--passphrase", stdin=PASS + "\n")
    _record()
    sessions = json.loads(_cli("sessions", "--all-projects", "--json").stdout)
    assert len(sessions) == 1
    sid = sessions[0]["session_id"]
    paths = ["/", f"/sessions/{sid}", "/search?q=glimmerstone", "/timeline", "/api/search?q=glimmerstone"]

    # with the key: the pages and the tools show what was recorded
    with serving(str(agentlog_home)) as url:
        got = _pages(url, paths)
    assert all(status == 200 for status, _ in got.values()), {p: s for p, (s, _) in got.items()}
    assert PROMPT in got[f"/sessions/{sid}"][1] and OUTPUT in got[f"/sessions/{sid}"][1]
    assert "glimmerstone" in got["/search?q=glimmerstone"][1] and "glimmerstone" in got["/api/search?q=glimmerstone"][1]
    results = asyncio.run(_mcp(str(agentlog_home), [("search", {"query": "glimmerstone"}),
                                                    ("timeline", {"max_rows": 5})]))
    assert [r.is_error for r in results] == [False, False], [_text(r) for r in results]
    assert OUTPUT in _text(results[0]) or "glimmerstone" in _text(results[0])
    assert "zorblax" in _text(results[1])  # the turn's objective: the prompt
    # serving wrote no captured text under the data root (pages, caches, the live feed's state)
    assert _found(agentlog_home) == {}
    assert SID not in CANARIES  # (the canaries are the content, not ids)

    # without the key: a clear answer naming `keys unlock`, and verify still passes
    _cli("keys", "lock")
    with serving(str(agentlog_home)) as url:
        locked = _pages(url, [f"/sessions/{sid}", "/search?q=glimmerstone", "/api/search?q=glimmerstone"])
    for path, (status, body) in locked.items():
        assert status in (200, 503), (path, status, body[-2000:])
        assert "keys unlock" in body and "Traceback" not in body, (path, body[-2000:])
        assert not any(c in body for c in CANARIES), path
    results = asyncio.run(_mcp(str(agentlog_home), [("search", {"query": "glimmerstone"})]))
    assert results[0].is_error and "keys unlock" in _text(results[0]), _text(results[0])
    _cli("verify")
    assert _found(agentlog_home) == {}
