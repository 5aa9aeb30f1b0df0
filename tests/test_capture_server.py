"""The capture server (capture/server.py) against the wire protocol's rules (docs/hook-path.md, "The wire protocol").

``CLIENT`` below is a small Python client of the protocol that follows the client's
rules, fallback included, so that the server's rules can be tested on their own. Its
functions are used in process, and the script itself runs as real client processes in
the kill test. The real C client meets the real server in tests/test_hook_native_e2e.py.
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
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from agentlog.capture import hook, wire
from agentlog.capture.hook_socket import peer_uid
from agentlog.capture.server import CaptureServer, CaptureServerError, probe, socket_path
from agentlog.cli import cli
from agentlog.log.frame import event_bytes
from agentlog.log.layout import iter_logs
from agentlog.log.writer import SessionLog
from agentlog.operations.fixtures import missing, shared_dir

from conftest import HOOK_SCRIPT, run_hook
from test_golden_claude_fixtures import genuine_payload
from test_hook import CANARIES, _secret_payloads, all_bytes_on_disk, payload

CLIENT = r'''
"""A Python stand-in for agentlog-hook (docs/hook-path.md, "The native client"):
python -I -S client.py <agent> [args...] < payload. AGENTLOG_TEST_PYTHON and AGENTLOG_TEST_HOOK_PY
stand for the paths the C client has compiled in; AGENTLOG_TEST_RESULTS, if set, gets a line
"<A|F> <event id>" per run (F: it fell back)."""
import os, socket, stat, sys, time

KEEP = 16 << 20
ENV_KEYS = ("AGENTLOG_CAPTURE_MODE", "AGENTLOG_DURABILITY", "CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR",
            "GEMINI_PROJECT_DIR")


def uuid7():
    ms = time.time_ns() // 1_000_000
    r = int.from_bytes(os.urandom(10), "big")
    v = (ms << 80) | (0x7 << 76) | (((r >> 64) & 0xFFF) << 64) | (0b10 << 62) | (r & ((1 << 62) - 1))
    h = "%032x" % v
    return "-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))


def field(tag, value):
    return bytes([tag]) + len(value).to_bytes(4, "big") + value


def encode(agent, args, env, cwd, event_id, captured_at, total, kept):
    fields = [field(1, agent.encode())] + [field(2, os.fsencode(a)) for a in args]
    fields += [field(3, os.fsencode(k + "=" + env[k])) for k in ENV_KEYS if env.get(k)]
    if cwd is not None:
        fields.append(field(4, os.fsencode(cwd)))
    fields += [field(5, event_id.encode()), field(6, str(captured_at).encode()), field(7, str(total).encode()),
               field(8, kept)]
    return b"ALH1" + len(fields).to_bytes(4, "big") + b"".join(fields)


def data_root(env):
    if env.get("AGENTLOG_HOME"):
        return os.path.abspath(os.path.expanduser(env["AGENTLOG_HOME"]))
    if env.get("XDG_DATA_HOME"):
        return os.path.join(env["XDG_DATA_HOME"], "agentlog")
    return os.path.join(env["HOME"], ".local", "share", "agentlog")


def checked(root):
    """The socket's path if run/ and run/hook.sock pass the client's checks, else None."""
    uid = os.getuid()
    try:
        d = os.lstat(os.path.join(root, "run"))
        s = os.lstat(os.path.join(root, "run", "hook.sock"))
    except OSError:
        return None
    if not stat.S_ISDIR(d.st_mode) or d.st_uid != uid or d.st_mode & 0o077:
        return None
    if not stat.S_ISSOCK(s.st_mode) or s.st_uid != uid:
        return None
    return os.path.join(root, "run", "hook.sock")


def exchange(path, request, seconds):
    """(status, reply) of one exchange, or (None, b"") for anything but a whole answer."""
    end = time.monotonic() + seconds
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(seconds)
        s.connect(path)
        try:
            s.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (F, when full) and closed before the request was sent: read it
        got = b""
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None, b""
            s.settimeout(left)
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            got += chunk
            if len(got) >= 9 and len(got) >= 9 + int.from_bytes(got[5:9], "big"):
                break
    except OSError:
        return None, b""
    finally:
        s.close()
    if len(got) < 9 or got[:4] != b"ALR1" or got[4:5] not in (b"A", b"F"):
        return None, b""
    n = int.from_bytes(got[5:9], "big")
    if n > (1 << 20) or len(got) != 9 + n:
        return None, b""
    return got[4:5], got[9:]


def main(argv):
    started = time.time_ns() // 1000
    chunks, total = [], 0
    while True:
        try:
            chunk = os.read(0, 1 << 20)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        total += len(chunk)
        if sum(map(len, chunks)) < KEEP:
            chunks.append(chunk)
    kept = b"".join(chunks)[:KEEP]
    event_id = uuid7()
    env = os.environ
    ms = env.get("AGENTLOG_HOOK_ACK_MS", "")
    seconds = min(max(int(ms) if ms.isdigit() else 1500, 1), 60000) / 1000
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    path = checked(data_root(env))
    status, reply = (None, b"")
    if path is not None:
        status, reply = exchange(path, encode(argv[0], argv[1:], env, cwd, event_id, started, total, kept), seconds)
    results = env.get("AGENTLOG_TEST_RESULTS")
    if results:
        fd = os.open(results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, ("%s %s\n" % ("A" if status == b"A" else "F", event_id)).encode())
        os.close(fd)
    if status == b"A":
        try:
            os.write(1, reply)
        except OSError:
            pass
        os._exit(0)
    fd = os.memfd_create("agentlog-hook-stdin")
    os.write(fd, kept)
    os.lseek(fd, 0, 0)
    os.dup2(fd, 0)
    new_env = dict(env, AGENTLOG_HOOK_EVENT_ID=event_id, AGENTLOG_HOOK_CAPTURED_AT=str(started),
                   AGENTLOG_HOOK_STDIN_BYTES=str(total))
    python, hook_py = env["AGENTLOG_TEST_PYTHON"], env["AGENTLOG_TEST_HOOK_PY"]
    try:
        os.execve(python, [python, "-I", "-S", hook_py] + list(argv), new_env)
    except OSError:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
'''
_client: dict[str, Any] = {"__name__": "agentlog_test_client"}
exec(compile(CLIENT, "client.py", "exec"), _client)
uuid7, encode, exchange = _client["uuid7"], _client["encode"], _client["exchange"]

SHARED = shared_dir()
HOOK_FIXTURES = SHARED / "fixtures" / "claude-code-hooks" if SHARED is not None else None
HOOK_US = re.compile(rb'"hook_us":\d+')
EVENT = "01900000-0000-7000-8000-000000000001"


@pytest.fixture
def server(agentlog_home: Path) -> Iterator[CaptureServer]:
    s = CaptureServer(str(agentlog_home))
    s.start()
    try:
        yield s
    finally:
        s.stop()


def request(agent: str, data: bytes, *args: str, env: dict[str, str] | None = None, cwd: str | None = "",
            event_id: str | None = None, captured_at: int | None = None, total: int | None = None) -> bytes:
    return bytes(encode(agent, list(args), env or {}, os.getcwd() if cwd == "" else cwd, event_id or uuid7(),
                  captured_at or time.time_ns() // 1000, len(data) if total is None else total, data))


def send(root: Path, req: bytes, seconds: float = 30.0) -> tuple[bytes | None, bytes]:
    return exchange(socket_path(str(root)), req, seconds)  # type: ignore[no-any-return]


def frames_by_id(root: Path) -> dict[str, list[bytes]]:
    """Every frame's event bytes (hook_us zeroed), by event id."""
    out: dict[str, list[bytes]] = {}
    for path in iter_logs(str(root)):
        with open(path, "rb") as f:
            for line in f:
                ev = event_bytes(line)
                out.setdefault(json.loads(ev)["event_id"], []).append(HOOK_US.sub(b'"hook_us":0', ev))
    return out


