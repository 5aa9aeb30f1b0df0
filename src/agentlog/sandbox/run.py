"""``agentlog run``: the agent under the floor, its broker beside it, nothing left behind.

This process stays unconfined: it is the broker (threads on the run's socket), the agent's
parent and a child subreaper (``PR_SET_CHILD_SUBREAPER``), so whatever the agent or a command
daemonises is re-parented here and killed when the agent exits. The agent gets the floor
(:func:`agentlog.sandbox.policy.build` with ``live=False``) between fork and exec.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from agentlog.core import AgentlogError, UsageError
from agentlog.sandbox import landlock as L
from agentlog.sandbox import namespaces as ns
from agentlog.sandbox import runs
from agentlog.sandbox.broker import Broker
from agentlog.sandbox.exec_client import client_argv
from agentlog.sandbox.policy import PROJECT_GUARDED_FILES, Policy, build, floor_policy

PR_SET_CHILD_SUBREAPER = 36
ROUTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "route.py")

NOTE = (
    "You run under agentlog's Linux sandbox (Landlock). Your shell commands go through `agentlog exec`, which "
    "records them and runs them under the run's policy: the project, the temp directory and your own state "
    "directory are writable, the rest of the filesystem is read-only (so are the agents' settings and hook "
    "directories in the project: .claude, .codex, .gemini, .cursor), ~/.ssh, ~/.aws and similar secrets are "
    "unreadable, and outbound TCP is limited to the run's ports (443 by default). A 'Permission denied', "
    "'Operation not permitted' or 'Read-only file system' there comes from agentlog's policy, not from your "
    "permission settings: do not work around it; tell the user, who can run `agentlog allow PATH` so that the "
    "next command may write there. Your own file-editing tools only ever see the fixed policy.")


def agent_kind(program: str) -> str | None:
    """``claude``, ``codex`` or ``gemini`` by the resolved program's file name (installs are symlink chains)."""
    exe = shutil.which(program)
    names = {os.path.basename(program)}
    if exe:
        names.add(os.path.basename(os.path.realpath(exe)))
    for name in names:
        for kind in ("claude", "codex", "gemini"):
            if name == kind or name.startswith(kind + "-") or name.startswith(kind + "."):
                return kind
    return None


def agent_argv(argv: list[str], kind: str | None) -> list[str]:
    """The agent's argv with its own sandbox off and the note given (nested sandboxes fail)."""
    route = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(ROUTE_SCRIPT)}"
    if kind == "claude":
        settings = {"sandbox": {"enabled": False}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": route, "timeout": 30}]}]}}
        return [argv[0], "--settings", json.dumps(settings), "--append-system-prompt", NOTE, *argv[1:]]
    if kind == "codex":
        at = 2 if len(argv) > 1 and argv[1] in ("exec", "e", "resume") else 1
        note = "developer_instructions=" + json.dumps(NOTE)
        # the routing hook as a config override: merged with the hooks.json agentlog install writes
        hook = ('hooks.PreToolUse=[{matcher="Bash", hooks=[{type="command", command=' + json.dumps(route) +
                ', timeout=30}]}]')
        trust = [] if "--dangerously-bypass-hook-trust" in argv else ["--dangerously-bypass-hook-trust"]
        return [*argv[:at], "-s", "danger-full-access", *trust, "-c", hook, "-c", note, *argv[at:]]
    return list(argv)


GEMINI_SYSTEM_SETTINGS = "/etc/gemini-cli/settings.json"


def gemini_settings(run_directory: str, environ: dict[str, str]) -> str:
    """A system settings file for Gemini CLI (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``): the one in force
    plus the routing hook on ``run_shell_command``; its path. Gemini reads hooks only from settings
    files, and the user's must not change (the floor protects them)."""
    from agentlog.core.fileio import write_json_atomic

    current = environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or GEMINI_SYSTEM_SETTINGS
    settings: dict[str, Any] = {}
    try:
        with open(current, "rb") as fh:
            loaded = json.loads(fh.read())
        if isinstance(loaded, dict):
            settings = loaded
    except (OSError, ValueError):
        pass
    route = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(ROUTE_SCRIPT)}"
    hooks = settings.setdefault("hooks", {}) if isinstance(settings.get("hooks", {}), dict) else {}
    settings["hooks"] = hooks
    existing = hooks.get("BeforeTool")
    before: list[Any] = existing if isinstance(existing, list) else []
    before.append({"matcher": "run_shell_command", "hooks": [
        {"type": "command", "command": route, "name": "agentlog-run-route", "timeout": 30000}]})
    hooks["BeforeTool"] = before
    tools = settings.setdefault("tools", {}) if isinstance(settings.get("tools", {}), dict) else {}
    settings["tools"] = tools
    tools["enableHooks"] = True
    directory = run_directory
    if not _owner_only_path(run_directory):
        directory = gemini_fallback_dir(os.path.basename(run_directory))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, "gemini-system-settings.json")
    write_json_atomic(path, settings)
    return path


