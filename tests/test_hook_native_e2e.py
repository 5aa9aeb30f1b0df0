"""The real native client ``agentlog-hook`` against the real capture server (issue 29).

tests/test_native_client.py runs the client against a fake daemon and
tests/test_capture_server.py the server against a Python stand-in of the client; here
both real ends meet. The client is built once per module with ``build_client``, twice:

- ``plain``: its fallback is this interpreter and the package's ``_hook.py``, as installed;
- ``noting``: its fallback is a shell wrapper that notes the call (``$AGENTLOG_TEST_CALL``
  and the handed event id) in ``$AGENTLOG_TEST_FALLBACKS`` and then execs the same
  interpreter, so the kill test knows which calls fell back.

The server is a ``CaptureServer`` in this process, or a real ``agentlog daemon run`` where
it is killed. Frames are compared as the event's bytes, with only what cannot be equal
blanked: ``attrs.hook_us`` (each path times itself) and, where the two paths ran
independently, the event id and the clock (``captured_at``, and ``observed_at`` where it
is the clock).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.capture.server import CaptureServer, socket_path
from agentlog.core.paths import diagnostics_log
from agentlog.install.native_build import build_client
from agentlog.log.frame import event_bytes
from agentlog.log.layout import iter_logs

from conftest import hook_argv
from test_capture_server import (
    HOOK_FIXTURES, frames_by_id, handover, python_hook_in_process, start_daemon, verify_ok,
)
from test_golden_claude_fixtures import genuine_payload
from test_hook import CANARIES, _secret_payloads, all_bytes_on_disk, payload

RELAXED = {"AGENTLOG_DURABILITY": "relaxed"}
ACK_MS = {"AGENTLOG_HOOK_ACK_MS": "30000"}  # no fallback by accident on a loaded machine
WRAPPER = """#!/bin/sh
if [ -n "$AGENTLOG_TEST_FALLBACKS" ]; then
  printf '%s %s\\n' "${AGENTLOG_TEST_CALL:--}" "$AGENTLOG_HOOK_EVENT_ID" >> "$AGENTLOG_TEST_FALLBACKS"
fi
exec PYTHON "$@"
"""


class Clients:
    def __init__(self, plain: str, noting: str) -> None:
        self.plain = plain
        self.noting = noting


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Clients:
    where = tmp_path_factory.mktemp("e2e-clients")
    plain = build_client(str(where / "plain"))
    if plain.path is None:
        pytest.skip(f"no native hook client: {plain.reason}")
    wrapper = where / "python-noting"
    wrapper.write_text(WRAPPER.replace("PYTHON", sys.executable))
    wrapper.chmod(0o700)
    noting = build_client(str(where / "noting"), python=str(wrapper))
    assert noting.path is not None, noting.reason
    return Clients(plain.path, noting.path)


@pytest.fixture
def server(agentlog_home: Path) -> Iterator[CaptureServer]:
    with CaptureServer(str(agentlog_home)) as s:
        yield s


def native(binary: str, stdin: bytes | None, agent: str = "claude-code", *args: str, env: dict[str, str] | None = None,
           cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([binary, agent, *args], input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, env={**os.environ, **ACK_MS, **(env or {})}, timeout=120, cwd=cwd)


def python(root: Path, stdin: bytes | None, agent: str = "claude-code", *args: str, env: dict[str, str] | None = None,
           cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(hook_argv(agent, *args), input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, env={**os.environ, **(env or {}), "AGENTLOG_HOME": str(root)},
                          timeout=120, cwd=cwd)


_ID = re.compile(rb'"event_id":"[0-9a-f-]{36}"')
_AT = re.compile(rb'"captured_at":(\d+)')
_HOOK_US = re.compile(rb'"hook_us":\d+')


def blanked(ev: bytes) -> bytes:
    """The event's bytes with the id, the clock and hook_us blanked (the first of each: the event's own)."""
    at = _AT.search(ev)
    assert at is not None
    ev = _ID.sub(b'"event_id":"-"', ev, count=1)
    ev = ev.replace(b'"observed_at":' + at.group(1) + b",", b'"observed_at":0,', 1)
    ev = _AT.sub(b'"captured_at":0', ev, count=1)
    return _HOOK_US.sub(b'"hook_us":0', ev, count=1)


def events(root: Path) -> list[bytes]:
    """Every event's bytes in every log of ``root``, in log and frame order."""
    out = []
    for path in iter_logs(str(root)):
        with open(path, "rb") as f:
            out += [event_bytes(line) for line in f]
    return out


