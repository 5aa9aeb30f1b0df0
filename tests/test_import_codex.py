"""The Codex rollout parser: a real session, synthetic modern and legacy files, garbage."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from agentlog.core import fastjson
from agentlog.capture.adapters import codex as codex_hook
from agentlog.capture.adapters.common import timestamp_us
from agentlog.importers.base import NOT_JSON, SourceLine, text_digest
from agentlog.importers.codex import MAX_OPEN_CALLS, CodexParser
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers import run
from agentlog.importers.sources import AGENTS
from agentlog.core.model import Event
from import_support import feed_file

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURE = SHARED / "fixtures" / "codex" / "agent-history__real_sessions-codex-session-01.jsonl"
needs_fixture = pytest.mark.skipif(not FIXTURE.is_file(), reason=missing(FIXTURE))
SID = "019e9625-802f-7e91-840a-cfe88d14117a"
TURN = "019e9625-806b-7343-9798-a7ca2de29a04"


def source_lines(data: bytes, path: str) -> list[SourceLine]:
    """Split on newlines (1-based numbers, byte offsets); a final empty piece is no line."""
    out = []
    offset = 0
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    for n, piece in enumerate(pieces, 1):
        out.append(SourceLine(path=path, lineno=n, offset=offset, data=piece))
        offset += len(piece) + 1
    return out


def record_of(data: bytes) -> Any:
    try:
        return fastjson.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return NOT_JSON


def parse(data: bytes, path: str = "rollout.jsonl", hint: str | None = None) -> tuple[CodexParser, list[dict[str, Any]]]:
    parser = CodexParser(path, session_hint=hint)
    events: list[dict[str, Any]] = []
    for line in source_lines(data, path):
        events.extend(parser.feed(line, record_of(line.data)))
    events.extend(parser.finish())
    return parser, events


def jsonl(*records: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def assert_valid(events: list[dict[str, Any]]) -> None:
    """Strict model validation, plus what the importer promises on every event."""
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == len(ids), "event ids must be distinct"
    for e in events:
        Event.from_wire(e)
        fastjson.dumps(e)
        attrs = e["attrs"]
        assert attrs["reconstructed"] is True and attrs["reconstructed_from"] == "codex_rollout"
        assert isinstance(attrs["source_line"], int)
        if "call_id" in e.get("tool", {}) or e["kind"] == "prompt_submitted":
            assert attrs["merge_key"].startswith("codex\x1f" + e.get("provider_session_id", "") + "\x1f")
        assert e["provider"] == "codex"
        assert e["provider_event_name"].startswith("rollout:")
        for v in attrs.values():
            assert isinstance(v, (str, bool, int)) or (isinstance(v, dict) and v), v


def assert_paired(events: list[dict[str, Any]]) -> None:
    """Every finished/failed tool event follows a started one with the same call id."""
    started: set[str] = set()
    for e in events:
        if e["kind"] == "tool_call_started":
            started.add(e["tool"]["call_id"])
        elif e["kind"] in ("tool_call_finished", "tool_call_failed"):
            assert e["tool"]["call_id"] in started, e


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


# -- the real session ----------------------------------------------------------------


@needs_fixture
def test_real_session_golden_counts() -> None:
    data = FIXTURE.read_bytes()
    assert len(source_lines(data, str(FIXTURE))) == 11
    parser, events = parse(data, str(FIXTURE))
    assert kinds(events) == ["session_started", "prompt_submitted", "agent_message", "usage", "turn_stopped"]
    counts = Counter(kinds(events))
    assert counts["tool_call_started"] == counts["tool_call_finished"] == counts["tool_call_failed"] == 0
    assert [e["attrs"]["source_line"] for e in events] == [1, 7, 8, 10, 11]
    assert parser.stats.problem_count == 0 and parser.stats.unknown == {}
    assert parser.stats.records == {
        "session_meta": 1, "event_msg:task_started": 1, "response_item:message": 4, "turn_context": 1,
        "event_msg:user_message": 1, "event_msg:agent_message": 1, "event_msg:token_count": 1,
        "event_msg:task_complete": 1,
    }
    assert sum(parser.stats.records.values()) == 11
    assert_valid(events)
    assert_paired(events)


@needs_fixture
def test_real_session_fields() -> None:
    lines = source_lines(FIXTURE.read_bytes(), str(FIXTURE))
    _, events = parse(FIXTURE.read_bytes(), str(FIXTURE))
    events = [e for e in events if e["kind"] != "usage"]
    start, prompt, message, stop = events
    assert all(e["provider_session_id"] == SID and e["provider_version"] == "0.135.0" for e in events)
    assert "provider_turn_id" not in start and "agent" not in start
    assert all(e["provider_turn_id"] == TURN and e["agent"] == {"model": "gpt-5.5"} for e in events[1:])
    assert start["attrs"]["originator"] == "codex_exec" and start["attrs"]["source"] == "exec"
    assert start["attrs"]["model_provider"] == "openai"
    assert start["attrs"]["cwd"] == "/tmp/agent-history-real-agent/codex/workspace"
    assert start["observed_at"] == timestamp_us("2026-06-05T04:58:20.653Z")
    assert prompt["content"]["prompt"] == "[REDACTED_PROMPT]" and prompt["attrs"]["prompt_kind"] == "human"
    assert prompt["attrs"]["merge_key"].endswith("\x1f" + text_digest("[REDACTED_PROMPT]"))
    assert prompt["observed_at"] == timestamp_us("2026-06-05T04:58:23.506Z")
    # the event_msg and the response_item encodings of the answer are stored once
    assert message["content"]["message"] == "[REDACTED_ASSISTANT_TEXT]"
    assert message["attrs"]["message_chars"] == len("[REDACTED_ASSISTANT_TEXT]")
    assert message["attrs"]["phase"] == "final_answer"
    assert stop["duration_ms"] == 6074 and stop["content"]["message"] == "[REDACTED_ASSISTANT_TEXT]"
    for e in events:  # the first event of a line carries the line, byte for byte
        assert e["raw"] == {"line": lines[e["attrs"]["source_line"] - 1].data.decode()}


@needs_fixture
def test_real_session_usage_is_one_event_per_response() -> None:
    """Line 10's last_token_usage (read off the fixture): input 22539 of which 20864
    cached, output 10 — normalised to uncached input + cache reads."""
    parser, events = parse(FIXTURE.read_bytes(), str(FIXTURE))
    assert parser.usage == {
        "input_tokens": 22539, "cached_input_tokens": 20864, "output_tokens": 10,
        "reasoning_output_tokens": 0, "total_tokens": 22549, "model": "gpt-5.5",
    }
    (usage,) = [e for e in events if e["kind"] == "usage"]
    a = usage["attrs"]
    assert (a["input_tokens"], a["cache_read_tokens"], a["output_tokens"], a["cache_write_tokens"]) == \
        (22539 - 20864, 20864, 10, 0)
    assert a["model"] == "gpt-5.5" and a["message_id"] == "token_count:22549"
    # the same count written twice is one response (one merge key)
    again = [e for e in parse(FIXTURE.read_bytes(), str(FIXTURE))[1] if e["kind"] == "usage"]
    assert again[0]["attrs"]["merge_key"] == a["merge_key"]


@needs_fixture
def test_event_ids_are_deterministic() -> None:
    data = FIXTURE.read_bytes()
    _, a = parse(data, str(FIXTURE))
    _, b = parse(data, str(FIXTURE))
    assert [e["event_id"] for e in a] == [e["event_id"] for e in b]
    assert a == b


@pytest.mark.parametrize("sample", ["modern", "legacy"])
def test_event_ids_are_deterministic_across_copies(sample: str) -> None:
    data = MODERN if sample == "modern" else LEGACY
    _, a = parse(data, "/a/rollout.jsonl")
    _, b = parse(data, "/elsewhere/copy.jsonl")
    assert [e["event_id"] for e in a] == [e["event_id"] for e in b]
    # an id does not depend on where an event with an item (call id, prompt digest) sits in the file
    _, shifted = parse(b"\n" + data)
    with_item = {e["attrs"]["merge_key"]: e["event_id"] for e in a if "merge_key" in e["attrs"]}
    assert with_item and all(with_item[e["attrs"]["merge_key"]] == e["event_id"]
                             for e in shifted if "merge_key" in e["attrs"] and "time_estimated" not in e["attrs"])


@needs_fixture
def test_import_pipeline_uses_this_parser() -> None:
    """The registry names this class, and the importer's own line reader gives the same events."""
    assert AGENTS["codex"].parser_class() is CodexParser
    events = feed_file(CodexParser(str(FIXTURE)), FIXTURE)
    _, mine = parse(FIXTURE.read_bytes(), str(FIXTURE))
    assert events == mine


