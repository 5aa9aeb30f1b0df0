"""The capture server: ``agentlog daemon run`` records hook payloads sent by the native hook.

The native hook (``agentlog-hook``, a small C program) sends each payload over
``<data root>/run/hook.sock`` instead of starting a Python interpreter; this server
turns it into exactly the frame the Python hook would have written
(``capture.hook.build`` and what ``capture.hook.main`` does around it), appends it,
and answers 'A' with the agent's reply only once the append returned (after its
fsync when durability is strict). The protocol and the rules both ends follow are
in /work/notes/hook-wire.md; what the server guarantees is in docs/hook-server.md.

Threads: one reads requests (a selector over every connection, each with its 5 s
deadline and the size bounds) and hands complete ones to a few workers; a worker
builds the event, then commits it through its session's queue. Group commit: the
first worker to reach an idle session appends; requests for that session arriving
meanwhile wait in its queue and go in the committer's next append, all in one
``SessionLog.append`` (one fsync). At most ``max_pending`` connections are taken at
once; beyond that, and while stopping, a connection is answered 'F' at once.

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

from agentlog.capture import hook
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

__all__ = ["CaptureServer", "CaptureServerError", "Request", "RequestError", "RequestReader", "probe", "response",
           "socket_path", "stats_path", "status"]

STATS_NAME = "hook-server.json"
READ_TIMEOUT_S = 5.0
MAX_PENDING = 1000
MAX_BUFFERED = 256 << 20  # request bytes held at once, all connections together
LATENCY_WINDOW = 1000
CLOCK_SLACK_US = 2_000_000  # how far the client's clock may be from ours (see _since)


def stats_path(root: str) -> str:
    return os.path.join(state_dir(root), STATS_NAME)


# -- the request ---------------------------------------------------------------------------
# A private reading of the wire format (hook-wire.md), to be replaced by agentlog.capture.wire,
# the encoder/decoder that comes with the native hook.

REQUEST_MAGIC = b"ALH1"
RESPONSE_MAGIC = b"ALR1"
MAX_FIELDS = 64
MAX_REQUEST = (16 << 20) + (4 << 20)
MAX_REPLY = 1 << 20
ENV_KEYS = frozenset({"AGENTLOG_CAPTURE_MODE", "AGENTLOG_DURABILITY", "CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR",
                      "GEMINI_PROJECT_DIR"})
AGENT, ARG, ENV, CWD, EVENT_ID, CAPTURED_AT, STDIN_BYTES, PAYLOAD = range(1, 9)
# tag: (most bytes, fewest times, most times)
_FIELDS: dict[int, tuple[int, int, int]] = {
    AGENT: (64, 1, 1), ARG: (1 << 20, 0, 32), ENV: (64 << 10, 0, 16), CWD: (64 << 10, 0, 1),
    EVENT_ID: (36, 1, 1), CAPTURED_AT: (19, 1, 1), STDIN_BYTES: (19, 1, 1), PAYLOAD: (16 << 20, 1, 1),
}


class RequestError(ValueError):
    """A request that breaks the protocol's rules: closed without an answer."""


class Probe(RequestError):
    """A request of no fields: what ``probe`` sends to see the server read and close."""


class Request:
    """One decoded request."""

    __slots__ = ("agent", "args", "env", "cwd", "event_id", "captured_at", "stdin_bytes", "payload")

    def __init__(self, agent: str, args: list[str], env: dict[str, str], cwd: str | None, event_id: str,
                 captured_at: int, stdin_bytes: int, payload: bytes) -> None:
        self.agent = agent
        self.args = args
        self.env = env
        self.cwd = cwd
        self.event_id = event_id
        self.captured_at = captured_at
        self.stdin_bytes = stdin_bytes
        self.payload = payload


