"""The capture server: ``agentlog daemon run`` records hook payloads sent by the native hook.

The native hook (``agentlog-hook``, a small C program) sends each payload over
``<data root>/run/hook.sock`` instead of starting a Python interpreter; this server
turns it into exactly the frame the Python hook would have written
(``capture.hook.build`` and what ``capture.hook.main`` does around it), appends it,
and answers 'A' with the agent's reply only once the append returned (after its
fsync when durability is strict). The protocol is ``capture.wire`` (its one Python
implementation, the rules both ends follow); what the server guarantees is in
docs/hook-path.md.

Threads: one reads requests (a selector over every connection, each with its 5 s
deadline; ``wire.request_bytes_missing`` refuses a request as soon as its bytes break
a framing rule, so no more than ``wire.MAX_REQUEST`` of one is held) and builds the
event of each whole one itself (a payload over ``INLINE_BUILD_MAX`` goes to a worker
to build); a few workers commit. Group commit: an event for an idle session goes to a
worker, which appends it; events for that session arriving meanwhile wait in its queue
and go in that worker's next append, all in one ``SessionLog.append`` (one fsync). At
most ``max_pending`` connections are taken at once; beyond that, and while stopping, a
connection is answered 'F' at once.

Not on the hook path (it imports ``socket``, ``selectors``, ``threading``): only the
daemon loads it.
"""

from __future__ import annotations

import os
import queue
import selectors
import socket
import threading
import time
from collections import deque
from typing import Any

from agentlog.capture import hook, wire
from agentlog.capture.hook_socket import (
    CaptureServerError,
    peer_uid,
    prepare_run_dir,
    probe,
    remove_stale,
    socket_path,
)
from agentlog.core.fastjson import dumps_bytes
from agentlog.core.paths import FILE_MODE, state_dir
from agentlog.log.writer import SessionLog, Tip

__all__ = ["CaptureServer", "CaptureServerError", "probe", "socket_path", "stats_path", "status"]

STATS_NAME = "hook-server.json"
MAX_PENDING = 1000
MAX_BUFFERED = 256 << 20  # request bytes held at once, all connections together
LATENCY_WINDOW = 1000
CLOCK_SLACK_US = 2_000_000  # how far the client's clock may be from ours (see _since)
INLINE_BUILD_MAX = 256 << 10
"""Payloads up to this size are built by the reader itself (no hand-off to a worker: under
the interpreter lock a worker builds no faster, and each hand-off costs a thread switch);
larger ones by a worker, so that the reader is never held up for long."""
UNCHECKED_MARGIN_MS = 500
"""A request appended more than this before its client's deadline needs no duplicate check:
the client has not fallen back (it would have to wait out its deadline, then start Python)."""


def stats_path(root: str) -> str:
    return os.path.join(state_dir(root), STATS_NAME)


# -- the server ----------------------------------------------------------------------------


class _Conn:
    __slots__ = ("sock", "buf", "need", "deadline", "done_ns", "request", "held")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.held = 0  # request bytes counted in the server's buffered total
        self.buf: bytearray | None = bytearray()  # the request so far; None once decoded
        self.need = wire.request_bytes_missing(b"")  # bytes ``buf`` must hold before it is looked at again
        self.deadline = time.monotonic() + wire.REQUEST_DEADLINE_S
        self.done_ns = 0
        self.request: wire.Request | None = None


class _Entry:
    """A built event waiting for its session's append."""

    __slots__ = ("conn", "captured", "settings", "data", "log", "unchecked_until")

    def __init__(self, conn: _Conn, captured: hook.Captured, settings: dict[str, Any], log: SessionLog,
                 unchecked_until: int | None = None) -> None:
        self.conn = conn
        self.captured = captured
        self.settings = settings
        self.data = dumps_bytes(captured.event)
        self.log = log
        self.unchecked_until = unchecked_until
        """Until when (µs since the epoch) an append needs no duplicate check for it: its
        client cannot have fallen back before (None: always check)."""


