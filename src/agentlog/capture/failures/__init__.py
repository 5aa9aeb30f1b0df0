"""Why a tool call failed: the class (:mod:`.taxonomy`), the signals it is read from
(:mod:`.classifier`), and what test runners and checkers said (:mod:`.summaries`).

:func:`classify_event` classifies a wire-form event (a dict as the hook writes
it) and is what both capture and the projection's re-classification call, so
a class recorded at capture and one re-derived later by ``agentlog project
--full`` come from the same code.
"""

from __future__ import annotations

from agentlog.capture.classify import command_programs
from agentlog.capture.failures.classifier import classify, header_exit_code
from agentlog.capture.failures.summaries import describe, summarize
from agentlog.capture.failures.taxonomy import CLASSES, DEFINITIONS, LEGACY, canonical

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CLASSES", "DEFINITIONS", "LEGACY", "canonical", "classify", "classify_event", "describe",
    "header_exit_code", "output_text", "summarize", "summary_attrs", "SUMMARY_ATTRS",
]

SUMMARY_ATTRS = ("failure_evidence", "test_runner", "tests_passed", "tests_failed", "tests_skipped",
                 "tests_errors", "failing_tests", "checker", "check_errors", "first_error", "result_summary")
"""The ``attrs`` keys :func:`summary_attrs` writes (the projection copies them to its rows)."""


def summary_attrs(verdict: dict[str, Any]) -> dict[str, Any]:
    """Event ``attrs`` of a verdict: its evidence and the summary's counts, flat."""
    out: dict[str, Any] = {}
    evidence = verdict.get("evidence")
    if isinstance(evidence, str) and evidence:
        out["failure_evidence"] = evidence
    summary = verdict.get("summary")
    if isinstance(summary, dict):
        out.update(flat_summary(summary))
    return out


def flat_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary (:func:`summarize`) as flat ``attrs`` keys, with its one-line description."""
    out: dict[str, Any] = {}
    if summary.get("kind") == "tests":
        out["test_runner"] = str(summary.get("runner"))
        for key in ("passed", "failed", "skipped", "errors"):
            if isinstance(summary.get(key), int):
                out["tests_" + key] = summary[key]
        if summary.get("failing"):  # attrs hold scalars: one id a line
            out["failing_tests"] = "\n".join(str(n) for n in summary["failing"])
    else:
        out["checker"] = str(summary.get("checker"))
        if isinstance(summary.get("errors"), int):
            out["check_errors"] = summary["errors"]
    if summary.get("first_error"):
        out["first_error"] = summary["first_error"]
    text = describe(summary)
    if text:
        out["result_summary"] = text
    return out

_OUTPUT_KEYS = ("stdout", "stderr", "output", "llmContent", "returnDisplay", "content", "aggregated_output",
                "formatted_output", "result", "error")


def output_text(value: Any) -> str | None:
    """A tool output as text: a string, an object's stdout/stderr/output…, a list of text blocks."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        parts = []
        for k in _OUTPUT_KEYS:
            v = value.get(k)
            got = output_text(v) if isinstance(v, (str, list, dict)) else None
            if got:
                parts.append(got)
        return "\n".join(parts) or None
    if isinstance(value, list):
        parts = [str(b["text"]) for b in value if isinstance(b, dict) and isinstance(b.get("text"), str)]
        parts += [b for b in value if isinstance(b, str)]
        return "\n".join(p for p in parts if p) or None
    return None


def _hint(ev: dict[str, Any], given: str | None) -> str | None:
    outcome = ev.get("outcome") or {}
    status = outcome.get("status")
    attrs = ev.get("attrs") or {}
    if attrs.get("interrupted") is True:
        return "interrupted"
    if given in ("interrupted", "cancelled", "timeout", "tool_usage_error", "string_mismatch", "edit_conflict"):
        return given
    if status == "denied":
        return "policy_denied"
    if status == "cancelled":
        return given if given in ("interrupted", "cancelled") else "interrupted"
    if given == "permission_denied":
        return "permission_denied"
    return None


def classify_event(ev: dict[str, Any], hint: str | None = None) -> dict[str, Any]:
    """The verdict (:func:`classify`) of a failed call's wire-form event: its error and
    output text, tool category, command facts, exit code and structured hints.
    ``hint`` is a class the adapter read from structured fields."""
    content = ev.get("content") or {}
    attrs = ev.get("attrs") or {}
    tool = ev.get("tool") or {}
    outcome = ev.get("outcome") or {}
    err = content.get("error") if isinstance(content.get("error"), str) else None
    out = output_text(content.get("tool_output"))
    command = content.get("command") if isinstance(content.get("command"), str) else None
    code = outcome.get("exit_code")
    return classify(
        err,
        out,
        category=str(tool.get("category") or ""),
        command=command,
        command_category=attrs.get("command_category"),
        command_subcategory=attrs.get("command_subcategory"),
        programs=command_programs(command) if command else (),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        hint=_hint(ev, hint),
    )
