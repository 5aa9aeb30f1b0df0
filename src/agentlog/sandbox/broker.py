"""The broker: runs each ``agentlog exec -c CMD`` of a run under the floor plus the live grants.

One per run, inside the unconfined ``agentlog run`` process, on ``broker.sock`` in the run's
directory. Protocol (``sandbox/native/agentlog_exec.c`` and :mod:`agentlog.sandbox.client`):

- client → broker: ``b"AX1"`` + a 4-byte big-endian length, sent with the client's fds 0, 1
  and 2 (SCM_RIGHTS), then that many bytes: NUL-separated cwd, command, ``K=V`` environment.
- client → broker, any time after: ``b"S"`` + one byte, a signal to forward to the command's
  process group. End of stream (the client died or was killed): the group gets SIGKILL.
- broker → client: ``b"X"`` + a signed 4-byte status (exit code, or minus the signal number),
  or ``b"E"`` + a message when the request was refused.

Who may connect: a peer of this uid whose ancestry (``/proc/<pid>/stat``) reaches the run's
agent process. The command runs with the client's cwd and environment (they never shape the
policy, which comes from ``policy.json`` only) in its own process group; stdout and stderr
are relayed through pipes (counted, and stderr scanned for denials) unless they are a
terminal, which is passed as it is.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agentlog.sandbox import runs
from agentlog.sandbox.policy import Built, Policy, build
from agentlog.sandbox.record import CommandRecord, record_command

MAGIC = b"AX1"
MAX_REQUEST = 4 << 20
DRAIN_S = 0.2
"""After the command's leader exits, how long output from what it left running may keep the reply waiting."""
RULESET_TTL_S = 10.0
"""A built ruleset is reused for this long while the policy's version is unchanged (the walk is a snapshot)."""
STOP_WAIT_S = 10.0
"""How long stopping waits for the connections' threads (their commands are killed first)."""
DENIAL_MARKS = (b"Permission denied", b"Operation not permitted", b"Read-only file system")
"""How a denial shows on stderr: Landlock's EACCES/EPERM, and EROFS from the read-only mounts
over the project's agent directories."""
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""Forwarded signals after which nothing of the command's group may outlive its leader."""
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def ancestry(pid: int, limit: int = 256) -> list[int]:
    """``pid`` and its ancestors (from ``/proc``), nearest first."""
    out: list[int] = []
    while pid > 0 and len(out) < limit:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            break
        pid = int(data[data.rindex(b")") + 2:].split()[1])
    return out