def complaints(root: Path) -> list[str]:
    try:
        lines = Path(diagnostics_log(str(root))).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line)["message"] for line in lines]


def fixture_payloads() -> list[bytes]:
    assert HOOK_FIXTURES is not None
    return [json.dumps(genuine_payload(element)).encode()
            for fixture in sorted(HOOK_FIXTURES.glob("*.json"))
            for element in json.loads(fixture.read_text(encoding="utf-8"))]


needs_fixtures = pytest.mark.skipif(HOOK_FIXTURES is None or not HOOK_FIXTURES.is_dir(),
                                    reason="shared fixtures not found (see agentlog.operations.fixtures)")


# -- the same frames as the Python hook --------------------------------------------------------


@needs_fixtures
def test_every_real_payload_through_the_client_makes_the_python_hooks_frame(
        clients: Clients, agentlog_home: Path, tmp_path: Path, server: CaptureServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """All 518 real Claude Code payloads through the C client with the server up (each
    answered 'A'), then through ``hook.main`` (what ``_hook.py`` runs) handed the event id and
    clock the client made, as its fallback would be: the same event bytes but for
    attrs.hook_us, and the same stdout."""
    data = fixture_payloads()
    assert len(data) == 518
    python_root = tmp_path / "python-hook"
    replies = [native(clients.plain, d, env=RELAXED) for d in data]
    assert all(r.returncode == 0 and r.stderr == b"" for r in replies)
    assert server.stats()["acknowledged"] == len(data)  # none fell back
    by_id = frames_by_id(agentlog_home)
    assert len(by_id) == len(data) and all(len(v) == 1 for v in by_id.values())
    # the runs were one after another: their clocks give their order
    made = sorted((json.loads(v[0])["captured_at"], eid) for eid, v in by_id.items())
    for (at, eid), d, r in zip(made, data, replies):
        out = python_hook_in_process(python_root, "claude-code", d, {**RELAXED, **handover(eid, at, len(d))},
                                     monkeypatch)
        assert out == r.stdout
    via_python = frames_by_id(python_root)
    assert via_python == by_id
    verify_ok(agentlog_home, monkeypatch)


@needs_fixtures
def test_a_sample_of_real_payloads_matches_an_independent_python_hook_process(
        clients: Clients, agentlog_home: Path, tmp_path: Path, server: CaptureServer) -> None:
    """Without any handing over: 24 seeded real payloads through the client and through the
    Python hook as a real process, each making its own id and clock. The events are equal
    with those blanked; stdout and stderr are equal."""
    data = random.Random(29).sample(fixture_payloads(), 24)
    python_root = tmp_path / "python-hook"
    for d in data:
        a, b = native(clients.plain, d, env=RELAXED, cwd=str(tmp_path)), python(python_root, d, env=RELAXED,
                                                                                cwd=str(tmp_path))
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert server.stats()["acknowledged"] == len(data)
    assert [blanked(e) for e in events(agentlog_home)] == [blanked(e) for e in events(python_root)]


BIG = b'{"session_id": "big", "hook_event_name": "PostToolUse", "tool_response": "'
"""The head of a payload over 16 MiB (:func:`stdin_of` pads it to 17 MiB)."""

EDGES: dict[str, tuple[str, bytes | None, tuple[str, ...]]] = {
    "over 16 MiB": ("claude-code", BIG, ()),
    "empty stdin": ("claude-code", b"", ()),
    "no stdin (/dev/null)": ("claude-code", None, ()),
    "invalid UTF-8": ("claude-code", b'{"session_id": "u8", "hook_event_name": "UserPromptSubmit", '
                      b'"prompt": "caf\xe9 \xff"}', ()),
    "not UTF-8 at all": ("claude-code", bytes(range(256)) * 4, ()),
    "codex notify argument": ("codex", None, (json.dumps({
        "type": "agent-turn-complete", "thread-id": "n1", "turn-id": "1", "input-messages": ["hi"],
        "last-assistant-message": "ok"}),)),
    "gemini reply": ("gemini-cli", json.dumps({"session_id": "g1", "hook_event_name": "BeforeTool",
                                               "tool_name": "x"}).encode(), ()),
}


def stdin_of(case: str) -> bytes | None:
    stdin = EDGES[case][1]
    if stdin is not None and stdin is BIG:
        return stdin + b"x" * (17 << 20) + b'"}'
    return stdin


@pytest.mark.parametrize("case", list(EDGES))
def test_edge_inputs_behave_as_in_the_python_hook(case: str, clients: Clients, agentlog_home: Path, tmp_path: Path,
                                                  server: CaptureServer) -> None:
    """The client (answered by the server) and the Python hook process: exit 0 both, the same
    stdout, the same diagnostic (on the Python hook's stderr; in the diagnostics log on both
    sides), the same event but for id, clock and hook_us."""
    agent, _, args = EDGES[case]
    stdin = stdin_of(case)
    python_root = tmp_path / "python-hook"
    a = native(clients.plain, stdin, agent, *args, cwd=str(tmp_path))
    b = python(python_root, stdin, agent, *args, cwd=str(tmp_path))
    assert server.wait_idle()  # its diagnostic is written once the client has its answer
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout and a.stderr == b""
    assert server.stats()["acknowledged"] == 1
    assert complaints(agentlog_home) == complaints(python_root) == [line.decode() for line in b.stderr.splitlines()]
    (ev_a,), (ev_b,) = events(agentlog_home), events(python_root)
    assert blanked(ev_a) == blanked(ev_b)
    if case == "over 16 MiB":
        assert json.loads(ev_a)["attrs"]["payload_bytes"] == len(stdin or b"")


@pytest.mark.parametrize("how", ["closed", "broken pipe"])
def test_a_closed_stdout_behaves_as_in_the_python_hook(how: str, clients: Clients, agentlog_home: Path,
                                                       tmp_path: Path, server: CaptureServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply (Codex's Stop wants "{}") with fd 1 closed, or a pipe nobody reads: exit 0,
    nothing on stderr, the frame recorded (and nothing written where the reply would have
    gone: the chains verify), on both paths."""
    data = json.dumps({"session_id": "c1", "hook_event_name": "Stop", "stop_hook_active": False}).encode()
    python_root = tmp_path / "python-hook"
    results = []
    for argv, root in (([clients.plain, "codex"], agentlog_home), (hook_argv("codex"), python_root)):
        env = {**os.environ, **ACK_MS, "AGENTLOG_HOME": str(root)}
        if how == "closed":
            p = subprocess.run(["/bin/sh", "-c", 'exec "$@" >&-', "sh", *argv], input=data, stderr=subprocess.PIPE,
                               env=env, timeout=120)
            results.append((p.returncode, p.stderr))
        else:
            r, w = os.pipe()
            os.close(r)
            try:
                p = subprocess.run(argv, input=data, stdout=w, stderr=subprocess.PIPE, env=env, timeout=120)
            finally:
                os.close(w)
            results.append((p.returncode, p.stderr))
    assert results == [(0, b""), (0, b"")]
    assert server.stats()["acknowledged"] == 1
    assert [blanked(e) for e in events(agentlog_home)] == [blanked(e) for e in events(python_root)]
    verify_ok(agentlog_home, monkeypatch)
    verify_ok(python_root, monkeypatch)


def test_secret_canaries_never_reach_disk_through_the_client(clients: Clients, agentlog_home: Path,
                                                             tmp_path: Path) -> None:
    """With the server up, and with none (the fallback): no canary anywhere under the data root."""
    with CaptureServer(str(agentlog_home)) as srv:
        for d in _secret_payloads():
            r = native(clients.plain, d)
            assert r.returncode == 0 and r.stderr == b""
        assert srv.stats()["acknowledged"] == len(_secret_payloads())
    for d in _secret_payloads():
        assert native(clients.plain, d).returncode == 0
    assert len(events(agentlog_home)) == 2 * len(_secret_payloads())
    disk = all_bytes_on_disk(agentlog_home)
    for name, secret in CANARIES.items():
        assert secret.encode() not in disk, name
    assert b"[REDACTED:" in disk


# -- no daemon: the fallback -------------------------------------------------------------------


def test_with_no_daemon_the_client_runs_the_python_hook(clients: Clients, agentlog_home: Path, tmp_path: Path) -> None:
    """No run directory, then a socket nobody listens on (a killed daemon's): the client
    execs the real Python hook, quietly, and the frames, stdout and stderr are the Python
    hook's own (bar id, clock and hook_us)."""
    cases = [("claude-code", payload(prompt="no daemon"), ()), ("codex", json.dumps(
        {"session_id": "c2", "hook_event_name": "Stop", "stop_hook_active": False}).encode(), ()),
        ("claude-code", b"{not json", ()), *[(a, s, x) for a, s, x in EDGES.values() if s is not BIG]]
    python_root = tmp_path / "python-hook"

    def both() -> None:
        for agent, stdin, args in cases:
            a = native(clients.plain, stdin, agent, *args, cwd=str(tmp_path))
            b = python(python_root, stdin, agent, *args, cwd=str(tmp_path))
            assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr) and a.returncode == 0

    assert not (agentlog_home / "run").exists()
    both()
    with CaptureServer(str(agentlog_home)):  # leaves run/ behind; then a stale socket like a kill -9's
        pass
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(socket_path(str(agentlog_home)))
    stale.close()
    assert stat.S_ISSOCK(os.lstat(socket_path(str(agentlog_home))).st_mode)
    both()
    assert [blanked(e) for e in events(agentlog_home)] == [blanked(e) for e in events(python_root)]
    ids = [json.loads(e)["event_id"] for e in events(agentlog_home)]
    assert all(eid[14] == "7" for eid in ids) and len(set(ids)) == len(ids) == 2 * len(cases)


# -- many at once --------------------------------------------------------------------------------


def _spawn_all(binary: str, bodies: list[bytes], env: dict[str, str]) -> list[int]:
    procs = [subprocess.Popen([binary, "claude-code"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env={**os.environ, **ACK_MS, **env}) for _ in bodies]
    for p, body in zip(procs, bodies):
        assert p.stdin is not None
        p.stdin.write(body)
        p.stdin.close()
    codes = []
    for p in procs:
        assert p.stderr is not None
        with p.stderr:
            err = p.stderr.read()
        codes.append(p.wait(120))
        assert err == b"", err
    return codes


@pytest.mark.parametrize("sessions", [1, 100])
def test_100_concurrent_native_hooks(sessions: int, clients: Clients, agentlog_home: Path, server: CaptureServer,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """100 client processes at once (strict durability), into one session or into 100: all
    exit 0, all answered by the server, each prompt recorded exactly once, chains verify."""
    bodies = [payload(session_id=f"s{i % sessions}", prompt=f"call {i}") for i in range(100)]
    t0 = time.monotonic()
    assert _spawn_all(clients.plain, bodies, {}) == [0] * 100
    took = time.monotonic() - t0
    stats = server.stats()
    assert stats["acknowledged"] == 100 and stats["frames"] == 100
    prompts = Counter(json.loads(e)["content"]["prompt"] for e in events(agentlog_home))
    assert prompts == Counter({f"call {i}": 1 for i in range(100)})
    report = verify_ok(agentlog_home, monkeypatch)
    assert report["frames"] == 100 and report["sessions"] == sessions
    print(f"{sessions} session(s): 100 native hooks in {took:.2f} s, {stats['appends']} appends")


# -- kill -9 of the daemon -----------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_of_a_real_daemon_during_native_hooks(clients: Clients, agentlog_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """240 real client processes, 6 at a time into 12 sessions, while a real ``agentlog daemon
    run`` is killed with SIGKILL twice at seeded points and started again after each. A
    fifth of the clients wait only 1 ms for their answer, so that they fall back while the
    server is at their request. Every call exited 0 and its prompt is in the logs exactly
    once; every call made while the daemon was down fell back (the wrapper noted it) and its
    frame carries the id the client handed over; every chain verifies."""
    rng = random.Random(int(os.environ.get("AGENTLOG_TEST_SEED", "2929")))
    fallbacks = tmp_path / "fallbacks"
    env = {**os.environ, "AGENTLOG_HOME": str(agentlog_home), "AGENTLOG_TEST_FALLBACKS": str(fallbacks)}
    calls = 240

    def daemon() -> subprocess.Popen[bytes]:
        return start_daemon(agentlog_home, env)

    kill1 = rng.randrange(20, 60)
    up1 = kill1 + rng.randrange(15, 35)
    kill2 = up1 + rng.randrange(30, 60)
    up2 = kill2 + rng.randrange(15, 35)
    proc = daemon()
    down: set[int] = set()
    is_down = False
    running: list[tuple[int, subprocess.Popen[bytes]]] = []
    codes: dict[int, int] = {}
    in_flight: list[int] = []  # clients still running at each kill
    t0 = time.monotonic()
    try:
        for i in range(calls):
            if i in (kill1, kill2):
                time.sleep(rng.random() * 0.03)  # while requests are in flight
                in_flight.append(sum(p.poll() is None for _, p in running))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                is_down = True
            if i in (up1, up2):
                proc = daemon()  # the stale socket is replaced
                is_down = False
            while len(running) >= 6:
                for j, p in running:
                    if p.poll() is not None:
                        codes[j] = p.returncode
                running = [(j, p) for j, p in running if j not in codes]
                time.sleep(0.002)
            if is_down:
                down.add(i)
            body = payload(session_id=f"k{rng.randrange(12)}", prompt=f"call {i} " + "x" * rng.randrange(0, 3000))
            ack = "1" if rng.random() < 0.2 else "30000"
            p = subprocess.Popen([clients.noting, "claude-code"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env={**env, "AGENTLOG_HOOK_ACK_MS": ack,
                                                                 "AGENTLOG_TEST_CALL": str(i)})
            assert p.stdin is not None
            p.stdin.write(body)
            p.stdin.close()
            running.append((i, p))
        for j, p in running:
            codes[j] = p.wait(120)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    took = time.monotonic() - t0
    assert codes == {i: 0 for i in range(calls)}
    noted = dict(line.split() for line in fallbacks.read_text().splitlines())
    by_call: dict[int, list[dict[str, Any]]] = {}
    gaps = 0
    for ev in (json.loads(e) for e in events(agentlog_home)):
        prompt = ev.get("content", {}).get("prompt", "")
        if ev["kind"] == "capture_gap":
            gaps += 1  # a frame the kill tore, cut off and said so
            continue
        by_call.setdefault(int(prompt.split()[1]), []).append(ev)
    assert {i: len(by_call.get(i, [])) for i in range(calls)} == {i: 1 for i in range(calls)}
    assert down and {str(i) for i in down} <= set(noted)
    for call, eid in noted.items():
        assert by_call[int(call)][0]["event_id"] == eid
    last = json.loads((agentlog_home / "state" / "hook-server.json").read_text())  # the last daemon's numbers
    print(f"kill -9 round: {calls} calls in {took:.1f} s, {len(noted)} fell back ({len(down)} while the daemon "
          f"was down), killed before calls {kill1} and {kill2} with {in_flight} clients running, restarted before "
          f"{up1} and {up2}; the last daemon found {last['already_present']} of its {last['acknowledged']} already "
          f"written by a fallback; {gaps} gap frames")
    assert len(noted) < calls  # the server answered the rest
    verify_ok(agentlog_home, monkeypatch)
