"""``agentlog team query`` (issue 31, part 2): the team tables on a real S3 API (moto's
server), answered by DuckDB, by Daft locally, and by Daft on a real local Ray cluster
(a head and two worker nodes on loopback) — the same rows every time.

Two data roots record real Claude Code and Codex hook payloads through the hook path
(the reference scenario, with different session ids on the second machine) and are
published as two machines (team_support.build_team_tables).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.query.engine import QueryError
from agentlog.team import TeamError
from agentlog.team.location import Location
from agentlog.team.query import ask
from scenario import Scenario, _claude, _codex, build_reference, make_repo
from team_support import Moto, build_team_tables, closed_port, start_moto

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def moto() -> Iterator[Moto]:
    m = start_moto()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def team(moto: Moto, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two machines' data roots published to ``s3://team/org``."""
    tmp = tmp_path_factory.mktemp("team")
    a, b = tmp / "a", tmp / "b"
    build_reference(str(a), str(tmp / "work-a"))
    sc = Scenario(root=str(b), repo=make_repo(str(tmp / "work-b")), claude_session="claude-b-session",
                  codex_session="codex-b-session")
    _claude(sc)
    _codex(sc)
    url = moto.url("org")
    written = {"machine-a": build_team_tables(str(a), url, "machine-a", "host-a"),
               "machine-b": build_team_tables(str(b), url, "machine-b", "host-b")}
    assert written["machine-a"]["events"] == 27 and written["machine-b"]["attempts"] > 0
    return {"url": url, "loc": Location.parse(url), "roots": {"machine-a": str(a), "machine-b": str(b)}}


def _local(root: str, sql: str) -> Any:
    from agentlog.query.engine import Engine

    with Engine(root) as engine:
        return engine.run(sql)


def _sorted(rows: list[Any]) -> list[Any]:
    return sorted((tuple(r) for r in rows), key=repr)


# ------------------------------------------------------------------- duckdb


@pytest.mark.parametrize("view", ["events", "sessions", "turns", "tool_calls", "attempts", "usage"])
def test_duckdb_rows_are_the_local_engines(team: dict[str, Any], view: str) -> None:
    for machine, root in team["roots"].items():
        local = _local(root, f"SELECT * FROM {view}")
        keep = [i for i, c in enumerate(local.columns) if c not in ("machine", "host")]  # (events and sessions')
        team_own = "machine, host, day, publisher" + (", command_key" if view == "events" else "")
        got = ask(team["loc"], f"SELECT * EXCLUDE ({team_own}) FROM {view} WHERE machine = '{machine}'")
        assert got.columns == [local.columns[i] for i in keep]
        assert got.types == [local.types[i] for i in keep]
        assert _sorted(got.rows) == _sorted([tuple(r[i] for i in keep) for r in local.rows])
        if view != "usage":
            assert got.rows, view


def test_the_events_command_key_is_the_captures(team: dict[str, Any]) -> None:
    """The team's own ``command_key`` column holds what each event's ``attrs`` says (null when
    nothing), so "which commands fail most" need not match every row's JSON."""
    for machine, root in team["roots"].items():
        local = _local(root, "SELECT event_id, json_extract_string(attrs, '$.command_key') FROM events")
        got = ask(team["loc"], f"SELECT event_id, command_key FROM events WHERE machine = '{machine}'")
        assert _sorted(got.rows) == _sorted(local.rows)
        keys = [k for _, k in got.rows if k is not None]
        assert keys and all(len(k) == 16 for k in keys), got.rows  # a shell command's digest


def test_duckdb_statement_language(team: dict[str, Any]) -> None:
    got = ask(team["loc"], "SHOW ATTEMPTS")
    assert len(got.rows) == len(ask(team["loc"], "SELECT * FROM attempts WHERE NOT retracted").rows) >= 4
    machines = ask(team["loc"], "SELECT DISTINCT machine FROM attempts")
    assert sorted(r[0] for r in machines.rows) == ["machine-a", "machine-b"]
    sup = ask(team["loc"], "SHOW SUPERSEDED ATTEMPTS")
    assert len(sup.rows) == 2  # one per machine: the failed edit superseded by the one that worked


