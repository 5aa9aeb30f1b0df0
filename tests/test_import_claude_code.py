"""Importing Claude Code transcripts: the real fixtures, merging with hooks,
offsets, hostile files, usage."""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers import run
from agentlog.importers.claude_code import ClaudeCodeParser
from agentlog.importers.run import import_paths
from agentlog.core.model import Event
from import_support import lines_held, parse_claude_transcript, source_lines
from import_support import log_events as _log_events

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures" / "claude-code"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=missing(FIXTURES))

# Per file, counted by hand from the files (subagents: the distinct agent ids of
# agent_progress records; tool_use blocks, including the subagents' nested in
# agent_progress records; tool_result blocks; is_error ones; model responses with usage
# and their final usage summed per message id).
GOLDEN: dict[str, dict[str, Any]] = {
    "ckpt-03": {"subagents": 0, "started": 5, "ended": 5, "failed": 1, "prompts": 1, "responses": 6,
                "usage": (50, 990, 215249, 45670)},
    "ckpt-04": {"subagents": 0, "started": 9, "ended": 9, "failed": 2, "prompts": 2, "responses": 7,
                "usage": (84, 3281, 157550, 66741)},
    "ckpt-10": {"subagents": 1, "started": 22, "ended": 22, "failed": 1, "prompts": 6, "responses": 14,
                "usage": (14, 53, 668613, 132836)},
    "ckpt-1e": {"subagents": 0, "started": 13, "ended": 13, "failed": 0, "prompts": 8, "responses": 20,
                "usage": (202, 50, 850255, 94226)},
    "ckpt-5c": {"subagents": 0, "started": 10, "ended": 10, "failed": 2, "prompts": 1, "responses": 5,
                "usage": (42, 8, 193753, 27063)},
    "ckpt-60": {"subagents": 1, "started": 37, "ended": 36, "failed": 1, "prompts": 5, "responses": 30,
                "usage": (9469, 2105, 1073943, 62315)},
    "ckpt-91": {"subagents": 0, "started": 59, "ended": 59, "failed": 3, "prompts": 2, "responses": 56,
                "usage": (60, 1875, 4575511, 172411)},
}


def _fixture(tag: str) -> Path:
    (path,) = FIXTURES.glob(f"*{tag}*.jsonl")
    return path


def _parse(path: Path | str) -> tuple[list[dict[str, Any]], ClaudeCodeParser]:
    events, parser = parse_claude_transcript(path)
    return events, parser


@needs_fixtures
@pytest.mark.parametrize("tag", sorted(GOLDEN))
def test_each_fixture_maps_to_its_golden_counts(tag: str) -> None:
    events, parser = _parse(_fixture(tag))
    want = GOLDEN[tag]
    kinds = Counter(e["kind"] for e in events)
    assert kinds["tool_call_started"] == want["started"]
    assert kinds["tool_call_finished"] + kinds["tool_call_failed"] + kinds["permission_denied"] == want["ended"]
    assert kinds["tool_call_failed"] + kinds["permission_denied"] == want["failed"]
    assert kinds["prompt_submitted"] == want["prompts"]
    assert kinds["usage"] == want["responses"]
    assert kinds["unknown"] == 0 and not parser.stats.unknown and parser.stats.problem_count == 0
    # subagents: the events name each one the file has (counted from the JSON here, independently)
    from_json = set()
    for raw in _fixture(tag).read_text().splitlines():
        rec = json.loads(raw)
        data = rec.get("data") if rec.get("type") == "progress" else None
        if isinstance(data, dict) and data.get("type") == "agent_progress":
            from_json.add(data["agentId"])
        if rec.get("agentId"):
            from_json.add(rec["agentId"])
    named = {e["agent"]["agent_id"] for e in events if "agent_id" in e.get("agent", {})}
    assert len(named) == len(from_json) == want["subagents"] and named == from_json
    assert all(e["attrs"]["is_subagent"] for e in events if "agent_id" in e.get("agent", {}))
    # every result pairs with the tool_use of the same id, and names its tool
    started = {e["tool"]["call_id"]: e["tool"]["name"] for e in events if e["kind"] == "tool_call_started"}
    for e in events:
        if e["kind"] in ("tool_call_finished", "tool_call_failed"):
            assert started[e["tool"]["call_id"]] == e["tool"]["name"]
            assert not e["attrs"].get("unpaired_result")
    for e in events:
        Event.from_wire(e)  # the canonical model accepts every event
        assert e["attrs"]["reconstructed"] is True and e["attrs"]["source_file"] == str(_fixture(tag))
        assert e["provider"] == "claude_code" and e["provider_event_name"].startswith("transcript:")
    # ids are a function of the file: the same on a second parse, all distinct
    again, _ = _parse(_fixture(tag))
    assert [e["event_id"] for e in again] == [e["event_id"] for e in events]
    assert len({e["event_id"] for e in events}) == len(events)


