"""State at an instant, DIFF, WHY, WHAT IS … NOW, TRACE and id resolution
(agentlog.query.state) on the reference scenario and on small purpose-built
sessions — the negative cases matter most: no rule fires, no guess is made."""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.query import state as S
from agentlog.query.state import activity as S_activity, at as S_at, attempts as S_attempts
from agentlog.query.state import calls as S_calls, facts as S_facts
from agentlog.projection.session import MUTATING
from agentlog.projection.ids import derive
from agentlog.query.engine import Engine, QueryResult
from agentlog.operations.refresh import open_current
from scenario import (BASE_US, CLAUDE, CLAUDE_SESSION, CODEX, CODEX_ATTEMPT, FAILED_EDIT, RETRY, SECOND, Scenario,
                      make_repo, reference_engine, write)


def at(offset_s: float) -> int:
    return BASE_US + int(offset_s * SECOND)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, Engine]]:
    with reference_engine(tmp_path_factory.mktemp("state-ref")) as r:
        yield r


# --------------------------------------------------------------------------- small sessions


@dataclass
class Claude:
    """Writes one Claude Code session's hook payloads at offsets from ``base``."""

    root: str
    repo: str
    session: str
    base: int
    events: dict[str, str] = field(default_factory=dict)

    def emit(self, role: str, t: float, payload: dict[str, Any]) -> str:
        body = {"session_id": self.session, "cwd": self.repo, "permission_mode": "default",
                "transcript_path": f"/home/dev/.claude/projects/x/{self.session}.jsonl", **payload}
        ev = write(self.root, "claude-code", body, self.base + int(t * SECOND), self.repo)
        self.events[role] = ev
        return ev

    def start(self, t: float) -> None:
        self.emit("start", t, {"hook_event_name": "SessionStart", "source": "startup"})

    def prompt(self, t: float, text: str = "do the thing") -> None:
        self.emit(f"prompt@{t}", t, {"hook_event_name": "UserPromptSubmit", "prompt": text})

    def edit(self, t: float, call: str, ok: bool, path: str = "src/lib.rs") -> None:
        tool_input = {"file_path": os.path.join(self.repo, path), "old_string": "a", "new_string": "b"}
        self.emit(f"{call}.start", t, {"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_use_id": call,
                                       "tool_input": tool_input})
        if ok:
            self.emit(f"{call}.end", t + 1, {"hook_event_name": "PostToolUse", "tool_name": "Edit",
                                             "tool_use_id": call, "tool_input": tool_input,
                                             "tool_response": {"filePath": tool_input["file_path"]}})
        else:
            self.emit(f"{call}.end", t + 1, {"hook_event_name": "PostToolUseFailure", "tool_name": "Edit",
                                             "tool_use_id": call, "tool_input": tool_input, "is_interrupt": False,
                                             "error": "String to replace not found in file.\nString: a"})

    def bash(self, t: float, call: str, ok: bool, command: str = "make build") -> None:
        tool_input = {"command": command}
        self.emit(f"{call}.start", t, {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": call,
                                       "tool_input": tool_input})
        if ok:
            self.emit(f"{call}.end", t + 1, {"hook_event_name": "PostToolUse", "tool_name": "Bash",
                                             "tool_use_id": call, "tool_input": tool_input,
                                             "tool_response": {"stdout": "ok", "stderr": "", "interrupted": False}})
        else:
            self.emit(f"{call}.end", t + 1, {"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                                             "tool_use_id": call, "tool_input": tool_input, "is_interrupt": False,
                                             "error": "bash: make: command not found"})

    def permission(self, t: float) -> None:
        self.emit("permission", t, {"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                    "tool_input": {"command": "rm -rf build"}})

    def stop(self, t: float) -> None:
        self.emit(f"stop@{t}", t, {"hook_event_name": "Stop", "stop_hook_active": False})

    def end(self, t: float) -> None:
        self.emit("end", t, {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})

    @property
    def id(self) -> str:
        return derive("session", "claude_code", self.session)


@dataclass
class Extra:
    engine: Engine
    sessions: dict[str, Claude]


@pytest.fixture(scope="module")
def extra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Extra]:
    """Six small sessions in one project, ten minutes apart."""
    base = tmp_path_factory.mktemp("state-extra")
    root = str(base / "home")
    os.makedirs(root)
    repo = make_repo(str(base / "work"))
    out: dict[str, Claude] = {}

    def new(name: str, i: int) -> Claude:
        out[name] = Claude(root, repo, f"extra-{name}", BASE_US + i * 600 * SECOND)
        return out[name]

    s = new("normal", 0)
    s.start(0), s.prompt(1), s.edit(2, "n1", ok=True), s.stop(5)
    s = new("one_failure", 1)
    s.start(0), s.prompt(1), s.edit(2, "f1", ok=False), s.stop(5)
    s = new("different_classes", 2)
    s.start(0), s.prompt(1), s.bash(2, "d1", ok=False), s.edit(5, "d2", ok=False), s.stop(8)
    s = new("repeating", 3)
    s.start(0), s.prompt(1), s.edit(2, "r1", ok=False), s.edit(5, "r2", ok=False), s.stop(8)
    s = new("cleared", 4)
    s.start(0), s.prompt(1), s.permission(2), s.bash(3, "c1", ok=True), s.stop(6)
    s = new("ended", 5)
    s.start(0), s.prompt(1), s.permission(2), s.end(3)
    engine, _ = open_current(root)
    yield Extra(engine, out)
    engine.close()


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Claude]]:
    """One turn of twelve failing edits of one file: eleven ``superseded`` edges in a row."""
    base = tmp_path_factory.mktemp("state-chain")
    root = str(base / "home")
    os.makedirs(root)
    repo = make_repo(str(base / "work"))
    s = Claude(root, repo, "chain", BASE_US)
    s.start(0)
    s.prompt(1)
    for i in range(12):
        s.edit(10 + 3 * i, f"e{i}", ok=False)
    s.stop(100)
    engine, _ = open_current(root)
    yield engine, s
    engine.close()


