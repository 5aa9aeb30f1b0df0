"""Turn summaries in the semantic index (what a turn asked, what failed, how it ended), placed at
the events they sum up, following purge and retraction; the floor that rises with the store; and
hybrid mode's lexical side (any of the words)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentlog.search import floor, semantic, summaries
from agentlog.search.service import search
from agentlog.store.ingest import ingest

pytestmark = pytest.mark.skipif(not semantic.available(), reason="the 'semantic' extra is not installed")


def test_a_turn_is_its_prompt_failures_commits_and_last_message() -> None:
    rows = [(10, "p"), (11, "m"), (12, "f"), (13, "m"), (14, "c"), (15, "m"), (20, "p"), (21, "o"), (30, "p"),
            (31, "m")]
    assert summaries.members(rows[::-1]) == [[10, 12, 14, 15], [30, 31]]  # 20: one member, no summary
    many = [(1, "p"), *((s, "f") for s in range(2, 12)), (12, "m")]
    assert summaries.members(many) == [[1, 2, 3, 4, 9, 10, 11, 12]]  # the first and last three failures
    assert summaries.members([(3, "m"), (4, "f"), (5, "p")]) == [[3, 4]]  # before the first prompt: a turn too


def test_a_summary_hit_scores_its_members_in_order() -> None:
    log = "claude_code/abc"
    members = {(summaries.PREFIX + log, 5): [5, 7, 9]}
    found = [(0.6, (summaries.PREFIX + log, 5)), (0.7, (log, 9)), (0.3, ("other/x", 1))]
    assert summaries.expand(found, members) == [(0.7, (log, 9)), (0.6, (log, 5)), (0.6, (log, 7)),
                                                (0.3, ("other/x", 1))]
    assert summaries.expand(found, members, frozenset({(log, 7)})) == [(0.7, (log, 9)), (0.3, ("other/x", 1))]


def _hook(root: str, payload: dict[str, Any]) -> None:
    from agentlog.capture.command import hook_argv

    r = subprocess.run(hook_argv("claude-code"), input=json.dumps({"cwd": "/tmp/turns", **payload}).encode(),
                       capture_output=True, timeout=60, env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr


def _turn(root: str, sid: str, prompt: str, error: str, reply: str) -> None:
    _hook(root, {"session_id": sid, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    _hook(root, {"session_id": sid, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                 "tool_use_id": f"toolu_{sid}", "tool_input": {"command": "make test"}, "error": error})
    _hook(root, {"session_id": sid, "hook_event_name": "Stop", "last_assistant_message": reply})


def _on_disk(root: str) -> tuple[dict[tuple[str, int], list[int]], dict[tuple[str, int], Any]]:
    """The summaries' members, and every vector by key, as the segment files hold them."""
    import numpy as np

    members: dict[tuple[str, int], list[int]] = {}
    vectors: dict[tuple[str, int], Any] = {}
    for p in Path(semantic.path(root)).glob("*.keys.json"):
        matrix = np.load(str(p).removesuffix(".keys.json") + ".npy")
        for i, row in enumerate(json.loads(p.read_text())):
            key = (str(row[0]), int(row[1]))
            vectors[key] = matrix[i]
            if row[2:3] == [summaries.SUMMARY]:
                members[key] = row[3]
    return members, vectors


def _is_sum_of_members(key: tuple[str, int], members: list[int], vectors: dict[tuple[str, int], Any]) -> bool:
    import numpy as np

    total = np.sum([vectors[(summaries.log_of(key), s)].astype(np.float32) for s in members], axis=0)
    return bool(np.allclose(semantic.quantise(total / np.linalg.norm(total)), vectors[key], atol=1))


