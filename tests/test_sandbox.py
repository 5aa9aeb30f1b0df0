"""agentlog run / exec / allow / deny on the real kernel (Landlock), with real processes.

Each test starts a real run whose "agent" is a small Python program (tests/sandbox_agent.py
holds the escape attempts): the run's HOME, project, temp directory and data root are
directories of the test, so the floor is the one a user gets, in miniature. As root, DAC
never refuses, so every EACCES here is Landlock's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlog.sandbox.landlock import abi_version

SRC = Path(__file__).resolve().parents[1] / "src"
AGENT = Path(__file__).resolve().parent / "sandbox_agent.py"
ABI = abi_version()
pytestmark = pytest.mark.skipif(ABI < 6, reason=f"the kernel's Landlock ABI is {ABI}; these tests need 6+")


class Box:
    """A run's world: base/{root,home,proj,tmp}, home/.ssh/id_ed25519 a secret."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.site = ""
        self.root, self.home, self.proj, self.tmp = (base / n for n in ("root", "home", "proj", "tmp"))
        for d in (self.root, self.home / ".ssh", self.proj, self.tmp, self.home / "outside"):
            d.mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
        (self.home / ".bashrc").write_text("# rc\n")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"AGENTLOG_HOME": str(self.root), "PYTHONPATH": str(SRC), "TMPDIR": str(self.tmp),
                    "BOX_HOME": str(self.home), "BOX_ROOT": str(self.root), "BOX_PROJ": str(self.proj)})
        return env

    def start(self, *agent_args: str, net: str = "https", ports: tuple[int, ...] = (), timeout: float = 60.0,
              extra_env: dict[str, str] | None = None, python: str = sys.executable,
              user: int | None = None, program: list[str] | None = None) -> subprocess.Popen[str]:
        argv = [*(program or [python, str(AGENT)]), *agent_args]
        spec = {"root": str(self.root), "argv": argv, "project": str(self.proj),
                "home": str(self.home), "tmp": [str(self.tmp)], "net": net, "ports": list(ports),
                "timeout": timeout, "announce": False}
        code = ("import json,sys\nfrom agentlog.sandbox.run import run\n"
                "r=run(**json.loads(sys.argv[1]))\n"
                "sys.stderr.write('RESULT '+json.dumps(r.__dict__)+'\\n')\nsys.exit(0)\n")
        return subprocess.Popen([python, "-c", code, json.dumps(spec)], cwd=self.proj,
                                env={**self.env(), **(extra_env or {})}, user=user, group=user,
                                extra_groups=[] if user is not None else None,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, *agent_args: str, **kw: object) -> tuple[dict[str, object], dict[str, object], str]:
        """Run the agent to its end: (its JSON report, the run's result, stderr)."""
        p = self.start(*agent_args, **kw)  # type: ignore[arg-type]
        out, err = p.communicate(timeout=120)
        result = next((json.loads(line[7:]) for line in err.splitlines() if line.startswith("RESULT ")), None)
        assert result is not None, err
        report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        return report, result, err


