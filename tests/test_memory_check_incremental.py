"""The incremental memory check (memory/touched.py): only what happened since the last run's
watermark is read, and only the memories it touches are checked; bounded in time; run by the
real daemon after ingest. Confirmations from new successful activity; purged evidence."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agentlog.memory import outcomes, store, truth
from agentlog.memory import service as S
from test_memory_outcomes import Session
from test_memory_truth import LINES, cite, commit, git, new_repo, write


def _world(root: str, repo: Path, c1: str) -> dict[str, Any]:
    a = cite(root, c1)
    readme = S.create(root, "fact", "the readme has a title", attributes={"statement": "title"},
                      evidence=[{"type": "file", "path": "README.md", "line_start": 1, "commit": c1[:10]}])
    proc = S.create(root, "procedure", "Run the tests", attributes={"goal": "test", "steps": ["make test"],
                                                                    "command": "make test"})
    lint = S.create(root, "procedure", "Lint", attributes={"goal": "lint", "steps": ["make lint"]})
    pit = S.create(root, "pitfall", "pit.py edits fail", attributes={"symptom": "s", "avoid": "a",
                                                                     "paths": ["src/pit.py"]})
    return {"a": a, "readme": readme, "proc": proc, "lint": lint, "pit": pit}


def test_an_incremental_check_checks_only_what_was_touched(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    w = _world(root, repo, c1)
    s = Session(root, repo, "inc-session")
    s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "go"})
    first = truth.check(root, repo_dir=str(repo))  # no watermark yet: every memory
    assert first.checked == 5
    assert truth.check(root, repo_dir=str(repo)).checked == 0  # nothing new
    # a command ran: only the procedure that names it (and it is confirmed)
    ran = s.bash("make test", True)
    s.edit("src/other.py", True)
    r = truth.check(root, repo_dir=str(repo))
    assert r.checked == 1 and r.events_read >= 4 and r.doubtful == []
    (found,) = [f for f in truth.last(store.connect(root), w["proc"].id)["results"] if f["on"] == "outcome"]
    assert found["rule"] == "procedure_succeeded" and found["status"] == "confirmed"
    assert found["evidence"] == [f"event:{ran}"] and found["weight"] == pytest.approx(1 + outcomes.CONFIRM_STEP)
    # an edit of the pitfall's path: only the pitfall
    s.edit("src/pit.py", False)
    r = truth.check(root, repo_dir=str(repo))
    assert r.checked == 1 and truth.last(store.connect(root), w["pit"].id)["results"][0]["rule"] == "pitfall_recurred"
    # a commit that changes README.md only: the memory citing it, not the one citing src/a.py
    write(repo, "README.md", ["# changed title"])
    commit(repo, "readme")
    r = truth.check(root, repo_dir=str(repo))
    assert r.checked == 1 and r.doubtful == [w["readme"].id]
    assert truth.check(root, repo_dir=str(repo)).checked == 0
    # an edited memory is checked again; so is one whose rule proposal a person decided
    S.edit(root, w["a"].id, tags=["x"])
    assert truth.check(root, repo_dir=str(repo)).checked == 1
    # a rebuilt read model has no watermark: every memory, once
    store.rebuild(root)
    assert truth.check(root, repo_dir=str(repo)).checked == 5
    assert truth.check(root, repo_dir=str(repo)).checked == 0


def test_a_commit_checks_the_memories_whose_lines_it_touched(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    other = cite(root, c1, path="README.md", start=1, end=1)
    truth.check(root, repo_dir=str(repo))
    write(repo, "src/a.py", [*LINES[:10], "line 11 = compute(eleven)", *LINES[11:]])
    commit(repo, "edit")
    r = truth.check(root, repo_dir=str(repo))
    assert r.checked == 1 and r.doubtful == [m.id] and not S.get(root, other.id).doubtful
    # a doubtful memory is checked again at every move of HEAD (a change anywhere may resolve it)
    write(repo, "src/b.py", ["x"])
    commit(repo, "other file")
    assert truth.check(root, repo_dir=str(repo)).checked == 1


def test_a_check_bounded_in_time_leaves_the_rest_for_the_next(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    ms = [cite(root, c1, start=i, end=i) for i in range(1, 5)]
    r = truth.check(root, repo_dir=str(repo), budget_s=0.0)
    assert r.checked == 1 and len(r.pending) == 3
    r = truth.check(root, repo_dir=str(repo))
    assert r.checked == 3 and r.pending == []
    assert {m.id for m in ms} == {row[0] for row in store.connect(root).execute("SELECT memory_id FROM truth")}


def test_a_check_without_the_repository_keeps_what_another_check_verified(agentlog_home: Path,
                                                                         tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    dec = S.create(root, "decision", "Use uv", attributes={"chosen": "uv", "alternatives": ["poetry"]})
    write(repo, "src/a.py", [*LINES[:10], "changed", *LINES[11:]])
    write(repo, "pyproject.toml", ["[tool.poetry]"])
    commit(repo, "edit")
    truth.check(root, repo_dir=str(repo))
    assert S.get(root, m.id).doubtful and S.get(root, dec.id).doubtful
    other = tmp_path / "elsewhere"  # another repository: the cited commit is not in it; it names uv
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    write(other, "pyproject.toml", ["[tool.uv]"])
    commit(other, "uv")
    for kw in ({"use_repo": False}, {"repo_dir": str(other)}):
        r = truth.check(root, everything=True, **kw)  # type: ignore[arg-type]
        assert r.written == 0 and set(r.doubtful) == {m.id, dec.id}, kw


def test_confirmations_raise_confidence_and_replay(agentlog_home: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    proc = S.create(root, "procedure", "Run the tests", attributes={"goal": "test", "steps": ["make test"],
                                                                    "command": "make test"}, actor="agent")
    before = S.get(root, proc.id).effective_confidence
    s = Session(root, repo, "conf-session")
    runs = [s.bash("make test", True) for _ in range(outcomes.CONFIRM_MAX + 2)]
    truth.check(root, repo_dir=str(repo))
    got = S.get(root, proc.id)
    top = 1 + outcomes.CONFIRM_STEP * outcomes.CONFIRM_MAX
    assert got.truth_factor == pytest.approx(top) and not got.doubtful and got.doubts == []
    assert got.effective_confidence == pytest.approx(min(before * top, 1.0), rel=1e-3)
    shown = json.loads(CliRunner().invoke(cli, ["memory", "show", proc.id, "--json"],
                                          env={"AGENTLOG_HOME": root}).output)
    (factor,) = [f for f in shown["confidence_factors"] if f["factor"] == "outcome: confirmed"]
    assert factor["value"] == pytest.approx(top) and "more than 4 times" in factor["why"]
    assert factor["evidence"] == [f"event:{e}" for e in runs[:outcomes.CONFIRM_MAX]]
    # a failing latest run takes the confirmation away; two in a row contradict it
    s.bash("make test", False)
    truth.check(root, repo_dir=str(repo))
    assert S.get(root, proc.id).truth_factor == 1.0
    s.bash("make test", False)
    truth.check(root, repo_dir=str(repo))
    assert S.get(root, proc.id).truth_factor == truth.WEIGHTS["contradicted"]
    live = {m.id: (m.effective_confidence, m.truth_factor, m.doubtful) for m in S.list_memories(root, now_us=10**17)}
    store.rebuild(root)
    assert {m.id: (m.effective_confidence, m.truth_factor, m.doubtful)
            for m in S.list_memories(root, now_us=10**17)} == live
    assert store.verify(root)["ok"]


def test_purged_evidence_lowers_confidence(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.log.purge import Selector
    from agentlog.operations.purge import purge

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    keep = Session(root, repo, "kept-session")
    kept = keep.bash("make a", True)
    gone = Session(root, repo, "purged-session")
    cited = gone.bash("make b", True)
    m = S.create(root, "fact", "make b works", attributes={"statement": "make b works"},
                 evidence=[{"type": "event", "value": kept}, {"type": "event", "value": cited}])
    truth.check(root, repo_dir=str(repo))
    assert not S.get(root, m.id).doubtful
    result = purge(root, Selector(session="purged-session"))
    assert result.frames >= 2
    r = truth.check(root, repo_dir=str(repo))
    assert r.doubtful == [m.id]
    found = [f for f in truth.last(store.connect(root), m.id)["results"] if f["on"] == "evidence"]
    assert [f["status"] for f in found] == ["recorded", "purged"], found
    assert "purged" in found[1]["detail"]
    assert S.get(root, m.id).truth_factor == truth.WEIGHTS["purged"]


@pytest.mark.slow
def test_the_daemon_flags_a_memory_whose_lines_were_edited(agentlog_home: Path, tmp_path: Path) -> None:
    """The real daemon (a process): a hook event after the cited lines were edited and
    committed gets the memory flagged doubtful, within a bounded wait."""
    from agentlog.operations.daemon import start, stop

    root = str(agentlog_home)
    (agentlog_home / "config.toml").write_text("capture_server = false\n")
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    s = Session(root, repo, "daemon-session")

    def wait(pred: Any, seconds: float = 60.0) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            if pred():
                return
            time.sleep(0.2)
        log = (agentlog_home / "state" / "daemon.log").read_text()
        raise AssertionError(f"not reached in {seconds} s; daemon log:\n{log}")

    start(root, interval=0.2)
    try:
        s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "look"})
        wait(lambda: truth.last(store.connect(root), m.id) is not None)  # checked: fine so far
        assert not S.get(root, m.id).doubtful
        write(repo, "src/a.py", [*LINES[:10], "line 11 = compute(eleven)", *LINES[11:]])
        commit(repo, "edit the cited lines")
        s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "again"})
        wait(lambda: S.get(root, m.id).doubtful)
    finally:
        stop(root)
    assert "memory check:" in (agentlog_home / "state" / "daemon.log").read_text()


def test_the_engine_makes_only_the_views_a_statement_with_placeholders_names(agentlog_home: Path,
                                                                            tmp_path: Path) -> None:
    """A rule's statement has ``?`` placeholders, which DuckDB's parser refuses to list tables
    of: read as NULL to find them, so only its views are made (not every projection view)."""
    from agentlog.query.engine import Engine

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    Session(root, repo, "engine-session").bash("make x", True)
    S.create(root, "fact", "x", attributes={"statement": "x"})
    truth.check(root, repo_dir=str(repo))  # (the store and the projection caught up)
    with Engine(root) as engine:
        rows = engine.run("SELECT count(*) FROM events WHERE kind = ? AND provider != '?'", ["tool_call_finished"]).rows
        assert rows[0][0] == 1
        assert "events" in engine._created and "sessions" not in engine._created, engine._created


@pytest.mark.slow
def test_a_procedure_rule_sees_the_latest_runs_of_a_long_history(agentlog_home: Path, tmp_path: Path) -> None:
    """More matching runs than a result holds (10,000 rows): the engine counts and picks, so
    the two failures after 10,001 successes are the latest runs, and they contradict."""
    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    proc = S.create(root, "procedure", "Run x", attributes={"goal": "x", "steps": ["make x"], "command": "make x"})
    s = Session(root, repo, "long-session")
    for _ in range(10_001):
        s.bash("make x", True)
    truth.check(root, repo_dir=str(repo))
    assert S.get(root, proc.id).truth_factor == pytest.approx(1 + outcomes.CONFIRM_STEP * outcomes.CONFIRM_MAX)
    failed = [s.bash("make x", False) for _ in range(2)]
    truth.check(root, repo_dir=str(repo))
    (found,) = [f for f in truth.last(store.connect(root), proc.id)["results"] if f["on"] == "outcome"]
    assert found["rule"] == "procedure_failed" and found["evidence"] == [f"event:{e}" for e in failed]
