"""``agentlog bench sandbox``: what agentlog run's broker and floor cost (docs/sandbox.md).

A real run (``agentlog run --net all``) in a temporary data root and project whose agent
(``sandbox_agent.py``) times ``bash -c true`` directly and through the broker, and the
MB/s of output relayed both ways; beside it, the cost of building the ruleset (walking the
filesystem to the denied paths) and of starting a run at all (``agentlog run true`` against
``true``). Medians, p95 and p99; never pass or fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from agentlog.bench.common import describe, machine
from agentlog.core import AgentlogError

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_agent.py")


def run_sandbox_bench(runs: int = 200, size_mb: int = 256, starts: int = 10) -> dict[str, Any]:
    from agentlog import api

    cache = os.path.expanduser("~/.cache")
    os.makedirs(cache, exist_ok=True)
    base = tempfile.mkdtemp(prefix="alsbb-", dir=cache)  # where a data root lives: not under /tmp, which is walked
    try:
        root, project = os.path.join(base, "root"), os.path.join(base, "proj")
        os.makedirs(project)
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "AGENTLOG_HOME": root, "PYTHONPATH": path}
        cli = [sys.executable, "-m", "agentlog", "run", "--net", "all"]
        r = subprocess.run([*cli, sys.executable, AGENT, str(runs), str(size_mb << 20)], cwd=project, env=env,
                           capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise AgentlogError(f"the benchmark run failed: {r.stderr.strip()[-800:]}")
        inner = json.loads(r.stdout.strip().splitlines()[-1])
        direct, brokered = describe(inner["direct_ms"]), describe(inner["brokered_ms"])
        floor_ms, rules = api.sandbox_floor_cost(root, project, max(5, runs // 10))
        start_run, start_direct = [], []
        true = shutil.which("true") or "/bin/true"
        for _ in range(starts):
            t = time.perf_counter()
            subprocess.run([*cli, true], cwd=project, env=env, capture_output=True, check=True, timeout=120)
            start_run.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            subprocess.run([true], check=True)
            start_direct.append((time.perf_counter() - t) * 1000)
        res: dict[str, Any] = {
            "machine": machine(), "runs": runs, "client": os.path.basename(inner["client"]),
            "direct_true_ms": direct, "brokered_true_ms": brokered,
            "added_ms": {"median": brokered["median"] - direct["median"], "p95": brokered["p95"] - direct["p95"],
                         "p99": brokered["p99"] - direct["p99"]},
            "ruleset_build_ms": describe(floor_ms), "ruleset_rules": rules,
            "io_mb": size_mb, "direct_mb_s": inner["direct_mb_s"], "brokered_mb_s": inner["brokered_mb_s"],
            "agentlog_run_true_ms": describe(start_run), "true_ms": describe(start_direct),
        }
        res["tables"] = _tables(res)
        return res
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _tables(res: dict[str, Any]) -> list[dict[str, Any]]:
    def row(name: str, d: dict[str, float]) -> list[Any]:
        return [name, round(d["median"], 2), round(d["p95"], 2), round(d["p99"], 2)]

    return [
        {"title": f"Latency ({res['runs']} runs each, client {res['client']})",
         "columns": ["what", "median ms", "p95 ms", "p99 ms"],
         "rows": [row("direct `bash -c true`", res["direct_true_ms"]), row("brokered `true`", res["brokered_true_ms"]),
                  row("added by the broker", res["added_ms"]),
                  row(f"ruleset build ({res['ruleset_rules']} rules)", res["ruleset_build_ms"]),
                  row("`agentlog run true`", res["agentlog_run_true_ms"]), row("`true`", res["true_ms"])],
         "note": "Goal: added ≤ 3 ms at the median, ≤ 6 ms at p95."},
        {"title": f"Output throughput ({res['io_mb']} MB)", "columns": ["way", "MB/s"],
         "rows": [["direct", round(res["direct_mb_s"])], ["brokered", round(res["brokered_mb_s"])]]},
    ]
