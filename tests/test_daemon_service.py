"""`agentlog daemon install|uninstall`: the systemd user unit and the launchd agent.

Every test points HOME, XDG_CONFIG_HOME and AGENTLOG_HOME at tmp paths and
PATH at an empty directory (or one holding a fake systemctl/launchctl that
records its arguments), so no real service manager or home is touched.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.operations import login_service as service
from agentlog.operations.daemon import log_path
from agentlog.operations.login_service import (
    ServiceConflict,
    ServiceError,
    install,
    service_spec,
    systemd_word,
    uninstall,
)

AGENTLOG = Path(sys.executable).parent / "agentlog"

FAKE_TOOL = """#!/bin/sh
echo "${0##*/} $*" >> "$FAKE_LOG"
if [ "$1" = print ]; then
  [ -n "$FAKE_LOADED" ] && exit 0
  echo "Could not find service" >&2; exit 113
fi
if [ -n "$FAKE_FAIL" ]; then
  case " $* " in *" $FAKE_FAIL "*) echo "fake failure of $*" >&2; exit 1;; esac
fi
exit 0
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agentlog_home: Path) -> dict[str, Path]:
    """A tmp HOME and XDG_CONFIG_HOME, and a PATH with nothing on it."""
    paths = {"home": tmp_path / "home", "config": tmp_path / "config", "bin": tmp_path / "bin", "data": agentlog_home}
    for key in ("home", "bin"):
        paths[key].mkdir()
    monkeypatch.setenv("HOME", str(paths["home"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(paths["config"]))
    monkeypatch.setenv("PATH", str(paths["bin"]))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.delenv("FAKE_FAIL", raising=False)
    monkeypatch.delenv("FAKE_LOADED", raising=False)
    monkeypatch.delenv("AGENTLOG_SERVICE_PLATFORM", raising=False)
    return paths


def _fake(env: dict[str, Path], name: str) -> None:
    tool = env["bin"] / name
    tool.write_text(FAKE_TOOL)
    tool.chmod(0o755)


def _calls(env: dict[str, Path]) -> list[str]:
    log = env["bin"].parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _unit_path(env: dict[str, Path]) -> Path:
    return env["config"] / "systemd" / "user" / "agentlog.service"


def _plist_path(env: dict[str, Path]) -> Path:
    return env["home"] / "Library" / "LaunchAgents" / "dev.agentlog.daemon.plist"


def _listing(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --- rendering --------------------------------------------------------------


def _systemd_words(value: str, exec_line: bool) -> list[str]:
    """Split a setting's value as systemd does (systemd.syntax(7)): words,
    double quotes with C escapes, then %% -> % and, on Exec lines, $$ -> $."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", '"': '"', "'": "'"}
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] == " ":
            i += 1
        if i >= n:
            break
        word, quoted = "", False
        while i < n and (quoted or value[i] != " "):
            ch = value[i]
            if ch == '"':
                quoted = not quoted
            elif ch == "\\" and quoted:
                nxt = value[i + 1]
                if nxt == "x":
                    word += chr(int(value[i + 2 : i + 4], 16))
                    i += 2
                else:
                    word += escapes[nxt]
                i += 1
            else:
                assert quoted or ch not in "\\'", f"unquoted {ch!r} in {value!r}"
                word += ch
            i += 1
        assert not quoted, value
        word = word.replace("%%", "\0").replace("%", "<SPECIFIER>").replace("\0", "%")
        if exec_line:
            word = word.replace("$$", "\0").replace("$", "<VAR>").replace("\0", "$")
        words.append(word)
    return words


def _settings(unit: str) -> dict[str, str]:
    out = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_systemd_unit_runs_this_interpreter_with_the_data_root_escaped(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root = env["data"] / "my data 100%"
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    spec = service_spec("linux")
    assert spec.path == str(_unit_path(env))
    unit = spec.content.decode()
    assert unit.startswith("# agentlog-managed:")
    settings = _settings(unit)
    assert settings["Environment"] == f'"AGENTLOG_HOME={root.parent}/my data 100%%"'
    assert _systemd_words(settings["Environment"], exec_line=False) == [f"AGENTLOG_HOME={root}"]
    assert _systemd_words(settings["ExecStart"], exec_line=True) == [os.path.abspath(sys.executable), "-m", "agentlog", "daemon", "run"]
    assert settings["Restart"] == "on-failure"
    assert 1 <= int(settings["RestartSec"]) <= 30
    assert settings["KillSignal"] == "SIGTERM"
    assert int(settings["TimeoutStopSec"]) >= 60
    assert settings["WantedBy"] == "default.target"
    assert "[Unit]" in unit and "[Service]" in unit and "[Install]" in unit


@pytest.mark.parametrize("value", ["plain", "a b", "100%", "%h", "q\"uote", "apo'strophe", "back\\slash", "$HOME", "${X}", "semi;colon", "new\nline\ttab", "\x01ctl", "ünï", ""])
def test_systemd_words_round_trip(value: str) -> None:
    assert _systemd_words(systemd_word(value), exec_line=False) == [value]
    assert _systemd_words(systemd_word(value, exec_arg=True), exec_line=True) == [value]
    assert "\n" not in systemd_word(value)


def test_an_interpreter_path_with_a_dollar_keeps_it_literal() -> None:
    # systemd substitutes $ in argv but not in the path it executes: "@" separates them.
    unit = service.render_systemd_unit(["/opt/$x/bin/python", "-m", "agentlog", "daemon", "run"], "/data")
    assert _settings(unit)["ExecStart"] == '@"/opt/$x/bin/python" "/opt/$$x/bin/python" -m agentlog daemon run'


@pytest.mark.parametrize("bad", ["/o'brien/bin/python", '/q"uote/bin/python', "/back\\slash/bin/python", "/new\nline/python"])
def test_an_interpreter_path_systemd_cannot_run_is_refused(bad: str) -> None:
    with pytest.raises(ServiceError, match="systemd refuses"):
        service.render_systemd_unit([bad, "-m", "agentlog", "daemon", "run"], "/data")


def test_systemd_itself_reads_the_executable_path_we_wrote(tmp_path: Path) -> None:
    """systemd-analyze verify names the path it parsed when it cannot execute it."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    bindir = tmp_path / "odd 100%d $x ; dir" / "bin"
    bindir.mkdir(parents=True)
    exe = bindir / "python"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    units = tmp_path / "units"
    units.mkdir()
    unit = units / "agentlog.service"

    def verify(python: str) -> subprocess.CompletedProcess[str]:
        unit.write_text(service.render_systemd_unit([python, "-m", "agentlog", "daemon", "run"], str(tmp_path / "data 100% x")))
        return subprocess.run([analyze, "verify", "--user", "--man=no", str(unit)], env=env, capture_output=True, text=True, timeout=60)

    ok = verify(str(exe))
    if "Failed to initialize manager" in ok.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {ok.stderr.strip()}")
    assert ok.returncode == 0, ok.stderr
    missing = verify(str(bindir / "pythonX"))
    assert missing.returncode != 0
    assert f"Command {bindir}/pythonX is not executable" in missing.stderr


def test_launchd_plist(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root = env["data"] / "my data 100% <&>"
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    spec = service_spec("darwin")
    assert spec.path == str(_plist_path(env))
    assert b"<!-- agentlog-managed:" in spec.content
    plist = plistlib.loads(spec.content)
    assert plist == {
        "Label": "dev.agentlog.daemon",
        "ProgramArguments": [os.path.abspath(sys.executable), "-m", "agentlog", "daemon", "run"],
        "EnvironmentVariables": {"AGENTLOG_HOME": str(root)},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": log_path(str(root)),
        "StandardErrorPath": log_path(str(root)),
        "ExitTimeOut": service.STOP_TIMEOUT_SEC,
    }


def test_where_the_files_go() -> None:
    env = {"HOME": "/h", "XDG_CONFIG_HOME": "/c"}
    assert service.service_path("linux", env) == "/c/systemd/user/agentlog.service"
    assert service.service_path("linux", {"HOME": "/h", "XDG_CONFIG_HOME": "relative"}) == "/h/.config/systemd/user/agentlog.service"
    assert service.service_path("linux", {"HOME": "/h"}) == "/h/.config/systemd/user/agentlog.service"
    assert service.service_path("darwin", env) == "/h/Library/LaunchAgents/dev.agentlog.daemon.plist"
    assert service.current_platform("linux") == "linux" and service.current_platform("darwin") == "darwin"
    with pytest.raises(ServiceError, match="win32"):
        service.current_platform("win32")


# --- install / uninstall, no service manager ------------------------------


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_round_trip_leaves_the_directory_as_it_was(env: dict[str, Path], platform: service.Platform) -> None:
    path = _unit_path(env) if platform == "linux" else _plist_path(env)
    path.parent.mkdir(parents=True)
    (path.parent / "someone-else.service").write_text("[Unit]\n")
    before = _listing(path.parent)
    result = install(platform)
    assert result.outcome == "installed" and result.path == str(path)
    assert result.service_manager == "unreachable" and result.ok
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_bytes() == service_spec(platform).content
    assert not [p for p in path.parent.iterdir() if "agentlog-tmp" in p.name]
    removed = uninstall(platform)
    assert removed.outcome == "removed" and removed.ok
    assert _listing(path.parent) == before
    again = uninstall(platform)
    assert again.outcome == "not_installed" and again.service_manager == "skipped" and again.commands == []


def test_install_creates_missing_directories(env: dict[str, Path]) -> None:
    assert not env["config"].exists()
    install("linux")
    assert _unit_path(env).is_file()
    uninstall("linux")
    assert _listing(env["config"]) == {}


def test_second_install_is_unchanged(env: dict[str, Path]) -> None:
    assert install("linux").outcome == "installed"
    st = _unit_path(env).stat()
    result = install("linux")
    assert result.outcome == "unchanged"
    after = _unit_path(env).stat()
    assert (after.st_ino, after.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)  # not rewritten


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_a_foreign_file_is_never_replaced_or_removed_without_force(env: dict[str, Path], platform: service.Platform) -> None:
    path = _unit_path(env) if platform == "linux" else _plist_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("[Service]\nExecStart=/usr/bin/mine\n")
    with pytest.raises(ServiceConflict, match="not written by agentlog") as exc:
        install(platform)
    assert str(path) in str(exc.value)
    with pytest.raises(ServiceConflict, match="not written by agentlog"):
        uninstall(platform)
    r = CliRunner().invoke(cli, ["daemon", "install", "--platform", platform])
    assert r.exit_code == 1 and str(path) in r.stderr and "--force" in r.stderr
    r = CliRunner().invoke(cli, ["daemon", "uninstall", "--platform", platform])
    assert r.exit_code == 1 and str(path) in r.stderr
    assert path.read_text() == "[Service]\nExecStart=/usr/bin/mine\n"
    assert install(platform, force=True).outcome == "replaced"
    assert path.read_bytes() == service_spec(platform).content
    path.write_text("mine again\n")
    assert uninstall(platform, force=True).outcome == "removed"
    assert not path.exists()


def test_our_file_with_other_content_needs_force(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    install("linux")
    first = _unit_path(env).read_bytes()
    monkeypatch.setenv("AGENTLOG_HOME", str(env["data"] / "elsewhere"))
    with pytest.raises(ServiceConflict, match="different content") as exc:
        install("linux")
    assert str(_unit_path(env)) in str(exc.value)
    assert _unit_path(env).read_bytes() == first
    result = install("linux", force=True)
    assert result.outcome == "replaced"
    assert f"AGENTLOG_HOME={env['data']}/elsewhere" in _unit_path(env).read_text()
    assert uninstall("linux").outcome == "removed"  # ours, whatever its content: no --force needed


def test_cli_json_shape(env: dict[str, Path]) -> None:
    r = CliRunner().invoke(cli, ["daemon", "install", "--platform", "linux", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert set(data) == {
        "action", "platform", "path", "outcome", "data_root", "program_arguments",
        "service_manager", "detail", "next_steps", "commands", "activated", "ok",
    }  # fmt: skip
    assert data["action"] == "install" and data["platform"] == "linux" and data["outcome"] == "installed"
    assert data["path"] == str(_unit_path(env)) and data["data_root"] == str(env["data"])
    assert data["program_arguments"] == [os.path.abspath(sys.executable), "-m", "agentlog", "daemon", "run"]
    assert data["activated"] is False and data["ok"] is True and data["service_manager"] == "unreachable"
    r = CliRunner().invoke(cli, ["daemon", "install", "--platform", "linux", "--json"])
    assert json.loads(r.stdout)["outcome"] == "unchanged"
    r = CliRunner().invoke(cli, ["daemon", "uninstall", "--platform", "linux", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert "deactivated" in data and "activated" not in data
    assert data["action"] == "uninstall" and data["outcome"] == "removed"
    r = CliRunner().invoke(cli, ["daemon", "uninstall", "--json"], env={"AGENTLOG_SERVICE_PLATFORM": "linux"})
    assert json.loads(r.stdout)["outcome"] == "not_installed"


@pytest.mark.parametrize("name", ["install", "uninstall"])
def test_commands_have_help_and_json(name: str) -> None:
    r = CliRunner().invoke(cli, ["daemon", name, "--help"])
    assert r.exit_code == 0 and "--json" in r.output and "--force" in r.output
    assert "--platform" not in r.output  # hidden


def _run_cli(tmp_path: Path, env: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    child_env = {
        "PATH": str(empty),
        "HOME": str(env["home"]),
        "XDG_CONFIG_HOME": str(env["config"]),
        "AGENTLOG_HOME": str(env["data"]),
        "AGENTLOG_SERVICE_PLATFORM": "linux",
    }
    return subprocess.run([str(AGENTLOG), "daemon", *args], env=child_env, capture_output=True, text=True, timeout=120)


def test_real_cli_without_systemctl_writes_the_unit_and_says_it_is_not_activated(tmp_path: Path, env: dict[str, Path]) -> None:
    p = _run_cli(tmp_path, env, "install", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["outcome"] == "installed" and data["activated"] is False and data["ok"] is True
    assert data["service_manager"] == "unreachable" and "systemctl not found" in data["detail"]
    assert data["next_steps"] == ["systemctl --user daemon-reload", "systemctl --user enable --now agentlog.service"]
    assert _unit_path(env).is_file()
    p = _run_cli(tmp_path, env, "install")
    assert p.returncode == 0 and p.stdout == ""
    assert "already current" in p.stderr and "NOT activated" in p.stderr
    assert "systemctl --user enable --now agentlog.service" in p.stderr
    p = _run_cli(tmp_path, env, "uninstall", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outcome"] == "removed" and not _unit_path(env).exists()


# --- with a (fake) service manager ------------------------------------------


def test_systemd_is_reloaded_enabled_and_started(env: dict[str, Path]) -> None:
    _fake(env, "systemctl")
    result = install("linux")
    assert result.service_manager == "applied" and result.ok and result.next_steps == []
    assert _calls(env) == ["systemctl --user show-environment", "systemctl --user daemon-reload", "systemctl --user enable --now agentlog.service"]
    assert install("linux").outcome == "unchanged"  # still makes sure it is enabled and running
    assert _calls(env)[-1] == "systemctl --user enable --now agentlog.service"
    # what `enable` would have left behind; uninstall must not leave it dangling
    wants = _unit_path(env).parent / "default.target.wants"
    wants.mkdir()
    (wants / "agentlog.service").symlink_to(_unit_path(env))
    (env["bin"].parent / "calls.log").unlink()
    result = uninstall("linux")
    assert result.outcome == "removed" and result.service_manager == "applied"
    assert _calls(env) == ["systemctl --user show-environment", "systemctl --user disable --now agentlog.service", "systemctl --user daemon-reload"]
    assert not (wants / "agentlog.service").is_symlink()


def test_a_replaced_unit_is_restarted(env: dict[str, Path]) -> None:
    _unit_path(env).parent.mkdir(parents=True)
    _unit_path(env).write_text("not ours\n")
    _fake(env, "systemctl")
    assert install("linux", force=True).outcome == "replaced"
    assert _calls(env)[1:] == ["systemctl --user daemon-reload", "systemctl --user enable agentlog.service", "systemctl --user restart agentlog.service"]


def test_a_failing_systemctl_is_reported_and_exits_1(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(env, "systemctl")
    monkeypatch.setenv("FAKE_FAIL", "enable")
    r = CliRunner().invoke(cli, ["daemon", "install", "--platform", "linux", "--json"])
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["ok"] is False and data["activated"] is False and data["service_manager"] == "failed"
    assert "systemctl --user enable --now agentlog.service" in data["detail"] and "fake failure" in data["detail"]
    assert data["commands"][-1]["returncode"] == 1
    assert _unit_path(env).is_file()  # written; the user can retry the commands
    r = CliRunner().invoke(cli, ["daemon", "install", "--platform", "linux"])
    assert r.exit_code == 1 and "activation failed" in r.stderr


def test_an_unreachable_user_manager_is_not_a_failure(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(env, "systemctl")
    monkeypatch.setenv("FAKE_FAIL", "show-environment")
    result = install("linux")
    assert result.ok and result.service_manager == "unreachable"
    assert "no systemd user manager reachable" in result.detail and "fake failure" in result.detail
    assert _calls(env) == ["systemctl --user show-environment"]


def test_launchd_bootstrap_and_bootout(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(env, "launchctl")
    domain = f"gui/{os.getuid()}"
    plist = str(_plist_path(env))
    result = install("darwin")
    assert result.service_manager == "applied"
    assert _calls(env) == [f"launchctl print {domain}/dev.agentlog.daemon", f"launchctl bootstrap {domain} {plist}"]
    assert (env["data"] / "state").is_dir()  # launchd opens the log there before the daemon runs
    monkeypatch.setenv("FAKE_LOADED", "1")
    assert install("darwin").outcome == "unchanged"
    assert _calls(env)[-1] == f"launchctl print {domain}/dev.agentlog.daemon"  # loaded and current: nothing to do
    result = uninstall("darwin")
    assert result.service_manager == "applied"
    assert _calls(env)[-1] == f"launchctl bootout {domain}/dev.agentlog.daemon"
    assert not _plist_path(env).exists()


def test_launchd_falls_back_to_load(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(env, "launchctl")
    monkeypatch.setenv("FAKE_FAIL", "bootstrap")
    result = install("darwin")
    assert result.service_manager == "applied"
    assert _calls(env)[-1] == f"launchctl load -w {_plist_path(env)}"