# -- a synthetic modern session with tools ---------------------------------------------

PATCH = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = 2\n+y = 3\n*** End Patch\n"
T0 = "2026-01-02T03:04:05.000Z"


def line(typ: str, payload: Any, ts: str = T0) -> dict[str, Any]:
    return {"timestamp": ts, "type": typ, "payload": payload}


MODERN = jsonl(
    line("session_meta", {"id": "s-1", "cwd": "/nonexistent/proj", "cli_version": "0.50.0", "originator": "codex_cli_rs",
                          "source": "cli", "model_provider": "openai",
                          "git": {"commit_hash": "abc123", "branch": "main",
                                  "repository_url": "https://user:s3cret@example.com/o/r.git"}}),
    line("turn_context", {"turn_id": "t-1", "cwd": "/nonexistent/proj", "model": "gpt-5-codex"}),
    line("event_msg", {"type": "user_message", "message": "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"}),
    line("event_msg", {"type": "user_message", "message": "fix the tests", "images": ["a.png"]}),
    line("response_item", {"type": "reasoning", "summary": []}),
    line("response_item", {"type": "function_call", "name": "shell", "call_id": "c-1",
                           "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"], "workdir": "/x"})}),
    line("response_item", {"type": "function_call_output", "call_id": "c-1",
                           "output": "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nFAILED"}),
    line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c-2",
                           "arguments": json.dumps({"cmd": "ls"})}),
    line("response_item", {"type": "function_call_output", "call_id": "c-2",
                           "output": json.dumps({"output": "a\n", "metadata": {"exit_code": 0}})}),
    line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c-3", "input": PATCH,
                           "status": "completed"}),
    line("response_item", {"type": "custom_tool_call_output", "call_id": "c-3",
                           "output": json.dumps({"output": "Success.", "metadata": {"exit_code": 0}})}),
    line("response_item", {"type": "local_shell_call", "call_id": "c-4", "status": "completed",
                           "action": {"type": "exec", "command": ["git", "status"]}}),
    line("response_item", {"type": "function_call_output", "call_id": "c-4",
                           "output": json.dumps({"output": "", "metadata": {"exit_code": 128}})}),
    line("response_item", {"type": "function_call", "name": "shell_command", "call_id": "c-5", "arguments": "{bad"}),
    line("response_item", {"type": "function_call_output", "call_id": "c-404", "output": "orphan"}),
    line("event_msg", {"type": "agent_message", "message": "Fixed."}),
    line("response_item", {"type": "message", "role": "assistant", "id": "msg_1",
                           "content": [{"type": "output_text", "text": "Fixed."}]}),
    line("event_msg", {"type": "agent_message", "message": "Fixed."}),
    line("compacted", {"message": "summary of the work", "replacement_history": [{}, {}]}),
    line("event_msg", {"type": "context_compacted"}),
    line("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
    line("event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),
    line("event_msg", {"type": "brand_new_thing", "x": 1}),
    line("something_else", {"type": "x"}),
)


def test_modern_session_mapping() -> None:
    parser, events = parse(MODERN)
    assert kinds(events) == [
        "session_started", "notification", "prompt_submitted",
        "tool_call_started", "tool_call_failed",
        "tool_call_started", "tool_call_finished",
        "tool_call_started", "tool_call_finished",
        "tool_call_started", "tool_call_failed",
        "tool_call_started", "tool_call_finished",
        "agent_message", "agent_message",
        "compaction_finished", "turn_failed", "unknown", "unknown",
    ]
    assert_valid(events)
    by_line = {e["attrs"]["source_line"]: e for e in events}
    start = by_line[1]
    assert start["attrs"]["git_remote"] == "https://example.com/o/r.git"
    assert start["attrs"]["git_branch"] == "main" and start["attrs"]["git_commit"] == "abc123"
    assert by_line[3]["attrs"]["notification_type"] == "injected_context"
    assert by_line[4]["attrs"]["image_count"] == 1 and by_line[4]["provider_turn_id"] == "t-1"
    shell_fail = by_line[7]
    # named as Codex's hooks name every shell tool; the wire name kept beside it
    assert shell_fail["tool"] == {"name": "Bash", "category": "shell", "call_id": "c-1"}
    assert shell_fail["attrs"]["wire_tool"] == "shell"
    assert shell_fail["outcome"] == {"status": "failure", "class": "test_failure", "exit_code": 1}
    assert shell_fail["content"]["command"] == "bash -lc pytest -q"
    assert by_line[6]["attrs"]["command_category"] == "test"
    assert by_line[9]["outcome"] == {"status": "success"} and by_line[9]["content"]["command"] == "ls"
    for n in (10, 11):
        assert by_line[n]["tool"]["category"] == "file_edit" and by_line[n]["paths"] == ["src/app.py"]
        assert by_line[n]["attrs"]["lines_added"] == 2 and by_line[n]["attrs"]["lines_removed"] == 1
    assert by_line[12]["tool"]["name"] == "local_shell" and by_line[12]["content"]["command"] == "git status"
    assert by_line[13]["outcome"]["exit_code"] == 128
    bad_args = by_line[14]
    assert bad_args["tool"]["category"] == "shell" and bad_args["attrs"]["arguments_invalid"] is True
    assert bad_args["content"]["tool_input"] == "{bad"
    orphan = by_line[15]
    assert orphan["attrs"]["unpaired"] is True and orphan["tool"]["call_id"] == "c-404"
    # lines 16/17: one message in two encodings; line 18 repeats the text, so it is a new message
    assert by_line[16]["content"]["message"] == "Fixed." and 17 not in by_line and by_line[18]["kind"] == "agent_message"
    assert by_line[19]["content"]["compact_summary"] == "summary of the work" and 20 not in by_line
    assert by_line[21]["outcome"] == {"status": "cancelled", "class": "interrupted"}
    assert by_line[23]["attrs"]["payload_type"] == "brand_new_thing"
    assert by_line[24]["attrs"]["record_type"] == "something_else"
    assert parser.stats.unknown == {("0.50.0", "event_msg:brand_new_thing"): 1, ("0.50.0", "something_else"): 1}
    assert [p[1:] for p in parser.stats.problems] == [(14, "function_call: arguments are not JSON")]
    assert parser.usage == {} and parser.open_calls == {"c-5": ("shell_command", "{bad")}
    tool_events = [e for e in events if e["kind"].startswith("tool_call_") and not e["attrs"].get("unpaired")]
    assert_paired(tool_events)


def test_tool_calls_match_the_hook_mapping() -> None:
    """An imported call projects like the one the Codex hook records (PostToolUse)."""
    _, events = parse(MODERN)
    by_call = {e["tool"]["call_id"]: e for e in events if e["kind"] in ("tool_call_finished", "tool_call_failed")}
    cases = {
        "c-1": ("shell", {"command": ["bash", "-lc", "pytest -q"], "workdir": "/x"},
                "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nFAILED"),
        "c-2": ("exec_command", {"cmd": "ls"}, json.dumps({"output": "a\n", "metadata": {"exit_code": 0}})),
        "c-3": ("apply_patch", {"command": PATCH}, json.dumps({"output": "Success.", "metadata": {"exit_code": 0}})),
    }
    for call_id, (name, tool_input, response) in cases.items():
        hook_name = "Bash" if name in ("shell", "exec_command") else name  # what Codex's hooks send
        hook = codex_hook.normalise({"hook_event_name": "PostToolUse", "session_id": "s-1", "tool_name": hook_name,
                                     "tool_use_id": call_id, "tool_input": tool_input, "tool_response": response}, [])
        mine = by_call[call_id]
        assert mine["kind"] == hook["kind"], call_id
        assert mine["tool"] == hook["tool"], call_id
        assert mine.get("paths") == hook.get("paths"), call_id
        assert mine["outcome"] == hook["outcome"], call_id
        assert mine["attrs"].get("error_class") == hook["attrs"].get("error_class"), call_id


def test_open_calls_are_bounded() -> None:
    records = [line("session_meta", {"id": "s"})]
    records += [line("response_item", {"type": "function_call", "name": "shell", "call_id": f"c{i}",
                                       "arguments": "{}"}) for i in range(MAX_OPEN_CALLS + 10)]
    parser, events = parse(jsonl(*records))
    assert len(parser.open_calls) == MAX_OPEN_CALLS and "c0" not in parser.open_calls
    assert len(events) == MAX_OPEN_CALLS + 11


def test_session_hint_used_until_meta() -> None:
    data = jsonl(line("event_msg", {"type": "user_message", "message": "hi"}),
                 line("session_meta", {"id": "real"}),
                 line("event_msg", {"type": "user_message", "message": "again"}),
                 line("session_meta", {"id": "real"}),
                 line("session_meta", {"id": "other"}))
    _, events = parse(data, hint="from-file-name")
    assert [e["provider_session_id"] for e in events] == ["from-file-name", "real", "real", "real"]
    assert kinds(events) == ["prompt_submitted", "session_started", "prompt_submitted", "notification"]
    assert events[-1]["attrs"]["meta_session_id"] == "other"


# -- the legacy format ---------------------------------------------------------------------

LEGACY_TS = "2025-04-18T21:33:46.123Z"
LEGACY = jsonl(
    {"id": "0196a0c2-0000-7000-8000-000000000001", "timestamp": LEGACY_TS, "instructions": "be terse",
     "git": {"commit_hash": "deadbeef", "branch": "dev"}},
    {"record_type": "state"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<user_instructions>x</user_instructions>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
    {"type": "function_call_output", "call_id": "call_1",
     "output": "{\"output\":\"a\\nb\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"},
    {"record_type": "state"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]},
)


def test_legacy_format() -> None:
    parser, events = parse(LEGACY)
    assert kinds(events) == ["session_started", "notification", "prompt_submitted", "tool_call_started",
                             "tool_call_finished", "agent_message"]
    assert_valid(events)
    assert_paired(events)
    base = timestamp_us(LEGACY_TS)
    assert base is not None
    assert [e["observed_at"] for e in events] == [base, base + 3, base + 4, base + 6, base + 7, base + 9]
    assert "time_estimated" not in events[0]["attrs"]
    assert all(e["attrs"]["time_estimated"] is True for e in events[1:])
    assert all(e["attrs"]["rollout_format"] == "legacy" for e in events)
    assert all(e["provider_session_id"] == "0196a0c2-0000-7000-8000-000000000001" for e in events)
    assert events[0]["attrs"]["git_branch"] == "dev" and events[0]["provider_event_name"] == "rollout:session_meta"
    assert events[2]["content"]["prompt"] == "list the files"
    assert events[3]["provider_event_name"] == "rollout:function_call" and events[3]["content"]["command"] == "ls"
    assert events[4]["outcome"] == {"status": "success"} and events[4]["tool"]["call_id"] == "call_1"
    assert events[5]["content"]["message"] == "Two files."
    assert parser.stats.records["state"] == 2 and parser.stats.problem_count == 0 and parser.stats.unknown == {}


# -- garbage ---------------------------------------------------------------------------------


def test_garbage_never_raises() -> None:
    big = b'"' + b"x" * (1 << 20) + b'"'
    data = b"\n".join([
        b"this is not json",
        b"[1, 2, 3]",
        b'{"type":"response_item","payload":5}',
        big,
        b"\xff\xfe\x00garbage",
        b"{}",
        b'{"type":"event_msg","payload":{"no_type":true}}',
        b'{"type":"response_item","payload":{"type":"function_call","name":["x"],"call_id":5,"arguments":7}}',
        b'{"type":"response_item","payload":{"type":"function_call_output","call_id":null,"output":{"a":[1]}}}',
        b'{"type":"event_msg","payload":{"type":"user_message","message":42}}',
        b'{"type":"session_meta","payload":{"id":17,"git":"nope","source":{"subagent":"review"}}}',
        b'{"type":"event_msg","payload":{"type":"mystery"},"timestamp":"not a time"}',
        b'{"type":"event_msg","payload":{"type":"task_complete","duration_ms":-5}}',
        b'{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":[1]}}}',
        b"",
    ]) + b"\n"
    parser, events = parse(data)
    assert_valid(events)
    problems = {(n, msg) for _, n, msg in parser.stats.problems}
    assert (1, "not JSON") in problems and (5, "not JSON") in problems and (15, "not JSON") in problems
    assert (2, "not a JSON object (list)") in problems
    assert (3, "response_item: payload is not an object") in problems
    assert (4, "not a JSON object (str)") in problems
    assert (6, "record has no type") in problems and (7, "event_msg: payload has no type") in problems
    assert (10, "user_message: message is not a string") in problems
    assert not any(msg.startswith("parser error") for _, msg in problems)
    assert parser.stats.unknown == {("", "event_msg:mystery"): 1}
    by_line = {e["attrs"]["source_line"]: e for e in events}
    assert sorted(by_line) == [8, 9, 11, 12, 13]
    assert by_line[8]["kind"] == "tool_call_started" and by_line[8]["attrs"]["payload_error"] == "missing_tool_name"
    assert by_line[9]["attrs"]["unpaired"] is True
    assert by_line[11]["kind"] == "session_started" and by_line[11]["attrs"]["is_subagent"] is True
    assert by_line[12]["kind"] == "unknown" and by_line[12]["attrs"]["time_estimated"] is True
    assert by_line[13]["kind"] == "turn_stopped" and "duration_ms" not in by_line[13]
    assert parser.usage == {}


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)
TYPES = st.sampled_from(["session_meta", "turn_context", "response_item", "event_msg", "compacted", "message",
                         "function_call", "function_call_output", "zzz"])
