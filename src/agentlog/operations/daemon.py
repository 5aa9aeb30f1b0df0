"""The background ingester: ``agentlog daemon run|start|stop|status``.

It polls the logs directory (the size and mtime of every log, one ``stat``
each) every ``interval`` seconds and ingests what changed once the logs were
still between two looks (at the latest ``max_lag`` seconds after the change
was seen: :class:`Settling` says why), so a hook's event reaches the store
within about a second of the agent's last hook; every
``compact_every`` seconds it compacts the store. While frames arrive it signs
a checkpoint of the Merkle tree every ``checkpoint_every`` seconds (the
``checkpoint_minutes`` setting, 5 by default), only when the tree grew
(``operations.checkpoints.Periodic``), and once more when it stops. It writes its pid to
``state/daemon.pid`` under an exclusive lock (a second daemon refuses to
start), logs to ``state/daemon.log``, and on SIGTERM or SIGINT finishes with
one last ingest. Hooks never depend on it: they only append to logs.

With the ``capture_server`` setting (on by default) it also serves the native hook
on ``<data root>/run/hook.sock`` (``capture/server.py``, docs/hook-path.md), in a
child process of its own (``capture/serve.py``: the daemon's ingest and projection
hold the interpreter lock for long stretches, exactly when hooks wait), started
again if it ends. The server's counters and its time per request (p50/p95 of the
last 1,000) go to ``state/hook-server.json`` every second, for ``agentlog status``.
Ingest, the projection and checkpoints run in a worker thread at the lowest CPU
priority, so that on a small machine they yield to hooks and the capture server; the
calling thread keeps its priority (it starts the server again when it ends: a child
inherits the niceness of the thread that starts it).
A server that cannot start (an unsafe run directory, say) is logged, and the daemon
goes on without it: the native hook then falls back to the Python one.

After an ingest pass that added events it runs the incremental memory check
(``memory/watch.py``, docs/memory.md "When it runs"): only the memories those events, or
a moved ``HEAD`` of the repositories they came from, can touch; at most a few seconds a
pass (what is left is checked next pass); a failure is logged and ingest goes on.

When the data root is enrolled with a vault (``agentlog enroll``) it ships: every
``ship_minutes`` (the setting, 5 by default; 0: never), the first time soon after it
starts, it runs ``agentlog ship --json`` as a child process at the lowest priority,
never waiting for it and never two at once (``operations/ship_schedule.py`` says why
a process); each outcome is a line of its log and ``state/ship-last.json``. On
SIGTERM a running pass gets a few seconds, then is killed (the next pass resumes it).
Hooks never ship.

``daemon install|uninstall`` (``store/service.py``) runs it as a login
service (systemd --user / launchd). Not built yet: a file-system watcher
(inotify/FSEvents) instead of polling.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from agentlog.core import AgentlogError
from agentlog.core.locks import Busy
from agentlog.log.layout import iter_logs
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.store.compact import CompactBusy, compact
from agentlog.core.atrest import AtRestLockedError
from agentlog.store.ingest import IngestReport, ingest, load_positions, log_id

if TYPE_CHECKING:
    from agentlog.capture.serve import CaptureProcess
    from agentlog.operations.checkpoints import Periodic
    from agentlog.operations.otel_child import OtelChild, OtelStreamer
    from agentlog.operations.ship_schedule import ShipSchedule

T = TypeVar("T")

PID_NAME = "daemon.pid"
SETTLE_S = 0.2
"""Ingest once the logs have been still this long (:class:`Settling`)."""
MAX_LAG_S = 3.0
"""... or this long after a change was first seen, if they never are."""
LOG_NAME = "daemon.log"


class DaemonRunning(Busy):
    """Another daemon holds the pid file lock."""


def pid_path(root: str) -> str:
    return os.path.join(state_dir(root), PID_NAME)


def log_path(root: str) -> str:
    return os.path.join(state_dir(root), LOG_NAME)


def _fingerprint(root: str) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in iter_logs(root):
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _log(root: str, message: str) -> None:
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}\n"
    fd = os.open(log_path(root), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def ingested_through(root: str) -> Callable[[str, str, int], bool]:
    """``may_seal`` for sealing: only what the store has already ingested is sealed."""
    positions, _, _ = load_positions(root)

    def may_seal(provider: str, key: str, end_offset: int) -> bool:
        pos = positions.get(log_id(provider, key))
        return pos is not None and pos.offset >= end_offset

    return may_seal


def lower_priority() -> None:
    """Run the calling thread at the lowest CPU priority (Linux: niceness is
    per thread), so background sealing and compaction yield to ingest on a
    small machine. Best effort: elsewhere it does nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def maintain(root: str) -> None:
    """The daemon's background work, beside ingest: seal idle logs the store
    has ingested, apply the ``retention_days`` setting (``agentlog purge``),
    then compact and vacuum. Failures are logged, never raised
    (it is retried next time)."""
    from agentlog.core.config import load as load_config
    from agentlog.log.seal import SealBusy, seal_idle

    lower_priority()

    try:
        idle = float(load_config(root).get("seal_idle_hours", 24)) * 3600
        results = seal_idle(root, idle_seconds=idle, may_seal=ingested_through(root), lock_timeout=0.0)
        sealed = [r for r in results if r.status == "sealed"]
        if sealed:
            _log(root, f"sealed {len(sealed)} idle logs")
    except SealBusy:
        pass
    except Exception as e:
        _log(root, f"sealing failed: {type(e).__name__}: {e}")
    try:
        from agentlog.operations.purge import PurgeBusy, purge_retention

        purged = purge_retention(root)
        if purged is not None and (purged.frames or purged.skipped):
            _log(root, f"retention: purged {purged.frames} frames older than {purged.selector.get('retention_days')} days"
                       f" from {len(purged.logs)} logs; {purged.skipped} logs skipped")
    except PurgeBusy:
        pass
    except Exception as e:
        _log(root, f"retention purge failed: {type(e).__name__}: {e}")
    try:
        c = compact(root, lock_timeout=0.0)
        _log(root, f"compacted: files {c.files_before} -> {c.files_after}, vacuumed {c.files_vacuumed}")
    except CompactBusy:
        pass
    except Exception as e:
        _log(root, f"compaction failed: {type(e).__name__}: {e}")