@dataclass
class Broker:
    root: str
    run_id: str
    abi: int
    agent_pid: int = 0
    launcher: str | None = None
    """The native client, whose ``--landlock-exec`` mode confines and execs: commands then start
    with vfork+exec; without it, a fork of this process with a Python preexec_fn (~2-6 ms more)."""
    shell: str = SHELL
    live: set[int] = field(default_factory=set)
    """Leaders of the commands not yet reaped (their pid, and so their group id, cannot be reused)."""
    commands: int = 0
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cache: tuple[int, float, Built] | None = None
    _sock: socket.socket | None = None
    _stopping: bool = False
    _serving: set[threading.Thread] = field(default_factory=set)

    # -- lifecycle ---------------------------------------------------------------

    def listen(self) -> str:
        path = runs.socket_path(self.root, self.run_id)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            s.bind(path)
        finally:
            os.umask(old)
        s.listen(64)
        self._sock = s
        threading.Thread(target=self._accept_loop, name="agentlog-broker", daemon=True).start()
        return path

    def stop(self) -> None:
        """Stop accepting, and kill the groups of the commands still running (what outlived its
        leader is re-parented to ``agentlog run``, the subreaper, which kills it)."""
        self._stopping = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        with self._lock:
            groups = list(self.live)
        for pg in groups:
            _killpg(pg, signal.SIGKILL)
        # each connection's thread records its command after the client has its status: let it
        # finish (the run's process may end right after this, taking threads with it)
        deadline = time.monotonic() + STOP_WAIT_S
        with self._lock:
            serving = list(self._serving)
        for t in serving:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self._lock:
                self._serving.add(t)
            t.start()

    # -- policy --------------------------------------------------------------------

    def ruleset(self) -> tuple[Policy, Built]:
        """The live ruleset (cached while the policy's version holds, for :data:`RULESET_TTL_S`)."""
        policy = runs.load_policy(self.root, self.run_id)
        now = time.monotonic()
        with self._lock:
            cached = self._cache
            if cached is not None and cached[0] == policy.version and now - cached[1] < RULESET_TTL_S:
                return policy, cached[2]
        built = build(policy, self.abi, live=True)
        with self._lock:
            old = self._cache
            self._cache = (policy.version, now, built)
        if old is not None:
            _close_later(old[2])
        return policy, built

    # -- one connection ----------------------------------------------------------------

    def _peer_ok(self, conn: socket.socket) -> str | None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            return f"peer uid {uid} is not this run's"
        with self._lock:  # the agent is started under this lock: its pid is known once it is free
            pass
        if self.agent_pid <= 0 or self.agent_pid not in ancestry(pid)[1:]:
            return f"process {pid} is not part of agentlog run {self.run_id}"
        return None

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._serve_one(conn)
        finally:
            with self._lock:
                self._serving.discard(threading.current_thread())

    def _serve_one(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            problem = self._peer_ok(conn)
            if problem is not None:
                self.refused += 1
                conn.sendall(b"E" + problem.encode())
                _drain(conn)
                return
            msg, fds, _flags, _addr = socket.recv_fds(conn, 7, 3)
            if 0 < len(msg) < 7:
                msg += _recv_exact(conn, 7 - len(msg))
            if len(msg) < 7 or msg[:3] != MAGIC or len(fds) != 3:
                conn.sendall(b"E" + b"malformed request")
                return
            (size,) = struct.unpack(">I", msg[3:7])
            if size > MAX_REQUEST:
                conn.sendall(b"E" + b"request too large")
                return
            body = _recv_exact(conn, size)
            parts = body.split(b"\0")
            if len(parts) < 2:
                conn.sendall(b"E" + b"malformed request")
                return
            cwd, command = parts[0], parts[1]
            env = dict(p.split(b"=", 1) for p in parts[2:] if b"=" in p)
            self._run(conn, fds, os.fsdecode(cwd), command, env)
        except (OSError, ValueError) as e:
            try:
                conn.sendall(b"E" + f"broker: {e}".encode())
            except OSError:
                pass
        finally:
            for fd in fds:
                _close(fd)
            conn.close()

    def _run(self, conn: socket.socket, fds: list[int], cwd: str, command: bytes, env: dict[bytes, bytes]) -> None:
        started = time.time()
        t0 = time.perf_counter()
        policy, built = self.ruleset()
        relays: list[_Relay] = []
        out_fds = [fds[1], fds[2]]
        child_ends: list[int] = []
        for i, fd in enumerate((fds[1], fds[2])):
            if not os.isatty(fd):
                rd, wr = os.pipe2(os.O_CLOEXEC)
                relays.append(_Relay(rd, fd, scan=i == 1))
                out_fds[i] = wr
                child_ends.append(wr)
        try:
            child = self._spawn(built, cwd, command, env, (fds[0], out_fds[0], out_fds[1]))
        except OSError as e:
            for w in child_ends:
                _close(w)
            for r in relays:
                _close(r.src)
            msg = f"agentlog exec: cannot start the command: {e.strerror or e}\n"
            try:
                os.write(fds[2], msg.encode())
            except OSError:
                pass
            conn.sendall(b"X" + struct.pack(">i", 126))
            return
        for w in child_ends:
            _close(w)
        for r in relays:
            r.start()
        status = self._supervise(conn, child)
        deadline = time.monotonic() + DRAIN_S
        for r in relays:
            r.join(max(0.0, deadline - time.monotonic()))
        try:
            conn.sendall(b"X" + struct.pack(">i", status))
        except OSError:
            pass
        duration_ms = (time.perf_counter() - t0) * 1000
        self.commands += 1
        rec = CommandRecord(
            run_id=self.run_id, command=os.fsdecode(command), cwd=cwd, status=status, started_at=started,
            duration_ms=duration_ms, bytes_out=relays[0].bytes if relays and not relays[0].scan else None,
            bytes_err=next((r.bytes for r in relays if r.scan), None),
            denied=next((r.denials for r in relays if r.scan), None), policy_version=policy.version,
            grants=list(policy.grants), denies=list(policy.denies), net=policy.net, pid=child.pid,
            ruleset_ms=built.build_ms)
        try:
            record_command(self.root, rec)
        except (OSError, ValueError) as e:  # recording must not fail the command
            os.write(2, f"agentlog run: could not record a brokered command: {e}\n".encode())

    def _spawn(self, built: Built, cwd: str, command: bytes, env: dict[bytes, bytes],
               stdio: tuple[int, int, int]) -> _Child:
        """Start ``bash -c command`` confined by ``built``, in a new process group: posix_spawn of
        the native launcher (vfork+exec), else a fork of this process with a Python preexec_fn."""
        if self.launcher is not None:
            fd = built.ruleset.fd
            argv = [self.launcher.encode(), b"--landlock-exec", str(fd).encode(), os.fsencode(cwd),
                    self.shell.encode(), b"-c", command]
            actions = [(os.POSIX_SPAWN_DUP2, src, dst) for dst, src in enumerate(stdio)]
            with self._lock:
                os.set_inheritable(fd, True)  # the launcher closes it (and every other fd) before the exec
                pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0,
                                     setsigdef=(signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP,
                                                signal.SIGPIPE))
                self.live.add(pid)
            return _Child(pid)
        with self._lock:
            proc = subprocess.Popen(
                [self.shell, "-c", command], cwd=cwd, env=env, stdin=stdio[0], stdout=stdio[1], stderr=stdio[2],
                process_group=0, preexec_fn=built.ruleset.preexec(), close_fds=True, restore_signals=True)
            self.live.add(proc.pid)
        return _Child(proc.pid, proc)

    def _supervise(self, conn: socket.socket, proc: _Child) -> int:
        """Forward signals until the command's leader exits; kill its group when the client goes."""
        pidfd = os.pidfd_open(proc.pid)
        try:
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            poller.register(pidfd, select.POLLIN)
            client_gone = False
            interrupted = False
            while True:
                events = poller.poll()
                if any(fd == pidfd for fd, _ in events):
                    break
                try:
                    data = conn.recv(64)
                except OSError:
                    data = b""
                if not data:
                    client_gone = True
                    _killpg(proc.pid, signal.SIGKILL)
                    poller.unregister(conn.fileno())
                    continue
                for i in range(0, len(data) - 1, 2):
                    if data[i:i + 1] == b"S":
                        _killpg(proc.pid, data[i + 1])
                        interrupted = interrupted or data[i + 1] in STOPPING
            # the leader has exited but is not reaped: its pid, the group's id, is still ours
            if client_gone or interrupted:  # what ignored the signal (a shell's background jobs) goes too
                _killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
            with self._lock:
                self.live.discard(proc.pid)
            return code
        finally:
            os.close(pidfd)


