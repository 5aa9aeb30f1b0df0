"""Benchmark steps of the projection and the query engine (issue 5): the
projection's cost by size, opening the engine and answering in a fresh
process, the recent timeline, ``STATE … AT``, ``TRACE`` over the 200-attempt
chain, and answering again after 1,000 new events.

Every step works on logs written by ``bench load`` (the real capture path),
shared per run through :func:`roots.loaded_logs`. A data root with the
store ingested, and then with the projection built, is kept per size and seed
(:func:`roots.store_root`, :func:`roots.built_root`) in
``<out>/.workload-cache/built-<size>-<seed>/`` (its ``logs`` a link to the
loaded logs), so that ``projection_100k`` and ``engine_100k`` ingest once and
the steps that only read (``engine_*``, ``recent_timeline``, ``state_at``,
``trace_chain``) do not rebuild. Setup — loading, ingest, the projection a
reading step needs — runs in child processes and is never part of a figure;
``refresh`` changes its root, so it works on a copy (logs linked file by file,
store and projection copied).

The steps of a fixed size are skipped when ``--events`` is below it (as the
store's); ``recent_timeline``, ``state_at``, ``trace_chain`` and ``refresh``
run at ``--events``. Peak RSS: where a step has a setup phase in its own
process, the kernel's high-water mark (``VmHWM``) is reset
(``/proc/self/clear_refs``) before the measured phase and the metric
``peak_rss_bytes`` is the phase's own; for the ``engine_*`` steps it is the
peak of the fresh processes, what a user's command costs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from typing import Any, Callable

from agentlog.bench.common import describe
from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.measure import child, du, fresh, reset_peak, timed, vmhwm
from agentlog.bench.roots import (
    FULL_EVENTS,
    PROJECTION_MARKER,
    SRC,
    built_root,
    clone,
    store_root,
    write_marker,
)

FRESH_RUNS = 7
"""Fresh processes per measurement (the brief: at least 5)."""
STATEMENT_RUNS = 25
"""In-process repetitions of a statement (at least 20)."""
TRACE_RUNS = 50
STATE_ROUNDS = 3
"""Rounds over the 10 STATE points (at least one, more while within the time cap)."""
STATE_POINTS = 10
REFRESH_ROUNDS = 10
REFRESH_EVENTS = 1000
WINDOW_US = 24 * 3600 * 1_000_000

GROUP_BY = "SELECT provider, kind, count(*) AS n FROM events GROUP BY 1, 2 ORDER BY 3 DESC"
FAILED = "SHOW FAILED ATTEMPTS LIMIT 50"
#: The seed's query table: (metric name, statement, language).
STATEMENTS: tuple[tuple[str, str, str], ...] = (
    ("group_by", GROUP_BY, "sql"),
    ("count_tool_calls", "SELECT count(*) FROM tool_calls", "sql"),
    ("count_events", "SELECT count(*) FROM events", "sql"),
    ("count_edges", "SELECT count(*) FROM edges", "sql"),
    ("failed_attempts", FAILED, "aql"),
)
#: Answered again after new events (`refresh`): SHOW FAILED ATTEMPTS LIMIT 50 in SQL, so that the
#: fresh process can be the real `agentlog sql` command, catch-up included.
REFRESH_SQL = ("SELECT attempt_id, outcome, failure_class, started_at FROM attempts "
               "WHERE outcome = 'failed' ORDER BY started_at DESC LIMIT 50")
COUNT_TABLES = ("sessions", "turns", "attempts", "edges", "tool_calls", "work_units")

FRESH_AQL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from agentlog.query.engine import Engine
from agentlog.query.aql import execute
from agentlog.query.scope import Scope
with Engine(sys.argv[2]) as engine:
    r = execute(engine, sys.argv[3], scope=Scope())
print(json.dumps({"rows": len(r.rows)}))
"""


# --------------------------------------------------------------------------- helpers


def _label(size: int) -> str:
    return "full" if size == FULL_EVENTS else f"{size // 1000}k"


def _fmt(d: dict[str, float]) -> str:
    """p50 / p95 / p99 of milliseconds, each with its unit."""

    def one(v: float) -> str:
        if v < 1:
            return f"{v * 1000:.0f} µs"
        if v >= 10_000:
            return f"{v / 1000:,.1f} s"
        return f"{v:,.1f} ms" if v < 100 else f"{v:,.0f} ms"

    return " / ".join(one(d[k]) for k in ("median", "p95", "p99"))


def _put(metrics: dict[str, Any], prefix: str, d: dict[str, float]) -> None:
    metrics[f"{prefix}_p50_ms"] = d["median"]
    metrics[f"{prefix}_p95_ms"] = d["p95"]
    metrics[f"{prefix}_p99_ms"] = d["p99"]


def _skip(ctx: StepContext, size: int) -> dict[str, Any] | None:
    if ctx.events < size:
        return {"tables": [], "metrics": {}, "skipped": f"--events {ctx.events:,} is below {size:,}"}
    return None