def _checkpoint(root: str, periodic: Periodic, final: bool = False) -> None:
    """The periodic checkpoint (or, with ``final``, one if the tree grew at all); failures are
    logged, never raised (a tree that does not extend the newest checkpoint is refused there)."""
    from agentlog.operations.checkpoints import checkpoint_if_grown

    try:
        made = checkpoint_if_grown(root) if final and periodic.every_s > 0 else periodic.tick(root)
        if made is not None:
            _log(root, f"checkpoint: tree size {made.checkpoint.size}, {made.name}")
    except Exception as e:
        _log(root, f"checkpoint failed: {type(e).__name__}: {e}")


_LOCKED_SAID: set[str] = set()


def _ingest_unless_locked(root: str) -> IngestReport:
    """The pass's ingest; while encryption at rest is on and its key locked, none (a busy
    report, so the next pass tries again) and one line in the daemon's log saying why."""
    try:
        report = ingest(root, lock_timeout=0.0)
    except AtRestLockedError as e:
        if root not in _LOCKED_SAID:
            _LOCKED_SAID.add(root)
            _log(root, f"not ingesting: {e}")
        report = IngestReport()
        report.busy = True
        return report
    _LOCKED_SAID.discard(root)
    return report


def check_memories(root: str) -> bool:
    """The incremental memory check after an ingest pass that added events
    (``memory/watch.py``), bounded in time; whether memories were left for the next pass.
    Failures are logged, never raised: a memory bug must not stop capture's ingest."""
    from agentlog.memory.watch import after_ingest

    try:
        reports = after_ingest(root)
    except Exception as e:
        _log(root, f"memory check failed: {type(e).__name__}: {e}")
        return False
    for r in reports:
        if r.written or r.proposals or r.pending:
            _log(root, f"memory check: {r.checked} checked in {r.ms:.0f} ms, {r.written} changed, "
                       f"{len(r.doubtful)} doubtful, {len(r.proposals)} proposals, {len(r.pending)} left for later")
    return any(r.pending for r in reports)


def start_capture_server(root: str) -> CaptureProcess | None:
    """The capture server's process (``capture/serve.py``), answering on the socket, when
    the ``capture_server`` setting says so; None when it is off or cannot start (logged,
    and said on stderr)."""
    from agentlog.capture.serve import CaptureProcess
    from agentlog.core.config import load as load_config

    try:
        if not load_config(root).get("capture_server", True):
            return None
    except AgentlogError as e:
        _log(root, f"config unusable ({e}); the capture server starts as by default")
    server = CaptureProcess(root, log_path(root))
    if not server.start():
        _log(root, "capture server not started (its reason is above)")
        print(f"agentlog daemon: capture server not started; see {log_path(root)}", file=sys.stderr)
        return None
    _log(root, f"capture server listening on {os.path.join(root, 'run', 'hook.sock')}, pid {server.pid}")
    return server


def start_otel_receiver(root: str) -> OtelChild | None:
    """``agentlog otel serve`` as the daemon's child when the ``otel_receiver`` setting is on."""
    from agentlog.operations.otel_child import OtelChild, wanted

    try:
        port = wanted(root)
    except AgentlogError as e:
        _log(root, f"config unusable ({e}); no OTLP receiver")
        return None
    if port is None:
        return None
    child = OtelChild(root, port, log_path(root))
    child.start()
    _log(root, f"OTLP receiver on 127.0.0.1:{port}, pid {child.pid}")
    return child


