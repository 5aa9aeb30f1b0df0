"""Querying a vault pull (issue 30, item 2): the machine as a column, the byte check on the pages.

Two machines (separate data roots, separate keys) record real Claude sessions
through the hook, ship them to a real vault server, and an admin pulls them
into a data root of its own. One session id is on both machines (the second
copy lands in ``vault-pull/machines/<id>/``); one session's second batch has
its index tampered with on the vault, so its later frames fail the byte check.
Then, in the pulled root, the real CLI (``sessions``, ``sql``, ``timeline``)
and the dashboard (in process, the real app) are asked.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from starlette.testclient import TestClient

from agentlog.log.pulled import byte_checks, pulled_logs, sidecar
from scenario import BASE_US, SECOND, build_event
from vault_support import Vault, agentlog, start_vault, tamper_index_hash

PROVIDER = "claude_code"
HOSTILE_HOST = '<img src=x onerror=alert(1)>[bold]b[/bold]'


def record(home: Path, sid: str, steps: list[str], t0: int) -> None:
    """A Claude session's hook payloads, recorded through the hook path into ``home``."""
    from agentlog.capture import hook

    cwd = home.parent / f"work-{sid}"
    cwd.mkdir(exist_ok=True)
    base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": str(cwd)}
    cmd = {"command": f"make {sid}"}
    payloads = {
        "start": {"hook_event_name": "SessionStart", "source": "startup"},
        "prompt": {"hook_event_name": "UserPromptSubmit", "prompt": f"build {sid}"},
        "pre": {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": f"tu-{sid}-{t0}",
                "tool_input": cmd},
        "post": {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": f"tu-{sid}-{t0 - 2}",
                 "tool_input": cmd, "tool_response": {"stdout": "ok"}},
        "stop": {"hook_event_name": "Stop", "stop_hook_active": False},
    }
    for i, step in enumerate(steps):
        captured = build_event("claude-code", {**base, **payloads[step]}, BASE_US + (t0 + i) * SECOND, str(cwd))
        hook.record(captured, str(home), "relaxed")


@dataclass
class Team:
    vault: Vault
    into: Path
    machine: dict[str, str]
    """'a' / 'b' → the vault's machine id."""
    pull: subprocess.CompletedProcess[str]
    tampered_seq: int


def _ship(home: Path) -> None:
    r = agentlog(home, "ship")
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    tmp = tmp_path_factory.mktemp("views")
    v = start_vault(tmp)
    try:
        a, b = tmp / "a" / "home", tmp / "b" / "home"
        a.parent.mkdir()
        b.parent.mkdir()
        full = ["start", "prompt", "pre", "post", "stop"]
        record(a, "sess-a", full, 0)
        record(a, "shared-sess", full, 100)
        record(b, "sess-b", full, 200)
        record(b, "shared-sess", full, 300)
        record(b, "tamper-sess", ["start", "prompt", "pre"], 400)
        v.enroll(a, "alpha")
        v.enroll(b, HOSTILE_HOST)
        _ship(a)
        _ship(b)
        record(b, "tamper-sess", ["post", "pre", "post", "stop"], 410)  # a second batch: seq 3..6
        _ship(b)
        db = sqlite3.connect(str(v.data / "vault.db"))
        try:
            with db:
                (first, last), = db.execute("SELECT first_seq, last_seq FROM batches WHERE chain = ? AND first_seq > 0",
                                            (f"{PROVIDER}~tamper-sess",)).fetchall()
                assert (first, last) == (3, 6)
        finally:
            db.close()
        assert tamper_index_hash(v.data / "vault.db", f"{PROVIDER}~tamper-sess", first + 1) == 1
        machines = {m["host"]: m["machine_id"] for m in json.loads(v.admin("machines", "--json").stdout)}
        into = tmp / "pulled"
        pull = v.admin("pull", "--into", str(into), check=False)
        yield Team(v, into, {"a": machines["alpha"], "b": machines[HOSTILE_HOST]}, pull, first + 1)
    finally:
        v.stop()


