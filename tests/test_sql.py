"""`agentlog sql`: one read-only statement over the store, refused or stopped by the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.query.engine import Engine, QueryError
from agentlog.operations.refresh import run_sql
from agentlog.store.ingest import ingest

from test_ingest import append

SECRET = "echo 0003"  # stored content a failing cast would otherwise quote back


@pytest.fixture()
def root(agentlog_home: Path) -> str:
    r = str(agentlog_home)
    append(r, "sa", 0, 6)
    append(r, "sb", 0, 4)
    ingest(r)
    return r


def test_select_over_events_with_content_and_raw(root: str) -> None:
    res = run_sql(root, "select log_key, count(*) as n, count(content) as c, count(raw) as r "
                        "from events group by 1 order by 1")
    assert res.columns == ["log_key", "n", "c", "r"]
    assert res.rows == [("sa", 6, 6, 6), ("sb", 4, 4, 4)]
    cmd = run_sql(root, "select json_extract_string(content, '$.command') from events where log_key = 'sa' and seq = 3")
    assert cmd.rows == [(SECRET,)]


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (select 1) TO 'out.csv'",
        "ATTACH 'other.db' AS o",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE TABLE t AS SELECT 1",
        "INSERT INTO events SELECT * FROM events",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        "EXPORT DATABASE 'dump'",
        "select 1; select 2",
        "select 1; COPY (select 1) TO 'out.csv'",
    ],
)
def test_everything_but_one_select_is_refused(root: str, sql: str, tmp_path: Path) -> None:
    os.chdir(tmp_path)
    with pytest.raises(QueryError) as e:
        run_sql(root, sql)
    assert e.value.kind == "refused"
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    "sql",
    [
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/hostname')",
        "select * from glob('/etc/*')",
        "select * from read_parquet('/tmp/*.parquet')",
    ],
)
def test_files_are_out_of_reach_inside_the_engine(root: str, sql: str) -> None:
    """A SELECT passes the statement check; DuckDB itself refuses the file."""
    with pytest.raises(QueryError) as e:
        run_sql(root, sql)
    assert e.value.kind == "error" and "disabled by configuration" in str(e.value)


def test_only_the_store_and_projection_directories_are_readable(root: str) -> None:
    """The engine reads the store's Parquet files itself (allowed_directories);
    everything else under the data root — the logs, config, state — stays out of reach."""
    import glob

    from agentlog.projection.persist import refresh

    refresh(root)
    logs = glob.glob(os.path.join(root, "logs", "**", "*.jsonl"), recursive=True)
    assert logs
    for sql in (f"select * from read_text('{logs[0]}')", f"select * from read_csv('{logs[0]}')",
                f"select * from glob('{root}/state/*')", f"select * from read_text('{root}/logs/*/*')"):
        with pytest.raises(QueryError) as e:
            run_sql(root, sql, catch_up=False)
        assert e.value.kind == "error", sql
    # the store itself is what the engine is for
    stored = glob.glob(os.path.join(root, "store", "events", "*", "*.parquet"))
    assert run_sql(root, f"select count(*) from read_parquet('{stored[0]}')", catch_up=False).rows[0][0] > 0


def test_duckdbs_temp_directory_is_private_and_nothing_outside_the_root_is_allowed(
        root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, finding 17: DuckDB adds its temp directory (default ``.tmp`` in the working
    directory) to the allowed list; a file there must stay out of reach."""
    work = tmp_path / "work"
    (work / ".tmp").mkdir(parents=True)
    (work / ".tmp" / "secret.csv").write_text("token,value\nabc,1\n")
    monkeypatch.chdir(work)
    for sql in ("select * from read_csv('.tmp/secret.csv')", f"select * from read_csv('{work}/.tmp/secret.csv')"):
        with pytest.raises(QueryError):
            run_sql(root, sql, catch_up=False)
    allowed = run_sql(root, "select current_setting('allowed_directories')", catch_up=False).rows[0][0]
    assert allowed and all(str(d).startswith(os.path.abspath(root)) for d in allowed), allowed
    temp = run_sql(root, "select current_setting('temp_directory')", catch_up=False).rows[0][0]
    assert temp.startswith(os.path.join(os.path.abspath(root), "state")) and oct(os.stat(temp).st_mode & 0o777) == "0o700"


