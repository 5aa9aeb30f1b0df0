"""Helpers for the native hook client's tests (a test-support module, not a test file).

- :class:`FakeDaemon`: a real Unix socket server on ``<root>/run/hook.sock``
  speaking the hook protocol through ``agentlog.capture.wire``. What it does
  with a request is chosen by the request itself (its first extra argument,
  ``mode=…``), so one server serves runs in any order and at once;
- :data:`RECORDER_C`: a tiny fallback that stands in for the Python hook and
  writes what it received (the three variables, its argv, its stdin) to
  ``$RECORD_TO``; :func:`read_record` reads that back;
- :func:`short_root`: a data root under /tmp short enough for a socket path
  (``sun_path`` holds 108 bytes; pytest's tmp paths can be longer).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentlog.capture import wire

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