@pytest.fixture
def box() -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(prefix="alsb-", dir="/tmp"))  # short: the socket path has 107 bytes
    try:
        yield Box(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _survivors(box: Box) -> list[int]:
    """Live processes of this box's runs, seen from here: those whose environment holds its
    BOX_ROOT (pids inside a run's PID namespace mean nothing out here)."""
    mark = f"BOX_ROOT={box.root}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if mark in env and _alive(int(d)):
            out.append(int(d))
    return out


def _kill_survivors(box: Box) -> None:
    """A failed test leaves nothing running either."""
    for pid in _survivors(box):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_floor_reads_and_writes(box: Box) -> None:
    report, result, _ = box.run("floor")
    assert report["write_project"] == "ok"
    assert report["write_tmp"] == "ok"
    for key in ("write_home_new", "write_bashrc", "write_data_root", "write_outside"):
        assert report[key] == "EACCES", key
    assert report["read_ssh"] == "EACCES"
    assert report["read_bashrc"] == "ok"
    assert report["read_etc"] == "ok"
    assert report["mknod_block"] in ("EACCES", "EPERM")  # EPERM: no CAP_MKNOD (not root)
    assert result["exit_code"] == 0
    # the same writes outside any run succeed (so the EACCES above is the sandbox's)
    (box.home / "new.txt").write_text("x")
    assert (box.home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY\n"


def test_brokered_command_policy_and_record(box: Box) -> None:
    report, result, _ = box.run("broker")
    assert report["inside"] == 0 and report["inside_out"] == "brokered\n"
    assert report["outside"] != 0
    assert report["ssh"] != 0
    assert result["commands"] == 4
    log = next((box.root / "logs" / "agentlog").glob("sandbox-*.jsonl"))
    text = log.read_text()
    assert text.count('"tool_call_started"') == 4
    assert '"policy_denied"' in text
    assert "echo brokered" in text
    # failures tells "denied by policy" from an ordinary failure
    r = subprocess.run([sys.executable, "-m", "agentlog", "failures", "--json"], env=box.env(), cwd=box.proj,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    classes = sorted(f["failure_class"] for f in json.loads(r.stdout))
    assert classes.count("policy_denied") == 2 and len(classes) == 3, classes  # exit 3 is no denial


def test_allow_and_deny_from_the_next_command(box: Box) -> None:
    grant = box.home / "outside"
    p = box.start("grant", str(grant))
    # the agent holds a brokered command open, then waits for the grant
    deadline = time.monotonic() + 30
    flag = box.proj / "holding"
    while not flag.exists():
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read() if p.stderr else ""
        time.sleep(0.05)
    env = box.env()
    cli = [sys.executable, "-m", "agentlog"]
    r = subprocess.run([*cli, "allow", str(grant)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "allowed from the next command" in r.stdout
    listed = subprocess.run([*cli, "run", "--list", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(listed.stdout)[0]["grants"] == [str(grant)]
    refused = subprocess.run([*cli, "allow", str(box.root)], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "data root" in refused.stderr
    (box.proj / "granted").write_text("1")
    while not (box.proj / "after-grant").exists():
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    r = subprocess.run([*cli, "deny", str(grant)], env=env, capture_output=True, text=True, timeout=60)
    assert "denied from the next command" in r.stdout
    (box.proj / "denied").write_text("1")
    out, err = p.communicate(timeout=60)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["running_before_grant"] != 0  # the command already running kept its policy
    assert report["next_after_grant"] == 0
    assert report["next_after_deny"] != 0
    assert (grant / "b.txt").exists() and not (grant / "a.txt").exists() and not (grant / "c.txt").exists()


def test_tcp_connect_outside_the_policy_fails(box: Box) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        report, _, _ = box.run("connect", str(port))
        assert report["connect"] == "EACCES"
        report, _, _ = box.run("connect", str(port), net="loopback", ports=(port,))
        assert report["connect"] == "ok"
        report, _, _ = box.run("connect", str(port), net="all")
        assert report["connect"] == "ok"
    finally:
        stop.set()
        t.join(2)
        srv.close()


def test_escape_attempts_fail(box: Box) -> None:
    report, result, _ = box.run("escape")
    for key, value in report.items():
        if key.startswith("pid_"):
            continue
        assert value != "ok", f"escape {key}: {value}"
    assert result["refused"] >= 1  # the daemonised process's connection
    assert report["pid_daemon"] and report["pid_brokered_daemon"]
    assert not _survivors(box)  # the daemonised processes are gone with the run


def test_socket_refuses_processes_outside_the_run(box: Box) -> None:
    p = box.start("wait", str(box.proj / "go"))
    try:
        deadline = time.monotonic() + 30
        sock = None
        while sock is None:
            found = list((box.root / "run" / "sandbox").glob("*/broker.sock"))
            sock = str(found[0]) if found else None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = subprocess.run([sys.executable, "-m", "agentlog", "exec", "-c", "touch " + str(box.proj / "x")],
                           env={**box.env(), "AGENTLOG_RUN_SOCKET": sock}, capture_output=True, text=True, timeout=60)
        assert r.returncode == 126 and "not part of agentlog run" in r.stderr
        assert not (box.proj / "x").exists()
    finally:
        (box.proj / "go").write_text("1")
        p.communicate(timeout=60)


@pytest.mark.slow
def test_100_mb_byte_exact(box: Box) -> None:
    report, _, _ = box.run("bulk", str(100 << 20))
    assert report["status"] == 0
    import hashlib

    h = hashlib.sha256()
    block = bytes(range(256)) * 4096
    for _ in range((100 << 20) // len(block)):
        h.update(block)
    assert report["sha256"] == h.hexdigest()
    assert report["bytes"] == 100 << 20


def test_interrupt_and_kill_reach_the_process_group(box: Box) -> None:
    report, result, _ = box.run("signals")
    assert report["sigint_status"] in (130, -2)
    assert report["group_after_sigint"] == []
    assert report["group_after_kill"] == []
    assert report["all_pids"] and not _survivors(box)


def test_run_leaves_no_process_behind(box: Box) -> None:
    report, result, _ = box.run("leave")
    time.sleep(0.1)
    assert report["pids"] and not _survivors(box)
    assert result["killed_after"]
    assert not list((box.root / "run" / "sandbox").glob("*"))  # the run's directory is gone


def test_route_hook_rewrites_bash_only(tmp_path: Path) -> None:
    from agentlog.sandbox.route import reply

    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "echo 'hi'", "description": "say hi"}}
    out = reply(payload, "/x/agentlog-exec")
    assert out is not None
    hso = out["hookSpecificOutput"]
    assert isinstance(hso, dict)
    assert hso["updatedInput"] == {"command": "/x/agentlog-exec -c 'echo '\"'\"'hi'\"'\"''", "description": "say hi"}
    assert hso["permissionDecision"] == "allow"
    again = {**payload, "tool_input": {"command": hso["updatedInput"]["command"]}}  # type: ignore[index]
    assert reply(again, "/x/agentlog-exec") is None
    assert reply({**payload, "tool_name": "Write"}, "/x/agentlog-exec") is None
    gemini = reply({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                    "tool_input": {"command": "ls", "dir_path": "."}}, "/x/agentlog-exec")
    assert gemini == {"hookSpecificOutput": {"hookEventName": "BeforeTool",
                                             "tool_input": {"command": "/x/agentlog-exec -c ls", "dir_path": "."}}}
    wrong_tool = {"hook_event_name": "BeforeTool", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert reply(wrong_tool, "/x/e") is None
    assert reply(payload, "") is None
    # as the script Claude runs: outside a run it prints nothing
    script = SRC / "agentlog" / "sandbox" / "route.py"
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOG_RUN_EXEC"}
    r = subprocess.run([sys.executable, "-I", "-S", str(script)], input=json.dumps(payload), env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == ""
    r = subprocess.run([sys.executable, "-I", "-S", str(script)], input=json.dumps(payload),
                       env={**env, "AGENTLOG_RUN_EXEC": "/x/agentlog-exec"}, capture_output=True, text=True, timeout=30)
    assert json.loads(r.stdout)["hookSpecificOutput"]["updatedInput"]["command"].startswith("/x/agentlog-exec -c ")


def test_exec_outside_a_run_and_usage() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOG_RUN_SOCKET"}
    env["PYTHONPATH"] = str(SRC)
    r = subprocess.run([sys.executable, "-m", "agentlog", "exec", "-c", "true"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 126 and "not inside an agentlog run" in r.stderr
    r = subprocess.run([sys.executable, "-m", "agentlog", "run"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "name the agent" in r.stderr


def test_bench_sandbox_reports(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-m", "agentlog", "bench", "sandbox", "--runs", "5", "--size-mb", "2",
                        "--out", str(tmp_path), "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["brokered_true_ms"]["n"] == res["direct_true_ms"]["n"] == 5
    assert res["client"].startswith("agentlog-exec-")  # the native client, built on the way
    assert res["brokered_mb_s"] > 0 and res["ruleset_rules"] > 0
    assert "added by the broker" in (tmp_path / "sandbox.md").read_text()


def test_cli_run_timeout_kills_the_agent_and_its_tree(box: Box) -> None:
    pidfile = box.proj / "bg.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "agentlog", "run", "--timeout", "1", "sh", "-c", script],
                       cwd=box.proj, env=box.env(), capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 137, r.stderr  # SIGKILL, told as the shell does
    assert "ended (exit -9)" in r.stderr
    assert pidfile.read_text().strip() and not _survivors(box)


def test_live_denial_narrows_the_project_and_grants_refuse_protected_paths(box: Box) -> None:
    from agentlog.core import UsageError
    from agentlog.sandbox.policy import build, check_grantable, floor_policy

    (box.proj / "locked").mkdir()
    (box.proj / "sub").mkdir()
    policy = floor_policy("t", str(box.proj), str(box.root), agent="claude", home=str(box.home), tmp=[str(box.tmp)])
    policy.denies = [str(box.proj / "locked")]
    # (a new entry directly in the project is refused too once a tree below it is denied: the walk)
    script = "echo x > locked/a; echo $?; echo x > sub/b; echo $?"
    for live, expect in ((True, [False, True]), (False, [True, True])):  # the floor never sees live denials
        built = build(policy, ABI, live=live)
        try:
            r = subprocess.run(["sh", "-c", script], cwd=box.proj, capture_output=True, text=True, timeout=30,
                               preexec_fn=built.ruleset.preexec())
        finally:
            built.ruleset.close()
        assert [code == "0" for code in r.stdout.split()] == expect, (live, r.stdout, r.stderr)
    for path in (box.home / ".ssh", box.home / ".claude" / "settings.json", box.root / "logs", box.base,
                 box.proj / ".claude", box.proj / ".gemini" / "settings.json"):
        with pytest.raises(UsageError):
            check_grantable(str(path), policy)
    check_grantable(str(box.home / "outside"), policy)
    # guarded: the project's agent directories always, Claude's hook-carrying ones when ~/.claude is the state
    guarded = set(policy.guarded)
    assert {str(box.proj / n) for n in (".claude", ".codex", ".gemini", ".cursor", ".mcp.json")} <= guarded
    assert str(box.home / ".claude" / "hooks") in guarded and str(box.home / ".claude" / "skills") in guarded
    codex = floor_policy("t", str(box.proj), str(box.root), agent="codex", home=str(box.home), tmp=[str(box.tmp)])
    assert not [p for p in codex.guarded if p.startswith(str(box.home) + "/")]
    walked = floor_policy("t", str(box.proj), str(box.root), agent="claude", home=str(box.home), tmp=[str(box.tmp)],
                          mounts=False)
    assert not walked.guarded and guarded <= set(walked.protected)


def _agent_settings(box: Box) -> None:
    """A project whose agent settings already exist in part (.claude), and in part do not."""
    (box.proj / ".claude" / "hooks").mkdir(parents=True)
    (box.proj / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (box.proj / ".claude" / "hooks" / "check.sh").write_text("exit 0\n")
    (box.proj / ".mcp.json").write_text("{}\n")
    (box.proj / "src").mkdir()


def _settings_unchanged(box: Box) -> None:
    assert (box.proj / ".claude" / "settings.json").read_text() == '{"hooks": {}}\n'
    assert (box.proj / ".claude" / "hooks" / "check.sh").read_text() == "exit 0\n"
    assert (box.proj / ".mcp.json").read_text() == "{}\n"
    assert sorted(os.listdir(box.proj / ".claude")) == ["hooks", "settings.json"]
    for name in (".gemini", ".codex", ".cursor"):  # made as mount points, removed with the run
        assert not (box.proj / name).exists(), name


def test_agent_settings_in_the_project_cannot_be_made_or_changed(box: Box) -> None:
    _agent_settings(box)
    report, result, _ = box.run("settings")
    assert result["exit_code"] == 0 and result["mounts_ms"] is not None  # in the run's own namespaces
    for key in ("umount", "remount_rw"):  # as root too: Landlock forbids changing the mounts
        assert report[key] == "EPERM", (key, report[key])
    for key in ("modify_claude_settings", "create_claude_local", "modify_hook_script", "create_gemini_settings",
                "create_codex_config", "create_codex_hooks", "create_cursor_hooks", "modify_mcp_json",
                "chmod_settings", "write_through_symlink"):
        assert report[key] == "EROFS", (key, report[key])
    for key in ("remove_settings", "rename_claude_dir", "remove_gemini_dir", "hardlink_settings",
                "replace_settings"):
        assert report[key] in ("EROFS", "EBUSY", "EXDEV"), (key, report[key])
    assert report["brokered_settings"] == "denied"
    # the rest of the project, its top level included, stays writable
    assert report["write_top_new"] == report["mkdir_top"] == report["write_sub"] == "ok"
    assert report["brokered_top"] == 0 and (box.proj / "from-broker.txt").read_text() == "y\n"
    _settings_unchanged(box)
    log = next((box.root / "logs" / "agentlog").glob("sandbox-*.jsonl")).read_text()
    assert '"policy_denied"' in log  # the brokered attempt, recorded as denied by policy


def test_agent_settings_without_namespaces_are_kept_by_landlock(box: Box) -> None:
    """The fallback (no user namespaces): the walk keeps them, at the cost of the project's top level."""
    _agent_settings(box)
    p = box.start("settings", extra_env={"AGENTLOG_RUN_NO_NAMESPACES": "1"})
    out, err = p.communicate(timeout=120)
    report = json.loads(out.strip().splitlines()[-1])
    assert '"mounts_ms": null' in err
    for key in ("modify_claude_settings", "create_claude_local", "modify_hook_script", "create_gemini_settings",
                "create_codex_config", "create_cursor_hooks", "modify_mcp_json", "remove_settings",
                "rename_claude_dir", "replace_settings", "write_through_symlink"):
        assert report[key] == "EACCES", (key, report[key])
    assert report["brokered_settings"] == "denied"
    assert report["write_sub"] == "ok"
    assert report["write_top_new"] == "EACCES"  # the cost, written down in docs/sandbox.md
    _settings_unchanged(box)


def _kill_9_leaves_nothing(box: Box, cli: list[str], env: dict[str, str], *, least: int,
                           user: int | None = None) -> None:
    """Start ``agentlog run`` (its agent touches ``box.tmp/ready`` when its daemons are up), see at
    least ``least`` processes of it, kill -9 it, and see every one of them gone within 10 s."""
    ready = box.tmp / "ready"
    log = open(box.base / "run.err", "wb")
    p = subprocess.Popen(cli, cwd=box.proj, env=env, user=user, group=user, extra_groups=[] if user else None,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and p.poll() is None, (box.base / "run.err").read_text()
            time.sleep(0.05)
        assert len(_survivors(box)) >= least, _survivors(box)
        p.kill()
        p.wait(30)
        deadline = time.monotonic() + 10
        while _survivors(box) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _survivors(box)
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
        _kill_survivors(box)


def test_sigkill_of_the_run_leaves_no_process(box: Box) -> None:
    """kill -9 of `agentlog run` itself: its PID namespace dies with it, daemons included."""
    ready = box.tmp / "ready"
    _kill_9_leaves_nothing(box, [sys.executable, "-m", "agentlog", "run", sys.executable, str(AGENT), "orphans",
                                 str(ready)], box.env(), least=4)  # the keeper, (the init,) the agent, 2 daemons
    # the killed run's empty mount points are swept by the next run
    assert (box.proj / ".claude").is_dir()
    r = subprocess.run([sys.executable, "-m", "agentlog", "run", "true"], cwd=box.proj, env=box.env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not [n for n in (".claude", ".codex", ".gemini", ".cursor") if (box.proj / n).exists()]
    assert not list((box.root / "run" / "sandbox").glob("*"))


NOBODY = 65534


def _python_for_nobody(box: Box) -> str:
    """An interpreter a user other than root can run agentlog with (this one may live under /root)."""
    import sysconfig

    site = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    for python in (sys.executable, "/usr/bin/python3"):
        env = {**box.env(), "PYTHONPATH": os.pathsep.join([str(SRC), site])}
        try:
            r = subprocess.run([python, "-c", "import agentlog.sandbox.run, agentlog.cli"], env=env, user=NOBODY,
                               group=NOBODY, extra_groups=[], cwd="/", capture_output=True, timeout=60)
        except OSError:
            continue
        if r.returncode == 0:
            box.site = site
            return python
    pytest.skip("no Python interpreter that the user nobody may run agentlog with")


@pytest.mark.skipif(os.geteuid() != 0, reason="run as a user already: every other test is this one")
def test_as_a_user_not_root(box: Box) -> None:
    """As a user (nobody), the run makes a user namespace of its own: the agents' settings are
    still unwritable (umount now fails for want of a capability), the project's top level stays
    writable, and a kill -9 of the run still leaves nothing."""
    _agent_settings(box)
    python = _python_for_nobody(box)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(box.base)], check=True, timeout=60)
    extra = {"PYTHONPATH": os.pathsep.join([str(SRC), box.site])}
    p = box.start("settings", python=python, user=NOBODY, extra_env=extra)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert '"mounts_ms": null' not in err  # a user namespace was made
    assert report["umount"] == report["remount_rw"] == "EPERM"
    for key in ("modify_claude_settings", "create_claude_local", "modify_hook_script", "create_gemini_settings",
                "create_codex_config", "create_cursor_hooks", "modify_mcp_json", "chmod_settings"):
        assert report[key] == "EROFS", (key, report[key])
    assert report["brokered_settings"] == "denied"
    assert report["write_top_new"] == report["write_sub"] == "ok" and report["brokered_top"] == 0
    _settings_unchanged(box)
    # kill -9 of the run as this user
    ready = box.tmp / "ready"
    cli = [python, "-m", "agentlog", "run", python, str(AGENT), "orphans", str(ready)]
    _kill_9_leaves_nothing(box, cli, {**box.env(), **extra}, least=5, user=NOBODY)  # the init too


def _without_landlock() -> None:
    """preexec_fn: a seccomp filter that answers ENOSYS to landlock_create_ruleset, as a kernel
    without Landlock does (the generic syscall number; no_new_privs first, as seccomp asks)."""
    import ctypes

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Insn))]

    insns = (Insn * 4)(Insn(0x20, 0, 0, 0),  # load the syscall number
                       Insn(0x15, 0, 1, 444),  # landlock_create_ruleset?
                       Insn(0x06, 0, 0, 0x00050000 | 38),  # then ENOSYS
                       Insn(0x06, 0, 0, 0x7FFF0000))  # else allow
    prog = Prog(4, insns)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def test_refuses_on_a_kernel_without_landlock(box: Box) -> None:
    """Never unconfined: where landlock_create_ruleset is ENOSYS, agentlog run refuses and starts nothing."""
    r = subprocess.run([sys.executable, "-m", "agentlog", "run", "touch", str(box.proj / "ran")], cwd=box.proj,
                       env=box.env(), capture_output=True, text=True, timeout=120, preexec_fn=_without_landlock)
    assert r.returncode == 1, r.stderr
    assert "no usable Landlock" in r.stderr and "will not start the agent unconfined" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (box.proj / "ran").exists()


def _live_sockets(box: Box, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(list((box.root / "run" / "sandbox").glob("*/broker.sock"))) < n:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_two_runs_listed_and_their_mount_points(box: Box) -> None:
    """With two live runs, allow names them and wants --run; the mount points the first made in the
    shared project outlive it while the second guards them, and go with the second."""
    first = box.start("wait", str(box.tmp / "go1"))
    try:
        _live_sockets(box, 1)
        second = box.start("wait", str(box.tmp / "go2"))
        try:
            _live_sockets(box, 2)
            cli = [sys.executable, "-m", "agentlog"]
            listed = subprocess.run([*cli, "run", "--list", "--json"], env=box.env(), capture_output=True, text=True,
                                    timeout=60)
            ids = [r["run"] for r in json.loads(listed.stdout)]
            assert len(ids) == 2
            grant = str(box.home / "outside")
            r = subprocess.run([*cli, "allow", grant], env=box.env(), capture_output=True, text=True, timeout=60)
            assert r.returncode == 2 and "several runs are live" in r.stderr and all(i in r.stderr for i in ids)
            r = subprocess.run([*cli, "allow", grant, "--run", ids[1]], env=box.env(), capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0 and f"run {ids[1]}:" in r.stdout
            (box.tmp / "go1").write_text("1")
            first.communicate(timeout=60)
            assert (box.proj / ".claude").is_dir()  # the second run still guards it
        finally:
            (box.tmp / "go2").write_text("1")
            second.communicate(timeout=60)
    finally:
        (box.tmp / "go1").write_text("1")
        first.communicate(timeout=60)
    assert not [n for n in (".claude", ".codex", ".gemini", ".cursor") if (box.proj / n).exists()]


def test_claude_user_settings_and_hook_directories(box: Box) -> None:
    """Run as Claude (a stand-in named `claude`): in its writable state ~/.claude, the settings
    files stay unwritable and uncreatable (the walk), its hook, agent, skill and command
    directories read-only (mounts, made when missing), the rest of its state writable."""
    claude = box.home / ".claude"
    (claude / "hooks").mkdir(parents=True)
    (claude / "hooks" / "h.sh").write_text("exit 0\n")
    (claude / "settings.json").write_text("{}\n")
    (claude / "projects").mkdir()
    fake = box.base / "bin" / "claude"
    fake.parent.mkdir()
    # agentlog run passes Claude's flags (--settings S --append-system-prompt NOTE) first: drop them
    fake.write_text(f"#!/bin/sh\nshift 4\nexec {sys.executable} {AGENT} \"$@\"\n")
    fake.chmod(0o755)
    report, result, _ = box.run("home_settings", program=[str(fake)])
    assert result["exit_code"] == 0
    assert report["modify_settings"] == report["create_settings_local"] == "EACCES"
    assert report["modify_hook"] == report["create_skill"] == report["create_agent"] == "EROFS"
    assert report["write_state"] == "ok"
    assert (claude / "settings.json").read_text() == "{}\n" and (claude / "hooks" / "h.sh").read_text() == "exit 0\n"
    assert sorted(os.listdir(claude)) == ["hooks", "projects", "settings.json"]  # the made mount points are gone
