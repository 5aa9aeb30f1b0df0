"""The reference scenario (tests/scenario.py) through capture, ingest, the store and verify."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlog.store.ingest import ingest
from agentlog.store.schema import read_events

import scenario as ref
from scenario import Scenario, build_reference

CLAUDE_KINDS = [
    "session_started",
    "prompt_submitted", "tool_call_started", "tool_call_finished", "tool_call_started", "tool_call_failed", "turn_stopped",
    "prompt_submitted", "tool_call_started", "tool_call_finished", "tool_call_started", "tool_call_finished", "turn_stopped",
    "prompt_submitted", "tool_call_started", "tool_call_finished", "turn_stopped",
    "prompt_submitted", "tool_call_started", "tool_call_finished", "turn_stopped",
    "session_ended",
]
CODEX_KINDS = ["session_started", "prompt_submitted", "tool_call_started", "tool_call_finished", "permission_requested"]
COLUMNS = [
    "event_id", "kind", "provider", "provider_session_id", "provider_turn_id", "captured_at", "observed_at",
    "tool_name", "tool_category", "tool_call_id", "paths", "outcome_status", "outcome_class",
    "project_root", "project_name", "project_branch", "project_head", "attrs", "event", "log_key", "seq",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, dict[str, dict[str, Any]]]:
    """The scenario written and ingested once; rows of the store keyed by role."""
    base = tmp_path_factory.mktemp("scenario")
    sc = build_reference(str(base / "home"), str(base / "work"))
    report = ingest(sc.root)
    assert report.events == len(ref.ROLES) and not report.breaks
    table = read_events(sc.root, COLUMNS).to_pylist()
    by_id = {row["event_id"]: row for row in table}
    assert len(table) == len(by_id) == len(ref.ROLES)
    rows = {role: by_id[eid] for role, eid in sc.events.items()}
    return sc, rows


def _us(ts: Any) -> int:
    return int(ts.timestamp() * 1_000_000) if ts is not None else -1


def test_roles_times_and_ids(built: tuple[Scenario, dict[str, dict[str, Any]]]) -> None:
    sc, rows = built
    assert tuple(sc.events) == ref.ROLES == tuple(sc.times)
    assert len(set(sc.events.values())) == len(ref.ROLES)
    off = {role: (t - ref.BASE_US) // ref.SECOND for role, t in sc.times.items()}
    assert off["claude.start"] == 0 and off["claude.prompt1"] == 5 and off["claude.edit1.fail"] == 21
    assert off["claude.commit.start"] == 155 and off["claude.commit.end"] == 157 and off["claude.end"] == 170
    assert off["codex.start"] == 350 and off["codex.permission1"] == 370
    assert ref.BASE_US == 1_793_613_600_000_000  # 2026-11-02T10:00:00Z
    times = [sc.times[r] for r in ref.ROLES]
    assert times == sorted(times)
    for role, row in rows.items():
        assert _us(row["captured_at"]) == sc.times[role] == _us(row["observed_at"]), role


def test_kinds_in_order_per_session(built: tuple[Scenario, dict[str, dict[str, Any]]]) -> None:
    sc, rows = built
    for prefix, provider, session, kinds in (
        ("claude.", "claude_code", sc.claude_session, CLAUDE_KINDS),
        ("codex.", "codex", sc.codex_session, CODEX_KINDS),
    ):
        roles = sc.session_roles(prefix)
        assert [sc.captured[r]["kind"] for r in roles] == kinds
        session_rows = [rows[r] for r in roles]
        assert [r["seq"] for r in session_rows] == sorted(r["seq"] for r in session_rows)
        assert [r["kind"] for r in session_rows] == kinds
        assert {r["provider"] for r in session_rows} == {provider}
        assert {r["provider_session_id"] for r in session_rows} == {session}
        assert len({r["log_key"] for r in session_rows}) == 1


def test_project_and_commit_heads(built: tuple[Scenario, dict[str, dict[str, Any]]]) -> None:
    sc, rows = built
    assert sc.sha_before != sc.sha_after
    for role, row in rows.items():
        assert row["project_root"] == sc.repo and row["project_branch"] == "main", role
        assert row["project_name"] == os.path.basename(sc.repo)
        expected = sc.sha_before if ref.ROLES.index(role) <= ref.ROLES.index("claude.commit.start") else sc.sha_after
        assert row["project_head"] == expected, role
    start, end = rows["claude.commit.start"], rows["claude.commit.end"]
    assert start["project_head"] == sc.sha_before and end["project_head"] == sc.sha_after
    for row in (start, end):
        assert row["tool_name"] == "Bash" and row["tool_category"] == "shell"
        assert json.loads(row["attrs"])["git_subcommand"] == "commit"
    assert start["tool_call_id"] == end["tool_call_id"]
    assert json.loads(end["event"])["content"]["command"] == 'git commit -am "Fix parser"'


def test_tool_calls(built: tuple[Scenario, dict[str, dict[str, Any]]]) -> None:
    sc, rows = built
    calls = {
        "claude.read1": ("Read", "file_read", ["src/parser.rs"], "end"),
        "claude.edit1": ("Edit", "file_edit", ["src/parser.rs"], "fail"),
        "claude.edit2": ("Edit", "file_edit", ["src/parser.rs"], "end"),
        "claude.test1": ("Bash", "shell", [], "end"),
        "claude.readme": ("Edit", "file_edit", ["README.md"], "end"),
        "claude.commit": ("Bash", "shell", [], "end"),
        "codex.patch1": ("apply_patch", "file_edit", ["src/parser.rs"], "end"),
    }
    call_ids = set()
    for call, (name, category, paths, last) in calls.items():
        a, b = rows[call + ".start"], rows[f"{call}.{last}"]
        for row in (a, b):
            assert (row["tool_name"], row["tool_category"], row["paths"]) == (name, category, paths), call
        assert a["tool_call_id"] and a["tool_call_id"] == b["tool_call_id"], call
        call_ids.add(a["tool_call_id"])
        assert a["outcome_status"] is None
        assert b["outcome_status"] == ("failure" if last == "fail" else "success"), call
    assert len(call_ids) == len(calls)

    fail = rows["claude.edit1.fail"]
    assert fail["kind"] == "tool_call_failed" and fail["outcome_class"] == "string_mismatch"
    assert "String to replace not found in file." in json.loads(fail["event"])["content"]["error"]
    assert json.loads(rows["claude.test1.start"]["attrs"])["command_category"] == "test"
    assert json.loads(rows["claude.readme.end"]["attrs"])["file_is_doc"] is True

    perm = rows["codex.permission1"]
    assert perm["kind"] == "permission_requested" and perm["tool_name"] == "Bash" and perm["tool_category"] == "shell"
    assert perm["tool_call_id"] is None and perm["outcome_status"] is None
    assert json.loads(perm["event"])["content"]["command"] == "cargo test"
    codex_rows = [rows[r] for r in sc.session_roles("codex.")]
    assert [r["provider_turn_id"] for r in codex_rows] == [None] + [ref.CODEX_TURN] * 4


def test_prompts(built: tuple[Scenario, dict[str, dict[str, Any]]]) -> None:
    _, rows = built
    prompts = {
        "claude.prompt1": "Fix the parser crash on empty input",
        "claude.prompt2": "Try again, the old_string has tabs",
        "claude.prompt3": "Update the README",
        "claude.prompt4": "Commit it",
        "codex.prompt1": "Add a test for the empty-input case",
    }
    for role, text in prompts.items():
        assert json.loads(rows[role]["event"])["content"]["prompt"] == text


def test_write_helper_and_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("AGENTLOG_HOME", str(home))
    sc = build_reference(str(home), str(tmp_path / "work"))
    extra = ref.write(
        str(home), "claude-code",
        {"session_id": "claude-ref-other", "cwd": sc.repo, "hook_event_name": "SessionStart", "source": "startup"},
        ref.BASE_US + 400 * ref.SECOND, sc.repo,
    )
    ingest(str(home))
    ids = read_events(str(home), ["event_id"]).column("event_id").to_pylist()
    assert sorted(ids) == sorted([*sc.events.values(), extra])

    proc = subprocess.run(
        [sys.executable, "-m", "agentlog", "verify", "--json"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "AGENTLOG_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True and out["broken"] == 0 and out["sessions"] == 3
    assert out["frames"] == len(ref.ROLES) + 1
    assert {r["status"] for r in out["reports"]} == {"intact"}
