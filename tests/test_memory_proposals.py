"""Proposals: open, review, merge all-or-nothing, stale merges refused, undo exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentlog.memory import proposals as P
from agentlog.memory import service as S
from agentlog.memory import store
from agentlog.memory.model import InvalidMemory


def _state(root: str) -> dict[str, Any]:
    con = store.connect(root)
    try:
        d = store.dump(con)
    finally:
        con.close()
    d.pop("proposals")
    d.pop("history")  # the audit trail grows with every change, undo included
    return d


def _setup(root: str) -> tuple[S.Memory, S.Memory]:
    a = S.create(root, "procedure", "Run the tests", attributes={"goal": "run the tests", "steps": ["make test"]})
    b = S.create(root, "convention", "Format with ruff", attributes={"rule": "ruff format"}, tags=["style"])
    return a, b


def test_a_proposal_is_checked_reviewed_merged_and_undone_exactly(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    before = _state(root)
    p = P.open_proposal(root, [
        {"op": "create", "kind": "pitfall", "title": "Edits to config.py fail",
         "attributes": {"symptom": "string_mismatch", "avoid": "read it first"}, "tags": ["Config"]},
        {"op": "edit", "memory": a.slug, "fields": {"attributes": {"steps": ["./scripts/test.sh"]}}},
        {"op": "confirm", "memory": b.id},
        {"op": "confirm", "memory": b.id},
        {"op": "link", "memory": b.id, "relation": "relates_to", "target": a.id},
        {"op": "add_evidence", "memory": a.id, "evidence": {"type": "quote", "value": "use the script"}},
    ], title="what I learned", actor="agent")
    assert p.status == "open" and p.bases == {a.id: 1, b.id: 1}
    assert _state(root) == before  # nothing applied while open
    review = "\n".join(P.diff(root, p.id))
    assert "+ new pitfall: Edits to config.py fail" in review and "+   steps: ['./scripts/test.sh']" in review
    assert "confidence 0.95 → 0.97" in review
    merged = P.approve(root, p.id)
    assert merged.status == "merged"
    assert S.get(root, a.id).attributes["steps"] == ["./scripts/test.sh"] and S.get(root, a.id).version == 3
    # two confirmations merged from a proposal weigh as an agent's
    assert S.get(root, b.id).confidence == pytest.approx(0.95 + 0.05 * 0.4 + (1 - (0.95 + 0.05 * 0.4)) * 0.4)
    assert [m.title for m, _ in S.search(root, "config")] == ["Edits to config.py fail"]
    undone = P.undo(root, p.id)
    assert undone.status == "undone"
    assert _state(root) == before  # exactly as before the merge: rows, evidence, links, search index
    with pytest.raises(InvalidMemory):
        P.undo(root, p.id)
    # replaying the log gives the same read model, proposals included
    con = store.connect(root)
    live = store.dump(con)
    con.close()
    store.rebuild(root)
    con = store.connect(root)
    assert store.dump(con) == live
    con.close()


def test_a_stale_proposal_is_refused_and_names_the_memory(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    p = P.open_proposal(root, [{"op": "confirm", "memory": b.id},
                               {"op": "edit", "memory": a.id, "fields": {"title": "Run every test"}}], title="t")
    S.edit(root, a.id, content="a person changed it")
    before = _state(root)
    with pytest.raises(P.StaleProposal, match=a.slug):
        P.approve(root, p.id)
    assert _state(root) == before and P.get(root, p.id).status == "open"  # nothing merged, not even b's confirm
    rejected = P.reject(root, p.id, reason="out of date")
    assert rejected.status == "rejected" and rejected.reason == "out of date"
    with pytest.raises(InvalidMemory, match="rejected"):
        P.approve(root, p.id)


def test_undo_after_a_later_change_is_refused(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, _ = _setup(root)
    p = P.open_proposal(root, [{"op": "edit", "memory": a.id, "fields": {"content": "from the proposal"}}], title="t")
    P.approve(root, p.id)
    S.confirm(root, a.id)
    with pytest.raises(P.StaleProposal, match="changed after the merge"):
        P.undo(root, p.id)
    assert S.get(root, a.id).content == "from the proposal"


def test_bad_changes_are_refused_when_the_proposal_is_opened(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, _ = _setup(root)
    for change, message in (({"op": "fly", "memory": a.id}, "op is one of"),
                            ({"op": "create", "kind": "project", "title": "x", "attributes": {"name": "x"}},
                             "project.status is required"),
                            ({"op": "edit", "memory": a.id, "fields": {"owner": "me"}}, "an edit changes"),
                            ({"op": "link", "memory": a.id, "relation": "about", "target": a.id}, "itself")):
        with pytest.raises(InvalidMemory, match=message):
            P.open_proposal(root, [change], title="t")
    with pytest.raises(InvalidMemory, match="change 1: no memory 'no-such-memory'"):
        P.open_proposal(root, [{"op": "confirm", "memory": "no-such-memory"}], title="t")
    assert P.list_proposals(root) == []


def test_the_proposal_cli(agentlog_home: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    a, _ = _setup(root)
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps([{"op": "edit", "memory": a.slug, "fields": {"content": "new text"}}]))
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    opened = r.invoke(cli, ["memory", "propose", "--title", "update", "--file", str(changes), "--json"], env=env)
    assert opened.exit_code == 0, opened.output
    pid = json.loads(opened.output)["id"]
    listed = json.loads(r.invoke(cli, ["memory", "proposals", "--json"], env=env).output)
    assert [p["id"] for p in listed] == [pid]
    review = r.invoke(cli, ["memory", "review", pid[:13]], env=env)
    assert review.exit_code == 0 and "+   content: new text" in review.output
    assert r.invoke(cli, ["memory", "approve", pid], env=env).exit_code == 0
    assert S.get(root, a.id).content == "new text"
    assert r.invoke(cli, ["memory", "undo", pid], env=env).exit_code == 0
    assert S.get(root, a.id).content == ""
    again = r.invoke(cli, ["memory", "undo", pid], env=env)
    assert again.exit_code == 1 and "only a merged proposal" in again.output