@pytest.mark.parametrize("sql", [
    "CREATE TABLE x AS SELECT 1",
    "COPY (SELECT * FROM sessions) TO '/tmp/agentlog-team-copy.csv'",
    "ATTACH '/tmp/agentlog-team.db' AS other",
    "SET enable_external_access = true",
    "SELECT 1; SELECT 2",
    "INSTALL httpfs",
])
def test_duckdb_is_read_only(team: dict[str, Any], sql: str) -> None:
    with pytest.raises(QueryError) as e:
        ask(team["loc"], sql)
    assert e.value.kind == "refused"
    assert not os.path.exists("/tmp/agentlog-team-copy.csv")


def test_duckdb_reads_no_file(team: dict[str, Any], tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    with pytest.raises(QueryError) as e:
        ask(team["loc"], f"SELECT * FROM read_csv('{secret}')")
    assert e.value.kind == "error"


def test_missing_tables(team: dict[str, Any], moto: Moto) -> None:
    empty = Location.parse(moto.url("nobody-published"))
    for view in ("usage", "sessions", "events"):
        got = ask(empty, f"SELECT * FROM {view}")
        assert got.rows == [] and {"machine", "host", "day"} <= set(got.columns), view
    assert ask(empty, "SELECT count(*) FROM attempts").rows == [(0,)]
    with pytest.raises(TeamError, match="memories"):  # its columns are known once someone publishes it
        ask(empty, "SELECT * FROM memories")
    published = ask(team["loc"], "SELECT * FROM memories")  # publish writes it, empty here
    assert published.rows == [] and "memory_id" in published.columns
    with pytest.raises(TeamError, match="edges is not a team table"):
        ask(team["loc"], "SELECT * FROM edges")
    # a table nobody published does not stop a query over the others
    assert ask(empty, "SELECT count(*) FROM usage").rows == [(0,)]


def _agentlog(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "agentlog", *args], capture_output=True, text=True, env=full,
                          timeout=timeout)


def test_unreachable_endpoint_is_a_clear_error(tmp_path: Path, moto: Moto) -> None:
    with closed_port() as closed:
        started = time.monotonic()
        r = _agentlog("team", "query", "SELECT count(*) FROM sessions", "--from", "s3://team/org",
                      env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}", "AGENTLOG_HOME": str(tmp_path)})
        took = time.monotonic() - started
    assert r.returncode == 1, r.stderr
    assert "unreachable" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert took < 60, took


