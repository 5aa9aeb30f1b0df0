"""Embedding a large rebuild's chunks on every CPU the process may use.

The model (wordllama, :mod:`.semantic`) embeds in one thread, and a rebuild of a large history is
mostly embedding: at 1.45 M events it is minutes on one core. :class:`Embedder` takes the chunk
texts batch after batch and hands back their int8 vectors *in order*. It embeds in this process
until :data:`POOL_AFTER` chunks have gone by (a small rebuild, a catch-up or a test never starts a
process), then in worker processes, one per CPU the process may run on, each loading the model
once. Workers are *spawned*, not forked: this process holds DuckDB's and Arrow's threads, which a
fork would copy mid-state. At most two batches per worker are in flight, so memory stays bounded.
If a worker cannot be started or dies, what it held is embedded here and the rest stays here:
slower, never lost or reordered.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Final

if TYPE_CHECKING:
    import numpy as np

POOL_AFTER: Final = 20_000
"""Chunks embedded in this process before worker processes start (their start and the model's
load in each cost about a second)."""


def cpus() -> int:
    """CPUs this process may run on (its affinity, which a container's limit narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        return os.cpu_count() or 1


Embed = Callable[[list[str]], "np.ndarray"]
"""Texts to their int8 vectors: a module-level function (a worker is handed it by name)."""


class Embedder:
    """Int8 vectors of batches of texts, made by ``embed`` in the order the batches came (see
    the module)."""

    def __init__(self, embed: Embed, processes: int | None = None, pool_after: int = POOL_AFTER) -> None:
        self.embed = embed
        self.processes = cpus() if processes is None else processes
        self.pool_after = pool_after
        self.seen = 0
        self._pool: Any = None
        self._pending: deque[tuple[list[str], Future[np.ndarray] | None]] = deque()
        self._failed = False

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, texts: list[str]) -> list[np.ndarray]:
        """Take one batch; the vectors of the batches now done, oldest first."""
        self.seen += len(texts)
        pool = self._start()
        if pool is None:
            self._pending.append((texts, None))
        else:
            try:
                self._pending.append((texts, pool.submit(self.embed, texts)))
            except Exception:  # a broken pool: this batch and the rest here
                self._broken()
                self._pending.append((texts, None))
        done: list[np.ndarray] = []
        limit = 2 * self.processes if self._pool is not None else 0
        while self._pending and (len(self._pending) > limit or self._pending[0][1] is None):
            done.append(self._result(*self._pending.popleft()))
        return done

    def finish(self) -> list[np.ndarray]:
        """The vectors of every batch still in flight, in order."""
        out = [self._result(*item) for item in self._pending]
        self._pending.clear()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _start(self) -> Any:
        if self._pool is not None or self._failed or self.processes < 2 or self.seen <= self.pool_after:
            return self._pool
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"))
        except (OSError, ValueError):
            self._failed = True
        return self._pool

    def _result(self, texts: list[str], future: Future[np.ndarray] | None) -> np.ndarray:
        if future is not None:
            try:
                return future.result()
            except Exception:  # the worker died (BrokenProcessPool) or failed: embed it here
                self._broken()
        return self.embed(texts)

    def _broken(self) -> None:
        self._failed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


__all__ = ["POOL_AFTER", "Embed", "Embedder", "cpus"]
