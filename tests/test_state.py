"""State at an instant, DIFF, WHY, WHAT IS … NOW, TRACE and id resolution
(agentlog.project.state) on the reference scenario and on small purpose-built
sessions — the negative cases matter most: no rule fires, no guess is made."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.project import state as S
from agentlog.project.ids import derive
from agentlog.query.engine import Engine, QueryResult, open_current
from scenario import BASE_US, CLAUDE_SESSION, CODEX_SESSION, SECOND, Scenario, build_reference, make_repo, write


def at(offset_s: float) -> int:
    return BASE_US + int(offset_s * SECOND)


CLAUDE = derive("session", "claude_code", CLAUDE_SESSION)
CODEX = derive("session", "codex", CODEX_SESSION)
FAILED_EDIT = derive("attempt", CLAUDE, "1", "0")  # turn 1: read + the failing edit
RETRY = derive("attempt", CLAUDE, "2", "0")  # turn 2: the edit that worked + cargo test
CODEX_ATTEMPT = derive("attempt", CODEX, "1", "0")


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, Engine]]:
    base = tmp_path_factory.mktemp("state-ref")
    root = str(base / "home")
    os.makedirs(root)
    sc = build_reference(root, str(base / "work"))
    engine, _ = open_current(root)
    yield sc, engine
    engine.close()


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