def _aql() -> Callable[..., Any] | None:
    """AttemptQL's executor (``agentlog.query.aql.execute``) when this build has it."""
    try:
        from agentlog.api import execute_aql
    except ImportError:
        return None
    return execute_aql


def _aql_run(aql: Callable[..., Any], engine: Any, text: str) -> Any:
    """One AttemptQL statement over every project, ``now`` the latest event (the executor's default)."""
    from agentlog.api import Scope

    return aql(engine, text, scope=Scope())


def _no_aql(ctx: StepContext) -> dict[str, Any]:
    return {"tables": [], "metrics": {}, "skipped": "AttemptQL (agentlog.query.aql) is not in this build"}


def _iso(us: int) -> str:
    from agentlog.api import format_us

    return format_us(us)


def _counts(root: str) -> dict[str, int]:
    from agentlog.api import Engine

    with Engine(root) as engine:
        return {t: int(engine.run(f"SELECT count(*) FROM {t}").rows[0][0]) for t in COUNT_TABLES}


# --------------------------------------------------------------------------- projection_*


def projection_step(size: int) -> StepFn:
    label = _label(size)

    def step(ctx: StepContext) -> dict[str, Any]:
        from agentlog.api import projection_dir, refresh_projection

        skipped = _skip(ctx, size)
        if skipped:
            return skipped
        root, info = store_root(ctx, size)
        marker = os.path.join(root, PROJECTION_MARKER)
        if os.path.exists(marker):
            os.remove(marker)
        events = int(info["events"])
        last = [time.monotonic()]

        def progress(phase: str, done: int, total: int) -> None:
            if time.monotonic() - last[0] > 10:
                last[0] = time.monotonic()
                ctx.progress(f"{phase}: {done:,} of {total:,} events")

        ctx.progress(f"full projection of {events:,} events")
        reset = reset_peak()
        t0 = time.perf_counter()
        rep = refresh_projection(root, full=True, progress=progress)
        secs = time.perf_counter() - t0
        peak = vmhwm() if reset else None
        counts = _counts(root)
        proj_bytes = du(projection_dir(root))
        write_marker(marker, {"projection_secs": secs, "projection_mode": rep.mode, "projection_counts": rep.counts,
                               "projection_peak_rss_bytes": peak})
        metrics: dict[str, Any] = {
            "events": events,
            "secs": secs,
            "events_per_s": events / secs if secs else 0.0,
            **counts,
            "projection_bytes": proj_bytes,
            "projection_bytes_per_event": proj_bytes / max(1, events),
            "ingest_secs": info.get("ingest_secs", 0.0),
        }
        if peak:
            metrics["peak_rss_bytes"] = peak
        table = {
            "title": f"Full projection of {events:,} events (`refresh(root, full=True)`, one process)",
            "columns": ["events", "seconds", "events/s", "peak RSS", "sessions", "turns", "attempts", "edges",
                        "tool calls", "work units", "projection on disk"],
            "rows": [[events, secs, metrics["events_per_s"], f"{peak / 2**20:,.0f} MiB" if peak else "see Steps",
                      counts["sessions"], counts["turns"], counts["attempts"], counts["edges"], counts["tool_calls"],
                      counts["work_units"], f"{proj_bytes / 2**20:,.1f} MiB ({metrics['projection_bytes_per_event']:,.0f} B/event)"]],
            "note": "The store was ingested first in a child process (not timed: "
            f"{info.get('ingest_secs', 0.0):.1f} s). Timed: `agentlog.projection.persist.refresh(root, full=True)` — read "
            "the store's columns the projector uses, split sessions into 16 shards, project each session (turns, "
            "tool-call pairing, attempts, supersession, signals, commits), the cross-session stage (work units, "
            "handoffs, decisions, conflicts), and write every table as Parquet. Peak RSS: this process's VmHWM over "
            "that call alone (reset before it). Counts are the engine's views (`edges` includes the structural "
            "edges the view derives). attemptdb's `projection_*` project the generator's stream in memory "
            "(streaming: 0.01 s at 10 k, 0.27 s at 100 k, 4.38 s at 500 k, 34.5 s at 1.45 M; RSS 133 MiB, 350 MiB, "
            "965 MiB, 2.29 GiB) and write nothing.",
        }
        return {"tables": [table], "metrics": metrics, "refresh": rep.to_dict()}

    step.__doc__ = f"Full projection of {size:,} events from the store: seconds, events/s, peak RSS, entity counts."
    step.__name__ = f"projection_{label}"
    return step


# --------------------------------------------------------------------------- engine_*