class CaptureServer:
    """Serves ``<root>/run/hook.sock`` until ``stop()``; see the module's docstring."""

    def __init__(self, root: str, *, workers: int = 4, max_pending: int = MAX_PENDING,
                 max_buffered: int = MAX_BUFFERED) -> None:
        self.root = root
        self.path = socket_path(root)
        self.workers = workers
        self.max_pending = max_pending
        self.max_buffered = max_buffered
        self._uid = os.getuid()
        self._listener: socket.socket | None = None
        self._inode = 0
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._work: queue.SimpleQueue[_Conn | _Entry | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopping = False
        self._pending = 0
        self._buffered = 0
        self._sessions: dict[str, list[_Entry]] = {}  # a session being appended to: what waits for it
        self._marks: dict[str, deque[tuple[int, Tip]]] = {}
        self._dropped_lock = threading.Lock()
        self._children: list[int] = []
        self._latency: deque[int] = deque(maxlen=LATENCY_WINDOW)
        self.counts = {k: 0 for k in ("accepted", "acknowledged", "fell_back", "rejected", "timed_out", "probes",
                                      "foreign_peers", "appends", "frames", "already_present", "errors")}
        self.started_at: float | None = None

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the socket (see ``prepare_run_dir``) and start the threads."""
        prepare_run_dir(self.root)
        remove_stale(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600 (process-wide: done before our threads run)
        try:
            sock.bind(self.path)
        except OSError as e:
            sock.close()
            raise CaptureServerError(f"cannot bind {self.path}: {e}") from e
        finally:
            os.umask(old)
        sock.listen(min(socket.SOMAXCONN, 1024))
        sock.setblocking(False)
        self._listener = sock
        self._wake_r, self._wake_w = socket.socketpair()
        self._inode = os.lstat(self.path).st_ino
        self.started_at = time.time()
        self._threads = [threading.Thread(target=self._io_loop, name="agentlog-capture-io", daemon=True)]
        self._threads += [threading.Thread(target=self._worker, name=f"agentlog-capture-{i}", daemon=True)
                          for i in range(self.workers)]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking requests (those not yet built are answered 'F'), finish the appends under
        way, remove the socket."""
        if self._stopping or self._wake_w is None:
            return
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        if self._threads:
            self._threads[0].join(timeout)  # the reader: it queues nothing more
        for _ in range(self.workers):
            self._work.put(None)  # after what is queued, which is answered 'F'
        for t in self._threads[1:]:
            t.join(max(0.0, deadline - time.monotonic()))
        self._reap()
        self._wake_w.close()
        if self._wake_r is not None:
            self._wake_r.close()

    def __enter__(self) -> CaptureServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    # -- reading ---------------------------------------------------------------------------
    def _io_loop(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        conns: dict[int, _Conn] = {}
        next_reap = time.monotonic() + 1
        try:
            while not self._stopping:
                for key, _ in sel.select(0.25):
                    if key.data is None:
                        self._accept(sel, conns)
                    elif isinstance(key.data, _Conn):
                        self._read(sel, conns, key.data)
                now = time.monotonic()
                for c in [c for c in conns.values() if c.deadline < now]:
                    self._count("timed_out")
                    self._drop(sel, conns, c)
                if now >= next_reap:
                    self._reap()
                    next_reap = now + 1
        except Exception as e:  # the socket goes away with it: clients fall back, status says so
            hook._complain(self.root, f"capture server stopped reading: {type(e).__name__}: {e}")
        finally:
            sel.unregister(self._listener)
            self._listener.close()
            try:
                if os.lstat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
            for c in list(conns.values()):
                self._drop(sel, conns, c, answer=wire.FALL_BACK)
            sel.close()

    def _accept(self, sel: selectors.BaseSelector, conns: dict[int, _Conn]) -> None:
        assert self._listener is not None
        for _ in range(64):
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # EMFILE and the like: the client falls back
            if peer_uid(sock) != self._uid:
                self._count("foreign_peers")
                sock.close()
                continue
            sock.setblocking(False)
            with self._lock:
                full = self._stopping or self._pending >= self.max_pending
                if not full:
                    self._pending += 1
            if full:
                self._send(sock, wire.encode_response(wire.FALL_BACK))
                self._count("fell_back")
                continue
            self._count("accepted")
            c = _Conn(sock)
            conns[sock.fileno()] = c
            sel.register(sock, selectors.EVENT_READ, c)

    def _read(self, sel: selectors.BaseSelector, conns: dict[int, _Conn], c: _Conn) -> None:
        buf = c.buf
        assert buf is not None
        try:
            data = c.sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away before its request was whole
            self._count("rejected")
            self._drop(sel, conns, c)
            return
        with self._lock:
            self._buffered += len(data)
            over = self._buffered > self.max_buffered
        if over:
            self._count("fell_back")
            self._drop(sel, conns, c, answer=wire.FALL_BACK, extra=len(data))
            return
        buf += data
        if len(buf) < c.need:
            return
        try:
            missing = wire.request_bytes_missing(buf)
            if missing:
                c.need = len(buf) + missing
                return
            if wire.is_probe(buf):
                self._count("probes")
                self._drop(sel, conns, c)
                return
            c.request = wire.decode_request(buf)
        except wire.WireError:
            self._count("rejected")
            self._drop(sel, conns, c)
            return
        c.done_ns = time.perf_counter_ns()
        c.held, c.buf = len(buf), None  # the request holds what it needs
        sel.unregister(c.sock)
        del conns[c.sock.fileno()]
        if len(c.request.payload) > INLINE_BUILD_MAX:
            self._work.put(c)  # a worker builds it, so that the reader goes on reading meanwhile
            return
        entry = self._built(c)
        if entry is not None and self._claim(entry):
            self._work.put(entry)

    def _drop(self, sel: selectors.BaseSelector, conns: dict[int, _Conn], c: _Conn, answer: str | None = None,
              extra: int = 0) -> None:
        sel.unregister(c.sock)
        del conns[c.sock.fileno()]
        self._finish(c, answer, extra)

    def _finish(self, c: _Conn, answer: str | None, extra: int = 0, reply: bytes = b"") -> None:
        """Answer (or not) and close; the connection no longer counts as pending."""
        held = c.held + extra + (len(c.buf) if c.buf is not None else 0)
        c.buf = None
        c.request = None
        if answer is not None:
            try:
                data = wire.encode_response(answer, reply)
            except wire.WireError:  # a reply over 1 MiB: the fallback prints it (and finds the frame written)
                data = wire.encode_response(wire.FALL_BACK)
            self._send(c.sock, data)
        else:
            c.sock.close()
        with self._lock:
            self._pending -= 1
            self._buffered -= held

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        """Send an answer (small: it fits the socket's buffer) and close; a client that left is no error."""
        try:
            sock.settimeout(1.0)
            sock.sendall(data)
        except OSError:
            pass
        finally:
            sock.close()

    # -- building and committing ------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            if isinstance(job, _Conn):
                entry = self._built(job)
                if entry is None or not self._claim(entry):
                    continue
                job = entry
            try:
                self._commit(job)
            except Exception as e:  # never expected (_append answers its own failures): say so, go on
                self._count("errors")
                hook._complain(self.root, f"capture server: {type(e).__name__}: {e}")

    def _built(self, c: _Conn) -> _Entry | None:
        """The request's event, built; None when the client was told to fall back instead."""
        if self._stopping:
            self._count("fell_back")
            self._finish(c, wire.FALL_BACK)
            return None
        try:
            return self._build(c)
        except Exception as e:  # a bug here: nothing was written, the client falls back
            self._count("errors")
            hook._complain(self.root, f"capture server: {type(e).__name__}: {e}")
            self._finish(c, wire.FALL_BACK)
            return None

    def _build(self, c: _Conn) -> _Entry:
        """What ``hook.main`` does before appending, for this request."""
        req = c.request
        assert req is not None
        settings = hook.load_settings(self.root, req.env)
        try:
            captured = hook.build(req.agent, req.payload, req.stdin_bytes, req.args, environ=req.env,
                                  captured_at=req.captured_at, event_id=req.event_id,
                                  capture_mode=settings["capture_mode"], redact=settings["redact_secrets"],
                                  process_cwd=req.cwd or "")
        except Exception as e:  # a bug in normalising must not lose the event
            captured = hook.fallback(req.agent, req.payload, req.stdin_bytes, req.captured_at, settings,
                                     f"{type(e).__name__}: {e}", req.event_id)
        captured.event["attrs"]["hook_us"] = (time.perf_counter_ns() - c.done_ns) // 1000
        until = None
        if req.deadline_ms is not None and req.deadline_ms > UNCHECKED_MARGIN_MS:
            until = req.captured_at + (req.deadline_ms - UNCHECKED_MARGIN_MS) * 1000
        return _Entry(c, captured, settings, hook.session_log(captured, self.root, settings["durability"]), until)

    def _claim(self, entry: _Entry) -> bool:
        """Group commit: True when nobody is appending to the entry's session (it is now
        ours to commit, :meth:`_commit`); else the entry is left to the one who is (it takes
        everything queued in its next append)."""
        with self._lock:
            waiting = self._sessions.get(entry.log.path)
            if waiting is not None:
                waiting.append(entry)
                return False
            self._sessions[entry.log.path] = []
            return True

    def _commit(self, entry: _Entry) -> None:
        """Append a claimed entry, then whatever queued for its session meanwhile, until none is left."""
        key = entry.log.path
        batch = [entry]
        done = False
        try:
            while True:
                self._append(batch)
                with self._lock:
                    batch = self._sessions[key]
                    if not batch:
                        del self._sessions[key]
                        done = True
                        return
                    self._sessions[key] = []
        finally:
            if not done:  # a failure above: what waits was not written, so its clients fall back
                with self._lock:
                    left = self._sessions.pop(key, [])
                for e in left:
                    self._count("fell_back")
                    self._finish(e.conn, wire.FALL_BACK)

    def _append(self, batch: list[_Entry]) -> None:
        log = batch[0].log
        if log.durability != "strict" and any(e.log.durability == "strict" for e in batch):
            log = next(e.log for e in batch if e.log.durability == "strict")
        events = [e.captured.event for e in batch]
        now = time.time_ns() // 1000
        # no duplicate check for a request well within its client's deadline: its fallback
        # cannot have run (a clock stepped back only means one check more)
        ids = [None if e.unchecked_until is not None and e.captured.event["captured_at"] <= now < e.unchecked_until
               else ev["event_id"] for e, ev in zip(batch, events)]
        try:
            result = log.append([e.data for e in batch], dedupe=ids,
                                since=self._since(log.path, min(ev["captured_at"] for ev in events)))
        except Exception as e:  # nothing acknowledged: every client falls back (and dedupes)
            self._count("errors")
            self._count("fell_back", len(batch))
            for entry in batch:
                self._finish(entry.conn, wire.FALL_BACK)
            hook._complain(self.root, f"capture server could not append to {log.path}: {type(e).__name__}: {e}")
            return
        self._mark(log.path, result.tip)
        if result.withheld:
            hook._complain(self.root, f"encryption at rest is on and its key is locked: {result.withheld} events were "
                                      "recorded without their content; run `agentlog keys unlock`")
        with self._lock:  # counted before the clients hear of it
            self.counts["appends"] += 1
            self.counts["frames"] += len(batch) - len(result.skipped)
            self.counts["already_present"] += len(result.skipped)
            self.counts["acknowledged"] += len(batch)
        started = [e.conn.done_ns for e in batch]
        for entry in batch:
            self._finish(entry.conn, wire.RECORDED, reply=entry.captured.reply)
        now = time.perf_counter_ns()
        with self._lock:
            self._latency.extend((now - t) // 1000 for t in started)
        skipped = set(result.skipped)
        written = [e for i, e in enumerate(batch) if i not in skipped]
        try:
            if written:
                with self._dropped_lock:
                    hook.note_written(self.root, log, [e.captured for e in written])
            for done in written:
                pid = hook.after_record(done.captured, self.root, done.settings)
                if pid is not None:
                    with self._lock:
                        self._children.append(pid)
        except Exception as exc:
            hook._complain(self.root, f"capture server: {type(exc).__name__}: {exc}")

    # The frame of a request may also have been written by the client's fallback (the Python
    # hook), but never before the client started (its captured_at). So the duplicate check of
    # an append need only read what this log gained after an earlier append of ours that ended
    # before then (less a slack for clocks); one mark every half second per log is enough.
    def _since(self, path: str, captured_at: int) -> Tip | None:
        with self._lock:
            marks = self._marks.get(path)
            if not marks:
                return None
            best = None
            for at, tip in marks:
                if at < captured_at - CLOCK_SLACK_US:
                    best = tip
            return best

    def _mark(self, path: str, tip: Tip | None) -> None:
        if tip is None:
            return
        now = time.time_ns() // 1000
        with self._lock:
            marks = self._marks.get(path)
            if marks is None:
                if len(self._marks) >= 4096:
                    old = now - 60_000_000
                    for p in [p for p, m in self._marks.items() if m[-1][0] < old]:
                        del self._marks[p]
                marks = self._marks[path] = deque(maxlen=16)
            if not marks or now - marks[-1][0] >= 500_000:
                marks.append((now, tip))

    def _reap(self) -> None:
        """Collect the transcript imports started for Codex's turn ends."""
        with self._lock:
            children, self._children = self._children, []
        left = []
        for pid in children:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if not done:
                left.append(pid)
        with self._lock:
            self._children += left

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no append is under way, so that what follows an answer (the diagnostic,
        the list of unrecognised events, a transcript import started) is done for every
        client answered so far; False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._sessions:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)

    # -- numbers ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters, and the server time of the last answered requests (request read →
        answer sent, µs)."""
        with self._lock:
            window = sorted(self._latency)
            pending = self._pending
            counts = dict(self.counts)

        def pct(q: float) -> int | None:
            return window[min(len(window) - 1, int(q * len(window)))] if window else None

        return {"pid": os.getpid(), "socket": self.path, "serving": not self._stopping,
                "started_at": self.started_at, "updated_at": time.time(), "pending": pending,
                "server_us_p50": pct(0.50), "server_us_p95": pct(0.95), "window": len(window), **counts}

    def write_stats(self) -> None:
        """``state/hook-server.json`` (for ``agentlog status``); best effort."""
        from agentlog.core.fileio import write_atomic

        try:
            write_atomic(stats_path(self.root), dumps_bytes(self.stats()), FILE_MODE, durable=False)
        except OSError:
            pass


def status(root: str) -> dict[str, Any]:
    """For ``agentlog status``: whether the socket answers, and the numbers the daemon last
    wrote (the server time over the last 1,000 requests)."""
    from agentlog.core.jsonio import read_json

    last = read_json(stats_path(root), None)
    out: dict[str, Any] = {"socket": socket_path(root), "answering": probe(root)}
    if isinstance(last, dict):
        out.update({k: v for k, v in last.items() if k != "socket"})
    return out
