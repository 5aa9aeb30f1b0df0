"""``install``, ``uninstall`` and ``doctor`` with the native hook client (issue 29, build item 2).

The sandbox is test_install.py's (a fake HOME, nothing of the real user's), with a short
data root under /tmp (the capture server's socket path must fit in 108 bytes) and a PATH
that holds the system C compiler's directory, or not. Every build here is a real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.capture.command import hook_command, is_our_command, native_command
from agentlog.install import native_build
from agentlog.install.hook_client import CHOSEN_PYTHON, HookChoice, choose_hook
from agentlog.install.hook_refs import named_clients
from agentlog.install.jsonedit import find_our_entries
from agentlog.install.native_build import NO_COMPILER, WITHOUT_WERROR, build_client
from agentlog.install.installer import read_ledger
from agentlog.install.repair import fix
from native_support import short_root
from test_install import ALL, Sandbox, by_agent, make_sandbox

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
KEY_CHARS = set("0123456789abcdef")


def _sandbox(monkeypatch: pytest.MonkeyPatch, where: Path, path: str) -> Sandbox:
    box = make_sandbox(where)
    box.env["PATH"] = path.replace("{bin}", str(box.bin))
    for key, value in box.env.items():
        monkeypatch.setenv(key, value)
    for key in ("CC", "XDG_DATA_HOME"):
        monkeypatch.delenv(key, raising=False)
    return box


@pytest.fixture
def nsb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """A sandbox whose PATH finds the system C compiler (and no agent launcher)."""
    if CC is None:
        pytest.skip("no system C compiler on PATH")
    with short_root() as where:
        yield _sandbox(monkeypatch, where, "{bin}:" + os.path.dirname(CC))


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """A sandbox with no compiler at all: PATH without cc/gcc/clang, CC unset, no ziglang."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "ziglang" else real(name, *rest))
    with short_root() as where:
        yield _sandbox(monkeypatch, where, "{bin}")


def commands(box: Sandbox, agent: str) -> set[str]:
    return {e.command for e in find_our_entries(json.loads(box.config(agent).read_text()))}


def run_hook(box: Sandbox, command: str, payload: Mapping[str, object]) -> subprocess.CompletedProcess[bytes]:
    """The installed command as an agent runs it: through the shell, payload on stdin."""
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(dict(payload)).encode(), capture_output=True,
                          env={**os.environ, **box.env}, cwd=box.home, timeout=60)


def recorded(box: Sandbox, provider: str, session: str) -> list[dict[str, object]]:
    frames = []
    for log in (box.data / "logs" / provider).rglob("*.jsonl"):
        for line in log.read_text().splitlines():
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            event = frame.get("event") if isinstance(frame, dict) else None
            if isinstance(event, dict) and event.get("provider_session_id") == session:
                frames.append(event)
    return frames


@contextlib.contextmanager
def capture_server_answering(root: Path) -> Iterator[None]:
    """A listener on <root>/run/hook.sock that closes every connection (as the server does a probe)."""
    run = root / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(run / "hook.sock"))
    sock.listen(8)
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.recv(64)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        sock.close()
        (run / "hook.sock").unlink(missing_ok=True)


# --------------------------------------------------------------------------
# install


