"""Proposals: open, review, merge all-or-nothing, stale merges refused, undo exact."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from import_support import record_prompt

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
    assert "+ #1 new pitfall: Edits to config.py fail" in review and f"~ #2 edit {a.slug}" in review
    assert "+   steps: ['./scripts/test.sh']" in review
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
                            ({"op": "link", "memory": a.id, "relation": "about", "target": a.id}, "itself"),
                            ({"op": "add_evidence", "memory": a.id, "evidence": {"type": "event"}},
                             "event evidence needs a value"),
                            ("not a change", "a change is an object with an op")):
        with pytest.raises(InvalidMemory, match=message):
            P.open_proposal(root, [change], title="t")
    twice = {"op": "create", "id": "0190a8f0-0000-7000-8000-00000000000a", "kind": "fact", "title": "x",
             "attributes": {"statement": "x"}}
    with pytest.raises(InvalidMemory, match="change 2: memory 0190a8f0-.* is created by an earlier change already"):
        P.open_proposal(root, [twice, twice], title="t")
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


def _memory_events(root: str) -> list[dict[str, Any]]:
    from agentlog.log.frame import event_bytes
    from agentlog.log.segments import lines_from

    return [json.loads(event_bytes(line)) for _, line in lines_from(store.log_path(root), 0)]


def _replays_to_the_same(root: str) -> None:
    con = store.connect(root)
    live = store.dump(con)
    con.close()
    store.rebuild(root)
    con = store.connect(root)
    try:
        assert store.dump(con) == live
    finally:
        con.close()


# -- a person edits a proposal --------------------------------------------------------------


def test_a_person_edits_an_open_proposal_and_the_edit_is_recorded(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    p = P.open_proposal(root, [{"op": "edit", "memory": a.id, "fields": {"content": "agent text"}},
                               {"op": "confirm", "memory": b.id},
                               {"op": "contradict", "memory": a.id}], title="from the agent", note="n", actor="agent")
    edited = P.edit_proposal(root, p.id[:13], title="tidied", note="", drop=[2],
                             replace={3: {"op": "add_evidence", "memory": a.slug,
                                          "evidence": {"type": "url", "value": "https://example.com/run"}}},
                             add=[{"op": "link", "memory": a.id, "relation": "relates_to", "target": b.slug}])
    assert edited.status == "open" and edited.title == "tidied" and edited.note is None
    assert edited.changes == [p.changes[0],
                              {"op": "add_evidence", "memory": a.id,
                               "evidence": {"type": "url", "value": "https://example.com/run"}},
                              {"op": "link", "memory": a.id, "relation": "relates_to", "target": b.id}]
    assert edited.bases == {a.id: 1}  # b is no longer touched
    (ev,) = [e for e in _memory_events(root) if e["provider_event_name"] == "proposal_edited"]
    assert ev["attrs"]["actor"] == "person" and ev["attrs"]["proposal_id"] == p.id
    assert ev["content"]["edited"] == {"dropped": [2], "replaced": [3], "added": [3], "title": True, "note": True}
    _replays_to_the_same(root)
    assert P.get(root, p.id) == edited
    P.approve(root, p.id)
    got = S.get(root, a.id)
    assert got.content == "agent text" and got.links == [("relates_to", b.id)] and len(got.evidence or []) == 1


def test_an_edit_is_checked_again_and_keeps_the_base_versions_honest(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    c = S.create(root, "fact", "Soon gone", attributes={"statement": "x"})
    p = P.open_proposal(root, [{"op": "edit", "memory": a.id, "fields": {"title": "Run every test"}},
                               {"op": "confirm", "memory": c.id}], title="t")
    S.edit(root, a.id, content="a person changed it")  # a: version 2 now
    S.delete(root, c.id)
    before = P.get(root, p.id)
    size = os.path.getsize(store.log_path(root))
    # the kept change on c is checked again: c is gone, so the edit is refused, every problem named, nothing written
    with pytest.raises(InvalidMemory, match=r"change 2: no memory .*; change 3: convention has no attribute 'status'"):
        P.edit_proposal(root, p.id, add=[{"op": "edit", "memory": b.id, "fields": {"attributes": {"status": 1}}}])
    with pytest.raises(InvalidMemory, match="change 2: no memory"):
        P.edit_proposal(root, p.id, title="only the title")
    assert P.get(root, p.id) == before and os.path.getsize(store.log_path(root)) == size
    # dropping it: the kept edit of a keeps the version it was opened against, so the merge still says a changed
    kept = P.edit_proposal(root, p.id, drop=[2], add=[{"op": "confirm", "memory": b.id}])
    assert kept.bases == {a.id: 1, b.id: 1}
    assert f"~ #1 edit {a.slug}  (changed since: version 1 → 2)" in P.diff(root, p.id)
    with pytest.raises(P.StaleProposal, match=a.slug):
        P.approve(root, p.id)
    # the person rewrites the change against a as it is now: a's base moves to its current version
    rewritten = P.edit_proposal(root, p.id, replace={1: {"op": "edit", "memory": a.id,
                                                         "fields": {"title": "Run every test"}}})
    assert rewritten.bases == {a.id: 2, b.id: 1}
    P.approve(root, p.id)
    assert S.get(root, a.id).title == "Run every test" and S.get(root, a.id).content == "a person changed it"
    _replays_to_the_same(root)


def test_only_an_open_proposal_can_be_edited_and_an_empty_edit_writes_nothing(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    p = P.open_proposal(root, [{"op": "confirm", "memory": a.id}], title="t")
    size = os.path.getsize(store.log_path(root))
    same = P.edit_proposal(root, p.id, title="t", replace={1: {"op": "confirm", "memory": a.slug}})
    assert same == P.get(root, p.id) and os.path.getsize(store.log_path(root)) == size
    for kw, message in (({"drop": [1]}, "no change left: reject it instead"), ({"drop": [2]}, "changes 1 to 1, not 2"),
                        ({"drop": [1], "replace": {1: {"op": "confirm", "memory": b.id}}}, "both dropped and replaced")):
        with pytest.raises(InvalidMemory, match=message):
            P.edit_proposal(root, p.id, **kw)  # type: ignore[arg-type]
    P.approve(root, p.id)
    with pytest.raises(InvalidMemory, match="is merged, not open: only an open proposal can be edited"):
        P.edit_proposal(root, p.id, title="late")
    q = P.open_proposal(root, [{"op": "confirm", "memory": b.id}], title="t")
    P.reject(root, q.id)
    with pytest.raises(InvalidMemory, match="is rejected, not open"):
        P.edit_proposal(root, q.id, add=[{"op": "confirm", "memory": a.id}])
    with pytest.raises(InvalidMemory, match="is rejected, not open"):
        P.reject(root, q.id)


def test_editing_a_proposal_from_the_cli(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    a, b = _setup(root)
    p = P.open_proposal(root, [{"op": "confirm", "memory": a.id}, {"op": "confirm", "memory": b.id}], title="t")
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    out = r.invoke(cli, ["memory", "review", p.id[:13], "--drop", "1", "--title", "only b",
                         "--add", json.dumps({"op": "edit", "memory": b.slug, "fields": {"content": "why"}}),
                         "--json"], env=env)
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["title"] == "only b" and [c["op"] for c in got["changes"]] == ["confirm", "edit"]
    assert got["diff"][0] == f"~ #1 confirm {b.slug}" and "+   content: why" in got["diff"]
    assert out.stderr.strip() == f"proposal {p.id} edited"
    text = r.invoke(cli, ["memory", "review", p.id, "--replace", '2={"op": "archive", "memory": "%s"}' % b.id], env=env)
    assert text.exit_code == 0 and f"~ #2 archive {b.slug}" in text.stdout
    for args, code, message in ((["--replace", "2"], 2, "is not N=JSON"), (["--add", "{oops"], 2, "is not JSON"),
                                (["--drop", "7"], 1, "changes 1 to 2, not 7"),
                                (["--add", '{"op": "confirm", "memory": "nope"}'], 1, "change 3: no memory 'nope'")):
        bad = r.invoke(cli, ["memory", "review", p.id, *args], env=env)
        assert bad.exit_code == code and message in bad.output, bad.output
        assert "Traceback" not in bad.output
    assert r.invoke(cli, ["memory", "approve", p.id], env=env).exit_code == 0
    late = r.invoke(cli, ["memory", "review", p.id, "--note", "x"], env=env)
    assert late.exit_code == 1 and "only an open proposal can be edited" in late.output


# -- merge re-checks every change against the memories now ----------------------------------


def test_a_link_whose_target_was_deleted_since_is_not_merged(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    p = P.open_proposal(root, [{"op": "confirm", "memory": a.id},
                               {"op": "link", "memory": a.id, "relation": "relates_to", "target": b.id}], title="t")
    S.delete(root, b.id)  # b is not a memory the proposal changes: its version is not a base
    before = _state(root)
    with pytest.raises(P.StaleProposal, match=f"change 2 \\(link\\): memory {a.slug} would link to {b.slug}, "
                                              "which is gone: nothing was merged"):
        P.approve(root, p.id)
    assert _state(root) == before and P.get(root, p.id).status == "open"
    assert f"+   link relates_to → {b.slug} (deleted)" in P.diff(root, p.id)


def test_an_edit_of_an_archived_memory_is_refused_at_open_and_at_merge(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    S.archive(root, b.id)
    for change in ({"op": "edit", "memory": b.id, "fields": {"title": "x"}},
                   {"op": "link", "memory": b.id, "relation": "about", "target": a.id}):
        with pytest.raises(InvalidMemory, match=f"memory {b.slug} is archived: restore it first"):
            P.open_proposal(root, [change], title="t")
    # archived by an earlier change of the same proposal: the edit after it is refused as a direct edit would be
    p = P.open_proposal(root, [{"op": "archive", "memory": a.id},
                               {"op": "edit", "memory": a.id, "fields": {"content": "x"}}], title="t")
    before = _state(root)
    with pytest.raises(P.StaleProposal, match=f"change 2 \\(edit\\): memory {a.slug} is archived"):
        P.approve(root, p.id)
    assert _state(root) == before and not S.get(root, a.id).archived


def test_evidence_gone_from_the_recorded_history_since_opening_is_not_merged(agentlog_home: Path) -> None:
    from agentlog.log.purge import Selector
    from agentlog.operations.purge import purge

    root = str(agentlog_home)
    a, _ = _setup(root)
    kept, gone = record_prompt(root, "s-kept"), record_prompt(root, "s-gone")
    p = P.open_proposal(root, [
        {"op": "create", "kind": "fact", "title": "a prompt was typed", "attributes": {"statement": "yes"},
         "evidence": [{"type": "event", "value": f"ev_{kept}"}]},
        {"op": "add_evidence", "memory": a.id, "evidence": {"type": "event", "value": gone}}], title="t")
    # stored as a direct command stores it: the display prefix dropped
    assert p.changes[0]["evidence"] == [{"type": "event", "value": kept}]
    with pytest.raises(InvalidMemory, match="change 1: evidence event '0190a8f0-.*' is not in the recorded history"):
        P.open_proposal(root, [{"op": "add_evidence", "memory": a.id,
                                "evidence": {"type": "event", "value": "0190a8f0-0000-7000-8000-000000000000"}}],
                        title="t")
    purge(root, Selector(session="s-gone"))
    before = _state(root)
    with pytest.raises(P.StaleProposal, match=f"change 2 \\(add_evidence of memory {a.slug}\\): evidence event "
                                              f"'{gone}' is not in the recorded history"):
        P.approve(root, p.id)
    assert _state(root) == before and P.get(root, p.id).status == "open"
    P.edit_proposal(root, p.id, drop=[2])
    P.approve(root, p.id)
    ((m, _),) = S.search(root, "prompt typed")
    assert S.get(root, m.id).evidence == [{"type": "event", "value": kept}]


# -- undo leaves no dangling link -----------------------------------------------------------


def test_undo_is_refused_when_another_memory_links_to_one_it_created(agentlog_home: Path) -> None:
    import uuid

    root = str(agentlog_home)
    a, b = _setup(root)
    made = str(uuid.uuid4())
    p = P.open_proposal(root, [
        {"op": "create", "id": made, "kind": "fact", "title": "Made here", "attributes": {"statement": "x"}},
        {"op": "link", "memory": b.id, "relation": "about", "target": made}], title="t")
    before = _state(root)
    P.approve(root, p.id)
    assert P.undo(root, p.id).status == "undone"  # b's link to it is the proposal's own: undone with it
    assert _state(root) == before
    q = P.open_proposal(root, [{"op": "create", "id": str(uuid.uuid4()), "kind": "fact", "title": "Made again",
                                "attributes": {"statement": "y"}}], title="t")
    P.approve(root, q.id)
    created = S.get(root, "Made again".lower().replace(" ", "-") + "-" + q.changes[0]["id"][:8])
    S.link(root, a.id, "relates_to", created.id)  # after the merge, by someone else
    after = _state(root)
    with pytest.raises(P.StaleProposal, match=f"memory {a.slug} was linked to {created.slug}, which the proposal "
                                              "created, after the merge: undo would leave that link pointing at "
                                              "nothing; nothing was undone \\(remove the link first: agentlog "
                                              f"memory unlink {a.slug} relates_to {created.slug}\\)"):
        P.undo(root, q.id)
    assert _state(root) == after and P.get(root, q.id).status == "merged"
    # the command it names removes the link, and the undo goes through
    from click.testing import CliRunner

    from agentlog.cli import cli

    r = CliRunner().invoke(cli, ["memory", "unlink", a.slug, "relates_to", created.slug, "--json"],
                           env={"AGENTLOG_HOME": root})
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["links"] == []
    assert P.undo(root, q.id).status == "undone"
    assert S.get(root, a.id).links == [] and created.id not in {m.id for m in S.list_memories(root)}
    # what it asks costs the links to the created memory, found by an index (not every link, not the log)
    con = store.connect(root)
    plan = " ".join(str(r) for r in con.execute("EXPLAIN QUERY PLAN SELECT l.source FROM links l JOIN memories m "
                                                 "ON m.id = l.source WHERE l.target = ?", (created.id,)))
    assert "links_target" in plan and "SCAN l" not in plan


def test_a_link_is_removed_directly_or_by_a_proposal_and_the_undo_puts_it_back(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _setup(root)
    S.link(root, a.id, "relates_to", b.id)
    with pytest.raises(InvalidMemory, match=f"memory {a.slug} has no link about → {b.slug}"):
        S.unlink(root, a.id, "about", b.slug)
    v = S.get(root, a.id).version
    gone = S.unlink(root, a.slug, "relates_to", b.slug)
    assert gone.links == [] and gone.version == v + 1
    # by a proposal: reviewed as a removed link, merged, undone exactly
    S.link(root, a.id, "relates_to", b.id)
    with pytest.raises(InvalidMemory, match="has no link supersedes"):
        P.open_proposal(root, [{"op": "unlink", "memory": a.id, "relation": "supersedes", "target": b.id}], title="t")
    p = P.open_proposal(root, [{"op": "unlink", "memory": a.slug, "relation": "relates_to", "target": b.slug}],
                        title="t", actor="agent")
    assert p.changes == [{"op": "unlink", "memory": a.id, "relation": "relates_to", "target": b.id}]
    assert f"-   link relates_to → {b.slug}" in P.diff(root, p.id)
    before = _state(root)
    P.approve(root, p.id)
    assert S.get(root, a.id).links == []
    P.undo(root, p.id)
    assert _state(root) == before and S.get(root, a.id).links == [("relates_to", b.id)]
    _replays_to_the_same(root)
    # a proposal whose link went away meanwhile is not merged
    q = P.open_proposal(root, [{"op": "unlink", "memory": a.id, "relation": "relates_to", "target": b.id}], title="t")
    S.unlink(root, a.id, "relates_to", b.id)
    assert "(no longer linked)" in "\n".join(P.diff(root, q.id))
    with pytest.raises(P.StaleProposal, match=f"memory {a.slug} changed since"):
        P.approve(root, q.id)
    # a link to a memory deleted since is removed by the deleted memory's id (or its prefix)
    S.link(root, a.id, "relates_to", b.id)
    S.delete(root, b.id)
    assert S.get(root, a.id).links == [("relates_to", b.id)]
    assert S.unlink(root, a.id, "relates_to", b.id[:8]).links == []


# -- the review of a create shows everything ------------------------------------------------


def test_the_review_of_a_create_shows_everything_and_is_terminal_safe(agentlog_home: Path) -> None:
    import uuid

    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    a, _ = _setup(root)
    made = str(uuid.uuid4())
    p = P.open_proposal(root, [
        {"op": "create", "id": made, "kind": "pitfall", "title": "Edits to config.py fail",
         "content": "Read the file first.\nThen edit \x1b[31mcarefully\x1b[0m.",
         "attributes": {"symptom": "string_mismatch", "avoid": "read it first", "paths": ["src/config.py"]},
         "tags": ["Config", "edits"], "slug": "config-edits",
         "evidence": [{"type": "quote", "value": "old_string not found", "note": "the tool said"},
                      {"type": "file", "path": "src/config.py", "line_start": 3, "line_end": 9, "commit": "abc1234"}],
         "lifetime": {"policy": "until", "until": "2031-01-01"}, "pinned": True},
        {"op": "link", "memory": made, "relation": "relates_to", "target": a.id}], title="t", actor="agent")
    lines = P.diff(root, p.id)
    assert lines == [
        "+ #1 new pitfall: Edits to config.py fail",
        "+   slug: config-edits",
        "+   symptom: string_mismatch",
        "+   avoid: read it first",
        "+   paths: ['src/config.py']",
        "+   tags: config, edits",
        "+   content:",
        "+     Read the file first.",
        "+     Then edit \x1b[31mcarefully\x1b[0m.",
        "+   evidence quote: old_string not found (the tool said)",
        "+   evidence file: src/config.py:3-9 @ abc1234",
        f"+   link relates_to → {a.slug} (change 2)",
        "+   confidence 0.60, lifetime until 2031-01-01, visibility shared, pinned",
        f"+   id: {made}",
        f"+ #2 link new pitfall 'Edits to config.py fail' relates_to → {a.slug}",
    ]
    out = CliRunner().invoke(cli, ["memory", "review", p.id], env={"AGENTLOG_HOME": root})
    assert out.exit_code == 0 and "\x1b" not in out.output
    assert "+     Then edit \\x1b[31mcarefully\\x1b[0m." in out.output


def test_the_review_of_an_edit_shows_text_on_several_lines_as_a_line_diff(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, _ = _setup(root)
    S.edit(root, a.id, content="one\ntwo\nthree\nfour\nfive\nsix")
    p = P.open_proposal(root, [{"op": "edit", "memory": a.id, "fields": {"content": "one\n2\nthree\nfour\nfive\n6",
                                                                          "title": "Run them all"}}], title="t")
    assert P.diff(root, p.id) == [
        f"~ #1 edit {a.slug}",
        "-   title: Run the tests", "+   title: Run them all",
        "~   content:", "      one", "-     two", "+     2", "      three", "    …", "      five", "-     six", "+     6",
    ]


def test_a_proposal_approved_at_once_by_several_writers_is_merged_once(agentlog_home: Path) -> None:
    """The proposal is read again under the lock: writers that all saw it open before one of
    them merged it are refused, not merged again (a create has no base version to catch it)."""
    import threading

    root = str(agentlog_home)
    _setup(root)
    p = P.open_proposal(root, [{"op": "create", "kind": "fact", "title": "Merged once",
                                "attributes": {"statement": "x"}}], title="t")
    start = threading.Barrier(4)
    outcomes: list[str] = []

    def approve() -> None:
        start.wait()
        try:
            P.approve(root, p.id)
            outcomes.append("merged")
        except InvalidMemory as e:
            outcomes.append("refused" if "is merged, not open" in str(e) else str(e))

    threads = [threading.Thread(target=approve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["merged", "refused", "refused", "refused"]
    assert [m.title for m in S.list_memories(root)].count("Merged once") == 1


def test_a_change_that_is_so_already_is_merged_as_nothing(agentlog_home: Path) -> None:
    """As the direct commands: an edit to what a memory says already, a link it has, an archive of
    an archived memory write no event and take no version; the fields of an edit that do
    change are the only ones written."""
    root = str(agentlog_home)
    a, b = _setup(root)
    S.link(root, a.id, "relates_to", b.id)
    a, b = S.get(root, a.id), S.get(root, b.id)
    p = P.open_proposal(root, [
        {"op": "edit", "memory": a.id, "fields": {"content": a.content, "title": a.title, "tags": a.tags}},
        {"op": "link", "memory": a.id, "relation": "relates_to", "target": b.id}], title="t")
    review = "\n".join(P.diff(root, p.id))
    assert "(so already: merging writes nothing for it)" in review and "(linked already" in review
    before = _state(root)
    merged = P.approve(root, p.id)
    assert merged.status == "merged" and _state(root) == before
    assert S.get(root, a.id).version == a.version
    q = P.open_proposal(root, [{"op": "edit", "memory": b.id, "fields": {"title": b.title, "content": "new"}}],
                        title="t")
    P.approve(root, q.id)
    (merge,) = [e for e in _memory_events(root)
                if e["provider_event_name"] == "proposal_merged" and e["attrs"].get("proposal_id") == q.id]
    ops = merge["content"]["ops"]
    assert [(o["name"], o["body"]) for o in ops] == [("memory_edited", {"content": "new"})]
    assert S.get(root, b.id).version == b.version + 1
    S.archive(root, b.id)
    r = P.open_proposal(root, [{"op": "archive", "memory": b.id}], title="t")
    v = S.get(root, b.id).version
    P.approve(root, r.id)
    assert S.get(root, b.id).version == v
    _replays_to_the_same(root)


def test_undo_is_refused_while_a_relationship_names_a_memory_it_created(agentlog_home: Path) -> None:
    import uuid

    root = str(agentlog_home)
    a, _ = _setup(root)
    made = str(uuid.uuid4())
    p = P.open_proposal(root, [{"op": "create", "id": made, "kind": "person", "title": "Ada",
                                "attributes": {"full_name": "Ada"}}], title="t")
    P.approve(root, p.id)
    rel = S.create(root, "relationship", "Ada maintains it",
                   attributes={"subject_id": made, "predicate": "maintains", "object_id": a.id})
    after = _state(root)
    with pytest.raises(P.StaleProposal, match=f"relationship {rel.slug} names ada-.*, which the proposal created, "
                                              "as its subject_id: undo would leave it naming nothing"):
        P.undo(root, p.id)
    assert _state(root) == after
    # the other end too
    S.edit(root, rel.id, attributes={"subject_id": a.id, "object_id": made})
    with pytest.raises(P.StaleProposal, match="as its object_id"):
        P.undo(root, p.id)
    # and it asks the two partial indexes, not every memory
    con = store.connect(root)
    for col in ("subject_id", "object_id"):
        plan = " ".join(str(r) for r in con.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM memories WHERE kind = 'relationship' AND deleted = 0 AND "
            f"json_extract(attributes, '$.{col}') = ?", (made,)))
        assert f"memories_{col.split('_')[0]}" in plan and "SCAN" not in plan, plan
    S.delete(root, rel.id)
    assert P.undo(root, p.id).status == "undone"


def test_a_relationship_names_memories_that_exist(agentlog_home: Path) -> None:
    """Made directly, by a proposal or edited: each end a memory here (or made by an earlier change of
    the same proposal), never a deleted one, never itself; a merge checks again against what is there then."""
    import uuid

    root = str(agentlog_home)
    a, b = _setup(root)
    nowhere = str(uuid.uuid4())
    rel = {"predicate": "maintains", "subject_id": a.id}
    with pytest.raises(InvalidMemory, match=f"object_id {nowhere} names no memory here"):
        S.create(root, "relationship", "x", attributes={**rel, "object_id": nowhere})
    made = S.create(root, "relationship", "a maintains b", attributes={**rel, "object_id": b.id})
    with pytest.raises(InvalidMemory, match="subject_id cannot be the relationship itself"):
        S.edit(root, made.id, attributes={"subject_id": made.id})
    with pytest.raises(InvalidMemory, match=f"object_id {nowhere} names no memory here"):
        S.edit(root, made.id, attributes={"object_id": nowhere})
    assert S.get(root, made.id).version == 1
    # a proposal: refused at open for a memory that is nowhere; one made by an earlier change is fine
    with pytest.raises(InvalidMemory, match="names no memory here"):
        P.open_proposal(root, [{"op": "create", "kind": "relationship", "title": "r",
                                "attributes": {**rel, "object_id": nowhere}}], title="t")
    ada = str(uuid.uuid4())
    p = P.open_proposal(root, [{"op": "create", "id": ada, "kind": "person", "title": "Ada",
                                "attributes": {"full_name": "Ada"}},
                               {"op": "create", "kind": "relationship", "title": "Ada maintains b",
                                "attributes": {"subject_id": ada, "predicate": "maintains", "object_id": b.id}}],
                        title="t")
    P.approve(root, p.id)
    assert sorted(m.title for m in S.list_memories(root, kind="relationship")) == ["Ada maintains b", "a maintains b"]
    # an end deleted after the proposal was opened: the merge refuses it, naming the end
    q = P.open_proposal(root, [{"op": "create", "kind": "relationship", "title": "late",
                                "attributes": {**rel, "object_id": b.id}}], title="t")
    S.delete(root, b.id)
    before = _state(root)
    with pytest.raises(P.StaleProposal, match=f"'late' is a relationship whose object_id {b.slug} is gone"):
        P.approve(root, q.id)
    assert _state(root) == before
    with pytest.raises(InvalidMemory, match=rf"object_id {b.id} names no memory here \({b.slug} was deleted\)"):
        S.create(root, "relationship", "y", attributes={**rel, "object_id": b.id})
    _replays_to_the_same(root)
