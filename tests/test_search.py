"""Full-text search: recall on real transcripts, code-aware names, incremental = rebuilt, purge, hostile queries."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers.run import import_paths
from agentlog.search import index
from agentlog.search.service import SearchSyntaxError, search
from agentlog.search.text import parse_query, parts
from agentlog.store.ingest import ingest

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures" / "claude-code"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=missing(FIXTURES))


def _hook(root: str, payload: dict[str, Any]) -> None:
    from agentlog.capture.command import hook_argv

    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                       env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr


def _tool(root: str, sid: str, n: int, command: str, output: str) -> None:
    base = {"session_id": sid, "cwd": "/tmp/search-project", "tool_name": "Bash", "tool_use_id": f"tu-{sid}-{n}"}
    _hook(root, {**base, "hook_event_name": "PreToolUse", "tool_input": {"command": command}})
    _hook(root, {**base, "hook_event_name": "PostToolUse", "tool_input": {"command": command},
                 "tool_response": {"stdout": output}})


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not FIXTURES.is_dir():
        pytest.skip(missing(FIXTURES))
    root = str(tmp_path_factory.mktemp("search") / "home")
    import_paths(root, ["claude-code"], [str(FIXTURES)])
    ingest(root)
    return root


def _queries_from(path: Path) -> list[tuple[str, str, str]]:
    """(query, what its source event's text holds, what it is) written from a transcript's
    content: a prompt's phrase, a command's distinctive word, a file's name."""
    out: list[tuple[str, str, str]] = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        c = (d.get("message") or {}).get("content")
        if d.get("type") == "user" and isinstance(c, str) and not c.startswith("<") and len(c.split()) >= 4:
            words = re.findall(r"[A-Za-z]{4,}", c)
            if len(words) >= 3:
                out.append((f'"{" ".join(c.split()[:3])}"', " ".join(c.split()[:3]), "prompt"))
        if isinstance(c, list):
            for b in c:
                if b.get("type") == "tool_use" and isinstance(b.get("input"), dict):
                    fp = b["input"].get("file_path")
                    if isinstance(fp, str):
                        out.append((os.path.basename(fp), os.path.basename(fp), "file"))
                    cmd = b["input"].get("command")
                    if isinstance(cmd, str):
                        words = sorted(re.findall(r"[A-Za-z][A-Za-z0-9_]{6,}", cmd), key=len, reverse=True)
                        if words:
                            out.append((words[0], words[0], "command"))
    return list(dict.fromkeys(out))[:12]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).lower()


@needs_fixtures
def test_recall_on_the_real_transcripts(imported: str) -> None:
    """Each query finds its source: an event whose own text (its prompt, its JSON) holds what the
    query was written from — not merely some hit."""
    from agentlog.store.schema import read_events

    t = read_events(imported, columns=["event_id", "text", "event"])
    texts = {e: _norm(f"{x or ''}\n{(j or '').replace(chr(92) + 'n', ' ')}")
             for e, x, j in zip(*(t.column(c).to_pylist() for c in ("event_id", "text", "event")))}
    misses = []
    total = 0
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for query, needle, what in _queries_from(path):
            total += 1
            hits = search(imported, query, limit=50).hits
            if not any(_norm(needle) in texts[h.event_id] for h in hits):
                misses.append((path.name, query, what, len(hits)))
    assert total >= 40
    assert not misses, misses
    # hand-written, from ckpt-03: its prompt, its failing command, the file it edited
    first = search(imported, '"mise run test:ci" is failing').hits
    assert first and first[0].kind == "prompt_submitted" and "is failing" in first[0].snippet
    assert any("setup_cmd_test.go" in texts[h.event_id] for h in search(imported, "setup_cmd_test.go").hits)
    assert any("setup_cmd_test" in texts[h.event_id] for h in search(imported, "SetupCmdTest").hits)  # any spelling