def test_turn_summaries_place_their_members_and_follow_retraction_and_purge(tmp_path: Path) -> None:
    from agentlog.log.purge import Selector
    from agentlog.operations.corrections import record_retraction
    from agentlog.operations.purge import purge

    root = str(tmp_path / "home")
    _turn(root, "gem", "Make the importer read Google's Gemini assistant logs from ~/.gemini/tmp",
          "FileNotFoundError: [Errno 2] No such file or directory: '/home/u/.gemini/tmp/chats'",
          "The Gemini importer now walks ~/.gemini/tmp/*/chats and parses each checkpoint JSON.")
    _turn(root, "k8s", "Kubernetes pods get OOMKilled during the nightly batch",
          "Last State: Terminated Reason: OOMKilled Exit Code: 137",
          "Raised the memory limit to 2Gi and made the batch process files in chunks of 10,000.")
    ingest(root)
    hits = search(root, "the cluster containers run out of RAM at night", mode="semantic", limit=3).hits
    assert {h.kind for h in hits} == {"prompt_submitted", "tool_call_failed", "turn_stopped"}  # the whole turn
    assert all(h.session_id == hits[0].session_id for h in hits)
    assert any("2Gi" in h.snippet for h in hits)  # the Stop hook's message is embedded
    assert semantic.stats(root)["vectors"] == 6 and semantic.stats(root)["summaries"] == 2
    incremental, vectors = _on_disk(root)
    assert sorted(len(m) for m in incremental.values()) == [3, 3]
    assert all(_is_sum_of_members(k, m, vectors) for k, m in incremental.items())
    semantic.rebuild(root)  # a rebuild makes the same summaries
    assert _on_disk(root)[0] == incremental

    failure = next(h for h in hits if h.kind == "tool_call_failed")
    record_retraction(root, target_type="event", target=failure.event_id, reason="mistaken_import")
    search(root, "warm", mode="semantic")  # catches up: the retraction is read
    members, vectors = _on_disk(root)
    k8s = next(k for k in members if k in incremental and len(members[k]) == 2)  # made again without it
    assert all(_is_sum_of_members(k, m, vectors) for k, m in members.items())
    assert (summaries.log_of(k8s), incremental[k8s][1]) not in vectors

    purge(root, Selector(session="gem"))  # the whole turn: no vector, no summary of it is left
    members, vectors = _on_disk(root)
    assert list(members) == [k8s] and len(vectors) == 3
    assert not any("Gemini" in h.snippet for h in search(root, "load conversations from the Bard successor",
                                                         mode="semantic").hits)


def test_the_floor_rises_with_the_store() -> None:
    import numpy as np

    words = ("parser config cache token build deploy module import schema index query session retry timeout "
             "socket thread worker queue migrate test lint format branch commit merge release docker image "
             "server client request response header route handler error panic null pointer leak memory disk "
             "upload download encrypt key secret login user account invoice report export csv json yaml").split()
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(words, size=8)) for _ in range(20_000)]
    vectors = semantic.quantise(semantic.embed(texts))
    queries = semantic.embed(list(floor.BACKGROUND))
    small, large = floor.background(vectors[:200], queries), floor.background(vectors, queries)
    assert floor.floor(large, 0.0) > floor.floor(small, 0.0)  # more vectors, a higher best for unrelated queries
    assert floor.floor(None, 0.21) == 0.21 and floor.floor(small, 0.99) == 0.99  # never below the minimum
    unrelated = semantic.embed([  # none of them is a background sentence
        "a picnic by the river with sandwiches and lemonade", "the knight rode his horse to the castle gate",
        "my aunt knits socks for the whole family", "sailing boats race around the island in july",
        "the volcano erupted and covered the village in ash", "a quiet afternoon reading poetry in the park",
        "penguins huddle together against the polar wind", "the baker sold out of croissants by nine",
        "children built a snowman in the front yard", "the opera singer hit the highest note",
        "we planted sunflowers along the fence", "a thunderstorm rolled over the wheat fields"])
    best = (vectors.astype(np.float32) / 127.0 @ unrelated.T).max(axis=0)
    # at 20,000 vectors a fixed 0.21 lets most of them find something; the store's floor, few
    assert (best >= 0.21).sum() >= 6 and (best >= floor.floor(large, 0.21)).sum() <= 3, (best, floor.floor(large, 0))
    related = semantic.embed(["the docker image build failed with a timeout error"])[0]
    assert float((vectors.astype(np.float32) / 127.0 @ related).max()) > floor.floor(large, 0.0)


def test_hybrid_ranks_events_holding_two_of_the_words(tmp_path: Path) -> None:
    from agentlog.search import hybrid
    from agentlog.search.engine_query import engine_query
    from agentlog.search.service import _searcher
    from agentlog.search.text import parse_query

    root = str(tmp_path / "home")
    for sid, text in (("a", "the invoice renderer crashes on empty line items"),
                      ("b", "rotate the signing keys of the vault every quarter"),
                      ("c", "the vault door of the bank was painted green")):
        _hook(root, {"session_id": sid, "hook_event_name": "UserPromptSubmit", "prompt": text})
    ingest(root)
    query = "rotate vault zebracanary"  # no event holds every word; one holds two
    assert search(root, query, mode="lexical").hits == []
    searcher = _searcher(root)
    loose = hybrid.some_words(parse_query(query), searcher, lambda q: engine_query(q)[0])
    found = [searcher.doc(a).get_first("seq") for _, a in searcher.search(loose, 10).hits]
    assert len(found) == 1  # "rotate" and "vault": b; c holds one of them only
    assert hybrid.some_words(parse_query("vault zebracanary"), searcher, lambda q: engine_query(q)[0]) is None
    hits = search(root, query, mode="hybrid").hits
    assert hits and "rotate" in hits[0].snippet