class Recording:
    """An engine wrapper that records the statements run through it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.__wrapped__ = engine
        self.sql: list[str] = []

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = 30.0,
            max_rows: int = 10_000) -> QueryResult:
        self.sql.append(sql)
        return self.engine.run(sql, params, timeout=timeout, max_rows=max_rows)


# --------------------------------------------------------------------------- state at t


def _session(st: S.StateAt, sid: str) -> dict[str, Any]:
    found = [s for s in st.sessions if s["session_id"] == sid]
    assert len(found) == 1, [s["session_id"] for s in st.sessions]
    return found[0]


def test_state_during_the_failing_turn(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    st = S.state_at(engine, at(25))
    assert [s["session_id"] for s in st.sessions] == [CLAUDE]
    s = st.sessions[0]
    assert s["state"] == "open" and s["liveness"] == "open" and not s["blocked"]
    assert s["coverage"] == "partial"  # the end is not observed yet at t+25s
    assert s["current_turn"]["turn_index"] == 1 and s["current_turn"]["status"] == "in_progress"
    assert s["in_flight"] == []
    last = s["last_attempt"]
    assert last["attempt_id"] == FAILED_EDIT
    assert last["outcome"] == "failed" and last["superseded_by"] is None  # the retry has not started
    assert last["failure_class"] == "string_mismatch"
    assert s["last_failure_class"] == "string_mismatch"
    assert s["last_activity_at"] == "2026-11-02T10:00:21Z"
    assert sc.events["claude.edit1.fail"] in s["evidence"]
    [unit] = st.work_units
    assert unit["status"] == "open" and unit["phase"] == "debug"
    assert unit["last_attempt"]["outcome"] == "failed"


def test_state_while_an_edit_is_running(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    s = _session(S.state_at(engine, at(20.5)), CLAUDE)
    assert [f["tool_name"] for f in s["in_flight"]] == ["Edit"]
    assert s["in_flight"][0]["start_event_id"] == sc.events["claude.edit1.start"]
    assert s["last_attempt"]["outcome"] == "in_progress"  # the failure lands at t+21s


def test_state_during_the_retry(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    s = _session(S.state_at(engine, at(62)), CLAUDE)
    assert s["current_turn"]["turn_index"] == 2 and s["current_turn"]["status"] == "in_progress"
    assert s["last_attempt"]["attempt_id"] == RETRY and s["last_attempt"]["outcome"] == "in_progress"
    fail = s["last_failure"]
    assert fail["attempt_id"] == FAILED_EDIT
    assert fail["outcome"] == "superseded" and fail["superseded_by"] == RETRY


def test_state_between_the_sessions(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    st = S.state_at(engine, at(200))
    assert st.sessions == [] and st.work_units == []
    assert [u["status"] for u in st.closed_work_units] == ["completed"]
    assert any("1 completed" in n for n in st.notes)


def test_state_with_codex_blocked(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    st = S.state_at(engine, at(375))
    assert [s["session_id"] for s in st.sessions] == [CODEX]
    s = st.sessions[0]
    assert s["state"] == "open" and s["blocked"]
    assert s["explanation"].startswith("waiting on a permission request")
    assert s["blocking_signal"]["event_id"] == sc.events["codex.permission1"]
    assert sc.events["codex.permission1"] in s["evidence"]
    assert s["last_attempt"]["attempt_id"] == CODEX_ATTEMPT and s["last_attempt"]["outcome"] == "in_progress"
    [unit] = st.work_units
    assert unit["phase"] == "blocked" and unit["blocked"] and unit["actors"] == ["claude_code", "codex"]


def test_state_at_the_end_of_a_session_and_before_anything(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    s = _session(S.state_at(engine, at(170)), CLAUDE)  # ended exactly then
    assert s["state"] == "closed" and s["liveness"] == "closed" and s["coverage"] == "full"
    assert s["current_turn"]["status"] == "completed"
    assert S.state_at(engine, at(-10)).sessions == []


def test_state_scope_and_filters(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    from agentlog.query.scope import Scope

    assert S.state_at(engine, at(25), Scope(project_ids=["0000"])).sessions == []
    assert S.state_at(engine, at(25), provider="codex").sessions == []
    assert len(S.state_at(engine, at(25), session_ids=[CLAUDE]).sessions) == 1


# --------------------------------------------------------------------------- diff


def test_diff_state(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    rows = S.diff_state(engine, at(25), at(62))
    changed = {(r["subject_type"], r["field"]): (r["before"], r["after"]) for r in rows}
    assert all(r["change"] == "changed" for r in rows)
    assert changed[("session", "last_attempt_outcome")] == ("failed", "in_progress")
    assert changed[("session", "last_attempt_id")] == (FAILED_EDIT, RETRY)
    assert changed[("session", "last_failure_outcome")] == ("failed", "superseded")
    assert ("session", "state") not in changed  # unchanged fields are omitted

    rows = S.diff_state(engine, at(62), at(375))
    by = {(r["subject_id"], r["change"]): r for r in rows}
    gone = by[(CLAUDE, "removed")]
    assert (gone["field"], gone["before"], gone["after"]) == ("state", "open", "closed")
    new = by[(CODEX, "added")]
    assert new["after"] == "open" and new["provider"] == "codex"
    assert any(r["field"] == "phase" and r["after"] == "blocked" for r in rows if r["subject_type"] == "work_unit")

    unit_rows = [r for r in S.diff_state(engine, at(62), at(200)) if r["subject_type"] == "work_unit"]
    assert [(r["change"], r["after"]) for r in unit_rows] == [("removed", "completed")]
    assert S.diff_state(engine, at(380), at(390)) == []


def test_diff_state_needs_t1_before_t2(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    for t1, t2 in ((at(62), at(25)), (at(25), at(25))):
        with pytest.raises(S.StateError) as e:
            S.diff_state(engine, t1, t2)
        assert e.value.code == "AQL0408"


# --------------------------------------------------------------------------- why


def test_why_project_blocked(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    [row] = S.why_blocked(engine, "project", None)
    assert "waiting on a permission request" in row["claim"]
    assert row["evidence"] == [sc.events["codex.permission1"]]
    assert row["confidence"] == 0.65  # the Codex session's coverage is partial
    assert row["rule"] == "pending_signal" and row["session_id"] == CODEX
    assert row["uncertainty"]["reason"] == "heuristic"
    assert "not observed" in row["uncertainty"]["note"]


def test_why_blocked_on_the_claude_session_is_insufficient(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    [row] = S.why_blocked(engine, "session", CLAUDE)
    assert row["claim"] is None and row["confidence"] is None
    assert row["uncertainty"]["reason"] == "insufficient_evidence"
    assert "ended" in row["uncertainty"]["note"]
    assert row["evidence"] == [sc.events["claude.end"]]
    # Before Codex asked for permission, nothing in the project was blocked.
    [row] = S.why_blocked(engine, "project", None, now_us=at(365))
    assert row["uncertainty"]["reason"] == "insufficient_evidence" and row["claim"] is None


def test_why_blocked_work_unit(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    unit = engine.run("select work_unit_id from work_units").rows[0][0]
    [row] = S.why_blocked(engine, "work_unit", unit)
    assert row["subject_type"] == "work_unit" and "permission request" in row["claim"]
    assert row["evidence"] == [sc.events["codex.permission1"]]


def test_why_failed_names_event_retry(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    [row] = S.why_failed(engine, FAILED_EDIT)
    assert row["rule"] == "failure" and row["confidence"] == 0.9
    assert "string_mismatch" in row["claim"] and "Edit" in row["claim"]
    assert f"att_{RETRY[:8]}" in row["claim"] and "succeeded" in row["claim"]
    assert row["evidence"] == [sc.events["claude.edit1.fail"], sc.events["claude.edit2.start"]]
    [row] = S.why_failed(engine, RETRY)
    assert row["uncertainty"]["reason"] == "state_mismatch" and row["claim"] is None
    with pytest.raises(S.ResolveError):
        S.why_failed(engine, "00000000-0000-0000-0000-000000000000")


@pytest.mark.parametrize("name", ["normal", "one_failure", "different_classes", "cleared", "ended"])
def test_why_blocked_negative_cases(extra: Extra, name: str) -> None:
    s = extra.sessions[name]
    rows = S.why_blocked(extra.engine, "session", s.id)
    assert len(rows) == 1
    row = rows[0]
    assert row["claim"] is None and row["confidence"] is None and row["rule"] is None
    assert row["uncertainty"]["reason"] == "insufficient_evidence"
    if name == "ended":
        assert "ended" in row["uncertainty"]["note"]


def test_different_classes_really_differ(extra: Extra) -> None:
    sid = extra.sessions["different_classes"].id
    rows = extra.engine.run("select outcome, failure_class from attempts where session_id = ? order by attempt_index",
                            [sid]).rows
    assert [r[0] for r in rows] == ["failed", "failed"]
    assert rows[0][1] != rows[1][1] and None not in (rows[0][1], rows[1][1])


def test_why_blocked_repeating_itself(extra: Extra) -> None:
    s = extra.sessions["repeating"]
    [row] = S.why_blocked(extra.engine, "session", s.id)
    assert row["rule"] == "repeated_failure" and "repeating itself" in row["claim"]
    assert "string_mismatch" in row["claim"]
    assert row["confidence"] == 0.5  # partial coverage (no end observed)
    assert s.events["r1.end"] in row["evidence"] and s.events["r2.end"] in row["evidence"]
    # The project answer lists only sessions a rule fires for.
    rows = S.why_blocked(extra.engine, "project", None)
    assert [(r["session_id"], r["rule"]) for r in rows] == [(s.id, "repeated_failure")]


def test_cleared_signal_is_not_blocked_at_any_later_time(extra: Extra) -> None:
    s = extra.sessions["cleared"]
    mid = s.base + int(2.5 * SECOND)
    assert _session(S.state_at(extra.engine, mid), s.id)["blocked"]
    assert not _session(S.state_at(extra.engine, s.base + 4 * SECOND), s.id)["blocked"]


# --------------------------------------------------------------------------- what is … doing now


def test_what_is_doing_now(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    rows = S.what_is_doing_now(engine)  # now = the latest event (t+370s)
    assert [(r["subject_type"], r["subject_id"]) for r in rows][1:] == [("session", CODEX)]
    assert rows[0]["subject_type"] == "work_unit"
    assert all(r["blocked"] for r in rows)
    [row] = S.what_is_doing_now(engine, at(200))
    assert row["subject_type"] == "none"
    assert row["uncertainty"]["reason"] == "insufficient_evidence"
    assert "2026-11-02T10:02:50Z" in row["uncertainty"]["note"]  # the Claude session's end
    assert row["evidence"] == [sc.events["claude.end"]]
    # A session waiting on a person stays live for 12 hours, then it is stale: not doing anything.
    assert len(S.what_is_doing_now(engine, at(370 + 3600))) == 2
    [row] = S.what_is_doing_now(engine, at(370 + 13 * 3600))
    assert row["subject_type"] == "none"


# --------------------------------------------------------------------------- trace


def test_trace_up_from_the_retry(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    rows = S.trace(engine, f"att_{RETRY}")
    assert [(r["depth"], r["edge_kind"], r["from_id"], r["to_id"]) for r in rows] == [
        (1, "superseded", FAILED_EDIT, RETRY)]
    assert rows[0]["evidence"] == [sc.events["claude.edit1.fail"], sc.events["claude.edit2.start"]]
    assert S.trace(engine, FAILED_EDIT, direction="up") == []


def test_trace_events_and_directions(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    rows = S.trace(engine, sc.events["claude.edit2.start"])
    assert [(r["edge_kind"], r["from_id"]) for r in rows] == [("caused", sc.events["claude.edit1.fail"])]
    down = S.trace(engine, FAILED_EDIT, direction="down")
    assert [(r["edge_kind"], r["to_id"], r["direction"]) for r in down] == [("superseded", RETRY, "down")]
    # A turn's cause is its prompt.
    turn = derive("turn", CLAUDE, "2")
    assert [(r["edge_kind"], r["from_id"]) for r in S.trace(engine, turn)] == [
        ("triggered", sc.events["claude.prompt2"])]
    # Down from the Claude session: its handoff and its turns, then what they contain.
    rows = S.trace(engine, CLAUDE, depth=2, direction="down")
    first = {(r["edge_kind"], r["to_type"]) for r in rows if r["depth"] == 1}
    assert first == {("handed_off", "session"), ("parent_of", "turn")}
    assert sum(1 for r in rows if r["depth"] == 1 and r["edge_kind"] == "parent_of") == 4
    assert {r["to_type"] for r in rows if r["depth"] == 2} == {"tool_call", "turn"}
    # Up never follows containment.
    assert S.trace(engine, CLAUDE, direction="up") == []


def test_trace_depth_limit_and_both(chain: tuple[Engine, Claude]) -> None:
    engine, s = chain
    sid = s.id
    attempts = [derive("attempt", sid, "1", str(i)) for i in range(12)]
    rows = S.trace(engine, attempts[-1], depth=10)
    edges = [r for r in rows if r["edge_kind"] == "superseded"]
    assert [r["depth"] for r in edges] == list(range(1, 11))
    assert [r["to_id"] for r in edges] == attempts[11:1:-1]
    [cut] = [r for r in rows if r["edge_kind"] == "depth_limit"]
    assert cut["from_id"] == attempts[1] and cut["depth"] == 11
    assert cut["uncertainty"]["reason"] == "depth_limit"
    assert not any(r["edge_kind"] == "depth_limit" for r in S.trace(engine, attempts[-1], depth=11))
    both = S.trace(engine, attempts[5], depth=20, direction="both")
    keys = [(r["edge_kind"], r["from_id"], r["to_id"]) for r in both]
    assert len(keys) == len(set(keys)) == 11  # every edge once, no depth_limit
    assert {r["direction"] for r in both} == {"up", "down"}


def test_trace_loads_the_causal_edges_once(chain: tuple[Engine, Claude]) -> None:
    engine, s = chain
    last = derive("attempt", s.id, "1", "11")
    rec = Recording(engine)
    S.trace(rec, last, depth=10)  # the fixture's engine may already have its index
    before = len(rec.sql)
    started = time.perf_counter()
    S.trace(rec, last, depth=10)
    elapsed = time.perf_counter() - started
    assert not any("FROM edges WHERE edge_kind IN" in q for q in rec.sql[before:])
    assert elapsed < 1.0  # one id lookup; the walk itself is in memory


def test_trace_arguments(ref: tuple[Scenario, Engine]) -> None:
    _, engine = ref
    with pytest.raises(S.StateError):
        S.trace(engine, RETRY, depth=0)
    with pytest.raises(S.StateError):
        S.trace(engine, RETRY, direction="sideways")
    with pytest.raises(S.ResolveError):
        S.trace(engine, "dec_" + RETRY)  # not a kind TRACE starts from


# --------------------------------------------------------------------------- ids


def test_resolve_id_forms(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    assert S.resolve_id(engine, f"att_{RETRY}") == ("attempt", RETRY)
    assert S.resolve_id(engine, RETRY) == ("attempt", RETRY)
    assert S.resolve_id(engine, RETRY[:6]) == ("attempt", RETRY)
    assert S.resolve_id(engine, f"ATT_{RETRY[:8].upper()}") == ("attempt", RETRY)
    assert S.resolve_id(engine, RETRY.replace("-", "")[:14]) == ("attempt", RETRY)
    assert S.resolve_id(engine, CLAUDE_SESSION) == ("session", CLAUDE)
    ev = sc.events["codex.permission1"]
    assert S.resolve_id(engine, ev) == ("event", ev)
    assert S.resolve_id(engine, ev, ["event"]) == ("event", ev)


def test_resolve_id_errors(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    common = os.path.commonprefix([sc.events["claude.start"], sc.events["claude.prompt1"]])
    assert len(common.replace("-", "")) >= 4
    with pytest.raises(S.ResolveError) as e:
        S.resolve_id(engine, common)
    assert e.value.code == "AQL0302" and e.value.matches["event"] >= 2 and "ambiguous" in str(e.value)
    with pytest.raises(S.ResolveError) as e:
        S.resolve_id(engine, "ffffffff")
    assert e.value.code == "AQL0301"
    with pytest.raises(S.ResolveError) as e:
        S.resolve_id(engine, "ab")
    assert e.value.code == "AQL0303"
    with pytest.raises(S.ResolveError) as e:
        S.resolve_id(engine, f"ses_{RETRY}", ["attempt"])
    assert e.value.code == "AQL0304"
    with pytest.raises(S.ResolveError) as e:
        S.resolve_id(engine, f"ses_{RETRY}")  # an attempt id with a session prefix
    assert e.value.code == "AQL0301"
    with pytest.raises(S.ResolveError):
        S.resolve_id(engine, "no such thing")


def test_latest_event_is_the_default_now(ref: tuple[Scenario, Engine]) -> None:
    sc, engine = ref
    assert S.latest_event_us(engine) == sc.times["codex.permission1"]


def test_empty_store(tmp_path: Path) -> None:
    root = str(tmp_path / "empty")
    os.makedirs(root)
    engine, _ = open_current(root)
    with engine:
        assert S.latest_event_us(engine) is None
        assert S.state_at(engine, at(0)).sessions == []
        [row] = S.why_blocked(engine, "project", None)
        assert row["uncertainty"]["reason"] == "insufficient_evidence"
        [row] = S.what_is_doing_now(engine)
        assert row["subject_type"] == "none"


# --------------------------------------------------------------------------- the per-engine index
#
# STATE, DIFF, WHY and WHAT IS … NOW read the projection through facts loaded
# once per engine (``state._Core``, ``state._Calls``). These tests hold those
# answers against the SQL they replace, at every event time of small sessions
# made to hit the index's edge cases, and then check the paths taken rarely.


@dataclass
class Clock:
    root: str
    engine: Engine
    sessions: list[Claude]

    def instants(self) -> list[int]:
        times = sorted({int(r[0]) for r in self.engine.run("select epoch_us(observed_at) from events",
                                                            max_rows=100_000).rows})
        return sorted({x + d for x in times for d in (-1, 0, 1)} | {times[-1] + 13 * 3600 * SECOND})


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clock]:
    """Calls that start at the same microsecond, one that runs for minutes, one that never ends."""
    base = tmp_path_factory.mktemp("state-clock")
    root = str(base / "home")
    os.makedirs(root)
    repo = make_repo(str(base / "work"))
    s = Claude(root, repo, "clock", BASE_US)
    s.start(0)
    s.prompt(1)
    s.bash(2, "b1", ok=True)

    def call(t: float, name: str, tool: str, end: float | None, ok: bool = True, session: Claude = s) -> None:
        tool_input: dict[str, Any] = ({"command": "make test"} if tool == "Bash" else
                                      {"file_path": os.path.join(repo, "src/lib.rs"), "old_string": "a",
                                       "new_string": "b"})
        session.emit(f"{name}.start", t, {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_use_id": name,
                                          "tool_input": tool_input})
        if end is not None:
            session.emit(f"{name}.end", end, {"hook_event_name": "PostToolUse" if ok else "PostToolUseFailure",
                                              "tool_name": tool, "tool_use_id": name, "tool_input": tool_input,
                                              **({"tool_response": {"stdout": "ok"}} if ok else {"error": "failed"})})

    for name, tool, end in (("t1", "Edit", 11), ("t2", "Bash", 12), ("t3", "Edit", 13), ("t4", "Bash", 11)):
        call(10, name, tool, end, ok=name != "t2")  # four calls starting at the same microsecond
    call(20, "long", "Bash", 90)  # longer than SHORT_CALL
    call(30, "open", "Bash", None)  # never finishes
    call(40, "e4", "Edit", 41)
    call(50, "b5", "Bash", 51, ok=False)
    s.stop(100)
    s.prompt(200, "and now the docs")
    call(201, "t5", "Edit", 202)
    call(201, "t6", "Edit", 203)
    s2 = Claude(root, repo, "clock-two", BASE_US + 60 * SECOND)
    s2.start(0)
    s2.prompt(1)
    call(2, "x1", "Bash", 3, ok=False, session=s2)
    call(2, "x0", "Bash", 4, ok=False, session=s2)
    s2.bash(5, "x2", ok=False)
    s2.edit(8, "x3", ok=False)
    engine, _ = open_current(root)
    yield Clock(root, engine, [s, s2])
    engine.close()


def _sql_in_flight(engine: Engine, t: int) -> dict[str, list[str]]:
    return {sid: list(ids) for sid, ids in engine.run(
        "SELECT session_id, list(tool_call_id ORDER BY started_at, tool_call_id) FROM tool_calls "
        "WHERE NOT retracted AND started_at <= make_timestamptz($1) AND "
        "(finished_at IS NULL OR finished_at > make_timestamptz($1)) GROUP BY 1", [t]).rows}


def _sql_unit_calls(engine: Engine, t: int) -> dict[str, dict[str, Any]]:
    """The aggregate over a unit's calls by t as SQL computes it (what ``_unit_calls`` replaces)."""
    mutating = ", ".join(f"'{c}'" for c in sorted(MUTATING))
    rows = engine.run(
        "WITH m AS (SELECT work_unit_id, unnest(turns) AS turn_id FROM work_units), "
        "c AS (SELECT m.work_unit_id, x.tool_category AS cat, CASE WHEN x.finished_at <= make_timestamptz($1) "
        "THEN x.outcome_status END AS status, x.git_subcommand AS git, x.command_category AS cmd, "
        "epoch_us(coalesce(x.started_at, x.finished_at)) AS first_at, CASE WHEN x.finished_at <= "
        "make_timestamptz($1) THEN epoch_us(x.finished_at) END AS fin, (x.finished_at IS NULL OR "
        "x.finished_at > make_timestamptz($1)) AS flying, x.tool_call_id FROM m JOIN tool_calls x USING (turn_id) "
        "WHERE coalesce(x.started_at, x.finished_at) <= make_timestamptz($1) AND NOT x.retracted) "
        f"SELECT work_unit_id, count(*) FILTER (WHERE flying), count(*) FILTER (WHERE cat IN ({mutating})), "
        "max(coalesce(fin, first_at)), list([cat, status, git, cmd] ORDER BY first_at DESC, tool_call_id DESC) "
        "FROM c GROUP BY work_unit_id", [t]).rows
    return {uid: {"n_flying": fl, "n_mut": mut, "last_call": last, "tail": list(reversed(tail[:5]))}
            for uid, fl, mut, last, tail in rows}