class RequestReader:
    """Reads one request as its bytes arrive; ``feed`` is True once it is whole."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self._n = -1
        self._pos = 0
        self._fields: list[tuple[int, int, int]] = []  # tag, offset, length
        self._counts: dict[int, int] = {}

    def feed(self, data: bytes) -> bool:
        buf = self.buf
        buf += data
        if len(buf) > MAX_REQUEST:
            raise RequestError("request over 20 MiB")
        if self._n < 0:
            if buf[:4] != REQUEST_MAGIC[: len(buf[:4])]:
                raise RequestError("bad magic")
            if len(buf) < 8:
                return False
            n = int.from_bytes(buf[4:8], "big")
            if n == 0:
                raise Probe("no fields")
            if n > MAX_FIELDS:
                raise RequestError(f"{n} fields")
            self._n, self._pos = n, 8
        while len(self._fields) < self._n:
            pos = self._pos
            if len(buf) - pos < 5:
                return False
            tag = buf[pos]
            length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
            rule = _FIELDS.get(tag)
            if rule is None:
                raise RequestError(f"unknown tag {tag}")
            if length > rule[0] or self._counts.get(tag, 0) >= rule[2]:
                raise RequestError(f"tag {tag}: too long or too many")
            if len(buf) - pos - 5 < length:
                return False
            self._fields.append((tag, pos + 5, length))
            self._counts[tag] = self._counts.get(tag, 0) + 1
            self._pos = pos + 5 + length
        if len(buf) != self._pos:
            raise RequestError("bytes after the request")
        return True

    def request(self) -> Request:
        """The whole request, checked against every rule (RequestError otherwise)."""
        for tag, (_, least, _) in _FIELDS.items():
            if self._counts.get(tag, 0) < least:
                raise RequestError(f"tag {tag} missing")
        buf = self.buf
        one: dict[int, bytes] = {}
        args: list[str] = []
        env: dict[str, str] = {}
        for tag, off, length in self._fields:
            value = bytes(buf[off : off + length])
            if tag == PAYLOAD:
                one[tag] = value
                continue
            if b"\0" in value:
                raise RequestError(f"tag {tag}: a NUL byte")
            if tag == ARG:
                args.append(value.decode("utf-8", "surrogateescape"))
            elif tag == ENV:
                key, eq, val = value.decode("utf-8", "surrogateescape").partition("=")
                if not eq or key not in ENV_KEYS or key in env:
                    raise RequestError(f"env field {key!r}")
                env[key] = val
            else:
                one[tag] = value
        event_id = one[EVENT_ID].decode("ascii", "replace")
        at, total = one[CAPTURED_AT], one[STDIN_BYTES]
        if not hook.is_event_id(event_id) or not at.isdigit() or not total.isdigit():
            raise RequestError("event id, captured_at or stdin bytes malformed")
        payload = one[PAYLOAD]
        if int(total) < len(payload):
            raise RequestError("stdin bytes less than the payload")
        cwd = one[CWD].decode("utf-8", "surrogateescape") if CWD in one else None
        return Request(one[AGENT].decode("utf-8", "surrogateescape"), args, env, cwd, event_id, int(at), int(total),
                       payload)


def response(status: bytes, reply: bytes = b"") -> bytes:
    return RESPONSE_MAGIC + status + len(reply).to_bytes(4, "big") + reply


# -- the server ----------------------------------------------------------------------------


class _Conn:
    __slots__ = ("sock", "reader", "deadline", "done_ns", "request", "held")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.held = 0  # request bytes counted in the server's buffered total
        self.reader: RequestReader | None = RequestReader()
        self.deadline = time.monotonic() + READ_TIMEOUT_S
        self.done_ns = 0
        self.request: Request | None = None


class _Entry:
    """A built event waiting for its session's append."""

    __slots__ = ("conn", "captured", "settings", "data", "log")

    def __init__(self, conn: _Conn, captured: hook.Captured, settings: dict[str, Any], log: SessionLog) -> None:
        self.conn = conn
        self.captured = captured
        self.settings = settings
        self.data = dumps_bytes(captured.event)
        self.log = log