def otel_streamer(root: str) -> OtelStreamer | None:
    """The streaming export when ``otel_export_endpoint`` is set (``operations.otel_child``)."""
    from agentlog.operations.otel_child import OtelStreamer, export_settings

    try:
        got = export_settings(root)
    except AgentlogError as e:
        _log(root, f"config unusable ({e}); no streaming export")
        return None
    if got is None:
        return None
    _log(root, f"streaming sessions to {got[0]} as spans every {got[1]:g} s")
    return OtelStreamer(root, got[0], got[1], log_path(root))


def _keep_capture_server(root: str, server: CaptureProcess) -> None:
    """Start the capture server again when its process ended (at most every few seconds)."""
    again = server.restart_if_ended()
    if again is not None:
        _log(root, f"capture server process ended; started again: {'answering, pid ' + str(server.pid) if again else 'not answering (its reason is above)'}")


def ship_schedule(root: str) -> ShipSchedule:
    """The daemon's ship passes, from the ``ship_minutes`` and ``ship_prune_after_days``
    settings (a bad config.toml is logged and the defaults used, as for checkpoints)."""
    from agentlog.core.paths import vault_enrolled
    from agentlog.operations.ship_schedule import DEFAULT_EVERY_S, ShipSchedule, settings

    try:
        every, prune_after = settings(root)
    except AgentlogError as e:
        every, prune_after = DEFAULT_EVERY_S, None
        _log(root, f"ship settings unusable ({e}); when enrolled, a ship pass every {every / 60:g} minutes, no pruning")
    if every > 0 and vault_enrolled(root):
        _log(root, f"ship: enrolled with a vault; a pass every {every / 60:g} minutes"
                   + (f", pruning sessions idle {prune_after / 86400:g} days" if prune_after else ""))
    return ShipSchedule(root, every, prune_after_s=prune_after, log=lambda line: _log(root, line))


class Settling:
    """When to ingest what the logs gained: once they have been still for ``settle`` seconds,
    or ``max_lag`` seconds after the change was first seen, whichever comes first.

    Ingest writes and syncs a few dozen files (the store, the tree, the search index); a
    hook's fsync that lands meanwhile waits for the file system's journal behind them
    (measured: the native hook's append p95 0.5 ms alone, 2.4-3.5 ms beside an ingest). Hooks
    come in bursts around a tool call, with the model's thinking between them, so waiting
    for a still moment moves ingest out of the bursts; ``max_lag`` bounds how stale the store
    gets while hooks never stop. The daemon looks at the usual interval (a look stats every
    log: 7 ms for 1,000 logs here), so "still" means unchanged between two looks, and a change
    reaches the store one to two intervals after the logs went still."""

    def __init__(self, settle: float, max_lag: float) -> None:
        self.settle = settle
        self.max_lag = max_lag
        self._last: object = None
        self._changed_at = 0.0
        self._first_seen: float | None = None

    def due(self, fingerprint: object) -> bool:
        """Whether to ingest now, given the logs' fingerprint (which differs from what was ingested)."""
        t = time.monotonic()
        if self._first_seen is None:
            self._first_seen = t
        if fingerprint != self._last:
            self._last, self._changed_at = fingerprint, t
        return t - self._changed_at >= self.settle or t - self._first_seen >= self.max_lag

    def done(self) -> None:
        """The change seen so far is ingested."""
        self._first_seen = None