def test_the_lock_cannot_be_undone_from_a_select(root: str) -> None:
    with Engine(root) as engine:
        with pytest.raises(QueryError):
            engine.run("select * from read_csv('/etc/passwd')")
        import duckdb

        # even bypassing the statement check, DuckDB refuses to unlock
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            engine._con.execute("SET enable_external_access = true")


def test_errors_do_not_echo_stored_content(root: str) -> None:
    with pytest.raises(QueryError) as e:
        run_sql(root, "select cast(json_extract_string(content, '$.command') as integer) from events")
    assert SECRET not in str(e.value) and "…" in str(e.value)


def test_timeout_and_row_cap(root: str) -> None:
    with pytest.raises(QueryError) as e:
        run_sql(root, "select count(*) from range(100000000000) a, range(1000) b", timeout=0.5)
    assert e.value.kind == "timeout"
    res = run_sql(root, "select * from range(50)", max_rows=20)
    assert len(res.rows) == 20 and res.truncated
    assert not run_sql(root, "select * from range(5)", max_rows=20).truncated


def test_reads_catch_up_first_unless_told_not_to(root: str) -> None:
    append(root, "sa", 6, 3)
    stale = run_sql(root, "select count(*) from events", catch_up=False)
    assert stale.rows == [(10,)] and stale.caught_up is None
    fresh = run_sql(root, "select count(*) from events")
    assert fresh.rows == [(13,)] and fresh.caught_up is not None and fresh.caught_up["ingest"]["events"] == 3


def test_an_empty_data_root_answers_empty(agentlog_home: Path) -> None:
    res = run_sql(str(agentlog_home), "select count(*) from events")
    assert res.rows == [(0,)]


def test_cli(root: str) -> None:
    env = {**os.environ, "AGENTLOG_HOME": root}
    ok = subprocess.run([sys.executable, "-m", "agentlog", "sql", "select kind, count(*) as n from events group by 1",
                         "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["columns"] == ["kind", "n"] and out["rows"] == [["tool_call_finished", 10]]
    as_csv = subprocess.run([sys.executable, "-m", "agentlog", "sql", "select seq from events where log_key = 'sb' "
                             "order by seq", "--csv", "--no-ingest"], env=env, capture_output=True, text=True, timeout=120)
    assert as_csv.stdout.splitlines() == ["seq", "0", "1", "2", "3"]
    refused = subprocess.run([sys.executable, "-m", "agentlog", "sql", "drop view events"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "not allowed" in refused.stderr
    failed = subprocess.run([sys.executable, "-m", "agentlog", "sql", "select nope from events"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1


def test_schema_doc_does_not_drift() -> None:
    from agentlog.query.catalog import render_markdown

    from conftest import REPO

    committed = (REPO / "docs" / "schema.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), "run: python -m agentlog.query.catalog > docs/schema.md"


def test_catalog_covers_every_column_and_every_example_runs(agentlog_home: Path) -> None:
    from agentlog.bench.workload.load import load
    from agentlog.query.catalog import tables

    from agentlog.projection.persist import refresh

    from agentlog.operations.fixtures import shared_dir
    from agentlog.importers.run import import_paths

    root = str(agentlog_home)
    load(600, root=root)
    transcripts = (shared_dir() or Path(__file__).resolve().parents[2] / "shared") / "fixtures" / "claude-code"
    if transcripts.is_dir():  # usage comes from transcripts
        import_paths(root, ["claude-code"], [str(transcripts)])
    ingest(root)
    refresh(root)
    with Engine(root) as engine:
        for t in tables():
            described = run_sql(root, f"select * from {t.name} limit 0", catch_up=False).columns
            assert [c.name for c in t.columns] == described, t.name  # every column described, in order
            assert all(c.description for c in t.columns), (t.name, [c.name for c in t.columns if not c.description])
            for ex in t.examples:
                res = engine.run(ex.sql)
                assert res.rows, (t.name, ex.question)  # each example answers something on real data


def test_schema_cli() -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    r = CliRunner().invoke(cli, ["schema", "events", "--json"])
    assert r.exit_code == 0, r.output
    (t,) = json.loads(r.output)
    assert t["name"] == "events" and any(c["name"] == "content" for c in t["columns"])
    assert CliRunner().invoke(cli, ["schema", "nope"]).exit_code == 2
    plain = CliRunner().invoke(cli, ["schema"])
    assert plain.exit_code == 0 and "agentlog sql" in plain.output
