"""Deleting a memory for real, and evidence whose event was purged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from import_support import record_prompt
from test_purge import files_holding

from agentlog.log.purge import Selector
from agentlog.memory import service as S
from agentlog.memory import store
from agentlog.memory.proposals import approve, open_proposal
from agentlog.operations.memory_purge import purge_memory
from agentlog.store.ingest import ingest
from agentlog.operations.purge import purge


def _dump(root: str) -> dict[str, list[tuple[object, ...]]]:
    con = store.connect(root)
    try:
        return store.dump(con)
    finally:
        con.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentlog", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AGENTLOG_HOME": str(home)})


def _two_memories(root: str) -> tuple[S.Memory, S.Memory]:
    a = S.create(root, "fact", "Deploy key lives in vault", content="CANARY-mem-one-qzxw",
                 attributes={"statement": "the deploy key is in vault qzxw"})
    b = S.create(root, "convention", "Branch names", content="feature/<ticket>",
                 attributes={"rule": "feature/<ticket>"})
    # one proposal changing both: its frames hold A's text and B's change
    p = open_proposal(root, [{"op": "edit", "memory": a.id, "fields": {"content": "CANARY-mem-two-qzxw"}},
                             {"op": "edit", "memory": b.id, "fields": {"title": "Branch names (enforced)"}}],
                      title="tidy both", actor="agent")
    approve(root, p.id)
    S.link(root, b.id, "relates_to", a.id)
    S.confirm(root, b.id)
    return S.get(root, a.id), S.get(root, b.id)


def test_purging_a_memory_removes_its_text_everywhere_and_keeps_the_others_exact(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, b = _two_memories(root)
    ingest(root)  # the memory log's events are in the store too
    assert files_holding(agentlog_home, b"qzxw")
    before_b = S.get(root, b.id)

    dry = purge_memory(root, a.slug, dry_run=True)
    assert dry.frames >= 4 and dry.restated == [b.id] and dry.purge_id is None
    assert files_holding(agentlog_home, b"qzxw")  # a dry run changes nothing

    done = purge_memory(root, a.slug)
    assert done.purge_id and done.frames == dry.frames and done.store_rows_deleted >= 4
    assert files_holding(agentlog_home, b"qzxw") == []

    with pytest.raises(store.NotFound):
        S.get(root, a.id, with_deleted=True)
    after_b = S.get(root, b.id)
    # the other memory is exactly as it was, but for its link to the purged one
    assert (after_b.title, after_b.version, after_b.confidence, after_b.content, after_b.links) == \
        (before_b.title, before_b.version, before_b.confidence, before_b.content, [])
    assert "restated" in [h["change"] for h in S.history(root, b.id)]
    # replay equals the live read model; the chains still verify, the frames counted as purged
    assert store.verify(root)["ok"]
    live = _dump(root)
    store.rebuild(root)
    assert _dump(root) == live
    v = _cli(agentlog_home, "verify", "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    reports = {r["session"]: r for r in json.loads(v.stdout)["reports"]}
    assert reports["memory"]["status"] == "intact" and reports["memory"]["purged"] == done.frames
    # writing goes on after a purge
    S.edit(root, b.id, title="Branch names again")
    assert store.verify(root)["ok"]
    with pytest.raises(store.NotFound):
        purge_memory(root, a.id)


def test_only_a_memory_selector_reaches_the_memory_log(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    m = S.create(root, "fact", "Old but kept", attributes={"statement": "memories are curated"})
    ingest(root)
    far_future = 4_102_444_800_000_000  # 2100-01-01: every event is "before" it
    done = purge(root, Selector(before=far_future))
    assert not any(lg.log == "agentlog/memory" for lg in done.logs)
    store.rebuild(root)
    assert S.get(root, m.id).title == "Old but kept"
    with pytest.raises(ValueError):
        Selector(memory="short")


def test_evidence_pointing_at_a_purged_event_shows_as_purged(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    event_id = record_prompt(root, "s-gone")
    m = S.create(root, "fact", "a prompt was typed", attributes={"statement": "yes"},
                 evidence=[{"type": "event", "value": event_id}, {"type": "url", "value": "https://example.com"}])
    (seen,) = [r for r in S.resolve_evidence(root, m.evidence) if r["type"] == "event"]
    assert seen["resolved"]["kind"] == "prompt_submitted"
    purge(root, Selector(session="s-gone"))
    (seen,) = [r for r in S.resolve_evidence(root, S.get(root, m.id).evidence) if r["type"] == "event"]
    assert seen["resolved"]["purged"] is True and seen["resolved"]["purge_id"]
    shown = _cli(agentlog_home, "memory", "show", m.slug)
    assert shown.returncode == 0, shown.stderr
    assert "purged:" in shown.stdout


def test_the_cli_deletes_for_real_only_when_asked(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a, _b = _two_memories(root)
    r = _cli(agentlog_home, "memory", "delete", a.slug, "--purge", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dry_run"] is True and files_holding(agentlog_home, b"qzxw")
    r = _cli(agentlog_home, "memory", "delete", a.slug, "--purge")  # not a terminal, no --yes
    assert r.returncode == 2 and "--yes" in r.stderr
    r = _cli(agentlog_home, "memory", "delete", a.slug, "--purge", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["memory_id"] == a.id and out["frames"] > 0
    assert files_holding(agentlog_home, b"qzxw") == []
    r = _cli(agentlog_home, "memory", "delete", a.slug, "--purge", "--yes")
    assert r.returncode == 1 and "no memory" in r.stderr


def test_a_process_keeping_the_read_model_open_follows_another_processes_purge(agentlog_home: Path) -> None:
    """A long-lived process (the dashboard, the MCP server) keeps its connection to the read model;
    another process's purge replaces the file: this one then reads the new file — nothing of the
    purged memory — and its own writes go there too."""
    root = str(agentlog_home)
    secret = S.create(root, "fact", "the launch code", content="zebra-42-ostrich", attributes={"statement": "x"})
    kept = S.create(root, "fact", "the tests run with make test", attributes={"statement": "make test"})
    assert S.get(root, secret.id).content == "zebra-42-ostrich"  # this process's connection is open
    done = subprocess.run([sys.executable, "-m", "agentlog", "memory", "delete", secret.id, "--purge", "--yes"],
                          env={**os.environ, "AGENTLOG_HOME": root}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with pytest.raises(store.NotFound):
        S.get(root, secret.id)
    assert [m.id for m, _ in S.search(root, "zebra")] == [] and [m.id for m in S.list_memories(root)] == [kept.id]
    S.edit(root, kept.id, content="make test, or pytest -n 2")
    fresh = subprocess.run([sys.executable, "-m", "agentlog", "memory", "show", kept.id, "--json"],
                           env={**os.environ, "AGENTLOG_HOME": root}, capture_output=True, text=True, timeout=120)
    assert json.loads(fresh.stdout)["content"] == "make test, or pytest -n 2"
    assert store.verify(root)["ok"]
