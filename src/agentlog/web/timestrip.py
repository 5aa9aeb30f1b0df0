"""Where a session's time went, as a small Gantt (:func:`agentlog.web.svg.strip`).

Lanes: each turn (its title holds the ``turn_latency`` view's breakdown: model, tools,
permission, waiting for the user), the model (a turn's time outside its tool calls; the
agent's own telemetry, when it sent some, gives the model time the title reports), the tool
calls (failed ones marked), waiting for permission (from each permission request to the end
of the call of that tool running then, else to the next thing recorded) and waiting for the
user (from a turn's end to the next prompt).
"""

from __future__ import annotations

from typing import Any, Final

from markupsafe import Markup

from agentlog.query.engine import Engine
from agentlog.web.svg import Span, strip

LANES: Final = ("turns", "model", "tools", "permission", "user")


def _ms(v: Any) -> str:
    return "—" if v is None else f"{int(v) / 1000:.1f} s"


def time_strip(engine: Engine, rows: dict[str, Any]) -> dict[str, Any]:
    """The strip's SVG and the session's totals per lane (ms)."""
    turns = [t for t in rows["turns"] if t["started_us"] is not None]
    calls = rows["calls"]
    latency = {r["turn_id"]: r for r in engine.run(
        "SELECT turn_id, wall_ms, model_ms, tool_ms, permission_ms, user_wait_ms FROM turn_latency "
        "WHERE session_id = ?", [rows["id"]], max_rows=100_000).records()}
    times = [t["started_us"] for t in turns] + [c["started_us"] for c in calls if c["started_us"]]
    if not times:
        return {"svg": None, "totals": {}}
    ends = [t["ended_us"] for t in turns if t["ended_us"]] + [c["finished_us"] or c["started_us"] for c in calls]
    t0, t1 = min(times), max(ends + times)
    spans: list[Span] = []
    totals = {lane: 0 for lane in LANES}
    main = [c for c in calls if not c.get("provider_agent_id") and c["started_us"]]
    for i, t in enumerate(turns):
        mine = [c for c in main if c.get("turn_id") == t["turn_id"]]
        end = t["ended_us"] or max([c["finished_us"] or c["started_us"] for c in mine] + [t["started_us"]])
        lat = latency.get(t["turn_id"], {})
        title = (f"turn {t['turn_index']} ({t['status'] or '?'}): {_ms((end - t['started_us']) // 1000)}; "
                 f"model {_ms(lat.get('model_ms'))}, tools {_ms(lat.get('tool_ms'))}, "
                 f"permission {_ms(lat.get('permission_ms'))}, waited for the user {_ms(lat.get('user_wait_ms'))}")
        spans.append(Span(0, t["started_us"], end, "turn-failed" if t["status"] == "failed" else "turn", title))
        at = t["started_us"]  # the model: the turn's time outside its calls
        for c in sorted(mine, key=lambda c: c["started_us"]):
            if c["started_us"] > at:
                spans.append(Span(1, at, c["started_us"], "model", f"turn {t['turn_index']}: model"))
                totals["model"] += (c["started_us"] - at) // 1000
            at = max(at, c["finished_us"] or c["started_us"])
        if end > at:
            spans.append(Span(1, at, end, "model", f"turn {t['turn_index']}: model"))
            totals["model"] += (end - at) // 1000
        if i + 1 < len(turns) and turns[i + 1]["started_us"] > end:
            nxt = turns[i + 1]["started_us"]
            spans.append(Span(4, end, nxt, "user", f"waiting for the user: {_ms((nxt - end) // 1000)}"))
            totals["user"] += (nxt - end) // 1000
    for c in calls:
        if not c["started_us"]:
            continue
        fin = c["finished_us"] or c["started_us"]
        failed = c.get("outcome_status") in ("failure", "denied")
        spans.append(Span(2, c["started_us"], fin, "failed" if failed else "tool",
                          f"{c.get('tool_name') or '?'} · {c.get('outcome_status') or 'running'}"
                          + (f" · {c['outcome_class']}" if c.get("outcome_class") else "") + f" · {_ms((fin - c['started_us']) // 1000)}"))
        totals["tools"] += (fin - c["started_us"]) // 1000
    marks = rows["marks"]
    for m in marks:
        if m["kind"] != "permission_requested":
            continue
        running = [c for c in calls if c.get("tool_name") == m.get("tool_name") and c["started_us"]
                   and c["started_us"] <= m["us"] and (c["finished_us"] or 0) >= m["us"]]
        later = [x["us"] for x in marks if x["us"] > m["us"]] + [c["started_us"] for c in calls if c["started_us"] > m["us"]]
        until = running[0]["finished_us"] if running else min(later, default=m["us"])
        spans.append(Span(3, m["us"], until, "permission",
                          f"waiting for permission ({m.get('tool_name') or '?'}): {_ms((until - m['us']) // 1000)}"))
        totals["permission"] += (until - m["us"]) // 1000
    totals["turns"] = sum(((t["ended_us"] or t["started_us"]) - t["started_us"]) // 1000 for t in turns)
    svg: Markup = strip("where the session's time went: turns, model, tools, waiting for permission, "
                        "waiting for the user", LANES, spans, t0, t1)
    return {"svg": svg, "totals": totals}


__all__ = ["LANES", "time_strip"]