@needs_fixtures
def test_usage_totals_equal_a_count_made_from_the_json() -> None:
    """Independent count: per message id the last record's usage, summed."""
    for tag in GOLDEN:
        path = _fixture(tag)
        last: dict[str, dict[str, int]] = {}
        for raw in path.read_text().splitlines():
            rec = json.loads(raw)
            nested = (rec.get("data") or {}).get("message") if rec.get("type") == "progress" else None
            for r in (rec, nested):
                if isinstance(r, dict) and r.get("type") == "assistant":
                    msg = r.get("message") or {}
                    if msg.get("id") and isinstance(msg.get("usage"), dict):
                        last[msg["id"]] = msg["usage"]
        want = tuple(sum(int(u.get(k) or 0) for u in last.values()) for k in (
            "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
        events, _ = _parse(path)
        got = tuple(sum(e["attrs"][k] for e in events if e["kind"] == "usage") for k in (
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
        assert got == want == GOLDEN[tag]["usage"], tag


@needs_fixtures
def test_import_twice_changes_nothing_and_every_event_is_ingested(agentlog_home: Path) -> None:
    from agentlog.projection.persist import refresh
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    first = import_paths(str(agentlog_home), ["claude-code"], [str(FIXTURES)])
    assert first.totals()["errors"] == 0 and first.totals()["events"] > 500
    logs = {p: p.read_bytes() for p in (agentlog_home / "logs").rglob("*.jsonl")}
    second = import_paths(str(agentlog_home), ["claude-code"], [str(FIXTURES)])
    assert second.totals()["events"] == 0 and {f.mode for f in second.files} == {"unchanged"}
    assert {p: p.read_bytes() for p in (agentlog_home / "logs").rglob("*.jsonl")} == logs
    # the state forgotten: every line is read again, nothing is written twice
    os.remove(agentlog_home / "state" / "import.json")
    third = import_paths(str(agentlog_home), ["claude-code"], [str(FIXTURES)])
    assert third.totals()["events"] == 0 and third.totals()["duplicates"] == first.totals()["events"]
    assert {p: p.read_bytes() for p in (agentlog_home / "logs").rglob("*.jsonl")} == logs
    # ingested and projected like hook events
    assert ingest(str(agentlog_home)).events == first.totals()["events"]
    refresh(str(agentlog_home))
    with Engine(str(agentlog_home)) as engine:
        assert engine.run("SELECT count(*) FROM sessions").rows[0][0] == len(GOLDEN)
        calls = engine.run("SELECT count(*) FROM tool_calls").rows[0][0]
    assert calls == sum(g["started"] for g in GOLDEN.values())


@needs_fixtures
def test_a_grown_file_imports_only_its_new_lines_and_a_replaced_one_no_duplicates(
        agentlog_home: Path, tmp_path: Path) -> None:
    source = _fixture("ckpt-91").read_bytes()
    lines = source.splitlines(keepends=True)
    # cut right after a tool_use: its result is in the part imported second
    cut = next(i for i, raw in enumerate(lines) if b'"type":"tool_use"' in raw and i > 60) + 1
    path = tmp_path / "projects" / "-work-x" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:cut]))
    a = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    b = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert b.files[0].mode == "grown" and b.files[0].lines == len(lines) - cut
    # the result found its call (carried over from the first import): named, paired
    ended = [e for e in _log_events(agentlog_home) if e["kind"] in ("tool_call_finished", "tool_call_failed")]
    assert ended and not any(e["attrs"].get("unpaired_result") for e in ended)
    whole, _ = _parse(_fixture("ckpt-91"))
    # nothing lost, nothing twice (a response cut by the first import adds one more usage row)
    logged = [e for e in _log_events(agentlog_home) if e["kind"] not in ("usage", "transcript_line")]
    assert sorted(e["event_id"] for e in logged) == sorted(e["event_id"] for e in whole if e["kind"] != "usage")
    # the lines kept on their own are those a whole import (of a file of that name) keeps
    other = tmp_path / "other"
    copy = other / "projects" / "-work-x" / "session.jsonl"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(source)
    import_paths(str(other), ["claude-code"], [str(copy)])
    kept = sorted(e["event_id"] for e in _log_events(agentlog_home) if e["kind"] == "transcript_line")
    assert kept and kept == sorted(e["event_id"] for e in _log_events(other) if e["kind"] == "transcript_line")
    assert a.totals()["events"] + b.totals()["events"] == len(_log_events(agentlog_home))
    # replaced by a shorter file (same name, other content): read again, nothing duplicated
    path.unlink()
    path.write_bytes(b"".join(lines[:50]))
    c = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert c.files[0].mode == "replaced" and c.totals()["events"] == 0


@needs_fixtures
def test_a_session_recorded_by_hooks_then_imported_has_each_tool_call_once(agentlog_home: Path) -> None:
    """Hook payloads made from the transcript's own tool calls go through the real
    capture path first; the import then adds only what hooks do not see."""
    from agentlog.capture.hook import build, record

    events, _ = _parse(_fixture("ckpt-5c"))
    session = events[0]["provider_session_id"]
    calls = [e for e in events if e["kind"] == "tool_call_started"]
    for e in calls:
        payload = {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": e["tool"]["name"],
                   "tool_use_id": e["tool"]["call_id"], "tool_input": {}, "cwd": "/nonexistent"}
        captured = build("claude-code", json.dumps(payload).encode(), 0, [])
        record(captured, str(agentlog_home), "relaxed")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(_fixture("ckpt-5c"))])
    assert report.totals()["duplicates"] == len(calls)
    logged = _log_events(agentlog_home)
    starts = Counter(e["tool"]["call_id"] for e in logged if e["kind"] == "tool_call_started")
    assert set(starts.values()) == {1} and len(starts) == len(calls)
    # the transcript filled in what hooks lack: results, messages, usage
    kinds = Counter(e["kind"] for e in logged)
    assert kinds["agent_message"] > 0 and kinds["usage"] > 0 and kinds["tool_call_finished"] > 0
    # and its lines are all kept, those of the calls the hooks recorded on their own
    assert lines_held(agentlog_home) == source_lines([_fixture("ckpt-5c")])
    merged = [e for e in logged if e["kind"] == "transcript_line" and "carrier_event_id" in e["attrs"]]
    assert len(merged) == len(calls) and {e["attrs"]["carrier_kind"] for e in merged} == {"tool_call_started"}
    for e in merged:
        Event.from_wire(e)
    # importing again, even from the start, writes nothing
    os.remove(agentlog_home / "state" / "import.json")
    assert import_paths(str(agentlog_home), ["claude-code"], [str(_fixture("ckpt-5c"))]).totals()["events"] == 0


