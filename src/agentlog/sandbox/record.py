"""Every brokered command, an event pair in the run's session log.

The log is ``agentlog/sandbox-<run id>`` (provider ``agentlog``, session ``sandbox-<run id>``):
a ``tool_call_started`` and a ``tool_call_finished`` (exit 0) or ``tool_call_failed`` for each
command, tool ``Bash``, written by the broker after it answered the client (so recording
costs the command nothing). A failed command whose stderr showed a denial is outcome
``denied``, class ``policy_denied``: the timeline and ``failures`` tell it from an ordinary
failure. ``attrs.sandbox`` holds the policy version, grants, net mode, the bytes relayed and
the denial count (None where not observable: a terminal is passed through, not relayed).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from agentlog import __version__
from agentlog.core.fastjson import dumps_bytes
from agentlog.core.ids import uuid7

PROVIDER = "agentlog"


def session_id(run_id: str) -> str:
    return f"sandbox-{run_id}"


@dataclass
class CommandRecord:
    run_id: str
    command: str
    cwd: str
    status: int
    started_at: float
    duration_ms: float
    bytes_out: int | None
    bytes_err: int | None
    denied: int | None
    policy_version: int
    grants: list[str]
    denies: list[str]
    net: str
    pid: int
    ruleset_ms: float

    @property
    def denied_by_policy(self) -> bool:
        return self.status != 0 and bool(self.denied)


def events(rec: CommandRecord) -> list[dict[str, Any]]:
    """The two wire-form events of one brokered command."""
    start_us = int(rec.started_at * 1_000_000)
    end_us = start_us + int(rec.duration_ms * 1000)
    now_us = time.time_ns() // 1000
    call_id = f"sandbox-{rec.run_id}-{rec.pid}-{start_us}"
    tool = {"name": "Bash", "category": "shell", "call_id": call_id}
    sandbox: dict[str, Any] = {
        "run": rec.run_id, "policy_version": rec.policy_version, "grants": rec.grants, "denies": rec.denies,
        "net": rec.net, "cwd": rec.cwd, "ruleset_ms": round(rec.ruleset_ms, 3),
        "bytes_out": rec.bytes_out, "bytes_err": rec.bytes_err, "denied": rec.denied,
    }

    def event(kind: str, name: str, at: int, extra: dict[str, Any], attrs: dict[str, Any],
              content: dict[str, Any]) -> dict[str, Any]:
        ev: dict[str, Any] = {"event_id": uuid7(at // 1000), "schema_version": 1, "kind": kind, "provider": PROVIDER,
                              "provider_event_name": name, "observed_at": at, "captured_at": now_us,
                              "capture_mode": "full", "agentlog_version": __version__,
                              "provider_session_id": session_id(rec.run_id), "tool": tool}
        ev.update(extra)
        ev.update(extra_project)
        ev["attrs"] = attrs
        ev["content"] = content
        return ev

    project = None
    try:
        from agentlog.capture.project import project_info
        from agentlog.capture.redact import redact_project

        project = project_info(rec.cwd)
        if project is not None:
            project = redact_project(project)
    except (OSError, ValueError):
        project = None
    if project is not None:
        extra_project: dict[str, Any] = {"project": project}
    else:
        extra_project = {}
    start = event("tool_call_started", "SandboxExec", start_us, {}, {"sandbox": sandbox},
                  {"tool_input": {"command": rec.command}})
    if rec.status == 0:
        outcome: dict[str, Any] = {"status": "success", "exit_code": 0}
        kind = "tool_call_finished"
    elif rec.denied_by_policy:
        outcome = {"status": "denied", "class": "policy_denied", "exit_code": rec.status}
        kind = "tool_call_failed"
    else:
        outcome = {"status": "failure", "class": "nonzero_exit" if rec.status > 0 else "interrupted",
                   "exit_code": rec.status}
        kind = "tool_call_failed"
    attrs: dict[str, Any] = {"sandbox": sandbox}
    if kind == "tool_call_failed":
        attrs["error_class"] = outcome["class"]
    content: dict[str, Any] = {"tool_input": {"command": rec.command}}
    if rec.denied_by_policy:
        content["error"] = (f"denied by agentlog's sandbox policy (run {rec.run_id}, policy version "
                            f"{rec.policy_version}); `agentlog allow PATH` widens the next command")
    end = event(kind, "SandboxExecResult", end_us, {"outcome": outcome, "duration_ms": int(rec.duration_ms)}, attrs,
                content)
    return [start, end]


def record_command(root: str, rec: CommandRecord) -> None:
    """Append the command's events to the run's log."""
    from agentlog.log.writer import open_session_log

    log = open_session_log(root, PROVIDER, session_id(rec.run_id), durability="relaxed")
    log.append([dumps_bytes(e) for e in events(rec)])


def log_dir_exists(root: str) -> bool:
    return os.path.isdir(os.path.join(root, "logs", PROVIDER))
