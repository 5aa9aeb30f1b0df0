"""The capture server as a process of its own: ``python -m agentlog.capture.serve ROOT``.

``agentlog daemon run`` starts it as a child (:class:`CaptureProcess`) rather than in
its own process, because the daemon's own work — ingest, the projection, the search
index — is Python that holds the interpreter lock for tens to hundreds of milliseconds
after every burst of hooks, exactly when hooks are waiting for their answers. Here the
server shares the interpreter with nothing, and it loads only the hook path's modules
(no DuckDB, Arrow or Delta).

The child serves until its standard input reaches end of file (the daemon closed it,
or died: a daemon killed with -9 leaves no server behind; on Linux the child is
killed with it at once, :func:`die_with_parent`) or it gets SIGTERM; it
writes ``state/hook-server.json`` every second. It exits 0 after a clean stop, 3 when
the server cannot start (the reason on stderr, which the daemon logs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

STATS_EVERY_S = 1.0
START_WAIT_S = 15.0
"""How long the daemon waits for a new child to answer on the socket."""
RESTART_EVERY_S = 5.0
"""The daemon starts an ended child again at most this often."""


PARENT_ENV = "AGENTLOG_CAPTURE_PARENT"
"""The daemon's pid, which the child dies with (:func:`die_with_parent`)."""


def die_with_parent(parent: int | None) -> bool:
    """Linux: be killed (SIGKILL) the moment the daemon dies, so that no hook is served by
    an orphan while it notices the end of its stdin (clients not yet answered fall back,
    as when the daemon is killed; nothing answered is lost: answers follow the append).
    False when the daemon is already gone. Elsewhere (or without prctl) the end of stdin
    alone stops the child."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return parent is None or os.getppid() == parent


def serve(root: str, stdin: IO[bytes]) -> int:
    from agentlog.capture.server import CaptureServer, CaptureServerError

    parent = os.environ.get(PARENT_ENV, "")
    if not die_with_parent(int(parent) if parent.isdigit() else None):
        sys.stderr.write("capture server not started: the daemon that started it is gone\n")
        return 3
    server = CaptureServer(root)
    try:
        server.start()
    except (CaptureServerError, OSError) as e:
        sys.stderr.write(f"capture server not started: {e}\n")
        return 3
    done = threading.Event()

    def watch_stdin() -> None:
        try:
            while stdin.read(4096):
                pass
        except (OSError, ValueError):
            pass
        done.set()

    signal.signal(signal.SIGTERM, lambda _s, _f: done.set())
    signal.signal(signal.SIGINT, lambda _s, _f: done.set())
    threading.Thread(target=watch_stdin, name="agentlog-capture-parent", daemon=True).start()
    try:
        while not done.wait(STATS_EVERY_S):
            server.write_stats()
    finally:
        server.stop()
        server.write_stats()
    return 0


class CaptureProcess:
    """The daemon's handle on its capture server child."""

    def __init__(self, root: str, log_file: str) -> None:
        self.root = root
        self.log_file = log_file
        """Where the child's stderr goes (the daemon's log): why it could not start, if it cannot."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_start = 0.0

    def start(self) -> bool:
        """Start the child and wait until it answers on the socket; False when it exits or
        does not answer in time (it is then stopped)."""
        from agentlog.capture.hook_socket import probe

        self.last_start = time.monotonic()
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "agentlog.capture.serve", self.root],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                                         close_fds=True, env={**os.environ, PARENT_ENV: str(os.getpid())})
        while time.monotonic() - self.last_start < START_WAIT_S:
            if self.proc.poll() is None and probe(self.root, timeout=0.5):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        return False

    def restart_if_ended(self, every: float = RESTART_EVERY_S) -> bool | None:
        """Start the child again when it ended, at most once every ``every`` seconds: None
        when nothing was done, else whether it answers again."""
        if self.alive() or time.monotonic() - self.last_start < every:
            return None
        return self.start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """Close the child's stdin (it stops: pending requests answered 'F', the rest
        written) and wait for it; kill it past ``timeout``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m agentlog.capture.serve ROOT\n")
        return 2
    return serve(os.path.abspath(argv[0]), sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["CaptureProcess", "serve"]