PTYPES = st.sampled_from(["message", "function_call", "custom_tool_call", "local_shell_call", "function_call_output",
                          "custom_tool_call_output", "web_search_call", "user_message", "agent_message",
                          "task_complete", "turn_aborted", "token_count", "reasoning", "zzz"])
KEYS = st.sampled_from(["id", "cwd", "role", "content", "name", "arguments", "input", "call_id", "output", "action",
                        "message", "status", "info", "turn_id", "duration_ms", "git", "source", "cli_version"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TYPES, PTYPES, st.dictionaries(KEYS, JSONISH, max_size=5), st.booleans()), max_size=6))
def test_random_shapes_never_raise(lines: list[tuple[str, str, dict[str, Any], bool]]) -> None:
    records = []
    for typ, ptype, fields, wrapped in lines:
        body = {"type": ptype, **fields}
        records.append({"timestamp": T0, "type": typ, "payload": body} if wrapped else {"type": typ, **fields})
    parser, events = parse(jsonl(*records))
    assert_valid(events)
    assert not any(msg.startswith("parser error") for _, _, msg in parser.stats.problems)


@pytest.mark.parametrize("cwd", ["relative/dir", "C:\\Users\\dev\\proj"])
def test_non_absolute_cwd_gets_no_project(cwd: str) -> None:
    _, events = parse(jsonl(line("session_meta", {"id": "s", "cwd": cwd})))
    assert "project" not in events[0] and events[0]["attrs"]["cwd"] == cwd