@needs_fixtures
def test_the_exact_phrase_ranks_first(imported: str) -> None:
    hits = search(imported, '"Simplify the code added in this branch"').hits
    assert hits and "Simplify the code added in this branch" in hits[0].snippet
    loose = search(imported, "simplify code branch").hits
    assert loose and any("Simplify the code added in this branch" in h.snippet for h in loose[:3])


def test_code_aware_names_operators_filters_and_the_hit_s_place(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _tool(root, "s1", 1, "python -c 'import app; app.parse_config()'", "KeyError: 'name' in parse_config")
    _tool(root, "s1", 2, "grep -rn ParseConfig src/", "src/app/ParseConfig.rs:12: fn ParseConfig() {}")
    _tool(root, "s2", 1, "cat docs/parse-config.md", "the parse-config command reads TOML")
    read = {"session_id": "s1", "cwd": "/tmp/search-project", "tool_name": "Read", "tool_use_id": "tu-s1-read",
            "tool_input": {"file_path": "/tmp/search-project/src/app/config.rs"}}
    _hook(root, {**read, "hook_event_name": "PostToolUse",
                 "tool_response": {"type": "text", "file": {"content": "pub fn ParseConfig() {}"}}})
    _hook(root, {"session_id": "s2", "cwd": "/tmp/search-project", "hook_event_name": "UserPromptSubmit",
                 "prompt": "why does the flux capacitor overheat"})
    ingest(root)
    for spelling in ("parse_config", "ParseConfig", "parse-config", "parseconfig"):
        sessions = {h.session_id for h in search(root, spelling, limit=50).hits}
        assert len(sessions) == 2, (spelling, sessions)
    assert {h.tool for h in search(root, "ParseConfig tool:Bash").hits} == {"Bash"}
    assert not search(root, "ParseConfig tool:Edit").hits
    assert all(h.kind == "prompt_submitted" for h in search(root, "flux kind:prompt_submitted").hits)
    assert search(root, "capac*").hits and not search(root, "capacz*").hits
    assert search(root, '"flux capacitor"').hits and not search(root, '"capacitor flux"').hits
    assert not search(root, "config_parse").hits  # a compound's parts in its order only
    assert not search(root, '"flux overheat"').hits  # adjacent only (the index keeps no positions)
    assert not search(root, 'flux -"flux capacitor"').hits and search(root, 'flux -"capacitor flux"').hits
    with_error = {h.event_id for h in search(root, "KeyError", limit=50).hits}
    without = {h.event_id for h in search(root, "parse_config -KeyError", limit=50).hits}
    assert with_error and without and not (with_error & without)
    assert len(search(root, "overheat OR KeyError", limit=50).hits) >= 2
    hit = search(root, "KeyError").hits[0]
    assert hit.session_id and hit.session_id.startswith("ses_") and hit.attempt_id and hit.attempt_outcome
    assert any(hit.snippet[a:b].lower() == "keyerror" for a, b in hit.marks)
    by_path = search(root, "path:src/* ParseConfig").hits
    assert [h.paths for h in by_path] == [["src/app/config.rs"]] and by_path[0].tool == "Read"  # relative to cwd
    assert [h.event_id for h in search(root, "path:*.rs ParseConfig").hits] == [by_path[0].event_id]
    assert not search(root, "path:docs/* ParseConfig").hits and not search(root, "path:*.py ParseConfig").hits


def test_ids_and_digests_are_found_whole_and_add_no_terms(tmp_path: Path) -> None:
    """A hex run (a commit, a UUID's parts, a digest in a name) is one part: found as typed, its
    name's parts found, but no term of its letter/digit pieces and no name joined to it."""
    import tantivy

    root = str(tmp_path / "home")
    commit, uid = "4c046beed2a7d1e0b5a9f3c2e8d7a6b5c4d3e2f1", "019bb2fc-6894-75a5-87d6-4c046beed2a7"
    _tool(root, "s1", 1, f"git show {commit}", f"run_7f3e9a1c2b4d done for {uid}; see ParseConfig")
    ingest(root)
    for q in (commit, commit[:12] + "*", uid, "run_7f3e9a1c2b4d", "7f3e9a1c2b4d", f'"for {uid[:8]}"', "parse_config"):
        assert search(root, q).hits, q
    assert parts(uid) == ["019bb2fc", "6894", "75", "a", "5", "87", "d", "6", "4c046beed2a7"]
    idx = index.open_index(root, create=False)
    assert idx is not None
    idx.reload()
    terms = {t for t, _ in idx.searcher().terms_with_prefix("body", "")}
    assert {commit, "7f3e9a1c2b4d", "run", "019bb2fc", "parseconfig"} <= terms
    assert not {"run7f3e9a1c2b4d", "046", "bee", "9a1"} & terms


def test_secrets_redacted_at_capture_are_not_findable(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    secret = "ghp_" + "Z" * 36
    _tool(root, "s1", 1, f"export GITHUB_TOKEN={secret}", "ok")
    ingest(root)
    assert not search(root, secret).hits and not search(root, "ZZZZZZZZ*").hits
    assert search(root, "GITHUB_TOKEN").hits


def test_incremental_equals_rebuilt_and_a_killed_update_is_repaired(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    for i in range(3):
        _tool(root, f"s{i}", 1, f"make target{i}", f"built target{i}")
        ingest(root)
        index.catch_up(root)  # one index update per store commit
    assert index.check(root)["ok"]

    def dump() -> tuple[list[Any], list[Any]]:
        import tantivy

        idx = index.open_index(root, create=False)
        assert idx is not None
        idx.reload()
        searcher = idx.searcher()
        hits = searcher.search(tantivy.Query.exists_query("t"), 1000).hits
        docs = sorted(tuple(searcher.doc(a).get_first(f) for f in ("log", "seq", "offset"))
                      for _, a in hits)
        terms = sorted(searcher.terms_with_prefix("body", ""))  # every term, in how many events
        assert terms and docs
        return docs, terms

    incremental = dump()
    hits_before = [h.event_id for h in search(root, "target1 OR target2", limit=50).hits]
    index.rebuild(root)
    assert dump() == incremental
    assert [h.event_id for h in search(root, "target1 OR target2", limit=50).hits] == hits_before
    # a catch-up killed in the middle: its transaction never committed
    _tool(root, "s9", 1, "make target9", "built target9")
    ingest(root)
    code = ("import sys, os; sys.path.insert(0, sys.argv[2]); from agentlog.search import index as ix\n"
            "orig = ix._add\n"
            "def boom(writer, rows, **kw):\n    orig(writer, rows, **kw); os._exit(9)\n"
            "ix._add = boom; ix.catch_up(sys.argv[1])")
    r = subprocess.run([sys.executable, "-c", code, root, str(Path(index.__file__).parents[2])], timeout=120)
    assert r.returncode == 9
    report = index.check(root)  # it catches up first: the killed work is done again
    assert report["ok"] and report["indexed"] == report["stored"]
    assert search(root, "target9").hits


def test_a_search_while_the_writer_is_held_elsewhere_reads_what_is_committed(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _tool(root, "s1", 1, "echo alphaqq", "alphaqq")
    ingest(root)
    assert search(root, "alphaqq").hits
    _tool(root, "s1", 2, "echo betaqq", "betaqq")
    ingest(root)
    idx = index.open_index(root)
    assert idx is not None
    held = idx.writer(heap_size=15_000_000, num_threads=1)  # as the daemon's, indexing
    try:
        busy = search(root, "alphaqq")
        assert busy.hits and busy.index and busy.index.get("busy")
        assert not search(root, "betaqq").hits  # not committed yet
    finally:
        held.wait_merging_threads()  # the lock released
    assert search(root, "betaqq").hits


def test_purge_removes_the_text_from_the_index(tmp_path: Path) -> None:
    from agentlog.log.purge import Selector
    from agentlog.operations.purge import purge

    root = str(tmp_path / "home")
    _tool(root, "gone", 1, "echo canaryqzxwvk", "canaryqzxwvk printed")
    _tool(root, "kept", 1, "echo keepmeplease", "keepmeplease printed")
    ingest(root)
    assert search(root, "canaryqzxwvk").hits
    _tool(root, "later", 1, "echo laterword", "laterword printed")  # another segment, not rewritten
    ingest(root)
    assert search(root, "laterword").hits

    def terms(prefix: str) -> list[Any]:
        idx = index.open_index(root, create=False)
        assert idx is not None
        idx.reload()
        return list(idx.searcher().terms_with_prefix("body", prefix))

    assert terms("canaryqzxwvk")  # in the term dictionary, to start with
    purge(root, Selector(session="gone"))
    # before any search (whose catch-up re-indexes what the store rewrote): its segment rewritten,
    # the term is gone from the dictionary, not only its documents
    assert not terms("canaryqzxwvk")
    assert index._LAST_FORGET["readded"] >= 2 and not index._LAST_FORGET["rebuilt"]  # its other events, again
    assert not search(root, "canaryqzxwvk").hits
    assert search(root, "keepmeplease").hits and search(root, "laterword").hits
    files = [p for p in Path(index.index_path(root)).iterdir() if p.is_file()]
    assert files and all(p.stat().st_mode & 0o077 == 0 for p in files)  # private, like captured content
    assert b"canaryqzxwvk" not in b"".join(p.read_bytes() for p in files)  # not even as a term in the files
    assert index.check(root)["ok"]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200), st.sampled_from([
    '"unbalanced', 'a" OR "b', "NEAR(a b, 2)", "col:term", "* OR *", "-", "-a", "OR", "a OR", "(((", "^x",
    "body:secret", "a AND NOT b", "x" * 10_000, "\x00\x01\x1f", "'; DROP TABLE docs; --", '"" ""', "tool:", ":",
    "path:<>~`!@#$%^&()=+[]{}|;,.rs a", "session:\\x a", "kind:[ a", "path:(?i).* a", "a* b*", "é* ß",
]), st.builds(lambda f, v, w: f"{f}:{v} {w}", st.sampled_from(["path", "session", "kind", "tool", "project"]),
              st.text(min_size=1, max_size=40).filter(lambda v: not any(c.isspace() or c == '"' for c in v)),
              st.text(max_size=20))))
def test_hostile_queries_error_or_answer_never_crash(searched: str, query: str) -> None:
    try:
        q = parse_query(query)
    except SearchSyntaxError:
        return
    from agentlog.search.engine_query import engine_query
    from agentlog.search.service import _searcher, _top

    try:
        query, ranked, _check = engine_query(q)
    except SearchSyntaxError:  # e.g. since:garbage
        return
    searcher = _searcher(searched)
    assert searcher is not None
    _top(searcher, query, ranked, 21, 0)  # a valid tantivy query, always


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("hostile"))
    idx = index.open_index(root)
    assert idx is not None
    writer = idx.writer(heap_size=15_000_000, num_threads=1)
    import tantivy

    writer.add_document(tantivy.Document(body=["a b secret NEAR x"], t=[1], key=["k"], tool=["Bash"]))
    writer.commit()
    writer.wait_merging_threads()
    return root