class CaptureServer:
    """Serves ``<root>/run/hook.sock`` until ``stop()``; see the module's docstring."""

    def __init__(self, root: str, *, workers: int = 6, max_pending: int = MAX_PENDING,
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
        self._work: queue.SimpleQueue[_Conn | None] = queue.SimpleQueue()
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
                self._drop(sel, conns, c, answer=b"F")
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
                self._send(sock, response(b"F"))
                self._count("fell_back")
                continue
            self._count("accepted")
            c = _Conn(sock)
            conns[sock.fileno()] = c
            sel.register(sock, selectors.EVENT_READ, c)

    def _read(self, sel: selectors.BaseSelector, conns: dict[int, _Conn], c: _Conn) -> None:
        assert c.reader is not None
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
            self._drop(sel, conns, c, answer=b"F", extra=len(data))
            return
        try:
            whole = c.reader.feed(data)
            if whole:
                c.request = c.reader.request()
        except RequestError as e:
            self._count("probes" if isinstance(e, Probe) else "rejected")
            self._drop(sel, conns, c)
            return
        if whole:
            c.done_ns = time.perf_counter_ns()
            c.held, c.reader = len(c.reader.buf), None  # the request holds what it needs
            sel.unregister(c.sock)
            del conns[c.sock.fileno()]
            self._work.put(c)

    def _drop(self, sel: selectors.BaseSelector, conns: dict[int, _Conn], c: _Conn, answer: bytes | None = None,
              extra: int = 0) -> None:
        sel.unregister(c.sock)
        del conns[c.sock.fileno()]
        self._finish(c, answer, extra)

    def _finish(self, c: _Conn, answer: bytes | None, extra: int = 0, reply: bytes = b"") -> None:
        """Answer (or not) and close; the connection no longer counts as pending."""
        held = c.held + extra + (len(c.reader.buf) if c.reader is not None else 0)
        c.reader = None
        c.request = None
        if answer is not None:
            self._send(c.sock, response(answer, reply))
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
            c = self._work.get()
            if c is None:
                return
            if self._stopping:
                self._count("fell_back")
                self._finish(c, b"F")
                continue
            try:
                entry = self._build(c)
            except Exception as e:  # a bug here: nothing was written, the client falls back
                self._count("errors")
                hook._complain(self.root, f"capture server: {type(e).__name__}: {e}")
                self._finish(c, b"F")
                continue
            try:
                self._commit(entry)
            except Exception as e:  # never expected (_append answers its own failures): say so, go on
                self._count("errors")
                hook._complain(self.root, f"capture server: {type(e).__name__}: {e}")

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
        return _Entry(c, captured, settings, hook.session_log(captured, self.root, settings["durability"]))

    def _commit(self, entry: _Entry) -> None:
        """Group commit: append now if nobody is appending to this session, else leave the
        entry to the one who is (it takes everything queued in its next append)."""
        key = entry.log.path
        with self._lock:
            waiting = self._sessions.get(key)
            if waiting is not None:
                waiting.append(entry)
                return
            self._sessions[key] = []
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
                    self._finish(e.conn, b"F")

    def _append(self, batch: list[_Entry]) -> None:
        log = batch[0].log
        if log.durability != "strict" and any(e.log.durability == "strict" for e in batch):
            log = next(e.log for e in batch if e.log.durability == "strict")
        events = [e.captured.event for e in batch]
        try:
            result = log.append([e.data for e in batch], dedupe=[ev["event_id"] for ev in events],
                                since=self._since(log.path, min(ev["captured_at"] for ev in events)))
        except Exception as e:  # nothing acknowledged: every client falls back (and dedupes)
            self._count("errors")
            self._count("fell_back", len(batch))
            for entry in batch:
                self._finish(entry.conn, b"F")
            hook._complain(self.root, f"capture server could not append to {log.path}: {type(e).__name__}: {e}")
            return
        self._mark(log.path, result.tip)
        with self._lock:  # counted before the clients hear of it
            self.counts["appends"] += 1
            self.counts["frames"] += len(batch) - len(result.skipped)
            self.counts["already_present"] += len(result.skipped)
            self.counts["acknowledged"] += len(batch)
        started = [e.conn.done_ns for e in batch]
        for entry in batch:
            self._finish(entry.conn, b"A", reply=entry.captured.reply)
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
