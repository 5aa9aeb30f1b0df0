"""Memories found by meaning: with the ``semantic`` extra, a memory search's words are also
compared with each memory's text by the event search's embedder (:mod:`agentlog.search.semantic`).

A memory's relevance is then a blend of its BM25 (over the best BM25 of the query's matches) and
its cosine with the query: ``LEXICAL_WEIGHT × bm25 / best + SEMANTIC_WEIGHT × cosine``, a memory
holding none of the words counting by its cosine alone when that reaches :data:`FLOOR`. The
search language ranks by relevance × effective confidence, as before. A query holding a quoted
phrase or a ``prefix*`` asks for exact text: it is matched by words only, as is every query in
``lexical`` mode or without the extra. The vectors are computed from the read model's rows and
kept per process while a memory is unchanged (its id and version).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

MODES: Final = ("lexical", "semantic", "hybrid")
FLOOR: Final = 0.21
"""A memory holding none of the query's words is found by meaning when its cosine with the query
reaches this: event search's floor (:data:`agentlog.search.hybrid.FLOOR`), the same embedder."""
LEXICAL_WEIGHT: Final = 0.5
SEMANTIC_WEIGHT: Final = 0.5

_VECTORS: dict[tuple[str, str, int], Any] = {}
"""(data root, memory id, version) → its unit vector (float32)."""


def default_mode() -> str:
    from agentlog.search import semantic

    return "hybrid" if semantic.available() else "lexical"


def _cosines(root: str, con: sqlite3.Connection, words: str, rows: set[int] | None) -> dict[int, float]:
    """Per live memory's row (of ``rows``, or every one), its cosine with ``words``."""
    import json

    import numpy as np

    from agentlog.memory.text_index import text_of
    from agentlog.search import semantic

    found = con.execute("SELECT rowid, id, version, title, content, attributes, tags FROM memories "
                        "WHERE deleted = 0").fetchall()
    found = [r for r in found if rows is None or int(r[0]) in rows]
    if not found:
        return {}
    todo = [r for r in found if (root, r[1], int(r[2])) not in _VECTORS]
    if todo:
        vectors = semantic.embed([text_of(t, c or "", json.loads(a), json.loads(g)) for _, _, _, t, c, a, g in todo])
        for r, v in zip(todo, vectors):
            _VECTORS[(root, r[1], int(r[2]))] = v
    matrix = np.stack([_VECTORS[(root, r[1], int(r[2]))] for r in found])
    scores = matrix @ semantic.embed([words])[0]
    return {int(r[0]): float(s) for r, s in zip(found, scores)}


def blended(root: str, con: sqlite3.Connection, free: Any, text: str, lexical: dict[int, float] | None,
            mode: str, narrow: Sequence[tuple[str, str, bool]]) -> dict[int, float] | None:
    """Relevance per memory row for the free text ``text`` (parsed: ``free``) in ``mode``
    (``lexical``: the BM25 matches as they are); None when nothing can match."""
    from agentlog.memory import text_index
    from agentlog.search.hybrid import exact, semantic_text
    from agentlog.search.text import Query as TextQuery

    words = semantic_text(text) if free.clauses else ""
    if mode == "lexical" or not words or (mode == "hybrid" and exact(free)):
        return lexical
    allowed: set[int] | None = None
    if free.excluded:  # what holds an excluded word stays out
        every = text_index.matches(root, con, TextQuery(excluded=list(free.excluded)), narrow)
        allowed = set(every or {})
    cos = _cosines(root, con, words, allowed)
    if mode == "semantic":
        return {r: c for r, c in cos.items() if c >= FLOOR} or None
    lex = lexical or {}
    best = max(lex.values(), default=0.0) or 1.0
    out = {r: LEXICAL_WEIGHT * s / best + SEMANTIC_WEIGHT * max(cos.get(r, 0.0), 0.0) for r, s in lex.items()}
    for r, c in cos.items():
        if r not in out and c >= FLOOR:
            out[r] = SEMANTIC_WEIGHT * c
    return out or None


__all__ = ["FLOOR", "MODES", "blended", "default_mode"]
