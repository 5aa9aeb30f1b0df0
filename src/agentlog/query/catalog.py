"""What every queryable table and column means, with worked examples.

One source for ``agentlog schema [TABLE]`` and ``docs/schema.md``
(``python -m agentlog.query.catalog > docs/schema.md``; a test fails when the
file drifts, and another runs every example against a real store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


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
)


def _events_table() -> Table:
    from ..store.schema import EVENTS_SCHEMA

    from typing import get_args

    from .. import model

    types = {f.name: str(f.type) for f in EVENTS_SCHEMA}
    types.update(content="json", raw="json")
    filled = {
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


def tables() -> list[Table]:
    return [_events_table()]


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
