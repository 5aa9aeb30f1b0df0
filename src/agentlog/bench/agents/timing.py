"""``agentlog bench agents``: what agentlog's hooks add to a real agent's run.

For each release and scenario, the same scripted run goes with the native hook
(and a daemon answering it), with the Python hook, and without hooks, in a
rotating order, ``rounds`` times each (this machine is noisy: the differences are
taken within the run). Reported: the median whole-run wall time each way, the time
added per tool call by each hook, and how long after the CLI exits the record is
queryable (Codex: its background rollout import done, then a query;
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
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("native", {"hooks": True, "daemon": True}),
    ("python", {"hooks": True, "install_args": ("--python-hook",), "daemon": True}),
    ("none", {"hooks": False}),
]
"""The ways each scenario is run, in a rotating order each round."""


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


def _acknowledged(run: Any) -> int:
    """How many hooks of a native run the daemon's capture server acknowledged."""
    import json

    try:
        doc = json.loads((run.data_root / "state" / "hook-server.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(doc.get("acknowledged") or 0)


def _per_call(added_s: float | None, calls: int) -> float | None:
    return added_s * 1000 / calls if added_s is not None and calls else None


def run_agents_bench(agents: list[str], scenarios: list[str], rounds: int, all_releases: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    known = load_all()
    for s in scenarios:
        if s not in known:
            raise UsageError(f"unknown scenario {s!r} (one of {', '.join(known)})")
    releases = pick_releases(agents, all_releases)
    plan = [(r, known[s]) for r in releases for s in scenarios if known[s].applies_to(r.agent)]
    total = len(plan) * rounds * len(VARIANTS)
    done = 0
    rows: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="agentlog-bench-agents-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    try:
        for release, scenario in plan:
            walls: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
            queryable: list[float] = []
            answered = 0  # hooks the daemon's capture server acknowledged in the native runs
            failed_runs = 0
            for i in range(rounds):
                turn = i % len(VARIANTS)
                for name, how in VARIANTS[turn:] + VARIANTS[:turn]:
                    run = run_scenario(release, scenario, base / "run", **how)
                    if run.returncode != 0 or run.timed_out:
                        failed_runs += 1
                    else:
                        walls[name].append(run.wall_s)
                        if name == "native":
                            answered += _acknowledged(run)
                            queryable.append(_queryable_after(run))
                    done += 1
                    if progress is not None:
                        progress(done, total)
            stats = {name: describe(w) for name, w in walls.items()}
            calls = scenario.action_count

            def added(name: str) -> float | None:
                return (stats[name]["median"] - stats["none"]["median"]) if walls[name] and walls["none"] else None

            rows.append({
                "release": release.label, "scenario": scenario.name, "tool_calls": calls, "rounds": rounds,
                "failed_runs": failed_runs, "native_s": stats["native"], "python_s": stats["python"],
                "without_hooks_s": stats["none"],
                **{f"{name}_added_s": added(name) for name in ("native", "python")},
                **{f"{name}_added_per_call_ms": _per_call(added(name), calls) for name in ("native", "python")},
                "queryable_after_exit_s": describe(queryable), "native_acknowledged": answered,
            })
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table = {
        "title": "Real agents with the native hook, the Python hook and no hook (medians)",
        "columns": ["release", "scenario", "calls", "native hook s", "Python hook s", "no hook s",
                    "added ms per call, native", "added ms per call, Python", "answered (native)",
                    "queryable after exit s", "failed runs"],
        "rows": [[r["release"], r["scenario"], r["tool_calls"], r["native_s"]["median"], r["python_s"]["median"],
                  r["without_hooks_s"]["median"], r["native_added_per_call_ms"], r["python_added_per_call_ms"],
                  r["native_acknowledged"], r["queryable_after_exit_s"]["median"], r["failed_runs"]] for r in rows],
        "note": "Whole-run wall time of the CLI (start to exit) against a scripted model on loopback, the three "
                "variants in a rotating order each round. Native: `agentlog install` builds the client, and "
                "`agentlog daemon run` answers on the data root's socket while the agent runs (the daemon also "
                "ingests meanwhile, as it would). Python: `agentlog install --python-hook`, with the daemon "
                "running too (it ingests what the hooks write), so that the two differ only in the hook's path. The hooks run on every "
                "event the agent fires, so 'added ms per call' also carries the prompt, stop and session hooks. "
                "Every native run's hooks were answered by the daemon unless 'answered' says fewer. "
                "'queryable after exit' (native runs): for Codex, until the rollout import its Stop hook started "
                "has finished, then one query; for the others one query (which first brings the store and "
                "projection up to date).",
    }
    return {"machine": machine(), "rounds": rounds, "runs": rows, "tables": [table]}