def run(root: str, *, interval: float = 0.5, compact_every: float = 3600.0, max_seconds: float | None = None,
        checkpoint_every: float | None = None, settle: float = SETTLE_S, max_lag: float = MAX_LAG_S) -> None:
    """Run in the foreground until SIGTERM/SIGINT (or ``max_seconds``). ``checkpoint_every``
    (seconds; default the ``checkpoint_minutes`` setting, 0 for none) spaces the checkpoints;
    ``settle`` and ``max_lag`` say when a change is ingested (:class:`Settling`)."""
    ensure_dir(state_dir(root))
    fd = os.open(pid_path(root), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DaemonRunning(f"a daemon is already running (pid file {pid_path(root)})") from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _log(root, f"started, pid {os.getpid()}, polling every {interval} s")
    server = start_capture_server(root)
    receiver = start_otel_receiver(root)
    streamer = otel_streamer(root)
    from agentlog.operations.checkpoints import DEFAULT_EVERY_S, Periodic, every_from_config
    from agentlog.operations.refresh import project_and_index

    try:
        every = every_from_config(root) if checkpoint_every is None else checkpoint_every
    except AgentlogError as e:  # a bad config.toml: the default, and say so
        every = DEFAULT_EVERY_S
        _log(root, f"checkpoint_minutes unusable ({e}); a checkpoint every {every / 60:g} minutes")
    periodic = Periodic(every)
    ship = ship_schedule(root)
    started = last_compact = time.monotonic()
    seen: tuple[tuple[str, int, int], ...] | None = None
    settling = Settling(settle, max_lag)
    memory_check_due = False
    compactor: threading.Thread | None = None
    # ingest, the projection and checkpoints run in a thread of the lowest priority, so that
    # they yield the CPU to hooks and the capture server; this thread keeps its own (it
    # restarts the server, whose process inherits the starting thread's niceness)
    bg = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlog-daemon-work", initializer=lower_priority)

    def work(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return bg.submit(fn, *args, **kwargs).result()

    try:
        while not stopping:
            if server is not None:
                _keep_capture_server(root, server)
            if receiver is not None and receiver.restart_if_ended():
                _log(root, f"OTLP receiver process ended; started again, pid {receiver.pid}")
            if streamer is not None:
                note = streamer.poll()
                if note:
                    _log(root, note)
            now = _fingerprint(root)
            if now != seen and settling.due(now):
                report = work(_ingest_unless_locked, root)
                if not report.busy:
                    seen = now
                    settling.done()
                    if report.events or report.breaks:
                        _log(root, f"ingested {report.events} events from {report.logs_advanced} logs; breaks {len(report.breaks)}")
                    if report.events:
                        work(project_and_index, root, lambda line: _log(root, line))
                        memory_check_due = True
                    if report.tree_leaves:
                        periodic.grew()
            if memory_check_due:  # after an ingest that added events; again while a check left memories
                memory_check_due = work(check_memories, root)
            work(_checkpoint, root, periodic)
            ship.poll()
            if ship.due(time.monotonic()):
                work(ship.start)  # from the worker thread: the pass inherits its lowest priority
            if time.monotonic() - last_compact >= compact_every and (compactor is None or not compactor.is_alive()):
                # beside ingest, not in it: sealing and compaction have their own locks
                compactor = threading.Thread(target=maintain, args=(root,), name="agentlog-compact", daemon=True)
                compactor.start()
                last_compact = time.monotonic()
            if max_seconds is not None and time.monotonic() - started >= max_seconds:
                break
            time.sleep(interval)
        if ship.running:
            _log(root, "stopping the ship pass in progress")
            ship.stop()
        if server is not None:  # before the last ingest, so that it holds every frame acknowledged
            server.stop()
            _log(root, "capture server stopped")
        if receiver is not None:
            receiver.stop()
            _log(root, "OTLP receiver stopped")
        report = work(ingest, root)
        _log(root, f"stopping: final ingest of {report.events} events")
        work(_checkpoint, root, periodic, final=True)
        if compactor is not None and compactor.is_alive():
            _log(root, "waiting for the compaction in progress")
            compactor.join()
    finally:
        ship.stop()
        bg.shutdown(wait=True)
        if server is not None:
            server.stop()
        if receiver is not None:
            receiver.stop()
        if streamer is not None:
            streamer.stop()
        try:
            os.unlink(pid_path(root))
        except OSError:
            pass
        os.close(fd)


@dataclass
class DaemonState:
    running: bool
    pid: int | None
    pid_file: str
    log_file: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def state(root: str) -> DaemonState:
    """Whether a daemon holds the pid file lock, and its pid."""
    path = pid_path(root)
    out = DaemonState(running=False, pid=None, pid_file=path, log_file=log_path(root))
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return out
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            out.running = True  # the lock is held: a daemon owns the file
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            out.pid = int(text) if text.isdigit() else None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return out


def start(root: str, *, interval: float = 0.5) -> DaemonState:
    """Start ``agentlog daemon run`` detached; wait until it holds its pid file."""
    current = state(root)
    if current.running:
        raise DaemonRunning(f"a daemon is already running (pid {current.pid})")
    ensure_dir(state_dir(root))
    # posix_spawn in a new session, not a Popen we would never wait for: the
    # daemon outlives this process and is nobody's child to reap here.
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "agentlog", "daemon", "run", "--interval", str(interval)],
        {**os.environ, "AGENTLOG_HOME": root},
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log_path(root), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        current = state(root)
        if current.running:
            return current
        time.sleep(0.05)
    raise RuntimeError(f"the daemon did not start; see {log_path(root)}")


def stop(root: str, *, timeout: float = 30.0) -> DaemonState:
    """SIGTERM the daemon and wait for it to finish its last ingest."""
    current = state(root)
    if not current.running or current.pid is None:
        return current
    os.kill(current.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = state(root)
        if not current.running:
            return current
        time.sleep(0.05)
    raise RuntimeError(f"the daemon (pid {current.pid}) did not stop within {timeout:.0f} s")
