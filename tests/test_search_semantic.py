"""Semantic and hybrid search: quality on the relevance set, filters in every mode, --similar,
purge and metadata-only leave no vector, no network, a clear message without the extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.search import relevance as rel
from agentlog.importers.run import import_paths
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.search import semantic
from agentlog.search.index import analyzer
from agentlog.search.service import search
from agentlog.store.ingest import ingest

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures" / "claude-code"
pytestmark = pytest.mark.skipif(not semantic.available(), reason="the 'semantic' extra is not installed")
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not FIXTURES.is_dir():
        pytest.skip(missing(FIXTURES))
    base = tmp_path_factory.mktemp("semantic")
    root = str(base / "home")
    generated = rel.write_sessions(str(base / "generated"))
    import_paths(root, ["claude-code"], [str(FIXTURES), *generated])
    ingest(root)
    search(root, "warm", mode="lexical")  # the store, projection and both indexes caught up
    return root


STOP = frozenset("a an and the to of in on at for by it its is was be when did we what why how with from after "
                 "so that this than too their them they our us one all each".split())


def _words(text: str) -> set[str]:
    return {t for t in analyzer().analyze(text) if t not in STOP and len(t) > 2}


def test_the_relevance_set_is_big_enough_and_its_paraphrases_share_no_word() -> None:
    cases = rel.cases()
    assert len(cases) >= 40
    paraphrases = [c for c in cases if c.kind == "paraphrase"]
    assert len(paraphrases) >= len(cases) * 0.3
    for c in paraphrases:  # no distinctive word of a paraphrase is in any of its targets
        shared = {w for t in c.targets for w in _words(c.query) & _words(t)}
        assert not shared, (c.query, shared)


def test_hybrid_beats_lexical_and_keyword_queries_do_not_get_worse(corpus: str) -> None:
    lexical, hybrid = rel.measure(corpus, "lexical"), rel.measure(corpus, "hybrid")
    assert hybrid["recall@5"] > lexical["recall@5"] and hybrid["ndcg@10"] > lexical["ndcg@10"], (lexical, hybrid)
    assert hybrid["recall@5"] >= 0.5, hybrid
    lex_kw, hyb_kw = rel.measure(corpus, "lexical", which="keyword"), rel.measure(corpus, "hybrid", which="keyword")
    assert hyb_kw["recall@5"] >= lex_kw["recall@5"] and hyb_kw["ndcg@10"] >= lex_kw["ndcg@10"], (lex_kw, hyb_kw)
    para = rel.measure(corpus, "semantic", which="paraphrase")
    assert rel.measure(corpus, "lexical", which="paraphrase")["recall@5"] == 0.0 < para["recall@5"]


def test_filters_and_outcome_apply_in_every_mode(corpus: str) -> None:
    for mode in ("lexical", "semantic", "hybrid"):
        hits = search(corpus, "database schema upgrades kind:prompt_submitted", mode=mode, catch=False).hits
        assert all(h.kind == "prompt_submitted" for h in hits), mode
        failed = search(corpus, "python dependency missing", mode=mode, outcome="failed", catch=False).hits
        assert all(h.attempt_outcome == "failed" for h in failed), mode
    assert search(corpus, "compilation broke because a python dependency package was not installed",
                  mode="semantic", outcome="failed", catch=False).hits


def test_similar_finds_failures_like_a_given_one(corpus: str) -> None:
    first = search(corpus, "ModuleNotFoundError yaml kind:tool_call_failed", mode="lexical", catch=False).hits
    assert first
    hits = search(corpus, "", similar=first[0].event_id, limit=5, catch=False).hits
    assert hits and first[0].event_id not in {h.event_id for h in hits}
    texts = rel.event_texts(corpus)
    assert any("yaml" in texts[h.event_id].lower() or "module" in texts[h.event_id].lower() for h in hits[:3])
    only = search(corpus, "kind:prompt_submitted", similar=first[0].event_id, limit=5, catch=False).hits
    assert only and all(h.kind == "prompt_submitted" for h in only)
    from agentlog.mcp import tools  # the MCP search tool serves the same search

    _, data = tools.search(corpus, query="", similar=first[0].event_id, max_rows=5)
    assert [h["event_id"] for h in data["hits"]] == [h.event_id for h in hits]


def _hook(root: str, payload: dict[str, object], env: dict[str, str] | None = None) -> None:
    from agentlog.capture.command import hook_argv

    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                       env={**os.environ, "AGENTLOG_HOME": root, **(env or {})})
    assert r.returncode == 0, r.stderr


def _prompt(root: str, sid: str, text: str, env: dict[str, str] | None = None) -> None:
    _hook(root, {"session_id": sid, "cwd": "/tmp/semantic-project", "hook_event_name": "UserPromptSubmit",
                 "prompt": text}, env)


def _keys_on_disk(root: str) -> set[tuple[str, int]]:
    keys: set[tuple[str, int]] = set()
    for p in Path(semantic.path(root)).glob("*.keys.json"):
        keys |= {(str(k[0]), int(k[1])) for k in json.loads(p.read_text())}
    return keys


def test_purge_and_metadata_only_leave_no_vector(tmp_path: Path) -> None:
    from agentlog.log.purge import Selector
    from agentlog.operations.purge import purge

    root = str(tmp_path / "home")
    _prompt(root, "gone", "the penguin colony migrates across the frozen antarctic ice every winter")
    _prompt(root, "kept", "refactor the invoice rendering to use templates")
    _prompt(root, "quiet", "a secret plan about volcanoes erupting lava", {"AGENTLOG_CAPTURE_MODE": "metadata_only"})
    ingest(root)
    hits = search(root, "birds walking over snow in the south pole", mode="semantic").hits
    assert hits and "penguin" in hits[0].snippet
    vectors = semantic.stats(root)["vectors"]
    assert vectors == 2  # the metadata-only prompt has no text: no vector
    assert not any("volcano" in h.snippet for h in search(root, "volcanoes lava", mode="semantic").hits)
    before = _keys_on_disk(root)
    purge(root, Selector(session="gone"))
    after = _keys_on_disk(root)  # before any search: the segment holding it was rewritten
    assert len(after) == len(before) - 1
    assert semantic.stats(root)["vectors"] == 1
    hits = search(root, "birds walking over snow in the south pole", mode="semantic").hits
    assert not any("penguin" in h.snippet for h in hits)
    assert any("invoice" in h.snippet for h in search(root, "billing documents layout", mode="semantic").hits)
    files = [p for p in Path(semantic.path(root)).iterdir() if p.is_file()]
    assert files and all(p.stat().st_mode & 0o077 == 0 for p in files)


def test_incremental_equals_rebuilt(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _prompt(root, "s1", "teach the parser to read yaml anchors")
    ingest(root)
    search(root, "warm", mode="semantic")
    _prompt(root, "s2", "speed up the docker image build with caching")
    ingest(root)
    search(root, "warm", mode="semantic")
    incremental = _keys_on_disk(root)
    assert len(incremental) == 2
    semantic.rebuild(root)
    assert _keys_on_disk(root) == incremental


def _run(args: list[str], root: str, *, without_extra: bool = False, offline: bool = False) -> subprocess.CompletedProcess[str]:
    lines = ["import sys, socket"]
    if without_extra:
        lines.append("sys.modules['wordllama'] = None")  # as if the extra were not installed
    if offline:  # any connection attempt fails: nothing may be fetched
        lines.append("def _refuse(*a, **k): raise OSError('network blocked by the test')")
        lines.append("socket.socket.connect = _refuse; socket.create_connection = _refuse")
    lines += ["from agentlog.__main__ import main", f"sys.argv = ['agentlog', *{args!r}]", "main()"]
    env = {**os.environ, "AGENTLOG_HOME": root, "PYTHONPATH": SRC}
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=120,
                          env=env)


def test_without_the_extra_search_is_lexical_and_says_how_to_enable(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _prompt(root, "s1", "rename the config loader")
    ingest(root)
    r = _run(["search", "config", "--json"], root, without_extra=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)
    r = _run(["search", "nothingmatchesthis"], root, without_extra=True)
    assert r.returncode == 0 and "agentlog[semantic]" in r.stderr
    r = _run(["search", "config", "--mode", "semantic"], root, without_extra=True)
    assert r.returncode == 2 and "agentlog[semantic]" in r.stderr and "Traceback" not in r.stderr


def test_semantic_search_runs_with_the_network_blocked(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    _prompt(root, "s1", "the penguin colony migrates across the frozen ice")
    ingest(root)
    r = _run(["search", "birds on snow", "--mode", "hybrid", "--json"], root, offline=True)
    assert r.returncode == 0, r.stderr
    assert "penguin" in json.loads(r.stdout)[0]["snippet"]