def gemini_fallback_dir(run_id: str) -> str:
    """Where the run's Gemini settings go when the data root lies below a directory others may
    write (Gemini skips such a settings file): under the user's own (passwd) home."""
    from agentlog.sandbox.policy import passwd_home

    return os.path.join(passwd_home(), ".cache", "agentlog", "gemini-runs", run_id)


def _owner_only_path(path: str) -> bool:
    """Whether no directory from ``path`` up to ``/`` is writable by group or others."""
    p = os.path.realpath(path)
    while True:
        try:
            if os.stat(p).st_mode & 0o022:
                return False
        except OSError:
            return False
        parent = os.path.dirname(p)
        if parent == p:
            return True
        p = parent


@dataclass
class RunResult:
    run_id: str
    exit_code: int
    commands: int
    refused: int
    killed_after: list[int] = field(default_factory=list)
    floor_ms: float = 0.0
    floor_rules: int = 0
    mounts_ms: float | None = None
    """The init's mount namespace, /proc and read-only mounts; None without namespaces."""


def capture_server_answers(root: str) -> bool:
    """Whether the daemon's capture server accepts a connection (then the native hook records through it)."""
    import socket

    from agentlog.capture.hook_socket import socket_path

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect(socket_path(root))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as fh:
                out += [int(x) for x in fh.read().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = _children(pid)
    while todo and len(out) < 100_000:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def kill_descendants(rounds: int = 200) -> list[int]:
    """SIGKILL every process below this one and reap them; the pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = descendants(os.getpid())
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
                killed.append(p)
            except OSError:
                pass
        _reap(None)
        time.sleep(0.01)
    return sorted(set(killed))


def _reap(keep: set[int] | None) -> None:
    """Reap exited children; with ``keep``, not those (their owners wait for them)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        if keep is not None and info.si_pid in keep:
            return
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return


_STARTED = False
"""Whether this process started a run (its children's PID namespace is then the run's)."""


def _check_start(argv: list[str], allow: list[str]) -> tuple[str | None, int]:
    """The agent kind and the Landlock ABI, or a clear refusal."""
    if not argv:
        raise UsageError("agentlog run needs the agent to start, e.g. `agentlog run claude`")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]}: no such program on PATH")
    abi = L.require_abi()
    for a in allow:
        if not os.path.isdir(a):
            raise UsageError(f"--allow {a}: not a directory")
    return agent_kind(argv[0]), abi


def run(root: str, argv: list[str], *, project: str, net: str = "https", ports: list[int] | None = None,
        allow: list[str] | None = None, timeout: float | None = None, home: str | None = None,
        tmp: list[str] | None = None, announce: bool = True) -> RunResult:
    """Start ``argv`` under the floor with its broker; return when it exited and nothing of it is left.

    This process is the *keeper*: it makes the run's PID namespace and forks its init, which
    guards the project's agent directories with read-only mounts and is the broker and the
    agent's parent (:mod:`agentlog.sandbox.namespaces`). Where namespaces cannot be had (or
    ``AGENTLOG_RUN_NO_NAMESPACES=1``), this process is the broker itself, the project's agent
    directories are protected by the walk instead, and a SIGKILL of it can leave processes behind:
    it says so on stderr. Once per process (the PID namespace for its children is made once): the
    CLI's process, or a process started for the run."""
    global _STARTED
    if _STARTED:
        raise AgentlogError("agentlog run: one run per process (this one already made its namespaces)")
    allow = allow or []
    kind, abi = _check_start(argv, allow)
    client = client_argv(root)  # forks the compiler: before the PID namespace, and before the walk sees bin/
    use_ns, why = not ns.disabled(), "AGENTLOG_RUN_NO_NAMESPACES is set"
    if use_ns:
        _STARTED = True
        try:
            ns.enter_pid_namespace()
        except ns.NamespaceError as e:
            use_ns, why = False, str(e)
    policy = floor_policy(str(os.getpid()), project, root, agent=kind, net=net, ports=ports or [], allow=allow,
                          home=home, tmp=tmp, mounts=use_ns)
    for d in policy.state:
        if os.path.basename(d) in (".claude", ".codex", ".gemini"):
            os.makedirs(d, mode=0o700, exist_ok=True)
    runs.sweep(root)  # a killed run's empty mount points go before this run looks for its own
    guard, made = ns.mount_points(policy.guarded, PROJECT_GUARDED_FILES) if use_ns else ([], [])
    try:
        runs.create(root, policy, argv, made=made)
        if not use_ns:
            if announce:
                sys.stderr.write(f"agentlog run: without namespaces ({why}): the project's agent directories "
                                 "are protected by Landlock alone, so no new entry can be made at the project's top "
                                 "level, and a SIGKILL of agentlog run can leave the agent's processes running\n")
            return _serve(root, argv, policy, kind, abi, client, timeout=timeout, announce=announce)
        return _keep(root, argv, policy, kind, abi, client, guard, timeout=timeout, announce=announce)
    finally:
        made = runs.made_by(root, policy.run_id, made)  # with those handed over by runs that ended first
        runs.remove(root, policy.run_id)
        runs.remove_mount_points(root, made, policy.run_id)
        shutil.rmtree(gemini_fallback_dir(policy.run_id), ignore_errors=True)