def _sql_attempts(engine: Engine, t: int) -> dict[str, tuple[Any, ...]]:
    """Per session: the last attempt started by t, and the last two ended by t (ids)."""
    return {k: (last, list(ended or [])) for k, last, ended in engine.run(
        "SELECT session_id, arg_max(attempt_id, (started_at, turn_index, attempt_index)), "
        "arg_max(attempt_id, (ended_at, started_at, turn_index, attempt_index), 2) "
        "FILTER (WHERE ended_at <= make_timestamptz($1)) FROM attempts "
        "WHERE NOT retracted AND started_at <= make_timestamptz($1) GROUP BY 1", [t]).rows}


def test_index_answers_like_sql_at_every_event(clock: Clock) -> None:
    engine = clock.engine
    facts = S_facts._facts(engine)
    core, calls = S_facts._core(engine, facts), S_facts._calls(engine, facts)
    units = [r[0] for r in engine.run("select work_unit_id from work_units").rows]
    assert units
    seen_ties = seen_flying = 0
    for t in clock.instants():
        st = S.state_at(engine, t)
        flying = _sql_in_flight(engine, t)
        for s in st.sessions:
            assert [f["tool_call_id"] for f in s["in_flight"]] == flying.get(s["session_id"], []), (t, s)
            seen_flying += bool(s["in_flight"])
        expected = _sql_unit_calls(engine, t)
        for uid in units:
            got = S_calls._unit_calls(engine, calls, uid, t)
            assert got == expected.get(uid), (t, uid)
            g = calls.groups[uid]
            k = bisect_right(g.a, t)
            seen_ties += any(g.a[j] == g.a[j - 1] for j in range(max(1, k - 5), k))
        ids = [s["session_id"] for s in st.sessions]
        got_attempts = S_attempts._attempts_at(core, t, {"session_id": ids})
        for sid, (last, ended) in _sql_attempts(engine, t).items():
            if sid in ids:
                assert got_attempts[sid]["last"][0]["attempt_id"] == last
                assert [a["attempt_id"] for a in got_attempts[sid]["ended"]] == ended
        later = [s for s in S_at._sessions_at(core, t, None, None, None, []) if s["in_state"]
                 and (s["activity_us"] is None or s["activity_us"] > t)]
        if later:
            first = min(s["started_us"] for s in later)
            assert S_activity._activities(engine, facts, core, [(t, later)]) == [
                S_activity._activity_in_window(engine, later, t, first)]
    assert seen_ties and seen_flying  # the edge cases were met


