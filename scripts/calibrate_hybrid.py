"""Choose hybrid search's blend and similarity floor on the relevance set, with a held-out third.

    PYTHONPATH=src python scripts/calibrate_hybrid.py WORK_DIR

Builds the relevance corpus (:func:`agentlog.search.relevance.build`) under WORK_DIR (kept: a
second run reuses it), ranks every query lexically and semantically once (100 each, the
semantic side with no floor), then scores each blend from those two lists: reciprocal rank
fusion with weights and k, and a score blend (BM25 over the query's best BM25, plus cosine).
Prints recall@5 and nDCG@10 on the tuning queries (two thirds) and the held-out third
(:func:`agentlog.search.relevance.held_out`), the cosines of relevant hits and of the best hit
of queries nothing is about (:data:`agentlog.search.relevance.NONSENSE`), per floor. The numbers
are in docs/search.md.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable

from agentlog.operations.fixtures import shared_dir
from agentlog.search import hybrid
from agentlog.search import relevance as rel
from agentlog.search.service import search

Ranked = list[tuple[str, float]]


def lists(root: str, query: str) -> tuple[Ranked, Ranked]:
    """The query's lexical and semantic rankings (BM25, cosine), and its cosines standardised
    over every vector of the index (in the semantic list's place: z-scores)."""
    lex = [(h.event_id, h.score) for h in search(root, query, limit=100, mode="lexical", catch=False).hits]
    sem = [(h.event_id, h.score) for h in search(root, query, limit=100, mode="semantic", catch=False).hits]
    return lex, sem


def spread(root: str, query: str) -> tuple[float, float]:
    """Mean and standard deviation of the query's cosine with every vector."""
    import numpy as np

    from agentlog.search import semantic

    vectors = semantic.loaded(root).vectors
    scores = vectors.astype(np.float32) @ (semantic.embed([hybrid.semantic_text(query)])[0] / 127.0)
    return float(scores.mean()), float(scores.std())


def metrics(order: list[str], relevant: set[str]) -> tuple[float, float]:
    got = [e in relevant for e in order[:10]]
    recall = sum(got[:5]) / min(len(relevant), 5)
    dcg = sum(1 / math.log2(i + 2) for i, g in enumerate(got) if g)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return recall, dcg / ideal


def rrf(k: float, wl: float, ws: float, floor: float) -> Callable[[Ranked, Ranked], list[str]]:
    def order(lex: Ranked, sem: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        for w, ranked in ((wl, lex), (ws, [x for x in sem if x[1] >= floor])):
            for rank, (e, _) in enumerate(ranked, 1):
                scores[e] = scores.get(e, 0.0) + w / (k + rank)
        return sorted(scores, key=lambda e: -scores[e])
    return order


def blend(alpha: float, floor: float) -> Callable[[Ranked, Ranked], list[str]]:
    def order(lex: Ranked, sem: Ranked) -> list[str]:
        top = max((s for _, s in lex), default=1.0) or 1.0
        cos = {e: s for e, s in sem if s >= floor}
        scores = {e: alpha * s / top for e, s in lex}
        for e, c in cos.items():
            scores[e] = scores.get(e, 0.0) + (1 - alpha) * c
        return sorted(scores, key=lambda e: -scores[e])
    return order


def main(work: str) -> None:
    root = os.path.join(work, "home")
    if not os.path.isdir(root):
        shared = shared_dir()
        rel.build(root, work, str(shared / "fixtures" / "claude-code") if shared else None)
    setattr(hybrid, "FLOOR", -1.0)  # the semantic lists unfloored: each floor is applied below
    texts = rel.event_texts(root)
    data = []
    for i, case in enumerate(rel.cases()):
        relevant = {e for e, t in texts.items() if any(s in t for s in case.targets)}
        lex, sem = lists(root, case.query)
        mean, std = spread(root, case.query)
        zsem = [(e, (c - mean) / std) for e, c in sem]
        data.append((rel.held_out(i), case.kind, relevant, lex, sem, zsem))
    print("relevant hits' cosine (semantic top 10):")
    for col, what in ((4, "cosine"), (5, "z")):
        values = sorted(s for d in data if not d[0] for e, s in d[col][:10] if e in d[2])
        print(f"  {what}: " + ", ".join(f"q{q}: {values[int(q * len(values))]:.3f}" for q in (0.05, 0.1, 0.25, 0.5)))
    print("best cosine (z) of each query nothing is about:")
    for query in rel.NONSENSE:
        sem = lists(root, query)[1]
        mean, std = spread(root, query)
        print(f"  {query!r}: {sem[0][1]:.3f} ({(sem[0][1] - mean) / std:.2f})" if sem else f"  {query!r}: none")
    variants: dict[str, Callable[..., list[str]]] = {
        "lexical": lambda lex, sem, zs: [e for e, _ in lex],
        "semantic": lambda lex, sem, zs: [e for e, _ in sem],
    }
    for z in (2.0, 2.5, 3.0, 3.5, 4.0):
        variants[f"semantic z>={z}"] = lambda lex, sem, zs, f=z: [e for e, s in zs if s >= f]
        for wl, ws in ((1, 1), (1, 2)):
            variants[f"rrf k=60 {wl}:{ws} z>={z}"] = lambda lex, sem, zs, f=z, a=wl, b=ws: rrf(60, a, b, f)(lex, zs)
    for floor in (-1.0, 0.18, 0.2, 0.21, 0.22, 0.25, 0.3):
        variants[f"semantic floor {floor}"] = lambda lex, sem, zs, f=floor: [e for e, s in sem if s >= f]
        for k in (10, 60):
            for wl, ws in ((1, 1), (1, 2), (1, 3), (2, 1)):
                variants[f"rrf k={k} {wl}:{ws} floor {floor}"] = \
                    lambda lex, sem, zs, o=rrf(k, wl, ws, floor): o(lex, sem)
        for alpha in (0.2, 0.3, 0.5):
            variants[f"blend a={alpha} floor {floor}"] = lambda lex, sem, zs, o=blend(alpha, floor): o(lex, sem)
    print(f"{'variant':<34} {'tune r@5':>8} {'nDCG':>6} {'held r@5':>8} {'nDCG':>6} {'kw r@5':>6}")
    rows = []
    for name, order in variants.items():
        part: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        keyword = []
        for held, kind, relevant, lex, sem, zs in data:
            m = metrics(order(lex, sem, zs), relevant)
            part[held].append(m)
            if kind == "keyword":
                keyword.append(m[0])
        mean = {h: (sum(r for r, _ in ms) / len(ms), sum(n for _, n in ms) / len(ms)) for h, ms in part.items()}
        rows.append((name, *mean[False], *mean[True], sum(keyword) / len(keyword)))
    for row in sorted(rows, key=lambda r: -(r[1] + r[2])):
        print(f"{row[0]:<34} {row[1]:8.3f} {row[2]:6.3f} {row[3]:8.3f} {row[4]:6.3f} {row[5]:6.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