def test_hostile_files_are_reported_and_the_import_goes_on(agentlog_home: Path, tmp_path: Path) -> None:
    good = {"type": "user", "sessionId": "s-hostile", "timestamp": "2026-11-01T10:00:00Z",
            "message": {"role": "user", "content": "fix the build"}}
    huge = json.dumps({"type": "user", "sessionId": "s-hostile", "timestamp": "2026-11-01T10:00:01Z",
                       "message": {"role": "user", "content": "x" * (12 << 20)}}).encode()
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join([
        json.dumps(good).encode(),
        b"this is not json",
        b"\xff\xfe garbage \x00",
        b"[1, 2, 3]",
        b'{"type": "user", "message": 5}',
        b'{"type": "brand-new-record", "version": "9.9.9", "sessionId": "s-hostile"}',
        huge,
        b'{"type": "user", "sessionId": "s-hostile", "timestamp": "2026-11-01T10:00:02Z", '
        b'"message": {"role": "user", "content": "caf\xc3\xa9 \xff ok"}}',
    ]) + b"\n")
    not_jsonl = tmp_path / "notes.jsonl"
    not_jsonl.write_bytes(b"# a markdown file\n\nwith no JSON at all\n")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path), str(not_jsonl)])
    hostile, notes = sorted(report.files, key=lambda f: f.path != str(path))
    assert hostile.error is None and hostile.lines == 8
    # line 8 is JSON with an invalid UTF-8 byte: imported (the byte replaced) and reported
    assert {p["line"] for p in hostile.problems} == {2, 3, 4, 5, 8}
    assert all(p["file"] == str(path) for p in hostile.problems)
    (bad_utf8,) = [p["message"] for p in hostile.problems if p["line"] == 8]
    assert "invalid UTF-8" in bad_utf8 and "U+FFFD" in bad_utf8 and "imported" in bad_utf8
    assert hostile.unknown == {"9.9.9/brand-new-record": 1}
    logged = _log_events(agentlog_home)
    prompts = [e for e in logged if e["kind"] == "prompt_submitted"]
    assert len(prompts) == 3  # the good one, the 12 MB one, the one with a bad byte
    assert any(len(e["content"]["prompt"]) == 12 << 20 for e in prompts)
    assert [e["attrs"]["record_type"] for e in logged if e["kind"] == "unknown"] == ["brand-new-record"]
    # the replacement made is in the prompt; raw keeps the bytes as they were
    (repaired,) = [e for e in prompts if e["attrs"]["source_line"] == 8]
    assert "\ufffd ok" in repaired["content"]["prompt"]
    assert base64.b64decode(repaired["raw"]["line_b64"]).endswith(b'caf\xc3\xa9 \xff ok"}}')
    # the lines that are not JSON objects are kept too, as they were (nothing projected from them)
    kept = {e["attrs"]["source_line"]: e for e in logged if e["kind"] == "transcript_line"}
    assert base64.b64decode(kept[3]["raw"]["line_b64"]) == b"\xff\xfe garbage \x00"
    assert kept[2]["raw"]["line"] == "this is not json" and kept[2]["attrs"]["not_json"] is True
    assert notes.error is None and notes.problem_count == 2 and notes.events == notes.kept_lines == 2


def test_a_line_over_the_cap_is_skipped_with_bounded_memory(agentlog_home: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "MAX_LINE", 1 << 20)
    monkeypatch.setattr(run, "CHUNK", 64 << 10)
    ok = json.dumps({"type": "user", "sessionId": "s-cap", "timestamp": "2026-11-01T10:00:00Z",
                     "message": {"role": "user", "content": "after"}}).encode()
    path = tmp_path / "cap.jsonl"
    path.write_bytes(b'{"type": "user", "x": "' + b"y" * (3 << 20) + b'"}\n' + ok + b"\n")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    (f,) = report.files
    assert f.lines == 2 and f.problem_count == 1 and "longer than" in f.problems[0]["message"]
    assert f.problems[0]["line"] == 1
    assert [e["content"]["prompt"] for e in _log_events(agentlog_home)] == ["after"]


def test_lines_of_12_mb_import_in_bounded_memory(agentlog_home: Path, tmp_path: Path) -> None:
    """Ten lines of 12 MB (prompts: their text is both the event's content and its raw)
    imported by a child process: its peak RSS stays under 400 MiB. Held together (the
    2,000-event batch alone) they took 819 MiB; written as they come (the byte budget,
    8 MiB of lines) 206 MiB, measured. The bound: the interpreter with the importer
    (~60-90 MiB) plus one such line's working set — read buffer, line, parsed record,
    content, raw, the serialised event, the redactor's pass: ~100 MiB — with room for
    the allocator keeping freed pages; ten lines held at once cannot fit under it."""
    import subprocess
    import sys

    path = tmp_path / "big.jsonl"
    with open(path, "wb") as fh:
        for i in range(10):
            fh.write(json.dumps({"type": "user", "sessionId": "s-big", "timestamp": f"2026-11-01T10:00:{i:02d}Z",
                                 "message": {"role": "user", "content": f"{i} " + "x" * (12 << 20)}}).encode() + b"\n")
    # the child's own high-water mark (VmHWM, of the memory it has since exec): its ru_maxrss
    # counts the parent's resident set at the fork too (485 MiB once under a large pytest worker)
    child = ("import sys\n"
             "from agentlog.importers.run import import_paths\n"
             "r = import_paths(sys.argv[1], ['claude-code'], [sys.argv[2]], workers=1)\n"
             "hwm = [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')][0]\n"
             "print(r.totals()['events'], hwm)\n")
    out = subprocess.run([sys.executable, "-c", child, str(agentlog_home), str(path)], check=True,
                         capture_output=True, text=True, env={**os.environ, "AGENTLOG_HOME": str(agentlog_home)})
    events, peak_kib = map(int, out.stdout.split())
    assert events == 10
    assert peak_kib < 400 << 10, f"peak RSS {peak_kib >> 10} MiB"
    assert sorted(len(e["content"]["prompt"]) for e in _log_events(agentlog_home)) == [(12 << 20) + 2] * 10


