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

CLASSIFIER_VERSION = 2
"""Bumped whenever a class may come out differently; events carry it in
``attrs.classified_by``, and the projection re-derives the class of every failed
call whose event carries another (docs/failures.md)."""

__all__ = [
    "CLASSIFIER_VERSION", "reclassify_event", "test_run_attrs",
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


def test_run_attrs(ev: dict[str, Any]) -> dict[str, Any]:
    """The summary ``attrs`` of a successful test run's event (``212 tests passed``), or {}."""
    summary = summarize(output_text((ev.get("content") or {}).get("tool_output")) or "")
    return flat_summary(summary) if summary is not None and summary.get("kind") == "tests" else {}


def reclassify_event(ev: dict[str, Any]) -> dict[str, Any] | None:
    """What today's classifier says of a stored event classified by another version:
    ``{"class", "exit_code", "attrs"}`` for a failed call (attrs to merge, with
    ``reclassified_from`` when the class changed), ``{"attrs": {"calls": …}}`` for a
    batch of outcomes, None for anything else. Hints come from structured fields only
    (``attrs.interrupted``, a denied or cancelled status), never from the stored class,
    which an older classifier may have read from a word in the output."""
    attrs = ev.get("attrs") or {}
    if ev.get("kind") == "tool_batch_finished":
        return _reclassify_batch(ev)
    if ev.get("kind") != "tool_call_failed" or not ev.get("tool"):
        return None
    outcome = ev.get("outcome") or {}
    content = ev.get("content") or {}
    if not isinstance(content.get("error"), str) and content.get("tool_output") is None:
        return None  # nothing to read again: the class stays
    verdict = classify_event(ev, "cancelled" if outcome.get("class") == "cancelled" else None)
    klass = str(verdict["class"])
    update: dict[str, Any] = {k: None for k in SUMMARY_ATTRS}
    update.update(summary_attrs(verdict))
    update["classified_by"] = CLASSIFIER_VERSION
    update["error_class"] = klass
    old = canonical(outcome.get("class") if isinstance(outcome.get("class"), str) else None)
    update["reclassified_from"] = old if old is not None and old != klass else attrs.get("reclassified_from")
    code = outcome.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = verdict.get("exit_code")
    if klass == old and code == outcome.get("exit_code") and all(
            attrs.get(k) == update[k] for k in SUMMARY_ATTRS):
        return None  # today's classifier says what the event says
    return {"class": klass, "exit_code": code, "attrs": update}


def _reclassify_batch(ev: dict[str, Any]) -> dict[str, Any] | None:
    import json

    attrs = ev.get("attrs") or {}
    errors = (ev.get("content") or {}).get("errors") or {}
    try:
        calls = json.loads(attrs.get("calls") or "[]")
    except ValueError:
        return None
    if not isinstance(calls, list):
        return None
    changed = False
    for item in calls:
        if not isinstance(item, dict) or item.get("status") in (None, "success"):
            continue
        err = errors.get(item.get("call_id")) if isinstance(errors, dict) else None
        probe = {"kind": "tool_call_failed", "tool": {"name": item.get("tool"), "category": item.get("category")},
                 "content": {"error": err} if isinstance(err, str) else {},
                 "outcome": {"status": item.get("status")}}
        klass = classify_event(probe)["class"]
        if klass != item.get("class"):
            item["class"] = klass
            changed = True
    if not changed:
        return None
    return {"attrs": {"classified_by": CLASSIFIER_VERSION,
                      "calls": json.dumps(calls, separators=(",", ":"), ensure_ascii=False)}}
