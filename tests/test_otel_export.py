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
