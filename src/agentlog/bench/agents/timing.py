"""``agentlog bench agents``: what agentlog's hooks add to a real agent's run.

For each release and scenario, the same scripted run goes with agentlog's hooks
and without them, alternating, ``rounds`` times each (this machine is noisy:
the ratio is taken within the run). Reported: the median whole-run wall time
both ways, the time added per tool call, and how long after the CLI exits the
record is queryable (Codex: its background rollout import done, then a query;
the others: one query, which brings the store up to date first).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from agentlog.bench.agents.drivers import RELEASES, run_scenario, wait_for_sync
from agentlog.bench.agents.npm import Release
from agentlog.bench.agents.scenarios import load_all
from agentlog.bench.common import describe, machine
from agentlog.core import UsageError

DEFAULT_SCENARIOS = ("success", "nonzero_exit")


def pick_releases(agents: list[str], all_releases: bool) -> list[Release]:
    known = {r.agent for r in RELEASES}
    for a in agents:
        if a not in known:
            raise UsageError(f"unknown agent {a!r} (one of {', '.join(sorted(known))})")
    chosen = [r for r in RELEASES if not agents or r.agent in agents]
    if not all_releases:
        seen: set[str] = set()
        chosen = [r for r in chosen if not (r.agent in seen or seen.add(r.agent))]  # type: ignore[func-returns-value]
    return chosen


def _queryable_after(run: Any) -> float:
    from agentlog.api import run_sql

    started = time.perf_counter()
    synced = wait_for_sync(run) if run.release.agent == "codex" else 0.0
    run_sql(str(run.data_root), "select count(*) from tool_calls")
    return (synced or 0.0) + (time.perf_counter() - started)


def run_agents_bench(agents: list[str], scenarios: list[str], rounds: int, all_releases: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    known = load_all()
    for s in scenarios:
        if s not in known:
            raise UsageError(f"unknown scenario {s!r} (one of {', '.join(known)})")
    releases = pick_releases(agents, all_releases)
    plan = [(r, known[s]) for r in releases for s in scenarios if known[s].applies_to(r.agent)]
    total = len(plan) * rounds * 2
    done = 0
    rows: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="agentlog-bench-agents-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    try:
        for release, scenario in plan:
            walls: dict[bool, list[float]] = {True: [], False: []}
            queryable: list[float] = []
            failed_runs = 0
            for i in range(rounds):
                for hooks in ((True, False) if i % 2 == 0 else (False, True)):
                    run = run_scenario(release, scenario, base / "run", hooks=hooks)
                    if run.returncode != 0 or run.timed_out:
                        failed_runs += 1
                    else:
                        walls[hooks].append(run.wall_s)
                        if hooks:
                            queryable.append(_queryable_after(run))
                    done += 1
                    if progress is not None:
                        progress(done, total)
            with_h, without = describe(walls[True]), describe(walls[False])
            calls = scenario.action_count
            added = (with_h["median"] - without["median"]) if walls[True] and walls[False] else None
            rows.append({
                "release": release.label, "scenario": scenario.name, "tool_calls": calls, "rounds": rounds,
                "failed_runs": failed_runs, "with_hooks_s": with_h, "without_hooks_s": without,
                "added_s": added, "added_per_call_ms": (added * 1000 / calls) if added is not None and calls else None,
                "ratio": (with_h["median"] / without["median"]) if without["median"] else None,
                "queryable_after_exit_s": describe(queryable),
            })
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table = {
        "title": "Real agents with and without agentlog's hooks (medians)",
        "columns": ["release", "scenario", "calls", "with hooks s", "without s", "ratio", "added ms per call",
                    "queryable after exit s", "failed runs"],
        "rows": [[r["release"], r["scenario"], r["tool_calls"], r["with_hooks_s"]["median"],
                  r["without_hooks_s"]["median"], r["ratio"], r["added_per_call_ms"],
                  r["queryable_after_exit_s"]["median"], r["failed_runs"]] for r in rows],
        "note": "Whole-run wall time of the CLI (start to exit) against a scripted model on loopback; the hooks run on "
                "every event the agent fires, so 'added ms per call' also carries the prompt, stop and session hooks. "
                "'queryable after exit': for Codex, until the rollout import its Stop hook started has finished, "
                "then one query; for the others one query (which first brings the store and projection up to date).",
    }
    return {"machine": machine(), "rounds": rounds, "runs": rows, "tables": [table]}
