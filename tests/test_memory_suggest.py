"""Suggestions from recorded activity: a command that kept failing then worked, a file
whose edits keep failing — proposals with their evidence, never memories directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentlog.memory import proposals as P
from agentlog.memory import service as S
from agentlog.memory.suggest import suggest

T0 = 1_790_000_000_000_000
SEC = 1_000_000


def _hook(root: str, at: int, **payload: Any) -> None:
    from agentlog.capture.hook import build, record

    body = {"session_id": "s-suggest", "cwd": "/nonexistent/repo", **payload}
    record(build("claude-code", json.dumps(body).encode(), 0, [], captured_at=at), root, "relaxed")


def _call(root: str, at: int, n: int, tool: str, tool_input: dict[str, Any], error: str | None) -> None:
    tid = f"toolu_{n}"
    _hook(root, at, hook_event_name="PreToolUse", tool_name=tool, tool_use_id=tid, tool_input=tool_input)
    if error is None:
        _hook(root, at + SEC, hook_event_name="PostToolUse", tool_name=tool, tool_use_id=tid, tool_input=tool_input,
              tool_response={"stdout": "ok", "stderr": "", "interrupted": False})
    else:
        _hook(root, at + SEC, hook_event_name="PostToolUseFailure", tool_name=tool, tool_use_id=tid,
              tool_input=tool_input, error=error)


def _history(root: str) -> None:
    _hook(root, T0, hook_event_name="UserPromptSubmit", prompt="make the tests pass")
    edit = {"file_path": "/nonexistent/repo/src/config.py", "old_string": "a", "new_string": "b"}
    _call(root, T0 + 10 * SEC, 1, "Bash", {"command": "pytest tests"}, "Exit code 4\nERROR: usage")
    _call(root, T0 + 20 * SEC, 2, "Edit", edit, "String to replace not found in file.")
    _call(root, T0 + 30 * SEC, 3, "Bash", {"command": "pytest tests -q"}, "Exit code 4\nERROR: usage")
    _call(root, T0 + 40 * SEC, 4, "Edit", edit, "String to replace not found in file.")
    _call(root, T0 + 50 * SEC, 5, "Bash", {"command": "pytest tests -p no:cacheprovider"}, None)
    _call(root, T0 + 60 * SEC, 6, "Bash", {"command": "ls"}, None)  # never failed: nothing to learn
    _hook(root, T0 + 70 * SEC, hook_event_name="Stop")


def test_suggestions_are_proposals_with_their_evidence(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    _history(root)
    opened = suggest(root)
    titles = sorted(p.title for p in opened)
    assert titles == ["Edits to src/config.py fail with string_mismatch", "How to run pytest in repo"]
    assert S.list_memories(root) == []  # nothing enters memory without a person's say
    proc = next(p for p in opened if p.title.startswith("How to run"))
    (change,) = proc.changes
    assert change["attributes"] == {"goal": "run pytest", "steps": ["pytest tests -p no:cacheprovider"],
                                    "command": "pytest tests -p no:cacheprovider"}
    assert [e["note"] for e in change["evidence"]] == ["failed", "failed", "worked"]
    pit = next(p for p in opened if p.title.startswith("Edits"))
    assert pit.changes[0]["attributes"]["failure_class"] == "string_mismatch"
    assert len(pit.changes[0]["evidence"]) == 2
    # approved, the memory's evidence resolves to the recorded calls
    P.approve(root, proc.id)
    m = S.get(root, S.list_memories(root)[0].id)
    resolved = S.resolve_evidence(root, m.evidence or [])
    assert [r["resolved"]["outcome_status"] for r in resolved] == ["failure", "failure", "success"]
    # asked again: nothing new (the same titles are known)
    assert suggest(root) == []
