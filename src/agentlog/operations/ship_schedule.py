"""The daemon's ship passes: ``agentlog ship`` on a schedule (issue 30: "ship is never
run from the hook; the daemon can run it on a schedule").

When the data root is enrolled with a vault (``core.paths.vault_enrolled``: the
enrolment's key file is there), the daemon starts a pass soon after it starts and then
every ``ship_minutes`` (the setting; 0: never), with ``--prune-after`` when
``ship_prune_after_days`` is set. A pass is the command a person runs,
``<this interpreter> -m agentlog ship --json``, as a child process:

- the daemon does not import the vault package (``operations`` and ``vault`` are one rank,
  tests/test_layers.py), nor its crypto and HTTP stack;
- a pass that hangs on the network is killed after ``TIMEOUT_S`` (a ship pass is
  crash-safe: the next one resumes where it stopped and sends each frame exactly once,
  docs/vault.md), and a pass that fails cannot take the daemon with it;
- it is started from the daemon's lowest-priority worker thread (``daemon.run``), and on
  Linux a child inherits the niceness of the thread that starts it, so the pass runs at
  niceness 19 like ingest; in a session of its own, so a Ctrl-C meant for a foreground
  daemon reaches the daemon only, which then stops the pass itself.

The daemon's loop never waits for it: it starts a pass when one is :meth:`ShipSchedule.due`
and :meth:`~ShipSchedule.poll`\\ s it on every round. Never two at once; the next pass is due
``ship_minutes`` after the previous one started (or when it ends, if it ran longer). Each
outcome is one line of the daemon's log and the file ``state/ship-last.json`` (0600), which
``agentlog status`` and ``agentlog doctor`` show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import IO, Any, Callable

from agentlog.core.jsonio import loads, read_json
from agentlog.core.paths import ensure_dir, state_dir, vault_enrolled

DEFAULT_EVERY_S = 300.0
"""The ``ship_minutes`` default (5)."""
TIMEOUT_S = 600.0
"""A pass still running after this long is killed."""
STOP_GRACE_S = 10.0
"""When the daemon stops, a running pass gets SIGTERM and this long before SIGKILL."""
LAST_NAME = "ship-last.json"


def last_path(root: str) -> str:
    return os.path.join(state_dir(root), LAST_NAME)


def last_ship(root: str) -> dict[str, Any] | None:
    """What the daemon's last ship pass did (``state/ship-last.json``); None before the first."""
    doc = read_json(last_path(root), None)
    return doc if isinstance(doc, dict) else None


def settings(root: str) -> tuple[float, float | None]:
    """(seconds between passes, ``--prune-after`` seconds or None) from the ``ship_minutes`` and
    ``ship_prune_after_days`` settings. ConfigError for a bad config.toml."""
    from agentlog.core.config import load as load_config

    values = load_config(root)
    days = float(values.get("ship_prune_after_days", 0))
    return float(values.get("ship_minutes", DEFAULT_EVERY_S / 60)) * 60, days * 86400 if days > 0 else None


def command(prune_after_s: float | None = None) -> list[str]:
    """``<this interpreter> -m agentlog ship --json [--prune-after SECONDS]``."""
    argv = [sys.executable, "-m", "agentlog", "ship", "--json"]
    if prune_after_s is not None:
        argv += ["--prune-after", f"{prune_after_s:f}"]  # plain seconds, never an exponent
    return argv


def summarize(code: int | None, out: bytes, err: bytes) -> dict[str, Any]:
    """A pass's outcome from its exit code and output: ``status`` ('ok' or 'unreachable' as
    ship says it, else 'failed'), the sessions per ship status, the frames sent, and one
    line of ``summary``."""
    try:
        doc = loads(out) if out.strip() else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("chains"), list):
        chains = [c for c in doc["chains"] if isinstance(c, dict)]
        counts: dict[str, int] = {}
        for c in chains:
            counts[str(c.get("status"))] = counts.get(str(c.get("status")), 0) + 1
        frames = sum(c["frames"] for c in chains if isinstance(c.get("frames"), int))
        status = str(doc.get("status", "failed"))
        summary = status
        if chains:
            parts = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
            summary += f", {frames} frame{'' if frames == 1 else 's'} sent; sessions: {parts}"
        elif status == "ok":
            summary += ", no sessions"
        if doc.get("message"):
            summary += f": {doc['message']}"
        return {"status": status, "exit_code": code, "sessions": counts, "frames": frames, "summary": summary}
    lines = [line.strip() for line in err.decode(errors="replace").splitlines() if line.strip()]
    why = lines[-1] if lines else "no output"
    return {"status": "failed", "exit_code": code, "sessions": {}, "frames": 0, "summary": f"failed (exit {code}): {why}"}


