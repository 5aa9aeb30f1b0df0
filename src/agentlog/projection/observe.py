"""Observations: the few facts of an event that the projection reads.

An observation is what is left of a stored event once everything the
projection does not use is dropped: times, ids, the tool and its outcome,
paths, the git head, a handful of ``attrs``, and — for prompts and the
notes of corrections and retractions only — text. Tool input and output
are never read.

Ordering: the projection is a pure function of the event *set*. Events are
sorted by ``(observed_at, captured_at, event_id)`` — observed time first so
that history imported late interleaves where it happened — and a duplicate
``event_id`` is kept once (the one that sorts first), so any delivery
order, with any duplicates, projects the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Iterable, Iterator

import orjson

# Columns of the store's ``events`` table the projection reads.
COLUMNS: Final = (
    "event_id", "kind", "provider", "observed_at", "captured_at", "provider_session_id",
    "provider_turn_id", "agent_id", "agent_type", "tool_name", "tool_category", "tool_call_id",
    "paths", "outcome_status", "outcome_class", "exit_code", "duration_ms", "project_root",
    "project_name", "project_remote", "project_branch", "project_head", "attrs",
)

# ``attrs`` keys the projection reads (everything else is left in the store).
ATTR_KEYS: Final = frozenset({
    "prompt_kind", "prompt_chars", "command_category", "git_subcommand", "lines_added",
    "lines_removed", "notification_type", "type", "matcher", "source", "reason",
    "correction_type", "target", "target_type", "outcome", "failure_class", "note_chars",
    "target_session", "target_provider", "interrupted", "status", "calls", "input_key",
    "failure_evidence", "result_summary", "test_runner", "tests_passed", "tests_failed", "tests_skipped",
    "tests_errors", "failing_tests", "checker", "check_errors", "first_error", "reclassified_from", "command_key",
})

# Kinds whose text (prompt or note) the projection keeps.
TEXT_KINDS: Final = frozenset({"prompt_submitted", "correction", "retraction"})
META_KINDS: Final = frozenset({"correction", "retraction"})
# Kinds the projection never reads: not agent activity (the memory's own events, the
# transcript lines an import keeps for their bytes alone, the agents' OpenTelemetry records,
# which the query views join to turns and tool calls).
IGNORED_KINDS: Final = frozenset({"memory", "transcript_line", "telemetry"})


@dataclass(slots=True)
class Obs:
    """One event, reduced to what the projection reads."""

    event_id: str
    kind: str
    provider: str
    observed_at: int
    captured_at: int
    provider_session_id: str | None = None
    provider_turn_id: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    tool_name: str | None = None
    tool_category: str | None = None
    call_id: str | None = None
    paths: tuple[str, ...] = ()
    status: str | None = None
    failure_class: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    project_root: str | None = None
    project_name: str | None = None
    project_remote: str | None = None
    branch: str | None = None
    head: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    """The prompt (``prompt_submitted``) or the note (corrections, retractions)."""

    @property
    def session_key(self) -> str:
        return session_key(self.provider, self.provider_session_id)

    def sort_key(self) -> tuple[int, int, str]:
        return (self.observed_at, self.captured_at, self.event_id)


def session_key(provider: str, provider_session_id: str | None) -> str:
    """The projection's key of a session: provider and the provider's session id."""
    return provider + "\x1f" + (provider_session_id or "unknown")


def _attrs(text: str | None) -> dict[str, Any]:
    """The event's attrs (whole: filtering to :data:`ATTR_KEYS` costs more than it saves;
    observations live only while their shard is projected)."""
    if not text:
        return {}
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return d if isinstance(d, dict) else {}


def from_arrow(table: Any) -> Iterator[Obs]:
    """Observations of an Arrow table with :data:`COLUMNS` and ``text`` (``observed_at``/
    ``captured_at`` as timestamps or integers)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    cols: dict[str, list[Any]] = {}
    for name in COLUMNS:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols[name] = col.to_pylist()
    texts = table.column("text").to_pylist()
    kinds = cols["kind"]
    for i in range(table.num_rows):
        kind = kinds[i]
        text = texts[i] if kind in TEXT_KINDS else None
        yield Obs(
            cols["event_id"][i], kind, cols["provider"][i], cols["observed_at"][i],
            cols["captured_at"][i] or 0, cols["provider_session_id"][i], cols["provider_turn_id"][i],
            cols["agent_id"][i], cols["agent_type"][i], cols["tool_name"][i], cols["tool_category"][i],
            cols["tool_call_id"][i], tuple(cols["paths"][i] or ()), cols["outcome_status"][i],
            cols["outcome_class"][i], cols["exit_code"][i], cols["duration_ms"][i], cols["project_root"][i],
            cols["project_name"][i], cols["project_remote"][i], cols["project_branch"][i],
            cols["project_head"][i], _attrs(cols["attrs"][i]), text,
        )


