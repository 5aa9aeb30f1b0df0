"""The memory check's rows of ``agentlog bench memory``: memories with file evidence checked
through git (:mod:`agentlog.memory.truth`), at growing numbers of memories; the incremental
check after new recorded events and after a commit; the full check of many memories
against a recorded history."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Final

from agentlog.bench.context import StepContext
from agentlog.bench.memory_truth_setup import Agent, file_lines, git, relaxed, second_commit

SIZES: Final = (100, 1000)
CITES_PER_FILE: Final = 10
NEW_EVENTS: Final = 1000
RUNS: Final = 3
"""Runs of each incremental case (their median is shown)."""
INCREMENTAL_MEMORIES: Final = 1000
"""The memories of the incremental check over the workload's history (the issue's goal: 200 ms
after 1,000 new events with 1,000 memories, whatever the history)."""
FULL_MEMORIES: Final = 10_000
"""The full check's memories, against the workload's history at the run's ``--events``
(:mod:`.memory_truth_history`; the issue's goal: 10,000 memories against 1.45 M events in 30 s)."""


def _setup(ctx: StepContext, n: int) -> tuple[str, str, int]:
    """A data root with ``n`` memories (each citing 3 lines of one of ``n / 10`` files at the first
    commit; and a procedure, ``make test``, and a pitfall, on ``src/pit.py``), and its repository."""
    from agentlog.api import create_memory

    root, repo = ctx.tmpdir(), ctx.tmpdir()
    files = max(1, n // CITES_PER_FILE)
    git(repo, "init", "-q", "-b", "main")
    for f in range(files):
        with open(os.path.join(repo, f"m{f}.py"), "w") as fh:
            fh.write("\n".join(file_lines(f)) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD")
    with relaxed():
        for i in range(n):
            f, k = divmod(i, CITES_PER_FILE)
            create_memory(root, "fact", f"m{i}", attributes={"statement": f"m{i}"},
                          evidence=[{"type": "file", "path": f"m{f % files}.py", "line_start": 5 * k + 1,
                                     "line_end": 5 * k + 3, "commit": first}])
        create_memory(root, "procedure", "Run the tests", attributes={"goal": "test", "steps": ["make test"],
                                                                      "command": "make test"})
        create_memory(root, "pitfall", "pit.py edits fail", attributes={"symptom": "s", "avoid": "a",
                                                                       "paths": ["src/pit.py"]})
    return root, repo, files


def _timed(root: str, repo: str, everything: bool = False) -> dict[str, Any]:
    from agentlog.api import check_memories

    t = time.perf_counter()
    report = check_memories(root, repo_dir=repo, everything=everything)
    return {"ms": (time.perf_counter() - t) * 1000, "checked": report.checked, "written": report.written,
            "moved": report.moved, "doubtful": len(report.doubtful), "events_read": report.events_read}


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {**runs[-1], "ms": statistics.median(r["ms"] for r in runs), "runs": [round(r["ms"], 1) for r in runs]}


def _one_size(ctx: StepContext, n: int, new_events: int = NEW_EVENTS, runs_of: int = RUNS) -> dict[str, Any]:
    """``n`` memories (:func:`_setup`); a second commit inserts lines at the top of a third of
    the files (their citations move) and edits one cited line in a tenth (changed). Then: the
    first full check, a second (nothing new), the incremental one with nothing new, after
    :data:`NEW_EVENTS` recorded events (ingested first, untimed; ``make test`` among them
    touches the procedure), and after a commit that edits one file in ten."""
    from agentlog.api import bring_up_to_date

    root, repo, files = _setup(ctx, n)
    second_commit(repo, files)
    out: dict[str, Any] = {"memories": n, "files": files}
    out["first"] = _timed(root, repo, everything=True)
    out["again"] = _timed(root, repo, everything=True)
    out["incremental"] = _median([_timed(root, repo) for _ in range(runs_of)])
    agent = Agent(root, repo, f"bench-{n}")
    runs = []
    for _ in range(runs_of):
        agent.calls(new_events)
        bring_up_to_date(root)
        runs.append(_timed(root, repo))
    out["events"] = _median(runs)
    runs = []
    for r in range(runs_of):
        for f in list(range(r % 10, files, 10)) or [r % files]:  # one file in ten gains a line at its end
            with open(os.path.join(repo, f"m{f}.py"), "a") as fh:
                fh.write(f"tail_{r} = True\n")
        git(repo, "commit", "-q", "-am", f"tail {r}")
        runs.append(_timed(root, repo))
    out["commit"] = _median(runs)
    return out


def truth_checks(ctx: StepContext, sizes: tuple[int, ...] = SIZES, full: tuple[int, int] | None = None,
                 new_events: int = NEW_EVENTS, runs: int = RUNS, full_incremental: int = INCREMENTAL_MEMORIES
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The table and the metrics of the memory check at each of ``sizes``, and with ``full``
    (memories, recorded events) the full check of that many memories against the workload's
    history of that many events (:mod:`.memory_truth_history`), and the incremental one with
    ``full_incremental`` memories over it;
    ``new_events`` recorded before each "after new events" run, ``runs`` of each incremental case."""
    found = [_one_size(ctx, n, new_events, runs) for n in sizes]
    metrics: dict[str, Any] = {}
    rows = []
    for r in found:
        n = r["memories"]
        first, again, inc, ev, com = r["first"], r["again"], r["incremental"], r["events"], r["commit"]
        metrics.update({f"check.{n}.first_ms": first["ms"], f"check.{n}.again_ms": again["ms"],
                        f"check.{n}.incremental_ms": inc["ms"], f"check.{n}.per_memory_ms": again["ms"] / n,
                        f"check.{n}.after_events_ms": ev["ms"], f"check.{n}.after_commit_ms": com["ms"]})
        rows.append([f"{n:,} / {r['files']:,}", f"{first['ms']:.0f} ms ({first['moved']} moved, {first['doubtful']} "
                     f"doubtful)", f"{again['ms']:.0f} ms", f"{again['ms'] / n:.2f} ms", f"{inc['ms']:.0f} ms",
                     f"{ev['ms']:.0f} ms ({ev['checked']} checked)", f"{com['ms']:.0f} ms ({com['checked']} checked)"])
    if full is not None:
        from agentlog.bench.memory_truth_history import history_check, history_incremental

        big = history_check(ctx, *full)
        n, e = big["memories"], big["events"]
        first, again = big["first"], big["again"]
        metrics.update({f"check.full.{n}.{e}.first_ms": first["ms"], f"check.full.{n}.{e}.again_ms": again["ms"],
                        f"check.full.{n}.{e}.first_load": first["load"],
                        f"check.full.{n}.{e}.again_load": again["load"]})
        rows.append([f"{n:,} against {e:,} events", f"{first['ms']:.0f} ms ({first['doubtful']} doubtful, "
                     f"{first['proposals']} proposals; load {first['load']:.2f})",
                     f"{again['ms']:.0f} ms (load {again['load']:.2f})", f"{again['ms'] / n:.2f} ms", "", "", ""])
        inc = history_incremental(ctx, full_incremental, e, new_events, runs)
        metrics.update({f"check.history.{e}.after_events_ms": inc["ms"],
                        f"check.history.{e}.store_read": any(r["store_read"] for r in inc["runs"])})
        rows.append([f"{inc['memories']:,} over {e:,} events", "", "", "", "",
                     f"{inc['ms']:.0f} ms ({inc['runs'][-1]['checked']} checked, store "
                     f"{'read' if any(r['store_read'] for r in inc['runs']) else 'not read'}; load "
                     f"{inc['runs'][-1]['load']:.2f})", ""])
    table = {
        "title": "Memory checks through git (agentlog memory check)",
        "columns": ["memories / files cited", "first full check", "full check again", "per memory (again)",
                    "incremental, nothing new", f"incremental after {new_events:,} new events",
                    "incremental after a commit"],
        "rows": rows,
        "note": "Each memory cites 3 lines of one of memories/10 files at the first commit (plus a procedure and a "
                "pitfall); the second commit moves the lines of a third of the files down (citations followed) and "
                "edits a cited line in a tenth. The first check writes a memory_checked event for each memory; the "
                "second finds the moved ones unchanged at their new place. The incremental runs read what happened "
                "since the last run's watermark: nothing; "
                f"{new_events:,} hook events (tool calls: make test succeeding, which touches the procedure, edits, "
                "make lint failing), ingested before the timed run; a commit appending a line to one file in ten "
                f"(the memories citing them are checked). Median of {runs} runs each (the full checks: one run). "
                "A row 'N over E events' runs the incremental check after new events (as the daemon does: no "
                "catch-up) with N memories of the same mix over the workload's history of E events; "
                "A full-check row 'N against E events' checks N memories of every kind (file, event, attempt and URL "
                "citations, pitfalls, procedures, decisions: memory_truth_history) against the workload's recorded "
                "history of E events, with the 1-minute load average when each run began.",
    }
    return table, metrics
