"""The daemon ships to the vault on a schedule (issue 30: "ship is never run from the
hook; the daemon can run it on a schedule"): ``operations/ship_schedule.py``.

Real parts throughout: the vault server of vault_support.py, the daemon started as
``agentlog daemon run`` (``operations.daemon.start``), and the ship passes it starts as
child processes. The schedule's timeout and stop are tested with real child processes
that sleep.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from agentlog.cli.ship_cmds import parse_duration
from agentlog.core.config import ConfigError, validate
from agentlog.operations.daemon import ship_schedule, start, state, stop
from agentlog.operations.ship_schedule import ShipSchedule, command, last_ship, summarize
from agentlog.vault.ship import shipped_state
from conftest import run_hook
from vault_support import Vault, agentlog, restart, start_vault, vault  # noqa: F401  (the fixture)

def _record(home: Path, session: str, prompt: str = "hi") -> None:
    """One hook event of a real Claude Code session, recorded by the real hook."""
    payload = json.dumps({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": "/tmp"})
    r = run_hook(payload.encode(), env={"AGENTLOG_HOME": str(home)})
    assert r.returncode == 0, r.stderr


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("capture_server = false\n" + text)


def _wait_for(pred: Callable[[], Any], seconds: float, what: str, home: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    log = (home / "state" / "daemon.log").read_text() if home is not None and (home / "state" / "daemon.log").exists() else ""
    raise AssertionError(f"not reached within {seconds} s: {what}\n{log}")


def _states(home: Path) -> dict[str, tuple[str, int | None, int | None]]:
    """Per chain: (its ship state, shipped seq, head seq)."""
    return {c["chain"]: (c["state"], c["shipped_seq"], c["head_seq"]) for c in shipped_state(str(home))}


def _all_shipped(home: Path, chains: int = 1) -> bool:
    got = _states(home)
    return len(got) == chains and all(state == "shipped" and seq == head for state, seq, head in got.values())


def _ship_lines(home: Path) -> list[str]:
    path = home / "state" / "daemon.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines if " " in line and line.split(" ", 1)[1].startswith("ship")]


def _children(pid: int) -> list[tuple[int, int, str]]:
    """(pid, niceness, command line) of each child of ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append((int(entry), int(fields[16]), cmd))
    return out


# -- against a real vault -------------------------------------------------------------------------

