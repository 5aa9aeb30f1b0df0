"""A large rebuild embeds on every CPU (search/embed_pool.py): the vectors come back in the order
the batches went in, the same as embedding them in this process, and a worker that dies loses
nothing (its batches are embedded here). Real spawned worker processes and the real model."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from agentlog.search import semantic
from agentlog.search.embed_pool import Embedder
from agentlog.search.semantic import embed_quantised

pytestmark = pytest.mark.skipif(not semantic.available(), reason="the 'semantic' extra is not installed")

BATCHES = [[f"batch {b} text {i}: the build failed on a missing module number {b * 7 + i}" for i in range(n)]
           for b, n in enumerate([3, 1, 5, 2, 4, 6, 1, 3])]


def _all(embedder: Embedder) -> np.ndarray:
    parts = []
    for texts in BATCHES:
        parts.extend(embedder.add(texts))
    parts.extend(embedder.finish())
    return np.concatenate(parts)


def test_workers_give_this_processes_vectors_in_order() -> None:
    here = np.concatenate([embed_quantised(t) for t in BATCHES])
    with Embedder(embed_quantised, processes=1) as one:
        assert np.array_equal(_all(one), here) and one._pool is None
    with Embedder(embed_quantised, processes=2, pool_after=4) as two:  # the first batches here, the rest in two workers
        got = _all(two)
        assert two._pool is not None and not two._failed
    assert got.shape == here.shape and np.array_equal(got, here)


def test_a_small_run_starts_no_process() -> None:
    with Embedder(embed_quantised, processes=2) as e:
        _all(e)
        assert e._pool is None


def test_a_worker_killed_midway_loses_nothing() -> None:
    here = np.concatenate([embed_quantised(t) for t in BATCHES])
    with Embedder(embed_quantised, processes=2, pool_after=0) as e:
        parts = list(e.add(BATCHES[0]))
        for pid in list(e._pool._processes):  # every worker dies with its batch in flight
            os.kill(pid, signal.SIGKILL)
        for texts in BATCHES[1:]:
            parts.extend(e.add(texts))
        parts.extend(e.finish())
        assert e._failed and e._pool is None
    assert np.array_equal(np.concatenate(parts), here)
