"""``agentlog bench share`` (issue 34): what sharing and snapshots cost.

- ``agentlog share ID --html`` (and ``--markdown``) of the largest shared fixture session and of a
  generated Claude Code session of about 10,000 events (a transcript written here: prompts,
  Bash calls with their results, edits, failures, agent messages; imported by ``agentlog
  import``), as whole processes, ``runs`` each: median, p95, p99, and the file's size.
- ``agentlog snapshot create`` and ``restore`` of those data roots: MB/s of log bytes (median of
  ``runs``), and the snapshot's size.

Every number is of whole ``python -m agentlog`` processes, as a person runs them. Nothing passes
or fails on time.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable

from agentlog.core import AgentlogError
from agentlog.operations.fixtures import shared_dir


class BenchFailed(AgentlogError):
    """A process the benchmark runs failed (the message has its command and standard error)."""


def _agentlog(root: str, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "agentlog", *args], capture_output=True, text=True, timeout=3600,
                       env={**os.environ, "AGENTLOG_HOME": root})
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise BenchFailed(f"agentlog {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return secs, r.stdout


def _stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)

    def pct(p: float) -> float:
        return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]

    return {"median": round(statistics.median(s), 4), "p95": round(pct(0.95), 4), "p99": round(pct(0.99), 4),
            "min": round(s[0], 4), "runs": len(s)}


def synthetic_transcript(path: str, events: int) -> None:
    """A Claude Code transcript of about ``events`` events: turns of a prompt, then Bash calls and
    edits with their results (one in seven failing), and agent messages."""
    sid = str(uuid.UUID(int=34))
    t = 1_767_225_600.0
    parent: str | None = None
    lines: list[dict[str, Any]] = []

    def rec(kind: str, message: dict[str, Any]) -> None:
        nonlocal parent, t
        t += 0.5
        u = str(uuid.uuid4())
        lines.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/bench/proj",
                      "sessionId": sid, "version": "2.0.76", "type": kind, "message": message, "uuid": u,
                      "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"})
        parent = u

    n = 0
    i = 0
    while n < events:
        if i % 25 == 0:
            rec("user", {"role": "user", "content": f"Step {i // 25}: fix the parser for case {i} and run the tests"})
            n += 1
        tid = f"toolu_{i:020d}"
        if i % 3 == 0:
            use = {"type": "tool_use", "id": tid, "name": "Edit",
                   "input": {"file_path": f"/home/bench/proj/src/mod{i % 40}.py", "old_string": f"x = {i}\n" * 3,
                             "new_string": f"x = {i + 1}\n" * 3}}
        else:
            use = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"pytest -q tests/test_{i % 40}.py"}}
        rec("assistant", {"model": "claude-opus-4-5", "id": f"msg_{i}", "type": "message", "role": "assistant",
                          "content": [{"type": "text", "text": f"Trying change {i}."}, use]})
        failed = i % 7 == 0
        body = ("FAILED tests/test_x.py::test_case - AssertionError\n" if failed else "3 passed in 0.1s\n") * 5
        rec("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": body,
                                                  "is_error": failed}]})
        n += 3  # the call's start and end, and the agent's message
        i += 1
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")


def _session(root: str) -> tuple[str, int]:
    """The session with the most events, and how many."""
    _, out = _agentlog(root, "sql", "select session_id, event_count from sessions order by event_count desc limit 1",
                       "--json")
    sid, count = json.loads(out)["rows"][0]
    return "ses_" + str(sid), int(count)


def _logs_bytes(root: str) -> int:
    total = 0
    for d, _dirs, files in os.walk(os.path.join(root, "logs")):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return total


def _bench_root(name: str, root: str, runs: int, scratch: str, note: Callable[[str], None]) -> dict[str, Any]:
    sid, events = _session(root)
    out: dict[str, Any] = {"name": name, "events": events}
    for fmt in ("html", "markdown"):
        target = os.path.join(scratch, f"share.{fmt}")
        times = []
        for r in range(runs):
            note(f"{name}: share --{fmt} run {r + 1}/{runs}")
            secs, _ = _agentlog(root, "share", sid, f"--{fmt}", target)
            times.append(secs)
            size = os.path.getsize(target)
            os.unlink(target)
        out[f"share_{fmt}_s"] = _stats(times)
        out[f"share_{fmt}_bytes"] = size
    logs = _logs_bytes(root)
    creates, restores = [], []
    snap_size = 0
    for r in range(runs):
        note(f"{name}: snapshot create and restore, run {r + 1}/{runs}")
        snap = os.path.join(scratch, "s.tar.zst")
        secs, _ = _agentlog(root, "snapshot", "create", "--out", snap)
        creates.append(logs / 1e6 / secs)
        snap_size = os.path.getsize(snap)
        into = os.path.join(scratch, "restored")
        secs, _ = _agentlog(root, "snapshot", "restore", snap, "--into", into)
        restores.append(logs / 1e6 / secs)
        shutil.rmtree(into)
        os.unlink(snap)
    out.update({"logs_bytes": logs, "snapshot_bytes": snap_size, "snapshot_create_mb_s": _stats(creates),
                "snapshot_restore_mb_s": _stats(restores)})
    return out


def run_share_bench(*, runs: int, events: int, note: Callable[[str], None]) -> dict[str, Any]:
    shared = shared_dir()
    results: dict[str, Any] = {"bench": "share", "runs": runs, "python": sys.version.split()[0], "roots": []}
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-share-") as tmp:
        scratch = os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        if shared is not None:
            biggest = max((shared / "fixtures" / "claude-code").glob("*.jsonl"), key=lambda p: p.stat().st_size)
            root = os.path.join(tmp, "fixture")
            note("importing the largest fixture session")
            _agentlog(root, "import", "claude-code", str(biggest))
            results["roots"].append(_bench_root("largest fixture session", root, runs, scratch, note))
        else:
            results["fixture_missing"] = True
        transcript = os.path.join(tmp, "synthetic.jsonl")
        synthetic_transcript(transcript, events)
        root = os.path.join(tmp, "synthetic")
        note(f"importing a generated session of about {events:,} events")
        _agentlog(root, "import", "claude-code", transcript)
        results["roots"].append(_bench_root(f"generated {events:,}-event session", root, runs, scratch, note))
    return results


def markdown(result: dict[str, Any]) -> str:
    out = ["# agentlog bench share", "", f"{result['runs']} runs of each whole process; median (p95).", "",
           "| session | events | share --html s | HTML MB | share --markdown s | snapshot create MB/s | restore MB/s | logs MB |",
           "|---|---|---|---|---|---|---|---|"]
    for r in result["roots"]:
        h, m = r["share_html_s"], r["share_markdown_s"]
        c, s = r["snapshot_create_mb_s"], r["snapshot_restore_mb_s"]
        out.append(f"| {r['name']} | {r['events']:,} | {h['median']:.2f} ({h['p95']:.2f}) | {r['share_html_bytes'] / 1e6:.2f} "
                   f"| {m['median']:.2f} ({m['p95']:.2f}) | {c['median']:.1f} ({c['p95']:.1f}) | {s['median']:.1f} ({s['p95']:.1f}) "
                   f"| {r['logs_bytes'] / 1e6:.1f} |")
    return "\n".join(out) + "\n"


__all__ = ["BenchFailed", "markdown", "run_share_bench", "synthetic_transcript"]
