"""Semantic and hybrid candidates for :mod:`.service`: the nearest vectors (:mod:`.semantic`),
kept only where the text index's filters let them (the same filters as a lexical search: kind,
tool, project, session, machine, path, time, excluded words), and their blend with the lexical
ranking by reciprocal rank fusion.

A candidate is a tantivy address of the same searcher as the lexical ones, so the rest of a
search — the outcome filter, the hits' place, their snippets — is the lexical one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from agentlog.search.text import FILTERS

MODES: Final = ("lexical", "semantic", "hybrid")
RRF_K: Final = 60
"""Reciprocal rank fusion's constant: a candidate scores Σ weight / (RRF_K + rank)."""
LEXICAL_WEIGHT: Final = 1.0
SEMANTIC_WEIGHT: Final = 2.0
"""Chosen on two thirds of the relevance set (scripts/calibrate_hybrid.py; docs/search.md): 1:2
ranks as 1:3 and a little better than 1:1 or 2:1 (nDCG@10), a score blend no better."""
POOL: Final = 100
"""Candidates each side brings to a blend, at least (more for deep pages)."""
SEMANTIC_POOL: Final = 200
"""Nearest vectors looked up first; with filters that keep too few, four times more each round."""
FLOOR: float = 0.21
"""A query's semantic candidates are the vectors at least this similar to it (cosine), or more in a
large index (:func:`floor`): below it an event is not taken to be about the query. Queries nothing
in the relevance corpus is about reach 0.13–0.198 (:data:`.relevance.NONSENSE`); relevant hits
0.2–0.6 (docs/search.md)."""


def floor(root: str) -> float:
    """The similarity a candidate needs in this index: :data:`FLOOR`, raised to what unrelated
    queries find in it (:mod:`.floor`); :data:`FLOOR` alone when it is negative (no floor)."""
    from agentlog.search import semantic

    return FLOOR if FLOOR < 0 else semantic.floor(root, FLOOR)

Candidates = Callable[[int, int], list[tuple[float, Any]]]


def semantic_text(text: str) -> str:
    """What of a query is embedded: its words and phrases, without filters, exclusions and ``OR``."""
    words: list[str] = []
    for raw in text.split():
        if raw == "OR" or (raw.startswith("-") and len(raw) > 1):
            continue
        if ":" in raw and raw.split(":", 1)[0].lower() in FILTERS and raw.split(":", 1)[1]:
            continue
        words.append(raw.strip('"').rstrip("*"))
    return " ".join(w for w in words if w)


COMMON: Final = 0.05
"""In hybrid mode's lexical side, a word more than this share of the events hold (and more than
:data:`COMMON_MIN` of them) is left out (:func:`some_words`): it says little of what a query is
about, and matching it costs the most."""
COMMON_MIN: Final = 20
"""In a small index a word's share says little: up to this many holders, a word is kept."""
RAREST: Final = 8
"""Of a long query, the rarest words :func:`some_words` pairs."""


def some_words(q: Any, searcher: Any, build: Callable[[Any], Any]) -> Any:
    """Hybrid mode's lexical side beside the events holding every word: those holding **two** of the
    query's words or more (any two of its :data:`RAREST` rarest, less the :data:`COMMON` ones),
    ranked by BM25 — a tantivy query (``build`` makes one of a parsed query: its filters and
    exclusions kept), or None when fewer than two such words are left. Lexical mode keeps every
    word required; a question's words are seldom all in one event, and a blend with meaning
    gains from the events that hold some of them. Two, not one: a single shared word (``for``,
    ``the``) says too little, and a query about nothing here must still find nothing."""
    import itertools

    import tantivy

    from agentlog.search.index import fold_term
    from agentlog.search.text import Query

    if len(q.clauses) < 2:
        return None
    cap = max(COMMON * searcher.num_docs, COMMON_MIN)
    held: dict[Any, int] = {}
    for alternatives in q.clauses:
        for t in map(fold_term, alternatives):
            if len(t.tokens) == 1 and not t.phrase and not t.prefix:
                df = searcher.doc_freq("body", t.tokens[0])
                if 0 < df <= cap:
                    held[t] = df
    if len(held) < 2:
        return None
    rare = sorted(held, key=lambda t: (held[t], t.tokens))[:RAREST]
    pairs = [build(Query(clauses=[[a], [b]], excluded=list(q.excluded), filters=dict(q.filters)))
             for a, b in itertools.combinations(rare, 2)]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, p) for p in pairs])