def test_compaction_queued_prompts_and_api_errors_map_to_their_events(agentlog_home: Path, tmp_path: Path) -> None:
    """Hand-made records in the shapes of hooks.md §5.1: compaction boundaries (and the
    summary prompt after one), queued prompts, an assistant API error message and a
    system api_error — each to its event, none a prompt that opens a turn."""
    from agentlog.projection.persist import refresh
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    env = {"sessionId": "s-x", "cwd": str(tmp_path), "version": "2.1.42", "isSidechain": False}

    def rec(i: int, **kw: Any) -> dict[str, Any]:
        return {**env, "uuid": f"u{i}", "timestamp": f"2026-11-01T10:00:{i:02d}Z", **kw}

    records = [
        rec(1, type="user", message={"role": "user", "content": "refactor the parser"}),
        rec(2, type="system", subtype="compact_boundary", content="Conversation compacted", level="info",
            parentUuid=None, logicalParentUuid="u1", compactMetadata={"trigger": "auto", "preTokens": 155000}),
        rec(3, type="user", isCompactSummary=True, isVisibleInTranscriptOnly=True,
            message={"role": "user", "content": "This session is being continued from a previous conversation."}),
        rec(4, type="system", subtype="microcompact_boundary", content="Context microcompacted", level="info",
            microcompactMetadata={"trigger": "auto", "preTokens": 90000, "tokensSaved": 12000,
                                  "compactedToolIds": ["t1"]}),
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-11-01T10:00:05Z", "sessionId": "s-x",
         "content": "also fix the tests"},
        {"type": "queue-operation", "operation": "dequeue", "timestamp": "2026-11-01T10:00:06Z", "sessionId": "s-x"},
        rec(7, type="assistant", isApiErrorMessage=True, error="rate_limit",
            message={"id": "m-err", "model": "<synthetic>", "role": "assistant", "type": "message",
                     "content": [{"type": "text", "text": "API Error: 529 Overloaded"}],
                     "usage": {"input_tokens": 0, "output_tokens": 0}}),
        rec(8, type="system", subtype="api_error", level="error", retryInMs=1200, retryAttempt=2, maxRetries=10,
            error={"status": 529, "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    path = tmp_path / "s-x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert report.files[0].problem_count == 0 and not report.files[0].unknown
    by_line = {e["attrs"]["source_line"]: e for e in _log_events(agentlog_home)}
    assert {n: e["kind"] for n, e in by_line.items()} == {
        1: "prompt_submitted", 2: "compaction_finished", 3: "notification", 4: "compaction_finished",
        5: "notification", 6: "transcript_line", 7: "notification", 8: "notification"}
    compact, summary, micro = by_line[2]["attrs"], by_line[3], by_line[4]["attrs"]
    assert (compact["trigger"], compact["pre_tokens"], compact["micro"]) == ("auto", 155000, False)
    assert summary["attrs"]["compact_summary"] is True and summary["content"]["message"].startswith("This session")
    assert (micro["pre_tokens"], micro["tokens_saved"], micro["micro"]) == (90000, 12000, True)
    queued = by_line[5]
    assert queued["attrs"]["queued_prompt"] is True and queued["content"]["message"] == "also fix the tests"
    assert by_line[6]["attrs"]["record_type"] == "queue-operation"  # a dequeue: its line kept, no event
    api_message = by_line[7]
    assert api_message["attrs"]["api_error"] is True and api_message["attrs"]["level"] == "error"
    assert api_message["attrs"]["error_type"] == "rate_limit"
    assert api_message["content"]["message"] == "API Error: 529 Overloaded"
    system_error = by_line[8]["attrs"]
    assert system_error["level"] == "error" and system_error["retry_attempt"] == 2
    assert (system_error["max_retries"], system_error["error_status"], system_error["error_type"]) == (
        10, 529, "overloaded_error")
    assert not any(e["kind"] == "usage" for e in by_line.values())  # an API error is no billed response
    ingest(str(agentlog_home))
    refresh(str(agentlog_home))
    with Engine(str(agentlog_home)) as engine:
        assert engine.run("SELECT prompt_count, turn_count FROM sessions").rows == [(1, 1)]


def test_subagent_files_and_sidechains_name_their_agent(tmp_path: Path) -> None:
    sub = tmp_path / "sess-1" / "subagents" / "agent-a1b2.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_text(json.dumps({
        "type": "assistant", "sessionId": "sess-1", "isSidechain": True, "timestamp": "2026-11-01T10:00:00Z",
        "message": {"id": "msg_1", "model": "m", "content": [{"type": "tool_use", "id": "tu_1", "name": "Read",
                                                                 "input": {"file_path": "/w/a.py"}}],
                    "usage": {"input_tokens": 3, "output_tokens": 4}}}) + "\n")
    (sub.parent / "agent-a1b2.meta.json").write_text(json.dumps({"agentType": "Explore", "description": "look"}))
    events, _ = _parse(sub)
    assert [e["kind"] for e in events] == ["tool_call_started", "usage"]
    for e in events:
        assert e["agent"]["agent_id"] == "a1b2" and e["attrs"]["is_subagent"] is True
        assert e["provider_session_id"] == "sess-1"
    assert events[0]["agent"]["agent_type"] == "Explore"


