"""The projection of the reference scenario, negative cases, determinism, real fixtures.

- The reference scenario (``tests/scenario.py``: a Claude Code session and a
  Codex session in one repository, real hook payloads through the real
  capture path) is checked table by table through both the batch
  ``project()`` over the captured wire events and the stored projection
  (``open_current`` + SQL on the views).
- ``project()`` is a pure function of the event *set*: byte-identical output
  for any delivery order and with every event duplicated.
- Negative cases, one small session each: what must *not* be inferred.
- The real hook payloads and transcripts in ``shared/fixtures`` go through
  ``hook.build`` + ``hook.record``, ingest and refresh without error, and
  every view is readable.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest

from agentlog.capture import hook
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.projection import observe
from agentlog.projection.ids import derive
from agentlog.projection.persist import refresh
from agentlog.projection.projector import project
from agentlog.operations.refresh import open_current
from agentlog.store.ingest import ingest
from projection_support import (
    BASE_US,
    META_PROVIDER,
    META_SESSION,
    TABLES,
    US,
    batch_tables,
    deliver,
    diff,
    event_id,
    known_divergences,
    view_tables,
    wire,
)
from scenario import SECOND, Scenario, build_event, build_reference

SOURCES = ("batch", "stored")


# -- the reference scenario ------------------------------------------------------------


class Ref:
    def __init__(self, sc: Scenario, caught: dict[str, Any], tables: dict[str, dict[str, list[dict[str, Any]]]]):
        self.sc = sc
        self.caught = caught
        self.tables = tables
        self.claude = derive("session", "claude_code", sc.claude_session)
        self.codex = derive("session", "codex", sc.codex_session)

    def ev(self, role: str) -> str:
        return self.sc.events[role]

    def at(self, role: str) -> int:
        return self.sc.times[role]

    def attempt(self, session: str, turn: int, index: int = 0) -> str:
        return derive("attempt", session, str(turn), str(index))

    def turn(self, session: str, turn: int) -> str:
        return derive("turn", session, str(turn))


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    d = tmp_path_factory.mktemp("reference")
    sc = build_reference(str(d / "root"), str(d / "work"))
    engine, caught = open_current(sc.root)
    engine.close()
    assert caught is not None
    batch = batch_tables(sc.captured.values())
    stored = view_tables(sc.root)
    return Ref(sc, caught, {"batch": batch, "stored": stored})


@pytest.fixture(params=SOURCES)
def src(request: pytest.FixtureRequest, ref: Ref) -> dict[str, list[dict[str, Any]]]:
    """The reference scenario's tables, from the batch projector or from SQL on the stored views."""
    return ref.tables[request.param]


def by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    out = {r[key]: r for r in rows}
    assert len(out) == len(rows)
    return out


def test_reference_was_projected_from_the_store(ref: Ref) -> None:
    assert ref.caught["ingest"]["events"] == 27 and not ref.caught["ingest"]["breaks"]
    assert ref.caught["projection"]["mode"] == "full"
    # Nothing new: the next read does nothing.
    engine, caught = open_current(ref.sc.root)
    with engine:
        assert caught is not None and caught["projection"]["mode"] == "none"
        assert engine.run("SELECT count(*) FROM events").rows == [(27,)]


def test_stored_equals_batch(ref: Ref) -> None:
    got = known_divergences(ref.tables["stored"])
    want = known_divergences(ref.tables["batch"])
    assert got == want, diff(got, want)