def exact(q: Any) -> bool:
    """Whether a parsed query asks for exact text (a quoted phrase, a ``prefix*``): hybrid mode then
    ranks by words alone."""
    return any(t.phrase or t.prefix for alts in q.clauses for t in alts)


def semantic_candidates(root: str, searcher: Any, vector: Any, allowed: Any,
                        exclude: frozenset[tuple[str, int]] = frozenset(), floor: float | None = None) -> Candidates:
    """The events nearest ``vector`` that ``allowed`` (a tantivy query) matches, best first, at
    least ``floor`` similar (cosine) when it is given."""
    import tantivy

    from agentlog.search import semantic
    from agentlog.search.index import _key, schema

    def candidates(n: int, skip: int) -> list[tuple[float, Any]]:
        want = n + skip
        pool = max(SEMANTIC_POOL, 4 * want)
        while True:
            every, last = semantic.nearest(root, vector, pool, exclude)
            near = [(s, k) for s, k in every if floor is None or s >= floor]
            # none further qualifies: the index holds no more, or the pool's last is below the floor
            done = last is None or (floor is not None and last < floor)
            if not near:
                if done:
                    return []
                pool *= 4
                continue
            score = {k: s for s, k in near}
            q = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, allowed),
                (tantivy.Occur.Must, tantivy.Query.term_set_query(schema(), "key", [_key(*k) for k in score]))])
            rank = {k: i for i, (_, k) in enumerate(near)}  # best first; a summary's members in their order
            found: list[tuple[int, float, Any]] = []
            for _, addr in searcher.search(q, len(score), count=False).hits:
                d = searcher.doc(addr)
                k = (str(d.get_first("log")), int(d.get_first("seq") or 0))
                if k in score:
                    found.append((rank[k], score[k], addr))
            found.sort(key=lambda x: x[0])
            if len(found) >= want or done:
                return [(s, addr) for _, s, addr in found[skip:want]]
            pool *= 4

    return candidates


def fused(lexical: Candidates, semantic: Candidates) -> Candidates:
    """Reciprocal rank fusion of both rankings (a candidate both hold adds both terms)."""

    def candidates(n: int, skip: int) -> list[tuple[float, Any]]:
        pool = max(POOL, 2 * (n + skip))
        scores: dict[tuple[int, int], float] = {}
        addrs: dict[tuple[int, int], Any] = {}
        for weight, ranked in ((LEXICAL_WEIGHT, lexical(pool, 0)), (SEMANTIC_WEIGHT, semantic(pool, 0))):
            for rank, (_, addr) in enumerate(ranked, 1):
                key = (addr.segment_ord, addr.doc)
                addrs[key] = addr
                scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank)
        ordered = sorted(scores, key=lambda k: -scores[k])
        return [(scores[k], addrs[k]) for k in ordered[skip:skip + n]]

    return candidates


def similar_keys(root: str, eng: Any, ident: str) -> list[tuple[str, int]]:
    """The ``(log, seq)`` of the events an id names: an event, or an attempt's (its tool calls'
    and its failing event)."""
    from agentlog.query.views import resolve_id

    ref = resolve_id(eng, ident, ["event", "attempt"])
    if ref.kind == "event":
        ids = [ref.id]
    else:
        res = eng.run("SELECT unnest([start_event_id, end_event_id]) FROM tool_calls WHERE attempt_id = ? "
                      "UNION SELECT failing_event_id FROM attempts WHERE attempt_id = ?", [ref.id, ref.id])
        ids = [r[0] for r in res.rows if r[0]]
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    res = eng.run(f"SELECT log_provider, log_key, seq FROM events WHERE event_id IN ({marks})", ids)
    return [(f"{p}/{k}", int(s)) for p, k, s in res.rows]


def similar_vector(root: str, keys: list[tuple[str, int]]) -> Any:
    """The mean of these events' vectors, at unit length (None: none of them has one)."""
    import numpy as np

    from agentlog.search import semantic

    vectors = [v for v in (semantic.vector_of(root, k) for k in keys) if v is not None]
    if not vectors:
        return None
    mean = np.mean(vectors, axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else None


__all__ = ["COMMON", "FLOOR", "MODES", "exact", "floor", "some_words", "fused", "semantic_candidates", "semantic_text",
           "similar_keys", "similar_vector"]