def test_install_writes_the_native_client_for_every_agent_and_it_records(nsb: Sandbox) -> None:
    nsb.make_agents()
    results = by_agent(nsb.install())
    assert {r.outcome for r in results.values()} == {"installed"}, [r.reason for r in results.values()]
    choice = results["claude-code"].hook
    assert choice is not None and choice.path == "native" and choice.binary is not None and not choice.warnings
    binary = Path(choice.binary)
    assert binary.parent == nsb.data / "bin" and set(binary.name.removeprefix("agentlog-hook-")) <= KEY_CHARS
    for agent in ALL:
        assert results[agent].hook == choice
        assert commands(nsb, agent) == {native_command(str(binary), agent)}
        assert is_our_command(native_command(str(binary), agent))
    assert named_clients(str(nsb.data), nsb.env) == {binary.name}
    # no daemon: the client runs the Python hook it was built with, and the event is recorded
    payload = {"session_id": "native-1", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": str(nsb.home)}
    r = run_hook(nsb, native_command(str(binary), "claude-code"), payload)
    assert r.returncode == 0 and r.stdout == b"", r.stderr
    assert [e["provider_event_name"] for e in recorded(nsb, "claude_code", "native-1")] == ["UserPromptSubmit"]
    again = by_agent(nsb.install())
    assert {r.outcome for r in again.values()} == {"already_current"}
    assert again["codex"].hook is not None and again["codex"].hook.cached


def test_cli_install_builds_first_and_capture_tests_run_the_client(nsb: Sandbox) -> None:
    from agentlog.cli.install_cmds import install_cmd

    nsb.make_agents()
    res = CliRunner().invoke(install_cmd, ["--json", "--yes"])
    assert res.exit_code == 0, res.output
    items = json.loads(res.stdout)
    for item in items:
        assert item["hook"]["path"] == "native" and item["hook"]["binary"].startswith(str(nsb.data / "bin"))
        assert item["capture_test"]["ok"], item["capture_test"]
        assert item["capture_test"]["command"] == native_command(item["hook"]["binary"], item["agent"])
    res = CliRunner().invoke(install_cmd, ["claude-code", "--yes", "--no-test"])
    assert "hooks: the native client" in res.stderr and "(already built)" in res.stderr


def test_install_without_a_compiler_writes_the_python_hook_and_says_so(bare: Sandbox) -> None:
    from agentlog.cli.install_cmds import install_cmd

    bare.make_agents()
    results = by_agent(bare.install())
    for agent in ALL:
        hook = results[agent].hook
        assert hook is not None and hook.path == "python" and hook.reason == NO_COMPILER
        assert commands(bare, agent) == {hook_command(agent)}
    assert not (bare.data / "bin").exists()
    bare.uninstall()
    res = CliRunner().invoke(install_cmd, ["codex", "--json", "--yes", "--no-test"])
    assert res.exit_code == 0, res.output
    (item,) = json.loads(res.stdout)
    assert item["hook"] == {"path": "python", "binary": None, "reason": NO_COMPILER, "warnings": "",
                            "cached": False, "planned": False}
    res = CliRunner().invoke(install_cmd, ["cursor", "--yes", "--no-test"])
    assert res.exit_code == 0, res.output
    assert f"hooks: the Python hook ({NO_COMPILER})" in res.stderr


def test_python_hook_flag_and_setting_keep_the_python_hook(nsb: Sandbox) -> None:
    from agentlog.cli.install_cmds import install_cmd

    nsb.make_agents("claude-code", "gemini-cli")
    res = CliRunner().invoke(install_cmd, ["claude-code", "--python-hook", "--json", "--yes", "--no-test"])
    (item,) = json.loads(res.stdout)
    assert item["hook"]["path"] == "python" and item["hook"]["reason"] == CHOSEN_PYTHON
    assert commands(nsb, "claude-code") == {hook_command("claude-code")}
    (nsb.data / "config.toml").write_text('hook_client = "python"\n')
    result = by_agent(nsb.install(["gemini-cli"]))["gemini-cli"]
    assert result.hook == HookChoice("python", reason=CHOSEN_PYTHON)
    assert not (nsb.data / "bin").exists(), "nothing was built"
    (nsb.data / "config.toml").write_text('hook_client = "native"\n')
    assert by_agent(nsb.install(["gemini-cli"]))["gemini-cli"].hook.path == "native"  # type: ignore[union-attr]


def test_dry_run_names_the_binary_to_be_built_and_writes_nothing(nsb: Sandbox) -> None:
    nsb.make_agents("cursor")
    (result,) = nsb.install(["cursor"], dry_run=True)
    assert result.hook is not None and result.hook.planned and result.hook.binary is not None
    assert result.diff is not None and Path(result.hook.binary).name in result.diff
    assert not (nsb.data / "bin").exists() and not nsb.config("cursor").exists()
    (real,) = nsb.install(["cursor"])
    assert real.hook is not None and real.hook.binary == result.hook.binary, "the plan named the binary built"


# --------------------------------------------------------------------------
# uninstall


@pytest.mark.parametrize("text", [None, "", "{}\n", '{\r\n  "a": "b"\r\n}\r\n', "\ufeff{\n  \"a\": 1\n}\n"])
def test_uninstall_after_a_native_install_is_byte_identical(nsb: Sandbox, text: str | None) -> None:
    nsb.make_agents()
    for agent in ALL:
        if text is not None:
            nsb.config(agent).write_bytes(text.encode())
    results = by_agent(nsb.install())
    assert all(r.hook is not None and r.hook.path == "native" for r in results.values())
    undone = by_agent(nsb.uninstall())
    for agent in ALL:
        assert undone[agent].outcome == "removed" and undone[agent].restored_original
        if text is None:
            assert not nsb.config(agent).exists()
        else:
            assert nsb.config(agent).read_bytes() == text.encode()
    assert read_ledger(nsb.data) == {}


def test_a_native_hook_of_another_data_root_is_ours(bare: Sandbox) -> None:
    """Written by another installation (no ledger here): reinstall replaces it in place, uninstall takes
    it out and leaves the user's own hook."""
    bare.make_agents("claude-code")
    other = "/home/someone else/.local/share/agentlog/bin/agentlog-hook-0123456789abcdef"
    mine = {"type": "command", "command": "my-hook --x"}
    config = {"hooks": {"Stop": [{"hooks": [mine, {"type": "command", "command": native_command(other, "claude-code")}]}]}}
    bare.config("claude-code").write_text(json.dumps(config, indent=2))
    result = by_agent(bare.install(["claude-code"]))["claude-code"]
    assert result.outcome == "updated"
    assert commands(bare, "claude-code") == {hook_command("claude-code")}
    by_agent(bare.uninstall(["claude-code"]))
    left = json.loads(bare.config("claude-code").read_text())
    assert left == {"hooks": {"Stop": [{"hooks": [mine]}]}}


# --------------------------------------------------------------------------
# doctor


def test_doctor_reports_the_path_the_staleness_and_the_daemon_and_fix_rebuilds(
        nsb: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nsb.make_agents("claude-code", "codex")
    nsb.install(["claude-code"])
    nsb.install(["codex"], python_hook=True)
    health = nsb.diagnose()
    built = health["claude-code"].hook["binary"]
    assert isinstance(built, str)
    assert health["claude-code"].hook == {"path": "native", "binary": built, "binary_exists": True,
                                          "in_data_root": True, "binary_current": True, "current_binary": built,
                                          "daemon_answering": False}
    assert health["claude-code"].state == "installed", health["claude-code"].problems
    assert health["claude-code"].hook_label == "native"
    assert any("capture server does not answer" in n for n in health["claude-code"].notes)
    assert health["codex"].hook["path"] == "python" and health["codex"].hook_label == "python"
    assert health["cursor"].hook["path"] is None
    with capture_server_answering(nsb.data):
        assert nsb.diagnose()["claude-code"].hook["daemon_answering"] is True

    # an upgrade: the C source changes, so this agentlog would build another binary
    source = tmp_path / "agentlog_hook.c"
    source.write_bytes(Path(native_build.SOURCE).read_bytes() + b"\n/* the next release */\n")
    monkeypatch.setattr(native_build, "SOURCE", str(source))
    stale = nsb.diagnose()["claude-code"]
    assert stale.state == "stale" and stale.hook_label == "native (stale)"
    assert stale.hook["binary_current"] is False and stale.hook["current_binary"] != built
    assert any("stale native client" in p for p in stale.problems)

    monkeypatch.setattr(native_build, "RETIRE_AFTER_S", 0.0)  # no grace for sessions started earlier
    report = fix(environ=nsb.env, home=nsb.home, data_root=nsb.data)
    assert report.hook is not None and report.hook.path == "native" and not report.hook.cached
    assert {r.agent: r.outcome for r in report.results} == {"claude-code": "updated", "codex": "updated"}
    after = nsb.diagnose()
    new = after["claude-code"].hook["binary"]
    assert new == stale.hook["current_binary"] and after["claude-code"].state == "installed"
    assert after["codex"].hook["path"] == "native", "--fix writes the form install would"
    assert not Path(built).exists(), "the old binary went once no config named it"


def test_cli_doctor_fix_rebuilds_a_missing_client(nsb: Sandbox) -> None:
    from agentlog.cli.install_cmds import doctor_cmd

    nsb.make_agents("gemini-cli")
    (result,) = nsb.install(["gemini-cli"])
    assert result.hook is not None and result.hook.binary is not None
    os.unlink(result.hook.binary)
    res = CliRunner().invoke(doctor_cmd, ["--json"])
    assert res.exit_code == 1
    item = {i["agent"]: i for i in json.loads(res.stdout)}["gemini-cli"]
    assert item["state"] == "stale" and item["hook"]["binary_exists"] is False
    assert any("no longer exists" in p for p in item["problems"])
    res = CliRunner().invoke(doctor_cmd, [], env={"COLUMNS": "250"})
    assert "native (missing)" in res.stdout and "capture server (the daemon): not answering" in res.stdout
    res = CliRunner().invoke(doctor_cmd, ["--fix", "--json"])
    assert res.exit_code == 0, res.output
    item = {i["agent"]: i for i in json.loads(res.stdout)}["gemini-cli"]
    assert item["fix"]["hook"]["path"] == "native" and item["fix"]["outcome"] == "already_current"
    assert item["state"] == "installed" and item["hook"]["binary_exists"] is True
    assert os.access(result.hook.binary, os.X_OK)
    res = CliRunner().invoke(doctor_cmd, ["--fix", "--python-hook"])
    assert res.exit_code == 0, res.output
    assert "--fix: gemini-cli: updated" in res.stderr
    assert commands(nsb, "gemini-cli") == {hook_command("gemini-cli")}


# --------------------------------------------------------------------------
# the build's cleanup and -Werror


def test_a_binary_a_config_still_names_survives_the_cleanup(nsb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_build, "RETIRE_AFTER_S", 0.0)  # the grace period is the next test's
    nsb.make_agents("claude-code", "codex")
    project = nsb.root / "project"
    project.mkdir()
    (result,) = nsb.install(["claude-code"])
    assert result.hook is not None and result.hook.binary is not None
    bin_dir = Path(result.hook.binary).parent
    # an older release's client, still named by a project-scope config; and one nobody names
    older = bin_dir / "agentlog-hook-1111111111111111"
    shutil.copy2(result.hook.binary, older)
    nsb.install(["codex"], scope="project", project_dir=project, hook=HookChoice("native", str(older)))
    assert str(project / ".codex" / "hooks.json") in (nsb.data / "state" / "hook-configs.json").read_text()
    orphan = bin_dir / "agentlog-hook-2222222222222222"
    shutil.copy2(result.hook.binary, orphan)

    rebuilt = build_client(str(nsb.data), python="/usr/bin/python3-of-the-next-release", environ=nsb.env)
    assert rebuilt.path is not None and rebuilt.path != result.hook.binary
    assert older.exists() and Path(result.hook.binary).exists(), "both are still named by a config"
    assert not orphan.exists()
    nsb.uninstall(["codex"], scope="project", project_dir=project)
    build_client(str(nsb.data), python="/usr/bin/python3-of-the-next-release", environ=nsb.env)
    assert not older.exists(), "once no config names it, it goes"
    assert Path(result.hook.binary).exists()


def test_a_binary_no_config_names_goes_only_after_the_grace_period(nsb: Sandbox) -> None:
    """Agents read their hooks when a session starts: a session started before install rewrote the
    config still runs the old binary, so it is kept for RETIRE_AFTER_S after no config names it."""
    nsb.make_agents("cursor")
    (first,) = nsb.install(["cursor"])
    assert first.hook is not None and first.hook.binary is not None
    old = Path(first.hook.binary)
    (second,) = nsb.install(["cursor"], hook=None, python_hook=True)  # the config no longer names it
    assert second.outcome == "updated" and old.exists()
    retired = json.loads((nsb.data / "state" / "hook-retired.json").read_text())
    assert set(retired) == {old.name}
    root = str(nsb.data)
    assert native_build.remove_unused(root, environ=nsb.env, now=retired[old.name] + 60) == [] and old.exists()
    later = retired[old.name] + native_build.RETIRE_AFTER_S + 1
    assert native_build.remove_unused(root, environ=nsb.env, now=later) == [old.name] and not old.exists()
    assert json.loads((nsb.data / "state" / "hook-retired.json").read_text()) == {}


def test_a_build_that_only_warns_is_used_without_werror_and_install_says_so(
        nsb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.cli.install_cmds import install_cmd

    redefined = ("-DAGENTLOG_WARN_TEST=1", "-DAGENTLOG_WARN_TEST=2")  # a warning, an error under -Werror
    built = build_client(str(nsb.data / "one"), environ=nsb.env, extra_flags=redefined)
    assert built.path is not None, built.reason
    assert built.warnings.startswith(WITHOUT_WERROR + ": ") and "AGENTLOG_WARN_TEST" in built.warnings
    again = build_client(str(nsb.data / "one"), environ=nsb.env, extra_flags=redefined)
    assert again.path == built.path and again.cached and again.warnings == WITHOUT_WERROR
    broken = build_client(str(nsb.data / "two"), environ=nsb.env,
                          extra_flags=("-include", "/nonexistent/agentlog-missing.h"))  # an error either way
    assert broken.path is None and broken.reason.startswith("the C compiler failed: ")

    monkeypatch.setattr(native_build, "FLAGS", (*native_build.FLAGS, *redefined))
    nsb.make_agents("claude-code")
    res = CliRunner().invoke(install_cmd, ["claude-code", "--yes", "--no-test"])
    assert res.exit_code == 0, res.output
    assert "hooks: the native client" in res.stderr and "built without -Werror" in res.stderr
    (binary,) = [c.split()[0] for c in commands(nsb, "claude-code")]
    payload = {"session_id": "lenient-1", "hook_event_name": "Stop", "cwd": str(nsb.home)}
    r = run_hook(nsb, native_command(binary, "claude-code"), payload)
    assert r.returncode == 0, r.stderr
    assert len(recorded(nsb, "claude_code", "lenient-1")) == 1


def test_choose_hook_without_build_builds_nothing(nsb: Sandbox) -> None:
    planned = choose_hook(str(nsb.data), nsb.env, python_hook=False, build=False)
    assert planned.path == "native" and planned.planned and not (nsb.data / "bin").exists()
    built = choose_hook(str(nsb.data), nsb.env, python_hook=False)
    assert built.binary == planned.binary and not built.planned
    assert choose_hook(str(nsb.data), nsb.env, python_hook=False, build=False) == HookChoice(
        "native", built.binary, cached=True)


def test_the_native_form_is_recognised_from_any_data_root() -> None:
    from agentlog.capture.command import is_native_client

    key = "0123456789abcdef"
    for command in (f"/x/bin/agentlog-hook-{key} codex", native_command(f"/a b/'c'/bin/agentlog-hook-{key}", "cursor"),
                    f"bin/agentlog-hook-{key} gemini-cli", f"env A=1 /d/bin/agentlog-hook-{key} claude-code"):
        assert is_our_command(command), command
    for part in (f"/x/agentlog-hook-{key}", f"/x/bin/agentlog-hook-{key.upper()}", f"/x/bin/agentlog-hook-{key}0",
                 f"/x/bin/agentlog-hook-{key[:-1]}", f"agentlog-hook-{key}", f"/x/bin/.agentlog-hook-{key}"):
        assert not is_native_client(part) and not is_our_command(f"{part} codex"), part


def test_cli_doctor_checks_and_fixes_a_projects_hooks(nsb: Sandbox) -> None:
    """--project: the project's config is the one checked and rewritten, the user's is untouched."""
    from agentlog.cli.install_cmds import doctor_cmd

    nsb.make_agents("claude-code")
    project = nsb.root / "project"
    project.mkdir()
    (result,) = nsb.install(["claude-code"], scope="project", project_dir=project)
    assert result.hook is not None and result.hook.binary is not None
    os.unlink(result.hook.binary)
    res = CliRunner().invoke(doctor_cmd, ["--json"])  # the user's scope holds no hooks
    assert {i["agent"]: i for i in json.loads(res.stdout)}["claude-code"]["state"] != "stale"
    res = CliRunner().invoke(doctor_cmd, ["--json", "--project", str(project)])
    assert res.exit_code == 1
    assert {i["agent"]: i for i in json.loads(res.stdout)}["claude-code"]["state"] == "stale"
    res = CliRunner().invoke(doctor_cmd, ["--fix", "--json", "--project", str(project)])
    assert res.exit_code == 0, res.output
    item = {i["agent"]: i for i in json.loads(res.stdout)}["claude-code"]
    assert item["state"] == "installed" and item["hook"]["binary_exists"] is True
    assert item["fix"]["scope"] == "project"
    assert os.access(result.hook.binary, os.X_OK)
    assert not nsb.config("claude-code").exists() or not commands(nsb, "claude-code")