def test_index_with_unpacked_calls_and_whole_window_activity(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finish times too far from start times to pack, and sessions whose last event before t
    is not in the window the projection suggests: both answered as the usual path answers."""
    instants = clock.instants()
    expected = [S.state_at(clock.engine, t) for t in instants]
    monkeypatch.setattr(S_calls, "_PACKED_LIMIT", 0)
    monkeypatch.setattr(S_activity, "_known_activity", lambda core, s, t: t)
    with Engine(clock.root) as fresh:
        assert S_facts._calls(fresh, S_facts._facts(fresh)).groups  # built the other way
        assert all(isinstance(g.p, list) for g in S_facts._calls(fresh, S_facts._facts(fresh)).groups.values())
        for t, want in zip(instants, expected):
            got = S.state_at(fresh, t)
            assert (got.sessions, got.work_units, got.notes) == (want.sessions, want.work_units, want.notes), t


def test_index_loads_once_and_answers_do_not_share_state(clock: Clock) -> None:
    engine = clock.engine
    t = S.latest_event_us(engine)
    assert t is not None
    rec = Recording(engine)
    S.state_at(rec, t)
    before = len(rec.sql)
    first = S.state_at(rec, t)
    assert len(rec.sql) == before  # nothing left to ask the tables at that instant
    first.sessions[0]["in_flight"].clear()
    first.sessions[0]["current_turn"]["status"] = "changed"
    first.sessions[0]["evidence"].append("changed")
    again = S.state_at(engine, t)
    assert again.sessions[0]["current_turn"]["status"] != "changed"
    assert "changed" not in again.sessions[0]["evidence"]
    assert again.sessions[0]["in_flight"]  # the call that never finished
    # A settled session's liveness still moves with the clock.
    later = S.state_at(engine, t + 13 * 3600 * SECOND)
    assert {s["liveness"] for s in again.sessions} == {"open"}
    assert {s["liveness"] for s in later.sessions} == {"stale"}


def test_short_call_names_are_fetched_once(clock: Clock) -> None:
    engine = clock.engine
    calls = S_facts._calls(engine, S_facts._facts(engine))
    calls.short.clear()
    rec = Recording(engine)
    t = BASE_US + int(41.5 * SECOND)  # the long call and the open call run, and no short one
    assert [f["tool_name"] for f in S.state_at(rec, t).sessions[0]["in_flight"]] == ["Bash", "Bash"]
    assert not calls.short
    t = BASE_US + int(40.5 * SECOND)  # … and the one-second edit e4
    names = [f["tool_name"] for f in S.state_at(rec, t).sessions[0]["in_flight"]]
    assert names == ["Bash", "Bash", "Edit"] and calls.short
    asked = len(rec.sql)
    S.state_at(rec, t)
    assert len(rec.sql) == asked


def test_engine_runs_statements_without_a_thread_each(clock: Clock) -> None:
    import threading

    from agentlog.query.engine import QueryError

    engine = clock.engine
    engine.run("select 1")
    threads = threading.active_count()
    for i in range(200):
        assert engine.run("select $1::INTEGER", [i]).rows == [(i,)]
    assert threading.active_count() <= threads
    slow = "select count(*) from range(100000000000) a, range(1000) b"
    for _ in range(2):  # the second time the statement's check is remembered; the timeout still holds
        with pytest.raises(QueryError) as e:
            engine.run(slow, timeout=0.3)
        assert e.value.kind == "timeout"
    assert engine.run("select 2").rows == [(2,)]
    for _ in range(2):
        with pytest.raises(QueryError) as e:
            engine.run("select 1; select 2")
        assert e.value.kind == "refused"
