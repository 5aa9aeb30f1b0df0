"""The PreToolUse hook of ``agentlog run``: Bash commands rewritten to go through the broker.

Gemini CLI's BeforeTool of ``run_shell_command`` too (its reply: ``hookSpecificOutput.tool_input``).
Claude Code runs it as ``python -I -S .../agentlog/sandbox/route.py`` (given in the run's
``--settings``). Outside a run (no ``AGENTLOG_RUN_EXEC``), for another event or tool, or for a
command already rewritten, it prints nothing, and so on any failure: the command then runs
unrouted, under the floor, which is never wider than a brokered command's policy. The reply
echoes the whole ``tool_input`` with ``command`` replaced (``updatedInput`` replaces the input,
it does not merge) and ``permissionDecision: allow`` (without it headless runs deny).
"""

from __future__ import annotations

import json
import os
import shlex
import sys


SHELL_TOOLS = {"PreToolUse": "Bash", "BeforeTool": "run_shell_command"}
"""The event and the shell tool's name: Claude Code and Codex (PreToolUse, Bash), Gemini CLI
(BeforeTool, run_shell_command)."""


def reply(payload: object, exec_prefix: str) -> dict[str, object] | None:
    """The hook's reply for ``payload``, or None when the call is left as it is."""
    if not exec_prefix or not isinstance(payload, dict):
        return None
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or SHELL_TOOLS.get(event) != payload.get("tool_name"):
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict) or not isinstance(tool_input.get("command"), str):
        return None
    command = tool_input["command"]
    if command.lstrip().startswith(exec_prefix + " -c "):
        return None  # already routed (the model may copy a rewritten command)
    updated = dict(tool_input)
    updated["command"] = f"{exec_prefix} -c {shlex.quote(command)}"
    if event == "BeforeTool":  # Gemini: the input override, nothing else decided
        return {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": updated}}
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "permissionDecisionReason": "agentlog run: the command runs through agentlog's sandbox broker",
        "updatedInput": updated}}


def main() -> int:
    prefix = os.environ.get("AGENTLOG_RUN_EXEC", "")
    if not prefix:
        return 0
    try:
        payload = json.loads(sys.stdin.buffer.read(8 << 20))
        out = reply(payload, prefix)
    except (ValueError, OSError) as e:
        sys.stderr.write(f"agentlog route: {e}\n")
        return 0
    if out is not None:
        sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
