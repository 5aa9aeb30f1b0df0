"""Importing the anchors' histories: attemptdb Event v1 lines, nd7 session logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import blake3

from agentlog.importers.anchors import genesis, split_sealed
from agentlog.importers.run import import_paths
from import_support import log_events as _log_events

SID = "3f2d1c48-9b7a-4e51-8c6d-0a1b2c3d4e5f"


def test_genesis_matches_nd7s_published_vector() -> None:
    assert genesis(SID) == "305c9ae9d25b4b1fd06fef9f3862756a1dd14b3927fca448e726c2e37d5d5336"


# -- nd7 ------------------------------------------------------------------------------------


def _nd7_log(path: Path, bodies: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    """Frames sealed as nd7 seals them (nd7.md §3.2–3.4): envelope in order, the hash of
    the bytes without it, spliced in last."""
    prev = genesis(SID)
    lines = []
    for seq, (kind, body) in enumerate(bodies):
        env = {"v": 0, "session_id": SID, "seq": seq, "ts": 1758240000000000000 + seq * 10**9,
               "host": "vectors.example", "source": "intent:claude-code", "kind": kind, "prev": prev, "body": body}
        b = json.dumps(env, separators=(",", ":"), ensure_ascii=False).encode()
        digest = blake3.blake3(b).hexdigest()
        lines.append(b[:-1] + b',"hash":"' + digest.encode() + b'"}\n')
        prev = digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return lines


BODIES: list[tuple[str, dict[str, Any]]] = [
    ("session_start", {"cwd": "/nonexistent/repo", "hook_event_name": "SessionStart", "reason": "startup"}),
    ("prompt", {"cwd": "/nonexistent/repo", "hook_event_name": "UserPromptSubmit", "text": "run the tests"}),
    ("tool_call", {"cwd": "/nonexistent/repo", "hook_event_name": "PreToolUse", "tool_use_id": "toolu_1",
                   "tool_name": "Bash", "tool_input": {"command": "cargo test --quiet"},
                   "argv": "cargo test --quiet"}),
    ("tool_result", {"cwd": "/nonexistent/repo", "hook_event_name": "PostToolUse", "tool_use_id": "toolu_1",
                     "tool_name": "Bash", "tool_input": {"command": "cargo test --quiet"},
                     "tool_response": {"interrupted": False, "isImage": False, "stderr": "", "stdout": "ok"},
                     "ok": True, "duration_ms": 4187}),
    ("turn_end", {"cwd": "/nonexistent/repo", "hook_event_name": "Stop", "stop_hook_active": False}),
    ("hook", {"cwd": "/nonexistent/repo", "hook_event_name": "Notification",
              "raw": {"session_id": SID, "hook_event_name": "Notification", "message": "Claude needs your permission",
                      "notification_type": "permission_prompt"}}),
    ("session_end", {"cwd": "/nonexistent/repo", "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}),
]


def test_an_nd7_session_imports_through_our_own_adapter(agentlog_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "nd7" / "sessions" / SID / "events.ndjson"
    lines = _nd7_log(log, BODIES)
    assert split_sealed(lines[0].rstrip(b"\n")) is not None
    report = import_paths(str(agentlog_home), ["nd7"], [str(tmp_path / "nd7" / "sessions")])
    (f,) = report.files
    assert f.error is None and f.problem_count == 0 and f.events == len(BODIES)
    events = _log_events(agentlog_home)
    assert [e["kind"] for e in events] == ["session_started", "prompt_submitted", "tool_call_started",
                                           "tool_call_finished", "turn_stopped", "notification", "session_ended"]
    assert all(e["provider"] == "claude_code" and e["provider_session_id"] == SID for e in events)
    assert all(e["attrs"]["nd7_chain"] == "verified" and e["attrs"]["reconstructed_from"] == "nd7" for e in events)
    call = events[2]
    assert call["tool"] == {"name": "Bash", "category": "shell", "call_id": "toolu_1"}
    assert events[0]["observed_at"] == 1758240000000000
    assert events[5]["attrs"].get("notification_type") == "permission_prompt"
    again = import_paths(str(agentlog_home), ["nd7"], [str(log)])
    assert again.totals()["events"] == 0


def test_an_nd7_chain_break_is_reported_and_later_frames_marked(agentlog_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "sessions" / SID / "events.ndjson"
    lines = _nd7_log(log, BODIES)
    lines[2] = lines[2].replace(b"cargo test --quiet", b"cargo test --QUIET", 1)  # edited after sealing
    log.write_bytes(b"".join(lines))
    report = import_paths(str(agentlog_home), ["nd7"], [str(log)])
    (f,) = report.files
    assert f.problem_count == 1
    assert f.problems[0]["line"] == 3 and "hash does not match" in f.problems[0]["message"]
    chain = [e["attrs"]["nd7_chain"] for e in _log_events(agentlog_home)]
    assert chain == ["verified", "verified"] + ["unverified"] * (len(BODIES) - 2)


def test_an_nd7_frame_moved_to_another_session_breaks_at_frame_zero(agentlog_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "sessions" / "other-session" / "events.ndjson"
    lines = _nd7_log(log, BODIES)
    log.write_bytes(b"".join(lines).replace(SID.encode(), b"other-session"))
    report = import_paths(str(agentlog_home), ["nd7"], [str(log)])
    assert report.files[0].problems[0]["line"] == 1


# -- attemptdb ------------------------------------------------------------------------------


def _attemptdb_event(n: int, kind: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": f"0190a8f0-0000-7000-8000-{n:012d}", "schema_version": 1,
        "device_id": "0190a8f0-1111-7000-8000-000000000001", "source_seq": n, "hlc": 1000 + n,
        "observed_at": 1787904000000000 + n * 1_000_000, "captured_at": 1787904000000000 + n * 1_000_000,
        "provider": "claude_code", "adapter_version": "0.1.1", "capture_mode": "full_sync",
        "provider_event_name": "PostToolUse", "kind": kind,
        "project": {"project_id": "b2c07819-b40b-5dc6-9012-b8d1dc193b15", "root": "/home/dev/example/project",
                    "name": "example/project", "repo_remote": "git@github.com:example/project.git"},
        "session_id": "454a41e5-90f7-5286-b08b-ea2d1f7f806b", "provider_session_id": "abc", "agent": {},
    }
    return base | extra


def test_attemptdb_events_keep_their_ids_and_fields(agentlog_home: Path, tmp_path: Path) -> None:
    rows = [
        _attemptdb_event(1, "prompt_submitted", provider_event_name="UserPromptSubmit",
                         content={"prompt": "fix the button"}),
        _attemptdb_event(2, "tool_call_finished", tool={"name": "Edit", "category": "file_edit", "call_id": "toolu_9"},
                         paths=[{"original": "/home/dev/example/project/src/components/Button.tsx",
                                 "logical": "/home/dev/example/project/src/components/Button.tsx",
                                 "repo_relative": "src/components/Button.tsx"}],
                         outcome={"status": "success"}, attrs={"file_ext": "tsx", "lines_added": 4},
                         content={"tool_input": {"file_path": "src/components/Button.tsx"}}),
        _attemptdb_event(3, "correction", provider="attemptdb", provider_event_name="correction",
                         attrs={"correction_type": "attempt_outcome", "target": "att_1234"}),
        _attemptdb_event(4, "tool_call_failed", capture_mode="metadata_only",
                         tool={"name": "Bash", "category": "shell", "call_id": "toolu_10"},
                         outcome={"status": "failure", "class": "nonzero_exit", "exit_code": 2},
                         content={"command": "should not be kept"}),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    report = import_paths(str(agentlog_home), ["attemptdb"], [str(path)])
    (f,) = report.files
    assert f.events == 4 and f.problem_count == 1 and f.problems[0]["line"] == 5
    events = {e["event_id"]: e for e in _log_events(agentlog_home)}
    assert set(events) == {r["event_id"] for r in rows}
    edit = events[rows[1]["event_id"]]
    assert edit["paths"] == ["src/components/Button.tsx"] and edit["tool"]["call_id"] == "toolu_9"
    assert edit["project"]["remote"] == "git@github.com:example/project.git"
    assert edit["attrs"]["attemptdb"]["source_seq"] == 2 and edit["attrs"]["lines_added"] == 4
    correction = events[rows[2]["event_id"]]
    assert correction["kind"] == "unknown" and correction["attrs"]["attemptdb_kind"] == "correction"
    failed = events[rows[3]["event_id"]]
    assert failed["capture_mode"] == "metadata_only" and "content" not in failed and "raw" not in failed
    assert failed["outcome"] == {"status": "failure", "class": "nonzero_exit", "exit_code": 2}
    # importing again, even with the offsets forgotten, adds nothing
    (agentlog_home / "state" / "import.json").unlink()
    assert import_paths(str(agentlog_home), ["attemptdb"], [str(path)]).totals()["events"] == 0


def test_attemptdb_needs_a_file(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    r = CliRunner().invoke(cli, ["import", "attemptdb"])
    assert r.exit_code == 2 and "name the file" in r.output


SESSION = "454a41e5-90f7-5286-b08b-ea2d1f7f806b"  # attemptdb's SessionId for (claude_code, abc), its test vector


def test_attemptdb_session_and_event_retractions_become_ours_and_apply(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.projection.ids import derive
    from agentlog.operations.refresh import open_current

    assert derive("session", "claude_code", "abc") == SESSION  # the same derivation: the ids name the same session
    meta = {"provider": "attemptdb", "provider_event_name": "Retraction", "kind": "retraction"}
    rows = [
        _attemptdb_event(1, "prompt_submitted", provider_event_name="UserPromptSubmit",
                         content={"prompt": "fix the button"}),
        _attemptdb_event(2, "tool_call_failed", tool={"name": "Bash", "category": "shell", "call_id": "toolu_1"},
                         outcome={"status": "failure", "class": "nonzero_exit", "exit_code": 1}),
        _attemptdb_event(3, **meta, attrs={"target_type": "event", "target": "ev_0190a8f0-0000-7000-8000-000000000002",
                                           "reason": "test", "note_chars": 9}, content={"note": "a dry run"}),
        _attemptdb_event(4, **meta, attrs={"target_type": "session", "target": f"ses_{SESSION}",
                                           "reason": "benchmark"}),
        # positional ids (attempt, turn) and short ids are not translated
        _attemptdb_event(5, **meta, attrs={"target_type": "attempt", "reason": "duplicate",
                                           "target": "att_" + derive("attempt", SESSION, "1", "0")}),
        _attemptdb_event(6, "correction", provider="attemptdb", provider_event_name="Correction",
                         attrs={"correction_type": "attempt_outcome", "outcome": "succeeded",
                                "target": "att_" + derive("attempt", SESSION, "1", "0")}),
        _attemptdb_event(7, **meta, attrs={"target_type": "session", "target": f"ses_{SESSION[:8]}", "reason": "test"}),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = import_paths(str(agentlog_home), ["attemptdb"], [str(path)])
    assert report.totals()["events"] == 7 and report.totals()["problems"] == 0
    events = {e["event_id"]: e for e in _log_events(agentlog_home)}
    ev_retraction, ses_retraction = events[rows[2]["event_id"]], events[rows[3]["event_id"]]
    for e in (ev_retraction, ses_retraction):
        assert (e["kind"], e["provider"], e["provider_session_id"], e["provider_event_name"]) == \
            ("retraction", "agentlog", "meta", "Retraction")
        assert e["attrs"]["attemptdb_kind"] == "retraction" and e["attrs"]["reconstructed"] is True
    assert ev_retraction["attrs"]["target"] == "ev_0190a8f0-0000-7000-8000-000000000002"
    assert ev_retraction["attrs"]["note_chars"] == 9 and ev_retraction["content"] == {"note": "a dry run"}
    assert (ses_retraction["attrs"]["target_type"], ses_retraction["attrs"]["reason"]) == ("session", "benchmark")
    for r in rows[4:]:
        kept = events[r["event_id"]]
        assert kept["kind"] == "unknown" and kept["attrs"]["attemptdb_kind"] == r["kind"]
    # the projection applies them: the event and the session are retracted
    engine, _ = open_current(str(agentlog_home))
    with engine:
        got = engine.run("SELECT target_type, target, matched FROM retractions ORDER BY target_type")
        sessions = engine.run("SELECT provider, retracted FROM sessions WHERE session_id = ?", [SESSION])
    assert [tuple(r) for r in got.rows] == [("event", "0190a8f0-0000-7000-8000-000000000002", True),
                                             ("session", SESSION, True)]
    assert [tuple(r) for r in sessions.rows] == [("claude_code", True)]
    # importing again adds nothing
    (agentlog_home / "state" / "import.json").unlink()
    assert import_paths(str(agentlog_home), ["attemptdb"], [str(path)]).totals()["events"] == 0
