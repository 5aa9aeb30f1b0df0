"""Bulk-load the workload into a data root's session logs (``agentlog bench load``).

Every event goes through the code the product ships. A hook sample's through
the hook's own library calls — the capture path (:func:`canonical.hook_events`)
and :meth:`SessionLog.append` — but not one process per event: each session's
events are appended in batches (one lock, one head update per batch) with
durability relaxed during the load. A transcript sample's line is written to
its session's transcript file (in a scratch directory), and at the end the
shipped importer (:func:`agentlog.api.import_paths`, what ``agentlog import``
runs) imports those files into the same data root. Then every written log and
head file gets one ``fsync``, and so do their directories.

With ``jobs > 1`` the main process only generates samples; worker processes
each own the sessions whose id hashes to them (so a session's events stay in
order in one process, and no two processes write one log), run the capture
path and append, and import their own sessions' transcripts. Each log ends up
byte for byte as a one-process load writes it (the import's offsets,
``state/import.json``, name each process's scratch files).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import tempfile
import time
from typing import Any, Callable

from agentlog.core.fastjson import dumps_bytes
from agentlog.api import SessionLog, open_session_log
from agentlog.core.paths import fsync_path
from agentlog.bench.workload.canonical import hook_events
from agentlog.bench.workload.generator import DEFAULT_SEED, generate
from agentlog.bench.workload.transcripts import PROVIDER, TranscriptFiles, log_events

Progress = Callable[[int, int], None]
_CHUNK = 200  # samples per message to a worker


class Writer:
    """Canonicalises samples and appends their events, batched per session.

    Transcript samples go to their sessions' files under ``transcripts`` (default:
    a scratch directory of its own, removed by :meth:`close`); the shipped importer
    writes their events at :meth:`finish` (or :meth:`import_transcripts`), reading
    a file imported before from where it stopped. ``events``, ``json_bytes`` and
    ``sessions`` count the imported events once imported; :attr:`pending` is the
    transcript samples written and not imported yet."""

    def __init__(self, root: str, batch: int, transcripts: str | None = None) -> None:
        self.root = root
        self.batch = batch
        self.logs: dict[tuple[str, str | None], SessionLog] = {}
        self.buffers: dict[tuple[str, str | None], list[bytes]] = {}
        self.buffered = 0
        self.appends = 0
        self.events = 0
        self.json_bytes = 0
        self.t_capture = 0.0
        self.t_append = 0.0
        self.t_sync = 0.0
        self.own_transcripts = transcripts is None
        self.transcript_dir = tempfile.mkdtemp(prefix="agentlog-bench-transcripts-") if transcripts is None \
            else transcripts
        self.transcripts = TranscriptFiles(self.transcript_dir)
        self.imported: dict[str, SessionLog] = {}
        """Sessions the importer wrote: their logs (for the fsync and the sizes)."""
        self.read: dict[str, int] = {}
        """Imported logs → offset their events were counted to."""

    @property
    def pending(self) -> int:
        return self.transcripts.pending

    def add(self, sample: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        if sample["source"] == "transcript":
            self.transcripts.add(sample)
            self.t_capture += time.perf_counter() - t0
            return
        evs = hook_events(sample)
        lines = [dumps_bytes(ev) for ev in evs]
        self.t_capture += time.perf_counter() - t0
        for ev, line in zip(evs, lines):
            key = (str(ev["provider"]), ev.get("provider_session_id"))
            buf = self.buffers.get(key)
            if buf is None:
                buf = self.buffers[key] = []
            buf.append(line)
            self.json_bytes += len(line)
            self.events += 1
            self.buffered += 1
            if len(buf) >= self.batch:
                self.flush(key)
        if self.buffered >= self.batch:
            self.flush_all()

    def flush(self, key: tuple[str, str | None]) -> None:
        buf = self.buffers.pop(key, None)
        if not buf:
            return
        log = self.logs.get(key)
        if log is None:
            log = self.logs[key] = open_session_log(self.root, key[0], key[1], durability="relaxed")
        t0 = time.perf_counter()
        log.append(buf)
        self.t_append += time.perf_counter() - t0
        self.appends += 1
        self.buffered -= len(buf)

    def flush_all(self) -> None:
        for key in list(self.buffers):
            self.flush(key)

    def import_transcripts(self) -> None:
        """Import the transcript lines written since the last import (timed as capture:
        the importer parses, redacts and appends in one), then count what it wrote."""
        t0 = time.perf_counter()
        report = self.transcripts.import_into(self.root, workers=1)
        self.t_capture += time.perf_counter() - t0
        if report is None:
            return
        for f in report.files:
            for sid in f.sessions:
                if sid not in self.imported:
                    self.imported[sid] = open_session_log(self.root, PROVIDER, sid, durability="relaxed")
        for log in self.imported.values():
            for end, data in log_events(log.path, self.read.get(log.path, 0)):
                self.read[log.path] = end
                self.events += 1
                self.json_bytes += len(data)

    def finish(self) -> dict[str, Any]:
        """Flush what is left, import the transcripts, fsync every written file once, and report."""
        self.flush_all()
        self.import_transcripts()
        t0 = time.perf_counter()
        logs = [*self.logs.values(), *self.imported.values()]
        dirs: set[str] = set()
        for log in logs:
            fsync_path(log.path)
            fsync_path(log.head_file)
            dirs.add(os.path.dirname(log.path))
        for d in sorted(dirs):
            fsync_path(d)
        for parent in sorted({os.path.dirname(d) for d in dirs}):
            fsync_path(parent)
        self.t_sync = time.perf_counter() - t0
        written = 0
        for log in logs:
            try:
                written += os.path.getsize(log.path) + os.path.getsize(log.head_file)
            except OSError:
                pass
        return {"events": self.events, "sessions": len(logs), "appends": self.appends,
                "json_bytes": self.json_bytes, "bytes_written": written, "capture": self.t_capture,
                "append": self.t_append, "fsync": self.t_sync}

    def close(self) -> None:
        """Remove the transcripts' scratch directory (when it is the writer's own)."""
        if self.own_transcripts:
            shutil.rmtree(self.transcript_dir, ignore_errors=True)


def _worker(root: str, batch: int, inbox: Any, outbox: Any) -> None:
    writer = Writer(root, batch)
    try:
        while True:
            chunk = inbox.get()
            if chunk is None:
                break
            for sample in chunk:
                writer.add(sample)
        outbox.put(writer.finish())
    finally:
        writer.close()


def _route(session: str, jobs: int) -> int:
    return int.from_bytes(hashlib.blake2b(session.encode("utf-8"), digest_size=4).digest(), "big") % jobs


def default_jobs() -> int:
    """Worker processes for a load: the CPUs, at most 4 (one more process generates)."""
    return max(1, min(4, os.cpu_count() or 1))


def load(
    events: int,
    seed: int = DEFAULT_SEED,
    *,
    root: str,
    batch: int = 1000,
    jobs: int = 1,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write ``events`` samples' canonical events into ``root``'s logs; return timings and sizes."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    clock = time.perf_counter
    started = clock()
    t_gen = 0.0
    n_samples = 0
    it = generate(events, seed)
    parts: list[dict[str, Any]]
    if jobs == 1:
        writer = Writer(root, batch)
        try:
            while True:
                t0 = clock()
                sample = next(it, None)
                t_gen += clock() - t0
                if sample is None:
                    break
                n_samples += 1
                writer.add(sample)
                if progress is not None and n_samples % 1000 == 0:
                    progress(n_samples, events)
            parts = [writer.finish()]
        finally:
            writer.close()
    else:
        ctx = multiprocessing.get_context()
        inboxes = [ctx.Queue(maxsize=8) for _ in range(jobs)]
        outbox = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(root, batch, inboxes[i], outbox), daemon=True)
                 for i in range(jobs)]
        for p in procs:
            p.start()
        try:
            pending: list[list[dict[str, Any]]] = [[] for _ in range(jobs)]
            while True:
                t0 = clock()
                sample = next(it, None)
                t_gen += clock() - t0
                if sample is None:
                    break
                n_samples += 1
                j = _route(sample["session"], jobs)
                pending[j].append(sample)
                if len(pending[j]) >= _CHUNK:
                    inboxes[j].put(pending[j])
                    pending[j] = []
                if progress is not None and n_samples % 1000 == 0:
                    progress(n_samples, events)
            for j in range(jobs):
                if pending[j]:
                    inboxes[j].put(pending[j])
                inboxes[j].put(None)
            parts = [outbox.get() for _ in range(jobs)]
            for p in procs:
                p.join()
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
    wall = clock() - started
    if progress is not None:
        progress(n_samples, events)
    n_events = sum(int(p["events"]) for p in parts)
    if jobs == 1:
        busy = wall - t_gen
    else:
        busy = max(float(p["capture"]) + float(p["append"]) + float(p["fsync"]) for p in parts)
    written = sum(int(p["bytes_written"]) for p in parts)
    return {
        "events": n_events,
        "samples": n_samples,
        "seed": seed,
        "root": root,
        "jobs": jobs,
        "sessions": sum(int(p["sessions"]) for p in parts),
        "appends": sum(int(p["appends"]) for p in parts),
        "batch": batch,
        "json_bytes": sum(int(p["json_bytes"]) for p in parts),
        "bytes_written": written,
        "seconds": {
            "wall": round(wall, 3),
            "generate": round(t_gen, 3),
            # with jobs > 1 these are summed over the workers (CPU seconds, running in parallel)
            "capture": round(sum(float(p["capture"]) for p in parts), 3),
            "append": round(sum(float(p["append"]) for p in parts), 3),
            "fsync": round(sum(float(p["fsync"]) for p in parts), 3),
        },
        "events_per_s": round(n_events / wall, 1) if wall else 0.0,
        # one process: wall minus generation; workers: the busiest worker's capture + append + fsync time
        "events_per_s_excluding_generation": round(n_events / busy, 1) if busy else 0.0,
        "mb_per_s": round(written / wall / 1e6, 2) if wall else 0.0,
    }
