"""The semantic index's scan at 100 k–400 k synthetic vectors: exact int8 scan against the
two-stage scan (sign-bit Hamming distance, then the best RERANK scored exactly).

    PYTHONPATH=src python scripts/bench_vectors.py [SIZES...]

Vectors: 256 dimensions, drawn around 2,000 random centres (texts about the same things are near
each other, as real chunks are), unit length, quantised to int8 as the index stores them.
Queries: 30 stored vectors with noise. Prints, per size: the time to compute the sign bits (the
two-stage scan's only build), p50/p95 per query of each scan (one untimed query first), and how
many of the exact top 10 (and top 200, the pool a search asks for) the two-stage scan finds.
The numbers are in docs/search.md.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from agentlog.search.semantic import quantise, ranked, signs


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def main(sizes: list[int]) -> None:
    rng = np.random.default_rng(7)
    centres = unit(rng.standard_normal((2000, 256)))
    print("| vectors | sign bits | exact p50 / p95 ms | two-stage p50 / p95 ms | top-10 found | top-200 found |")
    for size in sizes:
        parts = []
        for start in range(0, size, 50_000):
            m = min(50_000, size - start)
            near = centres[rng.integers(0, len(centres), m)]
            parts.append(quantise(unit(near + 0.9 * rng.standard_normal((m, 256)).astype(np.float32) / 16)))
        vectors = np.concatenate(parts)
        t = time.perf_counter()
        signs(vectors)
        bits = time.perf_counter() - t
        queries = unit(vectors[rng.integers(0, size, 30)].astype(np.float32) / 127
                       + 0.5 * rng.standard_normal((30, 256)).astype(np.float32) / 16)
        timings: dict[str, list[float]] = {"exact": [], "two": []}
        found10, found200 = [], []
        ranked(vectors, queries[0], 200, exact_max=0)  # untimed: the sign bits computed and kept
        for q in queries:
            t = time.perf_counter()
            exact = ranked(vectors, q, 200, exact_max=size)
            timings["exact"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            two = ranked(vectors, q, 200, exact_max=0)
            timings["two"].append((time.perf_counter() - t) * 1000)
            want10, want200 = {i for _, i in exact[:10]}, {i for _, i in exact}
            found10.append(len(want10 & {i for _, i in two[:10]}) / 10)
            found200.append(len(want200 & {i for _, i in two}) / 200)

        def p(xs: list[float]) -> str:
            xs = sorted(xs)
            return f"{statistics.median(xs):.1f} / {xs[int(round(0.95 * (len(xs) - 1)))]:.1f}"

        print(f"| {size:,} | {bits * 1000:.0f} ms | {p(timings['exact'])} | {p(timings['two'])} | "
              f"{statistics.mean(found10):.3f} | {statistics.mean(found200):.3f} |")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 200_000, 400_000])
