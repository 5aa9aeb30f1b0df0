"""``agentlog bench verify``: verification throughput.

Logs of 1k, 10k and 50k frames of ~1.5 KB are built, then verified with one
and two processes, both in process (the library call, repeated) and as a
whole ``agentlog verify --session … --jobs N --json`` command (what a user
waits for, interpreter start included). Files are in the page cache (just
written); cold-cache reads are not measured.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..log.verify import verify_log
from .common import describe, machine
from .hookbench import build_session


def run_verify_bench(*, sizes: list[int] | None = None, repeat: int = 9) -> dict[str, Any]:
    sizes = sizes or [1000, 10000, 50000]
    tmp = tempfile.mkdtemp(prefix="agentlog-bench-verify-")
    try:
        root = os.path.join(tmp, "home")
        env = {**os.environ, "AGENTLOG_HOME": root}
        rows = []
        raw: dict[str, Any] = {}
        for n in sizes:
            sid = f"verify-{n}"
            path = build_session(root, sid, n)
            size = os.path.getsize(path)
            for jobs in (1, 2):
                inproc = []
                for _ in range(repeat):
                    t0 = time.perf_counter_ns()
                    rep = verify_log(path, jobs=jobs)
                    inproc.append((time.perf_counter_ns() - t0) / 1e6)
                    if rep.status != "intact":
                        raise RuntimeError(f"bench log {path} did not verify: {rep.breaks[:1]}")
                whole = []
                argv = [sys.executable, "-m", "agentlog", "verify", "--session", sid, "--jobs", str(jobs), "--json"]
                for _ in range(repeat):
                    t0 = time.perf_counter_ns()
                    r = subprocess.run(argv, env=env, capture_output=True)
                    whole.append((time.perf_counter_ns() - t0) / 1e6)
                    if r.returncode != 0:
                        raise RuntimeError(f"agentlog verify failed: {r.stderr[-500:]!r}")
                di, dw = describe(inproc), describe(whole)
                mb = size / 1e6
                raw[f"{n}/{jobs}"] = {"bytes": size, "in_process_ms": di, "whole_process_ms": dw}
                rows.append([f"{n:,}", f"{mb:,.1f}", jobs, di["median"], mb / (di["median"] / 1000), dw["median"], dw["p95"], mb / (dw["median"] / 1000)])
        tables = [
            {
                "title": f"Verify throughput ({repeat} runs each, medians)",
                "columns": ["frames", "MB", "jobs", "in-process ms", "in-process MB/s", "command ms", "command p95 ms", "command MB/s"],
                "rows": rows,
                "note": "In-process: `verify_log(path, jobs)`, pool start-up included for jobs 2. Command: the whole "
                "`agentlog verify --session … --jobs N --json` process. Logs below 4 MB are verified in one process "
                "even with --jobs 2 (starting workers costs more than it saves). Warm page cache.",
            }
        ]
        return {"machine": machine(), "repeat": repeat, "results": raw, "tables": tables}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