def _json(home: Path, *args: str) -> Any:
    r = agentlog(home, *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _by_psid(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["provider_session_id"]: r for r in rows}


def test_the_pull_fails_loudly_on_the_tampered_batch_and_keeps_the_rest(team: Team) -> None:
    assert team.pull.returncode == 1 and f"tamper-sess seq {team.tampered_seq}" in team.pull.stderr
    checks = byte_checks(str(team.into))
    assert [(c.key, c.seq, c.failed, c.machine_id) for c in checks] == \
        [("tamper-sess", team.tampered_seq, True, team.machine["b"])]


def test_sessions_json_has_the_machine_of_every_session(team: Team) -> None:
    rows = _by_psid(_json(team.into, "sessions", "--all-projects"))
    assert set(rows) == {"sess-a", "sess-b", "shared-sess", "tamper-sess"}
    a, b = team.machine["a"], team.machine["b"]
    assert (rows["sess-a"]["machine"], rows["sess-a"]["host"]) == (a, "alpha")
    assert (rows["sess-b"]["machine"], rows["sess-b"]["host"]) == (b, HOSTILE_HOST)
    assert rows["tamper-sess"]["machine"] == b
    assert rows["tamper-sess"]["event_count"] == 3  # the first batch; the second failed the check
    assert rows["tamper-sess"]["byte_check_failures"] == 1
    assert all(rows[k]["byte_check_failures"] == 0 for k in ("sess-a", "sess-b", "shared-sess"))
    # the same session id from the other machine: its own data root, where the machine is read too
    first = rows["shared-sess"]["machine"]
    assert first in (a, b)
    other = b if first == a else a
    root = team.into / "vault-pull" / "machines" / other
    assert sidecar(str(root)) == (str(team.into / "vault-pull"), other)
    there = _by_psid(_json(root, "sessions", "--all-projects"))
    assert set(there) == {"shared-sess"} and there["shared-sess"]["machine"] == other
    assert [p.key for p in pulled_logs(str(root))] == ["shared-sess"]
    assert "shared-sess" in [p.key for p in pulled_logs(str(team.into))]


def test_sql_by_machine_and_the_byte_checks_view(team: Team) -> None:
    a, b = team.machine["a"], team.machine["b"]
    res = _json(team.into, "sql", "select machine, count(*) as n from sessions group by 1 order by 1")
    got = {row[0]: row[1] for row in res["rows"]}
    shared_here = _by_psid(_json(team.into, "sessions", "--all-projects"))["shared-sess"]["machine"]
    assert got == {a: 1 + (shared_here == a), b: 2 + (shared_here == b)}
    ev = _json(team.into, "sql", "select machine, host, count(*) from events where kind = 'session_started' "
                                 "group by all order by 1")
    assert {r[0] for r in ev["rows"]} == {a, b} and {r[1] for r in ev["rows"]} == {"alpha", HOSTILE_HOST}
    bc = _json(team.into, "sql", "select machine, log_key, seq, failed, session_id is not null from byte_checks")
    assert bc["rows"] == [[b, "tamper-sess", team.tampered_seq, True, True]]


def test_search_by_machine(team: Team) -> None:
    """``--machine`` (and ``machine:`` in the query) keeps the sessions pulled from that
    machine, by its id, its host or a prefix; a machine that pulled nothing here finds nothing."""
    psid = {r["session_id"]: k for k, r in _by_psid(_json(team.into, "sessions", "--all-projects")).items()}

    def sessions_found(*args: str) -> set[str]:
        r = agentlog(team.into, "search", *args, "--json", "--limit", "100")
        assert r.returncode == 0, r.stderr
        return {psid[h["session_id"]] for h in json.loads(r.stdout)}

    every = sessions_found("make")
    assert {"sess-a", "sess-b", "tamper-sess"} <= every
    # "shared-sess" was recorded on both machines; the copy in this root is one machine's
    shared_from_a = _machine_of_shared(team) == team.machine["a"]
    on_a = {"sess-a"} | ({"shared-sess"} if shared_from_a else set())
    assert sessions_found("make", "--machine", "alpha") == every & on_a
    assert sessions_found("make", "--machine", team.machine["b"]) == every - on_a
    assert sessions_found(f"make machine:{team.machine['a'][:6]}") >= {"sess-a"}
    assert sessions_found("make", "--machine", "no-such-host") == set()


def _machine_of_shared(team: Team) -> str:
    return str(_by_psid(_json(team.into, "sessions", "--all-projects"))["shared-sess"]["machine"])


def test_timeline_shows_machine_and_failed_byte_check(team: Team) -> None:
    r = agentlog(team.into, "timeline", "--all-projects", "--limit", "10")
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.split("\n\n")
    tampered = [blk for blk in blocks if "failed the byte check" in blk]
    assert len(tampered) == 1 and team.machine["b"] in tampered[0]
    assert HOSTILE_HOST in r.stdout  # printed as text, not read as markup
    table = agentlog(team.into, "sessions", "--all-projects")
    assert table.returncode == 0 and "machine\thost\tbyte check" in table.stdout.splitlines()[0]


def test_dashboard_marks_the_failed_frames_session_and_not_the_good_ones(team: Team) -> None:
    from agentlog.web.app import create_app
    from agentlog.web.security import COOKIE, Guard

    rows = _by_psid(_json(team.into, "sessions", "--all-projects"))
    pill = 'class="pill failed byte-check"'
    guard = Guard(port=8765)
    app = create_app(str(team.into), guard, live=False)
    with TestClient(app, base_url=f"http://127.0.0.1:{guard.port}") as client:
        r = client.get(f"/?token={guard.token}", follow_redirects=False)
        client.cookies.set(COOKIE, r.cookies[COOKIE])
        timeline = client.get("/timeline").text
        assert timeline.count(pill) == 1
        assert "<img src=x" not in timeline and "&lt;img src=x onerror=alert(1)&gt;" in timeline
        bad = client.get(f"/sessions/{rows['tamper-sess']['session_id']}").text
        assert bad.count(pill) == 1 and f"frame {team.tampered_seq} and the frames after it were not pulled" in bad
        assert "differ from its index entry" in bad and team.machine["b"] in bad and "<img src=x" not in bad
        for good in ("sess-a", "sess-b", "shared-sess"):
            page = client.get(f"/sessions/{rows[good]['session_id']}")
            assert page.status_code == 200 and pill not in page.text and "Byte check" not in page.text
        api = client.get(f"/api/sessions/{rows['tamper-sess']['session_id']}").json()
        assert api["session"]["byte_checks"] == [{"seq": team.tampered_seq, "failed": True,
                                                  "problem": api["session"]["byte_checks"][0]["problem"]}]
        integrity = client.get("/integrity").text
        assert integrity.count(pill) == 1 and "<img src=x" not in integrity


# -- the sidecar reader alone ---------------------------------------------------------------


def _write_sidecar(into: Path, chains: list[dict[str, Any]], report: list[dict[str, Any]]) -> None:
    d = into / "vault-pull"
    d.mkdir(parents=True)
    (d / "chains.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chains) + "not json\n")
    (d / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in report))


def test_reader_splits_roots_dedupes_and_drops_what_a_later_pull_took(tmp_path: Path) -> None:
    into = tmp_path / "moved-after-pull"
    old = "/elsewhere/pulled"  # the roots as the pull wrote them, before the directory moved
    _write_sidecar(into, [
        {"log": "p/s1", "machine_id": "m-1", "host": "h1", "chain": "p~s1", "root": old, "seq": 9},
        {"log": "p/s1", "machine_id": "m-2", "host": "h2", "chain": "p~s1", "root": f"{old}/vault-pull/machines/m-2",
         "seq": 2},
        {"log": "bad", "machine_id": "m-3", "chain": "x", "root": old, "seq": 0},
    ], [
        {"machine_id": "m-1", "chain": "p~s1", "seq": 5, "problem": "old failure", "fatal": True},  # since pulled
        {"machine_id": "m-2", "chain": "p~s1", "seq": 3, "problem": "bad bytes", "fatal": True},
        {"machine_id": "m-2", "chain": "p~s1", "seq": 3, "problem": "bad bytes", "fatal": True},  # pulled again
        {"machine_id": "m-1", "chain": "p~s1", "seq": 4, "problem": "purged", "fatal": False},
        {"machine_id": "m-1", "chain": "p~s1", "seq": None, "problem": "no seq", "fatal": True},
    ])
    assert [(p.key, p.machine_id) for p in pulled_logs(str(into))] == [("s1", "m-1")]
    sub = into / "vault-pull" / "machines" / "m-2"
    assert [(p.key, p.machine_id, p.seq) for p in pulled_logs(str(sub))] == [("s1", "m-2", 2)]
    assert [(c.seq, c.failed) for c in byte_checks(str(into))] == [(4, False)]
    assert [(c.seq, c.problem) for c in byte_checks(str(sub))] == [(3, "bad bytes")]
    assert pulled_logs(str(tmp_path)) == [] and sidecar(str(tmp_path)) is None


def test_sql_log_key_is_session_key() -> None:
    import duckdb

    from agentlog.log.layout import session_key
    from agentlog.query.pulled import log_key_sql

    con = duckdb.connect()
    for psid in ("abc-123", "a" * 120, "a" * 121, ".x", "_x", "a/b", "ünï", "x y", "unknown", "", None, "A.b_c-9"):
        got = con.execute(f"SELECT {log_key_sql('x')} FROM (SELECT ?::VARCHAR AS x)", [psid]).fetchone()
        assert got is not None and got[0] == session_key(None if psid in (None, "unknown") else psid), psid