def test_sessions(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    s = by(src["sessions"], "session_id")
    assert set(s) == {ref.claude, ref.codex}
    c, x = s[ref.claude], s[ref.codex]
    assert (c["provider"], c["provider_session_id"]) == ("claude_code", ref.sc.claude_session)
    assert (x["provider"], x["provider_session_id"]) == ("codex", ref.sc.codex_session)
    assert c["project_id"] == x["project_id"] and c["project_name"] == "parser-project"
    assert (c["coverage"], c["liveness"], c["state"]) == ("full", "closed", "closed")
    assert (x["coverage"], x["liveness"], x["state"]) == ("partial", "open", "open")
    assert c["started_at"] == ref.at("claude.start") and c["ended_at"] == ref.at("claude.end")
    assert c["end_reason"] == "prompt_input_exit" and c["start_source"] == "startup"
    assert (c["event_count"], c["turn_count"], c["prompt_count"], c["tool_call_count"], c["failure_count"]) == (
        22, 4, 4, 6, 1)
    assert (c["first_event_id"], c["last_event_id"]) == (ref.ev("claude.start"), ref.ev("claude.end"))
    assert (c["start_event_id"], c["end_event_id"]) == (ref.ev("claude.start"), ref.ev("claude.end"))
    assert c["last_activity_event_id"] == ref.ev("claude.stop4")  # session_ended is not activity
    assert c["last_activity_at"] == ref.at("claude.stop4")
    assert c["evidence"] == [ref.ev("claude.start"), ref.ev("claude.end")] and c["confidence"] == 0.9
    assert x["started_at"] == ref.at("codex.start") and x["ended_at"] is None and x["end_event_id"] is None
    assert (x["event_count"], x["turn_count"], x["prompt_count"], x["tool_call_count"], x["failure_count"]) == (
        5, 1, 1, 1, 0)
    assert x["last_event_id"] == ref.ev("codex.permission1") and x["confidence"] == 0.6
    for row in (c, x):
        assert (row["in_flight_calls"], row["unpaired_tool_starts"], row["unpaired_tool_finishes"],
                row["fifo_pairings"]) == (0, 0, 0, 0)
        assert row["retracted"] is False and len(row["agents"]) == 1


def test_turns(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    claude = sorted((t for t in src["turns"] if t["session_id"] == ref.claude), key=lambda t: t["turn_index"])
    prompts = ["Fix the parser crash on empty input", "Try again, the old_string has tabs", "Update the README",
               "Commit it"]
    assert [t["turn_index"] for t in claude] == [1, 2, 3, 4]
    assert [t["status"] for t in claude] == ["completed"] * 4
    assert [t["objective"] for t in claude] == prompts
    assert [t["prompt_chars"] for t in claude] == [len(p) for p in prompts]
    assert [t["tool_call_count"] for t in claude] == [2, 2, 1, 1]
    for i, t in enumerate(claude, start=1):
        assert t["turn_id"] == ref.turn(ref.claude, i)
        assert t["prompt_event_id"] == t["first_event_id"] == ref.ev(f"claude.prompt{i}")
        assert t["stop_event_id"] == ref.ev(f"claude.stop{i}")
        assert (t["started_at"], t["ended_at"]) == (ref.at(f"claude.prompt{i}"), ref.at(f"claude.stop{i}"))
        assert t["evidence"] == [ref.ev(f"claude.prompt{i}"), ref.ev(f"claude.stop{i}")]
        assert t["attempt_ids"] == [ref.attempt(ref.claude, i)]
        assert (t["confidence"], t["failure_class"], t["retracted"], t["corrected_by"]) == (0.9, None, False, None)
    (x,) = [t for t in src["turns"] if t["session_id"] == ref.codex]
    assert (x["turn_index"], x["status"], x["ended_at"], x["stop_event_id"]) == (1, "in_progress", None, None)
    assert x["objective"] == "Add a test for the empty-input case"
    assert x["prompt_event_id"] == ref.ev("codex.prompt1") and x["last_event_id"] == ref.ev("codex.permission1")
    assert x["confidence"] == 0.6


CALLS = {  # role prefix → (provider call id, tool, category, outcome, class, paths)
    "claude.read1": ("toolu_ref_read1", "Read", "file_read", "success", None, ["src/parser.rs"]),
    "claude.edit1": ("toolu_ref_edit1", "Edit", "file_edit", "failure", "string_mismatch", ["src/parser.rs"]),
    "claude.edit2": ("toolu_ref_edit2", "Edit", "file_edit", "success", None, ["src/parser.rs"]),
    "claude.test1": ("toolu_ref_test1", "Bash", "shell", "success", None, []),
    "claude.readme": ("toolu_ref_readme1", "Edit", "file_edit", "success", None, ["README.md"]),
    "claude.commit": ("toolu_ref_commit1", "Bash", "shell", "success", None, []),
    "codex.patch1": ("call_ref_patch1", "apply_patch", "file_edit", "success", None, ["src/parser.rs"]),
}


def _end_role(ref: Ref, prefix: str) -> str:
    return prefix + (".fail" if prefix + ".fail" in ref.sc.events else ".end")


def test_tool_calls_pair_by_call_id(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    calls = by(src["tool_calls"], "provider_call_id")
    assert set(calls) == {c[0] for c in CALLS.values()}
    for prefix, (cid, tool, cat, status, cls, paths) in CALLS.items():
        c = calls[cid]
        end = _end_role(ref, prefix)
        session = ref.claude if prefix.startswith("claude.") else ref.codex
        assert c["tool_call_id"] == derive("tool_call", session, "call", cid)
        assert (c["tool_name"], c["tool_category"], c["outcome_status"], c["outcome_class"]) == (tool, cat, status, cls)
        assert c["paths"] == paths and c["path_relative"] == (paths[0] if paths else None)
        assert (c["pairing"], c["confidence"]) == ("call_id", 0.9)
        assert (c["start_event_id"], c["end_event_id"]) == (ref.ev(prefix + ".start"), ref.ev(end))
        assert c["evidence"] == [ref.ev(prefix + ".start"), ref.ev(end)]
        assert (c["started_at"], c["finished_at"]) == (ref.at(prefix + ".start"), ref.at(end))
        assert c["duration_ms"] == (ref.at(end) - ref.at(prefix + ".start")) // 1000
        assert c["retracted"] is False
    assert [calls[c]["duration_ms"] for c in ("toolu_ref_test1", "toolu_ref_commit1")] == [10_000, 2_000]
    assert calls["toolu_ref_commit1"]["git_subcommand"] == "commit"
    assert calls["toolu_ref_test1"]["command_category"] == "test"
    # Each call hangs off its turn and its attempt.
    assert calls["toolu_ref_edit1"]["turn_id"] == ref.turn(ref.claude, 1)
    assert calls["toolu_ref_edit1"]["attempt_id"] == ref.attempt(ref.claude, 1)
    assert calls["call_ref_patch1"]["attempt_id"] == ref.attempt(ref.codex, 1)


def test_attempts(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    a = by(src["attempts"], "attempt_id")
    assert len(a) == 5
    a1, a2, a3, a4 = (a[ref.attempt(ref.claude, i)] for i in (1, 2, 3, 4))
    ax = a[ref.attempt(ref.codex, 1)]
    assert [x["attempt_index"] for x in (a1, a2, a3, a4, ax)] == [0] * 5
    # Turn 1: the read and the failed edit; failed with string_mismatch, then superseded by turn 2.
    assert (a1["outcome"], a1["failure_class"]) == ("superseded", "string_mismatch")
    assert a1["superseded_by"] == a2["attempt_id"] and a2["supersedes"] == a1["attempt_id"]
    assert a1["approach"] == "edit src/parser.rs · read"
    assert a1["failing_event_id"] == ref.ev("claude.edit1.fail") and a1["ended_at"] == ref.at("claude.edit1.fail")
    assert a1["first_action_event_id"] == ref.ev("claude.read1.start")
    assert a1["started_at"] == ref.at("claude.prompt1")
    assert a1["evidence"] == [ref.ev(r) for r in ("claude.prompt1", "claude.read1.start", "claude.read1.end",
                                                   "claude.edit1.start", "claude.edit1.fail", "claude.stop1")]
    assert a1["paths"] == ["src/parser.rs"] and a1["tool_call_count"] == 2
    # Turn 2: succeeded.
    assert (a2["outcome"], a2["failure_class"], a2["superseded_by"]) == ("succeeded", None, None)
    assert a2["approach"] == "edit src/parser.rs · shell"
    assert a2["first_action_event_id"] == ref.ev("claude.edit2.start")
    assert (a3["outcome"], a3["approach"], a3["paths"]) == ("succeeded", "edit README.md", ["README.md"])
    # Turn 4: the commit's sha.
    assert (a4["outcome"], a4["approach"], a4["commit_shas"]) == ("succeeded", "shell", [ref.sc.sha_after])
    assert all(x["commit_shas"] == [] for x in (a1, a2, a3, ax))
    # Codex: still running.
    assert (ax["outcome"], ax["approach"], ax["ended_at"], ax["confidence"]) == (
        "in_progress", "edit src/parser.rs", None, 0.6)
    for x in (a1, a2, a3, a4):
        assert x["confidence"] == 0.9 and x["algorithm_version"] == "agentlog-tier1-v2"
    for x in (a1, a2, a3, a4, ax):
        assert x["retracted"] is False and x["corrected_by"] is None and x["inferred_outcome"] is None


def test_attempts_carry_their_turns_objective(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    a = by(src["attempts"], "attempt_id")
    assert a[ref.attempt(ref.claude, 1)]["objective"] == "Fix the parser crash on empty input"
    assert a[ref.attempt(ref.claude, 4)]["objective"] == "Commit it"
    assert a[ref.attempt(ref.codex, 1)]["objective"] == "Add a test for the empty-input case"


def test_supersession_edges(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    sup = [e for e in src["edges"] if e["edge_kind"] == "superseded"]
    caused = [e for e in src["edges"] if e["edge_kind"] == "caused"]
    evidence = [ref.ev("claude.edit1.fail"), ref.ev("claude.edit2.start")]
    assert [(e["from_type"], e["from_id"], e["to_type"], e["to_id"], e["evidence"], e["session_id"]) for e in sup] == [
        ("attempt", ref.attempt(ref.claude, 1), "attempt", ref.attempt(ref.claude, 2), evidence, ref.claude)]
    assert [(e["from_type"], e["from_id"], e["to_type"], e["to_id"], e["evidence"]) for e in caused] == [
        ("event", evidence[0], "event", evidence[1], evidence)]


def test_structural_edges(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    kinds = Counter((e["edge_kind"], e["from_type"], e["to_type"]) for e in src["edges"])
    n_turns, n_calls = len(src["turns"]), len(src["tool_calls"])
    n_evidence = sum(len(a["evidence"]) for a in src["attempts"])
    assert kinds == Counter({
        ("parent_of", "session", "turn"): n_turns, ("triggered", "event", "turn"): n_turns,
        ("parent_of", "turn", "tool_call"): n_calls, ("evidence_for", "event", "attempt"): n_evidence,
        ("parent_of", "work_unit", "turn"): n_turns, ("superseded", "attempt", "attempt"): 1,
        ("caused", "event", "event"): 1, ("handed_off", "session", "session"): 1,
    })
    assert (n_turns, n_calls, n_evidence) == (5, 7, 23)
    turns = by(src["turns"], "turn_id")
    calls = by(src["tool_calls"], "tool_call_id")
    attempts = by(src["attempts"], "attempt_id")
    for e in src["edges"]:
        k = e["edge_kind"], e["from_type"], e["to_type"]
        if k == ("parent_of", "session", "turn"):
            t = turns[e["to_id"]]
            assert e["from_id"] == t["session_id"] and e["evidence"] == [t["prompt_event_id"]]
        elif k == ("triggered", "event", "turn"):
            assert e["from_id"] == turns[e["to_id"]]["prompt_event_id"] and e["evidence"] == [e["from_id"]]
        elif k == ("parent_of", "turn", "tool_call"):
            c = calls[e["to_id"]]
            assert e["from_id"] == c["turn_id"] and e["evidence"] == c["evidence"]
        elif k == ("evidence_for", "event", "attempt"):
            a = attempts[e["to_id"]]
            assert e["from_id"] in a["evidence"] and e["evidence"] == [e["from_id"]]
            assert e["confidence"] == a["confidence"]
        assert e["evidence"], e


def test_handoff(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    (h,) = src["handoffs"]
    assert (h["from_session"], h["to_session"]) == (ref.claude, ref.codex)
    assert (h["from_provider"], h["to_provider"]) == ("claude_code", "codex")
    assert (h["gap_ms"], h["confidence"], h["shared_paths"]) == (180_000, 0.8, ["src/parser.rs"])
    assert h["handoff_at"] == ref.at("codex.start")
    assert h["evidence"] == [ref.ev(r) for r in ("claude.stop4", "codex.start", "claude.edit2.end", "codex.patch1.end")]
    (e,) = [e for e in src["edges"] if e["edge_kind"] == "handed_off"]
    assert (e["from_id"], e["to_id"], e["evidence"], e["confidence"]) == (ref.claude, ref.codex, h["evidence"], 0.8)


def test_pending_permission_signal(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    (s,) = src["signals"]
    assert (s["session_id"], s["event_id"], s["kind"], s["signal_type"]) == (
        ref.codex, ref.ev("codex.permission1"), "permission_requested", "permission_request")
    assert (s["pending"], s["cleared_at"], s["cleared_by"]) == (True, None, None)
    assert s["raised_at"] == ref.at("codex.permission1") and s["evidence"] == [ref.ev("codex.permission1")]


def test_commit(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    (c,) = src["commits"]
    assert (c["linkage"], c["sha"], c["previous_sha"], c["confidence"]) == (
        "end_event", ref.sc.sha_after, ref.sc.sha_before, 0.9)
    assert (c["session_id"], c["turn_id"], c["attempt_id"]) == (
        ref.claude, ref.turn(ref.claude, 4), ref.attempt(ref.claude, 4))
    assert c["tool_call_id"] == derive("tool_call", ref.claude, "call", "toolu_ref_commit1")
    assert c["committed_at"] == ref.at("claude.commit.end") and c["branch"] == "main"
    assert c["evidence"] == [ref.ev("claude.commit.start"), ref.ev("claude.commit.end")]


def test_work_unit(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    (u,) = src["work_units"]
    assert u["sessions"] == [ref.claude, ref.codex] and u["actors"] == ["claude_code", "codex"]
    assert u["turns"] == [ref.turn(ref.claude, i) for i in (1, 2, 3, 4)] + [ref.turn(ref.codex, 1)]
    assert u["attempts"] == [ref.attempt(ref.claude, i) for i in (1, 2, 3, 4)] + [ref.attempt(ref.codex, 1)]
    assert (u["turn_count"], u["attempt_count"], u["failed_attempt_count"], u["session_count"]) == (5, 5, 1, 2)
    assert u["objective"] == "Fix the parser crash on empty input"
    assert u["objective_event_id"] == ref.ev("claude.prompt1")
    assert u["work_unit_id"] == derive("work_unit", u["project_id"], ref.ev("claude.prompt1"))
    assert (u["phase"], u["status"], u["blocking_signal"]) == ("blocked", "open", ref.ev("codex.permission1"))
    assert u["paths"] == ["src/parser.rs", "README.md"] and u["commit_shas"] == [ref.sc.sha_after]
    assert u["last_attempt"] == ref.attempt(ref.codex, 1)
    assert (u["started_at"], u["updated_at"], u["ended_at"]) == (
        ref.at("claude.prompt1"), ref.at("codex.permission1"), None)
    assert u["confidence"] == 0.6
    assert all(a["work_unit_id"] == u["work_unit_id"] for a in src["attempts"])


def test_decision(ref: Ref, src: dict[str, list[dict[str, Any]]]) -> None:
    (d,) = src["decisions"]
    a1, a2 = ref.attempt(ref.claude, 1), ref.attempt(ref.claude, 2)
    assert (d["kind"], d["selected"], d["alternatives"]) == ("approach_change", a2, [a1])
    assert d["decision_id"] == derive("decision", "approach_change", a1, a2)
    assert (d["session_id"], d["turn_id"], d["decided_at"]) == (
        ref.claude, ref.turn(ref.claude, 2), ref.at("claude.prompt2"))
    assert d["evidence"] == [ref.ev("claude.edit1.fail"), ref.ev("claude.edit2.start")]
    assert "string_mismatch" in d["rationale"] and "src/parser.rs" in d["rationale"]
    assert d["rationale_source"] == "derived" and d["confidence"] == 0.7
    (u,) = src["work_units"]
    assert d["work_unit_id"] == u["work_unit_id"]


def test_nothing_else(src: dict[str, list[dict[str, Any]]]) -> None:
    assert src["conflicts"] == [] and src["corrections"] == [] and src["retractions"] == []


def test_reference_sql(ref: Ref) -> None:
    """A few questions asked the way a person would, in SQL."""
    engine, _ = open_current(ref.sc.root)
    with engine:
        rows = engine.run("SELECT provider, outcome, failure_class FROM attempts "
                          "WHERE outcome IN ('failed', 'superseded') ORDER BY started_at").rows
        assert rows == [("claude_code", "superseded", "string_mismatch")]
        rows = engine.run("SELECT sha, previous_sha FROM commits WHERE linkage = 'end_event'").rows
        assert rows == [(ref.sc.sha_after, ref.sc.sha_before)]
        rows = engine.run("SELECT s.provider FROM signals g JOIN sessions s USING (session_id) WHERE g.pending").rows
        assert rows == [("codex",)]
        rows = engine.run("SELECT edge_kind, count(*) FROM edges GROUP BY 1 ORDER BY 1").rows
        assert dict(rows) == {"caused": 1, "evidence_for": 23, "handed_off": 1, "parent_of": 17, "superseded": 1,
                              "triggered": 5}
        rows = engine.run("SELECT epoch_us(ended_at) - epoch_us(started_at) FROM sessions WHERE provider = "
                          "'claude_code'").rows
        assert rows == [(170 * SECOND,)]


def _meta(n: int, kind: str, at_s: int, attrs: dict[str, Any], note: str | None = None) -> dict[str, Any]:
    return wire(event_id(21, n), kind, META_PROVIDER, META_SESSION, BASE_US + at_s * US, name=kind.capitalize(),
                attrs=attrs, content={"note": note} if note else None)


def test_corrections_and_retractions_on_the_reference(ref: Ref, tmp_path: Path) -> None:
    """Corrections and an attempt retraction over the reference scenario, batch and stored."""
    a1, a3 = ref.attempt(ref.claude, 1), ref.attempt(ref.claude, 3)
    t2 = ref.turn(ref.claude, 2)
    meta = [
        _meta(1, "correction", 500, {"correction_type": "attempt_outcome", "target": "att_" + a1,
                                     "outcome": "abandoned"}, "gave up on that edit"),
        _meta(2, "correction", 501, {"correction_type": "attempt_outcome", "target": a1, "outcome": "failed"}),
        _meta(3, "correction", 502, {"correction_type": "turn_objective", "target": "trn_" + t2},
              "Fix the parser, for real"),
        _meta(4, "correction", 503, {"correction_type": "attempt_outcome", "target": a3, "outcome": "won"}),
        _meta(5, "correction", 504, {"correction_type": "attempt_note", "target": derive("attempt", "x", "1", "0")},
              "nobody"),
        _meta(6, "retraction", 505, {"target_type": "attempt", "target": a3, "reason": "test"}),
        _meta(7, "correction", 506, {"correction_type": "attempt_note", "target": a3}, "too late"),
    ]
    events = list(ref.sc.captured.values()) + meta
    root = str(tmp_path / "root")
    deliver(root, events)
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "full"
    stored, batch = view_tables(root), batch_tables(events)
    assert known_divergences(stored) == known_divergences(batch), diff(known_divergences(stored),
                                                                       known_divergences(batch))
    for t in (stored, batch):
        a = by(t["attempts"], "attempt_id")
        # Latest correction wins; the first one kept what was inferred.
        assert (a[a1]["outcome"], a[a1]["failure_class"]) == ("failed", "string_mismatch")
        assert (a[a1]["inferred_outcome"], a[a1]["inferred_failure_class"]) == ("superseded", "string_mismatch")
        assert (a[a1]["corrected_by"], a[a1]["correction_type"]) == (meta[1]["event_id"], "attempt_outcome")
        assert a[a1]["note"] == "gave up on that edit"
        assert a[a1]["superseded_by"] == ref.attempt(ref.claude, 2)  # structure is not re-run
        # A turn objective replaces the turn's and its attempts' objective.
        turn = by(t["turns"], "turn_id")[t2]
        assert (turn["objective"], turn["inferred_objective"]) == ("Fix the parser, for real",
                                                                   "Try again, the old_string has tabs")
        assert a[ref.attempt(ref.claude, 2)]["objective"] == "Fix the parser, for real"
        # The retracted attempt: marked, its tool call too, its evidence edges gone, counts adjusted.
        assert a[a3]["retracted"] is True and a[a3]["corrected_by"] is None
        (readme,) = [c for c in t["tool_calls"] if c["provider_call_id"] == "toolu_ref_readme1"]
        assert readme["retracted"] is True
        assert not [e for e in t["edges"] if a3 in (e["from_id"], e["to_id"])]
        assert by(t["sessions"], "session_id")[ref.claude]["tool_call_count"] == 5
        status = {c["event_id"]: c["status"] for c in t["corrections"]}
        assert [status[m["event_id"]] for m in meta if m["kind"] == "correction"] == [
            "applied", "applied", "applied", "invalid", "target_not_found", "target_retracted"]
        (r,) = t["retractions"]
        assert (r["target_type"], r["target"], r["matched"], r["reason"]) == ("attempt", a3, True, "test")
        assert r["retracted_events"] == [ref.ev("claude.readme.start")]
        assert [u["attempt_count"] for u in t["work_units"]] == [4]


# -- determinism ---------------------------------------------------------------------------


def _serialise(events: list[dict[str, Any]]) -> bytes:
    p = project(observe.from_wire(events))
    return orjson.dumps({"at": p.at, "tables": p.tables, "stats": p.stats}, option=orjson.OPT_SORT_KEYS)


def test_project_is_a_function_of_the_event_set(ref: Ref) -> None:
    events = list(ref.sc.captured.values())
    # Add corrections and retractions so that the meta path is ordered too.
    a1 = ref.attempt(ref.claude, 1)
    events += [
        wire(event_id(11, 1), "correction", META_PROVIDER, META_SESSION, BASE_US + 400 * US, name="Correction",
             attrs={"correction_type": "attempt_outcome", "target": "att_" + a1, "outcome": "failed"},
             content={"note": "it really failed"}),
        wire(event_id(11, 2), "correction", META_PROVIDER, META_SESSION, BASE_US + 400 * US, name="Correction",
             attrs={"correction_type": "attempt_note", "target": a1}, content={"note": "second word"}),
        wire(event_id(11, 3), "retraction", META_PROVIDER, META_SESSION, BASE_US + 401 * US, name="Retraction",
             attrs={"target_type": "attempt", "target": ref.attempt(ref.claude, 3), "reason": "test"}),
    ]
    original = _serialise(events)
    assert _serialise(events[::-1]) == original
    assert _serialise(events[1::2] + events[0::2]) == original
    assert _serialise(events + events) == original
    assert _serialise([e for e in events for _ in (0, 1)][::-1]) == original
    p = orjson.loads(original)
    assert p["stats"]["corrections"] == 2 and p["stats"]["retracted_attempts"] == 1


def test_project_breaks_ties_by_captured_time_then_event_id() -> None:
    """Equal observed times: the order is (observed, captured, event id), whatever the delivery order."""
    t = BASE_US
    edit = {"name": "Edit", "category": "file_edit"}
    evs = [
        wire(event_id(12, 1), "prompt_submitted", "claude_code", "tie", t, content={"prompt": "go"}),
        wire(event_id(12, 2), "tool_call_started", "claude_code", "tie", t + US, tool=edit, paths=["a.py"]),
        wire(event_id(12, 3), "tool_call_started", "claude_code", "tie", t + US, captured_at=t + US + 1,
             tool=edit, paths=["b.py"]),
        wire(event_id(12, 4), "tool_call_finished", "claude_code", "tie", t + 2 * US, tool=edit, paths=["a.py"]),
        wire(event_id(12, 5), "tool_call_finished", "claude_code", "tie", t + 2 * US, tool=edit, paths=["b.py"]),
    ]
    outs = {_serialise(order) for order in (evs, evs[::-1], [evs[i] for i in (3, 0, 4, 2, 1)])}
    assert len(outs) == 1


# -- negative cases ------------------------------------------------------------------------

_EDIT = {"name": "Edit", "category": "file_edit"}
_READ = {"name": "Read", "category": "file_read"}
_BASH = {"name": "Bash", "category": "shell"}


class Case:
    """One small session (its own project, so nothing joins across cases)."""

    def __init__(self, name: str, provider: str = "claude_code") -> None:
        self.name = name
        self.provider = provider
        self.events: list[dict[str, Any]] = []
        self.ids: dict[str, str] = {}
        self.session_id = derive("session", provider, name)

    def add(self, role: str, kind: str, at_s: float, **fields: Any) -> str:
        eid = derive("event", self.name, role)
        fields.setdefault("project", {"root": f"/work/{self.name}", "name": self.name})
        self.events.append(wire(eid, kind, self.provider, self.name, BASE_US + int(at_s * US), **fields))
        self.ids[role] = eid
        return eid

    def call(self, role: str, tool: dict[str, Any], start_s: float | None, end_s: float | None, *,
             cid: str | None = None, end_cid: str | None = "same", status: str = "success", cls: str | None = None,
             paths: list[str] | None = None) -> None:
        if start_s is not None:
            self.add(role + ".start", "tool_call_started", start_s, tool={**tool, "call_id": cid}, paths=paths)
        if end_s is not None:
            kind = "tool_call_failed" if status == "failure" else "tool_call_finished"
            self.add(role + ".end", kind, end_s, tool={**tool, "call_id": cid if end_cid == "same" else end_cid},
                     paths=paths, outcome={"status": status, "class": cls} if cls else {"status": status})

    def project(self) -> dict[str, list[dict[str, Any]]]:
        return batch_tables(self.events)

    def attempt(self, turn: int, index: int) -> str:
        return derive("attempt", self.session_id, str(turn), str(index))


def case_normal_turn() -> Case:
    c = Case("normal")
    c.add("start", "session_started", 0)
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Read and fix a.py"})
    c.call("read", _READ, 2, 3, cid="r1", paths=["a.py"])
    c.call("edit", _EDIT, 4, 5, cid="e1", paths=["a.py"])
    c.add("stop", "turn_stopped", 6)
    return c


def case_single_failure() -> Case:
    c = Case("single-failure")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Fix a.py"})
    c.call("edit", _EDIT, 2, 3, cid="e1", status="failure", cls="string_mismatch", paths=["a.py"])
    c.add("stop", "turn_stopped", 4)
    c.add("prompt2", "prompt_submitted", 10, content={"prompt": "Now the docs"})
    c.call("docs", _EDIT, 11, 12, cid="e2", paths=["docs.md"])
    c.add("stop2", "turn_stopped", 13)
    return c


def case_different_classes() -> Case:
    c = Case("different-classes")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Fix it"})
    c.call("edit", _EDIT, 2, 3, cid="e1", status="failure", cls="string_mismatch", paths=["a.py"])
    c.call("test", _BASH, 4, 5, cid="b1", status="failure", cls="nonzero_exit")
    c.add("stop", "turn_stopped", 6)
    return c


def case_cleared_signal() -> Case:
    c = Case("cleared-signal")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Run the tests"})
    c.add("perm", "permission_requested", 2, tool={**_BASH})
    c.add("notify", "notification", 3, attrs={"notification_type": "auth_success"})
    c.add("compact", "compaction_started", 4)
    c.call("test", _BASH, 5, 6, cid="b1")
    c.add("stop", "turn_stopped", 7)
    return c


def case_background_only() -> Case:
    c = Case("background-only")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Run the tests"})
    c.add("perm", "notification", 2, attrs={"notification_type": "permission_prompt"})
    c.add("notify", "notification", 3, attrs={"notification_type": "auth_success"})
    c.add("config", "config_changed", 4)
    return c


def case_retry_in_turn() -> Case:
    c = Case("retry-in-turn")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Fix a.py"})
    c.call("edit1", _EDIT, 2, 4, cid="e1", status="failure", cls="string_mismatch", paths=["a.py"])
    c.call("read", _READ, 3, 5, cid="r1", paths=["a.py"])  # already running when the edit failed
    c.call("grep", {"name": "Grep", "category": "search"}, 4, 4.5, cid="g1")  # starts at the failure instant
    c.call("edit2", _EDIT, 6, 7, cid="e2", paths=["a.py"])
    c.add("stop", "turn_stopped", 8)
    return c


def case_ended() -> Case:
    c = Case("ended")
    c.add("start", "session_started", 0)
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Hello"})
    c.call("read", _READ, 2, 3, cid="r1", paths=["a.py"])
    c.add("end", "session_ended", 5, attrs={"reason": "logout"})
    return c


def case_fifo() -> Case:
    c = Case("fifo")
    c.add("start", "session_started", 0)
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Read both"})
    c.call("r1", _READ, 2, None, paths=["a.py"])
    c.call("r2", _READ, 3, None, paths=["b.py"])
    c.call("r1", _READ, None, 5)
    c.call("r2", _READ, None, 7)
    c.add("stop", "turn_stopped", 8)
    return c


def case_other_call_id() -> Case:
    c = Case("other-call-id")
    c.add("prompt", "prompt_submitted", 1, content={"prompt": "Run"})
    c.call("a", _BASH, 2, None, cid="A")
    c.call("b", _BASH, None, 3, cid="B")
    c.call("c", _BASH, 4, None)  # no id: an end with an id may pair with it
    c.call("d", _BASH, None, 5, cid="D")
    c.add("stop", "turn_stopped", 6)
    return c


def test_normal_turn() -> None:
    c = case_normal_turn()
    t = c.project()
    (a,) = t["attempts"]
    assert (a["outcome"], a["failure_class"], a["superseded_by"], a["supersedes"]) == ("succeeded", None, None, None)
    assert a["approach"] == "edit a.py · read" and a["confidence"] == 0.9
    assert t["signals"] == [] and t["decisions"] == [] and t["handoffs"] == [] and t["conflicts"] == []
    assert not [e for e in t["edges"] if e["edge_kind"] in ("superseded", "caused")]
    (s,) = t["sessions"]
    assert (s["failure_count"], s["coverage"], s["liveness"]) == (0, "partial", "open")


def test_single_failure_not_retried() -> None:
    c = case_single_failure()
    t = c.project()
    a = by(t["attempts"], "attempt_id")
    failed = a[c.attempt(1, 0)]
    assert (failed["outcome"], failed["failure_class"], failed["superseded_by"]) == ("failed", "string_mismatch", None)
    assert failed["failing_event_id"] == c.ids["edit.end"]
    assert a[c.attempt(2, 0)]["outcome"] == "succeeded" and a[c.attempt(2, 0)]["supersedes"] is None
    assert t["decisions"] == [] and not [e for e in t["edges"] if e["edge_kind"] in ("superseded", "caused")]
    assert t["sessions"][0]["failure_count"] == 1


def test_failures_of_different_classes() -> None:
    c = case_different_classes()
    t = c.project()
    a = sorted(t["attempts"], key=lambda x: x["attempt_index"])
    assert [(x["outcome"], x["failure_class"]) for x in a] == [("failed", "string_mismatch"),
                                                               ("failed", "nonzero_exit")]
    assert [x["superseded_by"] for x in a] == [None, None]
    assert [x["ended_at"] for x in a] == [BASE_US + 3 * US, BASE_US + 5 * US]
    assert a[1]["started_at"] == BASE_US + 4 * US and a[1]["approach"] == "shell"
    assert t["decisions"] == [] and t["sessions"][0]["failure_count"] == 2


def test_signal_cleared_by_the_next_event_not_by_background_ones() -> None:
    c = case_cleared_signal()
    t = c.project()
    (s,) = t["signals"]
    assert (s["pending"], s["cleared_by"], s["cleared_at"]) == (False, c.ids["test.start"], BASE_US + 5 * US)
    assert s["signal_type"] == "permission_request"
    assert all(u["blocking_signal"] is None and u["phase"] != "blocked" for u in t["work_units"])


def test_background_notification_does_not_clear_a_signal() -> None:
    c = case_background_only()
    t = c.project()
    (s,) = t["signals"]
    assert (s["signal_type"], s["pending"], s["cleared_by"], s["cleared_at"]) == ("permission_prompt", True, None, None)
    (u,) = t["work_units"]
    assert (u["phase"], u["blocking_signal"]) == ("blocked", c.ids["perm"])
    # An uncleared signal keeps a silent session open for 12 hours (not 30 minutes).
    later = batch_tables(c.events, at=BASE_US + 4 * 3600 * US)
    assert later["sessions"][0]["liveness"] == "open"
    cleared = batch_tables(c.events + [wire(derive("event", "bg", "x"), "prompt_submitted", "claude_code",
                                            c.name, BASE_US + 9 * US, content={"prompt": "yes"})],
                           at=BASE_US + 4 * 3600 * US)
    assert cleared["signals"][0]["pending"] is False and cleared["sessions"][0]["liveness"] == "stale"


def test_successful_retry_in_the_same_turn() -> None:
    c = case_retry_in_turn()
    t = c.project()
    a = sorted(t["attempts"], key=lambda x: x["attempt_index"])
    assert len(a) == 2
    calls = by(t["tool_calls"], "provider_call_id")
    first, second = a
    assert (first["outcome"], first["failure_class"], first["superseded_by"]) == (
        "superseded", "string_mismatch", second["attempt_id"])
    assert second["outcome"] == "succeeded" and second["supersedes"] == first["attempt_id"]
    # Split at the failure's end time; the read (running when it failed) and the grep
    # (starting at that very instant, not after it) stay in the failed attempt.
    assert first["ended_at"] == BASE_US + 4 * US
    assert first["tool_call_ids"] == [calls[x]["tool_call_id"] for x in ("e1", "r1", "g1")]
    assert second["tool_call_ids"] == [calls["e2"]["tool_call_id"]]
    assert second["started_at"] == BASE_US + 6 * US
    assert calls["r1"]["attempt_id"] == first["attempt_id"] and calls["e2"]["attempt_id"] == second["attempt_id"]
    sup = [e for e in t["edges"] if e["edge_kind"] == "superseded"]
    assert [(e["from_id"], e["to_id"], e["evidence"]) for e in sup] == [
        (first["attempt_id"], second["attempt_id"], [c.ids["edit1.end"], c.ids["edit2.start"]])]
    (d,) = t["decisions"]
    assert (d["kind"], d["selected"], d["alternatives"]) == ("approach_change", second["attempt_id"],
                                                             [first["attempt_id"]])


def test_ended_session_is_closed() -> None:
    c = case_ended()
    t = c.project()
    (s,) = t["sessions"]
    assert (s["liveness"], s["state"], s["end_reason"], s["ended_at"]) == ("closed", "closed", "logout",
                                                                           BASE_US + 5 * US)
    assert s["last_activity_event_id"] == c.ids["read.end"]
    (turn,) = t["turns"]
    assert (turn["status"], turn["ended_at"]) == ("unknown", BASE_US + 5 * US)
    assert t["attempts"][0]["outcome"] == "abandoned"
    # Resumed: a later start re-opens it.
    c.add("resume", "session_started", 60, attrs={"source": "resume"})
    (s,) = c.project()["sessions"]
    assert (s["liveness"], s["ended_at"]) == ("open", None)


def test_injected_prompts_open_no_turn(tmp_path: Path) -> None:
    """Real Claude payloads: a <system-reminder> prompt is marked injected and opens no turn."""
    cwd = str(tmp_path)
    base = {"session_id": "inj", "transcript_path": "/x/inj.jsonl", "cwd": cwd, "permission_mode": "default"}
    payloads: list[dict[str, Any]] = [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "Fix the parser"},
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_use_id": "t1",
         "tool_input": {"file_path": cwd + "/a.py"}},
        {**base, "hook_event_name": "UserPromptSubmit",
         "prompt": "<system-reminder>\nThe user opened a.py in the IDE.\n</system-reminder>"},
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": "t1",
         "tool_input": {"file_path": cwd + "/a.py"}, "tool_response": {"type": "text"}},
        {**base, "hook_event_name": "Stop", "stop_hook_active": False},
    ]
    events = [build_event("claude-code", p, BASE_US + i * SECOND, cwd).event for i, p in enumerate(payloads)]
    assert events[2]["attrs"]["prompt_kind"] == "injected"
    t = batch_tables(events)
    (turn,) = t["turns"]
    assert (turn["turn_index"], turn["objective"], turn["status"], turn["tool_call_count"]) == (
        1, "Fix the parser", "completed", 1)
    (s,) = t["sessions"]
    assert (s["prompt_count"], s["turn_count"]) == (1, 1)
    assert [e for e in t["edges"] if e["edge_kind"] == "triggered"][0]["from_id"] == events[0]["event_id"]


def test_fifo_pairing_without_call_ids() -> None:
    c = case_fifo()
    t = c.project()
    calls = sorted(t["tool_calls"], key=lambda x: x["started_at"])
    assert [(x["pairing"], x["paths"]) for x in calls] == [("fifo", ["a.py"]), ("fifo", ["b.py"])]
    assert [(x["start_event_id"], x["end_event_id"]) for x in calls] == [
        (c.ids["r1.start"], c.ids["r1.end"]), (c.ids["r2.start"], c.ids["r2.end"])]
    assert [x["duration_ms"] for x in calls] == [3000, 4000]
    assert [x["confidence"] for x in calls] == [0.6, 0.6]
    (s,) = t["sessions"]
    assert (s["fifo_pairings"], s["unpaired_tool_starts"], s["unpaired_tool_finishes"]) == (2, 0, 0)
    assert t["attempts"][0]["confidence"] == 0.6  # coverage partial, but not every call paired by id


def test_end_with_a_call_id_never_pairs_with_another_call_id() -> None:
    c = case_other_call_id()
    t = c.project()
    calls = {(x["start_event_id"], x["end_event_id"]): x for x in t["tool_calls"]}
    assert set(calls) == {(c.ids["a.start"], None), (None, c.ids["b.end"]), (c.ids["c.start"], c.ids["d.end"])}
    a, b, cd = calls[(c.ids["a.start"], None)], calls[(None, c.ids["b.end"])], calls[(c.ids["c.start"], c.ids["d.end"])]
    assert (a["pairing"], a["provider_call_id"], a["finished_at"], a["outcome_status"]) == (
        "start_only", "A", None, None)
    # (A lone end with an id counts as paired by id: ``pairing`` says call_id, confidence 0.9.)
    assert (b["provider_call_id"], b["started_at"], b["start_event_id"], b["outcome_status"]) == (
        "B", None, None, "success")
    assert (cd["pairing"], cd["provider_call_id"], cd["duration_ms"]) == ("fifo", "D", 1000)
    (s,) = t["sessions"]
    assert (s["unpaired_tool_starts"], s["unpaired_tool_finishes"], s["fifo_pairings"], s["in_flight_calls"]) == (
        1, 1, 1, 1)
    (u,) = t["work_units"]
    assert (u["status"], u["status_reason"]) == ("open", "a tool call is still running")


ALL_CASES = (case_normal_turn, case_single_failure, case_different_classes, case_cleared_signal,
             case_background_only, case_retry_in_turn, case_ended, case_fifo, case_other_call_id)


def test_negative_cases_stored_equal_batch(tmp_path: Path) -> None:
    """All the small sessions in one data root: the stored views equal the batch projection."""
    root = str(tmp_path / "root")
    events = [e for make in ALL_CASES for e in make().events]
    deliver(root, events)
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "full"
    got, want = known_divergences(view_tables(root)), known_divergences(batch_tables(events))
    assert got == want, diff(got, want)
    assert len(got["sessions"]) == len(ALL_CASES)


# -- a turn's last event -------------------------------------------------------------------


def _two_units() -> Case:
    """Turn 1 edits a.py and stops; an hour later turn 2 edits b.py: two work units."""
    c = Case("two-units")
    c.add("prompt1", "prompt_submitted", 0, content={"prompt": "one"})
    c.call("e1", _EDIT, 1, 2, cid="e1", paths=["a.py"])
    c.add("stop1", "turn_stopped", 3)
    c.add("prompt2", "prompt_submitted", 3600, content={"prompt": "two"})
    c.call("e2", _EDIT, 3601, 3602, cid="e2", paths=["b.py"])
    c.add("stop2", "turn_stopped", 3603)
    return c


def test_a_turn_ends_at_its_own_last_event() -> None:
    c = _two_units()
    t = c.project()
    turns = sorted(t["turns"], key=lambda x: x["turn_index"])
    assert turns[0]["last_event_id"] == c.ids["stop1"]
    assert turns[1]["first_event_id"] == c.ids["prompt2"]


def test_a_finished_work_unit_is_not_kept_open_by_the_next_prompt() -> None:
    c = _two_units()
    t = c.project()
    units = {u["objective"]: u for u in t["work_units"]}
    assert set(units) == {"one", "two"}
    assert units["one"]["updated_at"] == BASE_US + 3 * US
    assert (units["one"]["status"], units["two"]["status"]) == ("completed", "open")


# -- real fixtures ------------------------------------------------------------------------

SHARED = shared_dir()
FIXTURES = SHARED / "fixtures" if SHARED is not None else None
needs_fixtures = pytest.mark.skipif(FIXTURES is None, reason=missing())


def _genuine(element: Any) -> Any:
    """One logger wrapped PostToolUseFailure stdin in ``raw_input`` (see the fixtures README)."""
    if isinstance(element, dict) and "raw_input" in element:
        raw = element["raw_input"]
        if isinstance(raw, str):
            raw = json.loads(raw)
        if isinstance(raw, dict):
            return raw
    return element


def _iso_us(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1_000_000)
    except ValueError:
        return None


def _codex_payloads(path: Path, cwd: str) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Codex hook payloads (Claude-shaped) for what a rollout records."""
    base: dict[str, Any] = {"cwd": cwd}
    turn: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        p, at = rec.get("payload") or {}, _iso_us(rec.get("timestamp"))
        if rec.get("type") == "session_meta":
            base.update(session_id=p.get("id"), transcript_path=str(path))
            yield {**base, "hook_event_name": "SessionStart", "source": "startup"}, at
        elif rec.get("type") == "event_msg" and p.get("type") == "task_started":
            turn = {"turn_id": p.get("turn_id")}
        elif rec.get("type") == "response_item" and p.get("type") == "message" and p.get("role") == "user":
            text = "".join(b.get("text", "") for b in p.get("content") or [] if isinstance(b, dict))
            yield {**base, **turn, "hook_event_name": "UserPromptSubmit", "prompt": text}, at
        elif rec.get("type") == "response_item" and p.get("type") in ("function_call", "custom_tool_call"):
            yield {**base, **turn, "hook_event_name": "PreToolUse", "tool_name": p.get("name"),
                   "tool_use_id": p.get("call_id"), "tool_input": p.get("arguments") or p.get("input")}, at
        elif rec.get("type") == "response_item" and p.get("type") in ("function_call_output",
                                                                       "custom_tool_call_output"):
            yield {**base, **turn, "hook_event_name": "PostToolUse", "tool_use_id": p.get("call_id"),
                   "tool_response": p.get("output")}, at
        elif rec.get("type") == "event_msg" and p.get("type") == "task_complete":
            yield {**base, **turn, "hook_event_name": "Stop", "stop_hook_active": False,
                   "last_assistant_message": p.get("last_agent_message")}, at


def _cursor_payloads(path: Path, cwd: str) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Cursor hook payloads for what an agent transcript records (no ids, no results, no times)."""
    base = {"conversation_id": "cursor-" + path.stem, "workspace_roots": [cwd]}
    yield {**base, "hook_event_name": "sessionStart"}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "turn_ended":
            status = "completed" if rec.get("status") == "success" else "aborted"
            yield {**base, "hook_event_name": "stop", "status": status}, None
            continue
        for block in (rec.get("message") or {}).get("content") or []:
            if rec.get("role") == "user" and block.get("type") == "text":
                yield {**base, "hook_event_name": "beforeSubmitPrompt", "prompt": block.get("text")}, None
            elif block.get("type") == "tool_use" and block.get("name") == "Shell":
                command = (block.get("input") or {}).get("command")
                yield {**base, "hook_event_name": "beforeShellExecution", "command": command, "cwd": cwd}, None
                yield {**base, "hook_event_name": "afterShellExecution", "command": command, "output": ""}, None
            elif block.get("type") == "tool_use":
                tool_input = json.dumps(block.get("input"))
                yield {**base, "hook_event_name": "preToolUse", "tool_name": block.get("name"),
                       "tool_input": tool_input}, None
                yield {**base, "hook_event_name": "postToolUse", "tool_name": block.get("name"),
                       "tool_input": tool_input, "tool_output": "{}"}, None
    yield {**base, "hook_event_name": "sessionEnd", "reason": "user_close"}, None


def _gemini_payloads(path: Path, cwd: str) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Gemini CLI hook payloads for what a JSONL chat recording records."""
    base: dict[str, Any] = {"cwd": cwd}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if "sessionId" in rec:
            base.update(session_id=rec["sessionId"], transcript_path=str(path))
            yield {**base, "hook_event_name": "SessionStart", "source": "startup"}, _iso_us(rec.get("startTime"))
        elif rec.get("type") == "user":
            text = "".join(b.get("text", "") for b in rec.get("content") or [] if isinstance(b, dict))
            yield {**base, "hook_event_name": "BeforeAgent", "prompt": text}, _iso_us(rec.get("timestamp"))
        elif rec.get("type") == "gemini":
            at = _iso_us(rec.get("timestamp"))
            for call in rec.get("toolCalls") or []:
                common = {**base, "tool_name": call.get("name"), "tool_input": call.get("args"),
                          "tool_use_id": call.get("id")}
                yield {**common, "hook_event_name": "BeforeTool"}, at
                yield {**common, "hook_event_name": "AfterTool", "tool_response": {
                    "llmContent": str(call.get("resultDisplay") or ""), "status": call.get("status")}}, \
                    _iso_us(call.get("timestamp"))
            if rec.get("content"):
                yield {**base, "hook_event_name": "AfterAgent", "prompt_response": rec["content"]}, at


def _record_all(root: str, agent: str, payloads: Iterator[tuple[dict[str, Any], int | None]],
                clock: list[int]) -> list[dict[str, Any]]:
    """Each payload through ``hook.build`` + ``hook.record`` (a synthetic clock when it has no time)."""
    out = []
    for payload, at in payloads:
        clock[0] = max(clock[0] + SECOND, at or 0)
        data = json.dumps(payload).encode("utf-8")
        captured = hook.build(agent, data, len(data), [], environ={}, captured_at=clock[0], cwd=payload.get("cwd"))
        assert captured.problem is None, (agent, payload.get("hook_event_name"), captured.problem)
        hook.record(captured, root, "relaxed")
        out.append(captured.event)
    return out


def _readable(root: str) -> dict[str, list[dict[str, Any]]]:
    engine, caught = open_current(root)
    with engine:
        assert caught is not None and not caught["ingest"]["breaks"]
        assert caught["projection"]["mode"] == "none"  # refreshed just before
        for t in TABLES + ("events",):
            engine.run(f"SELECT * FROM {t}", max_rows=100_000)
    return view_tables(root)


@needs_fixtures
def test_real_claude_hook_payloads_project(tmp_path: Path) -> None:
    assert FIXTURES is not None
    files = sorted((FIXTURES / "claude-code-hooks").glob("*.json"))
    assert files
    root = str(tmp_path / "root")
    clock = [BASE_US]
    events: list[dict[str, Any]] = []
    for f in files:
        payloads = [_genuine(e) for e in json.loads(f.read_text(encoding="utf-8"))]
        events += _record_all(root, "claude-code", ((p, None) for p in payloads), clock)
    assert len(events) > 500
    report = ingest(root, durability="relaxed")
    assert report.events == len(events) and not report.breaks
    assert refresh(root).mode == "full"
    got = _readable(root)
    want = batch_tables(events)
    got, want = known_divergences(got), known_divergences(want)
    assert got == want, diff(got, want)
    kinds = Counter(e["kind"] for e in events)
    assert kinds["tool_call_started"] and kinds["tool_call_finished"] and kinds["permission_requested"]
    assert got["sessions"] and got["tool_calls"] and got["turns"] and got["signals"]
    # The files are per hook event (their interleaving is unknown): some calls pair, some stay lone.
    assert "call_id" in {c["pairing"] for c in got["tool_calls"]}
    assert {c["pairing"] for c in got["tool_calls"]} <= {"call_id", "fifo", "start_only", "end_only"}


@needs_fixtures
@pytest.mark.parametrize("agent, folder, convert", [
    ("codex", "codex", _codex_payloads),
    ("cursor", "cursor", _cursor_payloads),
    ("gemini-cli", "gemini-cli", _gemini_payloads),
])
def test_real_transcripts_as_hook_payloads_project(tmp_path: Path, agent: str, folder: str, convert: Any) -> None:
    """The other agents' fixtures are transcripts, not hook payloads: each record
    becomes the hook payload that agent sends for it, through the real capture path."""
    assert FIXTURES is not None
    files = sorted((FIXTURES / folder).glob("*.jsonl"))
    assert files
    root, cwd = str(tmp_path / "root"), str(tmp_path / "work")
    os.makedirs(cwd)
    clock = [BASE_US]
    events: list[dict[str, Any]] = []
    for f in files:
        events += _record_all(root, agent, convert(f, cwd), clock)
    assert events and all(e["kind"] != "unknown" for e in events)
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "full"
    got = _readable(root)
    want = batch_tables(events)
    got, want = known_divergences(got), known_divergences(want)
    assert got == want, diff(got, want)
    assert got["sessions"] and got["turns"]
    assert all(s["provider"] == agent.replace("-", "_") for s in got["sessions"])


@needs_fixtures
def test_real_transcript_lines_as_raw_payloads_project(tmp_path: Path) -> None:
    """Every transcript line pushed as is (not a hook payload): recorded (as unknown
    events where nothing matches), ingested and projected without error."""
    assert FIXTURES is not None
    root = str(tmp_path / "root")
    clock = BASE_US
    n = 0
    for agent, folder in (("codex", "codex"), ("cursor", "cursor"), ("gemini-cli", "gemini-cli"),
                          ("claude-code", "claude-code")):
        for f in sorted((FIXTURES / folder).glob("*.jsonl")):
            for line in f.read_bytes().splitlines()[:200]:
                clock += SECOND
                captured = hook.build(agent, line, len(line), [], environ={}, captured_at=clock, cwd=str(tmp_path))
                hook.record(captured, root, "relaxed")
                n += 1
    assert n > 30
    report = ingest(root, durability="relaxed")
    assert report.events == n and not report.breaks
    refresh(root)
    _readable(root)
