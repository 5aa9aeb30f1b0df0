"""The daemon's OpenTelemetry children: the OTLP receiver and the streaming export.

With the ``otel_receiver`` setting on, ``agentlog daemon run`` starts
``python -m agentlog otel serve --port <otel_port>`` beside its capture server,
starts it again when it ends (at most every :data:`RESTART_EVERY_S`), and
stops it (SIGINT: the receiver writes its receipts) when the daemon stops. The
child is killed with the daemon (``AGENTLOG_OTEL_PARENT``: Linux's parent-death
signal), so a daemon killed with -9 leaves no receiver holding the port.

With ``otel_export_endpoint`` set, every ``otel_export_seconds`` the daemon runs
``agentlog otel export --no-ingest --since <the last pass's start, less a minute>``
(:class:`OtelStreamer`): the sessions active since then are sent again whole. The
export is idempotent (span ids derive from agentlog's ids), so a session sent twice
is the same spans; a backend that keeps a span's first version (Phoenix) shows a
still-running turn as it was when first sent.
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


def export_settings(root: str) -> tuple[str, float] | None:
    """(endpoint, seconds) when ``otel_export_endpoint`` is set, else None."""
    from agentlog.core.config import load

    cfg = load(root)
    endpoint = str(cfg.get("otel_export_endpoint") or "")
    return (endpoint, float(cfg.get("otel_export_seconds", 60))) if endpoint else None


class OtelStreamer:
    """The daemon's export passes, one process at a time."""

    MARGIN_S: Final = 60.0

    def __init__(self, root: str, endpoint: str, every_s: float, log_file: str) -> None:
        self.root = root
        self.endpoint = endpoint
        self.every_s = every_s
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_start: float | None = None
        """Wall time of the last pass's start (None: none yet: the first sends every session)."""
        self._started_mono = -1e18
        self._pass_start = 0.0
        self.passes = 0

    def poll(self) -> str | None:
        """Start a pass when one is due and none runs; a line for the daemon's log when one ended."""
        note = None
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            if code == 0:
                self.last_start = self._pass_start
            note = f"otel export pass ended with exit {code}"
            self.proc = None
            self.passes += 1
        if self.proc is None and time.monotonic() - self._started_mono >= self.every_s:
            self._start()
        return note

    def _start(self) -> None:
        argv = [sys.executable, "-m", "agentlog", "otel", "export", "--no-ingest", "--endpoint", self.endpoint]
        if self.last_start is not None:
            argv += ["--since", str(int(self.last_start - self.MARGIN_S))]
        self._pass_start = time.time()
        self._started_mono = time.monotonic()
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                         env={**os.environ, "AGENTLOG_HOME": self.root})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