def engine_step(size: int) -> StepFn:
    label = _label(size)

    def step(ctx: StepContext) -> dict[str, Any]:
        from agentlog.api import Engine

        skipped = _skip(ctx, size)
        if skipped:
            return skipped
        root, info = built_root(ctx, size)
        events = int(info["events"])
        aql = _aql()
        env = {**os.environ, "AGENTLOG_HOME": root}
        ctx.progress(f"{FRESH_RUNS} fresh processes per first statement")
        floor_ms, _, _ = fresh([sys.executable, "-c", "pass"], env, FRESH_RUNS)
        import_ms, _, _ = fresh([sys.executable, "-c", "import agentlog.cli"], env, FRESH_RUNS)
        sql_ms, sql_rss, out = fresh([sys.executable, "-m", "agentlog", "sql", "--no-ingest", "--json", GROUP_BY],
                                      env, FRESH_RUNS)
        sql_rows = len(json.loads(out)["rows"])
        aql_ms: list[float] = []
        aql_rss: list[int] = []
        aql_rows = None
        aql_how = ""
        if aql is not None:
            if importlib.util.find_spec("agentlog.cli.query_cmds") is not None:
                aql_how = f"`agentlog query --no-ingest --json \"{FAILED}\"`"
                aql_ms, aql_rss, out = fresh([sys.executable, "-m", "agentlog", "query", "--no-ingest", "--json", FAILED],
                                              env, FRESH_RUNS)
                aql_rows = len(json.loads(out))
            else:
                aql_how = f"`python -c` Engine + `{FAILED}`"
                aql_ms, aql_rss, out = fresh([sys.executable, "-c", FRESH_AQL, SRC, root, FAILED], env, FRESH_RUNS)
                aql_rows = int(json.loads(out)["rows"])

        ctx.progress(f"statements in one process, {STATEMENT_RUNS} times each")
        reset = reset_peak()
        open_ms: list[float] = []
        for _ in range(FRESH_RUNS):
            t0 = time.perf_counter()
            Engine(root).close()
            open_ms.append((time.perf_counter() - t0) * 1e3)
        per: dict[str, tuple[list[float], int]] = {}
        with Engine(root) as engine:
            for name, text, lang in STATEMENTS:
                if lang == "aql":
                    if aql is None:
                        continue
                    ms, res = timed(lambda: _aql_run(aql, engine, text), STATEMENT_RUNS)
                else:
                    ms, res = timed(lambda: engine.run(text), STATEMENT_RUNS)
                per[name] = (ms, len(res.rows))
        in_peak = vmhwm() if reset else None

        first, aql_first = describe(sql_ms), describe(aql_ms)
        metrics: dict[str, Any] = {
            "events": events,
            "first_statement_secs": first["median"] / 1e3,
            "first_statement_p95_secs": first["p95"] / 1e3,
            "first_statement_p99_secs": first["p99"] / 1e3,
            "interpreter_floor_p50_ms": describe(floor_ms)["median"],
            "import_cli_p50_ms": describe(import_ms)["median"],
            "open_p50_ms": describe(open_ms)["median"],
            "peak_rss_bytes": max(sql_rss + aql_rss),
            "first_statement_peak_rss_bytes": max(sql_rss),
        }
        _put(metrics, "first_statement", first)
        if aql_ms:
            metrics["first_aql_secs"] = aql_first["median"] / 1e3
            _put(metrics, "first_aql", aql_first)
            metrics["first_aql_peak_rss_bytes"] = max(aql_rss)
        if in_peak:
            metrics["in_process_peak_rss_bytes"] = in_peak
        rows: list[list[Any]] = [
            ["`python -c pass` (interpreter floor)", "—", FRESH_RUNS, _fmt(describe(floor_ms)), "—"],
            ["`python -c 'import agentlog.cli'`", "—", FRESH_RUNS, _fmt(describe(import_ms)), "—"],
            [f"`agentlog sql --no-ingest --json \"{GROUP_BY}\"`", sql_rows, FRESH_RUNS, _fmt(first),
             f"{max(sql_rss) / 2**20:,.0f} MiB"],
        ]
        if aql_ms:
            rows.append([aql_how, aql_rows, FRESH_RUNS, _fmt(aql_first),
                         f"{max(aql_rss) / 2**20:,.0f} MiB"])
        stmt_rows: list[list[Any]] = [["`Engine(root)` (open: register the store and projection)", "—", FRESH_RUNS,
                                       _fmt(describe(open_ms))]]
        for name, text, _lang in STATEMENTS:
            if name not in per:
                stmt_rows.append([f"`{text}`", "—", 0, "not run: AttemptQL is not in this build"])
                continue
            ms, n_rows = per[name]
            d = describe(ms)
            _put(metrics, name, d)
            metrics[f"rows.{name}"] = n_rows
            stmt_rows.append([f"`{text}`", n_rows, len(ms), _fmt(d)])
        tables = [
            {
                "title": f"Open and answer the first statement in a fresh process ({events:,} events)",
                "columns": ["process", "rows", "runs", "wall p50 / p95 / p99", "peak RSS"],
                "rows": rows,
                "note": "Each run is a new process started and waited for by this step (spawn to exit: interpreter, "
                "imports, opening the store's Delta snapshot and the stored projection as DuckDB views, the "
                "statement, printing the JSON), with `AGENTLOG_HOME` at a root whose store and projection are "
                "current (built beforehand, not timed). Peak RSS is the process's own (`wait4`). attemptdb's "
                "figure is `QueryEngine::from_database` before any statement (2.52 s at 100 k, 5.50 s at 200 k, "
                "8.43 s at 300 k, crashed at 400 k and 500 k, 2 min 40 s and 21.1 GiB at 1.45 M).",
            },
            {
                "title": f"The seed's statements in one process, {STATEMENT_RUNS} times each ({events:,} events)",
                "columns": ["statement", "rows", "runs", "p50 / p95 / p99"],
                "rows": stmt_rows,
                "note": "One `Engine` opened once; every run counted (no warm-up: the first run of a statement "
                "reads its Parquet metadata). AttemptQL statements through `agentlog.query.aql.execute` over every "
                "project. The `edges` view unions the stored edges with the structural ones it derives."
                + (f" This process's peak RSS over this phase: {in_peak / 2**20:,.0f} MiB." if in_peak else ""),
            },
        ]
        return {"tables": tables, "metrics": metrics, "setup": info}

    step.__doc__ = (f"Open the engine and answer the first statement in fresh processes, then the seed's statements "
                    f"in one process, at {size:,} events (p50/p95/p99, peak RSS).")
    step.__name__ = f"engine_{label}"
    return step


