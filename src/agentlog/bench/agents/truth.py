"""The truth of a run (what the CLI sent back to the model) against agentlog's record.

The truth for each call is the tool result the CLI sent to the scripted model:
whether it was an error, the exit code the text states, and, for Claude
Code, whether the call was a permission denial (its ``result`` line lists
them). :func:`compare` reads agentlog's tables for the run and lists every
fact where the record and the truth differ; an empty list means they agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentlog.bench.agents import gemini, openai
from agentlog.bench.agents.drivers import Run

_CLAUDE_EXIT = re.compile(r"^Exit code (-?\d+)")

CATEGORY = {"shell": {"shell"}, "read": {"file_read", "shell"}, "write": {"file_write", "file_edit", "shell"},
            "edit": {"file_edit"}, "task": {"subagent", "agent", "task", "other"}}
"""The tool categories that may stand for each scenario verb (Codex reads with a shell command)."""

EXPECTED_CLASS = {"edit_text_absent": "string_mismatch", "edit_missing_file": "file_not_found",
                  "failing_tests": "test_failure"}


@dataclass(frozen=True)
class RealCall:
    call_id: str
    tool: str
    verb: str
    step: int
    ok: bool
    denied: bool
    exit_code: int | None
    text: str


def _denials(stdout: str) -> set[str]:
    out: set[str] = set()
    for line in stdout.splitlines():
        if '"permission_denials"' not in line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        for d in obj.get("permission_denials") or []:
            if isinstance(d, dict) and isinstance(d.get("tool_use_id"), str):
                out.add(d["tool_use_id"])
    return out


def real_calls(run: Run) -> list[RealCall]:
    """Every call the model made, in order, with what really came back."""
    results = run.model.results()
    denied = _denials(run.stdout) if run.release.agent == "claude-code" else set()
    out: list[RealCall] = []
    for cid, call in run.model.issued.items():
        res = results.get(cid)
        text = res.text if res else ""
        code: int | None = None
        if run.release.agent == "claude-code":
            m = _CLAUDE_EXIT.match(text)
            code = int(m.group(1)) if m else (0 if res and not res.is_error and call.action.verb == "shell" else None)
        elif run.release.agent == "codex":
            code = openai.outcome_of(text)[1]
        else:
            m2 = gemini._EXIT.search(text)
            code = int(m2.group(1)) if m2 else None
        out.append(RealCall(cid, call.tool, call.action.verb, call.step, res is not None and not res.is_error,
                            cid in denied, code, text))
    return out


def record(root: str) -> dict[str, list[dict[str, Any]]]:
    """The tables a comparison reads, as rows."""
    from agentlog.api import run_sql

    q = {
        "calls": "select provider_call_id, tool_name, tool_category, outcome_status, outcome_class, exit_code, pairing "
                 "from tool_calls order by started_at nulls last, finished_at",
        "sessions": "select provider, provider_session_id, state, prompt_count, turn_count, tool_call_count, failure_count, in_flight_calls, "
                    "end_reason from sessions",
        "turns": "select turn_index, status from turns order by turn_index",
        "attempts": "select attempt_index, outcome, failure_class from attempts order by turn_index, attempt_index",
        "compactions": "select count(*) as n from events where kind = 'compaction_started'",
    }
    return {k: run_sql(root, sql).records() for k, sql in q.items()}


def _match(real: list[RealCall], rows: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Each real call's row: by call id (a transcript may prefix it), else the next unmatched row in order."""
    out: dict[str, dict[str, Any] | None] = {}
    used: set[int] = set()
    for rc in real:
        hit = None
        for i, row in enumerate(rows):
            pid = str(row.get("provider_call_id") or "")
            if i not in used and pid and (pid == rc.call_id or pid.endswith("__" + rc.call_id)):
                hit = i
                break
        if hit is not None:
            used.add(hit)
            out[rc.call_id] = rows[hit]
    for rc in real:
        if rc.call_id in out:
            continue
        nxt = next((i for i, row in enumerate(rows) if i not in used and not row.get("provider_call_id")), None)
        if nxt is not None:
            used.add(nxt)
        out[rc.call_id] = rows[nxt] if nxt is not None else None
    return out


def compare(run: Run, rec: dict[str, list[dict[str, Any]]] | None = None) -> list[str]:
    """Every fact where agentlog's record of the run differs from the truth."""
    rec = rec if rec is not None else record(str(run.data_root))
    real = real_calls(run)
    sc = run.scenario
    bad: list[str] = []
    rows = rec["calls"]
    if len(rows) != len(real):
        bad.append(f"tool calls: {len(rows)} recorded, {len(real)} made")
    matched = _match(real, rows)
    for rc in real:
        row = matched[rc.call_id]
        where = f"call {rc.call_id} ({rc.tool} {rc.verb})"
        if row is None:
            bad.append(f"{where}: not recorded")
            continue
        status = row.get("outcome_status")
        want = "denied" if rc.denied else ("success" if rc.ok else "failure")
        if status != want:
            bad.append(f"{where}: outcome {status!r}, really {want!r}")
        if row.get("tool_category") not in CATEGORY[rc.verb]:
            bad.append(f"{where}: category {row.get('tool_category')!r}")
        if rc.exit_code not in (None, 0) and row.get("exit_code") != rc.exit_code:
            bad.append(f"{where}: exit code {row.get('exit_code')!r}, really {rc.exit_code}")
        klass = row.get("outcome_class")
        if not rc.ok and not rc.denied and sc.name in EXPECTED_CLASS and klass != EXPECTED_CLASS[sc.name]:
            bad.append(f"{where}: class {klass!r}, really {EXPECTED_CLASS[sc.name]!r}")
    sessions = rec["sessions"]
    if len(sessions) != 1:
        bad.append(f"sessions: {len(sessions)} recorded, 1 ran")
    sessions.sort(key=lambda s: str(s.get("provider_session_id") or "").startswith("agentlog-capture-test"))
    failures = sum(1 for rc in real if not rc.ok)
    for s in sessions[:1]:
        facts: dict[str, tuple[Any, Any]] = {"state": (s.get("state"), "closed"), "prompts": (s.get("prompt_count"), 1),
                 "turns": (s.get("turn_count"), 1), "in flight": (s.get("in_flight_calls"), 0),
                 "failures": (s.get("failure_count"), failures)}
        for fact, (got, want) in facts.items():
            if got != want:
                bad.append(f"session {fact}: {got!r}, really {want!r}")
    if rec["compactions"] and rec["compactions"][0].get("n"):
        bad.append(f"compactions: {rec['compactions'][0]['n']} recorded, none happened")
    if real and not real[-1].ok and rec["attempts"] and rec["attempts"][-1].get("outcome") == "succeeded":
        bad.append("last attempt called succeeded although its last call failed")
    return bad
