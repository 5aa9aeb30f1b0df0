"""Gemini CLI chat-recording parser: the real JSONL fixture, last-write-wins and
``$rewindTo``, the older single-document form, parity with the hook adapter, garbage."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.core import fastjson
from agentlog.capture.adapters import gemini_cli as hook
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers.base import NOT_JSON, SourceLine, text_digest
from agentlog.importers.gemini_cli import GeminiCliParser, chat_document
from agentlog.core.model import Event

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURE = SHARED / "fixtures" / "gemini-cli" / "agent-sessions__stage0-gemini-jsonl_v040.jsonl"
needs_fixture = pytest.mark.skipif(not FIXTURE.is_file(), reason=missing(FIXTURE))


def parse(data: bytes, path: str = "chat.jsonl", hint: str | None = None) -> tuple[GeminiCliParser, list[dict[str, Any]]]:
    """Feed ``data`` line by line as the runner does, then finish; check every event strictly."""
    parser = GeminiCliParser(path, hint)
    events: list[dict[str, Any]] = []
    offset = 0
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            record: Any = fastjson.loads(raw.decode("utf-8"))
        except Exception:
            record = NOT_JSON
        events += parser.feed(SourceLine(path, lineno, offset, raw), record)
        offset += len(raw) + 1
    events += parser.finish()
    for ev in events:
        Event.from_wire(ev)
    # the usage events (one per final model message) are checked in test_usage_events_*;
    # the other tests look at the rest
    return parser, [e for e in events if e["kind"] != "usage"]


def jsonl(*records: Any) -> bytes:
    return b"\n".join(json.dumps(r).encode() for r in records) + b"\n"


def kinds(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["kind"] for e in events)


META = {"sessionId": "s-1", "projectHash": "ab" * 32, "startTime": "2026-01-02T03:04:05.000Z",
        "lastUpdated": "2026-01-02T03:04:05.000Z", "kind": "main"}


def user(mid: str, text: Any, ts: str = "2026-01-02T03:04:06.000Z") -> dict[str, Any]:
    return {"id": mid, "timestamp": ts, "type": "user", "content": text}


def gemini(mid: str, text: Any = "", calls: Any = None, ts: str = "2026-01-02T03:04:07.000Z",
           tokens: dict[str, int] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"id": mid, "timestamp": ts, "type": "gemini", "content": text, "thoughts": [],
                           "model": "gemini-2.5-pro",
                           "tokens": tokens or {"input": 10, "output": 2, "cached": 0, "total": 12}}
    if calls is not None:
        msg["toolCalls"] = calls
    return msg


def call(cid: str, name: str, args: dict[str, Any], status: str = "success", output: str | None = "ok",
         error: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"output": output} if error is None else {"error": error}
    return {"id": cid, "name": name, "args": args, "status": status, "timestamp": "2026-01-02T03:04:08.000Z",
            "result": [{"functionResponse": {"id": cid, "name": name, "response": response}}]}


# -- the real fixture -------------------------------------------------------------


@needs_fixture
def test_fixture_golden_counts() -> None:
    parser, events = parse(FIXTURE.read_bytes(), str(FIXTURE))
    assert kinds(events) == {"session_started": 1, "prompt_submitted": 1, "tool_call_started": 1,
                             "tool_call_finished": 1, "agent_message": 1}
    assert [e["attrs"]["source_line"] for e in events] == [1, 2, 4, 4, 5]
    assert {e["provider_session_id"] for e in events} == {"gemini_stage0_jsonl"}
    assert all(e["provider"] == "gemini_cli" and e["attrs"]["reconstructed_from"] == "gemini_cli_chat" for e in events)
    # raw only on the first event of each line
    assert [("raw" in e) for e in events] == [True, True, True, False, True]
    assert parser.stats.records == {"metadata": 1, "user": 1, "$set": 1, "gemini": 2}
    assert parser.stats.problem_count == 0 and not parser.stats.unknown and not parser.stats.unknown_fields

    start, prompt, started, finished, message = events
    assert start["observed_at"] == 1_777_498_762_319_000
    assert start["attrs"]["session_kind"] == "main" and "project" not in start
    assert prompt["content"]["prompt"] == "Say hello and list files."
    assert prompt["attrs"]["merge_key"].endswith(text_digest("Say hello and list files."))
    assert prompt["observed_at"] == 1_777_498_773_155_000
    # tool calls paired by id
    started_ids = {e["tool"]["call_id"] for e in events if e["kind"] == "tool_call_started"}
    ended_ids = {e["tool"]["call_id"] for e in events if e["kind"] in ("tool_call_finished", "tool_call_failed")}
    assert started_ids == ended_ids == {"run_shell_command_stage0"}
    for ev in (started, finished):
        assert ev["tool"] == {"name": "run_shell_command", "category": "shell", "call_id": "run_shell_command_stage0"}
        assert ev["content"]["command"] == "ls -F" and ev["agent"] == {"model": "gemini-3-flash-preview"}
        assert ev["observed_at"] == 1_777_498_775_364_000
    assert finished["outcome"] == {"status": "success"}
    assert finished["content"]["tool_output"] == "Output: AgentSessions/\nREADME.md\nProcess Group PGID: 12345"
    # g-assistant-1 has empty text and a tool call: no agent_message of its own
    assert message["content"]["message"] == "Hello! I listed the files." and message["attrs"]["message_chars"] == 26
    assert message["attrs"]["tokens_cached"] == 11502

    assert [u["message_id"] for u in parser.usage] == ["g-assistant-1", "g-assistant-2"]
    totals = {k: sum(u[k] for u in parser.usage) for k in ("input", "output", "cached", "thoughts", "tool", "total")}
    assert totals == {"input": 23924, "output": 228, "cached": 11502, "thoughts": 0, "tool": 0, "total": 24152}
    assert {u["model"] for u in parser.usage} == {"gemini-3-flash-preview"}
    assert parser.usage[0]["timestamp"] == 1_777_498_775_125_000


@needs_fixture
def test_fixture_event_ids_are_deterministic() -> None:
    _, first = parse(FIXTURE.read_bytes(), str(FIXTURE))
    _, second = parse(FIXTURE.read_bytes(), str(FIXTURE))
    assert [e["event_id"] for e in first] == [e["event_id"] for e in second]
    assert len({e["event_id"] for e in first}) == len(first)
    assert first == second


@needs_fixture
def test_fixture_through_the_runner(tmp_path: Path) -> None:
    from agentlog.importers.run import import_file
    from agentlog.importers.sources import AGENTS, make_parser

    parser = make_parser(AGENTS["gemini-cli"], str(FIXTURE))
    assert isinstance(parser, GeminiCliParser)
    report = import_file(str(tmp_path), parser, {}, dry_run=True)
    # 5 events, one usage event per model message (2) and the `$set` line kept (1)
    assert (report.events, report.sessions, report.problem_count) == (8, ["gemini_stage0_jsonl"], 0)
    assert report.kept_lines == 1


def test_records_without_time_take_the_last_time_read() -> None:
    parser = GeminiCliParser("t.jsonl")
    parser.base_time_us = 5_000_000
    before = parser.feed(SourceLine("t.jsonl", 1, 0, b"[]"), [])
    assert before[0]["observed_at"] == 5_000_000 and before[0]["attrs"]["time_estimated"] is True
    for i, rec in enumerate([META, {"id": "u1", "type": "user", "content": "hi"}, gemini("g1", "a"),
                             {"id": "g2", "type": "gemini", "content": "b"}], 2):
        parser.feed(SourceLine("t.jsonl", i, 0, json.dumps(rec).encode()), rec)
    events = [e for e in parser.finish() if e["kind"] != "usage"]
    start = 1_767_323_045_000_000  # 2026-01-02T03:04:05Z
    assert [(e["observed_at"], e["attrs"].get("time_estimated")) for e in events] == [
        (start, True), (start + 2_000_000, None), (start + 2_000_000, True)]
    assert [u["timestamp"] for u in parser.usage] == [start + 2_000_000, None]


# -- last write wins, $rewindTo ------------------------------------------------------


def test_repeated_id_last_write_wins_and_keeps_position() -> None:
    data = jsonl(META, user("u1", "first"), gemini("g1", "draft"), user("u2", "second"),
                 gemini("g1", "final", tokens={"input": 7, "output": 3, "cached": 1, "total": 10}))
    parser, events = parse(data)
    messages = [e for e in events if e["kind"] == "agent_message"]
    assert [m["content"]["message"] for m in messages] == ["final"]
    assert messages[0]["attrs"]["source_line"] == 5
    # g1 keeps its first position (after u1, before u2)
    assert [e["kind"] for e in events if e["kind"] != "transcript_line"] == [
        "session_started", "prompt_submitted", "agent_message", "prompt_submitted"]
    # the draft's line is kept all the same, on its own
    (draft,) = [e for e in events if e["kind"] == "transcript_line"]
    assert draft["attrs"]["source_line"] == 3 and '"draft"' in draft["raw"]["line"]
    assert [u["input"] for u in parser.usage] == [7]
    assert parser.stats.records["gemini"] == 2


def test_rewind_drops_the_message_and_everything_after() -> None:
    data = jsonl(META, user("u1", "keep me"), gemini("g1", "kept"), user("u2", "dropped prompt"),
                 gemini("g2", "dropped answer", [call("c1", "read_file", {"absolute_path": "/p/a.py"})]),
                 {"$rewindTo": "u2"}, user("u3", "retry"), gemini("g3", "new answer"))
    parser, events = parse(data)
    prompts = [e["content"]["prompt"] for e in events if e["kind"] == "prompt_submitted"]
    answers = [e["content"]["message"] for e in events if e["kind"] == "agent_message"]
    assert prompts == ["keep me", "retry"] and answers == ["kept", "new answer"]
    assert not any(e["kind"].startswith("tool_call") for e in events)
    assert [u["message_id"] for u in parser.usage] == ["g1", "g3"]
    assert parser.rewound == 2 and parser.stats.records["$rewindTo"] == 1
    # the lines dropped are kept, on their own
    assert [e["attrs"]["source_line"] for e in events if e["kind"] == "transcript_line"] == [4, 5]


# -- older single-document form -----------------------------------------------------


def test_legacy_document_parses_to_the_same_kinds() -> None:
    messages = [user("u1", [{"text": "fix "}, {"text": "it"}]),
                gemini("g1", "", [call("c1", "run_shell_command", {"command": "pytest"})]),
                gemini("g2", "done"), {"id": "i1", "timestamp": "2026-01-02T03:04:09Z", "type": "info",
                                       "content": "saved"}]
    doc = {**META, "directories": ["/nonexistent/gemini-proj"], "messages": messages}
    data = json.dumps(doc, indent=2).encode()
    found = chat_document(data)
    assert found == doc
    parser = GeminiCliParser("session-2026-01-02T03-04-s1.json")
    events = [e for e in parser.feed_document(SourceLine(parser.path, 1, 0, b"{"), found) if e["kind"] != "usage"]
    assert parser.finish() == []
    for ev in events:
        Event.from_wire(ev)
    _, line_events = parse(jsonl({k: v for k, v in doc.items() if k != "messages"}, *messages))
    assert [e["kind"] for e in events] == [e["kind"] for e in line_events] == [
        "session_started", "prompt_submitted", "tool_call_started", "tool_call_finished", "agent_message",
        "notification"]
    assert {e["attrs"]["source_line"] for e in events} == {1}
    assert [e["attrs"].get("source_message_index") for e in events] == [None, 0, 1, 1, 2, 3]
    assert events[1]["content"]["prompt"] == "fix it"
    assert events[0]["project"]["root"] == "/nonexistent/gemini-proj"
    assert all(e["attrs"]["cwd"] == "/nonexistent/gemini-proj" for e in events)
    assert json.loads(events[1]["raw"]["line"]) == messages[0]
    # the merge keys (and so the event ids) do not depend on the form
    assert [e["attrs"].get("merge_key") for e in events] == [e["attrs"].get("merge_key") for e in line_events]
    assert [e["event_id"] for e in events[1:]] == [e["event_id"] for e in line_events[1:]]
    assert len({e["event_id"] for e in events}) == len(events)
    # not a document: JSONL, a list, no messages, not JSON
    assert chat_document(jsonl(META, user("u1", "x"))) is None
    for data in (b"[]", b'{"sessionId": "x"}', b"{not json", b"\xff{", b""):
        assert chat_document(data) is None


def test_pretty_printed_document_fed_line_by_line_is_reported_not_raised() -> None:
    data = json.dumps({**META, "messages": [user("u1", "x")]}, indent=2).encode()
    parser, events = parse(data)
    assert events and {e["kind"] for e in events} == {"unknown"}
    assert parser.stats.problem_count == len(events)


# -- parity with the hook adapter ---------------------------------------------------


PARITY = [
    (call("t1", "read_file", {"absolute_path": "/p/pyproject.toml"}), {"llmContent": "ok", "returnDisplay": ""}),
    (call("t2", "write_file", {"file_path": "/p/a.py", "content": "x\ny\n"}), {"llmContent": "ok"}),
    (call("t3", "replace", {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}, "error",
          error="Failed to edit, could not find the string to replace."),
     {"error": "Failed to edit, could not find the string to replace."}),
    (call("t4", "glob", {"pattern": "*.py", "dir_path": "/p"}), {"llmContent": "ok"}),
    (call("t5", "search_file_content", {"pattern": "TODO", "path": "/p"}), {"llmContent": "ok"}),
    (call("t6", "run_shell_command", {"command": "false"},
          output="Command: false\nOutput: (empty)\nExit Code: 1\nSignal: (none)"),
     {"llmContent": "Command: false\nOutput: (empty)\nExit Code: 1\nSignal: (none)"}),
    (call("t7", "run_shell_command", {"command": "sleep 99"}, "error", error="Command timed out after 30s"),
     {"error": "Command timed out after 30s"}),
]


@pytest.mark.parametrize(("chat_call", "response"), PARITY, ids=[c["name"] + c["id"] for c, _ in PARITY])
def test_tool_calls_match_the_hook_capture(chat_call: dict[str, Any], response: dict[str, Any]) -> None:
    _, events = parse(jsonl(META, gemini("g1", "", [chat_call])))
    started, ended = events[1:]
    base = {"session_id": "s-1", "tool_name": chat_call["name"], "tool_call_id": chat_call["id"],
            "tool_input": chat_call["args"]}
    before = hook.normalise({**base, "hook_event_name": "BeforeTool"}, [])
    after = hook.normalise({**base, "hook_event_name": "AfterTool", "tool_response": response}, [])
    for ours, theirs in ((started, before), (ended, after)):
        assert ours["kind"] == theirs["kind"]
        assert ours["tool"] == theirs["tool"]
        assert ours.get("paths") == theirs.get("paths")
        assert ours.get("outcome") == theirs.get("outcome")
        for k in ("error_class", "command_category", "file_ext", "file_is_config", "lines_added", "lines_removed"):
            assert ours["attrs"].get(k) == theirs.get("attrs", {}).get(k), k


def test_cancelled_and_unfinished_calls() -> None:
    cancelled = call("c1", "run_shell_command", {"command": "make"}, "cancelled", error="User cancelled the operation.")
    running = {"id": "c2", "name": "glob", "args": {"pattern": "*"}, "status": "executing"}
    _, events = parse(jsonl(META, gemini("g1", "working", [cancelled, running])))
    assert [e["kind"] for e in events] == ["session_started", "agent_message", "tool_call_started",
                                           "tool_call_failed", "tool_call_started"]
    failed = events[3]
    assert failed["outcome"] == {"status": "cancelled", "class": "interrupted"}
    assert failed["content"]["error"] == "User cancelled the operation." and failed["attrs"]["interrupted"] is True
    assert events[4]["attrs"]["tool_status"] == "executing"
    assert events[1]["attrs"]["source_line"] == events[4]["attrs"]["source_line"] == 2
    assert "raw" in events[1] and not any("raw" in e for e in events[2:])


def test_a_call_whose_start_and_end_share_a_time_is_one_ended_row() -> None:
    """A call's start and end carry the call's one timestamp: whichever sorts first
    (the event ids decide), each call is one row that ended, its start and end of the
    same input, with a call id or without one."""
    from agentlog.projection.observe import from_wire
    from agentlog.projection.projector import project

    with_id = [call(f"c{i}", "read_file", {"file_path": f"/w/f{i}.txt"}) for i in range(12)]
    without_id = [{k: v for k, v in call(f"n{i}", "read_file", {"file_path": f"/w/g{i}.txt"}).items() if k != "id"}
                  for i in range(12)]
    for calls in (with_id, without_id):
        _, events = parse(jsonl(META, user("u1", "read them"), gemini("g1", "", calls)))
        assert all(e["observed_at"] == events[-1]["observed_at"] for e in events if e["kind"].startswith("tool_"))
        inputs = {e["event_id"]: e["paths"] for e in events if e["kind"].startswith("tool_")}
        rows = project(from_wire(events)).tables["tool_calls"]
        assert len(rows) == len(calls)
        for r in rows:
            assert r["outcome_status"] == "success" and r["pairing"] in ("call_id", "fifo")
            assert inputs[r["start_event_id"]] == inputs[r["end_event_id"]]


def test_messages_notifications_and_subagent_metadata(tmp_path: Path) -> None:
    meta = {**META, "kind": "subagent", "directories": [str(tmp_path)], "summary": "a summary"}
    data = jsonl(meta, user("u1", "<system-reminder>be brief</system-reminder>"),
                 {"id": "w1", "timestamp": "2026-01-02T03:04:09Z", "type": "warning", "content": "slow"},
                 {"id": "e1", "timestamp": "2026-01-02T03:04:10Z", "type": "error", "content": [{"text": "quota"}]},
                 {"$set": {"lastUpdated": "2026-01-02T03:05:00Z", "summary": "later"}})
    parser, events = parse(data)
    assert [e["kind"] for e in events] == ["session_started", "notification", "notification", "notification"]
    assert all(e["attrs"]["is_subagent"] is True and e["project"]["root"] == str(tmp_path) for e in events)
    assert events[0]["content"]["summary"] == "a summary" and events[0]["attrs"]["session_kind"] == "subagent"
    assert events[1]["attrs"]["notification_type"] == "injected_prompt"
    assert [e["attrs"].get("level") for e in events[2:]] == ["warning", "error"]
    assert events[3]["content"]["message"] == "quota"
    assert parser.stats.problem_count == 0


# -- garbage --------------------------------------------------------------------------


def test_garbage_is_reported_and_never_raises() -> None:
    data = b"\n".join([
        json.dumps(META).encode(),
        b"{this is not json",
        b"[1, 2, 3]",
        json.dumps(user("u1", 5)).encode(),
        json.dumps(gemini("g1", 5, calls={"not": "a list"})).encode(),
        json.dumps(gemini("g2", "hi", calls=[7, call("c1", "glob", {})])).encode(),
        json.dumps({"id": "x1", "type": "tool_group", "content": "?"}).encode(),
        json.dumps({"type": "user", "content": "no id"}).encode(),
        json.dumps({"what": "ever"}).encode(),
        json.dumps({"$rewindTo": "never-seen"}).encode(),
        json.dumps({"$set": 3}).encode(),
        json.dumps({"id": "g3", "type": "gemini", "toolCalls": [{"status": "error", "extra": 1}]}).encode(),
        b"\xff\xfe",
        b"",
    ])
    parser, events = parse(data)
    by_line = {}
    for e in events:
        by_line.setdefault(e["attrs"]["source_line"], []).append(e)
    assert by_line[2][0]["kind"] == "unknown" and by_line[2][0]["attrs"]["payload_error"] == "invalid_json"
    assert by_line[3][0]["attrs"]["payload_error"] == "record_not_object"
    assert by_line[4][0]["kind"] == "unknown" and by_line[4][0]["attrs"]["payload_error"] == "content_not_text"
    assert [e["kind"] for e in by_line[5]] == ["agent_message"]
    assert [e["kind"] for e in by_line[6]] == ["agent_message", "tool_call_started", "tool_call_finished"]
    assert by_line[7][0]["kind"] == "unknown" and by_line[7][0]["attrs"]["unrecognised"] is True
    assert by_line[8][0]["kind"] == "prompt_submitted"
    assert by_line[9][0]["kind"] == "unknown"
    assert [e["kind"] for e in by_line[12]] == ["tool_call_started", "tool_call_failed"]
    assert by_line[12][0]["attrs"]["payload_error"] == "missing_tool_name"
    assert by_line[13][0]["attrs"]["payload_error"] == "invalid_json" and "line_b64" in by_line[13][0]["raw"]
    assert 14 not in by_line
    messages = {m for _, _, m in parser.stats.problems}
    for needle in ("not JSON", "record is not an object", "'u1': content is not text", "'g1': content is not text",
                   "'g1': toolCalls is not a list", "'g2': toolCalls[0] is not an object", "message without an id",
                   "unrecognised record", "$rewindTo names no message read so far", "$set is not an object"):
        assert any(needle in m for m in messages), needle
    assert parser.stats.unknown == {("", "message:tool_group"): 1, ("", "record"): 1}
    assert parser.stats.unknown_fields == {("", "toolCall.extra"): 1}
    assert len({e["event_id"] for e in events}) == len(events)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "type", "content", "toolCalls", "tokens", "name", "args", "result", "status",
                         "timestamp", "sessionId", "directories", "$set", "$rewindTo", "messages", "text",
                         "functionResponse", "response", "output", "error", "model"]), inner, max_size=6),
    max_leaves=20,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(JSON, max_size=6))
def test_any_json_never_raises(records: list[Any]) -> None:
    parser = GeminiCliParser("fuzz.jsonl", "hint")
    events: list[dict[str, Any]] = []
    for i, rec in enumerate(records, 1):
        events += parser.feed(SourceLine("fuzz.jsonl", i, 0, fastjson.dumps_bytes(rec)), rec)
        if isinstance(rec, dict):
            events += parser.feed_document(SourceLine("fuzz.jsonl", i, 0, b""), rec)
    events += parser.finish()
    for ev in events:
        Event.from_wire(ev)
    assert not any("parser error" in m for _, _, m in parser.stats.problems)


@needs_fixture
def test_usage_events_are_the_final_messages_counts_normalised() -> None:
    """Counted by hand from the fixture's two gemini messages: input 11855 and 12069 of
    which 0 and 11502 cached, output 81 and 147, no thoughts or tool tokens."""
    parser = GeminiCliParser(str(FIXTURE))
    events: list[dict[str, Any]] = []
    for lineno, raw in enumerate(FIXTURE.read_bytes().split(b"\n"), 1):
        try:
            record: Any = fastjson.loads(raw.decode("utf-8"))
        except Exception:
            record = NOT_JSON
        events += parser.feed(SourceLine(str(FIXTURE), lineno, 0, raw), record)
    events += parser.finish()
    usage = [e["attrs"] for e in events if e["kind"] == "usage"]
    assert [(u["input_tokens"], u["cache_read_tokens"], u["output_tokens"], u["cache_write_tokens"]) for u in usage] \
        == [(11855, 0, 81, 0), (12069 - 11502, 11502, 147, 0)]
    assert all(u["model"] == "gemini-3-flash-preview" for u in usage)


def test_a_single_document_chat_imports_through_the_runner(tmp_path: Path) -> None:
    from agentlog.importers.run import import_paths

    chats = tmp_path / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    doc = {**META, "messages": [user("u1", "list the files"), gemini("g1", "here they are")]}
    (chats / "session-2026-01-02T03-04-s1.json").write_text(json.dumps(doc, indent=2))
    root = tmp_path / "home"
    report = import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")])
    (f,) = report.files
    assert f.problem_count == 0 and f.lines == 1
    assert f.events == 4  # session start, prompt, message, its usage
    assert import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")]).totals()["events"] == 0


def test_a_document_rewritten_in_place_keeping_its_first_4_kib_is_read_again_whole(tmp_path: Path) -> None:
    """Older Gemini CLI rewrites its one-document chat in place as the session goes on: a
    rewrite that keeps the first 4 KiB and adds a message is not growth (read from the
    old size it gives JSON fragments: unknown events), the file is read again whole and
    what was imported before is recognised."""
    from agentlog.importers.run import HEAD_BYTES, import_paths
    from import_support import log_events

    chats = tmp_path / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    chat = chats / "session-2026-01-02T03-04-s1.json"
    messages = [user("u1", "explain " + "the parser " * 600), gemini("g1", "it reads lines")]
    chat.write_text(json.dumps({**META, "messages": messages}, indent=2))
    before = chat.read_bytes()
    root = tmp_path / "home"
    first = import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")])
    assert first.totals()["events"] == 4 and first.files[0].mode == "new"
    ino = chat.stat().st_ino
    messages += [user("u2", "and the runner?", ts="2026-01-02T03:05:00.000Z"),
                 gemini("g2", "it writes batches", ts="2026-01-02T03:05:01.000Z")]
    with open(chat, "r+b") as fh:  # in place: same inode, same first bytes, longer
        fh.write(json.dumps({**META, "messages": messages}, indent=2).encode())
    assert chat.stat().st_ino == ino and chat.read_bytes()[:HEAD_BYTES] == before[:HEAD_BYTES]
    again = import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")])
    (f,) = again.files
    assert f.mode == "replaced" and f.problem_count == 0
    assert f.events == 3 and f.duplicates == 4  # the new prompt, answer and its usage; the rest was there
    events = log_events(root)
    assert not any(e["kind"] == "unknown" for e in events)
    assert [e["content"]["prompt"] for e in events if e["kind"] == "prompt_submitted"][1:] == ["and the runner?"]
    assert [e["content"]["message"] for e in events if e["kind"] == "agent_message"] == [
        "it reads lines", "it writes batches"]
    # unchanged since: not read
    assert import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")]).files[0].mode == "unchanged"


def test_a_message_rewritten_after_it_was_imported(tmp_path: Path) -> None:
    """The rule (docs/import.md, "Gemini CLI: a message written again"): across
    imports, an agent message written again with the same id and time keeps the
    version imported first; new token counts are a new usage event (the usage view
    keeps the last); a call's completion is recorded when it comes."""
    from agentlog.importers.run import import_paths
    from import_support import log_events

    chats = tmp_path / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    chat = chats / "session-2026-01-02T03-04-s1.jsonl"
    running = call("c1", "run_shell_command", {"command": "ls"}, status="executing", output=None)
    chat.write_bytes(jsonl(META, user("u1", "list the files"), gemini("g1", "Listing", calls=[running])))
    root = tmp_path / "home"
    first = import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")])
    assert first.totals()["events"] == 5  # session start, prompt, message, call started, usage
    done = call("c1", "run_shell_command", {"command": "ls"})
    with chat.open("ab") as fh:  # Gemini writes the message again: more text, the call finished, new counts
        fh.write(jsonl(gemini("g1", "Listing the files: a b", calls=[done],
                              tokens={"input": 10, "output": 9, "cached": 0, "total": 19})))
    again = import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")])
    events = log_events(root)
    messages = [e for e in events if e["kind"] == "agent_message"]
    assert [m["content"]["message"] for m in messages] == ["Listing"]  # the first version stays
    assert [e["kind"] for e in events if e["kind"].startswith("tool_call")] == ["tool_call_started",
                                                                                 "tool_call_finished"]
    assert [e["attrs"]["output_tokens"] for e in events if e["kind"] == "usage"] == [2, 9]
    # the message's new line is kept on its own (its text not recorded as the message's)
    assert again.totals()["events"] == 3 and again.totals()["duplicates"] == 2 and again.totals()["kept_lines"] == 1
    (kept,) = [e for e in events if e["kind"] == "transcript_line"]
    assert kept["attrs"]["source_line"] == 4 and "Listing the files: a b" in kept["raw"]["line"]
    assert import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")]).totals()["events"] == 0
    os.remove(root / "state" / "import.json")  # read again from the start: nothing new
    assert import_paths(str(root), ["gemini-cli"], [str(tmp_path / "tmp")]).totals()["events"] == 0


