"""The "agent" of tests/test_sandbox.py: run under `agentlog run`, it tries things and prints
one JSON report line. BOX_HOME, BOX_ROOT, BOX_PROJ name the test's directories."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
import time

HOME, ROOT, PROJ = os.environ["BOX_HOME"], os.environ["BOX_ROOT"], os.environ["BOX_PROJ"]
SSH_KEY = os.path.join(HOME, ".ssh", "id_ed25519")


def outcome(fn) -> str:  # type: ignore[no-untyped-def]
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, str(e))


def write(path: str) -> str:
    def f() -> None:
        with open(path, "w") as fh:
            fh.write("x")
    return outcome(f)


def read(path: str) -> str:
    def f() -> None:
        with open(path, "rb") as fh:
            fh.read()
    return outcome(f)


def brokered(cmd: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    line = os.environ["AGENTLOG_RUN_EXEC"] + " -c " + shlex.quote(cmd)
    return subprocess.run(line, shell=True, **kw)  # type: ignore[call-overload, no-any-return]


def wait_for(path: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"waited too long for {path}")
        time.sleep(0.02)


def floor() -> dict[str, object]:
    return {
        "write_project": write(os.path.join(PROJ, "in.txt")),
        "write_tmp": write(os.path.join(os.environ["TMPDIR"], "t.txt")),
        "write_home_new": write(os.path.join(HOME, "new.txt")),
        "write_bashrc": write(os.path.join(HOME, ".bashrc")),
        "write_data_root": write(os.path.join(ROOT, "planted")),
        "write_outside": write(os.path.join(HOME, "outside", "o.txt")),
        "read_ssh": read(SSH_KEY),
        "read_bashrc": read(os.path.join(HOME, ".bashrc")),
        "read_etc": read("/etc/passwd"),
        # a block device node (root could otherwise make one for the disk and write it raw)
        "mknod_block": outcome(lambda: os.mknod(os.path.join(PROJ, "disk"), 0o600 | stat.S_IFBLK, os.makedev(254, 0))),
    }


def broker() -> dict[str, object]:
    inside = brokered("echo brokered", capture_output=True)
    outside = brokered(f"echo x > {shlex.quote(os.path.join(HOME, 'outside', 'b.txt'))}", capture_output=True)
    ssh = brokered(f"cat {shlex.quote(SSH_KEY)}", capture_output=True)
    brokered("exit 3")  # an ordinary failure
    return {"inside": inside.returncode, "inside_out": inside.stdout.decode(), "outside": outside.returncode,
            "ssh": ssh.returncode}


def grant(target: str) -> dict[str, object]:
    # a command running before the grant tries to write after it
    running = subprocess.Popen(os.environ["AGENTLOG_RUN_EXEC"] + " -c " + shlex.quote(
        f"touch {PROJ}/holding; while [ ! -e {PROJ}/granted ]; do sleep 0.02; done; echo a > {target}/a.txt"),
        shell=True, stderr=subprocess.DEVNULL)
    wait_for(os.path.join(PROJ, "granted"))
    before = running.wait(30)
    nxt = brokered(f"echo b > {target}/b.txt", stderr=subprocess.DEVNULL).returncode
    open(os.path.join(PROJ, "after-grant"), "w").close()
    wait_for(os.path.join(PROJ, "denied"))
    after_deny = brokered(f"echo c > {target}/c.txt", stderr=subprocess.DEVNULL).returncode
    return {"running_before_grant": before, "next_after_grant": nxt, "next_after_deny": after_deny}


def connect(port: str) -> dict[str, object]:
    def f() -> None:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=5):
            pass
    return {"connect": outcome(f)}


def escape() -> dict[str, object]:
    r: dict[str, object] = {}
    broker_pid = os.getppid()
    os.chdir(os.path.join(HOME, ".ssh"))  # cwd inside the denied directory
    r["cwd_relative"] = read("id_ed25519")
    os.chdir(PROJ)
    link = os.path.join(PROJ, "sym")
    os.symlink(SSH_KEY, link)
    r["symlink"] = read(link)
    r["hardlink"] = outcome(lambda: os.link(SSH_KEY, os.path.join(PROJ, "hard")))
    r["proc_self_root"] = read("/proc/self/root" + SSH_KEY)
    r["proc_broker_cwd"] = read(f"/proc/{broker_pid}/cwd/../home/.ssh/id_ed25519")
    r["proc_broker_root"] = read(f"/proc/{broker_pid}/root" + SSH_KEY)
    r["signal_broker"] = outcome(lambda: os.kill(broker_pid, signal.SIGTERM))
    libc = ctypes.CDLL(None, use_errno=True)
    attached = libc.ptrace(16, broker_pid, None, None)  # PTRACE_ATTACH
    r["ptrace_broker"] = "ok" if attached == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    # caller-set HOME and PATH do not shape the policy of a brokered command
    env = {**os.environ, "HOME": os.path.join(HOME, "outside"), "PATH": "/nonexistent:" + os.environ.get("PATH", "")}
    c = brokered(f"echo x > {HOME}/outside/h.txt", env=env, stderr=subprocess.DEVNULL)
    r["brokered_home_env"] = "ok" if c.returncode == 0 else "denied"
    c = brokered(f"cat {SSH_KEY}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r["brokered_ssh"] = "ok" if c.returncode == 0 else "denied"
    # a daemon (re-parented out of the agent's tree) may not use the broker
    pidfile = os.path.join(PROJ, "daemon.pid")
    subprocess.run(["setsid", "sh", "-c", f"(echo $$ > {pidfile}.1; sleep 300) & "
                    f"{os.environ['AGENTLOG_RUN_EXEC']} -c 'touch {PROJ}/from-daemon'; echo $? > {pidfile}.rc"],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the sh above is the agent's child, so give it a daemon of its own: double fork
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(0.3)  # re-parented by now
            rc = subprocess.run(os.environ["AGENTLOG_RUN_EXEC"] + f" -c 'touch {PROJ}/from-daemon2'", shell=True,
                                stderr=subprocess.DEVNULL).returncode
            with open(f"{pidfile}.2", "w") as fh:
                fh.write(f"{os.getpid()} {rc}")
            time.sleep(300)
        os._exit(0)
    os.waitpid(pid, 0)
    wait_for(f"{pidfile}.2")
    dpid, rc = open(f"{pidfile}.2").read().split()
    r["daemon_uses_broker"] = "ok" if rc == "0" or os.path.exists(os.path.join(PROJ, "from-daemon2")) else "refused"
    r["pid_daemon"] = dpid
    # a brokered command that daemonises itself
    brokered(f"setsid sh -c 'sleep 300 & echo $! > {PROJ}/bd.pid' </dev/null >/dev/null 2>&1 &")
    wait_for(os.path.join(PROJ, "bd.pid"))
    time.sleep(0.1)
    r["pid_brokered_daemon"] = open(os.path.join(PROJ, "bd.pid")).read().strip()
    return r


def bulk(size: str) -> dict[str, object]:
    n = int(size)
    gen = (f"python3 -c 'import sys; b=bytes(range(256))*4096; "
           f"[sys.stdout.buffer.write(b) for _ in range({n} // len(b))]'")
    p = subprocess.Popen(os.environ["AGENTLOG_RUN_EXEC"] + " -c " + shlex.quote(gen), shell=True,
                         stdout=subprocess.PIPE)
    h = hashlib.sha256()
    total = 0
    assert p.stdout is not None
    while chunk := p.stdout.read(1 << 20):
        h.update(chunk)
        total += len(chunk)
    return {"status": p.wait(), "sha256": h.hexdigest(), "bytes": total}


def _group(pgid_file: str) -> list[int]:
    pgid = int(open(pgid_file).read())
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d))
    return out


def signals() -> dict[str, object]:
    r: dict[str, object] = {}
    pids: list[int] = []
    for name, sig in (("sigint", signal.SIGINT), ("kill", signal.SIGKILL)):
        f = os.path.join(PROJ, f"{name}.pg")
        p = subprocess.Popen([*shlex.split(os.environ["AGENTLOG_RUN_EXEC"]), "-c",
                              f"sleep 300 & echo $$ > {f}; wait"])
        wait_for(f)
        time.sleep(0.1)
        pids += _group(f)
        p.send_signal(sig)
        status = p.wait(30)
        deadline = time.monotonic() + 10
        while _group(f) and time.monotonic() < deadline:
            time.sleep(0.02)
        r[f"{name}_status"] = status
        r[f"group_after_{name}"] = _group(f)
    r["all_pids"] = pids
    return r


def leave() -> dict[str, object]:
    pids = []
    for i in range(2):
        f = os.path.join(PROJ, f"leave{i}.pid")
        subprocess.run(f"setsid sh -c 'sleep 300 & echo $! > {f}' </dev/null >/dev/null 2>&1 &", shell=True)
        wait_for(f)
        pids.append(open(f).read().strip())
    return {"pids": pids}


def settings() -> dict[str, object]:
    """The agents' project-level settings and hooks: none may be made or changed; the rest of the
    project stays writable (the test made .claude/settings.json, .claude/hooks/check.sh, .mcp.json
    and src/)."""
    def p(*names: str) -> str:
        return os.path.join(PROJ, *names)

    def create(*names: str) -> str:
        def f() -> None:
            os.makedirs(os.path.dirname(p(*names)), exist_ok=True)
            with open(p(*names), "w") as fh:
                fh.write('{"hooks": {"SessionStart": []}}')
        return outcome(f)

    libc = ctypes.CDLL(None, use_errno=True)

    def errno_of(result: int) -> str:
        return "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), "?")

    settings = p(".claude", "settings.json")
    r: dict[str, object] = {
        # first the ways around the mounts (as root, Landlock is what stops these)
        "umount": errno_of(libc.umount2(os.fsencode(p(".claude")), 2)),  # MNT_DETACH
        "remount_rw": errno_of(libc.mount(None, os.fsencode(p(".claude")), None, 32 | 4096, None)),
        "modify_claude_settings": write(settings),
        "create_claude_local": create(".claude", "settings.local.json"),
        "modify_hook_script": write(p(".claude", "hooks", "check.sh")),
        "create_gemini_settings": create(".gemini", "settings.json"),
        "create_codex_config": create(".codex", "config.toml"),
        "create_codex_hooks": create(".codex", "hooks.json"),
        "create_cursor_hooks": create(".cursor", "hooks.json"),
        "modify_mcp_json": write(p(".mcp.json")),
        "chmod_settings": outcome(lambda: os.chmod(settings, 0o666)),
        "remove_settings": outcome(lambda: os.unlink(settings)),
        "rename_claude_dir": outcome(lambda: os.rename(p(".claude"), p("claude-old"))),
        "remove_gemini_dir": outcome(lambda: os.rmdir(p(".gemini"))),
        "hardlink_settings": outcome(lambda: os.link(settings, p("settings-link"))),
    }
    with open(p("src", "planted.json"), "w") as fh:
        fh.write("{}")
    r["replace_settings"] = outcome(lambda: os.replace(p("src", "planted.json"), settings))
    os.symlink(settings, p("src", "settings-sym"))
    r["write_through_symlink"] = write(p("src", "settings-sym"))
    b = brokered("echo x >> .claude/settings.json; mkdir -p .codex; echo x > .codex/config.toml", cwd=PROJ,
                 stderr=subprocess.DEVNULL)
    r["brokered_settings"] = "ok" if b.returncode == 0 else "denied"
    # the rest of the project
    r["write_top_new"] = write(p("new-top.txt"))
    r["mkdir_top"] = outcome(lambda: os.mkdir(p("newdir")))
    r["write_sub"] = write(p("src", "x.py"))
    r["brokered_top"] = brokered("echo y > from-broker.txt", cwd=PROJ).returncode
    return r


def home_settings() -> dict[str, object]:
    """Claude's user-level settings and hook directories in its state (~/.claude)."""
    c = os.path.join(HOME, ".claude")

    def create(path: str) -> str:
        def f() -> None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write("---\nhooks: {}\n---\n")
        return outcome(f)

    return {
        "modify_settings": write(os.path.join(c, "settings.json")),
        "create_settings_local": write(os.path.join(c, "settings.local.json")),
        "modify_hook": write(os.path.join(c, "hooks", "h.sh")),
        "create_skill": create(os.path.join(c, "skills", "x", "SKILL.md")),
        "create_agent": create(os.path.join(c, "agents", "a.md")),
        "write_state": write(os.path.join(c, "projects", "session.jsonl")),
    }


def orphans(ready: str) -> dict[str, object]:
    """A daemon of the agent's own (double fork, setsid) and a brokered command that daemonises,
    then wait to be killed with the run."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            fd = os.open(os.devnull, os.O_RDWR)
            for i in range(3):
                os.dup2(fd, i)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"])
        os._exit(0)
    os.waitpid(pid, 0)
    pidfile = os.path.join(os.path.dirname(ready), "bd.pid")
    brokered(f"setsid sh -c 'sleep 300 & echo $! > {pidfile}' </dev/null >/dev/null 2>&1 &")
    wait_for(pidfile)
    open(ready, "w").close()
    time.sleep(300)
    return {}


def wait(path: str) -> dict[str, object]:
    wait_for(path, 60)
    return {}


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    report = globals()[mode](*args)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