# -- event_msg item_completed ------------------------------------------------------------
# The shape, from the Codex source (openai/codex, codex-rs/protocol/src/protocol.rs and
# items.rs): ``EventMsg::ItemCompleted(ItemCompletedEvent { thread_id, turn_id, item })``,
# ``item`` a ``TurnItem`` tagged by ``type`` with the variant's name (``Plan`` is
# ``PlanItem { id, text }``, ``AgentMessage`` is ``{ id, content: [{type: Text, text}] }`` …);
# a rollout line wraps it as ``{"timestamp", "type": "event_msg", "payload": {"type":
# "item_completed", …}}``. Codex's rollout policy (core/src/rollout/policy.rs) writes it
# only for a Plan: the other items are the response items and legacy events already there.

ITEMS = jsonl(
    line("session_meta", {"id": "s-9", "cwd": "/nonexistent/p", "cli_version": "0.77.0"}),
    line("turn_context", {"turn_id": "t-9", "cwd": "/nonexistent/p", "model": "gpt-5.2-codex"}),
    line("event_msg", {"type": "user_message", "message": "plan the refactor"}),
    line("response_item", {"type": "message", "role": "assistant", "id": "msg_9",
                           "content": [{"type": "output_text", "text": "Here is the plan."}]}),
    line("event_msg", {"type": "agent_message", "message": "Here is the plan."}),
    line("event_msg", {"type": "item_completed", "thread_id": "s-9", "turn_id": "t-9",
                       "item": {"type": "AgentMessage", "id": "msg_9",
                                "content": [{"type": "Text", "text": "Here is the plan."}]}}),
    line("event_msg", {"type": "item_completed", "thread_id": "s-9", "turn_id": "t-9",
                       "item": {"type": "Plan", "id": "plan-1", "text": "1. split run.py\n2. test it"}}),
    line("event_msg", {"type": "item_completed", "thread_id": "s-9", "turn_id": "t-9",
                       "item": {"type": "Plan", "id": "plan-1", "text": "1. split run.py\n2. test it"}}),
    line("event_msg", {"type": "item_completed", "thread_id": "s-9", "turn_id": "t-9",
                       "item": {"type": "Hologram", "id": "h-1"}}),
    line("event_msg", {"type": "item_completed", "thread_id": "s-9", "turn_id": "t-9", "item": "Plan"}),
)


