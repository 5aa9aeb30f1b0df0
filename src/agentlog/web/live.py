"""The live feed behind ``/api/stream`` (server-sent events).

A thread looks every :data:`INTERVAL_S` at what another process may have
written — a hook's frame in a session log, a daemon's ingest, a memory
change made by the CLI — by the sizes and times of those files, not by
anything this process did, so writes of every process reach the browser.
When a log grew it brings the store and projection up to date itself (what
the daemon would do; harmless when the daemon runs) and, while no daemon
runs, does the daemon's upkeep too every :data:`UPKEEP_S` (sealing idle
logs, retention, compaction — small files from frequent ingests are what
makes every page slower), in its own low-priority thread, the first time a
minute after start; at start it also brings the full-text index up to date in
the background (a store never indexed takes minutes: a search meanwhile
answers from what the index holds and says so). Each change becomes a
numbered message (``events``, ``store``, ``memory``) kept in a ring of
:data:`CAP`; a client that reconnects with ``Last-Event-ID`` gets what it
missed, or ``resync`` when that is older than the ring holds. The stream
sends a comment every :data:`HEARTBEAT_S` so proxies keep it open.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agentlog.operations.reader import Source, tree_stamp

INTERVAL_S: Final = 0.4
CAP: Final = 500
HEARTBEAT_S: Final = 15.0
UPKEEP_S: Final = 3600.0
UPKEEP_FIRST_S: Final = 60.0


@dataclass(frozen=True)
class Change:
    id: int
    type: str
    data: dict[str, Any]

    def sse(self) -> bytes:
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (self.id, self.type.encode(), orjson.dumps(self.data))


class Feed:
    """Numbered changes of a data root (see the module docstring)."""

    def __init__(self, source: Source, *, interval_s: float = INTERVAL_S, cap: int = CAP) -> None:
        self.source = source
        self.interval_s = interval_s
        self.ring: deque[Change] = deque(maxlen=cap)
        self.next_id = 1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stamps: dict[str, Any] = {}
        self.errors = 0
        self.upkeep_runs = 0
        self.indexer: threading.Thread | None = None
        self._upkeep: threading.Thread | None = None
        self._upkeep_at = time.monotonic() + UPKEEP_FIRST_S

    # -- publishing ----------------------------------------------------------------------------
    def publish(self, type_: str, data: dict[str, Any]) -> Change:
        with self._lock:
            change = Change(self.next_id, type_, {**data, "at": time.time_ns() // 1000})
            self.next_id += 1
            self.ring.append(change)
            return change

    def since(self, last_id: int) -> list[Change] | None:
        """What came after ``last_id``; None when some of it is no longer held (resync)."""
        with self._lock:
            if not self.ring:
                return [] if last_id < self.next_id else None
            first = self.ring[0].id
            if last_id < first - 1:
                return None
            return [c for c in self.ring if c.id > last_id]

    @property
    def last_id(self) -> int:
        with self._lock:
            return self.next_id - 1

    # -- watching ------------------------------------------------------------------------------
    def check(self) -> list[Change]:
        """Look once; publish and return what changed."""
        from agentlog.memory.store import db_path, log_path as memory_log
        from agentlog.core.paths import logs_dir

        root = self.source.root
        out: list[Change] = []
        logs = tree_stamp(logs_dir(root))
        if self._stamps.get("logs") not in (None, logs):
            try:
                caught = self.source.bring_up_to_date()
            except Exception:  # noqa: BLE001 - a busy store now is caught up next time
                caught = None
                self.errors += 1
            if caught is not None:
                new = int((caught.get("ingest") or {}).get("events") or 0)
                if new:
                    out.append(self.publish("events", {"new_events": new,
                                                       "sessions_rebuilt": (caught.get("projection") or {}).get(
                                                           "sessions_rebuilt", 0)}))
            else:
                logs = self._stamps["logs"]  # look again next time
        self._stamps["logs"] = logs
        store = self.source.store_stamp()
        if self._stamps.get("store") not in (None, store):
            out.append(self.publish("store", {}))
        self._stamps["store"] = store
        mem = tuple(_stat(p) for p in (memory_log(root), db_path(root)))
        if self._stamps.get("memory") not in (None, mem):
            out.append(self.publish("memory", {}))
        self._stamps["memory"] = mem
        return out

    def start(self) -> None:
        if self._thread is not None:
            return
        self.check()  # the first look only sets the baseline
        self._thread = threading.Thread(target=self._run, name="agentlog-live", daemon=True)
        self._thread.start()
        self.indexer = threading.Thread(target=self._index, name="agentlog-index", daemon=True)
        self.indexer.start()

    def _index(self) -> None:
        """The full-text index brought up to date once, at a low priority (then searches and the
        daemon keep it so)."""
        from agentlog.search.index import catch_up
        from agentlog.operations.daemon import lower_priority

        lower_priority()
        try:
            catch_up(self.source.root)
        except Exception:  # noqa: BLE001 - a search catches up itself later
            self.errors += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
                self.upkeep_if_due()
            except Exception:  # noqa: BLE001 - the feed must outlive one bad look
                self.errors += 1

    def upkeep_if_due(self, *, now: float | None = None) -> bool:
        """Start the daemon's upkeep in a thread when it is due, none is running and no daemon
        runs (it does its own); True when started."""
        from agentlog.operations import daemon

        now = time.monotonic() if now is None else now
        if now < self._upkeep_at or (self._upkeep is not None and self._upkeep.is_alive()):
            return False
        self._upkeep_at = now + UPKEEP_S
        if daemon.state(self.source.root).running:
            return False

        def work() -> None:
            daemon.maintain(self.source.root)  # logs its failures, never raises
            self.upkeep_runs += 1

        self._upkeep = threading.Thread(target=work, name="agentlog-upkeep", daemon=True)
        self._upkeep.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


__all__ = ["CAP", "Change", "Feed", "HEARTBEAT_S", "INTERVAL_S", "UPKEEP_S"]
