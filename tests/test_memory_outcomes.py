"""Outcome contradiction on scripted histories (real hook payloads through the capture
pipeline, projected by the real projection): the pitfall that later succeeds, the procedure
that later fails, the decision whose tool was replaced. Each opens exactly one proposal with
its evidence; a second run opens none; a rejected proposal keeps the memory."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import scenario
from agentlog.memory import proposals as P
from agentlog.memory import service as S
from agentlog.memory import truth
from test_memory_truth import commit, git, new_repo, write


class Session:
    def __init__(self, root: str, repo: Path, sid: str) -> None:
        self.root, self.repo = root, str(repo)
        self.base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": self.repo,
                     "permission_mode": "default"}
        self.t = time.time_ns() // 1000 + 1_000_000
        self.n = 0

    def emit(self, payload: dict[str, Any]) -> str:
        self.t += 1_000_000
        return scenario.write(self.root, "claude-code", {**self.base, **payload}, self.t, self.repo)

    def call(self, name: str, tool_input: dict[str, Any], end: dict[str, Any]) -> str:
        self.n += 1
        cid = f"toolu_{self.n:04d}"
        self.emit({"hook_event_name": "PreToolUse", "tool_name": name, "tool_input": tool_input, "tool_use_id": cid})
        return self.emit({"tool_name": name, "tool_input": tool_input, "tool_use_id": cid, **end})

    def edit(self, path: str, ok: bool) -> str:
        full = f"{self.repo}/{path}"
        inp = {"file_path": full, "old_string": "a", "new_string": "b"}
        if ok:
            return self.call("Edit", inp, {"hook_event_name": "PostToolUse", "tool_response": {
                "filePath": full, "oldString": "a", "newString": "b", "originalFile": "a", "replaceAll": False,
                "structuredPatch": [], "userModified": False}})
        return self.call("Edit", inp, {"hook_event_name": "PostToolUseFailure", "is_interrupt": False,
                                       "error": "String to replace not found in file.\nString: a"})

    def bash(self, command: str, ok: bool) -> str:
        inp = {"command": command, "description": "run"}
        if ok:
            return self.call("Bash", inp, {"hook_event_name": "PostToolUse", "tool_response": {
                "stdout": "ok\n", "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}})
        return self.call("Bash", inp, {"hook_event_name": "PostToolUseFailure", "is_interrupt": False,
                                       "error": "Exit code 2\nmake: *** [test] Error 2"})


@contextmanager
def dashboard(root: str) -> Iterator[Any]:
    """A client of the real dashboard over ``root``, signed in (its session cookie set)."""
    from starlette.testclient import TestClient

    from agentlog.web.app import create_app
    from agentlog.web.security import COOKIE, Guard

    guard = Guard(port=8765)
    with TestClient(create_app(root, guard, live=False), base_url=f"http://127.0.0.1:{guard.port}") as c:
        r = c.get(f"/?token={guard.token}", follow_redirects=False)
        c.cookies.set(COOKIE, r.cookies[COOKIE])
        yield c


def _rule_proposals(root: str) -> list[P.Proposal]:
    return [p for p in P.list_proposals(root, status=None) if "[rule " in (p.note or "")]


def test_a_pitfall_whose_edit_later_succeeds(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    pit = S.create(root, "pitfall", "Edits to config.py fail", attributes={
        "symptom": "string_mismatch on config.py", "avoid": "read it first", "paths": ["src/config.py"]})
    other = S.create(root, "pitfall", "Edits to parser.rs fail", attributes={
        "symptom": "string_mismatch", "avoid": "mind the tabs", "paths": ["src/parser.rs"]})
    s = Session(root, repo, "pit-session")
    ok = [s.edit("src/config.py", True) for _ in range(4)]
    s.edit("src/parser.rs", True)
    s.edit("src/parser.rs", False)  # still failing: that pitfall stands
    truth.check(root, repo_dir=str(repo))
    assert _rule_proposals(root) == [] and not S.get(root, pit.id).doubtful  # 4 < 5 successes
    ok.append(s.edit("src/config.py", True))
    report = truth.check(root, repo_dir=str(repo))
    (p,) = _rule_proposals(root)
    assert report.proposals == [p.id] and p.status == "open" and p.changes == [{"op": "archive", "memory": pit.id}]
    assert "succeeded 5 times" in (p.note or "") and all(f"event:{e}" in (p.note or "") for e in ok)
    got = S.get(root, pit.id)
    assert got.doubtful and got.truth_factor == truth.WEIGHTS["contradicted"]
    assert got.doubts and got.doubts[0]["rule"] == "pitfall_succeeded"
    assert not S.get(root, other.id).doubtful
    # a second run opens none
    assert truth.check(root, repo_dir=str(repo), everything=True).proposals == []
    assert len(_rule_proposals(root)) == 1
    # a person keeps it (rejects the proposal): no longer doubtful, and never proposed again
    P.reject(root, p.id, reason="still true")
    truth.check(root, repo_dir=str(repo), everything=True)
    assert not S.get(root, pit.id).doubtful and len(_rule_proposals(root)) == 1


def test_a_procedure_whose_command_later_fails(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    proc = S.create(root, "procedure", "Run the tests", attributes={
        "goal": "run the tests", "steps": ["make test"], "command": "make test"})
    s = Session(root, repo, "proc-session")
    s.bash("make test", False)
    s.bash("make test", True)  # a success in between: the failures before it do not count
    first = s.bash("make test", False)
    truth.check(root, repo_dir=str(repo))
    assert _rule_proposals(root) == []
    second = s.bash("make test", False)
    truth.check(root, repo_dir=str(repo))
    (p,) = _rule_proposals(root)
    assert p.changes == [{"op": "archive", "memory": proc.id}]
    assert "`make test` failed its last 2 runs" in (p.note or "")
    assert f"event:{first}" in (p.note or "") and f"event:{second}" in (p.note or "")
    assert truth.check(root, repo_dir=str(repo), everything=True).proposals == []
    # approving it archives the memory (the existing proposal flow)
    P.approve(root, p.id)
    assert S.get(root, proc.id).archived


def test_a_decision_whose_tool_was_replaced(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    write(repo, "pyproject.toml", ["[tool.uv]", "dev-dependencies = []"])
    commit(repo, "uv")
    dec = S.create(root, "decision", "Use uv", attributes={"chosen": "uv", "alternatives": ["poetry", "pip tools"]})
    truth.check(root, repo_dir=str(repo))
    assert _rule_proposals(root) == [] and not S.get(root, dec.id).doubtful
    write(repo, "pyproject.toml", ["[tool.poetry]", 'name = "proj"'])
    head = commit(repo, "poetry")
    truth.check(root, repo_dir=str(repo))
    (p,) = _rule_proposals(root)
    assert f"file:pyproject.toml@{head[:12]}" in (p.note or "") and "names poetry" in (p.note or "")
    assert S.get(root, dec.id).doubtful
    assert truth.check(root, repo_dir=str(repo), everything=True).proposals == []
    git(repo, "log", "--oneline")


def test_recorded_evidence_present_corrected_retracted(agentlog_home: Path, tmp_path: Path) -> None:
    from agentlog.memory import store
    from agentlog.memory.service import current_engine
    from agentlog.operations.corrections import record_correction, record_retraction

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    s = Session(root, repo, "rec-session")
    s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "fix it"})
    kept_event = s.edit("src/a.py", True)
    s.emit({"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "done"})
    s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "and the other"})
    s.edit("src/b.py", False)
    s.emit({"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "failed"})
    with current_engine(root) as engine:
        attempts = [r[0] for r in engine.run("SELECT attempt_id FROM attempts ORDER BY started_at").rows]
    assert len(attempts) == 2
    m = S.create(root, "fact", "b.py edits fail", attributes={"statement": "b.py edits fail"},
                 evidence=[{"type": "event", "value": kept_event}, {"type": "attempt", "value": attempts[0]},
                           {"type": "attempt", "value": attempts[1]}])
    truth.check(root, repo_dir=str(repo))
    assert [r["status"] for r in truth.last(store.connect(root), m.id)["results"] if r["on"] == "evidence"] == \
        ["recorded"] * 3
    assert not S.get(root, m.id).doubtful
    record_correction(root, correction_type="attempt_outcome", target=attempts[1], outcome="succeeded")
    record_retraction(root, target_type="attempt", target=attempts[0], reason="mistaken_import")
    truth.check(root, repo_dir=str(repo))
    found = [r for r in truth.last(store.connect(root), m.id)["results"] if r["on"] == "evidence"]
    assert [r["status"] for r in found] == ["recorded", "retracted", "corrected"], found
    got = S.get(root, m.id)
    assert got.doubtful and got.truth_factor == truth.WEIGHTS["retracted"] * truth.WEIGHTS["corrected"]
    store.rebuild(root)
    assert S.get(root, m.id).truth_factor == got.truth_factor


def test_the_dashboard_needs_review_section_keeps_or_archives(agentlog_home: Path, tmp_path: Path) -> None:
    import re

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    write(repo, "pyproject.toml", ["[tool.poetry]"])
    commit(repo, "poetry")
    dec = S.create(root, "decision", "Use <b>uv</b>", attributes={"chosen": "uv", "alternatives": ["poetry"]})
    truth.check(root, repo_dir=str(repo))
    (p,) = _rule_proposals(root)
    with dashboard(root) as c:
        page = c.get("/memory").text
        assert "Needs review" in page and "Use &lt;b&gt;uv&lt;/b&gt;" in page and "rule decision_replaced" in page
        assert f"/memory/{dec.id}/keep" in page and f"/proposals/{p.id}/approve" in page
        api = c.get("/api/memory").json()["needs_review"]
        assert [d["id"] for d in api] == [dec.id] and api[0]["proposal"] == p.id
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert token is not None
        kept = c.post(f"/memory/{dec.id}/keep", data={"csrf": token.group(1), "reason": "kept after review"},
                      follow_redirects=False)  # (Keep rejects the rule's proposal)
        assert kept.status_code == 303
    assert P.get(root, p.id).status == "rejected"
    truth.check(root, repo_dir=str(repo), everything=True)
    assert not S.get(root, dec.id).doubtful and truth.doubtful(root) == []