class ShipSchedule:
    """When to start a ship pass, and the one running (see the module docstring).

    ``every_s`` 0 turns it off. The first pass is due at once; ``argv`` replaces the
    command (tests); ``log`` gets one line per outcome."""

    def __init__(self, root: str, every_s: float, *, log: Callable[[str], None], prune_after_s: float | None = None,
                 timeout_s: float = TIMEOUT_S, argv: list[str] | None = None) -> None:
        self.root = root
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.argv = argv or command(prune_after_s)
        self._log = log
        self.next_at = time.monotonic()
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None

    def due(self, now: float) -> bool:
        """Whether to start a pass at ``now`` (``time.monotonic()``): on, none running, its
        time has come, and the root is enrolled (else it looks again an interval later)."""
        if self.every_s <= 0 or self.proc is not None or now < self.next_at:
            return False
        if not vault_enrolled(self.root):
            self.next_at = now + self.every_s
            return False
        return True

    def start(self) -> None:
        """Start a pass (returns at once). One that cannot start is logged; the next is due
        an interval later."""
        self._started = time.monotonic()
        self.next_at = self._started + self.every_s
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # files, not pipes: nothing waits on a full pipe
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         env={**os.environ, "AGENTLOG_HOME": self.root}, start_new_session=True)
        except OSError as e:
            out.close()
            err.close()
            self._finish({"status": "failed", "exit_code": None, "sessions": {}, "frames": 0,
                          "summary": f"not started: {e}"})
            return
        self._out, self._err = out, err

    def poll(self) -> None:
        """Never blocks: when the pass has ended, log its outcome; past ``timeout_s``, kill it."""
        if self.proc is None:
            return
        code = self.proc.poll()
        if code is not None:
            self._finish(self._outcome(code))
        elif time.monotonic() - self._started >= self.timeout_s:
            self.proc.kill()
            code = self.proc.wait()
            self._finish(self._outcome(code, ("timeout", f"killed after {self.timeout_s:g} s (the next pass resumes)")))

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End a running pass: SIGTERM, ``grace_s`` to end, then SIGKILL (a pass cut short
        resumes at the next one). Blocks at most about ``grace_s``."""
        if self.proc is None or self.proc.poll() is not None:
            self.poll()
            return
        self.proc.terminate()
        try:
            code = self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._finish(self._outcome(code, ("stopped", "stopped with the daemon (the next pass resumes)")))

    def _outcome(self, code: int, cut_short: tuple[str, str] | None = None) -> dict[str, Any]:
        """The pass's outcome; ``cut_short`` (status, summary) names why it was ended, unless
        it had finished its output by then."""
        out = err = b""
        for f in (self._out, self._err):
            if f is not None:
                f.seek(0)
        if self._out is not None:
            out = self._out.read()
        if self._err is not None:
            err = self._err.read()
        res = summarize(code, out, err)
        if cut_short is not None and res["status"] == "failed":
            res.update(status=cut_short[0], summary=cut_short[1])
        return res

    def _finish(self, res: dict[str, Any]) -> None:
        from agentlog.core.fileio import write_json_atomic
        from agentlog.core.timefmt import format_us

        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None
        self.proc = None
        res = {"at": format_us(time.time_ns() // 1000), "seconds": round(time.monotonic() - self._started, 3), **res}
        self._log(f"ship: {res['summary']}")
        try:
            ensure_dir(state_dir(self.root))
            write_json_atomic(last_path(self.root), res, durable=False)
        except OSError as e:
            self._log(f"ship: {last_path(self.root)} not written: {e}")