# -- what Gemini CLI 0.61.0 and 0.47.0 really write (tests/data/real_agents/gemini-cli: chats of
# the real CLIs driven by the scripted model in src/agentlog/bench/agents; the session context
# elided, the project directory renamed) -------------------------------------------------------

REAL_CHATS = Path(__file__).parent / "data" / "real_agents" / "gemini-cli"
#: scenario → the calls the CLI really made: (call id, tool, status, exit code)
REAL_TRUTH: dict[str, list[tuple[str, str, str, int | None]]] = {
    "nonzero_exit": [("run_shell_command__fc_al0000", "run_shell_command", "failure", 3),
                     ("run_shell_command__fc_al0100", "run_shell_command", "success", None)],
    "edit_text_absent": [("read_file__fc_al0000", "read_file", "success", None),
                         ("replace__fc_al0100", "replace", "failure", None)],
    "parallel_calls": [("run_shell_command__fc_al0000", "run_shell_command", "success", None),
                       ("run_shell_command__fc_al0001", "run_shell_command", "failure", 1)],
    "success": [("run_shell_command__fc_al0000", "run_shell_command", "success", None),
                ("read_file__fc_al0100", "read_file", "success", None),
                ("write_file__fc_al0200", "write_file", "success", None)],
}


@pytest.mark.parametrize("version", ["0.61.0", "0.47.0"])
@pytest.mark.parametrize("scenario", sorted(REAL_TRUTH))
def test_real_chats_import_alone(version: str, scenario: str, agentlog_home: Path) -> None:
    from agentlog.api import import_paths, run_sql

    (chat,) = (REAL_CHATS / version / scenario / "proj" / "chats").iterdir()
    report = import_paths(str(agentlog_home), ["gemini-cli"], [str(chat)])
    assert report.totals()["problems"] == 0
    rows = run_sql(str(agentlog_home), "select provider_call_id, tool_name, outcome_status, exit_code, pairing "
                                        "from tool_calls order by started_at, provider_call_id").records()
    assert [(r["provider_call_id"], r["tool_name"], r["outcome_status"], r["exit_code"]) for r in rows] == REAL_TRUTH[scenario]
    assert {r["pairing"] for r in rows} == {"call_id"}  # no start-only ghosts from the message written twice
    (session,) = run_sql(str(agentlog_home), "select prompt_count, turn_count, project_name from sessions").records()
    assert session == {"prompt_count": 1, "turn_count": 1, "project_name": f"{scenario}-project"}
    assert import_paths(str(agentlog_home), ["gemini-cli"], [str(chat)]).totals()["events"] == 0


