"""`agentlog daemon`: ingests soon after a hook, refuses to start twice, stops cleanly."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.operations.daemon import DaemonRunning, start, state, stop
from agentlog.store.status import status

from conftest import run_hook


def _events(home: Path) -> int:
    return status(str(home), catch_up=False).events


def _wait_for(pred, seconds: float = 20.0) -> float:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_daemon_ingests_hook_events_and_stops_with_a_final_ingest(agentlog_home: Path) -> None:
    st = start(str(agentlog_home))
    try:
        assert st.running and st.pid
        with pytest.raises(DaemonRunning):
            start(str(agentlog_home))
        r = CliRunner().invoke(cli, ["daemon", "run"])  # a second foreground daemon refuses too
        assert r.exit_code == 1 and "already running" in r.output
        payload = json.dumps({"session_id": "d1", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": "/tmp"}).encode()
        assert run_hook(payload).returncode == 0
        _wait_for(lambda: _events(agentlog_home) == 1)
        for _ in range(3):
            run_hook(payload)
    finally:
        after = stop(str(agentlog_home))
    assert not after.running
    assert _events(agentlog_home) == 4  # the last hooks were ingested on the way out
    assert not state(str(agentlog_home)).running
    log = (agentlog_home / "state" / "daemon.log").read_text()
    assert "started" in log and "final ingest" in log
    r = CliRunner().invoke(cli, ["daemon", "status", "--json"])
    assert r.exit_code == 1 and json.loads(r.stdout)["running"] is False


def test_background_work_runs_at_the_lowest_priority() -> None:
    import sys
    import threading

    from agentlog.operations.daemon import lower_priority

    if not sys.platform.startswith("linux"):
        pytest.skip("per-thread niceness is Linux's")
    seen: list[int] = []

    def work() -> None:
        lower_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [19]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < 19  # the caller's thread is untouched


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_ingest_waits_for_the_logs_to_be_still_and_never_longer_than_max_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.operations import daemon

    clock = _Clock()
    monkeypatch.setattr(daemon.time, "monotonic", clock)
    s = daemon.Settling(settle=0.2, max_lag=3.0)
    # a burst: the logs change at every look, so nothing is ingested until max_lag has passed
    for i in range(29):
        assert not s.due(("log", i))
        clock.t += 0.1
    clock.t += 0.1
    assert s.due(("log", 30))  # 3 s after the first change was seen
    s.done()
    # the next change is ingested once the logs have been still for 0.2 s
    assert not s.due(("log", 31))
    clock.t += 0.1
    assert not s.due(("log", 31))
    clock.t += 0.1
    assert s.due(("log", 31))
    s.done()
    assert daemon.Settling(settle=0, max_lag=3.0).due(("log", 1))  # settle 0: at once


def _nice(pid: int, tid: int | None = None) -> int:
    stat = Path(f"/proc/{pid}/task/{tid or pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


def test_the_daemons_loop_yields_the_cpu_and_its_capture_server_does_not(agentlog_home: Path) -> None:
    """Ingest runs at the lowest priority; the daemon's main thread and the capture server
    (a child) at the first one, also when the server is started again after it died."""
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("per-thread niceness is Linux's")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    st = start(str(agentlog_home))
    stats = agentlog_home / "state" / "hook-server.json"
    try:
        assert st.pid
        pid = st.pid
        # ingest, projection and checkpoints: a worker thread at 19; the main thread keeps its priority
        _wait_for(lambda: any(_nice(pid, int(t)) == 19 for t in os.listdir(f"/proc/{pid}/task")))
        assert _nice(pid) == base
        _wait_for(lambda: stats.exists() and json.loads(stats.read_text()).get("pid"))
        first = json.loads(stats.read_text())["pid"]
        assert _nice(first) == base
        os.kill(first, signal.SIGKILL)
        _wait_for(lambda: json.loads(stats.read_text()).get("pid") not in (None, first), seconds=30)
        again = json.loads(stats.read_text())["pid"]
        assert _nice(again) == base, "the restarted server inherits the main thread's priority, not the worker's"
    finally:
        stop(str(agentlog_home))
