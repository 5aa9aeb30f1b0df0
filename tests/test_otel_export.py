"""`agentlog otel export`: a recorded session (real hook, real receiver, the SDK's telemetry) sent
as GenAI spans — into a real Arize Phoenix server started by the test and read back through its
REST API, and into agentlog's own receiver — with the same span and trace ids every time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_support import Receiver, log_events, record_scenario

#: the Arize Phoenix release the test runs (its own venv: its client package's pytest plugin and
#: its dependencies stay out of the suite's environment)
PHOENIX: str = "arize-phoenix==20.26.1"


def _export(*args: str, home: Path) -> dict[str, Any]:
    from click.testing import CliRunner

    from agentlog.cli import cli

    out = CliRunner(env={"AGENTLOG_HOME": str(home)}).invoke(cli, ["otel", "export", "--json", *args])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _expected(home: Path) -> dict[str, Any]:
    from agentlog.operations.refresh import run_sql

    res = run_sql(str(home), "select tool_name, provider_call_id, outcome_status from tool_calls order by tool_name")
    turns = run_sql(str(home), "select count(*) from turns").rows[0][0]
    usage = run_sql(str(home), "select count(*) from usage").rows[0][0]
    errors = run_sql(str(home), "select count(*) from telemetry where record = 'api_error'").rows[0][0]
    return {"calls": res.rows, "turns": turns, "chats": usage + errors}


def test_export_into_our_own_receiver_twice_gives_the_same_spans(agentlog_home: Path, tmp_path: Path) -> None:
    record_scenario(agentlog_home, tmp_path)
    want = _expected(agentlog_home)
    sink = tmp_path / "sink"
    sink.mkdir()
    receiver = Receiver(sink)
    try:
        first = _export("--endpoint", receiver.url, home=agentlog_home)
        spans = [ev for _, ev in log_events(sink, "otel")]
        second = _export("--endpoint", receiver.url, "--session", "0b3c9a52-join-test", home=agentlog_home)
        again = [ev for _, ev in log_events(sink, "otel")][len(spans):]
    finally:
        receiver.stop()
    assert first["sessions"] == second["sessions"] == 1
    assert first["spans"] == second["spans"] == len(spans) == len(again) == 1 + want["turns"] + 2 + want["chats"]

    def key(ev: dict[str, Any]) -> tuple[Any, ...]:
        a = ev["attrs"]
        return a["trace_id"], a["span_id"], a.get("parent_span_id"), ev["provider_event_name"]

    assert sorted(map(key, spans)) == sorted(map(key, again))  # the same ids, the same tree
    assert len({key(ev)[0] for ev in spans}) == 1
    names = sorted(ev["provider_event_name"] for ev in spans)
    assert names.count("invoke_agent Claude Code") == 1 + want["turns"]
    assert {n for n in names if n.startswith("execute_tool")} == {"execute_tool Bash", "execute_tool Read"}
    # content stays home without --include-content
    assert not any("exit 3" in json.dumps(ev) for ev in spans)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def phoenix_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python with Arize Phoenix: $AGENTLOG_TEST_PHOENIX_PYTHON, else a fresh venv made once
    per test session (pip, from PyPI)."""
    given = os.environ.get("AGENTLOG_TEST_PHOENIX_PYTHON")
    if given:
        return given
    import venv

    where = tmp_path_factory.mktemp("phoenix-venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    python = str(where / "bin" / "python")
    r = subprocess.run([python, "-m", "pip", "install", "--quiet", PHOENIX], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode != 0:
        pytest.fail(f"pip could not install {PHOENIX} into a fresh venv: {r.stderr[-2000:]}")
    return python


@pytest.fixture
def phoenix(phoenix_python: str, tmp_path: Path) -> Iterator[str]:
    """A real Phoenix server on loopback (its OTLP/HTTP endpoint and REST API on one port)."""
    port, grpc = _free_port(), _free_port()
    work = tmp_path / "phoenix"
    work.mkdir()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(port), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_TELEMETRY_ENABLED": "false"}
    out = open(work / "server.log", "wb")
    proc = subprocess.Popen([phoenix_python, "-m", "phoenix.server.main", "serve"], env=env, stdout=out,
                            stderr=subprocess.STDOUT, cwd=str(work))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (work / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Phoenix did not start in 180 s"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        out.close()


def _phoenix_spans(url: str) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        q = "limit=1000" + (f"&cursor={cursor}" if cursor else "")
        with urllib.request.urlopen(f"{url}/v1/projects/agentlog/spans?{q}", timeout=30) as r:
            body = json.loads(r.read())
        spans.extend(body["data"])
        cursor = body.get("next_cursor")
        if not cursor:
            return spans
    raise AssertionError("too many pages")


def _settled(url: str, count: int) -> list[dict[str, Any]]:
    """Phoenix's spans once it has inserted ``count`` (it writes them in the background)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            spans = _phoenix_spans(url)
        except urllib.error.HTTPError:  # the project appears with its first span
            spans = []
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


@pytest.mark.slow
def test_export_into_a_real_phoenix_server(agentlog_home: Path, tmp_path: Path, phoenix: str) -> None:
    record_scenario(agentlog_home, tmp_path)
    want = _expected(agentlog_home)
    res = _export("--endpoint", phoenix, "--include-content", home=agentlog_home)
    spans = _settled(phoenix, res["spans"])
    assert len(spans) == res["spans"] == 1 + want["turns"] + 2 + want["chats"]
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = [s for s in spans if not s.get("parent_id")]
    assert len(roots) == 1 and roots[0]["name"] == "invoke_agent Claude Code"
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    for s in spans:  # every parent link points at a span of the export
        assert not s.get("parent_id") or s["parent_id"] in by_id
    tools = {s["attributes"]["gen_ai.tool.name"]: s for s in spans if s["name"].startswith("execute_tool")}
    assert {(name, s["attributes"]["gen_ai.tool.call.id"], s["status_code"]) for name, s in tools.items()} == {
        ("Bash", "toolu_01", "ERROR"), ("Read", "toolu_02", "OK")}
    assert "exit 3" in tools["Bash"]["attributes"]["gen_ai.tool.call.arguments"]
    turn_parents = {by_id[t["parent_id"]]["attributes"].get("agentlog.kind") for t in tools.values()}
    assert turn_parents == {"turn"}
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) == want["chats"] and {by_id[c["parent_id"]]["attributes"]["agentlog.kind"] for c in chats} == {
        "turn"}
    assert sum(c["attributes"].get("gen_ai.usage.input_tokens", 0) for c in chats) == 201
    assert [c["status_code"] for c in chats].count("ERROR") == 1  # the API error
    # a second export adds nothing: the same ids
    again = _export("--endpoint", phoenix, "--include-content", home=agentlog_home)
    assert again["spans"] == res["spans"]
    time.sleep(3)
    after = _phoenix_spans(phoenix)
    assert sorted(s["context"]["span_id"] for s in after) == sorted(by_id)


@pytest.mark.slow
def test_the_daemon_streams_sessions_to_an_endpoint(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.operations.daemon import start, stop

    record_scenario(agentlog_home, tmp_path)
    sink = tmp_path / "sink"
    sink.mkdir()
    receiver = Receiver(sink)
    try:
        (agentlog_home / "config.toml").write_text(
            f'otel_export_endpoint = "{receiver.url}"\notel_export_seconds = 1\n')
        start(str(agentlog_home))
        try:
            deadline = time.monotonic() + 60
            while len({ev["attrs"]["span_id"] for _, ev in log_events(sink, "otel")}) < 7:
                assert time.monotonic() < deadline, "the daemon sent no spans"
                time.sleep(0.3)
            time.sleep(2.5)  # more passes: the same spans again
        finally:
            stop(str(agentlog_home))
    finally:
        receiver.stop()
    spans = [ev for _, ev in log_events(sink, "otel")]
    want = _expected(agentlog_home)
    assert len({ev["attrs"]["span_id"] for ev in spans}) == 1 + want["turns"] + 2 + want["chats"]
    log = (agentlog_home / "state" / "daemon.log").read_text()
    assert f"streaming sessions to {receiver.url}" in log and "otel export pass ended with exit 0" in log


def test_subagent_spans_are_children_of_the_call_that_started_them(agentlog_home: Path, tmp_path: Path) -> None:
    """Two Task calls running at once, each starting a subagent that runs a Bash call (through the
    real hook): each subagent's invoke_agent span is the child of its own Task call's
    execute_tool span (the call's result names the subagent), and the subagent's call its child."""
    from otel_support import _hook

    from agentlog.operations.refresh import run_sql

    work = tmp_path / "proj"
    work.mkdir()
    _hook(work, hook_event_name="SessionStart", source="startup")
    _hook(work, hook_event_name="UserPromptSubmit", prompt="two helpers")
    for n in (1, 2):
        _hook(work, hook_event_name="PreToolUse", tool_name="Task", tool_use_id=f"toolu_T{n}",
              tool_input={"description": f"helper {n}", "prompt": "look", "subagent_type": "general-purpose"})
    for n in (2, 1):  # the second helper starts first
        _hook(work, hook_event_name="SubagentStart", agent_id=f"agent-{n}", agent_type="general-purpose")
    for n in (1, 2):
        bash = {"command": f"echo {n}"}
        _hook(work, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id=f"toolu_B{n}", tool_input=bash,
              agent_id=f"agent-{n}", agent_type="general-purpose")
        _hook(work, hook_event_name="PostToolUse", tool_name="Bash", tool_use_id=f"toolu_B{n}", tool_input=bash,
              agent_id=f"agent-{n}", agent_type="general-purpose",
              tool_response={"stdout": str(n), "stderr": "", "interrupted": False})
    for n in (1, 2):
        _hook(work, hook_event_name="SubagentStop", agent_id=f"agent-{n}", agent_type="general-purpose",
              stop_hook_active=False)
    for n in (2, 1):
        _hook(work, hook_event_name="PostToolUse", tool_name="Task", tool_use_id=f"toolu_T{n}",
              tool_input={"description": f"helper {n}", "prompt": "look", "subagent_type": "general-purpose"},
              tool_response={"status": "completed", "agentId": f"agent-{n}", "content": [{"type": "text",
                                                                                        "text": "done"}]})
    _hook(work, hook_event_name="Stop", stop_hook_active=False)
    agents = run_sql(str(agentlog_home), "select provider_call_id, provider_agent_id from tool_calls").rows
    assert sorted(agents) == [("toolu_B1", "agent-1"), ("toolu_B2", "agent-2"), ("toolu_T1", None),
                              ("toolu_T2", None)], agents

    sink = tmp_path / "sink"
    sink.mkdir()
    receiver = Receiver(sink)
    try:
        _export("--endpoint", receiver.url, home=agentlog_home)
        spans = [ev["attrs"] | {"name": ev["provider_event_name"]} for _, ev in log_events(sink, "otel")]
    finally:
        receiver.stop()
    by_id = {s["span_id"]: s for s in spans}
    raw = {ev["attrs"]["span_id"]: ev["raw"]["attributes"] for _, ev in log_events(sink, "otel")}
    for n in (1, 2):
        (sub,) = [s for s in spans if raw[s["span_id"]].get("gen_ai.agent.id") == f"agent-{n}"]
        spawner = by_id[sub["parent_span_id"]]
        assert raw[spawner["span_id"]]["gen_ai.tool.call.id"] == f"toolu_T{n}", raw[spawner["span_id"]]
        (bash,) = [s for s in spans if raw[s["span_id"]].get("gen_ai.tool.call.id") == f"toolu_B{n}"]
        assert bash["parent_span_id"] == sub["span_id"]


def test_without_the_agent_id_a_subagent_goes_under_the_task_call_holding_it() -> None:
    """Older releases name no agent in the Task result: the subagent's span goes under the Task
    call of its turn whose span holds the subagent's calls; with none, under the turn."""
    from agentlog.otel.spans import session_plans, span_id

    def call(cid: str, start: int, end: int, aid: str | None = None, name: str = "Task") -> dict[str, Any]:
        return {"tool_call_id": cid, "turn_id": "t1", "provider_agent_id": aid, "tool_name": name,
                "tool_category": "subagent" if name == "Task" else "shell", "started_us": start, "finished_us": end}

    calls = [call("T1", 100, 200), call("T2", 300, 400), call("b1", 120, 150, "a1", "Bash"),
             call("b2", 310, 390, "a2", "Bash"), call("b3", 500, 510, "a3", "Bash")]
    plans = session_plans({"session_id": "s", "provider": "claude_code", "started_us": 0},
                          [{"turn_id": "t1", "turn_index": 1, "started_us": 50, "ended_us": 600}], calls, [])
    parent = {p.attributes.get("gen_ai.agent.id"): p.parent for p in plans if p.name == "invoke_agent subagent"}
    assert parent == {"a1": span_id("tool", "T1"), "a2": span_id("tool", "T2"), "a3": span_id("turn", "t1")}