def test_hostile_queries_through_the_cli(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _tool(root, "s1", 1, "echo hello", "hello")
    ingest(root)
    for query in ['"unbalanced', "NEAR(a b)", "-only", "x" * 10_000, "a\x01b", "tool:Bash"]:
        r = subprocess.run([sys.executable, "-m", "agentlog", "search", "--json", "--", query], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "AGENTLOG_HOME": root})
        assert r.returncode in (0, 2), (query, r.stderr)
        assert "Traceback" not in r.stderr
        if r.returncode == 0:
            assert isinstance(json.loads(r.stdout), list)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["parse", "config", "Parse", "Config", "ParseConfig", "parse_config", "flux", "x1",
                                 " ", "-", "_", ".", "/", "\n", "(", "parseconfig"]), max_size=12),
       st.sampled_from(['"parse config"', "parse_config", "ParseConfig", "config_parse", '"flux parse"', "parse_con*",
                        'flux -"parse config"', '"config flux" OR parse-config']))
def test_the_phrase_check_on_text_agrees_with_the_index_tokens(pieces: list[str], query: str) -> None:
    from agentlog.search.engine_query import engine_query

    text = "".join(pieces)
    _query, _ranked, check = engine_query(parse_query(query))
    assert check is not None
    assert check(text) == check.by_tokens(text)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["parse", "config", "Parse", "Config", "ParseConfig", "parse_config", "flux", "détail",
                                 "Détail", "dÉtailParse", "ünïcode", "é", "Ω", " ", "-", "_", ".", "\n", "parseconfig",
                                 "detail"]), max_size=12),
       st.sampled_from(['"parse config"', "parse_config", '"detail parse"', "detail_parse", '"flux parse"',
                        "parse_con*", 'flux -"parse config"', '"config detail" OR parse-config', '"tail parse"']))