def test_cli_json_and_config_default(team: dict[str, Any], tmp_path: Path) -> None:
    env = {"AGENTLOG_HOME": str(tmp_path)}
    assert _agentlog("config", "set", "team_url", team["url"], env=env).returncode == 0
    r = _agentlog("team", "query", "SELECT machine, count(*) AS n FROM sessions GROUP BY 1 ORDER BY 1", "--json",
                  env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == [["machine-a", 2], ["machine-b", 2]]
    r = _agentlog("team", "query", "DROP TABLE sessions", env=env)
    assert r.returncode == 2 and "read-only" in r.stderr and "Traceback" not in r.stderr
    r = _agentlog("team", "query", "SHOW ATEMPTS", env=env)
    assert r.returncode == 2 and "AQL" in r.stderr


# ------------------------------------------------------------------- daft, locally and on Ray

QUERIES: list[tuple[str, bool]] = [
    # (statement, ORDER BY fixes the order of every row)
    ("SELECT machine, count(*) AS n FROM events GROUP BY machine ORDER BY machine", True),
    ("SELECT event_id, kind, machine FROM events WHERE kind = 'tool_call_failed' ORDER BY event_id", True),
    ("SELECT provider, machine, count(*) AS sessions FROM sessions GROUP BY provider, machine "
     "ORDER BY provider, machine", True),
    ("SELECT a.attempt_id, a.outcome, t.tool_name FROM attempts a JOIN tool_calls t "
     "ON t.attempt_id = a.attempt_id AND t.machine = a.machine ORDER BY a.attempt_id, t.tool_name", True),
    ("SELECT s.machine, s.provider, count(t.turn_id) AS turns FROM sessions s LEFT JOIN turns t "
     "ON t.session_id = s.session_id AND t.machine = s.machine GROUP BY s.machine, s.provider "
     "ORDER BY s.machine, s.provider", True),
    ("SELECT tool_name, outcome_status, count(*) AS n FROM tool_calls WHERE tool_name IS NOT NULL "
     "GROUP BY tool_name, outcome_status ORDER BY tool_name, outcome_status", True),
    ("SELECT * FROM (SELECT attempt_id, machine, row_number() OVER (PARTITION BY machine ORDER BY started_at, "
     "attempt_id) AS rn FROM attempts) w ORDER BY machine, rn", False),
    ("SELECT machine, max(observed_at) AS last_seen, min(observed_at) AS first_seen FROM events "
     "GROUP BY machine ORDER BY machine", True),
    ("SELECT session_id, machine FROM sessions WHERE session_id IN (SELECT session_id FROM attempts "
     "WHERE outcome = 'superseded') ORDER BY session_id", True),
    ("SELECT kind, content FROM events WHERE kind = 'prompt_submitted' ORDER BY observed_at, event_id", True),
    ("SELECT count(*) AS n FROM usage", True),
    ("SELECT command_key, count(*) AS n, count(DISTINCT machine) AS machines FROM events "
     "WHERE command_key IS NOT NULL GROUP BY command_key ORDER BY n DESC, command_key", True),
    ("SHOW SUPERSEDED ATTEMPTS", True),
    ("SHOW TURNS", True),
]
"""At least ten queries: filters, joins, group-bys, a window function, the statement language."""


def _cli_json(args: list[str]) -> Any:
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _rows(answer: Any) -> list[Any]:
    """Rows of `team query --json` (SQL: an object; a statement: an array of objects)."""
    if isinstance(answer, dict):
        return [tuple(json.dumps(v, sort_keys=True) for v in row) for row in answer["rows"]]
    return [tuple(json.dumps(v, sort_keys=True) for v in r.values()) for r in answer]


def _same(duck: Any, other: Any, ordered: bool) -> None:
    d, o = _rows(duck), _rows(other)
    assert d, "an empty answer proves nothing"
    if ordered:
        assert o == d
    else:  # Daft does not keep the ORDER BY order of a query with a window function
        assert sorted(o) == sorted(d)


@pytest.fixture(scope="module")
def duck_answers(team: dict[str, Any]) -> list[Any]:
    return [_cli_json(["team", "query", q, "--from", team["url"], "--json", "--max-rows", "1000"])
            for q, _ in QUERIES]


def test_daft_locally_gives_duckdbs_rows(team: dict[str, Any], duck_answers: list[Any]) -> None:
    for (q, ordered), duck in zip(QUERIES, duck_answers):
        if q == "SELECT count(*) AS n FROM usage":
            continue  # empty on both: compared on Ray below (an empty answer proves nothing here)
        daft_answer = _cli_json(["team", "query", q, "--engine", "daft", "--from", team["url"], "--json",
                                 "--max-rows", "1000"])
        _same(duck, daft_answer, ordered)


def test_daft_names_what_it_cannot_run(team: dict[str, Any]) -> None:
    with pytest.raises(TeamError, match="epoch_us"):
        ask(team["loc"], "SELECT epoch_us(max(observed_at)) FROM events", engine="daft")
    with pytest.raises(TeamError, match="window function"):
        ask(team["loc"], "SELECT attempt_id, row_number() OVER (ORDER BY attempt_id) AS rn FROM attempts ORDER BY rn",
            engine="daft")
    with pytest.raises(TeamError, match="EXPLAIN"):
        ask(team["loc"], "EXPLAIN SELECT * FROM sessions", engine="daft")
    with pytest.raises(QueryError) as e:
        ask(team["loc"], "CREATE TABLE x AS SELECT 1", engine="daft")
    assert e.value.kind == "refused"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A head and two worker nodes on this machine, bound to loopback."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.add_node(**node)
        cluster.wait_for_nodes(timeout=60)
        assert len(cluster.list_all_nodes()) == 3
        yield cluster.address
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_daft_on_a_ray_cluster_gives_duckdbs_rows(team: dict[str, Any], duck_answers: list[Any],
                                                  ray_cluster: str, tmp_path: Path) -> None:
    assert ray_cluster.startswith("127.0.0.1:")
    env = {"AGENTLOG_HOME": str(tmp_path)}
    for (q, ordered), duck in zip(QUERIES, duck_answers):
        r = _agentlog("team", "query", q, "--engine", "daft", "--ray", ray_cluster, "--from", team["url"], "--json",
                      "--max-rows", "1000", env=env, timeout=120)
        assert r.returncode == 0, (q, r.stderr[-2000:])
        if q == "SELECT count(*) AS n FROM usage":
            assert json.loads(r.stdout)["rows"] == [[0]]
            continue
        _same(duck, json.loads(r.stdout), ordered)
