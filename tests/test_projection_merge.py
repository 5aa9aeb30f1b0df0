"""How the projection merges several accounts of one tool call (hooks, a batch of
outcomes, a transcript): never two calls, the more telling end kept."""

from __future__ import annotations

import json
from typing import Any

from agentlog.projection.observe import from_wire
from agentlog.projection.projector import project
from projection_support import event_id, wire

P, S = "claude_code", "merge-1"
T0 = 1_790_000_000_000_000


def calls(events: list[dict[str, Any]]) -> list[tuple[str | None, str | None, int | None]]:
    rows = project(from_wire(events)).tables["tool_calls"]
    return sorted((r["provider_call_id"], r["outcome_status"], r["exit_code"]) for r in rows)


def ev(n: int, kind: str, at: int, call: str | None = None, tool: str = "Bash", **fields: Any) -> dict[str, Any]:
    if call is not None:
        fields.setdefault("tool", {"name": tool, "category": "shell", "call_id": call})
    return wire(event_id(7, n), kind, P, S, T0 + at, **fields)


def test_a_batch_ends_only_what_no_other_hook_ended() -> None:
    batch = json.dumps([
        {"call_id": "a", "tool": "Bash", "category": "shell", "status": "success"},
        {"call_id": "b", "tool": "Edit", "category": "file_edit", "status": "failure", "class": "string_mismatch"},
        {"call_id": "c", "tool": "Bash", "category": "shell", "status": "denied", "class": "permission_denied"},
    ])
    events = [
        ev(1, "tool_call_started", 1, "a"), ev(2, "tool_call_finished", 2, "a", outcome={"status": "success"}),
        ev(3, "tool_call_started", 3, "c"),
        ev(4, "tool_batch_finished", 4, name="PostToolBatch", attrs={"calls": batch}),
    ]
    assert calls(events) == [("a", "success", None), ("b", "failure", None), ("c", "denied", None)]


def test_a_later_end_replaces_only_when_it_tells_more() -> None:
    start = ev(1, "tool_call_started", 1, "x")
    bare = ev(2, "tool_call_finished", 2, "x", outcome={"status": "success"})
    failed = ev(3, "tool_call_failed", 3, "x", outcome={"status": "failure", "class": "nonzero_exit", "exit_code": 3})
    assert calls([start, bare, failed]) == [("x", "failure", 3)]
    assert calls([start, failed, bare]) == [("x", "failure", 3)]  # either order
    again = ev(4, "tool_call_started", 4, "x")  # a transcript's start of the same call
    assert calls([start, bare, again, failed]) == [("x", "failure", 3)]


def test_equal_times_an_end_before_its_start_is_one_call() -> None:
    end = ev(1, "tool_call_finished", 5, "y", outcome={"status": "success"})
    start = ev(2, "tool_call_started", 5, "y")
    rows = project(from_wire([end, start])).tables["tool_calls"]
    assert [(r["provider_call_id"], r["outcome_status"], r["pairing"]) for r in rows] == [("y", "success", "call_id")]
    assert rows[0]["start_event_id"] == start["event_id"]


def test_a_refused_call_is_denied_not_in_flight() -> None:
    start = ev(1, "tool_call_started", 1, "r")
    refused = ev(2, "permission_denied", 2, "r", outcome={"status": "denied"})
    rows = project(from_wire([start, refused])).tables
    assert [(r["provider_call_id"], r["outcome_status"]) for r in rows["tool_calls"]] == [("r", "denied")]
    assert rows["sessions"][0]["in_flight_calls"] == 0


def test_a_cancelled_call_is_ended_and_says_more_than_a_failure() -> None:
    start = ev(1, "tool_call_started", 1, "k")
    cancelled = ev(3, "tool_call_failed", 3, "k", outcome={"status": "cancelled", "class": "cancelled"})
    rows = project(from_wire([start, cancelled])).tables
    assert [(r["provider_call_id"], r["outcome_status"], r["outcome_class"]) for r in rows["tool_calls"]] == [
        ("k", "cancelled", "cancelled")]
    assert rows["sessions"][0]["in_flight_calls"] == 0
    # a batch's plain failure of it (Claude's PostToolBatch), then the transcript's cancellation
    batch = json.dumps([{"call_id": "k", "tool": "Bash", "category": "shell", "status": "failure"}])
    events = [start, ev(2, "tool_batch_finished", 2, name="PostToolBatch", attrs={"calls": batch}), cancelled]
    assert calls(events) == [("k", "cancelled", None)]
