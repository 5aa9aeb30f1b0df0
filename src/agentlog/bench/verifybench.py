"""``agentlog bench verify``: verification throughput.

Logs of 1k, 10k and 50k frames of ~1.5 KB are built, then verified with one
and two processes, both in process (the library call) and as a whole
``agentlog verify --session … --jobs N --json`` command (what a user waits
for, interpreter start included). Each round runs every variant once, beside
a baseline that only hashes every frame with SHA-256 (no other check, no
lock, no head): the floor any verifier of this format pays in Python. The
machine is noisy, so the ratio to that baseline, taken per round, is the
steadier number. Files are in the page cache (written, then ``sync``, then
one untimed run); cold-cache reads are not measured.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from agentlog.api import verify_log
from agentlog.bench.common import describe, machine
from agentlog.bench.hookbench import build_session


def hash_only(path: str) -> int:
    """SHA-256 of every frame's hashed bytes, nothing else (the baseline)."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mv = memoryview(m)
    sha = hashlib.sha256
    find = m.find
    pos = n = 0
    while True:
        nl = find(b"\n", pos)
        if nl < 0:
            break
        sha(mv[pos : nl - 75]).digest()
        n += 1
        pos = nl + 1
    mv.release()
    m.close()
    return n


def _ms(fn: Any) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def run_verify_bench(
    *,
    sizes: list[int] | None = None,
    repeat: int = 9,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Verify throughput per size (see the module docstring).

    ``should_stop`` is asked after every round from the third on; a yes ends
    that size's rounds and skips the sizes not yet started (``capped``).
    """
    sizes = sizes or [1000, 10000, 50000]
    capped = False
    done_sizes: list[int] = []
    tmp = tempfile.mkdtemp(prefix="agentlog-bench-verify-")
    try:
        root = os.path.join(tmp, "home")
        env = {**os.environ, "AGENTLOG_HOME": root}
        rows = []
        raw: dict[str, Any] = {}
        for n in sizes:
            if capped:
                break
            if progress:
                progress(f"verify: building and timing a {n:,}-frame log")
            sid = f"verify-{n}"
            path = build_session(root, sid, n)
            size = os.path.getsize(path)
            mb = size / 1e6
            os.sync()  # let writeback finish so it does not compete with the timed runs
            if verify_log(path).status != "intact":  # warm-up, and a sanity check
                raise RuntimeError(f"bench log {path} did not verify")
            t: dict[str, list[float]] = {k: [] for k in ("hash", "in1", "in2", "cmd1", "cmd2")}

            def command(jobs: int) -> None:
                argv = [sys.executable, "-m", "agentlog", "verify", "--session", sid, "--jobs", str(jobs), "--json"]
                r = subprocess.run(argv, env=env, capture_output=True)
                if r.returncode != 0:
                    raise RuntimeError(f"agentlog verify failed: {r.stderr[-500:]!r}")

            for r in range(repeat):
                t["hash"].append(_ms(lambda: hash_only(path)))
                t["in1"].append(_ms(lambda: verify_log(path, jobs=1)))
                t["in2"].append(_ms(lambda: verify_log(path, jobs=2)))
                t["cmd1"].append(_ms(lambda: command(1)))
                t["cmd2"].append(_ms(lambda: command(2)))
                if should_stop is not None and r + 1 >= 3 and r + 1 < repeat and should_stop():
                    capped = True
                    break
            done_sizes.append(n)
            stats = {k: describe(v) for k, v in t.items()}
            ratio1 = statistics.median(b / a for a, b in zip(t["in1"], t["hash"]))
            raw[str(n)] = {"bytes": size, "frames": n, "rounds": len(t["hash"]), "ms": stats, "in_process_1_vs_hash_only": ratio1}
            for jobs in (1, 2):
                ip, cm = stats[f"in{jobs}"], stats[f"cmd{jobs}"]
                rows.append(
                    [f"{n:,}", f"{mb:,.1f}", jobs, mb / (stats["hash"]["median"] / 1000), ip["median"], mb / (ip["median"] / 1000),
                     cm["median"], cm["p95"], mb / (cm["median"] / 1000)]
                )
        tables = [
            {
                "title": f"Verify throughput ({repeat} interleaved rounds, medians)",
                "columns": ["frames", "MB", "jobs", "hash-only MB/s", "in-process ms", "in-process MB/s", "command ms", "command p95 ms", "command MB/s"],
                "rows": rows,
                "note": "hash-only: SHA-256 of each frame and nothing else (baseline, one process). In-process: "
                "`verify_log(path, jobs)`, worker start-up included for jobs 2. Command: the whole "
                "`agentlog verify --session … --jobs N --json` process. Logs below 4 MB are verified in one process "
                "even with --jobs 2. Warm page cache. In-process jobs 1 runs at "
                + ", ".join(f"{raw[str(n)]['in_process_1_vs_hash_only']:.0%}" for n in done_sizes)
                + " of the hash-only rate (median of per-round ratios).",
            }
        ]
        return {"machine": machine(), "repeat": repeat, "capped": capped, "sizes": done_sizes, "results": raw, "tables": tables}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