def test_the_cli_imports_and_reports(agentlog_home: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    projects = tmp_path / "claude" / "projects" / "-w"
    projects.mkdir(parents=True)
    if FIXTURES.is_dir():
        shutil.copy(_fixture("ckpt-03"), projects / "s.jsonl")
    else:  # pragma: no cover
        (projects / "s.jsonl").write_text("")
    runner = CliRunner()
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "AGENTLOG_HOME": str(agentlog_home)}
    dry = runner.invoke(cli, ["import", "claude-code", "--dry-run", "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["dry_run"] is True and not (agentlog_home / "logs").exists()
    done = runner.invoke(cli, ["import", "claude-code", "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["totals"]["files"] == 1
    if FIXTURES.is_dir():  # the summary counts the lines kept on their own (ckpt-03: 9)
        assert json.loads(done.output)["totals"]["kept_lines"] == 9
        os.remove(agentlog_home / "state" / "import.json")
        table = runner.invoke(cli, ["import", "claude-code"], env=env)
        assert table.exit_code == 0 and "lines kept alone" in table.output and "(0 of them lines kept" in table.output
    bad = runner.invoke(cli, ["import", "claude-code", "--since", "not a time"], env=env)
    assert bad.exit_code == 2 and "--since" in bad.output


@needs_fixtures
def test_turn_ends_a_hook_recorded_are_not_imported_again(agentlog_home: Path) -> None:
    from agentlog.capture.hook import build, record

    events, _ = _parse(_fixture("ckpt-1e"))
    session = events[0]["provider_session_id"]
    stops = [e for e in events if e["kind"] == "turn_stopped"]
    assert len(stops) == 6
    for e in stops[:4]:  # hooks saw four of the six, a second after the transcript's record
        payload = {"session_id": session, "hook_event_name": "Stop", "cwd": "/nonexistent"}
        record(build("claude-code", json.dumps(payload).encode(), 0, [], captured_at=e["observed_at"] + 1_000_000),
               str(agentlog_home), "relaxed")
    import_paths(str(agentlog_home), ["claude-code"], [str(_fixture("ckpt-1e"))])
    logged = [e for e in _log_events(agentlog_home) if e["kind"] == "turn_stopped"]
    assert len(logged) == 6
    assert sum(1 for e in logged if e["attrs"].get("reconstructed")) == 2


def test_unknown_record_types_reach_doctor(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.install.doctor import unrecognised_shapes

    path = tmp_path / "drift.jsonl"
    lines = [json.dumps({"type": "hologram", "version": "3.0.1", "sessionId": "s-drift"}) for _ in range(3)]
    lines.append(json.dumps({"type": "assistant", "version": "3.0.1", "sessionId": "s-drift",
                             "message": {"id": "m1", "content": [{"type": "smell", "odour": "ozone"}]}}))
    path.write_text("\n".join(lines) + "\n")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert report.files[0].unknown == {"3.0.1/hologram": 3}
    assert report.files[0].unknown_fields == {"3.0.1/assistant.smell": 1}
    field, record = unrecognised_shapes(str(agentlog_home))
    assert record.provider == "claude_code" and record.count == 3
    assert "hologram" in record.event and "3.0.1" in record.event
    assert "assistant.smell" in field.event and field.count == 1


@needs_fixtures
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_importing_a_growing_file_in_any_chunks_equals_importing_it_whole(data: st.DataObject,
                                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """The file is written in random pieces (cut anywhere, even inside a line), imported
    after each; sometimes it is replaced by an earlier prefix before growing again. In
    the end the logs hold what one import of the whole file gives (usage aside: a
    response cut while being written may add a row the usage view then hides)."""
    source = _fixture(data.draw(st.sampled_from(sorted(GOLDEN)), label="file")).read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(1, len(source) - 1), max_size=6, unique=True), label="cuts"))
    replace_at = data.draw(st.none() | st.sampled_from(cuts or [None]), label="replace after")  # type: ignore[list-item]
    work = tmp_path_factory.mktemp("grow")
    # named as Claude Code names it, after its session (the records before the first that
    # names the session, kept on their own, then belong to it whatever was imported first)
    session = next(json.loads(raw)["sessionId"] for raw in source.splitlines() if b'"sessionId"' in raw)
    root, path = work / "home", work / "projects" / "-w" / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    written = 0
    for cut in cuts + [len(source)]:
        with open(path, "ab") as fh:
            fh.write(source[written:cut])
        written = cut
        import_paths(str(root), ["claude-code"], [str(path)], workers=1)
        if cut == replace_at:  # replaced by an earlier prefix (other inode), then it grows again
            path.unlink()
            path.write_bytes(source[: cut // 2])
            written = cut // 2
            import_paths(str(root), ["claude-code"], [str(path)], workers=1)
    whole, _ = _parse(path)
    logged = [e for e in _log_events(root) if e["kind"] != "usage"]
    assert sorted(e["event_id"] for e in logged if e["kind"] != "transcript_line") == sorted(
        e["event_id"] for e in whole if e["kind"] != "usage")
    # the lines kept on their own too: those one import of the whole file keeps
    once = work / "once" / "projects" / "-w" / f"{session}.jsonl"
    once.parent.mkdir(parents=True)
    once.write_bytes(source)
    import_paths(str(work / "once-home"), ["claude-code"], [str(once)], workers=1)
    assert sorted(e["event_id"] for e in logged if e["kind"] == "transcript_line") == sorted(
        e["event_id"] for e in _log_events(work / "once-home") if e["kind"] == "transcript_line")
    # and every result found its call
    assert not any(e["attrs"].get("unpaired_result") for e in logged) or \
        any(e["attrs"].get("unpaired_result") for e in whole)


def test_a_file_rewritten_in_place_with_other_first_bytes_is_read_again(agentlog_home: Path, tmp_path: Path) -> None:
    """Same inode, larger than before, other content: not taken for a grown file."""
    def prompt(sid: str, text: str) -> bytes:
        return json.dumps({"type": "user", "sessionId": sid, "timestamp": "2026-11-01T10:00:00Z",
                           "message": {"role": "user", "content": text}}).encode() + b"\n"

    path = tmp_path / "s.jsonl"
    path.write_bytes(prompt("s-a", "first"))
    ino = path.stat().st_ino
    import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    with open(path, "r+b") as fh:  # rewritten in place: same inode
        fh.write(prompt("s-b", "other") + prompt("s-b", "and more"))
    assert path.stat().st_ino == ino
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert report.files[0].mode == "replaced" and report.files[0].events == 2
    assert sorted(e["content"]["prompt"] for e in _log_events(agentlog_home)) == ["and more", "first", "other"]


def test_secrets_in_a_transcript_reach_no_file(agentlog_home: Path, tmp_path: Path) -> None:
    """Prompt, tool input, tool output (JSON in a string), an invalid-UTF-8 line and a call
    still open when the file ends (its input is carried in the import state): the
    secrets are redacted in the logs and the state alike, and counted."""
    gh = "ghp_" + "Q" * 36
    pw = "hunter2-Zq9x"
    aws = "AKIA" + "Z" * 16
    sid = "s-secret"

    def rec(i: int, typ: str, content: Any) -> dict[str, Any]:
        return {"type": typ, "sessionId": sid, "uuid": f"u{i}", "timestamp": f"2026-11-01T10:00:0{i}Z",
                "cwd": str(tmp_path), "message": {"role": typ, "id": f"m{i}", "content": content}}

    lines = [
        rec(1, "user", f"use the token {gh} please"),
        rec(2, "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash",
                              "input": {"command": f"export GITHUB_TOKEN={gh} && ./deploy"}}]),
        rec(3, "user", [{"type": "tool_result", "tool_use_id": "t1",
                         "content": json.dumps({"password": pw, "user": "bob"})}]),
        rec(4, "assistant", [{"type": "tool_use", "id": "t2", "name": "Bash",
                              "input": {"command": f"aws configure set aws_access_key_id {aws}"}}]),
        # lines kept on their own (no other event holds them): thinking only, bookkeeping
        rec(6, "assistant", [{"type": "thinking", "thinking": f"the user gave {gh}; I should not echo it"}]),
        {"type": "summary", "summary": f"deploy with password={pw}", "leafUuid": "u4"},
    ]
    path = tmp_path / "projects" / "-work-s" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True)
    body = b"".join(json.dumps(r).encode() + b"\n" for r in lines)
    body += (b'{"type":"user","sessionId":"s-secret","timestamp":"2026-11-01T10:00:05Z","message":'
             b'{"role":"user","content":"\xff password=' + pw.encode() + b'"}}\n')
    path.write_bytes(body)
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert report.totals()["errors"] == 0
    for dirpath, _dirs, names in os.walk(agentlog_home):
        for name in names:
            data = (Path(dirpath) / name).read_bytes()
            for secret in (gh, pw, aws):
                assert secret.encode() not in data, (name, secret)
    logged = _log_events(agentlog_home)
    assert sum(e["attrs"].get("redactions", 0) for e in logged) >= 5
    assert any("[REDACTED:github_token]" in json.dumps(e.get("content")) for e in logged)
    kept = [e["raw"]["line"] for e in logged if e["kind"] == "transcript_line"]
    assert len(kept) == 2 and "I should not echo it" in kept[0] and "[REDACTED:github_token]" in kept[0]
    assert "deploy with" in kept[1] and "[REDACTED:" in kept[1]


def test_non_ascii_lines_keep_their_text_in_raw_and_their_secrets_redacted(agentlog_home: Path, tmp_path: Path) -> None:
    """A line that is not ASCII has its raw text written without being decoded
    (``base.RawLine``): byte for byte the text, quotes and backslashes escaped as
    orjson escapes them; one the gate flags is redacted like any other."""
    gh = "ghp_" + "R" * 36
    sid = "s-utf8"

    def line(i: int, text: str, sep: str = "") -> bytes:
        rec = {"type": "user", "sessionId": sid, "uuid": f"u{i}", "timestamp": f"2026-11-01T10:00:0{i}Z",
               "cwd": str(tmp_path), "message": {"role": "user", "content": text}}
        return json.dumps(rec, ensure_ascii=False).replace(", ", "," + sep, 1).encode() + b"\n"

    texts = ['café "quoted" \\ back\\slash ✓ 😀', f"déjà vu: use {gh} now", "tab ünd carriage"]
    path = tmp_path / "projects" / "-work-u" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True)
    body = line(1, texts[0]) + line(2, texts[1]) + line(3, texts[2], sep="\t")
    path.write_bytes(body)
    assert import_paths(str(agentlog_home), ["claude-code"], [str(path)]).totals()["events"] == 3
    logged = {e["attrs"]["source_line"]: e for e in _log_events(agentlog_home)}
    originals = body.decode("utf-8").splitlines()
    assert logged[1]["raw"] == {"line": originals[0]} and logged[3]["raw"] == {"line": originals[2]}
    assert gh not in json.dumps(logged[2]) and "[REDACTED:github_token]" in logged[2]["raw"]["line"]
    assert logged[2]["raw"]["line"].startswith('{"type": "user"') and "déjà vu" in logged[2]["raw"]["line"]
    for dirpath, _dirs, names in os.walk(agentlog_home):
        for name in names:
            assert gh.encode() not in (Path(dirpath) / name).read_bytes(), name


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_raw_line_written_without_decoding_is_what_orjson_writes(text: str) -> None:
    import orjson

    from agentlog.importers.base import raw_line

    data = orjson.dumps({"text": text, "n": [1, "\\\"x"]})  # a line that parses as JSON as it is
    raw = raw_line(data, parsed=True)
    assert orjson.dumps({"raw": raw}) == orjson.dumps({"raw": {"line": data.decode("utf-8")}})
    assert raw_line(data) == {"line": data.decode("utf-8")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=6), tail=st.integers(0, 200))