class _Child:
    """A started command: its pid (= its process group), waited for once."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self._popen = popen

    def wait(self) -> int:
        if self._popen is not None:
            return self._popen.wait()
        while True:
            try:
                _, status = os.waitpid(self.pid, 0)
            except InterruptedError:
                continue
            return os.waitstatus_to_exitcode(status)


class _Relay(threading.Thread):
    """Copy a command's output pipe to the client's fd, counting bytes (and denials on stderr)."""

    def __init__(self, src: int, dst: int, *, scan: bool) -> None:
        super().__init__(daemon=True)
        self.src, self.dst, self.scan = src, os.dup(dst), scan
        self.bytes = 0
        self.denials = 0
        self._tail = b""

    def run(self) -> None:
        try:
            splice = not self.scan and hasattr(os, "splice")
            while True:
                if splice:
                    try:
                        n = os.splice(self.src, self.dst, 1 << 20)
                    except OSError as e:
                        if e.errno in (errno.EINVAL, errno.ENOSYS):
                            splice = False
                            continue
                        raise
                    if n == 0:
                        break
                    self.bytes += n
                    continue
                chunk = os.read(self.src, 1 << 16)
                if not chunk:
                    break
                self.bytes += len(chunk)
                if self.scan:
                    text = self._tail + chunk
                    self.denials += sum(text.count(m) for m in DENIAL_MARKS)
                    self._tail = text[-24:]
                    self.denials -= sum(self._tail.count(m) for m in DENIAL_MARKS)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(self.dst, view):]
            if self.scan:
                self.denials += sum(self._tail.count(m) for m in DENIAL_MARKS)
        except OSError:
            pass  # the reader went away: the command will see EPIPE
        finally:
            _close(self.src)
            _close(self.dst)


def _drain(conn: socket.socket, limit: int = MAX_REQUEST + 64, seconds: float = 2.0) -> None:
    """Read what a refused client still sends (so it reads the refusal, not EPIPE), within bounds."""
    conn.settimeout(seconds)
    got = 0
    try:
        while got < limit:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            got += len(chunk)
    except OSError:
        return


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = conn.recv(min(1 << 16, size - len(buf)))
        if not chunk:
            raise ValueError("client closed the request early")
        buf += chunk
    return bytes(buf)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _close_later(built: Built) -> None:
    """Close a replaced ruleset after any command being started with it has forked."""
    threading.Timer(5.0, built.ruleset.close).start()


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def describe(b: Broker) -> dict[str, Any]:
    return {"run": b.run_id, "commands": b.commands, "refused": b.refused}
