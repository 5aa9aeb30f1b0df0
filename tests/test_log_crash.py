"""kill -9 at random points: nothing acknowledged is lost, nothing is doubled,
and the log never looks tampered with.

A small writer process appends frames in a loop and prints ``ACK <id>`` after
each append returns; the test SIGKILLs it after a random pause, sometimes
with ``AGENTLOG_FAULT_SPLIT_WRITE_MS`` set so that kills often land between
the two halves of a frame. One long-lived session is used across all rounds
(sometimes with several writers at once), so each round also exercises the
recovery of whatever the previous kill left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlog.capture.command import hook_argv
from agentlog.core.fastjson import dumps_bytes
from agentlog.log.frame import event_bytes, parse_envelope
from agentlog.log.layout import log_path
from agentlog.log.verify import LogReport, verify_log
from agentlog.log.writer import SessionLog

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[1] / "src"
PROVIDER = "crash"
ROUNDS = 200
# gaps a crash may leave: pending ones (before the next append) and the
# capture_gap frames that record them. Never a missing head: the first append
# writes the head before its frames (a kill between creating the log and its
# head leaves no frame, so nothing to report)
PENDING_GAPS = {"torn_tail", "head_behind"}
# what the writer's capture_gap frames may say after nothing but crashes
CRASH_GAP_REASONS = {"torn_tail"}

WRITER = """\
import sys
sys.path.insert(0, {src!r})
from agentlog.log.writer import SessionLog

root, key, prefix = sys.argv[1:4]
log = SessionLog(root, {provider!r}, key)
out = sys.stdout
out.write("READY\\n")
out.flush()
i = 0
while True:
    ident = prefix + "-" + str(i)
    log.append([('{{"id":"' + ident + '"}}').encode()])
    out.write("ACK " + ident + "\\n")
    out.flush()
    i += 1
"""


def frame_events(path: str) -> tuple[list[dict[str, Any]], bytes]:
    """Events of the complete lines (each must be a sealed frame) and the torn rest."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:  # killed before the first append opened the log
        return [], b""
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines(keepends=True):
        parse_envelope(line)
        events.append(json.loads(event_bytes(line)))
    return events, data[end:]


def check_no_breaks(r: LogReport) -> None:
    assert r.breaks == [], r
    assert r.status in ("intact", "gaps"), r
    for g in r.gaps:
        assert g.reason in PENDING_GAPS | {"capture_gap"}, r


def check_capture_gaps(events: list[dict[str, Any]]) -> None:
    for e in events:
        if e.get("kind") == "capture_gap":
            assert e["attrs"]["reason"] in CRASH_GAP_REASONS and "log_break" not in e["attrs"], e


def test_kill_9_writer_at_random_points(agentlog_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(1234)
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(src=str(SRC), provider=PROVIDER))
    root = str(agentlog_home)
    key = "long-lived"
    path = log_path(root, PROVIDER, key)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOG_")}
    base_env["AGENTLOG_HOME"] = root

    acked: set[str] = set()  # every id ever acknowledged
    torn_rounds = head_behind_rounds = fault_rounds = multi_rounds = 0
    writer_repairs = 0  # capture_gap frames written by a writer recovering another one's kill
    gaps_before = 0
    started = time.monotonic()
    for rnd in range(ROUNDS):
        fault = rng.random() < 0.6
        n_writers = 3 if rng.random() < 0.2 else 1
        env = dict(base_env)
        if fault:
            env["AGENTLOG_FAULT_SPLIT_WRITE_MS"] = "2"
            fault_rounds += 1
        multi_rounds += n_writers > 1
        prefixes = [f"r{rnd}w{w}" for w in range(n_writers)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-I", "-S", str(script), root, key, p],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=env,
                bufsize=0,  # unbuffered: reading READY must not swallow ACKs
            )
            for p in prefixes
        ]
        for p in procs:  # imports done, about to append
            assert p.stdout is not None
            assert p.stdout.readline() == b"READY\n"
        time.sleep(rng.uniform(0, 0.040))
        for p in procs:
            p.send_signal(signal.SIGKILL)
            if n_writers > 1:
                time.sleep(rng.uniform(0, 0.004))
        outs = {}
        for pre, p in zip(prefixes, procs):
            out, _ = p.communicate(timeout=30)
            assert p.returncode == -signal.SIGKILL
            # a line is an ACK only once complete
            outs[pre] = [ln for ln in out.split(b"\n")[:-1] if ln.startswith(b"ACK ")]

        events, torn = frame_events(path)
        gaps_now = sum(1 for e in events if e.get("kind") == "capture_gap")
        if n_writers == 1:
            # it started on a repaired log: nothing for it to recover
            assert gaps_now == gaps_before
        else:
            writer_repairs += gaps_now - gaps_before
        ids = Counter(e["id"] for e in events if "id" in e)
        assert max(ids.values(), default=1) == 1, [i for i, c in ids.items() if c > 1]
        for pre, lines in outs.items():
            mine = [ln[4:].decode() for ln in lines]
            assert mine == [f"{pre}-{i}" for i in range(len(mine))]
            acked.update(mine)
            # the log holds exactly this writer's acked ids, plus at most the one
            # append that was in flight when the kill came
            present = sorted((i for i in ids if i.startswith(pre + "-")), key=lambda s: int(s.rsplit("-", 1)[1]))
            assert present in ([f"{pre}-{i}" for i in range(len(mine))], [f"{pre}-{i}" for i in range(len(mine) + 1)]), (
                pre,
                len(mine),
                present,
            )
        missing = acked - ids.keys()
        assert not missing, sorted(missing)[:10]
        check_capture_gaps(events)

        if not os.path.exists(path):
            assert not acked
            reasons: set[str] = set()
        else:
            r = verify_log(path)
            check_no_breaks(r)
            reasons = {g.reason for g in r.gaps}
        if "torn_tail" in reasons:
            assert torn
            torn_rounds += 1
        else:
            assert not torn
        head_behind_rounds += "head_behind" in reasons

        # the session keeps accepting appends, and repairs what the kill left
        post = f"post-{rnd}"
        res = SessionLog(root, PROVIDER, key).append([dumps_bytes({"id": post})])
        assert len(res.seqs) == 1 + len(res.gaps)
        if torn:
            assert [g["lost_bytes"] for g in res.gaps if g["reason"] == "torn_tail"] == [len(torn)]
        else:
            assert not any(g["reason"] == "torn_tail" for g in res.gaps)
        acked.add(post)
        r = verify_log(path)
        check_no_breaks(r)
        assert {g.reason for g in r.gaps} <= {"capture_gap"}, r  # nothing pending after an append
        events, torn = frame_events(path)
        assert torn == b""
        assert Counter(e["id"] for e in events if "id" in e)[post] == 1
        gaps_before = sum(1 for e in events if e.get("kind") == "capture_gap")

    elapsed = time.monotonic() - started
    events, _ = frame_events(path)
    ids = Counter(e["id"] for e in events if "id" in e)
    assert set(acked) <= ids.keys() and max(ids.values()) == 1
    gap_frames = [e for e in events if e.get("kind") == "capture_gap"]
    torn_gap_frames = sum(1 for e in gap_frames if e["attrs"]["reason"] == "torn_tail")
    # each torn tail left at the end of a round was cut and recorded once by the
    # test's append; writers of 3-writer rounds also repaired each other's
    assert torn_rounds <= torn_gap_frames <= torn_rounds + writer_repairs
    with capsys.disabled():
        print(
            f"\n[crash] {ROUNDS} rounds in {elapsed:.1f}s ({fault_rounds} with split writes, {multi_rounds} with 3 writers): "
            f"{torn_rounds} torn tails, {head_behind_rounds} heads behind, {len(events)} frames, "
            f"{len(gap_frames)} capture_gap frames ({torn_gap_frames} torn_tail, {writer_repairs} written by racing writers), "
            f"{len(acked)} acked ids"
        )
    assert torn_rounds > 0, "no kill landed mid-frame: the crash test did not exercise torn tails"
    assert verify_log(path).breaks == []


