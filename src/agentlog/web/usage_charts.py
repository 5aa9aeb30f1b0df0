"""The Usage page's charts: cost and tokens per day by model and by project, failures per
day by class, tool latency by tool. :func:`usage_series` reads the numbers (JSON-ready,
``/api/usage/charts``); :func:`usage_charts` draws them (:mod:`agentlog.web.svg`)."""

from __future__ import annotations

from typing import Any, Final

from agentlog.query.engine import Engine
from agentlog.web.svg import fold, hbars, stacked_bars

DAYS: Final = 60
"""Days a per-day chart covers (the last ones with data)."""
TOOLS: Final = 15
"""Tools the latency chart shows (the most called)."""


def _pivot(rows: list[dict[str, Any]], days: list[str], by: str, value: str) -> dict[str, list[float]]:
    at = {d: i for i, d in enumerate(days)}
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["day"] not in at or r[value] is None:
            continue
        col = out.setdefault(str(r[by]), [0.0] * len(days))
        col[at[r["day"]]] += float(r[value])
    return fold(out)


def usage_series(engine: Engine) -> dict[str, Any]:
    """Per day (the last :data:`DAYS` with usage or failures): cost and tokens by model and by
    project, failures by class; and per tool (the :data:`TOOLS` most called): calls, median and
    p95 duration (ms)."""
    usage = engine.run("WITH u AS (SELECT strftime(observed_at, '%Y-%m-%d') AS day, coalesce(model, '?') AS model, "
                       "coalesce(project_name, '?') AS project, total_tokens, cost_usd FROM usage) "
                       "SELECT day, model, project, sum(total_tokens) AS tokens, sum(cost_usd) AS cost FROM u "
                       f"WHERE day IN (SELECT DISTINCT day FROM u ORDER BY day DESC LIMIT {DAYS}) GROUP BY ALL",
                       max_rows=1_000_000).records()
    failed = engine.run("WITH f AS (SELECT strftime(finished_at, '%Y-%m-%d') AS day, "
                        "coalesce(outcome_class, 'unclassified') AS class FROM tool_calls "
                        "WHERE outcome_status = 'failure' AND NOT retracted AND finished_at IS NOT NULL) "
                        "SELECT day, class, count(*) AS n FROM f "
                        f"WHERE day IN (SELECT DISTINCT day FROM f ORDER BY day DESC LIMIT {DAYS}) GROUP BY ALL",
                        max_rows=1_000_000).records()
    tools = engine.run("SELECT tool_name AS tool, count(*) AS calls, median(duration_ms) AS p50, "
                       "quantile_cont(duration_ms, 0.95) AS p95 FROM tool_calls WHERE duration_ms IS NOT NULL "
                       f"AND NOT retracted GROUP BY ALL ORDER BY calls DESC, tool LIMIT {TOOLS}",
                       max_rows=TOOLS + 1).records()
    usage_days = sorted({str(r["day"]) for r in usage})
    fail_days = sorted({str(r["day"]) for r in failed})
    return {
        "usage_days": usage_days,
        "cost_by_model": _pivot(usage, usage_days, "model", "cost"),
        "tokens_by_model": _pivot(usage, usage_days, "model", "tokens"),
        "cost_by_project": _pivot(usage, usage_days, "project", "cost"),
        "tokens_by_project": _pivot(usage, usage_days, "project", "tokens"),
        "failure_days": fail_days,
        "failures_by_class": _pivot(failed, fail_days, "class", "n"),
        "tool_latency": [{"tool": str(r["tool"]), "calls": int(r["calls"]), "p50_ms": float(r["p50"] or 0),
                          "p95_ms": float(r["p95"] or 0)} for r in tools],
    }


def usage_charts(series: dict[str, Any]) -> list[dict[str, Any]]:
    """Each chart: its title, its SVG and its legend (series names, in colour order)."""
    out = []
    for key, title, days, unit in (
            ("cost_by_model", "Cost per day by model (USD)", "usage_days", "$"),
            ("tokens_by_model", "Tokens per day by model", "usage_days", ""),
            ("cost_by_project", "Cost per day by project (USD)", "usage_days", "$"),
            ("tokens_by_project", "Tokens per day by project", "usage_days", ""),
            ("failures_by_class", "Failed tool calls per day by class", "failure_days", "")):
        data = series[key]
        if not data:
            continue
        out.append({"id": key, "title": title, "svg": stacked_bars(title, series[days], data, unit),
                    "legend": list(data)})
    lat = series["tool_latency"]
    if lat:
        title = "Tool latency by tool (median; the tick is p95)"
        out.append({"id": "tool_latency", "title": title, "legend": [],
                    "svg": hbars(title, [(f"{r['tool']} ({r['calls']:,})", r["p50_ms"] / 1000, r["p95_ms"] / 1000)
                                         for r in lat], " s")})
    return out


__all__ = ["DAYS", "TOOLS", "usage_charts", "usage_series"]