def from_wire(events: Iterable[dict[str, Any]]) -> Iterator[Obs]:
    """Observations of wire-form events (dicts as the hook writes them)."""
    for ev in events:
        tool = ev.get("tool") or {}
        outcome = ev.get("outcome") or {}
        project = ev.get("project") or {}
        agent = ev.get("agent") or {}
        kind = ev["kind"]
        text = None
        if kind in TEXT_KINDS:
            content = ev.get("content")
            if isinstance(content, dict):
                v = content.get("prompt" if kind == "prompt_submitted" else "note")
                text = v if isinstance(v, str) else None
        attrs = ev.get("attrs") or {}
        yield Obs(
            ev["event_id"], kind, ev["provider"], ev["observed_at"], ev.get("captured_at", 0),
            ev.get("provider_session_id"), ev.get("provider_turn_id"), agent.get("agent_id"),
            agent.get("agent_type"), tool.get("name"), tool.get("category"), tool.get("call_id"),
            tuple(ev.get("paths") or ()), outcome.get("status"), outcome.get("class"),
            outcome.get("exit_code"), ev.get("duration_ms"), project.get("root"), project.get("name"),
            project.get("remote"), project.get("branch"), project.get("head"),
            {k: v for k, v in attrs.items() if k in ATTR_KEYS}, text,
        )


BATCH_KIND: Final = "tool_batch_finished"


def batch_ends(o: Obs) -> list[Obs]:
    """A ``tool_batch_finished`` event as one end observation per call it lists
    (each keeps the batch's event id: that event is their evidence)."""
    out: list[Obs] = []
    calls = o.attrs.get("calls")
    if isinstance(calls, str):
        try:
            calls = orjson.loads(calls)
        except orjson.JSONDecodeError:
            calls = None
    for item in calls if isinstance(calls, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
            continue
        status = item.get("status") if isinstance(item.get("status"), str) else "success"
        code = item.get("exit_code")
        out.append(Obs(
            o.event_id, "tool_call_finished" if status == "success" else "tool_call_failed", o.provider,
            o.observed_at, o.captured_at, o.provider_session_id, o.provider_turn_id, o.agent_id, o.agent_type,
            item.get("tool") if isinstance(item.get("tool"), str) else None,
            item.get("category") if isinstance(item.get("category"), str) else None, item["call_id"], (), status,
            item.get("class") if isinstance(item.get("class"), str) else None,
            code if isinstance(code, int) and not isinstance(code, bool) else None, None,
            o.project_root, o.project_name, o.project_remote, o.branch, o.head, {"via": "batch"},
        ))
    return out


def ordered(observations: Iterable[Obs]) -> list[Obs]:
    """Sorted by (observed, captured, event id), each event id once; a batch of
    tool outcomes becomes one end observation per call (:func:`batch_ends`)."""
    out = sorted(observations, key=Obs.sort_key)
    seen: set[str] = set()
    unique: list[Obs] = []
    for o in out:
        if o.event_id not in seen:
            seen.add(o.event_id)
            if o.kind == BATCH_KIND:
                unique.extend(batch_ends(o))
            else:
                unique.append(o)
    return unique
