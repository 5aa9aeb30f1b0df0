"""A person keeps a memory its evidence alone made doubtful (memory/keep.py): not flagged again
until that evidence changes again, recorded in the memory log so a rebuild gives the same; from
the library, the CLI and the dashboard. And the rules' counts kept per memory (memory/rule_state.py):
folded from the new frames, they equal those computed again from the store."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentlog.memory import keep as K
from agentlog.memory import proposals as P
from agentlog.memory import rule_state, store, truth
from agentlog.memory import service as S
from test_memory_outcomes import Session, dashboard
from test_memory_truth import LINES, _edit_line, cite, commit, new_repo, write


def _state(root: str) -> tuple[Any, ...]:
    ms = {m.id: m for m in S.list_memories(root, now_us=10**17)}
    return (store.dump(store.connect(root)),
            {i: (m.effective_confidence, m.truth_factor, m.doubtful, m.doubts) for i, m in ms.items()})


def test_a_kept_memory_is_not_flagged_again_until_its_evidence_changes_again(agentlog_home: Path,
                                                                             tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    other = cite(root, c1, start=20, end=22)
    with pytest.raises(K.NothingToKeep):  # never checked: nothing lowered it
        K.keep(root, m.id)
    _edit_line(repo)
    commit(repo, "edit")
    truth.check(root, repo_dir=str(repo))
    assert S.get(root, m.id).doubtful and S.get(root, m.id).truth_factor == truth.WEIGHTS["changed"]
    kept = K.keep(root, m.slug, reason="the call still happens")
    assert not kept.doubtful and kept.truth_factor == 1.0 and kept.doubts == []
    assert kept.effective_confidence == pytest.approx(S.get(root, other.id).effective_confidence)
    assert [h["change"] for h in S.history(root, m.id)] == ["created", "checked", "kept"]
    assert truth.doubtful(root) == []
    (finding,) = [r for r in truth.last(store.connect(root), m.id)["results"] if r["on"] == "evidence"]
    assert finding["status"] == "kept" and finding["kept"]["status"] == "changed" and finding["weight"] == 1.0
    with pytest.raises(K.NothingToKeep):  # kept already
        K.keep(root, m.id)
    # checks that find the evidence as it was when kept: still kept, nothing written
    assert truth.check(root, repo_dir=str(repo)).written == 0
    r = truth.check(root, repo_dir=str(repo), everything=True)
    assert r.written == 0 and r.doubtful == []
    # a commit of another file: the evidence is as it was
    write(repo, "README.md", ["# proj", "more"])
    commit(repo, "readme")
    assert truth.check(root, repo_dir=str(repo), everything=True).doubtful == []
    # every check result and the keep replay: the same confidences and flags
    live = _state(root)
    store.rebuild(root)
    assert _state(root) == live and store.verify(root)["ok"]
    # its evidence changes again (the file is committed again): flagged again
    write(repo, "src/a.py", [*LINES[:10], "line 11 = compute(eleven)", *LINES[11:25], "tail = 1"])
    commit(repo, "edit again")
    r = truth.check(root, repo_dir=str(repo))
    assert r.doubtful == [m.id]
    again = S.get(root, m.id)
    assert again.doubtful and again.truth_factor == truth.WEIGHTS["changed"]
    live = _state(root)
    store.rebuild(root)
    assert _state(root) == live


def test_keep_recorded_evidence_and_a_rule_proposal(agentlog_home: Path, tmp_path: Path) -> None:
    """A retracted event cited: kept; a decision contradicted by a rule: keeping it rejects the
    rule's proposal (what the dashboard's one Keep button does for both)."""
    from agentlog.memory.service import current_engine
    from agentlog.operations.corrections import record_retraction

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    s = Session(root, repo, "keep-session")
    s.emit({"hook_event_name": "UserPromptSubmit", "prompt": "fix it"})
    s.edit("src/a.py", True)
    s.emit({"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "done"})
    with current_engine(root) as engine:
        (attempt,) = [r[0] for r in engine.run("SELECT attempt_id FROM attempts").rows]
    m = S.create(root, "fact", "a.py edits work", attributes={"statement": "a.py"},
                 evidence=[{"type": "attempt", "value": attempt}])
    record_retraction(root, target_type="attempt", target=attempt, reason="mistaken_import")
    write(repo, "pyproject.toml", ["[tool.poetry]"])
    commit(repo, "poetry")
    dec = S.create(root, "decision", "Use uv", attributes={"chosen": "uv", "alternatives": ["poetry"]})
    truth.check(root, repo_dir=str(repo))
    assert {d.id for d in truth.doubtful(root)} == {m.id, dec.id}
    assert not K.keep(root, m.id).doubtful
    (p,) = [p for p in P.list_proposals(root, status=None) if "[rule " in (p.note or "")]
    assert p.status == "open"
    K.keep(root, dec.id)
    assert P.get(root, p.id).status == "rejected" and P.get(root, p.id).reason == K.REASON
    truth.check(root, repo_dir=str(repo), everything=True)
    assert truth.doubtful(root) == []
    live = _state(root)
    store.rebuild(root)
    assert _state(root) == live


def test_keep_from_the_cli_and_the_dashboard(agentlog_home: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    a, b = cite(root, c1), cite(root, c1, start=9, end=11)
    fine = S.create(root, "fact", "fine", attributes={"statement": "fine"})
    _edit_line(repo)
    commit(repo, "edit")
    truth.check(root, repo_dir=str(repo))
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    refused = r.invoke(cli, ["memory", "keep", fine.id], env=env)
    assert refused.exit_code == 1 and "is not doubtful" in refused.output and "Traceback" not in refused.output
    assert r.invoke(cli, ["memory", "keep", "no-such-memory"], env=env).exit_code == 1
    assert "Example: agentlog memory keep" in r.invoke(cli, ["memory", "keep", "--help"], env=env).output
    out = r.invoke(cli, ["memory", "keep", a.id, "--reason", "still true", "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["doubtful"] is False
    with dashboard(root) as c:
        page = c.get("/memory").text
        assert f'action="/memory/{b.id}/keep"' in page and f"/memory/{a.id}/keep" not in page
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert token is not None
        assert c.post(f"/memory/{b.id}/keep", data={}, follow_redirects=False).status_code == 403  # no CSRF token
        kept = c.post(f"/memory/{b.id}/keep", data={"csrf": token.group(1), "reason": "kept after review"},
                      follow_redirects=False)
        assert kept.status_code == 303 and kept.headers["location"] == "/memory"
        assert "Needs review" not in c.get("/memory").text
        again = c.post(f"/api/memory/{b.id}/keep", data={"csrf": token.group(1)})
        assert again.status_code == 409 and "not doubtful" in again.text
    assert truth.doubtful(root) == []
    assert [h["change"] for h in S.history(root, b.id)][-1] == "kept"


def test_rule_counts_folded_from_new_frames_equal_those_computed_from_the_store(agentlog_home: Path,
                                                                                tmp_path: Path) -> None:
    """Incremental checks fold the new frames into each touched memory's counts without asking
    the store; the counts are those a query over the whole history gives, and so are the findings."""
    from agentlog.memory import outcomes

    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    pit = S.create(root, "pitfall", "pit fails", attributes={"symptom": "s", "avoid": "a", "paths": ["src/pit.py"]})
    fc = S.create(root, "pitfall", "pit fails so", attributes={"symptom": "s", "avoid": "a", "paths": ["pit.py"],
                                                                 "failure_class": "string_mismatch"})
    proc = S.create(root, "procedure", "check", attributes={"goal": "g", "steps": ["make check", "make lint"]})
    s = Session(root, repo, "fold-session")
    s.bash("make check", True)
    first = truth.check(root, repo_dir=str(repo))
    assert first.store_read  # (the first run computes every count from the store)
    plan = [("edit", True), ("bash", False), ("edit", False), ("lint", True), ("bash", False), ("edit", True),
            ("bash", True), ("lint", False), ("lint", False), ("edit", True)]
    for what, ok in plan:
        if what == "edit":
            s.edit("src/pit.py", ok)
        else:
            s.bash("make check" if what == "bash" else "make lint", ok)
        r = truth.check(root, repo_dir=str(repo))
        assert r.checked >= 1 and not r.store_read, r
    con = store.connect(root)
    folded = rule_state.load(con)
    ms = [S.get(root, i) for i in (pit.id, fc.id, proc.id)]
    act = outcomes.Activity(root, None)
    try:
        computed = rule_state.compute(act.engine(), ms)
    finally:
        act.close()
    assert {m.id: folded[m.id] for m in ms} == computed
    assert computed[pit.id]["ok"] == 3 and computed[pit.id]["bad"] == 1
    assert computed[proc.id]["commands"]["make lint"]["tail"] == 2
    incremental = {m.id: truth.last(con, m.id)["results"] for m in ms}
    rule_state.drop_all(con)
    truth.check(root, repo_dir=str(repo), everything=True)
    assert {m.id: truth.last(con, m.id)["results"] for m in ms} == incremental
    (found,) = [f for f in incremental[proc.id] if f["on"] == "outcome"]
    assert found["rule"] == "procedure_failed" and "make lint" in found["detail"]