def test_the_daemon_ships_an_enrolled_root_on_its_schedule_at_the_lowest_priority(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    _config(home, "ship_minutes = 0.02\n")  # 1.2 s
    _record(home, "s1")
    vault.enroll(home)
    st = start(str(home), interval=0.05)
    niceness: set[int] = set()
    try:
        assert st.pid
        pid = st.pid

        def shipped(head: int) -> bool:
            if sys.platform.startswith("linux"):
                niceness.update(n for _, n, cmd in _children(pid) if " ship --json" in cmd)
            got = list(_states(home).values())
            return len(got) == 1 and got[0][0] == "shipped" and got[0][1] == got[0][2] == head

        _wait_for(lambda: shipped(0), 30, "the first pass shipped the session", home)
        _record(home, "s1", "and more")
        _wait_for(lambda: shipped(1), 30, "a later pass shipped the new frame", home)
        _wait_for(lambda: (last_ship(str(home)) or {}).get("frames") == 0, 30, "an idle pass after it", home)
    finally:
        stop(str(home))
    if sys.platform.startswith("linux"):
        assert niceness == {19}, niceness  # seen at least once, and only at the lowest priority
    lines = _ship_lines(home)
    assert lines[0] == "ship: enrolled with a vault; a pass every 0.02 minutes", lines
    assert any(line.startswith("ship: ok, 1 frame sent; sessions: 1 shipped") for line in lines), lines
    assert any(line.startswith("ship: ok, 0 frames sent; sessions: 1 up to date") for line in lines), lines
    last = home / "state" / "ship-last.json"
    assert stat.S_IMODE(os.stat(last).st_mode) == 0o600
    doc = json.loads(agentlog(home, "status", "--no-ingest", "--json", check=True).stdout)
    (chain,) = [c["chain"] for c in doc["vault"]]
    assert [(c["state"], c["shipped_seq"]) for c in doc["vault"]] == [("shipped", 1)]
    assert doc["last_ship"]["status"] == "ok" and doc["last_ship"]["exit_code"] == 0
    assert doc["last_ship"]["sessions"] == {"up to date": 1} and doc["last_ship"]["at"].endswith("Z")
    assert "last ship (the daemon)" in agentlog(home, "status", "--no-ingest", check=True).stdout
    assert "vault: the daemon last shipped at" in agentlog(home, "doctor").stderr
    chains = json.loads(vault.admin("chains", "--json").stdout)
    assert [(c["chain"], c["head_seq"]) for c in chains] == [(chain, 1)]


def test_an_unreachable_vault_is_logged_and_the_daemon_ships_once_it_is_back(tmp_path: Path) -> None:
    v = start_vault(tmp_path)
    home = tmp_path / "m"
    try:
        _config(home, "ship_minutes = 0.02\n")
        _record(home, "u")
        v.enroll(home)
        v.stop()
        start(str(home), interval=0.05)
        try:
            _wait_for(lambda: (last_ship(str(home)) or {}).get("status") == "unreachable", 30, "an unreachable pass", home)
            assert state(str(home)).running
            assert last_ship(str(home))["exit_code"] == 1  # type: ignore[index]
            assert [s for s, _, _ in _states(home).values()] == ["not shipped"]
            v = restart(v, tmp_path)
            _wait_for(lambda: _all_shipped(home), 30, "shipped once the vault is back", home)
            assert state(str(home)).running
        finally:
            stop(str(home))
    finally:
        v.stop()
    lines = _ship_lines(home)
    assert any(line.startswith("ship: unreachable: the vault is unreachable (") for line in lines), lines
    assert any(line.startswith("ship: ok, 1 frame sent") for line in lines), lines


def test_a_root_not_enrolled_never_starts_a_ship_pass(tmp_path: Path) -> None:
    home = tmp_path / "m"
    _config(home, "ship_minutes = 0.005\n")  # 0.3 s
    _record(home, "n")
    st = start(str(home), interval=0.05)
    seen: list[str] = []
    try:
        assert st.pid
        pid = st.pid
        deadline = time.monotonic() + 2.0  # several intervals
        while time.monotonic() < deadline:
            if sys.platform.startswith("linux"):
                seen += [cmd for _, _, cmd in _children(pid) if " ship" in cmd]
            time.sleep(0.05)
    finally:
        stop(str(home))
    assert seen == []
    assert _ship_lines(home) == []
    assert "ingested 1 events" in (home / "state" / "daemon.log").read_text()
    assert not (home / "state" / "ship-last.json").exists() and not (home / "vault").exists()
    assert "last_ship" not in json.loads(agentlog(home, "status", "--no-ingest", "--json", check=True).stdout)


# -- the schedule itself, with real child processes ------------------------------------------------

def _sleeper(marker: Path, ignore_term: bool = False) -> list[str]:
    code = ("import pathlib, signal, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
            + f"pathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n")
    return [sys.executable, "-c", code]


def test_a_pass_past_its_timeout_is_killed_and_the_next_is_due_an_interval_after_it_started(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "vault").mkdir(parents=True)
    (root / "vault" / "machine.key").write_bytes(b"\0" * 32)  # enrolled, by path
    lines: list[str] = []
    s = ShipSchedule(str(root), 3600.0, log=lines.append, timeout_s=0.5, argv=_sleeper(tmp_path / "up"))
    t0 = time.monotonic()
    assert s.due(t0)  # the first pass: at once
    s.start()
    assert s.running and not s.due(time.monotonic() + 7200)  # never two at once
    _wait_for(lambda: (s.poll(), not s.running)[1], 10, "killed at its timeout")
    assert lines == ["ship: killed after 0.5 s (the next pass resumes)"]
    doc = last_ship(str(root))
    assert doc is not None and doc["status"] == "timeout" and doc["exit_code"] == -9 and doc["seconds"] >= 0.5
    assert not s.due(time.monotonic()) and not s.due(t0 + 3599.0) and s.due(t0 + 3601.0)


def test_stopping_gives_a_pass_its_grace_then_kills_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "vault").mkdir(parents=True)
    (root / "vault" / "machine.key").write_bytes(b"\0" * 32)
    lines: list[str] = []
    s = ShipSchedule(str(root), 60.0, log=lines.append, argv=_sleeper(tmp_path / "up", ignore_term=True))
    s.start()
    _wait_for(lambda: (tmp_path / "up").exists(), 20, "the child ignores SIGTERM")
    t0 = time.monotonic()
    s.stop(grace_s=0.5)
    assert 0.5 <= time.monotonic() - t0 < 5 and not s.running
    assert lines == ["ship: stopped with the daemon (the next pass resumes)"]
    assert last_ship(str(root))["exit_code"] == -9  # type: ignore[index]
    s.stop()  # nothing running: a no-op