def test_hook_calls_without_ids_are_not_imported_again(agentlog_home: Path) -> None:
    """Gemini's BeforeTool/AfterTool carry no call id; the chat's calls match them by
    tool and input (attrs.input_key), so hooks + import record each call once."""
    import subprocess
    import sys

    from agentlog.api import import_paths, run_sql

    chat_dir = REAL_CHATS / "0.61.0" / "parallel_calls" / "proj" / "chats"
    (chat,) = chat_dir.iterdir()
    sid = json.loads(chat.read_text().splitlines()[0])["sessionId"]
    hook = Path(__file__).resolve().parents[1] / "src" / "agentlog" / "_hook.py"
    for name, cmd, resp in (("BeforeTool", "cat a.txt", None), ("BeforeTool", "cat does-not-exist.txt", None),
                            ("AfterTool", "cat does-not-exist.txt", "Output: cat: no\nExit Code: 1"),
                            ("AfterTool", "cat a.txt", "Output: alpha")):
        payload: dict[str, Any] = {"session_id": sid, "hook_event_name": name, "cwd": str(agentlog_home),
                                   "tool_name": "run_shell_command",
                                   "tool_input": {"command": cmd, "description": "run a command"}}
        if resp is not None:
            payload["tool_response"] = {"llmContent": resp, "returnDisplay": resp}
        subprocess.run([sys.executable, "-I", "-S", str(hook), "gemini-cli"], input=json.dumps(payload).encode(),
                       check=True, timeout=60, capture_output=True)
    import_paths(str(agentlog_home), ["gemini-cli"], [str(chat)])
    rows = run_sql(str(agentlog_home), "select outcome_status, exit_code from tool_calls order by started_at").records()
    assert [(r["outcome_status"], r["exit_code"]) for r in rows] == [("success", None), ("failure", 1)]


