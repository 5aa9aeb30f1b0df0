"""Which tool call started which subagent: the one rule the OpenTelemetry export and the
dashboard's conversation view both nest subagents by.

A subagent's calls carry its ``provider_agent_id`` (the main agent's carry none). The call
that started it is the subagent call (Task, Agent …) whose recorded result names it (Claude
Code's ``tool_response.agentId``: :func:`spawned_agents` reads it into ``spawned_agent_id``),
else the subagent call of the same turn whose span holds the subagent's calls, the latest to
start, else such a call of any turn (:func:`spawning_call`; older releases name no agent in the
result, imported transcripts keep the result as the transcript's line, and a subagent's own
prompt in a transcript opens a turn of its own).
"""

from __future__ import annotations

from typing import Any


def spawned_agents(engine: Any, calls: list[dict[str, Any]]) -> None:
    """``spawned_agent_id`` on each subagent call (Task, Agent …) whose recorded result names
    the subagent it ran (Claude Code's ``tool_response.agentId``), when the session has
    subagents at all. Each call row needs ``provider_agent_id``, ``tool_category`` and
    ``end_event_id``."""
    if not any(c.get("provider_agent_id") for c in calls):
        return
    ends = {c["end_event_id"]: c for c in calls if c.get("tool_category") == "subagent" and c.get("end_event_id")}
    ids = sorted(ends)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        marks = ", ".join("?" * len(part))
        res = engine.run("SELECT event_id, json_extract_string(raw, '$.tool_response.agentId') AS aid "
                         f"FROM events WHERE event_id IN ({marks})", part, max_rows=len(part) + 1)
        for event_id, aid in res.rows:
            if aid:
                ends[event_id]["spawned_agent_id"] = aid


def spawning_call(calls: list[dict[str, Any]], turn: str | None, aid: str, start: int, end: int) -> str | None:
    """The tool call that started subagent ``aid`` (whose calls ran from ``start`` to ``end``,
    µs, in turn ``turn``): the one whose result names it (``spawned_agent_id``), else the
    caller's subagent call (Task, Agent …) of the same turn whose span holds the subagent's,
    the latest to start, else such a call of another turn; None when none is there. Call rows carry ``started_us`` and
    ``finished_us``."""
    named = [c for c in calls if c.get("spawned_agent_id") == aid]
    if named:
        return str(named[0]["tool_call_id"])
    holding = [c for c in calls if c.get("tool_category") == "subagent" and c.get("provider_agent_id") != aid
               and c["started_us"] <= start and (c.get("finished_us") is None or c["finished_us"] >= end)]
    # the same turn's first; then any turn's (a subagent's own prompt can open a turn of its own)
    for pool in ([c for c in holding if c.get("turn_id") == turn], holding):
        if pool:
            return str(max(pool, key=lambda c: (c["started_us"], c["tool_call_id"]))["tool_call_id"])
    return None


__all__ = ["spawned_agents", "spawning_call"]
