"""What every queryable table and column means, with worked examples.

One source for ``agentlog schema [TABLE]`` and ``docs/schema.md``
(``python -m agentlog.query.catalog > docs/schema.md``; a test fails when the
file drifts, and another runs every example against a real store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agentlog.query.telemetry import COLUMNS as TELEMETRY_COLUMNS, LATENCY_COLUMNS


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Example:
    question: str
    sql: str


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    examples: tuple[Example, ...]


_EVENT_COLUMNS: Final = (
    ("event_id", "the event's id (UUIDv7, minted at capture)"),
    ("schema_version", "version of the canonical event format"),
    ("kind", "what happened: prompt_submitted, tool_call_started, tool_call_finished, tool_call_failed, … (docs/event-model.md)"),
    ("provider", "the agent: claude_code, codex, cursor, gemini_cli (agentlog for its own records)"),
    ("provider_event_name", "the agent's own name for the hook event (PostToolUse, …)"),
    ("observed_at", "when the event happened (UTC, µs)"),
    ("captured_at", "when agentlog wrote it (UTC, µs)"),
    ("capture_mode", "full, or metadata_only (no content or raw kept)"),
    ("agentlog_version", "the agentlog that captured it"),
    ("provider_version", "the agent's version, when it says"),
    ("provider_session_id", "the agent's session id"),
    ("provider_turn_id", "the agent's turn id, when it has one"),
    ("agent_id", "subagent id (null for the main agent)"),
    ("agent_type", "subagent type"),
    ("model", "the model, when the payload names it"),
    ("tool_name", "the tool called (Bash, Edit, …)"),
    ("tool_category", "TOOL_CATEGORIES"),
    ("tool_call_id", "the agent's id pairing a call with its result"),
    ("paths", "files the event touches (list)"),
    ("outcome_status", "OUTCOME_STATUSES"),
    ("outcome_class", "why a call failed (e.g. nonzero_exit), null on success"),
    ("exit_code", "a shell command's exit code"),
    ("duration_ms", "how long the call took, when known"),
    ("project_root", "the project's root directory"),
    ("project_name", "the project's name"),
    ("project_remote", "the git remote"),
    ("project_branch", "the git branch at capture"),
    ("project_head", "the git HEAD at capture"),
    ("attrs", "extra facts as JSON (redactions, reconstructed, unrecognised, …)"),
    ("text", "the prompt of a prompt_submitted event, the note of a correction or retraction (else null; also in event)"),
    ("event", "the whole canonical event, exactly the JSON bytes its log frame holds"),
    ("log_provider", "the session log it came from: provider directory"),
    ("log_key", "the session log it came from: file key"),
    ("seq", "the frame's position in its log (0, 1, …)"),
    ("frame_hash", "SHA-256 of the frame (the chain's link)"),
    ("log_offset", "logical byte offset of the frame in its session's chain"),
    ("observed_date", "the UTC day of observed_at (the table's partition)"),
    ("content", "the event's content as JSON (command, output, file text, prompt, …)"),
    ("raw", "the agent's payload as received, after redaction, as JSON"),
    ("machine", "MACHINE"),
    ("host", "HOST"),
)


def _events_table() -> Table:
    from agentlog.store.schema import EVENTS_SCHEMA

    from typing import get_args

    from agentlog.core import model

    types = {f.name: str(f.type) for f in EVENTS_SCHEMA}
    types.update(content="json", raw="json", machine="string", host="string")
    filled = {
        "MACHINE": _COMMON["machine"], "HOST": _COMMON["host"],
        "TOOL_CATEGORIES": "the tool's kind: " + ", ".join(get_args(model.ToolCategory)),
        "OUTCOME_STATUSES": "how the call ended: " + ", ".join(get_args(model.OutcomeStatus)),
    }
    return Table(
        name="events",
        description="One row per recorded event, in every session, checked against its log frame as it was ingested.",
        columns=tuple(Column(n, types[n], filled.get(d, d)) for n, d in _EVENT_COLUMNS),
        examples=(
            Example("How many events of each kind?",
                    "select kind, count(*) as n from events group by kind order by n desc"),
            Example("Which tools failed most?",
                    "select tool_name, count(*) as failures from events where kind = 'tool_call_failed' "
                    "group by tool_name order by failures desc"),
            Example("The last shell commands and their exit codes",
                    "select observed_at, json_extract_string(content, '$.command') as command, exit_code "
                    "from events where tool_category = 'shell' and kind in ('tool_call_finished', 'tool_call_failed') "
                    "order by observed_at desc limit 10"),
            Example("Files touched per session",
                    "select provider_session_id, count(distinct p) as files "
                    "from (select provider_session_id, unnest(paths) as p from events) group by 1 order by 2 desc"),
        ),
    )


# Column descriptions shared by several projection tables.
_COMMON: Final = {
    "session_id": "the session (derived id; `ses_` + id in the CLI)",
    "provider": "the agent: claude_code, codex, cursor, gemini_cli",
    "project_id": "the project (derived from the git remote, else the root directory)",
    "project_name": "the project's name",
    "turn_id": "the turn (derived id)",
    "evidence": "event ids that justify the row (list; `agentlog show ID` lists them)",
    "confidence": "how sure the rule is: a fixed palette (0.9 / 0.7 / 0.6 / 0.5 / 0.4; 1.0 for what a person wrote)",
    "retracted": "a person retracted it (`agentlog retract`); AttemptQL hides these rows unless INCLUDING RETRACTED",
    "algorithm_version": "the projection rule's version (agentlog-tier1-v2)",
    "machine": "in a data root made by `agentlog vault admin pull`: the vault's id of the machine that recorded it "
               "(null for what this machine recorded; docs/vault.md)",
    "host": "that machine's host name, as it enrolled",
}

# Projection tables: description, column → meaning, examples. Column names and
# types come from the engine itself (``_projection_table``), so a column the
# views gain without a description here fails a test.
_PROJECTION: Final[dict[str, tuple[str, dict[str, str], tuple[Example, ...]]]] = {
    "usage": (
        "One row per model response imported from a transcript (`agentlog import`): its final token counts and "
        "their cost (a response imported twice, e.g. while it was being written, counts once: the last).",
        {
            "event_id": "the usage event",
            "provider_session_id": "the agent's session id",
            "agent_id": "subagent id (null for the main agent)",
            "project_root": "the project's root directory",
            "observed_at": "when the response was written (UTC)",
            "model": "the model that answered",
            "message_id": "the provider's id of the response",
            "input_tokens": "input tokens not read from a cache",
            "output_tokens": "output tokens (reasoning included)",
            "cache_read_tokens": "input tokens read from the prompt cache",
            "cache_write_tokens": "input tokens written to the prompt cache",
            "total_tokens": "the four counts summed",
            "cost_usd": "cost in US dollars: what the agent's telemetry reported, else from the price table "
                        "(null: neither)",
            "price_model": "the price-table entry matched",
            "price_as_of": "the date of the price table (the shipped one, or prices.toml's as_of)",
            "source": "where the counts come from: telemetry (the agent's API-request records) or transcript",
            "cost_source": "where cost_usd comes from: telemetry or price_table",
        },
        (
            Example("Cost per day", "select cast(observed_at as date) as day, round(sum(cost_usd), 2) as usd "
                                    "from usage group by 1 order by 1"),
            Example("The most expensive sessions", "select provider_session_id, round(sum(cost_usd), 2) as usd, "
                    "sum(total_tokens) as tokens from usage group by 1 order by usd desc nulls last limit 10"),
        ),
    ),
    "telemetry": (
        "One row per OpenTelemetry record an agent sent (`agentlog otel serve`), attached to its session, turn and "
        "tool call by the exact keys the agent sent (tool_use_id, prompt id) where present, else by time; "
        "joined_by says which.",
        TELEMETRY_COLUMNS,
        (
            Example("How were the records joined?", "select count(*) as records, "
                    "count(*) filter (where joined_by = 'tool_use_id') as by_tool_use_id, "
                    "count(*) filter (where joined_by = 'prompt_id') as by_prompt_id, "
                    "count(*) filter (where joined_by = 'time') as by_time from telemetry"),
            Example("API errors and rejected tool calls", "select count(*) filter (where record = 'api_error') as "
                    "api_errors, count(*) filter (where decision = 'reject') as rejected_tools from telemetry"),
        ),
    ),
    "turn_latency": (
        "One row per turn: where its time went — the model (the agent's telemetry), tools, waiting for permission, "
        "waiting for the user.",
        LATENCY_COLUMNS,
        (
            Example("Where did the time go?", "select sum(wall_ms) as wall, sum(model_ms) as model, "
                    "sum(tool_ms) as tools, sum(permission_ms) as permission, sum(user_wait_ms) as user_wait "
                    "from turn_latency"),
        ),
    ),
    "sessions": (
        "One row per agent session: when it ran, how much was seen (coverage), whether it is still live.",
        {
            "provider_session_id": "the agent's own session id",
            "project_root": "the project's root directory",
            "state": "open or closed (attemptdb's column; see liveness)",
            "liveness": "at the projection's reference time: closed (ended), open (active in the last 30 min, 12 h while "
                        "waiting on a person), stale",
            "started_at": "first session start, else first event",
            "ended_at": "when the session ended (null if not seen)",
            "end_reason": "the agent's reason for ending, when it says",
            "start_source": "how it started (startup, resume, clear, …)",
            "event_count": "events of the session",
            "turn_count": "turns (prompts a person typed, plus turn 0 for activity before the first)",
            "prompt_count": "prompts a person typed (injected prompts excluded)",
            "tool_call_count": "tool calls (paired starts and ends count once)",
            "failure_count": "tool calls that failed or were denied, plus failed turns",
            "agents": "agent ids seen: the main agent and subagents (derived ids)",
            "coverage": "full (start, end, prompts and tools seen), partial, minimal or unknown",
            "first_event_id": "first event",
            "last_event_id": "last event",
            "last_event_at": "time of the last event",
            "last_activity_at": "time of the last event other than the session's end",
            "last_activity_event_id": "that event",
            "start_event_id": "the session start event",
            "end_event_id": "the session end event",
            "in_flight_calls": "tool calls started and never seen to end",
            "unpaired_tool_starts": "same as in_flight_calls (attemptdb's statistic)",
            "unpaired_tool_finishes": "tool call ends with no start found",
            "fifo_pairings": "calls paired first-in-first-out (no call id)",
        },
        (Example("Sessions per agent and how much of each was seen",
                 "select provider, coverage, count(*) as sessions from sessions group by all order by sessions desc"),
         Example("The ten longest sessions",
                 "select session_id, provider, project_name, started_at, last_event_at - started_at as took "
                 "from sessions order by took desc limit 10"),
         Example("Sessions per machine (a pulled data root; null: recorded here)",
                 "select machine, host, count(*) as sessions from sessions group by all order by sessions desc")),
    ),
    "byte_checks": (
        "In a data root made by `agentlog vault admin pull`: the frames the pull found wrong — bytes that do not "
        "match their hash, index or chain (the pull stops that chain there) — and notes (a frame purged on the "
        "machine before shipping). Empty elsewhere.",
        {
            "log_provider": "the pulled session log: provider directory",
            "log_key": "the pulled session log: file key",
            "seq": "the frame's position in its log",
            "problem": "what was wrong, as the pull reported it",
            "failed": "the frame failed the byte check: the pull stopped its chain at the batch holding it, so neither "
                      "it nor the frames after it are in the store; false: a note",
            "session_id": "the session whose log it is (null when none of its frames was pulled)",
        },
        (Example("How many frames failed the byte check, on how many machines",
                 "select count(*) filter (where failed) as failed, count(distinct machine) as machines "
                 "from byte_checks"),),
    ),
    "turns": (
        "One row per turn: a prompt a person typed and everything until the next one.",
        {
            "turn_index": "1, 2, … in the session; 0 for activity before the first prompt",
            "objective": "the prompt's text (null under metadata_only; a correction can replace it)",
            "started_at": "the prompt's time",
            "ended_at": "the stop (or the next prompt / session end that cut it)",
            "status": "completed, failed, unknown (cut without a stop) or in_progress",
            "failure_class": "why a failed turn failed",
            "prompt_event_id": "the prompt",
            "stop_event_id": "the stop",
            "tool_call_ids": "its tool calls",
            "tool_call_count": "how many",
            "attempt_ids": "its attempts, in order",
            "prompt_chars": "the prompt's length",
            "first_event_id": "its first event",
            "last_event_id": "its last event",
            "corrected_by": "the correction event that changed the objective",
            "corrected_at": "when",
            "inferred_objective": "the objective before the first correction",
        },
        (Example("Turns per status", "select status, count(*) as turns from turns group by status order by turns desc"),
         Example("Turns with the most tool calls",
                 "select turn_id, provider, tool_call_count, left(objective, 60) as objective from turns "
                 "order by tool_call_count desc limit 5")),
    ),
    "tool_calls": (
        "One row per tool call: its start and its end paired, with outcome, duration and paths.",
        {
            "attempt_id": "the attempt it belongs to",
            "tool_call_id": "the call (derived from the agent's call id, else its position; `tc_` in the CLI)",
            "agent_id": "the agent that called it (main agent or subagent; derived id)",
            "parent_agent_id": "for a subagent's call, the session's main agent",
            "provider_agent_id": "the agent's own subagent id",
            "tool_name": "the tool (Bash, Edit, apply_patch, …)",
            "tool_category": "shell, file_read, file_write, file_edit, search, web, mcp, subagent, plan, notebook, other",
            "provider_call_id": "the agent's call id",
            "started_at": "start (null for an end seen without its start)",
            "finished_at": "end (null while in flight)",
            "duration_ms": "reported duration, else end − start",
            "outcome_status": "success, failure, denied, cancelled, unknown (null while in flight)",
            "outcome_class": "why it failed: test_failure, compile_error, dependency_missing, string_mismatch, … "
                             "(docs/failures.md)",
            "exit_code": "a shell command's exit code",
            "path_relative": "its first path",
            "paths": "paths of the start and the end",
            "command_category": "a shell command's kind (test, build, git, …)",
            "git_subcommand": "commit, push, … for git commands",
            "lines_added": "lines an edit added",
            "lines_removed": "lines an edit removed",
            "start_event_id": "the start event",
            "end_event_id": "the end event",
            "pairing": "how start and end were paired: call_id, fifo, start_only, end_only",
            "failure_evidence": "the signal the class came from (`pytest summary`, `exit code 127 …`, `tool message`)",
            "result_summary": "one line: `3 of 212 tests failed: test_x, …`, `tsc: 3 errors, first at src/a.ts:3`",
            "test_runner": "the test runner whose summary was read (pytest, jest, go test, cargo test, …)",
            "tests_passed": "tests the runner reported passed",
            "tests_failed": "tests the runner reported failed",
            "tests_skipped": "tests the runner reported skipped",
            "tests_errors": "tests the runner reported as errors (collection, setup)",
            "failing_tests": "the failing test ids the runner printed, one a line (at most 20)",
            "checker": "the compiler, type checker or linter whose output was read (tsc, mypy, rustc, eslint, …)",
            "check_errors": "the errors it reported",
            "first_error": "its first error's `path:line`",
            "reclassified_from": "the class the call's event was recorded with, when today's classifier says otherwise",
            "fixed_by": "a later call of the same command that succeeded (the retry that fixed this one)",
        },
        (Example("Failure rate by tool",
                 "select tool_name, count(*) as calls, count(*) filter (where outcome_status = 'failure') as failed "
                 "from tool_calls group by tool_name order by calls desc"),
         Example("Failed test runs and what failed",
                 "select tool_call_id, result_summary, fixed_by from tool_calls "
                 "where outcome_class = 'test_failure' order by finished_at desc limit 5"),
         Example("Slowest shell commands",
                 "select tool_call_id, duration_ms, command_category from tool_calls where tool_category = 'shell' "
                 "and duration_ms is not null order by duration_ms desc limit 5")),
    ),
    "attempts": (
        "One row per attempt: one try within a turn, split at each failing change or shell command; "
        "a failed try retried on the same files is superseded.",
        {
            "attempt_id": "the attempt (derived from session, turn and position; `att_` in the CLI)",
            "turn_index": "its turn's index",
            "attempt_index": "0, 1, … within the turn",
            "objective": "the turn's prompt",
            "approach": "what it did, without content: `edit src/a.rs · shell ×2 · read`",
            "started_at": "the prompt for the first attempt of a turn, else its first call",
            "ended_at": "the failing call's end, else the turn's end",
            "outcome": "succeeded, failed, superseded (failed, then retried), abandoned, in_progress, unknown",
            "failure_class": "why it failed (kept when superseded)",
            "superseded_by": "the attempt that retried it",
            "supersedes": "the failed attempt this one retried",
            "tool_call_ids": "its tool calls",
            "tool_call_count": "how many",
            "paths": "files it touched, in first-touch order",
            "commit_shas": "commits it made",
            "failing_event_id": "the event of the call that failed it",
            "first_action_event_id": "its first call's first event",
            "work_unit_id": "the work unit it belongs to",
            "corrected_by": "the correction event that changed it",
            "corrected_at": "when",
            "correction_type": "attempt_outcome or attempt_note",
            "inferred_outcome": "the outcome before the first correction",
            "inferred_failure_class": "the failure class before the first correction",
            "note": "the correction's note",
        },
        (Example("Outcomes of all attempts",
                 "select outcome, count(*) as attempts from attempts group by outcome order by attempts desc"),
         Example("Failed attempts that were never retried",
                 "select attempt_id, failure_class, approach from attempts where outcome = 'failed' "
                 "order by started_at desc limit 10"),
         Example("What replaced each superseded attempt",
                 "select a.attempt_id, a.failure_class, b.approach as retry, b.outcome as retry_outcome "
                 "from attempts a join attempts b on b.attempt_id = a.superseded_by limit 10")),
    ),
    "edges": (
        "Causal and structural links between events, turns, tool calls, attempts, sessions and work units, "
        "each citing its evidence.",
        {
            "session_id": "the session it belongs to (null for links across sessions)",
            "edge_kind": "parent_of, triggered, evidence_for, superseded, caused, handed_off",
            "from_type": "event, session, turn, tool_call, attempt, work_unit",
            "from_id": "source id",
            "to_type": "target type",
            "to_id": "target id",
            "edge_source": "projection",
        },
        (Example("Edges by kind", "select edge_kind, count(*) as edges from edges group by 1 order by 2 desc"),
         Example("What caused each retry",
                 "select from_id as failing_event, to_id as retry_event from edges where edge_kind = 'caused' limit 10")),
    ),
    "signals": (
        "Moments an agent waited on a person: permission requests and needs-input notifications, "
        "and what answered them.",
        {
            "signal_id": "the signal (derived id)",
            "event_id": "the request or notification",
            "raised_at": "when",
            "kind": "permission_requested or notification",
            "signal_type": "permission_request, permission_prompt, idle_prompt, agent_needs_input, elicitation_dialog",
            "cleared_at": "when the session moved on",
            "cleared_by": "the event that answered it",
            "pending": "still waiting at the projection's reference time",
        },
        (Example("Requests still waiting", "select count(*) as pending from signals where pending"),
         Example("How long people took to answer",
                 "select count(*) as answered, median(cleared_at - raised_at) as median_wait from signals "
                 "where not pending")),
    ),
    "commits": (
        "Git commits the agents made, linked to the head they produced (no command output is read).",
        {
            "commit_id": "the commit row (derived id)",
            "attempt_id": "the attempt that made it",
            "tool_call_id": "the git commit call",
            "sha": "the new head (null when it could not be linked)",
            "previous_sha": "the head before",
            "branch": "the branch",
            "committed_at": "when",
            "linkage": "end_event (the call's end saw the new head), next_head (a later event did), unresolved",
        },
        (Example("Commits, and how many were linked to the head they made",
                 "select count(*) as commits, count(sha) as linked from commits"),),
    ),
    "handoffs": (
        "Work passed between agents of different providers on one project.",
        {
            "handoff_id": "the handoff (derived id)",
            "from_session": "the session that went quiet",
            "to_session": "the session that took over",
            "from_provider": "its agent",
            "to_provider": "the next agent",
            "handoff_at": "when the receiving session started",
            "gap_ms": "milliseconds between them",
            "shared_paths": "files both touched",
        },
        (Example("Handoffs, and how many shared files",
                 "select count(*) as handoffs, count(*) filter (where len(shared_paths) > 0) as with_shared_files "
                 "from handoffs"),),
    ),
    "work_units": (
        "Pieces of work: connected turns (same files, back-to-back turns, handoffs) of one project, with phase "
        "and status.",
        {
            "work_unit_id": "the unit (derived from the project and its first turn's opening event)",
            "version": "1",
            "objective_event_id": "the prompt that set the objective",
            "objective": "the earliest prompt's text",
            "phase": "blocked, debug, deliver, verify, plan, review, implement or explore (from its last five calls)",
            "phase_reason": "the rule that set the phase",
            "status": "open, completed, abandoned or unknown (at the reference time)",
            "status_reason": "why",
            "started_at": "its first turn's start",
            "updated_at": "its last activity",
            "ended_at": "when completed or abandoned",
            "sessions": "its sessions",
            "session_count": "how many",
            "turns": "its turns",
            "turn_count": "how many",
            "attempts": "its attempts",
            "attempt_count": "how many",
            "failed_attempt_count": "attempts failed or superseded",
            "paths": "files it changed or ran commands on",
            "commit_shas": "commits made in it",
            "actors": "agents that worked on it",
            "last_attempt": "its latest attempt",
            "blocking_signal": "the pending request blocking it",
        },
        (Example("Units by phase and status", "select phase, status, count(*) as units from work_units group by all"),),
    ),
    "decisions": (
        "Changes of approach (a failed attempt retried differently) and human interventions (a denied "
        "permission followed by another tool).",
        {
            "decision_id": "the decision (derived id)",
            "kind": "approach_change or human_intervention",
            "work_unit_id": "its work unit",
            "selected": "the attempt chosen",
            "alternatives": "the attempts given up",
            "rationale": "why, from failure classes, tools and paths (no content)",
            "rationale_source": "derived",
            "decided_at": "when",
        },
        (Example("Decisions by kind",
                 "select count(*) filter (where kind = 'approach_change') as approach_changes, "
                 "count(*) filter (where kind = 'human_intervention') as interventions from decisions"),),
    ),
    "conflicts": (
        "Two open work units, with no session in common, editing the same files within two hours.",
        {
            "conflict_id": "the conflict (derived from the two units)",
            "first_work_unit": "the unit that started first",
            "second_work_unit": "the other",
            "first_started_at": "its start",
            "second_started_at": "the other's start",
            "started_at": "the later start",
            "updated_at": "the later activity",
            "paths": "files both edited",
            "path_count": "how many",
            "overlapping": "the edit windows overlap",
            "first_committed": "the first unit committed after its last edit of them",
            "second_committed": "the second did",
            "first_lines_added": "lines the first added to them",
            "first_lines_removed": "lines the first removed",
            "second_lines_added": "lines the second added",
            "second_lines_removed": "lines the second removed",
        },
        (Example("Open conflicts", "select count(*) as conflicts from conflicts"),),
    ),
    "corrections": (
        "What people corrected (`agentlog correct`) and whether it applied.",
        {
            "event_id": "the correction event",
            "corrected_at": "when",
            "correction_type": "attempt_outcome, attempt_note or turn_objective",
            "target_type": "attempt or turn",
            "target": "the corrected id",
            "outcome": "the outcome set",
            "failure_class": "the class set",
            "note": "the note",
            "note_chars": "its length",
            "status": "applied, target_not_found, target_retracted or invalid",
        },
        (Example("Corrections that applied and that did not",
                 "select count(*) filter (where status = 'applied') as applied, "
                 "count(*) filter (where status <> 'applied') as not_applied from corrections"),),
    ),
    "retractions": (
        "What people retracted (`agentlog retract`): sessions, events or attempts hidden from answers.",
        {
            "event_id": "the retraction event",
            "retracted_at": "when",
            "target_type": "session, event or attempt",
            "target": "the retracted id",
            "reason": "benchmark, test, duplicate, mistaken_import, privacy, revoked or other",
            "note": "the note",
            "note_chars": "its length",
            "matched": "the target exists",
            "retracted_events": "events it removed from answers",
        },
        (Example("How many retractions", "select count(*) as retractions from retractions"),),
    ),
}


def _projection_table(name: str, columns: list[tuple[str, str]]) -> Table:
    description, cols, examples = _PROJECTION[name]
    described = tuple(Column(n, t, cols.get(n) or _COMMON.get(n, "")) for n, t in columns)
    return Table(name=name, description=description, columns=described, examples=examples)


def _view_columns() -> dict[str, list[tuple[str, str]]]:
    """Every projection view's (column, type), asked of an engine over an empty data root."""
    import tempfile

    from agentlog.query.engine import Engine

    with tempfile.TemporaryDirectory() as empty, Engine(empty) as engine:
        return {name: [(r[0], str(r[1])) for r in engine.run(f"DESCRIBE {name}").rows] for name in _PROJECTION}


def tables() -> list[Table]:
    views = _view_columns()
    return [_events_table()] + [_projection_table(n, views[n]) for n in _PROJECTION]


def render_markdown() -> str:
    out = ["# Queryable tables", "",
           "Generated by `python -m agentlog.query.catalog` (also `agentlog schema`); a test fails when this file",
           "drifts, and every example below is run against a real store by the tests.", ""]
    for t in tables():
        out += [f"## `{t.name}`", "", t.description, "", "| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.type} | {c.description} |" for c in t.columns]
        out += ["", "Examples:", ""]
        for ex in t.examples:
            out += [f"- {ex.question}", "", "  ```sql", f"  {ex.sql}", "  ```", ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
