"""A recorded session as a trace of GenAI spans (pure: rows in, span plans out).

The shape follows the OpenTelemetry GenAI semantic conventions (docs/otel.md):

- ``invoke_agent <agent>``: one per session (the trace's root) and one per turn
  (its child), and one per subagent inside a turn: the child of the tool call that
  started it (the call whose result names the subagent, else the Task/Agent call
  whose span holds it), else of the turn;
- ``chat <model>``: one per model request (the usage view's rows: the agent's
  telemetry, else the transcript), under its turn;
- ``execute_tool <tool>``: one per tool call, under its turn or its subagent.

A failed turn, tool call or API request has status ERROR and ``error.type``.
Ids derive from agentlog's stable ids (:func:`trace_id`, :func:`span_id`), so
the same session always gives the same spans.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.query.subagents import spawning_call

#: provider → (gen_ai.provider.name, agent name)
AGENTS: Final = {
    "claude_code": ("anthropic", "Claude Code"),
    "codex": ("openai", "Codex"),
    "gemini_cli": ("gcp.gemini", "Gemini CLI"),
    "cursor": ("cursor", "Cursor"),
}


def trace_id(session_id: str) -> int:
    """128 bits of SHA-256 of the session's stable id (never 0)."""
    return int.from_bytes(hashlib.sha256(b"agentlog/trace/" + session_id.encode()).digest()[:16], "big") or 1


def span_id(kind: str, stable_id: str) -> int:
    """64 bits of SHA-256 of what the span stands for (never 0)."""
    return int.from_bytes(hashlib.sha256(f"agentlog/span/{kind}/{stable_id}".encode()).digest()[:8], "big") or 1


@dataclass
class Plan:
    """One span to send: times in ns since the epoch; parent None for a root."""

    name: str
    trace: int
    span: int
    parent: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """error.type of a failure (the span's status is then ERROR)."""


def _ns(us: int | None, fallback: int) -> int:
    return (us if us is not None else fallback) * 1000


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if v is not None and v != ""}


def _message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}], ensure_ascii=False)


