"""The memory's free text on tantivy: read-your-writes, other processes' writes, purge, rebuild."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_purge import files_holding

from agentlog.memory import service as S
from agentlog.memory import store, text_index
from agentlog.operations.memory_purge import purge_memory


def ids(root: str, q: str) -> set[str]:
    return {m.id for m, _ in S.search(root, q, mode="lexical")}  # words only (hybrid: test_search_semantic.py)


def _terms(root: str, prefix: str) -> list[str]:
    """The index's words starting with ``prefix`` (deleted documents' too, while their segment lives)."""
    idx = text_index._index(root)
    return [t[0] for t in idx.searcher().terms_with_prefix("body", prefix)]


def test_a_search_right_after_a_write_finds_it_and_not_what_it_replaced(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a = S.create(root, "fact", "Cache lives in redis", attributes={"statement": "redis"})
    assert ids(root, "redis") == {a.id}  # the index is built at this first search
    S.edit(root, a.id, content="moved to valkey", title="Cache lives in valkey")
    assert ids(root, "valkey") == {a.id}
    assert ids(root, '"lives in redis"') == set()
    b = S.create(root, "fact", "Sessions live in valkey too", attributes={"statement": "valkey"})
    assert ids(root, "valkey") == {a.id, b.id}
    S.delete(root, a.id)
    assert ids(root, "valkey") == {b.id}
    con = store.connect(root)
    assert text_index.check(root, con)["ok"]
    assert store.verify(root)["text_index"] == {"ok": True, "indexed": 1, "memories": 1, "only_indexed": 0,
                                                "only_memories": 0}
    # a document the read model does not have (as a bug or a stale copy would leave): verify says so
    import tantivy

    idx = text_index._index(root)
    w = idx.writer(heap_size=text_index.HEAP_BYTES, num_threads=1)
    w.add_document(tantivy.Document(id=["ghost"], row=[999_999], body=["ghost"]))
    w.commit()
    w.wait_merging_threads()
    del w
    v = store.verify(root)
    assert not v["ok"] and v["text_index"]["only_indexed"] == 1


def test_the_query_language_is_event_searchs(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a = S.create(root, "pitfall", "ParseConfig raises KeyError", content="see src/app/parse_config.py",
                 attributes={"symptom": "KeyError: 'port'", "avoid": "read it first"})
    b = S.create(root, "fact", "parsing is lazy", attributes={"statement": "lazy parse"})
    for q, want in [("parse_config", {a.id}), ("parse-config", {a.id}), ("parseconfig", {a.id}),
                    ('"parse config"', {a.id}), ('"config parse"', set()), ("pars*", {a.id, b.id}),
                    ("keyerror OR lazy", {a.id, b.id}), ("pars* -lazy", {a.id}), ("KEYERROR", {a.id}),
                    ("kind:fact pars*", {b.id}), ("-lazy", {a.id}), ("app/parse_config.py", {a.id}),
                    # an event filter's name is text here (a filter would match every memory)
                    ("tool:KeyError", set()), ("path:src/app", set()),
                    ("x" * 200, set()), ('"', set()), ("(", set())]:  # no word: nothing (as a word too long)
        assert ids(root, q) == want, q


def test_another_processes_write_is_found_by_this_ones_next_search(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    S.create(root, "fact", "first one", attributes={"statement": "one"})
    assert len(ids(root, "first")) == 1
    code = ("import sys; from agentlog.memory import service as S; "
            "S.create(sys.argv[1], 'fact', 'zebra crossing', attributes={'statement': 'zebra'})")
    subprocess.run([sys.executable, "-c", code, root], check=True, timeout=60)
    (hit,) = S.search(root, "zebra")
    assert hit[0].title == "zebra crossing"


def test_purging_a_memory_removes_its_words_from_the_index_files(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a = S.create(root, "fact", "Deploy key", content="canary zqcanaryword here", attributes={"statement": "vault"})
    S.create(root, "fact", "Other", content="keep me", attributes={"statement": "kept"})
    assert ids(root, "zqcanaryword") == {a.id}
    S.delete(root, a.id)  # a tombstone: unfindable, its words still in the index's files
    assert ids(root, "zqcanaryword") == set()
    # (the term dictionary is an FST: a word's bytes need not be in a file whole, so the index is asked)
    assert _terms(root, "zqcanary") == ["zqcanaryword"]
    purge_memory(root, a.id)
    assert _terms(root, "zqcanary") == []
    assert files_holding(agentlog_home, b"zqcanaryword") == []
    assert [m.title for m, _ in S.search(root, "keep")] == ["Other"]


def test_a_rebuild_builds_the_index_again_with_the_same_answers(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    made = [S.create(root, "fact", f"note {i} about widgets", content="gadget" if i % 2 else "",
                     attributes={"statement": f"s{i}"}) for i in range(12)]
    S.edit(root, made[0].id, content="gadget now")
    S.delete(root, made[1].id)
    queries = ["widgets", "gadget", '"note 3"', "wid*", "gadget -note"]
    before = {q: [m.id for m, _ in S.search(root, q)] for q in queries}
    store.rebuild(root)
    assert {q: [m.id for m, _ in S.search(root, q)] for q in queries} == before
    assert text_index.check(root, store.connect(root))["ok"]


def test_the_queue_is_pruned_and_the_index_keeps_up(agentlog_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(agentlog_home)
    monkeypatch.setattr(text_index, "PRUNE_AFTER", 3)
    made = [S.create(root, "fact", f"item {i}", attributes={"statement": "x"}) for i in range(6)]
    assert len(ids(root, "item")) == 6
    con = store.connect(root)
    assert con.execute("SELECT count(*) FROM text_queue").fetchone()[0] == 1  # the last row kept: rowids rise
    S.edit(root, made[0].id, title="thing 0")
    assert len(ids(root, "item")) == 5 and ids(root, "thing") == {made[0].id}


def test_a_read_model_of_the_older_layout_is_rebuilt_when_opened(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    m = S.create(root, "fact", "survives the upgrade", attributes={"statement": "x"})
    path = store.db_path(root)
    store._forget(root)
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    old = sqlite3.connect(path)  # what version 1 made: an FTS5 table and no layout version
    old.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                      "CREATE VIRTUAL TABLE memory_fts USING fts5(id UNINDEXED, title, content, attributes, tags);"
                      "INSERT INTO memory_fts VALUES ('x', 'stale text', '', '', '');")
    old.close()
    assert ids(root, "upgrade") == {m.id}
    con = store.connect(root)
    assert con.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_fts'").fetchone()


@pytest.mark.parametrize("kw", [
    {"kind": "fact", "title": "plain", "attributes": {"statement": "x"}},
    {"kind": "procedure", "title": "Ünïcode \"quoted\" \\ title", "content": "line\nline ☃",
     "attributes": {"goal": "g", "steps": ["a", "b"]}, "tags": ["B", "a", "a"], "actor": "agent",
     "evidence": [{"type": "url", "value": "https://example.com/x"}, {"type": "quote", "value": "said so"}],
     "lifetime": "until", "until": "2031-01-01", "visibility": "restricted", "allowed_actors": ["agent"]},
    {"kind": "pitfall", "title": "secret in it", "content": "token ghp_" + "a1B2" * 9,
     "attributes": {"symptom": "s", "avoid": "a"}, "slug": "my-own-slug"},
])
def test_what_create_returns_is_what_the_read_model_holds(agentlog_home: Path, kw: dict[str, object]) -> None:
    root = str(agentlog_home)
    made = S.create(root, **kw)  # type: ignore[arg-type]  # (built from the event written, not read back)
    read = S.get(root, made.id)
    a, b = made.to_dict(), read.to_dict()
    for k in ("effective_confidence", "stale"):  # computed at slightly different times
        a.pop(k), b.pop(k)
    assert a == b
    assert list(a) == list(b) and [list(e) for e in a["evidence"]] == [list(e) for e in b["evidence"]]


def test_kind_tags_and_flags_narrow_the_matches_in_the_index_itself(agentlog_home: Path) -> None:
    """The index holds each memory's kind, tags and flags (pinned, archived), kept as the memory
    changes — so a text search's operators narrow its matches before the read model is asked."""
    from agentlog.memory.search import parse

    root = str(agentlog_home)
    a = S.create(root, "convention", "parse configs with tomllib", attributes={"rule": "tomllib"}, tags=["ci"])
    b = S.create(root, "pitfall", "parse errors on empty files", attributes={"symptom": "x", "avoid": "y"})
    con = store.connect(root)
    rows = {m: con.execute("SELECT rowid FROM memories WHERE id = ?", (m,)).fetchone()[0] for m in (a.id, b.id)}

    def in_index(q: str) -> set[str]:
        parsed = parse(q)
        found = text_index.matches(root, con, parsed.free_text(), parsed.index_narrowing()) or {}
        return {m for m, r in rows.items() if r in found}

    assert in_index("parse") == {a.id, b.id}
    assert in_index("parse kind:pitfall") == {b.id} and in_index("parse tag:ci") == {a.id}
    assert in_index("parse is:pinned") == set()
    S.edit(root, b.id, pinned=True)  # a flag changed: queued for the index like a text change
    assert in_index("parse is:pinned") == {b.id} == ids(root, "parse is:pinned")
    S.edit(root, a.id, tags=["style"])
    assert in_index("parse tag:ci") == set() and in_index("parse tag:style") == {a.id}
    S.archive(root, a.id)
    assert in_index("parse") == {b.id} == ids(root, "parse")
    assert in_index("parse is:archived") == {a.id} == ids(root, "parse is:archived")
    S.archive(root, a.id, restore=True)
    S.edit(root, b.id, pinned=False)
    assert in_index("parse") == {a.id, b.id} and in_index("parse is:pinned") == set()
    assert store.verify(root)["ok"]


def test_an_index_of_the_first_layout_is_replaced(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    a = S.create(root, "fact", "cache in redis", attributes={"statement": "redis"})
    old = os.path.join(os.path.dirname(text_index.index_path(root)), "memory-text")
    os.makedirs(old)
    with open(os.path.join(old, "meta.json"), "w") as fh:
        fh.write("{}")
    text_index._forget(root)
    text_index.remove(root)
    assert ids(root, "redis") == {a.id}  # built in the new layout's place; the old one is gone
    assert not os.path.exists(old) and os.path.isdir(text_index.index_path(root))