def test_item_completed_plan_is_a_notification_and_mirrored_items_are_not_counted_twice() -> None:
    parser, events = parse(ITEMS)
    assert_valid([e for e in events if e["attrs"]["source_line"] != 8])  # line 8 repeats line 7
    by_line = {e["attrs"]["source_line"]: e for e in events}
    # the assistant's text once (its response item and event), not a third time from item_completed
    assert [e["kind"] for e in events if e["kind"] == "agent_message"] == ["agent_message"]
    assert 6 not in by_line
    plan = by_line[7]
    assert plan["kind"] == "notification" and plan["attrs"]["notification_type"] == "plan"
    assert plan["content"]["message"] == "1. split run.py\n2. test it"
    assert plan["provider_event_name"] == "rollout:event_msg:item_completed:Plan"
    assert plan["attrs"]["merge_key"].endswith("\x1fplan:plan-1") and plan["provider_turn_id"] == "t-9"
    # the same plan written twice is one event (same id)
    assert by_line[8]["event_id"] == plan["event_id"]
    assert by_line[9]["kind"] == "unknown" and by_line[9]["attrs"]["payload_type"] == "item_completed:Hologram"
    assert parser.stats.unknown == {("0.77.0", "event_msg:item_completed:Hologram"): 1}
    assert [p[1:] for p in parser.stats.problems] == [(10, "item_completed: item without a type")]


# -- what Codex 0.171.0 and 0.142.2 really write (tests/data/real_agents/codex: rollouts of the
# real CLIs driven by the scripted model in src/agentlog/bench/agents, instructions elided) ---------

REAL = Path(__file__).parent / "data" / "real_agents" / "codex"
#: scenario → the calls the CLI really made: (call id, tool, status, exit code, class); a
#: success keeps no exit code (as the hooks' events do not)
REAL_TRUTH: dict[str, list[tuple[str, str, str, int | None, str | None]]] = {
    "nonzero_exit": [("call_al0000", "Bash", "failure", 3, "nonzero_exit"), ("call_al0100", "Bash", "success", None, None)],
    "edit_text_absent": [("call_al0000", "Bash", "success", None, None),
                         ("call_al0100", "apply_patch", "failure", None, "string_mismatch")],
    "edit_missing_file": [("call_al0000", "apply_patch", "failure", None, "file_not_found")],
    "parallel_calls": [("call_al0000", "Bash", "success", None, None), ("call_al0001", "Bash", "failure", 1, "file_not_found")],
    "success": [("call_al0000", "Bash", "success", None, None), ("call_al0100", "Bash", "success", None, None),
                ("call_al0200", "apply_patch", "success", None, None)],
}
PROMPTS = {"nonzero_exit": "run the checks", "edit_text_absent": "fix the greeting",
           "edit_missing_file": "update the config", "parallel_calls": "look at both files", "success": "make the file"}


