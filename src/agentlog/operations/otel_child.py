"""The daemon's OTLP receiver: ``agentlog otel serve`` as a child process.

With the ``otel_receiver`` setting on, ``agentlog daemon run`` starts
``python -m agentlog otel serve --port <otel_port>`` beside its capture server,
starts it again when it ends (at most every :data:`RESTART_EVERY_S`), and
stops it (SIGINT: the receiver writes its receipts) when the daemon stops. The
child is killed with the daemon (``AGENTLOG_OTEL_PARENT``: Linux's parent-death
signal), so a daemon killed with -9 leaves no receiver holding the port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Final

RESTART_EVERY_S: Final = 5.0
PARENT_ENV: Final = "AGENTLOG_OTEL_PARENT"


def wanted(root: str) -> int | None:
    """The port to serve on when the ``otel_receiver`` setting is on, else None."""
    from agentlog.core.config import load

    cfg = load(root)
    return int(cfg.get("otel_port", 4318)) if cfg.get("otel_receiver") else None


class OtelChild:
    """``agentlog otel serve`` run by the daemon."""

    def __init__(self, root: str, port: int, log_file: str) -> None:
        self.root = root
        self.port = port
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        env = {**os.environ, "AGENTLOG_HOME": self.root, PARENT_ENV: str(os.getpid())}
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "agentlog", "otel", "serve", "--port", str(self.port)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
        self._started_at = time.monotonic()

    def restart_if_ended(self) -> bool:
        """Start it again when it ended and the last start is old enough; whether it did."""
        if self.proc is None or self.proc.poll() is None:
            return False
        if time.monotonic() - self._started_at < RESTART_EVERY_S:
            return False
        self.start()
        return True

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