# --------------------------------------------------------------------------- recent_timeline


def _timeline() -> Callable[..., Any] | None:
    """``agentlog.query.views.timeline`` (what ``agentlog timeline`` shows) when this build has it."""
    try:
        from agentlog.api import timeline
    except ImportError:
        return None
    return timeline


TIMELINE_SQL = (
    "SELECT s.session_id, s.provider, s.project_name, t.turn_id, t.turn_index, t.started_at AS turn_started_at, "
    "t.status, a.attempt_id, a.attempt_index, a.outcome, a.started_at AS attempt_started_at "
    "FROM turns t JOIN sessions s ON s.session_id = t.session_id "
    "LEFT JOIN attempts a ON a.turn_id = t.turn_id "
    "WHERE (t.ended_at IS NULL OR t.ended_at >= make_timestamptz(?)) "
    "ORDER BY s.started_at DESC, t.turn_index, a.attempt_index"
)


def recent_timeline(ctx: StepContext) -> dict[str, Any]:
    """The last 24 h of synthetic time: the timeline (sessions → turns → attempts) and SHOW statements, p50/p95/p99."""
    from agentlog.api import Engine, Scope

    root, info = built_root(ctx, ctx.events)
    aql = _aql()
    views_timeline = _timeline()
    reset = reset_peak()
    with Engine(root) as engine:
        latest = int(engine.run("SELECT epoch_us(max(observed_at)) FROM events").rows[0][0])
        since = latest - WINDOW_US
        window = engine.run(
            "SELECT (SELECT count(*) FROM events WHERE observed_at >= make_timestamptz(?)), "
            "(SELECT count(*) FROM sessions WHERE last_event_at >= make_timestamptz(?)), "
            "(SELECT count(*) FROM turns WHERE coalesce(ended_at, started_at) >= make_timestamptz(?)), "
            "(SELECT count(*) FROM attempts WHERE coalesce(ended_at, started_at) >= make_timestamptz(?))",
            [since, since, since, since]).rows[0]
    scope = Scope(since_us=since)

    how = ("`agentlog.query.views.timeline` (what `agentlog timeline` shows)" if views_timeline is not None
           else "one SQL statement (sessions ⋈ turns ⟕ attempts)")

    def timeline(engine: Any) -> int:
        if views_timeline is not None:
            sessions = views_timeline(engine, scope)
            return sum(max(1, sum(max(1, len(t["attempts"])) for t in s["turns"])) for s in sessions)
        return len(engine.run(TIMELINE_SQL, [since]).rows)

    ctx.progress("timeline with a new engine each time")
    build_ms: list[float] = []
    rows = 0
    for _ in range(max(5, FRESH_RUNS)):
        t0 = time.perf_counter()
        with Engine(root) as engine:
            rows = timeline(engine)
        build_ms.append((time.perf_counter() - t0) * 1e3)
    at = _iso(since)
    shows = [("show_failed", f"SHOW FAILED ATTEMPTS SINCE '{at}' LIMIT 50"),
             ("show_attempts", f"SHOW ATTEMPTS SINCE '{at}' LIMIT 50"),
             ("show_sessions", f"SHOW SESSIONS SINCE '{at}' LIMIT 50")]
    per: dict[str, tuple[str, list[float], int]] = {}
    ctx.progress(f"statements on one engine, {STATEMENT_RUNS} times each")
    with Engine(root) as engine:
        ms, n = timed(lambda: timeline(engine), STATEMENT_RUNS)
        per["timeline"] = (f"timeline since {at}: {how}", ms, n)
        if aql is not None:
            for name, text in shows:
                ms, res = timed(lambda: _aql_run(aql, engine, text), STATEMENT_RUNS)
                per[name] = (f"`{text}`", ms, len(res.rows))
        count = "SELECT count(*) FROM events WHERE observed_at >= make_timestamptz(?)"
        ms, res = timed(lambda: engine.run(count, [since]), STATEMENT_RUNS)
        per["count_events"] = (f"`SELECT count(*) FROM events WHERE observed_at >= '{at}'`", ms, len(res.rows))
    peak = vmhwm() if reset else None
    build = describe(build_ms)
    metrics: dict[str, Any] = {
        "events": int(info["events"]),
        "window_events": int(window[0]),
        "window_sessions": int(window[1]),
        "window_turns": int(window[2]),
        "window_attempts": int(window[3]),
        "timeline_rows": rows,
    }
    _put(metrics, "build", build)
    table_rows: list[list[Any]] = [[f"new `Engine(root)` + timeline since {at}", rows, len(build_ms), _fmt(build)]]
    for name, (what, ms, n) in per.items():
        d = describe(ms)
        _put(metrics, name, d)
        table_rows.append([what, n, len(ms), _fmt(d)])
    if aql is None:
        table_rows.append(["SHOW FAILED ATTEMPTS / ATTEMPTS / SESSIONS SINCE …", "—", 0,
                           "not run: AttemptQL is not in this build"])
    if peak:
        metrics["peak_rss_bytes"] = peak
    tables = [{
        "title": f"Last 24 h of synthetic time ({int(window[0]):,} of {int(info['events']):,} events, since {at})",
        "columns": ["what", "rows", "runs", "p50 / p95 / p99"],
        "rows": table_rows,
        "note": f"The window ends at the latest event ({_iso(latest)}). In it: {int(window[1])} sessions, "
        f"{int(window[2])} turns, {int(window[3])} attempts. Rows of the timeline: one per attempt (a turn without "
        "attempts, a session without turns count one). The first row opens a new engine each run (the store's "
        "snapshot and the stored projection as views) and answers the timeline: the counterpart of attemptdb's "
        "engine build over the window (561 ms p50 for 22,608 events, 1.17 GiB). The others reuse one engine. "
        + (f"Peak RSS of this phase (VmHWM reset before it): {peak / 2**20:,.0f} MiB." if peak else ""),
    }]
    return {"tables": tables, "metrics": metrics, "setup": info}