def verify_ok(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``agentlog verify --json`` over ``root``: it must exit 0."""
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    r = CliRunner().invoke(cli, ["verify", "--json"])
    assert r.exit_code == 0, r.output
    report: dict[str, Any] = json.loads(r.stdout)
    assert report["ok"]
    return report


def start_daemon(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real ``agentlog daemon run`` process on ``root``, once its capture server answers."""
    p = subprocess.Popen([sys.executable, "-m", "agentlog", "daemon", "run", "--interval", "0.2"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not probe(str(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert probe(str(root))
    return p


def python_hook_in_process(root: Path, agent: str, data: bytes, env: dict[str, str],
                           monkeypatch: pytest.MonkeyPatch) -> bytes:
    """``hook.main`` as ``_hook.py`` runs it, with this stdin and environment; its stdout."""
    with tempfile.TemporaryFile() as inp, tempfile.TemporaryFile() as out, monkeypatch.context() as m:
        inp.write(data)
        inp.seek(0)
        m.setenv("AGENTLOG_HOME", str(root))
        for k, v in env.items():
            m.setenv(k, v)
        saved = os.dup(0), os.dup(1)
        os.dup2(inp.fileno(), 0)
        os.dup2(out.fileno(), 1)
        try:
            hook.main([agent])
        finally:
            os.dup2(saved[0], 0)
            os.dup2(saved[1], 1)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        return out.read()


def handover(event_id: str, at: int, total: int) -> dict[str, str]:
    """What the native hook adds to the Python hook's environment when it falls back."""
    return {"AGENTLOG_HOOK_EVENT_ID": event_id, "AGENTLOG_HOOK_CAPTURED_AT": str(at),
            "AGENTLOG_HOOK_STDIN_BYTES": str(total)}


# -- the same frame as the Python hook ---------------------------------------------------------


@pytest.mark.skipif(HOOK_FIXTURES is None or not HOOK_FIXTURES.is_dir(), reason=missing(HOOK_FIXTURES))
def test_every_real_hook_payload_makes_the_python_hooks_frame(agentlog_home: Path, tmp_path: Path, server: CaptureServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each real Claude Code payload, through the server and through ``hook.main`` with the same
    event id and clock (handed over as the native hook does): the same event bytes but for
    attrs.hook_us, and the same reply. Relaxed durability on both sides (sent as the client's
    AGENTLOG_DURABILITY) to keep it quick; it changes no byte of a frame."""
    assert HOOK_FIXTURES is not None
    env = {"AGENTLOG_DURABILITY": "relaxed"}
    python_root = tmp_path / "python-hook"
    n = 0
    for fixture in sorted(HOOK_FIXTURES.glob("*.json")):
        for element in json.loads(fixture.read_text(encoding="utf-8")):
            data = json.dumps(genuine_payload(element)).encode()
            eid, at = uuid7(), time.time_ns() // 1000
            status, reply = send(agentlog_home, request("claude-code", data, env=env, event_id=eid, captured_at=at))
            assert status == b"A", fixture.name
            out = python_hook_in_process(python_root, "claude-code", data, {**env, **handover(eid, at, len(data))},
                                         monkeypatch)
            assert reply == out
            n += 1
    assert n == 518
    via_server, via_python = frames_by_id(agentlog_home), frames_by_id(python_root)
    assert len(via_server) == n and via_server.keys() == via_python.keys()
    for eid, evs in via_server.items():
        assert evs == via_python[eid], eid
    assert server.stats()["frames"] == n
    verify_ok(agentlog_home, monkeypatch)


EDGE_CASES: list[tuple[str, bytes, tuple[str, ...], dict[str, str], int | None]] = [
    ("codex", json.dumps({"session_id": "c1", "hook_event_name": "Stop", "stop_hook_active": False}).encode(), (), {}, None),
    ("gemini-cli", json.dumps({"session_id": "g1", "hook_event_name": "BeforeTool", "tool_name": "x"}).encode(), (), {}, None),
    ("codex", b"", (json.dumps({"type": "agent-turn-complete", "thread-id": "n1", "turn-id": "1",
                                "input-messages": ["hi"], "last-assistant-message": "ok"}),), {}, None),
    ("claude-code", b'{"session_id": "e1", "hook_event_name": "Stop"}', (),
     {"CLAUDE_PROJECT_DIR": "/nonexistent/project", "AGENTLOG_CAPTURE_MODE": "metadata_only"}, None),
    ("claude-code", b"{not json", (), {}, None),
    ("claude-code", b"", (), {}, None),
    ("claude-code", bytes(range(256)), (), {}, None),
    ("vscode", b'{"session_id": "u1"}', (), {}, None),
    ("claude-code", b'{"session_id": "big1", "hook_event_name": "PostToolUse", "tool_response": "xxxx', (), {},
     17 << 20),  # stdin held more than was kept (16 MiB, padded in the test): an oversized payload
]


@pytest.mark.parametrize("agent, data, args, env, total", EDGE_CASES,
                         ids=["codex-stop", "gemini-reply", "codex-notify-arg", "env-fields", "not-json", "empty",
                              "not-utf8", "unknown-agent", "oversized"])
def test_edge_payloads_match_a_real_python_hook_process(agent: str, data: bytes, args: tuple[str, ...],
                                                        env: dict[str, str], total: int | None, agentlog_home: Path,
                                                        tmp_path: Path, server: CaptureServer) -> None:
    """The Python hook as a real process (``python -I -S _hook.py``, strict durability), handed
    the event id, clock and byte count: byte-equal frames, equal stdout, and a diagnostic on
    stderr where the server wrote one to the diagnostics log."""
    eid, at = uuid7(), time.time_ns() // 1000
    if total is not None:  # the client sends the first 16 MiB of what stdin held (capture.wire)
        data = data.ljust(wire.MAX_PAYLOAD, b"x")
    size = len(data) if total is None else total
    status, reply = send(agentlog_home, request(agent, data, *args, env=env, event_id=eid, captured_at=at, total=size))
    assert status == b"A"
    python_root = tmp_path / "python-hook"
    r = run_hook(data, agent, *args, env={**env, **handover(eid, at, size), "AGENTLOG_HOME": str(python_root)})
    assert r.returncode == 0 and r.stdout == reply
    via_server, via_python = frames_by_id(agentlog_home), frames_by_id(python_root)
    assert list(via_server) == [eid] and via_server == via_python
    diag = agentlog_home / "state" / "hook-errors.log"
    assert server.wait_idle()  # the server writes the diagnostic after answering
    assert bool(r.stderr) == diag.exists()
    if total is not None:
        assert json.loads(via_server[eid][0])["attrs"]["payload_error"] == "oversized"


def test_a_client_without_a_cwd_is_not_given_the_daemons(agentlog_home: Path, server: CaptureServer,
                                                          tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    old = os.getcwd()
    os.chdir(repo)  # the server's own directory must not stand in for the client's
    try:
        send(agentlog_home, request("claude-code", b'{"session_id": "nocwd", "hook_event_name": "Stop"}', cwd=None))
        send(agentlog_home, request("claude-code", b'{"session_id": "cwd", "hook_event_name": "Stop"}'))
    finally:
        os.chdir(old)
    evs = {json.loads(v[0])["provider_session_id"]: json.loads(v[0]) for v in frames_by_id(agentlog_home).values()}
    assert "project" not in evs["nocwd"]
    assert "project" in evs["cwd"]


def test_secret_canaries_never_reach_disk_through_the_server(agentlog_home: Path, server: CaptureServer) -> None:
    for data in _secret_payloads():
        assert send(agentlog_home, request("claude-code", data))[0] == b"A"
    disk = all_bytes_on_disk(agentlog_home)
    for name, secret in CANARIES.items():
        assert secret.encode() not in disk, name
    assert b"[REDACTED:" in disk


# -- many at once ----------------------------------------------------------------------------


def _concurrently(root: Path, requests: list[bytes]) -> list[bytes | None]:
    statuses: list[bytes | None] = [None] * len(requests)
    go = threading.Barrier(len(requests))

    def one(i: int) -> None:
        go.wait()
        statuses[i] = send(root, requests[i])[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def _count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = SessionLog._sync

    def counted(self: SessionLog, fd: int) -> None:
        calls[0] += 1
        real(self, fd)

    monkeypatch.setattr(SessionLog, "_sync", counted)
    return calls


def test_100_concurrent_requests_into_one_session_share_appends(agentlog_home: Path, server: CaptureServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = _count_syncs(monkeypatch)
    ids = [uuid7() for _ in range(100)]
    reqs = [request("claude-code", payload(session_id="one", prompt=f"p{i}"), event_id=ids[i]) for i in range(100)]
    assert _concurrently(agentlog_home, reqs) == [b"A"] * 100
    got = frames_by_id(agentlog_home)
    assert sorted(got) == sorted(ids) and all(len(v) == 1 for v in got.values())
    stats = server.stats()
    assert stats["frames"] == 100 and stats["acknowledged"] == 100
    assert stats["appends"] < 100 and syncs[0] < 100, (stats["appends"], syncs[0])  # group commit
    print(f"one session: 100 frames in {stats['appends']} appends, {syncs[0]} fsyncs")
    assert verify_ok(agentlog_home, monkeypatch)["frames"] == 100


def test_100_concurrent_requests_into_100_sessions(agentlog_home: Path, server: CaptureServer,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [uuid7() for _ in range(100)]
    reqs = [request("claude-code", payload(session_id=f"s{i}"), event_id=ids[i]) for i in range(100)]
    assert _concurrently(agentlog_home, reqs) == [b"A"] * 100
    got = frames_by_id(agentlog_home)
    assert sorted(got) == sorted(ids) and all(len(v) == 1 for v in got.values())
    assert len(iter_logs(str(agentlog_home))) == 100
    report = verify_ok(agentlog_home, monkeypatch)
    assert report["frames"] == 100 and report["sessions"] == 100


# -- the fallback's dedupe -------------------------------------------------------------------


def test_the_python_fallback_does_not_write_what_the_server_wrote(agentlog_home: Path, server: CaptureServer) -> None:
    data = payload(hook_event_name="Stop", session_id="dup")
    eid, at = uuid7(), time.time_ns() // 1000
    assert send(agentlog_home, request("codex", data, event_id=eid, captured_at=at))[0] == b"A"
    # the client gave up waiting and ran the Python hook: same event id → nothing appended, same reply
    r = run_hook(data, "codex", env=handover(eid, at, len(data)))
    assert r.returncode == 0 and r.stdout == b"{}" and r.stderr == b""
    assert [len(v) for v in frames_by_id(agentlog_home).values()] == [1]
    # a Python hook handed no event id (or a malformed one) records as it always did
    run_hook(data, "codex", env={"AGENTLOG_HOOK_EVENT_ID": eid.upper()})
    assert sum(len(v) for v in frames_by_id(agentlog_home).values()) == 2


@pytest.mark.parametrize(("env", "expected"), [
    ({"AGENTLOG_HOOK_EVENT_ID": EVENT, "AGENTLOG_HOOK_CAPTURED_AT": "17", "AGENTLOG_HOOK_STDIN_BYTES": "0"},
     (EVENT, 17, 0)),
    ({"AGENTLOG_HOOK_EVENT_ID": EVENT, "AGENTLOG_HOOK_CAPTURED_AT": "017", "AGENTLOG_HOOK_STDIN_BYTES": "+5"},
     (EVENT, None, None)),
    ({"AGENTLOG_HOOK_EVENT_ID": EVENT, "AGENTLOG_HOOK_CAPTURED_AT": str(1 << 63)}, (EVENT, None, None)),
    ({"AGENTLOG_HOOK_EVENT_ID": EVENT[:-1] + "A", "AGENTLOG_HOOK_CAPTURED_AT": "17"}, (None, None, None)),
    ({"AGENTLOG_HOOK_EVENT_ID": EVENT[:14] + "4" + EVENT[15:], "AGENTLOG_HOOK_CAPTURED_AT": "17"}, (None, None, None)),
    ({"AGENTLOG_HOOK_CAPTURED_AT": "17"}, (None, None, None)),
], ids=["valid", "not decimals", "over 2**63", "upper case", "UUIDv4", "no id"])
def test_the_fallback_reads_what_it_is_handed_by_the_wire_rules(env: dict[str, str],
                                                                 expected: tuple[Any, ...]) -> None:
    """The Python hook takes the handed event id and numbers only where the server would
    take them in a request (capture.wire: a lower-case UUIDv7, decimals without sign or
    leading zero below 2**63)."""
    assert hook.handed_over(env) == expected


def test_the_duplicate_check_is_skipped_only_well_within_the_client_s_deadline(
        agentlog_home: Path, server: CaptureServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that says how long it waits (field 9) spares the server the tail read for a
    request it appends more than 500 ms before that: the fallback cannot have run. Past that
    point (here: a client that started 2 s ago and waits 1.5 s) the check runs and finds the
    fallback's copy."""
    from agentlog.capture import wire
    from agentlog.log.writer import SessionLog

    checked: list[list[str | None]] = []
    real = SessionLog._without_present

    def spy(self: SessionLog, fd: int, events: list[bytes], ids: list[str | None], *rest: Any) -> list[bytes]:
        checked.append(list(ids))
        return real(self, fd, events, ids, *rest)

    monkeypatch.setattr(SessionLog, "_without_present", spy)

    def with_deadline(data: bytes, eid: str, at: int, deadline_ms: int) -> bytes:
        req = wire.decode_request(request("claude-code", data, event_id=eid, captured_at=at))
        req.deadline_ms = deadline_ms
        return wire.encode_request(req)

    fresh = payload(session_id="deadline", prompt="fresh")
    assert send(agentlog_home, with_deadline(fresh, uuid7(), time.time_ns() // 1000, 1500))[0] == b"A"
    assert checked == [[None]]
    late = payload(session_id="deadline", prompt="late")
    eid, at = uuid7(), time.time_ns() // 1000 - 2_000_000
    assert run_hook(late, env=handover(eid, at, len(late))).returncode == 0  # the client fell back
    assert send(agentlog_home, with_deadline(late, eid, at, 1500))[0] == b"A"
    assert checked[-1] == [eid]
    assert server.stats()["already_present"] == 1
    assert sorted(len(v) for v in frames_by_id(agentlog_home).values()) == [1, 1]


def test_the_server_does_not_write_what_the_fallback_wrote(agentlog_home: Path, server: CaptureServer) -> None:
    """The other order: the client fell back (its frame is written), then the server reaches the
    request: it appends nothing and still answers 'A'."""
    data = payload(session_id="late")
    eid, at = uuid7(), time.time_ns() // 1000
    assert run_hook(data, env=handover(eid, at, len(data))).returncode == 0
    assert send(agentlog_home, request("claude-code", data, event_id=eid, captured_at=at))[0] == b"A"
    assert [len(v) for v in frames_by_id(agentlog_home).values()] == [1]
    assert server.stats()["already_present"] == 1


def test_session_log_dedupe_window(agentlog_home: Path) -> None:
    log = SessionLog(str(agentlog_home), "claude_code", "k")
    first = log.append([b'{"event_id":"a"}', b'{"event_id":"b"}'], dedupe=["a", "b"])
    assert first.skipped == [] and first.tip is not None and first.tip.seq == 1
    again = log.append([b'{"event_id":"a"}', b'{"event_id":"c"}', b'{"event_id":"c"}'], dedupe=["a", "c", "c"])
    assert again.skipped == [0, 2] and again.seqs == [2]
    # with a mark of where the log was, only what came after it is read: "a" is before it
    assert log.append([b'{"event_id":"a"}'], dedupe=["a"], since=again.tip).skipped == []
    # a mark that no longer names its frame (another log's, here) is ignored: the whole tail is read
    other = SessionLog(str(agentlog_home), "claude_code", "other").append([b'{"event_id":"z"}' + b" " * 300])
    assert log.append([b'{"event_id":"c"}'], dedupe=["c"], since=other.tip).skipped == [0]


def test_python_hook_takes_the_stdin_size_it_is_handed(agentlog_home: Path) -> None:
    """AGENTLOG_HOOK_STDIN_BYTES: the client kept 16 MiB of more; the Python hook records an
    oversized payload with the real size (and the handed clock)."""
    data = b'{"session_id": "big2", "hook_event_name": "PostToolUse", "tool_response": "' + b"x" * 1000
    eid, at = uuid7(), 1_800_000_000_000_000
    r = run_hook(data, env=handover(eid, at, 20 << 20))
    assert r.returncode == 0 and len(r.stderr.splitlines()) == 1
    (evs,) = frames_by_id(agentlog_home).values()
    ev = json.loads(evs[0])
    assert ev["event_id"] == eid and ev["captured_at"] == at and ev["provider_session_id"] == "big2"
    assert ev["attrs"]["payload_error"] == "oversized" and ev["attrs"]["payload_bytes"] == 20 << 20


def test_the_fallback_path_keeps_the_hook_path_rules(agentlog_home: Path) -> None:
    """Handed an event id, the Python hook reads the log's tail for it: still none of the
    modules docs/hook-path.md keeps off the hook path."""
    code = (
        "import sys, posix\n"
        f"sys.path.insert(0, {str(HOOK_SCRIPT.parents[1])!r})\n"
        "from agentlog.capture.hook import main\n"
        "main(['claude-code'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    expensive = {"os", "re", "json", "typing", "uuid", "dataclasses", "enum", "functools", "collections", "datetime",
                 "tomllib", "inspect", "logging", "pathlib", "shlex", "hashlib", "socket", "selectors", "threading"}
    data = payload(session_id="rules")
    for _ in range(2):  # the second finds the first's frame
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=data, capture_output=True, timeout=60,
                           env={**os.environ, **handover(EVENT, 1_800_000_000_000_000, len(data))})
        assert r.returncode == 0, r.stderr
        assert set(r.stdout.decode().split()) & expensive == set()
    assert [len(v) for v in frames_by_id(agentlog_home).values()] == [1]


# -- who may connect, and what is refused --------------------------------------------------------


def test_socket_and_run_dir_are_private(agentlog_home: Path, server: CaptureServer) -> None:
    assert stat.S_IMODE(os.lstat(agentlog_home / "run").st_mode) == 0o700
    st = os.lstat(socket_path(str(agentlog_home)))
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    a, b = socket.socketpair()
    with a, b:
        assert peer_uid(a) == os.getuid()


@pytest.mark.skipif(os.getuid() != 0 or not hasattr(socket, "SO_PEERCRED"), reason="needs root to become another uid")
def test_a_peer_of_another_uid_is_closed_unanswered(agentlog_home: Path, server: CaptureServer) -> None:
    # Open the way (run/ and the socket are private: another uid could not even connect), so
    # that what is tested is the server's own peer check. The child enters run/ before it
    # changes uid, so the directories above need not be opened.
    os.chmod(agentlog_home / "run", 0o711)
    os.chmod(socket_path(str(agentlog_home)), 0o666)
    req = request("claude-code", payload(session_id="foreign"), cwd="/")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: becomes nobody, sends a valid request, reports what came back
        code = 1
        try:
            os.close(r)
            os.chdir(agentlog_home / "run")
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect("hook.sock")
            try:
                s.sendall(req)
                got = s.recv(64)
            except (BrokenPipeError, ConnectionResetError):  # closed with the request unread: no answer
                got = b""
            s.close()
            os.write(w, b"EOF" if got == b"" else b"ANSWER:" + got)
            code = 0
        except BaseException as e:
            os.write(w, f"ERROR:{e!r}".encode())
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read()
    _, code = os.waitpid(pid, 0)
    assert said == b"EOF" and code == 0
    assert server.stats()["foreign_peers"] == 1
    assert frames_by_id(agentlog_home) == {}


def test_a_symlink_at_the_run_dir_stops_the_server_from_starting(agentlog_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (agentlog_home / "run").symlink_to(elsewhere)
    with pytest.raises(CaptureServerError, match="symbolic link"):
        CaptureServer(str(agentlog_home)).start()
    assert list(elsewhere.iterdir()) == []
    (agentlog_home / "run").unlink()
    (agentlog_home / "run").write_text("")
    with pytest.raises(CaptureServerError, match="not a directory"):
        CaptureServer(str(agentlog_home)).start()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the directory away")
def test_a_run_dir_of_another_user_is_refused(agentlog_home: Path) -> None:
    (agentlog_home / "run").mkdir(mode=0o700)
    os.chown(agentlog_home / "run", 65534, 65534)
    with pytest.raises(CaptureServerError, match="uid 65534"):
        CaptureServer(str(agentlog_home)).start()


def test_a_stale_socket_is_replaced_and_a_live_one_is_not(agentlog_home: Path) -> None:
    (agentlog_home / "run").mkdir(mode=0o755)  # too open: made private
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(socket_path(str(agentlog_home)))
    stale.close()  # bound, never listening: what a killed server leaves
    with CaptureServer(str(agentlog_home)):
        assert stat.S_IMODE(os.lstat(agentlog_home / "run").st_mode) == 0o700
        assert probe(str(agentlog_home))
        with pytest.raises(CaptureServerError, match="another capture server"):
            CaptureServer(str(agentlog_home)).start()
        assert probe(str(agentlog_home))
    assert not os.path.exists(socket_path(str(agentlog_home)))  # removed on stop
    assert not probe(str(agentlog_home))


def test_a_full_queue_answers_f_at_once(agentlog_home: Path) -> None:
    with CaptureServer(str(agentlog_home), max_pending=1) as srv:
        holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with holder:
            holder.connect(socket_path(str(agentlog_home)))
            holder.sendall(b"ALH1")  # a request still arriving: it takes the one place
            time.sleep(0.3)
            t0 = time.monotonic()
            assert send(agentlog_home, request("claude-code", payload())) == (b"F", b"")
            assert time.monotonic() - t0 < 1.0
        time.sleep(0.3)  # the holder left: its place is free again
        assert send(agentlog_home, request("claude-code", payload()))[0] == b"A"
        assert srv.stats()["fell_back"] == 1
    assert len(frames_by_id(agentlog_home)) == 1


def test_stopping_answers_what_is_not_yet_taken_with_f(agentlog_home: Path) -> None:
    srv = CaptureServer(str(agentlog_home))
    srv.start()
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with slow:
        slow.connect(socket_path(str(agentlog_home)))
        slow.sendall(request("claude-code", payload())[:20])
        time.sleep(0.2)
        srv.stop()
        slow.settimeout(5)
        assert slow.recv(64) == b"ALR1F\0\0\0\0"
    assert frames_by_id(agentlog_home) == {}


@pytest.mark.parametrize("bad", [
    b"XLH1\0\0\0\1",
    b"ALH1\0\0\0\x41",  # 65 fields
    b"ALH1\0\0\0\1\x09\0\0\0\0",  # unknown tag
    b"ALH1\0\0\0\1\x01\0\0\0\x41" + b"a" * 65,  # agent over 64 bytes
])
def test_requests_breaking_the_rules_are_closed_unanswered(agentlog_home: Path, server: CaptureServer,
                                                           bad: bytes) -> None:
    assert send(agentlog_home, bad, 10) == (None, b"")


def test_incomplete_or_inconsistent_requests_are_closed_unanswered(agentlog_home: Path, server: CaptureServer) -> None:
    field = _client["field"]
    no_payload = [field(1, b"claude-code"), field(5, uuid7().encode()), field(6, b"1"), field(7, b"2")]

    def fields(*extra: bytes) -> bytes:
        return b"ALH1" + (len(no_payload) + len(extra)).to_bytes(4, "big") + b"".join(no_payload) + b"".join(extra)

    cases = [
        request("claude-code", payload(), event_id=uuid7().upper()),  # not lower case
        request("claude-code", payload(), total=3),  # stdin held less than the payload
        fields(field(3, b"LD_PRELOAD=x"), field(8, b"{}")),  # an env key not on the list
        fields(field(3, b"CLAUDE_PROJECT_DIR"), field(8, b"{}")),  # env without '='
        fields(field(2, b"a\0b"), field(8, b"{}")),  # a NUL in an argument
        request("claude-code", payload()) + b"\0",  # bytes after the request
        fields(),  # no payload field
        fields(field(8, b"{}"), field(1, b"codex")),  # two agents
        # the rules capture.wire adds (the server's own reader allowed these before):
        request("claude-code", payload(), total=len(payload()) + 1),  # stdin held more, yet under 16 MiB
        b"ALH1" + (5).to_bytes(4, "big") + b"".join(  # a decimal with a leading zero
            [field(1, b"claude-code"), field(5, uuid7().encode()), field(6, b"01"), field(7, b"2"), field(8, b"{}")]),
        request("claude-code", payload(), event_id=uuid7()[:14] + "4" + uuid7()[15:]),  # a UUIDv4, not v7
    ]
    assert send(agentlog_home, fields(field(8, b"{}")), 10)[0] == b"A"  # the same, well formed, is taken
    for req in cases:
        assert send(agentlog_home, req, 10) == (None, b"")
    assert len(frames_by_id(agentlog_home)) == 1
    assert server.stats()["rejected"] == len(cases)
    assert probe(str(agentlog_home))  # wire.PROBE: read, closed unanswered, not a rejection
    assert server.stats()["probes"] == 1 and server.stats()["rejected"] == len(cases)


@pytest.mark.slow
def test_a_request_not_whole_within_5_s_is_closed_unanswered(agentlog_home: Path, server: CaptureServer) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with s:
        s.connect(socket_path(str(agentlog_home)))
        s.sendall(request("claude-code", payload())[:30])
        s.settimeout(15)
        t0 = time.monotonic()
        assert s.recv(64) == b""
        assert 4.5 < time.monotonic() - t0 < 7
    assert server.stats()["timed_out"] == 1


# -- in the daemon ---------------------------------------------------------------------------


def test_daemon_serves_hooks_and_status_shows_the_server(agentlog_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.operations.daemon import start, stop

    start(str(agentlog_home), interval=0.1)
    try:
        deadline = time.monotonic() + 20
        while not probe(str(agentlog_home)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(20):
            assert send(agentlog_home, request("claude-code", payload(prompt=f"p{i}")))[0] == b"A"
        deadline = time.monotonic() + 30
        while True:  # each poll writes the numbers
            r = CliRunner().invoke(cli, ["status", "--json", "--no-ingest"])
            assert r.exit_code == 0, r.output
            hs = json.loads(r.stdout)["hook_server"]
            if hs.get("window") == 20 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert hs["answering"] is True and hs["acknowledged"] == 20 and hs["window"] == 20
        assert 0 < hs["server_us_p50"] <= hs["server_us_p95"]
    finally:
        stop(str(agentlog_home))
    hs = json.loads(CliRunner().invoke(cli, ["status", "--json", "--no-ingest"]).stdout)["hook_server"]
    assert hs["answering"] is False and hs["serving"] is False
    assert not os.path.exists(socket_path(str(agentlog_home)))
    log = (agentlog_home / "state" / "daemon.log").read_text()
    assert "capture server listening" in log and "capture server stopped" in log


def test_the_server_runs_in_a_process_of_its_own_that_the_daemon_restarts(agentlog_home: Path) -> None:
    """The daemon's ingest and projection hold the interpreter lock for long stretches, so the
    server is a child process (capture/serve.py): not the daemon's pid, and started again when
    it dies; a daemon killed with -9 leaves no server behind (the child sees its stdin close)."""
    env = {**os.environ, "AGENTLOG_HOME": str(agentlog_home)}
    daemon = start_daemon(agentlog_home, env)
    try:
        deadline = time.monotonic() + 20
        stats = agentlog_home / "state" / "hook-server.json"
        while not stats.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = json.loads(stats.read_text())["pid"]
        assert child != daemon.pid
        os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 30
        again = child
        while time.monotonic() < deadline:
            try:
                again = json.loads(stats.read_text())["pid"]
            except (OSError, ValueError):
                pass
            if again != child and probe(str(agentlog_home)):
                break
            time.sleep(0.1)
        assert again != child and probe(str(agentlog_home))
        assert send(agentlog_home, request("claude-code", payload(prompt="after the restart")))[0] == b"A"
    finally:
        daemon.kill()
        daemon.wait()
    deadline = time.monotonic() + 20
    while probe(str(agentlog_home)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not probe(str(agentlog_home))

    def ended(pid: int) -> bool:  # gone, or a zombie its new parent has not reaped yet
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (FileNotFoundError, ProcessLookupError):
            return True

    while not ended(again) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ended(again)


def test_daemon_without_the_capture_server_setting(agentlog_home: Path) -> None:
    from agentlog.operations.daemon import run

    (agentlog_home / "config.toml").write_text("capture_server = false\n")
    run(str(agentlog_home), interval=0.05, max_seconds=0.2)
    assert not (agentlog_home / "run").exists()
    (agentlog_home / "config.toml").write_text('capture_server = "yes"\n')
    r = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert r.exit_code != 0 and "capture_server" in r.output


def test_daemon_goes_on_without_a_server_it_cannot_start(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.operations.daemon import run

    (agentlog_home / "run").symlink_to(tmp_path)
    run(str(agentlog_home), interval=0.05, max_seconds=0.2)
    log = (agentlog_home / "state" / "daemon.log").read_text()
    assert "capture server not started" in log and "symbolic link" in log and "final ingest" in log


@pytest.mark.slow
def test_kill_9_of_the_daemon_loses_and_doubles_nothing(agentlog_home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """200 real client processes (CLIENT, falling back to the real Python hook as the native
    hook does), 8 at a time into 10 sessions, while a real ``agentlog daemon run`` is killed
    with SIGKILL at a seeded moment and later started again. A quarter of the clients wait
    only 1 ms for their answer, so that they fall back while the server is still at their
    request (both then try to write it). Every event id a client made is in the logs exactly
    once, and every chain verifies."""
    rng = random.Random(int(os.environ.get("AGENTLOG_TEST_SEED", "29")))
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    results = tmp_path / "results"
    env = {**os.environ, "AGENTLOG_HOME": str(agentlog_home), "AGENTLOG_TEST_RESULTS": str(results),
           "AGENTLOG_TEST_PYTHON": sys.executable, "AGENTLOG_TEST_HOOK_PY": str(HOOK_SCRIPT)}

    def daemon() -> subprocess.Popen[bytes]:
        return start_daemon(agentlog_home, env)

    kill_at, restart_at = rng.randrange(40, 100), rng.randrange(120, 160)
    proc = daemon()
    running: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(200):
            if i == kill_at:
                time.sleep(rng.random() * 0.05)  # while requests are in flight
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            if i == restart_at:
                proc = daemon()  # the stale socket is replaced
            while len(running) >= 8:
                running = [p for p in running if p.poll() is None]
                time.sleep(0.002)
            body = payload(session_id=f"k{rng.randrange(10)}", prompt="x" * rng.randrange(0, 4000))
            impatient = {"AGENTLOG_HOOK_ACK_MS": "1"} if rng.random() < 0.25 else {}
            p = subprocess.Popen([sys.executable, "-I", "-S", str(script), "claude-code"], env={**env, **impatient},
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert p.stdin is not None
            p.stdin.write(body)
            p.stdin.close()
            running.append(p)
        for p in running:
            assert p.wait(60) == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    lines = results.read_text().split()
    outcome = dict(zip(lines[1::2], lines[0::2]))
    assert len(outcome) == 200
    got = frames_by_id(agentlog_home)
    counts = Counter({eid: len(v) for eid, v in got.items()})
    assert {eid: counts[eid] for eid in outcome} == {eid: 1 for eid in outcome}
    others = [json.loads(v[0]) for eid, v in got.items() if eid not in outcome]
    assert all(ev["kind"] == "capture_gap" for ev in others)  # a frame the kill tore, cut off and said so
    tally = Counter(outcome.values())
    assert tally["A"] >= 50 and tally["F"] >= 50, tally
    last = json.loads((agentlog_home / "state" / "hook-server.json").read_text())  # the restarted daemon's
    print(f"kill -9 round: {tally['A']} acknowledged, {tally['F']} fell back; killed before request {kill_at}, "
          f"restarted before {restart_at}; the second server found {last['already_present']} of its "
          f"{last['acknowledged']} already written by a fallback; {len(others)} gap frames")
    verify_ok(agentlog_home, monkeypatch)
