"""Frames cut from a log, its head deleted, garbled or left longer than the log: the
next append repairs the chain (a hook must not block the agent) but ``verify`` goes on
reporting a break, with how many frames were lost when anything says (issue 27,
finding 16). A crash inside a log's first append, which can leave several frames,
stays what it was: crash residue, never a break.

Everything runs as it would for a user: the real hook process appends, the real
``agentlog verify`` process judges (exit 1 on a break).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.frame import genesis
from agentlog.log.layout import head_path, iter_logs, session_key
from agentlog.log.verify import verify_log
from agentlog.log.writer import HEAD_SIZE, SessionLog, Tip, format_head, parse_head

from conftest import REPO, run_hook

SID = "cut-session-1"
N = 8  # frames before the cut
KEEP = 5  # frames left after it


def hook_payload(i: int) -> bytes:
    return json.dumps(
        {"session_id": SID, "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": f"prompt {i}"}
    ).encode()


def hook(i: int) -> None:
    r = run_hook(hook_payload(i))
    assert r.returncode == 0 and r.stdout == b"", r


def session_log(home: Path) -> str:
    [path] = iter_logs(str(home))
    assert Path(path).name == session_key(SID) + ".jsonl"
    return path


def verify_cli(home: Path) -> tuple[int, dict[str, Any]]:
    """``agentlog verify --json`` as a process: its exit code and the one report."""
    env = {**os.environ, "AGENTLOG_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "agentlog", "verify", "--json"], capture_output=True, env=env, timeout=120)
    out = json.loads(r.stdout)
    [report] = [rep for rep in out["reports"] if session_key(SID) in json.dumps(rep)]  # (a purge adds its record's log)
    return r.returncode, report


def cut(path: str, keep: int = KEEP) -> None:
    """Keep the first ``keep`` frames of the log, drop the rest (whole lines)."""
    lines = Path(path).read_bytes().splitlines(keepends=True)
    assert len(lines) == N
    Path(path).write_bytes(b"".join(lines[:keep]))


def recorded(report: dict[str, Any]) -> list[tuple[int, int, str, int | None]]:
    return [(b["line"], b["frame"], b["reason"], b["lost_frames"]) for b in report["breaks"]]


def test_cut_log_with_its_head_deleted_stays_broken_after_a_hook_append(agentlog_home: Path) -> None:
    for i in range(N):
        hook(i)
    path = session_log(agentlog_home)
    cut(path)
    os.unlink(head_path(path))
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and rep["breaks"][0]["reason"] == "head_missing"

    hook(N)  # the agent goes on: the hook repairs, writes the break down, appends
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and rep["status"] == "broken"  # was: "gaps", exit 0
    # the break is at the frame that records it (just after the kept ones); no head is left
    # that says how many frames there were, and the report says so
    assert recorded(rep) == [(KEEP + 1, KEEP, "head_missing", None)]
    assert "unknown" in rep["breaks"][0]["detail"] and f"frame {KEEP - 1}" in rep["breaks"][0]["detail"]
    assert rep["frames"] == KEEP + 2 and rep["gaps"] == []

    hook(N + 1)  # later appends change nothing: the break is in the chain
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and recorded(rep) == [(KEEP + 1, KEEP, "head_missing", None)] and rep["frames"] == KEEP + 3


def test_cut_log_with_a_garbled_head_stays_broken_after_a_hook_append(agentlog_home: Path) -> None:
    for i in range(N):
        hook(i)
    path = session_log(agentlog_home)
    cut(path)
    garbage = b"v1 7 not-a-hash 1234\n"
    Path(head_path(path)).write_bytes(garbage)
    hook(N)
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and recorded(rep) == [(KEEP + 1, KEEP, "head_invalid", None)]
    gap = json.loads(Path(path).read_bytes().splitlines()[KEEP])["event"]["attrs"]
    assert gap["reason"] == "head_invalid" and gap["log_break"] is True
    assert gap["last_seq"] == KEEP - 1 and gap["head_bytes"] == len(garbage)


def test_log_shorter_than_its_head_stays_broken_after_a_hook_append_and_says_how_many_frames(agentlog_home: Path) -> None:
    for i in range(N):
        hook(i)
    path = session_log(agentlog_home)
    head = parse_head(Path(head_path(path)).read_bytes())
    cut(path)  # the head still names frame N - 1
    cut_size = os.path.getsize(path)
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and rep["breaks"][0]["reason"] == "truncated"
    hook(N)
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and recorded(rep) == [(KEEP + 1, KEEP, "log_shorter_than_head", N - KEEP)]
    assert f"{N - KEEP} frame(s) lost" in rep["breaks"][0]["detail"]
    gap = json.loads(Path(path).read_bytes().splitlines()[KEEP])["event"]["attrs"]
    assert (gap["head_seq"], gap["head_size"], gap["last_seq"]) == (N - 1, head.offset, KEEP - 1)
    assert gap["lost_bytes"] == head.offset - cut_size


def test_a_lost_head_beside_one_frame_is_still_adopted(agentlog_home: Path) -> None:
    """What a crash inside the first append left in versions that wrote the head after the
    frames: one frame, no head. Still adopted silently, as before."""
    hook(0)
    path = session_log(agentlog_home)
    os.unlink(head_path(path))
    hook(1)
    code, rep = verify_cli(agentlog_home)
    assert code == 0 and rep["status"] == "intact" and rep["frames"] == 2


# -- the first append: the head comes first, so a crash inside it is never a break ---

WRITER = """\
import sys
sys.path.insert(0, {src!r})
from agentlog.log.writer import SessionLog
SessionLog(sys.argv[1], "crash", "first").append([b'{{"i":%d,"pad":"%s"}}' % (i, b"x" * 300) for i in range(6)])
"""


def test_a_crash_inside_a_first_multi_frame_append_is_not_a_break(agentlog_home: Path, tmp_path: Path) -> None:
    """A first append of several frames (an import, a gap frame and an event), killed once
    some of its frames are on disk: the head, written before them, names no frame yet, so
    verify reports frames after the head (a gap), and the next append adopts them."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(src=str(REPO / "src")))
    log = SessionLog(str(agentlog_home), "crash", "first")
    env = {**os.environ, "AGENTLOG_FAULT_SPLIT_WRITE_MS": "300"}  # a pause inside each write of 5 parts
    p = subprocess.Popen([sys.executable, "-I", "-S", str(script), str(agentlog_home)], env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(log.path) and Path(log.path).read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    data = Path(log.path).read_bytes()
    complete = data.count(b"\n")
    assert 2 <= complete < 6  # killed inside the batch, with more than one frame written
    # the head was there before the frames: the genesis hash at size 0, no frame named yet
    assert Path(log.head_file).read_bytes() == format_head(Tip(0, genesis("crash", "first"), 0))
    r = verify_log(log.path)
    assert r.breaks == [] and r.status == "gaps", r
    assert [(g.line, g.frame, g.reason) for g in r.gaps][0] == (1, 0, "head_behind")

    res = log.append([dumps_bytes({"i": 99})])
    assert res.seqs[-1] == complete + len(res.gaps)  # the written frames adopted, a torn one cut
    assert {g["reason"] for g in res.gaps} <= {"torn_tail"}
    r = verify_log(log.path)
    assert r.breaks == [] and r.status in ("intact", "gaps"), r
    assert {g.reason for g in r.gaps} <= {"capture_gap"}


def test_the_first_append_writes_the_head_before_its_frames(agentlog_home: Path) -> None:
    log = SessionLog(str(agentlog_home), "crash", "fresh")
    res = log.append([dumps_bytes({"i": i}) for i in range(3)])
    assert res.seqs == [0, 1, 2] and res.gaps == []
    head = Path(log.head_file).read_bytes()
    tip = parse_head(head)
    assert len(head) == HEAD_SIZE and (tip.seq, tip.hash, tip.offset) == (2, res.hashes[-1], os.path.getsize(log.path))
    assert verify_log(log.path).status == "intact"
    # a head naming no frame beside an empty log (a crash before the first frame) is intact too
    log2 = SessionLog(str(agentlog_home), "crash", "empty")
    os.makedirs(os.path.dirname(log2.path), exist_ok=True)
    Path(log2.path).write_bytes(b"")
    Path(log2.head_file).write_bytes(format_head(Tip(0, genesis("crash", "empty"), 0)))
    assert verify_log(log2.path).status == "intact"
    assert log2.append([dumps_bytes({"i": 0})]).seqs == [0]
    assert verify_log(log2.path).status == "intact"


def test_a_log_with_a_recorded_break_can_still_be_sealed_and_purged(agentlog_home: Path) -> None:
    """A damaged session must not escape retention: purge removes its content and seal
    compresses it, but the frame that records the break is kept and verify still says broken."""
    from agentlog.log.purge import Selector, purge_logs
    from agentlog.log.seal import seal_log

    for i in range(N):
        hook(i)
    path = session_log(agentlog_home)
    cut(path)
    os.unlink(head_path(path))
    hook(N)
    hook(N + 1)
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and [b[2] for b in recorded(rep)] == ["head_missing"]
    done = purge_logs(str(agentlog_home), Selector(session=SID))
    assert [lp.status for lp in done.logs] == ["purged"], done.logs
    data = Path(path).read_bytes()
    assert b"prompt 1" not in data and b"prompt " + str(N).encode() not in data
    assert b'"log_break":true' in data
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and [b[2] for b in recorded(rep)] == ["head_missing"]
    sealed = seal_log(path)
    assert sealed.status == "sealed", sealed
    code, rep = verify_cli(agentlog_home)
    assert code == 1 and [b[2] for b in recorded(rep)] == ["head_missing"]
