"""The shared reader of a data root: one query engine, kept current, for a long-running server.

:class:`Source` keeps one query engine per data root and reopens it when the
store or the projection changed (another process's ingest, or its own
catch-up); every read holds its lock, so DuckDB sees one statement at a time.
Before reading it brings the store and projection up to date
(:func:`agentlog.operations.refresh.bring_up_to_date`) at most once per
``min_interval_s``, and only when the logs or the store changed since. The
dashboard and the MCP server each hold one.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Final, TypeVar

from agentlog.operations.refresh import bring_up_to_date
from agentlog.query.engine import Engine

CACHE: Final = 256
"""Answers a :class:`Source` remembers for the current store."""
T = TypeVar("T")


def tree_stamp(path: str) -> tuple[int, int, int]:
    """(files, total size, newest mtime) of the files under ``path`` (two levels: provider/log)."""
    files = size = newest = 0
    try:
        top = list(os.scandir(path))
    except OSError:
        return (0, 0, 0)
    for d in top:
        if not d.is_dir(follow_symlinks=False):
            continue
        try:
            entries = list(os.scandir(d.path))
        except OSError:
            continue
        for e in entries:
            if e.name.endswith((".jsonl", ".head")):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                files += 1
                size += st.st_size
                newest = max(newest, st.st_mtime_ns)
    return (files, size, newest)


class Source:
    """A data root as a server reads it (see the module docstring)."""

    def __init__(self, root: str, *, catch_up: bool = True, min_interval_s: float = 1.0) -> None:
        self.root = root
        self.catch_up = catch_up
        self.min_interval_s = min_interval_s
        self._lock = threading.RLock()
        self._engine: Engine | None = None
        self._stamp: tuple[Any, ...] | None = None
        self._caught = 0.0
        self._quiet: tuple[Any, ...] | None = None
        """The logs' stamp before the last catch-up and the store's after it."""
        self._cache: OrderedDict[tuple[str, Any], tuple[Any, float]] = OrderedDict()
        """Answers by (key, store stamp), each with when it was asked (monotonic seconds)."""

    def store_stamp(self) -> tuple[Any, ...]:
        """(mtime, size) of the projection's manifest, of the store's Delta log directory and of a
        vault pull's sidecar files (None for one that is missing): what changes when one is written
        (a pull that only reports a problem changes no table, yet what the pages show)."""
        from agentlog.log.pulled import sidecar_files
        from agentlog.projection.persist import projection_dir
        from agentlog.store.schema import events_path

        out: list[Any] = []
        for p in (os.path.join(projection_dir(self.root), "manifest.json"), os.path.join(events_path(self.root),
                                                                                          "_delta_log"),
                  *sidecar_files(self.root)):
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def bring_up_to_date(self) -> dict[str, Any] | None:
        """Ingest what the logs hold beyond the store and refresh the projection
        (what the daemon does; harmless when it runs too). None when done too recently, or
        when neither the logs nor the store changed since the last time (a no-op ingest
        still reads every log's end: ~0.3 s at 1.45 M events; this look costs a directory
        listing)."""
        from agentlog.core.paths import logs_dir

        with self._lock:
            if time.monotonic() - self._caught < self.min_interval_s:
                return None
            self._caught = time.monotonic()
            logs = tree_stamp(logs_dir(self.root))  # before: what is appended meanwhile is seen next time
            if self._quiet is not None and self._quiet == (logs, self.store_stamp()):
                return None
            done = bring_up_to_date(self.root)
            self._quiet = (logs, self.store_stamp())
            return done

    def read(self, fn: Callable[[Engine], T]) -> T:
        """``fn(engine)`` on a current engine, under the lock."""
        with self._lock:
            if self.catch_up:
                self.bring_up_to_date()
            stamp = self.store_stamp()
            if self._engine is None or stamp != self._stamp:
                if self._engine is not None:
                    self._engine.close()
                self._engine = Engine(self.root)
                self._stamp = stamp
            return fn(self._engine)

    def read_cached(self, key: str, fn: Callable[[Engine], T], keep: Callable[[T], bool] | None = None,
                    max_age_s: float | None = None) -> T:
        """:meth:`read`, remembered until the store or the projection changes (a question asked
        again over the same data is answered from memory; at most :data:`CACHE` answers);
        an answer ``keep`` refuses is not remembered; with ``max_age_s``, one computed longer
        ago than that is computed again (an answer measured against the wall clock)."""
        with self._lock:
            if self.catch_up:
                self.bring_up_to_date()
            hit = self._cache.get((key, self.store_stamp()))
            if hit is not None and (max_age_s is None or time.monotonic() - hit[1] <= max_age_s):
                return hit[0]  # type: ignore[no-any-return]
            asked = time.monotonic()
            value = self.read(fn)  # the engine is (re)opened at the current stamp
            if keep is not None and not keep(value):
                return value
            self._cache[(key, self._stamp)] = (value, asked)
            self._cache.move_to_end((key, self._stamp))
            while len(self._cache) > CACHE:
                self._cache.popitem(last=False)
            return value

    @property
    def is_open(self) -> bool:
        """Whether an engine is open (the server has read the store at least once)."""
        return self._engine is not None

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None


__all__ = ["CACHE", "Source", "tree_stamp"]