@pytest.mark.parametrize("version", ["0.171.0", "0.142.2"])
@pytest.mark.parametrize("scenario", sorted(REAL_TRUTH))
def test_real_rollouts_import_alone(version: str, scenario: str, agentlog_home: Path) -> None:
    from agentlog.api import import_paths, run_sql

    path = str(REAL / version / f"{scenario}.jsonl")
    report = import_paths(str(agentlog_home), ["codex"], [path])
    # every line type of both releases is known (0.171's world_state, token_usage_record and
    # thread_settings_applied give no event, and are not reported as unknown)
    assert report.totals()["events"] > 0 and report.totals()["problems"] == 0
    assert report.totals()["unknown_records"] == 0
    rows = run_sql(str(agentlog_home), "select provider_call_id, tool_name, tool_category, outcome_status, exit_code, "
                                        "outcome_class, pairing from tool_calls order by started_at").records()
    got = [(r["provider_call_id"], r["tool_name"], r["outcome_status"], r["exit_code"],
            r["outcome_class"] if r["outcome_status"] != "success" else None) for r in rows]
    assert got == REAL_TRUTH[scenario]
    assert {r["tool_category"] for r in rows if r["tool_name"] == "Bash"} <= {"shell"}
    assert {r["pairing"] for r in rows} == {"call_id"}
    (session,) = run_sql(str(agentlog_home), "select prompt_count, turn_count, failure_count, in_flight_calls "
                                             "from sessions").records()
    assert session == {"prompt_count": 1, "turn_count": 1, "in_flight_calls": 0,
                       "failure_count": sum(1 for t in REAL_TRUTH[scenario] if t[2] != "success")}
    # task_complete ends the turn; no line of the rollout says the session ended
    assert run_sql(str(agentlog_home), "select status from turns").records() == [{"status": "completed"}]
    (prompt,) = run_sql(str(agentlog_home), "select text from events where kind = 'prompt_submitted'").records()
    assert prompt["text"] == PROMPTS[scenario]
    again = import_paths(str(agentlog_home), ["codex"], [path])
    assert again.totals()["events"] == 0


#: scenario → the call the hooks got wrong and what the rollout says of it: (call id, outcome).
#: nonzero_exit: PostToolUse carries no exit code (the hook recorded a success); edit_text_absent:
#: a refused apply_patch fires PreToolUse only (the hook left it in flight)
HOOKED: dict[str, tuple[str, dict[str, Any]]] = {
    "nonzero_exit": ("call_al0000", {"status": "failure", "class": "nonzero_exit", "exit_code": 3}),
    "edit_text_absent": ("call_al0100", {"status": "failure", "class": "string_mismatch"}),
}


def log_events(path: Path, offset: int = 0) -> list[dict[str, Any]]:
    """The events of a session log's frames from ``offset`` (a byte offset) on."""
    with path.open("rb") as f:
        f.seek(offset)
        return [json.loads(raw)["event"] for raw in f if raw.strip()]


@pytest.mark.parametrize("version", ["0.171.0", "0.142.2"])
@pytest.mark.parametrize("scenario", sorted(HOOKED))
def test_real_rollouts_import_after_hooks(version: str, scenario: str, agentlog_home: Path) -> None:
    """The rollout imported into the data root agentlog's hooks wrote during the same run
    (tests/data/real_agents/codex/<version>/hooks-<scenario>: its session log): nothing the hooks
    recorded is written again, and the end the hooks got wrong arrives with the true outcome.
    (The events written are checked, not the projection's merge of two ends of one call.)"""
    import shutil

    from agentlog.api import import_paths, run_sql

    shutil.copytree(REAL / version / f"hooks-{scenario}", agentlog_home, dirs_exist_ok=True)
    (log,) = (agentlog_home / "logs" / "codex").glob("*.jsonl")
    hooked = log_events(log)
    size = log.stat().st_size
    path = str(REAL / version / f"{scenario}.jsonl")
    report = import_paths(str(agentlog_home), ["codex"], [path])
    assert report.totals()["duplicates"] > 0 and report.totals()["problems"] == 0
    written = log_events(log, size)
    assert written and all(e["attrs"]["reconstructed"] is True for e in written)
    # the hooks' session, prompt, call starts and turn end are not written twice
    for kind in ("session_started", "prompt_submitted", "tool_call_started", "turn_stopped"):
        assert [e for e in hooked if e["kind"] == kind], kind
        assert not [e for e in written if e["kind"] == kind], kind
    # the one end written: the call the hooks got wrong, failed, with its exit code and class
    call_id, outcome = HOOKED[scenario]
    ends = [(e["kind"], e["tool"]["call_id"], e["tool"]["name"], e["outcome"]) for e in written
            if e["kind"] in ("tool_call_finished", "tool_call_failed")]
    name = dict((t[0], t[1]) for t in REAL_TRUTH[scenario])[call_id]
    assert ends == [("tool_call_failed", call_id, name, outcome)]
    # one row per real call, named as the hooks name them
    rows = run_sql(str(agentlog_home), "select provider_call_id, tool_name from tool_calls").records()
    want = sorted((t[0], t[1]) for t in REAL_TRUTH[scenario])
    assert sorted((r["provider_call_id"], r["tool_name"]) for r in rows) == want
    (session,) = run_sql(str(agentlog_home), "select prompt_count, turn_count from sessions "
                                             "where provider_session_id not like 'agentlog-%'").records()
    assert session == {"prompt_count": 1, "turn_count": 1}
    assert import_paths(str(agentlog_home), ["codex"], [path]).totals()["events"] == 0


# -- structured outcomes: the fields of a call's record against the text of its output ------

V171 = line("session_meta", {"id": "s-171", "cwd": "/nonexistent/proj", "cli_version": "0.171.0"})


def exec_call(call_id: str, cmd: str) -> dict[str, Any]:
    return line("response_item", {"type": "function_call", "name": "exec_command", "call_id": call_id,
                                  "arguments": json.dumps({"cmd": cmd})})


def exec_item(call_id: str, status: str, exit_code: int | None) -> dict[str, Any]:
    """A 0.171 ``item_completed`` ``CommandExecution`` (the fields the real ones have)."""
    item: dict[str, Any] = {"type": "CommandExecution", "id": call_id, "command": ["/bin/bash", "-lc", "x"],
                            "source": "unified_exec_startup", "status": status, "aggregated_output": "",
                            "duration": {"secs": 0, "nanos": 4536}}
    if exit_code is not None:
        item["exit_code"] = exit_code
    return line("event_msg", {"type": "item_completed", "thread_id": "s-171", "turn_id": "t-1", "item": item})