def session_plans(session: dict[str, Any], turns: list[dict[str, Any]], calls: list[dict[str, Any]],
                  requests: list[dict[str, Any]], content: dict[str, dict[str, Any]] | None = None) -> list[Plan]:
    """The spans of one session. Rows carry times as µs (``*_us`` keys); ``content``
    (event id → the event's content) only with --include-content."""
    sid = session["session_id"]
    provider = session["provider"]
    gen_provider, agent = AGENTS.get(provider, (provider, provider))
    trace = trace_id(sid)
    base = _clean({"gen_ai.provider.name": gen_provider, "gen_ai.agent.name": agent,
                   "gen_ai.conversation.id": session.get("provider_session_id"), "agentlog.session_id": sid,
                   "agentlog.provider": provider})
    starts = [session.get("started_us")] + [t["started_us"] for t in turns] + [c["started_us"] for c in calls]
    known = [s for s in starts if s is not None]
    s_start = min(known) if known else 0
    ends = ([session.get("ended_us"), session.get("last_us")] + [t.get("ended_us") for t in turns]
            + [c.get("finished_us") for c in calls] + [r.get("observed_us") for r in requests])
    s_end = max([e for e in ends if e is not None] + [s_start])
    root = span_id("session", sid)
    plans = [Plan(f"invoke_agent {agent}", trace, root, None, s_start * 1000, s_end * 1000,
                  {**base, "gen_ai.operation.name": "invoke_agent", "openinference.span.kind": "AGENT",
                   "agentlog.project": session.get("project_name"), "agentlog.kind": "session"})]
    turn_span: dict[str, int] = {}
    for t in turns:
        tid = t["turn_id"]
        turn_span[tid] = span_id("turn", tid)
        t_end = t.get("ended_us") or max([c.get("finished_us") or c["started_us"] for c in calls
                                          if c.get("turn_id") == tid] + [t["started_us"]])
        attrs = {**base, "gen_ai.operation.name": "invoke_agent", "openinference.span.kind": "AGENT",
                 "agentlog.turn_id": tid, "agentlog.turn_index": t.get("turn_index"), "agentlog.kind": "turn",
                 "agentlog.status": t.get("status")}
        if content is not None and t.get("objective"):
            attrs["gen_ai.input.messages"] = _message("user", str(t["objective"]))
        failed = t.get("status") == "failed"
        plans.append(Plan(f"invoke_agent {agent}", trace, turn_span[tid], root, t["started_us"] * 1000,
                          _ns(t_end, t["started_us"]), _clean(attrs),
                          (t.get("failure_class") or "turn_failed") if failed else None))
    sub_span: dict[tuple[str | None, str], int] = {}
    for c in calls:
        aid = c.get("provider_agent_id")  # a subagent's (the main agent has none)
        if not aid:
            continue
        key = (c.get("turn_id"), aid)
        if key in sub_span:
            continue
        sub_span[key] = span_id("subagent", f"{sid}/{key[0]}/{aid}")
        mine = [x for x in calls if (x.get("turn_id"), x.get("provider_agent_id")) == key]
        a_start = min(x["started_us"] for x in mine)
        a_end = max(x.get("finished_us") or x["started_us"] for x in mine)
        spawner = spawning_call(calls, key[0], aid, a_start, a_end)
        parent = span_id("tool", spawner) if spawner else turn_span.get(key[0] or "", root)
        plans.append(Plan("invoke_agent subagent", trace, sub_span[key], parent, a_start * 1000, a_end * 1000,
                          _clean({**base, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": aid,
                                  "gen_ai.agent.name": "subagent",
                                  "openinference.span.kind": "AGENT", "agentlog.kind": "subagent"})))
    for c in calls:
        cid = c["tool_call_id"]
        aid = c.get("provider_agent_id")
        parent = sub_span.get((c.get("turn_id"), aid), 0) if aid else 0
        parent = parent or turn_span.get(c.get("turn_id") or "", root)
        status = c.get("outcome_status")
        attrs = {**base, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.get("tool_name"),
                 "gen_ai.tool.call.id": c.get("provider_call_id"), "gen_ai.tool.type": "function",
                 "openinference.span.kind": "TOOL", "tool.name": c.get("tool_name"),
                 "agentlog.tool_call_id": cid, "agentlog.tool_category": c.get("tool_category"),
                 "agentlog.outcome": status, "agentlog.exit_code": c.get("exit_code"), "agentlog.kind": "tool_call"}
        if content is not None:
            start = content.get(c.get("start_event_id") or "", {})
            end = content.get(c.get("end_event_id") or "", {})
            args = start.get("tool_input", end.get("tool_input"))
            result = end.get("tool_output", end.get("error"))
            if args is not None:
                attrs["gen_ai.tool.call.arguments"] = args if isinstance(args, str) else json.dumps(args)
            if result is not None:
                attrs["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
        error = (c.get("outcome_class") or status) if status in ("failure", "denied", "cancelled") else None
        plans.append(Plan(f"execute_tool {c.get('tool_name')}", trace, span_id("tool", cid), parent,
                          c["started_us"] * 1000, _ns(c.get("finished_us"), c["started_us"]), _clean(attrs), error))
    for r in requests:
        end_us = r["observed_us"]
        start_us = end_us - 1000 * int(r["duration_ms"]) if r.get("duration_ms") else end_us
        parent = turn_span.get(r.get("turn_id") or "", root)
        attrs = {**base, "gen_ai.operation.name": "chat", "gen_ai.request.model": r.get("model"),
                 "gen_ai.response.model": r.get("model"), "gen_ai.response.id": r.get("message_id"),
                 "gen_ai.usage.input_tokens": r.get("input_tokens"),
                 "gen_ai.usage.output_tokens": r.get("output_tokens"),
                 "gen_ai.usage.cache_read.input_tokens": r.get("cache_read_tokens"),
                 "gen_ai.usage.cache_creation.input_tokens": r.get("cache_write_tokens"),
                 "openinference.span.kind": "LLM", "llm.model_name": r.get("model"),
                 "agentlog.cost_usd": r.get("cost_usd"), "agentlog.usage_source": r.get("source"),
                 "agentlog.event_id": r["event_id"], "agentlog.kind": "model_request"}
        plans.append(Plan(f"chat {r.get('model') or 'unknown'}", trace, span_id("chat", r["event_id"]), parent,
                          start_us * 1000, end_us * 1000, _clean(attrs), r.get("error")))
    return plans
