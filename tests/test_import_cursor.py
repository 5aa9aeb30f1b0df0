"""Cursor transcript parser: the real fixture's golden counts, the mapping, times, ids, garbage."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from agentlog.core import fastjson
from agentlog.capture.adapters import common
from agentlog.capture.adapters import cursor as cursor_hook
from agentlog.importers.base import NOT_JSON, SourceLine, merge_key, text_digest
from agentlog.importers.cursor import LINE_STEP_US, CursorParser, parse_cursor_timestamp, split_user_text
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.core.model import Event

STEM = "Cala-OpenAI__0-full"


def fixture_path() -> Path:
    base = shared_dir()
    path = base / "fixtures" / "cursor" / f"{STEM}.jsonl" if base is not None else None
    if path is None or not path.is_file():
        pytest.fail(missing(path))
    return path


def record_of(data: bytes) -> Any:
    try:
        return fastjson.loads(data.decode("utf-8"))
    except ValueError:
        return NOT_JSON


PerLine = list[list[dict[str, Any]]]


def parse(data: bytes, path: str, hint: str | None = STEM, base_us: int = 0) -> tuple[CursorParser, PerLine]:
    """Feed ``data`` line by line; the events of each line (1-based lines, byte offsets)."""
    parser = CursorParser(path, hint)
    parser.base_time_us = base_us
    per_line: list[list[dict[str, Any]]] = []
    offset = 0
    for lineno, chunk in enumerate(data.split(b"\n"), 1):
        per_line.append(parser.feed(SourceLine(path, lineno, offset, chunk), record_of(chunk)))
        offset += len(chunk) + 1
    per_line.append(parser.finish())
    return parser, per_line


def flat(per_line: PerLine) -> list[dict[str, Any]]:
    return [ev for evs in per_line for ev in evs]


def lines(*records: Any) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else json.dumps(r).encode() for r in records)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "message": {"content": [{"type": "text", "text": text}]}}


@pytest.fixture(scope="module")
def fixture_events() -> tuple[CursorParser, list[list[dict[str, Any]]], bytes]:
    path = fixture_path()
    data = path.read_bytes()
    parser, per_line = parse(data, str(path))
    return parser, per_line, data


# -- the real transcript ----------------------------------------------------------


def test_fixture_golden_counts(fixture_events: Any) -> None:
    parser, per_line, _ = fixture_events
    events = flat(per_line)
    assert Counter(e["kind"] for e in events) == {
        "prompt_submitted": 5, "tool_call_started": 6, "agent_message": 7, "turn_stopped": 3, "turn_failed": 2,
    }
    assert sum(e["kind"] == "unknown" for e in events) == 0
    assert Counter(e["tool"]["name"] for e in events if e["kind"] == "tool_call_started") == {"Read": 3, "Shell": 3}
    assert parser.stats.records == {"user": 5, "assistant": 7, "turn_ended": 5}
    assert parser.stats.unknown == {} and parser.stats.unknown_fields == {}
    assert parser.stats.problem_count == 0
    # 17 lines and the empty piece after the final newline, which gives nothing
    assert len(per_line) == 19 and per_line[17] == [] and all(per_line[:17])


def test_fixture_prompts_lose_their_wrappers(fixture_events: Any) -> None:
    _, per_line, _ = fixture_events
    prompts = [e for e in flat(per_line) if e["kind"] == "prompt_submitted"]
    assert [e["attrs"]["source_line"] for e in prompts] == [1, 6, 9, 12, 17]
    texts = [e["content"]["prompt"] for e in prompts]
    assert texts[0].startswith("what @/Users/mauro/.cursor/projects/") and texts[0].endswith("in this pull what says")
    assert texts[1:] == [
        "difference between main and origin/main",
        "difference between main and origin/main in git context where each one reside?",
        "what should i do to fix the problem that there is now, and ot get the things from origin/main into my main",
        "git fetch origin",
    ]
    for e in prompts:
        assert "<" not in e["content"]["prompt"]
        assert e["attrs"]["prompt_wrapper"] == "user_query"
        assert e["attrs"]["prompt_kind"] == "human"
        assert e["attrs"]["merge_key"] == merge_key("cursor", STEM, "prompt_submitted",
                                                    text_digest(e["content"]["prompt"]))
    assert prompts[4]["attrs"]["prompt_timestamp_text"] == "Saturday, Aug 29, 2026, 1:33 PM (UTC+2)"


def test_fixture_events_are_valid_and_carry_the_reconstruction_attrs(fixture_events: Any) -> None:
    _, per_line, data = fixture_events
    raw_lines = data.split(b"\n")
    for evs in per_line:
        for index, e in enumerate(evs):
            Event.from_wire(e)
            assert e["provider"] == "cursor" and e["provider_session_id"] == STEM
            assert e["attrs"]["reconstructed"] is True
            assert e["attrs"]["reconstructed_from"] == "cursor_transcript"
            assert e["attrs"]["time_estimated"] is True
            assert "agent" not in e and "is_subagent" not in e["attrs"]
            assert ("raw" in e) == (index == 0)
            if index == 0:
                assert e["raw"] == {"line": raw_lines[e["attrs"]["source_line"] - 1].decode()}
    names = {e["attrs"]["source_line"]: e["provider_event_name"] for e in flat(per_line)}
    assert names[1] == "transcript:user" and names[2] == "transcript:assistant" and names[5] == "transcript:turn_ended"


def test_fixture_tool_calls_match_the_hook_adapter(fixture_events: Any) -> None:
    _, per_line, _ = fixture_events
    tools = [e for e in flat(per_line) if e["kind"] == "tool_call_started"]
    assert not any(e["kind"] in ("tool_call_finished", "tool_call_failed") for e in flat(per_line))
    for e in tools:
        assert e["attrs"]["result_unknown"] is True
        assert "call_id" not in e["tool"] and "outcome" not in e
        hook = cursor_hook.normalise({"hook_event_name": "preToolUse", "conversation_id": STEM,
                                      "tool_name": e["tool"]["name"], "tool_input": e["content"]["tool_input"]}, [])
        assert hook["tool"]["name"] == e["tool"]["name"] and hook["tool"]["category"] == e["tool"]["category"]
        assert hook.get("paths") == e.get("paths")
        assert hook["attrs"].get("command_category") == e["attrs"].get("command_category")
    reads = [e for e in tools if e["tool"]["name"] == "Read"]
    assert [e["tool"]["category"] for e in reads] == ["file_read"] * 3
    terminal = "/Users/mauro/.cursor/projects/Users-mauro-personal-project-cala-openai/terminals/1.txt"
    assert reads[0]["paths"] == [terminal]
    assert reads[1]["attrs"]["file_ext"] == "md"
    shells = [e for e in tools if e["tool"]["name"] == "Shell"]
    assert [e["tool"]["category"] for e in shells] == ["shell"] * 3
    assert shells[0]["content"]["command"].startswith("git status -sb && echo '---'")
    assert shells[0]["attrs"]["command_category"] == "git"


def test_fixture_turns_and_messages(fixture_events: Any) -> None:
    _, per_line, _ = fixture_events
    by_line = {e["attrs"]["source_line"]: e for e in flat(per_line) if e["provider_event_name"].endswith("turn_ended")}
    assert {n: e["kind"] for n, e in by_line.items()} == {
        5: "turn_stopped", 8: "turn_failed", 11: "turn_stopped", 15: "turn_stopped", 16: "turn_failed"}
    failed = by_line[8]
    assert failed["content"]["error"] == "User aborted request"
    assert failed["outcome"]["status"] == "failure" and failed["attrs"]["status"] == "error"
    assert by_line[5]["attrs"]["status"] == "success" and "outcome" not in by_line[5]
    assert [by_line[n]["attrs"]["turn_index"] for n in (5, 8, 11, 15, 16)] == [0, 1, 2, 3, 4]
    messages = [e for e in flat(per_line) if e["kind"] == "agent_message"]
    assert [e["attrs"]["source_line"] for e in messages] == [2, 3, 4, 7, 10, 13, 14]
    assert messages[0]["content"]["message"].startswith("I'll check the terminal output")


def test_fixture_times_come_from_the_prompt_timestamps(fixture_events: Any) -> None:
    _, per_line, _ = fixture_events
    events = flat(per_line)
    t0 = int(datetime(2026, 8, 29, 11, 20, tzinfo=timezone.utc).timestamp()) * 1_000_000
    t1 = int(datetime(2026, 8, 29, 11, 26, tzinfo=timezone.utc).timestamp()) * 1_000_000
    at = {e["attrs"]["source_line"]: e["observed_at"] for e in events}
    assert at[1] == t0 + 1 * LINE_STEP_US and at[5] == t0 + 5 * LINE_STEP_US
    assert at[6] == t1 + 6 * LINE_STEP_US and at[8] == t1 + 8 * LINE_STEP_US
    observed = [e["observed_at"] for e in events]
    assert observed == sorted(observed)
    assert all(e["captured_at"] == e["observed_at"] for e in events)


def test_event_ids_are_deterministic_and_distinct(fixture_events: Any) -> None:
    path = fixture_path()
    _, per_line, data = fixture_events
    ids = [e["event_id"] for e in flat(per_line)]
    _, again = parse(data, str(path))
    assert [e["event_id"] for e in flat(again)] == ids
    assert len(set(ids)) == len(ids) == 23


def test_identical_prompts_get_distinct_ids_but_one_merge_key() -> None:
    same = user("<user_query>go on</user_query>")
    _, per_line = parse(lines(same, same), "x.jsonl")
    a, b = flat(per_line)
    assert a["content"]["prompt"] == b["content"]["prompt"] == "go on"
    assert a["event_id"] != b["event_id"]
    assert a["attrs"]["merge_key"] == b["attrs"]["merge_key"]


def test_prompt_merge_key_matches_the_hook_prompt() -> None:
    text = "<timestamp>Monday, Jan 5, 2026, 9:00 AM (UTC)</timestamp>\n<user_query>\nfix it\n</user_query>"
    _, per_line = parse(lines(user(text)), "t.jsonl", hint="conv-1")
    (ev,) = flat(per_line)
    hook = cursor_hook.normalise({"hook_event_name": "beforeSubmitPrompt", "conversation_id": "conv-1",
                                  "prompt": "fix it"}, [])
    assert ev["attrs"]["merge_key"] == merge_key("cursor", hook["provider_session_id"], hook["kind"],
                                                 text_digest(hook["content"]["prompt"]))
    stamp = int(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000
    assert ev["observed_at"] == stamp + LINE_STEP_US


# -- time -------------------------------------------------------------------------


def test_base_time_until_a_timestamp_parses() -> None:
    data = lines({"role": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}},
                 user("<timestamp>no idea when</timestamp><user_query>q</user_query>"),
                 user("<timestamp>Sunday, Mar 1, 2026, 12:05 AM (UTC-5:30)</timestamp><user_query>r</user_query>"),
                 {"type": "turn_ended", "status": "success"})
    parser, per_line = parse(data, "t.jsonl", base_us=5_000_000_000)
    e1, e2, e3, e4 = flat(per_line)
    assert e1["observed_at"] == 5_000_000_000 + LINE_STEP_US
    assert e2["observed_at"] == 5_000_000_000 + 2 * LINE_STEP_US
    assert e2["attrs"]["prompt_timestamp_text"] == "no idea when"
    stamp = int(datetime(2026, 3, 1, 5, 35, tzinfo=timezone.utc).timestamp()) * 1_000_000
    assert e3["observed_at"] == stamp + 3 * LINE_STEP_US and e4["observed_at"] == stamp + 4 * LINE_STEP_US
    assert parser.stats.problems == [("t.jsonl", 2, "unparsed <timestamp> text")]


@pytest.mark.parametrize(("text", "utc"), [
    ("Saturday, Aug 29, 2026, 1:20 PM (UTC+2)", (2026, 8, 29, 11, 20)),
    ("Aug 29, 2026, 12:00 AM (UTC)", (2026, 8, 29, 0, 0)),
    ("Thursday, December 31, 2026, 11:59 PM (GMT-1)", (2027, 1, 1, 0, 59)),
    ("Fri, Feb 27, 2026, 14:30 (UTC+05:30)", (2026, 2, 27, 9, 0)),
])
def test_timestamp_text_parses(text: str, utc: tuple[int, int, int, int, int]) -> None:
    assert parse_cursor_timestamp(text) == int(datetime(*utc, tzinfo=timezone.utc).timestamp()) * 1_000_000


@pytest.mark.parametrize("text", [
    "Saturday, Aug 29, 2026, 1:20 PM",  # no zone
    "Saturday, Aug 29, 2026, 13:20 PM (UTC)",
    "Feb 30, 2026, 1:20 PM (UTC)",
    "Foo 3, 2026, 1:20 PM (UTC)",
    "2026-08-29T11:20:00Z",
    "",
    "Aug 29, 2026, 1:20 PM (UTC+99)",
])
def test_timestamp_text_rejects(text: str) -> None:
    assert parse_cursor_timestamp(text) is None


def test_split_user_text_without_wrapper() -> None:
    assert split_user_text("<timestamp>x</timestamp>\nplain question ") == ("plain question", "x", False)
    assert split_user_text("<user_query>\nunterminated") == ("unterminated", None, True)
    assert split_user_text("just text") == ("just text", None, False)


# -- subagents ----------------------------------------------------------------------


def test_subagent_transcript() -> None:
    path = "/h/.cursor/projects/p/agent-transcripts/parent-1/subagents/sub-9.jsonl"
    _, per_line = parse(lines(user("<user_query>task</user_query>"),
                              {"role": "assistant", "message": {"content": [
                                  {"type": "tool_use", "name": "Grep", "input": {"pattern": "x", "path": "/p"}}]}}),
                        path, hint="sub-9")
    events = flat(per_line)
    assert len(events) == 2
    for e in events:
        Event.from_wire(e)
        assert e["provider_session_id"] == "sub-9"
        assert e["agent"] == {"agent_id": "sub-9"}
        assert e["attrs"]["is_subagent"] is True
        assert e["attrs"]["parent_conversation_id"] == "parent-1"
    assert events[1]["tool"] == {"name": "Grep", "category": "search"}
    _, main = parse(lines(user("x")), "/h/agent-transcripts/parent-1/parent-1.jsonl", hint="parent-1")
    assert "is_subagent" not in flat(main)[0]["attrs"] and "agent" not in flat(main)[0]


def test_session_falls_back_to_the_file_stem() -> None:
    _, per_line = parse(lines(user("x")), "/a/agent-transcripts/abc/abc.jsonl", hint=None)
    assert flat(per_line)[0]["provider_session_id"] == "abc"


# -- garbage --------------------------------------------------------------------------


def test_garbage_never_raises_and_is_reported() -> None:
    big = "y" * 1_000_000
    data = lines(
        b"{not json",                                                          # 1
        [1, 2, 3],                                                             # 2
        {"role": "user", "message": {"content": {"type": "text"}}},            # 3 content not a list
        {"role": "assistant", "message": {"content": 7}},                      # 4
        {"role": "assistant", "message": {"content": [{"text": "no type"}, "str", None]}},  # 5
        user("<user_query>" + big + "</user_query>"),                          # 6
        {"role": "assistant", "message": {"content": [{"type": "text", "text": big}]}},  # 7
        {"type": "checkpoint", "id": 3},                                       # 8
        {"role": "system", "message": {"content": []}},                        # 9
        {"role": "user", "message": {"content": []}},                          # 10
        {"role": "assistant", "message": "hello"},                             # 11
        {"role": "assistant", "message": {"content": [{"type": "thinking", "thinking": "hm"},
                                                      {"type": "tool_use", "input": 5},
                                                      {"type": "text", "text": 5}]}},  # 12
        {"type": "turn_ended", "status": 3, "error": {"message": "boom"}},     # 13
        {},                                                                    # 14
        b"\xff\xfe\x00",                                                       # 15
        b"   ",                                                                # 16 blank
        {"role": "user", "message": {"content": "<user_query>as a string</user_query>"}, "extra": 1},  # 17
    )
    parser, per_line = parse(data, "g.jsonl")
    for evs in per_line[:15]:
        assert evs, "every non-blank line gives at least one event"
    assert per_line[15] == []
    for e in flat(per_line):
        Event.from_wire(e)
    kinds = {n: [e["kind"] for e in per_line[n - 1]] for n in range(1, 18)}
    errors = {n: [e["attrs"].get("payload_error") for e in per_line[n - 1]] for n in range(1, 18)}
    assert errors[1] == ["invalid_json"] and errors[2] == ["payload_not_object"]
    assert errors[3] == errors[4] == ["bad_content"]
    assert errors[5] == ["bad_block"] * 3
    assert kinds[6] == ["prompt_submitted"] and per_line[5][0]["attrs"]["prompt_chars"] == 1_000_000
    assert kinds[7] == ["agent_message"] and len(per_line[6][0]["content"]["message"]) == 1_000_000
    assert kinds[8] == ["unknown"] and per_line[7][0]["attrs"]["unrecognised"] is True
    assert kinds[9] == ["unknown"]
    assert errors[10] == ["empty_content"] and errors[11] == ["bad_message"]
    assert kinds[12] == ["unknown", "tool_call_started", "unknown"]
    assert per_line[11][1]["attrs"]["payload_error"] == "missing_tool_name"
    assert kinds[13] == ["turn_stopped"] and per_line[12][0]["content"]["error"] == "boom"
    assert errors[14] == [None] and kinds[14] == ["unknown"]
    assert errors[15] == ["invalid_json"] and "line_b64" in per_line[14][0]["raw"]
    assert kinds[17] == ["prompt_submitted"] and per_line[16][0]["content"]["prompt"] == "as a string"
    problem_lines = sorted({n for _, n, _ in parser.stats.problems})
    assert problem_lines == [1, 2, 3, 4, 5, 11, 12, 15]
    assert parser.stats.unknown == {("", "checkpoint"): 1, ("", "system"): 1, ("", "user.empty"): 1,
                                    ("", "assistant.thinking"): 1, ("", "(none)"): 1}
    assert parser.stats.unknown_fields[("", "turn_ended.status:(none)")] == 1
    assert parser.stats.unknown_fields[("", "user.message.content:string")] == 1
    assert parser.stats.unknown_fields[("", "user.extra")] == 1
    assert parser.stats.records["not_json"] == 2 and parser.stats.records["not_object"] == 1


def test_a_bug_in_the_mapping_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ev: Any, prompt: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(common, "prompt_facts", boom)
    parser, per_line = parse(lines(user("<user_query>x</user_query>")), "b.jsonl")
    (ev,) = flat(per_line)
    Event.from_wire(ev)
    assert ev["kind"] == "unknown" and ev["attrs"]["adapter_error"] == "RuntimeError" and "raw" in ev
    assert parser.stats.problems == [("b.jsonl", 1, "parser error: RuntimeError")]