def test_the_check_on_a_text_that_is_not_ascii_agrees_with_the_index_tokens(pieces: list[str], query: str) -> None:
    from agentlog.search.engine_query import engine_query

    text = "".join(pieces)
    _query, _ranked, check = engine_query(parse_query(query))
    assert check is not None
    assert check(text) == check.by_tokens(text)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["parse", "config", "ParseConfig", "parse_config", "flux", "détail", "x1", " ", "-",
                                 "_", "\n", "\u2014", "\u201c", "\u201d", "\u2192", "\u20ac", "\u00a0", "\u200b",
                                 "\u00ad", "\u2026", "\u00ab", "\u00d7", "\u02c6", "\u2028"]), max_size=12),
       st.sampled_from(['"parse config"', "parse_config", '"flux parse"', "parse_con*", 'flux -"parse config"',
                        '"config flux" OR parse-config', '"x1 flux"']))
def test_the_check_on_a_text_with_unicode_separators_agrees_with_the_index_tokens(pieces: list[str],
                                                                                  query: str) -> None:
    from agentlog.search.engine_query import engine_query

    text = "".join(pieces)
    _query, _ranked, check = engine_query(parse_query(query))
    assert check is not None
    assert check(text) == check.by_tokens(text)


def test_every_character_of_the_separating_categories_separates_tokens() -> None:
    """What lets :class:`Checker` treat such a text as ASCII: the tokenizer splits on every
    character of these categories, and lower case makes none of them an ASCII letter or digit."""
    import sys
    import unicodedata

    from agentlog.search.engine_query import SEPARATING

    an = index.analyzer()
    chars = [chr(c) for c in range(0x80, sys.maxunicode + 1) if unicodedata.category(chr(c)) in SEPARATING]
    assert len(chars) > 1000
    for c in chars:
        assert an.analyze(f"ab{c}cd") == ["ab", "cd"], hex(ord(c))
        assert not re.search("[a-z0-9]", c.lower()), hex(ord(c))