def output(call_id: str, text: str, custom: bool = False) -> dict[str, Any]:
    kind = "custom_tool_call_output" if custom else "function_call_output"
    return line("response_item", {"type": kind, "call_id": call_id, "output": text})


#: the unified exec tool's output for a process still running when the call returns (no exit code)
RUNNING = ("Chunk ID: ab12cd\nWall time: 10.0000 seconds\nProcess running with session ID 7\n"
           "Original token count: 0\nOutput:\n")


def ends_of(events: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e["kind"], e["tool"]["call_id"], e["outcome"]) for e in events
            if e["kind"] in ("tool_call_finished", "tool_call_failed")]


def test_record_fields_decide_what_the_output_text_does_not_say() -> None:
    """A CommandExecution item (written before the output, as 0.171 does) gives the exit
    code and status an output without one lacks; a declined command is a refusal; a
    0.142 ``patch_apply_end`` that failed makes its call a failure."""
    data = jsonl(
        V171,
        exec_call("c-1", "sleep 1; exit 2"), exec_item("c-1", "failed", 2), output("c-1", RUNNING),
        exec_call("c-2", "rm -rf /"), exec_item("c-2", "declined", None), output("c-2", "rejected by user"),
        line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c-3", "input": PATCH}),
        line("event_msg", {"type": "patch_apply_end", "call_id": "c-3", "turn_id": "t-1", "stdout": "",
                           "stderr": "Permission denied (os error 13)", "success": False, "status": "failed"}),
        output("c-3", "Exit code: 1\nWall time: 0 seconds\nOutput:\nPermission denied (os error 13)", custom=True),
        exec_call("c-4", "true"), exec_item("c-4", "completed", 0), output("c-4", RUNNING),
    )
    parser, events = parse(data)
    assert_valid(events)
    assert_paired(events)
    assert ends_of(events) == [
        ("tool_call_failed", "c-1", {"status": "failure", "class": "nonzero_exit", "exit_code": 2}),
        ("tool_call_failed", "c-2", {"status": "denied", "class": "policy_denied"}),
        ("tool_call_failed", "c-3", {"status": "failure", "class": "permission_denied", "exit_code": 1}),
        ("tool_call_finished", "c-4", {"status": "success"}),
    ]
    assert parser.outcomes == {} and parser.stats.unknown == {}


def test_a_record_after_the_output_gives_a_second_end_when_it_says_worse() -> None:
    """A unified exec process outlives its exec_command call (whose output says it is still
    running): its CommandExecution item comes later. A failure then is a second end event
    for the call (the projection keeps the worse of two ends); a success, or the same
    record again, is nothing."""
    data = jsonl(
        V171,
        exec_call("c-1", "make"), output("c-1", RUNNING),
        exec_call("c-2", "make docs"), output("c-2", RUNNING),
        exec_item("c-1", "failed", 2),
        exec_item("c-2", "completed", 0),
        exec_item("c-1", "failed", 2),
    )
    _, events = parse(data)
    assert_valid(events)
    assert ends_of(events) == [
        ("tool_call_finished", "c-1", {"status": "success"}),
        ("tool_call_finished", "c-2", {"status": "success"}),
        ("tool_call_failed", "c-1", {"status": "failure", "class": "nonzero_exit", "exit_code": 2}),
    ]
    late = events[-1]
    assert late["tool"] == {"name": "Bash", "category": "shell", "call_id": "c-1"}
    assert late["attrs"]["late_outcome"] is True and late["attrs"]["source_line"] == 6
    assert late["provider_event_name"] == "rollout:event_msg:item_completed:CommandExecution"


def test_outcomes_are_carried_to_the_next_import_of_a_grown_file() -> None:
    """An import that stops between a call's record and its output (the Stop hook imports
    the rollout at every turn's end) leaves the record's outcome to the next one, and an
    end emitted to be corrected by a later record."""
    first = jsonl(V171, exec_call("c-1", "make"), exec_item("c-1", "failed", 2),
                  exec_call("c-2", "make docs"), output("c-2", RUNNING))
    rest = jsonl(output("c-1", RUNNING), exec_item("c-2", "failed", 1))
    parser, _ = parse(first)
    carried = json.loads(json.dumps(parser.carry()))
    again = CodexParser("rollout.jsonl")
    again.resume(carried)
    events: list[dict[str, Any]] = []
    for src in source_lines(rest, "rollout.jsonl"):
        events += again.feed(src, record_of(src.data))
    assert ends_of(events) == [
        ("tool_call_failed", "c-1", {"status": "failure", "class": "build_error", "exit_code": 2}),
        ("tool_call_failed", "c-2", {"status": "failure", "class": "nonzero_exit", "exit_code": 1}),
    ]


@pytest.mark.parametrize("text, cls", [
    ("apply_patch verification failed: Failed to find expected lines in /p/a.txt:\ngoodbye world", "string_mismatch"),
    ("apply_patch verification failed: Failed to find context 'def main' in /p/a.py", "string_mismatch"),
    ("apply_patch verification failed: Failed to read file to update /p/missing.cfg: No such file or directory "
     "(os error 2)", "file_not_found"),
    ("apply_patch verification failed: invalid hunk at line 3", "unknown"),
])
def test_a_refused_patch_is_a_failure_of_its_cause(text: str, cls: str) -> None:
    data = jsonl(V171, line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c-1",
                                              "input": PATCH}),
                 output("c-1", text, custom=True))
    _, events = parse(data)
    ((kind, _, outcome),) = ends_of(events)
    assert kind == "tool_call_failed" and outcome == {"status": "failure", "class": cls}
    assert events[-1]["content"]["error"] == text