def test_two_records_on_one_line_are_both_read(agentlog_home: Path, tmp_path: Path) -> None:
    """The metadata and a prompt written with no newline between them (``{…}{…}``) give
    both their events; the next line's message and its call are read as ever."""
    from agentlog.api import import_paths, run_sql

    chat = tmp_path / "chats" / "session-2026-01-02T03-04-s1.jsonl"
    chat.parent.mkdir(parents=True)
    chat.write_bytes(json.dumps(META).encode() + json.dumps(user("u1", "read the file")).encode() + b"\n"
                     + jsonl(gemini("g1", "", [call("c1", "read_file", {"file_path": "/w/a.txt"})])))
    report = import_paths(str(agentlog_home), ["gemini-cli"], [str(chat)])
    assert report.totals()["problems"] == 0
    (session,) = run_sql(str(agentlog_home), "select prompt_count, provider_session_id from sessions").records()
    assert session == {"prompt_count": 1, "provider_session_id": "s-1"}
    rows = run_sql(str(agentlog_home), "select provider_call_id, outcome_status from tool_calls").records()
    assert rows == [{"provider_call_id": "c1", "outcome_status": "success"}]
    kinds = run_sql(str(agentlog_home), "select kind from events where kind in ('session_started', "
                                        "'prompt_submitted') order by kind").records()
    assert [k["kind"] for k in kinds] == ["prompt_submitted", "session_started"]