def test_parts() -> None:
    assert parts("ParseConfig") == ["parse", "config"]
    assert parts("parse_config") == ["parse", "config"]
    assert parts("HTTPServerError") == ["http", "server", "error"]
    assert parts("src/app.rs") == ["src", "app", "rs"]


def test_an_index_behind_a_compacted_and_vacuumed_store_catches_up_from_its_snapshot(tmp_path: Path) -> None:
    """Files a commit added may be compacted into others and deleted before the index reads them
    (the daemon compacts hourly; a store indexed for the first time): the index reads the snapshot."""
    from agentlog.store.compact import compact

    root = str(tmp_path / "home")
    _tool(root, "s0", 1, "make alpha0", "built alpha0")
    ingest(root)
    index.catch_up(root)
    for i in range(1, 4):
        _tool(root, f"s{i}", 1, f"make alpha{i}", f"built alpha{i}")
        ingest(root)  # three commits the index has not read ...
    report = compact(root, grace_hours=0)  # ... whose files are rewritten and deleted
    assert report.files_vacuumed > 0
    caught = index.catch_up(root)
    assert caught.get("rebuilt") and index.check(root)["ok"]
    assert len(search(root, "alpha0 OR alpha1 OR alpha2 OR alpha3", limit=50).hits) == 8
    # never indexed: built from the snapshot, not by replaying every commit
    index.remove(root)
    assert index.catch_up(root).get("rebuilt")
    assert len(search(root, "alpha0 OR alpha1 OR alpha2 OR alpha3", limit=50).hits) == 8


