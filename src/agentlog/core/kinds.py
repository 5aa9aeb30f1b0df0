"""Closed vocabularies of the canonical event model.

Plain tuples (not enums) because the hook path imports this module and must
stay cheap; `agentlog.core.model` builds the typed view on top.
"""

from __future__ import annotations

EVENT_KINDS: tuple[str, ...] = (
    "session_started",
    "session_ended",
    "prompt_submitted",
    "tool_call_started",
    "tool_call_finished",
    "tool_call_failed",
    # The outcomes of one model reply's tool calls at once (Claude Code's
    # PostToolBatch): attrs.calls holds, per call, its id, tool, status, class
    # and exit code. The projection reads each as that call's end; a call
    # that already ended is not counted again (docs/agents.md).
    "tool_batch_finished",
    "permission_requested",
    "permission_denied",
    "notification",
    "agent_message",
    # Token usage of one model response, read from a transcript (import): attrs
    # model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens.
    "usage",
    "turn_stopped",
    "turn_failed",
    "subagent_started",
    "subagent_stopped",
    "task_created",
    "task_completed",
    "compaction_started",
    "compaction_finished",
    "config_changed",
    "cwd_changed",
    "file_changed",
    "worktree_created",
    "worktree_removed",
    "correction",
    "retraction",
    "capture_test",
    "unknown",
    # Written by the log itself when bytes were lost (torn tail after a crash,
    # a missing head file, an oversized or undecodable payload is *not* this:
    # those are `unknown` events that keep what could be read).
    "capture_gap",
    # A change to the memory (docs/memory.md), written to agentlog's own memory log:
    # provider_event_name says which (memory_created, memory_edited, …).
    "memory",
    # A transcript line no other imported event holds (bookkeeping records, an
    # assistant record holding only thinking, …), kept for its bytes in `raw`
    # (docs/import.md "Lossless"); the projection never reads it.
    "transcript_line",
    # Written by `agentlog purge` to its own log (`agentlog/purges`): who
    # removed the content of which frames, when, and by which selector.
    "purge",
    # One OpenTelemetry record an agent sent to `agentlog otel serve` (a log record,
    # a metric data point or a span): attrs.signal (logs, metrics, traces),
    # attrs.otel_event (api_request, tool_result, …) and the join keys the agent
    # sent (prompt_id, tool_use_id, request_id); docs/otel.md. The projection
    # does not read it; the query views `telemetry` and `usage` do.
    "telemetry",
)

PROVIDERS: tuple[str, ...] = ("claude_code", "codex", "cursor", "gemini_cli", "agentlog")

# The names `agentlog hook <agent>` accepts, mapped to provider ids.
AGENT_PROVIDERS: dict[str, str] = {
    "claude-code": "claude_code",
    "codex": "codex",
    "cursor": "cursor",
    "gemini-cli": "gemini_cli",
}

TOOL_CATEGORIES: tuple[str, ...] = (
    "shell",
    "file_read",
    "file_write",
    "file_edit",
    "search",
    "web",
    "mcp",
    "subagent",
    "plan",
    "notebook",
    "other",
)

OUTCOME_STATUSES: tuple[str, ...] = ("success", "failure", "denied", "cancelled", "unknown")

TOOL_FAILURE_CLASSES: tuple[str, ...] = (
    "test_failure",
    "build_error",
    "compile_error",
    "type_error",
    "lint_error",
    "syntax_error",
    "dependency_missing",
    "file_not_found",
    "string_mismatch",
    "edit_conflict",
    "permission_denied",
    "policy_denied",
    "network_error",
    "timeout",
    "interrupted",
    "cancelled",
    "merge_conflict",
    "git_error",
    "tool_usage_error",
    "nonzero_exit",
    "unknown",
)
"""Classes of a failed tool call (docs/failures.md; ``capture.failures`` assigns them)."""

FAILURE_CLASSES: tuple[str, ...] = TOOL_FAILURE_CLASSES + ("rate_limit", "turn_failed")
"""Every class an outcome may carry: a tool call's, or a turn's (the agent's own error type,
``rate_limit``…, ``turn_failed`` when it gives none)."""

CAPTURE_MODES: tuple[str, ...] = ("full", "metadata_only")

CAPTURE_TEST_PREFIX = "agentlog-capture-test-"
"""The session id of ``agentlog install``'s capture test (and so its log's name): such a
session is one synthetic ``capture_test`` event, never an agent's session; listings hide it
unless asked for everything (``--all``)."""

SCHEMA_VERSION = 1

# Corrections and retractions (operations/corrections.py): one log for all of
# them, provider ``agentlog``, session ``meta``; their closed vocabularies.
META_PROVIDER = "agentlog"
META_SESSION = "meta"
CORRECTION_TYPES: tuple[str, ...] = ("attempt_outcome", "attempt_note", "turn_objective")
OUTCOMES: tuple[str, ...] = ("succeeded", "failed", "abandoned", "superseded")
TARGET_TYPES: tuple[str, ...] = ("session", "event", "attempt")
REASONS: tuple[str, ...] = ("benchmark", "test", "duplicate", "mistaken_import", "privacy", "revoked", "other")