def test_the_head_digest_of_the_bytes_read_is_the_digest_of_the_file_read_again(
        sizes: list[int], tail: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The offsets' digest of a file's first bytes, made from what the import read, is
    the one made by reading them again: importing again finds the file unchanged (or,
    with its incomplete last line left, grown — not replaced)."""
    import hashlib

    from agentlog.importers.run import HEAD_BYTES, load_state

    work = tmp_path_factory.mktemp("head")
    root, path = work / "home", work / "s.jsonl"
    lines = [json.dumps({"type": "user", "sessionId": "s-h", "timestamp": "2026-11-01T10:00:00Z",
                         "message": {"role": "user", "content": "x" * n}}).encode() + b"\n" for n in sizes]
    path.write_bytes(b"".join(lines) + b'{"type": "user", "sessionId"' [:tail % 28])  # an incomplete last line
    import_paths(str(root), ["claude-code"], [str(path)], workers=1)
    entry = load_state(str(root))[os.path.abspath(path)]
    first = path.read_bytes()[: min(entry["offset"], HEAD_BYTES)]
    assert entry["head"] == hashlib.blake2b(first, digest_size=16).hexdigest()
    again = import_paths(str(root), ["claude-code"], [str(path)], workers=1)
    assert again.files[0].mode == ("unchanged" if tail % 28 == 0 else "grown") and again.files[0].events == 0


def test_a_last_line_taken_before_its_newline_keeps_the_line_numbers(tmp_path: Path) -> None:
    """A finished-looking last line without its newline is taken; when the newline (and more)
    arrives, the next import starts after it: the newline is not a line of its own, so the
    lines after it keep the numbers one import of the whole file gives (their events' ids
    depend on them). Found by the growing-file property test (ckpt-04 cut at 5,821)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}')
    first = list(run.iter_lines(str(path), 0, 0))
    assert [(line.lineno, line.data) for line, _ in first if line] == [(1, b'{"a":1}'), (2, b'{"b":2}')]
    end = first[-1][1]
    with open(path, "ab") as fh:
        fh.write(b'\n{"c":3}\r\n{"d":4}\n')
    again = list(run.iter_lines(str(path), end, 2))
    assert [(line.lineno, line.data) for line, _ in again if line] == [(3, b'{"c":3}'), (4, b'{"d":4}')]
    whole = list(run.iter_lines(str(path), 0, 0))
    assert [(line.lineno, line.data) for line, _ in whole if line][2:] == [(3, b'{"c":3}'), (4, b'{"d":4}')]


