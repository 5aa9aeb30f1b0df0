"""``memory``: engram's operations at engram's scale, then at a larger one.

engram's figures (``shared/seeds/003…``): about 2,200 events over 1,000
memories. This step builds that (1,000 memories with tags and attributes,
then 1,200 more changes: tag edits and confirmations) in one process and
times each operation: append (a memory created), tag update, full rebuild
(replay of the log), differential verify (replay aside and compare), search
over five query shapes, proposal open and merge, undo, export and restore;
then ``agentlog memory list|show|search`` as whole processes. Then the same
store operations at the larger size (``--events`` / 14 memories, at most
100,000) and at one between (their geometric mean: 10,000), for the growth's
shape — only from ``--events 140000`` up: ``--events 100000 --only memory``
runs the 1,000-memory part alone (strict, relaxed, the commands), for iterating.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from typing import Any, Callable, Final

from agentlog.bench.common import describe
from agentlog.bench.context import StepContext
from agentlog.bench.measure import child
from agentlog.bench.serving import client, serve, stop, time_routes

BASE_MEMORIES: Final = 1000
EXTRA_CHANGES: Final = 1200
EXCHANGE_RUNS: Final = 5  # exports (and restores) at engram's scale, each into an empty directory
SEARCHES: Final = ("tests", '"make target"', "kind:procedure tag:ci", "pars* is:pinned", "status:active confidence>0.5")
KINDS: Final = (("procedure", {"goal": "run the tests", "steps": ["make test"]}),
                ("pitfall", {"symptom": "string_mismatch on config", "avoid": "read it first"}),
                ("convention", {"rule": "parse configs with tomllib"}),
                ("project", {"name": "agentlog", "status": "active"}))


def _ms(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def _build(ctx: StepContext, root: str, n: int, extra: int) -> tuple[list[str], list[float], list[float]]:
    from agentlog.api import confirm_memory, create_memory, edit_memory

    ids: list[str] = []
    append: list[float] = []
    for i in range(n):
        if ctx.over_budget():
            ctx.cap(f"stopped creating memories at {i:,} of {n:,} (time cap)")
            break
        kind, attrs = KINDS[i % len(KINDS)]
        t = time.perf_counter()
        m = create_memory(root, kind, f"memory {i} about tests and parsing", content=f"make target {i}", attributes=attrs,
                     tags=["ci" if i % 3 == 0 else "style", f"t{i % 50}"])
        append.append((time.perf_counter() - t) * 1000)
        ids.append(m.id)
    tags: list[float] = []
    for j in range(extra):
        if ctx.over_budget():
            ctx.cap(f"stopped the extra changes at {j:,} of {extra:,} (time cap)")
            break
        mid = ids[(j * 7919) % len(ids)]
        if j % 2:
            t = time.perf_counter()
            edit_memory(root, mid, tags=["ci", f"extra{j % 13}"])
            tags.append((time.perf_counter() - t) * 1000)
        else:
            confirm_memory(root, mid, actor="agent")
    return ids, append, tags


def _growth_table(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """Each operation at each size (engram's first), how much it grew from one size to the
    next, and the exponent of its growth over the whole range: the slope of log(time) against
    log(memories) — 1.0 is linear, 0 is constant, above 1 faster than linear."""
    def ops(r: dict[str, Any]) -> list[tuple[str, float]]:
        return ([("append p50", r["append"]["median"]), ("tag update p50", r["tag_update"]["median"]),
                 ("rebuild", r["rebuild_ms"]), ("differential verify", r["verify_ms"])]
                + [(f"search {q} p50", st["median"]) for q, st in r["search"].items()]
                + [(f"search {q} p95", st["p95"]) for q, st in r["search"].items()]
                + [("proposal open p50", r["proposal_open"]["median"]), ("merge p50", r["merge"]["median"]),
                   ("undo p50", r["undo"]["median"]), ("export p50", r["export_ms"]),
                   ("its file-system floor p50", r["export_floor_ms"]), ("restore p50", r["restore_ms"]),
                   ("a fixed Python loop (the machine's speed)", r.get("machine_loop_ms", 0.0))])

    per = [ops(r) for r in sizes]
    ns = [r["memories"] for r in sizes]

    def exponent(times: list[float]) -> float | None:
        if times[0] > 0 and times[-1] > 0 and ns[-1] > ns[0]:
            return math.log(times[-1] / times[0]) / math.log(ns[-1] / ns[0])
        return None

    drift = exponent([r.get("machine_loop_ms", 0.0) for r in sizes])
    rows = []
    for i, (name, _) in enumerate(per[0]):
        times = [p[i][1] for p in per]
        steps = [f"{b / a:,.1f}×" if a > 0 else "—" for a, b in zip(times, times[1:])]
        fit = exponent(times)
        rows.append([name, *(f"{t:,.2f} ms" for t in times), *steps, "—" if fit is None else f"{fit:.2f}",
                     "—" if fit is None or drift is None else f"{fit - drift:.2f}"])
    return {"title": "Growth from engram's scale to the larger size (strict)",
            "columns": ["operation", *(f"{n:,} memories" for n in ns),
                        *(f"grew {b // a if a else 0:,}× larger" for a, b in zip(ns, ns[1:])), "exponent",
                        "less the machine's drift"],
            "rows": rows,
            "note": "From one size to the next the memories grow by the factor in each 'grew' column's heading: an "
                    "operation growing linearly grows about as much, one whose cost does not depend on them about 1×. "
                    "Exponent: log(last time / first time) / log(last size / first size) — 1.00 is linear, 0 constant. "
                    "The last row times the same million additions before and after each size's operations (the mean "
                    "of the two medians of three): it does not depend on the size, so its growth is the machine's own "
                    "drift over the run — a shared machine slowing by that much slows every row with it; the last "
                    "column takes that row's exponent from each (a first-order correction: the loop is pure Python, "
                    "the operations also wait for the disk). "
                    "Searches over every match (a word in every memory) rank them all; the others read what their "
                    "operators select."}


def _read_tree(top: str) -> list[tuple[str, bytes]]:
    """Every file under ``top``: (its path under ``top``, its bytes), in walk order."""
    out = []
    for d, _, names in os.walk(top):
        for name in names:
            with open(os.path.join(d, name), "rb") as fh:
                out.append((os.path.relpath(os.path.join(d, name), top), fh.read()))
    return out


def _write_tree(top: str, files: list[tuple[str, bytes]]) -> None:
    """The file system's floor for an export: the same files made with nothing else done —
    a directory made once, then per file an open, a write and a close."""
    made: set[str] = set()
    for rel, data in files:
        path = os.path.join(top, rel)
        d = os.path.dirname(path)
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _spread(st: dict[str, float]) -> str:
    """A median with its maximum when there was more than one run."""
    return f"{st['median']:.0f} ms" + (f" ({st['max']:.0f})" if st["n"] > 1 else "")


def _machine_loop_ms() -> float:
    """A fixed piece of pure Python (a million additions), its median of three: how fast this
    machine is running now — a shared machine's speed drifts over the minutes a size takes."""
    def loop() -> None:
        x = 0
        for i in range(1_000_000):
            x += i

    return sorted(_ms(loop) for _ in range(3))[1]


def _store_ops(ctx: StepContext, root: str, n: int, extra: int) -> dict[str, Any]:
    from agentlog.api import (
        approve_proposal,
        edit_memory,
        export_memories,
        open_proposal,
        rebuild_memory_store,
        restore_memories,
        search_memories,
        undo_proposal,
        verify_memory_store,
    )

    ctx.progress(f"{n:,} memories, {extra:,} more changes")
    machine = [_machine_loop_ms()]
    t0 = time.perf_counter()
    ids, append, tags = _build(ctx, root, n, extra)
    n = len(ids)
    build_s = time.perf_counter() - t0
    rebuild_ms = _ms(lambda: rebuild_memory_store(root))
    verify_ms = _ms(lambda: verify_memory_store(root))
    search: dict[str, dict[str, float]] = {}
    # a p95 needs more than 20 runs (of 20, the nearest rank is the slowest): 100 at engram's scale
    search_runs = 100 if n <= 10_000 else 20
    for q in SEARCHES:
        search_memories(root, q)  # one untimed run, as the event search step does
        runs = []
        for _ in range(search_runs):
            t = time.perf_counter()
            search_memories(root, q)
            runs.append((time.perf_counter() - t) * 1000)
        search[q] = describe(runs)
    # a search right after a write: it pays catching the text index up (one tantivy commit)
    after_write: list[float] = []
    for k in range(20):
        edit_memory(root, ids[(k * 15485863) % len(ids)], content=f"rewritten {k} make target")
        t = time.perf_counter()
        search_memories(root, "rewritten")
        after_write.append((time.perf_counter() - t) * 1000)
    opened: list[float] = []
    merged: list[float] = []
    undone: list[float] = []
    for k in range(30):
        mid = ids[(k * 104729) % len(ids)]
        t = time.perf_counter()
        p = open_proposal(root, [{"op": "edit", "memory": mid, "fields": {"content": f"proposed {k}"}}],
                            title=f"p{k}")
        t1 = time.perf_counter()
        approve_proposal(root, p.id)
        t2 = time.perf_counter()
        undo_proposal(root, p.id)
        t3 = time.perf_counter()
        opened.append((t1 - t) * 1000)
        merged.append((t2 - t1) * 1000)
        undone.append((t3 - t2) * 1000)
    # export and restore are mostly the file system's work (a file per memory), which this disk's
    # state moves from run to run: several runs, each into an empty directory / root, and the median
    exchange_runs = EXCHANGE_RUNS if n <= 10_000 else 1
    exports: list[float] = []
    floors: list[float] = []
    out = ""
    for _ in range(exchange_runs):
        out = os.path.join(ctx.tmpdir(), "export")
        exports.append(_ms(lambda: export_memories(root, out)))
        files = _read_tree(out)
        floors.append(_ms(lambda: _write_tree(os.path.join(ctx.tmpdir(), "floor"), files)))
    again_ms = _ms(lambda: export_memories(root, out))  # into the last one: no file changed
    restores: list[float] = []
    for _ in range(exchange_runs):
        fresh = ctx.tmpdir()
        restores.append(_ms(lambda: restore_memories(fresh, out)))
    export, restore, floor = describe(exports), describe(restores), describe(floors)
    machine.append(_machine_loop_ms())
    return {"machine_loop_ms": sum(machine) / len(machine), "memories": n, "events": n + extra + 90,
            "build_secs": build_s, "append": describe(append), "tag_update": describe(tags), "rebuild_ms": rebuild_ms, "verify_ms": verify_ms, "search": search,
            "search_p95_ms": max(s["p95"] for s in search.values()),
            "search_mean_ms": sum(s["mean"] for s in search.values()) / len(search),
            "search_after_write": describe(after_write), "proposal_open": describe(opened),
            "merge": describe(merged), "undo": describe(undone), "export": export, "export_ms": export["median"],
            "export_again_ms": again_ms, "export_floor": floor, "export_floor_ms": floor["median"], "restore": restore, "restore_ms": restore["median"]}


#: dashboard routes timed at engram's scale: (name, path; ``{id}`` a memory's id)
DASHBOARD_ROUTES: Final = (("list", "/memory"), ("list_json", "/api/memory"), ("get", "/memory/{id}"),
                           ("get_json", "/api/memory/{id}"))


def _dashboard(ctx: StepContext, root: str) -> dict[str, dict[str, float]]:
    """The dashboard's memory pages over ``root`` (1,000 memories): ``agentlog serve --no-live``
    a child process, signed in, each route over HTTP on loopback after one untimed request."""
    ctx.progress("the dashboard's memory pages (agentlog serve, HTTP on loopback)")
    proc, url = serve(root, live=False)
    try:
        http = client(url)
        mid = http.get("/api/memory").json()["memories"][0]["id"]
        timed = time_routes(http, [path.format(id=mid) for _, path in DASHBOARD_ROUTES])
        http.close()
    finally:
        stop(proc)
    return {name: timed[path.format(id=mid)] for name, path in DASHBOARD_ROUTES}


def memory(ctx: StepContext) -> dict[str, Any]:
    """engram's memory operations at 1,000 memories, then at up to 100,000."""
    root = ctx.tmpdir()
    base = _store_ops(ctx, root, BASE_MEMORIES, EXTRA_CHANGES)
    # the same with durability = relaxed: no fsync per write, what engram's SQLite (WAL,
    # synchronous=NORMAL) gives — the like-for-like comparison with its figures
    was = os.environ.get("AGENTLOG_DURABILITY")
    os.environ["AGENTLOG_DURABILITY"] = "relaxed"
    try:
        relaxed = _store_ops(ctx, ctx.tmpdir(), BASE_MEMORIES, EXTRA_CHANGES)
    finally:
        if was is None:
            os.environ.pop("AGENTLOG_DURABILITY", None)
        else:
            os.environ["AGENTLOG_DURABILITY"] = was
    env = {**os.environ, "AGENTLOG_HOME": root}
    cli: dict[str, dict[str, float]] = {}
    from agentlog.api import list_memories

    slug = list_memories(root, limit=1)[0].slug
    for name, args in (("list", ["list", "--limit", "20"]), ("show", ["show", slug]), ("search", ["search", "tests"])):
        runs = [child([sys.executable, "-m", "agentlog", "memory", *args], env)["secs"] * 1000 for _ in range(7)]
        cli[name] = describe(runs)
    dashboard = _dashboard(ctx, root)
    from agentlog.bench.memory_truth_steps import FULL_MEMORIES, truth_checks

    ctx.progress("memory checks through git")
    checks_table, checks = truth_checks(ctx, full=(FULL_MEMORIES, ctx.events))
    big_n = min(100_000, ctx.events // 14)
    big: dict[str, Any] | None = None
    larger: list[dict[str, Any]] = []  # the sizes above engram's, smallest first
    if big_n >= 10 * BASE_MEMORIES:  # the larger size only where it says something (--events ≥ 140,000)
        # and one between (their geometric mean: 10,000 for 100,000), for the growth's shape
        between = int(round(math.sqrt(BASE_MEMORIES * big_n), -3))
        for n in ([between] if BASE_MEMORIES < between < big_n else []) + [big_n]:
            size_root = ctx.tmpdir()
            larger.append(_store_ops(ctx, size_root, n, n * EXTRA_CHANGES // BASE_MEMORIES))
            shutil.rmtree(size_root, ignore_errors=True)
        big = larger[-1]
    metrics: dict[str, Any] = {
        "machine_loop_ms": base["machine_loop_ms"],
        "append_p50_ms": base["append"]["median"], "tag_update_p50_ms": base["tag_update"]["median"],
        "rebuild_secs": base["rebuild_ms"] / 1000, "verify_secs": base["verify_ms"] / 1000,
        "search_p95_ms": base["search_p95_ms"], "search_after_write_p50_ms": base["search_after_write"]["median"],
        "proposal_open_p50_ms": base["proposal_open"]["median"],
        "merge_p50_ms": base["merge"]["median"], "undo_p50_ms": base["undo"]["median"],
        "export_ms": base["export_ms"], "restore_ms": base["restore_ms"], "export_floor_ms": base["export_floor_ms"],
        "cli_list_ms": cli["list"]["median"], "cli_show_ms": cli["show"]["median"],
        "cli_search_ms": cli["search"]["median"],
        "relaxed.append_p50_ms": relaxed["append"]["median"], "relaxed.tag_update_p50_ms": relaxed["tag_update"]["median"],
        "relaxed.proposal_open_p50_ms": relaxed["proposal_open"]["median"],
        "relaxed.merge_p50_ms": relaxed["merge"]["median"], "relaxed.undo_p50_ms": relaxed["undo"]["median"],
        "relaxed.restore_ms": relaxed["restore_ms"], "relaxed.search_p95_ms": relaxed["search_p95_ms"],
        "relaxed.export_ms": relaxed["export_ms"],
        "relaxed.search_after_write_p50_ms": relaxed["search_after_write"]["median"],
        # the statistics engram publishes (means and p95s), for the anchors
        "append_mean_ms": base["append"]["mean"], "append_p95_ms": base["append"]["p95"],
        "tag_update_mean_ms": base["tag_update"]["mean"], "tag_update_p95_ms": base["tag_update"]["p95"],
        "search_mean_ms": base["search_mean_ms"],
        "proposal_open_mean_ms": base["proposal_open"]["mean"], "proposal_open_p95_ms": base["proposal_open"]["p95"],
        "proposal_merge_mean_ms": base["merge"]["mean"], "proposal_merge_p95_ms": base["merge"]["p95"],
        "proposal_undo_mean_ms": base["undo"]["mean"], "proposal_undo_p95_ms": base["undo"]["p95"],
        "export_max_ms": base["export"]["max"], "export_again_ms": base["export_again_ms"],
        "export_secs": base["export_ms"] / 1000, "restore_secs": base["restore_ms"] / 1000,
        "restore_max_ms": base["restore"]["max"],
        "cli_secs": max(v["median"] for v in cli.values()) / 1000,
        "dashboard_list_mean_ms": dashboard["list"]["mean"], "dashboard_list_p95_ms": dashboard["list"]["p95"],
        "dashboard_get_mean_ms": dashboard["get"]["mean"], "dashboard_get_p95_ms": dashboard["get"]["p95"],
        **checks,
    }
    sized: list[tuple[str, dict[str, Any]]] = ([("mid", larger[0])] if len(larger) > 1 else []) + \
        ([("big", big)] if big else [])
    for prefix, r in sized:
        metrics.update({f"{prefix}.{k}": v for k, v in (("memories", r["memories"]),
                                                        ("append_p50_ms", r["append"]["median"]),
                                                        ("rebuild_secs", r["rebuild_ms"] / 1000),
                                                        ("verify_secs", r["verify_ms"] / 1000),
                                                        ("search_p95_ms", r["search_p95_ms"]),
                                                        ("search_after_write_p50_ms",
                                                         r["search_after_write"]["median"]),
                                                        ("merge_p50_ms", r["merge"]["median"]),
                                                        ("undo_p50_ms", r["undo"]["median"]),
                                                        ("export_ms", r["export_ms"]),
                                                        ("restore_ms", r["restore_ms"]),
                                                        ("machine_loop_ms", r["machine_loop_ms"]))})

    def row(label: str, r: dict[str, Any]) -> list[Any]:
        return [label, f"{r['memories']:,} / {r['events']:,}", f"{r['append']['median']:.2f} ms",
                f"{r['tag_update']['median']:.2f} ms", f"{r['rebuild_ms'] / 1000:.2f} s", f"{r['verify_ms'] / 1000:.2f} s",
                f"{r['search_p95_ms']:.1f} ms", f"{r['search_after_write']['median']:.1f} ms",
                f"{r['proposal_open']['median']:.2f} / {r['merge']['median']:.2f} ms",
                f"{r['undo']['median']:.2f} ms", _spread(r["export"]), f"{r['export_floor']['median']:.0f} ms",
                _spread(r["restore"])]

    rows = [row("engram's scale", base), row("engram's scale, relaxed", relaxed)] + [row("larger", r) for r in larger]
    tables = [{
        "title": "Memory operations (in process)",
        "columns": ["size", "memories / events", "append p50", "tag update p50", "rebuild", "differential verify",
                    "search p95 (5 shapes)", "search after a write p50", "proposal open / merge p50", "undo p50",
                    "export p50 (max)", "its file-system floor p50", "restore p50 (max)"],
        "rows": rows,
        "note": "One process, strict durability (each write fdatasyncs the memory log; its head is overwritten in "
                "place, not synced), except the row "
                "marked relaxed (durability = relaxed: flushing left to the OS, as engram's SQLite WAL with "
                "synchronous=NORMAL does — the like-for-like row for engram's figures). Append = a memory created; tag "
                "update = an edit of its tags; search p95 is the worst of five shapes (" + ", ".join(SEARCHES) +
                "), after one untimed run 100 runs each at engram's scale and 20 at the larger size (where the p95 is the "
                "slowest run); search after a write = an edit, then a search that finds it (the text index is caught up: one "
                "tantivy commit), 20 times; proposals edit one memory, 30 of them, each merged and undone; export and restore "
                f"{EXCHANGE_RUNS} times each at engram's scale (once at the larger size), each into an empty directory or "
                "root (a file per memory: the file system's share moves with the disk's state); its floor = the same "
                "files written into another empty directory with nothing else done (a directory made once, then an "
                "open, a write and a close per file), right after each export. Targets at engram's "
                "scale: append ≤ 0.5 ms, rebuild ≤ 0.5 s, verify ≤ 0.5 s, search p95 ≤ 5 ms, open and merge ≤ 1 ms, "
                "undo ≤ 5 ms, export ≤ 150 ms, restore ≤ 150 ms.",
    }, *([_growth_table([base, *larger])] if big else []), {
        "title": "agentlog memory commands as whole processes (engram's scale)",
        "columns": ["command", "p50", "p95"],
        "rows": [[f"agentlog memory {k}", f"{v['median']:.0f} ms", f"{v['p95']:.0f} ms"] for k, v in cli.items()],
        "note": "Spawn to exit, 7 runs each. Target ≤ 150 ms.",
    }, {
        "title": "The dashboard's memory pages (engram's scale)",
        "columns": ["route", "first", "mean", "p50", "p95"],
        "rows": [[path, f"{d['first']:.1f} ms", f"{d['mean']:.1f} ms", f"{d['median']:.1f} ms", f"{d['p95']:.1f} ms"]
                 for (name, path), d in ((r, dashboard[r[0]]) for r in DASHBOARD_ROUTES)],
        "note": "`agentlog serve --no-live` (a child process) over the 1,000 memories above, signed in; HTTP on "
                "loopback (httpx), one untimed request per route, then the web step's runs. The list is a page of "
                "memories (HTML, and its JSON); one memory is its page with its evidence resolved and its history.",
    }, checks_table]
    return {"tables": tables, "metrics": metrics, "base": base, "big": big, "cli": cli, "dashboard": dashboard}


MEMORY_STEPS: Final = {"memory": memory}