def test_no_pass_when_not_enrolled_or_turned_off(tmp_path: Path) -> None:
    lines: list[str] = []
    s = ShipSchedule(str(tmp_path), 60.0, log=lines.append, argv=_sleeper(tmp_path / "up"))
    now = time.monotonic()
    assert not s.due(now) and not s.due(now + 30)  # looks again an interval later
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "machine.key").write_bytes(b"\0" * 32)
    assert not s.due(now + 30) and s.due(now + 61)
    assert not ShipSchedule(str(tmp_path), 0, log=lines.append).due(now + 10**6)
    assert lines == []


def test_settings_prune_after_and_a_bad_config(tmp_path: Path) -> None:
    assert validate({"ship_minutes": 0.5, "ship_prune_after_days": 7})["ship_minutes"] == 0.5
    for bad in ({"ship_minutes": 1441}, {"ship_minutes": -1}, {"ship_prune_after_days": "7d"}, {"ship_minutes": True}):
        with pytest.raises(ConfigError):
            validate(bad)
    argv = command(7 * 86400)
    assert argv[1:] == ["-m", "agentlog", "ship", "--json", "--prune-after", "604800.000000"]
    assert parse_duration(argv[-1]) == 7 * 86400 and parse_duration(command(1e-7 * 86400)[-1]) == pytest.approx(0.00864)
    assert "--prune-after" not in command(None)
    root = tmp_path / "r"
    _config(root, "ship_minutes = 0.5\nship_prune_after_days = 1.5\n")
    s = ship_schedule(str(root))
    assert s.every_s == 30 and s.argv[-1] == "129600.000000"
    (root / "config.toml").write_text("ship_minutes = 'often'\n")
    s = ship_schedule(str(root))  # logged, the defaults used
    assert s.every_s == 300 and "--prune-after" not in s.argv
    assert "ship settings unusable" in (root / "state" / "daemon.log").read_text()


def test_outcomes_are_summed_up_from_the_passes_json_or_its_last_error_line() -> None:
    out = json.dumps({"status": "ok", "message": "", "chains": [
        {"chain": "a", "status": "shipped", "frames": 4}, {"chain": "b", "status": "up to date", "frames": 0},
        {"chain": "c", "status": "shipped", "frames": 2}]}).encode()
    res = summarize(0, out, b"")
    assert res == {"status": "ok", "exit_code": 0, "sessions": {"shipped": 2, "up to date": 1}, "frames": 6,
                   "summary": "ok, 6 frames sent; sessions: 2 shipped, 1 up to date"}
    res = summarize(1, json.dumps({"status": "unreachable", "message": "the vault is unreachable (refused)", "chains": []}).encode(), b"")
    assert res["summary"] == "unreachable: the vault is unreachable (refused)"
    assert summarize(0, b'{"status": "ok", "message": "", "chains": []}', b"")["summary"] == "ok, no sessions"
    res = summarize(1, b"", b"Traceback...\nerror: the vault's recipient set is not acceptable\n\n")
    assert res["status"] == "failed" and res["summary"] == "failed (exit 1): error: the vault's recipient set is not acceptable"
