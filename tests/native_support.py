"""Helpers for the native hook client's tests (a test-support module, not a test file).

- :class:`FakeDaemon`: a real Unix socket server on ``<root>/run/hook.sock``
  speaking the hook protocol through ``agentlog.capture.wire``. What it does
  with a request is chosen by the request itself (its first extra argument,
  ``mode=…``), so one server serves runs in any order and at once;
- :data:`RECORDER_C`: a tiny fallback that stands in for the Python hook and
  writes what it received (the three variables, its argv, its stdin) to
  ``$RECORD_TO``; :func:`read_record` reads that back;
- :func:`short_root`: a data root under /tmp short enough for a socket path
  (``sun_path`` holds 108 bytes; pytest's tmp paths can be longer);
- :func:`run_client`: the client run as an agent runs it, with what its fallback got;
- :func:`fuzz`: seeded runs against one daemon with a stated outcome for each.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentlog.capture import wire

KEEP = 16 << 20
"""How much of stdin the client keeps and sends."""

HOOK_MARK = "/agentlog-test/_hook.py"
"""The fallback script path compiled into the recording client (the recorder only records it)."""

RECORDER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(FILE *f, const char *p, size_t n) {
    unsigned char h[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n};
    fwrite(h, 1, 4, f);
    fwrite(p, 1, n, f);
}

static void put_env(FILE *f, const char *key) {
    const char *v = getenv(key);
    static const unsigned char unset[4] = {255, 255, 255, 255};
    if (v)
        put(f, v, strlen(v));
    else
        fwrite(unset, 1, 4, f);
}

int main(int argc, char **argv) {
    const char *to = getenv("RECORD_TO");
    if (!to)
        return 3;
    size_t cap = 1 << 16, len = 0;
    char *in = malloc(cap);
    for (;;) {
        if (len == cap && !(in = realloc(in, cap *= 2)))
            return 4;
        ssize_t n = read(0, in + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    char part[4096];
    snprintf(part, sizeof part, "%s.part", to);
    FILE *f = fopen(part, "wb");
    if (!f)
        return 5;
    put_env(f, "AGENTLOG_HOOK_EVENT_ID");
    put_env(f, "AGENTLOG_HOOK_CAPTURED_AT");
    put_env(f, "AGENTLOG_HOOK_STDIN_BYTES");
    put(f, in, len);
    for (int i = 0; i < argc; i++)
        put(f, argv[i], strlen(argv[i]));
    if (fclose(f) != 0 || rename(part, to) != 0)
        return 6;
    return 0;
}
"""


@dataclass
class Record:
    """What the fallback received."""

    event_id: str | None
    captured_at: str | None
    stdin_bytes: str | None
    stdin: bytes
    argv: list[bytes]


def read_record(path: Path) -> Record:
    data = path.read_bytes()
    items: list[bytes | None] = []
    at = 0
    while at < len(data):
        n = int.from_bytes(data[at : at + 4], "big")
        at += 4
        if n == 0xFFFFFFFF:
            items.append(None)
            continue
        items.append(data[at : at + n])
        at += n

    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode()

    stdin = items[3]
    assert stdin is not None
    return Record(text(items[0]), text(items[1]), text(items[2]), stdin, [a for a in items[4:] if a is not None])


@contextmanager
def short_root() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="al-", dir="/tmp"))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@dataclass
class Seen:
    """A request the daemon decoded, and what it answered."""

    request: wire.Request
    mode: str
    reply: bytes | None  # the 'A' reply sent whole, else None


