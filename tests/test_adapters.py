"""Provider adapters: documented payload shapes, totality, the ISO-8601 parser, Codex notify."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.core import fastjson
from agentlog.capture.adapters import claude_code, codex, common, cursor, gemini_cli
from agentlog.core.kinds import EVENT_KINDS
from agentlog.core.model import Event

ADAPTERS = (claude_code, codex, cursor, gemini_cli)
CAPTURED_AT = 1_787_904_000_000_000


def to_event(mod: Any, partial: dict[str, Any], payload: Any = None) -> Event:
    """Complete a partial event the way the capture pipeline does and parse it strictly."""
    d = dict(partial)
    d.pop("cwd", None)
    d.update(
        event_id="0190f0e0-0000-7000-8000-000000000000",
        schema_version=1,
        provider=mod.PROVIDER,
        captured_at=CAPTURED_AT,
        capture_mode="full",
        agentlog_version="0.1.0",
    )
    d.setdefault("observed_at", CAPTURED_AT)
    if payload is not None:
        d["raw"] = payload
    return Event.from_wire(d)


def check(mod: Any, payload: Any, extra_args: list[str] | None = None) -> dict[str, Any]:
    """Normalise, then check every invariant the pipeline relies on."""
    out = mod.normalise(payload, list(extra_args or []))
    assert isinstance(out, dict)
    assert out["kind"] in EVENT_KINDS
    assert isinstance(out["provider_event_name"], str)
    for k, v in out.items():
        assert v is not None, k
    for k in ("agent", "tool", "outcome"):
        if k in out:
            assert out[k] and all(v is not None for v in out[k].values()), (k, out[k])
    for k in ("attrs", "content", "paths"):
        if k in out:
            assert out[k], f"empty {k} must be omitted"
    for k, v in out.get("attrs", {}).items():
        assert isinstance(v, (str, bool, int)), (k, v)
    if "cwd" in out:
        assert isinstance(out["cwd"], str)
    if "observed_at" in out:
        assert isinstance(out["observed_at"], int) and not isinstance(out["observed_at"], bool)
    if "duration_ms" in out:
        assert out["duration_ms"] >= 0
    fastjson.dumps(out)  # serialisable as is
    to_event(mod, out, payload)
    return out


# -- Claude Code ---------------------------------------------------------------

BASE = {
    "session_id": "5f1c0a52-0000-4000-8000-000000000001",
    "transcript_path": "/home/dev/.claude/projects/-home-dev-example-project/x.jsonl",
    "cwd": "/home/dev/example/project",
}


def claude(event: str, /, **kw: Any) -> dict[str, Any]:
    return check(claude_code, {**BASE, "hook_event_name": event, **kw})


def test_claude_session_start() -> None:
    out = claude("SessionStart", source="startup", model="claude-opus-4-6", agent_type="")
    assert out["kind"] == "session_started"
    assert out["provider_session_id"] == BASE["session_id"]
    assert out["cwd"] == BASE["cwd"]
    assert out["agent"] == {"model": "claude-opus-4-6"}
    assert out["attrs"]["source"] == "startup"
    assert out["attrs"]["transcript_present"] is True
    assert out["attrs"]["cwd"] == BASE["cwd"]
    assert "agent_type" not in out["attrs"]


def test_claude_prompt_human_and_injected() -> None:
    out = claude("UserPromptSubmit", prompt="Why does ```x``` fail?\nline two", prompt_id="p-1", permission_mode="plan")
    assert out["kind"] == "prompt_submitted"
    assert out["provider_turn_id"] == "p-1"
    assert out["content"]["prompt"].startswith("Why")
    a = out["attrs"]
    assert (a["prompt_chars"], a["prompt_lines"]) == (31, 2)
    assert a["prompt_has_code_fence"] and a["prompt_has_question"]
    assert a["prompt_kind"] == "human"
    assert a["permission_mode"] == "plan"
    for text in (
        "<task-notification>done</task-notification>",
        "  <system-reminder>x",
        "<local-command-stdout>ok</local-command-stdout>",
        "[SYSTEM NOTIFICATION] agent finished",
        "<command-name>/clear</command-name>",
        "<bash-stderr>boom</bash-stderr>",
    ):
        out = claude("UserPromptSubmit", prompt=text)
        assert out["kind"] == "prompt_submitted"
        assert out["attrs"]["prompt_kind"] == "injected", text
    assert claude("UserPromptSubmit", prompt="full-width？")["attrs"]["prompt_has_question"] is True


def test_claude_edit_post_tool_use() -> None:
    out = claude(
        "PostToolUse",
        tool_name="Edit",
        tool_use_id="toolu_01",
        tool_input={
            "file_path": "/home/dev/example/project/src/components/Button.tsx",
            "old_string": "a\n",
            "new_string": "a\nb\nc\nd\ne\n",
        },
        tool_response={"filePath": "/home/dev/example/project/src/components/Button.tsx"},
        duration_ms=12,
    )
    assert out["kind"] == "tool_call_finished"
    assert out["tool"] == {"name": "Edit", "category": "file_edit", "call_id": "toolu_01"}
    assert out["paths"] == ["/home/dev/example/project/src/components/Button.tsx"]
    assert out["outcome"] == {"status": "success"}
    assert out["duration_ms"] == 12
    a = out["attrs"]
    assert a["file_ext"] == "tsx"
    assert (a["file_is_test"], a["file_is_config"], a["file_is_doc"]) == (False, False, False)
    assert a["lines_added"] >= 1
    assert a["tool_input_bytes"] > 0 and a["tool_output_bytes"] > 0
    assert out["content"]["tool_input"]["old_string"] == "a\n"
    assert out["content"]["tool_output"] == {"filePath": "/home/dev/example/project/src/components/Button.tsx"}


def test_claude_write_counts_all_lines_added() -> None:
    out = claude("PreToolUse", tool_name="Write", tool_input={"file_path": "/p/README.md", "content": "a\nb\nc\n"})
    assert out["kind"] == "tool_call_started"
    assert "outcome" not in out
    assert out["attrs"]["lines_added"] == 3 and out["attrs"]["lines_removed"] == 0
    assert out["attrs"]["file_is_doc"] is True


def test_claude_bash_command_facts() -> None:
    out = claude("PreToolUse", tool_name="Bash", tool_input={"command": "git commit -m x && pytest -q"})
    assert out["tool"]["category"] == "shell"
    assert out["content"]["command"] == "git commit -m x && pytest -q"
    assert out["attrs"]["command_bytes"] == len("git commit -m x && pytest -q")
    assert out["attrs"]["command_category"] == "git"
    assert out["attrs"]["git_subcommand"] == "commit"
    assert "paths" not in out


def test_claude_bash_interrupted_and_exit_code() -> None:
    out = claude(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "sleep 100"},
        tool_response={"stdout": "", "stderr": "", "interrupted": True, "isImage": False},
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "interrupted"}
    assert out["attrs"]["interrupted"] is True and out["attrs"]["error_class"] == "interrupted"
    out = claude(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "false"},
        tool_response={"stdout": "", "stderr": "bad", "exit_code": 2},
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "nonzero_exit", "exit_code": 2}
    out = claude("PostToolUse", tool_name="x", tool_response={"metadata": {"exit_code": 0}})
    assert out["kind"] == "tool_call_finished"


def test_claude_post_tool_use_failure() -> None:
    out = claude(
        "PostToolUseFailure",
        tool_name="Edit",
        tool_use_id="toolu_02",
        tool_input={"file_path": "/p/a.py", "old_string": "x", "new_string": "y"},
        error="String to replace not found in file.\nString: x",
        is_interrupt=False,
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "string_mismatch"}
    assert out["attrs"]["error_class"] == "string_mismatch"
    assert out["attrs"]["error_bytes"] == len("String to replace not found in file.\nString: x")
    assert out["content"]["error"].startswith("String to replace")
    assert "interrupted" not in out["attrs"]
    out = claude("PostToolUseFailure", tool_name="Bash", tool_input={"command": "make"}, error="Exit code 2\nmake: *** [all] Error 2")
    assert out["outcome"]["class"] == "build_error" and out["outcome"]["exit_code"] == 2
    out = claude("PostToolUseFailure", tool_name="Bash", tool_input={"command": "x"}, error="whatever", is_interrupt=True)
    assert out["outcome"]["class"] == "interrupted" and out["attrs"]["interrupted"] is True


def test_claude_permission_events() -> None:
    out = claude("PermissionRequest", tool_name="Bash", tool_input={"command": "rm -rf build"}, permission_suggestions=[])
    assert out["kind"] == "permission_requested"
    assert "outcome" not in out
    assert out["tool"] == {"name": "Bash", "category": "shell"}
    assert out["content"]["command"] == "rm -rf build"
    out = claude("PermissionDenied", tool_name="Write", tool_use_id="t", tool_input={"file_path": "/p/x"}, reason="classifier said no")
    assert out["kind"] == "permission_denied"
    assert out["outcome"] == {"status": "denied"}
    assert out["content"]["reason"] == "classifier said no"
    assert out["paths"] == ["/p/x"]


def test_claude_notification_stop_and_failure() -> None:
    out = claude("Notification", message="Claude needs your permission", notification_type="permission_prompt", title="T")
    assert out["kind"] == "notification"
    assert out["attrs"]["notification_type"] == "permission_prompt"
    assert out["content"] == {"message": "Claude needs your permission", "title": "T"}
    out = claude("Stop", stop_hook_active=False, last_assistant_message="Done.", background_tasks=[])
    assert out["kind"] == "turn_stopped"
    assert out["attrs"]["stop_hook_active"] is False
    assert out["content"]["message"] == "Done."
    out = claude("StopFailure", error="rate_limit", error_details="429 Too Many Requests")
    assert out["kind"] == "turn_failed"
    assert out["outcome"] == {"status": "failure", "class": "rate_limit"}
    assert out["content"]["error"] == "429 Too Many Requests"
    assert claude("StopFailure", error="Overloaded Error")["outcome"]["class"] == "overloaded_error"
    assert claude("StopFailure", error_type="invalidRequest", error="x")["outcome"]["class"] == "invalid_request"
    assert claude("StopFailure")["outcome"]["class"] == "turn_failed"


def test_claude_subagents_and_tasks() -> None:
    out = claude("SubagentStart", agent_id="a1", agent_type="Explore")
    assert out["kind"] == "subagent_started"
    assert out["agent"] == {"agent_id": "a1", "agent_type": "Explore"}
    assert out["attrs"]["is_subagent"] is True and out["attrs"]["agent_type"] == "Explore"
    out = claude("SubagentStop", agent_id="a1", agent_type="", stop_hook_active=False, last_assistant_message="ok")
    assert out["kind"] == "subagent_stopped"
    assert out["agent"] == {"agent_id": "a1"}
    assert out["content"]["message"] == "ok"
    out = claude(
        "PreToolUse",
        agent_id="a1",
        tool_name="Read",
        tool_input={"file_path": "/p/tests/test_x.py"},
    )
    assert out["agent"] == {"agent_id": "a1"} and out["attrs"]["is_subagent"] is True
    assert out["attrs"]["file_is_test"] is True
    out = claude(
        "PreToolUse",
        tool_name="Task",
        tool_input={"description": "d", "prompt": "p", "subagent_type": "general-purpose"},
    )
    assert out["tool"]["category"] == "subagent"
    assert out["attrs"]["subagent_type"] == "general-purpose"
    out = claude("TaskCreated", task_id="7", task_subject="Write docs", task_description="all of them")
    assert out["kind"] == "task_created"
    assert out["attrs"]["task_id"] == "7"
    assert out["content"] == {"task_subject": "Write docs", "task_description": "all of them"}
    assert claude("TaskCompleted", task_id="7")["kind"] == "task_completed"


def test_claude_lifecycle_events() -> None:
    out = claude("PreCompact", trigger="manual", custom_instructions=None)
    assert out["kind"] == "compaction_started" and out["attrs"]["trigger"] == "manual"
    assert "content" not in out
    out = claude("PostCompact", trigger="auto", compact_summary="summary")
    assert out["kind"] == "compaction_finished" and out["content"]["compact_summary"] == "summary"
    out = claude("ConfigChange", source="project_settings", file_path="/p/.claude/settings.json")
    assert out["kind"] == "config_changed"
    assert out["attrs"]["config_source"] == "project_settings"
    assert out["paths"] == ["/p/.claude/settings.json"]
    out = claude("CwdChanged", old_cwd="/p", new_cwd="/p/sub")
    assert out["kind"] == "cwd_changed"
    assert out["attrs"]["previous_cwd"] == "/p" and out["paths"] == ["/p/sub"]
    out = claude("FileChanged", file_path="/p/.env", event="change")
    assert out["kind"] == "file_changed" and out["paths"] == ["/p/.env"]
    out = claude("WorktreeRemove", worktree_path="/p/.worktrees/x")
    assert out["kind"] == "worktree_removed" and out["attrs"]["worktree_path"] == "/p/.worktrees/x"
    assert claude("WorktreeCreate", name="feat")["kind"] == "worktree_created"
    out = claude("SessionEnd", reason="prompt_input_exit")
    assert out["kind"] == "session_ended" and out["attrs"]["reason"] == "prompt_input_exit"


def test_claude_documented_unmapped_and_unknown_events() -> None:
    for name in ("InstructionsLoaded", "TeammateIdle", "DirectoryAdded", "Elicitation", "ElicitationResult"):
        out = claude(name, file_path="/p/CLAUDE.md", directory="/q", message="m")
        assert out["kind"] == "notification", name
        assert "unrecognised" not in out.get("attrs", {})
    for name in ("Setup", "UserPromptExpansion", "MessageDisplay", "PreModelSwitch", "PostModelSwitch"):
        out = claude(name)
        assert out["kind"] == "unknown", name
        assert "unrecognised" not in out["attrs"]
    out = claude("SomethingNew", foo=1)
    assert out["kind"] == "unknown" and out["attrs"]["unrecognised"] is True
    assert out["provider_event_name"] == "SomethingNew"


def test_claude_post_tool_batch_outcomes() -> None:
    """PostToolBatch as Claude Code 2.1.197-2.1.332 send it: the only hook for a call
    that fails validation or is refused in headless mode (docs/agents.md)."""
    import json

    out = claude("PostToolBatch", prompt_id="p1", tool_calls=[
        {"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": "t1", "tool_response": "hi"},
        {"tool_name": "Edit", "tool_input": {"file_path": "/p/x"}, "tool_use_id": "t2",
         "tool_response": "<tool_use_error>String to replace not found in file.\nString: goodbye</tool_use_error>"},
        {"tool_name": "Edit", "tool_input": {"file_path": "/p/y"}, "tool_use_id": "t3",
         "tool_response": "<tool_use_error>File does not exist. Note: your current working directory is /p.</tool_use_error>"},
        {"tool_name": "Bash", "tool_input": {"command": "rm -rf x"}, "tool_use_id": "t4",
         "tool_response": "This command requires approval"},
        {"tool_name": "Bash", "tool_input": {}, "tool_use_id": "t5",
         "tool_response": "Output redirection to '/p/out.txt' needs approval. The path is inside the working directories"},
        "not a call", {"tool_name": "Read"},
    ])
    assert out["kind"] == "tool_batch_finished"
    calls = json.loads(out["attrs"]["calls"])
    assert [(c["call_id"], c["status"], c.get("class")) for c in calls] == [
        ("t1", "success", None), ("t2", "failure", "string_mismatch"), ("t3", "failure", "file_not_found"),
        ("t4", "denied", "policy_denied"), ("t5", "denied", "policy_denied"),
    ]
    assert calls[1]["category"] == "file_edit" and calls[0]["category"] == "shell"
    assert out["content"]["errors"]["t2"].startswith("String to replace not found")
    assert "t1" not in out["content"]["errors"]


def test_missing_event_name_uses_hint_or_is_unknown() -> None:
    out = check(claude_code, {"session_id": "s"}, ["Stop"])
    assert out["kind"] == "turn_stopped" and out["provider_event_name"] == "Stop"
    out = check(claude_code, {"session_id": "s"}, [])
    assert out["kind"] == "unknown"
    assert out["attrs"]["payload_error"] == "missing_event_name"


def test_tool_output_truncated_at_64k_on_char_boundary() -> None:
    big = "é" * 40_000  # 80 000 bytes
    out = claude("PostToolUse", tool_name="Bash", tool_input={"command": "cat x"}, tool_response={"stdout": big})
    s = out["content"]["tool_output"]
    assert isinstance(s, str)
    assert len(s.encode()) <= 64 * 1024 and len(s.encode()) > 64 * 1024 - 4
    assert out["attrs"]["tool_output_truncated"] is True
    assert out["attrs"]["tool_output_bytes"] > 80_000
    small = [{"type": "text", "text": "x" * 100}]
    out = claude("PostToolUse", tool_name="mcp__github__get_issue", tool_input={}, tool_response=small)
    assert out["content"]["tool_output"] == small
    assert out["tool"]["category"] == "mcp"
    assert "tool_output_truncated" not in out["attrs"]


def test_truncate_utf8() -> None:
    assert common.truncate_utf8("abc", 10) == "abc"
    assert common.truncate_utf8("aé", 2) == "a"
    assert common.truncate_utf8("a😀b", 4) == "a"
    assert common.truncate_utf8("a😀b", 5) == "a😀"


# -- Codex -----------------------------------------------------------------------

CODEX_BASE = {
    "session_id": "019a0000-0000-7000-8000-000000000000",
    "transcript_path": None,
    "cwd": "/home/dev/example/project",
    "model": "gpt-5-codex",
    "permission_mode": "default",
}


def codex_ev(event: str, /, **kw: Any) -> dict[str, Any]:
    return check(codex, {**CODEX_BASE, "hook_event_name": event, **kw})


def test_codex_shell_argv_and_turn_id() -> None:
    out = codex_ev(
        "PreToolUse",
        turn_id="t-1",
        tool_name="shell",
        tool_use_id="call_1",
        tool_input={"command": ["bash", "-lc", "cargo test -q"], "workdir": "/home/dev/example/project"},
    )
    assert out["kind"] == "tool_call_started"
    assert out["provider_turn_id"] == "t-1"
    assert out["agent"] == {"model": "gpt-5-codex"}
    assert out["tool"] == {"name": "shell", "category": "shell", "call_id": "call_1"}
    assert out["content"]["command"] == "bash -lc cargo test -q"
    assert out["attrs"]["transcript_present"] is False
    assert out["attrs"]["command_category"] == "test"


def test_codex_apply_patch_paths() -> None:
    patch = (
        "*** Begin Patch\n"
        "*** Add File: src/new.py\n"
        "+print('hi')\n"
        "+x = 1\n"
        "*** Update File: src/old.py\n"
        "@@ def f():\n"
        "-    return 1\n"
        "+    return 2\n"
        "*** Delete File: docs/gone.md\n"
        "*** End Patch\n"
    )
    out = codex_ev("PostToolUse", turn_id="t", tool_name="apply_patch", tool_use_id="c", tool_input={"command": patch}, tool_response="Success. Updated the following files:\nA src/new.py")
    assert out["kind"] == "tool_call_finished"
    assert out["tool"]["category"] == "file_edit"
    assert out["paths"] == ["src/new.py", "src/old.py", "docs/gone.md"]
    assert out["attrs"]["lines_added"] == 3 and out["attrs"]["lines_removed"] == 1
    assert out["attrs"]["file_ext"] == "py"
    assert "command" not in out["content"] and "command_category" not in out["attrs"]


def test_codex_string_response_exit_code() -> None:
    out = codex_ev(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "pytest"},
        tool_response="Exit code: 1\nWall time: 0.4 seconds\nOutput:\nFAILED",
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "test_failure", "exit_code": 1}
    out = codex_ev(
        "PostToolUse",
        tool_name="shell",
        tool_input={"command": ["ls"]},
        tool_response='{"output":"x","metadata":{"exit_code":3,"duration_seconds":0.1}}',
    )
    assert out["outcome"]["exit_code"] == 3
    out = codex_ev("PostToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_response="Exit code: 0\nOutput:\nx")
    assert out["kind"] == "tool_call_finished" and out["outcome"] == {"status": "success"}
    out = codex_ev("PostToolUse", tool_name="exec_command", tool_input={"cmd": "ls"}, tool_response="ok")
    assert out["tool"]["category"] == "shell" and out["content"]["command"] == "ls"


def test_codex_stop_subagent_and_reply() -> None:
    out = codex_ev("Stop", turn_id="t", stop_hook_active=False, last_assistant_message=None)
    assert out["kind"] == "turn_stopped" and "content" not in out
    out = codex_ev("SubagentStart", turn_id="t", agent_id="sa", agent_type="worker")
    assert out["kind"] == "subagent_started" and out["agent"]["agent_id"] == "sa"
    assert codex.reply("Stop") == b"{}" and codex.reply("SubagentStop") == b"{}"
    assert codex.reply("PreToolUse") == b"" and codex.reply("agent-turn-complete") == b""
    assert codex_ev("Interrupt")["kind"] == "unknown"
    assert "unrecognised" not in codex_ev("Interrupt")["attrs"]


NOTIFY = {
    "type": "agent-turn-complete",
    "thread-id": "b5f6c1c2-0000-4000-8000-000000000000",
    "turn-id": "12345",
    "cwd": "/Users/example/project",
    "client": "codex-tui",
    "input-messages": ["Rename `foo` to `bar`"],
    "last-assistant-message": "Rename complete",
}


def test_codex_notify_payload() -> None:
    out = check(codex, dict(NOTIFY))
    assert out["kind"] == "turn_stopped"
    assert out["provider_event_name"] == "agent-turn-complete"
    assert out["provider_session_id"] == NOTIFY["thread-id"]
    assert out["provider_turn_id"] == "12345"
    assert out["cwd"] == "/Users/example/project"
    assert out["content"] == {"message": "Rename complete", "input_messages": ["Rename `foo` to `bar`"]}
    # the JSON text as the sole argument, with an empty stdin payload
    out2 = check(codex, {}, [json.dumps(NOTIFY)])
    assert out2 == out
    out3 = check(codex, {**NOTIFY, "last-assistant-message": None})
    assert out3["content"] == {"input_messages": ["Rename `foo` to `bar`"]}


# -- Cursor ----------------------------------------------------------------------

CURSOR_BASE = {
    "conversation_id": "c-1",
    "generation_id": "g-1",
    "model": "claude-4.5-sonnet",
    "cursor_version": "1.7.2",
    "workspace_roots": ["/home/dev/example/project"],
    "user_email": None,
    "transcript_path": None,
}


def cursor_ev(event: str, /, **kw: Any) -> dict[str, Any]:
    return check(cursor, {**CURSOR_BASE, "hook_event_name": event, **kw})


def test_cursor_common_fields() -> None:
    out = cursor_ev("sessionStart", session_id="c-1", is_background_agent=False, composer_mode="agent")
    assert out["kind"] == "session_started"
    assert out["provider_session_id"] == "c-1"
    assert out["provider_turn_id"] == "g-1"
    assert out["provider_version"] == "1.7.2"
    assert out["agent"] == {"model": "claude-4.5-sonnet"}
    assert out["cwd"] == "/home/dev/example/project"
    assert out["attrs"]["generation_id"] == "g-1"
    out = check(cursor, {"hook_event_name": "stop", "session_id": "s-only", "cwd": "/x", "workspace_roots": ["/y"]})
    assert out["provider_session_id"] == "s-only" and out["cwd"] == "/x"
    out = cursor_ev("sessionEnd", session_id="c-1", reason="completed", duration_ms=5000, final_status="completed")
    assert out["kind"] == "session_ended" and out["duration_ms"] == 5000 and out["attrs"]["reason"] == "completed"


def test_cursor_shell_events() -> None:
    out = cursor_ev("beforeShellExecution", command="npm test", cwd="/home/dev/example/project/web", sandbox=False)
    assert out["kind"] == "tool_call_started"
    assert out["tool"] == {"name": "Shell", "category": "shell"}
    assert out["content"]["command"] == "npm test"
    assert out["attrs"]["command_category"] == "test"
    assert out["cwd"] == "/home/dev/example/project/web"
    out = cursor_ev("afterShellExecution", command="npm test", output="1 failed", duration=4200, exit_code=1)
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "test_failure", "exit_code": 1}
    assert out["duration_ms"] == 4200
    assert out["content"]["tool_output"] == "1 failed"
    out = cursor_ev("afterShellExecution", command="ls", output="", duration=10, exit_code=0)
    assert out["kind"] == "tool_call_finished" and out["outcome"] == {"status": "success"}


def test_cursor_generic_tool_events() -> None:
    out = cursor_ev("preToolUse", tool_name="Delete", tool_input={"file_path": "/p/old.txt"}, tool_use_id="tu1", cwd="/p")
    assert out["kind"] == "tool_call_started"
    assert out["tool"]["call_id"] == "tu1" and out["paths"] == ["/p/old.txt"]
    out = cursor_ev("preToolUse", tool_name="MCP:search_issues", tool_input={"q": "x"}, tool_use_id="tu2")
    assert out["tool"]["category"] == "mcp"
    out = cursor_ev(
        "postToolUse",
        tool_name="Read",
        tool_input={"file_path": "/p/a.md"},
        tool_use_id="tu3",
        tool_output='{"contents":"# hi","totalLines":1}',
        duration=7,
    )
    assert out["kind"] == "tool_call_finished"
    assert out["content"]["tool_output"] == {"contents": "# hi", "totalLines": 1}
    assert out["duration_ms"] == 7 and out["attrs"]["file_is_doc"] is True
    out = cursor_ev("postToolUse", tool_name="Read", tool_input={}, tool_output="not json {")
    assert out["content"]["tool_output"] == "not json {"
    big = json.dumps({"contents": "x" * 70_000})
    out = cursor_ev("postToolUse", tool_name="Read", tool_input={}, tool_output=big)
    assert out["content"]["tool_output"] == big[: 64 * 1024]
    assert out["attrs"]["tool_output_truncated"] is True


def test_cursor_post_tool_use_failure() -> None:
    out = cursor_ev(
        "postToolUseFailure",
        tool_name="Shell",
        tool_input={"command": "sleep 999"},
        tool_use_id="t",
        error_message="Command was cancelled",
        failure_type="error",
        duration=100,
        is_interrupt=True,
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"]["class"] == "interrupted"
    assert out["attrs"]["interrupted"] is True and out["attrs"]["failure_type"] == "error"
    out = cursor_ev("postToolUseFailure", tool_name="Shell", tool_input={}, error_message="boom", failure_type="timeout")
    assert out["outcome"]["class"] == "timeout"
    out = cursor_ev("postToolUseFailure", tool_name="Shell", tool_input={}, error_message="boom", failure_type="error")
    assert out["outcome"]["class"] == "unknown"


def test_cursor_mcp_read_edit_prompt() -> None:
    out = cursor_ev("beforeMCPExecution", tool_name="create_issue", tool_input='{"title":"t"}', url="https://mcp.example")
    assert out["tool"] == {"name": "MCP:create_issue", "category": "mcp"}
    assert out["content"]["tool_input"] == {"title": "t"}
    out = cursor_ev("afterMCPExecution", tool_name="create_issue", tool_input="{bad", result_json='{"content":[{"type":"text","text":"ok"}]}', duration=3)
    assert out["kind"] == "tool_call_finished"
    assert out["content"]["tool_input"] == "{bad"
    assert out["content"]["tool_output"] == {"content": [{"type": "text", "text": "ok"}]}
    out = cursor_ev("afterMCPExecution", tool_name="x", tool_input="{}", result_json='{"isError":true,"content":[{"type":"text","text":"permission denied"}]}')
    assert out["kind"] == "tool_call_failed" and out["outcome"]["class"] == "permission_denied"
    out = cursor_ev(
        "beforeReadFile",
        file_path="/p/src/app.ts",
        content="...",
        attachments=[{"type": "rule", "file_path": "/p/.cursor/rules/a.mdc"}, {"type": "file", "file_path": "/p/src/app.ts"}],
    )
    assert out["kind"] == "tool_call_started"
    assert out["tool"] == {"name": "Read", "category": "file_read"}
    assert out["paths"] == ["/p/src/app.ts", "/p/.cursor/rules/a.mdc"]
    assert out["attrs"]["file_ext"] == "ts"
    out = cursor_ev("afterFileEdit", file_path="/p/src/app.ts", edits=[{"old_string": "a", "new_string": "a\nb"}, {"old_string": "c\nd", "new_string": ""}])
    assert out["kind"] == "tool_call_finished"
    assert out["tool"] == {"name": "Edit", "category": "file_edit"}
    assert out["paths"] == ["/p/src/app.ts"]
    assert out["attrs"]["lines_added"] >= 1 and out["attrs"]["lines_removed"] >= 1
    assert out["content"]["tool_input"]["file_path"] == "/p/src/app.ts"
    out = cursor_ev("beforeSubmitPrompt", prompt="fix it?", attachments=[{"type": "file", "file_path": "/p/a.py"}])
    assert out["kind"] == "prompt_submitted"
    assert out["content"]["prompt"] == "fix it?" and out["paths"] == ["/p/a.py"]
    assert out["attrs"]["prompt_kind"] == "human"


def test_cursor_agent_stop_subagent_compact() -> None:
    out = cursor_ev("afterAgentResponse", text="Here you go")
    assert out["kind"] == "agent_message" and out["content"]["message"] == "Here you go"
    out = cursor_ev("afterAgentThought", text="hmm", duration_ms=40)
    assert out["kind"] == "agent_message" and out["attrs"]["thought"] is True and out["duration_ms"] == 40
    out = cursor_ev("stop", status="completed", loop_count=0)
    assert out["kind"] == "turn_stopped" and out["attrs"]["status"] == "completed" and out["attrs"]["loop_count"] == 0
    out = cursor_ev("stop", status="aborted", loop_count=1)
    assert out["kind"] == "turn_failed"
    assert out["outcome"] == {"status": "cancelled", "class": "interrupted"}
    out = cursor_ev("stop", status="error")
    assert out["kind"] == "turn_failed" and out["outcome"] == {"status": "failure", "class": "turn_failed"}
    out = cursor_ev("subagentStart", subagent_id="s1", subagent_type="explore", task="look", subagent_model="fast")
    assert out["kind"] == "subagent_started"
    assert out["agent"] == {"agent_id": "s1", "agent_type": "explore", "model": "fast"}
    assert out["attrs"]["subagent_type"] == "explore" and out["attrs"]["is_subagent"] is True
    out = cursor_ev("subagentStop", subagent_type="explore", status="completed", duration_ms=900, modified_files=["/p/a.py"], summary="did it", loop_count=0)
    assert out["kind"] == "subagent_stopped" and out["paths"] == ["/p/a.py"] and out["duration_ms"] == 900
    assert out["outcome"] == {"status": "success"}
    assert cursor_ev("preCompact", trigger="auto", context_tokens=100)["attrs"]["trigger"] == "auto"
    out = cursor_ev("onSomethingElse")
    assert out["kind"] == "unknown" and out["attrs"]["unrecognised"] is True
    assert cursor.reply("stop") == b""


# -- Gemini CLI --------------------------------------------------------------------

GEMINI_BASE = {
    "session_id": "g-s-1",
    "transcript_path": "/home/dev/.gemini/tmp/h/chats/session.json",
    "cwd": "/home/dev/example/project",
    "timestamp": "2025-01-15T10:30:00.123Z",
}


def gemini_ev(event: str, /, **kw: Any) -> dict[str, Any]:
    return check(gemini_cli, {**GEMINI_BASE, "hook_event_name": event, **kw})


def test_gemini_basic_events() -> None:
    out = gemini_ev("SessionStart", source="startup")
    assert out["kind"] == "session_started"
    assert out["observed_at"] == 1_736_937_000_123_000
    out = gemini_ev("BeforeAgent", prompt="hello?")
    assert out["kind"] == "prompt_submitted" and out["attrs"]["prompt_has_question"] is True
    out = gemini_ev("AfterAgent", prompt="hello?", prompt_response="hi", stop_hook_active=False)
    assert out["kind"] == "turn_stopped" and out["content"]["message"] == "hi"
    assert gemini_ev("PreCompress", trigger="manual")["kind"] == "compaction_started"
    # 0.61 fires an automatic PreCompress before every model request: not a compaction by itself
    assert gemini_ev("PreCompress", trigger="auto")["kind"] == "unknown"
    out = gemini_ev("Notification", notification_type="ToolPermission", message="Allow?", details={"tool": "x"})
    assert out["kind"] == "notification" and out["attrs"]["notification_type"] == "ToolPermission"
    assert out["content"]["details"] == {"tool": "x"}
    out = gemini_ev("AfterModel", llm_request={"model": "gemini-2.5-pro", "messages": []}, llm_response={})
    assert out["kind"] == "unknown" and "unrecognised" not in out["attrs"]
    assert out["agent"] == {"model": "gemini-2.5-pro"}
    out = gemini_ev("SomethingElse")
    assert out["kind"] == "unknown" and out["attrs"]["unrecognised"] is True
    assert gemini_cli.reply("BeforeTool") == b"{}" and gemini_cli.reply("anything") == b"{}"


def test_gemini_tools_and_failures() -> None:
    out = gemini_ev("BeforeTool", tool_name="run_shell_command", tool_args={"command": "ls -la", "description": "d"})
    assert out["kind"] == "tool_call_started"
    assert out["tool"] == {"name": "run_shell_command", "category": "shell"}
    assert out["content"]["command"] == "ls -la"
    out = gemini_ev(
        "AfterTool",
        tool_name="read_file",
        tool_input={"absolute_path": "/p/pyproject.toml"},
        tool_response={"llmContent": "x", "returnDisplay": "", "error": None},
    )
    assert out["kind"] == "tool_call_finished" and out["outcome"] == {"status": "success"}
    assert out["paths"] == ["/p/pyproject.toml"] and out["attrs"]["file_is_config"] is True
    # error false / empty is not a failure
    for err in (False, "", None, {}):
        out = gemini_ev("AfterTool", tool_name="glob", tool_input={}, tool_response={"llmContent": "", "error": err}, error=err)
        assert out["kind"] == "tool_call_finished", err
    out = gemini_ev("AfterTool", tool_name="replace", tool_input={"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}, tool_response={"error": {"message": "Failed to edit, could not find the string to replace."}})
    assert out["kind"] == "tool_call_failed"
    assert out["content"]["error"].startswith("Failed to edit")
    out = gemini_ev("AfterTool", tool_name="web_fetch", tool_input={}, tool_response={"error": True})
    assert out["kind"] == "tool_call_failed" and out["outcome"]["class"] == "unknown"
    out = gemini_ev("AfterTool", tool_name="x", tool_input={}, tool_response={"status": "error", "message": "permission denied"})
    assert out["outcome"]["class"] == "permission_denied"
    out = gemini_ev("AfterTool", tool_name="x", tool_input={}, tool_response={"success": False})
    assert out["kind"] == "tool_call_failed"
    out = gemini_ev("AfterTool", tool_name="x", tool_input={}, tool_response={}, error="timed out after 30s")
    assert out["outcome"]["class"] == "timeout"
    out = gemini_ev(
        "AfterTool",
        tool_name="run_shell_command",
        tool_args={"command": "false"},
        tool_response={"llmContent": "Command: false\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 1\nSignal: (none)"},
    )
    assert out["kind"] == "tool_call_failed"
    assert out["outcome"] == {"status": "failure", "class": "nonzero_exit", "exit_code": 1}
    out = gemini_ev(
        "AfterTool",
        tool_name="run_shell_command",
        tool_args={"command": "true"},
        tool_response={"llmContent": "Command: true\nExit Code: (none)"},
    )
    assert out["kind"] == "tool_call_finished"
    out = gemini_ev("AfterTool", tool_name="x", tool_input={}, tool_response={"exit_code": 0, "error": ""})
    assert out["kind"] == "tool_call_finished"
    out = gemini_ev("AfterTool", tool_name="x", tool_call_id="call-9", tool_input={}, tool_response={"exit_code": 4})
    assert out["outcome"]["exit_code"] == 4 and out["tool"]["call_id"] == "call-9"


# -- ISO 8601 ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00.5Z", 500_000),
        ("2025-01-15T10:30:00.123Z", 1_736_937_000_123_000),
        ("2025-01-15T10:30:00.123456789Z", 1_736_937_000_123_456),
        ("2025-01-15T12:30:00+02:00", 1_736_937_000_000_000),
        ("2025-01-15T05:00:00-0530", 1_736_937_000_000_000),
        ("2025-01-15T12:30:00+02", 1_736_937_000_000_000),
        ("2025-01-15 10:30:00z", 1_736_937_000_000_000),
        ("2025-01-15t10:30Z", 1_736_937_000_000_000),
        ("2024-02-29T00:00:00Z", 1_709_164_800_000_000),
        ("1969-12-31T23:59:59Z", -1_000_000),
        ("2000-03-01T00:00:00,25+00:00", 951_868_800_250_000),
    ],
)
def test_parse_iso8601(text: str, expected: int) -> None:
    assert common.parse_iso8601(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2025-01-15",
        "2025-01-15T10:30:00",  # no zone: ambiguous
        "2025-01-15T10:30:00.Z",
        "2025-13-01T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2025-01-15T24:00:00Z",
        "2025-01-15T10:60:00Z",
        "2025-01-15T10:30:00+25:00",
        "2025-01-15T10:30:00+2:00",
        "2025/01/15T10:30:00Z",
        "not a timestamp at all",
        "２０２５-01-15T10:30:00Z",
    ],
)
def test_parse_iso8601_rejects(text: str) -> None:
    assert common.parse_iso8601(text) is None


def test_parse_iso8601_matches_datetime() -> None:
    from datetime import datetime, timedelta, timezone

    base = datetime(1990, 1, 1, tzinfo=timezone.utc)
    for i in range(0, 40 * 365, 97):
        dt = base + timedelta(days=i, seconds=i * 37 % 86400, microseconds=i * 13 % 1_000_000)
        for off in (0, 330, -480):
            tz = timezone(timedelta(minutes=off))
            s = dt.astimezone(tz).isoformat()
            exp = (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
            assert common.parse_iso8601(s) == exp, s


_CLOCKISH = st.text(st.sampled_from("0123456789:.,TZz+- x٣"), min_size=0, max_size=16)


@settings(max_examples=600)
@given(date=st.sampled_from(["2025-10-09", "2024-02-29", "2025-02-29", "1999-12-31", "2025-13-01"]), rest=_CLOCKISH,
       shape=st.sampled_from(["T%s:%s:%sZ", "T%s:%s:%s.%sZ", "%s"]), parts=st.lists(st.one_of(st.integers(0, 99).map("{:02d}".format), st.integers(0, 10**9).map(str), _CLOCKISH),
                                 min_size=4, max_size=4))
def test_parse_iso8601_fast_path_equals_the_full_parse(date: str, rest: str, shape: str, parts: list[str]) -> None:
    """The shortcut for a date seen before (``…Thh:mm:ss[.f]Z``) gives what the full parse gives."""
    text = date + (shape % tuple(parts[: shape.count("%s")]) if shape != "%s" else rest)
    common._DATE_DAYS.clear()
    cold = common.parse_iso8601(text)
    common.parse_iso8601(date + "T00:00:00Z")  # the date is now known (when valid)
    assert common.parse_iso8601(text) == cold, text


def test_timestamp_numbers_are_scaled() -> None:
    assert common.timestamp_us(1_736_937_000) == 1_736_937_000_000_000
    assert common.timestamp_us(1_736_937_000_123) == 1_736_937_000_123_000
    assert common.timestamp_us(1_736_937_000_123_456) == 1_736_937_000_123_456
    assert common.timestamp_us(True) is None
    assert common.timestamp_us(-5) is None


def test_snake() -> None:
    assert common.snake("rate_limit") == "rate_limit"
    assert common.snake("RateLimit") == "rate_limit"
    assert common.snake("rate-limit error") == "rate_limit_error"
    assert common.snake("HTTP2Error") == "http2_error"


# -- totality -----------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["", " ", "0", "-1", "{", "[1]", '{"a":1}', "*** Begin Patch\n*** Add File: x\n+y\n", "Exit code: 3\nOutput:", "2025-01-15T10:30:00Z"])
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
EVENT_NAMES = sorted(
    set(claude_code.KINDS) | set(codex.KINDS) | set(cursor.KINDS) | set(gemini_cli.KINDS) | {"agent-turn-complete"}
)
TOOL_NAMES = ["Bash", "Edit", "Write", "Read", "Task", "Agent", "apply_patch", "shell", "exec_command", "run_shell_command", "mcp__a__b", "MCP:x", "replace", "write_file", "Shell"]
INPUT_KEYS = ["file_path", "notebook_path", "path", "absolute_path", "command", "cmd", "old_string", "new_string", "content", "edits", "patch", "input", "subagent_type"]
PAYLOAD_KEYS = [
    "session_id", "conversation_id", "generation_id", "prompt_id", "turn_id", "cwd", "workspace_roots", "transcript_path",
    "permission_mode", "model", "agent_id", "agent_type", "timestamp", "duration_ms", "duration", "tool_use_id",
    "tool_response", "tool_output", "result_json", "error", "error_message", "is_interrupt", "exit_code", "failure_type",
    "prompt", "message", "title", "notification_type", "type", "source", "reason", "trigger", "stop_hook_active",
    "last_assistant_message", "prompt_response", "status", "loop_count", "attachments", "edits", "file_path", "output",
    "task_id", "task_subject", "old_cwd", "new_cwd", "worktree_path", "subagent_id", "subagent_type", "modified_files",
    "llm_request", "details", "success", "error_type", "matcher", "error_details", "text", "cursor_version",
    "thread-id", "turn-id", "input-messages", "last-assistant-message", "directory", "event", "custom_instructions",
]

TOOL_INPUT = JSON | st.dictionaries(st.sampled_from(INPUT_KEYS), JSON, max_size=5) | st.text(max_size=40)
TOOL_RESPONSE = JSON | st.dictionaries(
    st.sampled_from(
        ["exit_code", "exitCode", "metadata", "interrupted", "error", "status", "success", "message", "llmContent", "stdout", "stderr"]
    ),
    JSON,
    max_size=4,
)


@st.composite
def realistic(draw: st.DrawFn) -> dict[str, Any]:
    payload = draw(st.dictionaries(st.sampled_from(PAYLOAD_KEYS), JSON, max_size=8))
    payload["hook_event_name"] = draw(st.sampled_from(EVENT_NAMES) | JSON)
    if draw(st.booleans()):
        payload["tool_name"] = draw(st.sampled_from(TOOL_NAMES) | JSON)
        payload[draw(st.sampled_from(["tool_input", "tool_args"]))] = draw(TOOL_INPUT)
        if draw(st.booleans()):
            payload["tool_response"] = draw(TOOL_RESPONSE)
    return payload


REALISTIC = realistic()
NOTIFY_LIKE = st.fixed_dictionaries(
    {"type": st.just("agent-turn-complete")},
    optional={k: JSON for k in ("thread-id", "turn-id", "cwd", "input-messages", "last-assistant-message", "client")},
)
PAYLOADS = REALISTIC | NOTIFY_LIKE | st.dictionaries(st.text(max_size=15), JSON, max_size=8)
EXTRA_ARGS = st.lists(st.text(max_size=20) | st.sampled_from(["Stop", "{", json.dumps(NOTIFY), "[]"]), max_size=2)


@pytest.mark.parametrize("mod", ADAPTERS, ids=lambda m: m.PROVIDER)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=PAYLOADS, extra_args=EXTRA_ARGS)
def test_adapters_are_total(mod: Any, payload: dict[str, Any], extra_args: list[str]) -> None:
    check(mod, payload, extra_args)
    assert isinstance(mod.reply(str(payload.get("hook_event_name"))), bytes)


@pytest.mark.parametrize("mod", ADAPTERS, ids=lambda m: m.PROVIDER)
def test_adapters_accept_non_dict_payload(mod: Any) -> None:
    for payload in ({}, [], None, "x", 3):
        out = mod.normalise(payload, [])
        assert out["kind"] == "unknown"
        to_event(mod, out)


@pytest.mark.parametrize("mod", ADAPTERS, ids=lambda m: m.PROVIDER)
def test_adapters_do_not_mutate_payload(mod: Any) -> None:
    payload = {
        **BASE,
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": "/p/a.py", "old_string": "a", "new_string": "b"},
        "tool_response": {"x": 1},
    }
    before = json.dumps(payload, sort_keys=True)
    mod.normalise(payload, [])
    assert json.dumps(payload, sort_keys=True) == before


def test_adapters_respect_the_hook_path_import_rule() -> None:
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src"
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import agentlog.capture.adapters.claude_code, agentlog.capture.adapters.codex,"
        " agentlog.capture.adapters.cursor, agentlog.capture.adapters.gemini_cli;"
        "print(sorted(m for m in sys.modules if m in ('re', 'json', 'typing', 'dataclasses', 'enum',"
        " 'collections', 'functools', 'datetime', 'pathlib', 'shlex', 'uuid', 'inspect', 'logging', 'tomllib')))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(src)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_codex_patch_under_edit_alias_and_shell_heredoc() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch\n"
    out = codex_ev("PreToolUse", tool_name="Edit", tool_input={"command": patch})
    assert out["paths"] == ["a.py"] and "command" not in out["content"]
    out = codex_ev("PreToolUse", tool_name="shell", tool_input={"command": ["bash", "-lc", "apply_patch <<'EOF'\n" + patch + "EOF"]})
    assert out["paths"] == ["a.py"]
    assert out["attrs"]["lines_added"] == 1 and out["attrs"]["lines_removed"] == 1
    assert out["content"]["command"].startswith("bash -lc apply_patch")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_json_size_is_the_size_of_fastjsons_text_with_orjson_loaded_or_not(value: Any) -> None:
    """The importer has orjson loaded and json_size then uses it: the same number as the hook's."""
    import sys

    import orjson

    try:
        expected = len(fastjson.dumps_bytes(value)) if not isinstance(value, str) else common.utf8_len(value)
    except Exception:
        expected = common.utf8_len(str(value))
    assert sys.modules.get("orjson") is orjson
    assert common.json_size(value) == expected
    assert common.json_size([value, {"k": (value, "\x00\ud800")}]) == len(
        fastjson.dumps_bytes([value, {"k": [value, "\x00\ud800"]}]))