def test_an_index_of_an_older_schema_is_rebuilt(tmp_path: Path) -> None:
    """An index written by a version with other fields (here: the schema before event ids and
    times stopped being indexed terms) is not read; the next catch-up rebuilds it."""
    import tantivy

    root = str(tmp_path / "home")
    _tool(root, "s0", 1, "make oldschema", "built oldschema")
    ingest(root)
    assert index.open_index(root, create=False) is None and not os.path.exists(index.index_path(root))
    index.catch_up(root)
    assert search(root, "oldschema").hits
    shutil.rmtree(index.index_path(root))
    b = tantivy.SchemaBuilder()
    b.add_text_field("event_id", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("t", stored=True, indexed=True, fast=True)
    os.makedirs(index.index_path(root))
    old = tantivy.Index(b.build(), path=index.index_path(root))
    writer = old.writer(15_000_000, 1)
    writer.add_document(tantivy.Document(event_id=["x"], t=[1]))
    writer.commit()
    writer.wait_merging_threads()
    assert index.open_index(root, create=False) is None  # a reader does not use it
    assert os.path.exists(os.path.join(index.index_path(root), "meta.json"))  # nor removes it
    assert not search(root, "oldschema", catch=False).hits
    assert index.catch_up(root).get("rebuilt") and index.check(root)["ok"]
    assert [h.event_id for h in search(root, "oldschema").hits]


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """What each call of ``module.name`` returns, from now on, in the list returned."""
    seen: list[Any] = []
    real = getattr(module, name)

    def spy(*a: Any, **k: Any) -> Any:
        seen.append(real(*a, **k))
        return seen[-1]

    monkeypatch.setattr(module, name, spy)
    return seen


def test_hits_are_placed_from_their_sessions_parts_as_the_views_place_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading only the projection files of the hits' sessions places every hit (session, turn,
    attempt, outcome, what superseded it) exactly as the views do."""
    from agentlog.projection import persist
    from agentlog.projection.persist import refresh

    if not FIXTURES.is_dir():
        pytest.skip(missing(FIXTURES))
    root = str(tmp_path / "home")
    import_paths(root, ["claude-code"], [str(FIXTURES)])
    for i in range(3):  # hook sessions with failures, and a later refresh: a second session part
        _tool(root, f"p{i}", 1, f"pytest tests/test_place{i}.py", f"FAILED test_place{i} placeholder")
        ingest(root)
        refresh(root)
    queries = ["placeholder", "the", "error OR failed", "tool:Bash", "kind:prompt_submitted"]
    read = _spy(monkeypatch, persist, "session_files")
    fast = {q: [dict(h.__dict__) for h in search(root, q, limit=60).hits] for q in queries}
    assert read and all(r is not None for r in read)  # every search placed its hits from the parts
    assert any(h["attempt_id"] for hs in fast.values() for h in hs)
    assert any(h["turn_id"] and not h["attempt_id"] for hs in fast.values() for h in hs)
    monkeypatch.setattr(persist, "session_files", lambda *a, **k: None)  # the views, as before
    slow = {q: [dict(h.__dict__) for h in search(root, q, limit=60).hits] for q in queries}
    for q in queries:
        for a, b in zip(fast[q], slow[q]):
            a.pop("seconds", None), b.pop("seconds", None)
        assert fast[q] == slow[q], q


def test_place_sidecars_follow_the_projection_and_answer_by_event_id(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Catching up makes one sidecar per session part and overlay file; a projection that moves on
    gets new ones (the old removed); a search finds its hits' places in them, one small lookup per
    part, and a sidecar lost meanwhile is made again."""
    from agentlog.projection.persist import refresh
    from agentlog.search import places

    root = str(tmp_path / "home")
    _tool(root, "q0", 1, "pytest tests/test_side0.py", "FAILED test_side0 sidecarword")
    ingest(root)
    refresh(root)
    index.catch_up(root)
    before = set(os.listdir(places.places_dir(root)))
    assert before and all(n.endswith(".arrow") for n in before)
    assert all(os.stat(os.path.join(places.places_dir(root), n)).st_mode & 0o077 == 0 for n in before)
    _tool(root, "q1", 1, "pytest tests/test_side1.py", "FAILED test_side1 sidecarword")
    ingest(root)
    refresh(root, full=True)
    index.catch_up(root)
    after = set(os.listdir(places.places_dir(root)))
    assert after and after != before  # the old parts' sidecars removed, the new ones made
    stale = os.path.join(places.places_dir(root), "tool_calls-g1s00-0123456789abcdef.arrow")  # the earlier layout
    open(stale, "wb").close()
    index.catch_up(root)
    assert not os.path.exists(stale) and all(f"-{places.LAYOUT}-" in n for n in os.listdir(places.places_dir(root)))
    looked = _spy(monkeypatch, places, "lookup")
    hits = search(root, "sidecarword", limit=10).hits
    assert {h.session_id for h in hits} and all(h.turn_id and h.attempt_id and h.attempt_outcome for h in hits)
    assert looked and all(rows for rows in looked)
    places.remove(root)  # lost: a search makes what it needs again
    again = search(root, "sidecarword", limit=10).hits
    assert [(h.event_id, h.turn_id, h.attempt_id, h.attempt_outcome) for h in again] == \
        [(h.event_id, h.turn_id, h.attempt_id, h.attempt_outcome) for h in hits]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "ab", "b0", "c", "cc", "d"]), st.sampled_from(["x", "y", None])),
                min_size=1, max_size=40),
       st.lists(st.sampled_from(["a", "b", "ab", "b0", "c", "cc", "d", "e", ""]), max_size=6))