def test_a_cancelled_sibling_and_refusals_end_their_calls(agentlog_home: Path, tmp_path: Path) -> None:
    """A parallel call Claude Code cancelled because its sibling failed ends cancelled
    (class cancelled), not failed and not in flight; a person's rejection and a
    "Permission to use … has been denied" end denied (class policy_denied)."""
    from agentlog.projection.persist import refresh
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    env = {"sessionId": "s-sib", "cwd": str(tmp_path), "version": "2.1.42", "isSidechain": False}

    def rec(i: int, **kw: Any) -> dict[str, Any]:
        return {**env, "uuid": f"u{i}", "timestamp": f"2026-11-01T10:00:{i:02d}Z", **kw}

    def use(tid: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": tid, "name": name, "input": inp}

    def result(tid: str, text: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": True}

    records = [
        rec(1, type="user", message={"role": "user", "content": "run the checks"}),
        rec(2, type="assistant", message={"id": "m1", "model": "m", "role": "assistant", "content": [
            use("t-fail", "Bash", {"command": "false"}), use("t-sib", "Bash", {"command": "ls"}),
            use("t-rej", "Write", {"file_path": "/w/a.txt", "content": "x"}),
            use("t-rule", "Bash", {"command": "rm -rf build"})], "usage": {"input_tokens": 1, "output_tokens": 1}}),
        rec(3, type="user", message={"role": "user", "content": [
            result("t-fail", "Exit code 1"),
            result("t-sib", "<tool_use_error>Sibling tool call errored</tool_use_error>"),
            result("t-rej", "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
                            "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
                            "wait for the user to tell you how to proceed."),
            result("t-rule", "Permission to use Bash with command rm -rf build has been denied.")]}),
    ]
    path = tmp_path / "s-sib.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    ends = {e["tool"]["call_id"]: (e["kind"], e["outcome"]) for e in _log_events(agentlog_home)
            if e["kind"] != "tool_call_started" and e.get("tool")}
    assert ends["t-sib"] == ("tool_call_failed", {"status": "cancelled", "class": "cancelled"})
    assert ends["t-rej"] == ("permission_denied", {"status": "denied", "class": "policy_denied"})
    assert ends["t-rule"] == ("permission_denied", {"status": "denied", "class": "policy_denied"})
    assert ends["t-fail"][1]["status"] == "failure"
    ingest(str(agentlog_home))
    refresh(str(agentlog_home))
    with Engine(str(agentlog_home)) as engine:
        rows = engine.run("SELECT provider_call_id, outcome_status, outcome_class, finished_at IS NOT NULL "
                          "FROM tool_calls ORDER BY provider_call_id").rows
        assert rows == [("t-fail", "failure", "nonzero_exit", True), ("t-rej", "denied", "policy_denied", True),
                        ("t-rule", "denied", "policy_denied", True), ("t-sib", "cancelled", "cancelled", True)]
        assert engine.run("SELECT in_flight_calls FROM sessions").rows == [(0,)]


def test_two_records_on_one_line_are_both_read(agentlog_home: Path, tmp_path: Path) -> None:
    """An assistant record and the user record with its tool result written with no
    newline between them (``{…}{…}``) give both records' events, each holding its own
    part of the line; importing the file again gives nothing."""
    env = {"sessionId": "s-two", "cwd": str(tmp_path), "version": "2.1.42", "isSidechain": False}
    prompt = {**env, "uuid": "u1", "timestamp": "2026-11-01T10:00:01Z", "type": "user",
              "message": {"role": "user", "content": "list the files"}}
    use = {**env, "uuid": "u2", "timestamp": "2026-11-01T10:00:02Z", "type": "assistant",
           "message": {"id": "m1", "model": "m", "role": "assistant", "usage": {"input_tokens": 1, "output_tokens": 1},
                       "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}}
    result = {**env, "uuid": "u3", "timestamp": "2026-11-01T10:00:03Z", "type": "user",
              "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}}
    path = tmp_path / "s-two.jsonl"
    path.write_text(json.dumps(prompt) + "\n" + json.dumps(use) + json.dumps(result) + "\n")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(path)])
    assert report.files[0].problem_count == 0
    events = {e["kind"]: e for e in _log_events(agentlog_home)}
    started, finished = events["tool_call_started"], events["tool_call_finished"]
    assert started["tool"]["call_id"] == finished["tool"]["call_id"] == "t1"
    assert started["attrs"]["source_line"] == finished["attrs"]["source_line"] == 2
    assert "source_part" not in started["attrs"] and finished["attrs"]["source_part"] == 1
    assert json.loads(started["raw"]["line"]) == use and json.loads(finished["raw"]["line"]) == result
    assert import_paths(str(agentlog_home), ["claude-code"], [str(path)]).totals()["events"] == 0


def test_split_records_takes_only_lines_wholly_of_objects() -> None:
    from agentlog.importers.base import split_records

    assert split_records(b'{"a": 1}{"b": "\xc3\xa9}"} {"c": [1]}') == [
        (0, b'{"a": 1}'), (8, b'{"b": "\xc3\xa9}"}'), (21, b'{"c": [1]}')]
    for data in (b'{"a": 1}', b'{"a": 1}{"b":', b'{"a": 1} tail', b"[1][2]", b'{"a": 1}3', b"", b"not json"):
        assert split_records(data) is None


def test_a_symlink_in_an_imported_directory_is_not_followed_and_lines_are_capped_like_payloads(
        agentlog_home: Path, tmp_path: Path) -> None:
    """Issue 27, finding 21: import followed file symlinks (a planted x.jsonl -> a key file)
    and took lines of up to 64 MiB (a 60 MB line became a 120 MB frame). Links met while
    walking are skipped; a line over the hook's payload cap (16 MiB) is skipped and reported."""
    from agentlog.capture.hook import MAX_PAYLOAD

    assert run.MAX_LINE == MAX_PAYLOAD
    secret = tmp_path / "id_ed25519"
    secret.write_text('{"type": "user", "sessionId": "s-link", "message": {"role": "user", "content": "KEYMATERIAL"}}\n')
    projects = tmp_path / "projects" / "-home-dev-p"
    projects.mkdir(parents=True)
    os.symlink(secret, projects / "planted.jsonl")
    big = projects / "real.jsonl"
    with open(big, "wb") as fh:
        fh.write(json.dumps({"type": "user", "sessionId": "s-real", "timestamp": "2026-11-01T10:00:00Z",
                             "message": {"role": "user", "content": "x" * (MAX_PAYLOAD + 1)}}).encode() + b"\n")
        fh.write(json.dumps({"type": "user", "sessionId": "s-real", "timestamp": "2026-11-01T10:00:01Z",
                             "message": {"role": "user", "content": "small"}}).encode() + b"\n")
    report = import_paths(str(agentlog_home), ["claude-code"], [str(tmp_path / "projects")], workers=1)
    events = _log_events(agentlog_home)
    assert not any("KEYMATERIAL" in json.dumps(e) for e in events)
    assert any(e.get("content", {}).get("prompt") == "small" for e in events)
    assert not any(len(json.dumps(e)) > MAX_PAYLOAD for e in events)
    assert "skipped" in json.dumps(report.to_dict() if hasattr(report, "to_dict") else str(report))


def test_a_named_file_that_is_not_a_transcript_is_refused_and_nothing_recorded(agentlog_home: Path,
                                                                               tmp_path: Path) -> None:
    """Issue 27, finding 3: ``agentlog import claude-code FILE`` of any file exited 0 and
    recorded a session of garbage. Now it is refused (exit 1, naming the file and what was
    expected) and nothing is written; --force imports it anyway."""
    import subprocess
    import sys

    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n- milk\n- eggs\n")
    array = tmp_path / "data.json"
    array.write_text('[\n  {"a": 1}\n]\n')
    other = tmp_path / "rollout.jsonl"  # a Codex rollout is not a Claude transcript
    other.write_text('{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}\n')
    env = {**os.environ, "AGENTLOG_HOME": str(agentlog_home)}
    for path in (notes, array, other):
        r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", str(path)],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 1 and str(path) in r.stderr and "not a claude-code transcript" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert _log_events(agentlog_home) == []
    r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", str(notes), "--force", "--json"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    fixture = next(FIXTURES.glob("*.jsonl"), None) if FIXTURES.is_dir() else None
    if fixture is not None:  # a real transcript still imports
        r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", str(fixture), "--json"],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