def _hook_payload(i: int) -> bytes:
    # the pad makes each payload's size, and so attrs.payload_bytes, unique
    return json.dumps(
        {
            "session_id": "hook-crash",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{i:04d}",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "x"},
            "cwd": "/",
            "pad": "p" * i,
        }
    ).encode()


def test_kill_9_real_hook_mid_append(agentlog_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The installed hook command, killed while it is between the two halves of
    its frame (the fault pause is long, and the kill comes as soon as the log
    grows), or at a random moment; after each kill an unkilled hook records its
    event, and in the end every completed hook's event is there exactly once."""
    rng = random.Random(1234)
    root = str(agentlog_home)
    path = log_path(root, "claude_code", "hook-crash")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOG_")}
    base_env["AGENTLOG_HOME"] = root
    completed: list[int] = []
    killed: list[int] = []
    torn_rounds = 0
    n = 0

    def run(i: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
        f = agentlog_home / f"payload-{i}.json"
        f.write_bytes(_hook_payload(i))
        with open(f, "rb") as stdin:
            return subprocess.Popen(hook_argv("claude-code"), stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/")

    for rnd in range(20):
        size_before = os.path.getsize(path) if os.path.exists(path) else 0
        p = run(n, {**base_env, "AGENTLOG_FAULT_SPLIT_WRITE_MS": "80"})
        killed.append(n)
        n += 1
        if rnd % 4 == 3:
            time.sleep(rng.uniform(0, 0.15))  # anywhere: before, during or after the append
        else:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and p.poll() is None:
                if os.path.exists(path) and os.path.getsize(path) > size_before:
                    break  # the first half of a frame is on disk
                time.sleep(0.0005)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)

        r = verify_log(path) if os.path.exists(path) else None
        if r is not None:
            check_no_breaks(r)
            torn_rounds += any(g.reason == "torn_tail" for g in r.gaps)

        q = run(n, base_env)
        assert q.wait(timeout=60) == 0
        completed.append(n)
        n += 1
        r = verify_log(path)
        check_no_breaks(r)
        assert {g.reason for g in r.gaps} <= {"capture_gap"}, r

    events, torn = frame_events(path)
    assert torn == b""
    check_capture_gaps(events)
    sizes = Counter(e["attrs"]["payload_bytes"] for e in events if e["kind"] != "capture_gap")
    for i in completed:
        assert sizes[len(_hook_payload(i))] == 1, i
    for i in killed:
        assert sizes[len(_hook_payload(i))] <= 1, i
    assert sum(sizes.values()) <= len(completed) + len(killed)
    with capsys.disabled():
        print(f"\n[hook crash] 20 kills of the real hook: {torn_rounds} torn tails, {len(events)} frames")
    assert torn_rounds >= 10  # the size-triggered kills land mid-frame