class FakeDaemon:
    """The capture server's side of the protocol, with misbehaviours on request.

    Modes (``mode=NAME[:ARG]`` as the request's first extra argument; else
    :attr:`mode`): ``answer`` ('A', reply :attr:`reply` or ``ok <event id>``),
    ``fallback`` ('F'), ``raw:<hex>`` (those bytes, then close), ``close``
    (close unanswered), ``never`` (hold the connection until the client
    leaves), ``delay:<ms>`` (answer after that long), ``big`` (announce and
    send a reply over 1 MiB).
    """

    def __init__(self, root: Path, mode: str = "answer") -> None:
        self.mode = mode
        self.reply: bytes | None = None
        self.run_dir = root / "run"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        self.path = self.run_dir / "hook.sock"
        self.seen: dict[str, Seen] = {}
        """By event id."""
        self.by_nonce: dict[str, Seen] = {}
        """By the request's second extra argument when it is ``n=…`` (the fuzz names its runs so)."""
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self._sock.bind(str(self.path))
        finally:
            os.umask(old)
        self._sock.listen(128)
        self._sock.settimeout(0.1)
        self._thread = threading.Thread(target=self._serve, name="fake-daemon", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> FakeDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(wire.REQUEST_DEADLINE_S)
            buf = bytearray()
            try:
                while need := wire.request_bytes_missing(buf):
                    chunk = conn.recv(min(need, 1 << 20))
                    if not chunk:
                        raise wire.WireError("the client left before a whole request")
                    buf += chunk
                request = wire.decode_request(buf)
            except (wire.WireError, OSError) as e:
                with self._lock:
                    self.errors.append(f"{type(e).__name__}: {e}")
                return
            mode = self.mode
            if request.args and request.args[0].startswith("mode="):
                mode = request.args[0][5:]
            seen = Seen(request, mode, None)
            with self._lock:
                self.seen[request.event_id] = seen
                if len(request.args) > 1 and request.args[1].startswith("n="):
                    self.by_nonce[request.args[1]] = seen
            try:
                seen.reply = self._answer(conn, request, mode)
            except OSError:
                return

    def _answer(self, conn: socket.socket, request: wire.Request, mode: str) -> bytes | None:
        name, _, arg = mode.partition(":")
        if name == "delay":
            time.sleep(int(arg) / 1000)
            name = "answer"
        if name == "answer":
            reply = self.reply if self.reply is not None else b"ok " + request.event_id.encode()
            conn.sendall(wire.encode_response(wire.RECORDED, reply))
            return reply
        if name == "fallback":
            conn.sendall(wire.encode_response(wire.FALL_BACK))
        elif name == "raw":
            conn.sendall(bytes.fromhex(arg))
        elif name == "never":
            conn.settimeout(30)
            while conn.recv(1 << 16):
                pass
        elif name == "big":
            n = wire.MAX_REPLY + 1
            conn.sendall(wire.RESPONSE_MAGIC + b"A" + n.to_bytes(4, "big") + b"x" * n)
        elif name != "close":
            raise AssertionError(f"unknown mode {mode!r}")
        return None


# -- running the client ---------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float
    started_us: int
    ended_us: int
    record: Record | None


_runs = iter(range(1 << 62))


def run_client(
    binary: str,
    root: Path | None,
    stdin: bytes | None,
    *args: str | bytes,
    env: dict[str, str] | None = None,
    ack_ms: int | str | None = None,
    cwd: Path | None = None,
    stdout: int = subprocess.PIPE,
    wrap: list[str] | None = None,
) -> Run:
    """Run the client as an agent does. ``stdin`` None: an empty one (/dev/null)."""
    record = Path("/tmp") / f"al-record-{os.getpid()}-{next(_runs)}"
    full_env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "RECORD_TO": str(record)}
    if root is not None:
        full_env["AGENTLOG_HOME"] = str(root)
    if ack_ms is not None:
        full_env["AGENTLOG_HOOK_ACK_MS"] = str(ack_ms)
    full_env.update(env or {})
    started = time.time_ns() // 1000
    t0 = time.monotonic()
    p = subprocess.run([*(wrap or []), binary, *args], input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                       stdout=stdout, stderr=subprocess.PIPE, env=full_env, cwd=cwd, timeout=60)
    elapsed = time.monotonic() - t0
    ended = time.time_ns() // 1000
    got = read_record(record) if record.exists() else None
    record.unlink(missing_ok=True)
    return Run(p.returncode, p.stdout or b"", p.stderr, elapsed, started, ended, got)


# -- fuzz ----------------------------------------------------------------------------------


def _expected_reply(raw: bytes) -> bytes | None:
    """What the client must print for a server that sends ``raw`` and closes (None: fall back)."""
    if len(raw) < 9 or raw[:5] != b"ALR1A":
        return None
    n = int.from_bytes(raw[5:9], "big")
    return raw[9 : 9 + n] if n <= wire.MAX_REPLY and len(raw) >= 9 + n else None


@dataclass
class Case:
    stdin: bytes
    args: list[bytes]
    env: dict[str, str]
    expect: bytes | None  # the reply to print; None: the client must fall back
    may_time_out: bool  # an answer that may come after the deadline


