"""Many writers, one session: every event lands exactly once, in one dense chain.

Writers are real hook processes started all at once (through both hook paths: the
Python hook, and the native client with a capture server), threads with their own
``SessionLog`` objects, and both together. The log's ``flock`` must
serialise them: ``seq`` is dense from 0, the chain verifies ``intact`` (no
gaps either: nothing crashed), and each payload is in the log exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.frame import event_bytes, parse_envelope
from agentlog.log.layout import log_path
from agentlog.log.verify import verify_log
from agentlog.log.writer import SessionLog

from hook_paths import ACK_MS, HookPath



def read_frames(path: str) -> list[tuple[int, bytes]]:
    """(seq, event bytes) of every line, each checked to be a sealed frame."""
    out = []
    with open(path, "rb") as f:
        for line in f:
            seq, _prev, _hash = parse_envelope(line)
            out.append((seq, event_bytes(line)))
    return out


def hook_payload(session: str, i: int) -> bytes:
    """A PostToolUse payload whose byte length is unique to ``i`` (the pad grows
    with it), so that ``attrs.payload_bytes`` identifies it even if the event
    keeps nothing else of the payload."""
    return json.dumps(
        {
            "session_id": session,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{i:04d}",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "x"},
            "cwd": "/",
            "pad": "p" * i,
        }
    ).encode()


def tool_use_id(event: dict[str, Any]) -> str | None:
    tool = event.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("call_id"), str):
        return tool["call_id"]
    raw = event.get("raw")
    if isinstance(raw, dict) and isinstance(raw.get("tool_use_id"), str):
        return raw["tool_use_id"]
    return None


def hook_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOG_")}
    env["AGENTLOG_HOME"] = str(home)
    env["AGENTLOG_HOOK_ACK_MS"] = ACK_MS  # the native client: no fallback by accident on a loaded machine
    return env


def start_hooks(home: Path, session: str, ids: range, hook: HookPath) -> list[subprocess.Popen[bytes]]:
    """Start one hook process per id, all at once, each reading its payload
    from a file on stdin (so no process waits for the test to feed it)."""
    spool = home / "payloads"
    spool.mkdir(exist_ok=True)
    procs = []
    for i in ids:
        f = spool / f"{session}-{i}.json"
        f.write_bytes(hook_payload(session, i))
        with open(f, "rb") as stdin:
            procs.append(
                subprocess.Popen(
                    hook.argv("claude-code"),
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=hook_env(home),
                    cwd="/",
                )
            )
    return procs


def finish_hooks(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        out, _err = p.communicate(timeout=120)
        assert p.returncode == 0
        assert out == b""  # PostToolUse needs no reply on stdout


def check_hook_events(events: list[dict[str, Any]], session: str, ids: range) -> None:
    """Each hook's payload is recorded exactly once."""
    assert all(e["provider"] == "claude_code" and e["provider_session_id"] == session for e in events)
    by_size = Counter(e["attrs"]["payload_bytes"] for e in events)
    assert by_size == Counter(len(hook_payload(session, i)) for i in ids)
    tool_ids = [tool_use_id(e) for e in events]
    if any(t is not None for t in tool_ids):  # the adapter keeps the id: it must be there for all
        assert Counter(tool_ids) == Counter(f"toolu_{i:04d}" for i in ids)
    assert len({e["event_id"] for e in events}) == len(events)


def test_50_concurrent_hook_processes(agentlog_home: Path, hook_path: HookPath) -> None:
    session = "conc-hooks"
    ids = range(50)
    finish_hooks(start_hooks(agentlog_home, session, ids, hook_path))
    if hook_path.server is not None:
        assert hook_path.server.stats()["acknowledged"] == 50  # none fell back
    path = log_path(str(agentlog_home), "claude_code", session)
    frames = read_frames(path)
    assert [s for s, _ in frames] == list(range(50))
    events = [json.loads(ev) for _, ev in frames]
    assert not any(e["kind"] == "capture_gap" for e in events)
    check_hook_events(events, session, ids)
    r = verify_log(path)
    assert r.status == "intact", r
    assert r.frames == 50 and r.gaps == [] and r.breaks == []


def _thread_appender(root: str, provider: str, key: str, t: int, n: int, seqs: list[int], errors: list[BaseException]) -> None:
    try:
        log = SessionLog(root, provider, key)  # its own object, its own fd per append
        for i in range(n):
            res = log.append([dumps_bytes({"t": t, "i": i, "text": f"thread {t} frame {i}"})])
            assert len(res.seqs) == 1 and res.gaps == []
            seqs.extend(res.seqs)
    except BaseException as e:  # surfaced by the test
        errors.append(e)


def run_threads(root: str, provider: str, key: str, threads: int, per: int) -> list[list[int]]:
    seqs: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    ts = [
        threading.Thread(target=_thread_appender, args=(root, provider, key, t, per, seqs[t], errors))
        for t in range(threads)
    ]
    for th in ts:
        th.start()
    for th in ts:
        th.join(timeout=300)
        assert not th.is_alive()
    assert not errors, errors
    return seqs


def test_16_threads_100_appends_each(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    seqs = run_threads(root, "test", "threads", 16, 100)
    path = log_path(root, "test", "threads")
    frames = read_frames(path)
    assert [s for s, _ in frames] == list(range(1600))
    # every append got its own seq, and that seq holds its payload
    assert sorted(s for per in seqs for s in per) == list(range(1600))
    by_seq = dict(frames)
    for t, per in enumerate(seqs):
        assert per == sorted(per)  # one thread's appends keep their order
        for i, s in enumerate(per):
            assert json.loads(by_seq[s]) == {"t": t, "i": i, "text": f"thread {t} frame {i}"}
    payloads = Counter((e["t"], e["i"]) for e in (json.loads(ev) for _, ev in frames))
    assert payloads == Counter((t, i) for t in range(16) for i in range(100))
    r = verify_log(path)
    assert r.status == "intact", r
    assert r.frames == 1600 and r.gaps == []


def test_mixed_processes_and_threads(agentlog_home: Path, hook_path: HookPath) -> None:
    root = str(agentlog_home)
    session = "mixed"
    ids = range(8)
    procs = start_hooks(agentlog_home, session, ids, hook_path)
    seqs = run_threads(root, "claude_code", session, 4, 25)
    finish_hooks(procs)
    path = log_path(root, "claude_code", session)
    frames = read_frames(path)
    assert [s for s, _ in frames] == list(range(8 + 100))
    by_seq = dict(frames)
    assert len({s for per in seqs for s in per}) == 100
    for t, per in enumerate(seqs):
        for i, s in enumerate(per):
            assert json.loads(by_seq[s]) == {"t": t, "i": i, "text": f"thread {t} frame {i}"}
    events = [json.loads(ev) for _, ev in frames]
    from_threads = [e for e in events if "t" in e]
    from_hooks = [e for e in events if "t" not in e]
    assert Counter((e["t"], e["i"]) for e in from_threads) == Counter((t, i) for t in range(4) for i in range(25))
    assert len(from_hooks) == 8
    check_hook_events(from_hooks, session, ids)
    r = verify_log(path)
    assert r.status == "intact", r
    assert r.frames == 108 and r.gaps == []
