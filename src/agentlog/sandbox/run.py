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

from agentlog.core import UsageError
from agentlog.sandbox import landlock as L
from agentlog.sandbox import runs
from agentlog.sandbox.broker import Broker
from agentlog.sandbox.exec_client import client_argv
from agentlog.sandbox.policy import Policy, build, floor_policy

PR_SET_CHILD_SUBREAPER = 36
ROUTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "route.py")

NOTE = (
    "You run under agentlog's Linux sandbox (Landlock). Your shell commands go through `agentlog exec`, which "
    "records them and runs them under the run's policy: the project, the temp directory and your own state "
    "directory are writable, the rest of the filesystem is read-only, ~/.ssh, ~/.aws and similar secrets are "
    "unreadable, and outbound TCP is limited to the run's ports (443 by default). A 'Permission denied' or "
    "'Operation not permitted' outside those places comes from agentlog's policy, not from your permission "
    "settings: do not work around it; tell the user, who can run `agentlog allow PATH` so that the next command "
    "may write there. Your own file-editing tools only ever see the fixed policy.")


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


def prepare(root: str, argv: list[str], *, project: str, net: str, ports: list[int], allow: list[str],
            home: str | None = None, tmp: list[str] | None = None) -> tuple[Policy, str | None, int]:
    """The run's policy (its directory made), the agent kind and the Landlock ABI."""
    if not argv:
        raise UsageError("agentlog run needs the agent to start, e.g. `agentlog run claude`")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]}: no such program on PATH")
    abi = L.require_abi()
    kind = agent_kind(argv[0])
    for a in allow:
        if not os.path.isdir(a):
            raise UsageError(f"--allow {a}: not a directory")
    policy = floor_policy(str(os.getpid()), project, root, agent=kind, net=net, ports=ports, allow=allow, home=home,
                          tmp=tmp)
    for d in policy.state:
        if os.path.basename(d) in (".claude", ".codex", ".gemini"):
            os.makedirs(d, mode=0o700, exist_ok=True)
    runs.create(root, policy, argv)
    return policy, kind, abi


def run(root: str, argv: list[str], *, project: str, net: str = "https", ports: list[int] | None = None,
        allow: list[str] | None = None, timeout: float | None = None, home: str | None = None,
        tmp: list[str] | None = None, announce: bool = True) -> RunResult:
    """Start ``argv`` under the floor with its broker; return when it exited and nothing of it is left."""
    policy, kind, abi = prepare(root, argv, project=project, net=net, ports=ports or [], allow=allow or [], home=home,
                                  tmp=tmp)
    run_id = policy.run_id
    broker = Broker(root, run_id, abi)
    try:
        client = client_argv(root)  # built before the walk sees bin/
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
                proc = subprocess.Popen(agent_argv(argv, kind), env=env, cwd=project,
                                        preexec_fn=floor.ruleset.preexec(signal.SIGKILL))
                broker.agent_pid = proc.pid
            floor.ruleset.close()
            forward = _forwarder(proc)
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
        runs.remove(root, run_id)
        shutil.rmtree(gemini_fallback_dir(run_id), ignore_errors=True)


def _forwarder(proc: subprocess.Popen[bytes]) -> Callable[[int, Any], None]:
    def forward(sig: int, _frame: Any) -> None:
        try:
            proc.send_signal(sig)
        except OSError:
            pass
    return forward