def make_case(seed: int, i: int, ack_ms: int) -> Case:
    rng = random.Random(f"{seed}:{i}")
    pick = rng.random()
    if i % 1000 == 999:  # around the 16 MiB cap, ten times in 10,000
        n = KEEP + rng.choice([-1, 0, 1, rng.randint(2, 3000)])
    elif pick < 0.05:
        n = 0
    elif pick < 0.4:
        n = rng.randint(1, 64)
    elif pick < 0.8:
        n = rng.randint(65, 4096)
    else:
        n = rng.choice([65535, 65536, 65537, 131072, rng.randint(4097, 300_000)])
    shape = rng.random()
    if shape < 0.5:
        stdin = rng.randbytes(n)
    elif shape < 0.75:
        stdin = (b'{"hook_event_name": "PostToolUse", "tool_response": "' + b"\xe2\x82\xac\\\"" * n)[:n]
    else:
        stdin = bytes(n)

    reply = rng.randbytes(rng.choice([1, 2, 100, 4000, 30000]))
    good = wire.encode_response(wire.RECORDED, reply)
    may_time_out = False
    b = rng.random()
    if b < 0.35:
        raw = good
    elif b < 0.40:
        raw = good + rng.randbytes(rng.randint(1, 50))  # junk after a whole answer is never read
    elif b < 0.50:
        raw = wire.encode_response(wire.FALL_BACK)
    elif b < 0.52:
        raw = b"ALR1F" + (5).to_bytes(4, "big") + b"hello"
    elif b < 0.62:
        raw = rng.randbytes(rng.randint(0, 200))
    elif b < 0.72:
        mutated = bytearray(good)
        mutated[rng.randrange(9)] ^= 1 << rng.randrange(8)
        raw = bytes(mutated)
    elif b < 0.82:
        raw = good[: rng.randrange(len(good))]
    else:
        raw = b""
    if b < 0.82:
        mode = "raw:" + raw.hex()
        expect = _expected_reply(raw)
    elif b < 0.84:
        mode, expect = "big", None
    elif b < 0.88:
        mode, expect = "close", None
    elif b < 0.97:
        # Either outcome is right for a late answer (one ready as the deadline's poll returns is
        # taken), but a fallback only once the deadline has passed.
        mode, expect = f"delay:{rng.randint(0, 2 * ack_ms)}", b"ok "
    else:
        mode, expect = "never", None
    may_time_out = expect is not None
    extra = [bytes(c for c in rng.randbytes(rng.randint(0, 12)) if c) for _ in range(rng.randint(0, 3))]
    env = {k: rng.randbytes(rng.randint(0, 30)).replace(b"\0", b"").decode("utf-8", "surrogateescape")
           for k in wire.ENV_KEYS if rng.random() < 0.3}
    return Case(stdin, [f"mode={mode}".encode(), f"n={i}".encode(), *extra], env, expect, may_time_out)


def fuzz(binary: str, recorder: str, root: Path, runs: int, seed: int, ack_ms: int) -> tuple[list[str], Counter[str]]:
    """Run the client ``runs`` times against one daemon: the problems found (none: []), and
    how many runs ended each way ('A', 'fallback')."""
    problems: list[str] = []
    outcomes: Counter[str] = Counter()
    with FakeDaemon(root) as daemon:

        def one(i: int) -> None:
            case = make_case(seed, i, ack_ms)
            args = [b"claude-code", *case.args]
            r = run_client(binary, root, case.stdin, *args, env=case.env, ack_ms=ack_ms, cwd=root)
            outcomes["fallback" if r.record is not None else "A"] += 1
            try:
                check(case, r, args)
            except AssertionError as e:
                problems.append(f"run {i} (seed {seed}): {e}")

        def check(case: Case, r: Run, args: list[bytes]) -> None:
            assert r.returncode == 0, f"exit {r.returncode}, stderr {r.stderr[-500:]!r}"
            assert r.stderr.count(b"\n") <= 1, r.stderr
            got_seen = daemon.by_nonce.get(args[2].decode())
            if got_seen is not None:  # whatever came next, the request was whole and right
                req = got_seen.request
                assert req.payload == case.stdin[:KEEP] and req.stdin_bytes == len(case.stdin)
                assert [a.encode("utf-8", "surrogateescape") for a in req.args] == args[1:]
                assert req.env == case.env
            if r.record is None:  # the 'A' path: exactly the reply, and the daemon had the request
                assert case.expect is not None, "no fallback where one was due"
                assert got_seen is not None
                if case.expect == b"ok ":
                    assert r.stdout == b"ok " + got_seen.request.event_id.encode()
                else:
                    assert r.stdout == case.expect
                return
            assert r.stdout == b"", "a fallback printed on stdout"
            if case.expect is not None:
                assert case.may_time_out and r.elapsed >= ack_ms / 1000, "fell back where an answer was due"
            rec = r.record
            assert rec.stdin == case.stdin[:KEEP] and rec.stdin_bytes == str(len(case.stdin))
            assert rec.argv == [recorder.encode(), b"-I", b"-S", HOOK_MARK.encode(), *args]
            assert rec.event_id is not None and wire.is_uuid7(rec.event_id.encode())
            if got_seen is not None:
                assert got_seen.request.event_id == rec.event_id

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(one, range(runs)))
    return problems, outcomes