def mcp_call(call_id: str, tool: str = "mcp__docs__search") -> dict[str, Any]:
    return line("response_item", {"type": "function_call", "name": tool, "call_id": call_id,
                                  "arguments": json.dumps({"query": "x"})})


def test_mcp_errors_are_failures() -> None:
    """An MCP tool's output that starts with "Error:" or says the tool call failed, and an
    ``mcp_tool_call_end`` whose result is an error (``isError``, or ``Err``), fail the call;
    an MCP result that merely mentions an error, and a shell's "Error:" text with exit 0,
    do not."""
    data = jsonl(
        V171,
        mcp_call("m-1"), output("m-1", "Error: the docs server is unavailable"),
        mcp_call("m-2"), output("m-2", "tool call failed: request timed out after 60s"),
        mcp_call("m-3"),
        line("event_msg", {"type": "mcp_tool_call_end", "call_id": "m-3",
                           "invocation": {"server": "docs", "tool": "search", "arguments": {"query": "x"}},
                           "duration": {"secs": 0, "nanos": 5000},
                           "result": {"Ok": {"content": [{"type": "text", "text": "no index"}], "isError": True}}}),
        output("m-3", "no index"),
        mcp_call("m-4"),
        line("event_msg", {"type": "mcp_tool_call_end", "call_id": "m-4", "invocation": {"server": "docs"},
                           "result": {"Err": "connection closed"}}),
        output("m-4", "err: connection closed"),
        mcp_call("m-5"), output("m-5", "Found 3 pages about Error: handling"),
        exec_call("c-1", "echo 'Error: x'"), output("c-1", "Exit code: 0\nWall time: 0 seconds\nOutput:\nError: x"),
    )
    parser, events = parse(data)
    assert_valid(events)
    assert_paired(events)
    got = [(kind, cid, outcome["status"]) for kind, cid, outcome in ends_of(events)]
    assert got == [("tool_call_failed", "m-1", "failure"), ("tool_call_failed", "m-2", "failure"),
                   ("tool_call_failed", "m-3", "failure"), ("tool_call_failed", "m-4", "failure"),
                   ("tool_call_finished", "m-5", "success"), ("tool_call_finished", "c-1", "success")]
    failed = {e["tool"]["call_id"]: e for e in events if e["kind"] == "tool_call_failed"}
    assert failed["m-3"]["content"]["error"] == "no index"
    assert parser.outcomes == {} and parser.stats.unknown == {}


def test_a_sandbox_refusal_is_denied() -> None:
    """A command the sandbox refused is denied (class policy_denied), not a success nor a
    plain failure: Codex's words in its output, an ``exec_command_end`` with a
    ``sandbox_error``, or, in a turn confined by its sandbox policy, the OS's
    "Operation not permitted". Unconfined, that is an ordinary failure."""
    def turn(policy: str) -> dict[str, Any]:
        return line("turn_context", {"turn_id": "t-1", "cwd": "/nonexistent/proj", "model": "gpt-5",
                                     "sandbox_policy": {"type": policy}})

    eperm = "Exit code: 1\nWall time: 0 seconds\nOutput:\nmkdir: cannot create directory '/etc/x': Operation not permitted"
    data = jsonl(
        V171, turn("workspace-write"),
        exec_call("c-1", "mkdir /etc/x"), output("c-1", eperm),
        exec_call("c-2", "curl example.com"), output("c-2", "failed in sandbox: network access is disabled"),
        exec_call("c-3", "touch /x"),
        line("event_msg", {"type": "exec_command_end", "call_id": "c-3", "exit_code": 1, "stdout": "", "stderr": "",
                           "sandbox_error": "the sandbox denied writing /x"}),
        output("c-3", "Exit code: 1\nWall time: 0 seconds\nOutput:\n"),
        exec_call("c-4", "rm /etc/y"), output("c-4", "Exit code: 1\nWall time: 0 seconds\nOutput:\nsandbox denied"),
        turn("danger-full-access"),
        exec_call("c-5", "mkdir /etc/x"), output("c-5", eperm),
    )
    _, events = parse(data)
    assert_valid(events)
    assert ends_of(events) == [
        ("tool_call_failed", "c-1", {"status": "denied", "class": "policy_denied", "exit_code": 1}),
        ("tool_call_failed", "c-2", {"status": "denied", "class": "policy_denied"}),
        ("tool_call_failed", "c-3", {"status": "denied", "class": "policy_denied", "exit_code": 1}),
        ("tool_call_failed", "c-4", {"status": "denied", "class": "policy_denied", "exit_code": 1}),
        ("tool_call_failed", "c-5", {"status": "failure", "class": "permission_denied", "exit_code": 1}),
    ]


def test_two_records_on_one_line_are_both_read(agentlog_home: Path, tmp_path: Path) -> None:
    """A line holding two records with no newline between them (``{…}{…}``) gives both
    records' events (each its own part of the line), and importing it again nothing."""
    from agentlog.api import import_paths, run_sql

    call = line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c-1",
                                  "arguments": json.dumps({"cmd": "false"})}, "2026-01-02T03:04:06.000Z")
    out = line("response_item", {"type": "function_call_output", "call_id": "c-1",
                                 "output": "Exit code: 1\nWall time: 0 seconds\nOutput:\n"}, "2026-01-02T03:04:07.000Z")
    path = tmp_path / "rollout-2026-01-02T03-04-05-s-171.jsonl"
    path.write_bytes(jsonl(V171) + json.dumps(call).encode() + json.dumps(out).encode() + b"\n")
    report = import_paths(str(agentlog_home), ["codex"], [str(path)])
    assert report.totals()["problems"] == 0
    rows = run_sql(str(agentlog_home), "select provider_call_id, outcome_status, exit_code, pairing "
                                        "from tool_calls").records()
    assert rows == [{"provider_call_id": "c-1", "outcome_status": "failure", "exit_code": 1, "pairing": "call_id"}]
    assert import_paths(str(agentlog_home), ["codex"], [str(path)]).totals()["events"] == 0