def test_a_sidecar_lookup_finds_what_a_scan_of_its_part_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            rows: list[tuple[str, str | None]], keys: list[str]) -> None:
    """Packed rows, small batches (a key's rows across two), bisection in a batch = every row of
    the part whose key is looked up."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentlog.search import places

    monkeypatch.setattr(places, "GROUP_ROWS", 3)
    root = str(tmp_path / uuid.uuid4().hex)
    os.makedirs(root)
    part = os.path.join(root, "turns_base-p.parquet")
    pq.write_table(pa.table({"prompt_event_id": [k for k, _ in rows], "session_id": ["s"] * len(rows),
                             "turn_id": [t for _, t in rows]}), part)
    got = places.lookup(root, ((part, "turns_base"),), keys)
    want = [{"key": k, "session_id": "s", "turn_id": t} for k, t in rows if k in set(keys)]
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_a_hook_s_text_becomes_searchable_while_the_daemon_runs(tmp_path: Path) -> None:
    """With the daemon running, a prompt's new word is found by a search that does no catch-up of
    its own (the daemon ingested and indexed it). No time asserted but a generous timeout; the
    bench reports the seconds."""
    from agentlog.bench.search_steps import hook_to_hit

    out = hook_to_hit(str(tmp_path / "home"), 2, timeout=60.0)
    assert len(out) == 2 and all(o["searchable_secs"] is not None for o in out), out


def test_a_purge_in_a_large_segment_rebuilds_the_index_without_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """When the segments holding the purged events hold more than REWRITE_MAX events, the index is
    rebuilt without them instead (as before): the term is gone, the rest still found."""
    from agentlog.log.purge import Selector
    from agentlog.operations.purge import purge

    root = str(tmp_path / "home")
    _tool(root, "gone", 1, "echo canarybigseg", "canarybigseg printed")
    _tool(root, "kept", 1, "echo keptbigseg", "keptbigseg printed")
    ingest(root)
    assert search(root, "canarybigseg").hits
    monkeypatch.setattr(index, "REWRITE_MAX", 1)
    purge(root, Selector(session="gone"))
    assert index._LAST_FORGET["rebuilt"] is True
    idx = index.open_index(root, create=False)
    assert idx is not None
    idx.reload()
    assert not list(idx.searcher().terms_with_prefix("body", "canarybigseg"))
    assert not search(root, "canarybigseg").hits and search(root, "keptbigseg").hits
    assert index.check(root)["ok"]


def test_a_path_glob_too_complex_for_the_index_is_a_usage_error(tmp_path: Path) -> None:
    """Issue 27, finding 20: the CLI says so in one line (exit 2), the MCP tool answers an error."""
    import subprocess
    import sys

    from agentlog.mcp import tools
    from agentlog.mcp.tools import ToolError

    from import_support import record_prompt

    record_prompt(str(tmp_path / "home"), "s-glob", "look at src/app.py")
    env = {**os.environ, "AGENTLOG_HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-m", "agentlog", "search", "path:" + "*a" * 500], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "too complex" in r.stderr
    try:
        text, _ = tools.search(str(tmp_path / "home"), query="path:" + "*a" * 500)
    except ToolError as e:
        assert "too complex" in str(e)
    else:
        assert "too complex" in text


def test_a_snippet_says_each_string_once_and_shows_the_match_piped_whole(tmp_path: Path) -> None:
    """A permission request carries its command twice (tool input and suggestions): the snippet
    says it once and reaches the match; piped, a hit's lines are whole (never folded at 80
    columns) and its event id is the ``ev_`` form `show` prints."""
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(tmp_path / "home")
    command = "cd /srv/very/long/path/to/a/project/checkout/somewhere && ./run-the-whole-suite --verbose --shard 3"
    _hook(root, {"session_id": "s-perm", "cwd": "/tmp/search-project", "hook_event_name": "PermissionRequest",
                 "tool_name": "Bash", "tool_input": {"command": command, "description": "Run the suite"},
                 "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": command}],
                                             "behavior": "allow", "destination": "localSettings"}]})
    ingest(root)
    (hit,) = search(root, "shard").hits
    assert hit.snippet.count("run-the-whole-suite") == 1, hit.snippet
    r = CliRunner().invoke(cli, ["search", "shard"], env={"AGENTLOG_HOME": root})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert any(line.strip().endswith(f"ev_{hit.event_id}") and hit.session_id in line for line in lines)
    assert any("run-the-whole-suite --verbose --shard 3" in line for line in lines)


def test_a_memory_hit_belongs_to_no_session(tmp_path: Path) -> None:
    """agentlog's own events (a memory) are hits without a session id that names nothing."""
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(tmp_path / "home")
    r = CliRunner().invoke(cli, ["memory", "add", "fact", "The flux capacitor needs 1.21 gigawatts"],
                           env={"AGENTLOG_HOME": root})
    assert r.exit_code == 0, r.output
    ingest(root)
    hits = search(root, "capacitor").hits
    assert hits and all(h.session_id is None for h in hits if h.provider == "agentlog")