def _keep(root: str, argv: list[str], policy: Policy, kind: str | None, abi: int, client: list[str],
          guard: list[str], *, timeout: float | None, announce: bool) -> RunResult:
    """Fork the run's init (PID 1 of the namespace :func:`run` made), relay SIGTERM and SIGHUP to
    it, and return the result it reports (or its death)."""
    alive_r, alive_w = os.pipe()  # the init's way to see that this process has gone
    result_r, result_w = os.pipe()
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the agent's
    pid = os.fork()
    if pid == 0:  # the init
        payload: dict[str, Any] = {"error": "the run's init failed"}
        try:
            os.close(alive_w)
            os.close(result_r)
            ns.die_with_parent(alive_r)
            started = time.perf_counter()
            ns.isolate_mounts(guard)
            mounts_ms = (time.perf_counter() - started) * 1000
            result = _serve(root, argv, policy, kind, abi, client, timeout=timeout, announce=announce)
            result.mounts_ms = mounts_ms
            payload = result.__dict__
        except BaseException as e:  # reported to the keeper, never raised into its caller's code
            payload = {"error": str(e) or type(e).__name__, "exit": getattr(e, "exit_code", 1)}
        finally:
            try:
                data = json.dumps(payload).encode()
                while data:
                    data = data[os.write(result_w, data):]
            finally:
                os._exit(0)
    os.close(alive_r)
    os.close(result_w)
    forward = _forwarder(pid)
    old_term = signal.signal(signal.SIGTERM, forward)
    old_hup = signal.signal(signal.SIGHUP, forward)
    try:
        chunks = []
        while chunk := os.read(result_r, 1 << 16):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGHUP, old_hup)
        os.close(result_r)
        os.close(alive_w)
    try:
        payload = json.loads(b"".join(chunks))
    except ValueError:
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # the init was killed, and with it everything in the run
            return RunResult(policy.run_id, code, 0, 0)
        raise AgentlogError(f"agentlog run: the run's init ended without a result (exit {code})") from None
    if "error" in payload:
        err = AgentlogError(f"agentlog run: {payload['error']}")
        err.exit_code = int(payload.get("exit") or 1)
        raise err
    return RunResult(**payload)


def _serve(root: str, argv: list[str], policy: Policy, kind: str | None, abi: int, client: list[str], *,
           timeout: float | None, announce: bool) -> RunResult:
    """The broker and the agent's parent: start the agent under the floor, serve its commands, and
    kill what is left of it when it exits."""
    run_id = policy.run_id
    broker = Broker(root, run_id, abi)
    try:
        exec_prefix = " ".join(shlex.quote(a) for a in client)
        broker.launcher = client[0] if len(client) == 1 else None
        sock = broker.listen()
        floor = build(policy, abi, live=False)
        env = dict(os.environ)
        env.update({"AGENTLOG_RUN": run_id, "AGENTLOG_RUN_SOCKET": sock, "AGENTLOG_RUN_EXEC": exec_prefix})
        if kind == "gemini":
            env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = gemini_settings(runs.run_dir(root, run_id), env)
        _subreaper()
        if announce:
            sys.stderr.write(f"agentlog run: run {run_id} under agentlog's policy (Landlock ABI {abi}, "
                             f"{floor.paths} rules in {floor.build_ms:.1f} ms, net {policy.net}); "
                             f"widen with `agentlog allow PATH --run {run_id}`\n")
            if not capture_server_answers(root):
                sys.stderr.write("agentlog run: no capture daemon answers on this data root, and the floor keeps the "
                                 "hooks from writing it: the agent's own hook events are lost (start `agentlog daemon "
                                 "run`); brokered commands are recorded either way\n")
            sys.stderr.flush()
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the agent's
        try:
            with broker._lock:
                proc = subprocess.Popen(agent_argv(argv, kind), env=env, cwd=policy.project,
                                        preexec_fn=floor.ruleset.preexec(signal.SIGKILL))
                broker.agent_pid = proc.pid
            floor.ruleset.close()
            forward = _forwarder(proc.pid)
            old_term = signal.signal(signal.SIGTERM, forward)
            old_hup = signal.signal(signal.SIGHUP, forward)
            deadline = None if timeout is None else time.monotonic() + timeout
            code: int | None = None
            while code is None:
                try:
                    code = proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    with broker._lock:
                        _reap(set(broker.live) | {proc.pid})
                    if deadline is not None and time.monotonic() > deadline:
                        proc.kill()
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGHUP, old_hup)
        finally:
            signal.signal(signal.SIGINT, old_int)
        broker.stop()
        killed = kill_descendants()
        return RunResult(run_id, code, broker.commands, broker.refused, killed, floor.build_ms, floor.paths)
    finally:
        broker.stop()
        kill_descendants()


def _forwarder(pid: int) -> Callable[[int, Any], None]:
    def forward(sig: int, _frame: Any) -> None:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return forward