# --------------------------------------------------------------------------- state_at


def state_at(ctx: StepContext) -> dict[str, Any]:
    """STATE project AT 10 points over the synthetic history (the latest included) and DIFF STATE, p50/p95/p99."""
    from agentlog.api import Engine

    aql = _aql()
    if aql is None:
        return _no_aql(ctx)
    size = ctx.events
    root, info = built_root(ctx, size)
    reset = reset_peak()
    with Engine(root) as engine:
        lo, hi = engine.run("SELECT epoch_us(min(observed_at)), epoch_us(max(observed_at)) FROM events").rows[0]
        first, latest = int(lo), int(hi)
        points = [first + (latest - first) * i // STATE_POINTS for i in range(1, STATE_POINTS + 1)]
        points[-1] = latest
        state_ms: dict[int, list[float]] = {p: [] for p in points}
        state_rows: dict[int, int] = {}
        pairs = list(zip(points[:-1], points[1:])) + [(points[0], points[-1])]
        diff_ms: dict[tuple[int, int], list[float]] = {p: [] for p in pairs}
        diff_rows: dict[tuple[int, int], int] = {}
        rounds = 0
        while rounds < STATE_ROUNDS:
            for p in points:
                text = f"STATE project AT '{_iso(p)}'"
                ms, res = timed(lambda: _aql_run(aql, engine, text), 1)
                state_ms[p] += ms
                state_rows[p] = len(res.rows)
            for a, b in pairs:
                text = f"DIFF STATE '{_iso(a)}' '{_iso(b)}'"
                ms, res = timed(lambda: _aql_run(aql, engine, text), 1)
                diff_ms[(a, b)] += ms
                diff_rows[(a, b)] = len(res.rows)
            rounds += 1
            ctx.progress(f"round {rounds} of {STATE_ROUNDS}")
            if rounds < STATE_ROUNDS and ctx.over_budget():
                ctx.cap(f"state_at stopped after {rounds} of {STATE_ROUNDS} rounds at the time cap")
                break
    peak = vmhwm() if reset else None
    all_state = [x for xs in state_ms.values() for x in xs]
    all_diff = [x for xs in diff_ms.values() for x in xs]
    s, d, last = describe(all_state), describe(all_diff), describe(state_ms[latest])
    metrics: dict[str, Any] = {
        "events": int(info["events"]),
        "p50_ms": s["median"], "p95_ms": s["p95"], "p99_ms": s["p99"],
        f"p50_ms.{size}": s["median"], f"p95_ms.{size}": s["p95"],
        "latest_p50_ms": last["median"],
        "rows_latest": state_rows[latest],
        "rounds": rounds,
    }
    _put(metrics, "diff", d)
    if peak:
        metrics["peak_rss_bytes"] = peak
    rows: list[list[Any]] = []
    for i, p in enumerate(points, 1):
        rows.append([f"STATE project AT '{_iso(p)}'" + (" (latest)" if p == latest else f" ({i}/10)"),
                     state_rows[p], len(state_ms[p]), _fmt(describe(state_ms[p]))])
    rows.append([f"all {STATE_POINTS} points", f"[{', '.join(str(state_rows[p]) for p in points)}]", len(all_state),
                 _fmt(s)])
    for a, b in pairs:
        rows.append([f"DIFF STATE '{_iso(a)}' '{_iso(b)}'", diff_rows[(a, b)], len(diff_ms[(a, b)]),
                     _fmt(describe(diff_ms[(a, b)]))])
    rows.append([f"all {len(pairs)} diffs", "—", len(all_diff), _fmt(d)])
    tables = [{
        "title": f"STATE project AT and DIFF STATE over {int(info['events']):,} events",
        "columns": ["statement", "rows", "runs", "p50 / p95 / p99"],
        "rows": rows,
        "note": f"{STATE_POINTS} instants evenly spread over the synthetic history ({_iso(first)} to {_iso(latest)}), "
        f"the last one the latest event; {rounds} round(s) over all points, then the diffs between consecutive "
        "points and between the first and the last. AttemptQL through `agentlog.query.aql.execute` on one open "
        "engine, every project in scope. attemptdb (10 points, one run each): 51.7 ms p50 at 100 k, 188 ms at "
        "200 k, 346 ms at 300 k, 8.96 s p50 / 36.0 s at the latest at 1.45 M. Target: p50 ≤ 100 ms at 1.45 M."
        + (f" Peak RSS of this phase: {peak / 2**20:,.0f} MiB." if peak else ""),
    }]
    return {"tables": tables, "metrics": metrics, "setup": info,
            "points": [_iso(p) for p in points], "rows": [state_rows[p] for p in points]}


# --------------------------------------------------------------------------- trace_chain


def trace_chain(ctx: StepContext) -> dict[str, Any]:
    """TRACE the last attempt of the 200-attempt chain CAUSES DEPTH 1/10/50/200 (UP): p50/p95/p99 and rows."""
    from agentlog.api import Engine, display_id
    from agentlog.bench.workload.model import CHAIN_SESSION_ID

    aql = _aql()
    if aql is None:
        return _no_aql(ctx)
    root, info = built_root(ctx, ctx.events)
    with Engine(root) as engine:
        chain = engine.run(
            "SELECT a.attempt_id, a.supersedes, a.superseded_by FROM attempts a "
            "JOIN sessions s ON s.session_id = a.session_id WHERE s.provider_session_id = ? "
            "ORDER BY a.turn_index, a.attempt_index", [CHAIN_SESSION_ID]).rows
        if not chain:
            raise RuntimeError(f"no attempts of {CHAIN_SESSION_ID} in the projection")
        back = {r[0]: r[1] for r in chain}
        ends = [r[0] for r in chain if r[1] is not None and r[2] is None]
        last = ends[-1] if ends else chain[-1][0]
        walk = [last]
        while back.get(walk[-1]) and len(walk) <= len(chain):
            walk.append(str(back[walk[-1]]))
        head = walk[-1]
        subject = display_id("attempt", last)
        per: dict[int, tuple[list[float], int, bool]] = {}
        for depth in (1, 10, 50, 200):
            text = f"TRACE {subject} CAUSES DEPTH {depth} DIRECTION UP"
            ms, res = timed(lambda: _aql_run(aql, engine, text), TRACE_RUNS)
            reached = any(head in str(cell) for row in res.rows for cell in row)
            per[depth] = (ms, len(res.rows), reached)
    metrics: dict[str, Any] = {"events": int(info["events"]), "chain_attempts": len(walk),
                               "session_attempts": len(chain)}
    rows: list[list[Any]] = []
    for depth, (ms, n, reached) in per.items():
        d = describe(ms)
        metrics[f"depth{depth}_p50_ms"] = d["median"]
        metrics[f"depth{depth}_p95_ms"] = d["p95"]
        metrics[f"depth{depth}_p99_ms"] = d["p99"]
        metrics[f"depth{depth}_rows"] = n
        metrics[f"depth{depth}_reaches_first"] = int(reached)
        rows.append([f"TRACE … CAUSES DEPTH {depth} DIRECTION UP", n, "yes" if reached else "no", len(ms), _fmt(d)])
    tables = [{
        "title": f"TRACE over the {len(walk)}-attempt supersession chain ({int(info['events']):,} events)",
        "columns": ["statement", "rows", "reaches the chain's first attempt", "runs", "p50 / p95 / p99"],
        "rows": rows,
        "note": f"Subject: {subject}, the last attempt of `{CHAIN_SESSION_ID}` (placed at the stream's midpoint: one "
        f"turn of sequential failing edits of one file, each attempt superseded by the next; its session has "
        f"{len(chain)} attempts, the chain walked through `supersedes` has {len(walk)}). AttemptQL through "
        "`agentlog.query.aql.execute` on one open engine. attemptdb: DEPTH 1/10/50/200 = 8 / 20 / 70 / 271 µs p50 "
        "(3 / 30 / 150 / 599 rows) on a 50 k-event database; DEPTH 10 = 187 µs on the full one.",
    }]
    return {"tables": tables, "metrics": metrics, "setup": info}


# --------------------------------------------------------------------------- refresh


class _Feed:
    """New events written to a data root's logs through the capture path (as ``bench
    load`` writes them): new sessions of another seed on the same projects (``world_seed``:
    the stored workload's seed), its clock moved to start after ``start_us``; its
    sessions go on from one call to the next."""

    def __init__(self, root: str, seed: int, start_us: int, world_seed: int, transcripts: str) -> None:
        from agentlog.bench.workload.generator import generate
        from agentlog.bench.workload.load import Writer
        from agentlog.bench.workload.model import CHAIN_SESSION_ID, START_TIME_US

        self.samples = generate(10_000_000, seed, world_seed)
        # transcript samples: their files under `transcripts`, imported (grown) at each write's end
        self.writer = Writer(root, 1000, transcripts)
        self.offset = start_us - int(START_TIME_US)
        self.skip = CHAIN_SESSION_ID
        self.sessions: set[str] = set()

    def write(self, events: int) -> tuple[int, int]:
        """At least ``events`` events (a sample can give several; a transcript sample is counted
        as one until the importer has written its events): (events written, sessions they touched)."""
        from agentlog.core.fastjson import dumps
        from agentlog.bench.workload.generator import iso_ms

        before = self.writer.events
        touched: set[str] = set()
        while self.writer.events + self.writer.pending - before < events:
            s = next(self.samples)
            if s["session"] == self.skip:
                continue
            t = int(s["t"]) + self.offset
            s["t"] = t
            if "payload" in s:
                if "timestamp" in s["payload"]:
                    s["payload"]["timestamp"] = iso_ms(t)
            else:
                rec = json.loads(s["line"])
                if "timestamp" in rec:
                    rec["timestamp"] = iso_ms(t)
                    s["line"] = dumps(rec)
            touched.add(str(s["session"]))
            self.writer.add(s)
        self.writer.finish()
        self.sessions |= touched
        return self.writer.events - before, len(touched)


def refresh(ctx: StepContext) -> dict[str, Any]:
    """Answer again after 1,000 new events landed in the store: incremental projection + a new
    engine + a statement, in one process (the catch-up ingest timed beside it) and fresh."""
    from agentlog.api import Engine, catch_up, refresh_projection

    built, info = built_root(ctx, ctx.events)
    ctx.progress("copying the store and projection")
    root = clone(ctx, built)
    with Engine(root) as engine:
        latest = int(engine.run("SELECT epoch_us(max(observed_at)) FROM events").rows[0][0])
    feed = _Feed(root, ctx.seed + 1, latest + 60_000_000, ctx.seed, ctx.tmpdir())
    same: list[dict[str, Any]] = []
    ctx.progress(f"{REFRESH_ROUNDS} rounds in this process")
    for _ in range(REFRESH_ROUNDS):
        added, touched = feed.write(REFRESH_EVENTS)
        t0 = time.perf_counter()
        ing = catch_up(root)
        t1 = time.perf_counter()
        rep = refresh_projection(root)
        t2 = time.perf_counter()
        engine = Engine(root)
        t3 = time.perf_counter()
        res = engine.run(REFRESH_SQL)
        t4 = time.perf_counter()
        engine.close()
        same.append({"events": added, "sessions": touched, "ingested": ing.events, "mode": rep.mode,
                     "sessions_rebuilt": rep.sessions_rebuilt, "projects": rep.projects_reassembled,
                     "parts": rep.parts_written, "rows": len(res.rows),
                     "answer_again": t4 - t1, "total": t4 - t0, "catch_up": t1 - t0, "refresh": t2 - t1,
                     "open": t3 - t2, "answer": t4 - t3})
    env = {**os.environ, "AGENTLOG_HOME": root}
    fresh: list[dict[str, Any]] = []
    ctx.progress(f"{REFRESH_ROUNDS} rounds in fresh processes")
    for _ in range(REFRESH_ROUNDS):
        added, touched = feed.write(REFRESH_EVENTS)
        r = child([sys.executable, "-m", "agentlog", "sql", "--json", REFRESH_SQL], env)
        out = json.loads(r["stdout"])
        caught = out.get("caught_up") or {}
        ing_d, proj = caught.get("ingest") or {}, caught.get("projection") or {}
        fresh.append({"events": added, "sessions": touched, "ingested": ing_d.get("events"), "mode": proj.get("mode"),
                      "sessions_rebuilt": proj.get("sessions_rebuilt"), "projects": proj.get("projects_reassembled"),
                      "rows": len(out["rows"]), "total": r["secs"], "catch_up": ing_d.get("seconds"),
                      "refresh": proj.get("seconds"), "answer": out.get("seconds"), "rss": r["rss"]})
    bad = [r for r in same + fresh if r["mode"] != "incremental" or r["ingested"] != r["events"]]

    def col(rs: list[dict[str, Any]], key: str) -> dict[str, float]:
        return describe([float(r[key]) * 1e3 for r in rs if r.get(key) is not None])

    t_again, t_same, t_fresh = col(same, "answer_again"), col(same, "total"), col(fresh, "total")
    metrics: dict[str, Any] = {
        "events": int(info["events"]),
        "secs": t_again["median"] / 1e3,
        "p95_secs": t_again["p95"] / 1e3,
        "p99_secs": t_again["p99"] / 1e3,
        "with_catch_up_secs": t_same["median"] / 1e3,
        "fresh_secs": t_fresh["median"] / 1e3,
        "fresh_p95_secs": t_fresh["p95"] / 1e3,
        "fresh_p99_secs": t_fresh["p99"] / 1e3,
        "catch_up_p50_ms": col(same, "catch_up")["median"],
        "refresh_p50_ms": col(same, "refresh")["median"],
        "open_p50_ms": col(same, "open")["median"],
        "answer_p50_ms": col(same, "answer")["median"],
        "fresh_catch_up_p50_ms": col(fresh, "catch_up")["median"],
        "fresh_refresh_p50_ms": col(fresh, "refresh")["median"],
        "fresh_peak_rss_bytes": max(int(r["rss"]) for r in fresh),
        "not_incremental": len(bad),
        f"secs.{ctx.events}": t_again["median"] / 1e3,
    }
    _put(metrics, "answer_again", t_again)
    _put(metrics, "same_process", t_same)
    _put(metrics, "fresh", t_fresh)
    rows: list[list[Any]] = []
    for label, rs in (("same process", same), ("fresh `agentlog sql` process", fresh)):
        n = len(rs)
        rows.append([label, n, f"{sum(r['events'] for r in rs) / n:,.0f}",
                     f"{sum(r['sessions'] for r in rs) / n:.1f} / "
                     f"{sum(int(r['sessions_rebuilt'] or 0) for r in rs) / n:.1f} / "
                     f"{sum(int(r['projects'] or 0) for r in rs) / n:.1f}",
                     _fmt(col(rs, "answer_again")) if label == "same process" else "—",
                     _fmt(col(rs, "total")), _fmt(col(rs, "catch_up")), _fmt(col(rs, "refresh")),
                     _fmt(col(rs, "open")) if label == "same process" else "—", _fmt(col(rs, "answer"))])
    tables = [{
        "title": f"Answer again after {REFRESH_EVENTS:,} new events (store and projection current at "
                 f"{int(info['events']):,} events)",
        "columns": ["where", "rounds", "new events per round", "sessions touched / rebuilt / projects re-joined",
                    "answer again (refresh + open + statement) p50 / p95 / p99", "with catch-up ingest",
                    "catch-up ingest", "projection refresh", "open engine", "statement"],
        "rows": rows,
        "note": f"Each round first appends ~{REFRESH_EVENTS:,} events to the logs through the capture path (as `bench "
        "load`: new sessions of another seed working on the stored workload's projects, their clock a minute after "
        "the latest event; they go on from round to round; not timed). Same process: `catch_up` (the events land "
        "in the store, timed apart), then `project.persist.refresh` (incremental) + a new `Engine` + the statement, "
        "timed together as *answer again*. Fresh: `agentlog sql --json` (catch-up and refresh included, as any "
        "read does), spawn to exit; its parts come from the command's own report. "
        f"Statement: `{REFRESH_SQL}`. attemptdb: 0.51 s to reload after 1,000 events landed in its WAL, at 200 k "
        "events (in process). Target ≤ 300 ms."
        + (f" **{len(bad)} round(s) did not refresh incrementally or ingested another count**." if bad else ""),
    }]
    return {"tables": tables, "metrics": metrics, "setup": info, "rounds": {"same": same, "fresh": fresh}}


PROJECTION_STEPS: dict[str, StepFn] = {
    "projection_10k": projection_step(10_000),
    "projection_100k": projection_step(100_000),
    "projection_500k": projection_step(500_000),
    "projection_full": projection_step(FULL_EVENTS),
    "engine_100k": engine_step(100_000),
    "engine_200k": engine_step(200_000),
    "engine_300k": engine_step(300_000),
    "engine_400k": engine_step(400_000),
    "engine_500k": engine_step(500_000),
    "engine_full": engine_step(FULL_EVENTS),
    "recent_timeline": recent_timeline,
    "state_at": state_at,
    "trace_chain": trace_chain,
    "refresh": refresh,
}
